//! PodDisruptionBudgets as the eviction API applies them (the disruption controller's
//! `disruptionsAllowed`): expected pods are those the selector matches in the namespace, healthy
//! ones are bound and Running; `minAvailable` (a count, or a percentage of expected rounded up)
//! or `expected − maxUnavailable` (percentage rounded up) is the desired healthy count, and
//! evictions are allowed while healthy exceeds it.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::scheduling::selector;

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

/// `status.disruptionsAllowed` over `pods` (every pod of the cluster).
pub fn disruptions_allowed(pdb: &PodDisruptionBudget, pods: &[Pod]) -> i64 {
    headroom(pdb, pods).max(0)
}

/// Healthy pods minus the desired healthy count (negative: the budget is already violated, e.g.
/// while pods are pending); an unreadable budget has none.
pub fn headroom(pdb: &PodDisruptionBudget, pods: &[Pod]) -> i64 {
    let Some(spec) = &pdb.spec else { return 0 };
    let matching: Vec<&Pod> = pods.iter().filter(|p| covers(pdb, p)).collect();
    let expected = matching.len() as i64;
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
pub fn blocking<'a>(pod: &Pod, pdbs: &'a [PodDisruptionBudget], pods: &[Pod]) -> Option<&'a PodDisruptionBudget> {
    let mut covering: Vec<&PodDisruptionBudget> = pdbs.iter().filter(|p| covers(p, pod)).collect();
    covering.sort_by_key(|p| name(p));
    // The eviction API refuses a pod covered by more than one PDB.
    if covering.len() > 1 {
        return covering.first().copied();
    }
    covering.into_iter().find(|p| disruptions_allowed(p, pods) <= 0)
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
        let pods = vec![pod("a", true), pod("b", true), pod("c", true), pod("d", false)];
        assert_eq!(disruptions_allowed(&pdb(serde_json::json!({"minAvailable": 2})), &pods), 1);
        assert_eq!(
            disruptions_allowed(&pdb(serde_json::json!({"maxUnavailable": 1})), &pods),
            0,
            "4 expected, 3 healthy"
        );
        assert_eq!(disruptions_allowed(&pdb(serde_json::json!({"minAvailable": "50%"})), &pods), 1);
        assert_eq!(disruptions_allowed(&pdb(serde_json::json!({"maxUnavailable": "50%"})), &pods), 1);
        assert_eq!(disruptions_allowed(&pdb(serde_json::json!({"minAvailable": "bad"})), &pods), 0);
        let budgets = [pdb(serde_json::json!({"minAvailable": 3}))];
        assert!(blocking(&pods[0], &budgets, &pods).is_some());
        let budgets = [pdb(serde_json::json!({"minAvailable": 1}))];
        assert!(blocking(&pods[0], &budgets, &pods).is_none());
    }
}
