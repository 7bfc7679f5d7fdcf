//! Structured explanations of scheduling outcomes, and the one text renderer for them.
//!
//! Upstream reports only the last attempt's error string, drops existing-node reasons and (since
//! v1.5) NodePool names. Here every unschedulable pod carries:
//! - the existing nodes (and NodeClaims planned earlier in the round) that rejected it, grouped
//!   and counted by reason;
//! - for each NodePool, the **first** failing constraint in upstream's check order, precisely,
//!   with a fix where one exists;
//! - for instance-type failures, the funnel (allowed → requirements → resources → offerings);
//! - the relaxations applied before the last attempt.
//!
//! A whole requirement set is never the headline: conflicts name one key and both value sets.
//!
//! This is the scheduling layer's vocabulary and sits at its bottom: the other files of
//! `scheduling` use it and it uses none of them, which is why the reasons a pod is ignored, the
//! relaxation steps and the topology conflicts are defined here rather than beside the code that
//! produces them.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde::Serialize;

use crate::labels;
use crate::quantity::Quantity;
use crate::requirements::IncompatibleReason;

use crate::pod::PodRef;

/// Why a pod without a node is not part of the provisioning round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum IgnoreReason {
    /// `status.nominatedNodeName` is set: the pod is preempting (upstream `IsProvisionable`).
    Nominated { node: String },
    /// Owned by a DaemonSet: the DaemonSet controller places it.
    DaemonSetPod,
    /// A mirror (static) pod, owned by its Node.
    MirrorPod,
    /// The pod's PodScheduled condition is not `False/Unschedulable`: kube-scheduler has not
    /// rejected it, so Karpenter does not act.
    NotRejectedByKubeScheduler { condition: String },
    /// The pod requires `karpenter.sh/nodepool DoesNotExist` (nodeSelector, first required term
    /// or heaviest preferred term): it avoids Karpenter capacity on purpose (no event upstream).
    AvoidsKarpenter,
    /// A nodeSelector entry or required node-affinity expression fails `ValidateRequirement`
    /// (upstream event `Failed to schedule pod, <message>`).
    InvalidRequirement { key: String, message: String },
    /// A required node-selector term uses `matchFields`.
    MatchFields,
    /// The pod's spec cannot be read (a bad quantity, a bad preferred term…).
    Unreadable { message: String },
    /// A PersistentVolumeClaim volume fails upstream's `ValidatePersistentVolumeClaims` (or, for a
    /// pod of a deleting node, the volume topology lookup): missing claim, volume or class,
    /// unbound with Immediate binding, and so on.
    Volume { volume: String, claim: String, problem: VolumeProblem },
}

impl fmt::Display for IgnoreReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IgnoreReason::Nominated { node } => write!(f, "nominated to node {node} (preempting); not provisionable"),
            IgnoreReason::DaemonSetPod => f.write_str("owned by a DaemonSet; not provisionable"),
            IgnoreReason::MirrorPod => f.write_str("a mirror pod; not provisionable"),
            IgnoreReason::NotRejectedByKubeScheduler { condition } => write!(
                f,
                "PodScheduled is {condition}, not False/Unschedulable; Karpenter only acts on pods kube-scheduler rejected"
            ),
            IgnoreReason::AvoidsKarpenter => {
                write!(f, "requires {} DoesNotExist; it avoids Karpenter capacity", labels::NODEPOOL)
            }
            IgnoreReason::InvalidRequirement { message, .. } => write!(f, "ignored: {message}"),
            IgnoreReason::MatchFields => f.write_str("ignored: node selector term with matchFields is not supported"),
            IgnoreReason::Unreadable { message } => write!(f, "ignored: {message}"),
            IgnoreReason::Volume { volume, claim, problem } => {
                write!(f, "ignored: {}", volume_problem_text(volume, claim, problem))
            }
        }
    }
}

/// One relaxation step that was applied (upstream `Preferences.Relax`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "step", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Relaxation {
    /// Step 1: the pod had more than one required node-selector term; the first was dropped.
    DroppedRequiredTerm { index: usize },
    /// Step 2: the heaviest remaining preferred pod-affinity term was dropped.
    DroppedPreferredPodAffinity { weight: i32, topology_key: String },
    /// Step 3: the heaviest remaining preferred pod-anti-affinity term was dropped.
    DroppedPreferredPodAntiAffinity { weight: i32, topology_key: String },
    /// Step 5: a ScheduleAnyway topology spread constraint was dropped.
    DroppedScheduleAnywaySpread { topology_key: String, max_skew: i32 },
    /// Step 4: the heaviest remaining preferred node-affinity term was dropped.
    DroppedPreferredNodeAffinity { weight: i32 },
    /// Step 6: PreferNoSchedule taints are tolerated (only when some NodePool has one).
    ToleratedPreferNoSchedule,
}

