//! Leader election on a `coordination.k8s.io/v1` Lease (kube-lease-manager): one replica leads,
//! the others wait to take over. Upstream (controller-runtime) holds its Lease for 15 s and renews
//! it 10 s in; here the Lease lasts 15 s and is renewed 5 s before it would expire. On shutdown the
//! Lease is released, so a successor leads at once (upstream's `ReleaseOnCancel`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use kube_lease_manager::LeaseManagerBuilder;
use tracing::{info, warn};

const LEASE_SECONDS: u64 = 15;
const RENEW_BEFORE_EXPIRY_SECONDS: u64 = 5;

/// Whether this replica leads, as the HTTP endpoints and the reconcilers read it.
#[derive(Debug, Clone, Default)]
pub struct LeaderStatus {
    leading: Arc<AtomicBool>,
    pub lease: String,
}

impl LeaderStatus {
    pub fn leading(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }
}

pub struct Leader {
    status: LeaderStatus,
    /// Dropping the receiver tells the manager's task to release the Lease and stop.
    task: Option<(tokio::sync::watch::Receiver<bool>, tokio::task::JoinHandle<()>)>,
    manager: Option<tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>>,
}

impl Leader {
    /// Starts competing for Lease `namespace/name`.
    pub async fn start(
        client: kube::Client,
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
        let status = LeaderStatus { leading: Arc::default(), lease: format!("{namespace}/{name}") };
        let (receiver, manager) = manager.watch().await;
        let mut changes = receiver.clone();
        let leading = status.leading.clone();
        let lease = status.lease.clone();
        let follow = tokio::spawn(async move {
            loop {
                let now = *changes.borrow_and_update();
                if leading.swap(now, Ordering::AcqRel) != now {
                    match now {
                        true => info!(lease = %lease, identity = %identity, "became the leader"),
                        false => warn!(lease = %lease, identity = %identity, "lost the leadership"),
                    }
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    _ = shutdown.changed() => return,
                }
            }
        });
        Ok(Leader { status, task: Some((receiver, follow)), manager: Some(manager) })
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
        self.status.leading.store(false, Ordering::Release);
        if let Some(manager) = self.manager.take() {
            match manager.await {
                Ok(Ok(_)) => info!(lease = %self.status.lease, "released the Lease"),
                Ok(Err(e)) => warn!(lease = %self.status.lease, error = %e, "could not release the Lease"),
                Err(e) => warn!(error = %e, "the leader-election task panicked"),
            }
        }
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
