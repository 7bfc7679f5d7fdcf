//! One provisioning round as a pure function (upstream `provisioner.go::Schedule` and
//! `scheduling/scheduler.go`, v1.14.1): NodePools with their instance types, existing nodes and
//! NodeClaims with their bound pods, pending pods, DaemonSets and unavailable offerings in; new
//! NodeClaims, pods placed on existing nodes, and unschedulable or ignored pods (each with a
//! structured explanation) out.
//!
//! Order of work:
//! 1. pods: provisionable and valid, else ignored with the reason;
//! 2. NodePools: dynamic, managed, ready, not deleting; ordered by weight desc, then name desc;
//!    instance types prefiltered against the template; limits minus existing capacity;
//! 3. existing nodes: initialized first, then by name; remaining = allocatable − bound pods −
//!    remaining daemon overhead;
//! 4. the queue: cpu desc, memory desc, creation, uid (then input order); each pod tries existing
//!    nodes, then this round's NodeClaims (fewest pods first, then creation order), then a new
//!    NodeClaim per NodePool in order; on failure one relaxation step and retry; a failed pod goes
//!    to the back unrelaxed; stop after a full cycle without progress;
//! 5. finalisation: daemon overhead minimum into requests, price order, truncation to 600 with
//!    the minValues re-check, the NodeClaim requirements and labels, and the simulated launch.
//!
//! Files (upstream file in brackets): this root [the round's types and `Schedule`], `prepare`
//! [`NewScheduler`: NodePools, templates, limits], `existing_node` [existingnode.go], `queue`
//! [queue.go, `Solve`/`add`], `nodeclaim` [nodeclaim.go], `skipped` [provisioner.go's "skipping"
//! logs, as events], `why` [our explanations].

mod existing_node;
mod nodeclaim;
mod prepare;
mod queue;
mod skipped;
mod why;

pub use prepare::nodepool_usage;
pub use skipped::SkipNotice;

use existing_node::*;
use nodeclaim::*;
use prepare::*;
use why::*;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Taint};
use serde::Serialize;

use crate::api::nodeclaim::NodeClaim;
use crate::api::nodepool::NodePool;
use crate::catalogue::{CapacityType, InstanceType, OfferingCompatibility, UnavailableOffering};
use crate::labels;
use crate::options::MinValuesPolicy;
use crate::quantity::Quantity;
use crate::requirements::{AllowUndefined, NodeSelectorRequirementWithMinValues, Operator, Requirement, Requirements};
use crate::resources::{self, ResourceList};
use crate::state::{Input, NodePoolInput};

use super::cloudprovider::{self, Launch};
use super::daemons::{self, Daemon, DaemonGroup};
use super::explain::{
    self, Deferred, Funnel, Ignored, MinValuesKey, NodePoolFailure, NodePoolVerdict, NodeRejection, PodExplanation,
    Relaxation, RequirementConflict, Shortfall, TaintRef, TypeLoss, Unschedulable,
};
use super::hostports::{self, HostPort};
use super::nodeclaim_template::NodeClaimTemplate;
use super::pod::{self, PodData, Preferences};
use super::reservations::{self, ReservationManager};
use super::taints;
use super::topology::{DomainSource, GroupId, NodeInfo, Topology, TopologyFailure};
use super::volumes::{self, NodeVolumes, PodVolumes, Storage};
use crate::pod::PodRef;

/// A NodeClaim the round creates.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedNodeClaim {
    pub nodepool: String,
    pub pods: Vec<PodRef>,
    /// Cheapest first, at most 600.
    pub instance_type_options: Vec<String>,
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<TaintRef>,
    pub startup_taints: Vec<TaintRef>,
    /// Pod requests plus the minimum daemon overhead (includes `pods`).
    pub requests: ResourceList,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
    /// Annotation `karpenter.sh/nodeclaim-min-values-relaxed`.
    pub min_values_relaxed: bool,
}

/// Pods planned onto an existing node or in-flight NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExistingPlacement {
    pub name: String,
    pub pods: Vec<PodRef>,
}

/// A placed pod whose preferences had to be relaxed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelaxedPod {
    pub pod: PodRef,
    pub relaxations: Vec<Relaxation>,
}

