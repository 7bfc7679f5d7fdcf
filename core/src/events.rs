//! Which events are published (upstream `pkg/events/recorder.go`, v1.14.1): an event is not
//! published again while the same one was published within the dedupe timeout (2 minutes), so a
//! state that holds for many passes (a pod blocking disruption, a volume still attached) costs one
//! API write per object and message every 2 minutes, not one a pass.
//!
//! Upstream keys an event by its reason and its dedupe values (the object, for some events more);
//! carpentry keys an event by object, reason and message, so that a new message on the same
//! object is not swallowed by an old one, except `Unconsolidatable`, keyed by object and reason as
//! upstream keys it (`pkg/controllers/disruption/events/events.go`): once per node every 15
//! minutes, whatever the message (a 500-node scale-up wrote 1,209 of them keyed by message, each
//! node's verdict changing as pods landed; `kubectl karpenter explain node` says the current one).
//! `DisruptionBlocked` stays keyed by message: carpentry's drain says with it what holds a node's
//! termination, which upstream's key would swallow behind the disruption pass's. A repeat that comes after the dedupe timeout but while
//! the first is still recent is counted into the first event's series (client-go
//! `tools/events`: an event's series is kept while its repeats come within 6 minutes), so the API
//! server holds one object per distinct event, not one per 2 minutes.
//!
//! Pods' `Nominated` events share upstream's rate limit (`PodNominationRateLimiter`,
//! `pkg/controllers/provisioning/scheduling/events.go`: a token bucket of 10 refilled at 5 a
//! second): a round that nominates 1,000 pods writes about a dozen, not 1,000. An event the limit
//! drops is remembered as published, as upstream's dedupe cache took it before the limit was asked,
//! so it is not tried again within the dedupe timeout.
//!
//! Times are the caller's `now` (seconds). `T` is what the adapter needs to count a repeat into an
//! event it published (the API object's name); core never looks at it.

use std::collections::BTreeMap;

/// upstream `defaultDedupeTimeout`.
pub const DEDUPE_TIMEOUT_SECONDS: i64 = 2 * 60;
/// upstream `Unconsolidatable`'s `DedupeTimeout`.
pub const UNCONSOLIDATABLE_DEDUPE_SECONDS: i64 = 15 * 60;
/// How long after its last repeat an event's series is continued (client-go `tools/events`
/// `finishTime`); a repeat after that is a new event.
pub const SERIES_SECONDS: i64 = 6 * 60;
/// Expired keys are swept at most this often (upstream's cache cleanup interval).
const SWEEP_EVERY_SECONDS: i64 = 10;
/// upstream `PodNominationRateLimiter`: `flowcontrol.NewTokenBucketRateLimiter(5, 10)`.
pub const NOMINATION_QPS: f64 = 5.0;
pub const NOMINATION_BURST: f64 = 10.0;
/// The reason of the events the nomination limit applies to (upstream `events.Nominated`).
pub const NOMINATED: &str = "Nominated";

/// What makes two events the same event.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EventKey {
    /// The object the event is about (kind, namespace, name, uid: whatever identifies it).
    pub object: String,
    pub reason: String,
    pub message: String,
}

/// What to do with an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Publication<T> {
    /// The same event was published within its dedupe timeout ([`DEDUPE_TIMEOUT_SECONDS`],
    /// [`UNCONSOLIDATABLE_DEDUPE_SECONDS`]): nothing to write.
    Suppressed,
    /// A new event.
    New,
    /// A repeat of the event published as `of`: its series now counts `count` occurrences.
    Repeat { of: T, count: u32 },
}

#[derive(Debug, Clone)]
struct Published<T> {
    at: i64,
    /// The event's dedupe timeout.
    timeout: i64,
    /// The message written (an event keyed without it repeats only the same message).
    message: String,
    count: u32,
    /// The written event; `None` for one the rate limit dropped (nothing to count a repeat into).
    handle: Option<T>,
    /// Let through and not yet said to be written or not.
    pending: bool,
    /// A repeat's series before it (when and how many): restored if the repeat is not written,
    /// so that the next offer counts into the same event rather than writing a new one.
    before: Option<(i64, u32)>,
}

