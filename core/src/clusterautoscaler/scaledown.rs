//! Scale-down's planning half: which nodes are unneeded, which of those may go now, and why the
//! others stay. Upstream kubernetes/autoscaler, tag `cluster-autoscaler-1.36.1`, under
//! `cluster-autoscaler/`:
//! - candidates: `processors/nodes/pre_filtering_processor.go` (autoscaled, above min size),
//!   `processors/scaledowncandidates` (empty first, then previously unneeded);
//! - eligibility and utilization: `core/scaledown/eligibility/eligibility.go`,
//!   `simulator/utilization/info.go` (max of CPU and memory requests over allocatable; GPU nodes by
//!   GPU alone);
//! - the drain simulation: `simulator/cluster.go` `SimulateNodeRemoval` and `simulator/drain.go`
//!   `GetPodsToMove`, with the rules of `simulator/drainability/rules` (see [`drainability`](mod@drainability)): a
//!   node's pods go first-fit onto the other nodes and a node that can go is committed, so later
//!   candidates see it gone and its pods moved; one that cannot is not rechecked for
//!   `--unremovable-node-recheck-timeout` (5 minutes, `core/scaledown/unremovable/nodes.go`);
//! - unneeded since: `core/scaledown/unneeded/nodes.go` (the first time found, forgotten the first
//!   loop it is not);
//! - removable now: `unneeded/nodes.go` `RemovableAt` (unneeded 10 minutes, unready 20; the group
//!   above its min counting deletions under way; the cluster's core and memory minimums);
//! - cooldowns: `core/static_autoscaler.go` `isScaleDownInCooldown` (10 minutes after a scale-up,
//!   0 s after a deletion, 3 minutes after a failure);
//! - budgets: `core/scaledown/budgets/budgets.go` (`--max-scale-down-parallelism` 10 deletions
//!   under way, `--max-drain-parallelism` 1 of them drains; empty nodes first).
//!
//! Deterministic where upstream is not (map order, unstable sorts): nodes in the order given, which
//! the caller makes the nodes' names. The pass is not cut short at upstream's
//! `unneededNodesLimit` or `--scale-down-simulation-timeout` (30 s): neither binds at the scales
//! simulated.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::Serialize;

use crate::api::clusterautoscaler::{GroupOptions, ResolvedOptions};
use crate::api::duration::parse_go_duration;
use crate::nodeclaim::garbagecollection::node_ready;
use crate::resources::{self, ResourceList};

use super::autoscaler::{key, NodeView};
use super::predicates::{self, PendingPod};

/// `--unremovable-node-recheck-timeout`.
pub const UNREMOVABLE_RECHECK_SECONDS: f64 = 300.0;
/// A node CA must leave alone.
pub const SCALE_DOWN_DISABLED_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";
/// The hard taint CA puts on a node it deletes.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
/// The soft taint (PreferNoSchedule) on unneeded nodes.
pub const DELETION_CANDIDATE_TAINT: &str = "DeletionCandidateOfClusterAutoscaler";

pub mod drainability;

pub use drainability::{drainability, BlockingPod, Drain};

/// A group's scale-down settings: its `autoscaling-options` tags over CA's flags
/// (`cloudprovider/aws/aws_manager.go` `GetAsgOptions`).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupScaleDown {
    pub name: String,
    /// Its target now.
    pub size: i64,
    pub min: i64,
    pub utilization_threshold: f64,
    pub gpu_utilization_threshold: f64,
    pub unneeded_seconds: f64,
    pub unready_seconds: f64,
    pub ignore_daemonsets_utilization: bool,
}

