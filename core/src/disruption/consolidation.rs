//! Emptiness, drift and consolidation (upstream `emptiness.go`, `drift.go`, `consolidation.go`,
//! `multinodeconsolidation.go`, `singlenodeconsolidation.go`).
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

use super::{balanced, budgets};
use super::{Candidate, Command, Method, View};

/// upstream `MinInstanceTypesForSpotToSpotConsolidation`.
pub const SPOT_TO_SPOT_MIN_TYPES: usize = 15;
/// upstream: multi-node consolidation considers at most this many candidates.
pub const MULTI_NODE_MAX_CANDIDATES: usize = 100;

type Declines = Vec<(String, String)>;

/// Runs one method over its candidates.
pub fn run(view: &View<'_>, method: Method, candidates: &[Candidate]) -> Result<Command, Declines> {
    match method {
        Method::Emptiness => emptiness(view, candidates),
        Method::Drift => drift(view, candidates),
        Method::MultiNodeConsolidation => multi_node(view, candidates),
        Method::SingleNodeConsolidation => single_node(view, candidates),
    }
}

fn consolidate_after(np: &NodePool) -> Option<i64> {
    np.spec.disruption.consolidate_after.as_seconds().map(|s| s as i64)
}

/// upstream `Consolidatable`: initialized and quiet (no pod event) for consolidateAfter.
fn consolidatable(view: &View<'_>, c: &Candidate) -> Result<(), String> {
    let Some(after) = consolidate_after(&c.nodepool) else {
        return Err(format!("NodePool {} has consolidation disabled (consolidateAfter: Never)", c.nodepool.name()));
    };
    let since = c.facts(view).last_pod_event.unwrap_or(i64::MIN / 2);
    if view.now < since + after {
        return Err(format!(
            "consolidateAfter ({}) has not passed since the last pod event: consolidatable at {}",
            crate::api::duration::format_go_duration(after * 1_000_000_000),
            crate::api::time::format_time(since + after)
        ));
    }
    Ok(())
}

fn is_empty(c: &Candidate) -> bool {
    // upstream v1.14: RescheduleDisruptionCost ≤ 1.
    c.disruption_cost <= 1.0
}

/// The allowance per NodePool for a reason, with the binding budget's description.
fn allowances(view: &View<'_>, reason: BudgetReason) -> BTreeMap<String, (i64, Option<String>)> {
    let mut out = BTreeMap::new();
    for np in &view.objects.nodepools {
        let (counted, disrupting) = view.budget_counts(np.name());
        let a = budgets::allowance(np, reason, counted, disrupting, view.now);
        let binding = a.binding.and_then(|i| a.budgets.iter().find(|b| b.index == i)).map(|b| {
            let window = match (&b.schedule, b.window_ends) {
                (Some(s), Some(end)) => {
                    format!(", schedule {s:?} active until {}", crate::api::time::format_time(end))
                }
                _ => String::new(),
            };
            format!(
                "budget #{} (nodes {}{window}) allows {} of {counted} node(s), {disrupting} disrupting",
                b.index,
                b.nodes,
                b.allows.unwrap_or(0)
            )
        });
        out.insert(np.name().to_string(), (a.allowed, binding));
    }
    out
}

fn budget_text(np: &str, binding: Option<String>, reason: BudgetReason) -> String {
    match binding {
        Some(b) => format!("no allowed disruptions for reason {} in NodePool {np}: {b}", reason.as_str()),
        None => format!("no allowed disruptions for reason {} in NodePool {np}", reason.as_str()),
    }
}

