//! Per-object reconcilers, as upstream's controller-runtime controllers (`For(&Kind{})`): each
//! object of a kind is reconciled on its own, when it changes in the view, when an object its
//! reconciler watches changes ([`ObjectReconciler::related`], upstream's `Watches`), when its last
//! reconcile asked to run again after a while ([`Next::After`], upstream's `RequeueAfter`), and
//! after a failed reconcile, with its controller's backoff (core's
//! [`carpentry_core::workqueue`]). Built on kube-runtime's [`applier`] (what
//! `kube::runtime::Controller` runs): its scheduler keeps one request per object, delays requeues,
//! runs one reconcile per object at a time and at most the controller's concurrency at once.
//!
//! The applier's store is fed from the views the loader publishes rather than by a reflector of
//! its own (`Controller::for_shared_stream`'s shape, on the view's store): a reconcile reads the
//! object as core loaded it, in the same view the rest of its decision reads, and nothing is
//! watched or decoded twice. While no view is to be decided on (this replica does not lead, a
//! watch is not synced, an object is held back) nothing is reconciled; every object is once one
//! is again.

use std::borrow::Cow;
use std::collections::HashSet;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use carpentry_core::workqueue::RateLimiter;
use futures::channel::mpsc;
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::ClusterResourceScope;
use kube::runtime::controller::{applier, Action, Config, Error as ApplierError};
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;
use kube::Resource;
use tokio::sync::watch;
use tracing::{debug, error, warn};

use super::{Progress, TICK};
use crate::metrics::Metrics;
use crate::view::Loaded;

/// How long reconciles under way at shutdown are waited for (controller-runtime's manager waits
/// 30 s for running reconciles; the kubelet's default grace is 30 s too).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// A cluster-scoped kind reconciled one object at a time, as core loads it.
pub(super) trait Kind: Clone + Send + Sync + 'static {
    const KIND: &'static str;
    const GROUP: &'static str;
    const VERSION: &'static str;
    const PLURAL: &'static str;

    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;

    /// Every object of the kind in a view.
    fn all(loaded: &Loaded) -> impl Iterator<Item = &Self>;

    /// Whether `after` is to be reconciled though `before` was. By default any change (upstream's
    /// `For` without predicates).
    fn changed(before: &Self, after: &Self) -> bool {
        before.meta().resource_version != after.meta().resource_version
    }
}

impl Kind for carpentry_core::api::NodeClaim {
    const KIND: &'static str = "NodeClaim";
    const GROUP: &'static str = "karpenter.sh";
    const VERSION: &'static str = "v1";
    const PLURAL: &'static str = "nodeclaims";

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn all(loaded: &Loaded) -> impl Iterator<Item = &Self> {
        loaded.manifests().nodeclaims.iter()
    }
}

/// The names of the objects of `after` that are new or changed (another resourceVersion) since
/// `before`: what a controller's `Watches` on their kind sees between two views.
pub(super) fn changed_names<'m, T>(before: &[T], after: &'m [T], meta: fn(&T) -> &ObjectMeta) -> HashSet<&'m str> {
    let versions: std::collections::HashMap<&str, &Option<String>> =
        before.iter().filter_map(|o| Some((meta(o).name.as_deref()?, &meta(o).resource_version))).collect();
    after
        .iter()
        .map(meta)
        .filter(|m| m.name.as_deref().is_some_and(|name| versions.get(name) != Some(&&m.resource_version)))
        .filter_map(|m| m.name.as_deref())
        .collect()
}

/// An object of kind `T` in the applier's store (kube-runtime's store keys by [`Resource`]).
#[derive(Debug, Clone)]
pub(super) struct Live<T>(T);

impl<T: Kind> Resource for Live<T> {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        T::KIND.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        T::GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        T::VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        T::PLURAL.into()
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// What a reconcile that succeeded asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Nothing until the object (or a related one) changes.
    Change,
    /// Again after this long, or sooner if it changes (upstream's `RequeueAfter`).
    After(Duration),
}

/// Why a reconcile failed: its controller's backoff follows.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub(super) struct Failed(#[from] pub anyhow::Error);

