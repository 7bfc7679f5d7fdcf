//! The same cluster run twice over the same simulated time, once with Karpenter's NodePools and
//! once with Cluster Autoscaler on the node groups ([`Simulation::cluster_autoscaler`]), measured
//! the same way: how long after the start and after each step every pod was Running, pending
//! pod-seconds, the nodes over time and at the end, the cost, how much of the nodes' allocatable
//! the pods request, disruptions and evictions. Both runs share kube-scheduler, the workload
//! controllers, the steps and the timings; only the autoscaler differs.
//!
//! Without NodeGroups in the input, Cluster Autoscaler's groups are derived from Karpenter's run
//! ([`crate::clusterautoscaler::from_nodepools`]): one per NodePool, instance type and capacity
//! type its nodes landed on.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::api::clusterautoscaler::NodeGroup;
use crate::catalogue::Catalogue;
use crate::clusterautoscaler::{node_groups_for, Derivation, Landed};
use crate::manifest::Manifests;

use super::clock::{Duration, SimTime};
use super::events::{Event, Reason, RemovalCause};
use super::{NodeView, Simulation, SimulationError, Timings};

/// Why a comparison cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    #[error("the Karpenter run: {0}")]
    Karpenter(SimulationError),
    #[error("the Cluster Autoscaler run: {0}")]
    ClusterAutoscaler(SimulationError),
}

/// Both runs (`kind: Comparison`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub kind: &'static str,
    pub region: String,
    /// How long both ran.
    pub until: SimTime,
    pub karpenter: AutoscalerRun,
    pub cluster_autoscaler: AutoscalerRun,
}

/// A moment that can make pods pending (the start, each step) and how long it took until no
/// pod was.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Settling {
    pub at: SimTime,
    /// Pods pending once the moment had happened.
    pub pending: usize,
    /// Until every pod was Running (bound) again; `None` when that did not happen in the run.
    pub after: Option<Duration>,
}

/// The Nodes at a moment (registered, whether Ready or not), by instance type.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCount {
    pub at: SimTime,
    pub total: usize,
    pub by_type: BTreeMap<String, usize>,
}

/// One autoscaler's run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalerRun {
    /// The start, then each step, in time order.
    pub time_to_all_running: Vec<Settling>,
    /// Pending pods integrated over the run (a pod pending for a minute counts 60).
    pub pending_pod_seconds: f64,
    /// Pods pending at the end.
    pub pending: Vec<String>,
    /// The nodes at the end, with instances not registered yet.
    pub nodes: Vec<NodeView>,
    /// Every change in the Nodes.
    pub nodes_over_time: Vec<NodeCount>,
    /// USD per hour at the end.
    pub cost_per_hour: f64,
    /// USD spent over the run.
    pub cost_total: f64,
    /// Whether a spot price in the figures is synthetic (core/data/PROVENANCE.md).
    pub price_synthetic: bool,
    /// What the pods on the nodes request over what the nodes can allocate, at the end (0 with
    /// no nodes).
    pub cpu_requested_fraction: f64,
    pub memory_requested_fraction: f64,
    /// Karpenter's NodePools (empty on Cluster Autoscaler's side).
    pub node_pools: Vec<String>,
    /// The node groups Cluster Autoscaler scaled, given or derived (empty on Karpenter's side).
    pub node_groups: Vec<NodeGroup>,
    /// Why each derived group is there (empty when the groups were given).
    pub node_groups_derived: Vec<Derivation>,
    /// Disruptions carried out (Karpenter's consolidation, drift, expiration…; the nodes Cluster
    /// Autoscaler's scale-down removed).
    pub disruptions: usize,
    /// Pods evicted through the Eviction API.
    pub evictions: usize,
    pub events: Vec<Event>,
    pub notes: Vec<String>,
    /// Cluster Autoscaler's status ConfigMap as its last loop wrote it (none on Karpenter's
    /// side).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<crate::clusterautoscaler::ClusterAutoscalerStatus>,
    /// Cluster Autoscaler's side only: its last scale-down pass, node by node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<ScaleDownReport>,
}

/// Cluster Autoscaler's last scale-down pass: the nodes it found unneeded (since when, seconds
/// from the start; their utilization; the pods that would move) and why each other node stays,
/// in upstream's reasons.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleDownReport {
    pub unneeded: Vec<crate::clusterautoscaler::scaledown::Unneeded>,
    pub unremovable: Vec<NodeUnremovable>,
    /// Why nothing could be deleted that loop, if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<String>,
}

/// A node scale-down keeps, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeUnremovable {
    pub node: String,
    #[serde(flatten)]
    pub reason: crate::clusterautoscaler::Unremovable,
    /// The reason in words.
    pub message: String,
}

