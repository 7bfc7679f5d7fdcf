//! upstream `provisioner`: pods kube-scheduler marked unschedulable (and pods of nodes being
//! deleted) open core's batch window (core's rule: [`Triggers`]; [`Batcher`]: 1 s idle, 10 s at
//! most); when it closes, and
//! the view is synced (upstream `Synced`: everything listed, every NodeClaim launched, every
//! NodeClaim this controller created seen back), core's scheduler runs on the view. Each planned
//! NodeClaim is created after the NodePool's limits are checked again; the pods get `Nominated`
//! events, and pods core cannot place get `FailedScheduling` with core's headline. Every event
//! ends with the command that explains it.

use std::collections::BTreeMap;
use std::sync::Arc;

use carpentry_core::api::NodeClaim;
use carpentry_core::manifest::Manifests;
use carpentry_core::pod::{is_provisionable, PodRef};
use carpentry_core::provisioning::{self, Batcher, Triggers, BATCH_IDLE_MILLIS, BATCH_MAX_MILLIS};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use serde_json::json;
use tracing::{info, warn};

use super::act::{nodepool_ref, pod_ref};
use super::Scheduling;
use crate::cloud::CloudProvider;
use crate::view::Loaded;

/// How long a created NodeClaim may take to appear in the view before rounds go on without it
/// (core's, as disruption waits for its replacements).
const AWAIT_CREATED_MILLIS: u64 = carpentry_core::disruption::orchestration::AWAIT_OWN_WRITE_SECONDS as u64 * 1000;
/// Creates of one round in flight at once (upstream: all of them; bounded here so that a round of
/// thousands holds a bounded number of requests, which the client's rate limit paces anyway).
const CONCURRENT_CREATES: usize = 64;

#[derive(Debug, Default)]
pub(super) struct State {
    batcher: Batcher,
    /// What opens the batch window (core's rule).
    triggers: Triggers,
    /// Why the last round waited (logged when it changes).
    waiting_for: Option<String>,
}

fn explain(pod: &PodRef) -> String {
    format!("kubectl karpenter explain pod {pod}")
}

/// What a round decided, taken out of the view so that the view is let go before the round's
/// writes (a round of hundreds of creates and thousands of events takes a while, paced by the
/// client's rate limit, and a view is a copy of the cluster).
/// Pods with what their events are published on.
type PodRefs = Vec<(PodRef, ObjectReference)>;

