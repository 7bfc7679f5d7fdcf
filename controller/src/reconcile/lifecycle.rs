//! upstream `nodeclaim.lifecycle`: the termination finalizer first, then launch → registration →
//! initialization, with liveness watching the first two. Every rule is core's
//! ([`carpentry_core::nodeclaim::lifecycle`]); this file reads the view and writes the result.
//!
//! Each launch is a task of its own (at most core's [`MAX_CONCURRENT_LAUNCHES`] at once, as
//! upstream's lifecycle reconciles run concurrently): a pass starts it and goes on, and the pass
//! after it ends writes its result, so one slow CreateFleet holds up no other NodeClaim.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use carpentry_core::api::NodeClaim;
use carpentry_core::labels;
use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::lifecycle::{
    self, phase, Instance, Liveness, NotRegistered, Phase, LAUNCH_CACHE_SECONDS, MAX_CONCURRENT_LAUNCHES,
};
use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use tracing::{debug, warn};

use super::act::{node_ref, nodeclaim_ref};
use super::{concern_common, Common, Concern};
use crate::cloud::{CloudProvider, CreateError};

/// A launch result is cached this long by NodeClaim UID (core's, upstream's).
const LAUNCH_CACHE_TTL: Duration = Duration::from_secs(LAUNCH_CACHE_SECONDS);
/// At shutdown, how long launches under way are waited for, so that their instances are written
/// onto their NodeClaims rather than launched again by the next leader (controller-runtime's
/// manager waits 30 s for running reconciles; the kubelet's default grace is 30 s too).
const SHUTDOWN_LAUNCH_GRACE: Duration = Duration::from_secs(20);
/// How long this concern's own write may take to show in the view (core's).
const AWAIT_OWN_WRITE: Duration =
    Duration::from_secs(carpentry_core::disruption::orchestration::AWAIT_OWN_WRITE_SECONDS as u64);

/// A NodeClaim whose launch failed (not for capacity): when to try again, and what it said.
struct LaunchFailure {
    retry_at: Instant,
    backoff: Duration,
    last: String,
}

/// The concern: the NodeClaim lifecycle and the consistency check.
pub(super) struct Lifecycle<P: CloudProvider> {
    common: Common<P>,
    /// Launch results by NodeClaim UID, so that a failed status write never launches twice.
    launched: HashMap<String, (Instance, Instant)>,
    /// Launches that failed for a reason other than capacity, by NodeClaim UID.
    launch_failures: HashMap<String, LaunchFailure>,
    /// Launches under way, by NodeClaim UID.
    launching: HashMap<String, tokio::task::JoinHandle<Result<Instance, CreateError>>>,
    /// A permit per launch under way.
    launch_slots: Arc<tokio::sync::Semaphore>,
    /// Notified when a launch ends, for the pass that writes its result.
    ended: Arc<tokio::sync::Notify>,
    /// NodeClaims this concern wrote a step onto, by UID: the resourceVersions that do not show it
    /// yet (the one the step was decided on, and one between a step's two writes), and when. Until the view shows a newer version, the NodeClaim is not decided on again,
    /// so that a step is not written twice from a view that does not show it yet (a write that
    /// changed nothing keeps the version: [`AWAIT_OWN_WRITE`] bounds the wait).
    written: HashMap<String, (Vec<Option<String>>, Instant)>,
    pub(super) consistency: super::consistency::State,
    /// The provider was asked to resume what it launched before this process started.
    resumed: bool,
}
concern_common!(Lifecycle);

impl<P: CloudProvider> Lifecycle<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        Lifecycle {
            common,
            launched: HashMap::new(),
            launch_failures: HashMap::new(),
            launching: HashMap::new(),
            launch_slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_LAUNCHES)),
            ended: Arc::new(tokio::sync::Notify::new()),
            written: HashMap::new(),
            consistency: Default::default(),
            resumed: false,
        }
    }
}

impl<P: CloudProvider> Concern<P> for Lifecycle<P> {
    const NAME: &'static str = "lifecycle";

