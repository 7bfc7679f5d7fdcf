//! The NodeClaim lifecycle controller (upstream `pkg/controllers/nodeclaim/lifecycle/controller.go`):
//! once the `karpenter.sh/termination` finalizer is on, each reconcile runs launch → registration →
//! initialization → liveness, and each step is a decision here.
//!
//! Files: `launch` [`launch.go`: `PopulateNodeClaimDetails` and `Launched`], `registration`
//! [`registration.go`: the Node found by providerID, synced, `Registered`], `initialization`
//! [`initialization.go`: `Initialized` once the Node is Ready and clean], `liveness`
//! [`liveness.go`: the launch and registration timeouts].
//!
//! What the cloud provider does (choosing and starting the instance) is not here: the simulation's
//! stand-in is `scheduling::cloudprovider::launch`, the controller calls its provider.

mod initialization;
mod launch;
mod liveness;
mod registration;

#[cfg(test)]
mod tests;

use crate::api::nodeclaim::conditions;
use crate::api::{Condition, NodeClaim};

pub use initialization::{initialize, NotInitialized};
pub use launch::{launch_failed, launched, Instance, LAUNCH_CACHE_SECONDS, MAX_CONCURRENT_LAUNCHES, RATE_LIMITER};
pub use liveness::{liveness, Liveness, LivenessTimeout, LAUNCH_TIMEOUT_SECONDS, REGISTRATION_TIMEOUT_SECONDS};
pub use registration::{node_for, register, unregistered_taint, NotRegistered, Registration};

/// Where a NodeClaim is in its life, from its conditions (as `kubectl get nodeclaims` reads them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Phase {
    /// Created; the cloud provider has not launched an instance yet.
    Launching,
    /// The instance runs; its Node has not registered.
    Launched,
    /// The Node joined; not initialized yet.
    Registered,
    /// Ready for pods.
    Initialized,
    /// Being deleted (drained, the instance terminated).
    Terminating,
}

/// The NodeClaim's [`Phase`].
pub fn phase(nodeclaim: &NodeClaim) -> Phase {
    if nodeclaim.metadata.deletion_timestamp.is_some() {
        Phase::Terminating
    } else if is_true(nodeclaim, conditions::INITIALIZED) {
        Phase::Initialized
    } else if is_true(nodeclaim, conditions::REGISTERED) {
        Phase::Registered
    } else if is_true(nodeclaim, conditions::LAUNCHED) {
        Phase::Launched
    } else {
        Phase::Launching
    }
}

/// upstream `finalize`: a deleting NodeClaim's Nodes are deleted (and so drained) only once it
/// registered (a Node deleted before registration put the termination finalizer on it could
/// leak its kubelet lease); the instance of one that never registered is terminated without.
pub fn finalize_deletes_nodes(nodeclaim: &NodeClaim) -> bool {
    is_true(nodeclaim, conditions::REGISTERED)
}

/// Sets condition `type_` to `True` with its type as the reason (operatorpkg `status.SetTrue`). The
/// transition time moves only when the status changes, as `metav1.Condition`'s does.
pub(crate) fn set_true(list: &mut Vec<Condition>, type_: &str, at: &str) {
    let condition = Condition {
        last_transition_time: Some(at.to_string()),
        message: None,
        observed_generation: None,
        reason: Some(type_.to_string()),
        status: "True".into(),
        type_: type_.to_string(),
    };
    match list.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) if existing.is_true() => {}
        Some(existing) => *existing = condition,
        None => list.push(condition),
    }
}

/// Whether the NodeClaim's condition `type_` is `True`.
pub(crate) fn is_true(nodeclaim: &NodeClaim, type_: &str) -> bool {
    nodeclaim
        .status
        .as_ref()
        .and_then(|s| crate::api::find_condition(&s.conditions, type_))
        .is_some_and(Condition::is_true)
}

/// The NodeClaim's root condition: `Ready` is `True` once `Launched`, `Registered` and
/// `Initialized` all are (upstream `NodeClaim.StatusConditions`' dependents).
pub(crate) fn set_ready_if_all_true(nodeclaim: &mut NodeClaim, at: &str) {
    let all =
        [conditions::LAUNCHED, conditions::REGISTERED, conditions::INITIALIZED].iter().all(|t| is_true(nodeclaim, t));
    if all {
        set_true(&mut nodeclaim.status.get_or_insert_with(Default::default).conditions, conditions::READY, at);
    }
}
