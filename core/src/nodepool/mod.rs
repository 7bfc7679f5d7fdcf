//! The NodePool controllers (upstream `pkg/controllers/nodepool`, v1.14.1) as decisions: each
//! reads a NodePool with what it depends on and returns what should change, or `None`. The
//! controller writes the result through the API server; the simulation has no use for them (its
//! NodePools are what the user wrote), so only the live controller drives them.
//!
//! Module map (upstream `pkg/controllers/nodepool/`): `hash` (`hash/controller.go`), `counter`
//! (`counter/controller.go`), `readiness` (`readiness/controller.go`), `validation`
//! (`validation/controller.go`), `registrationhealth` (`registrationhealth/controller.go`, with
//! `pkg/state/nodepoolhealth/tracker.go` and the lifecycle's outcomes that feed it); the
//! condition set is `pkg/apis/v1/nodepool_status.go`.

pub mod counter;
pub mod hash;
pub mod readiness;
pub mod registrationhealth;
pub mod validation;

use crate::api::condition_set::ConditionSet;
use crate::api::nodepool::NodePoolStatus;
use crate::api::{Condition, EC2NodeClass, NodePool};
use crate::resources::ResourceList;

/// upstream `ConditionTypeValidationSucceeded`.
pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// upstream `ConditionTypeNodeClassReady`.
pub const NODECLASS_READY: &str = "NodeClassReady";
/// upstream `ConditionTypeNodeRegistrationHealthy`.
pub const NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";
/// upstream `NodePool.StatusConditions`: `Ready` depends on these.
pub const DEPENDENTS: &[&str] = &[VALIDATION_SUCCEEDED, NODECLASS_READY];
/// NodePools reconciled at once: upstream's `validation` takes 10, the other NodePool controllers
/// `LinearScaleReconciles(CPUCount, 10, 1000)` (`utils/controller`), which is 10 at the chart's
/// one CPU requested; NodePools are few, so more would buy nothing here.
pub const MAX_CONCURRENT_RECONCILES: u16 = 10;

/// The NodePool's status as its controllers would write it now: conditions (validation, the
/// NodeClass's readiness, registration health's reset), `status.resources` and `status.nodes`
/// from `usage` (what its nodes hold; `None` while the view is not synced, when upstream's
/// counter leaves them as they are). `None` when nothing changes.
pub fn status(
    nodepool: &NodePool,
    nodeclass: Option<&EC2NodeClass>,
    usage: Option<&ResourceList>,
    now: &str,
) -> Option<NodePoolStatus> {
    let before = nodepool.status.clone().unwrap_or_default();
    let mut status = before.clone();
    let created = created(nodepool);
    let created = created.as_deref().unwrap_or(now);
    {
        let mut set = ConditionSet::new(&mut status.conditions, DEPENDENTS, nodepool.metadata.generation, created, now);
        validation::condition(nodepool, &mut set);
        readiness::condition(nodepool, nodeclass, &mut set);
    }
    registrationhealth::reset(nodepool, nodeclass, &mut status, created, now);
    if let Some(usage) = usage {
        counter::write(usage, &mut status);
    }
    (status != before).then_some(status)
}

/// The NodePool's conditions that are also said in a Warning event on the NodePool
/// ([`crate::api::condition_set::turned_false`]), except two said otherwise: `ValidationSucceeded`
/// (a NodePool that fails validation is left out of the view, and that says it in its own event)
/// and `NodeClassReady` while the NodeClass has not been reconciled yet
/// (`NodeClassReadinessUnknown`: the first seconds of every NodePool created with its class).
pub fn warnings<'a>(before: Option<&'a NodePoolStatus>, after: &'a NodePoolStatus) -> Vec<&'a Condition> {
    let before = before.map(|s| s.conditions.as_slice()).unwrap_or_default();
    crate::api::condition_set::turned_false(before, &after.conditions)
        .filter(|c| c.type_ != VALIDATION_SUCCEEDED)
        .filter(|c| c.reason.as_deref() != Some("NodeClassReadinessUnknown"))
        .collect()
}

/// The NodePool's creation time, RFC 3339 (a condition set first "transitioned" then).
fn created(nodepool: &NodePool) -> Option<String> {
    nodepool.metadata.creation_timestamp.as_ref().map(|t| crate::api::time::format_time(t.0.as_second()))
}

#[cfg(test)]
mod tests;