/// Candidates sorted as v1.14 does: price / disruption cost, descending (ties: node name).
fn sorted<'c>(view: &View<'_>, cands: impl Iterator<Item = &'c Candidate>) -> Vec<&'c Candidate> {
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

fn emptiness(view: &View<'_>, candidates: &[Candidate]) -> Result<Command, Declines> {
    let mut declines = Vec::new();
    let mut empty = Vec::new();
    for c in candidates {
        if c.nodepool.spec.replicas.is_some() || !is_empty(c) {
            continue;
        }
        match consolidatable(view, c) {
            Ok(()) => empty.push(c),
            Err(why) => declines.push((c.facts(view).node.clone(), why)),
        }
    }
    let mut budget = allowances(view, BudgetReason::Empty);
    let mut chosen = Vec::new();
    for c in sorted(view, empty.into_iter()) {
        let entry = budget.entry(c.nodepool.name().to_string()).or_insert((0, None));
        if entry.0 <= 0 {
            declines.push((
                c.facts(view).node.clone(),
                budget_text(c.nodepool.name(), entry.1.clone(), BudgetReason::Empty),
            ));
            continue;
        }
        entry.0 -= 1;
        chosen.push(c);
    }
    if chosen.is_empty() {
        return Err(declines);
    }
    Ok(Command {
        method: Method::Emptiness,
        reason: BudgetReason::Empty,
        candidates: chosen.iter().map(|c| c.facts(view).node.clone()).collect(),
        replacements: Vec::new(),
        savings_per_hour: chosen.iter().map(|c| c.facts(view).price).sum(),
        why: "empty".into(),
    })
}

fn drift(view: &View<'_>, candidates: &[Candidate]) -> Result<Command, Declines> {
    let mut drifted: Vec<&Candidate> =
        candidates.iter().filter(|c| c.facts(view).drifted.is_some() && c.nodepool.spec.replicas.is_none()).collect();
    // upstream: oldest drift first, empty candidates before the others.
    drifted
        .sort_by_key(|c| (!c.reschedulable.is_empty(), c.facts(view).drifted.map(|d| d.1), c.facts(view).node.clone()));
    let mut budget = allowances(view, BudgetReason::Drifted);
    let mut declines = Vec::new();
    for c in drifted {
        let node = c.facts(view).node.clone();
        let entry = budget.entry(c.nodepool.name().to_string()).or_insert((0, None));
        if entry.0 <= 0 {
            declines.push((node, budget_text(c.nodepool.name(), entry.1.clone(), BudgetReason::Drifted)));
            continue;
        }
        let (why_drifted, _) = c.facts(view).drifted.expect("filtered");
        match simulate(view, &[c]) {
            Ok((results, _)) => {
                if let Some(why) = unscheduled(&results, &[c]).or_else(|| onto_uninitialized(view, &results, &[c])) {
                    declines.push((node, why));
                    continue;
                }
                return Ok(Command {
                    method: Method::Drift,
                    reason: BudgetReason::Drifted,
                    candidates: vec![node],
                    savings_per_hour: c.facts(view).price
                        - results.nodeclaims.iter().filter_map(|n| n.launch.as_ref()).map(|l| l.price).sum::<f64>(),
                    replacements: results.nodeclaims,
                    why: why_drifted.to_string(),
                });
            }
            Err(e) => declines.push((node, e)),
        }
    }
    Err(declines)
}

/// Consolidation's candidate filter (upstream `ShouldDisrupt`).
fn consolidation_candidates<'c>(
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
            declines.push((
                node,
                format!("NodePool {} has consolidation policy WhenEmpty, but the node is not empty", c.nodepool.name()),
            ));
            continue;
        }
        if c.facts(view).instance_type.is_empty() || c.facts(view).capacity_type.is_empty() {
            declines.push((node, "the node has no instance-type or capacity-type label".into()));
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

fn multi_node(view: &View<'_>, candidates: &[Candidate]) -> Result<Command, Declines> {
    let mut declines = Vec::new();
    let eligible = consolidation_candidates(view, candidates, &mut declines);
    let mut budget = allowances(view, BudgetReason::Underutilized);
    let mut within: Vec<&Candidate> = Vec::new();
    for c in eligible {
        let entry = budget.entry(c.nodepool.name().to_string()).or_insert((0, None));
        if entry.0 <= 0 {
            declines.push((
                c.facts(view).node.clone(),
                budget_text(c.nodepool.name(), entry.1.clone(), BudgetReason::Underutilized),
            ));
            continue;
        }
        entry.0 -= 1;
        within.push(c);
    }
    if within.len() < 2 {
        // Multi-node needs two; single-node consolidation reports the rest.
        return Err(Vec::new());
    }
    // upstream: binary search over the prefix length, lo = 1, hi = min(n − 1, 100).
    let (mut lo, mut hi) = (1usize, (within.len() - 1).min(MULTI_NODE_MAX_CANDIDATES));
    let mut best: Option<Command> = None;
    let totals = balanced::totals(view, candidates);
    let mut rejected: Option<(Vec<String>, String)> = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        let prefix = &within[..=mid];
        // A Balanced NodePool may refuse a move that is otherwise valid (upstream: the prefix is
        // then invalid and the search shortens).
        let attempt = compute(view, prefix, Method::MultiNodeConsolidation, true).and_then(|cmd| {
            match balanced::evaluate(view, prefix, cmd.savings_per_hour, &totals) {
                Ok(()) => Ok(cmd),
                Err((pool, score)) => {
                    let why = format!("Balanced NodePool {pool} rejects merging them: {score}");
                    rejected = Some((cmd.candidates.clone(), why.clone()));
                    Err(why)
                }
            }
        });
        match attempt {
            Ok(cmd) => {
                best = Some(cmd);
                lo = mid + 1;
            }
            Err(_) => {
                if mid == 0 {
                    break;
                }
                hi = mid - 1;
            }
        }
    }
    if best.is_none() {
        // upstream reports the smallest rejected window once.
        if let Some((nodes, why)) = rejected {
            declines.extend(nodes.into_iter().map(|n| (n, why.clone())));
        }
    }
    best.ok_or(declines)
}

