//! upstream `provisioner`: pods kube-scheduler marked unschedulable (and pods of nodes being
//! deleted) open core's batch window (core's rule: [`Triggers`]; [`Batcher`]: 1 s idle, 10 s at
//! most); when it closes, and
//! the view is synced (upstream `Synced`: everything listed, every NodeClaim launched, every
//! NodeClaim this controller created seen back), core's scheduler runs on the view. Each planned
//! NodeClaim is created after the NodePool's limits are checked again; the pods get `Nominated`
//! events, and pods core cannot place get `FailedScheduling` with core's headline. Every event
//! ends with the command that explains it.

use std::collections::BTreeMap;

use carpentry_core::manifest::Manifests;
use carpentry_core::pod::{is_provisionable, PodRef};
use carpentry_core::provisioning::{self, Batcher, Triggers, BATCH_IDLE_MILLIS, BATCH_MAX_MILLIS};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use tracing::{info, warn};

use super::act::{nodepool_ref, pod_ref};
use super::Scheduling;
use crate::cloud::CloudProvider;

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

impl<P: CloudProvider> Scheduling<P> {
    pub(super) async fn provision(&mut self, m: &Manifests, now: i64) {
        let ms = self.millis();
        let awaited = self.settle_created(m, AWAIT_CREATED_MILLIS);
        let st = &mut self.provisioning;
        if st.triggers.observe(&m.pods, &m.nodes, &m.pdbs, ms, now) {
            st.batcher.trigger(ms);
        }
        let Some(deadline) = st.batcher.deadline(BATCH_IDLE_MILLIS, BATCH_MAX_MILLIS) else { return };
        if ms < deadline {
            return;
        }
        if let Err(not_synced) = carpentry_core::state::synced(awaited.as_deref(), &m.nodeclaims) {
            let why = not_synced.to_string();
            // upstream `Synced`: never decide on a view that may miss capacity (no runaway).
            if st.waiting_for.as_ref() != Some(&why) {
                info!(waiting_for = %why, "provisioning waits for the view to settle");
                st.waiting_for = Some(why);
            }
            return;
        }
        st.waiting_for = None;
        st.batcher.close();
        self.round(m, now).await;
    }

