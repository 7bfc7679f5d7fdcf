//! upstream `disruption/validation.go`: whether a [`Command`] still holds
//! [`VALIDATION_SECONDS`] after a pass chose it, and why it was dropped when it does not
//! ([`Rejection`]). Emptiness keeps the planned nodes that are still empty (`EmptinessValidator`);
//! consolidation must be chosen again, which is stricter than upstream's `ConsolidationValidator`
//! (see docs/divergences.md). Re-exported by `orchestration`.

use serde::Serialize;

use super::candidates::candidate;
use super::consolidation::{allowances, consolidatable, is_empty};
use super::{Blocker, Command, Method, Pass, View};
use crate::api::nodepool::BudgetReason;

/// upstream `commandValidationDelay`.
pub const VALIDATION_SECONDS: i64 = 15;

/// Why a command was dropped at validation (upstream `ConsolidationRejected`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "rejection", rename_all_fields = "camelCase")]
pub enum Rejection {
    /// Candidates that are blocked now, with what blocks them.
    NoLongerCandidates { nodes: Vec<(String, Vec<Blocker>)> },
    /// Another method acts first now (churn).
    OtherMethod { method: Method },
    /// The same method would choose other nodes now (churn).
    OtherNodes,
    /// Nothing would be done now.
    Nothing,
    /// The budget allows none of the nodes now (upstream: "would violate disruption budgets").
    BudgetExhausted,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::NoLongerCandidates { nodes } => {
                let parts: Vec<String> = nodes
                    .iter()
                    .map(|(node, blockers)| {
                        let texts: Vec<String> = blockers.iter().map(ToString::to_string).collect();
                        format!("{node} is no longer a candidate: {}", texts.join("; "))
                    })
                    .collect();
                f.write_str(&parts.join("; "))
            }
            Rejection::OtherMethod { method } => write!(f, "churn: {method:?} now acts first"),
            Rejection::OtherNodes => f.write_str("churn: a different set of nodes would be chosen now"),
            Rejection::Nothing => {
                f.write_str("the nodes are no longer candidates, or their pods would not move the same way")
            }
            Rejection::BudgetExhausted => f.write_str("the disruption budget allows none of the nodes now"),
        }
    }
}

/// upstream `validation.go`, run [`VALIDATION_SECONDS`] after a pass chose `planned`. Emptiness
/// goes on with the planned nodes that are still empty and within the budget (upstream's
/// `EmptinessValidator`). Consolidation must be chosen again: a pass on the view must choose the
/// same method and the same nodes; the command carried out is that pass's (its replacements are
/// computed on the newer view). The most concrete reason comes first: a candidate that is blocked
/// now says by what.
pub fn validate(planned: &Command, view: &View<'_>) -> Result<Command, Rejection> {
    if planned.method == Method::Emptiness {
        return still_empty(view, planned);
    }
    chosen_again(planned, super::decide(view))
}

/// Whether `now` chose `planned` again.
pub(super) fn chosen_again(planned: &Command, now: Pass) -> Result<Command, Rejection> {
    match now.command {
        Some(again) if again.method == planned.method && again.candidates == planned.candidates => Ok(again),
        other => {
            let blocked: Vec<(String, Vec<Blocker>)> =
                now.blocked.into_iter().filter(|(node, _)| planned.candidates.contains(node)).collect();
            Err(match other {
                _ if !blocked.is_empty() => Rejection::NoLongerCandidates { nodes: blocked },
                Some(c) if c.method != planned.method => Rejection::OtherMethod { method: c.method },
                Some(_) => Rejection::OtherNodes,
                None => Rejection::Nothing,
            })
        }
    }
}

/// upstream `validation.go` `EmptinessValidator`: after the delay, the planned nodes that are
/// still candidates, still empty and consolidatable are kept, in the view's node order (upstream's is
/// a map's), as far as the Empty budget allows; the command goes on with those (a node that became empty meanwhile is left
/// to the next pass). It is rejected only when none is left.
fn still_empty(view: &View<'_>, planned: &Command) -> Result<Command, Rejection> {
    let mut blocked = Vec::new();
    let mut still = Vec::new();
    for i in 0..view.nodes.len() {
        let node = &view.nodes[i].node;
        if !planned.candidates.contains(node) {
            continue;
        }
        match candidate(view, i, false) {
            Ok(c) if c.nodepool.spec.replicas.is_none() && is_empty(&c) && consolidatable(view, &c).is_ok() => {
                still.push(c)
            }
            Ok(_) => {}
            Err(blockers) => blocked.push((node.clone(), blockers)),
        }
    }
    if still.is_empty() {
        return Err(if blocked.is_empty() {
            Rejection::Nothing
        } else {
            Rejection::NoLongerCandidates { nodes: blocked }
        });
    }
    let mut budget = allowances(view, BudgetReason::Empty);
    let mut kept = Vec::new();
    for c in &still {
        let allowed = budget.entry(c.nodepool.name().to_string()).or_default();
        if allowed.left > 0 {
            allowed.left -= 1;
            kept.push(c);
        }
    }
    if kept.is_empty() {
        return Err(Rejection::BudgetExhausted);
    }
    Ok(Command {
        candidates: kept.iter().map(|c| c.facts(view).node.clone()).collect(),
        savings_per_hour: kept.iter().map(|c| c.facts(view).price).sum(),
        ..planned.clone()
    })
}