fn single_node(view: &View<'_>, candidates: &[Candidate]) -> Result<Command, Declines> {
    let mut declines = Vec::new();
    let eligible = consolidation_candidates(view, candidates, &mut declines);
    // upstream: interleave by NodePool (round robin), keeping each NodePool's order.
    let mut by_pool: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
    for c in &eligible {
        by_pool.entry(c.nodepool.name()).or_default().push(c);
    }
    let mut order = Vec::new();
    let mut round = 0;
    while order.len() < eligible.len() {
        for list in by_pool.values() {
            if let Some(c) = list.get(round) {
                order.push(*c);
            }
        }
        round += 1;
    }
    let budget = allowances(view, BudgetReason::Underutilized);
    let totals = balanced::totals(view, candidates);
    let mut room: Option<Room> = None;
    for c in order {
        let node = c.facts(view).node.clone();
        let (allowed, binding) = budget.get(c.nodepool.name()).cloned().unwrap_or((0, None));
        if allowed <= 0 {
            declines.push((node, budget_text(c.nodepool.name(), binding, BudgetReason::Underutilized)));
            continue;
        }
        // upstream `CanPassThreshold`: not even deleting it would pass its Balanced NodePool.
        if let Err(score) = balanced::can_pass_threshold(view, c, &totals) {
            declines.push((node, format!("Balanced NodePool {}: even deleting it: {score}", c.nodepool.name())));
            continue;
        }
        if room.get_or_insert_with(|| Room::of(view)).hopeless(view, c) {
            declines.push((
                node,
                "its pods fit neither in the room left on the other nodes nor on a cheaper instance type".into(),
            ));
            continue;
        }
        match compute(view, &[c], Method::SingleNodeConsolidation, false) {
            Ok(cmd) => match balanced::evaluate(view, &[c], cmd.savings_per_hour, &totals) {
                Ok(()) => return Ok(cmd),
                Err((pool, score)) => declines.push((node, format!("Balanced NodePool {pool} rejects it: {score}"))),
            },
            Err(why) => declines.push((node, why)),
        }
    }
    Err(declines)
}

/// CPU and memory (millicores, bytes).
type CpuMem = (i128, i128);

