//! How often the AWS provider asks the cloud again (upstream karpenter-provider-aws v1.14.1
//! `pkg/controllers/providers/{instancetype,pricing,version}/controller.go` and
//! `pkg/cache/cache.go`): the cadences of the lookups whose answers the controller caches.

/// upstream `providers.instancetype` and `providers.pricing`: `RequeueAfter: 12 * time.Hour`.
pub const INSTANCE_TYPES_REFRESH_SECONDS: u64 = 12 * 60 * 60;

/// upstream `providers.version`: the API server's Kubernetes version read again every 5 minutes.
pub const VERSION_REFRESH_SECONDS: u64 = 5 * 60;

/// upstream `cache.DefaultTTL`: a NodeClass's subnets, security groups and AMIs, and the
/// cluster facts its nodes' bootstrap needs, are looked up again after a minute.
pub const LOOKUP_TTL_SECONDS: u64 = 60;

/// upstream's singleton controllers (`singleton.AsReconciler`) requeue a failed refresh through
/// an exponential failure rate limiter: after 1 ms, doubling with each failure, at most 1000 s.
const REFRESH_RETRY_BASE_MILLIS: u64 = 1;
const REFRESH_RETRY_MAX_MILLIS: u64 = 1_000_000;

/// How long to wait before a failed refresh is tried again, after a wait of `previous` (none: the
/// first failure), in milliseconds.
pub fn refresh_retry_millis(previous: Option<u64>) -> u64 {
    previous.map_or(REFRESH_RETRY_BASE_MILLIS, |p| p.saturating_mul(2).min(REFRESH_RETRY_MAX_MILLIS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_refresh_backs_off_from_a_millisecond_to_upstreams_1000_seconds() {
        let mut waits = vec![refresh_retry_millis(None)];
        while waits.len() < 25 {
            waits.push(refresh_retry_millis(waits.last().copied()));
        }
        assert_eq!(&waits[..4], [1, 2, 4, 8]);
        assert!(waits.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(waits[24], 1_000_000);
        assert_eq!(refresh_retry_millis(Some(u64::MAX)), 1_000_000);
    }
}
