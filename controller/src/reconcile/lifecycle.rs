//! upstream `nodeclaim.lifecycle`, a per-object reconciler ([`super::perobject`]): the termination
//! finalizer first, then launch → registration → initialization, with liveness watching the first
//! two; and a deleting NodeClaim finalized (its Nodes deleted, then its instance, then the
//! finalizer removed, as upstream's `finalize`). Every rule is core's
//! ([`carpentry_core::nodeclaim::lifecycle`]); this file reads the view and writes the result.
//!
//! Each NodeClaim is reconciled when it changes, when its Node (by providerID) or its
//! EC2NodeClass changes, when liveness asks to look again, every 5 s while a deleting
//! NodeClaim's instance terminates, and after a failed launch, write or instance deletion with
//! upstream's backoff (1 s doubling to a minute). Up to core's [`MAX_CONCURRENT_LAUNCHES`]
//! reconcile at once, as upstream's, so one slow CreateFleet holds up no other NodeClaim; a
//! launch is awaited within its NodeClaim's reconcile, and its instance is written onto the
//! NodeClaim even when it was deleted meanwhile (the write refused for the deletion's new
//! resourceVersion, the next reconcile writes it onto the deleting NodeClaim): until then the
//! launch counts as under way and the NodeClaim is not finalized, so that the instance is
//! terminated with it (upstream, too, finalizes a NodeClaim only between its reconciles).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use carpentry_core::api::{EC2NodeClass, NodeClaim, NodePool};
use carpentry_core::labels;
use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::lifecycle::{
    self, phase, Instance, Liveness, NotRegistered, Phase, LAUNCH_CACHE_SECONDS, MAX_CONCURRENT_LAUNCHES,
};
use carpentry_core::termination::controller::{Stage, INSTANCE_TERMINATION_RECHECK_SECONDS};
use carpentry_core::workqueue::RateLimiter;
use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use tracing::{debug, warn};

use super::act::{node_ref, nodeclaim_ref, Write};
use super::perobject::{changed_names, Failed, Next, ObjectReconciler};
use super::termination::{provider_id, without_finalizer};
use super::Common;
use crate::cloud::{CloudProvider, CreateError, Deletion};
use crate::view::{lock, Loaded};

/// A launch result is cached this long by NodeClaim UID (core's, upstream's).
const LAUNCH_CACHE_TTL: Duration = Duration::from_secs(LAUNCH_CACHE_SECONDS);
/// How long this controller's own write may take to show in the view (core's).
const AWAIT_OWN_WRITE: Duration =
    Duration::from_secs(carpentry_core::disruption::orchestration::AWAIT_OWN_WRITE_SECONDS as u64);
/// While the first instance-type refresh has not been tried, a launch waits this long between looks.
const CATALOGUE_WAIT: Duration = Duration::from_secs(1);

/// The resourceVersions that do not show a step written yet, and when it was written.
type Written = (Vec<Option<String>>, Instant);

/// The controller.
pub(super) struct Lifecycle<P: CloudProvider> {
    common: Common<P>,
    /// Launch results by NodeClaim UID, so that a failed status write never launches twice.
    launched: Mutex<HashMap<String, (Instance, Instant)>>,
    /// The last launch error said for each NodeClaim (by UID): said again only when it changes.
    said: Mutex<HashMap<String, String>>,
    /// NodeClaims this controller wrote a step onto, by UID: the resourceVersions that do not
    /// show it yet (the one the step was decided on, and one between a step's two writes), and
    /// when. Until the view shows a newer version, the NodeClaim is not decided on again, so that
    /// a step is not written twice from a view that does not show it yet (a write that changed
    /// nothing keeps the version: [`AWAIT_OWN_WRITE`] bounds the wait).
    written: Mutex<HashMap<String, Written>>,
    /// The provider was asked to resume what it launched before this process started.
    resumed: AtomicBool,
}

impl<P: CloudProvider> Lifecycle<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        Lifecycle {
            common,
            launched: Mutex::default(),
            said: Mutex::default(),
            written: Mutex::default(),
            resumed: AtomicBool::new(false),
        }
    }
}

fn has_finalizer(finalizers: &Option<Vec<String>>) -> bool {
    finalizers.iter().flatten().any(|f| f == labels::TERMINATION_FINALIZER)
}

impl<P: CloudProvider> ObjectReconciler for Lifecycle<P> {
    type Object = NodeClaim;
    const NAME: &'static str = "nodeclaim.lifecycle";
    const CONCURRENCY: u16 = MAX_CONCURRENT_LAUNCHES as u16;
    const RATE_LIMITER: RateLimiter = lifecycle::RATE_LIMITER;
    /// A failed launch writes its `Launched` condition, which would bring the NodeClaim back at
    /// once and skip the backoff.
    const DEFER_CHANGES_IN_BACKOFF: bool = true;

