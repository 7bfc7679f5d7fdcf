//! Why a disruption method passes over a node, as values: the conditions of upstream's
//! `consolidation.go` (`ShouldDisrupt`, `computeConsolidation`), `multinodeconsolidation.go`,
//! `singlenodeconsolidation.go`, `drift.go` and the budget check of `controller.go` (v1.14.1).
//! The text (upstream's wording where it has one) is rendered from them by `Display`.

use std::fmt;

use serde::Serialize;

use super::balanced::Score;
use super::budgets::BudgetStatus;
use crate::api::nodepool::BudgetReason;
use crate::api::time::format_time;
use crate::scheduling::nodeclaim_template::MinValuesShortfall;
use crate::state::StateError;

/// One reason a method declined a node.
#[derive(Debug, Clone, PartialEq)]
pub enum Decline {
    /// The NodePool's `consolidateAfter` is `Never`.
    ConsolidationDisabled { nodepool: String },
    /// upstream `Consolidatable`: not quiet for `consolidateAfter` since the last pod event.
    ConsolidateAfterPending {
        /// Seconds.
        consolidate_after: i64,
        /// When it becomes consolidatable (epoch seconds).
        at: i64,
    },
    /// The NodePool's budgets allow no more disruptions for the method's reason.
    NoBudget { nodepool: String, reason: BudgetReason, binding: Option<Box<BindingBudget>> },
    /// Policy `WhenEmpty` and the node has pods to move.
    WhenEmptyButNotEmpty { nodepool: String },
    /// The node lacks the instance-type or capacity-type label consolidation prices it by.
    UnlabelledNode,
    /// The provisioning round that would move its pods cannot be built.
    Simulation(StateError),
    /// Some of its pods would not schedule elsewhere (upstream `AllNonPendingPodsScheduled`).
    PodsWouldNotSchedule {
        /// Up to five pods (`namespace/name`) with their explanation's headline.
        pods: Vec<(String, String)>,
        guarded: Vec<GuardedDestination>,
    },
    /// A pod would move onto a node that is not initialized (upstream `UninitializedNodeError`).
    OntoUninitialized { destination: String },
    /// Removing it needs more than one new NodeClaim.
    MoreThanOneReplacement { count: usize, guarded: Vec<GuardedDestination> },
    /// The replacement's NodePool is gone.
    NodePoolNotFound { nodepool: String },
    /// A spot node would be replaced by a spot node, and the feature gate is off.
    SpotToSpotDisabled,
    /// The instance types cheaper than the node do not meet the NodePool's minValues.
    MinValuesAfterPriceFilter(MinValuesShortfall),
    /// No instance type it could launch is cheaper.
    NoCheaperReplacement { guarded: Vec<GuardedDestination> },
    /// Spot-to-spot needs at least 15 cheaper instance types.
    TooFewSpotOptions { required: usize, got: usize },
    /// A Balanced NodePool scores merging these nodes too low.
    BalancedRejectsMerge { nodepool: String, score: Score },
    /// A Balanced NodePool scores replacing or deleting this node too low.
    BalancedRejects { nodepool: String, score: Score },
    /// Not even deleting it outright would pass its Balanced NodePool (upstream `CanPassThreshold`).
    BalancedEvenDeleting { nodepool: String, score: Score },
    /// Its pods fit neither in the room on the other nodes nor on a cheaper instance type (the
    /// pre-check before simulating a single node).
    NoRoom,
}

/// The budget that allows no more, as a NodePool counted it.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingBudget {
    pub budget: BudgetStatus,
    /// Nodes the NodePool's budgets count.
    pub counted: i64,
    /// Nodes of the NodePool being disrupted.
    pub disrupting: i64,
}

/// A node the candidates' pods could not move to because it is inside its consolidateAfter window
/// (the refusal may pass when the window does).
#[derive(Debug, Clone, PartialEq)]
pub struct GuardedDestination {
    pub node: String,
    /// When its window ends (epoch seconds).
    pub until: i64,
}

