//! The reconcilers: core's decisions applied to the API server and the cloud at real times, as the
//! simulation applies them to its world at simulated times. One loop on the leader reads the
//! cluster view and runs, in upstream's order of concerns:
//!
//! - `instancetype` (upstream AWS `providers.instancetype` and `providers.pricing`): the
//!   region's instance types, zone offerings and prices from the cloud every 12 hours, the
//!   embedded catalogue until it answers;
//! - `nodeclass` (upstream AWS `nodeclass` and `instanceprofile.garbagecollection`): the
//!   EC2NodeClass's status from the provider, its `karpenter.k8s.aws/termination` finalizer
//!   ([`carpentry_core::providers::termination`]), unused instance profiles collected;
//! - `interruption` (upstream AWS `interruption`): the interruption queue's messages, core's
//!   decision for each ([`carpentry_core::providers::interruption`]);
//! - `lifecycle` (upstream `nodeclaim.lifecycle`): the termination finalizer, launch through the
//!   cloud provider with the result cached by NodeClaim UID, registration, initialization,
//!   liveness ([`carpentry_core::nodeclaim::lifecycle`]);
//! - `tagging` (upstream AWS `nodeclaim.tagging`): a registered NodeClaim's instance tagged with
//!   its Node's and NodeClaim's names ([`carpentry_core::providers::tagging`]);
//! - `consistency` (upstream `nodeclaim.consistency`): each Node's capacity against its
//!   NodeClaim's, every 10 minutes ([`carpentry_core::nodeclaim::consistency`]);
//! - `termination` (upstream `node.termination` and the NodeClaim finalizer): the disrupted
//!   taint, drain through the Eviction API in core's tiers ([`carpentry_core::termination`]),
//!   instance deletion, finalizers removed;
//! - `nodepool` (upstream `nodepool.hash`, `.counter`, `.readiness`, `.validation`,
//!   `.registrationhealth`): hash annotations, status conditions and resources
//!   ([`carpentry_core::nodepool`]);
//! - `provisioning` (upstream `provisioner`): the batch window ([`carpentry_core::provisioning`]),
//!   the Synced guard, core's scheduler, NodePool limits re-checked before each create,
//!   nominations;
//! - `disruption` (upstream `disruption`, its queue, `nodeclaim.disruption`, `podevents`,
//!   `expiration`): core's disruption pass every 10 s, validated commands carried out
//!   replacements first ([`carpentry_core::disruption`]);
//! - `garbagecollection` (upstream `nodeclaim.garbagecollection`, AWS `instance.garbagecollection`):
//!   NodeClaims whose instance is gone, instances no NodeClaim has
//!   ([`carpentry_core::nodeclaim::garbagecollection`]).
//!
//! Writes go through [`act::Act`], which in `--dry-run` reports what it would write and writes
//! nothing but events.

pub mod act;
mod consistency;
mod disruption;
mod garbagecollection;
mod instancetype;
mod interruption;
mod lifecycle;
mod nodeclass;
mod nodepool;
mod provisioning;
mod tagging;
mod termination;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use carpentry_core::{Catalogue, HeldDecision};
use tracing::{debug, info, warn};

use crate::cloud::CloudProvider;
use crate::leader::LeaderStatus;
use crate::view::{ClusterView, Loaded};

/// A launch result is cached this long by NodeClaim UID (core's, upstream's).
const LAUNCH_CACHE_TTL: Duration = Duration::from_secs(carpentry_core::nodeclaim::lifecycle::LAUNCH_CACHE_SECONDS);
/// The loop's cadence when nothing in the view changes.
const TICK: Duration = Duration::from_secs(1);

/// When the reconcile loop last began an iteration (epoch seconds): liveness. Every API and cloud
/// call a pass makes is bounded, so a loop that stops beginning iterations is stuck or dead.
#[derive(Debug, Clone, Default)]
pub struct Progress(Arc<AtomicI64>);

