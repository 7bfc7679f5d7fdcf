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

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use carpentry_core::api::NodeClaim;
use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::consistency::{self, LastScanned, MAX_CONCURRENT_RECONCILES, SCAN_PERIOD_SECONDS};
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

/// upstream's `lastScanned` cache (core's).
#[derive(Debug, Default)]
struct Scans(Mutex<LastScanned>);

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
    fn related(before: &Loaded, after: &Loaded) -> Vec<String> {
        let (before, after) = (before.manifests(), after.manifests());
        let provider_ids = changed_nodes(before, after);
        after
            .nodeclaims
            .iter()
            .filter(|nc| nc.status.as_ref().is_some_and(|s| provider_ids.contains(s.provider_id.as_str())))
            .map(|nc| nc.name().to_string())
            .collect()
    }

    fn tidy(&self, loaded: &Loaded) {
        self.scans.tidy(loaded.manifests());
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
        self.0.lock().unwrap_or_else(PoisonError::into_inner).retain(|uid| present.contains(uid));
    }

    /// Core's scan of `nc` on the view, taken out of it (a reconcile's calls hold no view).
    fn scan(&self, nc: &NodeClaim, m: &Manifests, now: i64) -> Scan {
        let scan = self.0.lock().unwrap_or_else(PoisonError::into_inner).scan(nc, &m.nodes, now);
        match scan {
            consistency::Scan::Wait(after) => {
                Scan::Wait(after.map_or(Next::Change, |seconds| Next::After(Duration::from_secs(seconds as u64))))
            }
            consistency::Scan::Found { node, issues, conditions } => Scan::Found(Box::new(Found {
                nodeclaim: nodeclaim_ref(nc),
                name: nc.name().to_string(),
                node: node.metadata.name.clone().unwrap_or_default(),
                issues,
                write: conditions.map(|list| (nc.clone(), list)),
            })),
        }
    }
}

impl<P: CloudProvider> Consistency<P> {
    /// The scan's issues said (decision log, events) and its condition written.
    async fn say(&self, found: Box<Found>) {
        let act = &self.common.act;
        for issue in &found.issues {
            act.decided("FailedConsistencyCheck", &json!({"nodeclaim": found.name, "issue": issue}));
            let note = format!("{issue} (kubectl karpenter explain node {})", found.node);
            act.event(&found.nodeclaim, true, "FailedConsistencyCheck", note, "Check");
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

    #[test]
    fn a_scan_is_requeued_for_the_rest_of_its_period_and_names_the_node_it_found() {
        let scans = Scans::default();
        let nc = nodeclaim("a", "kwok://a");
        let m =
            Manifests { nodeclaims: vec![nc.clone()], nodes: vec![node("a", "kwok://a", "2")], ..Manifests::default() };
        match scans.scan(&nc, &m, 1000) {
            Scan::Found(found) => assert_eq!((found.node.as_str(), found.issues.len()), ("a", 1)),
            Scan::Wait(_) => panic!("not scanned"),
        }
        assert!(matches!(scans.scan(&nc, &m, 1060), Scan::Wait(Next::After(wait)) if wait == Duration::from_secs(540)));
        scans.tidy(&Manifests::default());
        assert!(matches!(scans.scan(&nc, &m, 1060), Scan::Found(_)), "a NodeClaim forgotten is scanned anew");
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
        let related = |before: &Manifests, after: &Manifests| {
            Consistency::<Kwok>::related(&Loaded::of(before.clone()), &Loaded::of(after.clone()))
        };
        assert_eq!(related(&before, &after), ["b"]);
        after.nodes.remove(0);
        assert_eq!(related(&before, &after), ["a", "b"]);
    }
}