    /// upstream `Register`'s `Watches`: a Node (by providerID) for its NodeClaim's registration
    /// and initialization; and, for a NodeClaim not launched yet, its EC2NodeClass (a launch
    /// waits for its subnets).
    fn related(before: &Loaded, after: &Loaded) -> Vec<String> {
        let (before, after) = (before.manifests(), after.manifests());
        let provider_ids = changed_nodes(before, after);
        let classes = changed_names(&before.nodeclasses, &after.nodeclasses, |c| &c.metadata);
        after
            .nodeclaims
            .iter()
            .filter(|nc| {
                let provider_id = nc.status.as_ref().map(|s| s.provider_id.as_str()).unwrap_or_default();
                if provider_id.is_empty() {
                    classes.contains(nc.spec.node_class_ref.name.as_str())
                } else {
                    provider_ids.contains(provider_id)
                }
            })
            .map(|nc| nc.name().to_string())
            .collect()
    }

    /// Forgets what belongs to NodeClaims gone (or being deleted) and the nominations of launched ones.
    fn tidy(&self, loaded: &Loaded) {
        let m = loaded.manifests();
        let deleting: HashMap<&str, bool> = m
            .nodeclaims
            .iter()
            .filter_map(|nc| Some((nc.metadata.uid.as_deref()?, nc.metadata.deletion_timestamp.is_some())))
            .collect();
        let live = |uid: &String| deleting.get(uid.as_str()) == Some(&false);
        {
            // An instance not written yet is kept while its NodeClaim is there, deleted or not;
            // a NodeClaim gone altogether lets go of it (garbage collection then terminates it).
            let mut under_way = lock(&self.common.shared.launches_under_way);
            under_way.retain(|uid| deleting.contains_key(uid.as_str()));
            lock(&self.launched)
                .retain(|uid, (_, at)| under_way.contains(uid) || (at.elapsed() < LAUNCH_CACHE_TTL && live(uid)));
        }
        lock(&self.said).retain(|uid, _| live(uid));
        lock(&self.written).retain(|uid, (_, at)| at.elapsed() < AWAIT_OWN_WRITE && live(uid));
        // A nomination is kept while its NodeClaim may still fail to launch: not once it has
        // launched, and past its NodeClaim in the view only while the view may not show a
        // NodeClaim just created yet.
        let unlaunched: HashSet<&str> = m
            .nodeclaims
            .iter()
            .filter(|nc| nc.status.as_ref().is_none_or(|s| s.provider_id.is_empty()))
            .map(NodeClaim::name)
            .collect();
        lock(&self.common.shared.nominations)
            .retain(|name, (_, at)| unlaunched.contains(name.as_str()) || at.elapsed() < AWAIT_OWN_WRITE);
    }

    fn reconcile<'a>(
        &'a self,
        nc: &NodeClaim,
        loaded: &Loaded,
    ) -> impl Future<Output = Result<Next, Failed>> + Send + use<'a, P> {
        let m = loaded.manifests();
        // A dry run makes no machine boot either. Once, on a copy of the view.
        let resume = (!self.resumed.swap(true, Ordering::AcqRel) && !self.common.act.dry_run).then(|| Manifests {
            nodeclaims: m.nodeclaims.clone(),
            nodes: m.nodes.clone(),
            ..Manifests::default()
        });
        let seen = Seen {
            nodeclaim: nc.clone(),
            node: lifecycle::node_for(nc, &m.nodes).cloned(),
            nodeclass: m.nodeclass_of(nc).cloned(),
            nodepool: super::nodepool::owning_nodepool(m, nc).cloned(),
            nodes: match (nc.metadata.deletion_timestamp.is_some(), provider_id(nc)) {
                (false, _) | (true, "") => Vec::new(),
                (true, id) => m
                    .nodes
                    .iter()
                    .filter(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(id))
                    .map(|n| (n.metadata.name.clone().unwrap_or_default(), n.metadata.deletion_timestamp.is_some()))
                    .collect(),
            },
        };
        async move {
            if let Some(view) = resume {
                self.common.cloud.resume(&view).await;
            }
            self.reconcile_seen(&seen).await
        }
    }
}

/// What a reconcile reads of the view: taken before its calls, which hold no view
/// ([`ObjectReconciler::reconcile`]).
struct Seen {
    nodeclaim: NodeClaim,
    /// Its Node by providerID ([`lifecycle::node_for`]).
    node: Result<Node, NotRegistered>,
    /// The EC2NodeClass it names.
    nodeclass: Option<EC2NodeClass>,
    /// The NodePool that owns it (its registration outcomes are that NodePool's).
    nodepool: Option<NodePool>,
    /// While it is being deleted, the Nodes of its providerID: their names, and whether each is
    /// being deleted.
    nodes: Vec<(String, bool)>,
}

