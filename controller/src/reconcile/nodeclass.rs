//! The EC2NodeClass reconciler (upstream karpenter-provider-aws v1.14.1 `pkg/controllers/nodeclass`
//! and `nodeclass/garbagecollection`): each EC2NodeClass reconciled on its own
//! ([`super::perobject`]): the `karpenter.k8s.aws/termination` finalizer, added to every
//! EC2NodeClass and, once a deleted one has no NodeClaim left, removed after the provider deleted
//! what it made for it ([`carpentry_core::providers::termination`]); the status the provider
//! resolves, written when it changes, looked up again each minute (core's
//! [`REQUEUE_SECONDS`]); a failure tried again after upstream's backoff ([`RATE_LIMITER`]).
//! Every 30 minutes, the instance profiles nothing uses any more are deleted ([`Collection`]).
use std::future::Future;
use std::time::Duration;

use anyhow::anyhow;
use carpentry_core::api::EC2NodeClass;
use carpentry_core::manifest::Manifests;
use carpentry_core::providers::instanceprofile::GARBAGE_COLLECTION_SECONDS;
use carpentry_core::providers::nodeclass::{RATE_LIMITER, REQUEUE_SECONDS};
use carpentry_core::providers::termination::{self, NodeClassTermination};
use carpentry_core::workqueue::RateLimiter;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;
use tracing::{info, warn};

use super::perobject::{Failed, Kind, Next, ObjectReconciler};
use super::{act, concern_common, Common, Concern};
use crate::cloud::CloudProvider;
use crate::view::Loaded;

impl Kind for EC2NodeClass {
    const KIND: &'static str = "EC2NodeClass";
    const GROUP: &'static str = "karpenter.k8s.aws";
    const VERSION: &'static str = "v1";
    const PLURAL: &'static str = "ec2nodeclasses";

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn all(loaded: &Loaded) -> impl Iterator<Item = &Self> {
        loaded.manifests().nodeclasses.iter()
    }
    /// Not its status alone (the reconcile's own write): every reconcile asks EC2, SSM and IAM.
    fn changed(before: &Self, after: &Self) -> bool {
        let (b, a) = (&before.metadata, &after.metadata);
        b.uid != a.uid
            || b.generation != a.generation
            || b.deletion_timestamp != a.deletion_timestamp
            || b.finalizers != a.finalizers
    }
}

/// The EC2NodeClass controller.
pub(super) struct NodeClasses<P: CloudProvider> {
    common: Common<P>,
}

impl<P: CloudProvider> NodeClasses<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        NodeClasses { common }
    }

    /// A write that was not made: in a dry run the reconcile goes on as if it had been; a
    /// refused write (or a follower's) fails the reconcile, tried again after the backoff.
    fn unwritten(&self, what: String) -> Result<(), Failed> {
        if self.common.act.dry_run {
            Ok(())
        } else {
            Err(Failed(anyhow!("{what} was not written")))
        }
    }
}

impl<P: CloudProvider> ObjectReconciler for NodeClasses<P> {
    type Object = EC2NodeClass;
    const NAME: &'static str = "nodeclass";
    /// upstream `Register`'s `MaxConcurrentReconciles`.
    const CONCURRENCY: u16 = 10;
    const RATE_LIMITER: RateLimiter = RATE_LIMITER;

