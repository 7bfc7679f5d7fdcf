//! Termination (upstream `node.termination`, v1.14.1). Deleting a Node or its NodeClaim ends both:
//!
//! - [`NodeTermination`], a per-object reconciler ([`super::perobject`]) on each deleting
//!   **Node** Karpenter manages, up to core's [`MAX_CONCURRENT_RECONCILES`] at once, so that one
//!   node's slow eviction or instance deletion holds up no other drain: core's [`node_plan`] on
//!   the view, then its steps in upstream's order. Its NodeClaim is deleted too, the Node is
//!   tainted `karpenter.sh/disrupted:NoSchedule`, drained in core's tiers through the Eviction
//!   API (a PodDisruptionBudget's 429 is retried with backoff and reported), the instance is
//!   deleted, and the finalizer comes off. Looked at again every second while it drains or waits
//!   for volumes and every 5 s while the instance terminates (upstream's requeues); a failed
//!   instance deletion backs off as upstream's (100 ms doubling to 10 s).
//! - a deleting **NodeClaim** is finalized by its lifecycle controller (upstream's too,
//!   [`super::lifecycle`]): its Nodes are deleted (and drained as above); once none is left the
//!   instance is deleted until the provider says it is gone, and the finalizer comes off.
//!
//! Between the drain and the instance's deletion, the instance waits for the VolumeAttachments of
//! the drained pods' volumes to go (until the NodeClaim's terminationGracePeriod), as upstream's
//! `awaitVolumeDetachment` does. The NodeClaim's `Drained` (after at least upstream's 5 s
//! MinDrainTime), `VolumesDetached` and `InstanceTerminating` conditions record the way
//! ([`termination::controller`]).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use carpentry_core::api::NodeClaim;
use carpentry_core::labels;
use carpentry_core::pod::PodRef;
use carpentry_core::termination::controller::{
    node_plan, NodePlan, Stage, DRAIN_RECHECK_SECONDS, INSTANCE_TERMINATION_RECHECK_SECONDS, MAX_CONCURRENT_RECONCILES,
};
use carpentry_core::termination::{self};
use carpentry_core::workqueue::RateLimiter;
use carpentry_core::HeldDecision;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use super::act::{node_ref, pod_ref, Eviction};
use super::perobject::{Failed, Kind, Next, ObjectReconciler};
use super::Common;
use crate::cloud::{CloudProvider, Deletion};
use crate::view::{lock, Loaded};

pub(super) fn provider_id(nc: &NodeClaim) -> &str {
    nc.status.as_ref().map(|s| s.provider_id.as_str()).unwrap_or_default()
}

fn node_provider_id(node: &Node) -> &str {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default()
}

/// Up to `limit` names, then how many more (upstream `pretty.Slice`).
fn pretty_names(names: &[&str], limit: usize) -> String {
    let shown = names.iter().take(limit).copied().collect::<Vec<_>>().join(", ");
    match names.len().checked_sub(limit) {
        Some(more) if more > 0 => format!("{shown} and {more} other(s)"),
        _ => shown,
    }
}

pub(super) fn without_finalizer(finalizers: &Option<Vec<String>>) -> Vec<String> {
    finalizers.iter().flatten().filter(|f| *f != labels::TERMINATION_FINALIZER).cloned().collect()
}

impl<P: CloudProvider> Common<P> {
    /// Writes the NodeClaim's termination conditions when `stage` changes them; whether it wrote.
    pub(super) async fn termination_conditions(&self, nc: &NodeClaim, stage: Stage, now: i64) -> bool {
        match termination::controller::conditions(nc, stage, now) {
            Some(list) => self.act.patch_nodeclaim_status(nc, json!({"conditions": list})).await,
            None => false,
        }
    }
}

impl Kind for Node {
    const KIND: &'static str = "Node";
    const GROUP: &'static str = "";
    const VERSION: &'static str = "v1";
    const PLURAL: &'static str = "nodes";

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn all(loaded: &Loaded) -> impl Iterator<Item = &Self> {
        loaded.manifests().nodes.iter()
    }
}

