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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    pub why: String,
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
    let unavailable: BTreeMap<&str, Vec<&UnavailableOffering>> =
        input.unavailable_offerings.iter().fold(BTreeMap::new(), |mut m, u| {
            m.entry(u.instance_type.as_str()).or_default().push(u);
            m
        });
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

/// Upstream `Provisioner.NewScheduler`'s NodePool filter.
fn eligibility(np: &NodePool) -> Result<(), String> {
    if np.is_static() {
        return Err("static NodePool (spec.replicas): not used for dynamic provisioning".into());
    }
    if np.metadata.deletion_timestamp.is_some() {
        return Err("being deleted".into());
    }
    let r = &np.spec.template.spec.node_class_ref;
    if r.group != crate::api::AWS_GROUP || r.kind != "EC2NodeClass" {
        return Err(format!("nodeClassRef {}/{} is not managed by the AWS provider", r.group, r.kind));
    }
    if let Some(status) = &np.status {
        if let Some(c) = crate::api::find_condition(&status.conditions, "Ready") {
            if !c.is_true() {
                return Err(format!("not Ready ({})", c.message.as_deref().unwrap_or("condition Ready is not True")));
            }
        }
    }
    Ok(())
}

fn build_template(
    np: &NodePoolInput,
    unavailable: &BTreeMap<&str, Vec<&UnavailableOffering>>,
    daemons: &[Daemon],
    policy: MinValuesPolicy,
) -> Result<Template, String> {
    let base = NodeClaimTemplate::new(&np.nodepool).map_err(|e| format!("requirements: {e}"))?;
    // The unavailable-offerings input marks offerings unavailable (upstream's ICE cache).
    let mut instance_types = np.instance_types.clone();
    if instance_types.iter().any(|it| unavailable.contains_key(it.name.as_str())) {
        let types = Arc::make_mut(&mut instance_types);
        for it in types.iter_mut() {
            if let Some(list) = unavailable.get(it.name.as_str()) {
                for o in &mut it.offerings {
                    if list.iter().any(|u| u.zone == o.zone && u.capacity_type == o.capacity_type.as_str()) {
                        o.available = false;
                    }
                }
            }
        }
    }
    // Prefilter without limits: limits are applied per new NodeClaim against what remains.
    let mut unlimited = base.clone();
    unlimited.limits.clear();
    let prefilter = unlimited.prefilter_survivors(&instance_types);
    if prefilter.options.is_empty() {
        return Err("NodePool requirements filtered out all compatible available instance types".into());
    }
    if let (Err(shortfall), MinValuesPolicy::Strict) = (&prefilter.min_values, policy) {
        return Err(format!(
            "NodePool requirements filtered out all compatible available instance types due to minValues \
             incompatibility ({shortfall})"
        ));
    }
    let index: HashMap<&str, usize> = instance_types.iter().enumerate().map(|(i, it)| (it.name.as_str(), i)).collect();
    let types: Vec<usize> = prefilter.options.iter().map(|o| index[o.instance_type.name.as_str()]).collect();
    drop(prefilter);
    let spec = &np.nodepool.spec.template.spec;
    let (groups, group_of) =
        daemons::overhead_groups(daemons, &base.requirements, &spec.taints, &instance_types, &types);
    let mut options: Vec<TypeOption> = types
        .iter()
        .zip(group_of)
        .map(|(&it, group)| {
            let (packed, capacity) = instance_types[it].packed().clone();
            TypeOption { it, packed, capacity, group, name_rank: 0 }
        })
        .collect();
    let mut by_name: Vec<usize> = (0..options.len()).collect();
    by_name.sort_by(|&a, &b| instance_types[options[a].it].name.cmp(&instance_types[options[b].it].name));
    for (rank, o) in by_name.into_iter().enumerate() {
        options[o].name_rank = rank as u32;
    }
    Ok(Template {
        name: base.nodepool.clone(),
        remaining: base.limits.clone(),
        within_limits: Default::default(),
        limits: base.limits.clone(),
        taints: spec.taints.clone(),
        startup_taints: spec.startup_taints.clone(),
        base,
        instance_types,
        options,
        groups,
    })
}

fn node_labels_requirements(labels_map: &BTreeMap<String, String>, hostname: &str) -> Requirements {
    let mut reqs = Requirements::from_labels(labels_map);
    if !reqs.has(labels::HOSTNAME) {
        reqs.add(Requirement::in_values(labels::HOSTNAME, &[hostname]));
    }
    reqs
}

fn k8s_resources(
    map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> ResourceList {
    map.map(|m| resources::from_k8s(m).unwrap_or_default()).unwrap_or_default()
}

type Usage = BTreeMap<String, ResourceList>;

/// What each NodePool's nodes and launched NodeClaims hold, as its `limits` count it: their
/// capacity, and `nodes` = 1 each; deleting ones do not count (upstream: the provisioner's view).
pub fn nodepool_usage(input: &Input) -> BTreeMap<String, ResourceList> {
    existing_nodes(input, &Bound::default(), &[]).1
}

/// Builds the existing nodes (upstream `ExistingNode`s of `cluster.Nodes().Active()`), sorted
/// initialized first, then by name; and the capacity each NodePool already uses (`nodes` = 1 per
/// node).
/// The active pods bound to each node, and their requests (aligned).
#[derive(Default)]
struct Bound<'a> {
    pods: BTreeMap<&'a str, Vec<&'a Pod>>,
    requests: BTreeMap<&'a str, Vec<std::borrow::Cow<'a, ResourceList>>>,
}