/// A cheap, sound pre-check before simulating a single candidate: the room left on every other
/// initialized node (ignoring fragmentation, so it over-estimates), and the cheapest price at
/// which each instance type could launch (so it under-estimates). When the candidate's pods do not
/// fit in that room and no instance type cheaper than the node could hold what is left, no
/// simulation could delete or replace it.
struct Room {
    /// Free (cpu, memory) per node name.
    free: BTreeMap<String, CpuMem>,
    /// (allocatable, cheapest available price) of every instance type of every NodePool.
    types: Vec<(CpuMem, f64)>,
    /// Requests per node.
    used: BTreeMap<String, CpuMem>,
    /// The smallest request (cpu, memory) among each node's pods that would move.
    smallest: BTreeMap<String, CpuMem>,
}

fn cpu_mem(list: &crate::resources::ResourceList) -> CpuMem {
    (list.get("cpu").map_or(0, |q| q.milli_value()), list.get("memory").map_or(0, |q| q.value()))
}

impl Room {
    fn of(view: &View<'_>) -> Room {
        let mut used: BTreeMap<String, CpuMem> = BTreeMap::new();
        let mut smallest: BTreeMap<String, CpuMem> = BTreeMap::new();
        for p in &view.objects.pods {
            let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) else { continue };
            if !crate::pod::is_active(p) {
                continue;
            }
            let r = crate::resources::pod_requests(p).map(|r| cpu_mem(&r)).unwrap_or_default();
            let e = used.entry(node.to_string()).or_default();
            e.0 += r.0;
            e.1 += r.1;
            if crate::pod::daemonset_owner(p).is_none() {
                let m = smallest.entry(node.to_string()).or_insert((i128::MAX, i128::MAX));
                *m = (m.0.min(r.0), m.1.min(r.1));
            }
        }
        let mut free = BTreeMap::new();
        for n in &view.objects.nodes {
            let name = n.metadata.name.clone().unwrap_or_default();
            let ready = view.nodes.iter().find(|f| f.node == name).is_none_or(|f| f.initialized && !f.deleting);
            if !ready || n.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let alloc = n
                .status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .and_then(|a| crate::resources::from_k8s(a).ok())
                .map(|a| cpu_mem(&a))
                .unwrap_or_default();
            let u = used.get(&name).copied().unwrap_or_default();
            free.insert(name, ((alloc.0 - u.0).max(0), (alloc.1 - u.1).max(0)));
        }
        let mut types = Vec::new();
        if let Ok(input) = view.input() {
            for np in &input.nodepools {
                let reqs = Requirements::from_node_selector_requirements(&np.nodepool.spec.template.spec.requirements)
                    .unwrap_or_default();
                let offerings = OfferingCompatibility::new(&reqs);
                for it in np.instance_types.iter() {
                    if !it.requirements.is_compatible(&reqs, crate::requirements::AllowUndefined::WellKnownLabels) {
                        continue;
                    }
                    types.push((cpu_mem(it.allocatable()), offerings.cheapest(it)));
                }
            }
        }
        Room { free, types, used, smallest }
    }

    fn hopeless(&self, view: &View<'_>, c: &Candidate) -> bool {
        let facts = c.facts(view);
        let moving = self.used.get(&facts.node).copied().unwrap_or_default();
        // Room a node cannot give even the smallest moving pod is no room at all.
        let min = self.smallest.get(&facts.node).copied().unwrap_or((0, 0));
        let elsewhere = self
            .free
            .iter()
            .filter(|(n, f)| **n != facts.node && f.0 >= min.0 && f.1 >= min.1)
            .fold((0, 0), |a, (_, f)| (a.0 + f.0, a.1 + f.1));
        let need = ((moving.0 - elsewhere.0).max(0), (moving.1 - elsewhere.1).max(0));
        if need == (0, 0) {
            return false;
        }
        !self.types.iter().any(|(alloc, price)| *price < facts.price && alloc.0 >= need.0 && alloc.1 >= need.1)
    }
}

