//! A deterministic discrete-event simulation of a cluster that Karpenter provisions (upstream
//! `pkg/controllers`, v1.14.1): pods go pending, provisioning rounds batch them, NodeClaims
//! launch, register and initialize, kube-scheduler binds pods, workload controllers keep replica counts, nodes are
//! drained and terminated, spot instances are interrupted, offerings run out of capacity — each
//! as an [`Event`] at a [`SimTime`].
//!
//! Module map (upstream or Kubernetes component in brackets): `lifecycle` [the provisioner's
//! rounds and nodeclaim/lifecycle in time: launch, registration, initialization, liveness; the AWS
//! provider's CreateFleet and unavailable-offerings cache], `kube_scheduler` [kube-scheduler's
//! binding, modelled], `workloads` [the ReplicaSet, StatefulSet and DaemonSet controllers],
//! `termination` [node/termination, terminator, eviction; interruption], `cost` [$/hour over
//! time], `steps` [the Scenario's timed actions], `cluster_autoscaler` [Cluster Autoscaler's
//! loop and the node groups' Auto Scaling groups, in Karpenter's place: the comparison mode],
//! `compare` [both runs of one cluster, measured alike].
//!
//! The decisions are core's, shared with the live controller: a round is
//! [`crate::scheduling::schedule`], its batch window and the NodeClaims it creates are
//! [`crate::provisioning`]'s, each lifecycle step is [`crate::nodeclaim::lifecycle`]'s. This module
//! decides *when* each runs, plays the parts outside Karpenter (the cloud, the kubelet, the node's
//! daemons) and keeps the results. Nothing here reads the wall clock.

pub(crate) mod clock;
mod cluster_autoscaler;
mod compare;
pub(crate) mod cost;
mod disruption;
pub(crate) mod events;
mod kube_scheduler;
mod lifecycle;
mod pods;
mod steps;
mod termination;
mod whatif;
mod workloads;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use crate::catalogue::Catalogue;
use crate::catalogue::UnavailableOffering;
use crate::manifest::Manifests;
use crate::scheduling::cloudprovider::Launch;

pub use clock::{Clock, Duration, SimTime, DEFAULT_START};
pub use cluster_autoscaler::{CaLoopSummary, STATUS_CONFIGMAP};
pub use compare::{compare, AutoscalerRun, CompareError, Comparison, NodeCount, Settling};
pub use cost::{CostPoint, CostSummary};
pub use disruption::Disruption;
pub use events::{Event, EventType, Involved, OfferingRef, Reason, RemovalCause};
pub use pods::{report_pod, NodeClaimPlan, PodReport, PodStanding, TypePrice};
pub use steps::StepError;
pub use whatif::{
    whatif, CostDelta, DriftedNodeClaim, LaunchedNodeClaim, PendingPod, RemovedNode, Unedited, WhatIf, WhatIfError,
};
pub use workloads::WorkloadView;

/// How long things take. The defaults put a new node Ready about a minute after its first pod
/// went pending, as users see on EKS (docs/simulation.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    /// upstream `--batch-idle-duration` (1 s).
    pub batch_idle: Duration,
    /// upstream `--batch-max-duration` (10 s).
    pub batch_max: Duration,
    /// CreateFleet's answer: NodeClaim created → Launched (providerID).
    pub launch: Duration,
    /// Instance boot and kubelet join: Launched → Registered.
    pub registration: Duration,
    /// Kubelet Ready, CNI up, startup taints removed: Registered → Initialized.
    pub initialization: Duration,
    /// Drain passes while pods remain (upstream requeues with backoff; 5 s keeps the log readable).
    pub drain_retry: Duration,
    /// Drained → instance gone (EC2 shutting-down → terminated, then the finalizers go).
    pub instance_termination: Duration,
    /// upstream: the AWS provider's unavailable-offerings cache TTL (3 min).
    pub unavailable_offering_ttl: Duration,
    /// EC2's spot interruption notice (2 min).
    pub spot_interruption_notice: Duration,
}

