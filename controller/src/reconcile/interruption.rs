//! upstream karpenter-provider-aws v1.14.1 `interruption`: the interruption queue's messages,
//! parsed and decided by core ([`carpentry_core::providers::interruption`]): the NodeClaims of the
//! instances a message names get upstream's events, a spot interruption marks its offering
//! unavailable, and a NodeClaim the message asks to drain is deleted (the termination controller
//! then drains it and its replacement is provisioned). A message is deleted from the queue once
//! handled, or at once when it does not parse; one whose handling failed comes back after its
//! visibility timeout. Not in `--dry-run`: receiving a message hides it from the controller it
//! belongs to.

use carpentry_core::manifest::Manifests;
use carpentry_core::providers::interruption::{self, MessageKind};
use serde_json::json;
use tracing::{info, warn};

use super::act::{node_ref, nodeclaim_ref};
use super::{concern_common, Common, Concern};
use crate::cloud::CloudProvider;

#[derive(Debug, Default)]
pub(super) struct State {
    /// The last error reading the queue, said once until it changes.
    last_error: Option<String>,
}

/// The concern: the interruption queue.
pub(super) struct Interruptions<P: CloudProvider> {
    common: Common<P>,
    interruption: State,
}
concern_common!(Interruptions);

impl<P: CloudProvider> Interruptions<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        Interruptions { common, interruption: State::default() }
    }
}

impl<P: CloudProvider> Concern<P> for Interruptions<P> {
    const NAME: &'static str = "interruption";

    async fn pass(&mut self, loaded: std::sync::Arc<super::Loaded>, _: i64) {
        self.interruptions(loaded.manifests()).await;
    }
}

impl<P: CloudProvider> Interruptions<P> {
    async fn interruptions(&mut self, m: &Manifests) {
        if self.act.dry_run {
            return;
        }
        let messages = match self.cloud.interruption_messages().await {
            Ok(messages) => {
                self.interruption.last_error = None;
                messages
            }
            Err(e) => {
                let why = format!("{e:#}");
                if self.interruption.last_error.as_ref() != Some(&why) {
                    warn!(error = %why, "cannot read the interruption queue; tried again");
                    self.interruption.last_error = Some(why);
                }
                return;
            }
        };
        for queued in messages {
            let message = match interruption::parse(&queued.body) {
                Ok(message) => message,
                Err(e) => {
                    warn!(error = %e, body = %queued.body.chars().take(500).collect::<String>(),
                        "failed parsing interruption message; deleted");
                    self.delete_message(&queued.receipt).await;
                    continue;
                }
            };
            self.act.metrics.interruption_received(message.kind.as_str());
            let handlings = interruption::handle(&message, &m.nodeclaims);
            if message.kind != MessageKind::NoOp {
                self.act.decided(
                    "Interruption",
                    &json!({"kind": message.kind.as_str(), "instances": message.instance_ids,
                        "nodeclaims": handlings.iter().map(|h| &h.nodeclaim).collect::<Vec<_>>(),
                        "time": message.time}),
                );
            }
            let mut handled = true;
            for h in &handlings {
                let Some(nc) = m.nodeclaims.iter().find(|nc| nc.name() == h.nodeclaim) else { continue };
                let provider_id = nc.status.as_ref().map(|s| s.provider_id.as_str()).unwrap_or_default();
                let node = m.nodes.iter().find(|n| {
                    !provider_id.is_empty()
                        && n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id)
                });
                if let Some(notice) = h.notice {
                    self.act.event(
                        &nodeclaim_ref(nc),
                        notice.warning,
                        notice.reason,
                        notice.message.into(),
                        "Interrupt",
                    );
                    if let Some(node) = node {
                        self.act.event(
                            &node_ref(node),
                            notice.warning,
                            notice.reason,
                            notice.message.into(),
                            "Interrupt",
                        );
                    }
                }
                if let Some((instance_type, zone)) = &h.unavailable {
                    self.cloud.mark_unavailable(instance_type, zone, "spot");
                }
                if h.delete {
                    if !self.act.delete_nodeclaim(nc.name()).await {
                        handled = false;
                        continue;
                    }
                    info!(nodeclaim = %nc.name(), kind = message.kind.as_str(), "initiating delete from interruption message");
                    let reason = interruption::TERMINATING_REASON;
                    let note = interruption::TERMINATING_NODECLAIM_MESSAGE.to_string();
                    self.act.event(&nodeclaim_ref(nc), true, reason, note, "Interrupt");
                    if let Some(node) = node {
                        let note = interruption::TERMINATING_NODE_MESSAGE.to_string();
                        self.act.event(&node_ref(node), true, reason, note, "Interrupt");
                    }
                }
            }
            if handled {
                let time = message.time.as_deref().and_then(carpentry_core::api::time::parse_time);
                if let Some(time) = time {
                    self.act.metrics.interruption_handled((crate::clock::now_seconds() - time) as f64);
                }
                self.delete_message(&queued.receipt).await;
            }
        }
    }

    async fn delete_message(&self, receipt: &str) {
        match self.cloud.delete_message(receipt).await {
            Ok(()) => self.act.metrics.interruption_deleted(),
            Err(e) => {
                warn!(error = %format!("{e:#}"), "cannot delete the interruption message; it comes back after 20 s")
            }
        }
    }
}
