//! Disruption budgets (upstream `pkg/apis/v1/nodepool.go::GetAllowedDisruptionsByReason`,
//! `helpers.go::BuildDisruptionBudgetMapping`).
//!
//! - A budget without `schedule` is always active; with one, it is active while the last cron hit
//!   (UTC) is at most `duration` ago (upstream: the next hit after `now − duration` is not after
//!   `now`).
//! - An active budget allows its integer, or `ceil(percent × nodes)`; an inactive one does not
//!   limit; one that cannot be parsed allows 0 (fail closed).
//! - A NodePool allows, for a reason, the minimum over the budgets whose `reasons` are empty or
//!   contain it; minus the nodes already disrupting, floored at 0.

use serde::Serialize;

use crate::api::cron::CronSchedule;
use crate::api::nodepool::{Budget, BudgetReason, NodePool};

/// What one budget allows now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetStatus {
    /// Index in `spec.disruption.budgets`.
    pub index: usize,
    pub nodes: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    pub active: bool,
    /// Nodes it allows to disrupt at once (`None`: no limit, inactive).
    pub allows: Option<i64>,
    /// While active with a schedule: when the window ends (epoch seconds; RFC 3339 in JSON).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "rfc3339_opt")]
    pub window_ends: Option<i64>,
    /// Set when the budget cannot be read (it then allows 0); its text in JSON.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "crate::style::option_as_text")]
    pub error: Option<BudgetError>,
}

/// Why a budget cannot be read (the API server rejects such budgets; a snapshot or an old object
/// may still hold one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error(transparent)]
    Schedule(#[from] crate::api::cron::CronError),
    #[error("{0:?} is not a percentage")]
    NotAPercentage(String),
    #[error("{0:?} is not a number of nodes")]
    NotANumber(String),
}

/// The allowance of a NodePool for one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Allowance {
    pub reason: BudgetReason,
    /// Nodes of the NodePool counted (managed, initialized, not terminating).
    pub nodes: i64,
    /// Nodes of the NodePool being disrupted now.
    pub disrupting: i64,
    /// max(min over the applying budgets − disrupting, 0).
    pub allowed: i64,
    /// The budget that sets the minimum (`None`: no budget limits this reason).
    pub binding: Option<usize>,
    pub budgets: Vec<BudgetStatus>,
}

const MINUTE: i64 = 60;

/// Budget windows are calendar times: JSON shows them as users write schedules, in UTC.
fn rfc3339<S: serde::Serializer>(t: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::api::time::format_time(*t))
}

fn rfc3339_opt<S: serde::Serializer>(t: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => rfc3339(t, s),
        None => s.serialize_none(),
    }
}

/// The minute-resolution UTC calendar fields of `t` (epoch seconds): minute, hour, day of month,
/// month, day of week (Sunday = 0).
fn fields(t: i64) -> (u32, u32, u32, u32, u32) {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let _ = y;
    let weekday = (days + 4).rem_euclid(7) as u32; // 1970-01-01 was a Thursday
    ((secs / 60 % 60) as u32, (secs / 3600) as u32, d, m, weekday)
}

/// Howard Hinnant's days → (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn hit(schedule: &CronSchedule, t: i64) -> bool {
    let (mi, h, dom, mo, dow) = fields(t);
    schedule.matches(mi, h, dom, mo, dow)
}

/// The last cron hit at or before `now` within `lookback` seconds (epoch seconds, minute-aligned).
fn last_hit(schedule: &CronSchedule, now: i64, lookback: i64) -> Option<i64> {
    let mut t = now - now.rem_euclid(MINUTE);
    let earliest = now - lookback;
    while t >= earliest {
        if hit(schedule, t) {
            return Some(t);
        }
        t -= MINUTE;
    }
    None
}

/// The next cron hit strictly after `after`, within `horizon` seconds.
pub fn next_hit(schedule: &CronSchedule, after: i64, horizon: i64) -> Option<i64> {
    let mut t = after - after.rem_euclid(MINUTE) + MINUTE;
    while t <= after + horizon {
        if hit(schedule, t) {
            return Some(t);
        }
        t += MINUTE;
    }
    None
}

/// `nodes` of a budget as a count of `total` nodes (percentages rounded up).
fn scaled(nodes: &str, total: i64) -> Result<i64, BudgetError> {
    if let Some(pct) = nodes.strip_suffix('%') {
        let p: i64 = pct.parse().map_err(|_| BudgetError::NotAPercentage(nodes.to_string()))?;
        return Ok((p * total + 99) / 100);
    }
    nodes.parse::<i64>().map_err(|_| BudgetError::NotANumber(nodes.to_string()))
}

