//! One CA loop, its scale-up half (upstream `core/static_autoscaler.go` `RunOnce` at
//! cluster-autoscaler-1.36.1, with `processors/status/eventing_scale_up_processor.go` and
//! `core/scaleup/orchestrator/executor.go`'s events):
//!
//! 1. the groups' nodes are counted by readiness (Ready; registered and younger than
//!    `--max-node-startup-time`, 15 minutes: not started; else unready; being deleted);
//! 2. [`ClusterState::update`]: finished scale-ups leave, timed-out ones back their group off and
//!    lower its target;
//! 3. the health gate: more than 3 unready nodes and more than 45 % of all: `ClusterUnhealthy`,
//!    nothing more this loop;
//! 4. expendable pods (priority below `--expendable-pods-priority-cutoff`) and DaemonSet pods are
//!    dropped; the rest go on the cluster's nodes and the upcoming ones
//!    ([`super::filter`]), and what fits needs no node;
//! 5. pods younger than `--new-pod-scale-up-delay` (or their own longer
//!    `cluster-autoscaler.kubernetes.io/pod-scale-up-delay`) wait;
//! 6. nothing left: no scale-up is needed; `--max-nodes-total` ready nodes: nothing is tried
//!    (`MaxNodesTotalReached`); the oldest pod under 2 s old, or the oldest GPU pod under 30 s:
//!    "in cooldown", waiting one loop for more;
//! 7. [`super::scaleup::scale_up`]; each increase sets its group's target (`ScaledUpGroup`) and is
//!    registered with the cluster state.
//!
//! Times are seconds on the caller's clock.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::api::clusterautoscaler::ResolvedOptions;
use crate::api::duration::parse_go_duration;
use crate::nodeclaim::garbagecollection::node_ready;

use super::clusterstate::{
    ClusterState, GroupCounts, Readiness, TimedOut, MAX_TOTAL_UNREADY_PERCENTAGE, OK_TOTAL_UNREADY_COUNT,
};
use crate::resources::ResourceList;

use super::filter::{filter_out_schedulable, Room};
use super::predicates::SchedulingNode;
use super::scaleup::{scale_up, GroupState, ReadyNodes, ScaleUpStatus};

/// upstream `MaxNodeStartupTime`: a registered node not Ready for longer is unready.
pub const MAX_NODE_STARTUP_SECONDS: f64 = 15.0 * 60.0;
/// upstream `unschedulablePodTimeBuffer` and `unschedulablePodWithGpuTimeBuffer`.
pub const NEW_POD_BUFFER_SECONDS: f64 = 2.0;
pub const NEW_GPU_POD_BUFFER_SECONDS: f64 = 30.0;
/// The annotation with which a pod lengthens its own scale-up delay.
pub const POD_SCALE_UP_DELAY_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay";

/// A node group as the loop sees it.
#[derive(Debug, Clone)]
pub struct GroupView<'a> {
    pub name: &'a str,
    pub target: i64,
    pub max: i64,
    /// `None` when its template cannot be built.
    pub template: Option<&'a SchedulingNode>,
    /// Instances without a Node for longer than `--max-node-provision-time`.
    pub long_unregistered: i64,
}

/// A node of the cluster.
#[derive(Debug, Clone)]
pub struct NodeView<'a> {
    pub node: &'a Node,
    /// The group it belongs to; `None` for a node CA does not manage.
    pub group: Option<&'a str>,
    /// When it was created.
    pub created: f64,
    pub pods: Vec<&'a Pod>,
    /// Each pod's requests, as `pods` lists them (a pod whose requests cannot be read counts for
    /// nothing, as the caller reports it elsewhere).
    pub requests: Vec<&'a ResourceList>,
    /// The node as the filters read it (without its pods): built once, shared by both halves of
    /// the loop, and kept by the caller while the node does not change
    /// ([`NodeCache`](super::predicates::NodeCache)).
    pub scheduling: Cow<'a, SchedulingNode>,
    /// Its allocatable less its pods' requests.
    pub free: ResourceList,
}

