//! The NodeClaim conditions node termination writes (upstream `node/termination/controller.go`:
//! `awaitDrain`, `awaitVolumeDetachment`, `awaitInstanceTermination`): `Drained` is `Unknown`
//! (reason `Draining`) from the first drain pass and `True` once the pods are gone and it has been
//! draining for at least [`MIN_DRAIN_SECONDS`] (pods kube-scheduler bound before it saw the taint
//! are drained too); `VolumesDetached` is `True` when no volume attachment holds the node, and
//! `InstanceTerminating` is `True` once the instance's deletion has been asked for.

use crate::api::nodeclaim::NodeClaim;
use crate::api::time::{format_time, parse_time};
use crate::api::Condition;

/// upstream `MinDrainTime`.
pub const MIN_DRAIN_SECONDS: i64 = 5;
/// upstream `ConditionTypeDrained`.
pub const DRAINED: &str = "Drained";
/// upstream `ConditionTypeVolumesDetached`.
pub const VOLUMES_DETACHED: &str = "VolumesDetached";
/// upstream `ConditionTypeInstanceTerminating`.
pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";

/// Where a NodeClaim's termination has got to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// A drain pass ran and pods remain (or the minimum drain time has not passed).
    Draining,
    /// Drained; no volume attachment holds it (carpentry does not yet wait for any).
    Drained,
    /// The instance's deletion was asked for.
    InstanceTerminating,
}

fn condition(nc: &NodeClaim, type_: &str) -> Option<Condition> {
    nc.status.as_ref().and_then(|s| crate::api::find_condition(&s.conditions, type_)).cloned()
}

/// Whether the drain is done (upstream `awaitDrain`): the pods are gone (`pods_drained`) and
/// `Drained` has been `Unknown` for at least the minimum drain time (or is `True` already).
pub fn drain_done(nc: &NodeClaim, pods_drained: bool, now: i64) -> bool {
    let Some(c) = condition(nc, DRAINED) else { return false };
    if c.is_true() {
        return true;
    }
    let since = c.last_transition_time.as_deref().and_then(parse_time);
    pods_drained && since.is_some_and(|t| now - t >= MIN_DRAIN_SECONDS)
}

/// The NodeClaim's conditions as they become at `stage`, or `None` when nothing changes. Earlier
/// stages' conditions are set too (a restart may skip a pass).
pub fn conditions(nc: &NodeClaim, stage: Stage, now: i64) -> Option<Vec<Condition>> {
    let at = format_time(now);
    let before = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let mut list = before.clone();
    let set = |list: &mut Vec<Condition>, type_: &str, status: &str, reason: &str| {
        let keep_time = list.iter().find(|c| c.type_ == type_).filter(|c| c.status == status);
        let time = keep_time.and_then(|c| c.last_transition_time.clone()).unwrap_or_else(|| at.clone());
        let message = (status != "True").then(|| reason.to_string());
        let new = Condition {
            last_transition_time: Some(time),
            message,
            observed_generation: nc.metadata.generation,
            reason: Some(reason.to_string()),
            status: status.to_string(),
            type_: type_.to_string(),
        };
        match list.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => *c = new,
            None => list.push(new),
        }
    };
    match stage {
        Stage::Draining => {
            if !list.iter().any(|c| c.type_ == DRAINED) {
                set(&mut list, DRAINED, "Unknown", "Draining");
            }
        }
        Stage::Drained => {
            set(&mut list, DRAINED, "True", DRAINED);
            set(&mut list, VOLUMES_DETACHED, "True", VOLUMES_DETACHED);
        }
        Stage::InstanceTerminating => {
            set(&mut list, DRAINED, "True", DRAINED);
            set(&mut list, VOLUMES_DETACHED, "True", VOLUMES_DETACHED);
            set(&mut list, INSTANCE_TERMINATING, "True", INSTANCE_TERMINATING);
        }
    }
    (list != before).then_some(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drained_after_the_minimum_drain_time_then_instance_terminating() {
        let mut nc = NodeClaim::new("a", Default::default());
        let t0 = 1_800_000_000;
        assert!(!drain_done(&nc, true, t0), "no drain pass yet");
        let list = conditions(&nc, Stage::Draining, t0).expect("Draining");
        nc.status.get_or_insert_with(Default::default).conditions = list;
        assert_eq!(conditions(&nc, Stage::Draining, t0 + 1), None, "the first pass's time is kept");
        assert!(!drain_done(&nc, true, t0 + 4), "not before MinDrainTime");
        assert!(!drain_done(&nc, false, t0 + 9), "not while pods remain");
        assert!(drain_done(&nc, true, t0 + 5));
        let list = conditions(&nc, Stage::InstanceTerminating, t0 + 5).unwrap();
        let status = |t: &str| list.iter().find(|c| c.type_ == t).map(|c| c.status.clone());
        assert_eq!(status(DRAINED).as_deref(), Some("True"));
        assert_eq!(status(VOLUMES_DETACHED).as_deref(), Some("True"));
        assert_eq!(status(INSTANCE_TERMINATING).as_deref(), Some("True"));
    }
}
