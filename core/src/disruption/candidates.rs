//! Disruption candidates (upstream `disruption/types.go::NewCandidate`, `helpers.go`,
//! `pkg/utils/pod`): which nodes a method may disrupt, and for every node that
//! is not a candidate the concrete reason, as a structured [`Blocker`].

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use super::{pdb, NodeFacts, View};
use crate::api::nodepool::NodePool;
use crate::pod::do_not_disrupt;

/// Why a node cannot be disrupted now (upstream's `DisruptionBlocked` event texts, structured).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "blocker", rename_all_fields = "camelCase")]
pub enum Blocker {
    /// Not launched by a NodeClaim ("node isn't managed by karpenter").
    NotManaged,
    /// Not initialized yet.
    NotInitialized,
    /// Already being deleted.
    Deleting,
    /// A provisioning round nominated pods onto it (until the nomination lapses).
    Nominated { until: i64 },
    /// `karpenter.sh/do-not-disrupt: "true"` on the node.
    NodeDoNotDisrupt,
    /// The NodePool it belongs to is gone.
    NodePoolMissing { nodepool: String },
    /// A pod with an active `karpenter.sh/do-not-disrupt` (until: epoch seconds, `None`: indefinite).
    PodDoNotDisrupt { pod: String, until: Option<i64> },
    /// A PodDisruptionBudget allows no disruption of a pod on it.
    PdbBlocks { pod: String, pdb: String },
    /// A pod is covered by more than one PodDisruptionBudget (the eviction API refuses it).
    MultiplePdbs { pod: String, pdbs: Vec<String> },
}

impl std::fmt::Display for Blocker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blocker::NotManaged => f.write_str("node isn't managed by karpenter"),
            Blocker::NotInitialized => f.write_str("node isn't initialized"),
            Blocker::Deleting => f.write_str("node is deleting or marked for deletion"),
            Blocker::Nominated { .. } => f.write_str("node is nominated for a pending pod"),
            Blocker::NodeDoNotDisrupt => {
                f.write_str("disruption is blocked through the \"karpenter.sh/do-not-disrupt\" annotation")
            }
            Blocker::NodePoolMissing { nodepool } => write!(f, "NodePool {nodepool:?} not found"),
            Blocker::PodDoNotDisrupt { pod, until: None } => {
                write!(f, "pod {pod:?} has \"karpenter.sh/do-not-disrupt\" annotation")
            }
            // upstream's text, and when the duration lapses.
            Blocker::PodDoNotDisrupt { pod, until: Some(t) } => write!(
                f,
                "pod {pod:?} has \"karpenter.sh/do-not-disrupt\" annotation (until {})",
                crate::api::time::format_time(*t)
            ),
            Blocker::PdbBlocks { pod, pdb } => write!(f, "pdb {pdb:?} prevents pod evictions (pod {pod})"),
            Blocker::MultiplePdbs { pod, pdbs } => {
                write!(f, "pod {pod:?} has multiple pdbs ({})", pdbs.join(", "))
            }
        }
    }
}

/// A node a method may disrupt.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Index into [`View::nodes`].
    pub index: usize,
    pub nodepool: NodePool,
    /// Pods that must move (active, not DaemonSet, not mirror; `namespace/name`).
    pub reschedulable: Vec<String>,
    /// Upstream `RescheduleDisruptionCost`: 1 + Σ max(0, eviction cost).
    pub disruption_cost: f64,
}

impl Candidate {
    pub fn facts<'a>(&self, view: &'a View<'_>) -> &'a NodeFacts {
        &view.nodes[self.index]
    }
}

fn is_daemon_or_mirror(p: &Pod) -> bool {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" || (o.kind == "Node" && o.api_version == "v1"))
}

