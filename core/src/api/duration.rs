//! Durations as the Karpenter API spells them.
//!
//! upstream: `pkg/apis/v1/duration.go` (`NillableDuration`) and `metav1.Duration`. Both are parsed with Go's
//! `time.ParseDuration` grammar (`1h30m`, `1.5h`, `300ms`, `-2m`, `0`); the CRD patterns then narrow what the API
//! server accepts (`^([0-9]+(s|m|h))+$`, plus `Never` for the nillable kind). We parse the full Go grammar when
//! loading, so that a value the API server would reject by pattern (say `1.5h`) reaches validation and is reported
//! with its path, while text Go cannot parse at all (`1d`, `forever`) fails to load, as upstream's unmarshaller does.
//!
//! Both types keep the text they were loaded from, so printing a loaded object shows what the user wrote (`60m`
//! stays `60m`), as `kubectl get -o yaml` does.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The literal that disables a nillable duration.
pub const NEVER: &str = "Never";

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// Why a text is not a Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {reason} (expected for example \"720h\", \"1h30m\" or \"30s\")")]
pub struct DurationError {
    pub text: String,
    pub reason: &'static str,
}

/// Parses Go's `time.ParseDuration` grammar into nanoseconds: an optional sign, then one or more
/// `<decimal><unit>` pairs with unit `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m` or `h`; the bare `0` is allowed.
pub fn parse_go_duration(text: &str) -> Result<i64, DurationError> {
    let err = |reason| DurationError { text: text.to_string(), reason };
    let mut s = text;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(err("empty duration"));
    }
    // Accumulate in i128 nanoseconds, then check the i64 range as Go does.
    let mut total: i128 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, rest) = s.split_at(int_len);
        let (frac_part, rest) = match rest.strip_prefix('.') {
            Some(after_dot) => {
                let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
                after_dot.split_at(frac_len)
            }
            None => ("", rest),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("expected a number"));
        }
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let (unit, rest) = rest.split_at(unit_len);
        let unit_nanos: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "" => return Err(err("missing unit (one of ns, us, ms, s, m, h)")),
            _ => return Err(err("unknown unit (expected one of ns, us, ms, s, m, h)")),
        };
        if int_part.len() > 30 {
            return Err(err("value out of range"));
        }
        let int_value: i128 =
            if int_part.is_empty() { 0 } else { int_part.parse().map_err(|_| err("value out of range"))? };
        let mut component = int_value.checked_mul(unit_nanos).ok_or_else(|| err("value out of range"))?;
        // Fractions are truncated to whole nanoseconds, as Go does.
        let mut scale: i128 = 1;
        let mut frac_value: i128 = 0;
        for digit in frac_part.bytes().take(18) {
            scale *= 10;
            frac_value = frac_value * 10 + i128::from(digit - b'0');
        }
        if !frac_part.is_empty() {
            component += frac_value * unit_nanos / scale;
        }
        total = total.checked_add(component).ok_or_else(|| err("value out of range"))?;
        if total > i128::from(i64::MAX) + i128::from(negative) {
            return Err(err("value out of range"));
        }
        s = rest;
    }
    let signed = if negative { -total } else { total };
    i64::try_from(signed).map_err(|_| err("value out of range"))
}

/// Go's `Duration.String()`: `72h0m0s`, `1m30s`, `1.5s`, `300ms`, `0s`.
pub fn format_go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_string();
    }
    let negative = nanos < 0;
    let abs = nanos.unsigned_abs();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if abs < NANOS_PER_SECOND as u64 {
        let (value, unit) = if abs < 1_000 {
            (abs as f64, "ns")
        } else if abs < 1_000_000 {
            (abs as f64 / 1e3, "µs")
        } else {
            (abs as f64 / 1e6, "ms")
        };
        out.push_str(&trim_float(value));
        out.push_str(unit);
        return out;
    }
    let hours = abs / 3_600_000_000_000;
    let minutes = (abs / 60_000_000_000) % 60;
    let seconds_nanos = abs % 60_000_000_000;
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&trim_float(seconds_nanos as f64 / 1e9));
    out.push('s');
    out
}