impl ScaleDownReport {
    fn of(plan: &crate::clusterautoscaler::ScaleDownPlan) -> ScaleDownReport {
        ScaleDownReport {
            unneeded: plan.unneeded.clone(),
            unremovable: plan
                .unremovable
                .iter()
                .map(|(node, reason)| NodeUnremovable {
                    node: node.clone(),
                    message: reason.to_string(),
                    reason: reason.clone(),
                })
                .collect(),
            cooldown: plan.cooldown.map(|c| c.to_string()),
        }
    }
}

/// Runs `manifests` through both autoscalers for `until` of simulated time. The node groups are
/// the manifests' NodeGroups, else derived from Karpenter's run.
pub fn compare(
    manifests: &Manifests,
    region: Option<&str>,
    until: SimTime,
    catalogue: &'static Catalogue,
) -> Result<Comparison, CompareError> {
    let karpenter = Simulation::with_catalogue(manifests, region, Timings::default(), catalogue)
        .map_err(CompareError::Karpenter)?;
    let marks = marks(manifests, until);
    // Both run in the region the first resolved (the flag's, else the Scenario's).
    let region = karpenter.region().to_string();
    let (mut karpenter, landed) = measure(karpenter, until, &marks);
    karpenter.node_pools = manifests.nodepools.iter().map(|np| np.name().to_string()).collect();
    let mut derived = Vec::new();
    let ca = if manifests.nodegroups.is_empty() {
        let groups = node_groups_for(&manifests.nodepools, &landed, catalogue);
        let mut with_groups = manifests.clone();
        for g in groups {
            with_groups.nodegroups.push(g.group);
            derived.push(g.why);
        }
        Simulation::cluster_autoscaler(&with_groups, Some(&region), Timings::default(), catalogue)
    } else {
        Simulation::cluster_autoscaler(manifests, Some(&region), Timings::default(), catalogue)
    }
    .map_err(CompareError::ClusterAutoscaler)?;
    let node_groups = ca.objects.nodegroups.clone();
    let (mut cluster_autoscaler, _) = measure(ca, until, &marks);
    cluster_autoscaler.node_groups = node_groups;
    cluster_autoscaler.node_groups_derived = derived;
    Ok(Comparison { kind: "Comparison", region, until, karpenter, cluster_autoscaler })
}

/// The start and every step at or before `until`, in time order.
fn marks(manifests: &Manifests, until: SimTime) -> Vec<SimTime> {
    let mut marks = vec![SimTime::ZERO];
    if let Some(s) = &manifests.scenario {
        marks.extend(s.spec.steps.iter().filter_map(|step| step.at_millis()).map(SimTime).filter(|t| *t <= until));
    }
    marks.sort();
    marks.dedup();
    marks
}

/// Runs `sim` to `until`, looking at it after every instant at which something happened; also
/// where Karpenter's nodes landed.
fn measure(mut sim: Simulation, until: SimTime, marks: &[SimTime]) -> (AutoscalerRun, Vec<Landed>) {
    let mut watch = Watch::new(marks);
    watch.look(&sim);
    while let Some(t) = sim.next_event_time().filter(|t| *t <= until) {
        watch.accrue(sim.now(), t);
        sim.step();
        watch.look(&sim);
    }
    watch.accrue(sim.now(), until);
    sim.run_until(until);
    let snapshot = sim.snapshot();
    let cost = sim.cost();
    let (mut requested, mut allocatable) = (super::NodeResources::default(), super::NodeResources::default());
    for n in &snapshot.nodes {
        requested.cpu += n.requested.cpu;
        requested.memory += n.requested.memory;
        allocatable.cpu += n.allocatable.cpu;
        allocatable.memory += n.allocatable.memory;
    }
    let fraction = |used: f64, of: f64| if of > 0.0 { used / of } else { 0.0 };
    let evictions = sim
        .events()
        .iter()
        .filter(|e| matches!(e.reason, Reason::PodRemoved { cause: RemovalCause::Evicted, .. }))
        .count();
    let run = AutoscalerRun {
        time_to_all_running: watch.settlings,
        pending_pod_seconds: watch.pending_millis as f64 / 1000.0,
        pending: snapshot.pending,
        price_synthetic: snapshot.nodes.iter().any(|n| n.price_synthetic),
        nodes: snapshot.nodes,
        nodes_over_time: watch.nodes,
        cost_per_hour: cost.per_hour,
        cost_total: cost.spent,
        cpu_requested_fraction: fraction(requested.cpu, allocatable.cpu),
        memory_requested_fraction: fraction(requested.memory, allocatable.memory),
        node_pools: Vec::new(),
        node_groups: Vec::new(),
        node_groups_derived: Vec::new(),
        disruptions: sim.disruptions().len() + sim.ca_scale_downs().len(),
        evictions,
        events: sim.events().to_vec(),
        notes: sim.notes().map(str::to_string).collect(),
        status: sim.ca_status().cloned(),
        scale_down: sim.ca_scale_down().map(ScaleDownReport::of),
    };
    (run, watch.landed.into_values().collect())
}