/// One controller's reconcile of one object.
pub(super) trait ObjectReconciler: Send + Sync + 'static {
    type Object: Kind;
    /// Its name in logs, `/healthz` and the reconcile metrics (upstream's controller name).
    const NAME: &'static str;
    /// At most this many objects reconciled at once (upstream's `MaxConcurrentReconciles`).
    const CONCURRENCY: u16;
    /// The wait after failed reconciles of the same object (upstream's rate limiter).
    const RATE_LIMITER: RateLimiter;
    /// Whether a change to an object whose reconcile failed waits for the end of its backoff
    /// (unless its spec changed or it is being deleted): for a controller whose failed reconcile
    /// writes the object (see [`Failing::wait`]). Upstream reconciles a change at once.
    const DEFER_CHANGES_IN_BACKOFF: bool = false;

    /// The objects (by name) to reconcile because something other than themselves changed
    /// between two views (upstream's `Watches`).
    fn related(_before: &Loaded, _after: &Loaded) -> Vec<String> {
        Vec::new()
    }

    /// On each view fed, before the reconciles it asks for: forget what belongs to objects gone.
    fn tidy(&self, _loaded: &Loaded) {}

    /// Reconciles `object` as `loaded` shows it. What the reconcile reads of the view is taken
    /// before its future is made, which borrows the reconciler alone (`use<'a, Self>`): a
    /// reconcile awaiting a slow call (a CreateFleet, a write queued behind the client's QPS
    /// limit) holds no view, each of which is a copy of the cluster, so that a thousand of them
    /// under way keep one or two views alive rather than one for every view published meanwhile.
    fn reconcile<'a>(
        &'a self,
        object: &Self::Object,
        loaded: &Loaded,
    ) -> impl Future<Output = Result<Next, Failed>> + Send + use<'a, Self>;
}

/// An object whose last reconcile failed.
#[derive(Debug, Clone, PartialEq)]
struct Failing {
    /// Failures in a row: the rate limiter's count.
    count: u32,
    /// When its backoff ends.
    retry_at: Instant,
    /// Its generation and whether it was being deleted, when it failed.
    generation: Option<i64>,
    deleting: bool,
}

impl Failing {
    fn new(object: &ObjectMeta) -> Failing {
        Failing {
            count: 0,
            retry_at: Instant::now(),
            generation: object.generation,
            deleting: object.deletion_timestamp.is_some(),
        }
    }

    /// The rest of the backoff, if `object` is to wait for it: until the backoff ends, a change to
    /// an object that failed is reconciled then, unless its spec changed or it is being deleted
    /// since. upstream's workqueue reconciles any change at once, backoff or not; but a failure
    /// whose reconcile writes a status (a launch's `Launched` condition, whose message can differ
    /// with every call: a request ID, an encoded authorization message) would then bring itself
    /// back at once, and the backoff would never apply (see docs/divergences.md).
    fn wait(&self, object: &ObjectMeta, now: Instant) -> Option<Duration> {
        // A failure while it was being deleted (a finalizer's step) writes nothing: not deferred.
        let same = !self.deleting
            && object.generation == self.generation
            && object.deletion_timestamp.is_some() == self.deleting;
        let wait = self.retry_at.saturating_duration_since(now);
        (same && !wait.is_zero()).then_some(wait)
    }
}

/// What the applier's reconciles share.
struct Context<R> {
    reconciler: R,
    views: watch::Receiver<Option<Arc<Loaded>>>,
    /// Objects whose last reconcile failed, by UID (forgotten on a success).
    failures: Mutex<std::collections::HashMap<String, Failing>>,
    /// A reconcile found no view to decide on and asked for nothing more: the next view fed
    /// reconciles every object (the feed may not see a `None` that a `Some` replaced at once).
    starved: AtomicBool,
    metrics: Metrics,
    /// Liveness: each reconcile under way is in it until it ends.
    progress: Progress,
}