impl Timings {
    /// These timings with the Scenario's overrides (validated when the Scenario was loaded).
    pub fn with_overrides(mut self, o: &crate::manifest::scenario::TimingOverrides) -> Timings {
        let read = |text: &Option<String>| {
            text.as_deref().and_then(|t| match t {
                "Never" => Some(Duration::NEVER),
                t => crate::manifest::scenario::parse_offset(t).map(Duration::millis),
            })
        };
        let slots: [(&Option<String>, &mut Duration); 7] = [
            (&o.batch_idle, &mut self.batch_idle),
            (&o.batch_max, &mut self.batch_max),
            (&o.launch, &mut self.launch),
            (&o.registration, &mut self.registration),
            (&o.initialization, &mut self.initialization),
            (&o.drain_retry, &mut self.drain_retry),
            (&o.instance_termination, &mut self.instance_termination),
        ];
        for (text, slot) in slots {
            if let Some(d) = read(text) {
                *slot = d;
            }
        }
        self
    }
}

/// upstream liveness `LaunchTimeout`: not Launched this long after creation → deleted.
pub const LAUNCH_TIMEOUT: Duration = Duration::secs(crate::nodeclaim::lifecycle::LAUNCH_TIMEOUT_SECONDS.unsigned_abs());
/// upstream liveness `registrationTimeout`: not Registered this long after launch → deleted.
pub const REGISTRATION_TIMEOUT: Duration =
    Duration::secs(crate::nodeclaim::lifecycle::REGISTRATION_TIMEOUT_SECONDS.unsigned_abs());

impl Default for Timings {
    fn default() -> Self {
        Timings {
            batch_idle: Duration::millis(crate::provisioning::BATCH_IDLE_MILLIS),
            batch_max: Duration::millis(crate::provisioning::BATCH_MAX_MILLIS),
            launch: Duration::secs(3),
            registration: Duration::secs(40),
            initialization: Duration::secs(12),
            drain_retry: Duration::secs(5),
            instance_termination: Duration::secs(30),
            unavailable_offering_ttl: Duration::mins(3),
            spot_interruption_notice: Duration::mins(2),
        }
    }
}

/// Why a simulation cannot start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimulationError {
    /// The view a round reads cannot be built (region, reservations, instance types).
    #[error(transparent)]
    Input(#[from] crate::state::StateError),
    #[error("spec.startTime {0:?} is not an RFC 3339 time")]
    StartTime(String),
}

/// What the simulation keeps about a NodeClaim beyond the object (the instance behind it).
#[derive(Debug, Clone)]
struct Machine {
    nodepool: String,
    created: SimTime,
    /// What CreateFleet launched (set at Launched).
    launch: Option<Launch>,
    launched: Option<SimTime>,
    node: Option<String>,
    initialized: Option<SimTime>,
    /// Set when the NodeClaim is being deleted.
    terminating: Option<termination::Termination>,
    /// A spot interruption: when EC2 takes the instance back.
    reclaim_at: Option<SimTime>,
    /// Launch candidates in CreateFleet order, kept from the round that planned the NodeClaim.
    plan: lifecycle::LaunchPlan,
    /// The last time a pod bound to or left the node (upstream `status.lastPodEventTime`).
    last_pod_event: Option<SimTime>,
    /// A provisioning round nominated pods onto it until then.
    nominated_until: Option<SimTime>,
    /// Drifted, why and since when.
    drifted: Option<(crate::disruption::DriftReason, SimTime)>,
    /// Chosen by a disruption command (tainted, waiting for its replacements).
    disrupting: bool,
    /// The configuration (`Simulation::config_epoch`) drift was last checked against.
    drift_checked: Option<u64>,
    /// For a NodeClaim that existed at the start: its history before it.
    before_start: Option<BeforeStart>,
}

