//! upstream `liveness.go`: a NodeClaim that does not launch, or whose Node does not register, in
//! time is deleted, and a new round provisions its pods again.
//!
//! Each timeout counts from the last transition of the condition it watches, as upstream's does.
//! A NodeClaim with no `Registered` condition yet (the simulation writes none before registration)
//! counts the registration timeout from its launch.

use crate::api::nodeclaim::conditions;
use crate::api::time::parse_time;
use crate::api::{find_condition, NodeClaim};

/// upstream `launchTTL`: not `Launched` this long after creation → deleted.
pub const LAUNCH_TIMEOUT_SECONDS: i64 = 5 * 60;
/// upstream `registrationTTL`: not `Registered` this long → deleted.
pub const REGISTRATION_TIMEOUT_SECONDS: i64 = 15 * 60;

/// Which timeout ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum LivenessTimeout {
    /// Not launched [`LAUNCH_TIMEOUT_SECONDS`] after creation.
    Launch,
    /// Launched, not registered [`REGISTRATION_TIMEOUT_SECONDS`] after.
    Registration,
}

impl LivenessTimeout {
    /// The condition that did not go `True`.
    pub fn condition(self) -> &'static str {
        match self {
            LivenessTimeout::Launch => conditions::LAUNCHED,
            LivenessTimeout::Registration => conditions::REGISTERED,
        }
    }

    pub fn after_seconds(self) -> i64 {
        match self {
            LivenessTimeout::Launch => LAUNCH_TIMEOUT_SECONDS,
            LivenessTimeout::Registration => REGISTRATION_TIMEOUT_SECONDS,
        }
    }
}

/// The liveness verdict on a NodeClaim at `now` (epoch seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Liveness {
    /// Registered, or being deleted: nothing to watch.
    Done,
    /// Look again in this many seconds (upstream's requeue).
    CheckAfter(i64),
    /// Delete the NodeClaim.
    TimedOut(LivenessTimeout),
}

/// upstream `Liveness.Reconcile`.
pub fn liveness(nodeclaim: &NodeClaim, now: i64) -> Liveness {
    if nodeclaim.metadata.deletion_timestamp.is_some() {
        return Liveness::Done;
    }
    let conditions = nodeclaim.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let transition = |type_: &str| {
        find_condition(conditions, type_).map(|c| (c.is_true(), c.last_transition_time.as_deref().and_then(parse_time)))
    };
    let created = nodeclaim.metadata.creation_timestamp.as_ref().map(|t| t.0.as_second());
    let (timeout, since) = match (transition(conditions::LAUNCHED), transition(conditions::REGISTERED)) {
        (_, Some((true, _))) => return Liveness::Done,
        (Some((true, launched_at)), registered) => {
            (LivenessTimeout::Registration, registered.and_then(|(_, at)| at).or(launched_at))
        }
        (launched, _) => (LivenessTimeout::Launch, launched.and_then(|(_, at)| at).or(created)),
    };
    // No time to count from: a NodeClaim as the API server returns it always has one.
    let Some(since) = since else { return Liveness::Done };
    match since + timeout.after_seconds() - now {
        left if left > 0 => Liveness::CheckAfter(left),
        _ => Liveness::TimedOut(timeout),
    }
}