/// A NodePool that takes no part in the round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedNodePool {
    pub nodepool: String,
    /// In JSON, the reason's text.
    #[serde(serialize_with = "crate::style::as_text")]
    pub why: SkipReason,
}

/// Why a NodePool takes no part in a round (upstream `Provisioner.NewScheduler`'s filter and
/// `NewScheduler`'s template checks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    #[error("static NodePool (spec.replicas): not used for dynamic provisioning")]
    Static,
    #[error("being deleted")]
    BeingDeleted,
    #[error("nodeClassRef {group}/{kind} is not managed by the AWS provider")]
    ForeignNodeClass { group: String, kind: String },
    #[error("not Ready ({})", message.as_deref().unwrap_or("condition Ready is not True"))]
    NotReady { message: Option<String> },
    #[error("requirements: {0}")]
    Requirements(#[source] crate::requirements::RequirementError),
    #[error("NodePool requirements filtered out all compatible available instance types")]
    NoInstanceTypes,
    #[error(
        "NodePool requirements filtered out all compatible available instance types due to minValues \
         incompatibility ({0})"
    )]
    MinValues(crate::scheduling::nodeclaim_template::MinValuesShortfall),
}

/// The outcome of one round.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Results {
    pub nodeclaims: Vec<PlannedNodeClaim>,
    pub existing_nodes: Vec<ExistingPlacement>,
    pub unschedulable: Vec<Unschedulable>,
    /// Pods waiting for reserved capacity held by this round's NodeClaims: not unschedulable,
    /// retried next round (upstream `ReservedOfferingError`).
    pub deferred: Vec<Deferred>,
    pub ignored: Vec<Ignored>,
    pub skipped_nodepools: Vec<SkippedNodePool>,
    /// Placed pods whose preferences were relaxed to place them, with the steps applied.
    pub relaxed: Vec<RelaxedPod>,
    /// Things the round could not take into account, said plainly.
    pub notes: Vec<String>,
    /// The pod of `Options::evaluate`, checked on its own before the round (`None`: not asked,
    /// or the pod is not pending and provisionable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<explain::PodEvaluation>,
}

/// An instance type a NodePool may launch, with what packing needs.
#[derive(Debug, Clone)]
struct TypeOption {
    it: usize,
    /// The instance type's allocatable, laid out for the narrowing loop.
    packed: resources::Packed,
    /// The instance type's capacity, laid out for limit checks.
    capacity: resources::Packed,
    /// Position among the template's options by name (NodeClaim requirements list types by name).
    name_rank: u32,
    group: usize,
}

/// A NodePool as the round uses it.
struct Template {
    name: String,
    base: NodeClaimTemplate,
    taints: Vec<Taint>,
    startup_taints: Vec<Taint>,
    instance_types: Arc<Vec<InstanceType>>,
    options: Vec<TypeOption>,
    groups: Vec<DaemonGroup>,
    /// Limits left (capacity-based); only the limited resources.
    remaining: ResourceList,
    /// The options within `remaining`, computed on first use after `remaining` changes (every
    /// pod that opens a NodeClaim needs them; `remaining` changes once per NodeClaim).
    within_limits: std::cell::RefCell<Option<Vec<u32>>>,
    limits: ResourceList,
}

/// A node that exists (or a launched NodeClaim) as the round sees it.
struct ExistingNode {
    name: String,
    initialized: bool,
    /// An in-flight NodeClaim (launched, no Node yet).
    in_flight: bool,
    taints: Vec<Taint>,
    requirements: Requirements,
    available: ResourceList,
    host_ports: Vec<HostPort>,
    placed: Vec<usize>,
    /// CSI volume limits and the claims counted against them.
    volumes: NodeVolumes,
    /// Inside its NodePool's consolidateAfter window, in a consolidation simulation.
    under_consolidate_after: bool,
}

/// A NodeClaim planned in this round.
#[derive(Clone)]
struct Claim {
    template: usize,
    requirements: Requirements,
    /// Indices into the template's options, in price order.
    options: Vec<u32>,
    pods: Vec<usize>,
    requests: ResourceList,
    host_ports: Vec<HostPort>,
    min_values_relaxed: bool,
    /// Pods counted on this claim's host per hostname topology group (mirrors the group's count
    /// for the placeholder hostname; used to skip hosts fast).
    host_counts: Vec<(GroupId, i64)>,
    /// The capacity reservations it holds one instance of.
    reservations: reservations::Held,
}

