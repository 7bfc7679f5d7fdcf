//! upstream karpenter-provider-aws v1.14.1 `nodeclaim.tagging`, a per-object reconciler
//! ([`super::perobject`]): once a NodeClaim's Node has registered, the provider tags its instance
//! ([`carpentry_core::providers::tagging`]) and the NodeClaim is annotated as tagged. As upstream's:
//! one NodeClaim at a time (its default `MaxConcurrentReconciles` of 1) and a second's pause after
//! each call, because CreateTags shares EC2's rate limit with CreateFleet; a failed call tried again
//! after upstream's backoff (`reasonable.RateLimiter`); an instance that is gone not tried again.

use std::future::Future;
use std::time::Duration;

use anyhow::anyhow;
use carpentry_core::api::NodeClaim;
use carpentry_core::providers::tagging;
use carpentry_core::workqueue::{RateLimiter, REASONABLE};
use serde_json::json;
use tracing::debug;

use super::perobject::{Failed, Next, ObjectReconciler};
use super::Common;
use crate::cloud::{CloudProvider, Tagged};
use crate::view::Loaded;

/// The controller: registered NodeClaims' instances tagged.
pub(super) struct Tagging<P: CloudProvider> {
    common: Common<P>,
}

impl<P: CloudProvider> Tagging<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        Tagging { common }
    }
}

impl<P: CloudProvider> ObjectReconciler for Tagging<P> {
    type Object = NodeClaim;
    const NAME: &'static str = "nodeclaim.tagging";
    /// upstream leaves controller-runtime's default of 1, "to avoid throttling from CreateTag".
    const CONCURRENCY: u16 = 1;
    const RATE_LIMITER: RateLimiter = REASONABLE;

    fn reconcile<'a>(
        &'a self,
        nc: &NodeClaim,
        _: &Loaded,
    ) -> impl Future<Output = Result<Next, Failed>> + Send + use<'a, P> {
        let nc = (P::TAGS_INSTANCES && tagging::is_taggable(nc) && !self.common.act.dry_run).then(|| nc.clone());
        async move {
            match nc {
                Some(nc) => self.tag(&nc).await,
                None => Ok(Next::Change),
            }
        }
    }
}

impl<P: CloudProvider> Tagging<P> {
    /// Tags `nc`'s instance and annotates it as tagged.
    async fn tag(&self, nc: &NodeClaim) -> Result<Next, Failed> {
        let tagged = self.common.cloud.tag_instance(nc).await;
        // upstream: "no more than 1 CreateTags call is made per second" (after a call, made or
        // failed; an instance that had its tags costs no pause).
        if !matches!(tagged, Ok(Tagged::Already | Tagged::Gone)) {
            tokio::time::sleep(Duration::from_secs(tagging::SECONDS_BETWEEN_CALLS)).await;
        }
        match tagged {
            Ok(Tagged::Added | Tagged::Already) => {
                let patch = json!({"metadata": {"annotations": tagging::tagged_annotations()}});
                if !self.common.act.patch_nodeclaim(nc.name(), patch).await {
                    return Err(Failed(anyhow!("NodeClaim {}'s tagged annotations were not written", nc.name())));
                }
                Ok(Next::Change)
            }
            Ok(Tagged::Gone) => {
                debug!(nodeclaim = %nc.name(), "its instance is gone: not tagged");
                Ok(Next::Change)
            }
            Err(e) => Err(Failed(e.context(format!("tagging NodeClaim {}'s instance", nc.name())))),
        }
    }
}