impl<P: CloudProvider> Lifecycle<P> {
    /// upstream `Reconcile`, on what the view showed.
    async fn reconcile_seen(&self, seen: &Seen) -> Result<Next, Failed> {
        let nc = &seen.nodeclaim;
        let uid = nc.metadata.uid.as_deref().unwrap_or_default();
        if nc.metadata.deletion_timestamp.is_some() {
            // Finalized once an instance launched for it is written onto it.
            let launched = nc.status.as_ref().is_some_and(|s| !s.provider_id.is_empty());
            let unwritten = self.common.launch_under_way(uid) && !launched;
            let cached = lock(&self.launched).get(uid).map(|(instance, _)| instance.clone());
            return match cached.filter(|_| unwritten) {
                Some(instance) => self.write_launched(nc, &instance).await,
                None => self.finalize(seen).await,
            };
        }
        if let Some((_, at)) = lock(&self.written)
            .get(uid)
            .filter(|(versions, at)| versions.contains(&nc.metadata.resource_version) && at.elapsed() < AWAIT_OWN_WRITE)
        {
            // The view does not show this controller's last write yet.
            return Ok(Next::After(AWAIT_OWN_WRITE.saturating_sub(at.elapsed()).max(Duration::from_millis(100))));
        }
        let name = nc.name();
        if !has_finalizer(&nc.metadata.finalizers) {
            let mut finalizers = nc.metadata.finalizers.clone().unwrap_or_default();
            finalizers.push(labels::TERMINATION_FINALIZER.into());
            let rv = &nc.metadata.resource_version;
            let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": rv}});
            if self.common.act.patch_nodeclaim(name, patch).await {
                self.wrote(nc, None);
            } else if !self.common.act.dry_run {
                return Err(Failed(anyhow!("NodeClaim {name}'s finalizer was not written")));
            }
            return Ok(Next::Change);
        }
        let now = crate::clock::now_seconds();
        match phase(nc) {
            Phase::Launching => match self.liveness(seen, now).await {
                Alive::TimedOut => Ok(Next::Change),
                Alive::NotDeleted => Err(Failed(anyhow!("NodeClaim {name}, timed out, was not deleted"))),
                Alive::NotJudged => {
                    Err(Failed(anyhow!("NodeClaim {name} timed out; its NodePool's health was not written")))
                }
                Alive::CheckAfter(check) => Ok(sooner(self.launch(nc, seen.nodeclass.as_ref()).await?, check)),
            },
            Phase::Launched => match &seen.node {
                // Liveness's next look too: a registration that met a Node gone in a view never
                // fed (so no change of it wakes the NodeClaim) still times out.
                Ok(node) => match self.register(seen.nodepool.as_ref(), nc, node).await {
                    Ok(next) => Ok(sooner(next, liveness_check(nc, now))),
                    // upstream runs liveness after registration whatever became of it: a Node
                    // that never takes its registration times out as one that never joins.
                    Err(failed) => match self.liveness(seen, now).await {
                        Alive::TimedOut => Ok(Next::Change),
                        Alive::NotDeleted | Alive::NotJudged | Alive::CheckAfter(_) => Err(failed),
                    },
                },
                Err(not_registered) => {
                    if let NotRegistered::MultipleNodesFound { provider_id, count } = not_registered {
                        let note =
                            format!("{count} Nodes have providerID {provider_id}; the NodeClaim cannot register");
                        let on = nodeclaim_ref(nc);
                        self.common.act.event(&on, true, "MultipleNodesFound", note, "Register");
                    }
                    match self.liveness(seen, now).await {
                        Alive::TimedOut => Ok(Next::Change),
                        Alive::NotDeleted => Err(Failed(anyhow!("NodeClaim {name}, timed out, was not deleted"))),
                        Alive::NotJudged => {
                            Err(Failed(anyhow!("NodeClaim {name} timed out; its NodePool's health was not written")))
                        }
                        Alive::CheckAfter(check) => Ok(sooner(Next::Change, check)),
                    }
                }
            },
            Phase::Registered => match &seen.node {
                Ok(node) => self.initialize(nc, node).await,
                Err(_) => Ok(Next::Change),
            },
            Phase::Initialized | Phase::Terminating => Ok(Next::Change),
        }
    }
}

