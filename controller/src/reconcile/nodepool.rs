//! The NodePool controllers (upstream `nodepool.hash`, `nodepool.counter`, `nodepool.readiness`,
//! `nodepool.validation`, `nodepool.registrationhealth`), core's [`carpentry_core::nodepool`]
//! applied by one per-object reconciler ([`super::perobject`]): each NodePool on its own, those
//! that fail validation too (whose status says so). On every change of the NodePool or of its
//! NodeClass (upstream's `Watches`), its status conditions; every 5 s once the view is synced
//! (every second until then), `resources` and `nodes`, as upstream's counter requeues; its hash
//! annotations (and, while its hash version is another scheme's, its NodeClaims re-stamped
//! first). A condition that turns `False` is also a Warning event on the NodePool (core's
//! [`nodepool::warnings`]). Each write is tried whatever became of the others, as upstream's
//! separate controllers make them; one that failed is tried again after controller-runtime's
//! default backoff, as upstream's controllers set none; one the view was too old for is decided
//! again on the newer view, as upstream requeues a conflict.
//!
//! What the NodePools' nodes hold is worked out from the view's Nodes and NodeClaims
//! ([`counter::usage`]) once per view, whichever NodePool's count asks first; upstream's counter
//! reads it from `state.Cluster`, which keeps it as nodes come and go.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::anyhow;
use carpentry_core::api::nodepool::NodePoolStatus;
use carpentry_core::api::{NodeClaim, NodePool};
use carpentry_core::manifest::Manifests;
use carpentry_core::nodepool::counter::{self, Count};
use carpentry_core::nodepool::hash::Annotations;
use carpentry_core::nodepool::{self, registrationhealth};
use carpentry_core::resources::ResourceList;
use carpentry_core::workqueue::{RateLimiter, CONTROLLER_RUNTIME_DEFAULT};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Value};

use super::act::{nodepool_ref, Write};
use super::perobject::{changed_names, Failed, Kind, Next, ObjectReconciler};
use super::Common;
use crate::cloud::CloudProvider;
use crate::view::Loaded;

impl Kind for NodePool {
    const KIND: &'static str = "NodePool";
    const GROUP: &'static str = "karpenter.sh";
    const VERSION: &'static str = "v1";
    const PLURAL: &'static str = "nodepools";

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    /// Those that fail validation too: left out of core's manifests, their status still says why.
    fn all(loaded: &Loaded) -> impl Iterator<Item = &Self> {
        loaded.manifests().nodepools.iter().chain(&loaded.live.invalid_nodepools)
    }
}

/// The usage counted last, and the view it was counted on.
struct Usage {
    view: u64,
    by_nodepool: Arc<BTreeMap<String, ResourceList>>,
}

/// The NodePool controllers, as one reconciler.
pub(super) struct NodePools<P: CloudProvider> {
    common: Common<P>,
    usage: Mutex<Option<Usage>>,
    /// When each NodePool (by UID) was last counted and its count written (the reconcilers'
    /// milliseconds).
    counted: Mutex<HashMap<String, u64>>,
}

/// What a NodePool's reconcile writes, decided on one view.
struct Plan {
    name: String,
    reference: ObjectReference,
    /// The status patch (with the resourceVersion it was decided on: an optimistic lock, as
    /// upstream's status conditions are patched), and the Warning events that go with it.
    status: Option<Value>,
    warnings: Vec<(String, String)>,
    /// NodeClaims to re-stamp with our hash version (name, annotations to merge).
    restamps: Vec<(String, Annotations)>,
    /// The NodePool's own hash annotations, once its NodeClaims carry our version.
    annotations: Option<Annotations>,
    /// The NodePool's UID and when, if it was counted: recorded once the count is written.
    counted: Option<(String, u64)>,
    next: Next,
}

