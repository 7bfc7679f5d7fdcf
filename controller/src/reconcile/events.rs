//! Events written off the reconcilers' path, as upstream's recorder writes them (client-go's
//! broadcaster: `Publish` returns at once, a goroutine writes to the API server): a reconciler
//! offers an event, core's [`carpentry_core::events::Dedupe`] decides at once whether it is
//! written (and records it, so a second offer while the first is on its way is suppressed), and
//! one task writes the queue in order. A round that nominates 5,000 pods or a drain that blocks
//! on 100 pods does not wait for its events behind the client's rate limit.
//!
//! The queue holds [`QUEUED_EVENTS`] (client-go's `maxQueuedEvents`); an offer to a full queue
//! is dropped, as client-go drops it, and counted (`carpentry_events_dropped_total`), but not
//! recorded by the dedupe (nor does it take a nomination token), so the next pass offers it
//! again. A write that fails is forgotten (a repeat's series is restored, so the next one still
//! counts into the same event): the next pass that offers it writes it. A reconciler that must
//! know asks [`EventSink::delivery`].

use std::sync::{Arc, Mutex, MutexGuard};

use carpentry_core::events::{Dedupe, Delivery, EventKey, Publication};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, warn};

use super::act::REPORTER;

/// Events queued at most (client-go `tools/record` `maxQueuedEvents`).
pub const QUEUED_EVENTS: usize = 1000;

/// An event object this controller wrote, to count a repeat into its series.
#[derive(Debug, Clone)]
pub struct EventObject {
    namespace: String,
    name: String,
}

/// An event to write.
pub struct Offer {
    pub on: ObjectReference,
    pub warning: bool,
    pub reason: String,
    pub note: String,
    pub action: String,
}

/// An offered event the dedupe let through, on its way.
struct Queued {
    offer: Offer,
    key: EventKey,
    /// When it was offered: the dedupe's time (seconds) and the event's `eventTime`.
    at: i64,
    occurred: Timestamp,
    publication: Publication<EventObject>,
}

enum Message {
    Write(Box<Queued>),
    /// Answered once everything queued before it was written or given up.
    Flush(oneshot::Sender<()>),
}

/// The reconcilers' side of the queue (clones share it).
#[derive(Clone)]
pub struct EventSink {
    queue: mpsc::Sender<Message>,
    published: Arc<Mutex<Dedupe<EventObject>>>,
    metrics: crate::metrics::Metrics,
}

/// What became of an offered event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// Queued to be written.
    Queued,
    /// The same event was published within its dedupe timeout, or the nomination limit took it.
    Suppressed,
    /// The queue is full (or its writer is gone): not written; the next offer tries again.
    Dropped,
}

impl EventSink {
    /// A sink whose writer, started here (on the current Tokio runtime), writes through `client`
    /// as `instance` while `leader` says this replica leads.
    pub fn start(
        client: kube::Client,
        instance: String,
        metrics: crate::metrics::Metrics,
        leader: crate::leader::LeaderStatus,
    ) -> EventSink {
        let (queue, received) = mpsc::channel(QUEUED_EVENTS);
        let published = Arc::<Mutex<Dedupe<EventObject>>>::default();
        let writer = Writer { client, instance, metrics: metrics.clone(), leader, published: published.clone() };
        tokio::spawn(writer.run(received));
        EventSink { queue, published, metrics }
    }

