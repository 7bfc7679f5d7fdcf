//! The EC2NodeClass reconciler (upstream karpenter-provider-aws v1.14.1 `pkg/controllers/nodeclass`
//! and `nodeclass/garbagecollection`): the status the provider resolves, written when it changes;
//! the `karpenter.k8s.aws/termination` finalizer, added to every EC2NodeClass and, once a deleted
//! one has no NodeClaim left, removed after the provider deleted what it made for it
//! ([`carpentry_core::providers::termination`]); every 30 minutes, the instance profiles nothing
//! uses any more deleted.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use carpentry_core::api::EC2NodeClass;
use carpentry_core::manifest::Manifests;
use carpentry_core::providers::instanceprofile::GARBAGE_COLLECTION_SECONDS;
use carpentry_core::providers::termination::{self, NodeClassTermination};
use serde_json::json;
use tracing::{info, warn};

use super::{act, concern_common, Common, Concern};
use crate::cloud::CloudProvider;

/// How long a failed clean-up of a deleted NodeClass waits before it is tried again (core's).
const FINALIZE_RETRY: Duration = Duration::from_secs(termination::FINALIZE_RETRY_SECONDS);

#[derive(Debug, Default)]
pub(super) struct State {
    /// When each deleted NodeClass (by UID) last said which NodeClaims it waits for.
    waiting_said: HashMap<String, Instant>,
    /// When a failed clean-up may be tried again, by NodeClass UID.
    finalize_retry: HashMap<String, Instant>,
    /// When the unused instance profiles are next collected (epoch seconds).
    garbage_due: i64,
}

/// The concern: EC2NodeClass status, finalizer and instance-profile collection.
pub(super) struct NodeClasses<P: CloudProvider> {
    common: Common<P>,
    nodeclass: State,
}
concern_common!(NodeClasses);

impl<P: CloudProvider> NodeClasses<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        NodeClasses { common, nodeclass: State::default() }
    }
}

impl<P: CloudProvider> Concern<P> for NodeClasses<P> {
    const NAME: &'static str = "nodeclass";

    async fn pass(&mut self, m: &Manifests, _: &super::Loaded, now: i64) {
        self.nodeclasses(m).await;
        self.collect_nodeclass_garbage(m, now).await;
    }
}

impl<P: CloudProvider> NodeClasses<P> {
    /// The status written when it changes; the finalizer's step.
    async fn nodeclasses(&mut self, m: &Manifests) {
        let now = crate::clock::now_rfc3339();
        let live: Vec<&str> = m.nodeclasses.iter().filter_map(|c| c.metadata.uid.as_deref()).collect();
        self.nodeclass.waiting_said.retain(|uid, _| live.contains(&uid.as_str()));
        self.nodeclass.finalize_retry.retain(|uid, _| live.contains(&uid.as_str()));
        for class in &m.nodeclasses {
            if P::FINALIZES_NODECLASSES {
                self.nodeclass_finalizer(m, class).await;
            }
            // upstream: a deleted NodeClass is only finalized, its status left as it is.
            if class.metadata.deletion_timestamp.is_some() {
                continue;
            }
            if let Some(status) = self.cloud.nodeclass_status(class, &now).await {
                // A dependent condition that turns False (or says something new) is also an
                // event on the EC2NodeClass, where `kubectl describe` shows it (core's rule).
                for c in carpentry_core::providers::nodeclass::warnings(class.status.as_ref(), &status) {
                    let note = format!("{}: {}", c.type_, c.message.as_deref().unwrap_or_default());
                    let reason = c.reason.as_deref().unwrap_or(&c.type_);
                    self.act.event(&act::nodeclass_ref(class), true, reason, note, "Resolve").await;
                }
                let patch = json!({"metadata": {"resourceVersion": class.metadata.resource_version},
                    "status": status});
                self.act.patch_nodeclass_status(class.name(), patch).await;
            }
        }
    }

    /// upstream `Reconcile`'s finalizer and `finalize`.
    async fn nodeclass_finalizer(&mut self, m: &Manifests, class: &EC2NodeClass) {
        let uid = class.metadata.uid.clone().unwrap_or_default();
        let name = class.name();
        match termination::termination(class, &m.nodeclaims) {
            NodeClassTermination::Nothing => {}
            NodeClassTermination::AddFinalizer => {
                let mut finalizers = class.metadata.finalizers.clone().unwrap_or_default();
                finalizers.push(termination::TERMINATION_FINALIZER.to_string());
                // The resourceVersion makes it an optimistic lock: a list patch replaces the list.
                let patch = json!({"metadata": {"resourceVersion": class.metadata.resource_version,
                    "finalizers": finalizers}});
                self.act.patch_nodeclass(name, patch).await;
            }
            NodeClassTermination::WaitForNodeClaims(nodeclaims) => {
                let said = self.nodeclass.waiting_said.get(&uid);
                let interval = Duration::from_secs(termination::WAITING_EVENT_INTERVAL_SECONDS);
                if said.is_none_or(|at| at.elapsed() >= interval) {
                    self.nodeclass.waiting_said.insert(uid, Instant::now());
                    let note = termination::waiting_message(&nodeclaims);
                    info!(nodeclass = %name, nodeclaims = ?nodeclaims, "deleted EC2NodeClass waits for its NodeClaims");
                    let on = act::nodeclass_ref(class);
                    self.act.event(&on, false, termination::WAITING_REASON, note, "Finalize").await;
                }
            }
            NodeClassTermination::CleanUp => {
                if self.nodeclass.finalize_retry.get(&uid).is_some_and(|at| Instant::now() < *at) {
                    return;
                }
                self.act.decided("NodeClassFinalized", &json!({"nodeclass": name,
                    "why": "deleted, and no NodeClaim uses it: its instance profiles and launch templates are deleted"}));
                if self.act.dry_run {
                    return;
                }
                if let Err(e) = self.cloud.finalize_nodeclass(class).await {
                    let why = format!("{e:#}");
                    warn!(nodeclass = %name, error = %why, "cannot delete what the deleted EC2NodeClass made; retried");
                    if !self.nodeclass.finalize_retry.contains_key(&uid) {
                        let note = format!("cannot delete its cloud resources: {why}");
                        self.act.event(&act::nodeclass_ref(class), true, "FinalizeFailed", note, "Finalize").await;
                    }
                    self.nodeclass.finalize_retry.insert(uid, Instant::now() + FINALIZE_RETRY);
                    return;
                }
                let patch = json!({"metadata": {"resourceVersion": class.metadata.resource_version,
                    "finalizers": termination::without_finalizer(class)}});
                if self.act.patch_nodeclass(name, patch).await {
                    info!(nodeclass = %name, "the deleted EC2NodeClass's finalizer is removed");
                }
            }
        }
    }

    /// upstream `instanceprofile.garbagecollection`, every 30 minutes.
    async fn collect_nodeclass_garbage(&mut self, m: &Manifests, now: i64) {
        if !P::FINALIZES_NODECLASSES || now < self.nodeclass.garbage_due || !self.synced(m) {
            return;
        }
        self.nodeclass.garbage_due = now + GARBAGE_COLLECTION_SECONDS;
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
