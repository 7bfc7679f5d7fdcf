//! The cluster view: one watch per resource core reads ([`LISTED_RESOURCES`]), each feeding a
//! kube-runtime reflector store, so that a decision reads the cluster without a list call. The
//! view turns into core's [`Manifests`] through the loader the plugin's live read uses
//! ([`carpentry_core::load_from_api_server`]), object by object and only for the objects that
//! changed ([`LiveObject`]), so the controller, the plugin and a snapshot read the same objects
//! the same way; an object that does not load is left out and named
//! ([`carpentry_core::load_from_api_server_skipping`]) rather than stopping every decision.
//!
//! Upstream's `state.Cluster` is synced once its informers have listed everything; the view's
//! [`ClusterView::unsynced`] says which watches have not yet.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use carpentry_core::manifest::{ListedResource, Manifests, LISTED_RESOURCES};
use carpentry_core::{LiveLoad, LiveObject, Skipped};
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
    decoded: Mutex<Decoded>,
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
        ClusterView { watched, decoded: Mutex::default(), changed }
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
    /// load ([`LiveLoad::from_objects`], [`carpentry_core::load_from_api_server_skipping`]'s
    /// rules); with each document's object reference, for events about the left-out ones. Only
    /// objects changed since the last load are loaded again ([`Decoded`]).
    pub fn load(&self) -> Loaded {
        let objects: Vec<(usize, ListedResource, Vec<Arc<DynamicObject>>)> = self
            .watched
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let mut objects = w.store.state();
                // A stable order (the stores are hash maps): by namespace and name.
                objects.sort_by(|a, b| {
                    (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
                });
                (i, w.resource, objects)
            })
            .collect();
        let mut decoded = self.decoded.lock().unwrap_or_else(|p| p.into_inner());
        decoded.read(objects.iter().flat_map(|(i, resource, objects)| objects.iter().map(|o| (*i, *resource, &**o))))
    }

    /// Objects loaded for core since the view started (a changed object is loaded again; an
    /// unchanged one is not).
    pub fn decoded_total(&self) -> u64 {
        self.decoded.lock().map_or(0, |d| d.total)
    }
}

/// The view's objects as core loaded them, each kept while its resourceVersion holds, so that a
/// read writes out and loads only the objects that changed since the last (at 5,000 pods the
/// whole view took about 1.4 s to load; the reflectors' own objects are kept by kube-runtime).
#[derive(Default)]
struct Decoded {
    /// By resource (index in [`LISTED_RESOURCES`]), namespace and name.
    entries: HashMap<(usize, Option<String>, String), Entry>,
    /// Reads so far: an entry not seen by the latest is gone from the cluster.
    reads: u64,
    /// Objects loaded so far.
    total: u64,
}

struct Entry {
    resource_version: Option<String>,
    reference: ObjectReference,
    object: LiveObject,
    read: u64,
}

impl Decoded {
    /// The read of `objects`, in order, each loaded again only if its resourceVersion changed.
    fn read<'a>(&mut self, objects: impl Iterator<Item = (usize, ListedResource, &'a DynamicObject)>) -> Loaded {
        self.reads += 1;
        let read = self.reads;
        let mut order = Vec::new();
        for (index, resource, o) in objects {
            let key = (index, o.metadata.namespace.clone(), o.metadata.name.clone().unwrap_or_default());
            let resource_version = &o.metadata.resource_version;
            match self.entries.get_mut(&key) {
                // An object without a resourceVersion (not one from a server) is always loaded.
                Some(entry) if resource_version.is_some() && entry.resource_version == *resource_version => {
                    entry.read = read;
                }
                _ => {
                    let reference = ObjectReference {
                        api_version: Some(resource.api_version()),
                        kind: Some(resource.kind.into()),
                        name: o.metadata.name.clone(),
                        namespace: o.metadata.namespace.clone(),
                        uid: o.metadata.uid.clone(),
                        ..Default::default()
                    };
                    let value = serde_json::to_value(o).unwrap_or_default();
                    let object = LiveObject::load(resource.prepare(value));
                    self.total += 1;
                    let entry = Entry { resource_version: resource_version.clone(), reference, object, read };
                    self.entries.insert(key.clone(), entry);
                }
            }
            order.push(key);
        }
        self.entries.retain(|_, e| e.read == read);
        let entries: Vec<&Entry> = order.iter().filter_map(|k| self.entries.get(k)).collect();
        let live = LiveLoad::from_objects(entries.iter().map(|e| &e.object));
        Loaded { live, references: entries.iter().map(|e| e.reference.clone()).collect() }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn object(resource: ListedResource, name: &str, version: &str, body: serde_json::Value) -> DynamicObject {
        let gvk = GroupVersionKind::gvk(resource.group, resource.version, resource.kind);
        let api_resource = ApiResource::from_gvk_with_plural(&gvk, resource.plural);
        let mut o = DynamicObject::new(name, &api_resource).within("default").data(body);
        if resource.kind == "Node" {
            o.metadata.namespace = None;
        }
        o.metadata.resource_version = Some(version.into());
        o.metadata.uid = Some(format!("uid-{name}"));
        o
    }

    #[test]
    fn a_read_loads_only_the_objects_that_changed_and_forgets_the_ones_gone() {
        let listed = |plural: &str| {
            let index = LISTED_RESOURCES.iter().position(|r| r.plural == plural).unwrap();
            (index, LISTED_RESOURCES[index])
        };
        let (pods, pod) = listed("pods");
        let (nodes, node) = listed("nodes");
        let spec = |cpu: &str| serde_json::json!({"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}});
        let mut view = vec![
            (nodes, node, object(node, "n1", "1", serde_json::json!({"status": {"capacity": {"cpu": "4"}}}))),
            (pods, pod, object(pod, "a", "2", spec("1"))),
            (pods, pod, object(pod, "b", "3", spec("1x"))),
        ];
        let mut decoded = Decoded::default();
        let read = |decoded: &mut Decoded, view: &[(usize, ListedResource, DynamicObject)]| {
            decoded.read(view.iter().map(|(i, r, o)| (*i, *r, o)))
        };
        let loaded = read(&mut decoded, &view);
        assert_eq!((decoded.total, loaded.manifests().pods.len(), loaded.manifests().nodes.len()), (3, 1, 1));
        // The pod whose request is not a quantity is left out, and named by its object.
        let skipped = &loaded.live.skipped[0];
        assert_eq!(loaded.reference(skipped).and_then(|r| r.uid.as_deref()), Some("uid-b"));
        // Nothing changed: nothing is loaded again.
        let again = read(&mut decoded, &view);
        assert_eq!((decoded.total, again.manifests().pods.len(), again.live.skipped.len()), (3, 1, 1));
        // The bad pod fixed (a new resourceVersion) loads again; the node gone is forgotten.
        view[2].2 = object(pod, "b", "4", spec("2"));
        view.remove(0);
        let fixed = read(&mut decoded, &view);
        assert_eq!((decoded.total, fixed.manifests().pods.len(), fixed.live.skipped.len()), (4, 2, 0));
        assert!(fixed.manifests().nodes.is_empty());
        assert_eq!(decoded.entries.len(), 2);
        // Documents follow the order given: the second object's reference is the second pod's.
        assert_eq!(fixed.references[1].name.as_deref(), Some("b"));
    }
}