    async fn pass(&mut self, m: &Manifests, _: &super::Loaded, now: i64) {
        if !self.resumed {
            self.resumed = true;
            // A dry run makes no machine boot either.
            if !self.act.dry_run {
                self.cloud.resume(m).await;
            }
        }
        // Each NodeClaim by UID, whether it is being deleted: one lookup per remembered entry.
        let deleting: HashMap<&str, bool> = m
            .nodeclaims
            .iter()
            .filter_map(|nc| Some((nc.metadata.uid.as_deref()?, nc.metadata.deletion_timestamp.is_some())))
            .collect();
        let live = |uid: &String| deleting.get(uid.as_str()) == Some(&false);
        self.launched.retain(|uid, (_, at)| at.elapsed() < LAUNCH_CACHE_TTL && live(uid));
        self.launch_failures.retain(|uid, _| live(uid));
        self.written.retain(|uid, (_, at)| at.elapsed() < AWAIT_OWN_WRITE && live(uid));
        // A deleted NodeClaim's launch under way is still waited for (below), and its finalizer
        // with it; only a NodeClaim gone altogether lets go of it (garbage collection then
        // terminates an instance it starts).
        self.launching.retain(|uid, _| deleting.contains_key(uid.as_str()));
        {
            // A nomination is kept while its NodeClaim may still fail to launch: not once it has
            // launched, and past its NodeClaim in the view only while the view may not show a
            // NodeClaim just created yet.
            let names: HashSet<&str> = m
                .nodeclaims
                .iter()
                .filter(|nc| nc.status.as_ref().is_none_or(|s| s.provider_id.is_empty()))
                .map(NodeClaim::name)
                .collect();
            let mut nominations = self.shared.nominations.lock().unwrap_or_else(PoisonError::into_inner);
            nominations.retain(|name, (_, at)| names.contains(name.as_str()) || at.elapsed() < AWAIT_OWN_WRITE);
        }
        self.publish_launches();
        for nc in &m.nodeclaims {
            match nc.metadata.deletion_timestamp {
                None => self.lifecycle(m, nc, now).await,
                // upstream finalizes a NodeClaim only between its reconciles: the launch's
                // instance is written onto it first, for the finalizer to terminate.
                Some(_) if self.launching.contains_key(nc.metadata.uid.as_deref().unwrap_or_default()) => {
                    self.launch(m, nc).await;
                }
                Some(_) => {}
            }
        }
        self.publish_launches();
        self.consistency(m, now).await;
    }

    fn wake(&self) -> Option<Arc<tokio::sync::Notify>> {
        Some(self.ended.clone())
    }

    /// Launches under way are waited for (a bounded while) and their instances written, so that
    /// the next leader does not launch them again.
    async fn stop(&mut self, m: &Manifests) {
        let deadline = tokio::time::Instant::now() + SHUTDOWN_LAUNCH_GRACE;
        while self.launching.values().any(|launch| !launch.is_finished()) {
            if tokio::time::timeout_at(deadline, self.ended.notified()).await.is_err() {
                warn!(
                    launches = self.launching.len(),
                    "stopping with launches under way; garbage collection answers for their instances"
                );
                break;
            }
        }
        for nc in &m.nodeclaims {
            let uid = nc.metadata.uid.as_deref().unwrap_or_default();
            if self.launching.get(uid).is_some_and(|launch| launch.is_finished()) {
                self.launch(m, nc).await;
            }
        }
    }
}

pub(super) fn has_finalizer(finalizers: &Option<Vec<String>>) -> bool {
    finalizers.iter().flatten().any(|f| f == labels::TERMINATION_FINALIZER)
}

