//! The reconcilers: core's decisions applied to the API server and the cloud at real times, as the
//! simulation applies them to its world at simulated times. A loader turns the cluster view into
//! core's manifests on every change while this replica leads; each concern runs as its own task
//! on the latest view, so that a slow or hung call in one (a CreateFleet, a DescribeInstances)
//! delays no other (a drain, the interruption queue). The concerns, after upstream's controllers:
//!
//! - [`instancetype::Catalogues`] (upstream AWS `providers.instancetype` and `providers.pricing`):
//!   the region's instance types, zone offerings and prices from the cloud every 12 hours, the
//!   embedded catalogue until it answers; every other concern reads the latest;
//! - [`nodeclass::NodeClasses`] (upstream AWS `nodeclass`), a per-object reconciler
//!   ([`perobject`]: each EC2NodeClass on its own, requeued at core's cadence, failures after
//!   upstream's backoff): the EC2NodeClass's status from the provider, its
//!   `karpenter.k8s.aws/termination` finalizer ([`carpentry_core::providers::termination`]);
//!   [`nodeclass::Collection`] (upstream AWS `instanceprofile.garbagecollection`): unused
//!   instance profiles collected;
//! - [`interruption::Interruptions`] (upstream AWS `interruption`): the interruption queue's
//!   messages, core's decision for each ([`carpentry_core::providers::interruption`]);
//! - [`lifecycle::Lifecycle`] (upstream `nodeclaim.lifecycle`), a per-object reconciler: the
//!   termination finalizer, launches through the cloud provider (at most core's
//!   `MAX_CONCURRENT_LAUNCHES` NodeClaims at once, the result cached by NodeClaim UID),
//!   registration, initialization, liveness ([`carpentry_core::nodeclaim::lifecycle`]), and a
//!   deleting NodeClaim's Nodes, instance and finalizer;
//!   [`consistency::Consistency`] (upstream `nodeclaim.consistency`), a per-object reconciler:
//!   each Node's capacity against its NodeClaim's, every 10 minutes
//!   ([`carpentry_core::nodeclaim::consistency`]);
//! - [`nodeclaimdisruption::NodeClaimDisruption`] (upstream `nodeclaim.disruption`), a per-object
//!   reconciler: the `Drifted` and `Consolidatable` conditions; [`podevents::PodEvents`] (upstream
//!   `nodeclaim.podevents`): `lastPodEventTime` ([`carpentry_core::nodeclaim::disruption`]);
//! - [`tagging::Tagging`] (upstream AWS `nodeclaim.tagging`), a per-object reconciler: a
//!   registered NodeClaim's instance tagged with its Node's and NodeClaim's names
//!   ([`carpentry_core::providers::tagging`]);
//! - [`termination::NodeTermination`] (upstream `node.termination`), a per-object reconciler: a
//!   deleting Node's disrupted taint, drain through the Eviction API in core's tiers
//!   ([`carpentry_core::termination`]), instance deletion, finalizer removed;
//!   the NodeClaim finalizer is lifecycle's (above), as upstream's;
//! - [`nodepool::NodePools`] (upstream `nodepool.hash`, `.counter`, `.readiness`, `.validation`,
//!   `.registrationhealth`), a per-object reconciler: each NodePool's hash annotations, status
//!   conditions and resources ([`carpentry_core::nodepool`]);
//! - [`Scheduling`] (upstream `provisioner` and `disruption`), in this order on each
//!   view: the batch window ([`carpentry_core::provisioning`]), the
//!   Synced guard, core's scheduler, NodePool limits re-checked before each create, nominations;
//!   core's disruption pass every 10 s, validated commands carried out replacements first
//!   ([`carpentry_core::disruption`]). One task, because a round's nominations and creates are
//!   what the next disruption pass must see (upstream shares them through `state.Cluster`). A
//!   round decides on its view, lets it go, then writes; disruption then decides on the latest
//!   view (the Synced guard waits for the round's NodeClaims);
//! - [`garbagecollection::Collection`] (upstream `nodeclaim.garbagecollection`, AWS
//!   `instance.garbagecollection`): NodeClaims whose instance is gone, instances no NodeClaim has
//!   ([`carpentry_core::nodeclaim::garbagecollection`]).
//!
//! Writes go through [`act::Act`], which in `--dry-run` reports what it would write and writes
//! nothing but events.

