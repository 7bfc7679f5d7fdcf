//! Topology (upstream `topology.go`, `topologygroup.go`): pod topology spread, pod affinity and
//! anti-affinity, and the inverse anti-affinity of existing pods. NOT IMPLEMENTED YET (Core II
//! part 2). The scheduler already consults [`Topology`] at the points upstream does:
//!
//! - [`Topology::unsupported`] before a pod enters the queue (part 2 removes this gate);
//! - [`Topology::add_requirements`] last in `ExistingNode::can_add` / `NodeClaim::can_add`, after
//!   requirements are intersected (upstream: topology comes last because it can collapse a key
//!   to a single domain);
//! - [`Topology::record`] when a pod is committed to a node or NodeClaim.
//!
//! Until then, a pod that uses any of these features (or a PersistentVolumeClaim, whose volume
//! topology is part 2 as well) is reported unschedulable with [`Unsupported`], so results are
//! never silently wrong. Existing pods with required anti-affinity make every pending pod their
//! terms select uncertain (inverse anti-affinity); those are reported the same way.

use std::fmt;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm};
use serde::Serialize;

use crate::requirements::Requirements;

/// A scheduling feature this version does not evaluate yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Unsupported {
    TopologySpread,
    PodAffinity,
    PodAntiAffinity,
    /// An existing bound pod has required anti-affinity (inverse anti-affinity).
    ExistingPodAntiAffinity {
        pod: String,
    },
    VolumeTopology,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            Unsupported::TopologySpread => "topology spread constraints",
            Unsupported::PodAffinity => "pod affinity",
            Unsupported::PodAntiAffinity => "pod anti-affinity",
            Unsupported::ExistingPodAntiAffinity { pod } => {
                return write!(
                    f,
                    "existing pod {pod} has required pod anti-affinity, which carpentry does not evaluate yet \
                     (topology spread/affinity not yet supported)"
                )
            }
            Unsupported::VolumeTopology => "persistent volume claims (volume topology)",
        };
        write!(
            f,
            "the pod uses {what}, which carpentry does not evaluate yet (topology spread/affinity not yet supported)"
        )
    }
}

/// The topology state of a round. Part 1 holds nothing but the gate.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    /// Existing bound pods with required anti-affinity: (pod, namespace, terms). Inverse
    /// anti-affinity is part 2; pods these terms could select are reported unsupported.
    existing_anti_affinity: Vec<(String, String, Vec<PodAffinityTerm>)>,
}

impl Topology {
    /// Upstream `NewTopology`, built from the existing bound pods.
    pub fn new<'a>(bound_pods: impl IntoIterator<Item = &'a Pod>) -> Topology {
        let existing_anti_affinity = bound_pods
            .into_iter()
            .filter_map(|p| {
                let terms = p
                    .spec
                    .as_ref()?
                    .affinity
                    .as_ref()?
                    .pod_anti_affinity
                    .as_ref()?
                    .required_during_scheduling_ignored_during_execution
                    .clone()
                    .filter(|t| !t.is_empty())?;
                let r = super::pod::PodRef::of(p);
                Some((r.to_string(), r.namespace, terms))
            })
            .collect();
        Topology { existing_anti_affinity }
    }

    /// The existing pod whose required anti-affinity could select `pod` (upstream 1.16: the
    /// term's namespaces are the owner's unless listed; a namespaceSelector may match any).
    fn selected_by_existing_anti_affinity(&self, pod: &Pod) -> Option<&str> {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        self.existing_anti_affinity.iter().find_map(|(owner, owner_ns, terms)| {
            terms
                .iter()
                .any(|t| {
                    let in_scope = match (&t.namespaces, &t.namespace_selector) {
                        (_, Some(_)) => true,
                        (Some(list), None) if !list.is_empty() => list.iter().any(|n| n == namespace),
                        _ => owner_ns == namespace,
                    };
                    in_scope && t.label_selector.as_ref().is_some_and(|s| super::selector::matches(s, &labels))
                })
                .then_some(owner.as_str())
        })
    }

    /// The first topology feature of `pod` that is not evaluated yet.
    pub fn unsupported(&self, pod: &Pod) -> Option<Unsupported> {
        let spec = pod.spec.as_ref()?;
        if spec.topology_spread_constraints.as_ref().is_some_and(|c| !c.is_empty()) {
            return Some(Unsupported::TopologySpread);
        }
        let affinity = spec.affinity.as_ref();
        let pod_affinity = affinity.and_then(|a| a.pod_affinity.as_ref());
        if pod_affinity.is_some_and(|a| {
            a.required_during_scheduling_ignored_during_execution.as_ref().is_some_and(|t| !t.is_empty())
                || a.preferred_during_scheduling_ignored_during_execution.as_ref().is_some_and(|t| !t.is_empty())
        }) {
            return Some(Unsupported::PodAffinity);
        }
        let anti = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        if anti.is_some_and(|a| {
            a.required_during_scheduling_ignored_during_execution.as_ref().is_some_and(|t| !t.is_empty())
                || a.preferred_during_scheduling_ignored_during_execution.as_ref().is_some_and(|t| !t.is_empty())
        }) {
            return Some(Unsupported::PodAntiAffinity);
        }
        if spec.volumes.iter().flatten().any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some()) {
            return Some(Unsupported::VolumeTopology);
        }
        if let Some(owner) = self.selected_by_existing_anti_affinity(pod) {
            return Some(Unsupported::ExistingPodAntiAffinity { pod: owner.to_string() });
        }
        None
    }

    /// Upstream `Topology.AddRequirements`: narrows `node_requirements` to the domains the pod's
    /// topology groups allow. Without topology groups (part 1) nothing changes.
    pub fn add_requirements(&self, _pod_requirements: &Requirements, node_requirements: Requirements) -> Requirements {
        node_requirements
    }

    /// Upstream `Topology.Record`: counts the pod in the domains of the node it was placed on.
    pub fn record(&mut self, _node_requirements: &Requirements) {}
}