impl<P: CloudProvider> Lifecycle<P> {
    async fn lifecycle(&mut self, m: &Manifests, nc: &NodeClaim, now: i64) {
        let name = nc.name().to_string();
        let uid = nc.metadata.uid.as_deref().unwrap_or_default();
        if self.written.get(uid).is_some_and(|(versions, _)| versions.contains(&nc.metadata.resource_version)) {
            return; // the view does not show this concern's last write yet
        }
        if !has_finalizer(&nc.metadata.finalizers) {
            let mut finalizers = nc.metadata.finalizers.clone().unwrap_or_default();
            finalizers.push(labels::TERMINATION_FINALIZER.into());
            let rv = &nc.metadata.resource_version;
            if self
                .act
                .patch_nodeclaim(&name, json!({"metadata": {"finalizers": finalizers, "resourceVersion": rv}}))
                .await
            {
                self.wrote(nc);
            }
            return;
        }
        match phase(nc) {
            Phase::Launching => {
                if self.liveness(m, nc, now).await {
                    return;
                }
                self.launch(m, nc).await;
            }
            Phase::Launched => match lifecycle::node_for(nc, &m.nodes) {
                Ok(node) => self.register(m, nc, node).await,
                Err(NotRegistered::MultipleNodesFound { provider_id, count }) => {
                    let note = format!("{count} Nodes have providerID {provider_id}; the NodeClaim cannot register");
                    self.act.event(&nodeclaim_ref(nc), true, "MultipleNodesFound", note, "Register").await;
                }
                Err(_) => {
                    self.liveness(m, nc, now).await;
                }
            },
            Phase::Registered => {
                if let Ok(node) = lifecycle::node_for(nc, &m.nodes) {
                    self.initialize(nc, node).await;
                }
            }
            Phase::Initialized | Phase::Terminating => {}
        }
    }

    /// upstream `liveness.go`: true when the NodeClaim timed out and was deleted.
    async fn liveness(&mut self, m: &Manifests, nc: &NodeClaim, now: i64) -> bool {
        let Liveness::TimedOut(timeout) = lifecycle::liveness(nc, now) else { return false };
        let note = format!(
            "not {} after {} s: deleting the NodeClaim; its pods are provisioned again",
            timeout.condition(),
            timeout.after_seconds()
        );
        self.act.decided("LivenessTimeout", &json!({"nodeclaim": nc.name(), "timeout": timeout}));
        self.act.event(&nodeclaim_ref(nc), true, "LivenessTimeout", note, "Delete").await;
        // upstream judges the NodePool first, then deletes.
        self.registration_outcome(m, nc, false).await;
        if self.act.delete_nodeclaim(nc.name()).await {
            let reason = match timeout {
                carpentry_core::nodeclaim::lifecycle::LivenessTimeout::Launch => "LaunchTimeout",
                carpentry_core::nodeclaim::lifecycle::LivenessTimeout::Registration => "RegistrationTimeout",
            };
            self.act.metrics.nodeclaim_disrupted(nc, reason);
        }
        true
    }

