//! What opens the batch window (upstream `provisioning/controller.go`: `PodController` and
//! `NodeController`, v1.14.1), for a driver that looks at the cluster repeatedly rather than
//! being told of each change: a provisionable pod triggers the batcher when first seen and again
//! every [`RETRIGGER_MILLIS`] while it stays provisionable (upstream requeues it every 10 s: a
//! round may not place it while nodes come online); so does a node being disrupted whose pods
//! must move (upstream triggers on the `karpenter.sh/disrupted` taint; a node being deleted is
//! tainted by termination next, and an empty round changes nothing, so this waits for neither).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::pod::{is_provisionable, reschedulable, PodRef};
use crate::scheduling::taints::is_disrupted;

/// upstream's `RequeueAfter: 10 * time.Second` for a pod that stays provisionable.
pub const RETRIGGER_MILLIS: u64 = 10_000;

/// The trigger's memory between two looks at the cluster.
#[derive(Debug, Clone, Default)]
pub struct Triggers {
    /// The provisionable pods of the last look.
    seen: BTreeSet<PodRef>,
    /// When the batcher was last triggered (the driver's milliseconds).
    last: Option<u64>,
}

impl Triggers {
    /// Whether this look at the cluster, at `now_millis` (the driver's clock) and `now` (epoch
    /// seconds, for do-not-disrupt durations), triggers the batcher.
    pub fn observe(
        &mut self,
        pods: &[Pod],
        nodes: &[Node],
        pdbs: &[PodDisruptionBudget],
        now_millis: u64,
        now: i64,
    ) -> bool {
        let provisionable: BTreeSet<PodRef> = pods.iter().filter(|p| is_provisionable(p)).map(PodRef::of).collect();
        let moving: BTreeSet<&str> = nodes
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some() || is_disrupted(n))
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        let rescheduling = !moving.is_empty()
            && pods.iter().any(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| moving.contains(n))
                    && reschedulable(p, pdbs, Some(now))
            });
        let new = provisionable.iter().any(|p| !self.seen.contains(p));
        let due = self.last.is_none_or(|t| now_millis.saturating_sub(t) >= RETRIGGER_MILLIS);
        let trigger = new || ((!provisionable.is_empty() || rescheduling) && due);
        if trigger {
            self.last = Some(now_millis);
        }
        self.seen = provisionable;
        trigger
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>) -> Pod {
        let mut v = serde_json::json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": []},
        });
        match node {
            Some(n) => v["spec"]["nodeName"] = n.into(),
            None => {
                v["status"] = serde_json::json!({"conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]})
            }
        }
        serde_json::from_value(v).unwrap()
    }

    fn node(name: &str, disrupted: bool) -> Node {
        let taints = if disrupted {
            serde_json::json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
        } else {
            serde_json::json!([])
        };
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": {"taints": taints}})).unwrap()
    }

    #[test]
    fn a_pending_pod_triggers_when_new_and_every_ten_seconds_after() {
        let mut t = Triggers::default();
        let now = 1_800_000_000;
        let pending = [pod("a", None)];
        assert!(t.observe(&pending, &[], &[], 0, now), "first seen");
        assert!(!t.observe(&pending, &[], &[], 1_000, now), "seen, not yet due");
        assert!(t.observe(&pending, &[], &[], 10_000, now), "due again");
        let two = [pod("a", None), pod("b", None)];
        assert!(t.observe(&two, &[], &[], 11_000, now), "a new pod triggers at once");
        assert!(!t.observe(&[], &[], &[], 30_000, now), "nothing pending");
    }

    #[test]
    fn pods_on_a_disrupted_node_trigger() {
        let mut t = Triggers::default();
        let now = 1_800_000_000;
        let bound = [pod("a", Some("n1"))];
        assert!(!t.observe(&bound, &[node("n1", false)], &[], 0, now), "the node stays");
        assert!(t.observe(&bound, &[node("n1", true)], &[], 1_000, now), "its pods must move");
        assert!(!t.observe(&bound, &[node("n1", true)], &[], 2_000, now), "not yet due again");
        assert!(!t.observe(&[], &[node("n1", true)], &[], 20_000, now), "no pod to move");
    }
}