fn existing_nodes(
    input: &Input,
    bound: &Bound<'_>,
    daemons: &[Daemon],
) -> (Vec<ExistingNode>, Usage, Vec<String>, Vec<String>) {
    let mut out = Vec::new();
    let mut deleting = Vec::new();
    let mut usage: Usage = BTreeMap::new();
    let mut notes = Vec::new();
    let mut claimed = vec![false; input.nodeclaims.len()];
    let mut by_node_name: HashMap<&str, usize> = HashMap::new();
    let mut by_provider: HashMap<&str, usize> = HashMap::new();
    for (i, s) in input.nodeclaims.iter().enumerate().filter_map(|(i, nc)| Some((i, nc.status.as_ref()?))) {
        if !s.node_name.is_empty() {
            by_node_name.entry(s.node_name.as_str()).or_insert(i);
        }
        if !s.provider_id.is_empty() {
            by_provider.entry(s.provider_id.as_str()).or_insert(i);
        }
    }
    let mut add_usage = |nodepool: Option<&String>, capacity: &ResourceList| {
        if let Some(np) = nodepool {
            let u = usage.entry(np.clone()).or_default();
            resources::add_into(u, capacity);
            resources::add_into(u, &BTreeMap::from([("nodes".to_string(), Quantity::from_units(1))]));
        }
    };
    for node in &input.nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.clone()).filter(|p| !p.is_empty());
        if provider_id.is_none() && node.metadata.labels.as_ref().is_some_and(|l| l.contains_key(labels::NODEPOOL)) {
            // upstream `Cluster.UpdateNode`: a node Karpenter owns is not tracked until it has a
            // providerID, so it is neither capacity nor a node whose pods are rescheduled.
            notes.push(format!(
                "Node {name} carries {} but has no spec.providerID: upstream's cluster state does not track \
                 it until it has one, so it is left out (neither capacity nor deleting)",
                labels::NODEPOOL
            ));
            continue;
        }
        // The first NodeClaim naming the node or its providerID (a lookup: one per node).
        let claim_index = [by_node_name.get(name.as_str()), provider_id.as_deref().and_then(|p| by_provider.get(p))]
            .into_iter()
            .flatten()
            .min()
            .copied();
        if let Some(i) = claim_index {
            claimed[i] = true;
        }
        let claim = claim_index.map(|i| &input.nodeclaims[i]);
        // upstream `MarkedForDeletion`: also a node the disruption queue has tainted (not for
        // kube-scheduler, which leaves the pods of a tainted node where they are).
        let disrupted = taints::is_disrupted(node) && !input.options.kube_scheduler;
        if node.metadata.deletion_timestamp.is_some() || claim.is_some_and(marked_for_deletion) || disrupted {
            // not active capacity; its reschedulable pods join the round.
            deleting.push(name);
            continue;
        }
        let mut node_labels = node.metadata.labels.clone().unwrap_or_default();
        let nodepool = node_labels.get(labels::NODEPOOL).cloned();
        let managed = nodepool.is_some();
        let registered = !managed || node_labels.get(labels::NODE_REGISTERED).map(String::as_str) == Some("true");
        let initialized = !managed || node_labels.get(labels::NODE_INITIALIZED).map(String::as_str) == Some("true");
        let mut node_taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        if managed && !registered {
            // an unregistered managed node looks like its NodeClaim.
            if let Some(c) = claim {
                node_labels.extend(c.metadata.labels.clone().unwrap_or_default());
                node_taints = c.spec.taints.clone();
                node_taints.extend(c.spec.startup_taints.iter().cloned());
            }
        }
        if managed && !initialized {
            let startup = claim.map(|c| c.spec.startup_taints.as_slice()).unwrap_or(&[]);
            node_taints.retain(|t| {
                !taints::is_known_ephemeral(t) && !startup.iter().any(|s| s.key == t.key && s.effect == t.effect)
            });
        }
        let status = node.status.as_ref();
        let mut allocatable = k8s_resources(status.and_then(|s| s.allocatable.as_ref()));
        let mut capacity = k8s_resources(status.and_then(|s| s.capacity.as_ref()));
        if managed && !initialized {
            if let Some(cs) = claim.and_then(|c| c.status.as_ref()) {
                fill_zero(&mut allocatable, &cs.allocatable);
                fill_zero(&mut capacity, &cs.capacity);
            }
        }
        add_usage(nodepool.as_ref(), &capacity);
        let hostname = node_labels.get(labels::HOSTNAME).cloned().unwrap_or_else(|| name.clone());
        let requirements = node_labels_requirements(&node_labels, &hostname);
        out.push(make_existing(name, initialized, node_taints, requirements, allocatable, bound, daemons));
    }
    for (i, nc) in input.nodeclaims.iter().enumerate() {
        if claimed[i] {
            continue;
        }
        let name = nc.name().to_string();
        let Some(status) = nc.status.as_ref().filter(|s| !s.provider_id.is_empty() || !s.allocatable.is_empty()) else {
            notes.push(format!(
                "NodeClaim {name} is not launched yet (no providerID): upstream schedules nothing until it is; \
                 here it is left out"
            ));
            continue;
        };
        if marked_for_deletion(nc) {
            deleting.push(name);
            continue;
        }
        // In flight: launched, no Node yet; shape from the NodeClaim, startup taints ignored.
        let mut node_labels = nc.metadata.labels.clone().unwrap_or_default();
        let reqs = Requirements::from_node_selector_requirements(&nc.spec.requirements).unwrap_or_default();
        for (k, v) in reqs.labels() {
            node_labels.entry(k).or_insert(v);
        }
        add_usage(node_labels.get(labels::NODEPOOL), &status.capacity);
        let requirements = node_labels_requirements(&node_labels, &name);
        let node_taints = nc.spec.taints.iter().filter(|t| !taints::is_known_ephemeral(t)).cloned().collect();
        let mut node =
            make_existing(name, false, node_taints, requirements, status.allocatable.clone(), bound, daemons);
        node.in_flight = true;
        out.push(node);
    }
    // upstream: initialized first, then by name (stable).
    out.sort_by(|a, b| b.initialized.cmp(&a.initialized).then_with(|| a.name.cmp(&b.name)));
    (out, usage, notes, deleting)
}

/// Upstream `StateNode.MarkedForDeletion` as far as objects show it: a deletion timestamp or the
/// `InstanceTerminating` condition.
fn marked_for_deletion(nc: &NodeClaim) -> bool {
    nc.metadata.deletion_timestamp.is_some()
        || nc.status.as_ref().is_some_and(|s| {
            crate::api::find_condition(&s.conditions, crate::api::nodeclaim::conditions::INSTANCE_TERMINATING)
                .is_some_and(|c| c.is_true())
        })
}

fn fill_zero(target: &mut ResourceList, from: &ResourceList) {
    for (k, v) in from {
        let slot = target.entry(k.clone()).or_insert(Quantity::ZERO);
        if slot.is_zero() {
            *slot = *v;
        }
    }
}

