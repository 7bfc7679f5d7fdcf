//! Garbage collection (upstream `nodeclaim.garbagecollection` and the AWS provider's
//! `instance.garbagecollection`), core's [`garbagecollection`] decisions applied: a registered
//! NodeClaim whose instance the provider no longer lists (and whose Node is not Ready) is deleted,
//! every 2 minutes; an instance no NodeClaim has, older than 30 s, is terminated and its Node
//! deleted, every 10 s for the first 20 runs and every 2 minutes after.

use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::garbagecollection::{self, CloudInstance};
use serde_json::json;
use tracing::warn;

use super::{concern_common, Common, Concern};
use crate::cloud::CloudProvider;

#[derive(Debug, Default)]
pub(super) struct State {
    nodeclaims_due: i64,
    instances_due: i64,
    instance_runs: u32,
}

/// The concern: NodeClaims without an instance, instances without a NodeClaim.
pub(super) struct Collection<P: CloudProvider> {
    common: Common<P>,
    gc: State,
}
concern_common!(Collection);

impl<P: CloudProvider> Collection<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        Collection { common, gc: State::default() }
    }
}

impl<P: CloudProvider> Concern<P> for Collection<P> {
    const NAME: &'static str = "garbagecollection";

    async fn pass(&mut self, loaded: std::sync::Arc<super::Loaded>, now: i64) {
        self.garbage_collect(loaded.manifests(), now).await;
    }
}

impl<P: CloudProvider> Collection<P> {
    async fn garbage_collect(&mut self, m: &Manifests, now: i64) {
        let nodeclaims_due = now >= self.gc.nodeclaims_due;
        let instances_due = now >= self.gc.instances_due;
        if !nodeclaims_due && !instances_due {
            return;
        }
        let started = std::time::Instant::now();
        let listed = self.cloud.list(m).await;
        let error = listed.as_ref().err().map(|_| "");
        self.act.metrics.cloud_call("nodeclaim.garbagecollection", "List", self.cloud.name(), started, error);
        let instances: Vec<CloudInstance> = match listed {
            Ok(list) => list,
            Err(e) => {
                warn!(error = %format!("{e:#}"), "the cloud provider cannot list its instances; garbage collection waits");
                return;
            }
        };
        if nodeclaims_due {
            self.gc.nodeclaims_due = now + garbagecollection::NODECLAIM_GC_SECONDS;
            for nc in garbagecollection::nodeclaims_without_instance(&m.nodeclaims, &m.nodes, &instances) {
                let id = nc.status.as_ref().map(|s| s.provider_id.clone()).unwrap_or_default();
                self.act.decided(
                    "GarbageCollected",
                    &json!({"nodeclaim": nc.name(), "providerID": id,
                    "why": "its instance is gone and its Node is not Ready"}),
                );
                if self.act.delete_nodeclaim(nc.name()).await {
                    self.act.metrics.nodeclaim_disrupted(nc, "GarbageCollected");
                }
            }
        }
        if instances_due {
            self.gc.instance_runs += 1;
            let fast = self.gc.instance_runs <= garbagecollection::INSTANCE_GC_FAST_RUNS;
            self.gc.instances_due = now
                + if fast {
                    garbagecollection::INSTANCE_GC_FAST_SECONDS
                } else {
                    garbagecollection::NODECLAIM_GC_SECONDS
                };
            // upstream `Synced` guards it too: a NodeClaim created but not yet seen would look like
            // a leak.
            if !self.synced(m) {
                return;
            }
            for instance in garbagecollection::instances_without_nodeclaim(&instances, &m.nodeclaims, now) {
                self.act.decided(
                    "InstanceGarbageCollected",
                    &json!({"providerID": instance.provider_id,
                    "why": "no NodeClaim has this instance"}),
                );
                if self.act.dry_run || !self.act.leading() {
                    continue;
                }
                let started = std::time::Instant::now();
                let deleted = self.cloud.delete_instance(&instance.provider_id).await;
                let error = deleted.as_ref().err().map(|_| "");
                self.act.metrics.cloud_call("instance.garbagecollection", "Delete", self.cloud.name(), started, error);
                if let Err(e) = deleted {
                    warn!(provider_id = %instance.provider_id, error = %format!("{e:#}"), "cannot terminate a leaked instance; retried");
                }
            }
        }
    }
}