impl Progress {
    fn mark(&self, now: i64) {
        self.0.store(now, Ordering::Release);
    }

    pub fn last(&self) -> i64 {
        self.0.load(Ordering::Acquire)
    }
}

/// Everything the reconcilers share.
pub struct Reconciler<P: CloudProvider> {
    pub act: act::Act,
    pub view: Arc<ClusterView>,
    pub cloud: P,
    pub leader: LeaderStatus,
    pub region: String,
    /// The embedded catalogue until the provider's refresh answers, then the cloud's.
    pub catalogue: Arc<Catalogue>,
    /// Launch results by NodeClaim UID, so that a failed status write never launches twice.
    launched: HashMap<String, (carpentry_core::nodeclaim::lifecycle::Instance, Instant)>,
    /// Launches that failed for a reason other than capacity, by NodeClaim UID.
    launch_failures: HashMap<String, lifecycle::LaunchFailure>,
    provisioning: provisioning::State,
    disruption: disruption::State,
    gc: garbagecollection::State,
    consistency: consistency::State,
    /// Pods a PodDisruptionBudget refused to evict: when to try again, and the backoff (pruned to
    /// the pods that still exist).
    evictions: HashMap<carpentry_core::pod::PodRef, (Instant, Duration)>,
    /// Instances the cloud said are still terminating, by provider ID: when to ask again (epoch
    /// seconds; pruned to the NodeClaims that exist).
    instance_checks: HashMap<String, i64>,
    /// When the loop started (the batcher's clock counts milliseconds from it).
    epoch: Instant,
    /// When NodePool usage was last counted (epoch seconds).
    nodepool_counted: i64,
    /// Objects left out of the view, each with its problems as last reported.
    skipped: BTreeMap<String, String>,
    /// Each NodePool's last launch-and-registration outcomes, by UID (upstream keeps them in
    /// memory too: `state/nodepoolhealth`).
    registration_health: HashMap<String, carpentry_core::nodepool::registrationhealth::Tracker>,
    /// Drained nodes whose instance waits for volume attachments (the decision is logged once).
    awaiting_volumes: HashSet<String>,
    nodeclass: nodeclass::State,
    tagging: tagging::State,
    interruption: interruption::State,
    instancetype: instancetype::State,
    progress: Progress,
}

impl<P: CloudProvider> Reconciler<P> {
    pub fn new(act: act::Act, view: Arc<ClusterView>, cloud: P, leader: LeaderStatus, region: String) -> Self {
        Reconciler {
            act,
            view,
            cloud,
            leader,
            region,
            catalogue: Arc::new(Catalogue::embedded().clone()),
            launched: HashMap::new(),
            launch_failures: HashMap::new(),
            provisioning: provisioning::State::default(),
            disruption: disruption::State::default(),
            gc: garbagecollection::State::default(),
            consistency: consistency::State::default(),
            evictions: HashMap::new(),
            instance_checks: HashMap::new(),
            epoch: Instant::now(),
            nodepool_counted: i64::MIN / 2,
            skipped: BTreeMap::new(),
            registration_health: HashMap::new(),
            awaiting_volumes: HashSet::new(),
            nodeclass: nodeclass::State::default(),
            tagging: tagging::State::default(),
            interruption: interruption::State::default(),
            instancetype: instancetype::State::default(),
            progress: {
                let progress = Progress::default();
                progress.mark(crate::clock::now_seconds());
                progress
            },
        }
    }

    /// The loop's liveness, for `/healthz`.
    pub fn progress(&self) -> Progress {
        self.progress.clone()
    }