impl fmt::Display for Relaxation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Relaxation::DroppedRequiredTerm { index } => {
                write!(f, "dropped required node-affinity term #{} (terms are ORed)", index + 1)
            }
            Relaxation::DroppedPreferredNodeAffinity { weight } => {
                write!(f, "dropped the preferred node-affinity term of weight {weight}")
            }
            Relaxation::ToleratedPreferNoSchedule => f.write_str("tolerated PreferNoSchedule taints"),
            Relaxation::DroppedPreferredPodAffinity { weight, topology_key } => {
                write!(f, "dropped the preferred pod-affinity term of weight {weight} (on {topology_key})")
            }
            Relaxation::DroppedPreferredPodAntiAffinity { weight, topology_key } => {
                write!(f, "dropped the preferred pod-anti-affinity term of weight {weight} (on {topology_key})")
            }
            Relaxation::DroppedScheduleAnywaySpread { topology_key, max_skew } => {
                write!(f, "dropped the ScheduleAnyway topology spread on {topology_key} (maxSkew {max_skew})")
            }
        }
    }
}

/// The three kinds of topology group (upstream `TopologyType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    Spread,
    Affinity,
    AntiAffinity,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Spread => "topology spread",
            Kind::Affinity => "pod affinity",
            Kind::AntiAffinity => "pod anti-affinity",
        })
    }
}

/// Why topology leaves no domain for the pod on a node (upstream "unsatisfiable topology
/// constraint for `<kind>`, key=`<key>` (counts = …, podDomains = …, nodeDomains = …").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyConflict {
    pub kind: Kind,
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_skew: Option<i64>,
    /// Matching pods per domain (at most 25 domains, like upstream).
    pub counts: BTreeMap<String, i64>,
    /// The pod's strict requirement for the key.
    pub pod_domains: String,
    /// The node's (or NodeClaim's) requirement for the key.
    pub node_domains: String,
    /// For an inverse anti-affinity: the pods whose required anti-affinity keeps this one out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub anti_affinity_of: Vec<String>,
}

impl fmt::Display for TopologyConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unsatisfiable {} on {}", self.kind, self.key)?;
        if !self.anti_affinity_of.is_empty() {
            write!(f, " (anti-affinity of {})", self.anti_affinity_of.join(", "))?;
        }
        if let Some(s) = self.max_skew {
            write!(f, ", maxSkew {s}")?;
        }
        let counts: Vec<String> = self.counts.iter().map(|(d, n)| format!("{d}={n}")).collect();
        write!(
            f,
            " (counts {{{}}}; pod allows {}; node offers {})",
            counts.join(", "),
            self.pod_domains,
            self.node_domains
        )
    }
}

/// A taint as explanations show it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct TaintRef {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: String,
}

impl TaintRef {
    pub fn of(t: &k8s_openapi::api::core::v1::Taint) -> TaintRef {
        TaintRef { key: t.key.clone(), value: t.value.clone().filter(|v| !v.is_empty()), effect: t.effect.clone() }
    }
}

impl fmt::Display for TaintRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}={}:{}", self.key, v, self.effect),
            None => write!(f, "{}:{}", self.key, self.effect),
        }
    }
}

/// One key on which the pod and a node / NodePool disagree.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequirementConflict {
    pub key: String,
    /// The pod's requirement for the key (`key In [a b]`).
    pub pod: String,
    /// The node's / NodePool's requirement; `None` when the key is not defined there at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// A well-known or defined key the pod's key may be a typo of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub typo_of: Option<String>,
}

impl RequirementConflict {
    /// The first conflicting key of `reason`.
    pub fn from_reason(reason: &IncompatibleReason) -> RequirementConflict {
        match reason {
            IncompatibleReason::UndefinedLabel { key, incoming, hint } => {
                RequirementConflict { key: key.clone(), pod: incoming.to_string(), node: None, typo_of: hint.clone() }
            }
            IncompatibleReason::Conflicts(conflicts) => {
                let c = &conflicts[0];
                RequirementConflict {
                    key: c.key.clone(),
                    pod: c.incoming.to_string(),
                    node: Some(c.existing.to_string()),
                    typo_of: None,
                }
            }
        }
    }
}

impl fmt::Display for RequirementConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node {
            Some(node) => write!(f, "requirement {}: pod wants {}, but offers {}", self.key, self.pod, node),
            None => {
                write!(f, "label {:?} does not have known values (pod wants {})", self.key, self.pod)?;
                if let Some(t) = &self.typo_of {
                    write!(f, "; typo of {t:?}?")?;
                }
                Ok(())
            }
        }
    }
}

/// Why an existing node (or a NodeClaim planned earlier in the round) cannot take the pod, in
/// upstream `ExistingNode.CanAdd` / `NodeClaim.CanAdd` order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum NodeRejection {
    Taint {
        taint: TaintRef,
    },
    HostPort {
        port: String,
    },
    Resources {
        resource: String,
        needs: Quantity,
        most_free: Quantity,
    },
    Requirements(RequirementConflict),
    /// The node's CSI volume limit for a driver would be exceeded (existing nodes only).
    VolumeLimit(VolumeLimit),
    /// No volume topology alternative of the pod is compatible with the node.
    VolumeTopology(Box<VolumeConflict>),
    /// Topology spread, pod affinity or anti-affinity leaves no domain on this node.
    Topology(Box<TopologyConflict>),
    /// A planned NodeClaim: no remaining instance type fits with the pod added.
    InstanceTypes {
        remaining: usize,
    },
    /// A planned NodeClaim: minValues would no longer be met.
    MinValues {
        keys: Vec<String>,
    },
    /// A planned NodeClaim: reserved capacity (upstream `ReservedOfferingError`).
    Reservations(ReservationConflict),
}