    async fn round(&mut self, m: &Manifests, now: i64) {
        // kube-scheduler has not given up on a pending pod that is not provisionable yet: leave it
        // to kube-scheduler, as upstream does.
        let mut view = m.clone();
        view.pods.retain(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() || is_provisionable(p));
        let prepared = match carpentry_core::input_from_manifests(&view, &self.catalogue, Some(&self.region)) {
            Ok(p) => p,
            Err(e) => {
                warn!(error = %carpentry_core::error_chain(&e), "the provisioning round cannot run");
                return;
            }
        };
        let mut input = prepared.input;
        input.options.now = Some(now);
        // Offerings the cloud just said it has no capacity for are planned with by no one
        // (upstream: the instance type provider lists them unavailable).
        input.unavailable_offerings = self.cloud.unavailable_offerings(&self.catalogue, &self.region);
        let results = carpentry_core::schedule(&input);
        let pods: BTreeMap<PodRef, &Pod> = m.pods.iter().map(|p| (PodRef::of(p), p)).collect();
        info!(
            nodeclaims = results.nodeclaims.len(),
            existing = results.existing_nodes.iter().map(|e| e.pods.len()).sum::<usize>(),
            unschedulable = results.unschedulable.len(),
            "provisioning round"
        );
        // The NodePools' limits, in the round's order (each planned NodeClaim counts against the
        // next); then the creates of the round at once, as upstream's `CreateNodeClaims`
        // (`workqueue.ParallelizeUntil` over all of them): a round of many NodeClaims waits for
        // the slowest create, not for their sum. The client's rate limit paces them.
        let mut nodeclaims = m.nodeclaims.clone();
        let mut creates = Vec::new();
        for planned in &results.nodeclaims {
            let Some(np_input) = input.nodepools.iter().find(|n| n.nodepool.name() == planned.nodepool) else {
                continue;
            };
            let nodepool = &np_input.nodepool;
            let class = m.nodeclass_for(nodepool).map(|c| c.spec.clone()).unwrap_or_default();
            if let Some(over) = provisioning::exceeded(nodepool, &nodeclaims) {
                self.act.decided("LimitExceeded", &json!(over));
                for r in &planned.pods {
                    if let Some(pod) = pods.get(r) {
                        let note = format!("{over}; not creating a NodeClaim for this pod ({})", explain(r));
                        self.act.event(&pod_ref(pod), true, "FailedScheduling", note, "Provision").await;
                    }
                }
                continue;
            }
            let nc = provisioning::nodeclaim_for(planned, nodepool, &class);
            nodeclaims.push(nc.clone());
            creates.push((planned, nc));
        }
        // The futures made first: a stream over a closure trips the Send check of the task's future.
        let pending: Vec<_> = creates.iter().map(|(_, nc)| self.act.create_nodeclaim(nc)).collect();
        let outcomes: Vec<_> = futures::stream::iter(pending).buffered(CONCURRENT_CREATES).collect().await;
        for ((planned, nc), outcome) in creates.iter().zip(outcomes) {
            let detail = json!({
                "nodepool": planned.nodepool, "pods": planned.pods, "instanceTypes": planned.instance_type_options.len(),
                "cheapest": planned.instance_type_options.first(), "launch": planned.launch,
            });
            let target = match outcome {
                Ok(Some(name)) => {
                    self.act.decided("NodeClaimCreated", &detail);
                    self.act.metrics.nodeclaim_created(nc, "provisioned");
                    self.created(name.clone());
                    let nominated = planned.pods.iter().filter_map(|r| pods.get(r)).map(|p| pod_ref(p)).collect();
                    self.nominate(&name, nominated);
                    format!("nodeclaim/{name}")
                }
                Ok(None) => {
                    self.act.decided("NodeClaimCreated", &detail);
                    format!("a new NodeClaim of NodePool {}", planned.nodepool)
                }
                Err(e) => {
                    warn!(nodepool = %planned.nodepool, error = %format!("{e:#}"), "cannot create a NodeClaim");
                    continue;
                }
            };
            for r in &planned.pods {
                if let Some(pod) = pods.get(r) {
                    let note = format!("Pod should schedule on: {target} ({})", explain(r));
                    self.act.event(&pod_ref(pod), false, "Nominated", note, "Provision").await;
                }
            }
        }
        for placement in &results.existing_nodes {
            let kind = if m.nodes.iter().any(|n| n.metadata.name.as_deref() == Some(&placement.name)) {
                // upstream: a node pods are nominated onto is no disruption candidate for a while.
                let until = now + carpentry_core::disruption::orchestration::NOMINATION_SECONDS;
                self.disruption.nominated.insert(placement.name.clone(), until);
                "node"
            } else {
                let nominated = placement.pods.iter().filter_map(|r| pods.get(r)).map(|p| pod_ref(p)).collect();
                self.nominate(&placement.name, nominated);
                "nodeclaim"
            };
            for r in &placement.pods {
                if let Some(pod) = pods.get(r) {
                    let note = format!("Pod should schedule on: {kind}/{} ({})", placement.name, explain(r));
                    self.act.event(&pod_ref(pod), false, "Nominated", note, "Provision").await;
                }
            }
        }
        // A NodePool its own spec keeps out of the round says why (core's notice; upstream logs it).
        for skipped in &results.skipped_nodepools {
            let Some(notice) = skipped.notice(&input) else { continue };
            if let Some(np) = m.nodepools.iter().find(|np| np.name() == skipped.nodepool) {
                self.act.event(&nodepool_ref(np), true, notice.reason, notice.message, "Provision").await;
            }
        }
        for u in &results.unschedulable {
            self.act.decided("FailedScheduling", &json!({"pod": u.pod, "headline": u.explanation.headline()}));
            if let Some(pod) = pods.get(&u.pod) {
                let note = format!("{} ({})", u.explanation.headline(), explain(&u.pod));
                self.act.event(&pod_ref(pod), true, "FailedScheduling", note, "Provision").await;
            }
        }
    }
}