impl fmt::Display for BindingBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.budget;
        write!(f, "budget #{} (nodes {}", b.index, b.nodes)?;
        if let (Some(s), Some(end)) = (&b.schedule, b.window_ends) {
            write!(f, ", schedule {s:?} active until {}", format_time(end))?;
        }
        write!(f, ") allows {} of {} node(s), {} disrupting", b.allows.unwrap_or(0), self.counted, self.disrupting)
    }
}

/// ` (not destinations while inside their consolidateAfter window: a until t, …)`, or nothing.
fn guarded_suffix(f: &mut fmt::Formatter<'_>, guarded: &[GuardedDestination]) -> fmt::Result {
    if guarded.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = guarded.iter().map(|g| format!("{} until {}", g.node, format_time(g.until))).collect();
    write!(f, " (not destinations while inside their consolidateAfter window: {})", list.join(", "))
}

impl fmt::Display for Decline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decline::ConsolidationDisabled { nodepool } => {
                write!(f, "NodePool {nodepool} has consolidation disabled (consolidateAfter: Never)")
            }
            Decline::ConsolidateAfterPending { consolidate_after, at } => write!(
                f,
                "consolidateAfter ({}) has not passed since the last pod event: consolidatable at {}",
                crate::api::duration::format_go_duration(consolidate_after * 1_000_000_000),
                format_time(*at)
            ),
            Decline::NoBudget { nodepool, reason, binding } => {
                write!(f, "no allowed disruptions for reason {} in NodePool {nodepool}", reason.as_str())?;
                match binding {
                    Some(b) => write!(f, ": {b}"),
                    None => Ok(()),
                }
            }
            Decline::WhenEmptyButNotEmpty { nodepool } => {
                write!(f, "NodePool {nodepool} has consolidation policy WhenEmpty, but the node is not empty")
            }
            Decline::UnlabelledNode => write!(f, "the node has no instance-type or capacity-type label"),
            Decline::Simulation(e) => write!(f, "{}", crate::error_chain(e)),
            Decline::PodsWouldNotSchedule { pods, guarded } => {
                let pods: Vec<String> = pods.iter().map(|(pod, why)| format!("{pod} => {why}")).collect();
                write!(f, "not all pods would schedule, {}", pods.join("; "))?;
                guarded_suffix(f, guarded)
            }
            Decline::OntoUninitialized { destination } => {
                write!(f, "would schedule against uninitialized {destination}")
            }
            Decline::MoreThanOneReplacement { count, guarded } => {
                write!(f, "can't remove without creating {count} candidates")?;
                guarded_suffix(f, guarded)
            }
            Decline::NodePoolNotFound { nodepool } => write!(f, "NodePool {nodepool} not found"),
            Decline::SpotToSpotDisabled => {
                write!(f, "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node")
            }
            Decline::MinValuesAfterPriceFilter(shortfall) => write!(f, "Filtering by price: {shortfall}"),
            Decline::NoCheaperReplacement { guarded } => {
                write!(f, "can't replace with a cheaper node")?;
                guarded_suffix(f, guarded)
            }
            Decline::TooFewSpotOptions { required, got } => write!(
                f,
                "SpotToSpotConsolidation requires {required} cheaper instance type options than the current \
                 candidate to consolidate, got {got}"
            ),
            Decline::BalancedRejectsMerge { nodepool, score } => {
                write!(f, "Balanced NodePool {nodepool} rejects merging them: {score}")
            }
            Decline::BalancedRejects { nodepool, score } => {
                write!(f, "Balanced NodePool {nodepool} rejects it: {score}")
            }
            Decline::BalancedEvenDeleting { nodepool, score } => {
                write!(f, "Balanced NodePool {nodepool}: even deleting it: {score}")
            }
            Decline::NoRoom => {
                write!(f, "its pods fit neither in the room left on the other nodes nor on a cheaper instance type")
            }
        }
    }
}

/// In JSON a decline is its text (the shape `Declined` had when reasons were strings).
impl Serialize for Decline {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        crate::style::as_text(self, serializer)
    }
}
