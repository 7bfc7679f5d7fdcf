//! The NodeClaim consistency check (upstream v1.14.1 `pkg/controllers/nodeclaim/consistency`), a
//! per-object reconciler ([`super::perobject`]), core's [`consistency`] decision applied: a launched
//! NodeClaim is checked when first reconciled with a providerID, then every 10 minutes (its
//! reconcile requeued for then; a change in between finds the scan spent and waits for the rest);
//! each shortfall of its Node's capacity is a `FailedConsistencyCheck` warning, and
//! `ConsistentStateFound` is written. As upstream's, the first scan is spent even when the Node
//! has not registered yet (which is usual right after a launch): the condition then first appears
//! 10 minutes later; and a write lost to another (409) waits for the next scan, as upstream's
//! conflict requeue finds the scan spent. Reconciled when the NodeClaim or its Node (by
//! providerID) changes. Not checked live (that wait); core's decision is tested by data.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use carpentry_core::api::time::format_time;
use carpentry_core::api::NodeClaim;
use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::consistency::{self, MAX_CONCURRENT_RECONCILES, SCAN_PERIOD_SECONDS};
use carpentry_core::nodeclaim::lifecycle::node_for;
use carpentry_core::workqueue::{RateLimiter, CONTROLLER_RUNTIME_DEFAULT};
use k8s_openapi::api::core::v1::ObjectReference;
use serde_json::json;

use super::act::nodeclaim_ref;
use super::lifecycle::changed_nodes;
use super::perobject::{Failed, Next, ObjectReconciler};
use super::Common;
use crate::cloud::CloudProvider;
use crate::view::Loaded;

/// The controller.
pub(super) struct Consistency<P: CloudProvider> {
    common: Common<P>,
    scans: Scans,
}

impl<P: CloudProvider> Consistency<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        Consistency { common, scans: Scans::default() }
    }
}

/// When each NodeClaim (by UID) was last scanned, epoch seconds (upstream's `lastScanned`).
#[derive(Debug, Default)]
struct Scans(Mutex<HashMap<String, i64>>);

/// What a scan found, to be said and written.
struct Found {
    nodeclaim: ObjectReference,
    name: String,
    node: String,
    issues: Vec<consistency::Issue>,
    /// The NodeClaim as read, and its conditions after the scan, when they change.
    write: Option<(NodeClaim, Vec<carpentry_core::api::Condition>)>,
}

impl<P: CloudProvider> ObjectReconciler for Consistency<P> {
    type Object = NodeClaim;
    const NAME: &'static str = "nodeclaim.consistency";
    const CONCURRENCY: u16 = MAX_CONCURRENT_RECONCILES;
    /// upstream leaves controller-runtime's default.
    const RATE_LIMITER: RateLimiter = CONTROLLER_RUNTIME_DEFAULT;

    /// upstream's `Watches(&corev1.Node{}, NodeEventHandler)`: a Node's NodeClaim by providerID.
    fn related(before: &Manifests, after: &Manifests) -> Vec<String> {
        let provider_ids = changed_nodes(before, after);
        after
            .nodeclaims
            .iter()
            .filter(|nc| nc.status.as_ref().is_some_and(|s| provider_ids.contains(s.provider_id.as_str())))
            .map(|nc| nc.name().to_string())
            .collect()
    }

    fn tidy(&self, m: &Manifests) {
        self.scans.tidy(m);
    }

    fn reconcile<'a>(
        &'a self,
        nc: &NodeClaim,
        loaded: &Loaded,
    ) -> impl Future<Output = Result<Next, Failed>> + Send + use<'a, P> {
        let decided = self.scans.scan(nc, loaded.manifests(), crate::clock::now_seconds());
        async move {
            match decided {
                Scan::Wait(next) => Ok(next),
                Scan::Found(found) => {
                    self.say(found).await;
                    Ok(Next::After(Duration::from_secs(SCAN_PERIOD_SECONDS as u64)))
                }
            }
        }
    }
}

/// What a reconcile does.
enum Scan {
    /// Nothing now.
    Wait(Next),
    /// A scan, to be said.
    Found(Box<Found>),
}

impl Scans {
    /// Forgets the NodeClaims gone.
    fn tidy(&self, m: &Manifests) {
        let present: HashSet<&str> = m.nodeclaims.iter().filter_map(|nc| nc.metadata.uid.as_deref()).collect();
        self.0.lock().unwrap_or_else(PoisonError::into_inner).retain(|uid, _| present.contains(uid.as_str()));
    }