impl NodeRejection {
    /// Rejections with the same group key are counted together.
    fn group_key(&self) -> String {
        match self {
            NodeRejection::Taint { taint } => format!("taint {taint}"),
            NodeRejection::HostPort { port } => format!("port {port}"),
            NodeRejection::Resources { resource, .. } => format!("resources {resource}"),
            NodeRejection::Requirements(c) => format!("req {} {} {:?}", c.key, c.pod, c.node),
            NodeRejection::VolumeLimit(l) => format!("volume limit {}", l.driver),
            NodeRejection::VolumeTopology(c) => format!("volume {} {} {:?}", c.volume, c.key, c.offers),
            NodeRejection::Topology(c) => topology_group_key(c.kind, &c.key),
            NodeRejection::InstanceTypes { .. } => "types".into(),
            NodeRejection::MinValues { keys } => format!("minValues {keys:?}"),
            NodeRejection::Reservations(c) => format!("reservations {}", c.group_key()),
        }
    }

    fn merge(&mut self, other: &NodeRejection) {
        match (self, other) {
            (NodeRejection::Resources { most_free, .. }, NodeRejection::Resources { most_free: other, .. }) => {
                *most_free = Quantity::max(*most_free, *other);
            }
            (NodeRejection::InstanceTypes { remaining }, NodeRejection::InstanceTypes { remaining: other }) => {
                *remaining = (*remaining).max(*other);
            }
            // Like resources: the group shows the node with the most room left.
            (NodeRejection::VolumeLimit(mine), NodeRejection::VolumeLimit(other))
                if other.limit.saturating_sub(other.attached) > mine.limit.saturating_sub(mine.attached) =>
            {
                *mine = other.clone();
            }
            _ => {}
        }
    }
}

impl fmt::Display for NodeRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeRejection::Taint { taint } => write!(f, "taint {taint} not tolerated"),
            NodeRejection::HostPort { port } => write!(f, "host port {port} already in use"),
            NodeRejection::Resources { resource, needs, most_free } => {
                write!(f, "insufficient {resource} (needs {needs}, most free {most_free})")
            }
            NodeRejection::Requirements(c) => write!(f, "{c}"),
            NodeRejection::VolumeLimit(l) => write!(f, "{l}"),
            NodeRejection::VolumeTopology(c) => f.write_str(&volume_conflict_text(c, Side::Node)),
            NodeRejection::Topology(c) => write!(f, "{c}"),
            NodeRejection::InstanceTypes { .. } => {
                f.write_str("none of its remaining instance types fits the pod as well")
            }
            NodeRejection::MinValues { keys } => {
                write!(f, "adding the pod would break minValues for {}", keys.join(", "))
            }
            NodeRejection::Reservations(c) => write!(f, "{c}"),
        }
    }
}

/// Nodes rejected for the same reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectionGroup {
    pub count: usize,
    pub rejection: NodeRejection,
    /// The first few node names (at most 5).
    pub examples: Vec<String>,
}

/// Groups `(node, rejection)` pairs by reason, largest group first, then by first appearance.
pub fn group_rejections(rejections: Vec<(String, NodeRejection)>) -> Vec<RejectionGroup> {
    let mut groups = RejectionGroups::default();
    for (node, r) in rejections {
        groups.add(node, r);
    }
    groups.finish()
}

/// [`group_rejections`] one node at a time, so that a caller that can tell a node's group
/// cheaply need not build a rejection the group would discard.
#[derive(Default)]
pub struct RejectionGroups {
    groups: Vec<RejectionGroup>,
    index: BTreeMap<String, usize>,
}

impl RejectionGroups {
    pub fn add(&mut self, node: String, r: NodeRejection) {
        let key = r.group_key();
        match self.index.get(&key) {
            Some(&i) => {
                let g = &mut self.groups[i];
                g.count += 1;
                g.rejection.merge(&r);
                if g.examples.len() < 5 {
                    g.examples.push(node);
                }
            }
            None => {
                self.index.insert(key, self.groups.len());
                self.groups.push(RejectionGroup { count: 1, rejection: r, examples: vec![node] });
            }
        }
    }

    /// Counts `node` in the existing topology group for (`kind`, `key`), whose rejections carry
    /// nothing to merge; false (nothing counted) when there is no such group yet.
    pub fn add_topology(&mut self, node: &str, kind: Kind, key: &str) -> bool {
        let Some(g) = self
            .groups
            .iter_mut()
            .find(|g| matches!(&g.rejection, NodeRejection::Topology(c) if c.kind == kind && c.key == key))
        else {
            return false;
        };
        g.count += 1;
        if g.examples.len() < 5 {
            g.examples.push(node.to_string());
        }
        true
    }

    pub fn finish(self) -> Vec<RejectionGroup> {
        let mut out = self.groups;
        out.sort_by_key(|g| std::cmp::Reverse(g.count));
        out
    }
}

fn topology_group_key(kind: Kind, key: &str) -> String {
    format!("topology {kind} {key}")
}