impl<'a> NodeView<'a> {
    /// `requests` are the pods', in order: the caller reads them once and keeps them, as reading
    /// quantities is most of what a loop would otherwise spend.
    pub fn new(
        node: &'a Node,
        group: Option<&'a str>,
        created: f64,
        pods: Vec<&'a Pod>,
        requests: Vec<&'a ResourceList>,
    ) -> NodeView<'a> {
        NodeView::with_scheduling(
            node,
            group,
            created,
            pods,
            requests,
            Cow::Owned(SchedulingNode::with_requests(node, &[])),
        )
    }

    /// With the node's scheduling view (without pods) as the caller keeps it.
    pub fn with_scheduling(
        node: &'a Node,
        group: Option<&'a str>,
        created: f64,
        pods: Vec<&'a Pod>,
        requests: Vec<&'a ResourceList>,
        scheduling: Cow<'a, SchedulingNode>,
    ) -> NodeView<'a> {
        debug_assert_eq!(pods.len(), requests.len(), "one requests list per pod");
        let mut free = scheduling.free.clone();
        for r in &requests {
            crate::resources::subtract_into(&mut free, r);
        }
        NodeView { node, group, created, pods, requests, scheduling, free }
    }

    pub fn name(&self) -> &'a str {
        self.node.metadata.name.as_deref().unwrap_or_default()
    }
}

/// A pod kube-scheduler could not place.
#[derive(Debug, Clone, Copy)]
pub struct PendingView<'a> {
    pub pod: &'a Pod,
    pub created: f64,
}

/// What the loop sees.
#[derive(Debug, Clone)]
pub struct LoopInput<'a> {
    pub now: f64,
    pub groups: Vec<GroupView<'a>>,
    pub nodes: Vec<NodeView<'a>>,
    pub pending: Vec<PendingView<'a>>,
}

/// What became of the scale-up half.
#[derive(Debug, Clone, PartialEq)]
pub enum ScaleUpOutcome {
    /// Too many unready nodes: nothing done this loop.
    ClusterUnhealthy,
    /// No pending pod needs a new node.
    NotNeeded,
    /// The pods are too new: the next loop looks again.
    InCooldown,
    Tried(Box<ScaleUpStatus>),
}

/// An event CA publishes: on a pod, or on its status ConfigMap (`object` empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaEvent {
    /// `namespace/name` of the pod; empty for the ConfigMap.
    pub object: String,
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

/// What the loop decided.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopOutput {
    /// The groups' new targets, in the order set (timeouts' reverts, then scale-ups).
    pub targets: Vec<(String, i64)>,
    pub timed_out: Vec<TimedOut>,
    /// Pods an existing or upcoming node takes: `namespace/name` → node.
    pub fitting: Vec<(String, String)>,
    /// Pods waiting out their scale-up delay.
    pub delayed: Vec<String>,
    pub scale_up: ScaleUpOutcome,
    pub events: Vec<CaEvent>,
    /// Whether scale-down may run this loop (not after a scale-up, a cooldown or an unhealthy
    /// cluster).
    pub scale_down_allowed: bool,
    /// Each group's target (after timeouts) and nodes by readiness, in the input's order, for the
    /// status.
    pub group_counts: Vec<(String, i64, Readiness)>,
    /// Every node by readiness, in a group or not.
    pub cluster_readiness: Readiness,
    /// Whether the health gate let the loop go on.
    pub cluster_healthy: bool,
}

/// `namespace/name`.
pub(super) fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn requests_gpu(pod: &Pod) -> bool {
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
    containers.iter().any(|c| {
        let resources = c.resources.as_ref();
        let has = |m: Option<&BTreeMap<String, _>>| m.is_some_and(|m| m.contains_key("nvidia.com/gpu"));
        has(resources.and_then(|r| r.requests.as_ref())) || has(resources.and_then(|r| r.limits.as_ref()))
    })
}

/// The pod's own scale-up delay, when it lengthens the flag's.
fn own_delay(pod: &Pod) -> Option<f64> {
    let text = pod.metadata.annotations.as_ref()?.get(POD_SCALE_UP_DELAY_ANNOTATION)?;
    parse_go_duration(text).ok().map(|nanos| nanos as f64 / 1e9)
}

