//! `NodeRegistrationHealthy`, as three upstream files (v1.14.1) decide it:
//! - `pkg/controllers/nodepool/registrationhealth/controller.go` ([`reset`]): the condition is
//!   reset to `Unknown` when it is missing or the NodePool or its NodeClass changed generation
//!   since it was judged, and `status.nodeClassObservedGeneration` records the class's generation;
//! - `pkg/state/nodepoolhealth/tracker.go` ([`Tracker`]): the last four outcomes of the
//!   NodePool's NodeClaims (registered, or timed out launching or registering);
//! - `pkg/controllers/nodeclaim/lifecycle/registration.go` and `liveness.go` ([`registered`],
//!   [`failed`]): the condition turns `True` when the outcomes with the new one are healthy,
//!   `False` when half of four would be failures; the outcome is recorded once that is written.

use std::collections::VecDeque;

use crate::api::condition_set::ConditionSet;
use crate::api::nodepool::NodePoolStatus;
use crate::api::{find_condition, Condition, EC2NodeClass, NodeClaim, NodePool};

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
    if stale(nodepool, class, Some(status)) {
        let generation = nodepool.metadata.generation;
        ConditionSet::new(&mut status.conditions, super::DEPENDENTS, generation, created, now)
            .set_unknown(super::NODE_REGISTRATION_HEALTHY);
    }
    status.node_class_observed_generation = class_generation;
}

/// Whether [`reset`] resets the condition: it is missing, or the NodePool or its NodeClass
/// changed generation since it was judged. The controller then forgets the NodePool's outcomes
/// too ([`Tracker::reset`]).
pub fn stale(nodepool: &NodePool, nodeclass: &EC2NodeClass, status: Option<&NodePoolStatus>) -> bool {
    let condition = status.and_then(|s| find_condition(&s.conditions, super::NODE_REGISTRATION_HEALTHY));
    condition.is_none_or(|c| c.observed_generation != nodepool.metadata.generation)
        || status.and_then(|s| s.node_class_observed_generation) != nodeclass.metadata.generation
}

/// upstream `nodepoolhealth.BufferSize`: how many outcomes are remembered.
pub const BUFFER_SIZE: usize = 4;

/// What a NodePool's remembered outcomes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Nothing remembered (a new NodePool, a reset, a restart before any outcome).
    Unknown,
    Healthy,
    /// At least half of [`BUFFER_SIZE`] outcomes are failures (upstream `ThresholdFalse`, 0.5).
    Unhealthy,
}

/// The last [`BUFFER_SIZE`] launch-and-registration outcomes of one NodePool's NodeClaims,
/// oldest first (upstream's ring buffer). It lives in the controller's memory, as upstream's
/// does; after a restart [`Tracker::hydrate`] rebuilds it from the condition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tracker {
    outcomes: VecDeque<bool>,
}

impl Tracker {
    /// Remembers one outcome (`true`: registered), forgetting the oldest past [`BUFFER_SIZE`].
    pub fn record(&mut self, registered: bool) {
        if self.outcomes.len() == BUFFER_SIZE {
            self.outcomes.pop_front();
        }
        self.outcomes.push_back(registered);
    }

    pub fn health(&self) -> Health {
        if self.outcomes.is_empty() {
            return Health::Unknown;
        }
        // upstream divides by the buffer's size, not by how many outcomes it holds: two
        // failures make a NodePool unhealthy however many successes came before them.
        let failures = self.outcomes.iter().filter(|ok| !**ok).count();
        if failures * 2 >= BUFFER_SIZE {
            Health::Unhealthy
        } else {
            Health::Healthy
        }
    }

    /// Forgets every outcome (upstream `SetStatus(StatusUnknown)`).
    pub fn reset(&mut self) {
        self.outcomes.clear();
    }

    /// upstream `registrationhealth.Reconcile`'s pre-hydration: an empty tracker (after a
    /// restart) takes the health the condition already states: one success for `True`, two
    /// failures for `False`.
    pub fn hydrate(&mut self, nodepool: &NodePool) {
        if self.health() != Health::Unknown {
            return;
        }
        match condition(nodepool).map(|c| c.status.as_str()) {
            Some("True") => self.record(true),
            Some("False") => {
                self.record(false);
                self.record(false);
            }
            _ => {}
        }
    }

    /// upstream `DryRun`: the health this tracker would have with one more outcome.
    fn health_with(&self, registered: bool) -> Health {
        let mut next = self.clone();
        next.record(registered);
        next.health()
    }
}

fn condition(nodepool: &NodePool) -> Option<&Condition> {
    find_condition(nodepool.status.as_ref().map_or(&[][..], |s| &s.conditions), super::NODE_REGISTRATION_HEALTHY)
}

/// Whether `nodeclaim` is `nodepool`'s by owner reference (upstream judges only those).
pub fn owned_by(nodeclaim: &NodeClaim, nodepool: &NodePool) -> bool {
    let uid = nodepool.metadata.uid.as_deref();
    uid.is_some()
        && nodeclaim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "NodePool" && Some(o.uid.as_str()) == uid)
}

fn with_condition(nodepool: &NodePool, now: &str, set: impl FnOnce(&mut ConditionSet<'_>)) -> Option<NodePoolStatus> {
    let before = nodepool.status.clone().unwrap_or_default();
    let mut status = before.clone();
    let created = super::created(nodepool);
    let created = created.as_deref().unwrap_or(now);
    set(&mut ConditionSet::new(&mut status.conditions, super::DEPENDENTS, nodepool.metadata.generation, created, now));
    (status != before).then_some(status)
}

/// upstream `registration.go` `updateNodePoolRegistrationHealth`: a NodeClaim of `nodepool`
/// registered. The status to write when the condition turns `True` with it (upstream's
/// `DryRun`); the caller records the outcome ([`Tracker::record`]) once that is written or when
/// there is none, as upstream's `Update` follows the patch.
pub fn registered(nodepool: &NodePool, tracker: &Tracker, now: &str) -> Option<NodePoolStatus> {
    if tracker.health_with(true) == Health::Healthy {
        with_condition(nodepool, now, |set| set.set_true(super::NODE_REGISTRATION_HEALTHY))
    } else {
        None
    }
}

/// upstream `liveness.go` `updateNodePoolRegistrationHealth`: a NodeClaim of `nodepool` timed out
/// launching or registering. The status to write when the condition turns `False` with it:
/// `RegistrationFailed` for a NodeClaim that launched, else its `Launched` condition's reason and
/// message. The caller records the outcome once that is written or when there is none.
pub fn failed(nodepool: &NodePool, nodeclaim: &NodeClaim, tracker: &Tracker, now: &str) -> Option<NodePoolStatus> {
    let already_false = condition(nodepool).is_some_and(|c| c.status == "False");
    if tracker.health_with(false) == Health::Unhealthy && !already_false {
        let launched = nodeclaim
            .status
            .as_ref()
            .and_then(|s| find_condition(&s.conditions, crate::api::nodeclaim::conditions::LAUNCHED));
        let (reason, message) = match launched {
            Some(c) if c.is_true() => ("RegistrationFailed".to_string(), "Failed to register node".to_string()),
            Some(c) => (c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()),
            // A NodeClaim's condition set starts every condition Unknown (operatorpkg).
            None => ("AwaitingReconciliation".to_string(), "object is awaiting reconciliation".to_string()),
        };
        with_condition(nodepool, now, |set| set.set_false(super::NODE_REGISTRATION_HEALTHY, &reason, &message))
    } else {
        None
    }
}
