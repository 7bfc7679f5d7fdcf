//! The same workload through Cluster Autoscaler instead of Karpenter (the comparison mode): CA's
//! loop ([`crate::clusterautoscaler::run_once`]) decides on the scenario's node groups, and this
//! module plays the Auto Scaling groups, EC2 and the nodes' kubelets on the simulated clock.
//! kube-scheduler, the workload controllers, the steps and the cost ledger are the Karpenter
//! simulation's own; Karpenter's provisioning and disruption do not run.
//!
//! - **The loop** runs every `--scan-interval` (10 s), at once when kube-scheduler marks a pod
//!   unschedulable while CA waits (`--frequent-loops-enabled`, on by default), and twice more at
//!   once after a loop that scaled up (upstream `loop/trigger.go`, with `main.go` passing the loop
//!   before last).
//! - **A group's target** that grows asks its Auto Scaling group for instances: each launches
//!   after `asgLaunchDelay` (the calibrated ASG overhead) plus the launch time, in the group's
//!   zone with the fewest of its instances (the ASG's AZ balancing; ties go to the first zone
//!   listed), as the group's first instance type; it is paid for from then. Its Node registers
//!   after the registration time (not Ready, tainted `node.kubernetes.io/not-ready`, its
//!   DaemonSet pods placed) and is Ready after the initialization time.
//! - **A target lowered** (a scale-up that timed out) takes away the instances not registered
//!   yet, newest first.
//! - **Scale-down** ([`crate::clusterautoscaler::scaledown`]) runs every loop; a node it removes
//!   is tainted `ToBeDeletedByClusterAutoscaler` and cordoned, and 5 s later
//!   (`--node-delete-delay-after-taint`) its pods are evicted (a PDB that refuses is retried every
//!   10 s for up to 2 minutes, `--max-pod-eviction-time`, then the deletion fails and the taint
//!   goes) and its instance is terminated with the group's desired capacity lowered by one. An
//!   empty node that gained pods meanwhile is kept. Pods leave at once (their termination grace
//!   is not simulated); the soft `DeletionCandidateOfClusterAutoscaler` taint is not put on.
//!
//! The groups' nodes are the template's: its labels (the zone and instance type the instance
//! launched in), its taints, and the catalogue's allocatable for the type (kubelet and system
//! reserved taken off, as on a real node), not the template's (capacity).
//!
//! Not yet: launch failures, spot interruptions of groups' instances.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::Serialize;

use crate::api::clusterautoscaler::{NodeGroup, ResolvedOptions};
use crate::clusterautoscaler::autoscaler::{GroupView, LoopInput, NodeView, PendingView};
use crate::clusterautoscaler::clusterstate::{GroupCounts, Readiness};
use crate::clusterautoscaler::scaledown::{drainability, Drain, GroupScaleDown, InFlight, TO_BE_DELETED_TAINT};
use crate::clusterautoscaler::status::{ClusterAutoscalerStatus, GroupStatusInput, StatusInput, StatusRegistry};
use crate::clusterautoscaler::{
    plan_scale_down, run_once, ClusterState, NodeCache, ScaleDownInput, ScaleDownPlan, ScaleDownState, ScaleUpOutcome,
    SchedulingNode, Template,
};
use crate::labels;
use crate::resources::ResourceList;

use super::clock::{Duration, SimTime};
use super::events::{Involved, OfferingRef, Reason, RemovalCause};
use super::{Simulation, SimulationError, Timer, Timings};

/// The ConfigMap CA writes its status to, where its cluster-wide events go.
pub const STATUS_CONFIGMAP: &str = crate::clusterautoscaler::status::STATUS_CONFIGMAP;

/// Loops run at once after one that scaled up.
const FOLLOW_UP_LOOPS: u32 = 2;
/// CA's event recorder drops an identical event within this long.
const EVENT_DEDUPE: Duration = Duration::mins(5);
/// The shortest wait between loops (a scan interval under a millisecond would loop in place).
const MIN_SCAN_INTERVAL_MS: u64 = 1;
/// `--node-delete-delay-after-taint`.
const DELETE_DELAY_AFTER_TAINT: Duration = Duration::secs(5);
/// How often a refused eviction is retried, and for how long (`--max-pod-eviction-time`).
const EVICTION_RETRY: Duration = Duration::secs(10);
const MAX_POD_EVICTION: Duration = Duration::mins(2);

/// A node Cluster Autoscaler is deleting.
#[derive(Debug, Clone)]
struct Deletion {
    group: String,
    /// It had pods to move (not an empty node).
    drain: bool,
    /// When the evictions began.
    draining_since: Option<SimTime>,
}

#[derive(Debug, Clone)]
struct Group {
    name: String,
    max: i64,
    target: i64,
    spec: NodeGroup,
    template: Option<Template>,
    scheduling: Option<SchedulingNode>,
}

/// An instance of a group's Auto Scaling group.
#[derive(Debug, Clone)]
struct Instance {
    group: String,
    offering: OfferingRef,
    price: f64,
    price_synthetic: bool,
    requested: SimTime,
    launched: Option<SimTime>,
    node: Option<String>,
    ready: Option<SimTime>,
}

/// One CA loop, for the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaLoopSummary {
    pub at: SimTime,
    /// Pods pending when it ran.
    pub pending: usize,
    /// Targets it set: `(group, size)`.
    pub targets: Vec<(String, i64)>,
    /// `NotNeeded`, `InCooldown`, `ClusterUnhealthy`, or the scale-up's result.
    pub outcome: String,
}

/// CA's part of a simulation.
#[derive(Debug, Clone)]
pub(super) struct Driver {
    options: ResolvedOptions,
    state: ClusterState,
    groups: Vec<Group>,
    instances: BTreeMap<String, Instance>,
    /// The groups' Nodes.
    nodes: BTreeSet<String>,
    loops: Vec<CaLoopSummary>,
    follow_ups: u32,
    /// When each event (object, reason, message) was last recorded: CA's recorder collapses
    /// identical events within 5 minutes (`utils/kubernetes/factory.go`).
    recorded: BTreeMap<(Involved, String, String), SimTime>,
    scale_down: ScaleDownState,
    deleting: BTreeMap<String, Deletion>,
    /// Nodes scale-down removed, with when.
    removed: Vec<(SimTime, String)>,
    /// Each bound pod's requests by its uid, read once (a pod's spec does not change; reading
    /// quantities every loop was most of a loop's cost), with the loop that last saw it. Only
    /// looked up, never walked: its order does not matter.
    requests: HashMap<String, (u64, ResourceList)>,
    /// The nodes' scheduling views, read again only when a node changes.
    node_views: NodeCache,
    /// The status ConfigMap's memory, and what the last loop wrote.
    status: StatusRegistry,
    /// The last scale-down plan: each node unneeded or why it stays.
    last_scale_down: Option<ScaleDownPlan>,
}

impl Driver {
    /// The instances running now and their price, by group.
    pub(super) fn running_prices(&self, out: &mut BTreeMap<String, f64>) {
        for i in self.instances.values().filter(|i| i.launched.is_some()) {
            *out.entry(i.group.clone()).or_default() += i.price;
        }
    }