    fn published(&self) -> MutexGuard<'_, Dedupe<EventObject>> {
        lock(&self.published)
    }

    /// Offers the event `key` at `at` (seconds; `occurred` the same instant); `offer` makes what
    /// is written, only once the dedupe lets it through and there is room for it.
    pub fn offer(&self, key: EventKey, at: i64, occurred: Timestamp, offer: impl FnOnce() -> Offer) -> Offered {
        // Room first, so that an event the queue cannot take is not recorded as published (nor
        // takes a nomination token from one that could be written).
        let room = match self.queue.try_reserve() {
            Ok(room) => room,
            Err(e) => {
                if self.published().suppresses(&key, at) {
                    return Offered::Suppressed;
                }
                self.metrics.event_dropped();
                match e {
                    mpsc::error::TrySendError::Full(()) => {
                        debug!(reason = key.reason, "the event queue is full; offered again later")
                    }
                    mpsc::error::TrySendError::Closed(()) => {
                        warn!(reason = key.reason, "the event writer is gone; event not written")
                    }
                }
                return Offered::Dropped;
            }
        };
        let publication = self.published().publish(&key, at);
        if matches!(publication, Publication::Suppressed) {
            return Offered::Suppressed;
        }
        room.send(Message::Write(Box::new(Queued { offer: offer(), key, at, occurred, publication })));
        Offered::Queued
    }

    /// Where an event offered at `at` stands.
    pub fn delivery(&self, key: &EventKey, at: i64) -> Delivery {
        self.published().delivery(key, at)
    }

    /// Waits until every event queued so far was written or given up.
    pub async fn flushed(&self) {
        let (done, flushed) = oneshot::channel();
        if self.queue.send(Message::Flush(done)).await.is_ok() {
            let _ = flushed.await;
        }
    }
}

