//! The NodeClaim disruption conditions (upstream `nodeclaim/disruption/controller.go`,
//! `drift.go`, `consolidation.go`) and `status.lastPodEventTime` (upstream `nodeclaim/podevents`),
//! as decisions: each returns the NodeClaim's conditions as they should become, or `None` when
//! nothing changes. The disruption methods read the facts these record
//! (`crate::disruption::facts`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;

use crate::api::nodeclaim::{conditions, NodeClaim};
use crate::api::nodepool::NodePool;
use crate::api::time::parse_time;
use crate::api::{Condition, EC2NodeClassSpec};
use crate::disruption::drift::Expected;
use crate::pod::PodRef;

/// upstream `drift.go`: a NodeClaim's drift is checked again this often (besides on a change to it,
/// its NodePool or its EC2NodeClass).
pub const DRIFT_RECHECK_SECONDS: i64 = 300;

/// How many NodeClaims upstream's `nodeclaim.disruption` reconciles at once:
/// `LinearScaleReconciles(CPUCount, 10, 1000)` at the chart's one CPU.
pub const MAX_CONCURRENT_RECONCILES: u16 = 10;

/// upstream `podevents`: a NodeClaim's `lastPodEventTime` is written at most this often.
pub const POD_EVENT_DEDUPE_SECONDS: i64 = 10;

fn conditions_of(nc: &NodeClaim) -> Vec<Condition> {
    nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default()
}

/// Sets `type_` True with `reason` (the transition time moves only when the status changes), or
/// clears it (`None`); the new list when it differs.
fn set(nc: &NodeClaim, type_: &str, reason: Option<&str>, at: &str) -> Option<Vec<Condition>> {
    let mut list = conditions_of(nc);
    let before = list.clone();
    match reason {
        None => list.retain(|c| c.type_ != type_),
        Some(reason) => {
            let existing = list.iter_mut().find(|c| c.type_ == type_);
            match existing {
                Some(c) if c.is_true() => c.reason = Some(reason.to_string()),
                _ => {
                    list.retain(|c| c.type_ != type_);
                    list.push(Condition {
                        last_transition_time: Some(at.to_string()),
                        message: None,
                        observed_generation: None,
                        reason: Some(reason.to_string()),
                        status: "True".into(),
                        type_: type_.to_string(),
                    });
                }
            }
        }
    }
    (list != before).then_some(list)
}

fn launched(nc: &NodeClaim) -> bool {
    nc.status.as_ref().is_some_and(|s| !s.provider_id.is_empty())
}

/// upstream `drift.go`: a launched NodeClaim is `Drifted` (with the reason) while it differs from
/// what its NodePool and EC2NodeClass would make now; the condition is cleared when it no longer
/// does. `expected`: `None` when the NodePool is gone (nothing changes).
pub fn drifted(nc: &NodeClaim, expected: Option<&Expected>, at: &str) -> Option<Vec<Condition>> {
    if !launched(nc) || nc.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let reason = expected?.drifted(nc);
    set(nc, conditions::DRIFTED, reason.map(|r| r.condition_reason()), at)
}

/// upstream `consolidation.go`: an initialized NodeClaim is `Consolidatable` once its NodePool's
/// `consolidateAfter` has passed since its last pod event (else since it initialized); never with
/// `consolidateAfter: Never`.
pub fn consolidatable(nc: &NodeClaim, nodepool: &NodePool, now: i64, at: &str) -> Option<Vec<Condition>> {
    if nc.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let quiet = consolidatable_from(nc, nodepool).is_some_and(|from| now >= from);
    set(nc, conditions::CONSOLIDATABLE, quiet.then_some(conditions::CONSOLIDATABLE), at)
}

/// When (epoch seconds) an initialized NodeClaim becomes `Consolidatable` if no pod event comes
/// first: its NodePool's `consolidateAfter` after its last pod event (else after it initialized).
/// upstream's `consolidation.go` requeues the NodeClaim for then. `None` while it is not
/// initialized, or with `consolidateAfter: Never`.
pub fn consolidatable_from(nc: &NodeClaim, nodepool: &NodePool) -> Option<i64> {
    let initialized = conditions_of(nc)
        .into_iter()
        .find(|c| c.type_ == conditions::INITIALIZED && c.is_true())
        .and_then(|c| c.last_transition_time.as_deref().and_then(parse_time))?;
    let last_event = nc.status.as_ref().and_then(|s| s.last_pod_event_time.as_deref()).and_then(parse_time);
    let since = last_event.map_or(initialized, |event| event.max(initialized));
    Some(since + nodepool.spec.disruption.consolidate_after.as_seconds()? as i64)
}

