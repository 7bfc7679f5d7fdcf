//! What happens to a [`Command`](super::Command) after a pass chose it (upstream `disruption/orchestration/queue.go`;
//! the 15 s validation is `validation`, re-exported here), as decisions: whether it survives the
//! validation, whether a command waiting for its replacements goes on, and which verdicts of a pass
//! are news.
//! The simulation and the controller both keep the commands; these functions say what to do next.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{Blocker, Method, Pass};
use crate::manifest::Manifests;

pub use super::validation::{validate, Rejection, VALIDATION_SECONDS};

/// upstream `disruption/controller.go`: the loop polls every 10 s when it has nothing to do.
pub const POLL_SECONDS: i64 = 10;

/// How long a NodeClaim a command created, or a deletion it asked for, may take to show in the
/// objects a controller reads before it counts as lost (carpentry's: upstream's in-memory cluster
/// state sees its own writes at once, a controller reading the API server's watches does not).
pub const AWAIT_OWN_WRITE_SECONDS: i64 = 30;

/// upstream `queue.go` `GetMaxRetryDuration` (v1.14.1): a command waiting for its replacements
/// gives up after 80 ms per command in the queue, at least 10 minutes and at most an hour.
pub fn command_timeout_seconds(queued: usize) -> i64 {
    let scaled = i64::try_from(queued).unwrap_or(i64::MAX).saturating_mul(80) / 1000;
    scaled.clamp(10 * 60, 60 * 60)
}
/// upstream: a nomination lasts max(2 × the batch's maximum, 10 s).
pub const NOMINATION_SECONDS: i64 = 20;

/// Where a command that launched replacements stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Progress {
    /// Some replacement is not initialized yet.
    Waiting,
    /// Every replacement is initialized: delete the candidates.
    Ready,
    /// A replacement is gone (failed to launch, liveness, deleted): un-taint the candidates.
    Abandoned,
}

/// upstream `queue.go`: the replacements' states (`None`: gone; `Some(initialized)`).
pub fn progress(replacements: impl IntoIterator<Item = Option<bool>>) -> Progress {
    let mut ready = true;
    for r in replacements {
        match r {
            None => return Progress::Abandoned,
            Some(initialized) => ready &= initialized,
        }
    }
    if ready {
        Progress::Ready
    } else {
        Progress::Waiting
    }
}

/// What a pass says about a node that is not disrupted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all_fields = "camelCase")]
pub enum Verdict {
    /// upstream `DisruptionBlocked`: not a candidate.
    Blocked { blockers: Vec<Blocker> },
    /// upstream `Unconsolidatable`: a candidate the method passed over.
    Unconsolidatable { method: Method, why: String },
}

impl Verdict {
    /// The verdict as one line (what a change is judged by).
    pub fn text(&self) -> String {
        match self {
            Verdict::Blocked { blockers } => blockers.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
            Verdict::Unconsolidatable { method, why } => format!("{method:?}: {why}"),
        }
    }

    /// A node not initialized yet, or already going, is not news.
    pub fn routine(&self) -> bool {
        matches!(self, Verdict::Blocked { blockers }
            if blockers.iter().all(|b| matches!(b, Blocker::NotInitialized | Blocker::Deleting)))
    }
}

/// Every node's verdict in a pass: blockers first, else the first method that passed it over.
pub fn verdicts(pass: &Pass) -> BTreeMap<String, Verdict> {
    let mut out = BTreeMap::new();
    for (node, blockers) in &pass.blocked {
        out.insert(node.clone(), Verdict::Blocked { blockers: blockers.clone() });
    }
    for d in &pass.declined {
        for (node, why) in &d.nodes {
            out.entry(node.clone())
                .or_insert_with(|| Verdict::Unconsolidatable { method: d.method, why: why.to_string() });
        }
    }
    out
}

/// The verdicts worth an event: those that changed since `logged` (node → the text last logged,
/// updated here; a node absent from a pass keeps its entry, so a verdict that comes back
/// unchanged is not news), routine ones recorded but not returned. Upstream deduplicates these
/// events by time; a verdict that has not changed is not a new decision.
pub fn news(pass: &Pass, logged: &mut BTreeMap<String, String>) -> Vec<(String, Verdict)> {
    let mut out = Vec::new();
    for (node, verdict) in verdicts(pass) {
        let text = verdict.text();
        if logged.get(&node) == Some(&text) {
            continue;
        }
        logged.insert(node.clone(), text);
        if !verdict.routine() {
            out.push((node, verdict));
        }
    }
    out
}

