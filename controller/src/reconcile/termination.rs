//! Termination (upstream `node/termination` and the NodeClaim finalizer in
//! `nodeclaim/lifecycle/controller.go::finalize`). Deleting either object ends both:
//!
//! - a deleting **Node** Karpenter manages: its NodeClaim is deleted too, the Node is tainted
//!   `karpenter.sh/disrupted:NoSchedule`, drained in core's tiers through the Eviction API (a
//!   PodDisruptionBudget's 429 is retried with backoff and reported), the instance is deleted, and
//!   the finalizer comes off;
//! - a deleting **NodeClaim**: its Node is deleted (and drained as above); once no Node is left
//!   the instance is deleted until the provider says it is gone, and the finalizer comes off.
//!
//! Between the drain and the instance's deletion, the instance waits for the VolumeAttachments of
//! the drained pods' volumes to go (until the NodeClaim's terminationGracePeriod), as upstream's
//! `awaitVolumeDetachment` does. The NodeClaim's `Drained` (after at least upstream's 5 s
//! MinDrainTime), `VolumesDetached` and `InstanceTerminating` conditions record the way
//! ([`termination::controller`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use carpentry_core::api::NodeClaim;
use carpentry_core::labels;
use carpentry_core::manifest::Manifests;
use carpentry_core::pod::PodRef;
use carpentry_core::termination::controller::{Stage, Volumes, INSTANCE_TERMINATION_RECHECK_SECONDS};
use carpentry_core::termination::{self};
use carpentry_core::HeldDecision;
use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use tokio::sync::Notify;
use tracing::warn;

use super::act::{node_ref, pod_ref, Eviction};
use super::lifecycle::has_finalizer;
use super::{concern_common, Common, Concern};
use crate::cloud::{CloudProvider, Deletion};

fn provider_id(nc: &NodeClaim) -> &str {
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

fn without_finalizer(finalizers: &Option<Vec<String>>) -> Vec<String> {
    finalizers.iter().flatten().filter(|f| *f != labels::TERMINATION_FINALIZER).cloned().collect()
}

/// The concern: deleting Nodes and NodeClaims drained and finalized.
pub(super) struct Termination<P: CloudProvider> {
    common: Common<P>,
    /// Pods a PodDisruptionBudget refused to evict: when to try again, and the backoff (pruned to
    /// the pods that still exist).
    evictions: HashMap<PodRef, (Instant, Duration)>,
    /// Instances the cloud said are still terminating, by provider ID: when to ask again (epoch
    /// seconds; pruned to the NodeClaims that exist).
    instance_checks: HashMap<String, i64>,
    /// Drained nodes whose instance waits for volume attachments (the decision is logged once).
    awaiting_volumes: HashSet<String>,
    /// Instance deletions under way, by NodeClaim UID: each a task of its own, so that a slow
    /// answer holds up no other node's drain (upstream's termination reconciles run concurrently).
    deleting: HashMap<String, tokio::task::JoinHandle<anyhow::Result<Deletion>>>,
    /// Notified when a deletion ends, for the pass that reads its answer.
    ended: Arc<Notify>,
}
concern_common!(Termination);

impl<P: CloudProvider> Termination<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        Termination {
            common,
            evictions: HashMap::new(),
            instance_checks: HashMap::new(),
            awaiting_volumes: HashSet::new(),
            deleting: HashMap::new(),
            ended: Arc::new(Notify::new()),
        }
    }
}

impl<P: CloudProvider> Concern<P> for Termination<P> {
    const NAME: &'static str = "termination";

    fn wake(&self) -> Option<Arc<Notify>> {
        Some(self.ended.clone())
    }

    async fn pass(&mut self, m: &Manifests, loaded: &super::Loaded, now: i64) {
        for nc in m.nodeclaims.iter().filter(|nc| nc.metadata.deletion_timestamp.is_some()) {
            self.finalize_nodeclaim(m, nc, now).await;
        }
        let nodes: HashSet<&str> = m.nodes.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
        self.awaiting_volumes.retain(|n| nodes.contains(n.as_str()));
        if !self.evictions.is_empty() {
            let pods: HashSet<PodRef> = m.pods.iter().map(PodRef::of).collect();
            self.evictions.retain(|r, _| pods.contains(r));
        }
        let ids: HashSet<&str> = m.nodeclaims.iter().map(provider_id).collect();
        self.instance_checks.retain(|id, _| ids.contains(id.as_str()));
        let uids: HashSet<&str> = m.nodeclaims.iter().filter_map(|nc| nc.metadata.uid.as_deref()).collect();
        self.deleting.retain(|uid, _| uids.contains(uid.as_str()));
        for node in &m.nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            // A node with a pod or volume attachment that does not load is not drained: that pod
            // would go unevicted, that volume unwaited for.
            if node.metadata.deletion_timestamp.is_some()
                && loaded.live.holding_back(HeldDecision::Drain(name)).is_none()
            {
                self.terminate_node(m, node, now).await;
            }
        }
    }
}