/// Why a planned NodeClaim cannot take a pod.
enum ClaimRejection {
    Taint(usize),
    Requirements(crate::requirements::IncompatibleReason),
    /// The volume topology alternative is incompatible with the NodeClaim and pod requirements.
    Volume(crate::requirements::IncompatibleReason),
    Topology(Box<TopologyFailure>),
    InstanceTypes {
        remaining: usize,
    },
    MinValues(Vec<MinValuesKey>),
    /// upstream `ReservedOfferingError`.
    Reservations(reservations::Conflict),
}

/// Why volume topology or topology rules out an existing node.
enum NodeFitFailure {
    Topology(TopologyFailure),
    /// The domains topology chose are not the node's.
    Requirements(crate::requirements::IncompatibleReason),
    /// Every volume topology alternative is incompatible with the node (the first's reason).
    Volume(crate::requirements::IncompatibleReason),
}

/// What a successful `can_add` on a claim would commit.
struct Addition {
    requirements: Requirements,
    options: Vec<u32>,
    relaxed_min_values: bool,
    reservations: reservations::Held,
}

/// Why `add` placed a pod nowhere.
enum Unplaced {
    Failed,
    /// A reserved-offering error decided it: no relaxation, wait for a later round.
    Deferred,
}

struct Round<'a> {
    input: &'a Input,
    pods: Vec<PodData>,
    templates: Vec<Template>,
    nodes: Vec<ExistingNode>,
    claims: Vec<Claim>,
    /// This round's claims in the order upstream keeps its `newNodeClaims`: appended when
    /// created, re-sorted in place by pod count with Go's unstable sort before each pod tries
    /// them (so ties fall as upstream's do).
    claim_order: Vec<usize>,
    /// Pods per claim, by claim index (the sort key, kept compact).
    claim_pod_counts: Vec<u32>,
    /// Per hostname topology group, how many of this round's claims count a pod in it: when
    /// every claim does, a pod that must be alone in the group skips them all at once.
    claims_hosting: Vec<(GroupId, usize)>,
    topology: Topology,
    tolerate_prefer_no_schedule: bool,
    /// Placed pods that needed relaxation, with the steps.
    relaxed: Vec<(usize, Vec<Relaxation>)>,
    reservations: ReservationManager,
}