/// One budget at `now` (epoch seconds) for a NodePool of `total` nodes.
pub fn status(index: usize, b: &Budget, total: i64, now: i64) -> BudgetStatus {
    let mut out = BudgetStatus {
        index,
        nodes: b.nodes.clone(),
        schedule: b.schedule.clone(),
        active: true,
        allows: None,
        window_ends: None,
        error: None,
    };
    if let Some(text) = &b.schedule {
        let schedule = match CronSchedule::parse(text) {
            Ok(s) => s,
            Err(e) => {
                out.error = Some(e.into());
                out.allows = Some(0);
                return out;
            }
        };
        let duration = b.duration.as_ref().map_or(0, |d| d.as_seconds() as i64);
        match last_hit(&schedule, now, duration) {
            // upstream: active while now < hit + duration.
            Some(h) if now < h + duration => out.window_ends = Some(h + duration),
            _ => {
                out.active = false;
                return out;
            }
        }
    }
    match scaled(&b.nodes, total) {
        Ok(n) => out.allows = Some(n),
        Err(e) => {
            out.error = Some(e);
            out.allows = Some(0);
        }
    }
    out
}

/// What a NodePool allows for `reason` at `now`, given its counted nodes and those disrupting.
pub fn allowance(np: &NodePool, reason: BudgetReason, nodes: i64, disrupting: i64, now: i64) -> Allowance {
    let budgets: Vec<BudgetStatus> = np
        .spec
        .disruption
        .budgets
        .iter()
        .enumerate()
        .filter(|(_, b)| b.reasons.is_empty() || b.reasons.contains(&reason))
        .map(|(i, b)| status(i, b, nodes, now))
        .collect();
    let binding = budgets.iter().filter(|b| b.allows.is_some()).min_by_key(|b| b.allows).map(|b| b.index);
    let min = budgets.iter().filter_map(|b| b.allows).min();
    let allowed = match min {
        Some(m) => (m - disrupting).max(0),
        None => i64::from(i32::MAX),
    };
    Allowance { reason, nodes, disrupting, allowed, binding, budgets }
}

/// A stretch of time over which a NodePool's allowances stay the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetSegment {
    /// Epoch seconds, inclusive (RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    pub from: i64,
    /// Epoch seconds, exclusive (RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    pub to: i64,
    /// Nodes that may be disrupted at once for each reason (`None`: no budget limits it), for the
    /// NodePool's node count and disrupting nodes now.
    pub empty: Option<i64>,
    pub drifted: Option<i64>,
    pub underutilized: Option<i64>,
}

