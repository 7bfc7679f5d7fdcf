//! What one decision reads: the view of the cluster (upstream `pkg/controllers/state`, v1.14.1:
//! nodes, NodeClaims and the pods bound to them, DaemonSets, PodDisruptionBudgets, volumes), the
//! NodePools with the instance types their NodeClass can launch (upstream
//! `CloudProvider.GetInstanceTypes`), the offerings out of capacity, and the round's options.
//!
//! Module map: the [`Input`] and its parts here; `manifests` builds one from loaded manifests
//! (where upstream's informers fill `state.Cluster` from the API server); `region` chooses the
//! region when the input does not name one ([`choose_region`]). The scheduler
//! ([`crate::scheduling::schedule`]) reads an `Input`; disruption and the simulation build them.

pub(crate) mod manifests;
mod region;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

use crate::api::nodeclaim::NodeClaim;
use crate::api::nodepool::NodePool;
use crate::catalogue::{InstanceType, UnavailableOffering};
use crate::options::MinValuesPolicy;
use crate::pod::PodRef;
use crate::resources::ResourceList;

pub use manifests::{input_from_manifests, Prepared, StateError};
pub use region::{choose_region, RegionChoice, RegionSource};

/// Upstream `MaxInstanceTypes` (v1.7+).
pub const MAX_INSTANCE_TYPES: usize = 600;

/// Scheduler switches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub min_values_policy: MinValuesPolicy,
    pub max_instance_types: usize,
    /// When the round runs (epoch seconds): a `karpenter.sh/do-not-disrupt` duration on a pod of a
    /// deleting node protects it until then. `None` (no clock, e.g. a single offline round
    /// without a Scenario `startTime`): any duration counts as active.
    pub now: Option<i64>,
    /// Set when the round is disruption's simulation of removing nodes (upstream
    /// `IsConsolidationSimulation`).
    pub consolidation: Option<ConsolidationSimulation>,
    /// The round stands for kube-scheduler binding pending pods to existing nodes (the
    /// simulation's model): pods are read without Karpenter's validation, which decides what
    /// Karpenter provisions for, not what kube-scheduler binds (a `kubernetes.io/hostname`
    /// nodeSelector is fine for kube-scheduler).
    pub kube_scheduler: bool,
    /// Check this pending pod on its own against every existing node and NodePool before the
    /// round (`Results::evaluation`): the grid `explain pod` shows, with passing NodePools too.
    pub evaluate: Option<PodRef>,
}

/// What a consolidation simulation knows beyond the cluster (upstream v1.14+: consolidateAfter
/// also guards destinations).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsolidationSimulation {
    /// The nodes being consolidated (marked deleting in the input for the simulation).
    pub candidates: std::collections::BTreeSet<String>,
    /// Existing nodes still inside their NodePool's consolidateAfter window (initialized, the last
    /// pod event more recent than consolidateAfter): the candidates' pods may not move onto them.
    /// Pending pods and pods of nodes that really are deleting may.
    pub under_consolidate_after: std::collections::BTreeSet<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            min_values_policy: MinValuesPolicy::Strict,
            max_instance_types: MAX_INSTANCE_TYPES,
            now: None,
            consolidation: None,
            kube_scheduler: false,
            evaluate: None,
        }
    }
}

/// A NodePool with the instance types its NodeClass can launch in the region.
#[derive(Debug, Clone)]
pub struct NodePoolInput {
    pub nodepool: NodePool,
    pub instance_types: Arc<Vec<InstanceType>>,
}

/// Everything one round reads.
#[derive(Debug, Clone, Default)]
pub struct Input {
    pub nodepools: Vec<NodePoolInput>,
    pub nodes: Vec<Node>,
    pub nodeclaims: Vec<NodeClaim>,
    /// Every pod: bound ones (with `spec.nodeName`) count against their node; the others are
    /// candidates for the round.
    pub pods: Vec<Pod>,
    pub daemonsets: Vec<DaemonSet>,
    /// Used to decide which pods of deleting nodes are rescheduled (fully blocking PDBs).
    pub pdbs: Vec<PodDisruptionBudget>,
    pub unavailable_offerings: Vec<UnavailableOffering>,
    pub options: Options,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses: volume topology and the
    /// validation of pods' claims.
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub pvs: Vec<PersistentVolume>,
    pub storage_classes: Vec<StorageClass>,
    /// CSINodes (named after their Node): the CSI volume limits of existing nodes.
    pub csinodes: Vec<CSINode>,
    /// Each pod's requests (`resources::pod_requests`, aligned with `pods`), when the caller runs
    /// many rounds over the same pods (disruption's simulations) and computed them once; `None`:
    /// each round reads them. Must be rebuilt if `pods` change.
    pub pod_requests: Option<std::sync::Arc<Vec<ResourceList>>>,
}

