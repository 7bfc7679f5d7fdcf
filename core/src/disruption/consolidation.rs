//! What the methods share (upstream `consolidation.go`, v1.14.1): consolidatability, budgets per
//! NodePool, the candidate order and filter, the rescheduling simulation and `computeConsolidation`.
//!
//! Rescheduling is simulated by the provisioning scheduler itself: the candidates' nodes are
//! marked deleting, so their reschedulable pods join the round with every pending pod and the
//! candidates are no destination (upstream `SimulateScheduling`).

use std::collections::{BTreeMap, BTreeSet};

use crate::api::nodepool::{BudgetReason, ConsolidationPolicy, NodePool};
use crate::catalogue::{CapacityType, InstanceType, OfferingCompatibility};
use crate::labels;
use crate::requirements::{Requirement, Requirements};
use crate::scheduling::nodeclaim_template::satisfies_min_values_of;
use crate::scheduling::Results;
use crate::state::NodePoolInput;

use super::budgets;
use super::decline::{BindingBudget, Decline, GuardedDestination};
use super::{Candidate, Command, Method, View};

/// upstream `MinInstanceTypesForSpotToSpotConsolidation`.
pub const SPOT_TO_SPOT_MIN_TYPES: usize = 15;
/// upstream: multi-node consolidation considers at most this many candidates.
pub const MULTI_NODE_MAX_CANDIDATES: usize = 100;

/// Node → why a method passed over it.
pub(super) type Declines = Vec<(String, Decline)>;

fn consolidate_after(np: &NodePool) -> Option<i64> {
    np.spec.disruption.consolidate_after.as_seconds().map(|s| s as i64)
}

/// upstream `Consolidatable`: initialized and quiet (no pod event) for consolidateAfter.
pub(super) fn consolidatable(view: &View<'_>, c: &Candidate) -> Result<(), Decline> {
    let Some(after) = consolidate_after(&c.nodepool) else {
        return Err(Decline::ConsolidationDisabled { nodepool: c.nodepool.name().to_string() });
    };
    let since = c.facts(view).last_pod_event.unwrap_or(i64::MIN / 2);
    if view.now < since + after {
        return Err(Decline::ConsolidateAfterPending { consolidate_after: after, at: since + after });
    }
    Ok(())
}

pub(super) fn is_empty(c: &Candidate) -> bool {
    // upstream v1.14: RescheduleDisruptionCost ≤ 1.
    c.disruption_cost <= 1.0
}

/// What a NodePool's budgets still allow for one reason during a pass.
#[derive(Debug, Clone, Default)]
pub(super) struct Allowed {
    /// Nodes that may still be disrupted.
    pub(super) left: i64,
    /// The budget that sets it, if one does.
    pub(super) binding: Option<BindingBudget>,
}

impl Allowed {
    /// Why a node of `nodepool` is passed over once nothing is left.
    pub(super) fn exhausted(&self, nodepool: &str, reason: BudgetReason) -> Decline {
        Decline::NoBudget { nodepool: nodepool.to_string(), reason, binding: self.binding.clone().map(Box::new) }
    }
}

/// The allowance per NodePool for a reason (a NodePool not listed allows nothing).
pub(super) fn allowances(view: &View<'_>, reason: BudgetReason) -> BTreeMap<String, Allowed> {
    let mut out = BTreeMap::new();
    for np in &view.objects.nodepools {
        let (counted, disrupting) = view.budget_counts(np.name());
        let a = budgets::allowance(np, reason, counted, disrupting, view.now);
        let binding = a.binding.and_then(|i| a.budgets.iter().find(|b| b.index == i)).map(|b| BindingBudget {
            budget: b.clone(),
            counted,
            disrupting,
        });
        out.insert(np.name().to_string(), Allowed { left: a.allowed, binding });
    }
    out
}

/// Candidates sorted as v1.14 does: price / disruption cost, descending (ties: node name).
pub(super) fn sorted<'c>(view: &View<'_>, cands: impl Iterator<Item = &'c Candidate>) -> Vec<&'c Candidate> {
    let mut v: Vec<&Candidate> = cands.collect();
    v.sort_by(|a, b| {
        let ka = a.facts(view).price / a.disruption_cost;
        let kb = b.facts(view).price / b.disruption_cost;
        kb.partial_cmp(&ka)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.facts(view).node.cmp(&b.facts(view).node))
    });
    v
}