/// What an adopted NodeClaim (in the input, launched) tells of its past, in epoch seconds: a
/// snapshot of a live cluster has nodes that are days old, quiet for hours and drifted already.
#[derive(Debug, Clone, Copy, Default)]
struct BeforeStart {
    /// `metadata.creationTimestamp` (expiration counts from it).
    created: Option<i64>,
    /// The Initialized condition's last transition.
    initialized: Option<i64>,
    /// `status.lastPodEventTime`.
    last_pod_event: Option<i64>,
    /// The `Drifted` condition Karpenter set (its reason and when): kept, as Karpenter's verdict
    /// on hashes carpentry does not compute the way upstream does (docs/divergences.md).
    drifted_since: Option<i64>,
    drifted_by_karpenter: bool,
}

impl Machine {
    /// Since when its consolidateAfter window runs, in epoch seconds: the last pod event, or
    /// initialization if later (upstream: `lastPodEventTime`, else the Initialized transition).
    fn quiet_since(&self, clock: &Clock) -> Option<i64> {
        let before = self.before_start.unwrap_or_default();
        let last = self.last_pod_event.map(|t| clock.epoch_seconds(t)).or(before.last_pod_event);
        let initialized = match (self.initialized, before.initialized) {
            // Adopted as initialized at the start: its real transition, when known.
            (Some(SimTime::ZERO), Some(at)) => Some(at),
            (t, _) => t.map(|t| clock.epoch_seconds(t)),
        };
        match (last, initialized) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Something due at a time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Step(usize),
    Launch(String),
    Register(String),
    Initialize(String),
    Drain(String),
    InstanceGone(String),
    Reclaim(String),
    ShortageEnds(usize),
    /// The disruption loop's next pass.
    Disruption,
    /// A disruption command's 15 s validation is due.
    Validate,
    Expire(String),
    LaunchTimeout(String),
    RegistrationTimeout(String),
    /// upstream's provisioning NodeController requeues a tainted node every 10 s, triggering a
    /// round each time (nominations onto replacements stay fresh).
    DisruptedRequeue,
    /// Cluster Autoscaler's next loop (the comparison mode).
    CaLoop,
    /// A node group's instance: EC2 starts it, its Node registers, its kubelet is Ready.
    CaLaunch(String),
    CaRegister(String),
    CaReady(String),
    /// Cluster Autoscaler drains and deletes a node it tainted (its name).
    CaDrain(String),
}

/// A provisioning round's outcome, for the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundSummary {
    pub at: SimTime,
    pub pending_pods: usize,
    pub nodeclaims_created: Vec<String>,
    pub nominated: usize,
    pub unschedulable: usize,
}

/// upstream: the provisioning NodeController requeues a tainted node after 10 s.
const DISRUPTED_REQUEUE: Duration = Duration::secs(10);

/// A node as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    /// The Node's name, or the NodeClaim's while it has no Node.
    pub name: String,
    #[serde(rename = "nodeClaim", skip_serializing_if = "Option::is_none")]
    pub nodeclaim: Option<String>,
    #[serde(rename = "nodePool", skip_serializing_if = "Option::is_none")]
    pub nodepool: Option<String>,
    /// The node group whose Auto Scaling group launched it (Cluster Autoscaler's side).
    #[serde(rename = "nodeGroup", skip_serializing_if = "Option::is_none")]
    pub node_group: Option<String>,
    pub state: NodeState,
    /// Why it is terminating.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminating: Option<String>,
    /// When its NodeClaim was created, or a node group asked for its instance (the start for
    /// capacity that was there before).
    #[serde(rename = "createdAt")]
    pub since: SimTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<String>,
    /// USD per hour (0 when unknown).
    pub price: f64,
    pub price_synthetic: bool,
    pub pods: Vec<String>,
    /// CPU (cores) and memory (bytes): what its pods request and what it can allocate (0 until
    /// the instance type is known).
    pub requested: NodeResources,
    pub allocatable: NodeResources,
}

/// CPU in cores and memory in bytes, as a viewer draws utilization.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct NodeResources {
    pub cpu: f64,
    pub memory: f64,
}

impl NodeResources {
    fn of(list: &crate::resources::ResourceList) -> NodeResources {
        let get = |k: &str| list.get(k).map_or(0.0, crate::quantity::Quantity::as_f64);
        NodeResources { cpu: get("cpu"), memory: get("memory") }
    }
}