    /// upstream `Register`'s `Watches(&NodeClaim{})` on deletes: a deleted EC2NodeClass may be
    /// waiting for the NodeClaim that went. (Only a deleted one: upstream reconciles every class
    /// a deleted NodeClaim named, which here would be a round of EC2, SSM and IAM lookups each.)
    fn related(before: &Loaded, after: &Loaded) -> Vec<String> {
        let (before, after) = (before.manifests(), after.manifests());
        let remaining: std::collections::HashSet<&str> =
            after.nodeclaims.iter().filter_map(|nc| nc.metadata.uid.as_deref()).collect();
        let deleted: std::collections::HashSet<&str> =
            after.nodeclasses.iter().filter(|c| c.metadata.deletion_timestamp.is_some()).map(|c| c.name()).collect();
        let mut classes: Vec<String> = before
            .nodeclaims
            .iter()
            .filter(|nc| !remaining.contains(nc.metadata.uid.as_deref().unwrap_or_default()))
            .map(|nc| nc.spec.node_class_ref.name.clone())
            .filter(|class| deleted.contains(class.as_str()))
            .collect();
        classes.sort();
        classes.dedup();
        classes
    }

    /// upstream `Reconcile`: the finalizer, then (unless deleted) the status.
    fn reconcile<'a>(
        &'a self,
        class: &EC2NodeClass,
        loaded: &Loaded,
    ) -> impl Future<Output = Result<Next, Failed>> + Send + use<'a, P> {
        // What the view says is decided here; the future holds the class alone.
        let termination =
            P::FINALIZES_NODECLASSES.then(|| termination::termination(class, &loaded.manifests().nodeclaims));
        let class = class.clone();
        async move { self.reconcile_class(&class, termination).await }
    }
}

impl<P: CloudProvider> NodeClasses<P> {
    /// [`ObjectReconciler::reconcile`] once the view is read: `termination` is core's decision on
    /// the class's finalizer, if this provider finalizes classes.
    async fn reconcile_class(
        &self,
        class: &EC2NodeClass,
        termination: Option<NodeClassTermination>,
    ) -> Result<Next, Failed> {
        if let Some(termination) = termination {
            if let Some(next) = self.finalizer(class, termination).await? {
                return Ok(next);
            }
        }
        // upstream: a deleted NodeClass is only finalized, its status left as it is.
        if class.metadata.deletion_timestamp.is_some() {
            return Ok(Next::Change);
        }
        let now = crate::clock::now_rfc3339();
        let resolved = self.common.cloud.nodeclass_status(class, &now).await;
        if class.status.as_ref() != Some(&resolved.status) {
            // A dependent condition that turns False (or says something new) is also an event
            // on the EC2NodeClass, where `kubectl describe` shows it (core's rule).
            for c in carpentry_core::providers::nodeclass::warnings(class.status.as_ref(), &resolved.status) {
                let note = format!("{}: {}", c.type_, c.message.as_deref().unwrap_or_default());
                let reason = c.reason.as_deref().unwrap_or(&c.type_);
                self.common.act.event(&act::nodeclass_ref(class), true, reason, note, "Resolve");
            }
            // The resourceVersion makes it an optimistic lock, as upstream's status patch.
            let patch = json!({"metadata": {"resourceVersion": class.metadata.resource_version},
                "status": resolved.status});
            if !self.common.act.patch_nodeclass_status(class.name(), patch).await {
                self.unwritten(format!("EC2NodeClass {}'s status", class.name()))?;
            }
        }
        if resolved.lookup_failed {
            return Err(Failed(anyhow!("a lookup for EC2NodeClass {} had no answer", class.name())));
        }
        Ok(Next::After(Duration::from_secs(REQUEUE_SECONDS)))
    }
}