/// Consolidation's candidate filter (upstream `ShouldDisrupt`).
pub(super) fn consolidation_candidates<'c>(
    view: &View<'_>,
    candidates: &'c [Candidate],
    declines: &mut Declines,
) -> Vec<&'c Candidate> {
    let mut out = Vec::new();
    for c in candidates {
        let node = c.facts(view).node.clone();
        if c.nodepool.spec.replicas.is_some() || is_empty(c) {
            continue;
        }
        if c.nodepool.spec.disruption.consolidation_policy == ConsolidationPolicy::WhenEmpty {
            declines.push((node, Decline::WhenEmptyButNotEmpty { nodepool: c.nodepool.name().to_string() }));
            continue;
        }
        if c.facts(view).instance_type.is_empty() || c.facts(view).capacity_type.is_empty() {
            declines.push((node, Decline::UnlabelledNode));
            continue;
        }
        if let Err(why) = consolidatable(view, c) {
            declines.push((node, why));
            continue;
        }
        out.push(c);
    }
    sorted(view, out.into_iter())
}

/// The round with `cands` removed, and the instance types of the NodePool of each new NodeClaim.
/// The round's input is built once per pass ([`View::input`]); a simulation only marks the
/// candidates deleting in it, and unmarks them after.
pub(super) fn simulate(
    view: &View<'_>,
    cands: &[&Candidate],
) -> Result<(Results, Vec<NodePoolInput>), crate::state::StateError> {
    let mut input = view.input()?;
    let names: BTreeSet<&str> = cands.iter().map(|c| c.facts(view).node.as_str()).collect();
    let claims: BTreeSet<&str> = cands.iter().map(|c| c.facts(view).nodeclaim.as_str()).collect();
    let stamp = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(view.now).unwrap_or_default(),
    );
    let mut marked_nodes = Vec::new();
    for (i, n) in input.nodes.iter_mut().enumerate() {
        if n.metadata.deletion_timestamp.is_none() && n.metadata.name.as_deref().is_some_and(|x| names.contains(x)) {
            n.metadata.deletion_timestamp = Some(stamp.clone());
            marked_nodes.push(i);
        }
    }
    let mut marked_claims = Vec::new();
    for (i, nc) in input.nodeclaims.iter_mut().enumerate() {
        if nc.metadata.deletion_timestamp.is_none() && claims.contains(nc.name()) {
            nc.metadata.deletion_timestamp = Some(stamp.clone());
            marked_claims.push(i);
        }
    }
    input.options.consolidation = Some(crate::state::ConsolidationSimulation {
        candidates: names.iter().map(|n| n.to_string()).collect(),
        under_consolidate_after: under_consolidate_after(view).into_keys().collect(),
    });
    let results = crate::scheduling::schedule(&input);
    input.options.consolidation = None;
    for i in marked_nodes {
        input.nodes[i].metadata.deletion_timestamp = None;
    }
    for i in marked_claims {
        input.nodeclaims[i].metadata.deletion_timestamp = None;
    }
    let pools = input
        .nodepools
        .iter()
        .filter(|np| results.nodeclaims.iter().any(|c| c.nodepool == np.nodepool.name()))
        .cloned()
        .collect();
    Ok((results, pools))
}

/// Nodes still inside their NodePool's consolidateAfter window (upstream
/// `IsUnderConsolidateAfter`: initialized, consolidateAfter set and not 0, and less than that since
/// the last pod event, else since initialization).
/// Each with the end of its window (epoch seconds).
fn under_consolidate_after(view: &View<'_>) -> BTreeMap<String, i64> {
    let after: BTreeMap<&str, u64> = view
        .objects
        .nodepools
        .iter()
        .filter_map(|np| Some((np.name(), np.spec.disruption.consolidate_after.as_seconds()?)))
        .filter(|(_, a)| *a > 0)
        .collect();
    view.nodes
        .iter()
        .filter(|n| n.initialized)
        .filter_map(|n| {
            let end = n.last_pod_event? + *after.get(n.nodepool.as_str())? as i64;
            (view.now < end).then(|| (n.node.clone(), end))
        })
        .collect()
}

/// The nodes the candidates' pods could not move to because they are inside their
/// consolidateAfter window (a refusal may pass when the window does).
fn guarded_destinations(view: &View<'_>, cands: &[&Candidate]) -> Vec<GuardedDestination> {
    let names: BTreeSet<&str> = cands.iter().map(|c| c.facts(view).node.as_str()).collect();
    under_consolidate_after(view)
        .into_iter()
        .filter(|(n, _)| !names.contains(n.as_str()))
        .map(|(node, until)| GuardedDestination { node, until })
        .collect()
}