impl GroupScaleDown {
    pub fn new(name: &str, size: i64, min: i64, own: &GroupOptions, flags: &ResolvedOptions) -> GroupScaleDown {
        // The tags were validated with the scenario; one that does not parse keeps the flag.
        let seconds = |text: &Option<String>, flag: f64| {
            text.as_deref().and_then(|t| parse_go_duration(t).ok()).map_or(flag, |n| n as f64 / 1e9)
        };
        GroupScaleDown {
            name: name.to_string(),
            size,
            min,
            utilization_threshold: own
                .scale_down_utilization_threshold
                .unwrap_or(flags.scale_down_utilization_threshold),
            gpu_utilization_threshold: own
                .scale_down_gpu_utilization_threshold
                .unwrap_or(flags.scale_down_gpu_utilization_threshold),
            unneeded_seconds: seconds(&own.scale_down_unneeded_time, flags.scale_down_unneeded_time_seconds),
            unready_seconds: seconds(&own.scale_down_unready_time, flags.scale_down_unready_time_seconds),
            ignore_daemonsets_utilization: own
                .ignore_daemonsets_utilization
                .unwrap_or(flags.ignore_daemonsets_utilization),
        }
    }
}

/// A deletion under way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    pub group: String,
    pub node: String,
    /// It drains pods (not an empty node).
    pub drain: bool,
}

/// What the planner sees.
#[derive(Debug, Clone)]
pub struct ScaleDownInput<'a> {
    /// Seconds on the caller's clock.
    pub now: f64,
    /// The Unix second the caller's clock counts from (pods' ages).
    pub start_epoch: i64,
    pub groups: Vec<GroupScaleDown>,
    /// Every registered node, in the order candidates are taken.
    pub nodes: &'a [NodeView<'a>],
    /// The cluster's PDBs with their `disruptionsAllowed`.
    pub pdbs: &'a [(&'a PodDisruptionBudget, i64)],
    pub in_flight: &'a [InFlight],
    /// The loop's scale-up half lets scale-down act (no scale-up this loop, a healthy cluster).
    pub allowed: bool,
}

/// Why a node is not removed (upstream `simulator.UnremovableReason`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason")]
pub enum Unremovable {
    ScaleDownDisabledAnnotation,
    NotAutoscaled,
    CurrentlyBeingDeleted,
    NodeGroupMinSizeReached,
    NotUnderutilized { utilization: f64 },
    RecentlyUnremovable,
    NoPlaceToMovePods { pod: String },
    BlockedByPod { pod: String, blocking: BlockingPod },
    NotUnneededLongEnough { since: f64 },
    NotUnreadyLongEnough { since: f64 },
    MinimalResourceLimitExceeded { resource: String },
}

/// A time on the caller's clock as an offset from its start (`+10m`).
fn at(seconds: f64) -> String {
    format!("+{}", crate::api::duration::format_go_duration((seconds.max(0.0) * 1e9) as i64))
}

impl std::fmt::Display for Unremovable {
    /// upstream's reason name (`simulator.UnremovableReason`), then what it means here.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unremovable::ScaleDownDisabledAnnotation => {
                write!(f, "ScaleDownDisabledAnnotation: the node is annotated {SCALE_DOWN_DISABLED_ANNOTATION}=true")
            }
            Unremovable::NotAutoscaled => write!(f, "NotAutoscaled: the node is in no node group"),
            Unremovable::CurrentlyBeingDeleted => write!(f, "CurrentlyBeingDeleted"),
            Unremovable::NodeGroupMinSizeReached => {
                write!(f, "NodeGroupMinSizeReached: its group is at its minimum size")
            }
            Unremovable::NotUnderutilized { utilization } => write!(
                f,
                "NotUnderutilized: its pods request {:.0}% of its allocatable, not under the scale-down utilization \
                 threshold",
                utilization * 100.0
            ),
            Unremovable::RecentlyUnremovable => {
                write!(f, "RecentlyUnremovable: found unremovable less than 5 minutes ago, not rechecked yet")
            }
            Unremovable::NoPlaceToMovePods { pod } => {
                write!(f, "NoPlaceToMovePods: {pod} fits no other node once the others' pods are placed")
            }
            Unremovable::BlockedByPod { pod, blocking } => write!(f, "BlockedByPod: {pod}, {blocking}"),
            Unremovable::NotUnneededLongEnough { since } => write!(
                f,
                "NotUnneededLongEnough: unneeded since {}, not yet for the scale-down unneeded time",
                at(*since)
            ),
            Unremovable::NotUnreadyLongEnough { since } => write!(
                f,
                "NotUnreadyLongEnough: unready and unneeded since {}, not yet for the scale-down unready time",
                at(*since)
            ),
            Unremovable::MinimalResourceLimitExceeded { resource } => write!(
                f,
                "MinimalResourceLimitExceeded: removing it would take the cluster's {resource} under its minimum"
            ),
        }
    }
}