/// How many of a NodePool's instance types survive each test for this pod (upstream's
/// `filterInstanceTypesByRequirements` reports only which tests failed; this counts them in a
/// fixed order: requirements, then resources, then an available compatible offering).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Funnel {
    /// Instance types the NodePool allows (after the prefilter and its limits).
    pub allowed: usize,
    pub requirements: usize,
    pub resources: usize,
    pub offerings: usize,
    /// The pod's requests plus daemon overhead (min … max over the daemon groups).
    pub requests: BTreeMap<String, Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon_overhead_max: Option<BTreeMap<String, Quantity>>,
    /// When requirements removed every type: the key that excluded the most of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requirement_conflict: Option<RequirementConflict>,
    /// When resources removed every type: the first resource that does not fit, and the largest
    /// amount any type meeting the requirements offers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shortfall: Option<Shortfall>,
    /// When the pod's host ports clash with a daemon's on every group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_port: Option<String>,
    /// The cheapest types that met the requirements and fitted, with their cheapest price (the
    /// ones that lost only on offerings).
    pub cheapest: Vec<(String, f64)>,
    /// Why the cheapest allowed types (at most 3, by their cheapest offering) lost.
    pub cheapest_lost: Vec<TypeLoss>,
    /// The domains topology spread / pod affinity chose for the NodeClaim (`key In [domain]`),
    /// which the instance types had to meet as well.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub topology: Vec<String>,
    /// The volume topology alternative the NodeClaim was evaluated with (`key In [domain]`), which
    /// the instance types had to meet as well.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// The requirements that narrowed the instance types (NodePool's and pod's, on keys the
    /// types define; at most 4).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub narrowed_by: Vec<String>,
}

/// Why one instance type was left out for the pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeLoss {
    pub instance_type: String,
    pub price: f64,
    /// `requirements`, `hostPort`, `resources` or `offerings`.
    pub stage: &'static str,
    /// The conflicting key or the resource that does not fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl fmt::Display for TypeLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (${:.4}/h): ", self.instance_type, self.price)?;
        let d = self.detail.as_deref().unwrap_or("");
        match self.stage {
            "requirements" => write!(f, "requirement {d} not met"),
            "hostPort" => write!(f, "host port {d} taken by a DaemonSet"),
            "resources" => write!(f, "not enough {d}"),
            _ => f.write_str("no available offering the pod allows"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Shortfall {
    pub resource: String,
    pub needs: Quantity,
    pub largest: Quantity,
    pub largest_type: String,
}

/// The first constraint of a NodePool the pod fails, in upstream's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "constraint", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum NodePoolFailure {
    /// The NodePool takes no part in provisioning at all.
    NotEligible {
        why: String,
    },
    Taint {
        taint: TaintRef,
    },
    Requirements(RequirementConflict),
    /// No volume topology alternative of the pod is compatible with the NodePool (upstream
    /// "incompatible volume requirements, …").
    VolumeTopology(Box<VolumeConflict>),
    /// Topology spread, pod affinity or anti-affinity leaves no domain for a new NodeClaim.
    Topology(Box<TopologyConflict>),
    /// `limits.nodes` is used up (upstream "node limits have been exhausted for nodepool").
    NodeLimitsExhausted {
        limit: Quantity,
    },
    /// Every instance type's capacity exceeds the remaining limit of a resource (upstream "all
    /// available instance types exceed limits for nodepool").
    ExceedsLimits {
        resource: String,
        limit: Quantity,
        remaining: Quantity,
        smallest: Quantity,
        smallest_type: String,
    },
    InstanceTypes(Box<Funnel>),
    MinValues {
        keys: Vec<MinValuesKey>,
    },
    /// The NodeClaim was planned but truncation to the cheapest 600 types broke minValues.
    MinValuesAfterTruncation {
        keys: Vec<MinValuesKey>,
    },
    /// Reserved capacity (upstream `ReservedOfferingError`): the pod waits for a later round.
    Reservations(ReservationConflict),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MinValuesKey {
    pub key: String,
    pub min_values: i64,
    pub found: usize,
}

impl NodePoolFailure {
    /// How far the pod got: used to choose the headline (the NodePool that came closest).
    pub fn progress(&self) -> u8 {
        match self {
            NodePoolFailure::NotEligible { .. } => 0,
            NodePoolFailure::Taint { .. } => 1,
            NodePoolFailure::Requirements(_) => 2,
            // Volume topology is checked between the requirements and topology (upstream
            // `NodeClaim.CanAdd`); it shares topology's rank so later ranks keep their values.
            NodePoolFailure::VolumeTopology(_) | NodePoolFailure::Topology(_) => 3,
            NodePoolFailure::NodeLimitsExhausted { .. } | NodePoolFailure::ExceedsLimits { .. } => 4,
            NodePoolFailure::InstanceTypes(_) => 5,
            NodePoolFailure::MinValues { .. } | NodePoolFailure::MinValuesAfterTruncation { .. } => 6,
            // upstream checks reserved offerings after instance types and minValues.
            NodePoolFailure::Reservations(_) => 7,
        }
    }
}

/// A concrete change that would let the pod schedule on a NodePool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "fix", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Fix {
    AddToleration { taint: TaintRef },
    RaiseLimit { resource: String, to_at_least: Quantity },
    DefineLabel { key: String },
    FixTypo { key: String, typo_of: String },
}

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fix::AddToleration { taint } => write!(f, "add a toleration for {taint} to the pod"),
            Fix::RaiseLimit { resource, to_at_least } => write!(f, "raise limits.{resource} to at least {to_at_least}"),
            Fix::DefineLabel { key } => {
                write!(f, "define {key} in the NodePool (a requirement or a template label)")
            }
            Fix::FixTypo { key, typo_of } => write!(f, "did you mean {typo_of:?} instead of {key:?}?"),
        }
    }
}

