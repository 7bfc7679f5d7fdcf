//! upstream `nodeclaim.disruption` (v1.14.1 `pkg/controllers/nodeclaim/disruption`), a per-object
//! reconciler ([`super::perobject`]): each NodeClaim's `Drifted` (with its reason) and
//! `Consolidatable` conditions, as core decides them ([`carpentry_core::nodeclaim::disruption`]).
//! Reconciled when the NodeClaim changes (its initialization, a pod event written), when its
//! NodePool or an EC2NodeClass it names changes (upstream's `Watches`), when it turns
//! consolidatable, and every 5 minutes for drift; up to 10 at once. The disruption loop reads the
//! conditions from the view ([`super::disruption`]).

use std::future::Future;
use std::time::Duration;

use anyhow::anyhow;
use carpentry_core::api::time::format_time;
use carpentry_core::api::{Condition, NodeClaim};
use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::disruption::{self as conditions, MAX_CONCURRENT_RECONCILES};
use carpentry_core::workqueue::{RateLimiter, CONTROLLER_RUNTIME_DEFAULT};
use serde_json::json;

use super::act::Write;
use super::nodepool::owning_nodepool;
use super::perobject::{changed_names, Failed, Next, ObjectReconciler};
use super::Common;
use crate::cloud::CloudProvider;
use crate::view::Loaded;

/// The controller.
pub(super) struct NodeClaimDisruption<P: CloudProvider> {
    common: Common<P>,
}

impl<P: CloudProvider> NodeClaimDisruption<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        NodeClaimDisruption { common }
    }
}

/// What a reconcile decided on the view.
#[derive(Debug, PartialEq)]
struct Decided {
    /// The conditions to write, with the NodeClaim as read (its resourceVersion locks the write).
    write: Option<(NodeClaim, Vec<Condition>)>,
    /// The drift reason newly found, for the decision log.
    drifted: Option<String>,
    next: Next,
}

/// upstream `Reconcile`: `nc`'s conditions as they should be at `now` (core's
/// [`conditions::marks`]), and when to look again.
fn decide(nc: &NodeClaim, m: &Manifests, now: i64) -> Decided {
    // upstream: a NodeClaim without its NodePool is left alone (the NodePool's arrival brings it).
    let Some(np) = owning_nodepool(m, nc) else { return Decided { write: None, drifted: None, next: Next::Change } };
    let marks = conditions::marks(nc, np, m.nodeclass_for(np).map(|c| &c.spec), now, &format_time(now));
    Decided {
        write: marks.conditions.map(|list| (nc.clone(), list)),
        drifted: marks.drifted,
        next: marks.recheck_seconds.map_or(Next::Change, |wait| Next::After(Duration::from_secs(wait as u64))),
    }
}

impl<P: CloudProvider> ObjectReconciler for NodeClaimDisruption<P> {
    type Object = NodeClaim;
    const NAME: &'static str = "nodeclaim.disruption";
    const CONCURRENCY: u16 = MAX_CONCURRENT_RECONCILES;
    /// upstream leaves controller-runtime's default.
    const RATE_LIMITER: RateLimiter = CONTROLLER_RUNTIME_DEFAULT;

    /// upstream's `Watches`: a NodePool's NodeClaims (`NodePoolEventHandler`), and an EC2NodeClass's
    /// (`NodeClassEventHandler`: the NodeClaims that name it).
    fn related(before: &Loaded, after: &Loaded) -> Vec<String> {
        let (before, after) = (before.manifests(), after.manifests());
        let pools = changed_names(&before.nodepools, &after.nodepools, |np| &np.metadata);
        let classes = changed_names(&before.nodeclasses, &after.nodeclasses, |c| &c.metadata);
        if pools.is_empty() && classes.is_empty() {
            return Vec::new();
        }
        after
            .nodeclaims
            .iter()
            .filter(|nc| {
                let pool = nc.metadata.labels.as_ref().and_then(|l| l.get(carpentry_core::labels::NODEPOOL));
                pool.is_some_and(|p| pools.contains(p.as_str()))
                    || classes.contains(nc.spec.node_class_ref.name.as_str())
            })
            .map(|nc| nc.name().to_string())
            .collect()
    }

