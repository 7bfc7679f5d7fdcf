//! Every write the reconcilers make, in one place: NodeClaims created, patched and deleted, Nodes
//! patched and deleted, pods evicted and deleted, and events. With `--dry-run` nothing but events
//! is written: each other write is logged as what it would have been, once for as long as it
//! stays the same (nothing is written, so every pass would decide it again).
//!
//! Patches are JSON merge patches carrying the object's `resourceVersion` (upstream's
//! `MergeFromWithOptimisticLock`), so a write decided on a stale view fails with 409 and the next
//! pass decides again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use carpentry_core::api::NodeClaim;
use carpentry_core::events::{Delivery, EventKey};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, EvictParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::Value;
use tracing::{debug, info, warn};

/// The events' reporting controller, as upstream's.
pub const REPORTER: &str = "karpenter";

#[derive(Clone)]
pub struct Act {
    client: kube::Client,
    pub dry_run: bool,
    /// Nothing is written unless this replica leads (checked before every write, not once a pass:
    /// a pass can outlast the renew deadline).
    leader: crate::leader::LeaderStatus,
    /// What the reconcilers count and time (`carpentry_decisions_total{reason}`, the writes, …).
    pub metrics: crate::metrics::Metrics,
    nodeclaims: ApiResource,
    nodeclasses: ApiResource,
    nodepools: ApiResource,
    /// Dry run: what was last logged as not written.
    unwritten: Arc<Mutex<Unwritten>>,
    /// Where events go: core's rule decides at once what is written
    /// ([`carpentry_core::events`]), a task of its own writes it.
    events: super::events::EventSink,
}

/// An event [`Act::event`] queued.
#[derive(Debug, Clone)]
pub struct EventTicket {
    key: EventKey,
    at: i64,
}

/// Dry run: the last unwritten write logged for each target, without its transition times.
#[derive(Default)]
struct Unwritten(HashMap<String, Value>);

impl Unwritten {
    /// Targets remembered at most (a bound, not a limit a cluster reaches in practice).
    const REMEMBERED: usize = 10_000;

    /// Whether `body` for `what` differs from the last one logged (and remembers it).
    fn is_new(&mut self, what: &str, body: &Value) -> bool {
        let stable = without_transition_times(body);
        if self.0.get(what) == Some(&stable) {
            return false;
        }
        if self.0.len() >= Self::REMEMBERED {
            self.0.clear();
        }
        self.0.insert(what.to_string(), stable);
        true
    }
}

/// `body` without `lastTransitionTime` fields: a condition that is never written is stamped anew
/// on every pass, and that alone is not a new write.
fn without_transition_times(body: &Value) -> Value {
    match body {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| *k != "lastTransitionTime")
                .map(|(k, v)| (k.clone(), without_transition_times(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_transition_times).collect()),
        other => other.clone(),
    }
}

/// What an eviction came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eviction {
    Evicted,
    /// 429: a PodDisruptionBudget forbids it now (the API server's message names it).
    Refused(String),
    /// The pod is gone already.
    Gone,
}

/// What became of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Written; in a dry run, what would have been.
    Done,
    /// Not applied: the view it was decided on is older than the object (409 Conflict). The
    /// newer view decides again.
    Stale,
    /// Not applied: the object is gone (404).
    Gone,
    /// Not written: the API server refused it or did not answer, or this replica does not lead.
    Failed,
}

/// Whether a failed write is one the next pass resolves by itself (a stale view: 409 Conflict;
/// the object is gone: 404).
fn is_stale(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 || s.code == 404)
}

pub fn pod_ref(p: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: p.metadata.name.clone(),
        namespace: Some(p.metadata.namespace.clone().unwrap_or_else(|| "default".into())),
        uid: p.metadata.uid.clone(),
        ..Default::default()
    }
}

pub fn node_ref(n: &Node) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: n.metadata.name.clone(),
        uid: n.metadata.uid.clone(),
        ..Default::default()
    }
}

pub fn nodeclass_ref(c: &carpentry_core::api::EC2NodeClass) -> ObjectReference {
    ObjectReference {
        api_version: Some("karpenter.k8s.aws/v1".into()),
        kind: Some("EC2NodeClass".into()),
        name: c.metadata.name.clone(),
        uid: c.metadata.uid.clone(),
        ..Default::default()
    }
}

