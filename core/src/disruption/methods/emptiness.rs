//! Emptiness (upstream `emptiness.go`): delete empty, consolidatable nodes as the Empty budget
//! allows, all in one command.

use crate::api::nodepool::BudgetReason;

use super::super::consolidation::{allowances, consolidatable, is_empty, sorted, Declines};
use super::super::{Candidate, Command, Method, View};

pub(super) fn run(view: &View<'_>, candidates: &[Candidate]) -> Result<Command, Declines> {
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
        let allowed = budget.entry(c.nodepool.name().to_string()).or_default();
        if allowed.left <= 0 {
            declines.push((c.facts(view).node.clone(), allowed.exhausted(c.nodepool.name(), BudgetReason::Empty)));
            continue;
        }
        allowed.left -= 1;
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