fn lock(published: &Mutex<Dedupe<EventObject>>) -> MutexGuard<'_, Dedupe<EventObject>> {
    published.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The task that writes the queue, one event after another (client-go's sink writes one at a
/// time too); it ends when every [`EventSink`] is dropped.
struct Writer {
    client: kube::Client,
    instance: String,
    metrics: crate::metrics::Metrics,
    leader: crate::leader::LeaderStatus,
    published: Arc<Mutex<Dedupe<EventObject>>>,
}

impl Writer {
    async fn run(self, mut received: mpsc::Receiver<Message>) {
        while let Some(message) = received.recv().await {
            match message {
                Message::Write(queued) => self.write(*queued).await,
                Message::Flush(done) => {
                    let _ = done.send(());
                }
            }
        }
    }

    async fn write(&self, queued: Queued) {
        let Queued { offer, key, at, occurred, publication } = queued;
        // Queued while leading, and leadership lost since: not written.
        if !self.leader.leading() {
            debug!(reason = offer.reason, object = ?offer.on.name, "not published: this replica no longer leads");
            lock(&self.published).not_written(&key, at);
            return;
        }
        let written = match &publication {
            Publication::Repeat { of, count } => match self.count_repeat(of, *count).await {
                Ok(()) => Ok(of.clone()),
                // The event is gone (the API server's TTL) or cannot be patched: a new one.
                Err(e) => {
                    debug!(reason = offer.reason, object = ?offer.on.name, error = %e, "cannot count a repeat into its event; a new one");
                    self.create(&offer, occurred).await
                }
            },
            Publication::New | Publication::Suppressed => self.create(&offer, occurred).await,
        };
        match written {
            Ok(event) => lock(&self.published).written(&key, at, event),
            Err(e) => {
                warn!(reason = offer.reason, object = ?offer.on.name, error = %carpentry_core::error_chain(&e), "cannot publish an event; offered again by the next pass");
                lock(&self.published).not_written(&key, at);
            }
        }
    }

    /// Writes a new events.k8s.io/v1 Event, in the object's namespace (`default` for a
    /// cluster-scoped one), named as client-go names events (`<object>.<time in hex>`).
    async fn create(&self, offer: &Offer, occurred: Timestamp) -> Result<EventObject, kube::Error> {
        let namespace = offer.on.namespace.clone().unwrap_or_else(|| "default".into());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", offer.on.name.as_deref().unwrap_or(REPORTER), occurred.as_nanosecond())),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            action: Some(offer.action.clone()),
            reason: Some(offer.reason.clone()),
            note: Some(offer.note.clone()),
            type_: Some(if offer.warning { "Warning" } else { "Normal" }.into()),
            event_time: Some(MicroTime(occurred)),
            regarding: Some(offer.on.clone()),
            reporting_controller: Some(REPORTER.into()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        let events: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        self.metrics.api_write("create Event", false);
        let created = events
            .create(&PostParams::default(), &event)
            .await
            .inspect_err(|_| self.metrics.api_write("create Event", true))?;
        Ok(EventObject { namespace, name: created.metadata.name.unwrap_or_default() })
    }

    /// Counts a repeat into `event`'s series.
    async fn count_repeat(&self, event: &EventObject, count: u32) -> Result<(), kube::Error> {
        let series = EventSeries {
            count: i32::try_from(count).unwrap_or(i32::MAX),
            last_observed_time: MicroTime(Timestamp::now()),
        };
        let events: Api<Event> = Api::namespaced(self.client.clone(), &event.namespace);
        let patch = serde_json::json!({ "series": series });
        self.metrics.api_write("patch Event", false);
        let patched = events.patch(&event.name, &PatchParams::default(), &Patch::Merge(&patch)).await;
        patched.map(|_| ()).inspect_err(|_| self.metrics.api_write("patch Event", true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeApi;

    fn sink(api: &FakeApi, metrics: &crate::metrics::Metrics) -> EventSink {
        let leader = crate::leader::Leader::unelected().status();
        EventSink::start(api.client(), "test".into(), metrics.clone(), leader)
    }

    fn offer(sink: &EventSink, pod: usize, at: i64) -> Offered {
        let name = format!("p{pod}");
        let on = ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some(name.clone()),
            ..Default::default()
        };
        let note = "node n is out of room".to_string();
        let key = EventKey {
            object: format!("Pod/default/{name}"),
            reason: "FailedScheduling".into(),
            message: note.clone(),
        };
        let offer = || Offer { on, warning: true, reason: "FailedScheduling".into(), note, action: "Provision".into() };
        sink.offer(key, at, Timestamp::from_second(at).expect("a time"), offer)
    }

    fn dropped(metrics: &crate::metrics::Metrics) -> String {
        let mut root = prometheus_client::registry::Registry::default();
        metrics.register(&mut root);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &root).expect("encode");
        text.lines().find(|l| l.starts_with("carpentry_events_dropped_total")).unwrap_or_default().to_string()
    }

    /// The tests run on Tokio's current-thread runtime: the writer runs only when the test waits,
    /// so what an offer returns is decided before anything is written.
    #[tokio::test]
    async fn an_offer_is_decided_at_once_and_written_in_order_by_the_writer() {
        let (api, metrics) = (FakeApi::default(), crate::metrics::Metrics::default());
        let sink = sink(&api, &metrics);
        assert_eq!(offer(&sink, 1, 100), Offered::Queued);
        assert_eq!(offer(&sink, 2, 100), Offered::Queued);
        // Offered again while on its way: the dedupe has it already.
        assert_eq!(offer(&sink, 1, 101), Offered::Suppressed);
        assert_eq!(api.events(), [], "nothing written before the writer runs");
        sink.flushed().await;
        let pods: Vec<String> = api.events().into_iter().map(|(reason, note)| format!("{reason}: {note}")).collect();
        assert_eq!(pods, ["FailedScheduling: node n is out of room"; 2]);
        // Written: suppressed for the dedupe timeout.
        assert_eq!(offer(&sink, 1, 150), Offered::Suppressed);
    }

    #[tokio::test]
    async fn a_failed_write_is_offered_again_by_the_next_pass() {
        let (api, metrics) = (FakeApi::default(), crate::metrics::Metrics::default());
        let sink = sink(&api, &metrics);
        api.fail("/events", 500);
        assert_eq!(offer(&sink, 1, 100), Offered::Queued);
        sink.flushed().await;
        assert_eq!(api.events().len(), 1, "tried once");
        assert_eq!(offer(&sink, 1, 101), Offered::Queued, "forgotten, so written again");
    }

    #[tokio::test]
    async fn a_full_queue_drops_the_offer_counts_it_and_takes_it_again_once_there_is_room() {
        let (api, metrics) = (FakeApi::default(), crate::metrics::Metrics::default());
        let sink = sink(&api, &metrics);
        for pod in 0..QUEUED_EVENTS {
            assert_eq!(offer(&sink, pod, 100), Offered::Queued, "pod {pod}");
        }
        assert_eq!(offer(&sink, QUEUED_EVENTS, 100), Offered::Dropped);
        assert_eq!(dropped(&metrics), "carpentry_events_dropped_total 1");
        sink.flushed().await;
        assert_eq!(api.events().len(), QUEUED_EVENTS);
        assert_eq!(offer(&sink, QUEUED_EVENTS, 101), Offered::Queued, "not remembered as published");
    }
}
