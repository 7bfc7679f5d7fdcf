//! upstream `nodeclaim.podevents` (v1.14.1 `pkg/controllers/nodeclaim/podevents`): a pod bound to,
//! finishing on or leaving a node writes its NodeClaim's `status.lastPodEventTime` (core's
//! [`PodMarks`], deduplicated by 10 s), which starts the NodeClaim's `consolidateAfter` again. A
//! task of its own, writing one NodeClaim at a time as upstream's (its default
//! `MaxConcurrentReconciles` of 1), so that a scale-up's marks delay no provisioning round.

use std::collections::HashMap;
use std::sync::Arc;

use carpentry_core::api::NodeClaim;
use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::disruption::{last_pod_event, records_pod_event_after, PodMarks};
use serde_json::json;

use super::{concern_common, Common, Concern};
use crate::cloud::CloudProvider;
use crate::view::Loaded;

/// The concern.
pub(super) struct PodEvents<P: CloudProvider> {
    common: Common<P>,
    /// The pods as the last pass saw them (`None` before the first pass: a restart is no event).
    marks: Option<PodMarks>,
}
concern_common!(PodEvents);

impl<P: CloudProvider> PodEvents<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        PodEvents { common, marks: None }
    }
}

impl<P: CloudProvider> Concern<P> for PodEvents<P> {
    const NAME: &'static str = "nodeclaim.podevents";

    async fn pass(&mut self, loaded: Arc<Loaded>, now: i64) {
        let writes = self.decide(loaded.manifests());
        // The writes go one at a time (a scale-up's take a while): without the view.
        drop(loaded);
        for (name, last) in writes {
            // The time of this write, as upstream's (the pass's writes go one at a time).
            let now = crate::clock::now_seconds().max(now);
            if records_pod_event_after(last, now) {
                // Without an optimistic lock, as upstream's: the NodeClaim's other writers (its
                // lifecycle, its conditions) must not make a pod event lost.
                let at = carpentry_core::api::time::format_time(now);
                self.act.merge_nodeclaim_status(&name, json!({"lastPodEventTime": at})).await;
            }
        }
    }
}

impl<P: CloudProvider> PodEvents<P> {
    /// The NodeClaims a pod event since the last pass is to be written on, each with its
    /// `lastPodEventTime` as the view shows it.
    fn decide(&mut self, m: &Manifests) -> Vec<(String, Option<i64>)> {
        let marks = PodMarks::of(&m.pods);
        let Some(before) = self.marks.replace(marks.clone()) else { return Vec::new() };
        let events = before.events(&marks);
        if events.is_empty() {
            return Vec::new();
        }
        // facts::node_of's rule (the NodeClaim's nodeName, else its providerID), indexed.
        let by_provider_id: HashMap<&str, &str> = m
            .nodes
            .iter()
            .filter_map(|n| Some((n.spec.as_ref()?.provider_id.as_deref()?, n.metadata.name.as_deref()?)))
            .collect();
        let by_node: HashMap<&str, &NodeClaim> = m
            .nodeclaims
            .iter()
            .filter_map(|nc| {
                let status = nc.status.as_ref()?;
                let node = match status.node_name.as_str() {
                    "" => by_provider_id.get(status.provider_id.as_str()).copied()?,
                    named => named,
                };
                Some((node, nc))
            })
            .collect();
        events
            .iter()
            .filter_map(|node| by_node.get(node.as_str()))
            .filter(|nc| nc.metadata.deletion_timestamp.is_none())
            .map(|nc| (nc.name().to_string(), last_pod_event(nc)))
            .collect()
    }
}