    /// Whether `node` is one of the groups' nodes.
    pub(super) fn owns(&self, node: &str) -> bool {
        self.nodes.contains(node)
    }

    /// The groups' registered instances, by Node name.
    pub(super) fn registered(&self) -> BTreeMap<&str, RegisteredInstance<'_>> {
        self.instances
            .values()
            .filter_map(|i| {
                let node = i.node.as_deref()?;
                Some((node, RegisteredInstance { group: &i.group, requested: i.requested, ready: i.ready.is_some() }))
            })
            .collect()
    }

    /// The groups' instances with no Node yet, as the report shows nodes: named by instance.
    pub(super) fn unregistered(&self) -> impl Iterator<Item = super::NodeView> + '_ {
        self.instances.iter().filter(|(_, i)| i.node.is_none()).map(|(id, i)| super::NodeView {
            name: id.clone(),
            nodeclaim: None,
            nodepool: None,
            node_group: Some(i.group.clone()),
            state: if i.launched.is_some() { super::NodeState::Launched } else { super::NodeState::Launching },
            terminating: None,
            since: i.requested,
            instance_type: Some(i.offering.instance_type.clone()),
            zone: Some(i.offering.zone.clone()),
            capacity_type: Some(i.offering.capacity_type.clone()),
            price: if i.launched.is_some() { i.price } else { 0.0 },
            price_synthetic: i.price_synthetic,
            pods: Vec::new(),
            requested: super::NodeResources::default(),
            allocatable: super::NodeResources::default(),
        })
    }
}

/// A group's instance behind a Node, for the report.
pub(super) struct RegisteredInstance<'a> {
    pub group: &'a str,
    pub requested: SimTime,
    pub ready: bool,
}

impl Simulation {
    /// A simulation of `manifests` with Cluster Autoscaler scaling the Scenario's node groups
    /// (Karpenter's NodePools and NodeClaims are set aside). Each group starts with its desired
    /// capacity (its min when unset) of Ready nodes.
    pub fn cluster_autoscaler(
        manifests: &Manifests,
        region: Option<&str>,
        timings: Timings,
        catalogue: &'static crate::catalogue::Catalogue,
    ) -> Result<Simulation, SimulationError> {
        let mut sim = Simulation::unsettled(manifests, region, timings, catalogue)?;
        sim.cancel_timers(|t| matches!(t, Timer::Disruption));
        sim.objects.nodepools.clear();
        sim.objects.nodeclaims.clear();
        sim.machines.clear();
        let options =
            manifests.scenario.as_ref().and_then(|s| s.spec.cluster_autoscaler.clone()).unwrap_or_default().resolved();
        let mut groups = Vec::new();
        for spec in &sim.objects.nodegroups {
            let name = spec.metadata.name.clone().unwrap_or_default();
            let template =
                crate::clusterautoscaler::template(spec, catalogue, &sim.region, &sim.objects.daemonsets).ok();
            if template.is_none() {
                sim.notes.insert(format!("NodeGroup {name} has no template: CA never scales it"));
            }
            let scheduling = template.as_ref().map(SchedulingNode::of);
            let target = spec.spec.desired_capacity.unwrap_or(spec.spec.min_size);
            groups.push(Group { name, max: spec.spec.max_size, target, spec: spec.clone(), template, scheduling });
        }
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        let starting: Vec<(String, i64)> = groups.iter().map(|g| (g.name.clone(), g.target)).collect();
        sim.ca = Some(Driver {
            options,
            state: ClusterState::default(),
            groups,
            instances: BTreeMap::new(),
            nodes: BTreeSet::new(),
            loops: Vec::new(),
            follow_ups: 0,
            recorded: BTreeMap::new(),
            scale_down: ScaleDownState::default(),
            deleting: BTreeMap::new(),
            removed: Vec::new(),
            requests: HashMap::new(),
            node_views: NodeCache::default(),
            status: StatusRegistry::default(),
            last_scale_down: None,
        });
        // The groups' nodes at the start: launched, registered and Ready.
        for (group, n) in starting {
            for _ in 0..n {
                if let Some(id) = sim.ca_request_instance(&group) {
                    sim.ca_launched(&id);
                    sim.ca_register(&id);
                    sim.ca_ready(&id);
                }
            }
        }
        sim.schedule_timer(SimTime::ZERO, Timer::CaLoop);
        sim.settle();
        Ok(sim)
    }

    /// The nodes CA's scale-down removed so far, with when (empty when Karpenter runs).
    pub fn ca_scale_downs(&self) -> &[(SimTime, String)] {
        self.ca.as_ref().map_or(&[], |ca| ca.removed.as_slice())
    }

    /// The status ConfigMap the last loop wrote (none when Karpenter runs or before the first
    /// loop).
    pub fn ca_status(&self) -> Option<&ClusterAutoscalerStatus> {
        self.ca.as_ref().and_then(|ca| ca.status.last())
    }

    /// The last loop's scale-down plan (none when Karpenter runs, before the first loop, or when
    /// the last loops found the cluster unhealthy).
    pub fn ca_scale_down(&self) -> Option<&ScaleDownPlan> {
        self.ca.as_ref().and_then(|ca| ca.last_scale_down.as_ref())
    }

    /// CA's loops so far (empty when Karpenter runs).
    pub fn ca_loops(&self) -> &[CaLoopSummary] {
        self.ca.as_ref().map_or(&[], |ca| ca.loops.as_slice())
    }

    /// kube-scheduler marked pods unschedulable: a waiting CA loops now.
    pub(super) fn ca_wake(&mut self) {
        let due_now = self.timers.iter().any(|((at, _), t)| *t == Timer::CaLoop && *at <= self.now);
        if !due_now {
            self.cancel_timers(|t| *t == Timer::CaLoop);
            self.schedule_timer(self.now, Timer::CaLoop);
        }
    }