fn make_existing(
    name: String,
    initialized: bool,
    node_taints: Vec<Taint>,
    requirements: Requirements,
    allocatable: ResourceList,
    bound: &Bound<'_>,
    daemons: &[Daemon],
) -> ExistingNode {
    let pods = bound.pods.get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
    let requests_of = bound.requests.get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
    let mut used = ResourceList::new();
    let mut host_ports = Vec::new();
    let mut daemon_running = ResourceList::new();
    for (p, requests) in pods.iter().zip(requests_of) {
        resources::add_into(&mut used, requests);
        if crate::pod::daemonset_owner(p).is_some() {
            resources::add_into(&mut daemon_running, requests);
        }
        host_ports.extend(hostports::pod_host_ports(p));
    }
    // Remaining daemon overhead: compatible daemons minus the daemon pods already there, ≥ 0.
    let mut daemon_overhead = ResourceList::new();
    for d in daemons {
        if daemons::runs_on_node(d, &node_taints, &requirements) {
            resources::add_into(&mut daemon_overhead, &d.pod.requests);
        }
    }
    for (k, v) in daemon_overhead.iter_mut() {
        *v = Quantity::max(*v - daemon_running.get(k).copied().unwrap_or(Quantity::ZERO), Quantity::ZERO);
    }
    let available = resources::subtract(&resources::subtract(&allocatable, &used), &daemon_overhead);
    ExistingNode {
        in_flight: false,
        under_consolidate_after: false,
        name,
        initialized,
        taints: node_taints,
        requirements,
        available,
        host_ports,
        placed: Vec::new(),
        volumes: NodeVolumes::default(),
    }
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

impl Round<'_> {
    /// Upstream `Solve`: the queue with its retry semantics. Returns the pods left, with the
    /// relaxation state of their last attempt.
    fn solve(&mut self) -> Vec<(usize, Preferences, Vec<Relaxation>)> {
        let mut order: Vec<usize> = (0..self.pods.len()).collect();
        // upstream queue order: cpu desc, memory desc, creation asc, uid asc (then input order).
        order.sort_by(|&a, &b| {
            let (p, q) = (&self.pods[a], &self.pods[b]);
            q.cpu_millis
                .cmp(&p.cpu_millis)
                .then_with(|| q.memory_bytes.cmp(&p.memory_bytes))
                .then_with(|| p.creation.cmp(&q.creation))
                .then_with(|| p.uid.cmp(&q.uid))
        });
        let mut queue: VecDeque<usize> = order.into();
        let mut last_len: Vec<Option<usize>> = vec![None; self.pods.len()];
        let mut last_state: Vec<Option<(Preferences, Vec<Relaxation>)>> = vec![None; self.pods.len()];
        while let Some(&p) = queue.front() {
            // A full cycle without progress: the head was pushed when the queue had this length.
            if last_len[p] == Some(queue.len()) {
                break;
            }
            queue.pop_front();
            match self.try_schedule(p) {
                Ok(relaxations) => {
                    last_state[p] = None;
                    if !relaxations.is_empty() {
                        self.relaxed.push((p, relaxations));
                    }
                }
                Err(state) => {
                    last_state[p] = Some(state);
                    queue.push_back(p);
                    last_len[p] = Some(queue.len());
                }
            }
        }
        queue
            .into_iter()
            .map(|p| {
                let (prefs, relaxations) = last_state[p].take().unwrap_or_default();
                (p, prefs, relaxations)
            })
            .collect()
    }

    /// Upstream `trySchedule`: add, relax one step on failure, retry until nothing relaxes.
    fn try_schedule(&mut self, p: usize) -> Result<Vec<Relaxation>, (Preferences, Vec<Relaxation>)> {
        let mut prefs = Preferences::default();
        let mut relaxations = Vec::new();
        loop {
            match self.add(p, &prefs) {
                Ok(()) => return Ok(relaxations),
                // upstream: a reserved-offering error is never relaxed; the pod may fit once other
                // NodeClaims release reservations, or in the next round.
                Err(Unplaced::Deferred) => return Err((prefs, relaxations)),
                Err(Unplaced::Failed) => {}
            }
            match prefs.relax(&self.pods[p], self.tolerate_prefer_no_schedule) {
                Some(r) => {
                    self.topology.activate(p, &prefs);
                    relaxations.push(r);
                }
                None => return Err((prefs, relaxations)),
            }
        }
    }

    /// Upstream `Scheduler.add`: existing nodes, then this round's NodeClaims, then a new one.
    fn add(&mut self, p: usize, prefs: &Preferences) -> Result<(), Unplaced> {
        let pod = &self.pods[p];
        let requirements = pod.requirements(prefs);
        let tolerations = pod.tolerations(prefs);
        // A cheap topology pre-check, computed once for the attempt: most nodes a topology pod
        // tries are rejected by topology, and this rejects them without building any set.
        let prepared = if self.topology.involves(p) {
            self.topology.prepare(p, pod, prefs, &pod.strict_requirements(prefs), &requirements)
        } else {
            None
        };
        let topology_may_admit = |node: &Requirements| prepared.as_ref().is_none_or(|t| t.may_admit(node));
        // Only whether a node admits the pod matters here, so the cheapest checks go first and
        // no rejection is built for a full node.
        if let Some(i) = self.nodes.iter().position(|n| {
            // upstream v1.14: a candidate's pod skips nodes inside their consolidateAfter window.
            !(pod.from_candidate && n.under_consolidate_after)
                && resources::fits(&pod.requests, &n.available)
                && topology_may_admit(&n.requirements)
                && n.can_add(pod, &requirements, &tolerations).is_ok()
                && self.node_topology(n, p, prefs, &requirements).is_ok()
        }) {
            let node = &mut self.nodes[i];
            node.available = resources::subtract(&node.available, &pod.requests);
            node.host_ports.extend(pod.host_ports.iter().cloned());
            node.volumes.add(&pod.volumes);
            node.placed.push(p);
            self.topology.record(p, &node.requirements, &node.taints);
            return Ok(());
        }
        // upstream: `sort.Slice(newNodeClaims, by pod count)` before every attempt on them. Go's
        // sort leaves a sorted slice as it is, so only an unsorted order needs the full algorithm.
        let counts = &self.claim_pod_counts;
        if !self.claim_order.is_sorted_by_key(|&c| counts[c]) {
            super::go_sort::sort_slice(&mut self.claim_order, |&a, &b| counts[a] < counts[b]);
        }
        let limits = self.topology.hostname_limits(p, pod, prefs);
        let every_claim_full = limits.iter().any(|(g, limit)| {
            *limit == 0 && self.claims_hosting.iter().any(|(h, n)| h == g && *n == self.claims.len())
        });
        let candidates = if every_claim_full { None } else { Some(self.claim_order.iter()) };
        let found = candidates.into_iter().flatten().find_map(|&c| {
            let claim = &self.claims[c];
            let full = limits
                .iter()
                .any(|(g, limit)| claim.host_counts.iter().find(|(h, _)| h == g).map_or(0, |(_, n)| *n) > *limit);
            if full {
                return None;
            }
            if !topology_may_admit(&claim.requirements) {
                return None;
            }
            self.claim_can_add(claim, p, prefs, &requirements, &tolerations).ok().map(|a| (c, a))
        });
        if let Some((c, addition)) = found {
            self.commit(c, p, addition);
            return Ok(());
        }
        for t in 0..self.templates.len() {
            let Ok(claim) = self.new_claim(t) else { continue };
            let attempt = self.claim_can_add(&claim, p, prefs, &requirements, &tolerations);
            // upstream: a reserved-offering error keeps every lower-weight NodePool from winning.
            if let Err(ClaimRejection::Reservations(_)) = attempt {
                return Err(Unplaced::Deferred);
            }
            if let Ok(addition) = attempt {
                self.claims.push(claim);
                let c = self.claims.len() - 1;
                self.claim_order.push(c);
                self.claim_pod_counts.push(0);
                self.commit(c, p, addition);
                // upstream: subtract the element-wise max capacity over the options, once, now
                // (only the limited resources matter).
                let (claims, tpl) = (&self.claims, &mut self.templates[t]);
                if !tpl.remaining.is_empty() {
                    for (resource, remaining) in tpl.remaining.iter_mut() {
                        let max = claims[c]
                            .options
                            .iter()
                            .map(|&o| tpl.options[o as usize].capacity.get(resource))
                            .max()
                            .unwrap_or(Quantity::ZERO);
                        *remaining -= max;
                    }
                    *tpl.within_limits.get_mut() = None;
                }
                return Ok(());
            }
        }
        Err(Unplaced::Failed)
    }

    /// Upstream `ExistingNode.CanAdd`: the node checks, then topology (the domains must be ones
    /// the node carries as labels: existing-node compatibility is strict).
    fn node_can_add(
        &self,
        node: &ExistingNode,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
        tolerations: &[k8s_openapi::api::core::v1::Toleration],
    ) -> Result<(), NodeRejection> {
        node.can_add(&self.pods[p], requirements, tolerations)?;
        self.node_topology(node, p, prefs, requirements).map_err(|e| match *e {
            NodeFitFailure::Topology(f) => NodeRejection::Topology(Box::new(self.topology.conflict(&f))),
            NodeFitFailure::Requirements(r) => NodeRejection::Requirements(RequirementConflict::from_reason(&r)),
            NodeFitFailure::Volume(r) => NodeRejection::VolumeTopology(Box::new(self.pods[p].volumes.conflict(&r))),
        })
    }

    /// The volume topology and topology part of [`node_can_add`](Self::node_can_add), without
    /// building the explanation (the placement path only needs yes or no). Upstream
    /// `tryVolumeAlternative`: each volume alternative is checked strictly against the node's and
    /// the pod's requirements, then topology runs with it; the first that passes wins.
    fn node_topology(
        &self,
        node: &ExistingNode,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
    ) -> Result<(), Box<NodeFitFailure>> {
        let mut base: Option<Requirements> = None;
        volumes::try_alternatives(
            &self.pods[p].volumes,
            || self.node_domains(&node.requirements, p, prefs, requirements),
            |alternative| {
                let base = base.get_or_insert_with(|| {
                    let mut b = node.requirements.clone();
                    b.add_all(requirements);
                    b
                });
                base.compatible(alternative, AllowUndefined::Nothing)
                    .map_err(|r| Box::new(NodeFitFailure::Volume(r)))?;
                let mut with_volume = base.clone();
                with_volume.add_all(alternative);
                self.node_domains(&with_volume, p, prefs, requirements)
            },
            |e| matches!(**e, NodeFitFailure::Volume(_)),
        )
    }

    /// Topology on an existing node whose requirements are `node_requirements`.
    fn node_domains(
        &self,
        node_requirements: &Requirements,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
    ) -> Result<(), Box<NodeFitFailure>> {
        if !self.topology.involves(p) {
            return Ok(());
        }
        let pod = &self.pods[p];
        let domains = self
            .topology
            .add_requirements(p, pod, prefs, &pod.strict_requirements(prefs), (node_requirements, requirements))
            .map_err(|f| Box::new(NodeFitFailure::Topology(*f)))?;
        node_requirements
            .compatible(&domains, AllowUndefined::Nothing)
            .map_err(|e| Box::new(NodeFitFailure::Requirements(e)))
    }

    fn commit(&mut self, c: usize, p: usize, addition: Addition) {
        let pod = &self.pods[p];
        let claim = &mut self.claims[c];
        self.claim_pod_counts[c] += 1;
        claim.requirements = addition.requirements;
        claim.options = addition.options;
        claim.min_values_relaxed |= addition.relaxed_min_values;
        self.reservations.commit(&mut claim.reservations, addition.reservations);
        resources::add_into(&mut claim.requests, &pod.requests);
        claim.host_ports.extend(pod.host_ports.iter().cloned());
        claim.pods.push(p);
        let taints = &self.templates[claim.template].taints;
        for g in self.topology.record(p, &claim.requirements, taints) {
            match claim.host_counts.iter_mut().find(|(h, _)| *h == g) {
                Some((_, n)) => *n += 1,
                None => {
                    claim.host_counts.push((g, 1));
                    match self.claims_hosting.iter_mut().find(|(h, _)| *h == g) {
                        Some((_, n)) => *n += 1,
                        None => self.claims_hosting.push((g, 1)),
                    }
                }
            }
        }
    }

    /// A fresh NodeClaim of template `t`, with the limits applied (upstream `addToNewNodeClaim`).
    fn new_claim(&self, t: usize) -> Result<Claim, Box<NodePoolFailure>> {
        let tpl = &self.templates[t];
        if let Some(nodes) = tpl.remaining.get("nodes") {
            if nodes.is_zero() {
                return Err(Box::new(NodePoolFailure::NodeLimitsExhausted {
                    limit: tpl.limits.get("nodes").copied().unwrap_or(Quantity::ZERO),
                }));
            }
        }
        let options: Vec<u32> = tpl
            .within_limits
            .borrow_mut()
            .get_or_insert_with(|| {
                (0..tpl.options.len() as u32)
                    .filter(|&o| within_limits(&tpl.options[o as usize].capacity, &tpl.remaining))
                    .collect()
            })
            .clone();
        if options.is_empty() {
            let all: Vec<u32> = (0..tpl.options.len() as u32).collect();
            return Err(Box::new(exceeds_limits(tpl, &all)));
        }
        Ok(self.fresh_claim(t, options))
    }

    /// A NodeClaim of template `t` with the given options and a new placeholder hostname.
    fn fresh_claim(&self, t: usize, options: Vec<u32>) -> Claim {
        let tpl = &self.templates[t];
        // The hostname stands for the node the NodeClaim will become; it is named as
        // explanations name planned NodeClaims, so topology counts read "default #3=1". A claim
        // that is built but not kept leaves no trace (nothing was recorded on it), so the next one
        // may reuse the name.
        let mut requirements = tpl.base.requirements.clone();
        requirements.add(Requirement::in_values(labels::HOSTNAME, &[planned_name(&tpl.name, self.claims.len())]));
        Claim {
            template: t,
            requirements,
            options,
            pods: Vec::new(),
            requests: ResourceList::new(),
            host_ports: Vec::new(),
            min_values_relaxed: false,
            host_counts: Vec::new(),
            reservations: reservations::Held::new(),
        }
    }

    /// Upstream `NodeClaim.CanAdd`: [`claim_can_add_with`](Self::claim_can_add_with) with each
    /// volume topology alternative in turn (or none), the first that passes wins.
    fn claim_can_add(
        &self,
        claim: &Claim,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
        tolerations: &[k8s_openapi::api::core::v1::Toleration],
    ) -> Result<Addition, ClaimRejection> {
        volumes::try_alternatives(
            &self.pods[p].volumes,
            || self.claim_can_add_with(claim, p, prefs, requirements, tolerations, None),
            |alternative| self.claim_can_add_with(claim, p, prefs, requirements, tolerations, Some(alternative)),
            |e| matches!(e, ClaimRejection::Volume(_)),
        )
    }

    /// Upstream `NodeClaim.CanAdd` with one volume alternative: taints, requirements (well-known
    /// keys may be undefined), the volume alternative, topology, instance-type narrowing,
    /// minValues.
    fn claim_can_add_with(
        &self,
        claim: &Claim,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
        tolerations: &[k8s_openapi::api::core::v1::Toleration],
        volume: Option<&Requirements>,
    ) -> Result<Addition, ClaimRejection> {
        let pod = &self.pods[p];
        let tpl = &self.templates[claim.template];
        if let Some(i) = tpl.taints.iter().position(|t| !tolerations.iter().any(|tol| taints::tolerates(tol, t))) {
            return Err(ClaimRejection::Taint(i));
        }
        claim
            .requirements
            .compatible(requirements, AllowUndefined::WellKnownLabels)
            .map_err(ClaimRejection::Requirements)?;
        // upstream: the volume alternative joins the NodeClaim's requirements only (checked
        // against the NodeClaim's and the pod's), never the pod's, so topology counts and domains
        // keep using the pod's own affinity.
        let with_volume;
        let node_requirements = match volume {
            None => &claim.requirements,
            Some(alternative) => {
                let mut with = claim.requirements.clone();
                with.add_all(requirements);
                with.compatible(alternative, AllowUndefined::WellKnownLabels).map_err(ClaimRejection::Volume)?;
                with.add_all(alternative);
                with_volume = with;
                &with_volume
            }
        };
        // Topology last (it can collapse a key to one domain); evaluated on the node's domains
        // with the pod's requirements added, before the merged set is built.
        if !self.topology.involves(p) {
            return self.narrow(claim, p, node_requirements, requirements, None);
        }
        let strict = pod.strict_requirements(prefs);
        let node = (node_requirements, requirements);
        let (domains, tie) = self
            .topology
            .add_requirements_choosing(p, pod, prefs, &strict, node, None)
            .map_err(ClaimRejection::Topology)?;
        let first = self.narrow(claim, p, node_requirements, requirements, Some(&domains));
        let Some(tie) = tie.filter(|_| first.is_err()) else { return first };
        // A spread tie: upstream drew one of the equally loaded domains at random; when the
        // NodeClaim cannot launch in the first by name, take the next one it can (one of
        // upstream's draws) rather than failing the pod every time (docs/divergences.md).
        for choice in tie.alternatives() {
            let Ok((domains, _)) = self.topology.add_requirements_choosing(p, pod, prefs, &strict, node, Some(&choice))
            else {
                continue;
            };
            if let Ok(addition) = self.narrow(claim, p, node_requirements, requirements, Some(&domains)) {
                return Ok(addition);
            }
        }
        first
    }

    /// The rest of `NodeClaim.CanAdd` once topology chose its domains: instance-type narrowing,
    /// minValues and reservations.
    fn narrow(
        &self,
        claim: &Claim,
        p: usize,
        node_requirements: &Requirements,
        requirements: &Requirements,
        domains: Option<&Requirements>,
    ) -> Result<Addition, ClaimRejection> {
        let pod = &self.pods[p];
        let tpl = &self.templates[claim.template];
        let mut merged = node_requirements.clone();
        merged.add_all(requirements);
        if let Some(domains) = domains {
            merged.compatible(domains, AllowUndefined::WellKnownLabels).map_err(ClaimRejection::Requirements)?;
            merged.add_all(domains);
        }
        // The options already meet the claim's requirements; only the keys the pod (or topology)
        // narrowed need checking again (the result is the same as re-checking every key).
        let changed: Requirements =
            merged.iter().filter(|r| claim.requirements.get_ref(r.key()) != Some(*r)).cloned().collect();
        let mut base = claim.requests.clone();
        resources::add_into(&mut base, &pod.requests);
        let merged_offerings = OfferingCompatibility::new(&merged);
        let mut group_totals: Vec<Option<Option<resources::Packed>>> = vec![None; tpl.groups.len()];
        let mut kept = Vec::with_capacity(claim.options.len());
        for &o in &claim.options {
            let option = &tpl.options[o as usize];
            let total = group_totals[option.group].get_or_insert_with(|| {
                let group = &tpl.groups[option.group];
                if hostports::first_conflict(&pod.host_ports, &group.host_ports).is_some()
                    || hostports::first_conflict(&pod.host_ports, &claim.host_ports).is_some()
                {
                    return None;
                }
                Some(resources::Packed::new(&resources::merge(&base, &group.overhead)))
            });
            let Some(total) = total else { continue };
            if !total.fits(&option.packed) {
                continue;
            }
            if !changed.is_empty() && !type_still_matches(&tpl.instance_types[option.it], &changed, &merged_offerings) {
                continue;
            }
            kept.push(o);
        }
        if kept.is_empty() {
            return Err(ClaimRejection::InstanceTypes { remaining: claim.options.len() });
        }
        let mut relaxed = false;
        if merged.has_min_values() {
            let shortfall = min_values_shortfall(tpl, &kept, &merged);
            if !shortfall.is_empty() {
                // upstream: BestEffort relaxes minValues only when a pod opens a new NodeClaim;
                // adding to a NodeClaim planned earlier in the round always checks it strictly
                // (`CanAdd(…, relaxMinValues=false)` for in-flight NodeClaims). A claim without
                // pods is a fresh one.
                let relax =
                    claim.pods.is_empty() && self.input.options.min_values_policy == MinValuesPolicy::BestEffort;
                match relax {
                    false => return Err(ClaimRejection::MinValues(shortfall)),
                    true => {
                        for k in &shortfall {
                            if let Some(r) = merged.remove(&k.key) {
                                merged.add(r.with_min_values(Some(k.found as i64)));
                            }
                        }
                        relaxed = true;
                    }
                }
            }
        }
        let reservations = self
            .reservations
            .to_reserve(claim.template, &claim.reservations, &kept, &merged)
            .map_err(ClaimRejection::Reservations)?;
        Ok(Addition { requirements: merged, options: kept, relaxed_min_values: relaxed, reservations })
    }

    /// Builds the results: finalises the NodeClaims and explains the pods left.
    fn finish(mut self, failed: Vec<(usize, Preferences, Vec<Relaxation>)>, results: &mut Results) {
        // Explanations first: they name the NodeClaims planned this round that rejected the pod.
        let mut explained: Vec<(usize, PodExplanation)> = Vec::new();
        for (p, prefs, relaxations) in failed {
            if let Some(deferred) = self.deferral(p, &prefs) {
                results.deferred.push(deferred);
                continue;
            }
            let mut explanation = self.explain(p, &prefs);
            explanation.relaxations = relaxations;
            explained.push((p, explanation));
        }
        let mut truncated_out: Vec<(usize, NodePoolVerdict)> = Vec::new();
        let mut reservations_left = self.reservations.launch_capacity();
        for claim in std::mem::take(&mut self.claims) {
            match self.finalize(&claim, &mut reservations_left) {
                Ok(nc) => results.nodeclaims.push(nc),
                Err(verdict) => truncated_out.extend(claim.pods.iter().map(|&p| (p, (*verdict).clone()))),
            }
        }
        for node in &self.nodes {
            if !node.placed.is_empty() {
                results.existing_nodes.push(ExistingPlacement {
                    name: node.name.clone(),
                    pods: node.placed.iter().map(|&p| self.pods[p].pod_ref.clone()).collect(),
                });
            }
        }
        for (p, relaxations) in std::mem::take(&mut self.relaxed) {
            results.relaxed.push(RelaxedPod { pod: self.pods[p].pod_ref.clone(), relaxations });
        }
        for (p, explanation) in explained {
            results.unschedulable.push(Unschedulable { pod: self.pods[p].pod_ref.clone(), explanation });
        }
        for (p, verdict) in truncated_out {
            let mut explanation = PodExplanation::empty();
            explanation.nodepools.push(verdict);
            results.unschedulable.push(Unschedulable { pod: self.pods[p].pod_ref.clone(), explanation });
        }
    }

    /// Upstream `FinalizeScheduling`, `TruncateInstanceTypes` and `ToNodeClaim`, then the launch.
    fn finalize(
        &self,
        claim: &Claim,
        reservations_left: &mut BTreeMap<String, i64>,
    ) -> Result<PlannedNodeClaim, Box<NodePoolVerdict>> {
        let tpl = &self.templates[claim.template];
        let mut requirements = claim.requirements.clone();
        requirements.remove(labels::HOSTNAME);
        self.reservations.finalize_requirements(&claim.reservations, &mut requirements);
        // Daemon overhead: the minimum over the groups that still have an instance type.
        let mut live_groups: Vec<usize> = claim.options.iter().map(|&o| tpl.options[o as usize].group).collect();
        live_groups.sort_unstable();
        live_groups.dedup();
        let overhead = daemons::min_overhead(live_groups.iter().map(|&g| &tpl.groups[g].overhead));
        let requests = resources::merge(&claim.requests, &overhead);
        let compatible = OfferingCompatibility::new(&requirements);
        // Price order (cheapest compatible available offering, then name), then truncation.
        let mut options: Vec<(f64, u32)> = claim
            .options
            .iter()
            .map(|&o| (compatible.cheapest(&tpl.instance_types[tpl.options[o as usize].it]), o))
            .collect();
        options.sort_by(|a, b| {
            a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal).then_with(|| {
                let name = |o: u32| &tpl.instance_types[tpl.options[o as usize].it].name;
                name(a.1).cmp(name(b.1))
            })
        });
        options.truncate(self.input.options.max_instance_types);
        let kept: Vec<u32> = options.iter().map(|(_, o)| *o).collect();
        if requirements.has_min_values() && self.input.options.min_values_policy == MinValuesPolicy::Strict {
            let shortfall = min_values_shortfall(tpl, &kept, &requirements);
            if !shortfall.is_empty() {
                let failure = NodePoolFailure::MinValuesAfterTruncation { keys: shortfall };
                return Err(Box::new(NodePoolVerdict::new(&tpl.name, failure)));
            }
        }
        let types: Vec<&InstanceType> = kept.iter().map(|&o| &tpl.instance_types[tpl.options[o as usize].it]).collect();
        let names: Vec<String> = types.iter().map(|it| it.name.clone()).collect();
        // The requirement lists the same types by name: ordered by the template's name ranks, so
        // no strings are compared.
        let mut by_name = kept.clone();
        by_name.sort_unstable_by_key(|&o| tpl.options[o as usize].name_rank);
        let sorted_names: Vec<String> =
            by_name.iter().map(|&o| tpl.instance_types[tpl.options[o as usize].it].name.clone()).collect();
        let it_min = requirements.get_ref(labels::INSTANCE_TYPE).and_then(Requirement::min_values);
        let mut offered = [false; 3];
        for o in types.iter().flat_map(|it| it.offerings.iter()) {
            let slot = &mut offered[o.capacity_type as usize];
            if !*slot && o.available && compatible.test(&o.requirements) {
                *slot = true;
            }
        }
        let capacity_types: Vec<&str> = [CapacityType::OnDemand, CapacityType::Reserved, CapacityType::Spot]
            .into_iter()
            .filter(|ct| offered[*ct as usize])
            .map(CapacityType::as_str)
            .collect();
        // The instance-type requirement is kept apart until the output: nothing below reads it
        // (offerings and custom labels do not involve the key), and its values move into it.
        let mut final_reqs = requirements.clone();
        final_reqs.remove(labels::INSTANCE_TYPE);
        let ct = final_reqs.remove(labels::CAPACITY_TYPE);
        let mut ct_req = Requirement::in_values(labels::CAPACITY_TYPE, &capacity_types);
        if let Some(min) = ct.as_ref().and_then(Requirement::min_values) {
            ct_req = ct_req.with_min_values(Some(min));
        }
        final_reqs.add(ct_req);
        let mut node_labels = tpl.base.labels.clone();
        node_labels.extend(final_reqs.resolve_custom_labels());
        let launch = cloudprovider::launch(
            &final_reqs,
            &requests,
            kept.iter().map(|&o| {
                let option = &tpl.options[o as usize];
                (&tpl.instance_types[option.it], &option.packed)
            }),
            reservations_left,
        );
        Ok(PlannedNodeClaim {
            nodepool: tpl.name.clone(),
            pods: claim.pods.iter().map(|&p| self.pods[p].pod_ref.clone()).collect(),
            instance_type_options: names,
            requirements: {
                let mut out = final_reqs.to_node_selector_requirements();
                let at = out.partition_point(|r| r.key.as_str() < labels::INSTANCE_TYPE);
                out.insert(
                    at,
                    NodeSelectorRequirementWithMinValues {
                        key: labels::INSTANCE_TYPE.to_string(),
                        operator: crate::requirements::Operator::In,
                        values: sorted_names,
                        min_values: it_min,
                    },
                );
                out
            },
            labels: node_labels,
            taints: tpl.taints.iter().map(TaintRef::of).collect(),
            startup_taints: tpl.startup_taints.iter().map(TaintRef::of).collect(),
            requests,
            launch,
            min_values_relaxed: claim.min_values_relaxed,
        })
    }

    /// The explanation of a pod's last attempt, evaluated against the final state (the last
    /// cycle placed nothing, so the state is the one the attempt saw).
    fn explain(&self, p: usize, prefs: &Preferences) -> PodExplanation {
        let pod = &self.pods[p];
        let requirements = pod.requirements(prefs);
        let tolerations = pod.tolerations(prefs);
        let mut e = PodExplanation::empty();
        e.existing_nodes = explain::group_rejections(
            self.nodes
                .iter()
                .filter_map(|n| {
                    self.node_can_add(n, p, prefs, &requirements, &tolerations).err().map(|r| (n.name.clone(), r))
                })
                .collect(),
        );
        let mut planned = explain::RejectionGroups::default();
        // Most planned NodeClaims reject a topology pod on topology; the pre-check names the
        // group without building sets (only without volume alternatives, which change the node).
        let prepared = if self.topology.involves(p) && pod.volumes.alternatives.is_empty() {
            self.topology.prepare(p, pod, prefs, &pod.strict_requirements(prefs), &requirements)
        } else {
            None
        };
        for (i, claim) in self.claims.iter().enumerate() {
            let name = planned_name(&self.templates[claim.template].name, i);
            if let Some((kind, key)) = prepared.as_ref().and_then(|t| t.failing_group(&claim.requirements)) {
                // The checks claim_can_add makes before topology, in its order.
                let tpl = &self.templates[claim.template];
                let tolerated = tpl.taints.iter().all(|t| tolerations.iter().any(|tol| taints::tolerates(tol, t)));
                if tolerated && claim.requirements.is_compatible(&requirements, AllowUndefined::WellKnownLabels) {
                    // The shortcut must agree with the full check (verified in debug builds: the
                    // test suite and the scenario corpus).
                    debug_assert!(
                        matches!(self.claim_can_add(claim, p, prefs, &requirements, &tolerations),
                            Err(ClaimRejection::Topology(f)) if self.topology.failure_group(&f) == (kind, key)),
                        "topology pre-check disagrees for {} on {name}",
                        pod.pod_ref
                    );
                    if planned.add_topology(&name, kind, key) {
                        continue;
                    }
                }
            }
            let rejection = match self.claim_can_add(claim, p, prefs, &requirements, &tolerations) {
                Ok(_) => continue,
                Err(ClaimRejection::Topology(f)) => {
                    // Building a conflict walks the group's domains (thousands of hosts in large
                    // rounds) and a group keeps only its first: count the rest without one.
                    let (kind, key) = self.topology.failure_group(&f);
                    if planned.add_topology(&name, kind, key) {
                        continue;
                    }
                    NodeRejection::Topology(Box::new(self.topology.conflict(&f)))
                }
                Err(ClaimRejection::Taint(t)) => {
                    NodeRejection::Taint { taint: TaintRef::of(&self.templates[claim.template].taints[t]) }
                }
                Err(ClaimRejection::Requirements(r)) => {
                    NodeRejection::Requirements(RequirementConflict::from_reason(&r))
                }
                Err(ClaimRejection::Volume(r)) => {
                    NodeRejection::VolumeTopology(Box::new(self.pods[p].volumes.conflict(&r)))
                }
                Err(ClaimRejection::InstanceTypes { remaining }) => NodeRejection::InstanceTypes { remaining },
                Err(ClaimRejection::MinValues(keys)) => {
                    NodeRejection::MinValues { keys: keys.into_iter().map(|k| k.key).collect() }
                }
                Err(ClaimRejection::Reservations(c)) => NodeRejection::Reservations(self.describe_reservations(&c)),
            };
            planned.add(name, rejection);
        }
        e.planned_nodeclaims = planned.finish();
        if self.templates.is_empty() {
            e.no_nodepools = true;
        }
        // Per NodePool, the constraints of the pod itself come first (with every instance type, as
        // if no limit applied), then the limits: a limit is only the reason when lifting it would
        // let the pod schedule. (Upstream checks limits first and reports only the last error.)
        for t in 0..self.templates.len() {
            if let Err(failure) = self.nodepool_verdict(t, p, prefs, &requirements, &tolerations) {
                e.nodepools.push(NodePoolVerdict::new(&self.templates[t].name, *failure));
            }
        }
        e
    }

    /// NodePool `t`'s answer for the pod on a fresh NodeClaim: the NodeClaim (within the limits)
    /// that takes it, or the first constraint it fails.
    fn nodepool_verdict(
        &self,
        t: usize,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
        tolerations: &[k8s_openapi::api::core::v1::Toleration],
    ) -> Result<Claim, Box<NodePoolFailure>> {
        let unlimited = self.fresh_claim(t, (0..self.templates[t].options.len() as u32).collect());
        match self.claim_can_add(&unlimited, p, prefs, requirements, tolerations) {
            Err(rejection) => Err(Box::new(self.pool_failure(t, &unlimited, (p, prefs), requirements, rejection))),
            // The pod fits some instance types; if the limits leave none of those, the limit
            // is the reason, measured on the types that fit the pod.
            Ok(fitting) => match self.new_claim(t) {
                Err(limits) => Err(match *limits {
                    NodePoolFailure::ExceedsLimits { .. } => {
                        Box::new(exceeds_limits(&self.templates[t], &fitting.options))
                    }
                    _ => limits,
                }),
                Ok(claim) => match self.claim_can_add(&claim, p, prefs, requirements, tolerations) {
                    Ok(_) => Ok(claim),
                    Err(ClaimRejection::InstanceTypes { .. }) => {
                        Err(Box::new(exceeds_limits(&self.templates[t], &fitting.options)))
                    }
                    Err(rejection) => Err(Box::new(self.pool_failure(t, &claim, (p, prefs), requirements, rejection))),
                },
            },
        }
    }

    /// The pod on its own, before the round places anything: each existing node's answer
    /// (grouped by reason) and each NodePool's, passing ones with their instance-type funnel.
    fn evaluate(&self, p: usize) -> explain::PodEvaluation {
        let prefs = Preferences::default();
        let pod = &self.pods[p];
        let requirements = pod.requirements(&prefs);
        let tolerations = pod.tolerations(&prefs);
        let mut fitting = Vec::new();
        let mut rejections = Vec::new();
        for n in &self.nodes {
            match self.node_can_add(n, p, &prefs, &requirements, &tolerations) {
                Ok(_) => fitting.push(n.name.clone()),
                Err(r) => rejections.push((n.name.clone(), r)),
            }
        }
        let nodepools = (0..self.templates.len())
            .map(|t| {
                let name = self.templates[t].name.clone();
                match self.nodepool_verdict(t, p, &prefs, &requirements, &tolerations) {
                    Ok(claim) => explain::NodePoolCheck {
                        nodepool: name,
                        passes: true,
                        failure: None,
                        fix: None,
                        funnel: Some(self.funnel(&claim, pod, &requirements)),
                    },
                    Err(failure) => {
                        let verdict = NodePoolVerdict::new(&name, *failure);
                        explain::NodePoolCheck {
                            nodepool: name,
                            passes: false,
                            failure: Some(verdict.failure),
                            fix: verdict.fix,
                            funnel: None,
                        }
                    }
                }
            })
            .collect();
        explain::PodEvaluation {
            existing_nodes_fitting: fitting,
            existing_nodes: explain::group_rejections(rejections),
            nodepools,
        }
    }

    fn pool_failure(
        &self,
        t: usize,
        claim: &Claim,
        (p, prefs): (usize, &Preferences),
        requirements: &Requirements,
        rejection: ClaimRejection,
    ) -> NodePoolFailure {
        let pod = &self.pods[p];
        match rejection {
            ClaimRejection::Taint(i) => NodePoolFailure::Taint { taint: TaintRef::of(&self.templates[t].taints[i]) },
            ClaimRejection::Requirements(r) => NodePoolFailure::Requirements(RequirementConflict::from_reason(&r)),
            ClaimRejection::Volume(r) => NodePoolFailure::VolumeTopology(Box::new(pod.volumes.conflict(&r))),
            ClaimRejection::Topology(f) => NodePoolFailure::Topology(Box::new(self.topology.conflict(&f))),
            ClaimRejection::InstanceTypes { .. } => {
                // The domains topology chose narrow the instance types too (a spread may pick a
                // zone none of them is offered in), and so does the volume topology alternative
                // the NodeClaim was evaluated with.
                let mut narrowed = requirements.clone();
                let mut node_requirements = std::borrow::Cow::Borrowed(&claim.requirements);
                let mut volume_domains = Vec::new();
                if !pod.volumes.alternatives.is_empty() {
                    let mut base = claim.requirements.clone();
                    base.add_all(requirements);
                    if let Some(alternative) = pod.volumes.first_compatible(&base, AllowUndefined::WellKnownLabels) {
                        volume_domains = alternative.iter().map(ToString::to_string).collect();
                        narrowed.add_all(alternative);
                        base.add_all(alternative);
                        node_requirements = std::borrow::Cow::Owned(base);
                    }
                }
                let mut topology = Vec::new();
                if self.topology.involves(p) {
                    let node = (node_requirements.as_ref(), requirements);
                    if let Ok(domains) =
                        self.topology.add_requirements(p, pod, prefs, &pod.strict_requirements(prefs), node)
                    {
                        topology = domains.iter().map(ToString::to_string).collect();
                        narrowed.add_all(&domains);
                    }
                }
                let mut f = self.funnel(claim, pod, &narrowed);
                f.topology = topology;
                f.volumes = volume_domains;
                NodePoolFailure::InstanceTypes(Box::new(f))
            }
            ClaimRejection::MinValues(keys) => NodePoolFailure::MinValues { keys },
            ClaimRejection::Reservations(c) => NodePoolFailure::Reservations(self.describe_reservations(&c)),
        }
    }

    fn describe_reservations(&self, conflict: &reservations::Conflict) -> explain::ReservationConflict {
        self.reservations.describe(conflict, self.claims.iter().map(|c| &c.reservations))
    }

    /// The deferral of a pod whose last attempt ended in a reserved-offering error, re-evaluated
    /// against the final state (the state that attempt saw): the first NodePool, in weight order,
    /// that decided the attempt.
    fn deferral(&self, p: usize, prefs: &Preferences) -> Option<Deferred> {
        if self.reservations.is_empty() {
            return None;
        }
        let pod = &self.pods[p];
        let (requirements, tolerations) = (pod.requirements(prefs), pod.tolerations(prefs));
        let mut found = None;
        for t in 0..self.templates.len() {
            let Ok(claim) = self.new_claim(t) else { continue };
            match self.claim_can_add(&claim, p, prefs, &requirements, &tolerations) {
                Err(ClaimRejection::Reservations(c)) => {
                    found = Some(Deferred {
                        pod: pod.pod_ref.clone(),
                        nodepool: self.templates[t].name.clone(),
                        conflict: self.describe_reservations(&c),
                    });
                    break;
                }
                Ok(_) => break,
                Err(_) => {}
            }
        }
        found
    }

    /// The instance-type funnel of a fresh NodeClaim of `claim.template` for the pod.
    fn funnel(&self, claim: &Claim, pod: &PodData, requirements: &Requirements) -> Funnel {
        let tpl = &self.templates[claim.template];
        let mut merged = claim.requirements.clone();
        merged.add_all(requirements);
        let mut overheads: Vec<&ResourceList> =
            claim.options.iter().map(|&o| &tpl.groups[tpl.options[o as usize].group].overhead).collect();
        overheads.dedup();
        let min = daemons::min_overhead(overheads.iter().copied());
        let max = overheads.iter().fold(ResourceList::new(), |m, o| resources::max_of(&m, o));
        let requests = resources::merge(&pod.requests, &min);
        let mut f = Funnel {
            allowed: claim.options.len(),
            requirements: 0,
            resources: 0,
            offerings: 0,
            daemon_overhead_max: (max != min).then(|| resources::merge(&pod.requests, &max)),
            requests,
            requirement_conflict: None,
            shortfall: None,
            host_port: None,
            cheapest: Vec::new(),
            cheapest_lost: Vec::new(),
            topology: Vec::new(),
            volumes: Vec::new(),
            narrowed_by: narrowing_requirements(tpl, &merged),
        };
        let base_offerings = OfferingCompatibility::new(&tpl.base.requirements);
        let merged_offerings = OfferingCompatibility::new(&merged);
        let lose = |f: &mut Funnel, it: &InstanceType, stage: &'static str, detail: Option<String>| {
            if f.cheapest_lost.len() < 3 {
                let price = base_offerings.cheapest(it);
                f.cheapest_lost.push(TypeLoss { instance_type: it.name.clone(), price, stage, detail });
            }
        };
        let mut conflicts: BTreeMap<String, (usize, RequirementConflict)> = BTreeMap::new();
        let mut largest: BTreeMap<String, (Quantity, String)> = BTreeMap::new();
        let mut first_short: Option<(String, Quantity)> = None;
        for &o in &claim.options {
            let option = &tpl.options[o as usize];
            let it = &tpl.instance_types[option.it];
            if let Err(r) = it.requirements.intersects(&merged) {
                let c = RequirementConflict::from_reason(&r);
                lose(&mut f, it, "requirements", Some(c.key.clone()));
                conflicts.entry(c.key.clone()).or_insert((0, c)).0 += 1;
                continue;
            }
            f.requirements += 1;
            let group = &tpl.groups[option.group];
            if let Some((w, _)) = hostports::first_conflict(&pod.host_ports, &group.host_ports) {
                lose(&mut f, it, "hostPort", Some(w.to_string()));
                f.host_port.get_or_insert_with(|| w.to_string());
                continue;
            }
            let total = resources::merge(&pod.requests, &group.overhead);
            let allocatable = it.allocatable();
            for (k, v) in allocatable {
                let slot = largest.entry(k.clone()).or_insert((*v, it.name.clone()));
                if *v > slot.0 {
                    *slot = (*v, it.name.clone());
                }
            }
            if !resources::fits(&total, allocatable) {
                let exceeded = resources::exceeded(&total, allocatable);
                lose(&mut f, it, "resources", Some(exceeded.join(", ")));
                if first_short.is_none() {
                    if let Some(r) = exceeded.first() {
                        first_short = Some((r.to_string(), total[*r]));
                    }
                }
                continue;
            }
            f.resources += 1;
            let price = merged_offerings.cheapest(it);
            if !price.is_finite() {
                lose(&mut f, it, "offerings", None);
            }
            if price.is_finite() {
                f.offerings += 1;
                if f.cheapest.len() < 3 {
                    f.cheapest.push((it.name.clone(), price));
                }
            }
        }
        if f.requirements == 0 {
            f.requirement_conflict = conflicts.into_values().max_by_key(|(n, _)| *n).map(|(_, c)| c);
        }
        if f.resources == 0 && f.requirements > 0 {
            // The resource that does not fit: prefer one no type can hold at all.
            let pick = f
                .requests
                .iter()
                .find(|(k, v)| largest.get(*k).is_none_or(|(l, _)| **v > *l))
                .map(|(k, v)| (k.clone(), *v))
                .or(first_short);
            if let Some((resource, needs)) = pick {
                let (largest_q, largest_type) =
                    largest.get(&resource).cloned().unwrap_or((Quantity::ZERO, String::new()));
                f.shortfall = Some(Shortfall { resource, needs, largest: largest_q, largest_type });
            }
        }
        f
    }
}