/// upstream `disruption/controller.go`'s restart recovery: nodes that carry the
/// `karpenter.sh/disrupted` taint but are neither in a queued command (`queued`: node names) nor
/// being deleted (the Node or its NodeClaim). Their taint comes off; else they would never be
/// candidates again, and would count against their NodePool's budgets.
pub fn stale_disrupted<'a>(objects: &'a Manifests, queued: &BTreeSet<String>) -> Vec<&'a str> {
    objects
        .nodes
        .iter()
        .filter(|n| crate::scheduling::taints::is_disrupted(n) && n.metadata.deletion_timestamp.is_none())
        .filter_map(|n| n.metadata.name.as_deref())
        .filter(|name| !queued.contains(*name))
        .filter(|name| {
            !objects.nodeclaims.iter().any(|nc| {
                nc.metadata.deletion_timestamp.is_some()
                    && super::facts::node_of(objects, nc).and_then(|n| n.metadata.name.as_deref()) == Some(*name)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::validation::chosen_again;
    use super::super::Command;
    use super::*;

    #[test]
    fn a_command_times_out_after_80_ms_per_queued_command_within_10_minutes_and_an_hour() {
        assert_eq!(command_timeout_seconds(0), 600);
        assert_eq!(command_timeout_seconds(1), 600);
        assert_eq!(command_timeout_seconds(10_000), 800);
        assert_eq!(command_timeout_seconds(1_000_000), 3_600);
    }
    use crate::api::nodepool::BudgetReason;

    fn command(method: Method, nodes: &[&str]) -> Command {
        Command {
            method,
            reason: method.reason(),
            candidates: nodes.iter().map(|n| n.to_string()).collect(),
            replacements: Vec::new(),
            savings_per_hour: 0.0,
            why: String::new(),
        }
    }

    fn pass(command: Option<Command>, blocked: Vec<(&str, Vec<Blocker>)>) -> Pass {
        Pass { command, declined: Vec::new(), blocked: blocked.into_iter().map(|(n, b)| (n.to_string(), b)).collect() }
    }

    #[test]
    fn consolidation_validation_keeps_the_same_choice_and_names_what_changed() {
        let planned = command(Method::SingleNodeConsolidation, &["a"]);
        let again =
            chosen_again(&planned, pass(Some(command(Method::SingleNodeConsolidation, &["a"])), vec![])).unwrap();
        assert_eq!(again.reason, BudgetReason::Underutilized);
        let blocked = chosen_again(&planned, pass(None, vec![("a", vec![Blocker::NodeDoNotDisrupt]), ("b", vec![])]));
        let Err(r @ Rejection::NoLongerCandidates { .. }) = blocked else { panic!("{blocked:?}") };
        assert_eq!(
            r.to_string(),
            "a is no longer a candidate: disruption is blocked through the \"karpenter.sh/do-not-disrupt\" annotation"
        );
        assert_eq!(
            chosen_again(&planned, pass(Some(command(Method::Drift, &["a"])), vec![])),
            Err(Rejection::OtherMethod { method: Method::Drift })
        );
        assert_eq!(
            chosen_again(&planned, pass(Some(command(Method::SingleNodeConsolidation, &["b"])), vec![])),
            Err(Rejection::OtherNodes)
        );
        assert_eq!(chosen_again(&planned, pass(None, vec![])), Err(Rejection::Nothing));
    }

    #[test]
    fn a_command_goes_on_when_every_replacement_is_initialized_and_stops_when_one_is_gone() {
        assert_eq!(progress([Some(true), Some(false)]), Progress::Waiting);
        assert_eq!(progress([Some(true), Some(true)]), Progress::Ready);
        assert_eq!(progress([Some(false), None]), Progress::Abandoned);
    }

    #[test]
    fn only_changed_verdicts_are_news_and_routine_ones_are_kept_quiet() {
        let mut logged = BTreeMap::new();
        let p = pass(None, vec![("a", vec![Blocker::NodeDoNotDisrupt]), ("b", vec![Blocker::NotInitialized])]);
        let news1 = news(&p, &mut logged);
        assert_eq!(news1.len(), 1);
        assert_eq!(news1[0].0, "a");
        assert_eq!(logged.len(), 2);
        assert!(news(&p, &mut logged).is_empty());
        let p2 = pass(None, vec![("a", vec![Blocker::Deleting])]);
        assert!(news(&p2, &mut logged).is_empty());
        assert_eq!(news(&p, &mut logged).len(), 1, "a changed verdict is news again");
    }
}