    /// One CA loop.
    pub(super) fn ca_loop(&mut self) {
        self.settle();
        let Some(mut ca) = self.ca.take() else { return };
        let now = self.now.secs_f64();
        let start = self.clock.epoch_seconds(SimTime::ZERO);
        let provision_time = ca.options.max_node_provision_time_seconds;
        let mut group_of: BTreeMap<&str, &str> = BTreeMap::new();
        let mut registered_at: BTreeMap<&str, f64> = BTreeMap::new();
        for i in ca.instances.values() {
            if let Some(node) = &i.node {
                group_of.insert(node.as_str(), i.group.as_str());
            }
        }
        for n in &self.objects.nodes {
            let created = n.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second() - start);
            registered_at.insert(n.metadata.name.as_deref().unwrap_or_default(), created as f64);
        }
        let groups: Vec<GroupView> = ca
            .groups
            .iter()
            .map(|g| GroupView {
                name: &g.name,
                target: g.target,
                max: g.max,
                template: g.scheduling.as_ref(),
                long_unregistered: ca
                    .instances
                    .values()
                    .filter(|i| i.group == g.name && i.node.is_none())
                    .filter(|i| i.launched.is_some_and(|l| l.secs_f64() + provision_time < now))
                    .count() as i64,
            })
            .collect();
        let mut bound: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
        let mut pending = Vec::new();
        for p in &self.objects.pods {
            match p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                // Finished pods hold no room, as upstream's snapshot has none.
                Some(node) if crate::pod::is_active(p) => bound.entry(node).or_default().push(p),
                Some(_) => {}
                None if unschedulable(p) && p.metadata.deletion_timestamp.is_none() => {
                    let created = p.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second() - start);
                    pending.push(PendingView { pod: p, created: created as f64 });
                }
                None => {}
            }
        }
        // The requests of the pods bound now: those read before, the others read once. Pods gone
        // are dropped once they outnumber those bound.
        let seen = ca.loops.len() as u64;
        let mut count = 0;
        for p in bound.values().flatten() {
            count += 1;
            let id = pod_id(p);
            match ca.requests.get_mut(id.as_ref()) {
                Some(known) => known.0 = seen,
                None => {
                    // Pods whose requests do not parse never bind (validation): none is lost here.
                    let requests = crate::resources::pod_requests(p).unwrap_or_default();
                    ca.requests.insert(id.into_owned(), (seen, requests));
                }
            }
        }
        if ca.requests.len() > 2 * count + 64 {
            ca.requests.retain(|_, (at, _)| *at == seen);
        }
        let empty = ResourceList::new();
        ca.node_views.refresh(&self.objects.nodes);
        let mut nodes: Vec<NodeView> = self
            .objects
            .nodes
            .iter()
            .map(|n| {
                let name = n.metadata.name.as_deref().unwrap_or_default();
                let pods = bound.remove(name).unwrap_or_default();
                let requests =
                    pods.iter().map(|p| ca.requests.get(pod_id(p).as_ref()).map_or(&empty, |(_, r)| r)).collect();
                let view = match ca.node_views.get(name) {
                    Some(view) => std::borrow::Cow::Borrowed(view),
                    None => std::borrow::Cow::Owned(SchedulingNode::with_requests(n, &[])),
                };
                NodeView::with_scheduling(
                    n,
                    group_of.get(name).copied(),
                    registered_at.get(name).copied().unwrap_or(0.0),
                    pods,
                    requests,
                    view,
                )
            })
            .collect();
        // By name: the order scale-down takes candidates and destinations in (docs/divergences.md).
        nodes.sort_by(|a, b| a.node.metadata.name.cmp(&b.node.metadata.name));
        let input = LoopInput { now, groups, nodes, pending };
        let out = run_once(&input, &mut ca.state, &ca.options);
        let pending_count = input.pending.len();
        if out.targets.iter().any(|(g, to)| ca.groups.iter().any(|x| &x.name == g && *to > x.target)) {
            ca.scale_down.last_scale_up = Some(now);
        }
        let scales = self.pdb_scales();
        let pdbs: Vec<(&PodDisruptionBudget, i64)> = self
            .objects
            .pdbs
            .iter()
            .map(|pdb| (pdb, crate::disruption::pdb::disruptions_allowed(pdb, &self.objects.pods, &scales)))
            .collect();
        let in_flight: Vec<InFlight> = ca
            .deleting
            .iter()
            .map(|(node, d)| InFlight { group: d.group.clone(), node: node.clone(), drain: d.drain })
            .collect();
        // Sizes as this loop left them (a timed-out scale-up lowers a target).
        let scale_down_groups = ca
            .groups
            .iter()
            .map(|g| {
                let spec = &g.spec.spec;
                let size = out.targets.iter().rev().find(|(name, _)| *name == g.name).map_or(g.target, |(_, to)| *to);
                GroupScaleDown::new(&g.name, size, spec.min_size, &spec.autoscaling_options, &ca.options)
            })
            .collect();
        // upstream: an unhealthy cluster ends the loop before scale-down and forgets the unneeded
        // nodes (`static_autoscaler.go`).
        if out.scale_up == ScaleUpOutcome::ClusterUnhealthy {
            ca.scale_down.forget_unneeded();
        }
        let scale_down = if out.scale_up == ScaleUpOutcome::ClusterUnhealthy {
            ScaleDownPlan::default()
        } else {
            plan_scale_down(
                &ScaleDownInput {
                    now,
                    start_epoch: start,
                    groups: scale_down_groups,
                    nodes: &input.nodes,
                    pdbs: &pdbs,
                    in_flight: &in_flight,
                    allowed: out.scale_down_allowed,
                },
                &mut ca.scale_down,
                &ca.options,
            )
        };
        let utilization: BTreeMap<String, (f64, Vec<String>)> =
            scale_down.unneeded.iter().map(|u| (u.node.clone(), (u.utilization, u.pods_to_move.clone()))).collect();
        drop(pdbs);
        drop(input);
        // The status, as upstream writes it when the loop is done: scale-down reports its unneeded
        // nodes only when it ran (`static_autoscaler.go` `scaleDown`).
        if ca.options.scale_down_enabled && out.cluster_healthy {
            let mut per_group: BTreeMap<String, i64> = BTreeMap::new();
            for u in &scale_down.unneeded {
                *per_group.entry(u.group.clone()).or_default() += 1;
            }
            ca.status.update_candidates(per_group, start + now.round() as i64);
        }
        let status_groups: Vec<GroupStatusInput> = out
            .group_counts
            .iter()
            .filter_map(|(name, target, readiness)| {
                let g = ca.groups.iter().find(|g| &g.name == name)?;
                let without_node = ca.instances.values().filter(|i| &i.group == name && i.node.is_none()).count();
                let unregistered = (without_node as i64 - readiness.long_unregistered).max(0);
                Some(GroupStatusInput {
                    counts: GroupCounts {
                        name: name.as_str(),
                        target: *target,
                        readiness: Readiness { unregistered, ..*readiness },
                    },
                    min_size: g.spec.spec.min_size,
                    max_size: g.max,
                })
            })
            .collect();
        let mut cluster = out.cluster_readiness;
        cluster.unregistered = status_groups.iter().map(|g| g.counts.readiness.unregistered).sum();
        let status_input = StatusInput {
            now,
            now_epoch: start + now.round() as i64,
            groups: status_groups,
            cluster,
            cluster_healthy: out.cluster_healthy,
            state: &ca.state,
        };
        ca.status.build(&status_input);
        drop(status_input);
        let outcome = match &out.scale_up {
            ScaleUpOutcome::ClusterUnhealthy => "ClusterUnhealthy".to_string(),
            ScaleUpOutcome::NotNeeded => "NotNeeded".to_string(),
            ScaleUpOutcome::InCooldown => "InCooldown".to_string(),
            ScaleUpOutcome::Tried(status) => format!("{:?}", status.result),
        };
        let scaled_up = out.targets.iter().any(|(g, to)| ca.groups.iter().any(|x| &x.name == g && *to > x.target));
        ca.loops.push(CaLoopSummary { at: self.now, pending: pending_count, targets: out.targets.clone(), outcome });
        self.ca = Some(ca);
        for e in &out.events {
            let object = match e.object.split_once('/') {
                Some((namespace, name)) => Involved::pod(namespace, name),
                None => Involved {
                    kind: "ConfigMap".into(),
                    namespace: Some("kube-system".into()),
                    name: STATUS_CONFIGMAP.into(),
                },
            };
            let key = (object.clone(), e.reason.clone(), e.message.clone());
            let Some(ca) = self.ca.as_mut() else { return };
            if ca.recorded.get(&key).is_some_and(|at| self.now < at.plus(EVENT_DEDUPE)) {
                continue;
            }
            ca.recorded.insert(key, self.now);
            let reason = Reason::ClusterAutoscaler {
                ca_reason: e.reason.clone(),
                message: e.message.clone(),
                warning: e.warning,
            };
            self.emit(object, reason);
        }
        for (group, to) in &out.targets {
            self.ca_set_target(group, *to);
        }
        let started = !scale_down.empty.is_empty() || !scale_down.drain.is_empty();
        for node in &scale_down.empty {
            self.ca_start_deletion(node, false, &utilization);
        }
        for node in &scale_down.drain {
            self.ca_start_deletion(node, true, &utilization);
        }
        if started {
            if let Some(ca) = self.ca.as_mut() {
                ca.scale_down.last_delete = Some(now);
            }
        }
        // The next loop (upstream `LoopTrigger.Wait`).
        let Some(ca) = self.ca.as_mut() else { return };
        if out.cluster_healthy {
            ca.last_scale_down = Some(scale_down);
        }
        if scaled_up {
            ca.follow_ups = FOLLOW_UP_LOOPS;
        } else if started {
            // A loop that started a deletion was productive: the next ones run at once.
            ca.follow_ups = FOLLOW_UP_LOOPS;
        }
        let next = if ca.follow_ups > 0 {
            ca.follow_ups -= 1;
            self.now
        } else {
            {
                let interval = (ca.options.scan_interval_seconds * 1000.0).round() as u64;
                self.now.plus(Duration::millis(interval.max(MIN_SCAN_INTERVAL_MS)))
            }
        };
        self.cancel_timers(|t| *t == Timer::CaLoop);
        self.schedule_timer(next, Timer::CaLoop);
    }

    /// A group's Auto Scaling group takes a new desired capacity.
    fn ca_set_target(&mut self, group: &str, to: i64) {
        let Some(ca) = self.ca.as_mut() else { return };
        let Some(g) = ca.groups.iter_mut().find(|g| g.name == group) else { return };
        let from = g.target;
        g.target = to;
        if to > from {
            for _ in from..to {
                if let Some(id) = self.ca_request_instance(group) {
                    let delay = self.ca.as_ref().map_or(0.0, |ca| ca.options.asg_launch_delay_seconds);
                    let at = self.now.plus(Duration::millis((delay * 1000.0).round() as u64)).plus(self.timings.launch);
                    self.schedule_timer(at, Timer::CaLaunch(id));
                }
            }
        } else {
            // Instances not registered yet go first, newest first.
            let mut waiting: Vec<(SimTime, String)> = ca
                .instances
                .iter()
                .filter(|(_, i)| i.group == group && i.node.is_none())
                .map(|(id, i)| (i.requested, id.clone()))
                .collect();
            waiting.sort();
            let gone: Vec<String> =
                waiting.into_iter().rev().take((from - to).max(0) as usize).map(|(_, id)| id).collect();
            for id in &gone {
                ca.instances.remove(id);
            }
            self.cancel_timers(|t| matches!(t, Timer::CaLaunch(x) | Timer::CaRegister(x) if gone.contains(x)));
        }
    }

    /// Adds an instance to `group` (not launched yet); its id.
    fn ca_request_instance(&mut self, group: &str) -> Option<String> {
        let ca = self.ca.as_ref()?;
        let g = ca.groups.iter().find(|g| g.name == group)?;
        let instance_type = g.spec.spec.instance_types.first()?.clone();
        // The ASG balances its zones: the one with the fewest of its instances, the first on ties.
        let zone = g
            .spec
            .spec
            .zones
            .iter()
            .min_by_key(|z| ca.instances.values().filter(|i| i.group == group && &i.offering.zone == *z).count())?
            .clone();
        let capacity_type = g.spec.spec.capacity_type.as_str().to_string();
        let offering_labels = BTreeMap::from([
            (labels::INSTANCE_TYPE.to_string(), instance_type.clone()),
            (labels::TOPOLOGY_ZONE.to_string(), zone.clone()),
            (labels::CAPACITY_TYPE.to_string(), capacity_type.clone()),
        ]);
        let launch =
            crate::scheduling::cloudprovider::launch_from_labels(self.catalogue, &self.region, &offering_labels);
        let id = self.names.provider_id(&zone);
        let instance = Instance {
            group: group.to_string(),
            offering: OfferingRef { instance_type, zone, capacity_type },
            price: launch.as_ref().map_or(0.0, |l| l.price),
            price_synthetic: launch.as_ref().is_some_and(|l| l.price_synthetic),
            requested: self.now,
            launched: None,
            node: None,
            ready: None,
        };
        self.ca.as_mut()?.instances.insert(id.clone(), instance);
        Some(id)
    }

    /// EC2 started the instance: it is paid for from now.
    pub(super) fn ca_launched(&mut self, id: &str) {
        let Some(instance) = self.ca.as_mut().and_then(|ca| ca.instances.get_mut(id)) else { return };
        instance.launched = Some(self.now);
        let (group, offering, price, price_synthetic) =
            (instance.group.clone(), instance.offering.clone(), instance.price, instance.price_synthetic);
        self.emit(
            Involved { kind: "NodeGroup".into(), namespace: None, name: group },
            Reason::Launched { offering, price, price_synthetic },
        );
        self.schedule_timer(self.now.plus(self.timings.registration), Timer::CaRegister(id.to_string()));
    }

    /// The instance's kubelet registers its Node, not Ready yet.
    pub(super) fn ca_register(&mut self, id: &str) {
        let Some(ca) = self.ca.as_ref() else { return };
        let Some(instance) = ca.instances.get(id).cloned() else { return };
        if instance.node.is_some() {
            return;
        }
        let Some(template) = ca.groups.iter().find(|g| g.name == instance.group).and_then(|g| g.template.clone())
        else {
            return;
        };
        let node_name = self.names.node();
        let mut node: Node = template.node;
        node.metadata.name = Some(node_name.clone());
        node.metadata.uid = Some(format!("node-{node_name}"));
        node.metadata.creation_timestamp = Some(self.clock.time(self.now));
        let node_labels = node.metadata.labels.get_or_insert_with(Default::default);
        node_labels.insert(labels::HOSTNAME.into(), node_name.clone());
        node_labels.insert(labels::TOPOLOGY_ZONE.into(), instance.offering.zone.clone());
        node_labels.insert(crate::clusterautoscaler::template::EBS_CSI_ZONE.into(), instance.offering.zone.clone());
        node_labels.insert(labels::INSTANCE_TYPE.into(), instance.offering.instance_type.clone());
        let spec = node.spec.get_or_insert_with(Default::default);
        spec.provider_id = Some(id.to_string());
        spec.taints.get_or_insert_with(Vec::new).push(super::lifecycle::not_ready_taint());
        // A real node's allocatable: the kubelet's and the system's reservations off its capacity.
        let types = self
            .catalogue
            .instance_types_shared(&self.region, &crate::api::ec2nodeclass::EC2NodeClassSpec::default())
            .ok();
        let allocatable = types
            .as_ref()
            .and_then(|t| t.iter().find(|t| t.name == instance.offering.instance_type))
            .map(|t| super::lifecycle::k8s_resources(t.allocatable()));
        let status = node.status.get_or_insert_with(Default::default);
        if let Some(allocatable) = allocatable {
            status.allocatable = Some(allocatable);
        }
        status.conditions = Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: Some("KubeletNotReady".into()),
            last_transition_time: Some(self.clock.time(self.now)),
            ..Default::default()
        }]);
        self.objects.nodes.push(node);
        if let Some(ca) = self.ca.as_mut() {
            ca.nodes.insert(node_name.clone());
            if let Some(i) = ca.instances.get_mut(id) {
                i.node = Some(node_name.clone());
            }
        }
        self.emit(Involved::node(&node_name), Reason::Registered { node: node_name.clone() });
        self.place_daemon_pods(&node_name);
        self.schedule_timer(self.now.plus(self.timings.initialization), Timer::CaReady(id.to_string()));
    }

    /// The kubelet reports Ready: the not-ready taint goes, kube-scheduler binds.
    pub(super) fn ca_ready(&mut self, id: &str) {
        let Some(node_name) = self.ca.as_ref().and_then(|ca| ca.instances.get(id)).and_then(|i| i.node.clone()) else {
            return;
        };
        let Some(node) = self.objects.nodes.iter_mut().find(|n| n.metadata.name.as_deref() == Some(&node_name)) else {
            return;
        };
        if let Some(taints) = node.spec.as_mut().and_then(|s| s.taints.as_mut()) {
            taints.retain(|t| t.key != "node.kubernetes.io/not-ready");
        }
        node.status.get_or_insert_with(Default::default).conditions = Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            message: Some("kubelet is posting ready status".into()),
            last_transition_time: Some(self.clock.time(self.now)),
            ..Default::default()
        }]);
        if let Some(i) = self.ca.as_mut().and_then(|ca| ca.instances.get_mut(id)) {
            i.ready = Some(self.now);
        }
        self.emit(Involved::node(&node_name), Reason::Initialized { node: node_name.clone() });
        self.kube_dirty = true;
    }
}