impl<R: ObjectReconciler> Context<R> {
    /// Reconciles `object` as the latest view shows it (the store's copy may be a view older).
    async fn reconcile(&self, object: Arc<Live<R::Object>>) -> Result<Action, Failed> {
        let name = object.meta().name.clone().unwrap_or_default();
        let Some(loaded) = self.views.borrow().clone() else {
            // Every object is reconciled once a view is.
            self.starved.store(true, Ordering::Release);
            return Ok(Action::await_change());
        };
        let Some(current) = R::Object::all(&loaded).find(|o| o.meta().name.as_ref() == Some(&name)) else {
            return Ok(Action::await_change()); // gone since: its deletion is not reconciled
        };
        let uid = current.meta().uid.clone().unwrap_or_default();
        let (generation, deleting) = (current.meta().generation, current.meta().deletion_timestamp.is_some());
        let failing = self.failures.lock().unwrap_or_else(PoisonError::into_inner).get(&uid).cloned();
        let deferred = failing.filter(|_| R::DEFER_CHANGES_IN_BACKOFF);
        if let Some(wait) = deferred.and_then(|f| f.wait(current.meta(), Instant::now())) {
            return Ok(Action::requeue(wait));
        }
        let started = Instant::now();
        let _running = self.progress.running(R::NAME, &name, crate::clock::now_seconds());
        let reconcile = self.reconciler.reconcile(current, &loaded);
        // The view is let go before the reconcile's calls (see `ObjectReconciler::reconcile`).
        drop(loaded);
        let result = reconcile.await;
        self.metrics.reconcile(R::NAME, started, result.as_ref().ok().map(|next| *next != Next::Change));
        match result {
            Ok(next) => {
                self.failures.lock().unwrap_or_else(PoisonError::into_inner).remove(&uid);
                Ok(match next {
                    Next::Change => Action::await_change(),
                    Next::After(wait) => Action::requeue(wait),
                })
            }
            Err(e) => {
                // As the reconcile saw it (the store's copy the backoff is given may be older).
                let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
                let failing =
                    failures.entry(uid).or_insert(Failing { count: 0, retry_at: Instant::now(), generation, deleting });
                (failing.generation, failing.deleting) = (generation, deleting);
                Err(e)
            }
        }
    }

    /// upstream's rate limiter: the wait before `object` is reconciled again after a failure.
    fn backoff(&self, object: &Live<R::Object>, failed: &Failed) -> Action {
        let name = object.meta().name.clone().unwrap_or_default();
        let uid = object.meta().uid.clone().unwrap_or_default();
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let failing = failures.entry(uid).or_insert_with(|| Failing::new(object.meta()));
        failing.count = failing.count.saturating_add(1);
        let wait = Duration::from_millis(R::RATE_LIMITER.wait_millis(failing.count));
        failing.retry_at = Instant::now() + wait;
        warn!(controller = R::NAME, object = %name, error = %failed, failures = failing.count,
            retry_in_ms = wait.as_millis() as u64, "reconcile failed");
        Action::requeue(wait)
    }
}

type Reconcile = Pin<Box<dyn Future<Output = Result<Action, Failed>> + Send>>;

/// Feeds the applier's store and queue from the published views.
struct Feed<T: Kind> {
    writer: Writer<Live<T>>,
    trigger: mpsc::UnboundedSender<ObjectRef<Live<T>>>,
    /// The view fed last; `None` before the first and while none is to be decided on.
    fed: Option<Arc<Loaded>>,
    listed: bool,
}

impl<T: Kind> Feed<T> {
    fn reconcile(&self, name: &str) {
        // Fails only once the applier has ended, which ends the task anyway.
        let _ = self.trigger.unbounded_send(ObjectRef::new(name));
    }

    /// Brings the store to `latest` and asks for the reconciles it calls for; returns how many.
    fn feed<R: ObjectReconciler<Object = T>>(&mut self, latest: Option<Arc<Loaded>>) -> usize {
        let Some(loaded) = latest else {
            self.fed = None;
            return 0;
        };
        let names: HashSet<&str> = T::all(&loaded).filter_map(|o| o.meta().name.as_deref()).collect();
        let mut wanted: HashSet<String> = HashSet::new();
        let reader = self.writer.as_reader();
        if !self.listed {
            self.writer.apply_watcher_event(&Event::Init);
            for object in T::all(&loaded) {
                self.writer.apply_watcher_event(&Event::InitApply(Live(object.clone())));
            }
            self.writer.apply_watcher_event(&Event::InitDone);
            self.listed = true;
        } else {
            for object in T::all(&loaded) {
                let Some(name) = object.meta().name.as_deref() else { continue };
                let changed = reader.get(&ObjectRef::new(name)).is_none_or(|before| T::changed(&before.0, object));
                if changed {
                    self.writer.apply_watcher_event(&Event::Apply(Live(object.clone())));
                    wanted.insert(name.to_string());
                }
            }
            for gone in reader.state().iter().filter(|o| !names.contains(o.meta().name.as_deref().unwrap_or_default()))
            {
                self.writer.apply_watcher_event(&Event::Delete(Live::clone(gone)));
            }
        }
        match &self.fed {
            // The first view to decide on (since this replica started, or led again, or the
            // view could be decided on again): every object, as a controller's first list.
            None => wanted.extend(names.iter().map(|n| n.to_string())),
            Some(before) => {
                wanted.extend(R::related(before, &loaded).into_iter().filter(|n| names.contains(n.as_str())))
            }
        }
        for name in &wanted {
            self.reconcile(name);
        }
        self.fed = Some(loaded);
        wanted.len()
    }
}

