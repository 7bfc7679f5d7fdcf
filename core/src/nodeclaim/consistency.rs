//! The NodeClaim consistency check (upstream `nodeclaim/consistency`: `controller.go`,
//! `nodeshape.go`, v1.14.1): every [`SCAN_PERIOD_SECONDS`], an initialized NodeClaim's Node must
//! have at least 90% of the capacity the NodeClaim expected of every resource it requested; each
//! shortfall is an [`Issue`] (a `FailedConsistencyCheck` warning), and the NodeClaim's
//! `ConsistentStateFound` condition says whether any was found. [`LastScanned`] is upstream's
//! `lastScanned` cache: when each NodeClaim is scanned, and when to look again.

use std::collections::HashMap;
use std::fmt;

use k8s_openapi::api::core::v1::Node;
use serde::Serialize;

use super::lifecycle::{is_true, node_for, set_true};
use crate::api::nodeclaim::{conditions, NodeClaim};
use crate::api::Condition;
use crate::quantity::Quantity;

/// upstream `scanPeriod`: how often a NodeClaim is checked.
pub const SCAN_PERIOD_SECONDS: i64 = 600;

/// How many NodeClaims are checked at once: upstream's `LinearScaleReconciles(CPUCount, 10, 1000)`
/// at the chart's one CPU.
pub const MAX_CONCURRENT_RECONCILES: u16 = 10;

/// Below this share of the expected capacity, the Node is not the shape the NodeClaim launched.
const MIN_SHARE: f64 = 0.90;

/// The reason `ConsistentStateFound` is `False` with.
pub const CONSISTENCY_CHECK_FAILED: &str = "ConsistencyCheckFailed";

/// One resource the Node has less of than the NodeClaim expected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Issue {
    pub resource: String,
    /// The NodeClaim's `status.capacity`.
    pub expected: Quantity,
    /// The Node's `status.capacity` (zero when it has none).
    pub found: Quantity,
}

impl Issue {
    /// The found capacity as a share of the expected one.
    pub fn share(&self) -> f64 {
        self.found.as_f64() / self.expected.as_f64()
    }
}

impl fmt::Display for Issue {
    /// upstream's wording.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "expected {} of resource {}, but found {} ({:.1}% of expected)",
            self.expected,
            self.resource,
            self.found,
            self.share() * 100.0
        )
    }
}

/// When each NodeClaim (by UID) was last scanned, epoch seconds (upstream's `lastScanned`, a cache
/// whose entries expire after [`SCAN_PERIOD_SECONDS`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LastScanned(HashMap<String, i64>);

/// What one reconcile of a NodeClaim does (upstream `Reconcile`, up to its writes).
#[derive(Debug, Clone, PartialEq)]
pub enum Scan<'a> {
    /// Nothing now: look again after this many seconds, or (`None`) when it changes.
    Wait(Option<i64>),
    /// Scanned now: what was found on its Node, and the conditions to write when they change;
    /// looked at again after [`SCAN_PERIOD_SECONDS`].
    Found { node: &'a Node, issues: Vec<Issue>, conditions: Option<Vec<Condition>> },
}

impl LastScanned {
    /// upstream `Reconcile` on `nodeclaim` at `now` (`nodes` may hold the whole cluster's): a
    /// NodeClaim not launched is not scanned; one scanned within the period waits for the rest of
    /// it (a change in between finds the scan spent); else the scan is spent now, even when its
    /// Node is not there (yet) or is not one (upstream leaves that to the lifecycle controller,
    /// and does not requeue).
    pub fn scan<'a>(&mut self, nodeclaim: &NodeClaim, nodes: &'a [Node], now: i64) -> Scan<'a> {
        let launched = nodeclaim.status.as_ref().is_some_and(|s| !s.provider_id.is_empty());
        let Some(uid) = nodeclaim.metadata.uid.as_deref().filter(|_| launched) else { return Scan::Wait(None) };
        if let Some(at) = self.0.get(uid).filter(|at| now - **at < SCAN_PERIOD_SECONDS) {
            return Scan::Wait(Some((SCAN_PERIOD_SECONDS - (now - at)).max(1)));
        }
        self.0.insert(uid.to_string(), now);
        let Ok(node) = node_for(nodeclaim, nodes) else { return Scan::Wait(None) };
        let issues = node_shape(nodeclaim, node);
        let conditions = conditions_after(nodeclaim, &issues, &crate::api::time::format_time(now));
        Scan::Found { node, issues, conditions }
    }

    /// Forgets the NodeClaims (by UID) not `present`.
    pub fn retain(&mut self, present: impl Fn(&str) -> bool) {
        self.0.retain(|uid, _| present(uid));
    }

    /// How many NodeClaims it remembers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it remembers none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// upstream `NodeShape.Check`: nothing for a deleting or not yet initialized NodeClaim; else each
