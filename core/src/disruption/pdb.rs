//! PodDisruptionBudgets as the eviction API applies them (the disruption controller's
//! `disruptionsAllowed`): healthy pods are those the selector matches in the namespace that are
//! bound and Running; expected pods are the scale of their controllers (for `maxUnavailable` and
//! percentages; the matching pods when `minAvailable` is a count, or when a pod's controller is
//! unknown); `minAvailable` (a count, or a percentage of expected rounded up) or
//! `expected − maxUnavailable` (percentage rounded up) is the desired healthy count, and evictions
//! are allowed while healthy exceeds it.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::labels::selector;

/// `namespace/name` of a PDB.
pub fn name(pdb: &PodDisruptionBudget) -> String {
    format!(
        "{}/{}",
        pdb.metadata.namespace.as_deref().unwrap_or("default"),
        pdb.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether the PDB selects the pod.
pub fn covers(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    let Some(spec) = &pdb.spec else { return false };
    let Some(sel) = &spec.selector else { return false };
    pdb.metadata.namespace.as_deref().unwrap_or("default") == pod.metadata.namespace.as_deref().unwrap_or("default")
        && selector::matches(sel, pod.metadata.labels.as_ref().unwrap_or(&Default::default()))
}

fn healthy(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && pod.metadata.deletion_timestamp.is_none()
}

fn scaled(value: &IntOrString, expected: i64) -> Option<i64> {
    match value {
        IntOrString::Int(n) => Some(i64::from(*n)),
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            // Kubernetes rounds percentages up (GetScaledValueFromIntOrPercent, roundUp=true).
            Some((pct * expected + 99) / 100)
        }
    }
}

/// The replicas each pod controller wants: (namespace, kind, name) → scale (the disruption
/// controller reads the controller's scale subresource).
pub type Scales = BTreeMap<(String, String, String), i64>;

/// The scales of the Deployments, ReplicaSets and StatefulSets among `m`.
pub fn scales_of(m: &crate::manifest::Manifests) -> Scales {
    let mut out = Scales::new();
    let mut add =
        |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, kind: &str, replicas: Option<i32>| {
            let ns = meta.namespace.clone().unwrap_or_else(|| "default".into());
            out.insert((ns, kind.into(), meta.name.clone().unwrap_or_default()), i64::from(replicas.unwrap_or(1)));
        };
    for d in &m.deployments {
        add(&d.metadata, "Deployment", d.spec.as_ref().and_then(|s| s.replicas));
    }
    for r in &m.replicasets {
        add(&r.metadata, "ReplicaSet", r.spec.as_ref().and_then(|s| s.replicas));
    }
    for s in &m.statefulsets {
        add(&s.metadata, "StatefulSet", s.spec.as_ref().and_then(|s| s.replicas));
    }
    out
}

/// Expected pods: the scale of the matching pods' controllers, when every one is known.
fn expected_from_scales(matching: &[&Pod], scales: &Scales) -> Option<i64> {
    let mut controllers = BTreeSet::new();
    for p in matching {
        let owner = p.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true))?;
        let ns = p.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        controllers.insert((ns, owner.kind.clone(), owner.name.clone()));
    }
    controllers.iter().map(|c| scales.get(c).copied()).sum()
}

/// `status.disruptionsAllowed` over `pods` (every pod of the cluster).
pub fn disruptions_allowed(pdb: &PodDisruptionBudget, pods: &[Pod], scales: &Scales) -> i64 {
    headroom(pdb, pods, scales).max(0)
}

/// Healthy pods minus the desired healthy count (negative: the budget is already violated, e.g.
/// while pods are pending); an unreadable budget has none.
pub fn headroom(pdb: &PodDisruptionBudget, pods: &[Pod], scales: &Scales) -> i64 {
    let Some(spec) = &pdb.spec else { return 0 };
    let matching: Vec<&Pod> = pods.iter().filter(|p| covers(pdb, p)).collect();
    // Kubernetes: a count minAvailable needs no scale; otherwise the controllers' scale, so a pod
    // evicted and not yet recreated is still expected.
    let by_count = matches!(&spec.min_available, Some(IntOrString::Int(_)));
    let expected = match by_count {
        true => matching.len() as i64,
        false => expected_from_scales(&matching, scales).unwrap_or(matching.len() as i64),
    };
    let current = matching.iter().filter(|p| healthy(p)).count() as i64;
    let desired = match (&spec.min_available, &spec.max_unavailable) {
        (Some(min), _) => scaled(min, expected),
        (None, Some(max)) => scaled(max, expected).map(|m| expected - m),
        (None, None) => Some(0),
    };
    // An unparseable value blocks, as the controller does (it reports an error and allows 0).
    desired.map_or(0, |d| current - d)
}