/// Where a node is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum NodeState {
    /// NodeClaim created, CreateFleet not answered yet.
    Launching,
    /// Instance running, not joined.
    Launched,
    /// Node joined, not Ready.
    Registered,
    /// Ready: pods bind.
    Ready,
    /// Being drained and terminated.
    Terminating,
}

/// The state at the current time.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub at: SimTime,
    pub nodes: Vec<NodeView>,
    /// Pending pods (`namespace/name`).
    pub pending: Vec<String>,
    pub running: usize,
    /// USD per hour of the instances running now.
    pub price_per_hour: f64,
}

/// The simulation.
pub struct Simulation {
    catalogue: &'static Catalogue,
    region: String,
    clock: Clock,
    timings: Timings,
    now: SimTime,
    /// The cluster's objects as Karpenter and kube-scheduler read them: no workload objects (their
    /// pods are in `objects.pods`), so rounds read it as it is.
    objects: Manifests,
    /// The Deployments, ReplicaSets, StatefulSets and Jobs, for their controllers.
    workload_objects: Manifests,
    workloads: Vec<workloads::Workload>,
    machines: BTreeMap<String, Machine>,
    timers: BTreeMap<(SimTime, u64), Timer>,
    timer_seq: u64,
    batch: crate::provisioning::Batcher,
    /// A round is due but a NodeClaim has no providerID yet (upstream waits for cluster state).
    round_waiting: bool,
    /// Karpenter's unavailable-offerings cache: until when.
    ice_cache: BTreeMap<OfferingRef, SimTime>,
    /// EC2 has no capacity for these offerings (from steps), until when (`None`: for good).
    shortages: Vec<(OfferingRef, Option<SimTime>)>,
    /// Kube-scheduler has work (a pod was created, a node became Ready, room was freed).
    kube_dirty: bool,
    events: Vec<Event>,
    rounds: Vec<RoundSummary>,
    cost: cost::Ledger,
    names: lifecycle::Names,
    /// Assumptions made while building the state (from the input and every round).
    notes: BTreeSet<String>,
    /// The objects of each `apply` step.
    step_objects: BTreeMap<usize, Manifests>,
    /// Disruption's state: the command being validated or executed, the last verdicts.
    disruption: disruption::State,
    /// Bumped by every change of the cluster (upstream `ConsolidationState`).
    changes: u64,
    /// Disruptions carried out, in order.
    disruptions: Vec<disruption::Disruption>,
    /// A pod went away or a workload's replicas changed: the workload controllers count again.
    workloads_dirty: bool,
    /// Bumped by every `apply` step: NodePools and EC2NodeClasses may have changed (drift).
    config_epoch: u64,
    /// Cluster Autoscaler in Karpenter's place (the comparison mode).
    ca: Option<cluster_autoscaler::Driver>,
}

impl Simulation {
    /// A simulation of `manifests` (legacy objects already converted). The region is `region` if
    /// given, else the Scenario's; the start instant is the Scenario's `startTime`, else
    /// [`clock::DEFAULT_START`].
    pub fn new(manifests: &Manifests, region: Option<&str>, timings: Timings) -> Result<Simulation, SimulationError> {
        Simulation::with_catalogue(manifests, region, timings, Catalogue::embedded())
    }

    /// [`Simulation::new`] over another instance-type catalogue.
    pub fn with_catalogue(
        manifests: &Manifests,
        region: Option<&str>,
        timings: Timings,
        catalogue: &'static Catalogue,
    ) -> Result<Simulation, SimulationError> {
        let mut sim = Simulation::unsettled(manifests, region, timings, catalogue)?;
        // upstream's provisioning pod controller reconciles every pod when it starts and wakes
        // the batcher for each provisionable one: pods a snapshot already shows Unschedulable
        // are Karpenter's from the first instant, not only those kube-scheduler marks later.
        if sim.objects.pods.iter().any(crate::pod::is_provisionable) {
            sim.batch.trigger(sim.now.0);
        }
        sim.settle();
        Ok(sim)
    }

