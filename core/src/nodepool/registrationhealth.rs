//! upstream `nodepool/registrationhealth`: `NodeRegistrationHealthy` is reset to `Unknown` when it
//! is missing or the NodePool or its NodeClass changed generation since it was judged, and
//! `status.nodeClassObservedGeneration` records the class's generation. (Judging it `True` or
//! `False` from launch and registration outcomes is upstream's lifecycle controller; this one
//! does not yet.)

use crate::api::condition_set::ConditionSet;
use crate::api::nodepool::NodePoolStatus;
use crate::api::{EC2NodeClass, NodePool};

/// Resets the condition and records the class's generation.
pub fn reset(
    nodepool: &NodePool,
    nodeclass: Option<&EC2NodeClass>,
    status: &mut NodePoolStatus,
    created: &str,
    now: &str,
) {
    // upstream: nothing to do without the NodeClass.
    let Some(class) = nodeclass else { return };
    let class_generation = class.metadata.generation;
    let condition = crate::api::find_condition(&status.conditions, super::NODE_REGISTRATION_HEALTHY);
    let stale = condition.is_none_or(|c| c.observed_generation != nodepool.metadata.generation)
        || status.node_class_observed_generation != class_generation;
    if stale {
        let generation = nodepool.metadata.generation;
        ConditionSet::new(&mut status.conditions, super::DEPENDENTS, generation, created, now)
            .set_unknown(super::NODE_REGISTRATION_HEALTHY);
    }
    status.node_class_observed_generation = class_generation;
}
