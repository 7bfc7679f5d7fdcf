//! The NodePool controllers (upstream `nodepool.hash`, `nodepool.counter`, `nodepool.readiness`,
//! `nodepool.validation`, `nodepool.registrationhealth`), core's [`carpentry_core::nodepool`]
//! applied: the hash annotations on the NodePool (and, while its hash version is another
//! scheme's, its NodeClaims re-stamped first), and `status` — conditions on every change,
//! `resources` and `nodes` every 5 s once the view is synced. A condition that turns `False` is
//! also a Warning event on the NodePool (core's [`nodepool::warnings`]).

use std::collections::BTreeMap;
use std::sync::PoisonError;

use carpentry_core::api::{NodeClaim, NodePool};
use carpentry_core::manifest::Manifests;
use carpentry_core::nodepool::{self, registrationhealth};
use carpentry_core::resources::ResourceList;
use serde_json::json;
use tracing::warn;

use super::act::nodepool_ref;
use super::{Common, Scheduling};
use crate::cloud::CloudProvider;

impl<P: CloudProvider> Scheduling<P> {
    /// `invalid`: NodePools that fail validation (left out of `m`), whose status still says so.
    pub(super) async fn nodepools(&mut self, m: &Manifests, invalid: &[NodePool], now: i64) {
        for np in &m.nodepools {
            let restamps = nodepool::hash::restamps(np, &m.nodeclaims);
            let mut restamped = true;
            for (name, annotations) in restamps {
                // upstream: a plain merge patch of the annotations (no optimistic lock).
                let patch = json!({"metadata": {"annotations": annotations}});
                restamped &= self.act.patch_nodeclaim(name, patch).await;
            }
            // The NodePool takes our version only once its NodeClaims have it (upstream retries).
            if let Some(annotations) = nodepool::hash::nodepool_annotations(np).filter(|_| restamped) {
                self.act.patch_nodepool(np.name(), json!({"metadata": {"annotations": annotations}})).await;
            }
        }
        let usage = if now >= self.nodepool_counted + nodepool::counter::COUNT_EVERY_SECONDS && self.synced(m) {
            self.nodepool_counted = now;
            self.usage(m)
        } else {
            None
        };
        let at = carpentry_core::api::time::format_time(now);
        let nothing = ResourceList::new();
        for np in &m.nodepools {
            // The condition's reset forgets the outcomes behind it too (upstream `SetStatus(Unknown)`).
            if let (Some(class), Some(uid)) = (m.nodeclass_for(np), np.metadata.uid.as_ref()) {
                if registrationhealth::stale(np, class, np.status.as_ref()) {
                    self.shared.registration_health.lock().unwrap_or_else(PoisonError::into_inner).remove(uid);
                }
            }
            let pool_usage = usage.as_ref().map(|u| u.get(np.name()).unwrap_or(&nothing));
            if let Some(status) = nodepool::status(np, m.nodeclass_for(np), pool_usage, &at) {
                for c in nodepool::warnings(np.status.as_ref(), &status) {
                    let note = format!("{}: {}", c.type_, c.message.as_deref().unwrap_or_default());
                    let reason = c.reason.as_deref().unwrap_or(&c.type_);
                    self.act.event(&nodepool_ref(np), true, reason, note, "Reconcile").await;
                }
                let patch = json!({"metadata": {"resourceVersion": np.metadata.resource_version}, "status": status});
                self.act.patch_nodepool_status(np.name(), patch).await;
            }
        }
        for np in invalid {
            if let Some(status) = nodepool::status(np, m.nodeclass_for(np), None, &at) {
                let patch = json!({"metadata": {"resourceVersion": np.metadata.resource_version}, "status": status});
                self.act.patch_nodepool_status(np.name(), patch).await;
            }
        }
    }

    /// What each NodePool's nodes hold, as the limit check counts it.
    fn usage(&self, m: &Manifests) -> Option<BTreeMap<String, ResourceList>> {
        match carpentry_core::input_from_manifests(m, &self.catalogue, Some(&self.region)) {
            Ok(prepared) => Some(carpentry_core::scheduling::nodepool_usage(&prepared.input)),
            Err(e) => {
                warn!(error = %carpentry_core::error_chain(&e), "NodePool usage cannot be counted");
                None
            }
        }
    }
}

/// The NodePool `nc` is labelled with, as `m` shows it.
pub(super) fn owning_nodepool<'m>(m: &'m Manifests, nc: &NodeClaim) -> Option<&'m NodePool> {
    let pool = nc.metadata.labels.as_ref().and_then(|l| l.get(carpentry_core::labels::NODEPOOL))?;
    m.nodepools.iter().find(|np| np.name() == pool)
}

impl<P: CloudProvider> Common<P> {
    /// upstream `updateNodePoolRegistrationHealth` (registration.go and liveness.go): records
    /// that `nc` registered (or timed out) for its NodePool and writes `NodeRegistrationHealthy`
    /// when that turns it.
    pub(super) async fn registration_outcome(&self, np: Option<&NodePool>, nc: &NodeClaim, registered: bool) {
        let Some(np) = np else { return };
        let (Some(uid), true) = (np.metadata.uid.clone(), registrationhealth::owned_by(nc, np)) else { return };
        let at = crate::clock::now_rfc3339();
        let status = {
            let mut health = self.shared.registration_health.lock().unwrap_or_else(PoisonError::into_inner);
            let tracker = health.entry(uid).or_default();
            tracker.hydrate(np);
            if registered {
                registrationhealth::registered(np, tracker, &at)
            } else {
                registrationhealth::failed(np, nc, tracker, &at)
            }
        };
        if let Some(status) = status {
            // upstream patches with an optimistic lock.
            let patch = json!({"metadata": {"resourceVersion": np.metadata.resource_version}, "status": status});
            self.act.patch_nodepool_status(np.name(), patch).await;
        }
    }
}