/// Runs one provisioning round.
pub fn schedule(input: &Input) -> Results {
    let mut results = Results {
        nodeclaims: Vec::new(),
        existing_nodes: Vec::new(),
        unschedulable: Vec::new(),
        deferred: Vec::new(),
        ignored: Vec::new(),
        skipped_nodepools: Vec::new(),
        relaxed: Vec::new(),
        notes: Vec::new(),
        evaluation: None,
    };
    let (daemons, daemon_errors) = daemons::daemons(&input.daemonsets);
    for (name, e) in daemon_errors {
        results.notes.push(format!("DaemonSet {name} is not counted as overhead: {e}"));
    }

    // Pods: bound ones stay with their node; the others are candidates.
    let mut bound = Bound::default();
    let cached = input.pod_requests.as_deref().filter(|r| r.len() == input.pods.len());
    let mut pending_pods: Vec<PodData> = Vec::new();
    let mut dra: Vec<PodRef> = Vec::new();
    let storage = Storage::new(&input.pvcs, &input.pvs, &input.storage_classes, &input.csinodes);
    for (i, p) in input.pods.iter().enumerate() {
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty()) else {
            continue;
        };
        if crate::pod::is_active(p) {
            bound.pods.entry(node).or_default().push(p);
            let requests = match cached {
                Some(all) => std::borrow::Cow::Borrowed(&all[i]),
                None => std::borrow::Cow::Owned(resources::pod_requests(p).unwrap_or_default()),
            };
            bound.requests.entry(node).or_default().push(requests);
        }
    }
    for p in &input.pods {
        if p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()) {
            continue;
        }
        let pod_ref = PodRef::of(p);
        if let Err(reason) = pod::provisionable(p) {
            results.ignored.push(Ignored { pod: pod_ref, reason });
            continue;
        }
        // upstream `Validate`: the pod's requirements, then its claims.
        let data = if input.options.kube_scheduler { PodData::read(p) } else { PodData::new(p) };
        match data.and_then(|data| Ok((PodVolumes::resolve(p, &storage, true)?, data))) {
            Err(reason) => results.ignored.push(Ignored { pod: pod_ref, reason }),
            Ok((volumes, mut data)) => {
                data.volumes = volumes;
                if p.spec.as_ref().and_then(|s| s.resource_claims.as_ref()).is_some_and(|c| !c.is_empty()) {
                    // upstream: DRA pods fail in the scheduler while --ignore-dra-requests (default).
                    dra.push(pod_ref);
                } else {
                    pending_pods.push(data);
                }
            }
        }
    }

    // NodePools.
    let mut eligible: Vec<&NodePoolInput> = Vec::new();
    for np in &input.nodepools {
        match eligibility(&np.nodepool) {
            Ok(()) => eligible.push(np),
            Err(why) => results.skipped_nodepools.push(SkippedNodePool { nodepool: np.nodepool.name().into(), why }),
        }
    }
    // upstream `OrderByWeight`: weight desc (unset = 0), equal weights by name descending.
    eligible.sort_by(|a, b| {
        let w = |n: &NodePoolInput| n.nodepool.spec.weight.unwrap_or(0);
        w(b).cmp(&w(a)).then_with(|| b.nodepool.name().cmp(a.nodepool.name()))
    });
    let unavailable = unavailable_by_type(input);
    let mut templates = Vec::new();
    for np in eligible {
        match build_template(np, &unavailable, &daemons, input.options.min_values_policy) {
            Ok(t) => templates.push(t),
            Err(why) => results.skipped_nodepools.push(SkippedNodePool { nodepool: np.nodepool.name().into(), why }),
        }
    }
    let tolerate_prefer_no_schedule =
        templates.iter().any(|t| t.taints.iter().any(|t| t.effect == taints::PREFER_NO_SCHEDULE));

    // Existing nodes and in-flight NodeClaims.
    let (mut nodes, usage, notes, deleting) = existing_nodes(input, &bound, &daemons);
    results.notes.extend(notes);
    if !input.csinodes.is_empty() {
        for node in &mut nodes {
            let pods = bound.pods.get(node.name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
            node.volumes = NodeVolumes::new(&node.name, pods, &storage, &mut results.notes);
        }
    }
    let consolidation = input.options.consolidation.as_ref();
    if let Some(c) = consolidation {
        for node in &mut nodes {
            node.under_consolidate_after = c.under_consolidate_after.contains(&node.name);
        }
    }
    // the currently reschedulable pods of deleting nodes join the pending pods.
    let mut rescheduled: std::collections::BTreeSet<PodRef> = std::collections::BTreeSet::new();
    for node in &deleting {
        for p in bound.pods.get(node.as_str()).into_iter().flatten() {
            if !crate::pod::reschedulable(p, &input.pdbs, input.options.now) {
                continue;
            }
            rescheduled.insert(PodRef::of(p));
            // upstream: these pods are not validated, but a failed volume topology lookup
            // drops them from the round.
            match PodData::read(p).and_then(|data| Ok((PodVolumes::resolve(p, &storage, false)?, data))) {
                Ok((volumes, mut data)) => {
                    data.volumes = volumes;
                    data.from_candidate = consolidation.is_some_and(|c| c.candidates.contains(node));
                    pending_pods.push(data);
                }
                Err(reason) => results.ignored.push(Ignored { pod: PodRef::of(p), reason }),
            }
        }
    }
    // Topology: the domain universe, the groups of the batch, counts from the bound pods that are
    // active, not terminating and not part of the batch.
    let topology = {
        let sources: Vec<DomainSource<'_>> = templates
            .iter()
            .map(|t| DomainSource {
                requirements: &t.base.requirements,
                taints: &t.taints,
                // upstream `buildDomainGroups` reads every instance type the cloud provider
                // returned for the NodePool, not only those compatible with it: a zone where only
                // amd64 types are offered is a domain of an arm64 NodePool too.
                instance_types: t.instance_types.iter().map(|it| &it.requirements).collect(),
            })
            .collect();
        let infos: Vec<NodeInfo<'_>> = nodes
            .iter()
            .map(|n| NodeInfo {
                name: &n.name,
                requirements: &n.requirements,
                taints: &n.taints,
                in_flight: n.in_flight,
            })
            .collect();
        let node_index: HashMap<&str, usize> = infos.iter().enumerate().map(|(i, n)| (n.name, i)).collect();
        let counted: Vec<(&Pod, usize)> = input
            .pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()))
            .filter(|p| crate::pod::is_active(p) && p.metadata.deletion_timestamp.is_none())
            .filter(|p| !rescheduled.contains(&PodRef::of(p)))
            .filter_map(|p| {
                let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default();
                node_index.get(node).map(|&i| (p, i))
            })
            .collect();
        Topology::new(&sources, &infos, &counted, &pending_pods)
    };
    for t in &mut templates {
        if let Some(used) = usage.get(&t.name) {
            for (resource, remaining) in t.remaining.iter_mut() {
                *remaining -= used.get(resource).copied().unwrap_or(Quantity::ZERO);
            }
        }
    }

    let reservations =
        ReservationManager::new(templates.iter().map(|t| (&t.instance_types[..], t.options.iter().map(|o| o.it))));
    let mut round = Round {
        input,
        pods: pending_pods,
        templates,
        nodes,
        claims: Vec::new(),
        claim_order: Vec::new(),
        claim_pod_counts: Vec::new(),
        claims_hosting: Vec::new(),
        topology,
        tolerate_prefer_no_schedule,
        relaxed: Vec::new(),
        reservations,
    };
    results.evaluation = input.options.evaluate.as_ref().and_then(|target| {
        let p = round.pods.iter().position(|d| &d.pod_ref == target)?;
        Some(round.evaluate(p))
    });
    let failed = round.solve();
    round.finish(failed, &mut results);
    for pod in dra {
        let mut e = PodExplanation::empty();
        e.dra = true;
        results.unschedulable.push(Unschedulable { pod, explanation: e });
    }
    results
}

