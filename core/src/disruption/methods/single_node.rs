//! Single-node consolidation (upstream `singlenodeconsolidation.go`): each candidate in turn,
//! NodePools interleaved, deleted or replaced by one cheaper NodeClaim; the first that can be wins.

use std::collections::BTreeMap;

use crate::api::nodepool::BudgetReason;
use crate::catalogue::OfferingCompatibility;
use crate::requirements::Requirements;

use super::super::balanced;
use super::super::consolidation::{allowances, compute, consolidation_candidates, Declines};
use super::super::decline::Decline;
use super::super::{Candidate, Command, Method, View};

pub(super) fn run(view: &View<'_>, candidates: &[Candidate]) -> Result<Command, Declines> {
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
        let allowed = budget.get(c.nodepool.name()).cloned().unwrap_or_default();
        if allowed.left <= 0 {
            declines.push((node, allowed.exhausted(c.nodepool.name(), BudgetReason::Underutilized)));
            continue;
        }
        // upstream `CanPassThreshold`: not even deleting it would pass its Balanced NodePool.
        if let Err(score) = balanced::can_pass_threshold(view, c, &totals) {
            declines.push((node, Decline::BalancedEvenDeleting { nodepool: c.nodepool.name().to_string(), score }));
            continue;
        }
        if room.get_or_insert_with(|| Room::of(view)).hopeless(view, c) {
            declines.push((node, Decline::NoRoom));
            continue;
        }
        match compute(view, &[c], Method::SingleNodeConsolidation, false) {
            Ok(cmd) => match balanced::evaluate(view, &[c], cmd.savings_per_hour, &totals) {
                Ok(()) => return Ok(cmd),
                Err((nodepool, score)) => declines.push((node, Decline::BalancedRejects { nodepool, score })),
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
