//! What CA remembers between loops about each group's scale-ups (upstream
//! `clusterstate/clusterstate.go` and `utils/backoff/exponential_backoff.go` at
//! cluster-autoscaler-1.36.1): the scale-up requests in flight, their provision timeout, the
//! groups' backoff, health, and the upcoming nodes the next loop counts as capacity.
//!
//! - A scale-up of a group registers a request (or adds to the one in flight), due within
//!   `--max-node-provision-time` (15 minutes) from the last increase.
//! - Each loop, a request whose nodes have all come up (registered and started) is done. One that
//!   is past its due time with nodes still missing has timed out: `ScaleUpTimedOut` ("Nodes added
//!   to group %s failed to register within %v"), a failure that backs the group off, and the
//!   group's target lowered to its registered nodes.
//! - A failure backs the group off for `--initial-node-group-backoff-duration` (5 minutes); one
//!   after that backoff ended doubles it, up to `--max-node-group-backoff-duration` (30 minutes);
//!   one within it starts the same duration again. The history is forgotten
//!   `--node-group-backoff-reset-timeout` (3 hours) after the last failure.
//! - A group is unhealthy when more than 3 of the nodes it should have, and more than 45 % of its
//!   registered nodes, are missing from its ready ones (in-flight scale-ups aside).
//! - Upcoming nodes: for a group scaling up and not backed off, its target less its ready, unready
//!   and long-unregistered nodes (registered nodes still starting count as upcoming).
//!
//! Times are seconds on the caller's clock.

use std::collections::BTreeMap;

use crate::api::clusterautoscaler::ResolvedOptions;

use super::scaleup::Safety;

/// upstream `--ok-total-unready-count` and `--max-total-unready-percentage` defaults.
pub const OK_TOTAL_UNREADY_COUNT: i64 = 3;
pub const MAX_TOTAL_UNREADY_PERCENTAGE: f64 = 45.0;

/// A group's nodes by readiness, as CA counts them (upstream `Readiness`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Readiness {
    pub ready: i64,
    /// Registered, not Ready, and older than `--max-node-startup-time`.
    pub unready: i64,
    /// Registered, not Ready yet, younger than `--max-node-startup-time`.
    pub not_started: i64,
    /// Registered and being deleted.
    pub deleted: i64,
    /// Instances without a Node for longer than `--max-node-provision-time`.
    pub long_unregistered: i64,
    /// Instances without a Node yet (the ASG's placeholders for capacity asked and not yet
    /// launched among them), for the status.
    pub unregistered: i64,
}

impl Readiness {
    fn registered(&self) -> i64 {
        self.ready + self.unready + self.not_started + self.deleted
    }
}

/// A group as this loop sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCounts<'a> {
    pub name: &'a str,
    pub target: i64,
    pub readiness: Readiness,
}

/// A scale-up in flight (upstream `ScaleUpRequest`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleUpRequest {
    pub increase: i64,
    /// When it was last increased.
    pub time: f64,
    pub expected_add_time: f64,
}

#[derive(Debug, Clone, PartialEq)]
struct Backoff {
    duration: f64,
    until: f64,
    last_failure: f64,
    /// What failed and how upstream words it, for the status.
    code: FailureCode,
    message: String,
}

/// Why a scale-up failed (upstream's error codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureCode {
    /// Its nodes did not come up within `--max-node-provision-time`.
    Timeout,
    /// The cloud could not launch the instances (upstream's placeholder `OutOfResources` error).
    OutOfResources,
}

impl FailureCode {
    pub fn as_str(&self) -> &'static str {
        match self {
            FailureCode::Timeout => "timeout",
            FailureCode::OutOfResources => "placeholder-cannot-be-fulfilled",
        }
    }
}

/// A scale-up that timed out this loop.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedOut {
    pub group: String,
    /// How long since the request was last increased.
    pub after_seconds: f64,
    /// The group's target lowered to its registered nodes: the instances that never joined are
    /// taken off. (Upstream asks `DecreaseTargetSize` for the whole outstanding increase, which
    /// the AWS provider refuses for instances that exist; those without a Node it deletes later
    /// as unregistered. docs/divergences.md.)
    pub target: i64,
}

impl TimedOut {
    /// upstream's `ScaleUpTimedOut` event text (the time in Go's duration format).
    pub fn message(&self) -> String {
        format!(
            "Nodes added to group {} failed to register within {}",
            self.group,
            crate::api::duration::format_go_duration((self.after_seconds * 1e9) as i64)
        )
    }
}

/// CA's memory of scale-ups (upstream `ClusterStateRegistry`, its scale-up half).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterState {
    requests: BTreeMap<String, ScaleUpRequest>,
    backoff: BTreeMap<String, Backoff>,
}

impl ClusterState {
    /// upstream `registerOrUpdateScaleUpNoLock`: `delta` more nodes asked of `group` at `now`.
    pub fn register_scale_up(&mut self, group: &str, delta: i64, now: f64, options: &ResolvedOptions) {
        let due = now + options.max_node_provision_time_seconds;
        match self.requests.get_mut(group) {
            None if delta > 0 => {
                self.requests
                    .insert(group.to_string(), ScaleUpRequest { increase: delta, time: now, expected_add_time: due });
            }
            None => {}
            Some(r) if r.increase + delta <= 0 => {
                self.requests.remove(group);
            }
            Some(r) => {
                r.increase += delta;
                if delta > 0 {
                    r.time = now;
                    r.expected_add_time = due;
                }
            }
        }
    }