/// The PDB that refuses evicting `pod` now (the first by name), if any.
pub fn blocking<'a>(
    pod: &Pod,
    pdbs: &'a [PodDisruptionBudget],
    pods: &[Pod],
    scales: &Scales,
) -> Option<&'a PodDisruptionBudget> {
    let mut covering: Vec<&PodDisruptionBudget> = pdbs.iter().filter(|p| covers(p, pod)).collect();
    covering.sort_by_key(|p| name(p));
    // The eviction API refuses a pod covered by more than one PDB.
    if covering.len() > 1 {
        return covering.first().copied();
    }
    covering.into_iter().find(|p| disruptions_allowed(p, pods, scales) <= 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, bound: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [], "nodeName": if bound { Some("n1") } else { None }},
            "status": {"phase": if bound { "Running" } else { "Pending" }},
        }))
        .unwrap()
    }

    fn pdb(spec: serde_json::Value) -> PodDisruptionBudget {
        let mut spec = spec;
        spec["selector"] = serde_json::json!({"matchLabels": {"app": "web"}});
        serde_json::from_value(serde_json::json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec}))
            .unwrap()
    }

    #[test]
    fn allowed_disruptions_follow_the_budget() {
        let none = Scales::new();
        let pods = vec![pod("a", true), pod("b", true), pod("c", true), pod("d", false)];
        assert_eq!(disruptions_allowed(&pdb(serde_json::json!({"minAvailable": 2})), &pods, &none), 1);
        assert_eq!(
            disruptions_allowed(&pdb(serde_json::json!({"maxUnavailable": 1})), &pods, &none),
            0,
            "4 expected, 3 healthy"
        );
        assert_eq!(disruptions_allowed(&pdb(serde_json::json!({"minAvailable": "50%"})), &pods, &none), 1);
        assert_eq!(disruptions_allowed(&pdb(serde_json::json!({"maxUnavailable": "50%"})), &pods, &none), 1);
        assert_eq!(disruptions_allowed(&pdb(serde_json::json!({"minAvailable": "bad"})), &pods, &none), 0);
        let budgets = [pdb(serde_json::json!({"minAvailable": 3}))];
        assert!(blocking(&pods[0], &budgets, &pods, &none).is_some());
        let budgets = [pdb(serde_json::json!({"minAvailable": 1}))];
        assert!(blocking(&pods[0], &budgets, &pods, &none).is_none());
    }

    #[test]
    fn an_evicted_pod_not_yet_recreated_is_still_expected() {
        // Two replicas of a Deployment, maxUnavailable 1: one eviction leaves none for the next,
        // even before the controller recreates the pod (its scale still says 2).
        let owned = |name: &str| {
            let mut p = pod(name, true);
            p.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: "web".into(),
                controller: Some(true),
                ..Default::default()
            }]);
            p
        };
        let scales = Scales::from([(("default".into(), "Deployment".into(), "web".into()), 2)]);
        let budget = pdb(serde_json::json!({"maxUnavailable": 1}));
        assert_eq!(disruptions_allowed(&budget, &[owned("a"), owned("b")], &scales), 1);
        assert_eq!(disruptions_allowed(&budget, &[owned("b")], &scales), 0, "a was evicted");
        assert_eq!(disruptions_allowed(&budget, &[owned("b")], &Scales::new()), 1, "scale unknown: the pods count");
        // A count minAvailable reads the pods.
        assert_eq!(disruptions_allowed(&pdb(serde_json::json!({"minAvailable": 1})), &[owned("b")], &scales), 0);
    }
}
