//! Drift (upstream `pkg/controllers/disruption/drift.go`): replace drifted nodes one at a time,
//! oldest drift first and empty ones before the others, as the Drifted budget allows.

use crate::api::nodepool::BudgetReason;

use super::super::consolidation::{allowances, onto_uninitialized, simulate, unscheduled, Declines};
use super::super::decline::Decline;
use super::super::{Candidate, Command, Method, View};

pub(super) fn run(view: &View<'_>, candidates: &[Candidate]) -> Result<Command, Declines> {
    let mut drifted: Vec<&Candidate> =
        candidates.iter().filter(|c| c.facts(view).drifted.is_some() && c.nodepool.spec.replicas.is_none()).collect();
    drifted
        .sort_by_key(|c| (!c.reschedulable.is_empty(), c.facts(view).drifted.map(|d| d.1), c.facts(view).node.clone()));
    let mut budget = allowances(view, BudgetReason::Drifted);
    let mut declines = Vec::new();
    for c in drifted {
        let node = c.facts(view).node.clone();
        let allowed = budget.entry(c.nodepool.name().to_string()).or_default();
        if allowed.left <= 0 {
            declines.push((node, allowed.exhausted(c.nodepool.name(), BudgetReason::Drifted)));
            continue;
        }
        let (why_drifted, _) = c.facts(view).drifted.expect("filtered");
        let results = match simulate(view, &[c]) {
            Ok((results, _)) => results,
            Err(e) => {
                declines.push((node, Decline::Simulation(e)));
                continue;
            }
        };
        if let Some(why) = unscheduled(&results, &[c], Vec::new).or_else(|| onto_uninitialized(view, &results, &[c])) {
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
    Err(declines)
}