impl<P: CloudProvider> Termination<P> {
    /// Asks the cloud to delete `nc`'s instance, in a task of its own: `None` until it answers
    /// (and in `--dry-run`, or when this replica does not lead), then its answer. While the
    /// answer is that the instance is still terminating, the next ask waits
    /// [`INSTANCE_TERMINATION_RECHECK_SECONDS`].
    async fn delete_instance(&mut self, nc: &NodeClaim, now: i64) -> Option<anyhow::Result<Deletion>> {
        let (id, uid) = (provider_id(nc).to_string(), nc.metadata.uid.clone().unwrap_or_default());
        match self.deleting.get(&uid) {
            Some(task) if !task.is_finished() => return None,
            Some(_) => {}
            None => {
                let due = self.instance_checks.get(&id).is_none_or(|due| now >= *due);
                if self.act.dry_run || !due || !self.act.leading() {
                    return None;
                }
                let (cloud, nc, ended) = (self.cloud.clone(), nc.clone(), self.ended.clone());
                let metrics = self.act.metrics.clone();
                let task = tokio::spawn(async move {
                    let started = Instant::now();
                    let deletion = cloud.delete(&nc).await;
                    let error = deletion.as_ref().err().map(|_| "");
                    metrics.cloud_call("node.termination", "Delete", cloud.name(), started, error);
                    ended.notify_one();
                    deletion
                });
                self.deleting.insert(uid, task);
                return None;
            }
        }
        let task = self.deleting.remove(&uid)?;
        let deletion = task.await.unwrap_or_else(|e| Err(anyhow::anyhow!("the instance deletion ended: {e}")));
        match &deletion {
            Ok(Deletion::Terminating) => {
                self.instance_checks.insert(id, now + INSTANCE_TERMINATION_RECHECK_SECONDS);
            }
            Ok(Deletion::Gone) | Err(_) => {
                self.instance_checks.remove(&id);
            }
        }
        Some(deletion)
    }

    /// Writes the NodeClaim's termination conditions when `stage` changes them.
    async fn termination_conditions(&self, nc: &NodeClaim, stage: Stage, now: i64) {
        if let Some(list) = termination::controller::conditions(nc, stage, now) {
            self.act.patch_nodeclaim_status(nc, json!({"conditions": list})).await;
        }
    }

    async fn finalize_nodeclaim(&mut self, m: &Manifests, nc: &NodeClaim, now: i64) {
        if !has_finalizer(&nc.metadata.finalizers) {
            return;
        }
        // A launch under way may still start an instance: its result is written onto the
        // NodeClaim first (lifecycle), then the instance is terminated here.
        if self.launch_under_way(nc.metadata.uid.as_deref().unwrap_or_default()) {
            return;
        }
        let id = provider_id(nc);
        let nodes: Vec<&Node> = match id.is_empty() {
            true => Vec::new(),
            false => m.nodes.iter().filter(|n| node_provider_id(n) == id).collect(),
        };
        if !nodes.is_empty() {
            for node in nodes.into_iter().filter(|n| n.metadata.deletion_timestamp.is_none()) {
                let name = node.metadata.name.clone().unwrap_or_default();
                self.act.decided("DeleteNode", &json!({"nodeclaim": nc.name(), "node": name}));
                self.act.delete_node(&name).await;
            }
            return; // the Node's termination drains it; the NodeClaim waits for it to go
        }
        let Some(deletion) = self.delete_instance(nc, now).await else { return };
        if deletion.is_ok() {
            self.termination_conditions(nc, Stage::InstanceTerminating(None), now).await;
        }
        match deletion {
            Ok(Deletion::Gone) => {
                self.act.decided("Terminated", &json!({"nodeclaim": nc.name(), "providerID": id}));
                let patch = json!({"metadata": {
                    "finalizers": without_finalizer(&nc.metadata.finalizers),
                    "resourceVersion": nc.metadata.resource_version,
                }});
                if self.act.patch_nodeclaim(nc.name(), patch).await {
                    self.act.metrics.nodeclaim_terminated(nc);
                }
            }
            Ok(Deletion::Terminating) => {}
            Err(e) => warn!(nodeclaim = %nc.name(), error = %format!("{e:#}"), "instance deletion failed; retried"),
        }
    }