/// Where an event [`Dedupe::publish`] let through stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// On its way.
    Pending,
    /// Written (or published again since).
    Written,
    /// Not written (a failed write, a full queue, lost leadership), or forgotten since: the next
    /// offer publishes it.
    Forgotten,
}

/// A token bucket over the caller's clock (client-go `flowcontrol.tokenBucketRateLimiter`'s
/// `TryAccept`): `burst` at once, then `qps` a second; a request without a token is refused.
#[derive(Debug, Clone)]
pub struct RateLimit {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Option<i64>,
}

impl RateLimit {
    pub fn new(qps: f64, burst: f64) -> RateLimit {
        RateLimit { qps, burst, tokens: burst, at: None }
    }

    /// Takes a token at `now` (seconds) if there is one.
    pub fn try_accept(&mut self, now: i64) -> bool {
        if let Some(at) = self.at {
            let refill = (now.saturating_sub(at)).max(0) as f64 * self.qps;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.at = Some(self.at.map_or(now, |at| at.max(now)));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The events published recently.
#[derive(Debug, Clone)]
pub struct Dedupe<T> {
    published: BTreeMap<EventKey, Published<T>>,
    next_sweep: i64,
    /// upstream `PodNominationRateLimiter`, shared by every `Nominated` event.
    nominations: RateLimit,
}

impl<T> Default for Dedupe<T> {
    fn default() -> Self {
        Dedupe {
            published: BTreeMap::new(),
            next_sweep: i64::MIN,
            nominations: RateLimit::new(NOMINATION_QPS, NOMINATION_BURST),
        }
    }
}

/// The dedupe timeout of the events upstream keys by object and reason alone (their
/// `DedupeValues` hold only the object's UID); `None` for the rest (keyed by message too, 2
/// minutes).
fn keyed_by_object(reason: &str) -> Option<i64> {
    match reason {
        "Unconsolidatable" => Some(UNCONSOLIDATABLE_DEDUPE_SECONDS),
        // karpenter-provider-aws v1.14.1 `pkg/controllers/nodeclass/events.go`: the NodeClass's
        // UID only, so a list of NodeClaims that shrinks is said once per 2 minutes.
        "WaitingOnNodeClaimTermination" => Some(DEDUPE_TIMEOUT_SECONDS),
        _ => None,
    }
}

/// The key an event is remembered by, and its dedupe timeout.
fn dedupe_key(key: &EventKey) -> (EventKey, i64) {
    match keyed_by_object(&key.reason) {
        Some(timeout) => (EventKey { message: String::new(), ..key.clone() }, timeout),
        None => (key.clone(), DEDUPE_TIMEOUT_SECONDS),
    }
}

impl<T: Clone> Dedupe<T> {
    /// What publishing `key` at `now` comes to, recorded at once as upstream's dedupe cache records
    /// an event when it lets it through: a second offer while the first is still being written is
    /// suppressed. The writer then says how it went: [`Dedupe::written`] with the API object, or
    /// [`Dedupe::not_written`], which forgets it so that the next offer writes it (a failed write
    /// is tried again by the next pass, not 2 minutes later).
    pub fn publish(&mut self, key: &EventKey, now: i64) -> Publication<T> {
        if now >= self.next_sweep {
            self.published.retain(|_, p| now - p.at < SERIES_SECONDS.max(p.timeout));
            self.next_sweep = now.saturating_add(SWEEP_EVERY_SECONDS);
        }
        let (stored, timeout) = dedupe_key(key);
        let publication = match self.published.get(&stored) {
            Some(p) if now - p.at < timeout => return Publication::Suppressed,
            Some(Published { at, count, handle: Some(handle), message, .. })
                if now - at < SERIES_SECONDS && *message == key.message =>
            {
                Publication::Repeat { of: handle.clone(), count: count.saturating_add(1) }
            }
            _ => Publication::New,
        };
        let (count, handle) = match &publication {
            _ if key.reason == NOMINATED && !self.nominations.try_accept(now) => {
                // Dropped by the limit: remembered, with nothing to count a repeat into.
                let message = key.message.clone();
                let dropped =
                    Published { at: now, timeout, message, count: 0, handle: None, pending: false, before: None };
                self.published.insert(stored, dropped);
                return Publication::Suppressed;
            }
            Publication::Repeat { of, count } => (*count, Some(of.clone())),
            Publication::New | Publication::Suppressed => (1, None),
        };
        let before = match &publication {
            Publication::Repeat { .. } => self.published.get(&stored).map(|p| (p.at, p.count)),
            _ => None,
        };
        let message = key.message.clone();
        self.published.insert(stored, Published { at: now, timeout, message, count, handle, pending: true, before });
        publication
    }

    /// The event [`Dedupe::publish`] let through at `at` was written as `handle` (a new event's
    /// API object, or the one its repeat was counted into).
    pub fn written(&mut self, key: &EventKey, at: i64, handle: T) {
        if let Some(p) = self.published.get_mut(&dedupe_key(key).0).filter(|p| p.at == at) {
            p.handle = Some(handle);
            p.pending = false;
            p.before = None;
        }
    }

    /// The event [`Dedupe::publish`] let through at `at` was not written: a new event is
    /// forgotten, a repeat's series restored to what it was, so that the next offer publishes it
    /// again (and a repeat still counts into the event written before).
    pub fn not_written(&mut self, key: &EventKey, at: i64) {
        let stored = dedupe_key(key).0;
        let Some(p) = self.published.get_mut(&stored).filter(|p| p.at == at) else { return };
        match p.before.take() {
            Some((before, count)) => {
                p.at = before;
                p.count = count;
                p.pending = false;
            }
            None => {
                self.published.remove(&stored);
            }
        }
    }

    /// Whether [`Dedupe::publish`] would suppress `key` at `now`, without recording anything or
    /// taking a nomination token (asked before an event that cannot be queued is counted as
    /// dropped).
    pub fn suppresses(&self, key: &EventKey, now: i64) -> bool {
        let (stored, timeout) = dedupe_key(key);
        self.published.get(&stored).is_some_and(|p| now - p.at < timeout)
    }

    /// Where the event [`Dedupe::publish`] let through at `at` stands.
    pub fn delivery(&self, key: &EventKey, at: i64) -> Delivery {
        match self.published.get(&dedupe_key(key).0) {
            Some(p) if p.at == at && p.pending => Delivery::Pending,
            Some(p) if p.at >= at => Delivery::Written,
            // Restored to before it (a repeat not written), or swept.
            _ => Delivery::Forgotten,
        }
    }

    /// How many events are remembered.
    pub fn len(&self) -> usize {
        self.published.len()
    }

    pub fn is_empty(&self) -> bool {
        self.published.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(object: &str, reason: &str, message: &str) -> EventKey {
        EventKey { object: object.into(), reason: reason.into(), message: message.into() }
    }

    /// What the controller does: write what is not suppressed, then say it was written.
    fn publish(d: &mut Dedupe<String>, k: &EventKey, now: i64) -> Publication<String> {
        let p = d.publish(k, now);
        match &p {
            Publication::Suppressed => {}
            Publication::New => d.written(k, now, format!("{}.{now}", k.object)),
            Publication::Repeat { of, .. } => d.written(k, now, of.clone()),
        }
        p
    }

    #[test]
    fn an_event_is_published_once_per_object_reason_and_message_every_two_minutes() {
        let mut d = Dedupe::default();
        let blocked = key("Node/a", "AwaitingVolumeDetachment", "volume vol-1 is attached");
        // While a write is under way the event is not offered again; one that failed is
        // forgotten, so the next pass tries again.
        assert_eq!(d.publish(&blocked, 0), Publication::New);
        assert_eq!(d.publish(&blocked, 0), Publication::Suppressed);
        d.not_written(&blocked, 0);
        assert_eq!(publish(&mut d, &blocked, 0), Publication::New);
        for t in 1..DEDUPE_TIMEOUT_SECONDS {
            assert_eq!(publish(&mut d, &blocked, t), Publication::Suppressed, "at {t}");
        }
        // Another object, reason or message is its own event.
        for other in [
            key("Node/b", "AwaitingVolumeDetachment", "volume vol-1 is attached"),
            key("Node/a", "FailedDraining", "volume vol-1 is attached"),
            key("Node/a", "AwaitingVolumeDetachment", "volume vol-2 is attached"),
        ] {
            assert_eq!(publish(&mut d, &other, 5), Publication::New, "{other:?}");
        }
        // Past the timeout, a repeat counts into the first event's series; the window restarts
        // from each write.
        let first = Publication::Repeat { of: "Node/a.0".to_string(), count: 2 };
        assert_eq!(publish(&mut d, &blocked, DEDUPE_TIMEOUT_SECONDS), first);
        assert_eq!(publish(&mut d, &blocked, DEDUPE_TIMEOUT_SECONDS + 60), Publication::Suppressed);
        assert_eq!(
            publish(&mut d, &blocked, 2 * DEDUPE_TIMEOUT_SECONDS),
            Publication::Repeat { of: "Node/a.0".to_string(), count: 3 }
        );
        // Quiet for longer than a series lasts: a new event, and expired keys are swept.
        let later = 2 * DEDUPE_TIMEOUT_SECONDS + SERIES_SECONDS;
        assert_eq!(publish(&mut d, &blocked, later), Publication::New);
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn a_publication_is_pending_until_written_and_a_repeat_not_written_counts_into_the_same_event_later() {
        let mut d = Dedupe::default();
        let blocked = key("Node/a", "DisruptionBlocked", "pod x has do-not-disrupt");
        assert_eq!(d.delivery(&blocked, 0), Delivery::Forgotten, "never published");
        assert_eq!(d.publish(&blocked, 0), Publication::New);
        assert_eq!(d.delivery(&blocked, 0), Delivery::Pending);
        assert!(d.suppresses(&blocked, 1));
        d.written(&blocked, 0, "e1".to_string());
        assert_eq!(d.delivery(&blocked, 0), Delivery::Written);
        // A repeat whose write fails: the series is as it was, so the next offer repeats again,
        // with the same count, into the same event.
        let t = DEDUPE_TIMEOUT_SECONDS;
        assert_eq!(d.publish(&blocked, t), Publication::Repeat { of: "e1".to_string(), count: 2 });
        assert_eq!(d.delivery(&blocked, t), Delivery::Pending);
        d.not_written(&blocked, t);
        assert_eq!(d.delivery(&blocked, t), Delivery::Forgotten);
        assert_eq!(d.delivery(&blocked, 0), Delivery::Written, "the first is still written");
        assert!(!d.suppresses(&blocked, t + 10));
        assert_eq!(d.publish(&blocked, t + 10), Publication::Repeat { of: "e1".to_string(), count: 2 });
        d.written(&blocked, t + 10, "e1".to_string());
        assert_eq!(d.delivery(&blocked, t + 10), Delivery::Written);
        // A new event not written is forgotten: Forgotten, and new again.
        let other = key("Node/b", "DisruptionBlocked", "y");
        assert_eq!(d.publish(&other, 5), Publication::New);
        d.not_written(&other, 5);
        assert_eq!(d.delivery(&other, 5), Delivery::Forgotten);
        assert!(!d.suppresses(&other, 6));
        // `suppresses` takes no nomination token.
        let nominated = |pod: usize| key(&format!("Pod/default/p{pod}"), NOMINATED, "x");
        for pod in 0..100 {
            assert!(!d.suppresses(&nominated(pod), 7));
        }
        let taken = (0..20).filter(|&pod| d.publish(&nominated(pod), 7) == Publication::New).count();
        assert_eq!(taken, NOMINATION_BURST as usize);
    }

    #[test]
    fn unconsolidatable_is_keyed_by_node_as_upstreams() {
        let mut d = Dedupe::default();
        let unconsolidatable = |why: &str| key("Node/a", "Unconsolidatable", why);
        assert_eq!(publish(&mut d, &unconsolidatable("pods would not fit"), 0), Publication::New);
        // Another verdict within 15 minutes is not written (the first stays the node's event).
        for t in [1, DEDUPE_TIMEOUT_SECONDS, SERIES_SECONDS, UNCONSOLIDATABLE_DEDUPE_SECONDS - 1] {
            assert_eq!(publish(&mut d, &unconsolidatable("a cheaper type is not there"), t), Publication::Suppressed);
        }
        // Another node is its own; past 15 minutes (longer than a series) the node's is new again.
        assert_eq!(publish(&mut d, &key("Node/b", "Unconsolidatable", "x"), 5), Publication::New);
        assert_eq!(
            publish(&mut d, &unconsolidatable("a cheaper type is not there"), UNCONSOLIDATABLE_DEDUPE_SECONDS),
            Publication::New
        );
        // A deleted EC2NodeClass's wait, whichever NodeClaims it names, once per 2 minutes.
        let waiting = |names: &str| key("EC2NodeClass/c", "WaitingOnNodeClaimTermination", names);
        assert_eq!(publish(&mut d, &waiting("a, b"), 0), Publication::New);
        assert_eq!(publish(&mut d, &waiting("b"), 30), Publication::Suppressed);
        assert_ne!(publish(&mut d, &waiting("b"), DEDUPE_TIMEOUT_SECONDS), Publication::Suppressed);
        // DisruptionBlocked keeps carpentry's key: another message is another event.
        let blocked = |why: &str| key("Node/c", "DisruptionBlocked", why);
        assert_eq!(publish(&mut d, &blocked("pod x has do-not-disrupt"), 0), Publication::New);
        assert_eq!(publish(&mut d, &blocked("pod x is not evicted before"), 60), Publication::New);
        // The 15-minute key outlives a series: a sweep past 6 minutes keeps it.
        let written = UNCONSOLIDATABLE_DEDUPE_SECONDS;
        publish(&mut d, &key("Node/z", "Other", "x"), written + SERIES_SECONDS + 40);
        assert_eq!(publish(&mut d, &unconsolidatable("y"), written + SERIES_SECONDS + 140), Publication::Suppressed);
    }

    #[test]
    fn pods_nominated_share_upstreams_limit_of_ten_then_five_a_second() {
        let mut d = Dedupe::default();
        let nominated =
            |pod: usize| key(&format!("Pod/default/p{pod}"), NOMINATED, "Pod should schedule on: nodeclaim/a");
        // A round of 1,000 pods at once: the burst.
        let written = (0..1000).filter(|&p| publish(&mut d, &nominated(p), 100) == Publication::New).count();
        assert_eq!(written, 10);
        // A pod the limit dropped is not tried again within the dedupe timeout, whatever the tokens.
        assert_eq!(publish(&mut d, &nominated(500), 101), Publication::Suppressed);
        // Two seconds later: 10 more tokens (5 a second), for pods not seen yet.
        let more = (1000..1100).filter(|&p| publish(&mut d, &nominated(p), 102) == Publication::New).count();
        assert_eq!(more, 10);
        // Other events are not limited.
        let blocked = (0..100)
            .filter(|&n| {
                publish(&mut d, &key(&format!("Node/n{n}"), "DisruptionBlocked", "x"), 102) == Publication::New
            })
            .count();
        assert_eq!(blocked, 100);
        // After the dedupe timeout a dropped pod's event is new again, if a token is there.
        assert_eq!(publish(&mut d, &nominated(500), 100 + DEDUPE_TIMEOUT_SECONDS), Publication::New);
    }
}