pub mod act;
mod consistency;
mod disruption;
pub mod events;
mod garbagecollection;
mod instancetype;
mod interruption;
mod lifecycle;
mod nodeclaimdisruption;
mod nodeclass;
mod nodepool;
mod perobject;
mod podevents;
mod provisioning;
mod tagging;
mod termination;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::ops::DerefMut;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use carpentry_core::manifest::Manifests;
use carpentry_core::nodepool::registrationhealth::Tracker;
use carpentry_core::{Catalogue, HeldDecision};
use k8s_openapi::api::core::v1::ObjectReference;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, error, info, warn};

use crate::cloud::CloudProvider;
use crate::leader::LeaderStatus;
use crate::view::{ClusterView, Loaded};

/// The loader's cadence when nothing in the view changes, and each concern's at least.
const TICK: Duration = Duration::from_secs(1);
/// The loader's name in [`Progress`].
const LOADER: &str = "view";

/// Liveness: when each task (the loader and every concern) last began a pass, and when each
/// reconcile under way began (epoch seconds). Every API and cloud call is bounded, so a task that
/// stops beginning passes, or a reconcile that does not end, is stuck.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    passes: Arc<Mutex<BTreeMap<&'static str, i64>>>,
    running: Arc<Mutex<UnderWay>>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