    /// upstream `launch.go`: the cloud provider's instance (cached by UID), written onto the
    /// NodeClaim. No launch possible → the NodeClaim is deleted (a new round provisions its pods).
    async fn launch(&mut self, m: &Manifests, nc: &NodeClaim) {
        let name = nc.name().to_string();
        let uid = nc.metadata.uid.clone().unwrap_or_default();
        let instance = match self.launched.get(&uid) {
            Some((instance, _)) => instance.clone(),
            None if self.launching.get(&uid).is_some_and(|launch| !launch.is_finished()) => return,
            None => {
                let Some(launch) = self.launching.remove(&uid) else {
                    self.start_launch(m, nc);
                    return;
                };
                let result = launch.await.unwrap_or_else(|e| Err(CreateError::cloud(format!("the launch ended: {e}"))));
                match result {
                    Ok(instance) => {
                        self.launch_failures.remove(&uid);
                        self.nominated(&name, true);
                        self.launched.insert(uid, (instance.clone(), Instant::now()));
                        instance
                    }
                    Err(e) if e.deletes_nodeclaim() => {
                        let why = carpentry_core::error_chain(&e);
                        self.act.decided("LaunchFailed", &json!({"nodeclaim": name, "why": why}));
                        let note = format!("{why}: deleting the NodeClaim; its pods are provisioned again");
                        self.act.event(&nodeclaim_ref(nc), true, "InsufficientCapacityError", note, "Launch").await;
                        for pod in self.nominated(&name, true) {
                            let note = format!(
                                "nodeclaim/{name}, which this pod should schedule on, cannot launch: {why}; \
                                 the pod is provisioned again"
                            );
                            self.act.event(&pod, true, "InsufficientCapacityError", note, "Launch").await;
                        }
                        if self.act.delete_nodeclaim(&name).await {
                            self.act.metrics.nodeclaim_disrupted(nc, "InsufficientCapacity");
                        }
                        return;
                    }
                    Err(e) => {
                        // Tried again after core's backoff, so that a denied or
                        // failing call is not repeated every pass; said once per distinct error,
                        // and on the NodeClaim's `Launched` condition (upstream: Unknown, with the
                        // error's reason).
                        let why = match &e {
                            CreateError::Cloud(cloud) => format!("{cloud:#}"),
                            other => carpentry_core::error_chain(other),
                        };
                        let (reason, message) = e.launched_condition(&why);
                        if let Some(status) =
                            lifecycle::launch_failed(nc, reason, &message, &crate::clock::now_rfc3339())
                        {
                            self.act.patch_nodeclaim_status(nc, json!(status)).await;
                        }
                        let previous = self.launch_failures.get(&uid).map(|f| f.backoff.as_millis() as u64);
                        let backoff = Duration::from_millis(
                            carpentry_core::nodeclaim::lifecycle::launch_backoff_millis(previous),
                        );
                        let failure = self.launch_failures.entry(uid).or_insert_with(|| LaunchFailure {
                            retry_at: Instant::now(),
                            backoff,
                            last: String::new(),
                        });
                        failure.backoff = backoff;
                        failure.retry_at = Instant::now() + backoff;
                        warn!(nodeclaim = %name, error = %why, retry_in_s = failure.backoff.as_secs(), "launch failed");
                        if failure.last != why {
                            failure.last = why.clone();
                            self.common.act.decided("LaunchFailed", &json!({"nodeclaim": name, "why": why}));
                            let note = format!("{why}; trying again in {} s", failure.backoff.as_secs());
                            self.common.act.event(&nodeclaim_ref(nc), true, "LaunchFailed", note, "Launch").await;
                            let retry_in = failure.backoff.as_secs();
                            for pod in self.common.nominated(&name, false) {
                                let note = format!(
                                    "nodeclaim/{name}, which this pod should schedule on, has not launched: {why}; \
                                     trying again in {retry_in} s"
                                );
                                self.common.act.event(&pod, true, "LaunchFailed", note, "Launch").await;
                            }
                        }
                        return;
                    }
                }
            }
        };
        let at = crate::clock::now_rfc3339();
        let launched = lifecycle::launched(nc, &instance, &at);
        self.act.decided(
            "Launched",
            &json!({"nodeclaim": name, "providerID": instance.provider_id,
                "instanceType": instance.labels.get(labels::INSTANCE_TYPE),
                "zone": instance.labels.get(labels::TOPOLOGY_ZONE),
                "capacityType": instance.labels.get(labels::CAPACITY_TYPE)}),
        );
        // The labels first, then the providerID that marks the launch done: a launched NodeClaim
        // is never seen without its instance type and zone (drift would call that
        // RequirementsDrifted). A failure in between is covered by the provider's launch cache.
        let metadata = json!({"labels": launched.metadata.labels, "annotations": launched.metadata.annotations});
        if let Some(between) = self.act.patch_nodeclaim_then_status(nc, metadata, json!(launched.status)).await {
            self.wrote(nc);
            // The view may show the metadata write before the status: not a newer view either.
            if let Some((versions, _)) = self.written.get_mut(nc.metadata.uid.as_deref().unwrap_or_default()) {
                versions.push(between);
            }
        }
    }