impl<P: CloudProvider> Lifecycle<P> {
    /// upstream `finalize`: a deleting NodeClaim's Nodes are deleted (node termination drains
    /// each and terminates the instance), and once none is left its instance is deleted until the
    /// cloud says it is gone (looked at again every 5 s meanwhile), then the finalizer comes off.
    async fn finalize(&self, seen: &Seen) -> Result<Next, Failed> {
        let (nc, act) = (&seen.nodeclaim, &self.common.act);
        if !has_finalizer(&nc.metadata.finalizers) {
            return Ok(Next::Change);
        }
        let name = nc.name();
        // upstream deletes Nodes only once the NodeClaim registered (a Node deleted without the
        // finalizer registration adds can leak its lease); one that never registered is left to
        // garbage collection with its instance.
        if !seen.nodes.is_empty() && lifecycle::finalize_deletes_nodes(nc) {
            for (node, _) in seen.nodes.iter().filter(|(_, deleting)| !deleting) {
                act.decided("DeleteNode", &json!({"nodeclaim": name, "node": node}));
                if !act.delete_node(node).await && !act.dry_run {
                    return Err(Failed(anyhow!("NodeClaim {name}'s Node {node} was not deleted")));
                }
            }
            return Ok(Next::Change); // each Node's termination drains it; the NodeClaim waits for them to go
        }
        let id = provider_id(nc);
        if !id.is_empty() {
            if act.dry_run || !act.leading() {
                return Ok(Next::Change); // every NodeClaim is reconciled again once this replica leads
            }
            let started = Instant::now();
            let deletion = self.common.cloud.delete(nc).await;
            let error = deletion.as_ref().err().map(|_| "");
            act.metrics.cloud_call(Self::NAME, "Delete", self.common.cloud.name(), started, error);
            let deletion = deletion.map_err(|e| Failed(e.context(format!("deleting NodeClaim {name}'s instance"))))?;
            let now = crate::clock::now_seconds();
            let wrote = self.common.termination_conditions(nc, Stage::InstanceTerminating(None), now).await;
            if deletion == Deletion::Terminating {
                return Ok(Next::After(Duration::from_secs(INSTANCE_TERMINATION_RECHECK_SECONDS as u64)));
            }
            if wrote {
                // The finalizer comes off on the view that shows the condition (a patch on this
                // one's resourceVersion would conflict); the write brings the NodeClaim back.
                return Ok(Next::Change);
            }
        }
        act.decided("Terminated", &json!({"nodeclaim": name, "providerID": id}));
        let finalizers = without_finalizer(&nc.metadata.finalizers);
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": nc.metadata.resource_version}});
        if act.patch_nodeclaim(name, patch).await {
            act.metrics.nodeclaim_terminated(nc);
        } else if !act.dry_run {
            // A conflict brings the NodeClaim back with its change; a timeout or an error would not.
            return Err(Failed(anyhow!("NodeClaim {name}'s finalizer was not removed")));
        }
        Ok(Next::Change)
    }
}

/// The providerIDs of the Nodes that changed, came or went between two views: upstream's
/// `NodeEventHandler`, which maps a Node event to the NodeClaim of its providerID.
pub(super) fn changed_nodes<'m>(before: &'m Manifests, after: &'m Manifests) -> HashSet<&'m str> {
    let old_nodes: HashMap<&str, &Option<String>> =
        before.nodes.iter().filter_map(|n| Some((n.metadata.name.as_deref()?, &n.metadata.resource_version))).collect();
    let mut provider_ids: HashSet<&str> = after
        .nodes
        .iter()
        .filter(|n| {
            old_nodes.get(n.metadata.name.as_deref().unwrap_or_default()) != Some(&&n.metadata.resource_version)
        })
        .filter_map(|n| n.spec.as_ref()?.provider_id.as_deref())
        .collect();
    let new_nodes: HashSet<&str> = after.nodes.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
    provider_ids.extend(
        before
            .nodes
            .iter()
            .filter(|n| !new_nodes.contains(n.metadata.name.as_deref().unwrap_or_default()))
            .filter_map(|n| n.spec.as_ref()?.provider_id.as_deref()),
    );
    provider_ids
}

/// What liveness says of a NodeClaim not registered yet.
enum Alive {
    /// Timed out: deleted.
    TimedOut,
    /// Timed out, and the delete failed: tried again after the backoff.
    NotDeleted,
    /// Timed out, and its NodePool's `NodeRegistrationHealthy` was not written: tried again
    /// after the backoff, before the NodeClaim is deleted.
    NotJudged,
    /// Look again this much later (upstream's requeue), if ever.
    CheckAfter(Option<Duration>),
}

/// When liveness looks at `nc` next, if it will (core's timeouts; a timeout already past is
/// looked at in a second).
fn liveness_check(nc: &NodeClaim, now: i64) -> Option<Duration> {
    match lifecycle::liveness(nc, now) {
        Liveness::Done => None,
        Liveness::CheckAfter(seconds) => Some(Duration::from_secs(seconds.max(1) as u64)),
        Liveness::TimedOut(_) => Some(Duration::from_secs(1)),
    }
}

/// The sooner of what a step asks for and liveness's next look.
fn sooner(next: Next, check: Option<Duration>) -> Next {
    match (next, check) {
        (Next::After(a), Some(b)) => Next::After(a.min(b)),
        (Next::Change, Some(b)) => Next::After(b),
        (next, None) => next,
    }
}