impl std::fmt::Display for Cooldown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cooldown::NotAllowed => write!(f, "scale-down did not act this loop (off, or the loop scaled up)"),
            Cooldown::DelayAfterAdd { until } => {
                write!(f, "in cooldown after a scale-up until {} (--scale-down-delay-after-add)", at(*until))
            }
            Cooldown::DelayAfterDelete { until } => {
                write!(f, "in cooldown after a deletion until {} (--scale-down-delay-after-delete)", at(*until))
            }
            Cooldown::DelayAfterFailure { until } => {
                write!(f, "in cooldown after a failed deletion until {} (--scale-down-delay-after-failure)", at(*until))
            }
        }
    }
}

/// Why nothing is deleted this loop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Cooldown {
    /// Off by flag, or the loop's scale-up half did something.
    NotAllowed,
    DelayAfterAdd {
        until: f64,
    },
    DelayAfterDelete {
        until: f64,
    },
    DelayAfterFailure {
        until: f64,
    },
}

/// An unneeded node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unneeded {
    pub node: String,
    pub group: String,
    /// Seconds on the caller's clock.
    pub since: f64,
    pub utilization: f64,
    /// `namespace/name` of the pods that would move.
    pub pods_to_move: Vec<String>,
}

/// The plan of one loop.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScaleDownPlan {
    pub unneeded: Vec<Unneeded>,
    pub unremovable: Vec<(String, Unremovable)>,
    /// To delete now: empty nodes, then nodes to drain, each in the order found.
    pub empty: Vec<String>,
    pub drain: Vec<String>,
    pub cooldown: Option<Cooldown>,
}

/// What scale-down remembers between loops.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScaleDownState {
    unneeded_since: BTreeMap<String, f64>,
    unremovable_until: BTreeMap<String, f64>,
    pub last_scale_up: Option<f64>,
    pub last_delete: Option<f64>,
    pub last_failure: Option<f64>,
}

impl ScaleDownState {
    /// An unhealthy cluster: every node's unneeded time starts over.
    pub fn forget_unneeded(&mut self) {
        self.unneeded_since.clear();
    }
}

/// The utilization that decides, and its threshold.
fn utilization(node: &NodeView, group: &GroupScaleDown) -> (f64, f64) {
    let allocatable = node
        .node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| resources::from_k8s(a).ok())
        .unwrap_or_default();
    let get = |list: &ResourceList, k: &str| list.get(k).map_or(0.0, |q| q.as_f64());
    let (mut used, mut daemons): (ResourceList, ResourceList) = (ResourceList::new(), ResourceList::new());
    for (p, requests) in node.pods.iter().zip(&node.requests).filter(|(p, _)| crate::pod::is_active(p)) {
        // Mirror pods have their own flag (`--ignore-mirror-pods-utilization`, off).
        if crate::pod::daemonset_owner(p).is_some() {
            resources::add_into(&mut daemons, requests);
        }
        resources::add_into(&mut used, requests);
    }
    let ratio = |key: &str| {
        let (mut u, mut a) = (get(&used, key), get(&allocatable, key));
        if group.ignore_daemonsets_utilization {
            u -= get(&daemons, key);
            a -= get(&daemons, key);
        }
        if a > 0.0 {
            u / a
        } else {
            0.0
        }
    };
    if get(&allocatable, "nvidia.com/gpu") > 0.0 {
        return (ratio("nvidia.com/gpu"), group.gpu_utilization_threshold);
    }
    (ratio("cpu").max(ratio("memory")), group.utilization_threshold)
}