/// The reconciles under way: (controller, a number of its own) → (object, when it began).
type UnderWay = BTreeMap<(&'static str, u64), (String, i64)>;

/// What has gone longest without progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stalest {
    /// The task that began a pass longest ago.
    Pass { task: &'static str, began: i64 },
    /// A reconcile under way that began before that.
    Reconcile { controller: &'static str, object: String, began: i64 },
}

impl Stalest {
    pub fn began(&self) -> i64 {
        match self {
            Stalest::Pass { began, .. } | Stalest::Reconcile { began, .. } => *began,
        }
    }
}

/// A reconcile under way, in [`Progress`] until it is dropped.
pub(super) struct Running {
    running: Arc<Mutex<UnderWay>>,
    key: (&'static str, u64),
}

impl Drop for Running {
    fn drop(&mut self) {
        self.running.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.key);
    }
}

impl Progress {
    fn mark(&self, task: &'static str, now: i64) {
        self.passes.lock().unwrap_or_else(PoisonError::into_inner).insert(task, now);
    }

    /// `controller`'s reconcile of `object`, begun `now`, under way until the guard drops.
    pub(super) fn running(&self, controller: &'static str, object: &str, now: i64) -> Running {
        let key = (controller, self.next.fetch_add(1, Ordering::Relaxed));
        self.running.lock().unwrap_or_else(PoisonError::into_inner).insert(key, (object.to_string(), now));
        Running { running: self.running.clone(), key }
    }

    /// Each task and when it last began a pass, by name.
    pub fn marks(&self) -> Vec<(&'static str, i64)> {
        self.passes.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|(task, at)| (*task, *at)).collect()
    }

    /// Each controller's oldest reconcile under way: the object and when it began, by controller.
    pub fn oldest_reconciles(&self) -> Vec<(&'static str, String, i64)> {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let mut oldest: BTreeMap<&'static str, (&String, i64)> = BTreeMap::new();
        for ((controller, _), (object, began)) in running.iter() {
            let entry = oldest.entry(controller).or_insert((object, *began));
            if *began < entry.1 {
                *entry = (object, *began);
            }
        }
        oldest.into_iter().map(|(c, (o, b))| (c, o.clone(), b)).collect()
    }

    /// The task that began a pass longest ago, or a reconcile under way since before that.
    pub fn stalest(&self) -> Option<Stalest> {
        let pass = {
            let marks = self.passes.lock().unwrap_or_else(PoisonError::into_inner);
            marks.iter().min_by_key(|(_, at)| **at).map(|(task, at)| Stalest::Pass { task, began: *at })
        };
        let reconcile = self
            .oldest_reconciles()
            .into_iter()
            .min_by_key(|(_, _, began)| *began)
            .map(|(controller, object, began)| Stalest::Reconcile { controller, object, began });
        match (pass, reconcile) {
            (Some(p), Some(r)) => Some(if r.began() < p.began() { r } else { p }),
            (p, r) => p.or(r),
        }
    }
}

/// What the concerns share across their tasks.
struct Shared {
    /// The latest catalogue: the embedded one until the provider's refresh answers.
    catalogue: RwLock<Arc<Catalogue>>,
    /// The first refresh has been tried (answered, failed, or the provider has none): until then
    /// nothing is planned or launched on the embedded catalogue's types and prices.
    catalogue_settled: AtomicBool,
    /// NodeClaims (by UID) whose launch is under way: their finalizer waits for it, so that an
    /// instance it starts is written onto the NodeClaim and terminated with it.
    launches_under_way: Mutex<HashSet<String>>,
    /// Each NodePool's last launch-and-registration outcomes, by UID (upstream keeps them in
    /// memory too: `state/nodepoolhealth`); lifecycle records them, the NodePool status reads.
    registration_health: Mutex<HashMap<String, Tracker>>,
    /// NodeClaims created (by a provisioning round or as a disruption's replacement) and not yet
    /// seen in the view, with when (milliseconds since start): upstream `Synced` waits for them.
    awaiting_created: Mutex<Vec<(String, u64)>>,
    /// The pods a provisioning round nominated onto each NodeClaim it created or placed them on
    /// (by NodeClaim name, with when): a launch that fails says so on them too.
    nominations: Mutex<HashMap<String, (Vec<ObjectReference>, Instant)>>,
    /// When the reconcilers started (the batcher's clock counts milliseconds from it).
    epoch: Instant,
    /// Since when the view has not been synced (upstream's `unsyncedStartTime`), for the metric.
    unsynced_since: Mutex<Option<Instant>>,
}

/// What every concern reads and writes through, with this pass's catalogue.
pub struct Common<P: CloudProvider> {
    pub act: act::Act,
    pub cloud: Arc<P>,
    pub region: String,
    /// The catalogue as of this pass (the latest refresh when the pass began).
    pub catalogue: Arc<Catalogue>,
    /// Whether, when the pass began, the first refresh had been tried (so that `catalogue` is
    /// the region's, if the provider has one).
    catalogue_settled: bool,
    shared: Arc<Shared>,
}

impl<P: CloudProvider> Clone for Common<P> {
    fn clone(&self) -> Self {
        Common {
            act: self.act.clone(),
            cloud: self.cloud.clone(),
            region: self.region.clone(),
            catalogue: self.catalogue.clone(),
            catalogue_settled: self.catalogue_settled,
            shared: self.shared.clone(),
        }
    }
}

#[cfg(test)]
impl Common<crate::cloud::kwok::Kwok> {
    /// The handles of reconcilers on `api`, a test's fake API server, with the kwok provider
    /// (on the same server), leading.
    fn on_fake_api(api: &crate::testing::FakeApi, dry_run: bool) -> Common<crate::cloud::kwok::Kwok> {
        let client = api.client();
        let leader = crate::leader::Leader::unelected().status();
        let act = act::Act::new(client.clone(), dry_run, "test".into(), crate::metrics::Metrics::default(), leader);
        let cloud = crate::cloud::kwok::Kwok::new(client, "us-east-1".into(), Duration::from_secs(1));
        Common::new(act, cloud, "us-east-1".into())
    }
}

impl<P: CloudProvider> Common<P> {
    /// The handles of a new set of reconcilers: the embedded catalogue until the first refresh.
    fn new(act: act::Act, cloud: P, region: String) -> Self {
        let catalogue = Arc::new(Catalogue::embedded().clone());
        let shared = Shared {
            catalogue: RwLock::new(catalogue.clone()),
            catalogue_settled: AtomicBool::new(false),
            launches_under_way: Mutex::new(HashSet::new()),
            registration_health: Mutex::new(HashMap::new()),
            awaiting_created: Mutex::new(Vec::new()),
            nominations: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
            unsynced_since: Mutex::new(None),
        };
        Common { act, cloud: Arc::new(cloud), region, catalogue, catalogue_settled: false, shared: Arc::new(shared) }
    }

    /// Records that `pods` should schedule on NodeClaim `nodeclaim` (a provisioning round's
    /// nomination), so that a launch that fails says so on them too.
    fn nominate(&self, nodeclaim: &str, pods: Vec<ObjectReference>) {
        if pods.is_empty() {
            return;
        }
        let mut nominations = self.shared.nominations.lock().unwrap_or_else(PoisonError::into_inner);
        let (nominated, at) = nominations.entry(nodeclaim.to_string()).or_insert_with(|| (Vec::new(), Instant::now()));
        for pod in pods {
            if !nominated.contains(&pod) {
                nominated.push(pod);
            }
        }
        *at = Instant::now();
    }

    /// The pods nominated onto `nodeclaim`; forgotten with `forget` (it launched, or is gone).
    fn nominated(&self, nodeclaim: &str, forget: bool) -> Vec<ObjectReference> {
        let mut nominations = self.shared.nominations.lock().unwrap_or_else(PoisonError::into_inner);
        if forget {
            nominations.remove(nodeclaim).map(|(pods, _)| pods).unwrap_or_default()
        } else {
            nominations.get(nodeclaim).map(|(pods, _)| pods.clone()).unwrap_or_default()
        }
    }

    /// Milliseconds since the reconcilers started.
    fn millis(&self) -> u64 {
        self.shared.epoch.elapsed().as_millis() as u64
    }

    /// A NodeClaim was created: rounds wait until the view shows it (upstream `Synced`).
    fn created(&self, name: String) {
        let at = self.millis();
        self.shared.awaiting_created.lock().unwrap_or_else(PoisonError::into_inner).push((name, at));
    }

    /// Forgets the created NodeClaims `m` shows and those awaited longer than `bound_millis`;
    /// the first one still awaited, if any.
    fn settle_created(&self, m: &Manifests, bound_millis: u64) -> Option<String> {
        let now = self.millis();
        let mut awaiting = self.shared.awaiting_created.lock().unwrap_or_else(PoisonError::into_inner);
        awaiting.retain(|(name, at)| {
            !m.nodeclaims.iter().any(|nc| nc.name() == name) && now.saturating_sub(*at) < bound_millis
        });
        awaiting.first().map(|(name, _)| name.clone())
    }

    /// The latest catalogue, once the first refresh has been tried (until then nothing is
    /// launched on the embedded catalogue's types and prices).
    fn settled_catalogue(&self) -> Option<Arc<Catalogue>> {
        // The flag first: set after the catalogue is written, it vouches for what is read next.
        if !self.shared.catalogue_settled.load(Ordering::Acquire) {
            return None;
        }
        Some(self.shared.catalogue.read().unwrap_or_else(PoisonError::into_inner).clone())
    }

    /// Marks the NodeClaim `uid`'s launch under way, or settles it (its instance written onto
    /// it, or none launched): while under way, the NodeClaim is not finalized, so that an
    /// instance it starts is written onto it and terminated with it.
    fn launch_under_way_set(&self, uid: &str, under_way: bool) {
        let mut launches = self.shared.launches_under_way.lock().unwrap_or_else(PoisonError::into_inner);
        if under_way {
            launches.insert(uid.to_string());
        } else {
            launches.remove(uid);
        }
    }

    /// Whether the NodeClaim `uid`'s launch is under way.
    fn launch_under_way(&self, uid: &str) -> bool {
        self.shared.launches_under_way.lock().unwrap_or_else(PoisonError::into_inner).contains(uid)
    }

    /// upstream `Cluster.Synced`'s gauges: `synced` now, the nodes the view holds (`None`: not
    /// known, the last count stays), and for how long it has not been synced.
    fn report_cluster_state(&self, synced: bool, nodes: Option<usize>) {
        let mut since = self.shared.unsynced_since.lock().unwrap_or_else(PoisonError::into_inner);
        let unsynced_for = match (synced, *since) {
            (true, _) => {
                *since = None;
                0.0
            }
            (false, Some(at)) => at.elapsed().as_secs_f64(),
            (false, None) => {
                *since = Some(Instant::now());
                0.0
            }
        };
        self.act.metrics.cluster_state(synced, nodes, unsynced_for);
    }

    /// upstream `Cluster.Synced`: every NodeClaim this controller created is in the view and every
    /// NodeClaim has launched (a count taken earlier could write a NodePool's usage too low).
    fn synced(&self, m: &Manifests) -> bool {
        let awaiting = self.shared.awaiting_created.lock().unwrap_or_else(PoisonError::into_inner);
        carpentry_core::state::synced(awaiting.first().map(|(name, _)| name.as_str()), &m.nodeclaims).is_ok()
    }
}

/// One concern: its own state around the [`Common`] handles, a pass over each new view.
trait Concern<P: CloudProvider>: DerefMut<Target = Common<P>> + Send + 'static {
    /// Its name in logs and in `/healthz`.
    const NAME: &'static str;

    /// One pass over the view `loaded`. It is the concern's to hold, and to let go before slow
    /// calls where it can (provisioning's round and pod-event marks do: their writes are paced by
    /// the client's rate limit), since each view is a copy of the cluster and the loader
    /// publishes a new one on every change.
    fn pass(&mut self, loaded: Arc<Loaded>, now: i64) -> impl Future<Output = ()> + Send;

    /// At shutdown, on the latest view: what must not be lost with the process.
    fn stop(&mut self, _: &Manifests) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// `Deref` to [`Common`] for a concern's struct (its field `common`), so that its methods read
/// `self.act`, `self.cloud` and `self.catalogue` as they read their own state.
macro_rules! concern_common {
    ($concern:ident) => {
        impl<P: CloudProvider> std::ops::Deref for $concern<P> {
            type Target = $crate::reconcile::Common<P>;
            fn deref(&self) -> &$crate::reconcile::Common<P> {
                &self.common
            }
        }
        impl<P: CloudProvider> std::ops::DerefMut for $concern<P> {
            fn deref_mut(&mut self) -> &mut $crate::reconcile::Common<P> {
                &mut self.common
            }
        }
    };
}
use concern_common;

/// Provisioning and disruption: one task (see the module's notes).
struct Scheduling<P: CloudProvider> {
    common: Common<P>,
    provisioning: provisioning::State,
    disruption: disruption::State,
    /// The views the loader publishes: disruption decides on the latest one after a provisioning
    /// round, which let its own view go before its creates.
    views: watch::Receiver<Option<Arc<Loaded>>>,
}
concern_common!(Scheduling);

impl<P: CloudProvider> Concern<P> for Scheduling<P> {
    const NAME: &'static str = "scheduling";

    async fn pass(&mut self, loaded: Arc<Loaded>, now: i64) {
        if !self.catalogue_settled {
            debug!("scheduling waits for the first instance-type refresh");
            return;
        }
        let (loaded, now) = match self.provision(loaded, now).await {
            Some(kept) => (kept, now),
            // A round let its view go and wrote for a while: the latest view, and the time now
            // (None: nothing to decide on now).
            None => match self.views.borrow().clone() {
                Some(latest) => (latest, crate::clock::now_seconds()),
                None => return,
            },
        };
        let m = loaded.manifests();
        self.report_cluster_state(self.synced(m), Some(carpentry_core::state::node_count(&m.nodeclaims, &m.nodes)));
        // Disruption decides which pods a node can shed: it waits for a whole view of them.
        if loaded.live.holding_back(HeldDecision::Disruption).is_none() {
            self.disruption(loaded.manifests(), now).await;
        }
    }
}

/// Runs `concern` on each view the loader publishes, and at least every [`TICK`], until shutdown.
/// `None` (this replica does not lead, the view is not synced or is held back): nothing is done.
async fn drive<P: CloudProvider, C: Concern<P>>(
    mut concern: C,
    mut views: watch::Receiver<Option<Arc<Loaded>>>,
    progress: Progress,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let now = crate::clock::now_seconds();
        progress.mark(C::NAME, now);
        let loaded = views.borrow_and_update().clone();
        if let Some(loaded) = loaded {
            // The flag first: set after the catalogue is written, it vouches for what is read next.
            concern.catalogue_settled = concern.shared.catalogue_settled.load(Ordering::Acquire);
            let latest = concern.shared.catalogue.read().unwrap_or_else(PoisonError::into_inner).clone();
            concern.catalogue = latest;
            let started = Instant::now();
            concern.pass(loaded, now).await;
            concern.act.metrics.pass(C::NAME, started);
            debug!(concern = C::NAME, "pass done");
        }
        tokio::select! {
            changed = views.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(TICK) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            let latest = views.borrow().clone();
            if let Some(loaded) = latest {
                concern.stop(loaded.manifests()).await;
            }
            return;
        }
    }
}