impl<P: CloudProvider> NodePools<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        NodePools { common, usage: Mutex::new(None), counted: Mutex::new(HashMap::new()) }
    }

    /// What the NodePools' nodes hold on `loaded`: counted on the first ask for this view, then
    /// kept for the other NodePools' counts on it.
    fn usage(&self, loaded: &Loaded) -> Arc<BTreeMap<String, ResourceList>> {
        let mut kept = self.usage.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(usage) = kept.as_ref().filter(|u| u.view == loaded.sequence()) {
            return usage.by_nodepool.clone();
        }
        let m = loaded.manifests();
        let by_nodepool = Arc::new(counter::usage(&m.nodes, &m.nodeclaims));
        *kept = Some(Usage { view: loaded.sequence(), by_nodepool: by_nodepool.clone() });
        by_nodepool
    }

    /// Decides on `np` as `loaded` shows it.
    fn plan(&self, np: &NodePool, loaded: &Loaded) -> Plan {
        let m = loaded.manifests();
        let uid = np.metadata.uid.clone().unwrap_or_default();
        let nodeclass = m.nodeclass_for(np);
        // The condition's reset forgets the outcomes behind it too (upstream `SetStatus(Unknown)`).
        if let Some(class) = nodeclass {
            if registrationhealth::stale(np, class, np.status.as_ref()) {
                self.common.shared.registration_health.lock().unwrap_or_else(PoisonError::into_inner).remove(&uid);
            }
        }
        let now = self.common.millis();
        let last = self.counted.lock().unwrap_or_else(PoisonError::into_inner).get(&uid).copied();
        // upstream's counter waits for a synced view (a count taken earlier could write too low).
        let count = counter::count(last, now, self.common.synced(m));
        let usage = (count == Count::Now).then(|| self.usage(loaded));
        let nothing = ResourceList::new();
        let pool_usage = usage.as_ref().map(|u| u.get(np.name()).unwrap_or(&nothing));
        let at = crate::clock::now_rfc3339();
        let status = nodepool::status(np, nodeclass, pool_usage, &at);
        let warnings = status.as_ref().map_or_else(Vec::new, |status| {
            let warnings = nodepool::warnings(np.status.as_ref(), status).into_iter();
            warnings
                .map(|c| {
                    let note = format!("{}: {}", c.type_, c.message.as_deref().unwrap_or_default());
                    (c.reason.clone().unwrap_or_else(|| c.type_.clone()), note)
                })
                .collect()
        });
        let restamps =
            nodepool::hash::restamps(np, &m.nodeclaims).into_iter().map(|(name, a)| (name.to_string(), a)).collect();
        Plan {
            name: np.name().to_string(),
            reference: nodepool_ref(np),
            status: status.map(|status| status_patch(np, status)),
            warnings,
            restamps,
            annotations: nodepool::hash::nodepool_annotations(np),
            counted: usage.map(|_| (uid, now)),
            next: Next::After(Duration::from_millis(count.requeue_millis())),
        }
    }

    /// Writes what `plan` says, each write whatever became of the others; fails when one failed.
    async fn apply(&self, plan: Plan) -> Result<Next, Failed> {
        let act = &self.common.act;
        let mut failed = Vec::new();
        if let Some(patch) = plan.status {
            match act.patch_nodepool_status(&plan.name, patch).await {
                Write::Done => {
                    if let Some((uid, at)) = plan.counted {
                        self.counted.lock().unwrap_or_else(PoisonError::into_inner).insert(uid, at);
                    }
                    // Said once the condition is written (a write refused says nothing yet).
                    for (reason, note) in plan.warnings {
                        act.event(&plan.reference, true, &reason, note, "Reconcile");
                    }
                }
                // The view was older than the NodePool: the newer one is reconciled when it comes
                // (or it is gone).
                Write::Stale | Write::Gone => {}
                Write::Failed => failed.push("its status"),
            }
        } else if let Some((uid, at)) = plan.counted {
            self.counted.lock().unwrap_or_else(PoisonError::into_inner).insert(uid, at);
        }
        let mut restamped = true;
        for (nodeclaim, annotations) in &plan.restamps {
            // upstream: a plain merge patch of the annotations (no optimistic lock).
            restamped &= act.patch_nodeclaim(nodeclaim, json!({"metadata": {"annotations": annotations}})).await;
        }
        if !restamped {
            failed.push("its NodeClaims' hash version");
        } else if let Some(annotations) = &plan.annotations {
            // The NodePool takes our version only once its NodeClaims have it (upstream's order).
            if !act.patch_nodepool(&plan.name, json!({"metadata": {"annotations": annotations}})).await {
                failed.push("its hash annotations");
            }
        }
        if failed.is_empty() || act.dry_run {
            Ok(plan.next)
        } else {
            Err(Failed(anyhow!("NodePool {}: {} not written", plan.name, failed.join(", "))))
        }
    }

    /// Forgets the counts of NodePools gone.
    fn forget_gone(&self, loaded: &Loaded) {
        let uids: HashSet<&str> = NodePool::all(loaded).filter_map(|np| np.metadata.uid.as_deref()).collect();
        self.counted.lock().unwrap_or_else(PoisonError::into_inner).retain(|uid, _| uids.contains(uid.as_str()));
    }
}