/// Why the cluster state is not synced (upstream `Cluster.Synced`, pkg/controllers/state/cluster.go,
/// v1.14.1: every NodeClaim the controller created is in the view, and every NodeClaim has
/// launched). While it is not, provisioning, disruption, garbage collection and the NodePool count
/// wait: a decision taken on it could launch twice or count too little.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSynced<'a> {
    /// A NodeClaim this controller created that the view does not show yet.
    Awaited(&'a str),
    /// A NodeClaim not being deleted whose instance is not written onto it yet.
    Unlaunched(&'a str),
}

impl std::fmt::Display for NotSynced<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotSynced::Awaited(name) => write!(f, "NodeClaim {name} to appear in the view"),
            NotSynced::Unlaunched(name) => write!(f, "NodeClaim {name} to launch"),
        }
    }
}

/// Whether the state is synced: `awaited` is the first NodeClaim created and not yet seen, if any.
pub fn synced<'a>(awaited: Option<&'a str>, nodeclaims: &'a [NodeClaim]) -> Result<(), NotSynced<'a>> {
    if let Some(name) = awaited {
        return Err(NotSynced::Awaited(name));
    }
    let unlaunched = nodeclaims.iter().find(|nc| {
        nc.metadata.deletion_timestamp.is_none() && nc.status.as_ref().is_none_or(|s| s.provider_id.is_empty())
    });
    match unlaunched {
        Some(nc) => Err(NotSynced::Unlaunched(nc.name())),
        None => Ok(()),
    }
}

/// How many nodes the state holds (upstream `Cluster.nodes`, keyed by providerID, v1.14.1
/// `pkg/controllers/state/cluster.go`, counted by `karpenter_cluster_state_node_count`): one per
/// instance whose launched NodeClaim or Node is seen, the two of one instance once; a Node
/// without a providerID on its own.
pub fn node_count(nodeclaims: &[NodeClaim], nodes: &[Node]) -> usize {
    let mut ids: std::collections::HashSet<&str> = nodeclaims
        .iter()
        .filter_map(|nc| nc.status.as_ref().map(|s| s.provider_id.as_str()))
        .filter(|id| !id.is_empty())
        .collect();
    let mut without_id = 0;
    for node in nodes {
        match node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).filter(|id| !id.is_empty()) {
            Some(id) => {
                ids.insert(id);
            }
            None => without_id += 1,
        }
    }
    ids.len() + without_id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodeclaim(name: &str, provider_id: &str, deleting: bool) -> NodeClaim {
        let mut nc: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"},
                "requirements": []},
            "status": {"providerID": provider_id},
        }))
        .unwrap();
        if deleting {
            nc.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap(),
            ));
        }
        nc
    }

    #[test]
    fn synced_once_every_created_nodeclaim_is_seen_and_every_nodeclaim_launched() {
        let launched = [nodeclaim("a", "aws:///z/i-1", false), nodeclaim("gone", "", true)];
        assert_eq!(synced(None, &launched), Ok(()), "one being deleted does not count");
        assert_eq!(synced(Some("b"), &launched), Err(NotSynced::Awaited("b")));
        let waiting = [nodeclaim("a", "aws:///z/i-1", false), nodeclaim("c", "", false)];
        let not = synced(None, &waiting).unwrap_err();
        assert_eq!(not, NotSynced::Unlaunched("c"));
        assert_eq!(not.to_string(), "NodeClaim c to launch");
    }

    #[test]
    fn the_state_counts_one_node_per_instance_whether_its_nodeclaim_its_node_or_both_are_seen() {
        let node = |name: &str, provider_id: Option<&str>| -> Node {
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": {"providerID": provider_id}}))
                .unwrap()
        };
        let nodeclaims =
            [nodeclaim("a", "aws:///z/i-1", false), nodeclaim("b", "aws:///z/i-2", false), nodeclaim("c", "", false)];
        let nodes = [node("n1", Some("aws:///z/i-1")), node("n3", Some("aws:///z/i-3")), node("static", None)];
        // i-1 (both), i-2 (NodeClaim only), i-3 (Node only), the Node without a providerID; not c.
        assert_eq!(node_count(&nodeclaims, &nodes), 4);
        assert_eq!(node_count(&[], &[]), 0);
    }
}