fn being_deleted(view: &NodeView) -> bool {
    view.node.metadata.deletion_timestamp.is_some()
        || view
            .node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == TO_BE_DELETED_TAINT))
}

/// One loop's scale-down planning (and its decisions when allowed).
pub fn plan(input: &ScaleDownInput, state: &mut ScaleDownState, options: &ResolvedOptions) -> ScaleDownPlan {
    let now = input.now;
    let mut out = ScaleDownPlan::default();
    let group = |name: &str| input.groups.iter().find(|g| g.name == name);
    // Every registered node not being deleted can take pods, in the order given: what is left on
    // each, by the node's index (`None`: it takes nothing).
    let mut free: Vec<Option<ResourceList>> =
        input.nodes.iter().map(|v| (!being_deleted(v)).then(|| v.free.clone())).collect();
    // Candidates, with what must move.
    struct Candidate<'v> {
        index: usize,
        name: String,
        group: &'v GroupScaleDown,
        utilization: f64,
        movable: Vec<&'v Pod>,
        blocked: Option<(String, BlockingPod)>,
    }
    let mut candidates: Vec<Candidate> = Vec::new();
    for (index, view) in input.nodes.iter().enumerate() {
        let name = view.name().to_string();
        let annotations = view.node.metadata.annotations.as_ref();
        let Some(g) = view.group.and_then(group) else {
            out.unremovable.push((name, Unremovable::NotAutoscaled));
            continue;
        };
        if annotations.and_then(|a| a.get(SCALE_DOWN_DISABLED_ANNOTATION)).map(String::as_str) == Some("true") {
            out.unremovable.push((name, Unremovable::ScaleDownDisabledAnnotation));
            continue;
        }
        if being_deleted(view) {
            out.unremovable.push((name, Unremovable::CurrentlyBeingDeleted));
            continue;
        }
        if g.size <= g.min {
            out.unremovable.push((name, Unremovable::NodeGroupMinSizeReached));
            continue;
        }
        let (used, threshold) = utilization(view, g);
        // upstream `isNodeBelowUtilizationThreshold`: at the threshold is not below it.
        if used >= threshold {
            out.unremovable.push((name, Unremovable::NotUnderutilized { utilization: used }));
            continue;
        }
        let mut movable = Vec::new();
        let mut blocked = None;
        for p in &view.pods {
            match drainability(p, input.pdbs, now, input.start_epoch) {
                Drain::Skip => {}
                Drain::Move => movable.push(*p),
                Drain::Blocked(reason) => {
                    blocked = Some((key(p), reason));
                    break;
                }
            }
        }
        candidates.push(Candidate { index, name, group: g, utilization: used, movable, blocked });
    }
    // Empty first, then those unneeded before, otherwise as given (a stable sort).
    candidates.sort_by_key(|c| (!c.movable.is_empty(), !state.unneeded_since.contains_key(&c.name)));
    let mut removed = vec![false; input.nodes.len()];
    // Pods a committed removal put on each node, by the node's index.
    let mut moved_in: BTreeMap<usize, Vec<PendingPod>> = BTreeMap::new();
    let mut unneeded_now: BTreeMap<String, f64> = BTreeMap::new();
    for c in candidates {
        if state.unremovable_until.get(&c.name).is_some_and(|until| *until > now) {
            out.unremovable.push((c.name, Unremovable::RecentlyUnremovable));
            continue;
        }
        if let Some((pod, blocking)) = c.blocked {
            state.unremovable_until.insert(c.name.clone(), now + UNREMOVABLE_RECHECK_SECONDS);
            out.unremovable.push((c.name, Unremovable::BlockedByPod { pod, blocking }));
            continue;
        }
        // Its own pods and those an earlier removal moved onto it, first fit on the other nodes;
        // committed only if every pod finds a place.
        let mut to_move: Vec<PendingPod> = Vec::new();
        let mut homeless = None;
        for p in &c.movable {
            match PendingPod::read(p) {
                Some(read) => to_move.push(read),
                None => {
                    homeless = Some(key(p));
                    break;
                }
            }
        }
        let own = to_move.len();
        to_move.extend(moved_in.remove(&c.index).unwrap_or_default());
        let mut trial: Vec<(usize, ResourceList)> = Vec::new();
        let mut placed: Vec<(usize, usize)> = Vec::new();
        for (j, read) in to_move.iter().enumerate() {
            if homeless.is_some() {
                break;
            }
            let spot = free.iter().enumerate().position(|(i, left)| {
                i != c.index
                    && !removed[i]
                    && left
                        .as_ref()
                        .is_some_and(|left| predicates::check(&read.data, &input.nodes[i].scheduling, left).is_ok())
            });
            match spot.and_then(|i| Some((i, free[i].as_mut()?))) {
                Some((i, left)) => {
                    let taken = resources::subtract(left, &read.data.requests);
                    trial.push((i, std::mem::replace(left, taken)));
                    placed.push((j, i));
                }
                None => homeless = Some(read.key.clone()),
            }
        }
        if let Some(pod) = homeless {
            for (i, before) in trial.into_iter().rev() {
                free[i] = Some(before);
            }
            // What was moved onto it stays there.
            let brought: Vec<PendingPod> = to_move.into_iter().skip(own).collect();
            if !brought.is_empty() {
                moved_in.insert(c.index, brought);
            }
            state.unremovable_until.insert(c.name.clone(), now + UNREMOVABLE_RECHECK_SECONDS);
            out.unremovable.push((c.name, Unremovable::NoPlaceToMovePods { pod }));
            continue;
        }
        let mut to_move: Vec<Option<PendingPod>> = to_move.into_iter().map(Some).collect();
        for (j, i) in placed {
            if let Some(read) = to_move[j].take() {
                moved_in.entry(i).or_default().push(read);
            }
        }
        removed[c.index] = true;
        let since = state.unneeded_since.get(&c.name).copied().unwrap_or(now);
        unneeded_now.insert(c.name.clone(), since);
        out.unneeded.push(Unneeded {
            node: c.name,
            group: c.group.name.clone(),
            since,
            utilization: c.utilization,
            pods_to_move: c.movable.iter().map(|p| key(p)).collect(),
        });
    }
    state.unneeded_since = unneeded_now;
    state.unremovable_until.retain(|_, until| *until > now);
    out.cooldown = cooldown(input, state, options);
    if out.cooldown.is_some() {
        return out;
    }
    removable(input, &mut out, options);
    out
}