/// Why the candidates' pods would not all move (upstream `AllNonPendingPodsScheduled` and the
/// uninitialized-destination check), if they would not.
/// `guarded`: the destinations to note (the drift method notes none).
pub(super) fn unscheduled(
    results: &Results,
    cands: &[&Candidate],
    guarded: impl FnOnce() -> Vec<GuardedDestination>,
) -> Option<Decline> {
    let moving: BTreeSet<&str> = cands.iter().flat_map(|c| c.reschedulable.iter().map(String::as_str)).collect();
    let pods: Vec<(String, String)> = results
        .unschedulable
        .iter()
        .map(|u| (format!("{}/{}", u.pod.namespace, u.pod.name), u))
        .filter(|(key, _)| moving.contains(key.as_str()))
        .take(5)
        .map(|(key, u)| (key, u.explanation.headline()))
        .collect();
    (!pods.is_empty()).then(|| Decline::PodsWouldNotSchedule { pods, guarded: guarded() })
}

/// Pods of the candidates planned onto a node that is not initialized (upstream
/// `UninitializedNodeError`).
pub(super) fn onto_uninitialized(view: &View<'_>, results: &Results, cands: &[&Candidate]) -> Option<Decline> {
    let moving: BTreeSet<&str> = cands.iter().flat_map(|c| c.reschedulable.iter().map(String::as_str)).collect();
    for placement in &results.existing_nodes {
        let initialized = view
            .nodes
            .iter()
            .find(|n| n.node == placement.name || n.nodeclaim == placement.name)
            .is_none_or(|n| n.initialized);
        if initialized {
            continue;
        }
        if placement.pods.iter().any(|p| moving.contains(format!("{}/{}", p.namespace, p.name).as_str())) {
            return Some(Decline::OntoUninitialized { destination: placement.name.clone() });
        }
    }
    None
}

/// The worst price a launch of `it` under `reqs` may pay (upstream `worstLaunchPrice`): the
/// highest compatible available price of the capacity type it would launch as (reserved, then
/// spot, then on-demand).
fn worst_launch_price(it: &InstanceType, compat: &OfferingCompatibility<'_>) -> Option<f64> {
    for ct in [CapacityType::Reserved, CapacityType::Spot, CapacityType::OnDemand] {
        let prices: Vec<f64> = it
            .offerings
            .iter()
            .filter(|o| o.available && o.capacity_type == ct && compat.test(&o.requirements))
            .map(|o| o.price)
            .collect();
        if !prices.is_empty() {
            return prices.into_iter().reduce(f64::max);
        }
    }
    None
}