impl Simulation {
    /// Records a Cluster Autoscaler event on `object`.
    fn ca_event(&mut self, object: Involved, reason: &str, message: String, warning: bool) {
        let reason = Reason::ClusterAutoscaler { ca_reason: reason.into(), message, warning };
        self.emit(object, reason);
    }

    fn status_configmap() -> Involved {
        Involved { kind: "ConfigMap".into(), namespace: Some("kube-system".into()), name: STATUS_CONFIGMAP.into() }
    }

    /// Taints and cordons a node scale-down removes; it is drained after the delay.
    fn ca_start_deletion(&mut self, node: &str, drain: bool, unneeded: &BTreeMap<String, (f64, Vec<String>)>) {
        let Some(ca) = self.ca.as_mut() else { return };
        let Some(group) = ca.instances.values().find(|i| i.node.as_deref() == Some(node)).map(|i| i.group.clone())
        else {
            return;
        };
        ca.deleting.insert(node.to_string(), Deletion { group, drain, draining_since: None });
        let epoch = self.clock.epoch_seconds(self.now);
        if let Some(n) = self.objects.nodes.iter_mut().find(|n| n.metadata.name.as_deref() == Some(node)) {
            let spec = n.spec.get_or_insert_with(Default::default);
            spec.unschedulable = Some(true);
            spec.taints.get_or_insert_with(Vec::new).push(Taint {
                key: TO_BE_DELETED_TAINT.into(),
                value: Some(epoch.to_string()),
                effect: "NoSchedule".into(),
                time_added: None,
            });
        }
        self.kube_dirty = true;
        self.ca_event(Involved::node(node), "ScaleDown", "marked the node as toBeDeleted/unschedulable".into(), false);
        let (utilization, pods) = unneeded.get(node).cloned().unwrap_or_default();
        let (reason, message) = if drain {
            (
                "ScaleDown",
                format!(
                    "Scale-down: removing node {node}, utilization: {{{utilization:.2}}}, pods to reschedule: {}",
                    pods.join(",")
                ),
            )
        } else {
            ("ScaleDownEmpty", format!("Scale-down: removing empty node {node:?}"))
        };
        self.ca_event(Self::status_configmap(), reason, message, false);
        self.schedule_timer(self.now.plus(DELETE_DELAY_AFTER_TAINT), Timer::CaDrain(node.to_string()));
    }