/// A NodePool's verdict for one pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodePoolVerdict {
    pub nodepool: String,
    pub failure: NodePoolFailure,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}

impl NodePoolVerdict {
    pub fn new(nodepool: &str, failure: NodePoolFailure) -> NodePoolVerdict {
        let fix = match &failure {
            NodePoolFailure::Taint { taint } => Some(Fix::AddToleration { taint: taint.clone() }),
            NodePoolFailure::Requirements(c) if c.node.is_none() => Some(match &c.typo_of {
                Some(t) => Fix::FixTypo { key: c.key.clone(), typo_of: t.clone() },
                None => Fix::DefineLabel { key: c.key.clone() },
            }),
            NodePoolFailure::ExceedsLimits { resource, limit, remaining, smallest, .. } => {
                Some(Fix::RaiseLimit { resource: resource.clone(), to_at_least: *limit + (*smallest - *remaining) })
            }
            _ => None,
        };
        NodePoolVerdict { nodepool: nodepool.to_string(), failure, fix }
    }
}

/// One NodePool's answer for a pod checked on its own: it passes (with the instance types that
/// fit, as a funnel) or fails on its first constraint (with a fix when there is one).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolCheck {
    pub nodepool: String,
    pub passes: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<NodePoolFailure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
    /// For a passing NodePool: how many of its instance types survive each test, and the cheapest
    /// that fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub funnel: Option<Funnel>,
}

/// A pending pod checked on its own against the cluster as it is, before a round places anything
/// (the round itself may then put it with other pods): which existing nodes could take it, why
/// the others cannot (grouped), and every NodePool's answer in weight order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodEvaluation {
    pub existing_nodes_fitting: Vec<String>,
    pub existing_nodes: Vec<RejectionGroup>,
    pub nodepools: Vec<NodePoolCheck>,
}

/// Why a pod stays pending after the round.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodExplanation {
    /// Dynamic Resource Allocation claims (upstream: not supported while `--ignore-dra-requests`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dra: bool,
    /// No NodePool takes part in provisioning ("no dynamic nodepools found").
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub no_nodepools: bool,
    pub existing_nodes: Vec<RejectionGroup>,
    pub planned_nodeclaims: Vec<RejectionGroup>,
    pub nodepools: Vec<NodePoolVerdict>,
    pub relaxations: Vec<Relaxation>,
}

impl PodExplanation {
    pub fn empty() -> PodExplanation {
        PodExplanation {
            dra: false,
            no_nodepools: false,
            existing_nodes: Vec::new(),
            planned_nodeclaims: Vec::new(),
            nodepools: Vec::new(),
            relaxations: Vec::new(),
        }
    }

    /// The NodePool that came closest (furthest in the check order; the first in weight order
    /// among equals).
    pub fn closest(&self) -> Option<&NodePoolVerdict> {
        let best = self.nodepools.iter().map(|v| v.failure.progress()).max()?;
        self.nodepools.iter().find(|v| v.failure.progress() == best)
    }

    /// One line: the reason the closest NodePool gave.
    pub fn headline(&self) -> String {
        if self.dra {
            return "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter".into();
        }
        if self.no_nodepools {
            return "no dynamic nodepools found".into();
        }
        match self.closest() {
            Some(v) => {
                let mut s = format!("NodePool {}: {}", v.nodepool, failure_text(&v.failure));
                if let Some(fix) = &v.fix {
                    let _ = write!(s, "; fix: {fix}");
                }
                s
            }
            None => "nodepool requirements filtered out all available instance types".into(),
        }
    }
}

fn list(values: &BTreeMap<String, Quantity>) -> String {
    values.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
}

/// The text of one NodePool failure.
pub fn failure_text(failure: &NodePoolFailure) -> String {
    match failure {
        NodePoolFailure::NotEligible { why } => why.clone(),
        NodePoolFailure::Taint { taint } => format!("taint {taint} is not tolerated"),
        NodePoolFailure::Requirements(c) => c.to_string(),
        NodePoolFailure::VolumeTopology(c) => volume_conflict_text(c, Side::NodePool),
        NodePoolFailure::Topology(c) => c.to_string(),
        NodePoolFailure::NodeLimitsExhausted { limit } => format!("limits.nodes ({limit}) is used up"),
        NodePoolFailure::ExceedsLimits { resource, limit, remaining, smallest, smallest_type } => format!(
            "limits.{resource} is {limit} with {remaining} left, and the smallest instance type that fits the pod ({smallest_type}) has {smallest}"
        ),
        NodePoolFailure::InstanceTypes(f) => funnel_text(f),
        NodePoolFailure::MinValues { keys } | NodePoolFailure::MinValuesAfterTruncation { keys } => {
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{} needs {} distinct values, the instance types offer {}", k.key, k.min_values, k.found))
                .collect();
            let when = if matches!(failure, NodePoolFailure::MinValuesAfterTruncation { .. }) {
                " after keeping the cheapest 600 instance types"
            } else {
                ""
            };
            format!("minValues not met{when}: {}", parts.join("; "))
        }
        NodePoolFailure::Reservations(c) => c.to_string(),
    }
}

