//! The cluster view: one watch per resource core reads ([`LISTED_RESOURCES`]), each feeding a
//! kube-runtime reflector store, so that a decision reads the cluster without a list call. The
//! view turns into core's [`Manifests`] through the loader the plugin's live read uses
//! ([`carpentry_core::load_from_api_server`]), so the controller, the plugin and a snapshot read
//! the same objects the same way; an object that does not load is left out and named
//! ([`carpentry_core::load_from_api_server_skipping`]) rather than stopping every decision.
//!
//! Upstream's `state.Cluster` is synced once its informers have listed everything; the view's
//! [`ClusterView::unsynced`] says which watches have not yet.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use carpentry_core::manifest::{api_documents, ListedResource, Manifests, LISTED_RESOURCES};
use carpentry_core::{LiveLoad, LoadError, Skipped};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube::runtime::reflector::{self, Store};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher;
use tracing::{info, warn};

/// Kinds watched in `--namespace` only when it is given (the rest are cluster-scoped, or read
/// cluster-wide because they shape every node: DaemonSets).
const NAMESPACED_BY_FLAG: [&str; 3] = ["Pod", "PodDisruptionBudget", "PersistentVolumeClaim"];

/// One watched resource.
struct Watched {
    resource: ListedResource,
    store: Store<DynamicObject>,
    /// The watch has listed everything once.
    synced: Arc<AtomicBool>,
    /// The last watch error, while the watch is failing (cleared by the next event).
    failing: Arc<Mutex<Option<String>>>,
}

/// The controller's view of the cluster.
pub struct ClusterView {
    watched: Vec<Watched>,
    /// Notified on every watch event (permits coalesce: one wake-up for a burst).
    changed: Arc<tokio::sync::Notify>,
}

