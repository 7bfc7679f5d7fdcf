//! upstream `nodepool/validation`: `ValidationSucceeded` is `False` with reason
//! `NodePoolValidationFailed` and the problems as its message while the NodePool fails the checks
//! Karpenter makes at runtime (here: every check core makes, `crate::api::Validate`).

use crate::api::condition_set::ConditionSet;
use crate::api::{NodePool, Validate};

/// Sets `ValidationSucceeded`.
pub fn condition(nodepool: &NodePool, set: &mut ConditionSet<'_>) {
    let problems = nodepool.validate();
    if problems.is_empty() {
        set.set_true(super::VALIDATION_SUCCEEDED);
    } else {
        let message = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        set.set_false(super::VALIDATION_SUCCEEDED, "NodePoolValidationFailed", &message);
    }
}