/// The requirements (NodePool's and pod's) that narrow the instance types: those on keys the
/// types define, other than `Exists` (at most 4, rendered; `key In [a b c d e and 3 others]`).
fn narrowing_requirements(tpl: &Template, merged: &Requirements) -> Vec<String> {
    let Some(sample) = tpl.options.first().map(|o| &tpl.instance_types[o.it]) else { return Vec::new() };
    merged
        .iter()
        .filter(|r| r.key() != labels::HOSTNAME && r.operator() != Operator::Exists && sample.requirements.has(r.key()))
        .take(4)
        .map(ToString::to_string)
        .collect()
}

/// How explanations name the NodeClaim planned at `index` in this round ("default #3").
fn planned_name(nodepool: &str, index: usize) -> String {
    format!("{nodepool} #{}", index + 1)
}

/// Whether an instance type that met the requirements before `changed` narrowed them still
/// meets them and has a compatible available offering:
/// the type's requirements are checked on the changed keys only, and its offerings only when a
/// changed key is one of theirs (zone, capacity type…).
fn type_still_matches(it: &InstanceType, changed: &Requirements, merged: &OfferingCompatibility<'_>) -> bool {
    if !it.requirements.has_intersection(changed) {
        return false;
    }
    let offering_keys_changed = it.offerings.first().is_some_and(|o| changed.keys().any(|k| o.requirements.has(k)));
    !offering_keys_changed || it.offerings.iter().any(|o| o.available && merged.test(&o.requirements))
}

