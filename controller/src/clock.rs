//! The adapter's clock: core reads none, so every decision gets `now` from here.

/// Now, in whole seconds since the Unix epoch.
pub fn now_seconds() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Now, RFC 3339 in whole seconds (UTC), as conditions and snapshots carry it.
pub fn now_rfc3339() -> String {
    carpentry_core::api::time::format_time(now_seconds())
}
