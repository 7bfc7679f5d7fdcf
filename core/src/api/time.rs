//! Times as the Kubernetes API writes them (`metav1.Time`: RFC 3339, UTC, whole seconds) and
//! seconds since the epoch, the form every decision in core takes `now` in. Core reads no clock:
//! callers pass the time.

/// Parses an RFC 3339 time into seconds since the epoch.
pub fn parse_time(text: &str) -> Option<i64> {
    text.parse::<k8s_openapi::jiff::Timestamp>().ok().map(|t| t.as_second())
}

/// Seconds since the epoch as RFC 3339 (UTC, whole seconds), as the API server writes times.
pub fn format_time(seconds: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map(|ts| ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_whole_seconds() {
        let t = parse_time("2026-12-01T10:00:00Z").unwrap();
        assert_eq!(format_time(t), "2026-12-01T10:00:00Z");
        assert_eq!(parse_time("2026-12-01T11:00:00+01:00"), Some(t));
        assert_eq!(parse_time("yesterday"), None);
    }
}