fn within_limits(capacity: &resources::Packed, remaining: &ResourceList) -> bool {
    remaining.iter().all(|(r, left)| capacity.get(r) <= *left)
}

/// Why the limits leave none of `options` (indices into the template's options): the limited
/// resource that excludes the most of them, with the smallest capacity among them, so the fix
/// names a limit that lets at least one of them launch.
fn exceeds_limits(tpl: &Template, options: &[u32]) -> NodePoolFailure {
    let capacity = |o: u32, resource: &str| tpl.options[o as usize].capacity.get(resource);
    let mut best: Option<(usize, &str)> = None;
    for (resource, left) in &tpl.remaining {
        let excluded = options.iter().filter(|&&o| capacity(o, resource) > *left).count();
        if best.is_none_or(|(n, _)| excluded > n) {
            best = Some((excluded, resource));
        }
    }
    let resource = best.map_or("cpu", |(_, r)| r).to_string();
    let (smallest, smallest_type) = options
        .iter()
        .map(|&o| (capacity(o, &resource), tpl.instance_types[tpl.options[o as usize].it].name.as_str()))
        .min()
        .map_or((Quantity::ZERO, String::new()), |(q, name)| (q, name.to_string()));
    NodePoolFailure::ExceedsLimits {
        limit: tpl.limits.get(&resource).copied().unwrap_or(Quantity::ZERO),
        remaining: tpl.remaining.get(&resource).copied().unwrap_or(Quantity::ZERO),
        resource,
        smallest,
        smallest_type,
    }
}

/// Upstream `SatisfiesMinValues` over the given options (in order).
fn min_values_shortfall(tpl: &Template, options: &[u32], requirements: &Requirements) -> Vec<MinValuesKey> {
    let types = options.iter().map(|&o| &tpl.instance_types[tpl.options[o as usize].it]);
    match super::nodeclaim_template::satisfies_min_values_of(types, requirements) {
        Ok(()) => Vec::new(),
        Err(s) => {
            s.keys.into_iter().map(|(key, (min_values, found))| MinValuesKey { key, min_values, found }).collect()
        }
    }
}