fn funnel_text(f: &Funnel) -> String {
    let mut s = String::new();
    if f.requirements == 0 {
        let _ = write!(s, "none of its {} instance types meets the pod's requirements", f.allowed);
        if let Some(c) = &f.requirement_conflict {
            let _ = write!(s, " ({c})");
        }
    } else if f.resources == 0 {
        match &f.shortfall {
            Some(sh) => {
                let narrowed =
                    if f.narrowed_by.is_empty() { String::new() } else { format!(" ({})", f.narrowed_by.join(", ")) };
                let _ = write!(
                    s,
                    "no instance type has {} {} (pod and daemons); of the {} meeting the requirements{narrowed} the largest, {}, offers {}",
                    sh.resource, sh.needs, f.requirements, sh.largest_type, sh.largest
                );
            }
            None => match &f.host_port {
                Some(p) => {
                    let _ = write!(s, "host port {p} clashes with a DaemonSet on every instance type");
                }
                None => {
                    let _ = write!(s, "no instance type has enough resources for {}", list(&f.requests));
                }
            },
        }
    } else {
        let _ = write!(
            s,
            "none of the {} instance types that meet the requirements and fit has an available offering the pod allows",
            f.resources
        );
    }
    if !f.volumes.is_empty() {
        let _ = write!(s, "; its volumes require {}", f.volumes.join(", "));
    }
    if !f.topology.is_empty() {
        let _ = write!(s, "; topology placed the NodeClaim at {}", f.topology.join(", "));
    }
    let _ = write!(
        s,
        " [funnel: {} allowed → {} meet requirements → {} fit → {} with an offering]",
        f.allowed, f.requirements, f.resources, f.offerings
    );
    s
}

/// A CSI driver's volume limit on an existing node (upstream `VolumeUsage.ExceedsLimits`,
/// "checking volume usage, would exceed volume limit").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeLimit {
    pub driver: String,
    /// Distinct PersistentVolumeClaims of the driver already counted on the node.
    pub attached: usize,
    /// The node's CSINode `allocatable.count` for the driver.
    pub limit: usize,
    /// The pod's claims of the driver that are not on the node yet.
    pub needs: usize,
}

impl fmt::Display for VolumeLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "volume limit: {} {}/{} attached, ", self.driver, self.attached, self.limit)?;
        if self.needs == 0 {
            // upstream counts the node's own volumes too, so a node already over its limit takes
            // no pod at all.
            f.write_str("already over the limit")
        } else {
            write!(f, "pod needs {} more", self.needs)
        }
    }
}

/// Where a volume's topology comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum VolumeOrigin {
    /// A bound claim: the PersistentVolume's `nodeAffinity.required`.
    PersistentVolume { name: String },
    /// An unbound claim: the StorageClass's `allowedTopologies`.
    StorageClass { name: String },
}

impl fmt::Display for VolumeOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VolumeOrigin::PersistentVolume { name } => write!(f, "PV {name}"),
            VolumeOrigin::StorageClass { name } => write!(f, "StorageClass {name}"),
        }
    }
}

/// A capacity reservation as explanations show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationUse {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// Instances the reservation had available when the round started.
    pub available: i64,
    /// Instances not held by this round's NodeClaims.
    pub left: i64,
    /// NodeClaims planned this round that hold one instance of it.
    pub held_by: usize,
}

impl fmt::Display for ReservationUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}, {})", self.id, self.instance_type, self.zone)
    }
}

/// Why reserved capacity stops a pod (upstream `ReservedOfferingError`, Strict mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum ReservationConflict {
    /// The pod could use reserved offerings, but NodeClaims planned earlier this round hold all
    /// of their capacity (each holds one instance of every reservation it could launch into).
    Exhausted { reservations: Vec<ReservationUse> },
    /// The NodeClaim holds reservations and adding the pod would leave it none of them.
    WouldDropAll { reservations: Vec<ReservationUse> },
}

impl ReservationConflict {
    fn group_key(&self) -> String {
        let (kind, list) = match self {
            ReservationConflict::Exhausted { reservations } => ("exhausted", reservations),
            ReservationConflict::WouldDropAll { reservations } => ("drop", reservations),
        };
        let ids: Vec<&str> = list.iter().map(|r| r.id.as_str()).collect();
        format!("{kind} {}", ids.join(","))
    }
}

impl fmt::Display for ReservationConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReservationConflict::Exhausted { reservations } => match reservations.as_slice() {
                [] => f.write_str("the reservations it could use have no instances left"),
                [r] => write!(
                    f,
                    "reservation {r} has {} of {} instance{} left after NodeClaims planned earlier this round",
                    r.left,
                    r.available,
                    if r.available == 1 { "" } else { "s" }
                ),
                list => {
                    // Exhausted means none of them has an instance left; say what each had.
                    let parts: Vec<String> = list
                        .iter()
                        .map(|r| {
                            let plural = if r.available == 1 { "" } else { "s" };
                            format!("{} ({}, {}: {} instance{plural})", r.id, r.instance_type, r.zone, r.available)
                        })
                        .collect();
                    let (last, rest) = parts.split_last().expect("two or more");
                    write!(
                        f,
                        "reservations {} and {last} have none left after NodeClaims planned earlier this round",
                        rest.join(", ")
                    )
                }
            },
            ReservationConflict::WouldDropAll { reservations } => {
                let parts: Vec<String> = reservations.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "adding the pod would leave this NodeClaim none of the reservations it holds ({}); a NodeClaim on reserved \
                     capacity stays on it",
                    parts.join(", ")
                )
            }
        }
    }
}