fn cooldown(input: &ScaleDownInput, state: &ScaleDownState, options: &ResolvedOptions) -> Option<Cooldown> {
    let now = input.now;
    if !input.allowed || !options.scale_down_enabled {
        return Some(Cooldown::NotAllowed);
    }
    let after = |at: Option<f64>, delay: f64| at.map(|t| t + delay).filter(|until| now < *until);
    if let Some(until) = after(state.last_scale_up, options.scale_down_delay_after_add_seconds) {
        return Some(Cooldown::DelayAfterAdd { until });
    }
    if let Some(until) = after(state.last_delete, options.scale_down_delay_after_delete_seconds) {
        return Some(Cooldown::DelayAfterDelete { until });
    }
    after(state.last_failure, options.scale_down_delay_after_failure_seconds)
        .map(|until| Cooldown::DelayAfterFailure { until })
}

/// Of the unneeded nodes, those that may go now, within the budgets.
fn removable(input: &ScaleDownInput, out: &mut ScaleDownPlan, options: &ResolvedOptions) {
    let now = input.now;
    let mut left_in_group: BTreeMap<&str, i64> = input
        .groups
        .iter()
        .map(|g| {
            let deleting = input.in_flight.iter().filter(|f| f.group == g.name).count() as i64;
            (g.name.as_str(), g.size - deleting - g.min)
        })
        .collect();
    // The cluster's totals over its nodes, less what is being deleted.
    let capacity = |v: &NodeView, k: &str| {
        let list = v.node.status.as_ref().and_then(|s| s.capacity.as_ref()).and_then(|c| resources::from_k8s(c).ok());
        list.and_then(|l| l.get(k).map(crate::quantity::Quantity::as_f64)).unwrap_or(0.0)
    };
    let deleting: BTreeSet<&str> = input.in_flight.iter().map(|f| f.node.as_str()).collect();
    let live = || input.nodes.iter().filter(|v| !deleting.contains(v.name()));
    let by_name: BTreeMap<&str, &NodeView> = input.nodes.iter().map(|v| (v.name(), v)).collect();
    let mut cores: f64 = live().map(|v| capacity(v, "cpu")).sum();
    let mut memory: f64 = live().map(|v| capacity(v, "memory")).sum();
    let in_flight = input.in_flight.len() as i64;
    let drains_in_flight = input.in_flight.iter().filter(|f| f.drain).count() as i64;
    let mut total_room = (options.max_scale_down_parallelism - in_flight).max(0);
    let mut drain_room = (options.max_drain_parallelism - drains_in_flight).max(0);
    let mut chosen_empty = Vec::new();
    let mut chosen_drain = Vec::new();
    // Empty nodes first (`CropNodes`).
    let mut ordered: Vec<&Unneeded> = out.unneeded.iter().collect();
    ordered.sort_by_key(|u| !u.pods_to_move.is_empty());
    for u in ordered {
        let Some(view) = by_name.get(u.node.as_str()) else { continue };
        let group = input.groups.iter().find(|g| g.name == u.group);
        let Some(group) = group else { continue };
        let ready = node_ready(view.node);
        let (wait, reason) = if ready {
            (group.unneeded_seconds, Unremovable::NotUnneededLongEnough { since: u.since })
        } else {
            (group.unready_seconds, Unremovable::NotUnreadyLongEnough { since: u.since })
        };
        if now - u.since < wait {
            out.unremovable.push((u.node.clone(), reason));
            continue;
        }
        let left = left_in_group.entry(group.name.as_str()).or_default();
        if *left <= 0 {
            out.unremovable.push((u.node.clone(), Unremovable::NodeGroupMinSizeReached));
            continue;
        }
        let (node_cores, node_memory) = (capacity(view, "cpu"), capacity(view, "memory"));
        if cores - node_cores < options.cores_total.0 as f64 {
            out.unremovable
                .push((u.node.clone(), Unremovable::MinimalResourceLimitExceeded { resource: "cpu".into() }));
            continue;
        }
        if memory - node_memory < options.memory_total.0 as f64 {
            out.unremovable
                .push((u.node.clone(), Unremovable::MinimalResourceLimitExceeded { resource: "memory".into() }));
            continue;
        }
        let drain = !u.pods_to_move.is_empty();
        if total_room == 0 || (drain && drain_room == 0) {
            // Over budget: still unneeded, taken in a later loop.
            continue;
        }
        total_room -= 1;
        *left -= 1;
        cores -= node_cores;
        memory -= node_memory;
        if drain {
            drain_room -= 1;
            chosen_drain.push(u.node.clone());
        } else {
            chosen_empty.push(u.node.clone());
        }
    }
    out.empty = chosen_empty;
    out.drain = chosen_drain;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    fn node(name: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        }))
        .unwrap()
    }

    fn pod(name: &str, cpu: &str, owner: Option<&str>) -> Pod {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "x", "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running"}
        });
        if let Some(kind) = owner {
            p["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": "u", "controller": true}]);
        }
        serde_json::from_value(p).unwrap()
    }

    struct Cluster {
        nodes: Vec<Node>,
        pods: Vec<Vec<Pod>>,
        size: i64,
        min: i64,
    }

    impl Cluster {
        /// Nodes `a`, `b`, … of group `g`, each with its pods `(cpu, owner)`.
        fn new(layout: &[&[(&str, Option<&str>)]]) -> Cluster {
            let names = ["a", "b", "c", "d"];
            Cluster {
                nodes: layout.iter().enumerate().map(|(i, _)| node(names[i])).collect(),
                pods: layout
                    .iter()
                    .enumerate()
                    .map(|(i, pods)| {
                        pods.iter().enumerate().map(|(j, (cpu, o))| pod(&format!("{}{j}", names[i]), cpu, *o)).collect()
                    })
                    .collect(),
                size: layout.len() as i64,
                min: 0,
            }
        }

        fn plan(&self, now: f64, state: &mut ScaleDownState, in_flight: &[InFlight]) -> ScaleDownPlan {
            let options = crate::api::clusterautoscaler::ClusterAutoscalerOptions::default().resolved();
            let requests: Vec<Vec<ResourceList>> = self
                .pods
                .iter()
                .map(|pods| pods.iter().map(|p| resources::pod_requests(p).unwrap()).collect())
                .collect();
            let views: Vec<NodeView> = self
                .nodes
                .iter()
                .zip(&self.pods)
                .zip(&requests)
                .map(|((n, pods), requests)| {
                    NodeView::new(n, Some("g"), 0.0, pods.iter().collect(), requests.iter().collect())
                })
                .collect();
            let input = ScaleDownInput {
                now,
                start_epoch: 0,
                groups: vec![GroupScaleDown::new("g", self.size, self.min, &GroupOptions::default(), &options)],
                nodes: &views,
                pdbs: &[],
                in_flight,
                allowed: true,
            };
            plan(&input, state, &options)
        }
    }

    const RS: Option<&str> = Some("ReplicaSet");

    fn reasons(p: &ScaleDownPlan) -> Vec<(&str, &Unremovable)> {
        p.unremovable.iter().map(|(n, r)| (n.as_str(), r)).collect()
    }

    #[test]
    fn an_underutilized_node_whose_pods_fit_elsewhere_goes_after_ten_minutes() {
        // a: 0.4 of 2 CPUs; b: 1.2 of 2 (over 0.5), with room for a's pod.
        let c = Cluster::new(&[&[("400m", RS)], &[("1200m", RS)]]);
        let mut state = ScaleDownState::default();
        let first = c.plan(100.0, &mut state, &[]);
        assert_eq!(first.unneeded.len(), 1);
        assert_eq!((first.unneeded[0].node.as_str(), first.unneeded[0].since), ("a", 100.0));
        assert!((first.unneeded[0].utilization - 0.2).abs() < 1e-9);
        assert_eq!(first.unneeded[0].pods_to_move, ["default/a0"]);
        assert!(reasons(&first).contains(&("b", &Unremovable::NotUnderutilized { utilization: 0.6 })));
        assert!(reasons(&first).contains(&("a", &Unremovable::NotUnneededLongEnough { since: 100.0 })));
        assert!(first.drain.is_empty());
        // Still unneeded 10 minutes later: drained.
        let later = c.plan(700.0, &mut state, &[]);
        assert_eq!(later.unneeded[0].since, 100.0, "the first time found is kept");
        assert_eq!((later.drain.as_slice(), later.empty.as_slice()), (&["a".to_string()][..], &[][..]));
    }

    #[test]
    fn a_node_not_unneeded_for_one_loop_starts_over() {
        let mut c = Cluster::new(&[&[("400m", RS)], &[("1200m", RS)]]);
        let mut state = ScaleDownState::default();
        c.plan(0.0, &mut state, &[]);
        c.pods[0].push(pod("a1", "800m", RS));
        c.plan(10.0, &mut state, &[]);
        c.pods[0].pop();
        let again = c.plan(20.0, &mut state, &[]);
        assert_eq!(again.unneeded[0].since, 20.0);
    }

    #[test]
    fn empty_nodes_go_first_and_the_group_keeps_its_min() {
        let mut c = Cluster::new(&[&[("400m", RS)], &[], &[]]);
        c.min = 2;
        let mut state = ScaleDownState::default();
        c.plan(0.0, &mut state, &[]);
        let p = c.plan(600.0, &mut state, &[]);
        // b and c are empty and taken first; with both gone a's pod has nowhere to go. Only one
        // may go above the min of 2.
        assert_eq!(p.unneeded.iter().map(|u| u.node.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        assert!(reasons(&p).contains(&("a", &Unremovable::NoPlaceToMovePods { pod: "default/a0".into() })));
        assert_eq!(p.empty, ["b"]);
        assert!(p.drain.is_empty());
        assert!(reasons(&p).contains(&("c", &Unremovable::NodeGroupMinSizeReached)));
        // A group at its min has no candidates at all.
        c.size = 2;
        let at_min = c.plan(610.0, &mut ScaleDownState::default(), &[]);
        assert!(at_min.unneeded.is_empty());
        assert_eq!(at_min.unremovable.len(), 3);
    }

    #[test]
    fn the_drain_simulation_commits_each_node_it_removes() {
        // a and b each hold 0.6 CPU; c has room for one of them (0.8 left). a's pod goes to b
        // first; b then has two pods to place and c takes only one.
        let c = Cluster::new(&[&[("600m", RS)], &[("600m", RS)], &[("1200m", RS)]]);
        let mut state = ScaleDownState::default();
        let p = c.plan(0.0, &mut state, &[]);
        assert_eq!(p.unneeded.iter().map(|u| u.node.as_str()).collect::<Vec<_>>(), ["a"]);
        assert!(reasons(&p).contains(&("b", &Unremovable::NoPlaceToMovePods { pod: "default/a0".into() })));
        // b is not looked at again for 5 minutes.
        let soon = c.plan(10.0, &mut state, &[]);
        assert!(reasons(&soon).contains(&("b", &Unremovable::RecentlyUnremovable)));
        let after = c.plan(300.0, &mut state, &[]);
        assert!(reasons(&after).contains(&("b", &Unremovable::NoPlaceToMovePods { pod: "default/a0".into() })));
    }

    #[test]
    fn a_node_at_the_threshold_is_not_underutilized() {
        // Exactly half of 2 CPUs.
        let c = Cluster::new(&[&[("1", RS)], &[("100m", RS)]]);
        let p = c.plan(0.0, &mut ScaleDownState::default(), &[]);
        assert_eq!(reasons(&p)[0], ("a", &Unremovable::NotUnderutilized { utilization: 0.5 }));
        assert_eq!(p.unneeded.iter().map(|u| u.node.as_str()).collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn a_blocking_pod_keeps_its_node() {
        let c = Cluster::new(&[&[("100m", None)], &[("1200m", RS)]]);
        let p = c.plan(0.0, &mut ScaleDownState::default(), &[]);
        assert!(p.unneeded.is_empty());
        assert_eq!(
            reasons(&p)[1],
            ("a", &Unremovable::BlockedByPod { pod: "default/a0".into(), blocking: BlockingPod::NotReplicated })
        );
    }

    #[test]
    fn cooldowns_and_budgets_hold_deletions_back() {
        let c = Cluster::new(&[&[("300m", RS)], &[("300m", RS)], &[("1200m", RS)]]);
        let mut state = ScaleDownState { last_scale_up: Some(500.0), ..Default::default() };
        c.plan(0.0, &mut state, &[]);
        let cooling = c.plan(700.0, &mut state, &[]);
        assert_eq!(cooling.cooldown, Some(Cooldown::DelayAfterAdd { until: 1100.0 }));
        assert!(cooling.drain.is_empty() && cooling.unneeded.len() == 2, "unneeded is still tracked");
        let p = c.plan(1100.0, &mut state, &[]);
        assert_eq!(p.drain, ["a"], "one drain at a time");
        let busy = [InFlight { group: "g".into(), node: "a".into(), drain: true }];
        assert!(c.plan(1110.0, &mut state, &busy).drain.is_empty());
    }
}