/// The round with `cands` removed, and the instance types of the NodePool of each new NodeClaim.
/// The round's input is built once per pass ([`View::input`]); a simulation only marks the
/// candidates deleting in it, and unmarks them after.
pub(super) fn simulate(view: &View<'_>, cands: &[&Candidate]) -> Result<(Results, Vec<NodePoolInput>), String> {
    let mut input = view.input().map_err(|e| crate::error_chain(&e))?;
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

/// `why`, and the nodes the candidates' pods could not move to because they are inside their
/// consolidateAfter window (the refusal may pass when the window does).
fn noting_guarded_destinations(view: &View<'_>, cands: &[&Candidate], why: String) -> String {
    let names: BTreeSet<&str> = cands.iter().map(|c| c.facts(view).node.as_str()).collect();
    let guarded: Vec<String> = under_consolidate_after(view)
        .into_iter()
        .filter(|(n, _)| !names.contains(n.as_str()))
        .map(|(n, end)| format!("{n} until {}", crate::api::time::format_time(end)))
        .collect();
    if guarded.is_empty() {
        why
    } else {
        format!("{why} (not destinations while inside their consolidateAfter window: {})", guarded.join(", "))
    }
}

/// Why the candidates' pods would not all move (upstream `AllNonPendingPodsScheduled` and the
/// uninitialized-destination check), if they would not.
fn unscheduled(results: &Results, cands: &[&Candidate]) -> Option<String> {
    let moving: BTreeSet<&str> = cands.iter().flat_map(|c| c.reschedulable.iter().map(String::as_str)).collect();
    let failed: Vec<String> = results
        .unschedulable
        .iter()
        .filter(|u| moving.contains(format!("{}/{}", u.pod.namespace, u.pod.name).as_str()))
        .take(5)
        .map(|u| format!("{}/{} => {}", u.pod.namespace, u.pod.name, u.explanation.headline()))
        .collect();
    if !failed.is_empty() {
        return Some(format!("not all pods would schedule, {}", failed.join("; ")));
    }
    None
}

/// Pods of the candidates planned onto a node that is not initialized (upstream
/// `UninitializedNodeError`).
fn onto_uninitialized(view: &View<'_>, results: &Results, cands: &[&Candidate]) -> Option<String> {
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
            return Some(format!("would schedule against uninitialized {}", placement.name));
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
fn compute(view: &View<'_>, cands: &[&Candidate], method: Method, multi: bool) -> Result<Command, String> {
    let (results, pools) = simulate(view, cands)?;
    if let Some(why) = unscheduled(&results, cands) {
        return Err(noting_guarded_destinations(view, cands, why));
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
        n => {
            let why = format!("can't remove without creating {n} candidates");
            return Err(noting_guarded_destinations(view, cands, why));
        }
    }
    let mut planned = results.nodeclaims.into_iter().next().expect("one");
    let Some(np) = pools.iter().find(|n| n.nodepool.name() == planned.nodepool) else {
        return Err(format!("NodePool {} not found", planned.nodepool));
    };
    let by_name: BTreeMap<&str, &InstanceType> = np.instance_types.iter().map(|it| (it.name.as_str(), it)).collect();
    let mut reqs = Requirements::from_node_selector_requirements(&planned.requirements).unwrap_or_default();
    let all_spot = cands.iter().all(|c| c.facts(view).capacity_type == labels::CAPACITY_TYPE_SPOT);
    let allows = |reqs: &Requirements, ct: &str| reqs.get_ref(labels::CAPACITY_TYPE).is_none_or(|r| r.has(ct));
    let spot_to_spot = all_spot && allows(&reqs, labels::CAPACITY_TYPE_SPOT);
    if spot_to_spot {
        if !view.spot_to_spot {
            return Err("SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node".into());
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
        return Err(format!("Filtering by price: {shortfall}"));
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
        return Err(noting_guarded_destinations(view, cands, "can't replace with a cheaper node".into()));
    }
    if spot_to_spot {
        if !multi && options.len() < SPOT_TO_SPOT_MIN_TYPES {
            return Err(format!(
                "SpotToSpotConsolidation requires {SPOT_TO_SPOT_MIN_TYPES} cheaper instance type options than the current candidate to consolidate, got {}",
                options.len()
            ));
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