pub fn nodepool_ref(np: &carpentry_core::api::NodePool) -> ObjectReference {
    ObjectReference {
        api_version: Some(carpentry_core::api::KARPENTER_API_VERSION.into()),
        kind: Some("NodePool".into()),
        name: np.metadata.name.clone(),
        uid: np.metadata.uid.clone(),
        ..Default::default()
    }
}

pub fn nodeclaim_ref(nc: &NodeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some(carpentry_core::api::KARPENTER_API_VERSION.into()),
        kind: Some("NodeClaim".into()),
        name: nc.metadata.name.clone(),
        uid: nc.metadata.uid.clone(),
        ..Default::default()
    }
}

impl Act {
    pub fn new(
        client: kube::Client,
        dry_run: bool,
        instance: String,
        metrics: crate::metrics::Metrics,
        leader: crate::leader::LeaderStatus,
    ) -> Act {
        let gvk = GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim");
        Act {
            events: super::events::EventSink::start(client.clone(), instance, metrics.clone(), leader.clone()),
            leader,
            client,
            dry_run,
            metrics,
            nodeclaims: ApiResource::from_gvk_with_plural(&gvk, "nodeclaims"),
            nodeclasses: ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("karpenter.k8s.aws", "v1", "EC2NodeClass"),
                "ec2nodeclasses",
            ),
            nodepools: ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
                "nodepools",
            ),
            unwritten: Arc::default(),
        }
    }

    /// Whether this replica leads now: asked before every write and every cloud call that
    /// launches or terminates.
    pub fn leading(&self) -> bool {
        self.leader.leading()
    }

    fn nodeclaims(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &self.nodeclaims)
    }

    /// Counts a decision and logs its structured reason.
    pub fn decided(&self, reason: &str, detail: &Value) {
        self.metrics.decisions.get_or_create(&vec![("reason".into(), reason.into())]).inc();
        info!(reason, decision = %detail, dry_run = self.dry_run, "decision");
    }

    /// Publishes an event (also in dry-run: events are how a shadow controller reports), as core's
    /// [`carpentry_core::events`] decides: not again within the same event's dedupe timeout on the
    /// same object (2 minutes; 15 for `Unconsolidatable`), a later repeat counted into the first
    /// event's series. The event is queued and written by a task of its own
    /// ([`super::events`]), so a pass does not wait for it. What was queued, to ask
    /// [`Act::delivery`] how it went; `None` when suppressed, not leading, or the queue is full
    /// (offered again by the next pass).
    ///
    /// kube-runtime's `Recorder` is not used: it keys its series by object, reason and action
    /// without the message, so a second message on the same object was written as a repeat of the
    /// first and never shown.
    pub fn event(
        &self,
        on: &ObjectReference,
        warning: bool,
        reason: &str,
        note: String,
        action: &str,
    ) -> Option<EventTicket> {
        if !self.leading() {
            debug!(reason, object = ?on.name, "not published: this replica does not lead");
            return None;
        }
        let note: String = if self.dry_run { format!("dry run: {note}") } else { note }.chars().take(1000).collect();
        let key = EventKey {
            object: format!(
                "{}/{}/{}/{}",
                on.kind.as_deref().unwrap_or_default(),
                on.namespace.as_deref().unwrap_or_default(),
                on.name.as_deref().unwrap_or_default(),
                on.uid.as_deref().unwrap_or_default()
            ),
            reason: reason.into(),
            message: note.clone(),
        };
        let occurred = k8s_openapi::jiff::Timestamp::now();
        let at = occurred.as_second();
        let offer =
            || super::events::Offer { on: on.clone(), warning, reason: reason.into(), note, action: action.into() };
        match self.events.offer(key.clone(), at, occurred, offer) {
            super::events::Offered::Queued => Some(EventTicket { key, at }),
            super::events::Offered::Suppressed => {
                debug!(reason, object = ?on.name, "the same event was published within its dedupe timeout; not again");
                None
            }
            super::events::Offered::Dropped => None,
        }
    }

    /// Where an event [`Act::event`] queued stands: on its way, written, or not written (a failed
    /// write, leadership lost before it).
    pub fn delivery(&self, ticket: &EventTicket) -> Delivery {
        self.events.delivery(&ticket.key, ticket.at)
    }

    /// Waits until every event queued so far was written or given up.
    pub async fn events_written(&self) {
        self.events.flushed().await;
    }

    /// Logs a failed write: a stale view quietly (the next pass decides again), else loudly.
    fn failed(&self, what: &str, e: &kube::Error) {
        self.metrics.api_write(what, true);
        if is_stale(e) {
            debug!(what, error = %e, "write not applied (stale view); decided again on the next");
        } else {
            warn!(what, error = %carpentry_core::error_chain(e), "write failed; decided again later");
        }
    }

    /// What became of a write [`Self::would`] did not let through: in a dry run, as if written;
    /// a follower's, not written.
    fn unwritten(&self) -> Write {
        if self.dry_run && self.leading() {
            Write::Done
        } else {
            Write::Failed
        }
    }

    /// What became of a write (a failure is logged by [`Self::failed`]).
    fn written<T>(&self, what: &str, result: Result<T, kube::Error>) -> Write {
        match result {
            Ok(_) => Write::Done,
            Err(e) => {
                self.failed(what, &e);
                match &e {
                    kube::Error::Api(status) if status.code == 409 => Write::Stale,
                    kube::Error::Api(status) if status.code == 404 => Write::Gone,
                    _ => Write::Failed,
                }
            }
        }
    }

    /// Whether a write went through (a failure is logged by [`Self::failed`]).
    fn applied<T>(&self, what: &str, result: Result<T, kube::Error>) -> bool {
        result.map_err(|e| self.failed(what, &e)).is_ok()
    }

    /// Whether `what` is not written: in a dry run (logged as what it would have been), or when
    /// this replica does not lead.
    fn would(&self, what: &str, body: &Value) -> bool {
        if !self.leading() {
            warn!(what, "not written: this replica does not lead");
            return true;
        }
        if !self.dry_run {
            self.metrics.api_write(what, false);
            return false;
        }
        let new = self.unwritten.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_new(what, body);
        if new {
            info!(what, body = %body, "dry run: not written");
        } else {
            debug!(what, "dry run: not written (as before)");
        }
        true
    }

    /// Creates a NodeClaim (its name from `generateName`): the name, or `None` in dry-run or on
    /// failure.
    pub async fn create_nodeclaim(&self, nc: &NodeClaim) -> Result<Option<String>> {
        let body = serde_json::to_value(nc).context("serialise the NodeClaim")?;
        if self.would("create NodeClaim", &body) {
            return Ok(None);
        }
        let object: DynamicObject = serde_json::from_value(body).context("the NodeClaim as an API object")?;
        let created = self.nodeclaims().create(&PostParams::default(), &object).await.context("create a NodeClaim")?;
        Ok(created.metadata.name)
    }

    pub async fn patch_nodeclaim(&self, name: &str, patch: Value) -> bool {
        if self.would(&format!("patch NodeClaim {name}"), &patch) {
            return false;
        }
        self.applied(
            &format!("patch NodeClaim {name}"),
            self.nodeclaims().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await,
        )
    }

    /// Patches NodeClaim `name`'s status with `status` without an optimistic lock: for a field
    /// written whole, which a concurrent writer's list cannot lose and a concurrent write cannot
    /// refuse (upstream podevents' `client.MergeFrom` for `lastPodEventTime`).
    pub async fn merge_nodeclaim_status(&self, name: &str, status: Value) -> bool {
        let patch = serde_json::json!({"status": status});
        if self.would(&format!("patch NodeClaim {name} status"), &patch) {
            return false;
        }
        self.applied(
            &format!("patch NodeClaim {name} status"),
            self.nodeclaims().patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await,
        )
    }

    /// Patches `nodeclaim`'s metadata with `metadata`, then its status with `status`, in upstream's
    /// order (lifecycle `controller.go`, v1.14.1: the object before its status), so that no reader
    /// sees a step marked done (a providerID, `Launched`) on a NodeClaim still without the labels
    /// that step wrote. Both under optimistic locks: the metadata under the resourceVersion the
    /// step was decided on, the status under the one the first patch returned. Once both are
    /// written: the resourceVersion between them (a view may show it before the status).
    pub async fn patch_nodeclaim_then_status(
        &self,
        nodeclaim: &NodeClaim,
        metadata: Value,
        status: Value,
    ) -> Option<Option<String>> {
        let name = nodeclaim.name();
        let mut first = serde_json::json!({"metadata": metadata});
        first["metadata"]["resourceVersion"] = serde_json::json!(nodeclaim.metadata.resource_version);
        if self.would(&format!("patch NodeClaim {name}"), &first) {
            self.would(&format!("patch NodeClaim {name} status"), &serde_json::json!({"status": status}));
            return None;
        }
        let what = format!("patch NodeClaim {name}");
        let patched = match self.nodeclaims().patch(name, &PatchParams::default(), &Patch::Merge(&first)).await {
            Ok(object) => object,
            Err(e) => {
                self.failed(&what, &e);
                return None;
            }
        };
        let patch = serde_json::json!({"metadata": {"resourceVersion": patched.metadata.resource_version},
            "status": status});
        self.metrics.api_write(&format!("patch NodeClaim {name} status"), false);
        let applied = self.applied(
            &format!("patch NodeClaim {name} status"),
            self.nodeclaims().patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await,
        );
        applied.then_some(patched.metadata.resource_version)
    }

    /// Patches `nodeclaim`'s status with `status`, under the resourceVersion it was decided on
    /// (upstream `MergeFromWithOptimisticLock`): a merge patch replaces a whole condition list, so
    /// one made from a stale view would drop conditions written meanwhile; it fails with 409
    /// instead and the next pass decides again.
    pub async fn patch_nodeclaim_status(&self, nodeclaim: &NodeClaim, status: Value) -> bool {
        self.write_nodeclaim_status(nodeclaim, status).await == Write::Done && !self.dry_run
    }

    /// Patches `nodeclaim`'s status with `status`, locked on its resourceVersion in the view.
    pub async fn write_nodeclaim_status(&self, nodeclaim: &NodeClaim, status: Value) -> Write {
        let name = nodeclaim.name();
        let patch = serde_json::json!({"metadata": {"resourceVersion": nodeclaim.metadata.resource_version},
            "status": status});
        let what = format!("patch NodeClaim {name} status");
        if self.would(&what, &patch) {
            return self.unwritten();
        }
        self.written(&what, self.nodeclaims().patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await)
    }

    pub async fn delete_nodeclaim(&self, name: &str) -> bool {
        if self.would(&format!("delete NodeClaim {name}"), &Value::Null) {
            return false;
        }
        self.applied(
            &format!("delete NodeClaim {name}"),
            self.nodeclaims().delete(name, &DeleteParams::default()).await,
        )
    }

    /// The EC2NodeClass's metadata (its finalizers).
    pub async fn patch_nodeclass(&self, name: &str, patch: Value) -> bool {
        if self.would(&format!("patch EC2NodeClass {name}"), &patch) {
            return false;
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &self.nodeclasses);
        self.applied(
            &format!("patch EC2NodeClass {name}"),
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await,
        )
    }

    pub async fn patch_nodeclass_status(&self, name: &str, patch: Value) -> bool {
        if self.would(&format!("patch EC2NodeClass {name} status"), &patch) {
            return false;
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &self.nodeclasses);
        self.applied(
            &format!("patch EC2NodeClass {name} status"),
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await,
        )
    }

    pub async fn patch_nodepool(&self, name: &str, patch: Value) -> bool {
        if self.would(&format!("patch NodePool {name}"), &patch) {
            return false;
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &self.nodepools);
        self.applied(
            &format!("patch NodePool {name}"),
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await,
        )
    }

    pub async fn patch_nodepool_status(&self, name: &str, patch: Value) -> Write {
        let what = format!("patch NodePool {name} status");
        if self.would(&what, &patch) {
            return self.unwritten();
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &self.nodepools);
        self.written(&what, api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await)
    }

    pub async fn patch_node(&self, name: &str, patch: Value) -> bool {
        self.write_node(name, patch).await == Write::Done && !self.dry_run
    }

    /// Patches Node `name` with `patch` (a `metadata.resourceVersion` in it locks the write).
    pub async fn write_node(&self, name: &str, patch: Value) -> Write {
        let what = format!("patch Node {name}");
        if self.would(&what, &patch) {
            return self.unwritten();
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        self.written(&what, nodes.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await)
    }

    pub async fn delete_node(&self, name: &str) -> bool {
        if self.would(&format!("delete Node {name}"), &Value::Null) {
            return false;
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        self.applied(&format!("delete Node {name}"), nodes.delete(name, &DeleteParams::default()).await)
    }

    /// Evicts a pod through `pods/eviction`, which honours PodDisruptionBudgets.
    pub async fn evict(&self, namespace: &str, name: &str) -> Option<Eviction> {
        if self.would(&format!("evict Pod {namespace}/{name}"), &Value::Null) {
            return None;
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match pods.evict(name, &EvictParams::default()).await {
            Ok(_) => Some(Eviction::Evicted),
            Err(kube::Error::Api(s)) if s.code == 429 => Some(Eviction::Refused(s.message)),
            Err(kube::Error::Api(s)) if s.code == 404 => Some(Eviction::Gone),
            Err(e) => {
                self.failed(&format!("evict Pod {namespace}/{name}"), &e);
                None
            }
        }
    }

    /// Deletes a pod outright (the terminationGracePeriod has run out).
    pub async fn delete_pod(&self, namespace: &str, name: &str) -> bool {
        if self.would(&format!("delete Pod {namespace}/{name}"), &Value::Null) {
            return false;
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        self.applied(&format!("delete Pod {namespace}/{name}"), pods.delete(name, &DeleteParams::default()).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_steps_metadata_is_written_before_its_status_and_a_refused_metadata_write_stops_it() {
        let api = crate::testing::FakeApi::default();
        let act = super::super::Common::on_fake_api(&api, false).act;
        let nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "a", "resourceVersion": "1"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"},
                "requirements": []},
        }))
        .unwrap();
        let path = "/apis/karpenter.sh/v1/nodeclaims/a";
        api.object(path, 1);
        let (labels, status) = (json!({"labels": {"team": "a"}}), json!({"providerID": "kwok://a"}));
        // upstream's order: the labels, then the providerID under the version the first returned.
        let between = act.patch_nodeclaim_then_status(&nc, labels.clone(), status.clone()).await;
        assert_eq!(between, Some(Some("2".to_string())));
        let writes = api.writes();
        let order: Vec<(&str, u16)> = writes.iter().map(|w| (w.path.as_str(), w.status)).collect();
        assert_eq!(order, [(path, 200), ("/apis/karpenter.sh/v1/nodeclaims/a/status", 200)]);
        assert_eq!(writes[1].body["metadata"]["resourceVersion"], json!("2"));
        // The labels refused (a newer NodeClaim): the providerID is not written without them.
        api.object(path, 7);
        assert_eq!(act.patch_nodeclaim_then_status(&nc, labels, status).await, None);
        let statuses: Vec<u16> = api.writes().iter().skip(2).map(|w| w.status).collect();
        assert_eq!(statuses, [409], "{:#?}", api.writes());
    }

    #[test]
    fn a_dry_run_logs_the_same_unwritten_write_once() {
        let mut unwritten = Unwritten::default();
        let status = |rv: &str, at: &str| {
            json!({"metadata": {"resourceVersion": rv}, "status": {"conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": at}]}})
        };
        assert!(unwritten.is_new("patch NodePool a status", &status("1", "2026-12-03T10:00:00Z")));
        // The next pass stamps the condition anew: still the same write.
        assert!(!unwritten.is_new("patch NodePool a status", &status("1", "2026-12-03T10:00:10Z")));
        assert!(unwritten.is_new("patch NodePool b status", &status("1", "2026-12-03T10:00:10Z")));
        // The object changed: a new write.
        assert!(unwritten.is_new("patch NodePool a status", &status("2", "2026-12-03T10:00:20Z")));
    }
}