impl<P: CloudProvider> NodeClasses<P> {
    /// upstream `Reconcile`'s finalizer and `finalize`: `Some` when the reconcile ends here.
    async fn finalizer(&self, class: &EC2NodeClass, termination: NodeClassTermination) -> Result<Option<Next>, Failed> {
        let name = class.name();
        let act = &self.common.act;
        match termination {
            NodeClassTermination::Nothing => Ok(None),
            NodeClassTermination::AddFinalizer => {
                let mut finalizers = class.metadata.finalizers.clone().unwrap_or_default();
                finalizers.push(termination::TERMINATION_FINALIZER.to_string());
                // The resourceVersion makes it an optimistic lock: a list patch replaces the list.
                let patch = json!({"metadata": {"resourceVersion": class.metadata.resource_version,
                    "finalizers": finalizers}});
                if !act.patch_nodeclass(name, patch).await {
                    self.unwritten(format!("EC2NodeClass {name}'s finalizer"))?;
                    // A dry run goes on to the status, as if it had been written.
                    return Ok(None);
                }
                // The status is written on the object as it was read: after this write its
                // resourceVersion is old, so the status waits for the next reconcile (the
                // finalizer's write brings it), as upstream's conflict requeue does.
                Ok(Some(Next::Change))
            }
            NodeClassTermination::WaitForNodeClaims(nodeclaims) => {
                info!(nodeclass = %name, nodeclaims = ?nodeclaims, "deleted EC2NodeClass waits for its NodeClaims");
                let note = termination::waiting_message(&nodeclaims);
                let on = act::nodeclass_ref(class);
                act.event(&on, false, termination::WAITING_REASON, note, "Finalize");
                // upstream requeues to fire the event again.
                Ok(Some(Next::After(Duration::from_secs(termination::WAITING_EVENT_INTERVAL_SECONDS))))
            }
            NodeClassTermination::CleanUp => {
                act.decided("NodeClassFinalized", &json!({"nodeclass": name,
                    "why": "deleted, and no NodeClaim uses it: its instance profiles and launch templates are deleted"}));
                if act.dry_run {
                    return Ok(Some(Next::Change));
                }
                if let Err(e) = self.common.cloud.finalize_nodeclass(class).await {
                    let note = format!("cannot delete its cloud resources: {e:#}");
                    act.event(&act::nodeclass_ref(class), true, "FinalizeFailed", note, "Finalize");
                    return Err(Failed(e.context(format!("EC2NodeClass {name}'s clean-up"))));
                }
                let patch = json!({"metadata": {"resourceVersion": class.metadata.resource_version,
                    "finalizers": termination::without_finalizer(class)}});
                if !act.patch_nodeclass(name, patch).await {
                    self.unwritten(format!("EC2NodeClass {name}'s finalizer removal"))?;
                }
                info!(nodeclass = %name, "the deleted EC2NodeClass's finalizer is removed");
                Ok(Some(Next::Change))
            }
        }
    }
}

/// upstream `instanceprofile.garbagecollection`: a singleton on its own cadence.
pub(super) struct Collection<P: CloudProvider> {
    common: Common<P>,
    /// When the unused instance profiles are next collected (epoch seconds).
    due: i64,
}
concern_common!(Collection);

impl<P: CloudProvider> Collection<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        Collection { common, due: i64::MIN }
    }
}

impl<P: CloudProvider> Concern<P> for Collection<P> {
    const NAME: &'static str = "instanceprofile.garbagecollection";

    async fn pass(&mut self, loaded: std::sync::Arc<Loaded>, now: i64) {
        self.collect_nodeclass_garbage(loaded.manifests(), now).await;
    }
}

impl<P: CloudProvider> Collection<P> {
    /// upstream `instanceprofile.garbagecollection`, every 30 minutes.
    async fn collect_nodeclass_garbage(&mut self, m: &Manifests, now: i64) {
        if !P::FINALIZES_NODECLASSES || now < self.due || !self.synced(m) {
            return;
        }
        self.due = now + GARBAGE_COLLECTION_SECONDS;
        match self.cloud.collect_nodeclass_garbage(m, self.act.dry_run).await {
            Ok(deleted) => {
                for profile in deleted {
                    self.act.decided(
                        "InstanceProfileGarbageCollected",
                        &json!({"instanceProfile": profile,
                        "why": "no EC2NodeClass names it and no NodeClaim launched with it"}),
                    );
                }
            }
            Err(e) => {
                warn!(error = %format!("{e:#}"), "cannot collect unused instance profiles; tried again in 30 minutes")
            }
        }
    }
}