/// The NodePool's allowances from `now` to `now + horizon` (epoch seconds), split where a
/// scheduled budget's window opens or closes and merged where nothing changes. Counts are for the
/// `nodes` counted and `disrupting` now (percentages of a NodePool that grows allow more).
pub fn timeline(np: &NodePool, nodes: i64, disrupting: i64, now: i64, horizon: i64) -> Vec<BudgetSegment> {
    let end = now + horizon;
    let mut cuts = vec![now, end];
    for b in &np.spec.disruption.budgets {
        let Some(schedule) = b.schedule.as_deref().and_then(|s| CronSchedule::parse(s).ok()) else { continue };
        let duration = b.duration.as_ref().map_or(0, |d| d.as_seconds() as i64);
        // Windows that opened before `now` may close inside the horizon.
        let mut after = now - duration - MINUTE;
        while let Some(hit) = next_hit(&schedule, after, end - after) {
            for t in [hit, hit + duration] {
                if t > now && t < end {
                    cuts.push(t);
                }
            }
            after = hit;
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    let limit = |reason, t| {
        let a = allowance(np, reason, nodes, disrupting, t);
        a.binding.map(|_| a.allowed)
    };
    let mut out: Vec<BudgetSegment> = Vec::new();
    for pair in cuts.windows(2) {
        let (from, to) = (pair[0], pair[1]);
        let segment = BudgetSegment {
            from,
            to,
            empty: limit(BudgetReason::Empty, from),
            drifted: limit(BudgetReason::Drifted, from),
            underutilized: limit(BudgetReason::Underutilized, from),
        };
        match out.last_mut() {
            Some(last)
                if (last.empty, last.drifted, last.underutilized)
                    == (segment.empty, segment.drifted, segment.underutilized) =>
            {
                last.to = to
            }
            _ => out.push(segment),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn np(budgets: &str) -> NodePool {
        let text = format!(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: np}}\nspec:\n  disruption:\n    budgets: {budgets}\n  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n      requirements: []\n"
        );
        crate::manifest::load(&text).unwrap().nodepools.remove(0)
    }

    fn at(text: &str) -> i64 {
        crate::api::time::parse_time(text).unwrap()
    }

    #[test]
    fn percentages_round_up_and_the_minimum_wins() {
        let p = np("[{nodes: \"10%\"}, {nodes: \"3\", reasons: [Drifted]}]");
        let now = at("2026-12-01T10:00:00Z");
        let a = allowance(&p, BudgetReason::Underutilized, 5, 0, now);
        assert_eq!((a.allowed, a.binding), (1, Some(0)), "10% of 5 rounds up to 1");
        let a = allowance(&p, BudgetReason::Drifted, 50, 0, now);
        assert_eq!((a.allowed, a.binding), (3, Some(1)));
        let a = allowance(&p, BudgetReason::Drifted, 50, 2, now);
        assert_eq!(a.allowed, 1, "nodes already disrupting count");
        let a = allowance(&p, BudgetReason::Empty, 0, 0, now);
        assert_eq!(a.allowed, 0);
    }

    #[test]
    fn a_weekday_business_hours_window_blocks() {
        // The seed use case: 5% always, 0 during weekdays 09:00–17:00 UTC.
        let p = np("[{nodes: \"5%\"}, {schedule: \"0 9 * * mon-fri\", duration: 8h, nodes: \"0\"}]");
        // 2026-12-01 is a Tuesday.
        let a = allowance(&p, BudgetReason::Underutilized, 40, 0, at("2026-12-01T10:00:00Z"));
        assert_eq!((a.allowed, a.binding), (0, Some(1)));
        assert_eq!(a.budgets[1].window_ends, Some(at("2026-12-01T17:00:00Z")));
        let a = allowance(&p, BudgetReason::Underutilized, 40, 0, at("2026-12-01T20:00:00Z"));
        assert_eq!((a.allowed, a.binding), (2, Some(0)), "5% of 40");
        assert!(!a.budgets[1].active);
        // Saturday 10:00: no window.
        let a = allowance(&p, BudgetReason::Underutilized, 40, 0, at("2026-12-05T10:00:00Z"));
        assert_eq!(a.allowed, 2);
        // The window's edge: active at 16:59, not at 17:00.
        assert_eq!(allowance(&p, BudgetReason::Empty, 40, 0, at("2026-12-01T16:59:00Z")).allowed, 0);
        assert_eq!(allowance(&p, BudgetReason::Empty, 40, 0, at("2026-12-01T17:00:00Z")).allowed, 2);
    }

    #[test]
    fn the_week_ahead_shows_each_business_day_window() {
        let p = np("[{nodes: \"5%\"}, {schedule: \"0 9 * * mon-fri\", duration: 8h, nodes: \"0\"}]");
        // Tuesday 10:00, inside the window; 40 nodes → 5% allows 2 outside it.
        let now = at("2026-12-01T10:00:00Z");
        let t = timeline(&p, 40, 0, now, 7 * 86_400);
        let shown: Vec<(String, Option<i64>)> =
            t.iter().map(|s| (crate::api::time::format_time(s.from), s.underutilized)).collect();
        let expected = [
            ("2026-12-01T10:00:00Z", 0),
            ("2026-12-01T17:00:00Z", 2),
            ("2026-12-02T09:00:00Z", 0),
            ("2026-12-02T17:00:00Z", 2),
            ("2026-12-03T09:00:00Z", 0),
            ("2026-12-03T17:00:00Z", 2),
            ("2026-12-04T09:00:00Z", 0),
            ("2026-12-04T17:00:00Z", 2),
            // The weekend is open; Monday's window, then Tuesday's (cut at the horizon).
            ("2026-12-07T09:00:00Z", 0),
            ("2026-12-07T17:00:00Z", 2),
            ("2026-12-08T09:00:00Z", 0),
        ];
        let expected: Vec<(String, Option<i64>)> = expected.iter().map(|(t, n)| (t.to_string(), Some(*n))).collect();
        assert_eq!(shown, expected);
        assert_eq!(t.last().unwrap().to, now + 7 * 86_400);
        assert!(t.windows(2).all(|w| w[0].to == w[1].from));
        // A NodePool without budgets limits nothing.
        let open = timeline(&np("[]"), 40, 0, now, 86_400);
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].empty, None);
    }

    #[test]
    fn calendar_fields_are_utc() {
        assert_eq!(fields(at("2026-12-01T10:07:00Z")), (7, 10, 1, 12, 2));
        assert_eq!(fields(at("2024-02-29T23:59:00Z")), (59, 23, 29, 2, 4));
        let s = CronSchedule::parse("@daily").unwrap();
        assert_eq!(next_hit(&s, at("2026-12-01T10:00:00Z"), 86_400 * 2), Some(at("2026-12-02T00:00:00Z")));
    }
}