impl<P: CloudProvider> Lifecycle<P> {
    /// upstream `liveness.go`.
    async fn liveness(&self, seen: &Seen, now: i64) -> Alive {
        let nc = &seen.nodeclaim;
        let timeout = match lifecycle::liveness(nc, now) {
            Liveness::Done => return Alive::CheckAfter(None),
            Liveness::CheckAfter(_) => return Alive::CheckAfter(liveness_check(nc, now)),
            Liveness::TimedOut(timeout) => timeout,
        };
        let note = format!(
            "not {} after {} s: deleting the NodeClaim; its pods are provisioned again",
            timeout.condition(),
            timeout.after_seconds()
        );
        let act = &self.common.act;
        // upstream judges the NodePool first, then deletes; a write of its condition that failed
        // (or met a newer NodePool) is tried again before the NodeClaim goes, as upstream requeues.
        let judged = self.common.registration_outcome(seen.nodepool.as_ref(), nc, false).await;
        if judged != Write::Done && !act.dry_run {
            return Alive::NotJudged;
        }
        act.decided("LivenessTimeout", &json!({"nodeclaim": nc.name(), "timeout": timeout}));
        act.event(&nodeclaim_ref(nc), true, "LivenessTimeout", note, "Delete");
        if !act.delete_nodeclaim(nc.name()).await {
            return if act.dry_run { Alive::TimedOut } else { Alive::NotDeleted };
        }
        let reason = match timeout {
            lifecycle::LivenessTimeout::Launch => "LaunchTimeout",
            lifecycle::LivenessTimeout::Registration => "RegistrationTimeout",
        };
        act.metrics.nodeclaim_disrupted(nc, reason);
        // A reconcile on a view from before the delete must not judge and delete it again.
        self.wrote(nc, None);
        Alive::TimedOut
    }

    /// upstream `launch.go`: the cloud provider's instance (cached by UID), written onto the
    /// NodeClaim. No launch possible → the NodeClaim is deleted (a new round provisions its pods);
    /// a launch that failed otherwise fails the reconcile (tried again after the backoff).
    async fn launch(&self, nc: &NodeClaim, nodeclass: Option<&EC2NodeClass>) -> Result<Next, Failed> {
        let name = nc.name();
        let uid = nc.metadata.uid.clone().unwrap_or_default();
        let cached = lock(&self.launched).get(&uid).map(|(instance, _)| instance.clone());
        let instance = match cached {
            Some(instance) => instance,
            None => {
                let Some(catalogue) = self.common.settled_catalogue() else {
                    return Ok(Next::After(CATALOGUE_WAIT)); // the region's types and prices first
                };
                // The class the NodeClaim names, not its NodePool's now (an edit since must not
                // change what an existing NodeClaim launches).
                let Some(class) = nodeclass else {
                    debug!(nodeclaim = %name, nodeclass = %nc.spec.node_class_ref.name,
                        "the NodeClaim's EC2NodeClass is not there (yet); not launched");
                    return Ok(Next::Change);
                };
                let subnets = class.status.as_ref().map_or(&[][..], |s| s.subnets.as_slice());
                let types = match catalogue.instance_types_in_subnets(&self.common.region, &class.spec, subnets) {
                    Ok(types) => types,
                    Err(e) => {
                        warn!(nodeclaim = %name, error = %carpentry_core::error_chain(&e), "no instance types; not launched");
                        return Ok(Next::Change);
                    }
                };
                let act = &self.common.act;
                if act.dry_run {
                    act.decided("WouldLaunch", &json!({"nodeclaim": name}));
                    return Ok(Next::Change);
                }
                if !act.leading() {
                    return Ok(Next::Change); // a launch is this replica's only while it leads
                }
                // Not finalized until the instance is written onto the NodeClaim (or none
                // launched), so that it is terminated with it.
                self.common.launch_under_way_set(&uid, true);
                let started = Instant::now();
                let result = self.common.cloud.create(nc, class, &types).await;
                let error = result.as_ref().err().map(CreateError::upstream_type);
                let cloud_name = self.common.cloud.name();
                act.metrics.cloud_call("nodeclaim.lifecycle", "Create", cloud_name, started, error);
                match result {
                    Ok(instance) => {
                        lock(&self.said).remove(&uid);
                        self.common.nominated(name, true);
                        lock(&self.launched).insert(uid.clone(), (instance.clone(), Instant::now()));
                        return self.write_launched(nc, &instance).await;
                    }
                    Err(e) if e.deletes_nodeclaim() => {
                        self.common.launch_under_way_set(&uid, false);
                        let why = carpentry_core::error_chain(&e);
                        act.decided("LaunchFailed", &json!({"nodeclaim": name, "why": why}));
                        let note = format!("{why}: deleting the NodeClaim; its pods are provisioned again");
                        act.event(&nodeclaim_ref(nc), true, "InsufficientCapacityError", note, "Launch");
                        for pod in self.common.nominated(name, true) {
                            let note = format!(
                                "nodeclaim/{name}, which this pod should schedule on, cannot launch: {why}; \
                                 the pod is provisioned again"
                            );
                            act.event(&pod, true, "InsufficientCapacityError", note, "Launch");
                        }
                        if !act.delete_nodeclaim(name).await {
                            return Err(Failed(anyhow!("NodeClaim {name}, which cannot launch, was not deleted")));
                        }
                        act.metrics.nodeclaim_disrupted(nc, "InsufficientCapacity");
                        self.wrote(nc, None);
                        return Ok(Next::Change);
                    }
                    Err(e) => {
                        self.common.launch_under_way_set(&uid, false);
                        return Err(self.launch_failed(nc, &e).await);
                    }
                }
            }
        };
        self.write_launched(nc, &instance).await
    }