/// The reconcilers: the view's loader and every concern's task.
/// Reads the cloud provider's unavailable offerings when called.
pub type UnavailableNow = Arc<dyn Fn() -> Vec<carpentry_core::catalogue::UnavailableOffering> + Send + Sync>;

pub struct Reconciler<P: CloudProvider> {
    common: Common<P>,
    view: Arc<ClusterView>,
    leader: LeaderStatus,
    /// Objects left out of the view, each with its problems as last reported.
    skipped: BTreeMap<String, String>,
    progress: Progress,
    /// Where the loader publishes the view to decide on (None while there is none).
    publish: watch::Sender<Option<Arc<Loaded>>>,
}

impl<P: CloudProvider> Reconciler<P> {
    pub fn new(act: act::Act, view: Arc<ClusterView>, cloud: P, leader: LeaderStatus, region: String) -> Self {
        let common = Common::new(act, cloud, region);
        let progress = Progress::default();
        progress.mark(LOADER, crate::clock::now_seconds());
        let (publish, _) = watch::channel(None);
        Reconciler { common, view, leader, skipped: BTreeMap::new(), progress, publish }
    }

    /// The views the loader publishes, for a reader that may take the latest rather than load
    /// one of its own (`/metrics`: each load is a copy of the cluster).
    pub fn views(&self) -> watch::Receiver<Option<Arc<Loaded>>> {
        self.publish.subscribe()
    }