/// The controller: deleting Nodes drained and finalized.
pub(super) struct NodeTermination<P: CloudProvider> {
    common: Common<P>,
    /// Pods a PodDisruptionBudget refused to evict: when to try again, and the backoff (pruned to
    /// the pods that still exist).
    evictions: Mutex<HashMap<PodRef, (Instant, Duration)>>,
    /// Drained nodes whose instance waits for volume attachments (the decision is logged once).
    awaiting_volumes: Mutex<HashSet<String>>,
}

impl<P: CloudProvider> NodeTermination<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        NodeTermination { common, evictions: Mutex::default(), awaiting_volumes: Mutex::default() }
    }
}

/// What a reconcile reads of the view: taken before its calls, which hold no view
/// ([`ObjectReconciler::reconcile`]).
struct Seen {
    node: Node,
    /// Its NodeClaim, by providerID.
    nodeclaim: Option<NodeClaim>,
    plan: NodePlan,
    /// The pods this pass evicts, for their events.
    evicted: HashMap<PodRef, ObjectReference>,
    /// A pod bound to it (or a volume attachment on it) does not load: it would go unevicted
    /// (unwaited for), so nothing is done until it loads.
    held_back: bool,
}

impl<P: CloudProvider> ObjectReconciler for NodeTermination<P> {
    type Object = Node;
    const NAME: &'static str = "node.termination";
    const CONCURRENCY: u16 = MAX_CONCURRENT_RECONCILES as u16;
    const RATE_LIMITER: RateLimiter = termination::controller::RATE_LIMITER;

    fn tidy(&self, loaded: &Loaded) {
        let m = loaded.manifests();
        let nodes: HashSet<&str> = m.nodes.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
        lock(&self.awaiting_volumes).retain(|n| nodes.contains(n.as_str()));
        let mut evictions = lock(&self.evictions);
        if !evictions.is_empty() {
            let pods: HashSet<PodRef> = m.pods.iter().map(PodRef::of).collect();
            evictions.retain(|r, _| pods.contains(r));
        }
    }

    fn reconcile<'a>(
        &'a self,
        node: &Node,
        loaded: &Loaded,
    ) -> impl Future<Output = Result<Next, Failed>> + Send + use<'a, P> {
        let m = loaded.manifests();
        let now = crate::clock::now_seconds();
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let id = node_provider_id(node);
        // upstream `NodeClaimForNode`: more than one NodeClaim of its providerID is none (no
        // single source of truth).
        let mut of_node = m.nodeclaims.iter().filter(|nc| !id.is_empty() && provider_id(nc) == id);
        let nodeclaim = of_node.next().filter(|_| of_node.next().is_none());
        let seen = node_plan(node, nodeclaim, &m.pods, &m.volumeattachments, &m.pvcs, now).map(|plan| {
            let on_node = m.pods.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name));
            let evicted = on_node
                .map(|p| (PodRef::of(p), p))
                .filter(|(r, _)| plan.drain.evict.contains(r))
                .map(|(r, p)| (r, pod_ref(p)))
                .collect();
            Seen {
                node: node.clone(),
                nodeclaim: nodeclaim.cloned(),
                plan,
                evicted,
                held_back: loaded.live.holding_back(HeldDecision::Drain(name)).is_some(),
            }
        });
        async move {
            match seen {
                None => Ok(Next::Change),
                Some(seen) => self.finalize(&seen, now).await,
            }
        }
    }
}

