//! Multi-node consolidation (upstream `multinodeconsolidation.go`): the longest prefix of the
//! sorted candidates (at most 100) that one cheaper NodeClaim, or none, can replace, found by binary
//! search.

use crate::api::nodepool::BudgetReason;

use super::super::balanced;
use super::super::consolidation::{allowances, compute, consolidation_candidates, Declines, MULTI_NODE_MAX_CANDIDATES};
use super::super::decline::Decline;
use super::super::{Candidate, Command, Method, View};

pub(super) fn run(view: &View<'_>, candidates: &[Candidate]) -> Result<Command, Declines> {
    let mut declines = Vec::new();
    let eligible = consolidation_candidates(view, candidates, &mut declines);
    let mut budget = allowances(view, BudgetReason::Underutilized);
    let mut within: Vec<&Candidate> = Vec::new();
    for c in eligible {
        let allowed = budget.entry(c.nodepool.name().to_string()).or_default();
        if allowed.left <= 0 {
            declines
                .push((c.facts(view).node.clone(), allowed.exhausted(c.nodepool.name(), BudgetReason::Underutilized)));
            continue;
        }
        allowed.left -= 1;
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
    let mut rejected: Option<(Vec<String>, Decline)> = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        let prefix = &within[..=mid];
        // A Balanced NodePool may refuse a move that is otherwise valid (upstream: the prefix is
        // then invalid and the search shortens).
        let attempt = compute(view, prefix, Method::MultiNodeConsolidation, true).and_then(|cmd| {
            match balanced::evaluate(view, prefix, cmd.savings_per_hour, &totals) {
                Ok(()) => Ok(cmd),
                Err((nodepool, score)) => {
                    let why = Decline::BalancedRejectsMerge { nodepool, score };
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