type Usage = BTreeMap<String, ResourceList>;

/// Builds the existing nodes (upstream `ExistingNode`s of `cluster.Nodes().Active()`), sorted
/// initialized first, then by name; and the capacity each NodePool already uses (`nodes` = 1 per
/// node).
/// The active pods bound to each node, and their requests (aligned).
#[derive(Default)]
struct Bound<'a> {
    pods: BTreeMap<&'a str, Vec<&'a Pod>>,
    requests: BTreeMap<&'a str, Vec<std::borrow::Cow<'a, ResourceList>>>,
}

impl ExistingNode {
    /// Upstream `ExistingNode.CanAdd`, in its order: taints, volume limits, host ports,
    /// resources, requirements (strict); then volume topology and topology (`node_topology`).
    fn can_add(
        &self,
        pod: &PodData,
        requirements: &Requirements,
        tolerations: &[k8s_openapi::api::core::v1::Toleration],
    ) -> Result<(), NodeRejection> {
        if let Some(t) = taints::first_untolerated(&self.taints, tolerations) {
            return Err(NodeRejection::Taint { taint: TaintRef::of(t) });
        }
        self.volumes.fits(&pod.volumes).map_err(NodeRejection::VolumeLimit)?;
        if let Some((wanted, _)) = hostports::first_conflict(&pod.host_ports, &self.host_ports) {
            return Err(NodeRejection::HostPort { port: wanted.to_string() });
        }
        if !resources::fits(&pod.requests, &self.available) {
            let resource = resources::first_exceeded(&pod.requests, &self.available).unwrap_or("cpu").to_string();
            return Err(NodeRejection::Resources {
                needs: pod.requests.get(&resource).copied().unwrap_or(Quantity::ZERO),
                most_free: self.available.get(&resource).copied().unwrap_or(Quantity::ZERO),
                resource,
            });
        }
        self.requirements
            .compatible(requirements, AllowUndefined::Nothing)
            .map_err(|e| NodeRejection::Requirements(RequirementConflict::from_reason(&e)))?;
        Ok(())
    }
}