/// A volume whose topology a node or NodePool cannot meet: the first conflicting key of the
/// pod's first volume topology alternative, attributed to the volume that constrains the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeConflict {
    /// The volume's name in the pod spec.
    pub volume: String,
    /// `namespace/name` of its PersistentVolumeClaim.
    pub claim: String,
    pub origin: VolumeOrigin,
    pub key: String,
    /// The volume topology's requirement for the key (`key In [a]`).
    pub requires: String,
    /// The node's / NodePool's requirement for the key (with the pod's own requirements applied);
    /// `None` when the key is not defined there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offers: Option<String>,
    /// How many volume topology alternatives the pod has (each was tried; none fits).
    pub alternatives: usize,
}

/// Which side a [`VolumeConflict`] is reported against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Node,
    NodePool,
}

fn volume_conflict_text(c: &VolumeConflict, side: Side) -> String {
    let mut s = format!("volume {} (PVC {}, {}) requires {}", c.volume, c.claim, c.origin, c.requires);
    let _ = match (&c.offers, side) {
        // A new NodeClaim's hostname is a placeholder: naming it would not help.
        (_, Side::NodePool) if c.key == crate::labels::HOSTNAME => {
            write!(s, "; a new node cannot have an existing node's hostname")
        }
        (Some(o), Side::Node) => write!(s, "; the node has {o}"),
        (Some(o), Side::NodePool) => write!(s, "; the NodePool allows {o}"),
        (None, Side::Node) => write!(s, "; the node has no {} label", c.key),
        (None, Side::NodePool) => write!(s, "; the NodePool does not define {}", c.key),
    };
    if c.alternatives > 1 {
        let _ = write!(s, " (the first of {} volume topology alternatives; none fits)", c.alternatives);
    }
    s
}

/// Why a pod's PersistentVolumeClaim keeps it out of the round (upstream
/// `ValidatePersistentVolumeClaims`, and the lookups of `VolumeTopology.GetRequirements`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum VolumeProblem {
    ClaimNotFound,
    ClaimDeleting,
    /// Phase `Lost`: bound to a PersistentVolume that no longer exists.
    ClaimLost,
    PersistentVolumeNotFound {
        persistent_volume: String,
    },
    PersistentVolumeDeleting {
        persistent_volume: String,
    },
    /// `volumeName` is set but the `pv.kubernetes.io/bind-completed` annotation is missing.
    BindNotCompleted {
        persistent_volume: String,
    },
    /// Unbound, without a storage class (and no default StorageClass in the input).
    NoStorageClass,
    StorageClassNotFound {
        storage_class: String,
    },
    /// Unbound with a StorageClass of `volumeBindingMode: Immediate` (`defaulted`: the mode was
    /// unset, which the API server defaults to Immediate).
    ImmediateBinding {
        storage_class: String,
        defaulted: bool,
    },
    /// A PersistentVolume node affinity or StorageClass allowed topology that cannot be read.
    InvalidTopology {
        origin: VolumeOrigin,
        message: String,
    },
}

/// The text of a [`VolumeProblem`] of the pod volume `volume` (claim `claim`).
pub fn volume_problem_text(volume: &str, claim: &str, problem: &VolumeProblem) -> String {
    let pvc = format!("PersistentVolumeClaim {claim} (volume {volume})");
    match problem {
        VolumeProblem::ClaimNotFound => format!("{pvc} not found"),
        VolumeProblem::ClaimDeleting => format!("{pvc} is being deleted"),
        VolumeProblem::ClaimLost => format!("{pvc} is Lost: bound to a PersistentVolume that no longer exists"),
        VolumeProblem::PersistentVolumeNotFound { persistent_volume } => {
            format!("{pvc} is bound to PersistentVolume {persistent_volume}, which is not found")
        }
        VolumeProblem::PersistentVolumeDeleting { persistent_volume } => {
            format!("{pvc} is bound to PersistentVolume {persistent_volume}, which is being deleted")
        }
        VolumeProblem::BindNotCompleted { persistent_volume } => format!(
            "{pvc} names PersistentVolume {persistent_volume} but lacks the annotation \
             pv.kubernetes.io/bind-completed, so it is considered unbound"
        ),
        VolumeProblem::NoStorageClass => {
            format!("{pvc} is unbound and has no storage class (and there is no default StorageClass)")
        }
        VolumeProblem::StorageClassNotFound { storage_class } => {
            format!("{pvc} is unbound and its StorageClass {storage_class} is not found")
        }
        VolumeProblem::ImmediateBinding { storage_class, defaulted } => format!(
            "{pvc} is unbound and StorageClass {storage_class} has volumeBindingMode Immediate{}; such a claim \
             must be bound before the pod is scheduled",
            if *defaulted { " (the default when unset)" } else { "" }
        ),
        VolumeProblem::InvalidTopology { origin, message } => format!("{pvc}: {origin} topology: {message}"),
    }
}

/// A pod whose scheduling decision is deferred to a later round (upstream: a
/// `ReservedOfferingError` in Strict mode is not relaxed, keeps lower-weight NodePools from being
/// tried, raises no event and is not counted as unschedulable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deferred {
    pub pod: PodRef,
    /// The NodePool whose reserved offerings the pod is waiting for.
    pub nodepool: String,
    pub conflict: ReservationConflict,
}

