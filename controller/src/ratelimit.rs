//! The client-side rate limit of requests to the API server: upstream's `--kube-client-qps` (200)
//! and `--kube-client-burst` (300) (karpenter v1.14.1 `pkg/operator/options/options.go`, set on
//! the rest config in `pkg/operator/operator.go`), as client-go's token bucket
//! (`flowcontrol.NewTokenBucketRateLimiter`): `burst` requests at once, then `qps` a second.
//!
//! A [`RateLimitLayer`] in kube's client stack. kube's `Client` buffers its service: the buffer's
//! worker asks [`RateLimited::poll_ready`] before each request, which waits for a token, so
//! requests leave in order at the rate and the ones behind wait in the buffer, as client-go's
//! callers wait in `Wait`. Watches count once, when they start (and each list), as in client-go.
//! The leader election's client has none (upstream gives it a config of its own so that a burst of
//! writes cannot delay renewals).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::time::{Instant, Sleep};
use tower_layer::Layer;
use tower_service::Service;

/// A token bucket of `burst` tokens refilled at `qps` a second. Pure: the caller gives the time.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    /// Tokens at `at`; below zero when requests have reserved tokens still to come.
    tokens: f64,
    at: Option<Instant>,
}

impl TokenBucket {
    /// `qps` ≤ 0 means no limit (client-go: a negative QPS disables the limiter).
    pub fn new(qps: f64, burst: u32) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket { qps, burst, tokens: burst, at: None }
    }

    /// Takes a token at `now`: how long the request must wait for it (zero when one is there).
    /// Reservations queue: each one's token comes `1/qps` after the one before.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        if let Some(at) = self.at {
            let refill = now.saturating_duration_since(at).as_secs_f64() * self.qps;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.at = Some(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// Puts a [`TokenBucket`] in front of a client's service, and counts the requests that pass.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    qps: f64,
    burst: u32,
    requests: Counter,
}

impl RateLimitLayer {
    /// `requests` counts each request sent (`carpentry_api_requests_total`).
    pub fn new(qps: f64, burst: u32, requests: Counter) -> RateLimitLayer {
        RateLimitLayer { qps, burst, requests }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        let bucket = TokenBucket::new(self.qps, self.burst);
        RateLimited { inner, bucket, waiting: None, granted: false, requests: self.requests.clone() }
    }
}

/// A service whose requests each wait for a token.
pub struct RateLimited<S> {
    inner: S,
    bucket: TokenBucket,
    /// The wait for the reserved token, while there is one.
    waiting: Option<Pin<Box<Sleep>>>,
    /// A token is held for the next call.
    granted: bool,
    requests: Counter,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if !self.granted {
            if self.waiting.is_none() {
                let wait = self.bucket.reserve(Instant::now());
                if !wait.is_zero() {
                    self.waiting = Some(Box::pin(tokio::time::sleep(wait)));
                }
            }
            if let Some(waiting) = self.waiting.as_mut() {
                if waiting.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.waiting = None;
            }
            self.granted = true;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        // tower's contract: `call` follows a `poll_ready` that returned ready, which took the token.
        self.granted = false;
        self.requests.inc();
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_goes_at_once_then_one_token_per_one_over_qps() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(10.0, 3);
        let waits: Vec<Duration> = (0..5).map(|_| bucket.reserve(start)).collect();
        assert_eq!(waits[..3], [Duration::ZERO; 3]);
        // The 4th and 5th wait for the 1st and 2nd tokens refilled: 100 ms and 200 ms.
        assert_eq!(waits[3], Duration::from_millis(100));
        assert_eq!(waits[4], Duration::from_millis(200));
        // A second later the two reserved tokens have come and the bucket is full again: 3, the burst.
        assert_eq!(bucket.reserve(start + Duration::from_secs(1)), Duration::ZERO);
        let later: Vec<Duration> = (0..3).map(|_| bucket.reserve(start + Duration::from_secs(1))).collect();
        assert_eq!(later[..2], [Duration::ZERO; 2]);
        assert_eq!(later[2], Duration::from_millis(100));
    }

    #[test]
    fn no_limit_when_qps_is_not_positive() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(-1.0, 1);
        assert!((0..1000).all(|_| bucket.reserve(start).is_zero()));
    }

    /// A service that notes when each request reaches it.
    struct Stamps(Vec<Instant>);

    impl Service<()> for Stamps {
        type Response = ();
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<(), Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, (): ()) -> Self::Future {
            self.0.push(Instant::now());
            std::future::ready(Ok(()))
        }
    }

    /// Through the layer: the burst's two requests are ready at once; the third is not (it
    /// waits for its token, 20 ms at 50 a second) until its wait is over. The order of what
    /// happens, not how long it took.
    #[tokio::test]
    async fn requests_through_the_layer_wait_for_their_token() {
        let requests = Counter::default();
        let mut service = RateLimitLayer::new(50.0, 2, requests.clone()).layer(Stamps(Vec::new()));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for _ in 0..2 {
            assert!(service.poll_ready(&mut cx).is_ready());
            service.call(()).await.unwrap();
        }
        assert!(service.poll_ready(&mut cx).is_pending(), "the third request must wait for a token");
        assert_eq!(service.inner.0.len(), 2);
        std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
        service.call(()).await.unwrap();
        assert_eq!(service.inner.0.len(), 3);
        assert_eq!(requests.get(), 3, "each request sent is counted");
        // Unlimited: never waits.
        let mut free = RateLimitLayer::new(0.0, 1, Counter::default()).layer(Stamps(Vec::new()));
        for _ in 0..100 {
            assert!(free.poll_ready(&mut cx).is_ready());
            free.call(()).await.unwrap();
        }
    }
}