    /// Evicts the pods of a node being deleted, then terminates its instance.
    pub(super) fn ca_drain(&mut self, node: &str) {
        let Some(deletion) = self.ca.as_ref().and_then(|ca| ca.deleting.get(node)).cloned() else { return };
        let start = self.clock.epoch_seconds(SimTime::ZERO);
        let now = self.now.secs_f64();
        let on_node: Vec<(String, String, Drain)> = self
            .objects
            .pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .map(|p| {
                let namespace = p.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                // Blocking rules were the planner's; here only what moves matters.
                let drain = match drainability(p, &[], now, start) {
                    Drain::Skip => Drain::Skip,
                    _ => Drain::Move,
                };
                (namespace, p.metadata.name.clone().unwrap_or_default(), drain)
            })
            .collect();
        let moving: Vec<&(String, String, Drain)> = on_node.iter().filter(|(_, _, d)| *d == Drain::Move).collect();
        if !deletion.drain && !moving.is_empty() {
            // upstream: an empty node that gained pods is not deleted.
            self.ca_abort_deletion(node, "failed to delete empty node: node is not empty".into());
            return;
        }
        let scales = self.pdb_scales();
        let mut refused = Vec::new();
        for (namespace, name, _) in moving {
            let Some(i) = self.pod_index(namespace, name) else { continue };
            let pod = &self.objects.pods[i];
            if let Some(pdb) = crate::disruption::pdb::blocking(pod, &self.objects.pdbs, &self.objects.pods, &scales) {
                refused.push(format!("{namespace}/{name} ({})", crate::disruption::pdb::name(pdb)));
                continue;
            }
            self.ca_event(
                Involved::pod(namespace, name),
                "ScaleDown",
                "deleting pod for node scale down".into(),
                false,
            );
            self.remove_pod(namespace, name, RemovalCause::Evicted);
        }
        if !refused.is_empty() {
            let since = deletion.draining_since.unwrap_or(self.now);
            if self.now.since(since) >= MAX_POD_EVICTION {
                self.ca_abort_deletion(
                    node,
                    format!("failed to drain and delete node: evictions refused: {}", refused.join(", ")),
                );
                return;
            }
            if let Some(d) = self.ca.as_mut().and_then(|ca| ca.deleting.get_mut(node)) {
                d.draining_since = Some(since);
            }
            self.schedule_timer(self.now.plus(EVICTION_RETRY), Timer::CaDrain(node.to_string()));
            return;
        }
        // DeleteNodes: the instance goes and the group's desired capacity with it.
        let Some(ca) = self.ca.as_mut() else { return };
        ca.deleting.remove(node);
        ca.nodes.remove(node);
        ca.removed.push((self.now, node.to_string()));
        ca.instances.retain(|_, i| i.node.as_deref() != Some(node));
        if let Some(g) = ca.groups.iter_mut().find(|g| g.name == deletion.group) {
            g.target -= 1;
        }
        self.remove_node_pods(node);
        self.objects.nodes.retain(|n| n.metadata.name.as_deref() != Some(node));
        self.kube_dirty = true;
        self.ca_event(Involved::node(node), "ScaleDown", "nodes removed by cluster autoscaler".into(), false);
        let (reason, message) = if deletion.drain {
            ("ScaleDown", format!("Scale-down: node {node} removed with drain"))
        } else {
            ("ScaleDownEmpty", format!("Scale-down: empty node {node} removed"))
        };
        self.ca_event(Self::status_configmap(), reason, message, false);
        self.emit(Involved::node(node), Reason::Terminated { node: node.to_string() });
    }