    /// upstream `registerFailedScaleUpNoLock` → `Backoff`: `group` is backed off from `now`.
    pub fn register_failed_scale_up(&mut self, group: &str, code: FailureCode, now: f64, options: &ResolvedOptions) {
        self.fail(group, code, code.message(group, 0.0), now, options);
    }

    fn fail(&mut self, group: &str, code: FailureCode, message: String, now: f64, options: &ResolvedOptions) {
        let mut duration = options.initial_node_group_backoff_seconds;
        if let Some(b) = self.backoff.get(group) {
            // Failures of scale-ups that overlap do not lengthen it.
            if b.until < now {
                duration = (2.0 * b.duration).min(options.max_node_group_backoff_seconds);
            } else {
                duration = b.duration;
            }
        }
        let backoff = Backoff { duration, until: now + duration, last_failure: now, code, message };
        self.backoff.insert(group.to_string(), backoff);
    }

    /// upstream `UpdateNodes`' request bookkeeping (`updateScaleRequests`): done requests leave,
    /// timed-out ones fail and lower their group's target. The caller applies the new targets.
    pub fn update(&mut self, groups: &[GroupCounts], now: f64, options: &ResolvedOptions) -> Vec<TimedOut> {
        let reset = options.node_group_backoff_reset_seconds;
        self.backoff.retain(|_, b| b.last_failure + reset >= now);
        let mut timed_out = Vec::new();
        for g in groups {
            let Some(request) = self.requests.get(g.name).copied() else { continue };
            // upstream `areThereUpcomingNodesInNodeGroup`: target above what registered and started.
            let provisioned = g.readiness.registered() - g.readiness.not_started;
            if g.target <= provisioned {
                self.requests.remove(g.name);
                continue;
            }
            if request.expected_add_time < now {
                // The instances that never joined go; nodes registered and still starting stay
                // (see `TimedOut::target`).
                timed_out.push(TimedOut {
                    group: g.name.to_string(),
                    after_seconds: now - request.time,
                    target: g.readiness.registered().min(g.target),
                });
                let message = FailureCode::Timeout.message(g.name, now - request.time);
                self.fail(g.name, FailureCode::Timeout, message, now, options);
                self.requests.remove(g.name);
            }
        }
        timed_out
    }

    /// upstream `IsNodeGroupScalingUp`.
    pub fn scaling_up(&self, group: &GroupCounts) -> bool {
        let provisioned = group.readiness.registered() - group.readiness.not_started;
        group.target > provisioned && self.requests.contains_key(group.name)
    }

    pub fn request(&self, group: &str) -> Option<&ScaleUpRequest> {
        self.requests.get(group)
    }

    /// The backoff in force at `now`: until when, and why.
    pub fn backed_off(&self, group: &str, now: f64) -> Option<(f64, FailureCode)> {
        self.backoff.get(group).filter(|b| b.until > now).map(|b| (b.until, b.code))
    }

    /// The backoff in force at `now` with upstream's error message.
    pub fn backoff_status(&self, group: &str, now: f64) -> Option<(f64, FailureCode, String)> {
        self.backoff.get(group).filter(|b| b.until > now).map(|b| (b.until, b.code, b.message.clone()))
    }

    /// upstream `IsNodeGroupHealthy`, with the acceptable range's minimum: the target less the
    /// long-unregistered nodes and the scale-up in flight.
    pub fn healthy(&self, group: &GroupCounts) -> bool {
        let in_flight = self.requests.get(group.name).map_or(0, |r| r.increase);
        let min_nodes = group.target - group.readiness.long_unregistered - in_flight;
        let r = group.readiness;
        let unjustified = (min_nodes - r.ready).max(0);
        let registered = (r.ready + r.unready + r.not_started) as f64;
        !(unjustified > OK_TOTAL_UNREADY_COUNT
            && unjustified as f64 > MAX_TOTAL_UNREADY_PERCENTAGE / 100.0 * registered)
    }

    /// upstream `NodeGroupScaleUpSafety`.
    pub fn safety(&self, group: &GroupCounts, now: f64) -> Safety {
        if !self.healthy(group) {
            Safety::Unhealthy
        } else if self.backed_off(group.name, now).is_some() {
            Safety::BackedOff
        } else {
            Safety::Safe
        }
    }

    /// upstream `GetUpcomingNodes`: template copies the next loop counts as capacity.
    pub fn upcoming(&self, group: &GroupCounts, now: f64) -> i64 {
        if !self.requests.contains_key(group.name) || self.backed_off(group.name, now).is_some() {
            return 0;
        }
        let r = group.readiness;
        (group.target - (r.ready + r.unready + r.long_unregistered)).max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::clusterautoscaler::ClusterAutoscalerOptions;

    fn options() -> ResolvedOptions {
        ClusterAutoscalerOptions::default().resolved()
    }

    fn counts(target: i64, ready: i64, not_started: i64) -> GroupCounts<'static> {
        GroupCounts { name: "general", target, readiness: Readiness { ready, not_started, ..Default::default() } }
    }