/// What upstream's `nodeclaim.disruption` does with one NodeClaim of its NodePool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Marks {
    /// Its conditions as they should become; `None` when they stay.
    pub conditions: Option<Vec<Condition>>,
    /// The drift reason it was found with, when `conditions` sets one.
    pub drifted: Option<String>,
    /// When to look again, in seconds; `None`: on its next change.
    pub recheck_seconds: Option<i64>,
}

/// upstream `nodeclaim.disruption`'s `Reconcile` (drift, then consolidation) on `nc` of
/// `nodepool`, with the EC2NodeClass spec the NodePool names (`None` while it is not there: no
/// drift, as upstream AWS `IsDrifted`). A static NodePool's NodeClaims are never marked
/// consolidatable (upstream `runReconcilers`). Drift is looked at again every
/// [`DRIFT_RECHECK_SECONDS`] once launched, consolidation when `consolidateAfter` runs out.
pub fn marks(nc: &NodeClaim, nodepool: &NodePool, nodeclass: Option<&EC2NodeClassSpec>, now: i64, at: &str) -> Marks {
    if nc.metadata.deletion_timestamp.is_some() {
        return Marks::default();
    }
    let expected = nodeclass.map(|class| Expected::new(nodepool, class));
    let mut updated = nc.clone();
    let mut marks = Marks::default();
    if let Some(list) = drifted(&updated, expected.as_ref(), at) {
        let drift = list.iter().find(|c| c.type_ == conditions::DRIFTED);
        marks.drifted = drift.map(|c| c.reason.clone().unwrap_or_default());
        updated.status.get_or_insert_with(Default::default).conditions = list.clone();
        marks.conditions = Some(list);
    }
    let consolidates = !nodepool.is_static();
    if let Some(list) = consolidatable(&updated, nodepool, now, at).filter(|_| consolidates) {
        marks.conditions = Some(list);
    }
    let drift = launched(nc).then_some(DRIFT_RECHECK_SECONDS);
    let turns = consolidatable_from(nc, nodepool).filter(|from| consolidates && *from > now).map(|from| from - now);
    marks.recheck_seconds = drift.into_iter().chain(turns).min();
    marks
}

/// upstream `queue.go`: a candidate's NodeClaim carries `DisruptionReason` (the budget reason:
/// `Empty`, `Drifted`, `Underutilized`) while its command runs; cleared (`None`) when the command
/// is abandoned.
pub fn disruption_reason(nc: &NodeClaim, reason: Option<&str>, at: &str) -> Option<Vec<Condition>> {
    set(nc, conditions::DISRUPTION_REASON, reason, at)
}

/// What `podevents` tracks of a pod: the node it is bound to, and whether it is over (terminal or
/// terminating). A DaemonSet's pods are not tracked (upstream's `Reconcile` skips them: every node
/// has them, and their coming with a node is no sign of work).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodMarks(BTreeMap<PodRef, (String, bool)>);

impl PodMarks {
    pub fn of(pods: &[Pod]) -> PodMarks {
        PodMarks(
            pods.iter()
                .filter(|p| crate::pod::daemonset_owner(p).is_none())
                .filter_map(|p| {
                    let node = p.spec.as_ref()?.node_name.clone()?;
                    let over = p.metadata.deletion_timestamp.is_some() || !crate::pod::is_active(p);
                    Some((PodRef::of(p), (node, over)))
                })
                .collect(),
        )
    }

    /// The nodes that had a pod event between `self` and `now` (upstream: a pod bound, turning
    /// terminal or starting to terminate; a pod gone without being seen terminating counts too).
    pub fn events(&self, now: &PodMarks) -> BTreeSet<String> {
        let mut nodes = BTreeSet::new();
        for (pod, (node, over)) in &now.0 {
            match self.0.get(pod) {
                Some((was, was_over)) if was == node && *was_over == *over => {}
                _ => {
                    nodes.insert(node.clone());
                }
            }
        }
        for (pod, (node, _)) in &self.0 {
            if !now.0.contains_key(pod) {
                nodes.insert(node.clone());
            }
        }
        nodes
    }
}

/// Whether a pod event at `now` is written to the NodeClaim (upstream's dedupe).
pub fn records_pod_event(nc: &NodeClaim, now: i64) -> bool {
    records_pod_event_after(last_pod_event(nc), now)
}

/// The NodeClaim's `status.lastPodEventTime` (seconds), if any.
pub fn last_pod_event(nc: &NodeClaim) -> Option<i64> {
    nc.status.as_ref().and_then(|s| s.last_pod_event_time.as_deref()).and_then(parse_time)
}