    /// A deletion that failed: the taint and the cordon go, the node stays.
    fn ca_abort_deletion(&mut self, node: &str, why: String) {
        if let Some(ca) = self.ca.as_mut() {
            ca.deleting.remove(node);
        }
        if let Some(n) = self.objects.nodes.iter_mut().find(|n| n.metadata.name.as_deref() == Some(node)) {
            let spec = n.spec.get_or_insert_with(Default::default);
            spec.unschedulable = None;
            if let Some(taints) = spec.taints.as_mut() {
                taints.retain(|t| t.key != TO_BE_DELETED_TAINT);
            }
        }
        self.kube_dirty = true;
        self.ca_event(Involved::node(node), "ScaleDownFailed", why, true);
    }
}

/// What a pod is known by in the requests kept between loops: its uid (the simulation gives every
/// pod one), else `namespace/name`.
fn pod_id(pod: &Pod) -> std::borrow::Cow<'_, str> {
    match pod.metadata.uid.as_deref() {
        Some(uid) => uid.into(),
        None => crate::simulation::pod_key(pod).into(),
    }
}

/// kube-scheduler marked it `PodScheduled=False/Unschedulable`.
fn unschedulable(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| {
        c.iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
    })
}

use crate::manifest::Manifests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::load;

    fn group(max: i64) -> String {
        format!(
            "apiVersion: carpentry.dev/v1alpha1
kind: NodeGroup
metadata: {{name: general}}
spec: {{minSize: 0, maxSize: {max}, instanceTypes: [m5.large], zones: [us-east-1a, us-east-1b]}}
"
        )
    }

    const INFLATE: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: \"1\", memory: 256Mi}}}]
