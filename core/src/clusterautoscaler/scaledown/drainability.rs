//! Whether a pod lets its node be drained, upstream `simulator/drainability/rules/rules.go` and
//! the rules under it (tag `cluster-autoscaler-1.36.1`); the first rule that decides wins:
//!
//! 1. mirror pods, and pods already being deleted, are skipped (`mirror`, `longterminating`:
//!    carpentry skips every pod being deleted);
//! 2. `--skip-nodes-with-custom-controller-pods` (on) asks that the controller exist: carpentry's
//!    inputs have the controllers their pods name, so this rule never blocks here;
//! 3. DaemonSet pods are skipped (they are not moved);
//! 4. `cluster-autoscaler.kubernetes.io/safe-to-evict: "true"` moves, whatever follows;
//! 5. pods that have finished are skipped;
//! 6. `safe-to-evict: "on-completion"` keeps the node while the pod runs;
//! 7. a pod with no controller, or one not a ReplicationController, ReplicaSet, Job or
//!    StatefulSet, blocks (`NotReplicated`); a pod that names a Deployment counts as its
//!    ReplicaSet's (carpentry's workloads expand a Deployment's pods without the ReplicaSet
//!    between);
//! 8. a `kube-system` pod no PDB covers blocks while younger than
//!    `--blocking-system-pod-distruption-timeout` (1 hour; the flag's spelling is upstream's);
//! 9. `safe-to-evict: "false"` blocks;
//! 10. a `hostPath` volume, or an `emptyDir` not in memory and not named in
//!     `cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes`, blocks;
//! 11. a PDB covering the pod with no disruption allowed blocks.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::Serialize;

/// The annotation that settles a pod's drainability.
pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// Local volumes a pod allows to be lost, comma-separated.
pub const SAFE_TO_EVICT_LOCAL_VOLUMES: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes";
/// `--blocking-system-pod-distruption-timeout`.
pub const BLOCKING_SYSTEM_POD_SECONDS: f64 = 3600.0;
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Why a pod keeps its node (upstream `drain.BlockingPodReason`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum BlockingPod {
    NotReplicated,
    UnmovableKubeSystemPod,
    NotSafeToEvictAnnotation,
    LocalStorageRequested,
    NotEnoughPdb,
    /// `safe-to-evict: "on-completion"` while it runs.
    OnCompletionPod,
}

impl std::fmt::Display for BlockingPod {
    /// upstream's reason name, then what it means.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BlockingPod::NotReplicated => "NotReplicated (no controller would recreate it)",
            BlockingPod::UnmovableKubeSystemPod => "UnmovableKubeSystemPod (a kube-system pod no PDB covers)",
            BlockingPod::NotSafeToEvictAnnotation => "NotSafeToEvictAnnotation (safe-to-evict: \"false\")",
            BlockingPod::LocalStorageRequested => "LocalStorageRequested (hostPath or emptyDir data would be lost)",
            BlockingPod::NotEnoughPdb => "NotEnoughPdb (its PDB allows no disruption)",
            BlockingPod::OnCompletionPod => "NotSafeToEvictAnnotation (safe-to-evict: \"on-completion\" while it runs)",
        })
    }
}

/// What draining does with a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drain {
    /// Left where it is (DaemonSet and mirror pods, finished or deleted pods).
    Skip,
    /// Evicted, and must find a place on another node.
    Move,
    Blocked(BlockingPod),
}

pub fn is_mirror(pod: &Pod) -> bool {
    pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
}

/// The rules for `pod`, with the cluster's PDBs and their `disruptionsAllowed`; `now` in seconds
/// after `start_epoch` (Unix seconds).
pub fn drainability(pod: &Pod, pdbs: &[(&PodDisruptionBudget, i64)], now: f64, start_epoch: i64) -> Drain {
    if is_mirror(pod) || pod.metadata.deletion_timestamp.is_some() {
        return Drain::Skip;
    }
    if crate::pod::daemonset_owner(pod).is_some() {
        return Drain::Skip;
    }
    let annotation = pod.metadata.annotations.as_ref().and_then(|a| a.get(SAFE_TO_EVICT)).map(String::as_str);
    if annotation == Some("true") {
        return Drain::Move;
    }
    if !crate::pod::is_active(pod) {
        return Drain::Skip;
    }
    if annotation == Some("on-completion") {
        return Drain::Blocked(BlockingPod::OnCompletionPod);
    }
    let controller = pod.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
    if !controller.is_some_and(|o| {
        matches!(o.kind.as_str(), "ReplicationController" | "ReplicaSet" | "Deployment" | "Job" | "StatefulSet")
    }) {
        return Drain::Blocked(BlockingPod::NotReplicated);
    }
    let covering: Vec<i64> =
        pdbs.iter().filter(|(pdb, _)| crate::disruption::pdb::covers(pdb, pod)).map(|(_, allowed)| *allowed).collect();
    if pod.metadata.namespace.as_deref() == Some("kube-system") && covering.is_empty() {
        let created = pod.metadata.creation_timestamp.as_ref().map_or(0.0, |t| (t.0.as_second() - start_epoch) as f64);
        if now - created < BLOCKING_SYSTEM_POD_SECONDS {
            return Drain::Blocked(BlockingPod::UnmovableKubeSystemPod);
        }
    }
    if annotation == Some("false") {
        return Drain::Blocked(BlockingPod::NotSafeToEvictAnnotation);
    }
    if uses_local_storage(pod) {
        return Drain::Blocked(BlockingPod::LocalStorageRequested);
    }
    if covering.iter().any(|allowed| *allowed < 1) {
        return Drain::Blocked(BlockingPod::NotEnoughPdb);
    }
    Drain::Move
}