/// Runs `reconciler` over the objects of its kind in each view the loader publishes, until
/// shutdown (then waits a bounded while for reconciles under way). Returns early only if the
/// applier ends, which the caller treats as fatal.
pub(super) async fn drive_objects<R: ObjectReconciler>(
    reconciler: R,
    metrics: Metrics,
    mut views: watch::Receiver<Option<Arc<Loaded>>>,
    progress: Progress,
    mut shutdown: watch::Receiver<bool>,
) {
    let writer = Writer::<Live<R::Object>>::new(());
    let store = writer.as_reader();
    let (trigger, queue) = mpsc::unbounded();
    let context = Arc::new(Context {
        reconciler,
        views: views.clone(),
        failures: Mutex::default(),
        starved: AtomicBool::new(false),
        metrics,
        progress: progress.clone(),
    });
    let mut reconciles = applier(
        |object, context: Arc<Context<R>>| -> Reconcile { Box::pin(async move { context.reconcile(object).await }) },
        |object, failed, context| context.backoff(&object, failed),
        context.clone(),
        store,
        queue.map(Ok::<_, Infallible>),
        Config::default().concurrency(R::CONCURRENCY),
    )
    .boxed();
    let mut feed = Feed { writer, trigger, fed: None, listed: false };
    let latest = views.borrow_and_update().clone();
    feed.feed::<R>(latest);
    loop {
        progress.mark(R::NAME, crate::clock::now_seconds());
        tokio::select! {
            done = reconciles.next() => match done {
                Some(Ok(_)) | Some(Err(ApplierError::ReconcilerFailed(..))) => {} // logged by the backoff
                Some(Err(ApplierError::ObjectNotFound(object))) => debug!(controller = R::NAME, %object, "gone before its reconcile"),
                Some(Err(e)) => warn!(controller = R::NAME, error = %e, "the reconcile queue failed"),
                None => {
                    error!(controller = R::NAME, "the reconcile queue ended");
                    return;
                }
            },
            changed = views.changed() => {
                if changed.is_err() {
                    return;
                }
                let latest = views.borrow_and_update().clone();
                if let Some(loaded) = &latest {
                    context.reconciler.tidy(loaded);
                }
                if latest.is_some() && context.starved.swap(false, Ordering::AcqRel) {
                    feed.fed = None;
                }
                let wanted = feed.feed::<R>(latest.clone());
                debug!(controller = R::NAME, reconciles = wanted, "view fed");
                if let Some(loaded) = latest {
                    // The failures of objects gone are forgotten.
                    let uids: HashSet<&str> =
                        R::Object::all(&loaded).filter_map(|o| o.meta().uid.as_deref()).collect();
                    let mut failures = context.failures.lock().unwrap_or_else(PoisonError::into_inner);
                    failures.retain(|uid, _| uids.contains(uid.as_str()));
                }
            }
            _ = tokio::time::sleep(TICK) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
    }
    // No more requests: the applier lets the reconciles under way finish, then ends.
    drop(feed);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async { while reconciles.next().await.is_some() {} }).await;
    if drained.is_err() {
        warn!(controller = R::NAME, "stopping with reconciles under way");
    }
}

#[cfg(test)]
mod tests {
    use carpentry_core::api::{EC2NodeClass, NodeClaim};
    use carpentry_core::manifest::Manifests;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::*;
    use crate::cloud::kwok::Kwok;
    use crate::reconcile::nodeclass::NodeClasses;