#[derive(Default)]
struct RoundPlan {
    /// Planned NodeClaims a NodePool's limits refuse: what to log, what to tell their pods.
    refused: Vec<(serde_json::Value, String, PodRefs)>,
    /// NodeClaims to create, in the round's order, with their decision's detail and their pods.
    creates: Vec<Create>,
    /// Pods placed on existing nodes or NodeClaims in flight: (kind, name, pods).
    placements: Vec<(&'static str, String, PodRefs)>,
    /// NodePools their own spec keeps out of the round: the event on each.
    notices: Vec<(ObjectReference, &'static str, String)>,
    /// Pods no NodePool can take: the pod, core's headline, the pod's reference.
    unschedulable: Vec<(PodRef, String, Option<ObjectReference>)>,
}

struct Create {
    nodeclaim: NodeClaim,
    nodepool: String,
    detail: serde_json::Value,
    pods: PodRefs,
}

impl<P: CloudProvider> Scheduling<P> {
    /// Runs a provisioning round on `loaded` when one is due; gives the view back when none ran
    /// (a round lets it go before its writes).
    pub(super) async fn provision(&mut self, loaded: Arc<Loaded>, now: i64) -> Option<Arc<Loaded>> {
        if !self.round_due(loaded.manifests(), now) {
            return Some(loaded);
        }
        let plan = self.plan_round(loaded.manifests(), now);
        drop(loaded);
        if let Some(plan) = plan {
            self.act_round(plan).await;
        }
        None
    }

    /// Whether the batch window has closed on a synced view (and a round is to run now).
    fn round_due(&mut self, m: &Manifests, now: i64) -> bool {
        let ms = self.millis();
        let awaited = self.settle_created(m, AWAIT_CREATED_MILLIS);
        let st = &mut self.provisioning;
        if st.triggers.observe(&m.pods, &m.nodes, &m.pdbs, ms, now) {
            st.batcher.trigger(ms);
        }
        let Some(deadline) = st.batcher.deadline(BATCH_IDLE_MILLIS, BATCH_MAX_MILLIS) else { return false };
        if ms < deadline {
            return false;
        }
        if let Err(not_synced) = carpentry_core::state::synced(awaited.as_deref(), &m.nodeclaims) {
            let why = not_synced.to_string();
            // upstream `Synced`: never decide on a view that may miss capacity (no runaway).
            if st.waiting_for.as_ref() != Some(&why) {
                info!(waiting_for = %why, "provisioning waits for the view to settle");
                st.waiting_for = Some(why);
            }
            return false;
        }
        st.waiting_for = None;
        st.batcher.close();
        true
    }

    /// Core's scheduler on the view, and what follows from its results, without a write.
    fn plan_round(&mut self, m: &Manifests, now: i64) -> Option<RoundPlan> {
        // kube-scheduler has not given up on a pending pod that is not provisionable yet: leave it
        // to kube-scheduler, as upstream does.
        let mut view = m.clone();
        view.pods.retain(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() || is_provisionable(p));
        let prepared = match carpentry_core::input_from_manifests(&view, &self.catalogue, Some(&self.region)) {
            Ok(p) => p,
            Err(e) => {
                warn!(error = %carpentry_core::error_chain(&e), "the provisioning round cannot run");
                return None;
            }
        };
        drop(view);
        let mut input = prepared.input;
        input.options.now = Some(now);
        // Offerings the cloud just said it has no capacity for are planned with by no one
        // (upstream: the instance type provider lists them unavailable).
        input.unavailable_offerings = self.cloud.unavailable_offerings(&self.catalogue, &self.region);
        let started = std::time::Instant::now();
        let results = carpentry_core::schedule(&input);
        self.act.metrics.scheduled("provisioner", started, results.unschedulable.len());
        let pods: BTreeMap<PodRef, &Pod> = m.pods.iter().map(|p| (PodRef::of(p), p)).collect();
        let refs = |list: &[PodRef]| -> PodRefs {
            list.iter().filter_map(|r| pods.get(r).map(|p| (r.clone(), pod_ref(p)))).collect()
        };
        info!(
            nodeclaims = results.nodeclaims.len(),
            existing = results.existing_nodes.iter().map(|e| e.pods.len()).sum::<usize>(),
            unschedulable = results.unschedulable.len(),
            "provisioning round"
        );
        let mut plan = RoundPlan::default();
        // The NodePools' limits, in the round's order (each planned NodeClaim counts against the
        // next).
        let mut nodeclaims = m.nodeclaims.clone();
        for planned in &results.nodeclaims {
            let Some(np_input) = input.nodepools.iter().find(|n| n.nodepool.name() == planned.nodepool) else {
                continue;
            };
            let nodepool = &np_input.nodepool;
            let class = m.nodeclass_for(nodepool).map(|c| c.spec.clone()).unwrap_or_default();
            if let Some(over) = provisioning::exceeded(nodepool, &nodeclaims) {
                plan.refused.push((json!(over), over.to_string(), refs(&planned.pods)));
                continue;
            }
            let nc = provisioning::nodeclaim_for(planned, nodepool, &class);
            nodeclaims.push(nc.clone());
            let detail = json!({
                "nodepool": planned.nodepool, "pods": planned.pods, "instanceTypes": planned.instance_type_options.len(),
                "cheapest": planned.instance_type_options.first(), "launch": planned.launch,
            });
            let pods = refs(&planned.pods);
            plan.creates.push(Create { nodeclaim: nc, nodepool: planned.nodepool.clone(), detail, pods });
        }
        for placement in &results.existing_nodes {
            let placed = refs(&placement.pods);
            let kind = if m.nodes.iter().any(|n| n.metadata.name.as_deref() == Some(&placement.name)) {
                // upstream: a node pods are nominated onto is no disruption candidate for a while.
                let until = now + carpentry_core::disruption::orchestration::NOMINATION_SECONDS;
                self.disruption.nominated.insert(placement.name.clone(), until);
                "node"
            } else {
                self.nominate(&placement.name, placed.iter().map(|(_, p)| p.clone()).collect());
                "nodeclaim"
            };
            plan.placements.push((kind, placement.name.clone(), placed));
        }
        // A NodePool its own spec keeps out of the round says why (core's notice; upstream logs it).
        for skipped in &results.skipped_nodepools {
            let Some(notice) = skipped.notice(&input) else { continue };
            if let Some(np) = m.nodepools.iter().find(|np| np.name() == skipped.nodepool) {
                plan.notices.push((nodepool_ref(np), notice.reason, notice.message));
            }
        }
        for u in &results.unschedulable {
            let pod = pods.get(&u.pod).map(|p| pod_ref(p));
            plan.unschedulable.push((u.pod.clone(), u.explanation.headline(), pod));
        }
        Some(plan)
    }

    /// The round's writes: the creates at once, as upstream's `CreateNodeClaims`
    /// (`workqueue.ParallelizeUntil` over all of them), so that a round of many NodeClaims waits
    /// for the slowest create, not for their sum (the client's rate limit paces them); then the
    /// events.
    async fn act_round(&mut self, plan: RoundPlan) {
        for (over, text, pods) in &plan.refused {
            self.act.decided("LimitExceeded", over);
            for (r, pod) in pods {
                let note = format!("{text}; not creating a NodeClaim for this pod ({})", explain(r));
                self.act.event(pod, true, "FailedScheduling", note, "Provision");
            }
        }
        // The futures made first: a stream over a closure trips the Send check of the task's future.
        let pending: Vec<_> = plan.creates.iter().map(|c| self.act.create_nodeclaim(&c.nodeclaim)).collect();
        let outcomes: Vec<_> = futures::stream::iter(pending).buffered(CONCURRENT_CREATES).collect().await;
        for (create, outcome) in plan.creates.iter().zip(outcomes) {
            let target = match outcome {
                Ok(Some(name)) => {
                    self.act.decided("NodeClaimCreated", &create.detail);
                    self.act.metrics.nodeclaim_created(&create.nodeclaim, "provisioned");
                    self.created(name.clone());
                    self.nominate(&name, create.pods.iter().map(|(_, p)| p.clone()).collect());
                    format!("nodeclaim/{name}")
                }
                Ok(None) => {
                    self.act.decided("NodeClaimCreated", &create.detail);
                    format!("a new NodeClaim of NodePool {}", create.nodepool)
                }
                Err(e) => {
                    warn!(nodepool = %create.nodepool, error = %format!("{e:#}"), "cannot create a NodeClaim");
                    continue;
                }
            };
            for (r, pod) in &create.pods {
                let note = format!("Pod should schedule on: {target} ({})", explain(r));
                self.act.event(pod, false, "Nominated", note, "Provision");
            }
        }
        for (kind, name, pods) in &plan.placements {
            for (r, pod) in pods {
                let note = format!("Pod should schedule on: {kind}/{name} ({})", explain(r));
                self.act.event(pod, false, "Nominated", note, "Provision");
            }
        }
        for (nodepool, reason, message) in plan.notices {
            self.act.event(&nodepool, true, reason, message, "Provision");
        }
        for (r, headline, pod) in &plan.unschedulable {
            self.act.decided("FailedScheduling", &json!({"pod": r, "headline": headline}));
            if let Some(pod) = pod {
                let note = format!("{headline} ({})", explain(r));
                self.act.event(pod, true, "FailedScheduling", note, "Provision");
            }
        }
    }
}