    fn reconcile<'a>(
        &'a self,
        nc: &NodeClaim,
        loaded: &Loaded,
    ) -> impl Future<Output = Result<Next, Failed>> + Send + use<'a, P> {
        let decided = decide(nc, loaded.manifests(), crate::clock::now_seconds());
        async move {
            let act = &self.common.act;
            let Some((nc, list)) = decided.write else { return Ok(decided.next) };
            if let Some(reason) = &decided.drifted {
                act.decided("Drifted", &json!({"nodeclaim": nc.name(), "reason": reason}));
            }
            // upstream patches with an optimistic lock and requeues a conflict: here the NodeClaim's
            // newer version, which the conflict says is on its way, brings it back.
            match act.write_nodeclaim_status(&nc, json!({"conditions": list})).await {
                Write::Done | Write::Stale | Write::Gone => Ok(decided.next),
                Write::Failed => {
                    Err(Failed(anyhow!("NodeClaim {}'s disruption conditions were not written", nc.name())))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use carpentry_core::api::nodeclaim::conditions::{CONSOLIDATABLE, DRIFTED};
    use carpentry_core::api::time::parse_time;
    use carpentry_core::api::{EC2NodeClass, NodePool};

    use super::*;
    use crate::cloud::kwok::Kwok;

    fn nodepool(name: &str, version: &str) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name, "resourceVersion": version},
            "spec": {"disruption": {"consolidateAfter": "30s"},
                "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                    "name": "default"}, "requirements": []}}},
        }))
        .unwrap()
    }

    fn class() -> EC2NodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default", "resourceVersion": "1"},
            "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]},
        }))
        .unwrap()
    }

    fn nodeclaim(name: &str, pool: &str, stamped: &NodePool) -> NodeClaim {
        let mut nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
                "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []},
            "status": {"providerID": format!("kwok://{name}"), "conditions": [{"type": "Initialized",
                "status": "True", "reason": "Initialized", "message": "",
                "lastTransitionTime": "2026-12-06T00:00:00Z"}]},
        }))
        .unwrap();
        nc.metadata.annotations = Some(carpentry_core::disruption::drift::stamps(stamped, &class().spec));
        nc
    }

    #[test]
    fn conditions_are_decided_with_when_to_look_again() {
        let np = nodepool("default", "1");
        let nc = nodeclaim("a", "default", &np);
        let m = Manifests {
            nodepools: vec![np.clone()],
            nodeclasses: vec![class()],
            nodeclaims: vec![nc.clone()],
            ..Manifests::default()
        };
        let t0 = parse_time("2026-12-06T00:00:00Z").unwrap();

        // Within consolidateAfter: nothing to write; looked at again when it turns.
        let d = decide(&nc, &m, t0 + 10);
        assert_eq!((d.write, d.next), (None, Next::After(Duration::from_secs(20))));

        // Then: Consolidatable written; drift looked at again in 5 minutes.
        let d = decide(&nc, &m, t0 + 30);
        let (_, list) = d.write.expect("Consolidatable");
        assert!(list.iter().any(|c| c.type_ == CONSOLIDATABLE && c.is_true()));
        assert_eq!(d.next, Next::After(Duration::from_secs(300)));

        // Its NodePool edited since it launched: Drifted, with the reason.
        let mut edited = np.clone();
        edited.spec.template.metadata.labels.insert("team".into(), "a".into());
        let m = Manifests { nodepools: vec![edited.clone()], ..m };
        let d = decide(&nc, &m, t0 + 10);
        assert_eq!(d.drifted.as_deref(), Some("NodePoolDrifted"));
        assert!(d.write.expect("Drifted").1.iter().any(|c| c.type_ == DRIFTED));

        // Its EC2NodeClass not there: no drift (upstream's `IsDrifted` finds none).
        let classless = Manifests { nodeclasses: vec![], ..m.clone() };
        assert_eq!(decide(&nc, &classless, t0 + 10).write, None);

        // A static NodePool's NodeClaim: drift, never Consolidatable.
        let mut fixed = np.clone();
        fixed.spec.replicas = Some(3);
        let static_pool = Manifests { nodepools: vec![fixed.clone()], ..m.clone() };
        let fixed_nc = nodeclaim("a", "default", &fixed);
        let d = decide(&fixed_nc, &static_pool, t0 + 30);
        assert_eq!((d.write, d.next), (None, Next::After(Duration::from_secs(300))));

        // Not launched yet: nothing to look at again until it launches.
        let mut launching = nc.clone();
        launching.status = None;
        assert_eq!(decide(&launching, &m, t0 + 10).next, Next::Change);

        // No NodePool, or being deleted: left alone.
        let alone = Manifests { nodepools: vec![], ..m.clone() };
        assert_eq!(decide(&nc, &alone, t0 + 30).write, None);
        let mut deleting = nc.clone();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2026-12-06T00:00:00Z".parse().unwrap()));
        assert_eq!(decide(&deleting, &m, t0 + 30), Decided { write: None, drifted: None, next: Next::Change });
    }

    #[test]
    fn a_nodeclaim_is_reconciled_when_its_nodepool_or_nodeclass_changes() {
        let (a, b) = (nodepool("a", "1"), nodepool("b", "1"));
        let before = Manifests {
            nodepools: vec![a.clone(), b.clone()],
            nodeclaims: vec![nodeclaim("a-1", "a", &a), nodeclaim("b-1", "b", &b)],
            ..Manifests::default()
        };
        let related = |before: &Manifests, after: &Manifests| {
            NodeClaimDisruption::<Kwok>::related(&Loaded::of(before.clone()), &Loaded::of(after.clone()))
        };
        assert!(related(&before, &before).is_empty());
        let mut after = before.clone();
        after.nodepools[1].metadata.resource_version = Some("2".into());
        assert_eq!(related(&before, &after), ["b-1"]);
        let with_class = Manifests { nodeclasses: vec![class()], ..before.clone() };
        assert_eq!(related(&before, &with_class), ["a-1", "b-1"]);
    }

    #[tokio::test]
    async fn a_conflict_waits_for_the_newer_nodeclaim_and_a_refused_write_fails() {
        let np = nodepool("default", "1");
        let nc = nodeclaim("a", "default", &np);
        // Its NodePool edited since it launched: Drifted is written whatever the time.
        let mut edited = np.clone();
        edited.spec.template.metadata.labels.insert("team".into(), "a".into());
        let m = Manifests {
            nodepools: vec![edited],
            nodeclasses: vec![class()],
            nodeclaims: vec![nc.clone()],
            ..Manifests::default()
        };
        let loaded = Loaded::of(m);
        let api = crate::testing::FakeApi::default();
        let marks = NodeClaimDisruption::new(Common::on_fake_api(&api, false));
        api.object("/apis/karpenter.sh/v1/nodeclaims/a", 2); // the view's "1" is out of date
        assert!(marks.reconcile(&nc, &loaded).await.is_ok(), "a conflict is not a failure");
        assert_eq!(api.writes().iter().map(|w| w.status).collect::<Vec<_>>(), [409]);
        api.fail("/apis/karpenter.sh/v1/nodeclaims/a/status", 500);
        assert!(marks.reconcile(&nc, &loaded).await.is_err());
    }
}