/// upstream `computeConsolidation`: delete, replace with one cheaper NodeClaim, or why not.
pub(super) fn compute(view: &View<'_>, cands: &[&Candidate], method: Method, multi: bool) -> Result<Command, Decline> {
    let (results, pools) = simulate(view, cands).map_err(Decline::Simulation)?;
    if let Some(why) = unscheduled(&results, cands, || guarded_destinations(view, cands)) {
        return Err(why);
    }
    if let Some(why) = onto_uninitialized(view, &results, cands) {
        return Err(why);
    }
    let nodes: Vec<String> = cands.iter().map(|c| c.facts(view).node.clone()).collect();
    let candidate_price: f64 = cands.iter().map(|c| c.facts(view).price).sum();
    match results.nodeclaims.len() {
        0 => {
            return Ok(Command {
                method,
                reason: BudgetReason::Underutilized,
                candidates: nodes,
                replacements: Vec::new(),
                savings_per_hour: candidate_price,
                why: "its pods fit on the other nodes".into(),
            })
        }
        1 => {}
        count => {
            return Err(Decline::MoreThanOneReplacement { count, guarded: guarded_destinations(view, cands) });
        }
    }
    let mut planned = results.nodeclaims.into_iter().next().expect("one");
    let Some(np) = pools.iter().find(|n| n.nodepool.name() == planned.nodepool) else {
        return Err(Decline::NodePoolNotFound { nodepool: planned.nodepool.clone() });
    };
    let by_name: BTreeMap<&str, &InstanceType> = np.instance_types.iter().map(|it| (it.name.as_str(), it)).collect();
    let mut reqs = Requirements::from_node_selector_requirements(&planned.requirements).unwrap_or_default();
    let all_spot = cands.iter().all(|c| c.facts(view).capacity_type == labels::CAPACITY_TYPE_SPOT);
    let allows = |reqs: &Requirements, ct: &str| reqs.get_ref(labels::CAPACITY_TYPE).is_none_or(|r| r.has(ct));
    let spot_to_spot = all_spot && allows(&reqs, labels::CAPACITY_TYPE_SPOT);
    if spot_to_spot {
        if !view.spot_to_spot {
            return Err(Decline::SpotToSpotDisabled);
        }
        reqs.add(Requirement::in_values(labels::CAPACITY_TYPE, &[labels::CAPACITY_TYPE_SPOT]));
    }
    let compat = OfferingCompatibility::new(&reqs);
    let mut options: Vec<(String, f64)> = planned
        .instance_type_options
        .iter()
        .filter_map(|n| by_name.get(n.as_str()).and_then(|it| worst_launch_price(it, &compat).map(|p| (n.clone(), p))))
        .filter(|(_, p)| *p < candidate_price)
        .collect();
    // upstream `RemoveInstanceTypeOptionsByPriceAndMinValues`: the cheaper options must still meet
    // the NodePool's minValues.
    let types_of = |options: &[(String, f64)]| -> Vec<&InstanceType> {
        options.iter().filter_map(|(n, _)| by_name.get(n.as_str()).copied()).collect()
    };
    if let Err(shortfall) = satisfies_min_values_of(types_of(&options).into_iter(), &reqs) {
        return Err(Decline::MinValuesAfterPriceFilter(shortfall));
    }
    if multi {
        // upstream `filterOutSameInstanceType`: replacing with a candidate's own type only pays if
        // cheaper than the cheapest such candidate.
        let own: Vec<f64> = cands
            .iter()
            .filter(|c| options.iter().any(|(n, _)| *n == c.facts(view).instance_type))
            .map(|c| c.facts(view).price)
            .collect();
        if let Some(limit) = own.into_iter().reduce(f64::min) {
            options.retain(|(_, p)| *p < limit);
        }
    }
    if options.is_empty() {
        return Err(Decline::NoCheaperReplacement { guarded: guarded_destinations(view, cands) });
    }
    if spot_to_spot {
        if !multi && options.len() < SPOT_TO_SPOT_MIN_TYPES {
            return Err(Decline::TooFewSpotOptions { required: SPOT_TO_SPOT_MIN_TYPES, got: options.len() });
        }
        // upstream: a multi-node spot-to-spot replacement keeps every cheaper option; a single
        // node's keeps the 15 cheapest (or as many as minValues needs, if more), so the launch
        // cannot pick a type that would be consolidated again at once.
        if !multi {
            let types = types_of(&options);
            let needed = (1..=types.len())
                .find(|&k| satisfies_min_values_of(types[..k].iter().copied(), &reqs).is_ok())
                .unwrap_or(types.len());
            options.truncate(SPOT_TO_SPOT_MIN_TYPES.max(needed));
        }
    } else if allows(&reqs, labels::CAPACITY_TYPE_SPOT) && allows(&reqs, labels::CAPACITY_TYPE_ON_DEMAND) {
        // upstream: the price was the spot offering's, so the replacement launches as spot.
        reqs.add(Requirement::in_values(labels::CAPACITY_TYPE, &[labels::CAPACITY_TYPE_SPOT]));
    }
    let cheapest = options
        .iter()
        .filter_map(|(n, _)| by_name.get(n.as_str()))
        .map(|it| OfferingCompatibility::new(&reqs).cheapest(it))
        .fold(f64::INFINITY, f64::min);
    let kept: BTreeSet<&str> = options.iter().map(|(n, _)| n.as_str()).collect();
    planned.instance_type_options.retain(|n| kept.contains(n.as_str()));
    reqs.add(Requirement::in_values(labels::INSTANCE_TYPE, &planned.instance_type_options));
    planned.requirements = reqs.to_node_selector_requirements();
    // The launch is decided again over the narrowed options.
    planned.launch = None;
    Ok(Command {
        method,
        reason: BudgetReason::Underutilized,
        candidates: nodes,
        savings_per_hour: candidate_price - cheapest,
        why: match planned.instance_type_options.len() {
            1 => format!("replace with one cheaper node ({})", planned.instance_type_options[0]),
            n => format!("replace with one cheaper node ({n} options from {})", planned.instance_type_options[0]),
        },
        replacements: vec![planned],
    })
}