    /// A launch that failed for a reason other than capacity: said on the NodeClaim's `Launched`
    /// condition (upstream: Unknown, with the error's reason), once per distinct error in an
    /// event on it and its nominated pods; tried again after the backoff.
    async fn launch_failed(&self, nc: &NodeClaim, e: &CreateError) -> Failed {
        let name = nc.name();
        let uid = nc.metadata.uid.clone().unwrap_or_default();
        let why = match e {
            CreateError::Cloud(cloud) => format!("{cloud:#}"),
            other => carpentry_core::error_chain(other),
        };
        let (reason, message) = e.launched_condition(&why);
        let act = &self.common.act;
        if let Some(status) = lifecycle::launch_failed(nc, reason, &message, &crate::clock::now_rfc3339()) {
            act.patch_nodeclaim_status(nc, json!(status)).await;
        }
        let new = lock(&self.said).insert(uid, why.clone()).as_ref() != Some(&why);
        if new {
            act.decided("LaunchFailed", &json!({"nodeclaim": name, "why": why}));
            let note = format!("{why}; trying again after a backoff");
            act.event(&nodeclaim_ref(nc), true, "LaunchFailed", note, "Launch");
            for pod in self.common.nominated(name, false) {
                let note = format!(
                    "nodeclaim/{name}, which this pod should schedule on, has not launched: {why}; \
                     trying again after a backoff"
                );
                act.event(&pod, true, "LaunchFailed", note, "Launch");
            }
        }
        Failed(anyhow!("NodeClaim {name}'s launch failed: {why}"))
    }

    /// The launched instance written onto the NodeClaim.
    async fn write_launched(&self, nc: &NodeClaim, instance: &Instance) -> Result<Next, Failed> {
        let name = nc.name();
        let at = crate::clock::now_rfc3339();
        let launched = lifecycle::launched(nc, instance, &at);
        self.common.act.decided(
            "Launched",
            &json!({"nodeclaim": name, "providerID": instance.provider_id,
                "instanceType": instance.labels.get(labels::INSTANCE_TYPE),
                "zone": instance.labels.get(labels::TOPOLOGY_ZONE),
                "capacityType": instance.labels.get(labels::CAPACITY_TYPE)}),
        );
        // The labels first, then the providerID that marks the launch done: a launched NodeClaim
        // is never seen without its instance type and zone (drift would call that
        // RequirementsDrifted). A failure in between is covered by the launch cache.
        let metadata = json!({"labels": launched.metadata.labels, "annotations": launched.metadata.annotations});
        match self.common.act.patch_nodeclaim_then_status(nc, metadata, json!(launched.status)).await {
            // The view may show the metadata write before the status: not a newer view either.
            Some(between) => {
                self.common.launch_under_way_set(nc.metadata.uid.as_deref().unwrap_or_default(), false);
                self.wrote(nc, Some(between));
                Ok(Next::Change)
            }
            None if self.common.act.dry_run => Ok(Next::Change),
            None => Err(Failed(anyhow!("NodeClaim {name}'s launch was not written"))),
        }
    }

