//! The disruption methods, one file each as upstream's `pkg/controllers/disruption` has them
//! (v1.14.1): `emptiness.go` → [`emptiness`], `drift.go` → [`drift`],
//! `multinodeconsolidation.go` → [`multi_node`], `singlenodeconsolidation.go` → [`single_node`].
//! What they share (`consolidation.go`) is [`super::consolidation`]; drift detection (upstream
//! `pkg/controllers/nodeclaim/disruption/drift.go`) is [`super::drift`].

mod drift;
mod emptiness;
mod multi_node;
mod single_node;

use super::consolidation::Declines;
use super::{Candidate, Command, Method, View};

/// Runs one method over its candidates: a command, or why each node was passed over.
pub(super) fn run(view: &View<'_>, method: Method, candidates: &[Candidate]) -> Result<Command, Declines> {
    match method {
        Method::Emptiness => emptiness::run(view, candidates),
        Method::Drift => drift::run(view, candidates),
        Method::MultiNodeConsolidation => multi_node::run(view, candidates),
        Method::SingleNodeConsolidation => single_node::run(view, candidates),
    }
}
