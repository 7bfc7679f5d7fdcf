//! Which events are published (upstream `pkg/events/recorder.go`, v1.14.1): an event is not
//! published again while the same one was published within the dedupe timeout (2 minutes), so a
//! state that holds for many passes (a pod blocking disruption, a volume still attached) costs one
//! API write per object and message every 2 minutes, not one a pass.
//!
//! Upstream keys an event by its reason and its dedupe values (the object, for some events more);
//! carpentry keys every event by object, reason and message, so that a new message on the same
//! object is never swallowed by an old one. A repeat that comes after the dedupe timeout but while
//! the first is still recent is counted into the first event's series (client-go
//! `tools/events`: an event's series is kept while its repeats come within 6 minutes), so the API
//! server holds one object per distinct event, not one per 2 minutes.
//!
//! Times are the caller's `now` (seconds). `T` is what the adapter needs to count a repeat into an
//! event it published (the API object's name); core never looks at it.

use std::collections::BTreeMap;

/// upstream `defaultDedupeTimeout`.
pub const DEDUPE_TIMEOUT_SECONDS: i64 = 2 * 60;
/// How long after its last repeat an event's series is continued (client-go `tools/events`
/// `finishTime`); a repeat after that is a new event.
pub const SERIES_SECONDS: i64 = 6 * 60;
/// Expired keys are swept at most this often (upstream's cache cleanup interval).
const SWEEP_EVERY_SECONDS: i64 = 10;

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
    /// The same event was published less than [`DEDUPE_TIMEOUT_SECONDS`] ago: nothing to write.
    Suppressed,
    /// A new event.
    New,
    /// A repeat of the event published as `of`: its series now counts `count` occurrences.
    Repeat { of: T, count: u32 },
}

#[derive(Debug, Clone)]
struct Published<T> {
    at: i64,
    count: u32,
    handle: T,
}

/// The events published recently.
#[derive(Debug, Clone)]
pub struct Dedupe<T> {
    published: BTreeMap<EventKey, Published<T>>,
    next_sweep: i64,
}

impl<T> Default for Dedupe<T> {
    fn default() -> Self {
        Dedupe { published: BTreeMap::new(), next_sweep: i64::MIN }
    }
}

impl<T: Clone> Dedupe<T> {
    /// What publishing `key` at `now` comes to. Nothing is recorded: call [`Dedupe::published`]
    /// once the API server took the write (upstream records when it lets an event through;
    /// carpentry writes synchronously and records only what was written, so a failed write is
    /// tried again by the next pass, not 2 minutes later).
    pub fn publication(&mut self, key: &EventKey, now: i64) -> Publication<T> {
        if now >= self.next_sweep {
            self.published.retain(|_, p| now - p.at < SERIES_SECONDS);
            self.next_sweep = now.saturating_add(SWEEP_EVERY_SECONDS);
        }
        match self.published.get(key) {
            Some(p) if now - p.at < DEDUPE_TIMEOUT_SECONDS => Publication::Suppressed,
            Some(p) if now - p.at < SERIES_SECONDS => {
                Publication::Repeat { of: p.handle.clone(), count: p.count.saturating_add(1) }
            }
            _ => Publication::New,
        }
    }

    /// Records that `key` was written at `now` as `publication` said, the event being `handle`.
    pub fn published(&mut self, key: EventKey, now: i64, publication: &Publication<T>, handle: T) {
        let count = match publication {
            Publication::Repeat { count, .. } => *count,
            Publication::New | Publication::Suppressed => 1,
        };
        self.published.insert(key, Published { at: now, count, handle });
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

    /// What the controller does: write what is not suppressed, then record it.
    fn publish(d: &mut Dedupe<String>, k: &EventKey, now: i64) -> Publication<String> {
        let p = d.publication(k, now);
        match &p {
            Publication::Suppressed => {}
            Publication::New => d.published(k.clone(), now, &p, format!("{}.{now}", k.object)),
            Publication::Repeat { of, .. } => d.published(k.clone(), now, &p, of.clone()),
        }
        p
    }

    #[test]
    fn an_event_is_published_once_per_object_reason_and_message_every_two_minutes() {
        let mut d = Dedupe::default();
        let blocked = key("Node/a", "DisruptionBlocked", "pod x has do-not-disrupt");
        // A write that failed is not recorded: the next pass tries again.
        assert_eq!(d.publication(&blocked, 0), Publication::New);
        assert_eq!(publish(&mut d, &blocked, 0), Publication::New);
        for t in 1..DEDUPE_TIMEOUT_SECONDS {
            assert_eq!(publish(&mut d, &blocked, t), Publication::Suppressed, "at {t}");
        }
        // Another object, reason or message is its own event.
        for other in [
            key("Node/b", "DisruptionBlocked", "pod x has do-not-disrupt"),
            key("Node/a", "Unconsolidatable", "pod x has do-not-disrupt"),
            key("Node/a", "DisruptionBlocked", "a PDB prevents pod evictions"),
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
}