    async fn terminate_node(&mut self, m: &Manifests, node: &Node, now: i64) {
        if !has_finalizer(&node.metadata.finalizers) {
            return;
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let id = node_provider_id(node);
        let nodeclaim = m.nodeclaims.iter().find(|nc| !id.is_empty() && provider_id(nc) == id);
        if let Some(nc) = nodeclaim.filter(|nc| nc.metadata.deletion_timestamp.is_none()) {
            self.act.decided("DeleteNodeClaim", &json!({"node": name, "nodeclaim": nc.name()}));
            self.act.delete_nodeclaim(nc.name()).await;
        }
        if !termination::is_disrupted(node) {
            let mut list = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
            list.push(termination::disrupted_taint());
            let patch =
                json!({"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": list}});
            self.act.patch_node(&name, patch).await;
            return; // drained on the next pass, once no new pod can land
        }
        // The grace period counts from the NodeClaim's deletion (upstream: its
        // `karpenter.sh/nodeclaim-termination-timestamp`).
        let grace_elapsed = nodeclaim.is_some_and(|nc| {
            let deleted = nc.metadata.deletion_timestamp.as_ref().map(|t| t.0.as_second());
            let grace = nc.spec.termination_grace_period.as_ref().map(|d| d.as_seconds());
            matches!((deleted, grace), (Some(d), Some(g)) if now >= d + g as i64)
        });
        let pass = termination::drain(&name, &m.pods, now, grace_elapsed);
        if let Some(nc) = nodeclaim {
            self.termination_conditions(nc, Stage::Draining, now).await;
        }
        let by_ref = |r: &PodRef| m.pods.iter().find(|p| PodRef::of(p) == *r);
        for r in &pass.delete {
            self.act
                .decided("DeletePod", &json!({"node": name, "pod": r.to_string(), "why": "terminationGracePeriod"}));
            self.act.delete_pod(&r.namespace, &r.name).await;
        }
        for r in &pass.held {
            let note = format!(
                "pod {r} has karpenter.sh/do-not-disrupt: it is not evicted before the NodeClaim's terminationGracePeriod \
                 (kubectl karpenter explain node {name})"
            );
            self.act.event(&node_ref(node), true, "DisruptionBlocked", note, "Drain").await;
        }
        for r in &pass.evict {
            if self.evictions.get(r).is_some_and(|(next, _)| Instant::now() < *next) {
                continue;
            }
            match self.act.evict(&r.namespace, &r.name).await {
                Some(Eviction::Evicted) => {
                    self.evictions.remove(r);
                    self.act.decided("Evicted", &json!({"node": name, "pod": r.to_string(), "tier": pass.tier}));
                    if let Some(pod) = by_ref(r) {
                        self.act
                            .event(
                                &pod_ref(pod),
                                false,
                                "Evicted",
                                format!("Evicted pod: draining node {name}"),
                                "Evict",
                            )
                            .await;
                    }
                }
                Some(Eviction::Refused(message)) => {
                    let previous = self.evictions.get(r).map(|(_, b)| b.as_millis() as u64);
                    let backoff = Duration::from_millis(termination::eviction_backoff_millis(previous));
                    self.evictions.insert(r.clone(), (Instant::now() + backoff, backoff));
                    let note = format!("evicting pod {r}: {message} (kubectl karpenter explain node {name})");
                    self.act.event(&node_ref(node), true, "FailedDraining", note, "Evict").await;
                }
                Some(Eviction::Gone) => {
                    self.evictions.remove(r);
                }
                None => {}
            }
        }
        // upstream `awaitDrain`: also at least MinDrainTime since the drain began.
        let done = nodeclaim.map_or(pass.drained(), |nc| termination::controller::drain_done(nc, pass.drained(), now));
        if !done || self.act.dry_run {
            return;
        }
        // upstream `awaitVolumeDetachment`: the attach-detach controller deletes the drained
        // pods' VolumeAttachments; the instance waits for that until the grace period ends.
        let pending =
            termination::controller::pending_volume_attachments(&name, &m.volumeattachments, &m.pods, &m.pvcs, now);
        let volumes = Volumes::of(pending.len(), grace_elapsed);
        if volumes.hold_instance() {
            if let Some(nc) = nodeclaim {
                self.termination_conditions(nc, Stage::Drained(volumes), now).await;
            }
            let names: Vec<&str> = pending.iter().filter_map(|a| a.metadata.name.as_deref()).collect();
            if self.awaiting_volumes.insert(name.clone()) {
                self.act.decided("AwaitingVolumeDetachment", &json!({"node": name, "volumeAttachments": names}));
            }
            let note = format!(
                "Awaiting deletion of bound volumeattachments ({}) (kubectl karpenter explain node {name})",
                pretty_names(&names, 5)
            );
            self.act.event(&node_ref(node), false, "AwaitingVolumeDetachment", note, "Terminate").await;
            return;
        }
        self.awaiting_volumes.remove(&name);
        // upstream `awaitInstanceTermination`: the finalizer stays until the instance is gone.
        if let Some(nc) = nodeclaim {
            match self.delete_instance(nc, now).await {
                None => return,
                Some(Ok(deletion)) => {
                    self.termination_conditions(nc, Stage::InstanceTerminating(Some(volumes)), now).await;
                    if deletion == Deletion::Terminating {
                        return;
                    }
                }
                Some(Err(e)) => {
                    warn!(node = %name, error = %format!("{e:#}"), "instance deletion failed; retried");
                    self.termination_conditions(nc, Stage::Drained(volumes), now).await;
                    return;
                }
            }
        }
        self.act.decided("Drained", &json!({"node": name}));
        let patch = json!({"metadata": {
            "finalizers": without_finalizer(&node.metadata.finalizers),
            "resourceVersion": node.metadata.resource_version,
        }});
        self.act.patch_node(&name, patch).await;
    }
}