    /// upstream `registration.go`.
    async fn register(&self, nodepool: Option<&NodePool>, nc: &NodeClaim, node: &Node) -> Result<Next, Failed> {
        let act = &self.common.act;
        let at = crate::clock::now_rfc3339();
        let r = lifecycle::register(nc, node, &at);
        let node_name = r.node.metadata.name.clone().unwrap_or_default();
        if r.unregistered_taint_missing {
            let note = format!("Node {node_name} joined without the karpenter.sh/unregistered:NoExecute taint");
            act.event(&node_ref(node), true, "UnregisteredTaintMissing", note, "Register");
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
        if let Some(not) = self.not_written(act.write_node(&node_name, patch).await, "Node", &node_name, "registration")
        {
            return not;
        }
        let status = r.nodeclaim.status.as_ref();
        act.decided("Registered", &json!({"nodeclaim": nc.name(), "node": node_name}));
        let patch = json!({"nodeName": node_name, "conditions": status.map(|s| &s.conditions)});
        let written = act.write_nodeclaim_status(nc, patch).await;
        if let Some(not) = self.not_written(written, "NodeClaim", nc.name(), "registration") {
            return not;
        }
        self.wrote(nc, None);
        act.metrics.node_created(nc);
        // upstream: a NodePool write that fails leaves the outcome unrecorded, and the NodeClaim,
        // registered, is not judged again.
        let _ = self.common.registration_outcome(nodepool, nc, true).await;
        Ok(Next::Change)
    }

    /// upstream `initialization.go`.
    async fn initialize(&self, nc: &NodeClaim, node: &Node) -> Result<Next, Failed> {
        let act = &self.common.act;
        let at = crate::clock::now_rfc3339();
        let (initialized, node_after) = match lifecycle::initialize(nc, node, &at) {
            Ok(done) => done,
            Err(why) => {
                // Its Node's next change brings the NodeClaim back.
                debug!(nodeclaim = %nc.name(), reason = why.reason(), "not initialized yet: {why}");
                return Ok(Next::Change);
            }
        };
        let node_name = node.metadata.name.clone().unwrap_or_default();
        // The labels as core leaves them (`karpenter.sh/initialized=true` added).
        let patch = json!({"metadata": {"labels": node_after.metadata.labels}});
        let written = act.write_node(&node_name, patch).await;
        if let Some(not) = self.not_written(written, "Node", &node_name, "initialized label") {
            return not;
        }
        act.decided("Initialized", &json!({"nodeclaim": nc.name(), "node": node_name}));
        let conditions = initialized.status.as_ref().map(|s| &s.conditions);
        let written = act.write_nodeclaim_status(nc, json!({"conditions": conditions})).await;
        if let Some(not) = self.not_written(written, "NodeClaim", nc.name(), "initialization") {
            return not;
        }
        self.wrote(nc, None);
        Ok(Next::Change)
    }

    /// What a step's reconcile returns when its write `written` was not made, if it was not:
    /// in a dry run, the step ends there as if written; one the view was too old for (a
    /// conflict: the object changed since) ends the reconcile
    /// quietly, as the newer view brings the NodeClaim back (its own change, or its Node's) and
    /// the step is decided again on it — upstream requeues a conflict, where a failure here
    /// would wait out the backoff; a refused write fails the reconcile.
    fn not_written(&self, written: Write, kind: &str, name: &str, step: &str) -> Option<Result<Next, Failed>> {
        match written {
            // A dry run ends the reconcile as if written: the view will never show it.
            Write::Done if self.common.act.dry_run => Some(Ok(Next::Change)),
            Write::Done => None,
            Write::Stale | Write::Gone => {
                debug!(object = %format!("{kind} {name}"), step, ?written, "not written: decided again on the next view");
                Some(Ok(Next::Change))
            }
            Write::Failed => Some(Err(Failed(anyhow!("{kind} {name}'s {step} was not written")))),
        }
    }

    /// A step was written onto `nc`, decided on its version in the view (and `between`, the
    /// version between a step's two writes).
    fn wrote(&self, nc: &NodeClaim, between: Option<Option<String>>) {
        let uid = nc.metadata.uid.clone().unwrap_or_default();
        let mut versions = vec![nc.metadata.resource_version.clone()];
        versions.extend(between);
        lock(&self.written).insert(uid, (versions, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use carpentry_core::api::EC2NodeClass;
    use serde_json::json;

    use super::*;
    use crate::cloud::kwok::Kwok;

    fn nodeclaim(name: &str, class: &str, provider_id: &str) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class},
                "requirements": []},
            "status": {"providerID": provider_id},
        }))
        .unwrap()
    }

    fn node(name: &str, provider_id: &str, version: &str) -> Node {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "resourceVersion": version}, "spec": {"providerID": provider_id}}))
        .unwrap()
    }

    fn class(name: &str, version: &str) -> EC2NodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": version},
            "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]},
        }))
        .unwrap()
    }

    fn related(before: &Manifests, after: &Manifests) -> Vec<String> {
        let mut names = Lifecycle::<Kwok>::related(&Loaded::of(before.clone()), &Loaded::of(after.clone()));
        names.sort();
        names
    }

    #[test]
    fn a_nodeclaim_is_reconciled_when_its_node_or_before_it_launches_its_class_changes() {
        let nodeclaims = vec![
            nodeclaim("launching-a", "a", ""),
            nodeclaim("launching-b", "b", ""),
            nodeclaim("launched", "a", "kwok://n1"),
            nodeclaim("other", "a", "kwok://n2"),
        ];
        let before = Manifests {
            nodeclaims: nodeclaims.clone(),
            nodes: vec![node("n2", "kwok://n2", "1"), node("n3", "kwok://n3", "1")],
            nodeclasses: vec![class("a", "1"), class("b", "1")],
            ..Manifests::default()
        };
        assert_eq!(related(&before, &before), Vec::<String>::new());
        // Its Node joined (by providerID), another's changed, a third's went.
        let after =
            Manifests { nodes: vec![node("n1", "kwok://n1", "1"), node("n2", "kwok://n2", "2")], ..before.clone() };
        assert_eq!(related(&before, &after), ["launched", "other"]);
        let gone = Manifests { nodes: vec![node("n2", "kwok://n2", "1")], ..before.clone() };
        assert_eq!(related(&before, &gone), Vec::<String>::new()); // n3 was nobody's
        let gone = Manifests { nodes: vec![node("n3", "kwok://n3", "1")], ..before.clone() };
        assert_eq!(related(&before, &gone), ["other"]);
        // A class's change (its status: subnets, readiness) wakes only the NodeClaims that have
        // not launched with it.
        let after = Manifests { nodeclasses: vec![class("a", "2"), class("b", "1")], ..before.clone() };
        assert_eq!(related(&before, &after), ["launching-a"]);
    }

    #[tokio::test]
    async fn a_timed_out_nodeclaim_is_deleted_only_once_its_nodepools_health_is_written() {
        let api = crate::testing::FakeApi::default();
        let lifecycle = Lifecycle::new(Common::on_fake_api(&api, false));
        let nodepool: NodePool = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default", "uid": "uid-np", "resourceVersion": "7", "generation": 1},
            "spec": {"template": {"spec": {"requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "a"}}}},
        }))
        .unwrap();
        // Launched, never registered: past the registration timeout.
        let mut nc = nodeclaim("a", "a", "kwok://a");
        nc.metadata.owner_references = Some(vec![serde_json::from_value(json!({"apiVersion": "karpenter.sh/v1",
            "kind": "NodePool", "name": "default", "uid": "uid-np"}))
        .unwrap()]);
        nc.status.as_mut().unwrap().conditions = vec![serde_json::from_value(json!({"type": "Launched",
            "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": "2026-12-07T00:00:00Z"}))
        .unwrap()];
        let seen = Seen {
            nodeclaim: nc,
            node: Err(NotRegistered::NodeNotFound { provider_id: "kwok://a".into() }),
            nodeclass: None,
            nodepool: Some(nodepool),
            nodes: Vec::new(),
        };
        let now = carpentry_core::api::time::parse_time("2026-12-07T01:00:00Z").unwrap();
        let deletes = || api.writes().iter().filter(|w| w.method == "DELETE").count();
        // One failure before: this one turns the NodePool's NodeRegistrationHealthy False.
        lifecycle.common.shared.registration_health.lock().unwrap().entry("uid-np".into()).or_default().record(false);
        // Its NodePool changed since the view: judged again later, not deleted yet.
        api.object("/apis/karpenter.sh/v1/nodepools/default", 8);
        assert!(matches!(lifecycle.liveness(&seen, now).await, Alive::NotJudged));
        assert_eq!(deletes(), 0);
        // Written: deleted.
        api.object("/apis/karpenter.sh/v1/nodepools/default", 7);
        assert!(matches!(lifecycle.liveness(&seen, now).await, Alive::TimedOut));
        assert_eq!(deletes(), 1);
    }

    #[tokio::test]
    async fn a_node_whose_registration_keeps_failing_times_out_as_one_that_never_joins() {
        let api = crate::testing::FakeApi::default();
        let lifecycle = Lifecycle::new(Common::on_fake_api(&api, false));
        let mut nc = nodeclaim("a", "a", "kwok://a");
        nc.metadata.finalizers = Some(vec![labels::TERMINATION_FINALIZER.into()]);
        let launched = |at: &str| -> carpentry_core::api::Condition {
            serde_json::from_value(json!({"type": "Launched", "status": "True", "reason": "Launched",
                "message": "", "lastTransitionTime": at}))
            .unwrap()
        };
        let seen = |nc: &NodeClaim| Seen {
            nodeclaim: nc.clone(),
            node: Ok(node("a", "kwok://a", "1")),
            nodeclass: None,
            nodepool: None,
            nodes: Vec::new(),
        };
        // The Node's registration patch is refused every time.
        api.fail("/api/v1/nodes/a", 500);
        let deletes = || api.writes().iter().filter(|w| w.method == "DELETE").count();
        // Launched a moment ago: the failure is the reconcile's, tried again after the backoff.
        nc.status.as_mut().unwrap().conditions = vec![launched(&crate::clock::now_rfc3339())];
        assert!(lifecycle.reconcile_seen(&seen(&nc)).await.is_err());
        assert_eq!(deletes(), 0);
        // Launched long ago: past the registration timeout, deleted as liveness deletes one.
        nc.status.as_mut().unwrap().conditions = vec![launched("2026-01-01T00:00:00Z")];
        assert_eq!(lifecycle.reconcile_seen(&seen(&nc)).await.unwrap(), Next::Change);
        assert_eq!(deletes(), 1, "{:#?}", api.writes());
    }

    #[tokio::test]
    async fn a_registration_that_meets_a_newer_nodeclaim_is_decided_again_on_it_without_a_backoff() {
        let api = crate::testing::FakeApi::default();
        let lifecycle = Lifecycle::new(Common::on_fake_api(&api, false));
        let nc = nodeclaim("a", "a", "kwok://a");
        let joined = node("a", "kwok://a", "1");
        // Written meanwhile by another controller: the view's "1" is out of date.
        api.object("/apis/karpenter.sh/v1/nodeclaims/a", 2);
        let next = lifecycle.register(None, &nc, &joined).await;
        assert_eq!(next.unwrap(), Next::Change, "a conflict is not a failure");
        let statuses: Vec<u16> = api.writes().iter().map(|w| w.status).collect();
        assert_eq!(statuses, [200, 409], "{:#?}", api.writes());
        // A refused write is.
        api.fail("/apis/karpenter.sh/v1/nodeclaims/a/status", 500);
        assert!(lifecycle.register(None, &nc, &joined).await.is_err());
    }
}