    #[test]
    fn a_scale_up_is_upcoming_until_its_nodes_start_and_done_when_they_have() {
        let (mut state, o) = (ClusterState::default(), options());
        assert_eq!(state.upcoming(&counts(3, 0, 0), 0.0), 0, "no request: nothing upcoming");
        state.register_scale_up("general", 3, 0.0, &o);
        assert_eq!(state.request("general").map(|r| r.expected_add_time), Some(900.0));
        // Registered but not started: still upcoming (they stand in for them).
        assert_eq!(state.update(&[counts(3, 1, 2)], 100.0, &o), []);
        assert_eq!(state.upcoming(&counts(3, 1, 2), 100.0), 2);
        assert!(state.scaling_up(&counts(3, 1, 2)));
        // A second scale-up adds to the request and moves its due time.
        state.register_scale_up("general", 2, 200.0, &o);
        assert_eq!(
            state.request("general").copied(),
            Some(ScaleUpRequest { increase: 5, time: 200.0, expected_add_time: 1100.0 })
        );
        // All five started: done.
        assert_eq!(state.update(&[counts(5, 5, 0)], 300.0, &o), []);
        assert_eq!(state.request("general"), None);
        assert_eq!(state.upcoming(&counts(5, 5, 0), 300.0), 0);
    }

    #[test]
    fn a_scale_up_past_its_provision_time_fails_backs_off_and_lowers_the_target() {
        let (mut state, o) = (ClusterState::default(), options());
        state.register_scale_up("general", 3, 0.0, &o);
        assert_eq!(state.update(&[counts(3, 1, 0)], 900.0, &o), [], "due at 900: not past it");
        // One registered but still starting: it stays in the target.
        let mut other = state.clone();
        assert_eq!(other.update(&[counts(3, 1, 1)], 910.0, &o)[0].target, 2);
        let timed_out = state.update(&[counts(3, 1, 0)], 910.0, &o);
        assert_eq!(timed_out, [TimedOut { group: "general".into(), after_seconds: 910.0, target: 1 }]);
        assert_eq!(timed_out[0].message(), "Nodes added to group general failed to register within 15m10s");
        assert_eq!(state.backed_off("general", 911.0), Some((1210.0, FailureCode::Timeout)));
        assert_eq!(state.safety(&counts(1, 1, 0), 911.0), Safety::BackedOff);
        assert_eq!(state.upcoming(&counts(3, 1, 0), 911.0), 0, "no request, and backed off");
        assert_eq!(state.safety(&counts(1, 1, 0), 1210.0), Safety::Safe, "the backoff has passed");
    }

    #[test]
    fn backoff_doubles_after_it_ends_up_to_the_max_and_is_forgotten_after_three_hours() {
        let (mut state, o) = (ClusterState::default(), options());
        let until = |s: &ClusterState, now| s.backed_off("general", now).map(|(u, _)| u - now);
        state.register_failed_scale_up("general", FailureCode::OutOfResources, 0.0, &o);
        assert_eq!(until(&state, 0.0), Some(300.0));
        // Within the backoff: the same five minutes again.
        state.register_failed_scale_up("general", FailureCode::OutOfResources, 100.0, &o);
        assert_eq!(until(&state, 100.0), Some(300.0));
        // After it: 10, 20, then 30 minutes (the max).
        let mut now = 1000.0;
        for expected in [600.0, 1200.0, 1800.0, 1800.0] {
            state.register_failed_scale_up("general", FailureCode::OutOfResources, now, &o);
            assert_eq!(until(&state, now), Some(expected), "at {now}");
            now += expected + 1.0;
        }
        // Three hours after the last failure the history is gone: five minutes again.
        let last = now - 1801.0;
        state.update(&[], last + 3.0 * 3600.0 + 1.0, &o);
        state.register_failed_scale_up("general", FailureCode::OutOfResources, last + 3.0 * 3600.0 + 2.0, &o);
        assert_eq!(until(&state, last + 3.0 * 3600.0 + 2.0), Some(300.0));
    }

    #[test]
    fn a_group_missing_many_ready_nodes_is_unhealthy_unless_they_are_being_added() {
        let (mut state, o) = (ClusterState::default(), options());
        let unready = |target, ready, unready| GroupCounts {
            name: "general",
            target,
            readiness: Readiness { ready, unready, ..Default::default() },
        };
        assert!(state.healthy(&unready(10, 7, 3)), "3 missing: within the count");
        assert!(!state.healthy(&unready(10, 4, 6)), "6 missing: more than 3, and than 45 % of 10 registered");
        assert!(state.healthy(&unready(10, 6, 4)), "4 missing: under 45 % of 10");
        assert!(state.healthy(&unready(20, 16, 4)), "4 of 20 is under 45 %");
        state.register_scale_up("general", 4, 0.0, &o);
        assert!(state.healthy(&unready(10, 6, 0)), "the four are on their way");
    }
}