    fn class(name: &str, version: &str, generation: i64) -> EC2NodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": version,
                "generation": generation},
            "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]},
        }))
        .unwrap()
    }

    fn nodeclaim(name: &str, class: &str) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class},
                "requirements": []},
        }))
        .unwrap()
    }

    fn view(nodeclasses: Vec<EC2NodeClass>, nodeclaims: Vec<NodeClaim>) -> Option<Arc<Loaded>> {
        let manifests = Manifests { nodeclasses, nodeclaims, ..Manifests::default() };
        Some(Arc::new(Loaded::of(manifests)))
    }

    /// The names asked for since the last call.
    fn asked(queue: &mut mpsc::UnboundedReceiver<ObjectRef<Live<EC2NodeClass>>>) -> Vec<String> {
        let mut names = Vec::new();
        while let Ok(object) = queue.try_recv() {
            names.push(object.name);
        }
        names.sort();
        names
    }

    /// Waits, in every reconcile, until told to go on.
    struct Waits(tokio::sync::Semaphore);

    impl ObjectReconciler for Waits {
        type Object = EC2NodeClass;
        const NAME: &'static str = "test.waits";
        const CONCURRENCY: u16 = 4;
        const RATE_LIMITER: RateLimiter = carpentry_core::workqueue::REASONABLE;

        fn reconcile<'a>(
            &'a self,
            _: &EC2NodeClass,
            _: &Loaded,
        ) -> impl Future<Output = Result<Next, Failed>> + Send + use<'a> {
            async move {
                let _ = self.0.acquire().await;
                Ok(Next::Change)
            }
        }
    }

    /// Fails every reconcile, counting them.
    struct Fails(std::sync::atomic::AtomicU32);

    impl ObjectReconciler for Fails {
        type Object = EC2NodeClass;
        const NAME: &'static str = "test.fails";
        const CONCURRENCY: u16 = 1;
        const RATE_LIMITER: RateLimiter = RateLimiter { base_millis: 60_000, max_millis: 60_000 };
        const DEFER_CHANGES_IN_BACKOFF: bool = true;

        fn reconcile<'a>(
            &'a self,
            _: &EC2NodeClass,
            _: &Loaded,
        ) -> impl Future<Output = Result<Next, Failed>> + Send + use<'a> {
            self.0.fetch_add(1, Ordering::AcqRel);
            std::future::ready(Err(Failed(anyhow::anyhow!("it fails"))))
        }
    }

    #[tokio::test]
    async fn an_object_that_failed_waits_for_its_backoff_unless_its_spec_changes_or_it_is_deleted() {
        let (publish, views) = watch::channel(view(vec![class("a", "1", 1)], vec![]));
        let context = Context {
            reconciler: Fails(Default::default()),
            views,
            failures: Mutex::default(),
            starved: AtomicBool::new(false),
            metrics: Metrics::default(),
            progress: Progress::default(),
        };
        let calls = || context.reconciler.0.load(Ordering::Acquire);
        let reconcile = |version: &str, generation: i64| {
            let object = Arc::new(Live(class("a", version, generation)));
            async {
                context.reconcile(object).await.map_err(|failed| context.backoff(&Live(class("a", "1", 1)), &failed))
            }
        };
        assert!(reconcile("1", 1).await.is_err());
        assert_eq!(calls(), 1);

        // Its status written (by the reconcile that failed, say): not reconciled before the backoff.
        publish.send_replace(view(vec![class("a", "2", 1)], vec![]));
        assert!(reconcile("2", 1).await.is_ok());
        assert_eq!(calls(), 1);

        // Its spec edited: at once.
        publish.send_replace(view(vec![class("a", "3", 2)], vec![]));
        assert!(reconcile("3", 2).await.is_err());
        assert_eq!(calls(), 2);

        // Deleted: at once.
        let mut deleted = class("a", "4", 2);
        deleted.metadata.deletion_timestamp = Some(Time("2026-12-06T00:00:00Z".parse().unwrap()));
        publish.send_replace(view(vec![deleted], vec![]));
        assert!(reconcile("4", 2).await.is_err());
        assert_eq!(calls(), 3);

        // Failed while being deleted (a finalizer's step): a change is reconciled at once.
        let mut changed = class("a", "5", 2);
        changed.metadata.deletion_timestamp = Some(Time("2026-12-06T00:00:00Z".parse().unwrap()));
        publish.send_replace(view(vec![changed], vec![]));
        assert!(reconcile("5", 2).await.is_err());
        assert_eq!(calls(), 4);
    }

    #[tokio::test]
    async fn a_reconcile_under_way_holds_no_view() {
        let first = view(vec![class("a", "1", 1)], vec![]).unwrap();
        let held = Arc::downgrade(&first);
        let (publish, views) = watch::channel(Some(first));
        let context = Arc::new(Context {
            reconciler: Waits(tokio::sync::Semaphore::new(0)),
            views,
            failures: Mutex::default(),
            starved: AtomicBool::new(false),
            metrics: Metrics::default(),
            progress: Progress::default(),
        });
        let reconciling = tokio::spawn({
            let context = context.clone();
            async move { context.reconcile(Arc::new(Live(class("a", "1", 1)))).await }
        });
        // The reconcile has begun (it waits on the semaphore) when the next view replaces the
        // first: nothing holds the first any more.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!reconciling.is_finished());
        publish.send_replace(view(vec![class("a", "2", 1)], vec![]));
        assert!(held.upgrade().is_none(), "the reconcile under way keeps the view it began on");
        // Liveness sees it under way, and no more once it ends.
        let under_way: Vec<_> = context.progress.oldest_reconciles().into_iter().map(|(c, o, _)| (c, o)).collect();
        assert_eq!(under_way, [("test.waits", "a".to_string())]);
        context.reconciler.0.add_permits(1);
        assert!(reconciling.await.unwrap().is_ok());
        assert!(context.progress.oldest_reconciles().is_empty());
    }

    #[test]
    fn each_object_is_reconciled_when_it_or_what_it_watches_changes_and_all_once_a_view_is_back() {
        type R = NodeClasses<Kwok>;
        let writer = Writer::<Live<EC2NodeClass>>::new(());
        let store = writer.as_reader();
        let (trigger, mut queue) = mpsc::unbounded();
        let mut feed = Feed { writer, trigger, fed: None, listed: false };
        let (a, b) = (class("a", "1", 1), class("b", "1", 1));

        // The first view: every object, as a controller's first list; the store is ready.
        feed.feed::<R>(view(vec![a.clone(), b.clone()], vec![nodeclaim("nc-1", "a")]));
        assert_eq!(asked(&mut queue), ["a", "b"]);
        assert_eq!(store.len(), 2);

        // Only its status written (a newer resourceVersion, the same generation): not again.
        let mut a_status = class("a", "2", 1);
        a_status.status = Some(Default::default());
        feed.feed::<R>(view(vec![a_status, b.clone()], vec![nodeclaim("nc-1", "a")]));
        assert_eq!(asked(&mut queue), Vec::<String>::new());

        // Its spec edited: that one alone.
        let b_edited = class("b", "3", 2);
        feed.feed::<R>(view(vec![a.clone(), b_edited.clone()], vec![nodeclaim("nc-1", "a")]));
        assert_eq!(asked(&mut queue), ["b"]);

        // A NodeClaim gone (upstream's `Watches` on NodeClaim deletes): the class it named, if
        // that class is being deleted (waiting for its NodeClaims).
        feed.feed::<R>(view(vec![a.clone(), b_edited.clone()], vec![nodeclaim("nc-2", "a")]));
        assert_eq!(asked(&mut queue), Vec::<String>::new());
        let mut a_deleted = class("a", "4", 1);
        a_deleted.metadata.deletion_timestamp = Some(Time("2026-12-06T00:00:00Z".parse().unwrap()));
        feed.feed::<R>(view(vec![a_deleted.clone(), b_edited.clone()], vec![nodeclaim("nc-2", "a")]));
        assert_eq!(asked(&mut queue), ["a"]);
        feed.feed::<R>(view(vec![a_deleted.clone(), b_edited.clone()], vec![]));
        assert_eq!(asked(&mut queue), ["a"]);

        // A class gone: out of the store, nothing asked.
        feed.feed::<R>(view(vec![b_edited.clone()], vec![]));
        assert_eq!(asked(&mut queue), Vec::<String>::new());
        assert_eq!(store.len(), 1);

        // No view to decide on (a follower), then one again: everything.
        feed.feed::<R>(None);
        assert_eq!(asked(&mut queue), Vec::<String>::new());
        feed.feed::<R>(view(vec![a.clone(), class("c", "1", 1)], vec![]));
        assert_eq!(asked(&mut queue), ["a", "c"]);
        assert_eq!(store.len(), 2);
    }
}