/// Upstream `disruption.EvictionCost`: clamp(1 + deletion-cost / 2^27 + priority / 2^25, −10, 10).
pub fn eviction_cost(p: &Pod) -> f64 {
    let deletion_cost: f64 = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::labels::POD_DELETION_COST))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let priority = f64::from(p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0));
    (1.0 + deletion_cost / 2f64.powi(27) + priority / 2f64.powi(25)).clamp(-10.0, 10.0)
}

fn key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or("default"),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The candidate for node `index`, or every reason it is not one (node checks first, then pods).
/// `eventual`: the drift class, for which a NodeClaim with a terminationGracePeriod ignores pod
/// blockers (upstream).
pub fn candidate(view: &View<'_>, index: usize, eventual: bool) -> Result<Candidate, Vec<Blocker>> {
    let facts = &view.nodes[index];
    let mut node_blockers = Vec::new();
    if !facts.initialized {
        node_blockers.push(Blocker::NotInitialized);
    }
    if facts.deleting {
        node_blockers.push(Blocker::Deleting);
    }
    if let Some(until) = facts.nominated_until.filter(|u| *u > view.now) {
        node_blockers.push(Blocker::Nominated { until });
    }
    let node = view.objects.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(&facts.node));
    if node.is_some_and(do_not_disrupt::node_protected) {
        node_blockers.push(Blocker::NodeDoNotDisrupt);
    }
    let nodepool = view.objects.nodepools.iter().find(|np| np.name() == facts.nodepool);
    if nodepool.is_none() {
        node_blockers.push(Blocker::NodePoolMissing { nodepool: facts.nodepool.clone() });
    }
    if !node_blockers.is_empty() {
        return Err(node_blockers);
    }
    let pods: Vec<&Pod> = view
        .pods_on(&facts.node)
        .filter(|p| crate::pod::is_active(p) && p.metadata.deletion_timestamp.is_none())
        .collect();
    let mut pod_blockers = Vec::new();
    for p in &pods {
        match do_not_disrupt::pod_protection(p, view.now) {
            do_not_disrupt::Protection::None => {}
            do_not_disrupt::Protection::Indefinite => {
                pod_blockers.push(Blocker::PodDoNotDisrupt { pod: key(p), until: None })
            }
            do_not_disrupt::Protection::Until(t) => {
                pod_blockers.push(Blocker::PodDoNotDisrupt { pod: key(p), until: Some(t) })
            }
        }
        if is_daemon_or_mirror(p) || do_not_disrupt::pod_protection(p, view.now) != do_not_disrupt::Protection::None {
            continue;
        }
        let covering: Vec<String> = view.objects.pdbs.iter().filter(|b| pdb::covers(b, p)).map(pdb::name).collect();
        if covering.len() > 1 {
            pod_blockers.push(Blocker::MultiplePdbs { pod: key(p), pdbs: covering });
        } else if let Some(b) = view.objects.pdbs.iter().find(|b| pdb::covers(b, p)) {
            // upstream: per pod and static — a PDB with 0 disruptions allowed blocks.
            if pdb::disruptions_allowed(b, &view.objects.pods, &view.scales) <= 0 {
                pod_blockers.push(Blocker::PdbBlocks { pod: key(p), pdb: pdb::name(b) });
            }
        }
    }
    // upstream: for drift (the eventual class) a NodeClaim with a terminationGracePeriod is a
    // candidate whatever its pods say; the drain then waits for them until the grace period.
    let ignore_pods = eventual && facts.termination_grace_period;
    if !pod_blockers.is_empty() && !ignore_pods {
        return Err(pod_blockers);
    }
    let movable: Vec<&&Pod> = pods.iter().filter(|p| !is_daemon_or_mirror(p)).collect();
    let reschedulable = movable.iter().map(|p| key(p)).collect();
    let disruption_cost = 1.0 + movable.iter().map(|p| eviction_cost(p).max(0.0)).sum::<f64>();
    Ok(Candidate { index, nodepool: nodepool.cloned().expect("checked above"), reschedulable, disruption_cost })
}