    /// The cluster exactly as read, at its start: nothing bound, launched or reconciled yet (the
    /// first step does that). For explaining a snapshot of a live cluster, where kube-scheduler
    /// and the controllers have already had their say about the pods as they are.
    pub fn observe(
        manifests: &Manifests,
        region: Option<&str>,
        catalogue: &'static Catalogue,
    ) -> Result<Simulation, SimulationError> {
        Simulation::unsettled(manifests, region, Timings::default(), catalogue)
    }

    /// When the provisioner's open batch window closes (a round runs then).
    fn batch_deadline(&self) -> Option<SimTime> {
        self.batch.deadline(self.timings.batch_idle.0, self.timings.batch_max.0).map(SimTime)
    }

    fn unsettled(
        manifests: &Manifests,
        region: Option<&str>,
        timings: Timings,
        catalogue: &'static Catalogue,
    ) -> Result<Simulation, SimulationError> {
        let timings = match &manifests.scenario {
            Some(s) => timings.with_overrides(&s.spec.timings),
            None => timings,
        };
        let start = manifests.scenario.as_ref().and_then(|s| s.spec.start_time.clone());
        let clock =
            Clock::new(start.as_deref()).ok_or_else(|| SimulationError::StartTime(start.unwrap_or_default()))?;
        // Validates the input once, as a round would see it (region, reservations, classes).
        let prepared =
            crate::state::input_from_manifests(manifests, catalogue, region).map_err(SimulationError::Input)?;
        let mut objects = manifests.clone();
        objects.step_objects.clear();
        let workload_objects = Manifests {
            deployments: std::mem::take(&mut objects.deployments),
            replicasets: std::mem::take(&mut objects.replicasets),
            statefulsets: std::mem::take(&mut objects.statefulsets),
            jobs: std::mem::take(&mut objects.jobs),
            ..Manifests::default()
        };
        let mut sim = Simulation {
            catalogue,
            region: prepared.region,
            clock,
            timings,
            now: SimTime::ZERO,
            objects,
            workload_objects,
            workloads: Vec::new(),
            machines: BTreeMap::new(),
            timers: BTreeMap::new(),
            timer_seq: 0,
            batch: crate::provisioning::Batcher::default(),
            round_waiting: false,
            ice_cache: BTreeMap::new(),
            shortages: Vec::new(),
            kube_dirty: true,
            events: Vec::new(),
            rounds: Vec::new(),
            cost: cost::Ledger::default(),
            names: lifecycle::Names::default(),
            notes: prepared.notes.into_iter().collect(),
            step_objects: BTreeMap::new(),
            disruption: disruption::State::default(),
            changes: 0,
            disruptions: Vec::new(),
            config_epoch: 0,
            workloads_dirty: true,
            ca: None,
        };
        sim.adopt_workloads();
        sim.adopt_existing_capacity();
        if let Some(scenario) = &manifests.scenario {
            for (i, step) in scenario.spec.steps.iter().enumerate() {
                let at = SimTime(step.at_millis().unwrap_or(0));
                sim.schedule_timer(at, Timer::Step(i));
            }
        }
        sim.step_objects = manifests.step_objects.clone();
        sim.schedule_timer(SimTime::ZERO.plus(disruption::POLL), Timer::Disruption);
        Ok(sim)
    }

    /// The current simulated time.
    pub fn now(&self) -> SimTime {
        self.now
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn timings(&self) -> &Timings {
        &self.timings
    }

    /// Every event so far, in order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Every provisioning round so far.
    pub fn rounds(&self) -> &[RoundSummary] {
        &self.rounds
    }

    /// The cluster's objects now (Nodes, NodeClaims, Pods…; the workload objects are not here).
    pub fn objects(&self) -> &Manifests {
        &self.objects
    }

    /// Notes on assumptions (missing EC2NodeClasses, claims assumed…), deduplicated.
    pub fn notes(&self) -> impl Iterator<Item = &str> + '_ {
        self.notes.iter().map(String::as_str)
    }

