//! The simulated clock: milliseconds since the scenario's start. Core never reads the wall clock;
//! the start instant (for timestamps written on objects) comes from the Scenario's `startTime` or
//! from the caller.

use std::fmt;

use serde::{Serialize, Serializer};

/// When no start instant is given: a fixed, documented instant (docs/scenario.md), so that runs
/// are reproducible.
pub const DEFAULT_START: &str = "2026-01-05T09:00:00Z";

/// A point in simulated time, in milliseconds after the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SimTime(pub u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);

    pub fn from_secs(s: u64) -> SimTime {
        SimTime(s * 1000)
    }

    pub fn millis(self) -> u64 {
        self.0
    }

    pub fn secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    pub fn plus(self, d: Duration) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }

    /// `self − earlier` (0 if `earlier` is later).
    pub fn since(self, earlier: SimTime) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

/// A span of simulated time in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub u64);

impl Duration {
    pub const fn secs(s: u64) -> Duration {
        Duration(s * 1000)
    }

    pub const fn millis(ms: u64) -> Duration {
        Duration(ms)
    }

    pub const fn mins(m: u64) -> Duration {
        Duration(m * 60_000)
    }

    /// A step that never happens (a Scenario timing of `Never`).
    pub const NEVER: Duration = Duration(u64::MAX);
}

/// Go's `time.Duration.String()`: `0s`, `500ms`, `1.5s`, `1m30s`, `30m0s`, `1h30m0s`.
fn write_span(f: &mut fmt::Formatter<'_>, ms: u64) -> fmt::Result {
    if ms == 0 {
        return f.write_str("0s");
    }
    if ms < 1000 {
        return write!(f, "{ms}ms");
    }
    let (h, rest) = (ms / 3_600_000, ms % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let (s, milli) = (rest / 1000, rest % 1000);
    if h > 0 {
        write!(f, "{h}h{m}m")?;
    } else if m > 0 {
        write!(f, "{m}m")?;
    }
    if milli == 0 {
        write!(f, "{s}s")
    } else {
        let frac = format!("{milli:03}");
        write!(f, "{s}.{}s", frac.trim_end_matches('0'))
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("+")?;
        write_span(f, self.0)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Duration::NEVER {
            return f.write_str("Never");
        }
        write_span(f, self.0)
    }
}

impl Serialize for SimTime {
    /// The duration since the start, as Go prints it (`1m2s`).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&Duration(self.0))
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The wall-clock side of the simulation: the start instant, for timestamps on objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// Seconds since the Unix epoch at [`SimTime::ZERO`].
    pub start_epoch: i64,
}

impl Clock {
    /// `start` as RFC 3339 (`None`: [`DEFAULT_START`]).
    pub fn new(start: Option<&str>) -> Option<Clock> {
        let text = start.unwrap_or(DEFAULT_START);
        crate::api::time::parse_time(text).map(|start_epoch| Clock { start_epoch })
    }

    /// Seconds since the epoch at `t`.
    pub fn epoch_seconds(&self, t: SimTime) -> i64 {
        self.start_epoch + (t.0 / 1000) as i64
    }

    /// `t` as an RFC 3339 timestamp (whole seconds, as the API server writes them).
    pub fn rfc3339(&self, t: SimTime) -> String {
        crate::api::time::format_time(self.epoch_seconds(t))
    }

    /// `t` as a Kubernetes `Time`.
    pub fn time(&self, t: SimTime) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(self.epoch_seconds(t)).unwrap_or_default(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_print_like_go() {
        assert_eq!(Duration::millis(0).to_string(), "0s");
        assert_eq!(Duration::millis(250).to_string(), "250ms");
        assert_eq!(Duration::millis(90_000).to_string(), "1m30s");
        assert_eq!(Duration::millis(1_800_000).to_string(), "30m0s");
        assert_eq!(Duration::millis(5_400_000).to_string(), "1h30m0s");
        assert_eq!(Duration::millis(1_500).to_string(), "1.5s");
        assert_eq!(SimTime(61_250).to_string(), "+1m1.25s");
        assert_eq!(serde_json::to_string(&SimTime(1_800_000)).unwrap(), "\"30m0s\"");
    }

    #[test]
    fn timestamps_follow_the_start() {
        let c = Clock::new(Some("2026-12-01T10:00:00Z")).unwrap();
        assert_eq!(c.rfc3339(SimTime::from_secs(90)), "2026-12-01T10:01:30Z");
        assert_eq!(Clock::new(None).unwrap().rfc3339(SimTime::ZERO), DEFAULT_START);
        assert!(Clock::new(Some("yesterday")).is_none());
    }
}
