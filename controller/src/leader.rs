//! Leader election on a `coordination.k8s.io/v1` Lease (kube-lease-manager): one replica leads,
//! the others wait to take over. As upstream's (controller-runtime, client-go `leaderelection`):
//! the Lease lasts 15 s, the leader renews it every few seconds, and a leader whose renewals have
//! not been seen for the renew deadline (10 s) stops acting, before the Lease could pass to
//! another replica, and the process exits to be restarted clean (controller-runtime exits on
//! "leader election lost"). On shutdown the Lease is released, so a successor leads at once
//! (upstream's `ReleaseOnCancel`).
//!
//! kube-lease-manager keeps believing it leads while its renewals fail (it logs and retries), so
//! the renewals are checked here: a watch on the Lease records when a renewal by this replica is
//! seen, and [`LeaderStatus::leading`] is true only within the renew deadline of the last one.
//! Every write and every cloud call that launches or terminates asks it first.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::watcher;
use kube_lease_manager::LeaseManagerBuilder;
use tracing::{error, info, warn};

const LEASE_SECONDS: u64 = 15;
/// The leader renews when this much of the Lease is left: every 3 s (client-go's leader tries
/// every `RetryPeriod`, 2 s).
const RENEW_BEFORE_EXPIRY_SECONDS: u64 = 12;
/// controller-runtime's `RenewDeadline`: a leader whose last seen renewal is older stops acting.
/// Below the Lease's 15 s, so it stops before another replica may take the Lease over.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often the renew deadline is checked.
const CHECK_EVERY: Duration = Duration::from_millis(500);

/// Whether this replica leads, as the HTTP endpoints, the reconcilers and every write read it.
#[derive(Debug, Clone, Default)]
pub struct LeaderStatus {
    /// kube-lease-manager's view: it holds the Lease.
    holds: Arc<AtomicBool>,
    /// When a renewal of the Lease by this replica was last seen.
    renewed: Arc<Mutex<Option<Instant>>>,
    pub lease: String,
    /// Leader election is disabled (`--disable-leader-election`): this replica always leads.
    unelected: bool,
}

impl LeaderStatus {
    /// It holds the Lease and a renewal was seen within the renew deadline.
    pub fn leading(&self) -> bool {
        self.unelected || self.holds.load(Ordering::Acquire) && within_deadline(self.last_renewal(), Instant::now())
    }

    fn last_renewal(&self) -> Option<Instant> {
        *self.renewed.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn renewal_seen(&self, at: Instant) {
        *self.renewed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(at);
    }
}

/// Whether a leader whose last seen renewal was `renewed` may act at `now`.
fn within_deadline(renewed: Option<Instant>, now: Instant) -> bool {
    renewed.is_some_and(|at| now.saturating_duration_since(at) < RENEW_DEADLINE)
}

pub struct Leader {
    status: LeaderStatus,
    /// Fires once when leadership is lost; the process then stops.
    lost: tokio::sync::watch::Receiver<Option<String>>,
    /// Dropping the receiver tells the manager's task to release the Lease and stop.
    task: Option<(tokio::sync::watch::Receiver<bool>, tokio::task::JoinHandle<()>)>,
    manager: Option<tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>>,
}

impl Leader {
    /// Starts competing for Lease `namespace/name` (`client` for requests, `watches` for the
    /// watch on the Lease).
    pub async fn start(
        client: kube::Client,
        watches: kube::Client,
        namespace: String,
        name: String,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<Leader> {
        let identity = identity();
        let manager = LeaseManagerBuilder::new(client, &name)
            .with_namespace(&namespace)
            .with_identity(&identity)
            .with_duration(LEASE_SECONDS)
            .with_grace(RENEW_BEFORE_EXPIRY_SECONDS)
            .with_field_manager("carpentry-controller")
            .build()
            .await
            .with_context(|| format!("leader election: cannot use Lease {namespace}/{name}"))?;
        let status = LeaderStatus { lease: format!("{namespace}/{name}"), ..Default::default() };
        let (lost_tx, lost) = tokio::sync::watch::channel(None);
        let (receiver, manager) = manager.watch().await;
        let mut changes = receiver.clone();
        let seen = status.clone();
        let renewals = tokio::spawn(watch_renewals(watches, namespace, name, identity.clone(), seen, shutdown.clone()));
        let follow_status = status.clone();
        let follow = tokio::spawn(async move {
            let lease = follow_status.lease.clone();
            let mut checks = tokio::time::interval(CHECK_EVERY);
            // Whether this replica has acted as the leader (held the Lease with a renewal seen).
            let mut led = false;
            loop {
                let holds = *changes.borrow_and_update();
                if follow_status.holds.swap(holds, Ordering::AcqRel) != holds && holds {
                    info!(lease = %lease, identity = %identity, "became the leader");
                }
                led |= follow_status.leading();
                let why = if led && !holds {
                    Some(format!("lost the leadership of Lease {lease}: another replica holds it"))
                } else if led && !follow_status.leading() {
                    Some(format!(
                        "lost the leadership of Lease {lease}: no renewal seen for {} s (the renew deadline)",
                        RENEW_DEADLINE.as_secs()
                    ))
                } else {
                    None
                };
                if let Some(why) = why {
                    error!(lease = %lease, identity = %identity, "{why}; stopping, to be restarted");
                    follow_status.holds.store(false, Ordering::Release);
                    let _ = lost_tx.send(Some(why));
                    renewals.abort();
                    return;
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { renewals.abort(); return },
                    _ = checks.tick() => {}
                    _ = shutdown.changed() => { renewals.abort(); return },
                }
            }
        });
        Ok(Leader { status, lost, task: Some((receiver, follow)), manager: Some(manager) })
    }

    /// No election (upstream `--disable-leader-election`): this replica leads from the start and
    /// never loses it. For a single replica that must act at once after a restart (upstream's own
    /// tests run so); two replicas without election both act.
    pub fn unelected() -> Leader {
        let status = LeaderStatus { lease: "(leader election disabled)".into(), unelected: true, ..Default::default() };
        let (_never, lost) = tokio::sync::watch::channel(None);
        Leader { status, lost, task: None, manager: None }
    }

    /// Resolves with why, once leadership is lost (never, while it is not).
    pub fn lost(&self) -> impl std::future::Future<Output = String> + Send + 'static {
        let mut lost = self.lost.clone();
        async move {
            let why = lost.wait_for(Option::is_some).await.map(|why| why.clone().unwrap_or_default());
            match why {
                Ok(why) => why,
                Err(_) => std::future::pending().await,
            }
        }
    }