    /// What the cloud provider has found it cannot launch now (its unavailable-offerings cache,
    /// over the latest catalogue), for `/snapshot`: a simulation of the snapshot then avoids what
    /// the controller avoids.
    pub fn unavailable_offerings(&self) -> UnavailableNow {
        let (cloud, shared, region) =
            (self.common.cloud.clone(), self.common.shared.clone(), self.common.region.clone());
        Arc::new(move || {
            let catalogue = shared.catalogue.read().unwrap_or_else(PoisonError::into_inner).clone();
            cloud.unavailable_offerings(&catalogue, &region)
        })
    }

    /// The tasks' liveness, for `/healthz`.
    pub fn progress(&self) -> Progress {
        self.progress.clone()
    }

    /// Runs until `shutdown`: the concerns' tasks, and the loader, which publishes the view on
    /// every change (and every second while the last published was not to be decided on: a
    /// follower's, unsynced, held back). Returns early only when a concern's task ends (a
    /// panic), which the caller treats as fatal.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let publish = self.publish.clone();
        let views = publish.subscribe();
        let mut tasks = JoinSet::new();
        let c = &self.common;
        let (p, s) = (&self.progress, &shutdown);
        tasks.spawn(drive(instancetype::Catalogues::new(c.clone()), views.clone(), p.clone(), s.clone()));
        let metrics = c.act.metrics.clone();
        let nodeclasses = nodeclass::NodeClasses::new(c.clone());
        tasks.spawn(perobject::drive_objects(nodeclasses, metrics, views.clone(), p.clone(), s.clone()));
        tasks.spawn(drive(nodeclass::Collection::new(c.clone()), views.clone(), p.clone(), s.clone()));
        tasks.spawn(drive(interruption::Interruptions::new(c.clone()), views.clone(), p.clone(), s.clone()));
        let lifecycle = lifecycle::Lifecycle::new(c.clone());
        tasks.spawn(perobject::drive_objects(lifecycle, c.act.metrics.clone(), views.clone(), p.clone(), s.clone()));
        let consistency = consistency::Consistency::new(c.clone());
        tasks.spawn(perobject::drive_objects(consistency, c.act.metrics.clone(), views.clone(), p.clone(), s.clone()));
        let marks = nodeclaimdisruption::NodeClaimDisruption::new(c.clone());
        tasks.spawn(perobject::drive_objects(marks, c.act.metrics.clone(), views.clone(), p.clone(), s.clone()));
        tasks.spawn(drive(podevents::PodEvents::new(c.clone()), views.clone(), p.clone(), s.clone()));
        let tagging = tagging::Tagging::new(c.clone());
        tasks.spawn(perobject::drive_objects(tagging, c.act.metrics.clone(), views.clone(), p.clone(), s.clone()));
        let nodepools = nodepool::NodePools::new(c.clone());
        tasks.spawn(perobject::drive_objects(nodepools, c.act.metrics.clone(), views.clone(), p.clone(), s.clone()));
        let nodes = termination::NodeTermination::new(c.clone());
        tasks.spawn(perobject::drive_objects(nodes, c.act.metrics.clone(), views.clone(), p.clone(), s.clone()));
        let scheduling = Scheduling {
            common: c.clone(),
            provisioning: provisioning::State::default(),
            disruption: disruption::State::default(),
            views: views.clone(),
        };
        tasks.spawn(drive(scheduling, views.clone(), p.clone(), s.clone()));
        tasks.spawn(drive(garbagecollection::Collection::new(c.clone()), views, p.clone(), s.clone()));
        let changed = self.view.changes();
        let mut view_changed = true;
        loop {
            tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                ended = tasks.join_next(), if !*shutdown.borrow() => {
                    match ended {
                        Some(Err(e)) => error!(error = %e, "a reconciler's task panicked"),
                        _ => error!("a reconciler's task ended"),
                    }
                    return;
                }
                _ = changed.notified() => view_changed = true,
                _ = tokio::time::sleep(TICK) => {}
            }
            if *shutdown.borrow() {
                break;
            }
            self.progress.mark(LOADER, crate::clock::now_seconds());
            // Nothing changed in the view, and the view published last is still to be decided
            // on (this replica leads, every watch is synced): it is the view; the concerns run
            // on their own ticks. At rest a read of 5,000 pods' view is not made every second.
            let current = publish.borrow().is_some() && self.leader.leading() && self.view.unsynced().is_empty();
            if !view_changed && current {
                continue;
            }
            view_changed = false;
            let started = Instant::now();
            let loaded = self.load().await;
            if loaded.is_some() {
                self.common.act.metrics.pass(LOADER, started);
            }
            if !self.view.unsynced().is_empty() {
                // No concern runs on an unsynced view: the gauges say so from here.
                self.common.report_cluster_state(false, None);
            }
            publish.send_replace(loaded);
        }
        // The concerns see the shutdown too; each ends after its current call (and what its
        // `stop` keeps).
        while let Some(ended) = tasks.join_next().await {
            if let Err(e) = ended {
                warn!(error = %e, "a reconciler's task panicked");
            }
        }
    }

    /// The view to decide on, if this replica leads and the view may be decided on.
    async fn load(&mut self) -> Option<Arc<Loaded>> {
        // Only the leader acts (the follower keeps its view warm).
        if !self.leader.leading() || !self.view.unsynced().is_empty() {
            return None;
        }
        let loaded = self.view.load();
        self.report_skipped(&loaded).await;
        // A Node or NodeClaim that does not load leaves the capacity unknown: counting it,
        // launching beside it or collecting its instance would be decided on a partial view.
        if loaded.live.holding_back(HeldDecision::Any).is_some() {
            return None;
        }
        Some(Arc::new(loaded))
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
                    self.common.act.event(on, true, "InvalidObject", note, "Read");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_names_the_task_that_began_a_pass_longest_ago() {
        let progress = Progress::default();
        assert_eq!(progress.stalest(), None);
        progress.mark("lifecycle", 100);
        progress.mark("termination", 90);
        progress.mark(LOADER, 120);
        assert_eq!(progress.stalest(), Some(Stalest::Pass { task: "termination", began: 90 }));
        progress.mark("termination", 130);
        assert_eq!(progress.stalest(), Some(Stalest::Pass { task: "lifecycle", began: 100 }));
        // A reconcile under way since before every task's last pass is the stalest, until it ends.
        let stuck = progress.running("node.termination", "n1", 95);
        let quick = progress.running("node.termination", "n2", 125);
        assert_eq!(
            progress.stalest(),
            Some(Stalest::Reconcile { controller: "node.termination", object: "n1".into(), began: 95 })
        );
        assert_eq!(progress.oldest_reconciles(), [("node.termination", "n1".to_string(), 95)]);
        drop(stuck);
        assert_eq!(progress.oldest_reconciles(), [("node.termination", "n2".to_string(), 125)]);
        assert_eq!(progress.stalest(), Some(Stalest::Pass { task: "lifecycle", began: 100 }));
        drop(quick);
        assert!(progress.oldest_reconciles().is_empty());
    }
}