    /// upstream `Reconcile` up to its writes: whether `nc` is scanned now, and what was found.
    fn scan(&self, nc: &NodeClaim, m: &Manifests, now: i64) -> Scan {
        let launched = nc.status.as_ref().is_some_and(|s| !s.provider_id.is_empty());
        let Some(uid) = nc.metadata.uid.as_deref().filter(|_| launched) else { return Scan::Wait(Next::Change) };
        {
            let mut scanned = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            // upstream's `lastScanned` cache expires an entry after the scan period.
            if let Some(at) = scanned.get(uid).filter(|at| now - **at < SCAN_PERIOD_SECONDS) {
                let remaining = (SCAN_PERIOD_SECONDS - (now - at)).max(1);
                return Scan::Wait(Next::After(Duration::from_secs(remaining as u64)));
            }
            scanned.insert(uid.to_string(), now);
        }
        // upstream: no Node (or several) is the lifecycle controller's to report; not requeued.
        let Ok(node) = node_for(nc, &m.nodes) else { return Scan::Wait(Next::Change) };
        let issues = consistency::node_shape(nc, node);
        let write = consistency::conditions_after(nc, &issues, &format_time(now)).map(|list| (nc.clone(), list));
        Scan::Found(Box::new(Found {
            nodeclaim: nodeclaim_ref(nc),
            name: nc.name().to_string(),
            node: node.metadata.name.clone().unwrap_or_default(),
            issues,
            write,
        }))
    }
}

impl<P: CloudProvider> Consistency<P> {
    /// The scan's issues said (decision log, events) and its condition written.
    async fn say(&self, found: Box<Found>) {
        let act = &self.common.act;
        for issue in &found.issues {
            act.decided("FailedConsistencyCheck", &json!({"nodeclaim": found.name, "issue": issue}));
            let note = format!("{issue} (kubectl karpenter explain node {})", found.node);
            act.event(&found.nodeclaim, true, "FailedConsistencyCheck", note, "Check").await;
        }
        if let Some((nc, list)) = found.write {
            // A write lost (409) waits for the next scan, as upstream's (see the module's notes).
            act.patch_nodeclaim_status(&nc, json!({"conditions": list})).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    use super::*;
    use crate::cloud::kwok::Kwok;

    fn nodeclaim(name: &str, provider_id: &str) -> NodeClaim {
        serde_json::from_value(json!({
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

    fn node(name: &str, provider_id: &str, cpu: &str) -> Node {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "resourceVersion": "1"}, "spec": {"providerID": provider_id},
            "status": {"capacity": {"cpu": cpu}}}))
        .unwrap()
    }

    fn found(scan: Scan) -> Option<Box<Found>> {
        match scan {
            Scan::Found(found) => Some(found),
            Scan::Wait(_) => None,
        }
    }

    #[test]
    fn a_nodeclaim_is_scanned_once_a_period_and_a_scan_without_its_node_is_spent() {
        let consistency = Scans::default();
        let launching = nodeclaim("launching", "");
        let early = nodeclaim("early", "kwok://early");
        let short = nodeclaim("short", "kwok://short");
        let m = Manifests {
            nodeclaims: vec![launching.clone(), early.clone(), short.clone()],
            nodes: vec![node("short", "kwok://short", "2")],
            ..Manifests::default()
        };
        // Not launched: not scanned.
        assert!(matches!(consistency.scan(&launching, &m, 1000), Scan::Wait(Next::Change)));

        // Launched, its Node not there yet: the scan is spent, nothing said; its Node's arrival
        // waits for the rest of the period.
        assert!(matches!(consistency.scan(&early, &m, 1000), Scan::Wait(Next::Change)));
        let with_node = Manifests {
            nodes: vec![node("early", "kwok://early", "4"), node("short", "kwok://short", "2")],
            ..m.clone()
        };
        match consistency.scan(&early, &with_node, 1060) {
            Scan::Wait(Next::After(wait)) => assert_eq!(wait, Duration::from_secs(540)),
            _ => panic!("scanned again within the period"),
        }
        // A period later: scanned; the Node has the capacity, so ConsistentStateFound is True.
        let scan = found(consistency.scan(&early, &with_node, 1600)).expect("scanned after the period");
        assert!(scan.issues.is_empty());
        let (_, conditions) = scan.write.expect("the condition is written");
        assert!(conditions.iter().any(|c| c.type_ == "ConsistentStateFound" && c.status == "True"));

        // Its Node has half the CPU: an issue, the condition False.
        let scan = found(consistency.scan(&short, &m, 1000)).expect("scanned");
        assert_eq!(scan.issues.len(), 1);
        assert_eq!(scan.node, "short");
        let (_, conditions) = scan.write.expect("the condition is written");
        assert!(conditions.iter().any(|c| c.type_ == "ConsistentStateFound" && c.status == "False"));

        // A NodeClaim gone is forgotten.
        consistency.tidy(&Manifests { nodeclaims: vec![early], ..Manifests::default() });
        assert_eq!(consistency.0.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_nodeclaim_is_reconciled_when_its_node_changes() {
        let before = Manifests {
            nodeclaims: vec![nodeclaim("a", "kwok://a"), nodeclaim("b", "kwok://b"), nodeclaim("c", "")],
            nodes: vec![node("a", "kwok://a", "4"), node("b", "kwok://b", "4")],
            ..Manifests::default()
        };
        let mut after = before.clone();
        after.nodes[1].metadata.resource_version = Some("2".into());
        assert_eq!(Consistency::<Kwok>::related(&before, &after), ["b"]);
        after.nodes.remove(0);
        assert_eq!(Consistency::<Kwok>::related(&before, &after), ["a", "b"]);
    }
}