    /// When the next thing happens, if anything is due.
    pub fn next_event_time(&self) -> Option<SimTime> {
        let timer = self.timers.keys().next().map(|(t, _)| *t);
        let batch = self.batch_deadline();
        match (timer, batch) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs everything due up to and including `end`, then sets the clock to `end`.
    pub fn run_until(&mut self, end: SimTime) {
        while let Some(t) = self.next_event_time().filter(|t| *t <= end) {
            self.advance_to(t);
            self.fire_due();
        }
        if end > self.now {
            self.advance_to(end);
        }
    }

    /// Runs the next moment at which something happens; false when nothing is left to do.
    pub fn step(&mut self) -> bool {
        let Some(t) = self.next_event_time() else { return false };
        self.advance_to(t);
        self.fire_due();
        true
    }

    /// Runs until nothing is left to do or `limit` is reached; returns the time reached.
    pub fn run_to_quiescence(&mut self, limit: SimTime) -> SimTime {
        while self.next_event_time().is_some_and(|t| t <= limit) {
            self.step();
        }
        self.now
    }

    fn advance_to(&mut self, t: SimTime) {
        if t > self.now {
            self.cost.advance(self.now, t);
            self.now = t;
        }
    }

    fn schedule_timer(&mut self, at: SimTime, timer: Timer) {
        // A step that never happens has no timer.
        if at.0 == u64::MAX {
            return;
        }
        self.timer_seq += 1;
        self.timers.insert((at, self.timer_seq), timer);
    }

    fn cancel_timers(&mut self, matches: impl Fn(&Timer) -> bool) {
        self.timers.retain(|_, t| !matches(t));
    }

    fn emit(&mut self, object: Involved, reason: Reason) {
        // Disruption's own verdicts are not changes of the cluster (see `disruption::State`).
        if !matches!(reason, Reason::DisruptionBlocked { .. } | Reason::Unconsolidatable { .. }) {
            self.changes += 1;
        }
        self.events.push(Event::new(self.now, object, reason));
    }

    /// Fires every timer due now, then lets the controllers settle (once per instant: what
    /// happens at the same moment is seen together, as controllers would see it).
    fn fire_due(&mut self) {
        let mut fired = false;
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let timer = entry.remove();
            fired = true;
            match timer {
                Timer::Step(i) => self.run_step(i),
                Timer::Launch(nc) => self.launch(&nc),
                Timer::Register(nc) => self.register(&nc),
                Timer::Initialize(nc) => self.initialize(&nc),
                Timer::Drain(nc) => self.drain(&nc),
                Timer::InstanceGone(nc) => self.instance_gone(&nc),
                Timer::Reclaim(nc) => self.reclaim(&nc),
                Timer::ShortageEnds(i) => self.shortage_ends(i),
                Timer::Disruption => {
                    // The loop sees the cluster as the controllers left it.
                    self.settle();
                    self.disruption_pass();
                }
                Timer::Validate => {
                    self.settle();
                    self.validate_command();
                }
                Timer::Expire(nc) => self.expire(&nc),
                Timer::LaunchTimeout(nc) | Timer::RegistrationTimeout(nc) => self.liveness(&nc),
                Timer::DisruptedRequeue => self.requeue_disrupted(),
                Timer::CaLoop => self.ca_loop(),
                Timer::CaLaunch(id) => self.ca_launched(&id),
                Timer::CaRegister(id) => self.ca_register(&id),
                Timer::CaReady(id) => self.ca_ready(&id),
                Timer::CaDrain(node) => self.ca_drain(&node),
            }
        }
        if fired {
            self.settle();
        }
        if self.batch_deadline().is_some_and(|d| d <= self.now) {
            self.batch.close();
            self.round_waiting = true;
        }
        // With Cluster Autoscaler in its place Karpenter provisions nothing.
        if self.round_waiting && self.ca.is_none() && self.launches_settled() {
            self.round_waiting = false;
            self.provision();
            self.settle();
        }
    }

    /// Controllers that react at once: workload controllers, then kube-scheduler; pods it cannot
    /// place become Unschedulable and wake the provisioner's batcher.
    fn settle(&mut self) {
        for _ in 0..4 {
            let created = self.reconcile_workloads();
            if !created && !self.kube_dirty {
                break;
            }
            self.kube_dirty = false;
            let unschedulable = self.kube_schedule();
            if unschedulable > 0 {
                match self.ca {
                    Some(_) => self.ca_wake(),
                    None => self.batch.trigger(self.now.0),
                }
            }
        }
        self.progress_commands();
        self.cost.set_rate(self.now, self.running_prices());
    }

