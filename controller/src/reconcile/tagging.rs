//! upstream karpenter-provider-aws v1.14.1 `nodeclaim.tagging`: once a NodeClaim's Node has
//! registered, the provider tags its instance ([`carpentry_core::providers::tagging`]) and the
//! NodeClaim is annotated as tagged; one CreateTags a second at most, as upstream paces it.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use carpentry_core::manifest::Manifests;
use carpentry_core::providers::tagging;
use serde_json::json;
use tracing::{debug, warn};

use super::{concern_common, Common, Concern};
use crate::cloud::CloudProvider;

#[derive(Debug, Default)]
pub(super) struct State {
    /// When the last instance was tagged.
    last: Option<Instant>,
    /// NodeClaims (by UID) whose instance is gone: not tried again (upstream ignores them).
    gone: HashSet<String>,
}

/// The concern: registered NodeClaims' instances tagged.
pub(super) struct Tagging<P: CloudProvider> {
    common: Common<P>,
    tagging: State,
}
concern_common!(Tagging);

impl<P: CloudProvider> Tagging<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        Tagging { common, tagging: State::default() }
    }
}

impl<P: CloudProvider> Concern<P> for Tagging<P> {
    const NAME: &'static str = "tagging";

    async fn pass(&mut self, m: &Manifests, _: &super::Loaded, _: i64) {
        self.tag_instances(m).await;
    }
}

impl<P: CloudProvider> Tagging<P> {
    async fn tag_instances(&mut self, m: &Manifests) {
        if !P::TAGS_INSTANCES {
            return;
        }
        self.tagging.gone.retain(|uid| m.nodeclaims.iter().any(|nc| nc.metadata.uid.as_deref() == Some(uid)));
        let pace = Duration::from_secs(tagging::SECONDS_BETWEEN_CALLS);
        if self.tagging.last.is_some_and(|at| at.elapsed() < pace) || self.act.dry_run {
            return;
        }
        let uid_of = |nc: &carpentry_core::api::NodeClaim| nc.metadata.uid.clone().unwrap_or_default();
        let Some(nc) =
            m.nodeclaims.iter().find(|nc| tagging::is_taggable(nc) && !self.tagging.gone.contains(&uid_of(nc)))
        else {
            return;
        };
        self.tagging.last = Some(Instant::now());
        match self.cloud.tag_instance(nc).await {
            Ok(true) => {
                let patch = json!({"metadata": {"annotations": tagging::tagged_annotations()}});
                self.act.patch_nodeclaim(nc.name(), patch).await;
            }
            Ok(false) => {
                debug!(nodeclaim = %nc.name(), "its instance is gone: not tagged");
                self.tagging.gone.insert(uid_of(nc));
            }
            Err(e) => warn!(nodeclaim = %nc.name(), error = %format!("{e:#}"), "cannot tag the instance; retried"),
        }
    }
}