";

    fn sim(docs: &[&str]) -> Simulation {
        let m = load(&docs.join("---\n")).unwrap_or_else(|e| panic!("{e}"));
        Simulation::cluster_autoscaler(&m, None, Timings::default(), crate::catalogue::Catalogue::embedded()).unwrap()
    }

    fn at(s: &Simulation, name: &str) -> Vec<u64> {
        s.events().iter().filter(|e| e.reason.name() == name).map(|e| e.at.millis() / 1000).collect()
    }

    #[test]
    fn inflate_runs_after_the_loop_the_asg_and_the_node_each_take_their_time() {
        let mut s = sim(&[&group(10), INFLATE]);
        s.run_until(SimTime::from_secs(300));
        // The pods are new at the first loop (0 s): CA waits one scan interval.
        let loops = s.ca_loops();
        assert_eq!((loops[0].at, loops[0].outcome.as_str()), (SimTime::ZERO, "InCooldown"));
        assert_eq!((loops[1].at, loops[1].outcome.as_str()), (SimTime::from_secs(10), "Successful"));
        assert_eq!(loops[1].targets, [("general".to_string(), 3)]);
        // Two loops follow at once; the nodes on their way take the pods, nothing more is asked.
        assert_eq!(
            loops[2..4].iter().map(|l| (l.at.millis(), l.outcome.as_str())).collect::<Vec<_>>(),
            [(10_000, "NotNeeded"); 2]
        );
        assert_eq!(at(&s, "ScaledUpGroup"), [10]);
        assert_eq!(at(&s, "TriggeredScaleUp"), [10; 3]);
        // 50 s of ASG, 3 s to launch, 40 s to register, 12 s to Ready.
        assert_eq!(at(&s, "Launched"), [63; 3]);
        assert_eq!(at(&s, "Registered"), [103; 3]);
        assert_eq!(at(&s, "Scheduled"), [115; 3]);
        assert!(at(&s, "NodeClaimCreated").is_empty(), "Karpenter provisions nothing");
        let snapshot = s.snapshot();
        assert_eq!((snapshot.running, snapshot.nodes.len()), (3, 3));
        // Spread over the group's zones; paid from the launch.
        let zones: Vec<&str> = snapshot.nodes.iter().filter_map(|n| n.zone.as_deref()).collect();
        assert_eq!(zones.iter().filter(|z| **z == "us-east-1a").count(), 2);
        let price = snapshot.nodes[0].price;
        assert!((snapshot.price_per_hour - 3.0 * price).abs() < 1e-9 && price > 0.0);
        let spent = s.cost().spent;
        assert!((spent - 3.0 * price * (300.0 - 63.0) / 3600.0).abs() < 1e-6, "{spent}");
        // The status ConfigMap of the last loop: three Ready nodes, nothing in flight, the group's
        // health unchanged since the first loop and its scale-up done since the nodes came.
        let status = s.ca_status().expect("a loop wrote the status");
        let g = &status.node_groups[0];
        assert_eq!((g.name.as_str(), g.health.status, g.health.cloud_provider_target), ("general", "Healthy", 3));
        assert_eq!(g.health.node_counts.registered.ready, 3);
        assert_eq!(status.cluster_wide.health.node_counts.registered.total, 3);
        assert_eq!((g.scale_up.status, status.cluster_wide.scale_up.status), ("NoActivity", "NoActivity"));
        let start = s.clock.epoch_seconds(SimTime::ZERO);
        // The first loop saw the group without instances (no probe time) and health has not
        // changed since: upstream keeps that first, null, transition.
        assert_eq!(g.health.last_transition_time, None);
        // Scale-up done at the first loop after the nodes were Ready (115 s): 120 s.
        assert_eq!(g.scale_up.last_transition_time, Some(crate::api::time::format_time(start + 120)));
    }

    #[test]
    fn nodes_emptied_by_a_scale_in_go_after_ten_minutes_unneeded() {
        let scenario = "apiVersion: carpentry.dev/v1alpha1
kind: Scenario
spec:
  steps:
  - {at: 5m, scale: {kind: Deployment, name: inflate, replicas: 1}}
";
        let mut s = sim(&[scenario, &group(10), INFLATE]);
        // Midway (past the 10 minutes of cooldown after the scale-up at 10 s): the status counts
        // the two empty nodes as candidates, and scale-down says why neither goes yet.
        s.run_until(SimTime::from_secs(700));
        let status = s.ca_status().unwrap();
        assert_eq!(
            (status.cluster_wide.scale_down.status, status.cluster_wide.scale_down.candidates),
            ("CandidatesPresent", 2)
        );
        assert_eq!(status.node_groups[0].scale_down.candidates, 2);
        let plan = s.ca_scale_down().unwrap();
        assert_eq!(plan.unneeded.len(), 2);
        let waiting: Vec<String> = plan.unremovable.iter().map(|(_, why)| why.to_string()).collect();
        assert_eq!(
            waiting.iter().filter(|w| w.starts_with("NotUnneededLongEnough: unneeded since +5m")).count(),
            2,
            "{waiting:?}"
        );
        s.run_until(SimTime::from_secs(2000));
        // Two nodes empty from 300 s, unneeded from the loop then; removable 10 minutes later
        // (the delay after the scale-up at 10 s has long passed); both at once (empty nodes are
        // not limited to one drain at a time), their instances terminated 5 s after the taint.
        let marked = s
            .events()
            .iter()
            .filter(|e| e.reason.name() == "ScaleDownEmpty")
            .map(|e| (e.at.millis() / 1000, e.message.clone()))
            .collect::<Vec<_>>();
        assert_eq!(marked.len(), 4, "{marked:?}");
        assert_eq!(marked[0].0, 900, "{marked:?}");
        assert!(marked[0].1.starts_with("Scale-down: removing empty node"), "{marked:?}");
        assert_eq!(at(&s, "Terminated"), [905, 905]);
        assert_eq!(s.ca_scale_downs().iter().map(|(at, _)| at.millis() / 1000).collect::<Vec<_>>(), [905, 905]);
        let snapshot = s.snapshot();
        assert_eq!((snapshot.nodes.len(), snapshot.running), (1, 1));
        assert_eq!(s.ca_loops().last().unwrap().targets, [], "no target set by the loop: the deletions lowered it");
        let price = snapshot.nodes[0].price;
        assert!((snapshot.price_per_hour - price).abs() < 1e-9);
        let ca = s.ca.as_ref().unwrap();
        assert_eq!(ca.groups[0].target, 1);
    }

    #[test]
    fn a_node_whose_pod_can_move_is_drained_and_the_one_taking_it_stays() {
        // a-0 and a-1 share the first node (1.8 of 1.93 CPUs), b-0 has the second; scaling a to
        // 1 leaves both under half used. The first node's pod fits beside b-0, so that node is
        // unneeded; the second's then has nowhere to go (the first counts as gone).
        let deployment = |name: &str, replicas: u32| {
            INFLATE
                .replace("inflate", name)
                .replace("cpu: \"1\"", "cpu: 900m")
                .replace("replicas: 3", &format!("replicas: {replicas}"))
        };
        let scenario = "apiVersion: carpentry.dev/v1alpha1
kind: Scenario
spec:
  steps:
  - {at: 5m, scale: {kind: Deployment, name: a, replicas: 1}}
";
        let mut s = sim(&[scenario, &group(10), &deployment("a", 2), &deployment("b", 1)]);
        s.run_until(SimTime::from_secs(2000));
        let drained: Vec<(u64, String)> = s
            .events()
            .iter()
            .filter(|e| e.reason.name() == "ScaleDown" && e.object.kind == "ConfigMap")
            .map(|e| (e.at.millis() / 1000, e.message.clone()))
            .collect();
        assert_eq!(drained.len(), 2, "{drained:?}");
        assert_eq!(drained[0].0, 900);
        assert!(drained[0].1.contains("utilization: {0.47}, pods to reschedule: default/a-0"), "{drained:?}");
        assert_eq!(at(&s, "Evicted"), [905]);
        let snapshot = s.snapshot();
        assert_eq!((snapshot.nodes.len(), snapshot.running, snapshot.pending.len()), (1, 2, 0));
    }

    #[test]
    fn a_group_at_its_max_leaves_the_rest_pending_and_says_why() {
        let mut s = sim(&[&group(2), INFLATE]);
        s.run_until(SimTime::from_secs(200));
        assert_eq!(s.snapshot().running, 2);
        let told: Vec<String> = s
            .events()
            .iter()
            .filter(|e| e.reason.name() == "NotTriggerScaleUp")
            .map(|e| e.reason.to_string())
            .collect();
        assert!(told.iter().all(|m| m == "pod didn't trigger scale-up: 1 max node group size reached"), "{told:?}");
        // Once, not once a loop: CA's recorder collapses identical events within 5 minutes.
        assert_eq!(told.len(), 1, "{told:?}");
        s.run_until(SimTime::from_secs(500));
        assert_eq!(at(&s, "NotTriggerScaleUp").len(), 2, "again after 5 minutes");
    }

    #[test]
    fn nodes_that_never_register_time_out_and_the_group_backs_off() {
        let scenario = "apiVersion: carpentry.dev/v1alpha1
kind: Scenario
spec:
  timings: {registration: Never}
";
        let mut s = sim(&[scenario, &group(10), INFLATE]);
        s.run_until(SimTime::from_secs(1000));
        // Asked at 10 s, due by 910 s: the loop at 920 s finds it late.
        assert_eq!(at(&s, "ScaleUpTimedOut"), [920]);
        let loop_at = s.ca_loops().iter().find(|l| l.at == SimTime::from_secs(920)).unwrap();
        assert_eq!(loop_at.targets, [("general".to_string(), 0)]);
        assert_eq!(s.snapshot().price_per_hour, 0.0, "the instances that never joined are gone");
        let last = s.events().iter().rev().find(|e| e.reason.name() == "NotTriggerScaleUp").unwrap();
        assert_eq!(last.reason.to_string(), "pod didn't trigger scale-up: 1 in backoff after failed scale-up");
        let status = s.ca_status().unwrap();
        let up = &status.node_groups[0].scale_up;
        assert_eq!(up.status, "Backoff");
        assert!(
            up.backoff_info.as_ref().unwrap().error_message.starts_with("Scale-up timed out for node group general"),
            "{up:?}"
        );
    }

    mod properties {
        use super::*;
        use crate::resources::{self, ResourceList};
        use proptest::prelude::*;

        /// A random cluster under CA: one group with random bounds and start size, deployments
        /// (some under a PDB) scaled up and down, a bare pod and a kube-system pod (neither may
        /// be moved by scale-down).
        fn input() -> impl Strategy<Value = String> {
            let group = (0i64..3, 1i64..12, 0i64..7, prop::sample::select(vec!["m5.large", "c5.xlarge", "m5.xlarge"]));
            // (replicas, CPU in tenths, a PDB's maxUnavailable)
            let deployments = prop::collection::vec((0i32..12, 1u32..16, prop::option::of(0u32..2)), 1..4);
            let steps = prop::collection::vec((1u64..40, 0usize..4, 0i32..12), 1..8);
            let loose = (any::<bool>(), any::<bool>());
            // Scale-down as upstream's defaults have it, or eager (so that drains are common).
            let flags = (prop::sample::select(vec![0.5, 0.8, 0.95]), prop::sample::select(vec!["1m", "10m"]));
            (group, deployments, steps, loose, flags).prop_map(|((min, extra, desired, itype), deps, steps, (bare, system), (threshold, unneeded))| {
                let max = min + extra;
                let desired = desired.clamp(min, max);
                let mut docs = vec![format!(
                    "apiVersion: carpentry.dev/v1alpha1\nkind: NodeGroup\nmetadata: {{name: general}}\nspec: {{minSize: {min}, maxSize: {max}, desiredCapacity: {desired}, instanceTypes: [{itype}], zones: [us-east-1a, us-east-1b]}}\n"
                )];
                for (i, (replicas, tenths, budget)) in deps.iter().enumerate() {
                    docs.push(
                        INFLATE
                            .replace("inflate", &format!("app{i}"))
                            .replace("replicas: 3", &format!("replicas: {replicas}"))
                            .replace("cpu: \"1\"", &format!("cpu: {}m", tenths * 100)),
                    );
                    if let Some(max_unavailable) = budget {
                        docs.push(format!(
                            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: app{i}, namespace: default}}\nspec:\n  maxUnavailable: {max_unavailable}\n  selector: {{matchLabels: {{app: app{i}}}}}\n"
                        ));
                    }
                }
                if bare {
                    docs.push("apiVersion: v1\nkind: Pod\nmetadata: {name: bare, namespace: default}\nspec:\n  containers: [{name: c, image: x, resources: {requests: {cpu: 200m}}}]\n".into());
                }
                if system {
                    docs.push(INFLATE.replace("inflate", "dns").replace("namespace: default", "namespace: kube-system").replace("replicas: 3", "replicas: 1").replace("cpu: \"1\"", "cpu: 100m"));
                }
                let text: String = steps
                    .iter()
                    .map(|(minute, target, replicas)| {
                        format!("  - {{at: {minute}m, scale: {{kind: Deployment, name: app{}, replicas: {replicas}}}}}\n", target % deps.len())
                    })
                    .collect();
                docs.push(format!(
                    "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec:\n  clusterAutoscaler: {{scaleDownUtilizationThreshold: {threshold}, scaleDownUnneededTime: {unneeded}, scaleDownDelayAfterAdd: {unneeded}}}\n  steps:\n{text}"
                ));
                docs.join("---\n")
            })
        }

        fn on_node<'s>(s: &'s Simulation, node: &str) -> impl Iterator<Item = &'s Pod> + 's {
            let node = node.to_string();
            s.objects().pods.iter().filter(move |p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str()) && crate::pod::is_active(p)
            })
        }

        /// What a node has left: allocatable less its active pods' requests.
        fn free(s: &Simulation, node: &Node) -> ResourceList {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let mut left = resources::from_k8s(node.status.as_ref().unwrap().allocatable.as_ref().unwrap()).unwrap();
            for p in on_node(s, name) {
                left = resources::subtract(&left, &resources::pod_requests(p).unwrap());
            }
            left
        }

        fn deleting(node: &Node) -> bool {
            node.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key == TO_BE_DELETED_TAINT))
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

            #[test]
            fn cluster_autoscaler_keeps_its_bounds_and_moves_only_what_can_move(text in input()) {
                let m = load(&text).unwrap();
                let end = SimTime::from_secs(3600);
                let new = || Simulation::cluster_autoscaler(&m, None, Timings::default(), crate::catalogue::Catalogue::embedded()).unwrap();
                let mut s = new();
                let (min, max) = {
                    let g = &s.ca.as_ref().unwrap().groups[0];
                    (g.spec.spec.min_size, g.max)
                };
                let bare_exists = |s: &Simulation| s.objects().pods.iter().any(|p| p.metadata.name.as_deref() == Some("bare"));
                let had_bare = bare_exists(&s);
                while s.next_event_time().is_some_and(|t| t <= end) {
                    let seen = s.events().len();
                    let headroom_before: Vec<i64> = s.objects().pdbs.iter()
                        .map(|pdb| crate::disruption::pdb::headroom(pdb, &s.objects().pods, &s.pdb_scales()))
                        .collect();
                    s.step();
                    let ca = s.ca.as_ref().unwrap();
                    let g = &ca.groups[0];
                    // Never above the group's max or below its min, in target or in instances.
                    prop_assert!(min <= g.target && g.target <= max, "target {} outside {min}..={max} at {}", g.target, s.now());
                    let instances = ca.instances.values().filter(|i| i.group == g.name).count() as i64;
                    prop_assert!(instances <= max, "{instances} instances above max {max} at {}", s.now());
                    let new_events = &s.events()[seen..];
                    // Nodes whose drain began this instant: each pod that must move fits on a node
                    // that stays (a necessary condition of the drain simulation's first fit), and
                    // all together fit the room the staying nodes have.
                    let draining: Vec<&str> = new_events.iter()
                        .filter(|e| e.object.kind == "Node" && e.reason.to_string() == "marked the node as toBeDeleted/unschedulable")
                        .map(|e| e.object.name.as_str())
                        .filter(|n| ca.deleting.get(*n).is_some_and(|d| d.drain))
                        .collect();
                    if !draining.is_empty() {
                        let staying: Vec<ResourceList> = s.objects().nodes.iter()
                            .filter(|n| !deleting(n) && crate::nodeclaim::garbagecollection::node_ready(n))
                            .map(|n| free(&s, n))
                            .collect();
                        let mut total = ResourceList::new();
                        for node in &draining {
                            for p in on_node(&s, node).filter(|p| crate::pod::daemonset_owner(p).is_none()) {
                                let requests = resources::pod_requests(p).unwrap();
                                prop_assert!(
                                    staying.iter().any(|room| resources::exceeded(&requests, room).is_empty()),
                                    "{}/{} on {node} fits no staying node at {}",
                                    p.metadata.namespace.as_deref().unwrap_or_default(), p.metadata.name.as_deref().unwrap_or_default(), s.now()
                                );
                                resources::add_into(&mut total, &requests);
                            }
                        }
                        let mut room = ResourceList::new();
                        for r in &staying {
                            resources::add_into(&mut room, r);
                        }
                        prop_assert!(resources::exceeded(&total, &room).is_empty(), "{total:?} to move, {room:?} free at {}", s.now());
                    }
                    // No eviction takes a PDB below what it allows.
                    let within = crate::simulation::tests::evictions_within_pdbs(&s, new_events, &headroom_before);
                    prop_assert!(within.is_ok(), "{}", within.unwrap_err());
                    // A pod without a controller, or in kube-system without a PDB, is never moved.
                    prop_assert!(!had_bare || bare_exists(&s), "the bare pod went at {}", s.now());
                    for e in new_events.iter().filter(|e| e.reason.name() == "Evicted") {
                        prop_assert!(e.object.namespace.as_deref() != Some("kube-system"), "{} evicted", e.object);
                    }
                }
                // Deterministic.
                let mut again = new();
                again.run_until(end);
                prop_assert_eq!(s.events(), again.events());
            }
        }
    }
}