impl<P: CloudProvider> NodeTermination<P> {
    /// upstream `finalize`, on what the view showed.
    async fn finalize(&self, seen: &Seen, now: i64) -> Result<Next, Failed> {
        let recheck = Next::After(Duration::from_secs(DRAIN_RECHECK_SECONDS as u64));
        let (node, plan, nodeclaim) = (&seen.node, &seen.plan, seen.nodeclaim.as_ref());
        if seen.held_back {
            return Ok(recheck);
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let act = &self.common.act;
        if let Some(nc) = nodeclaim.filter(|_| plan.delete_nodeclaim) {
            act.decided("DeleteNodeClaim", &json!({"node": name, "nodeclaim": nc.name()}));
            if !act.delete_nodeclaim(nc.name()).await && !act.dry_run {
                return Err(Failed(anyhow!("node {name}'s NodeClaim {} was not deleted", nc.name())));
            }
        }
        // upstream: a Node that is not Ready on an instance gone has nothing left to drain.
        if plan.instance_may_be_gone && self.instance_gone(node).await? {
            act.decided("InstanceGone", &json!({"node": name, "providerID": node_provider_id(node)}));
            if act.dry_run {
                return Ok(Next::Change); // decided; its next change brings it back
            }
            return self.remove_finalizer(node, &name).await;
        }
        if plan.taint {
            let mut list = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
            list.push(termination::disrupted_taint());
            let patch =
                json!({"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": list}});
            if !act.patch_node(&name, patch).await && !act.dry_run {
                return Ok(recheck); // upstream requeues a conflict
            }
        }
        if let Some(nc) = nodeclaim {
            self.common.termination_conditions(nc, Stage::Draining, now).await;
        }
        self.drain(seen, &name).await;
        if !plan.drained || act.dry_run {
            return Ok(recheck);
        }
        // upstream `awaitVolumeDetachment`: the attach-detach controller deletes the drained
        // pods' VolumeAttachments; the instance waits for that until the grace period ends.
        let volumes = plan.volumes();
        if volumes.hold_instance() {
            if let Some(nc) = nodeclaim {
                self.drained_conditions(node, nc, Stage::Drained(volumes), now).await;
            }
            let names = &plan.pending_attachments;
            if lock(&self.awaiting_volumes).insert(name.clone()) {
                self.common.act.decided("AwaitingVolumeDetachment", &json!({"node": name, "volumeAttachments": names}));
            }
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let note = format!(
                "Awaiting deletion of bound volumeattachments ({}) (kubectl karpenter explain node {name})",
                pretty_names(&names, 5)
            );
            self.common.act.event(&node_ref(node), false, "AwaitingVolumeDetachment", note, "Terminate");
            return Ok(recheck);
        }
        lock(&self.awaiting_volumes).remove(&name);
        // upstream `awaitInstanceTermination`: the finalizer stays until the instance is gone.
        if let Some(nc) = nodeclaim {
            if !self.common.act.leading() {
                return Ok(recheck); // a deletion is this replica's only while it leads
            }
            let started = Instant::now();
            let deletion = self.common.cloud.delete(nc).await;
            let error = deletion.as_ref().err().map(|_| "");
            self.common.act.metrics.cloud_call(Self::NAME, "Delete", self.common.cloud.name(), started, error);
            match deletion {
                Ok(deletion) => {
                    self.drained_conditions(node, nc, Stage::InstanceTerminating(Some(volumes)), now).await;
                    if deletion == Deletion::Terminating {
                        return Ok(Next::After(Duration::from_secs(INSTANCE_TERMINATION_RECHECK_SECONDS as u64)));
                    }
                }
                Err(e) => {
                    self.drained_conditions(node, nc, Stage::Drained(volumes), now).await;
                    return Err(Failed(e.context(format!("deleting node {name}'s instance"))));
                }
            }
        }
        self.common.act.decided("Drained", &json!({"node": name}));
        self.remove_finalizer(node, &name).await
    }

    /// Whether the cloud says the Node's instance is gone (upstream `cloudProvider.Get`'s
    /// NodeClaimNotFoundError); a failed call fails the reconcile, as upstream's.
    async fn instance_gone(&self, node: &Node) -> Result<bool, Failed> {
        let started = Instant::now();
        let exists = self.common.cloud.exists(node_provider_id(node)).await;
        let error = exists.as_ref().err().map(|_| "");
        self.common.act.metrics.cloud_call(Self::NAME, "Get", self.common.cloud.name(), started, error);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        exists.map(|e| !e).map_err(|e| Failed(e.context(format!("asking whether node {name}'s instance exists"))))
    }