/// One loop's scale-up half over `input`, updating `state`.
pub fn run_once(input: &LoopInput, state: &mut ClusterState, options: &ResolvedOptions) -> LoopOutput {
    let now = input.now;
    let mut out = LoopOutput {
        targets: Vec::new(),
        timed_out: Vec::new(),
        fitting: Vec::new(),
        delayed: Vec::new(),
        scale_up: ScaleUpOutcome::NotNeeded,
        events: Vec::new(),
        scale_down_allowed: false,
        group_counts: Vec::new(),
        cluster_readiness: Readiness::default(),
        cluster_healthy: true,
    };

    // 1. Readiness.
    let mut readiness: BTreeMap<&str, Readiness> = BTreeMap::new();
    let mut not_started: Vec<&str> = Vec::new();
    let mut total_unready = 0;
    for n in &input.nodes {
        let name = n.node.metadata.name.as_deref().unwrap_or_default();
        let deleted = n.node.metadata.deletion_timestamp.is_some();
        let is_ready = node_ready(n.node);
        let starting = !deleted && !is_ready && n.created + MAX_NODE_STARTUP_SECONDS > now;
        if !deleted && !is_ready && !starting {
            total_unready += 1;
        }
        let cluster = &mut out.cluster_readiness;
        match () {
            _ if deleted => cluster.deleted += 1,
            _ if is_ready => cluster.ready += 1,
            _ if starting => cluster.not_started += 1,
            _ => cluster.unready += 1,
        }
        let Some(group) = n.group else { continue };
        let r = readiness.entry(group).or_default();
        match () {
            _ if deleted => r.deleted += 1,
            _ if is_ready => r.ready += 1,
            _ if starting => {
                r.not_started += 1;
                not_started.push(name);
            }
            _ => r.unready += 1,
        }
    }
    let mut targets: BTreeMap<&str, i64> = input.groups.iter().map(|g| (g.name, g.target)).collect();
    let counts = |targets: &BTreeMap<&str, i64>| -> Vec<GroupCounts> {
        input
            .groups
            .iter()
            .map(|g| GroupCounts {
                name: g.name,
                target: targets[g.name],
                readiness: Readiness {
                    long_unregistered: g.long_unregistered,
                    ..readiness.get(g.name).copied().unwrap_or_default()
                },
            })
            .collect()
    };

    // 2. Scale-up requests: done and timed out.
    out.timed_out = state.update(&counts(&targets), now, options);
    for t in &out.timed_out {
        if let Some(g) = input.groups.iter().find(|g| g.name == t.group) {
            targets.insert(g.name, t.target);
        }
        out.targets.push((t.group.clone(), t.target));
        out.events.push(CaEvent {
            object: String::new(),
            warning: true,
            reason: "ScaleUpTimedOut".into(),
            message: t.message(),
        });
    }
    let counts = counts(&targets);
    out.group_counts = counts.iter().map(|c| (c.name.to_string(), c.target, c.readiness)).collect();
    out.cluster_readiness.long_unregistered = counts.iter().map(|c| c.readiness.long_unregistered).sum();

    // 3. The health gate.
    let all = input.nodes.len() as f64;
    if total_unready > OK_TOTAL_UNREADY_COUNT && total_unready as f64 > MAX_TOTAL_UNREADY_PERCENTAGE / 100.0 * all {
        out.events.push(CaEvent {
            object: String::new(),
            warning: true,
            reason: "ClusterUnhealthy".into(),
            message: "Cluster is unhealthy".into(),
        });
        out.scale_up = ScaleUpOutcome::ClusterUnhealthy;
        out.cluster_healthy = false;
        return out;
    }

    // 4. What fits the cluster's nodes or the upcoming ones.
    let upcoming: BTreeMap<&str, i64> = counts.iter().map(|c| (c.name, state.upcoming(c, now))).collect();
    let mut rooms: Vec<Room> = Vec::new();
    let mut nodes: Vec<&NodeView> = input.nodes.iter().collect();
    nodes.sort_by_key(|n| n.name());
    for n in nodes {
        let name = n.name();
        // A node being deleted takes nothing; one still starting in a group scaling up is stood
        // in for by an upcoming copy.
        let stood_in = not_started.contains(&name) && n.group.is_some_and(|g| upcoming.get(g).is_some_and(|u| *u > 0));
        if n.node.metadata.deletion_timestamp.is_some() || stood_in {
            continue;
        }
        rooms.push(Room { name: name.into(), node: &n.scheduling, free: n.free.clone() });
    }
    for g in &input.groups {
        let Some(template) = g.template else { continue };
        for i in 0..upcoming.get(g.name).copied().unwrap_or(0) {
            rooms.push(Room::new(format!("{}-upcoming-{i}", g.name).into(), template));
        }
    }
    let cutoff = options.expendable_pods_priority_cutoff;
    let mut created: BTreeMap<String, f64> = BTreeMap::new();
    let candidates: Vec<&Pod> = input
        .pending
        .iter()
        .filter(|p| p.pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0) >= cutoff)
        .filter(|p| !p.pod.metadata.owner_references.iter().flatten().any(|o| o.kind == "DaemonSet"))
        .map(|p| {
            created.insert(key(p.pod), p.created);
            p.pod
        })
        .collect();
    let filtered = filter_out_schedulable(&candidates, &mut rooms);
    out.fitting = filtered.placed;

    // 5. New pods wait out their delay.
    let mut pending = Vec::new();
    for pod in filtered.pending {
        let delay = own_delay(pod)
            .map_or(options.new_pod_scale_up_delay_seconds, |own| own.max(options.new_pod_scale_up_delay_seconds));
        if created.get(&key(pod)).is_some_and(|c| c + delay > now) {
            out.delayed.push(key(pod));
        } else {
            pending.push(pod);
        }
    }

    // 6. Nothing to do, too many nodes, or too soon.
    if pending.is_empty() {
        out.scale_down_allowed = true;
        return out;
    }
    let ready_nodes = ReadyNodes::of(input.nodes.iter().filter(|n| node_ready(n.node)).map(|n| n.node));
    let at_max_total = options.max_nodes_total > 0 && ready_nodes.count as i64 >= options.max_nodes_total;
    // upstream `allPodsAreNew`: the oldest pod under 2 s old, or a GPU pod pending and the oldest
    // of those under 30 s old.
    let oldest = |gpu_only: bool| {
        let ages = pending.iter().filter(|p| !gpu_only || requests_gpu(p)).filter_map(|p| created.get(&key(p)));
        ages.fold(None, |oldest: Option<f64>, c| Some(oldest.map_or(*c, |o| o.min(*c))))
    };
    let all_new = oldest(false).is_some_and(|o| o + NEW_POD_BUFFER_SECONDS > now)
        || oldest(true).is_some_and(|o| o + NEW_GPU_POD_BUFFER_SECONDS > now);
    if all_new && !at_max_total {
        out.scale_up = ScaleUpOutcome::InCooldown;
        return out;
    }

    // 7. The scale-up (the max-nodes-total gate first, as upstream checks it before the age).
    let states: Vec<GroupState> = input
        .groups
        .iter()
        .zip(&counts)
        .map(|(g, c)| GroupState {
            name: g.name,
            target: c.target,
            max: g.max,
            template: g.template,
            safety: state.safety(c, now),
        })
        .collect();
    let status = scale_up(&pending, &states, &ready_nodes, options);
    for increase in &status.increases {
        let message = format!(
            "Scale-up: setting group {} size to {} instead of {} (max: {})",
            increase.group, increase.to, increase.from, increase.max
        );
        out.events.push(CaEvent { object: String::new(), warning: false, reason: "ScaledUpGroup".into(), message });
        out.targets.push((increase.group.clone(), increase.to));
        state.register_scale_up(&increase.group, increase.to - increase.from, now, options);
    }
    if status.max_nodes_total_reached {
        out.events.push(CaEvent {
            object: String::new(),
            warning: true,
            reason: "MaxNodesTotalReached".into(),
            message: format!("Max total nodes in cluster reached: {}", options.max_nodes_total),
        });
    }
    for e in status.pod_events() {
        out.events.push(CaEvent { object: e.pod, warning: false, reason: e.reason.into(), message: e.message });
    }
    out.scale_down_allowed = status.increases.is_empty();
    out.scale_up = ScaleUpOutcome::Tried(Box::new(status));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::clusterautoscaler::{ClusterAutoscalerOptions, NodeGroup};
    use crate::catalogue::Catalogue;
    use serde_json::json;

    fn template() -> SchedulingNode {
        let group: NodeGroup = serde_json::from_value(json!({
            "metadata": {"name": "general"},
            "spec": {"maxSize": 10, "instanceTypes": ["m5.large"], "zones": ["us-east-1a"]},
        }))
        .unwrap();
        SchedulingNode::of(&super::super::template(&group, Catalogue::embedded(), "us-east-1", &[]).unwrap())
    }

    fn pod(name: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "inflate",
                                              "uid": "rs", "controller": true}]},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        }))
        .unwrap()
    }

    fn node(name: &str, is_ready: bool) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "1500m", "memory": "8Gi", "pods": "110"},
                       "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": if is_ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    fn options() -> ResolvedOptions {
        ClusterAutoscalerOptions::default().resolved()
    }

    #[test]
    fn inflate_scales_up_once_waits_for_its_nodes_and_counts_them_as_upcoming() {
        let t = template();
        let pods: Vec<Pod> = (0..3).map(|i| pod(&format!("inflate-{i}"))).collect();
        let pending = |created: f64| pods.iter().map(|pod| PendingView { pod, created }).collect::<Vec<_>>();
        let group = |target| GroupView { name: "general", target, max: 10, template: Some(&t), long_unregistered: 0 };
        let (mut state, o) = (ClusterState::default(), options());

        // One second after the pods went pending: too new.
        let input = LoopInput { now: 101.0, groups: vec![group(0)], nodes: vec![], pending: pending(100.0) };
        let out = run_once(&input, &mut state, &o);
        assert_eq!(out.scale_up, ScaleUpOutcome::InCooldown);
        assert!(!out.scale_down_allowed);

        // Ten seconds later: three nodes.
        let input = LoopInput { now: 110.0, ..input };
        let out = run_once(&input, &mut state, &o);
        assert_eq!(out.targets, [("general".to_string(), 3)]);
        assert_eq!(out.events[0].message, "Scale-up: setting group general size to 3 instead of 0 (max: 10)");
        assert_eq!(out.events.iter().filter(|e| e.reason == "TriggeredScaleUp").count(), 3);

        // The next loop: the three are upcoming, so the same pods ask for nothing more.
        let input = LoopInput { now: 111.0, groups: vec![group(3)], ..input };
        let out = run_once(&input, &mut state, &o);
        assert_eq!(out.scale_up, ScaleUpOutcome::NotNeeded);
        assert_eq!(out.fitting.len(), 3);
        assert!(out.fitting.iter().all(|(_, n)| n.starts_with("general-upcoming-")));
        assert!(out.targets.is_empty());

        // Two registered (one Ready, one starting), one not yet: still upcoming, still nothing more.
        let (a, b) = (node("a", true), node("b", false));
        let nodes = vec![
            NodeView::new(&a, Some("general"), 150.0, vec![], vec![]),
            NodeView::new(&b, Some("general"), 150.0, vec![], vec![]),
        ];
        let input = LoopInput { now: 160.0, nodes, ..input };
        let out = run_once(&input, &mut state, &o);
        assert_eq!(out.scale_up, ScaleUpOutcome::NotNeeded);
        assert_eq!(out.fitting.iter().filter(|(_, n)| n == "a").count(), 1, "the Ready node takes one");
    }

    #[test]
    fn nodes_that_never_come_up_time_out_and_lower_the_target() {
        let t = template();
        let pods = [pod("inflate-0")];
        let (mut state, o) = (ClusterState::default(), options());
        let group = |target| GroupView { name: "general", target, max: 10, template: Some(&t), long_unregistered: 0 };
        let pending = vec![PendingView { pod: &pods[0], created: 0.0 }];
        let out = run_once(
            &LoopInput { now: 10.0, groups: vec![group(0)], nodes: vec![], pending: pending.clone() },
            &mut state,
            &o,
        );
        assert_eq!(out.targets, [("general".to_string(), 1)]);
        // 15 minutes on, no node: the scale-up times out, the group backs off, the pod is told.
        let out = run_once(&LoopInput { now: 920.0, groups: vec![group(1)], nodes: vec![], pending }, &mut state, &o);
        assert_eq!(out.targets, [("general".to_string(), 0)]);
        assert_eq!(out.events[0].reason, "ScaleUpTimedOut");
        let last = out.events.last().unwrap();
        assert_eq!(
            (last.reason.as_str(), last.message.as_str()),
            ("NotTriggerScaleUp", "pod didn't trigger scale-up: 1 in backoff after failed scale-up")
        );
    }

    #[test]
    fn a_cluster_with_many_unready_nodes_does_nothing() {
        let t = template();
        let pods = [pod("p")];
        let broken: Vec<Node> = (0..4).map(|i| node(&format!("n{i}"), false)).collect();
        // Created long ago: unready, not starting.
        let nodes = broken.iter().map(|n| NodeView::new(n, Some("general"), 0.0, vec![], vec![])).collect();
        let groups = vec![GroupView { name: "general", target: 4, max: 10, template: Some(&t), long_unregistered: 0 }];
        let pending = vec![PendingView { pod: &pods[0], created: 0.0 }];
        let out =
            run_once(&LoopInput { now: 3600.0, groups, nodes, pending }, &mut ClusterState::default(), &options());
        assert_eq!(out.scale_up, ScaleUpOutcome::ClusterUnhealthy);
        assert_eq!(
            (out.events[0].reason.as_str(), out.events[0].message.as_str()),
            ("ClusterUnhealthy", "Cluster is unhealthy")
        );
    }

    #[test]
    fn a_new_gpu_pod_holds_the_loop_and_max_nodes_total_is_checked_before_the_age() {
        let t = template();
        let old = pod("old");
        let mut gpu = pod("gpu");
        let limits =
            [("nvidia.com/gpu".to_string(), k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()))];
        gpu.spec.as_mut().unwrap().containers[0].resources.as_mut().unwrap().limits = Some(limits.into());
        let groups = vec![GroupView { name: "general", target: 0, max: 10, template: Some(&t), long_unregistered: 0 }];
        let pending = vec![PendingView { pod: &old, created: 0.0 }, PendingView { pod: &gpu, created: 95.0 }];
        let (mut state, o) = (ClusterState::default(), options());
        let input = LoopInput { now: 100.0, groups: groups.clone(), nodes: vec![], pending };
        assert_eq!(run_once(&input, &mut state, &o).scale_up, ScaleUpOutcome::InCooldown, "the GPU pod is 5 s old");
        // At the node limit the loop says so, however new the pods.
        let full = node("full", true);
        // Full: a 1-CPU pod on its 1.5 CPU.
        let gpu_requests = crate::resources::pod_requests(&gpu).unwrap();
        let nodes = vec![NodeView::new(&full, None, 0.0, vec![&gpu], vec![&gpu_requests])];
        let fresh = vec![PendingView { pod: &old, created: 99.5 }];
        let limited = ClusterAutoscalerOptions { max_nodes_total: Some(1), ..Default::default() }.resolved();
        let out = run_once(&LoopInput { now: 100.0, groups, nodes, pending: fresh }, &mut state, &limited);
        assert!(
            matches!(&out.scale_up, ScaleUpOutcome::Tried(s) if s.result == super::super::ScaleUpResult::LimitedByMaxNodesTotal)
        );
        assert!(out.events.iter().any(|e| e.reason == "MaxNodesTotalReached"));
    }

    #[test]
    fn daemonset_expendable_and_delayed_pods_ask_for_no_node() {
        let t = template();
        let mut daemon = pod("ds");
        daemon.metadata.owner_references.as_mut().unwrap()[0].kind = "DaemonSet".into();
        let mut expendable = pod("overprovisioning");
        expendable.spec.as_mut().unwrap().priority = Some(-100);
        let mut slow = pod("slow");
        slow.metadata.annotations = Some([(POD_SCALE_UP_DELAY_ANNOTATION.to_string(), "5m".to_string())].into());
        let pending = [&daemon, &expendable, &slow].map(|pod| PendingView { pod, created: 0.0 }).to_vec();
        let groups = vec![GroupView { name: "general", target: 0, max: 10, template: Some(&t), long_unregistered: 0 }];
        let (mut state, o) = (ClusterState::default(), options());
        let out = run_once(
            &LoopInput { now: 60.0, groups: groups.clone(), nodes: vec![], pending: pending.clone() },
            &mut state,
            &o,
        );
        assert_eq!(
            (out.scale_up.clone(), out.delayed.as_slice()),
            (ScaleUpOutcome::NotNeeded, ["default/slow".to_string()].as_slice())
        );
        let out = run_once(&LoopInput { now: 301.0, groups, nodes: vec![], pending }, &mut state, &o);
        assert_eq!(out.targets, [("general".to_string(), 1)], "the slow pod's delay has passed");
    }
}