/// The merge patch that writes `status` over `np`'s, locked on the resourceVersion it was decided
/// on. A resource no longer held is written `null`, so that the merge removes it (upstream's
/// `client.MergeFrom` diff does the same).
fn status_patch(np: &NodePool, status: NodePoolStatus) -> Value {
    let mut patch = json!({"metadata": {"resourceVersion": np.metadata.resource_version}, "status": status});
    let before = np.status.as_ref().map(|s| &s.resources);
    for gone in before.into_iter().flatten().map(|(name, _)| name).filter(|name| !status.resources.contains_key(*name))
    {
        if let Some(resources) = patch["status"].get_mut("resources").and_then(Value::as_object_mut) {
            resources.insert(gone.clone(), Value::Null);
        } else {
            patch["status"]["resources"] = json!({gone: null});
        }
    }
    patch
}

impl<P: CloudProvider> ObjectReconciler for NodePools<P> {
    type Object = NodePool;
    const NAME: &'static str = "nodepool";
    const CONCURRENCY: u16 = nodepool::MAX_CONCURRENT_RECONCILES;
    const RATE_LIMITER: RateLimiter = CONTROLLER_RUNTIME_DEFAULT;

    /// upstream readiness's and registration health's `Watches` on the NodeClass: the NodePools
    /// naming a NodeClass that changed, appeared or went. (A NodePool that fails validation is not
    /// in `after`'s: its count, every 5 s, brings the change to it.)
    /// Those that name an EC2NodeClass that changed, came or went, valid or not (an invalid
    /// NodePool's conditions say whether its class is ready too).
    fn related(before: &Loaded, after: &Loaded) -> Vec<String> {
        fn meta(c: &carpentry_core::api::EC2NodeClass) -> &ObjectMeta {
            &c.metadata
        }
        let (classes_before, classes_after) = (&before.manifests().nodeclasses, &after.manifests().nodeclasses);
        let mut classes: HashSet<&str> = changed_names(classes_before, classes_after, meta);
        classes.extend(changed_names(classes_after, classes_before, meta));
        NodePool::all(after)
            .filter(|np| classes.contains(np.spec.template.spec.node_class_ref.name.as_str()))
            .map(|np| np.name().to_string())
            .collect()
    }

    fn tidy(&self, loaded: &Loaded) {
        self.forget_gone(loaded);
    }

    fn reconcile<'a>(
        &'a self,
        np: &NodePool,
        loaded: &Loaded,
    ) -> impl Future<Output = Result<Next, Failed>> + Send + use<'a, P> {
        // What the view says is decided here; the future holds the plan alone.
        let plan = self.plan(np, loaded);
        self.apply(plan)
    }
}