/// requested resource (with a non-zero request and expectation) of which the Node has under 90%.
/// A Node capacity that does not parse counts as none.
pub fn node_shape(nodeclaim: &NodeClaim, node: &Node) -> Vec<Issue> {
    if nodeclaim.metadata.deletion_timestamp.is_some() || !is_true(nodeclaim, conditions::INITIALIZED) {
        return Vec::new();
    }
    let Some(status) = &nodeclaim.status else { return Vec::new() };
    let node_capacity = node.status.as_ref().and_then(|s| s.capacity.as_ref());
    let mut issues = Vec::new();
    for (resource, requested) in &nodeclaim.spec.resources.requests {
        let Some(expected) = status.capacity.get(resource) else { continue };
        if requested.is_zero() || expected.is_zero() {
            continue;
        }
        let found = node_capacity
            .and_then(|c| c.get(resource))
            .and_then(|q| Quantity::try_from(q).ok())
            .unwrap_or_else(|| Quantity::from_units(0));
        let issue = Issue { resource: resource.clone(), expected: *expected, found };
        if issue.share() < MIN_SHARE {
            issues.push(issue);
        }
    }
    issues
}

/// The NodeClaim's conditions after a check that found `issues`, or `None` when nothing changes:
/// `ConsistentStateFound` `True` when none was found, `False` (`ConsistencyCheckFailed`) when some
/// were (upstream `checkConsistency`).
pub fn conditions_after(nodeclaim: &NodeClaim, issues: &[Issue], at: &str) -> Option<Vec<Condition>> {
    let before = nodeclaim.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let mut list = before.clone();
    if issues.is_empty() {
        set_true(&mut list, conditions::CONSISTENT_STATE_FOUND, at);
    } else {
        let failed = Condition {
            last_transition_time: Some(at.to_string()),
            message: Some("Consistency Check Failed".into()),
            observed_generation: nodeclaim.metadata.generation,
            reason: Some(CONSISTENCY_CHECK_FAILED.into()),
            status: "False".into(),
            type_: conditions::CONSISTENT_STATE_FOUND.into(),
        };
        match list.iter_mut().find(|c| c.type_ == conditions::CONSISTENT_STATE_FOUND) {
            Some(c) if c.status == "False" => {}
            Some(c) => *c = failed,
            None => list.push(failed),
        }
    }
    (list != before).then_some(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launched(name: &str, provider_id: &str) -> NodeClaim {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "a"},
                "requirements": [], "resources": {"requests": {"cpu": "1"}}},
            "status": {"providerID": provider_id, "capacity": {"cpu": "4"},
                "conditions": [{"type": "Initialized", "status": "True", "reason": "Initialized",
                    "message": "", "lastTransitionTime": "2026-12-06T00:00:00Z"}]},
        }))
        .unwrap()
    }

    fn node_of(name: &str, provider_id: &str, cpu: &str) -> Node {
        serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "resourceVersion": "1"}, "spec": {"providerID": provider_id},
            "status": {"capacity": {"cpu": cpu}}}))
        .unwrap()
    }

    #[test]
    fn a_nodeclaim_is_scanned_once_a_period_and_a_scan_without_its_node_is_spent() {
        let mut scans = LastScanned::default();
        let (launching, early, short) =
            (launched("launching", ""), launched("early", "kwok://early"), launched("short", "kwok://short"));
        let nodes = [node_of("short", "kwok://short", "2")];
        // Not launched: not scanned.
        assert_eq!(scans.scan(&launching, &nodes, 1000), Scan::Wait(None));

        // Launched, its Node not there yet: the scan is spent, nothing said; its Node's arrival
        // waits for the rest of the period.
        assert_eq!(scans.scan(&early, &nodes, 1000), Scan::Wait(None));
        let with_node = [node_of("early", "kwok://early", "4"), node_of("short", "kwok://short", "2")];
        assert_eq!(scans.scan(&early, &with_node, 1060), Scan::Wait(Some(540)));
        // A period later: scanned; the Node has the capacity, so ConsistentStateFound is True.
        let Scan::Found { issues, conditions, .. } = scans.scan(&early, &with_node, 1600) else {
            panic!("not scanned after the period")
        };
        assert!(issues.is_empty());
        let conditions = conditions.expect("the condition is written");
        assert!(conditions.iter().any(|c| c.type_ == "ConsistentStateFound" && c.status == "True"));

        // Its Node has half the CPU: an issue, the condition False.
        let Scan::Found { node, issues, conditions } = scans.scan(&short, &nodes, 1000) else { panic!("not scanned") };
        assert_eq!((issues.len(), node.metadata.name.as_deref()), (1, Some("short")));
        let conditions = conditions.expect("the condition is written");
        assert!(conditions.iter().any(|c| c.type_ == "ConsistentStateFound" && c.status == "False"));

        // A NodeClaim gone is forgotten.
        scans.retain(|uid| uid == "uid-early");
        assert_eq!(scans.len(), 1);
    }

    fn nodeclaim(initialized: bool) -> NodeClaim {
        let mut nc: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "a"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [], "resources": {"requests": {"cpu": "1", "memory": "1Gi", "pods": "0"}}},
            "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
        }))
        .unwrap();
        if initialized {
            set_true(&mut nc.status.as_mut().unwrap().conditions, conditions::INITIALIZED, "2026-01-01T00:00:00Z");
        }
        nc
    }

    fn node(capacity: serde_json::Value) -> Node {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "n"}, "status": {"capacity": capacity}}))
            .unwrap()
    }

    #[test]
    fn a_node_short_of_what_was_expected_is_inconsistent() {
        let nc = nodeclaim(true);
        // 90% of 4 GiB is 3774873.6 KiB: a KiB more is consistent, a KiB less is not. Pods are
        // requested at 0, so having none of them is no issue.
        assert!(node_shape(&nc, &node(serde_json::json!({"cpu": "2", "memory": "3774874Ki"}))).is_empty());
        let issues = node_shape(&nc, &node(serde_json::json!({"cpu": "2", "memory": "3774873Ki"})));
        assert_eq!(issues.iter().map(|i| i.resource.as_str()).collect::<Vec<_>>(), ["memory"]);
        let issues = node_shape(&nc, &node(serde_json::json!({"cpu": "1", "memory": "4Gi"})));
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].to_string(), "expected 2 of resource cpu, but found 1 (50.0% of expected)");
        // A Node without the resource has none of it.
        let issues = node_shape(&nc, &node(serde_json::json!({"cpu": "2"})));
        assert_eq!(issues.iter().map(|i| i.resource.as_str()).collect::<Vec<_>>(), ["memory"]);
        // Not checked before the NodeClaim is initialized.
        assert!(node_shape(&nodeclaim(false), &node(serde_json::json!({}))).is_empty());
    }

    #[test]
    fn consistent_state_found_follows_the_check() {
        let mut nc = nodeclaim(true);
        let list = conditions_after(&nc, &[], "t1").unwrap();
        let found = |list: &[Condition]| {
            crate::api::find_condition(list, conditions::CONSISTENT_STATE_FOUND)
                .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
        };
        assert_eq!(found(&list), Some(("True".into(), "ConsistentStateFound".into())));
        nc.status.as_mut().unwrap().conditions = list;
        assert_eq!(conditions_after(&nc, &[], "t2"), None, "already True");
        let issue = Issue { resource: "cpu".into(), expected: Quantity::from_units(2), found: Quantity::from_units(1) };
        let list = conditions_after(&nc, std::slice::from_ref(&issue), "t3").unwrap();
        assert_eq!(found(&list), Some(("False".into(), CONSISTENCY_CHECK_FAILED.into())));
        nc.status.as_mut().unwrap().conditions = list;
        assert_eq!(conditions_after(&nc, &[issue], "t4"), None, "already False");
    }
}