    pub fn status(&self) -> LeaderStatus {
        self.status.clone()
    }

    /// Releases the Lease (when held) and stops competing.
    pub async fn release(mut self) {
        if let Some((receiver, follow)) = self.task.take() {
            drop(receiver);
            let _ = follow.await;
        }
        self.status.holds.store(false, Ordering::Release);
        if let Some(manager) = self.manager.take() {
            match manager.await {
                Ok(Ok(_)) => info!(lease = %self.status.lease, "released the Lease"),
                Ok(Err(e)) => warn!(lease = %self.status.lease, error = %e, "could not release the Lease"),
                Err(e) => warn!(error = %e, "the leader-election task panicked"),
            }
        }
    }
}

/// Records each renewal of Lease `namespace/name` by `identity` that the API server shows (a new
/// `renewTime` while `identity` holds it), until `shutdown`.
async fn watch_renewals(
    watches: kube::Client,
    namespace: String,
    name: String,
    identity: String,
    status: LeaderStatus,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let api: kube::Api<Lease> = kube::Api::namespaced(watches, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api, config).boxed();
    let mut retry = crate::view::Retry::default();
    let mut last_renew_time = None;
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            _ = shutdown.changed() => return,
        };
        let lease = match event {
            None => return,
            // A re-list's `Init` comes before its request: the server has said nothing yet.
            Some(Ok(watcher::Event::Init)) => continue,
            Some(Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease))) => {
                retry.answered();
                lease
            }
            Some(Ok(_)) => {
                retry.answered();
                continue;
            }
            Some(Err(e)) => {
                warn!(error = %e, "leader election: the watch on the Lease failed; retried");
                if !retry.wait(crate::view::expired(&e), &mut shutdown).await {
                    return;
                }
                continue;
            }
        };
        let spec = lease.spec.unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(identity.as_str()) {
            continue;
        }
        let renew_time = spec.renew_time.map(|t| t.0);
        if let Some(renewed) = renew_time.filter(|_| renew_time != last_renew_time) {
            last_renew_time = renew_time;
            status.renewal_seen(renewal_instant(renewed, k8s_openapi::jiff::Timestamp::now(), Instant::now()));
        }
    }
}

/// When a renewal written at `renewed` (this process's clock: kube-lease-manager writes it) happened,
/// as an `Instant`, given the wall clock and the `Instant` now: a watch event that arrives late (a
/// re-list after a reconnect) must not move the renew deadline later than the renewal itself.
fn renewal_instant(renewed: k8s_openapi::jiff::Timestamp, wall: k8s_openapi::jiff::Timestamp, now: Instant) -> Instant {
    let ago = wall.as_millisecond().saturating_sub(renewed.as_millisecond());
    match u64::try_from(ago) {
        Ok(ago) => now.checked_sub(Duration::from_millis(ago)).unwrap_or(now),
        Err(_) => now, // written "in the future": the clock stepped back; count from now
    }
}

/// The pod's name (`POD_NAME`, from the downward API; else the host name) and a random suffix, as
/// controller-runtime names its identity.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "carpentry-controller".into());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{host}_{:08x}", nanos ^ std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewal_seen_late_counts_from_when_it_was_written() {
        let now = Instant::now() + Duration::from_secs(60);
        let wall = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let renewed = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 - 7).unwrap();
        assert_eq!(renewal_instant(renewed, wall, now), now - Duration::from_secs(7));
        let future = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + 3).unwrap();
        assert_eq!(renewal_instant(future, wall, now), now);
        assert!(!within_deadline(
            Some(renewal_instant(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 - 10).unwrap(), wall, now)),
            now
        ));
    }

    #[test]
    fn a_leader_acts_only_within_the_renew_deadline_of_its_last_seen_renewal() {
        let now = Instant::now();
        assert!(!within_deadline(None, now), "no renewal seen yet");
        assert!(within_deadline(Some(now), now));
        assert!(within_deadline(Some(now), now + RENEW_DEADLINE - Duration::from_millis(1)));
        assert!(!within_deadline(Some(now), now + RENEW_DEADLINE));
        assert!(RENEW_DEADLINE < Duration::from_secs(LEASE_SECONDS), "it stops before the Lease can pass on");
    }
}