impl ClusterView {
    /// Starts the watches; they run until `shutdown` turns true.
    pub fn start(
        client: kube::Client,
        namespace: Option<&str>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> ClusterView {
        let changed = Arc::new(tokio::sync::Notify::new());
        let watched = LISTED_RESOURCES
            .iter()
            .map(|resource| {
                let gvk = GroupVersionKind::gvk(resource.group, resource.version, resource.kind);
                let api_resource = ApiResource::from_gvk_with_plural(&gvk, resource.plural);
                let api: Api<DynamicObject> = match namespace {
                    Some(ns) if NAMESPACED_BY_FLAG.contains(&resource.kind) => {
                        Api::namespaced_with(client.clone(), ns, &api_resource)
                    }
                    _ => Api::all_with(client.clone(), &api_resource),
                };
                let writer = reflector::store::Writer::new(api_resource);
                let store = writer.as_reader();
                let synced = Arc::new(AtomicBool::new(false));
                let failing = Arc::new(Mutex::new(None));
                tokio::spawn(watch(
                    *resource,
                    api,
                    writer,
                    synced.clone(),
                    failing.clone(),
                    changed.clone(),
                    shutdown.clone(),
                ));
                Watched { resource: *resource, store, synced, failing }
            })
            .collect();
        ClusterView { watched, changed }
    }

    /// What the reconcilers wait on between passes.
    pub fn changes(&self) -> Arc<tokio::sync::Notify> {
        self.changed.clone()
    }

    /// The watches that have not listed everything yet, each with its last error if it is failing
    /// (a missing CRD, RBAC).
    pub fn unsynced(&self) -> Vec<(String, Option<String>)> {
        self.watched
            .iter()
            .filter(|w| !w.synced.load(Ordering::Acquire))
            .map(|w| (w.resource.name(), w.failing.lock().ok().and_then(|f| f.clone())))
            .collect()
    }

    /// Objects held, per resource (`nodepools.karpenter.sh`, `pods`, …).
    pub fn counts(&self) -> Vec<(String, usize)> {
        self.watched.iter().map(|w| (w.resource.name(), w.store.len())).collect()
    }

    /// The view as core's manifests, loaded as a live read is, without the objects that do not
    /// load ([`carpentry_core::load_from_api_server_skipping`]); with each document's object
    /// reference, for events about the left-out ones.
    pub fn load(&self) -> Result<Loaded, LoadError> {
        let mut references = Vec::new();
        let items: Vec<String> = self
            .watched
            .iter()
            .flat_map(|w| {
                let mut objects = w.store.state();
                // A stable order (the stores are hash maps): by namespace and name.
                objects.sort_by(|a, b| {
                    (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
                });
                objects.into_iter().map(move |o| (w.resource, o))
            })
            .map(|(resource, o)| {
                references.push(ObjectReference {
                    api_version: Some(resource.api_version()),
                    kind: Some(resource.kind.into()),
                    name: o.metadata.name.clone(),
                    namespace: o.metadata.namespace.clone(),
                    uid: o.metadata.uid.clone(),
                    ..Default::default()
                });
                let value = serde_json::to_value(&*o).unwrap_or_default();
                resource.prepare(value).to_string()
            })
            .collect();
        let live = carpentry_core::load_from_api_server_skipping(&api_documents(items.iter().map(String::as_str)))?;
        Ok(Loaded { live, references })
    }
}

/// The view, loaded.
pub struct Loaded {
    pub live: LiveLoad,
    /// Each document's object, by document number − 1.
    references: Vec<ObjectReference>,
}

impl Loaded {
    pub fn manifests(&self) -> &Manifests {
        &self.live.manifests
    }

    /// The object a left-out document held, as events name it.
    pub fn reference(&self, skipped: &Skipped) -> Option<&ObjectReference> {
        skipped.document.checked_sub(1).and_then(|i| self.references.get(i))
    }
}

/// The wait before a failed watch is tried again: client-go's reflector backoff (0.8 s doubling to
/// 30 s, jittered; kube-runtime's `DefaultBackoff`), reset by what the server sends.
///
/// It is kept by the watch loops rather than by `WatchStreamExt::default_backoff`, which resets on
/// any item: a re-list yields `Init` before its request is made, so while the API server was down
/// the list was retried about once a second forever. A 410 Gone (the server's history no longer
/// reaches the watch's resourceVersion: etcd compacted it, or the server restarted) comes from a
/// server that answers: the backoff starts over (0.8 s), or an outage's grown one would keep the
/// view stale up to 30 s more; a server that keeps answering 410 gets a list about every second.
#[derive(Default)]
pub(crate) struct Retry {
    backoff: watcher::DefaultBackoff,
}

impl Retry {
    /// The server sent something: the next failure waits the shortest time again.
    pub(crate) fn answered(&mut self) {
        self.backoff.reset();
    }

    /// Waits before the watch is tried again (`expired`: after a 410); `false` when `shutdown`
    /// came first.
    pub(crate) async fn wait(&mut self, expired: bool, shutdown: &mut tokio::sync::watch::Receiver<bool>) -> bool {
        if expired {
            self.backoff.reset();
        }
        let wait = self.backoff.next().unwrap_or(Duration::from_secs(30));
        tokio::select! {
            () = tokio::time::sleep(wait) => true,
            _ = shutdown.changed() => false,
        }
    }
}

/// Whether a watch failed with 410 Gone (its resourceVersion is too old).
pub(crate) fn expired(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchError(status) if status.code == 410)
}

/// Runs one watch into its store until shutdown, with [`Retry`] between failures.
async fn watch(
    resource: ListedResource,
    api: Api<DynamicObject>,
    writer: reflector::store::Writer<DynamicObject>,
    synced: Arc<AtomicBool>,
    failing: Arc<Mutex<Option<String>>>,
    changed: Arc<tokio::sync::Notify>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let name = resource.name();
    let mut events = reflector::reflector(writer, watcher(api, watcher::Config::default())).boxed();
    let mut retry = Retry::default();
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            _ = shutdown.changed() => return,
        };
        match next {
            None => return,
            // A re-list begins with `Init` before its request is made (kube-runtime's ListWatch):
            // the server has said nothing yet, so it neither recovers the watch nor wakes anyone.
            Some(Ok(watcher::Event::Init)) => {}
            Some(Ok(event)) => {
                retry.answered();
                changed.notify_one();
                if let Ok(mut f) = failing.lock() {
                    if f.take().is_some() {
                        info!(resource = %name, "watch recovered");
                    }
                }
                if matches!(event, watcher::Event::InitDone) && !synced.swap(true, Ordering::AcqRel) {
                    info!(resource = %name, "watch synced");
                }
            }
            Some(Err(e)) if expired(&e) => {
                info!(resource = %name, "watch expired (410 Gone); listing again");
                if !retry.wait(true, &mut shutdown).await {
                    return;
                }
            }
            Some(Err(e)) => {
                let text = carpentry_core::error_chain(&e);
                {
                    let mut f = failing.lock().unwrap_or_else(|p| p.into_inner());
                    if f.as_deref() != Some(text.as_str()) {
                        warn!(resource = %name, error = %text, "watch failing (retrying with backoff)");
                    }
                    *f = Some(text);
                }
                if !retry.wait(false, &mut shutdown).await {
                    return;
                }
            }
        }
    }
}
