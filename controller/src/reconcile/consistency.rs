//! The NodeClaim consistency check (upstream `nodeclaim.consistency`), core's
//! [`consistency`] decision applied: each launched NodeClaim is checked when first seen with a
//! providerID and every 10 minutes after; each shortfall of its Node's capacity is a
//! `FailedConsistencyCheck` warning, and `ConsistentStateFound` is written. As upstream's, the
//! first scan is spent even when the Node has not registered yet (which is usual right after a
//! launch): the condition then first appears 10 minutes later. Not checked live (that wait);
//! core's decision is tested by data.

use std::collections::{HashMap, HashSet};

use carpentry_core::api::time::format_time;
use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::consistency;
use carpentry_core::nodeclaim::lifecycle::node_for;
use serde_json::json;

use super::act::nodeclaim_ref;
use super::lifecycle::Lifecycle;
use crate::cloud::CloudProvider;

/// When each NodeClaim (by UID) was last checked, epoch seconds.
#[derive(Debug, Default)]
pub(super) struct State {
    scanned: HashMap<String, i64>,
}

impl<P: CloudProvider> Lifecycle<P> {
    pub(super) async fn consistency(&mut self, m: &Manifests, now: i64) {
        let present: HashSet<&str> = m.nodeclaims.iter().filter_map(|nc| nc.metadata.uid.as_deref()).collect();
        self.consistency.scanned.retain(|uid, _| present.contains(uid.as_str()));
        for nc in &m.nodeclaims {
            let launched = nc.status.as_ref().is_some_and(|s| !s.provider_id.is_empty());
            let Some(uid) = nc.metadata.uid.as_deref().filter(|_| launched) else { continue };
            if self.consistency.scanned.get(uid).is_some_and(|at| now - at < consistency::SCAN_PERIOD_SECONDS) {
                continue;
            }
            self.consistency.scanned.insert(uid.to_string(), now);
            // upstream: no Node (or several) is the lifecycle controller's to report.
            let Ok(node) = node_for(nc, &m.nodes) else { continue };
            let issues = consistency::node_shape(nc, node);
            for issue in &issues {
                self.act.decided("FailedConsistencyCheck", &json!({"nodeclaim": nc.name(), "issue": issue}));
                let node_name = node.metadata.name.as_deref().unwrap_or_default();
                let note = format!("{issue} (kubectl karpenter explain node {node_name})");
                self.act.event(&nodeclaim_ref(nc), true, "FailedConsistencyCheck", note, "Check").await;
            }
            if let Some(list) = consistency::conditions_after(nc, &issues, &format_time(now)) {
                // A write lost to another (409) waits for the next scan, as upstream's: its
                // conflict requeue finds the scan spent (v1.14.1
                // `pkg/controllers/nodeclaim/consistency/controller.go`). Tried again at once, it
                // would race the lifecycle's own writes on every NodeClaim of a scale-up.
                self.act.patch_nodeclaim_status(nc, json!({"conditions": list})).await;
            }
        }
    }
}