/// Whether a pod event at `now` is written to a NodeClaim whose last was at `last` (upstream's
/// dedupe), for a caller that keeps the time rather than the NodeClaim.
pub fn records_pod_event_after(last: Option<i64>, now: i64) -> bool {
    last.is_none_or(|t| now - t >= POD_EVENT_DEDUPE_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodeclaim(yaml: &str) -> NodeClaim {
        serde_yaml::from_str(yaml).unwrap()
    }

    const LAUNCHED: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: a, labels: {karpenter.sh/nodepool: default}, annotations: {karpenter.sh/nodepool-hash: old, karpenter.sh/nodepool-hash-version: carpentry-fnv1a-v1}}
spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}
status:
  providerID: kwok://a
  conditions:
  - {type: Initialized, status: "True", reason: Initialized, lastTransitionTime: "2026-01-01T00:00:00Z"}
"#;

    fn nodepool(consolidate_after: &str) -> NodePool {
        serde_yaml::from_str(&format!(
            r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  disruption: {{consolidateAfter: {consolidate_after}}}
  template: {{spec: {{nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}, requirements: []}}}}
"#
        ))
        .unwrap()
    }

    #[test]
    fn drift_is_set_with_its_reason_and_cleared_when_it_is_gone() {
        let nc = nodeclaim(LAUNCHED);
        let np = nodepool("0s");
        let expected = Expected::new(&np, &Default::default());
        let set = drifted(&nc, Some(&expected), "2026-01-01T01:00:00Z").expect("drifted");
        let c = set.iter().find(|c| c.type_ == conditions::DRIFTED).unwrap();
        assert_eq!(c.reason.as_deref(), Some("NodePoolDrifted"));
        let mut again = nc.clone();
        again.status.as_mut().unwrap().conditions = set;
        assert_eq!(drifted(&again, Some(&expected), "2026-01-01T02:00:00Z"), None, "no change, no write");
        let stamps = crate::disruption::drift::stamps(&np, &Default::default());
        again.metadata.annotations = Some(stamps);
        let cleared = drifted(&again, Some(&expected), "2026-01-01T02:00:00Z").expect("cleared");
        assert!(cleared.iter().all(|c| c.type_ != conditions::DRIFTED));
        assert_eq!(drifted(&nc, None, "x"), None, "no NodePool: unchanged");
    }

    #[test]
    fn consolidatable_after_the_quiet_window() {
        let nc = nodeclaim(LAUNCHED);
        let t0 = parse_time("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(consolidatable(&nc, &nodepool("30s"), t0 + 29, "x"), None);
        let set = consolidatable(&nc, &nodepool("30s"), t0 + 30, "x").expect("set");
        assert!(set.iter().any(|c| c.type_ == conditions::CONSOLIDATABLE && c.is_true()));
        assert_eq!(consolidatable(&nc, &nodepool("Never"), t0 + 3600, "x"), None);

        // The moment it turns (upstream's requeue): from its initialization, or its last pod
        // event after it; never without `consolidateAfter` or before it initialized.
        assert_eq!(consolidatable_from(&nc, &nodepool("30s")), Some(t0 + 30));
        let mut busy = nc.clone();
        busy.status.as_mut().unwrap().last_pod_event_time = Some("2026-01-01T00:01:00Z".into());
        assert_eq!(consolidatable_from(&busy, &nodepool("30s")), Some(t0 + 90));
        assert_eq!(consolidatable(&busy, &nodepool("30s"), t0 + 89, "x"), None);
        assert!(consolidatable(&busy, &nodepool("30s"), t0 + 90, "x").is_some());
        assert_eq!(consolidatable_from(&nc, &nodepool("Never")), None);
        let mut launching = nc.clone();
        launching.status.as_mut().unwrap().conditions.clear();
        assert_eq!(consolidatable_from(&launching, &nodepool("30s")), None);
    }

    #[test]
    fn pod_events_are_binds_endings_and_disappearances() {
        let pod = |name: &str, node: &str, phase: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"nodeName": node, "containers": []},
                "status": {"phase": phase},
            }))
            .unwrap()
        };
        let before = PodMarks::of(&[pod("a", "n1", "Running"), pod("b", "n2", "Running")]);
        assert!(before.events(&before).is_empty());
        let after = PodMarks::of(&[pod("a", "n1", "Succeeded"), pod("c", "n3", "Running")]);
        assert_eq!(before.events(&after), BTreeSet::from(["n1".into(), "n2".into(), "n3".into()]));
        // A DaemonSet's pod coming to a node is no event.
        let mut daemon = pod("d", "n4", "Running");
        daemon.metadata.owner_references = Some(vec![serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u", "controller": true,
        }))
        .unwrap()]);
        assert!(after
            .events(&PodMarks::of(&[pod("a", "n1", "Succeeded"), pod("c", "n3", "Running"), daemon]))
            .is_empty());
    }
}