    /// Starts `nc`'s launch as a task of its own, unless its class, a backoff, the catalogue or
    /// leadership says not yet.
    fn start_launch(&mut self, m: &Manifests, nc: &NodeClaim) {
        if !self.catalogue_settled {
            return; // the region's types and prices, not the embedded catalogue's
        }
        let name = nc.name().to_string();
        let uid = nc.metadata.uid.clone().unwrap_or_default();
        // The class the NodeClaim names, not its NodePool's now (an edit since must not
        // change what an existing NodeClaim launches).
        let Some(class) = m.nodeclass_of(nc) else {
            debug!(nodeclaim = %name, nodeclass = %nc.spec.node_class_ref.name,
                "the NodeClaim's EC2NodeClass is not there (yet); not launched");
            return;
        };
        if self.launch_failures.get(&uid).is_some_and(|f| f.retry_at > Instant::now()) {
            return;
        }
        let subnets = class.status.as_ref().map_or(&[][..], |s| s.subnets.as_slice());
        let types = match self.catalogue.instance_types_in_subnets(&self.region, &class.spec, subnets) {
            Ok(t) => t,
            Err(e) => {
                warn!(nodeclaim = %name, error = %carpentry_core::error_chain(&e), "no instance types; not launched");
                return;
            }
        };
        if self.act.dry_run {
            self.act.decided("WouldLaunch", &json!({"nodeclaim": name}));
            return;
        }
        if !self.act.leading() {
            return; // a launch is this replica's only while it leads
        }
        let (cloud, nc, class) = (self.cloud.clone(), nc.clone(), class.clone());
        let (slots, ended, metrics) = (self.launch_slots.clone(), self.ended.clone(), self.act.metrics.clone());
        let launch = tokio::spawn(async move {
            let _slot = slots.acquire_owned().await;
            let started = Instant::now();
            let result = cloud.create(&nc, &class, &types).await;
            let error = result.as_ref().err().map(CreateError::upstream_type);
            metrics.cloud_call("nodeclaim.lifecycle", "Create", cloud.name(), started, error);
            ended.notify_one();
            result
        });
        self.launching.insert(uid, launch);
        self.publish_launches();
    }

    /// Tells termination which NodeClaims' launches are under way.
    fn publish_launches(&self) {
        let mut shared = self.shared.launches_under_way.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        shared.clear();
        shared.extend(self.launching.keys().cloned());
    }

    /// upstream `registration.go`.
    async fn register(&mut self, m: &Manifests, nc: &NodeClaim, node: &Node) {
        let at = crate::clock::now_rfc3339();
        let r = lifecycle::register(nc, node, &at);
        let node_name = r.node.metadata.name.clone().unwrap_or_default();
        if r.unregistered_taint_missing {
            let note = format!("Node {node_name} joined without the karpenter.sh/unregistered:NoExecute taint");
            self.act.event(&node_ref(node), true, "UnregisteredTaintMissing", note, "Register").await;
        }
        let meta = &r.node.metadata;
        let patch = json!({
            "metadata": {
                "resourceVersion": node.metadata.resource_version,
                "labels": meta.labels, "annotations": meta.annotations,
                "finalizers": meta.finalizers, "ownerReferences": meta.owner_references,
            },
            "spec": {"taints": r.node.spec.as_ref().and_then(|s| s.taints.clone())},
        });
        if !self.act.patch_node(&node_name, patch).await {
            return;
        }
        let status = r.nodeclaim.status.as_ref();
        self.act.decided("Registered", &json!({"nodeclaim": nc.name(), "node": node_name}));
        let patch = json!({"nodeName": node_name, "conditions": status.map(|s| &s.conditions)});
        if self.act.patch_nodeclaim_status(nc, patch).await {
            self.wrote(nc);
        }
        self.registration_outcome(m, nc, true).await;
    }

    /// upstream `initialization.go`.
    async fn initialize(&mut self, nc: &NodeClaim, node: &Node) {
        let at = crate::clock::now_rfc3339();
        let (initialized, node_after) = match lifecycle::initialize(nc, node, &at) {
            Ok(done) => done,
            Err(why) => {
                debug!(nodeclaim = %nc.name(), reason = why.reason(), "not initialized yet: {why}");
                return;
            }
        };
        let node_name = node.metadata.name.clone().unwrap_or_default();
        // The labels as core leaves them (`karpenter.sh/initialized=true` added).
        let patch = json!({"metadata": {"labels": node_after.metadata.labels}});
        if !self.act.patch_node(&node_name, patch).await {
            return;
        }
        self.act.decided("Initialized", &json!({"nodeclaim": nc.name(), "node": node_name}));
        let conditions = initialized.status.as_ref().map(|s| &s.conditions);
        if self.act.patch_nodeclaim_status(nc, json!({"conditions": conditions})).await {
            self.wrote(nc);
        }
    }

    /// A step was written onto `nc`, decided on its version in the view.
    fn wrote(&mut self, nc: &NodeClaim) {
        let uid = nc.metadata.uid.clone().unwrap_or_default();
        self.written.insert(uid, (vec![nc.metadata.resource_version.clone()], Instant::now()));
    }
}