    /// A node was tainted `karpenter.sh/disrupted`: a round now, and every 10 s while any node
    /// carries the taint (upstream's provisioning NodeController).
    fn trigger_for_disrupted(&mut self) {
        self.batch.trigger(self.now.0);
        if !self.timers.values().any(|t| *t == Timer::DisruptedRequeue) {
            self.schedule_timer(self.now.plus(DISRUPTED_REQUEUE), Timer::DisruptedRequeue);
        }
    }

    fn requeue_disrupted(&mut self) {
        if self.objects.nodes.iter().any(crate::scheduling::taints::is_disrupted) {
            self.trigger_for_disrupted();
        }
    }

    /// upstream: the provisioner does not schedule while a NodeClaim it created has no
    /// providerID (cluster state is not synced), so a round waits for CreateFleet's answers.
    fn launches_settled(&self) -> bool {
        self.machines.values().all(|m| m.launched.is_some() || m.terminating.is_some())
    }

    /// The pods of the cluster, by `namespace/name`.
    fn pod_index(&self, namespace: &str, name: &str) -> Option<usize> {
        self.objects.pods.iter().position(|p| {
            p.metadata.name.as_deref() == Some(name)
                && p.metadata.namespace.as_deref().unwrap_or("default") == namespace
        })
    }