fn trim_float(value: f64) -> String {
    let text = format!("{value:.9}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
}

/// True if `text` matches `^([0-9]+(s|m|h))+$`: whole numbers of hours, minutes and seconds.
pub fn matches_hms_pattern(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.is_empty() {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i == start || i == bytes.len() || !matches!(bytes[i], b's' | b'm' | b'h') {
            return false;
        }
        i += 1;
    }
    true
}

/// True if `text` matches the budget duration pattern `^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`: hours or
/// minutes, or hours then minutes, optionally followed by `0s` (Go prints durations with a trailing `0s`).
pub fn matches_budget_duration_pattern(text: &str) -> bool {
    let body = text.strip_suffix("0s").filter(|b| !b.is_empty() && !b.ends_with(|c: char| c.is_ascii_digit()));
    let body = body.unwrap_or(text);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(n) = body.strip_suffix('h') {
        return digits(n);
    }
    if let Some(rest) = body.strip_suffix('m') {
        return match rest.split_once('h') {
            Some((h, m)) => digits(h) && digits(m),
            None => digits(rest),
        };
    }
    false
}

/// A duration or `Never` (upstream `NillableDuration`), used by `expireAfter` and `consolidateAfter`.
///
/// The text is kept verbatim for printing; the value is Go's parse of it. Equality compares the text.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct NillableDuration {
    text: String,
    /// `None` means `Never`.
    nanos: Option<i64>,
}

impl NillableDuration {
    /// `Never`.
    pub fn never() -> Self {
        NillableDuration { text: NEVER.to_string(), nanos: None }
    }

    /// A whole number of seconds, spelled `<n>s` (as conversions from `ttlSeconds…` fields write it).
    pub fn from_seconds(seconds: u64) -> Self {
        let nanos = i64::try_from(seconds).ok().and_then(|s| s.checked_mul(NANOS_PER_SECOND)).unwrap_or(i64::MAX);
        NillableDuration { text: format!("{seconds}s"), nanos: Some(nanos) }
    }

    /// Parses `Never` or a Go duration; the text is kept as given.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        if text == NEVER {
            return Ok(Self::never());
        }
        let nanos = parse_go_duration(text)?;
        Ok(NillableDuration { text: text.to_string(), nanos: Some(nanos) })
    }

    /// True for `Never`.
    pub fn is_never(&self) -> bool {
        self.nanos.is_none()
    }

    /// Whole seconds (fractions truncated, negatives as 0); `None` for `Never`.
    pub fn as_seconds(&self) -> Option<u64> {
        self.nanos.map(|n| (n.max(0) / NANOS_PER_SECOND) as u64)
    }

    /// Nanoseconds as Go holds them; `None` for `Never`.
    pub fn as_nanos(&self) -> Option<i64> {
        self.nanos
    }

    /// The text as loaded or constructed.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True if the text matches the CRD pattern `^(([0-9]+(s|m|h))+|Never)$`.
    pub fn matches_crd_pattern(&self) -> bool {
        self.text == NEVER || matches_hms_pattern(&self.text)
    }

    /// True if both denote the same span (`60m` and `1h`), unlike `==`, which compares the text.
    pub fn same_value(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl fmt::Debug for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NillableDuration({:?})", self.text)
    }
}

impl fmt::Display for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for NillableDuration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for NillableDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for NillableDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        NillableDuration::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A plain duration (upstream `metav1.Duration`), used by `terminationGracePeriod`, budget `duration` and the
/// kubelet's `evictionSoftGracePeriod`. Keeps its text like [`NillableDuration`].
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Duration {
    text: String,
    nanos: i64,
}

impl Duration {
    /// Parses a Go duration; the text is kept as given.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        Ok(Duration { text: text.to_string(), nanos: parse_go_duration(text)? })
    }

    /// A whole number of seconds, spelled `<n>s`.
    pub fn from_seconds(seconds: u64) -> Self {
        let nanos = i64::try_from(seconds).ok().and_then(|s| s.checked_mul(NANOS_PER_SECOND)).unwrap_or(i64::MAX);
        Duration { text: format!("{seconds}s"), nanos }
    }

    /// Whole seconds (fractions truncated, negatives as 0).
    pub fn as_seconds(&self) -> u64 {
        (self.nanos.max(0) / NANOS_PER_SECOND) as u64
    }

    pub fn as_nanos(&self) -> i64 {
        self.nanos
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True if the text matches `^([0-9]+(s|m|h))+$` (the `terminationGracePeriod` pattern).
    pub fn matches_hms_pattern(&self) -> bool {
        matches_hms_pattern(&self.text)
    }

    /// True if the text matches the budget duration pattern (hours and minutes only).
    pub fn matches_budget_pattern(&self) -> bool {
        matches_budget_duration_pattern(&self.text)
    }
}

impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Duration({:?})", self.text)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Duration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Duration::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_go_duration("0").unwrap(), 0);
        assert_eq!(parse_go_duration("0s").unwrap(), 0);
        assert_eq!(parse_go_duration("720h").unwrap(), 720 * 3_600 * NANOS_PER_SECOND);
        assert_eq!(parse_go_duration("1h30m").unwrap(), 5_400 * NANOS_PER_SECOND);
        assert_eq!(parse_go_duration("1.5h").unwrap(), 5_400 * NANOS_PER_SECOND);
        assert_eq!(parse_go_duration("300ms").unwrap(), 300_000_000);
        assert_eq!(parse_go_duration("1µs").unwrap(), 1_000);
        assert_eq!(parse_go_duration("-2m").unwrap(), -120 * NANOS_PER_SECOND);
        assert_eq!(parse_go_duration(".5s").unwrap(), 500_000_000);
        assert_eq!(parse_go_duration("2562047h").unwrap(), 2_562_047 * 3_600 * NANOS_PER_SECOND);
        for bad in ["", "1", "1d", "h", "forever", "1h30", ".s", "1..5s", "2562048h", "-", "1hh"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_go_duration(0), "0s");
        assert_eq!(format_go_duration(72 * 3_600 * NANOS_PER_SECOND), "72h0m0s");
        assert_eq!(format_go_duration(90 * NANOS_PER_SECOND), "1m30s");
        assert_eq!(format_go_duration(1_500_000_000), "1.5s");
        assert_eq!(format_go_duration(300_000_000), "300ms");
    }

    #[test]
    fn nillable_durations_keep_text_and_know_never() {
        let d: NillableDuration = serde_json::from_str(r#""1h30m""#).unwrap();
        assert_eq!(d.as_seconds(), Some(5_400));
        assert_eq!(serde_json::to_string(&d).unwrap(), r#""1h30m""#);
        assert!(d.matches_crd_pattern());

        let never: NillableDuration = serde_json::from_str(r#""Never""#).unwrap();
        assert!(never.is_never());
        assert_eq!(never.as_seconds(), None);
        assert_eq!(serde_json::to_string(&never).unwrap(), r#""Never""#);
        assert!(never.matches_crd_pattern());

        assert_eq!(NillableDuration::parse("0s").unwrap().as_seconds(), Some(0));
        assert_eq!(NillableDuration::parse("720h").unwrap().as_seconds(), Some(2_592_000));
        assert_eq!(NillableDuration::from_seconds(30).as_str(), "30s");

        // Go-parsable but outside the CRD pattern: loads, then fails validation.
        for loose in ["1.5h", "300ms", "-1h", "0"] {
            assert!(!NillableDuration::parse(loose).unwrap().matches_crd_pattern(), "{loose}");
        }
        // Not a duration at all: fails to load.
        for bad in ["never", "1d", "forever", ""] {
            assert!(serde_json::from_str::<NillableDuration>(&format!("{bad:?}")).is_err(), "{bad}");
        }
        assert!(NillableDuration::parse("60m").unwrap().same_value(&NillableDuration::parse("1h").unwrap()));
        assert_ne!(NillableDuration::parse("60m").unwrap(), NillableDuration::parse("1h").unwrap());
    }

    #[test]
    fn patterns() {
        for ok in ["1s", "10m", "720h", "1h30m10s", "0s"] {
            assert!(matches_hms_pattern(ok), "{ok}");
        }
        for bad in ["", "1", "1.5h", "1d", "h", "1hm", "Never", "-1h"] {
            assert!(!matches_hms_pattern(bad), "{bad}");
        }
        for ok in ["10m", "1h", "1h30m", "1h0m0s", "10m0s", "24h0s"] {
            assert!(matches_budget_duration_pattern(ok), "{ok}");
        }
        for bad in ["", "30s", "1h30m10s", "0s", "1h30", "m", "1h2h", "1.5h"] {
            assert!(!matches_budget_duration_pattern(bad), "{bad}");
        }
        let d = Duration::parse("1h30m").unwrap();
        assert!(d.matches_budget_pattern() && d.matches_hms_pattern());
        assert_eq!(d.as_seconds(), 5_400);
    }
}