/// What is measured while a run goes.
struct Watch {
    settlings: Vec<Settling>,
    /// Pods pending since the last look.
    pending: usize,
    pending_millis: u128,
    nodes: Vec<NodeCount>,
    /// Karpenter's nodes by NodePool, instance type and capacity type.
    landed: BTreeMap<(String, String, String), Landed>,
    /// Nodes already counted in `landed`.
    seen: BTreeSet<String>,
}

impl Watch {
    fn new(marks: &[SimTime]) -> Watch {
        Watch {
            settlings: marks.iter().map(|at| Settling { at: *at, pending: 0, after: None }).collect(),
            pending: 0,
            pending_millis: 0,
            nodes: Vec::new(),
            landed: BTreeMap::new(),
            seen: BTreeSet::new(),
        }
    }

    /// The pods pending at the last look stayed pending over `[from, to)`.
    fn accrue(&mut self, from: SimTime, to: SimTime) {
        self.pending_millis += self.pending as u128 * u128::from(to.since(from).0);
    }

    fn look(&mut self, sim: &Simulation) {
        let now = sim.now();
        let pending = sim
            .objects
            .pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && crate::pod::is_pending(p))
            .count();
        self.pending = pending;
        for s in &mut self.settlings {
            if s.at == now {
                // The last look at the instant sees everything that happened at it.
                s.pending = pending;
                s.after = (pending == 0).then_some(Duration(0));
            } else if s.at < now && s.after.is_none() && pending == 0 {
                s.after = Some(now.since(s.at));
            }
        }
        let mut by_type: BTreeMap<String, usize> = BTreeMap::new();
        for n in &sim.objects.nodes {
            let t = n.metadata.labels.as_ref().and_then(|l| l.get(crate::labels::INSTANCE_TYPE));
            *by_type.entry(t.cloned().unwrap_or_default()).or_default() += 1;
        }
        self.land(sim);
        if self.nodes.last().is_none_or(|last| last.by_type != by_type) {
            let total = sim.objects.nodes.len();
            match self.nodes.last_mut() {
                Some(last) if last.at == now => *last = NodeCount { at: now, total, by_type },
                _ => self.nodes.push(NodeCount { at: now, total, by_type }),
            }
        }
    }
}