    /// The state now.
    pub fn snapshot(&self) -> Snapshot {
        let mut nodes = Vec::new();
        let mut by_node: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let mut requested: BTreeMap<&str, NodeResources> = BTreeMap::new();
        let mut pending = Vec::new();
        let mut running = 0;
        for p in &self.objects.pods {
            let key = pod_key(p);
            match p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                Some(n) => {
                    running += 1;
                    by_node.entry(n).or_default().push(key);
                    // Pods with unparseable requests never bind (validation), so none is lost here.
                    if let Ok(r) = crate::resources::pod_requests(p) {
                        let add = NodeResources::of(&r);
                        let total = requested.entry(n).or_default();
                        total.cpu += add.cpu;
                        total.memory += add.memory;
                    }
                }
                None => pending.push(key),
            }
        }
        let mut claimed = BTreeSet::new();
        for (name, m) in &self.machines {
            let state = if m.terminating.is_some() {
                NodeState::Terminating
            } else if m.initialized.is_some() {
                NodeState::Ready
            } else if m.node.is_some() {
                NodeState::Registered
            } else if m.launched.is_some() {
                NodeState::Launched
            } else {
                NodeState::Launching
            };
            if let Some(n) = &m.node {
                claimed.insert(n.clone());
            }
            let shown = m.node.clone().unwrap_or_else(|| name.clone());
            let pods = m.node.as_deref().and_then(|n| by_node.get(n)).cloned().unwrap_or_default();
            let allocatable = self
                .objects
                .nodeclaims
                .iter()
                .find(|nc| nc.name() == name)
                .and_then(|nc| nc.status.as_ref())
                .map(|st| NodeResources::of(&st.allocatable))
                .unwrap_or_default();
            nodes.push(NodeView {
                requested: m.node.as_deref().and_then(|n| requested.get(n)).copied().unwrap_or_default(),
                allocatable,
                name: shown,
                nodeclaim: Some(name.clone()),
                nodepool: Some(m.nodepool.clone()),
                node_group: None,
                state,
                terminating: m.terminating.as_ref().map(|t| t.why.clone()),
                since: m.created,
                instance_type: m.launch.as_ref().map(|l| l.instance_type.clone()),
                zone: m.launch.as_ref().map(|l| l.zone.clone()),
                capacity_type: m.launch.as_ref().map(|l| l.capacity_type.clone()),
                price: m.launch.as_ref().map_or(0.0, |l| l.price),
                price_synthetic: m.launch.as_ref().is_some_and(|l| l.price_synthetic),
                pods,
            });
        }
        let grouped = self.ca.as_ref().map(cluster_autoscaler::Driver::registered).unwrap_or_default();
        for node in &self.objects.nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            if claimed.contains(&name) {
                continue;
            }
            let labels = node.metadata.labels.clone().unwrap_or_default();
            let price = cost::node_price(self.catalogue, &self.region, &labels);
            let instance = grouped.get(name.as_str());
            let allocatable = node
                .status
                .as_ref()
                .and_then(|st| st.allocatable.as_ref())
                .and_then(|a| crate::resources::from_k8s(a).ok())
                .map(|a| NodeResources::of(&a))
                .unwrap_or_default();
            nodes.push(NodeView {
                requested: requested.get(name.as_str()).copied().unwrap_or_default(),
                allocatable,
                pods: by_node.get(name.as_str()).cloned().unwrap_or_default(),
                name,
                nodeclaim: None,
                // A group's node labelled with a NodePool for the pods that select it is still not Karpenter's.
                nodepool: labels.get(crate::labels::NODEPOOL).filter(|_| instance.is_none()).cloned(),
                node_group: instance.map(|i| i.group.to_string()),
                state: if node.metadata.deletion_timestamp.is_some() {
                    NodeState::Terminating
                } else if instance.is_some_and(|i| !i.ready) {
                    NodeState::Registered
                } else {
                    NodeState::Ready
                },
                terminating: None,
                since: instance.map_or(SimTime::ZERO, |i| i.requested),
                instance_type: labels.get(crate::labels::INSTANCE_TYPE).cloned(),
                zone: labels.get(crate::labels::TOPOLOGY_ZONE).cloned(),
                capacity_type: labels.get(crate::labels::CAPACITY_TYPE).cloned(),
                price: price.map_or(0.0, |p| p.0),
                price_synthetic: price.is_some_and(|p| p.1),
            });
        }
        if let Some(ca) = &self.ca {
            nodes.extend(ca.unregistered());
        }
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let price_per_hour = 0.0 + self.running_prices().values().sum::<f64>();
        Snapshot { at: self.now, nodes, pending, running, price_per_hour }
    }

    /// The cost over the run so far.
    pub fn cost(&self) -> CostSummary {
        self.cost.summary(self.now)
    }

    /// USD per hour by NodePool (`""` for nodes without one) of the instances running now.
    fn running_prices(&self) -> BTreeMap<String, f64> {
        let mut out: BTreeMap<String, f64> = BTreeMap::new();
        let mut claimed = BTreeSet::new();
        for m in self.machines.values() {
            if let Some(n) = &m.node {
                claimed.insert(n.as_str());
            }
            if let (Some(l), Some(_)) = (&m.launch, m.launched) {
                *out.entry(m.nodepool.clone()).or_default() += l.price;
            }
        }
        // Node groups' instances, by group, from their launch.
        if let Some(ca) = &self.ca {
            ca.running_prices(&mut out);
        }
        for node in &self.objects.nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            if claimed.contains(name) || self.ca.as_ref().is_some_and(|ca| ca.owns(name)) {
                continue;
            }
            let labels = node.metadata.labels.clone().unwrap_or_default();
            if let Some((price, _)) = cost::node_price(self.catalogue, &self.region, &labels) {
                *out.entry(labels.get(crate::labels::NODEPOOL).cloned().unwrap_or_default()).or_default() += price;
            }
        }
        out
    }

    /// Offerings Karpenter knows it cannot launch now: the Scenario's, and its cache.
    fn known_unavailable(&self) -> Vec<UnavailableOffering> {
        let mut out: Vec<UnavailableOffering> =
            self.objects.scenario.as_ref().map(|s| s.spec.unavailable_offerings.clone()).unwrap_or_default();
        for (o, until) in &self.ice_cache {
            if *until > self.now {
                out.push(UnavailableOffering {
                    instance_type: o.instance_type.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type.clone(),
                });
            }
        }
        out
    }
}

/// `namespace/name` of a pod.
pub(crate) fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or("default"),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}
