//! How long upstream's controllers wait before reconciling an object again after a failed
//! reconcile: client-go `util/workqueue`'s `ItemExponentialFailureRateLimiter`, with the base and
//! ceiling each controller configures. The wait doubles with each failure of the same object and
//! starts over after a success (the queue's `Forget`).
//!
//! The limiter is the larger of two in upstream (a per-object exponential one and a queue-wide
//! token bucket of 10 a second, burst 100); only the per-object one is modelled: the bucket only
//! slows a queue retrying more than a hundred objects at once.

/// A per-object exponential failure rate limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimiter {
    /// The wait after the first failure, in milliseconds.
    pub base_millis: u64,
    /// The longest wait, in milliseconds.
    pub max_millis: u64,
}

/// awslabs/operatorpkg `reasonable.RateLimiter()` (100 ms doubling to a minute): what upstream's
/// AWS controllers use, the EC2NodeClass controller among them
/// (karpenter-provider-aws v1.14.1 `pkg/controllers/nodeclass/controller.go` `Register`).
pub const REASONABLE: RateLimiter = RateLimiter { base_millis: 100, max_millis: 60_000 };

/// controller-runtime's default for a controller that sets none
/// (`workqueue.DefaultTypedControllerRateLimiter`: 5 ms doubling to 1000 s).
pub const CONTROLLER_RUNTIME_DEFAULT: RateLimiter = RateLimiter { base_millis: 5, max_millis: 1_000_000 };

impl RateLimiter {
    /// The wait before the next reconcile of an object whose last `failures` reconciles failed
    /// in a row (at least 1: the one just failed), in milliseconds.
    pub fn wait_millis(&self, failures: u32) -> u64 {
        let doublings = failures.saturating_sub(1).min(63);
        self.base_millis.saturating_mul(1u64 << doublings).min(self.max_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_the_base_to_the_ceiling() {
        let waits: Vec<u64> = (1..=12).map(|n| REASONABLE.wait_millis(n)).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600, 51_200, 60_000, 60_000]);
        assert_eq!(CONTROLLER_RUNTIME_DEFAULT.wait_millis(1), 5);
        assert_eq!(CONTROLLER_RUNTIME_DEFAULT.wait_millis(18), 655_360);
        assert_eq!(CONTROLLER_RUNTIME_DEFAULT.wait_millis(19), 1_000_000);
        // A count that would overflow the shift stays at the ceiling.
        assert_eq!(REASONABLE.wait_millis(u32::MAX), 60_000);
        assert_eq!(REASONABLE.wait_millis(0), 100);
    }
}
