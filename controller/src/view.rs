//! The cluster view: one watch per resource core reads ([`LISTED_RESOURCES`]), so that a decision
//! reads the cluster without a list call. Each object the watch brings is loaded for core when it
//! arrives, through the loader the plugin's live read uses ([`LiveObject`], the rules of
//! [`carpentry_core::load_from_api_server`]), and kept as loaded ([`Objects`]): the controller, the
//! plugin and a snapshot read the same objects the same way, and a read of the view assembles what
//! is kept rather than writing every object out and loading it again. An object that does not load
//! is left out and named ([`carpentry_core::load_from_api_server_skipping`]) rather than stopping
//! every decision.
//!
//! Upstream's `state.Cluster` is synced once its informers have listed everything; the view's
//! [`ClusterView::unsynced`] says which watches have not yet.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use carpentry_core::manifest::{ListedResource, Manifests, LISTED_RESOURCES};
use carpentry_core::{LiveLoad, LiveObject, Skipped};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher;
use tracing::{error, info, warn};

/// Kinds watched in `--namespace` only when it is given (the rest are cluster-scoped, or read
/// cluster-wide because they shape every node: DaemonSets).
const NAMESPACED_BY_FLAG: [&str; 3] = ["Pod", "PodDisruptionBudget", "PersistentVolumeClaim"];

/// One watched resource.
struct Watched {
    resource: ListedResource,
    objects: Arc<Mutex<Objects>>,
    /// The watch has listed everything once.
    synced: Arc<AtomicBool>,
    /// The last watch error, while the watch is failing (cleared by the next event).
    failing: Arc<Mutex<Option<String>>>,
}

/// The controller's view of the cluster.
pub struct ClusterView {
    watched: Vec<Watched>,
    /// Objects loaded for core since the view started.
    decoded: Arc<AtomicU64>,
    /// Notified on every change to the view (permits coalesce: one wake-up for a burst).
    changed: Arc<tokio::sync::Notify>,
    /// Why a watch ended before shutdown (it panicked), once one has.
    broken: Arc<tokio::sync::watch::Sender<Option<String>>>,
}