/// upstream `utils/drain/drain.go` `HasBlockingLocalStorage`.
fn uses_local_storage(pod: &Pod) -> bool {
    let allowed: Vec<&str> = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SAFE_TO_EVICT_LOCAL_VOLUMES))
        .map(|v| v.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    volumes.into_iter().flatten().any(|v| {
        let local_disk = v.empty_dir.as_ref().is_some_and(|e| e.medium.as_deref() != Some("Memory"));
        v.host_path.is_some() || (local_disk && !allowed.contains(&v.name.as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(namespace: &str, owner: Option<&str>, extra: serde_json::Value) -> Pod {
        let mut p = json!({
            "metadata": {"name": "p", "namespace": namespace, "labels": {"app": "x"},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c"}], "nodeName": "n"},
            "status": {"phase": "Running"}
        });
        if let Some(kind) = owner {
            p["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": "u", "controller": true}]);
        }
        merge(&mut p, extra);
        serde_json::from_value(p).unwrap()
    }

    fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
        match (a, b) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn annotated(value: &str) -> serde_json::Value {
        json!({"metadata": {"annotations": {SAFE_TO_EVICT: value}}})
    }

    const START: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    fn pdb(allowed: i64) -> (PodDisruptionBudget, i64) {
        let pdb = serde_json::from_value(json!({
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "minAvailable": 1}
        }))
        .unwrap();
        (pdb, allowed)
    }

    #[test]
    fn the_rules_in_upstreams_order() {
        let none: &[(&PodDisruptionBudget, i64)] = &[];
        let rule = |p: &Pod| drainability(p, none, 60.0, START);
        assert_eq!(rule(&pod("default", Some("ReplicaSet"), json!({}))), Drain::Move);
        assert_eq!(rule(&pod("default", Some("Deployment"), json!({}))), Drain::Move);
        assert_eq!(rule(&pod("default", Some("DaemonSet"), json!({}))), Drain::Skip);
        let mirror = json!({"metadata": {"annotations": {MIRROR_ANNOTATION: "x"}}});
        assert_eq!(rule(&pod("kube-system", None, mirror)), Drain::Skip);
        assert_eq!(rule(&pod("default", None, json!({}))), Drain::Blocked(BlockingPod::NotReplicated));
        assert_eq!(rule(&pod("default", Some("MyOperator"), json!({}))), Drain::Blocked(BlockingPod::NotReplicated));
        // safe-to-evict "true" overrides every blocking rule after it.
        assert_eq!(rule(&pod("default", None, annotated("true"))), Drain::Move);
        let finished = json!({"status": {"phase": "Succeeded"}});
        assert_eq!(rule(&pod("default", None, finished)), Drain::Skip);
        assert_eq!(
            rule(&pod("default", Some("Job"), annotated("on-completion"))),
            Drain::Blocked(BlockingPod::OnCompletionPod)
        );
        assert_eq!(
            rule(&pod("default", Some("ReplicaSet"), annotated("false"))),
            Drain::Blocked(BlockingPod::NotSafeToEvictAnnotation)
        );
        let host_path = json!({"spec": {"volumes": [{"name": "h", "hostPath": {"path": "/x"}}]}});
        assert_eq!(
            rule(&pod("default", Some("StatefulSet"), host_path)),
            Drain::Blocked(BlockingPod::LocalStorageRequested)
        );
        let scratch = json!({"spec": {"volumes": [{"name": "s", "emptyDir": {}}]}});
        assert_eq!(
            rule(&pod("default", Some("ReplicaSet"), scratch.clone())),
            Drain::Blocked(BlockingPod::LocalStorageRequested)
        );
        let mut allowed = scratch;
        merge(&mut allowed, json!({"metadata": {"annotations": {SAFE_TO_EVICT_LOCAL_VOLUMES: "t, s"}}}));
        assert_eq!(rule(&pod("default", Some("ReplicaSet"), allowed)), Drain::Move);
        let in_memory = json!({"spec": {"volumes": [{"name": "m", "emptyDir": {"medium": "Memory"}}]}});
        assert_eq!(rule(&pod("default", Some("ReplicaSet"), in_memory)), Drain::Move);
    }

    #[test]
    fn kube_system_pods_without_a_pdb_block_for_their_first_hour() {
        let p = pod("kube-system", Some("ReplicaSet"), json!({}));
        let none: &[(&PodDisruptionBudget, i64)] = &[];
        assert_eq!(drainability(&p, none, 3599.0, START), Drain::Blocked(BlockingPod::UnmovableKubeSystemPod));
        assert_eq!(drainability(&p, none, 3600.0, START), Drain::Move);
    }

    #[test]
    fn a_pdb_with_no_disruption_left_blocks() {
        let p = pod("default", Some("ReplicaSet"), json!({}));
        let (exhausted, zero) = pdb(0);
        assert_eq!(drainability(&p, &[(&exhausted, zero)], 0.0, START), Drain::Blocked(BlockingPod::NotEnoughPdb));
        let (open, one) = pdb(1);
        assert_eq!(drainability(&p, &[(&open, one)], 0.0, START), Drain::Move);
    }
}