    /// The termination finalizer off: the Node goes.
    async fn remove_finalizer(&self, node: &Node, name: &str) -> Result<Next, Failed> {
        let patch = json!({"metadata": {
            "finalizers": without_finalizer(&node.metadata.finalizers),
            "resourceVersion": node.metadata.resource_version,
        }});
        if !self.common.act.patch_node(name, patch).await {
            // A conflict brings the Node back with its change; a timeout or an error would not.
            return Err(Failed(anyhow!("node {name}'s finalizer was not removed")));
        }
        self.common.act.metrics.node_terminated(node, crate::clock::now_seconds());
        Ok(Next::Change)
    }

    /// Writes the conditions of a drained node's NodeClaim, counting the node drained when its
    /// `Drained` turns `True` (upstream counts it once the write is made).
    async fn drained_conditions(&self, node: &Node, nc: &NodeClaim, stage: Stage, now: i64) {
        let before = termination::controller::is_drained(nc);
        if self.common.termination_conditions(nc, stage, now).await && !before {
            let pool = node.metadata.labels.as_ref().and_then(|l| l.get(labels::NODEPOOL));
            self.common.act.metrics.node_drained(pool.map_or("", String::as_str));
        }
    }

    /// One drain pass (upstream `terminator.Drain`): what the grace period ended deleted, what
    /// `karpenter.sh/do-not-disrupt` holds reported, the rest evicted (a pod a budget refused
    /// waits for its backoff).
    async fn drain(&self, seen: &Seen, name: &str) {
        let (node, pass) = (&seen.node, &seen.plan.drain);
        for r in &pass.delete {
            self.common
                .act
                .decided("DeletePod", &json!({"node": name, "pod": r.to_string(), "why": "terminationGracePeriod"}));
            self.common.act.delete_pod(&r.namespace, &r.name).await;
        }
        for r in &pass.held {
            let note = format!(
                "pod {r} has karpenter.sh/do-not-disrupt: it is not evicted before the NodeClaim's terminationGracePeriod \
                 (kubectl karpenter explain node {name})"
            );
            self.common.act.event(&node_ref(node), true, "DisruptionBlocked", note, "Drain");
        }
        for r in &pass.evict {
            if lock(&self.evictions).get(r).is_some_and(|(next, _)| Instant::now() < *next) {
                continue;
            }
            match self.common.act.evict(&r.namespace, &r.name).await {
                Some(Eviction::Evicted) => {
                    lock(&self.evictions).remove(r);
                    self.common.act.decided("Evicted", &json!({"node": name, "pod": r.to_string(), "tier": pass.tier}));
                    if let Some(pod) = seen.evicted.get(r) {
                        let note = format!("Evicted pod: draining node {name}");
                        self.common.act.event(pod, false, "Evicted", note, "Evict");
                    }
                }
                Some(Eviction::Refused(message)) => {
                    {
                        let mut evictions = lock(&self.evictions);
                        let previous = evictions.get(r).map(|(_, b)| b.as_millis() as u64);
                        let backoff = Duration::from_millis(termination::eviction_backoff_millis(previous));
                        evictions.insert(r.clone(), (Instant::now() + backoff, backoff));
                    }
                    let note = format!("evicting pod {r}: {message} (kubectl karpenter explain node {name})");
                    self.common.act.event(&node_ref(node), true, "FailedDraining", note, "Evict");
                }
                Some(Eviction::Gone) => {
                    lock(&self.evictions).remove(r);
                }
                None => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use carpentry_core::manifest::Manifests;
    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use crate::testing::FakeApi;

    fn deleting_node(ready: &str) -> Node {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "resourceVersion": "3", "finalizers": ["karpenter.sh/termination"],
                "deletionTimestamp": "2026-12-07T00:00:00Z"},
            "spec": {"providerID": "kwok://n1"},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}))
        .unwrap()
    }

    fn seen(node: Node) -> Seen {
        let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"}}))
        .unwrap();
        let plan = node_plan(&node, None, &[pod], &[], &[], crate::clock::now_seconds()).unwrap();
        Seen { node, nodeclaim: None, plan, evicted: HashMap::new(), held_back: false }
    }

    /// The requests made, as "METHOD path" (reads too).
    fn requests(api: &FakeApi) -> Vec<String> {
        api.writes().iter().map(|r| format!("{} {}", r.method, r.path)).collect()
    }

    #[tokio::test]
    async fn what_is_kept_of_pods_and_nodes_gone_is_forgotten() {
        let termination = NodeTermination::new(Common::on_fake_api(&FakeApi::default(), false));
        let Seen { node, .. } = seen(deleting_node("True"));
        let pod = |name: &str| PodRef { namespace: "apps".into(), name: name.into() };
        let later = Instant::now() + Duration::from_secs(60);
        lock(&termination.evictions).insert(pod("web"), (later, Duration::from_secs(1)));
        lock(&termination.evictions).insert(pod("gone"), (later, Duration::from_secs(1)));
        lock(&termination.awaiting_volumes).extend(["n1".to_string(), "n2".to_string()]);
        let web: Pod = serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "apps"}})).unwrap();
        let view = Loaded::of(Manifests { nodes: vec![node], pods: vec![web], ..Manifests::default() });
        termination.tidy(&view);
        assert_eq!(lock(&termination.evictions).keys().cloned().collect::<Vec<_>>(), [pod("web")]);
        assert_eq!(lock(&termination.awaiting_volumes).iter().cloned().collect::<Vec<_>>(), ["n1"]);
    }

    #[tokio::test]
    async fn a_node_not_ready_whose_instance_is_gone_lets_go_without_a_drain() {
        let api = FakeApi::default();
        let termination = NodeTermination::new(Common::on_fake_api(&api, false));
        api.fail_reads("/api/v1/nodes/n1", 404); // kwok's instance is its Node: gone
        let next = termination.finalize(&seen(deleting_node("Unknown")), 0).await.unwrap();
        assert_eq!(next, Next::Change);
        // Asked, then the finalizer off: no taint, no eviction of the pod still bound to it.
        assert_eq!(requests(&api), ["GET /api/v1/nodes/n1", "PATCH /api/v1/nodes/n1"]);
        assert_eq!(api.writes()[1].body["metadata"]["finalizers"], json!([]));
    }

    #[tokio::test]
    async fn a_ready_node_or_one_whose_instance_exists_is_drained_and_a_failed_question_fails() {
        // Ready: the cloud is not asked; the taint is written first.
        let api = FakeApi::default();
        let termination = NodeTermination::new(Common::on_fake_api(&api, false));
        assert!(termination.finalize(&seen(deleting_node("True")), 0).await.is_ok());
        let made = requests(&api);
        assert!(!made.iter().any(|r| r.starts_with("GET")), "{made:?}");
        assert!(api.writes()[0].body["spec"]["taints"].is_array(), "{:#?}", api.writes());
        // Not Ready, its instance there: asked, then drained as a Ready one.
        let api = FakeApi::default();
        let termination = NodeTermination::new(Common::on_fake_api(&api, false));
        let mut there = deleting_node("False");
        there.metadata.deletion_timestamp = None;
        api.answer("/api/v1/nodes/n1", serde_json::to_value(&there).unwrap());
        assert!(termination.finalize(&seen(deleting_node("False")), 0).await.is_ok());
        let made = requests(&api);
        assert_eq!(made[0], "GET /api/v1/nodes/n1");
        assert!(api.writes()[1].body["spec"]["taints"].is_array(), "{:#?}", api.writes());
        // The question fails: so does the reconcile, nothing written.
        let api = FakeApi::default();
        let termination = NodeTermination::new(Common::on_fake_api(&api, false));
        api.fail("/api/v1/nodes/n1", 500);
        assert!(termination.finalize(&seen(deleting_node("False")), 0).await.is_err());
        assert_eq!(requests(&api), ["GET /api/v1/nodes/n1"]);
    }
}