impl ClusterView {
    /// Starts the watches; they run until `shutdown` turns true.
    pub fn start(
        client: kube::Client,
        namespace: Option<&str>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> ClusterView {
        let changed = Arc::new(tokio::sync::Notify::new());
        let decoded = Arc::new(AtomicU64::new(0));
        let broken = Arc::new(tokio::sync::watch::Sender::new(None));
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
                let objects = Arc::new(Mutex::new(Objects::new(*resource, decoded.clone())));
                let synced = Arc::new(AtomicBool::new(false));
                let failing = Arc::new(Mutex::new(None));
                let watching = tokio::spawn(watch(
                    *resource,
                    api,
                    objects.clone(),
                    synced.clone(),
                    failing.clone(),
                    changed.clone(),
                    shutdown.clone(),
                ));
                tokio::spawn(report_panic(resource.name(), watching, broken.clone()));
                Watched { resource: *resource, objects, synced, failing }
            })
            .collect();
        ClusterView { watched, decoded, changed, broken }
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
        self.watched.iter().map(|w| (w.resource.name(), lock(&w.objects).current.len())).collect()
    }

    /// The view as core's manifests, as a live read loads them, without the objects that do not
    /// load ([`LiveLoad::from_objects`], [`carpentry_core::load_from_api_server_skipping`]'s
    /// rules); with each document's object reference, for events about the left-out ones.
    pub fn load(&self) -> Loaded {
        // Each resource's objects are taken under its lock (reference counts only), then assembled.
        let entries: Vec<Arc<Entry>> =
            self.watched.iter().flat_map(|w| lock(&w.objects).current.values().cloned().collect::<Vec<_>>()).collect();
        let live = LiveLoad::from_objects(entries.iter().map(|e| &e.object));
        Loaded::new(live, entries.iter().map(|e| e.reference.clone()).collect())
    }

    /// Resolves, with why, once a watch has ended before shutdown (a panic while loading an
    /// object): that resource's view would be frozen from then on, so the process stops, to be
    /// restarted clean, as it does when the reconcilers panic.
    pub fn broken(&self) -> impl std::future::Future<Output = String> + Send + 'static {
        let mut broken = self.broken.subscribe();
        async move {
            let why = broken.wait_for(Option::is_some).await.map(|why| why.clone().unwrap_or_default());
            match why {
                Ok(why) => why,
                // The view is gone (shutdown): nothing broke.
                Err(_) => std::future::pending().await,
            }
        }
    }

    /// Objects loaded for core since the view started (an object is loaded again only when it
    /// changes).
    pub fn decoded_total(&self) -> u64 {
        self.decoded.load(Ordering::Relaxed)
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// An object as core loaded it, with what identifies it.
struct Entry {
    resource_version: Option<String>,
    reference: ObjectReference,
    object: LiveObject,
}

type Key = (Option<String>, String);

/// One resource's objects, each loaded for core when its watch brings it and kept until it
/// changes or goes: the view's store (as kube-runtime's reflector store, whose own copy of every
/// object is then not kept). In a stable order, by namespace and name.
struct Objects {
    resource: ListedResource,
    current: BTreeMap<Key, Arc<Entry>>,
    /// A re-list under way (kube-runtime's `Init` … `InitDone`): the objects listed so far,
    /// which replace `current` when the list is complete, as the reflector's store does.
    listing: Option<BTreeMap<Key, Arc<Entry>>>,
    decoded: Arc<AtomicU64>,
}

impl Objects {
    fn new(resource: ListedResource, decoded: Arc<AtomicU64>) -> Objects {
        Objects { resource, current: BTreeMap::new(), listing: None, decoded }
    }

    /// The entry for `o`: the kept one while its resourceVersion holds (a re-list or a repeat
    /// loads nothing again), else `o` loaded.
    fn entry(&self, key: &Key, o: &DynamicObject) -> Arc<Entry> {
        let resource_version = &o.metadata.resource_version;
        let kept = self.listing.as_ref().and_then(|l| l.get(key)).or_else(|| self.current.get(key));
        // An object without a resourceVersion (not one from a server) is always loaded.
        if let Some(kept) = kept.filter(|k| resource_version.is_some() && k.resource_version == *resource_version) {
            return kept.clone();
        }
        let reference = ObjectReference {
            api_version: Some(self.resource.api_version()),
            kind: Some(self.resource.kind.into()),
            name: o.metadata.name.clone(),
            namespace: o.metadata.namespace.clone(),
            uid: o.metadata.uid.clone(),
            ..Default::default()
        };
        let value = serde_json::to_value(o).unwrap_or_default();
        let object = LiveObject::load(self.resource.prepare(value));
        self.decoded.fetch_add(1, Ordering::Relaxed);
        Arc::new(Entry { resource_version: resource_version.clone(), reference, object })
    }

    /// Applies one watch event.
    fn apply(&mut self, event: watcher::Event<DynamicObject>) {
        let key = |o: &DynamicObject| (o.metadata.namespace.clone(), o.metadata.name.clone().unwrap_or_default());
        match event {
            watcher::Event::Init => self.listing = Some(BTreeMap::new()),
            watcher::Event::InitApply(o) => {
                let k = key(&o);
                let entry = self.entry(&k, &o);
                self.listing.get_or_insert_with(BTreeMap::new).insert(k, entry);
            }
            watcher::Event::InitDone => {
                if let Some(listed) = self.listing.take() {
                    self.current = listed;
                }
            }
            watcher::Event::Apply(o) => {
                let k = key(&o);
                let entry = self.entry(&k, &o);
                self.current.insert(k, entry);
            }
            watcher::Event::Delete(o) => {
                self.current.remove(&key(&o));
            }
        }
    }
}

/// The view, loaded.
pub struct Loaded {
    pub live: LiveLoad,
    /// Each document's object, by document number − 1.
    references: Vec<ObjectReference>,
    /// Which load this is: no two views in a process share one (see [`Loaded::sequence`]).
    sequence: u64,
}

/// The sequence the next view loaded takes.
static NEXT_SEQUENCE: AtomicU64 = AtomicU64::new(1);

impl Loaded {
    fn new(live: LiveLoad, references: Vec<ObjectReference>) -> Loaded {
        Loaded { live, references, sequence: NEXT_SEQUENCE.fetch_add(1, Ordering::Relaxed) }
    }

    /// This view's number, unique in the process: what is worked out once from a whole view (a
    /// NodePool's usage) is kept under it for the reconciles of the same view.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    pub fn manifests(&self) -> &Manifests {
        &self.live.manifests
    }

    /// A view of `manifests` with nothing left out.
    #[cfg(test)]
    pub fn of(manifests: Manifests) -> Loaded {
        Loaded::new(LiveLoad { manifests, ..LiveLoad::default() }, Vec::new())
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

/// Waits for a watch's task; says why in `broken` if it panicked.
async fn report_panic(
    resource: String,
    watching: tokio::task::JoinHandle<()>,
    broken: Arc<tokio::sync::watch::Sender<Option<String>>>,
) {
    if let Err(e) = watching.await {
        if e.is_panic() {
            let why = format!("the {resource} watch panicked: {e}");
            error!("{why}");
            broken.send_replace(Some(why));
        }
    }
}

/// Runs one watch into its store until shutdown, with [`Retry`] between failures.
async fn watch(
    resource: ListedResource,
    api: Api<DynamicObject>,
    objects: Arc<Mutex<Objects>>,
    synced: Arc<AtomicBool>,
    failing: Arc<Mutex<Option<String>>>,
    changed: Arc<tokio::sync::Notify>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let name = resource.name();
    let mut events = watcher(api, watcher::Config::default()).boxed();
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
            Some(Ok(watcher::Event::Init)) => lock(&objects).apply(watcher::Event::Init),
            Some(Ok(event)) => {
                let init_done = matches!(event, watcher::Event::InitDone);
                // A listed object changes nothing until the list is complete: no one is woken.
                let changes = !matches!(event, watcher::Event::InitApply(_));
                // Loaded under the store's lock: an object loads in about a quarter of a
                // millisecond, and reads take the lock only to copy pointers.
                lock(&objects).apply(event);
                retry.answered();
                if let Ok(mut f) = failing.lock() {
                    if f.take().is_some() {
                        info!(resource = %name, "watch recovered");
                    }
                }
                // Synced before anyone is woken: the first read after the list sees it synced.
                if init_done && !synced.swap(true, Ordering::AcqRel) {
                    info!(resource = %name, "watch synced");
                }
                if changes {
                    changed.notify_one();
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
        o.metadata.resource_version = Some(version.into());
        o.metadata.uid = Some(format!("uid-{name}"));
        o
    }

    #[test]
    fn an_object_is_loaded_when_it_arrives_or_changes_and_forgotten_when_it_goes() {
        let pod = *LISTED_RESOURCES.iter().find(|r| r.plural == "pods").unwrap();
        let spec = |cpu: &str| serde_json::json!({"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}});
        let decoded = Arc::new(AtomicU64::new(0));
        let view = ClusterView {
            watched: vec![Watched {
                resource: pod,
                objects: Arc::new(Mutex::new(Objects::new(pod, decoded.clone()))),
                synced: Arc::default(),
                failing: Arc::default(),
            }],
            decoded: decoded.clone(),
            changed: Arc::default(),
            broken: Arc::new(tokio::sync::watch::Sender::new(None)),
        };
        let apply = |event| lock(&view.watched[0].objects).apply(event);
        let names = |loaded: &Loaded| {
            let m = loaded.manifests();
            m.pods.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect::<Vec<_>>()
        };
        use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};
        apply(Init);
        apply(InitApply(object(pod, "c", "1", spec("1"))));
        apply(InitApply(object(pod, "b", "2", spec("1x"))));
        // A list under way is not the view yet.
        assert!(names(&view.load()).is_empty());
        apply(InitApply(object(pod, "a", "3", spec("1"))));
        apply(InitDone);
        let loaded = view.load();
        assert_eq!((view.decoded_total(), names(&loaded)), (3, vec!["a".to_string(), "c".into()]));
        // The pod whose request is not a quantity is left out, and named by its object.
        let skipped = &loaded.live.skipped[0];
        assert_eq!(loaded.reference(skipped).and_then(|r| r.uid.as_deref()), Some("uid-b"));
        // A read loads nothing again; nor does a re-list of the same objects.
        view.load();
        apply(Init);
        apply(InitApply(object(pod, "a", "3", spec("1"))));
        apply(InitApply(object(pod, "b", "2", spec("1x"))));
        apply(InitDone);
        assert_eq!(view.decoded_total(), 3);
        // The re-list left out "c" (deleted while the watch was down): it is gone.
        assert_eq!(names(&view.load()), ["a"]);
        // The bad pod fixed (a new resourceVersion) loads again; a deleted one goes.
        apply(Apply(object(pod, "b", "4", spec("2"))));
        apply(Delete(object(pod, "a", "3", spec("1"))));
        let loaded = view.load();
        assert_eq!((view.decoded_total(), names(&loaded), loaded.live.skipped.len()), (4, vec!["b".to_string()], 0));
        assert_eq!(view.counts(), [("pods".to_string(), 1)]);
    }

    #[tokio::test]
    async fn a_watch_that_panics_breaks_the_view_and_one_that_ends_does_not() {
        let broken = Arc::new(tokio::sync::watch::Sender::new(None));
        let view = ClusterView { watched: Vec::new(), decoded: Arc::default(), changed: Arc::default(), broken };
        let ended = tokio::spawn(async {});
        report_panic("pods".into(), ended, view.broken.clone()).await;
        assert!(view.broken.borrow().is_none());
        let panicked = tokio::spawn(async { panic!("an object that does not load") });
        report_panic("pods".into(), panicked, view.broken.clone()).await;
        let why = tokio::time::timeout(Duration::from_secs(5), view.broken()).await.expect("broken");
        assert!(why.starts_with("the pods watch panicked"), "{why}");
    }
}