    /// Milliseconds since the loop started.
    fn millis(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Runs until `shutdown`: a pass on every change of the view, and at least every second.
    pub async fn run(mut self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let changed = self.view.changes();
        loop {
            tokio::select! {
                _ = changed.notified() => {}
                _ = tokio::time::sleep(TICK) => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            self.progress.mark(crate::clock::now_seconds());
            // Only the leader acts (the follower keeps its view warm).
            if !self.leader.leading() || !self.view.unsynced().is_empty() {
                continue;
            }
            let loaded = match self.view.load() {
                Ok(loaded) => loaded,
                Err(e) => {
                    warn!(error = %carpentry_core::error_chain(&e), "the cluster view does not load; nothing is decided");
                    continue;
                }
            };
            self.report_skipped(&loaded).await;
            self.pass(&loaded).await;
        }
    }

    async fn pass(&mut self, loaded: &Loaded) {
        let (m, live) = (loaded.manifests(), &loaded.live);
        // A Node or NodeClaim that does not load leaves the capacity unknown: counting it,
        // launching beside it or collecting its instance would be decided on a partial view.
        if live.holding_back(HeldDecision::Any).is_some() {
            return;
        }
        let now = crate::clock::now_seconds();
        self.launched.retain(|_, (_, at)| at.elapsed() < LAUNCH_CACHE_TTL);
        self.launch_failures.retain(|uid, _| m.nodeclaims.iter().any(|nc| nc.metadata.uid.as_deref() == Some(uid)));
        self.refresh_catalogue().await;
        self.nodeclasses(m).await;
        self.interruptions(m).await;
        self.nodepools(m, &live.invalid_nodepools, now).await;
        for nc in &m.nodeclaims {
            if nc.metadata.deletion_timestamp.is_some() {
                self.finalize_nodeclaim(m, nc, now).await;
            } else {
                self.lifecycle(m, nc, now).await;
            }
        }
        self.tag_instances(m).await;
        self.consistency(m, now).await;
        self.awaiting_volumes.retain(|n| m.nodes.iter().any(|node| node.metadata.name.as_deref() == Some(n)));
        if !self.evictions.is_empty() {
            let pods: HashSet<carpentry_core::pod::PodRef> =
                m.pods.iter().map(carpentry_core::pod::PodRef::of).collect();
            self.evictions.retain(|r, _| pods.contains(r));
        }
        self.instance_checks
            .retain(|id, _| m.nodeclaims.iter().any(|nc| nc.status.as_ref().is_some_and(|s| s.provider_id == *id)));
        for node in &m.nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            // A node with a pod or volume attachment that does not load is not drained: that pod
            // would go unevicted, that volume unwaited for.
            if node.metadata.deletion_timestamp.is_some() && live.holding_back(HeldDecision::Drain(name)).is_none() {
                self.terminate_node(m, node, now).await;
            }
        }
        self.provision(m, now).await;
        // Disruption decides which pods a node can shed: it waits for a whole view of them.
        if live.holding_back(HeldDecision::Disruption).is_none() {
            self.disruption(m, now).await;
        }
        self.garbage_collect(m, now).await;
        self.collect_nodeclass_garbage(m, now).await;
        debug!("pass done");
    }

    /// Says once, in the log and in a Warning event on the object, what is left out of the view
    /// and what that holds back; and when it loads again.
    async fn report_skipped(&mut self, loaded: &Loaded) {
        let mut skipped = BTreeMap::new();
        for s in &loaded.live.skipped {
            let object = s.object.as_ref().map_or_else(|| format!("document {}", s.document), ToString::to_string);
            let summary = s.summary();
            if self.skipped.get(&object) != Some(&summary) {
                let held = s.held_back();
                warn!(%object, gap = ?s.gap, problems = %summary, held = %held, "left out of the view: it does not load");
                if let Some(on) = loaded.reference(s) {
                    let kind = on.kind.as_deref().unwrap_or("object");
                    let note = format!("carpentry cannot read this {kind} ({summary}): {held}");
                    self.act.event(on, true, "InvalidObject", note, "Read").await;
                }
            }
            skipped.insert(object, summary);
        }
        for object in self.skipped.keys().filter(|o| !skipped.contains_key(*o)) {
            info!(%object, "loads again");
        }
        self.skipped = skipped;
    }
}