impl Deferred {
    /// One line.
    pub fn headline(&self) -> String {
        format!("deferred: NodePool {}: {}; Karpenter retries next round", self.nodepool, self.conflict)
    }
}

/// The one renderer for a deferred pod.
pub fn render_deferred(d: &Deferred) -> String {
    format!("{}: {}\n", d.pod, d.headline())
}

/// A pod left pending, with its explanation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unschedulable {
    pub pod: PodRef,
    pub explanation: PodExplanation,
}

/// A pod left out of the round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ignored {
    pub pod: PodRef,
    pub reason: IgnoreReason,
}

/// The one renderer: a multi-line explanation of an unschedulable pod.
pub fn render_unschedulable(u: &Unschedulable) -> String {
    let e = &u.explanation;
    let mut s = format!("{}: {}\n", u.pod, e.headline());
    if e.dra || e.no_nodepools {
        return s;
    }
    for (title, groups) in
        [("existing nodes", &e.existing_nodes), ("NodeClaims planned this round", &e.planned_nodeclaims)]
    {
        if groups.is_empty() {
            continue;
        }
        let total: usize = groups.iter().map(|g| g.count).sum();
        let _ = writeln!(s, "  {title} ({total}):");
        for g in groups {
            let _ = writeln!(
                s,
                "    {} node{}: {} (e.g. {})",
                g.count,
                if g.count == 1 { "" } else { "s" },
                g.rejection,
                g.examples.join(", ")
            );
        }
    }
    if !e.nodepools.is_empty() {
        let _ = writeln!(s, "  NodePools:");
        for v in &e.nodepools {
            let _ = write!(s, "    {}: {}", v.nodepool, failure_text(&v.failure));
            if let Some(fix) = &v.fix {
                let _ = write!(s, "\n      fix: {fix}");
            }
            s.push('\n');
            if let NodePoolFailure::InstanceTypes(f) = &v.failure {
                if !f.cheapest_lost.is_empty() {
                    let lost: Vec<String> = f.cheapest_lost.iter().map(ToString::to_string).collect();
                    let _ = writeln!(s, "      cheapest allowed: {}", lost.join("; "));
                }
                if !f.cheapest.is_empty() {
                    let cheapest: Vec<String> = f.cheapest.iter().map(|(n, p)| format!("{n} ${p:.4}/h")).collect();
                    let _ = writeln!(s, "      cheapest that fit: {}", cheapest.join(", "));
                }
            }
        }
    }
    if !e.relaxations.is_empty() {
        let r: Vec<String> = e.relaxations.iter().map(ToString::to_string).collect();
        let _ = writeln!(s, "  relaxed: {}", r.join("; "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_count_and_keep_the_most_free() {
        let r = |free: i64| NodeRejection::Resources {
            resource: "cpu".into(),
            needs: Quantity::from_millis(1500),
            most_free: Quantity::from_millis(free),
        };
        let taint = NodeRejection::Taint {
            taint: TaintRef { key: "dedicated".into(), value: Some("critical".into()), effect: "NoSchedule".into() },
        };
        let groups = group_rejections(vec![
            ("a".into(), r(100)),
            ("b".into(), taint.clone()),
            ("c".into(), r(900)),
            ("d".into(), r(300)),
        ]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].count, 3);
        assert_eq!(groups[0].rejection.to_string(), "insufficient cpu (needs 1500m, most free 900m)");
        assert_eq!(groups[1].rejection.to_string(), "taint dedicated=critical:NoSchedule not tolerated");
    }

    #[test]
    fn limit_fix_names_the_needed_value() {
        let v = NodePoolVerdict::new(
            "default",
            NodePoolFailure::ExceedsLimits {
                resource: "cpu".into(),
                limit: Quantity::from_units(50),
                remaining: Quantity::from_units(2),
                smallest: Quantity::from_units(4),
                smallest_type: "c5.xlarge".into(),
            },
        );
        assert_eq!(v.fix.unwrap().to_string(), "raise limits.cpu to at least 52");
    }

    #[test]
    fn deferral_names_the_reservation_and_what_is_left() {
        let r = |id: &str, left: i64| ReservationUse {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            available: 2,
            left,
            held_by: 2,
        };
        let d = Deferred {
            pod: PodRef { namespace: "default".into(), name: "p".into() },
            nodepool: "reserved".into(),
            conflict: ReservationConflict::Exhausted { reservations: vec![r("cr-123", 0)] },
        };
        assert_eq!(
            render_deferred(&d),
            "default/p: deferred: NodePool reserved: reservation cr-123 (m5.large, us-east-1a) has 0 of 2 instances \
             left after NodeClaims planned earlier this round; Karpenter retries next round\n"
        );
        let two = ReservationConflict::Exhausted { reservations: vec![r("cr-1", 0), r("cr-2", 0)] };
        assert_eq!(
            two.to_string(),
            "reservations cr-1 (m5.large, us-east-1a: 2 instances) and cr-2 (m5.large, us-east-1a: 2 instances) have \
             none left after NodeClaims planned earlier this round"
        );
        let drop = NodeRejection::Reservations(ReservationConflict::WouldDropAll { reservations: vec![r("cr-1", 1)] });
        assert!(drop
            .to_string()
            .starts_with("adding the pod would leave this NodeClaim none of the reservations it holds (cr-1"));
    }
}
