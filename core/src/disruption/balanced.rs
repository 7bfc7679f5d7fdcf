//! The `Balanced` consolidation policy (upstream v1.14 `disruption/balanced.go`,
//! `designs/balanced-consolidation.md`): a consolidation of a Balanced NodePool's
//! nodes goes ahead only when what it saves is worth what it disrupts, both as fractions of the
//! NodePool:
//!
//! score = (savings / the NodePool's cost) ÷ (the move's disruption cost / the NodePool's
//! disruption cost), approved when score ≥ 1/k with k = 2.
//!
//! Disruption costs are upstream's: 1 per node plus each pod's eviction cost (clamped at 0) — for
//! a candidate its reschedulable pods', for any other node every bound pod's. NodePools whose
//! policy is not Balanced are not scored.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{candidates, Candidate, View};
use crate::api::nodepool::ConsolidationPolicy;

/// upstream `v1.BalancedK`.
pub const K: f64 = 2.0;

/// What a NodePool costs and what disrupting all of it would cost (upstream `NodePoolTotals`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// USD per hour of the NodePool's nodes (upstream's cluster cost; the candidates' when unknown).
    pub total_cost: f64,
    pub total_disruption_cost: f64,
}

/// A move's score for one NodePool (upstream `ScoreResult`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    pub savings_fraction: f64,
    pub disruption_fraction: f64,
}

impl Score {
    /// savings ÷ disruption; 0 without savings, infinite without disruption.
    pub fn value(&self) -> f64 {
        if self.savings_fraction <= 0.0 {
            0.0
        } else if self.disruption_fraction == 0.0 {
            f64::INFINITY
        } else {
            self.savings_fraction / self.disruption_fraction
        }
    }

    pub fn approved(&self) -> bool {
        self.value() >= 1.0 / K
    }
}

impl std::fmt::Display for Score {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "score {:.2} {} threshold {:.2} (saves {:.1}% of the NodePool's cost, disrupts {:.1}% of its disruption cost)",
            self.value(),
            if self.approved() { "meets" } else { "is below" },
            1.0 / K,
            self.savings_fraction * 100.0,
            self.disruption_fraction * 100.0
        )
    }
}

/// upstream `computeNodePoolTotals`: for every NodePool with a candidate, its cost and the
/// disruption cost of all its nodes.
pub fn totals(view: &View<'_>, all_candidates: &[Candidate]) -> BTreeMap<String, Totals> {
    let by_node: BTreeMap<usize, &Candidate> = all_candidates.iter().map(|c| (c.index, c)).collect();
    let mut out: BTreeMap<String, Totals> = BTreeMap::new();
    let mut fallback: BTreeMap<&str, f64> = BTreeMap::new();
    for c in all_candidates {
        *fallback.entry(c.nodepool.name()).or_default() += c.facts(view).price;
    }
    for (pool, candidates_cost) in fallback {
        let of_pool = || view.nodes.iter().enumerate().filter(move |(_, n)| n.nodepool == pool);
        let cluster_cost: f64 = of_pool().map(|(_, n)| n.price).sum();
        let disruption: f64 = of_pool()
            .map(|(i, n)| match by_node.get(&i) {
                Some(c) => c.disruption_cost,
                None => {
                    1.0 + view
                        .pods_on(&n.node)
                        .filter(|p| crate::pod::is_active(p))
                        .map(|p| candidates::eviction_cost(p).max(0.0))
                        .sum::<f64>()
                }
            })
            .sum();
        let total_cost = if cluster_cost > 0.0 { cluster_cost } else { candidates_cost };
        out.insert(pool.to_string(), Totals { total_cost, total_disruption_cost: disruption });
    }
    out
}

/// upstream `ScoreMove`: a NodePool without cost or disruption cost scores 0.
pub fn score_move(savings: f64, disruption_cost: f64, totals: &Totals) -> Score {
    if totals.total_cost <= 0.0 || totals.total_disruption_cost <= 0.0 {
        return Score { savings_fraction: 0.0, disruption_fraction: 0.0 };
    }
    Score {
        savings_fraction: savings / totals.total_cost,
        disruption_fraction: disruption_cost / totals.total_disruption_cost,
    }
}

fn balanced(c: &Candidate) -> bool {
    c.nodepool.spec.disruption.consolidation_policy == ConsolidationPolicy::Balanced
}

/// upstream `CanPassThreshold`: deleting the node is the best a move could do; a candidate of a
/// Balanced NodePool whose delete would not pass is not simulated.
pub fn can_pass_threshold(view: &View<'_>, c: &Candidate, totals: &BTreeMap<String, Totals>) -> Result<(), Score> {
    if !balanced(c) {
        return Ok(());
    }
    let Some(t) = totals.get(c.nodepool.name()).filter(|t| t.total_cost > 0.0) else { return Ok(()) };
    let score = score_move(c.facts(view).price, c.disruption_cost, t);
    if score.approved() {
        Ok(())
    } else {
        Err(score)
    }
}

/// upstream `EvaluateBalancedMove`: every Balanced NodePool among the move's candidates must
/// approve its share (savings pro-rated by the candidates' prices when the move spans NodePools).
/// `Err` names the first NodePool that does not, with its score.
pub fn evaluate(
    view: &View<'_>,
    candidates: &[&Candidate],
    savings: f64,
    totals: &BTreeMap<String, Totals>,
) -> Result<(), (String, Score)> {
    let mut by_pool: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
    for c in candidates {
        by_pool.entry(c.nodepool.name()).or_default().push(c);
    }
    let source: f64 = candidates.iter().map(|c| c.facts(view).price).sum();
    let pools = by_pool.len();
    for (pool, list) in by_pool {
        if !balanced(list[0]) {
            continue;
        }
        let pool_cost: f64 = list.iter().map(|c| c.facts(view).price).sum();
        let pool_savings = if source > 0.0 && pools > 1 { savings * (pool_cost / source) } else { savings };
        let disruption: f64 = list.iter().map(|c| c.disruption_cost).sum();
        let t = totals.get(pool).copied().unwrap_or(Totals { total_cost: 0.0, total_disruption_cost: 0.0 });
        let score = score_move(pool_savings, disruption, &t);
        if !score.approved() {
            return Err((pool.to_string(), score));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_follow_upstream() {
        let t = Totals { total_cost: 1.0, total_disruption_cost: 10.0 };
        // Saving 10% of the cost for 10% of the disruption: score 1.
        let s = score_move(0.1, 1.0, &t);
        assert!((s.value() - 1.0).abs() < 1e-9 && s.approved());
        // 5% for 10%: 0.5, exactly the threshold (approved).
        assert!(score_move(0.05, 1.0, &t).approved());
        // 4% for 10%: 0.4, rejected.
        let low = score_move(0.04, 1.0, &t);
        assert!(!low.approved());
        assert!(low.to_string().contains("score 0.40 is below threshold 0.50"), "{low}");
        // No savings: 0; no disruption: infinite; no NodePool cost: 0.
        assert_eq!(score_move(0.0, 1.0, &t).value(), 0.0);
        assert!(score_move(0.1, 0.0, &t).value().is_infinite());
        assert!(!score_move(0.1, 1.0, &Totals { total_cost: 0.0, total_disruption_cost: 1.0 }).approved());
    }
}