/// The NodePool `nc` is labelled with, as `m` shows it.
pub(super) fn owning_nodepool<'m>(m: &'m Manifests, nc: &NodeClaim) -> Option<&'m NodePool> {
    let pool = nc.metadata.labels.as_ref().and_then(|l| l.get(carpentry_core::labels::NODEPOOL))?;
    m.nodepools.iter().find(|np| np.name() == pool)
}

impl<P: CloudProvider> Common<P> {
    /// upstream `updateNodePoolRegistrationHealth` (registration.go and liveness.go): writes
    /// `NodeRegistrationHealthy` when `nc`'s outcome (`registered`, or timed out) turns it, and
    /// records the outcome once that is written or when nothing is to be (upstream's `DryRun`,
    /// patch, `Update`; a NodePool gone is as written). `Stale` and `Failed` leave the outcome
    /// unrecorded.
    pub(super) async fn registration_outcome(&self, np: Option<&NodePool>, nc: &NodeClaim, registered: bool) -> Write {
        let Some(np) = np else { return Write::Done };
        let (Some(uid), true) = (np.metadata.uid.clone(), registrationhealth::owned_by(nc, np)) else {
            return Write::Done;
        };
        let at = crate::clock::now_rfc3339();
        let status = {
            let mut health = self.shared.registration_health.lock().unwrap_or_else(PoisonError::into_inner);
            let tracker = health.entry(uid.clone()).or_default();
            tracker.hydrate(np);
            if registered {
                registrationhealth::registered(np, tracker, &at)
            } else {
                registrationhealth::failed(np, nc, tracker, &at)
            }
        };
        let written = match status {
            // upstream patches with an optimistic lock.
            Some(status) => {
                let patch = json!({"metadata": {"resourceVersion": np.metadata.resource_version}, "status": status});
                self.act.patch_nodepool_status(np.name(), patch).await
            }
            None => Write::Done,
        };
        // upstream ignores a NodePool gone (NotFound) and records the outcome all the same.
        let written = if written == Write::Gone { Write::Done } else { written };
        if written == Write::Done {
            let mut health = self.shared.registration_health.lock().unwrap_or_else(PoisonError::into_inner);
            health.entry(uid).or_default().record(registered);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use carpentry_core::api::EC2NodeClass;
    use k8s_openapi::api::core::v1::Node;

    use super::*;
    use crate::cloud::kwok::Kwok;
    use crate::testing::FakeApi;

    const NODEPOOL: &str = "/apis/karpenter.sh/v1/nodepools/default";

    fn nodepool(name: &str, capacity_type: &str) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "7", "generation": 1,
                "creationTimestamp": "2026-12-07T00:00:00Z"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]}]}}},
        }))
        .unwrap()
    }

    fn nodeclass(version: &str) -> EC2NodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default", "uid": "uid-class", "resourceVersion": version, "generation": 1},
            "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                "lastTransitionTime": "2026-12-07T00:00:00Z"}]},
        }))
        .unwrap()
    }

    /// A NodeClaim of NodePool `default` with 4 CPUs, launched when `provider_id` is not empty.
    fn nodeclaim(name: &str, provider_id: &str) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
                "labels": {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.xlarge"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []},
            "status": {"providerID": provider_id, "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"}},
        }))
        .unwrap()
    }

    fn node(name: &str, provider_id: &str) -> Node {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "resourceVersion": "1",
                "labels": {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.xlarge"}},
            "spec": {"providerID": provider_id},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "58"}}}))
        .unwrap()
    }

    /// The reconciler on a fake API server that keeps the NodePool's resourceVersion (7).
    fn on(api: &FakeApi, dry_run: bool) -> NodePools<Kwok> {
        api.object(NODEPOOL, 7);
        NodePools::new(Common::on_fake_api(api, dry_run))
    }

    fn view(nodepools: Vec<NodePool>, nodeclaims: Vec<NodeClaim>, nodes: Vec<Node>) -> Loaded {
        Loaded::of(Manifests {
            nodepools,
            nodeclaims,
            nodes,
            nodeclasses: vec![nodeclass("1")],
            ..Manifests::default()
        })
    }

    /// One launched 4-CPU node of NodePool `default`.
    fn one_node() -> Loaded {
        view(vec![nodepool("default", "on-demand")], vec![nodeclaim("a", "kwok://a")], vec![node("a", "kwok://a")])
    }

    /// The status patches made.
    fn status_writes(api: &FakeApi) -> Vec<crate::testing::Recorded> {
        api.writes().into_iter().filter(|w| w.path == format!("{NODEPOOL}/status")).collect()
    }

    async fn reconcile(reconciler: &NodePools<Kwok>, loaded: &Loaded) -> Result<Next, Failed> {
        let np = NodePool::all(loaded).next().expect("a NodePool");
        let next = reconciler.reconcile(np, loaded).await;
        // Events are written by a task of their own: what this reconcile queued, written.
        reconciler.common.act.events_written().await;
        next
    }

    /// `np` as it is once `api`'s writes to it are applied (the merge patches' `null`s remove).
    fn as_written(np: NodePool, api: &FakeApi) -> NodePool {
        let mut object = serde_json::to_value(np).unwrap();
        for w in api.writes().into_iter().filter(|w| w.status == 200 && w.path.starts_with(NODEPOOL)) {
            merge(&mut object, &w.body);
        }
        object["metadata"]["resourceVersion"] = json!(api.version(NODEPOOL).unwrap().to_string());
        serde_json::from_value(object).unwrap()
    }

    /// RFC 7386's merge of `patch` into `target`.
    fn merge(target: &mut Value, patch: &Value) {
        let Some(fields) = patch.as_object() else {
            *target = patch.clone();
            return;
        };
        if !target.is_object() {
            *target = json!({});
        }
        for (key, value) in fields {
            if value.is_null() {
                target.as_object_mut().unwrap().remove(key);
            } else {
                merge(target.as_object_mut().unwrap().entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }

    #[tokio::test]
    async fn a_new_nodepool_gets_its_status_then_its_hash_with_no_conflict_between_them() {
        let api = FakeApi::default();
        let reconciler = on(&api, false);
        let next = reconcile(&reconciler, &one_node()).await.unwrap();
        assert_eq!(next, Next::After(Duration::from_secs(5)));
        let writes = api.writes();
        let paths: Vec<(&str, u16)> = writes.iter().map(|w| (w.path.as_str(), w.status)).collect();
        // The status is locked on the view's resourceVersion: written before the annotations,
        // which would have made the view's out of date. The NodeClaim has no hash version yet:
        // it is stamped before the NodePool.
        let status = format!("{NODEPOOL}/status");
        let order = [(status.as_str(), 200), ("/apis/karpenter.sh/v1/nodeclaims/a", 200), (NODEPOOL, 200)];
        assert_eq!(paths, order, "{writes:#?}");
        let status = &writes[0].body;
        assert_eq!(status["metadata"]["resourceVersion"], "7");
        assert_eq!(status["status"]["nodes"], 1);
        assert_eq!(status["status"]["resources"]["cpu"], "4");
        let ready = status["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").cloned();
        assert_eq!(ready.map(|c| c["status"].clone()), Some(json!("True")));
        assert!(writes[2].body["metadata"]["annotations"]["karpenter.sh/nodepool-hash"].is_string());
    }

    #[tokio::test]
    async fn until_every_nodeclaim_launched_the_counter_waits_and_looks_again_each_second() {
        let api = FakeApi::default();
        let reconciler = on(&api, false);
        let loaded = view(vec![nodepool("default", "on-demand")], vec![nodeclaim("a", "")], vec![]);
        let next = reconcile(&reconciler, &loaded).await.unwrap();
        assert_eq!(next, Next::After(Duration::from_secs(1)));
        let status = status_writes(&api);
        assert_eq!(status.len(), 1, "the conditions are written all the same");
        // (`nodes` is the CRD's default 0 of a NodePool with no status yet.)
        assert!(status[0].body["status"].get("resources").is_none(), "counted unsynced: {:?}", status[0]);
    }

    #[tokio::test]
    async fn a_change_within_5_s_of_a_count_has_its_conditions_written_and_the_count_waits() {
        let api = FakeApi::default();
        let reconciler = on(&api, false);
        reconcile(&reconciler, &one_node()).await.unwrap();
        // A second node, and the NodeClass gone: the condition is written at once, the count
        // on the counter's own time.
        let np = as_written(nodepool("default", "on-demand"), &api);
        let nodeclaims = vec![nodeclaim("a", "kwok://a"), nodeclaim("b", "kwok://b")];
        let nodes = vec![node("a", "kwok://a"), node("b", "kwok://b")];
        let loaded = Loaded::of(Manifests { nodepools: vec![np], nodeclaims, nodes, ..Manifests::default() });
        let before = api.writes().len();
        let next = reconcile(&reconciler, &loaded).await.unwrap();
        assert!(matches!(next, Next::After(wait) if wait > Duration::from_secs(4) && wait <= Duration::from_secs(5)));
        let writes = &api.writes()[before..];
        assert_eq!(writes.len(), 1, "{writes:#?}");
        assert_eq!(writes[0].status, 200, "{writes:#?}");
        assert_eq!(writes[0].body["status"]["resources"]["cpu"], "4", "counted again within 5 s");
        let ready = writes[0].body["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "NodeClassReady")
            .cloned();
        assert_eq!(ready.map(|c| c["reason"].clone()), Some(json!("NodeClassNotFound")));
    }

    #[tokio::test]
    async fn a_nodepool_that_fails_validation_has_its_status_say_so() {
        let api = FakeApi::default();
        let reconciler = on(&api, false);
        let mut loaded = view(vec![], vec![nodeclaim("a", "kwok://a")], vec![node("a", "kwok://a")]);
        loaded.live.invalid_nodepools.push(nodepool("default", "bogus"));
        let all: Vec<&str> = NodePool::all(&loaded).map(|np| np.name()).collect();
        assert_eq!(all, ["default"]);
        assert_eq!(reconcile(&reconciler, &loaded).await.unwrap(), Next::After(Duration::from_secs(5)));
        let status = &status_writes(&api)[0].body["status"];
        let validation = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "ValidationSucceeded");
        assert_eq!(validation.map(|c| c["status"].clone()), Some(json!("False")), "{status}");
        // Counted, as upstream's counter counts every NodePool of the provider's.
        assert_eq!(status["resources"]["cpu"], "4", "{status}");
    }

    #[tokio::test]
    async fn a_conflict_waits_for_the_newer_view_and_a_refused_write_fails_the_reconcile() {
        let api = FakeApi::default();
        let reconciler = on(&api, false);
        api.object(NODEPOOL, 8); // the view's 7 is out of date
        let next = reconcile(&reconciler, &one_node()).await;
        // Decided again on the newer view, whose change brings it; until then the count's cadence.
        assert_eq!(next.unwrap(), Next::After(Duration::from_secs(5)), "a conflict is not a failure");
        assert_eq!(status_writes(&api)[0].status, 409);
        assert!(reconciler.counted.lock().unwrap().is_empty(), "a count not written is not counted");

        let api = FakeApi::default();
        let reconciler = on(&api, false);
        api.fail(&format!("{NODEPOOL}/status"), 500);
        let failed = reconcile(&reconciler, &one_node()).await;
        assert!(failed.is_err());
        // The hash annotations were written all the same (upstream's hash controller is apart).
        assert!(api.writes().iter().any(|w| w.path == NODEPOOL && w.status == 200), "{:#?}", api.writes());
    }

    #[tokio::test]
    async fn once_the_view_shows_what_was_written_nothing_is_written_again() {
        let api = FakeApi::default();
        reconcile(&on(&api, false), &one_node()).await.unwrap();
        let written = as_written(nodepool("default", "on-demand"), &api);
        let loaded = view(vec![written], vec![nodeclaim("a", "kwok://a")], vec![node("a", "kwok://a")]);
        // A new reconciler (a restart): it counts at once.
        let api = FakeApi::default();
        reconcile(&on(&api, false), &loaded).await.unwrap();
        assert_eq!(api.writes(), [], "written again");
        assert_eq!(api.events(), []);
    }

    #[tokio::test]
    async fn a_dry_run_writes_nothing_and_goes_on() {
        let api = FakeApi::default();
        let reconciler = on(&api, true);
        let next = reconcile(&reconciler, &one_node()).await;
        assert_eq!(next.unwrap(), Next::After(Duration::from_secs(5)));
        assert_eq!(api.writes(), []);
        assert_eq!(reconciler.counted.lock().unwrap().len(), 1, "goes on as if written");
    }

    #[tokio::test]
    async fn a_condition_that_turns_false_is_said_in_a_warning_event_once() {
        let api = FakeApi::default();
        let orphan =
            Loaded::of(Manifests { nodepools: vec![nodepool("default", "on-demand")], ..Manifests::default() });
        reconcile(&on(&api, false), &orphan).await.unwrap();
        let events = api.events();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].0, "NodeClassNotFound");
        assert!(events[0].1.starts_with("NodeClassReady: "), "{events:?}");
        // Written, it is not said again (by a reconciler that has not said it yet).
        let written = as_written(nodepool("default", "on-demand"), &api);
        let api = FakeApi::default();
        reconcile(&on(&api, false), &Loaded::of(Manifests { nodepools: vec![written], ..Manifests::default() }))
            .await
            .unwrap();
        assert_eq!(api.events(), []);
    }

    #[tokio::test]
    async fn a_resource_no_longer_held_leaves_the_status_and_nothing_more_is_written() {
        let mut np = nodepool("default", "on-demand");
        np.status = serde_json::from_value(json!({"resources": {"cpu": "4", "nvidia.com/gpu": "1"}})).unwrap();
        let api = FakeApi::default();
        let loaded = view(vec![np.clone()], vec![nodeclaim("a", "kwok://a")], vec![node("a", "kwok://a")]);
        reconcile(&on(&api, false), &loaded).await.unwrap();
        let written = as_written(np, &api);
        let resources = &written.status.as_ref().unwrap().resources;
        assert!(!resources.contains_key("nvidia.com/gpu"), "{resources:?}");
        let api = FakeApi::default();
        let loaded = view(vec![written], vec![nodeclaim("a", "kwok://a")], vec![node("a", "kwok://a")]);
        reconcile(&on(&api, false), &loaded).await.unwrap();
        assert_eq!(api.writes(), [], "written again");
    }

    #[tokio::test]
    async fn a_registration_outcome_is_recorded_once_its_condition_is_written() {
        let api = FakeApi::default();
        let reconciler = on(&api, false);
        let common = &reconciler.common;
        let np = nodepool("default", "on-demand");
        let mut nc = nodeclaim("a", "kwok://a");
        nc.metadata.owner_references = Some(vec![serde_json::from_value(json!({"apiVersion": "karpenter.sh/v1",
            "kind": "NodePool", "name": "default", "uid": "uid-default"}))
        .unwrap()]);
        let recorded = || {
            let health = common.shared.registration_health.lock().unwrap();
            health.get("uid-default").map(|t| t.health())
        };
        // The NodePool changed since the view: the condition is not written, nor the outcome kept.
        api.object(NODEPOOL, 8);
        assert_eq!(common.registration_outcome(Some(&np), &nc, true).await, Write::Stale);
        assert_eq!(recorded(), Some(registrationhealth::Health::Unknown));
        // Written: kept.
        api.object(NODEPOOL, 7);
        assert_eq!(common.registration_outcome(Some(&np), &nc, true).await, Write::Done);
        assert_eq!(recorded(), Some(registrationhealth::Health::Healthy));
        let written = status_writes(&api);
        assert_eq!(written.iter().map(|w| w.status).collect::<Vec<_>>(), [409, 200]);
        // A NodeClaim the NodePool does not own is not judged: one more failure would turn it
        // (with one before), and is neither written nor recorded.
        common.shared.registration_health.lock().unwrap().get_mut("uid-default").unwrap().record(false);
        let tracker = || common.shared.registration_health.lock().unwrap().get("uid-default").cloned();
        let (before, kept) = (api.writes().len(), tracker());
        let other = nodeclaim("b", "kwok://b");
        assert_eq!(common.registration_outcome(Some(&np), &other, false).await, Write::Done);
        assert_eq!(api.writes().len(), before);
        assert_eq!(tracker(), kept);
        // Owned, it is: the NodePool's write meets a NodePool gone, which upstream ignores.
        api.fail(NODEPOOL, 404);
        assert_eq!(common.registration_outcome(Some(&np), &nc, false).await, Write::Done);
        assert_ne!(tracker(), kept, "a NodePool gone is as written: the outcome is recorded");
    }

    #[test]
    fn a_resource_no_longer_held_is_removed_from_the_status() {
        let mut np = nodepool("default", "on-demand");
        np.status = serde_json::from_value(json!({"resources": {"cpu": "4", "nvidia.com/gpu": "1"}})).unwrap();
        let status: NodePoolStatus = serde_json::from_value(json!({"resources": {"cpu": "8"}})).unwrap();
        let patch = status_patch(&np, status);
        assert_eq!(patch["status"]["resources"], json!({"cpu": "8", "nvidia.com/gpu": null}));
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
    }

    #[tokio::test]
    async fn usage_is_counted_once_per_view() {
        let reconciler = on(&FakeApi::default(), false);
        let first = one_node();
        let counted = reconciler.usage(&first);
        assert_eq!(counted.get("default").and_then(|u| u.get("cpu")).map(ToString::to_string).as_deref(), Some("4"));
        assert!(Arc::ptr_eq(&counted, &reconciler.usage(&first)), "counted again on one view");
        assert!(!Arc::ptr_eq(&counted, &reconciler.usage(&one_node())), "a new view's not counted");
    }

    #[test]
    fn a_nodepool_is_reconciled_when_its_nodeclass_changes_appears_or_goes() {
        let before = Manifests {
            nodepools: vec![nodepool("default", "on-demand")],
            nodeclasses: vec![nodeclass("1")],
            ..Manifests::default()
        };
        let related = |before: &Manifests, after: &Manifests| {
            NodePools::<Kwok>::related(&Loaded::of(before.clone()), &Loaded::of(after.clone()))
        };
        assert_eq!(related(&before, &before), Vec::<String>::new());
        let changed = Manifests { nodeclasses: vec![nodeclass("2")], ..before.clone() };
        assert_eq!(related(&before, &changed), ["default"]);
        let gone = Manifests { nodeclasses: vec![], ..before.clone() };
        assert_eq!(related(&before, &gone), ["default"]);
        assert_eq!(related(&gone, &before), ["default"]);
        // One that fails validation is woken by its class too.
        let mut invalid = Loaded::of(Manifests { nodepools: vec![], ..changed.clone() });
        invalid.live.invalid_nodepools.push(nodepool("default", "bogus"));
        assert_eq!(NodePools::<Kwok>::related(&Loaded::of(before.clone()), &invalid), ["default"]);
    }
}