impl Watch {
    /// Counts Karpenter's Nodes not seen before where they landed.
    fn land(&mut self, sim: &Simulation) {
        for n in &sim.objects.nodes {
            let (Some(name), Some(node_labels)) = (n.metadata.name.as_deref(), n.metadata.labels.as_ref()) else {
                continue;
            };
            if self.seen.contains(name) {
                continue;
            }
            let get = |k: &str| node_labels.get(k).cloned();
            let (Some(node_pool), Some(instance_type), Some(capacity_type)) =
                (get(crate::labels::NODEPOOL), get(crate::labels::INSTANCE_TYPE), get(crate::labels::CAPACITY_TYPE))
            else {
                continue;
            };
            self.seen.insert(name.to_string());
            let key = (node_pool.clone(), instance_type.clone(), capacity_type.clone());
            self.landed
                .entry(key)
                .or_insert_with(|| Landed { node_pool, instance_type, capacity_type, ..Landed::default() })
                .add(name, node_labels.get(crate::labels::TOPOLOGY_ZONE).map(String::as_str), node_labels);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::load;

    const CLUSTER: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: carpentry.dev/v1alpha1
kind: NodeGroup
metadata: {name: general}
spec: {minSize: 0, maxSize: 10, instanceTypes: [m5.large], zones: [us-east-1a, us-east-1b]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: \"1\", memory: 256Mi}}}]
---
apiVersion: carpentry.dev/v1alpha1
kind: Scenario
spec:
  steps:
  - {at: 5m, scale: {kind: Deployment, name: inflate, replicas: 5}}
  - {at: 8m, scale: {kind: Deployment, name: inflate, replicas: 4}}
";

    fn run(docs: &str, until: u64) -> Comparison {
        let m = load(docs).unwrap_or_else(|e| panic!("{e}"));
        compare(&m, None, SimTime::from_secs(until), Catalogue::embedded()).unwrap()
    }

    #[test]
    fn inflate_through_both_with_the_same_steps() {
        let c = run(CLUSTER, 900);
        let secs = |s: &Settling| s.after.map(|d| d.0 / 1000);
        let k: Vec<_> = c.karpenter.time_to_all_running.iter().map(|s| (s.at.0 / 1000, s.pending, secs(s))).collect();
        let ca: Vec<_> =
            c.cluster_autoscaler.time_to_all_running.iter().map(|s| (s.at.0 / 1000, s.pending, secs(s))).collect();
        // The start, then each step; the scale-in makes nothing pending.
        assert_eq!(k.iter().map(|x| (x.0, x.1)).collect::<Vec<_>>(), [(0, 3), (300, 2), (480, 0)]);
        assert_eq!(ca.iter().map(|x| (x.0, x.1)).collect::<Vec<_>>(), [(0, 3), (300, 2), (480, 0)]);
        assert_eq!(k[2].2, Some(0));
        // CA: a scan interval of new-pod delay, then the ASG, the launch, the join, Ready.
        assert_eq!(ca[0].2, Some(115));
        let karpenter_start = k[0].2.unwrap();
        assert!(karpenter_start < 115, "{k:?}");
        // Pending pod-seconds: 3 pods for 115 s, then 2 for however long the step took.
        let expected = 3.0 * 115.0 + 2.0 * ca[1].2.unwrap() as f64;
        assert!((c.cluster_autoscaler.pending_pod_seconds - expected).abs() < 1e-9, "{}", expected);
        let expected = 3.0 * karpenter_start as f64 + 2.0 * k[1].2.unwrap() as f64;
        assert!((c.karpenter.pending_pod_seconds - expected).abs() < 1e-9);
        // One pod per m5.large on both sides; CA keeps its 5 nodes (the one the scale-in emptied
        // at 8m goes after 10 minutes unneeded, past the run's end).
        let ca_nodes = &c.cluster_autoscaler.nodes;
        assert_eq!(ca_nodes.len(), 5);
        assert!(ca_nodes.iter().all(|n| n.node_group.as_deref() == Some("general")));
        assert_eq!(c.cluster_autoscaler.nodes_over_time.last().unwrap().by_type["m5.large"], 5);
        assert_eq!(c.cluster_autoscaler.nodes_over_time[0].total, 0);
        let price = ca_nodes[0].price;
        assert!((c.cluster_autoscaler.cost_per_hour - 5.0 * price).abs() < 1e-9);
        // 4 CPUs requested over 5 nodes' allocatable (1930m each).
        let fraction = c.cluster_autoscaler.cpu_requested_fraction;
        assert!((fraction - 4.0 / (5.0 * 1.93)).abs() < 1e-6, "{fraction}");
        assert_eq!(c.karpenter.node_pools, ["default"]);
        assert_eq!(c.cluster_autoscaler.node_groups.len(), 1);
        assert!(c.cluster_autoscaler.node_groups_derived.is_empty(), "given, not derived");
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["kind"], "Comparison");
        assert_eq!(json["clusterAutoscaler"]["timeToAllRunning"][0]["after"], "1m55s");
    }

    #[test]
    fn a_run_that_never_settles_says_so() {
        let big = CLUSTER.replace("cpu: \"1\"", "cpu: \"64\"");
        assert_ne!(big, CLUSTER);
        let c = run(&big, 600);
        assert!(c.cluster_autoscaler.time_to_all_running.iter().all(|s| s.after.is_none() && s.pending > 0));
        assert_eq!(c.cluster_autoscaler.pending.len(), 4);
        assert!((c.cluster_autoscaler.pending_pod_seconds - (3.0 * 300.0 + 5.0 * 180.0 + 4.0 * 120.0)).abs() < 1e-9);
        assert_eq!(c.cluster_autoscaler.cost_total, 0.0);
    }

    #[test]
    fn without_node_groups_they_are_derived_from_where_karpenter_landed() {
        let group = "---\napiVersion: carpentry.dev/v1alpha1\nkind: NodeGroup\nmetadata: {name: general}\n\
                     spec: {minSize: 0, maxSize: 10, instanceTypes: [m5.large], zones: [us-east-1a, us-east-1b]}\n";
        assert!(CLUSTER.contains(group));
        let c = run(&CLUSTER.replace(group, ""), 900);
        let ca = &c.cluster_autoscaler;
        assert_eq!(ca.node_groups.len(), 1);
        let g = &ca.node_groups[0];
        assert_eq!(g.metadata.name.as_deref(), Some("default-m5-large-on-demand"));
        assert_eq!(g.spec.instance_types, ["m5.large"]);
        assert_eq!(ca.node_groups_derived.len(), 1);
        // All five nodes Karpenter ran over the run, the consolidated one too.
        assert_eq!(ca.node_groups_derived[0].nodes, 5);
        assert_eq!(ca.node_groups_derived[0].zones, g.spec.zones);
        // The derived group runs the same pods as the given one did.
        assert_eq!(ca.time_to_all_running[0].after, Some(Duration::secs(115)));
        assert!(ca.pending.is_empty());
    }
}
