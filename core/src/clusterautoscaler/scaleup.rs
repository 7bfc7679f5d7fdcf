//! One scale-up decision: which group grows, by how many nodes, and what each pending pod is told
//! (upstream `core/scaleup/orchestrator/orchestrator.go` `ScaleUp` at cluster-autoscaler-1.36.1,
//! with `core/static_autoscaler.go`'s max-nodes-total gate before it, the cluster-wide limits of
//! `resourcequotas/tracker.go`, and the pod events of
//! `processors/status/eventing_scale_up_processor.go`).
//!
//! 1. With `--max-nodes-total` set and that many ready nodes, nothing is tried: every pod is told
//!    "max total nodes in cluster reached".
//! 2. The pods form equivalence groups ([`super::equivalence`]).
//! 3. Groups not safe to scale are skipped with why: unhealthy or without a template ("not ready
//!    for scale-up"), backed off ("in backoff after failed scale-up"), at their max ("max node
//!    group size reached"), or one more node would pass `--cores-total` / `--memory-total`
//!    ("exceeded quota: ...").
//! 4. Each equivalence group's first pod is checked against each valid group's template
//!    ([`super::predicates`]); a failure is that group's rejection of those pods.
//! 5. The estimator ([`super::estimator`]) sizes each valid group for the pods that fit it, within
//!    the smallest of `--max-nodes-per-scaleup`, the group's room (max − target) and the cluster's
//!    (max-nodes-total − ready nodes); the expander chain ([`super::expander`]) picks one option.
//! 6. The count is capped by max-nodes-total and by the cluster-wide limits, and by the group's
//!    max; the group's target grows by it.
//!
//! Pods some valid group fits but the chosen one does not are told nothing: the next loop, which
//! follows at once, sees them again. Pods no group fits are told, when nothing was scaled up,
//! `NotTriggerScaleUp` with each reason and how many groups gave it; upstream joins them in map
//! order, carpentry in the reasons' order (docs/divergences.md). Groups are taken in name order
//! (upstream: the provider's map order).
//! 7. With `--balance-similar-node-groups`, the chosen group's similar groups
//!    ([`super::balancing`]) share the nodes, each part capped by the cluster-wide limits.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::api::clusterautoscaler::ResolvedOptions;
use crate::quantity::Quantity;
use crate::resources::ResourceList;

pub use super::balancing::Increase;
use super::balancing::{balance, similar, Member};
use super::estimator::estimate;
use super::expander::{choose, Expansion, ScaleUpOption};
use super::predicates::{self, PendingPod, SchedulingNode, Unfit};

/// upstream `ResourceLimiter.ID()`: the quota `--cores-total` and `--memory-total` make.
pub const CLUSTER_WIDE_QUOTA: &str = "cluster-wide";

/// Whether a group may be scaled up now (upstream `NodeGroupScaleUpSafety`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Safety {
    Safe,
    /// Too many of its nodes are unready.
    Unhealthy,
    /// A scale-up failed or timed out, and the backoff has not passed.
    BackedOff,
}

/// A node group as this loop sees it.
#[derive(Debug, Clone)]
pub struct GroupState<'a> {
    pub name: &'a str,
    /// The Auto Scaling group's desired capacity.
    pub target: i64,
    pub max: i64,
    /// `None` when it has no template (its instance type is unknown).
    pub template: Option<&'a SchedulingNode>,
    pub safety: Safety,
}

/// The ready nodes, which the cluster-wide limits count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadyNodes {
    pub count: usize,
    /// Summed capacity: whole cores (each node's rounded up) and bytes.
    pub cores: i64,
    pub memory: i64,
}

impl ReadyNodes {
    /// upstream `GetNodeCoresAndMemory`, summed over `nodes` (the caller passes the ready ones).
    pub fn of<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> ReadyNodes {
        let mut ready = ReadyNodes::default();
        for node in nodes {
            let capacity = node.status.as_ref().and_then(|s| s.capacity.as_ref());
            let read = |name: &str| {
                capacity
                    .and_then(|c| c.get(name))
                    .and_then(|q| Quantity::parse(&q.0).ok())
                    .map_or(0, |q| i64::try_from(q.value()).unwrap_or(i64::MAX))
            };
            ready.count += 1;
            ready.cores = ready.cores.saturating_add(read("cpu"));
            ready.memory = ready.memory.saturating_add(read("memory"));
        }
        ready
    }
}

/// Why a group was not considered (upstream `skippedreasons.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    NotReady,
    Backoff,
    MaxSizeReached,
    /// One more node passes the cluster-wide limit on these resources (`cpu`, `memory`).
    Quota {
        resources: Vec<String>,
    },
}

impl Skip {
    pub fn reason(&self) -> String {
        match self {
            Skip::NotReady => "not ready for scale-up".into(),
            Skip::Backoff => "in backoff after failed scale-up".into(),
            Skip::MaxSizeReached => "max node group size reached".into(),
            Skip::Quota { resources } => {
                format!("exceeded quota: {CLUSTER_WIDE_QUOTA:?}, resources: {}", resources.join(", "))
            }
        }
    }
}

/// What came of the scale-up (upstream `ScaleUpResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleUpResult {
    /// No pod to help.
    NotNeeded,
    Successful,
    /// No group could take any of the pods.
    NoOptionsAvailable,
    /// `--max-nodes-total` ready nodes already.
    LimitedByMaxNodesTotal,
}

/// A pod no group would take, with each group's reason (upstream `NoScaleUpInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoScaleUp {
    /// `namespace/name`.
    pub pod: String,
    /// Valid groups whose template the pod does not fit.
    pub rejected: BTreeMap<String, Unfit>,
    /// Groups not considered at all.
    pub skipped: BTreeMap<String, Skip>,
}

impl NoScaleUp {
    /// upstream `ReasonsMessage`: each reason with how many groups gave it.
    pub fn reasons(&self, result: ScaleUpResult) -> String {
        if result == ScaleUpResult::LimitedByMaxNodesTotal {
            return "max total nodes in cluster reached".into();
        }
        let mut counted: BTreeMap<String, usize> = BTreeMap::new();
        let rejected = self.rejected.values().flat_map(Unfit::reasons);
        for reason in rejected.chain(self.skipped.values().map(Skip::reason)) {
            *counted.entry(reason).or_default() += 1;
        }
        counted.iter().map(|(reason, n)| format!("{n} {reason}")).collect::<Vec<_>>().join(", ")
    }
}

/// A pod event the scale-up publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    pub pod: String,
    /// `TriggeredScaleUp` or `NotTriggerScaleUp` (both Normal).
    pub reason: &'static str,
    pub message: String,
}

/// The scale-up's decision, with what explains it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleUpStatus {
    pub result: ScaleUpResult,
    pub increases: Vec<Increase>,
    /// The options the expander chose among, in group order.
    pub options: Vec<ScaleUpOption>,
    pub expansion: Option<Expansion>,
    /// The pods the chosen option places (`namespace/name`).
    pub triggered: Vec<String>,
    pub remaining: Vec<NoScaleUp>,
    pub skipped: BTreeMap<String, Skip>,
    /// Pods whose requests cannot be read: left out, as the provisioning round leaves them out.
    pub unreadable: Vec<String>,
    /// `--max-nodes-total` stopped or capped it (upstream's `MaxNodesTotalReached` event).
    pub max_nodes_total_reached: bool,
}

impl ScaleUpStatus {
    fn of(result: ScaleUpResult) -> ScaleUpStatus {
        ScaleUpStatus {
            result,
            increases: Vec::new(),
            options: Vec::new(),
            expansion: None,
            triggered: Vec::new(),
            remaining: Vec::new(),
            skipped: BTreeMap::new(),
            unreadable: Vec::new(),
            max_nodes_total_reached: false,
        }
    }

    /// upstream `EventingScaleUpStatusProcessor`: `NotTriggerScaleUp` on each pod left when
    /// nothing was scaled up; `TriggeredScaleUp` on each pod the scale-up is for.
    pub fn pod_events(&self) -> Vec<PodEvent> {
        let mut events = Vec::new();
        if self.result != ScaleUpResult::Successful {
            for left in &self.remaining {
                events.push(PodEvent {
                    pod: left.pod.clone(),
                    reason: "NotTriggerScaleUp",
                    message: format!("pod didn't trigger scale-up: {}", left.reasons(self.result)),
                });
            }
        }
        if !self.increases.is_empty() {
            let infos = self.increases.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ");
            for pod in &self.triggered {
                events.push(PodEvent {
                    pod: pod.clone(),
                    reason: "TriggeredScaleUp",
                    message: format!("pod triggered scale-up: [{infos}]"),
                });
            }
        }
        events
    }
}

/// What the cluster-wide limits leave (upstream's max-quotas tracker over the ready nodes).
struct Quota {
    cores_left: i64,
    memory_left: i64,
}

impl Quota {
    fn new(ready: &ReadyNodes, options: &ResolvedOptions) -> Quota {
        Quota {
            cores_left: options.cores_total.1.saturating_sub(ready.cores).max(0),
            memory_left: options.memory_total.1.saturating_sub(ready.memory).max(0),
        }
    }

    /// How many of `n` new nodes of `node`'s shape fit, and the resources that run out (upstream
    /// `checkDelta`).
    fn check(&self, node: &SchedulingNode, n: i64) -> (i64, Vec<String>) {
        let (cores, memory) = node_cores_and_memory(&node.capacity);
        let mut allowed = n;
        let mut exceeded = Vec::new();
        for (resource, per_node, left) in [("cpu", cores, self.cores_left), ("memory", memory, self.memory_left)] {
            if per_node > 0 && left < per_node.saturating_mul(n) {
                allowed = allowed.min(left / per_node);
                exceeded.push(resource.to_string());
            }
        }
        (allowed, exceeded)
    }

    fn consume(&mut self, node: &SchedulingNode, n: i64) {
        let (cores, memory) = node_cores_and_memory(&node.capacity);
        self.cores_left = self.cores_left.saturating_sub(cores.saturating_mul(n)).max(0);
        self.memory_left = self.memory_left.saturating_sub(memory.saturating_mul(n)).max(0);
    }
}

/// upstream `GetNodeCoresAndMemory`: whole cores rounded up, and bytes.
fn node_cores_and_memory(capacity: &ResourceList) -> (i64, i64) {
    let value = |name: &str| capacity.get(name).map_or(0, |q| i64::try_from(q.value()).unwrap_or(i64::MAX));
    (value("cpu"), value("memory"))
}

/// An equivalence group read once: its pods, which groups fit its first pod.
struct PodGroup {
    pods: Vec<PendingPod>,
    fits: Vec<String>,
    rejected: BTreeMap<String, Unfit>,
}

/// The scale-up for `pending` (unschedulable pods no existing or upcoming node takes) over
/// `groups`, with `ready` the ready nodes.
pub fn scale_up(
    pending: &[&Pod],
    groups: &[GroupState],
    ready: &ReadyNodes,
    options: &ResolvedOptions,
) -> ScaleUpStatus {
    if pending.is_empty() {
        return ScaleUpStatus::of(ScaleUpResult::NotNeeded);
    }
    let mut unreadable = Vec::new();
    let mut pod_groups: Vec<PodGroup> = super::equivalence::groups(pending)
        .into_iter()
        .filter_map(|group| {
            let pods: Vec<PendingPod> = group
                .iter()
                .filter_map(|pod| {
                    let read = PendingPod::read(pod);
                    if read.is_none() {
                        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
                        unreadable.push(format!("{namespace}/{}", pod.metadata.name.as_deref().unwrap_or_default()));
                    }
                    read
                })
                .collect();
            (!pods.is_empty()).then(|| PodGroup { pods, fits: Vec::new(), rejected: BTreeMap::new() })
        })
        .collect();
    let max_total = options.max_nodes_total;
    if max_total > 0 && ready.count as i64 >= max_total {
        let mut status = ScaleUpStatus::of(ScaleUpResult::LimitedByMaxNodesTotal);
        status.max_nodes_total_reached = true;
        status.remaining = remaining(&pod_groups, &BTreeMap::new());
        status.unreadable = unreadable;
        return status;
    }

    let mut ordered: Vec<&GroupState> = groups.iter().collect();
    ordered.sort_by_key(|g| g.name);
    let mut quota = Quota::new(ready, options);
    let mut skipped = BTreeMap::new();
    let mut valid: Vec<(&GroupState, &SchedulingNode)> = Vec::new();
    for group in ordered {
        let skip = match (group.safety, group.template) {
            (Safety::Unhealthy, _) | (_, None) => Some(Skip::NotReady),
            (Safety::BackedOff, _) => Some(Skip::Backoff),
            _ if group.target >= group.max => Some(Skip::MaxSizeReached),
            (Safety::Safe, Some(template)) => match quota.check(template, 1) {
                (_, exceeded) if !exceeded.is_empty() => Some(Skip::Quota { resources: exceeded }),
                _ => {
                    valid.push((group, template));
                    None
                }
            },
        };
        if let Some(skip) = skip {
            skipped.insert(group.name.to_string(), skip);
        }
    }

    // upstream `SchedulablePodGroups`: the first pod of each equivalence group on each template.
    for (group, template) in &valid {
        for pods in &mut pod_groups {
            match predicates::check(&pods.pods[0].data, template, &template.free) {
                Ok(()) => pods.fits.push(group.name.to_string()),
                Err(unfit) => {
                    pods.rejected.insert(group.name.to_string(), unfit);
                }
            }
        }
    }

    let mut considered = Vec::new();
    let mut placed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (group, template) in &valid {
        let fitting: Vec<&[PendingPod]> =
            pod_groups.iter().filter(|g| g.fits.iter().any(|n| n == group.name)).map(|g| g.pods.as_slice()).collect();
        if fitting.is_empty() {
            continue;
        }
        // upstream's estimation limiters: the smallest positive limit wins; the group's room
        // counts its similar groups'.
        let room: i64 = similar_groups(group, template, &valid, &pod_groups, options)
            .iter()
            .chain(std::iter::once(group))
            .map(|g| g.max - g.target)
            .sum();
        let mut limit = options.max_nodes_per_scaleup.max(1);
        limit = limit.min(room);
        if max_total > 0 {
            limit = limit.min(max_total - ready.count as i64);
        }
        let estimate = estimate(template, &fitting, usize::try_from(limit.max(0)).unwrap_or(0));
        if estimate.node_count == 0 || estimate.pods.is_empty() {
            continue;
        }
        let by_key: BTreeMap<&str, &PendingPod> =
            fitting.iter().flat_map(|g| g.iter()).map(|p| (p.key.as_str(), p)).collect();
        let sum = |resource: &str| -> f64 {
            let requests = estimate.pods.iter().filter_map(|k| by_key.get(k.as_str()));
            requests.map(|p| p.data.requests.get(resource).map_or(0.0, Quantity::as_f64)).sum()
        };
        let capacity = |resource: &str| template.capacity.get(resource).map_or(0.0, Quantity::as_f64);
        considered.push(ScaleUpOption {
            group: group.name.to_string(),
            node_count: estimate.node_count,
            pod_count: estimate.pods.len(),
            pod_cpu: sum("cpu"),
            pod_memory: sum("memory"),
            node_cpu: capacity("cpu"),
            node_memory: capacity("memory"),
        });
        placed.insert(group.name.to_string(), estimate.pods);
    }

    let mut status = ScaleUpStatus::of(ScaleUpResult::NoOptionsAvailable);
    status.unreadable = unreadable;
    status.remaining = remaining(&pod_groups, &skipped);
    status.options = considered.clone();
    let Some(expansion) = choose(&options.expanders, considered) else {
        status.skipped = skipped;
        return status;
    };
    let chosen = &expansion.chosen;
    let Some(&(group, template)) = valid.iter().find(|(g, _)| g.name == chosen.group) else {
        status.skipped = skipped;
        return status;
    };
    // upstream `GetCappedNewNodeCount`: ready nodes are below the limit here (checked above).
    let mut new_nodes = chosen.node_count as i64;
    if max_total > 0 && new_nodes + ready.count as i64 > max_total {
        new_nodes = max_total - ready.count as i64;
        status.max_nodes_total_reached = true;
    }
    // upstream `applyLimits`.
    new_nodes = quota.check(template, new_nodes).0;
    // upstream `balanceScaleUps`: the similar groups that one more node leaves within the
    // cluster-wide limits share it; each group's part is then capped by what the limits leave.
    let similar = similar_groups(group, template, &valid, &pod_groups, options);
    let mut members = vec![Member { name: group.name, target: group.target, max: group.max }];
    for g in similar.iter().filter(|g| g.template.is_some_and(|t| quota.check(t, 1).1.is_empty())) {
        members.push(Member { name: g.name, target: g.target, max: g.max });
    }
    status.result = ScaleUpResult::Successful;
    for mut increase in balance(&members, new_nodes) {
        let Some(template) = valid.iter().find(|(g, _)| g.name == increase.group).map(|(_, t)| *t) else { continue };
        let allowed = quota.check(template, increase.to - increase.from).0;
        increase.to = increase.from + allowed;
        quota.consume(template, allowed);
        if allowed > 0 {
            status.increases.push(increase);
        }
    }
    status.triggered = placed.remove(&chosen.group).unwrap_or_default();
    status.expansion = Some(expansion);
    status.skipped = skipped;
    status
}

/// upstream `ComputeSimilarNodeGroups`: with `--balance-similar-node-groups`, the other valid
/// groups whose template is similar to `group`'s and that fit every equivalence group `group` fits.
fn similar_groups<'a>(
    group: &GroupState,
    template: &SchedulingNode,
    valid: &[(&'a GroupState<'a>, &SchedulingNode)],
    pod_groups: &[PodGroup],
    options: &ResolvedOptions,
) -> Vec<&'a GroupState<'a>> {
    if !options.balance_similar_node_groups {
        return Vec::new();
    }
    let fits = |g: &PodGroup, name: &str| g.fits.iter().any(|n| n == name);
    valid
        .iter()
        .filter(|(other, other_template)| {
            other.name != group.name
                && similar(template, other_template, &options.balancing_ignore_labels)
                && pod_groups.iter().filter(|g| fits(g, group.name)).all(|g| fits(g, other.name))
        })
        .map(|(other, _)| *other)
        .collect()
}

/// upstream `GetRemainingPods`: the pods of equivalence groups no valid group fits, each with the
/// valid groups' rejections and every skipped group.
fn remaining(pod_groups: &[PodGroup], skipped: &BTreeMap<String, Skip>) -> Vec<NoScaleUp> {
    pod_groups
        .iter()
        .filter(|g| g.fits.is_empty())
        .flat_map(|g| {
            g.pods.iter().map(|p| NoScaleUp {
                pod: p.key.clone(),
                rejected: g.rejected.clone(),
                skipped: skipped.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::clusterautoscaler::{ClusterAutoscalerOptions, NodeGroup};
    use crate::catalogue::Catalogue;
    use serde_json::json;

    fn template(name: &str, instance_type: &str, extra: serde_json::Value) -> SchedulingNode {
        let mut spec = json!({"maxSize": 10, "instanceTypes": [instance_type], "zones": ["us-east-1a"]});
        spec.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
        let group: NodeGroup = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
        SchedulingNode::of(&super::super::template(&group, Catalogue::embedded(), "us-east-1", &[]).unwrap())
    }

    fn group<'a>(name: &'a str, target: i64, max: i64, template: &'a SchedulingNode) -> GroupState<'a> {
        GroupState { name, target, max, template: Some(template), safety: Safety::Safe }
    }

    /// `n` pods of one Deployment's ReplicaSet (one equivalence group).
    fn pods(prefix: &str, n: usize, cpu: &str, extra: serde_json::Value) -> Vec<Pod> {
        (0..n)
            .map(|i| {
                let mut spec = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
                spec.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
                serde_json::from_value(json!({
                    "metadata": {"name": format!("{prefix}-{i}"), "namespace": "default",
                                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": prefix,
                                                      "uid": format!("uid-{prefix}"), "controller": true}]},
                    "spec": spec,
                }))
                .unwrap()
            })
            .collect()
    }

    fn options(extra: serde_json::Value) -> ResolvedOptions {
        serde_json::from_value::<ClusterAutoscalerOptions>(extra).unwrap().resolved()
    }

    fn refs(pods: &[Pod]) -> Vec<&Pod> {
        pods.iter().collect()
    }

    #[test]
    fn inflate_grows_the_group_by_a_node_a_pod_and_says_so_on_each_pod() {
        let m5 = template("general", "m5.large", json!({}));
        let inflate = pods("inflate", 3, "1", json!({}));
        let s = scale_up(&refs(&inflate), &[group("general", 0, 10, &m5)], &ReadyNodes::default(), &options(json!({})));
        assert_eq!(s.result, ScaleUpResult::Successful);
        assert_eq!(s.increases, [Increase { group: "general".into(), from: 0, to: 3, max: 10 }]);
        let events = s.pod_events();
        assert_eq!(events.len(), 3);
        assert_eq!(
            (events[0].reason, events[0].message.as_str()),
            ("TriggeredScaleUp", "pod triggered scale-up: [{general 0->3 (max: 10)}]")
        );
        // The group's room and --max-nodes-per-scaleup bound the estimate.
        let s = scale_up(&refs(&inflate), &[group("general", 8, 10, &m5)], &ReadyNodes::default(), &options(json!({})));
        assert_eq!((s.increases[0].to, s.triggered.len()), (10, 2));
        let one = options(json!({"maxNodesPerScaleup": 1}));
        assert_eq!(
            scale_up(&refs(&inflate), &[group("general", 0, 10, &m5)], &ReadyNodes::default(), &one).increases[0].to,
            1
        );
        assert_eq!(
            scale_up(&[], &[group("general", 0, 10, &m5)], &ReadyNodes::default(), &one).result,
            ScaleUpResult::NotNeeded
        );
    }

    #[test]
    fn the_expander_picks_among_the_groups_that_fit() {
        // least-waste: 4 pods of 900m, two a node, waste less on two m5.large (2 vCPU) than on one
        // m5.2xlarge (8).
        let small = template("b-small", "m5.large", json!({}));
        let large = template("a-large", "m5.2xlarge", json!({}));
        let four = pods("web", 4, "900m", json!({}));
        let groups = [group("a-large", 0, 10, &large), group("b-small", 0, 10, &small)];
        let s = scale_up(&refs(&four), &groups, &ReadyNodes::default(), &options(json!({})));
        assert_eq!(
            s.options.iter().map(|o| (o.group.as_str(), o.node_count)).collect::<Vec<_>>(),
            [("a-large", 1), ("b-small", 2)]
        );
        assert_eq!(s.increases[0].group, "b-small");
        let s = scale_up(&refs(&four), &groups, &ReadyNodes::default(), &options(json!({"expander": "least-nodes"})));
        assert_eq!(s.increases[0], Increase { group: "a-large".into(), from: 0, to: 1, max: 10 });
    }

    #[test]
    fn pods_no_group_takes_are_told_each_reason_and_how_many_groups_gave_it() {
        let tainted = template(
            "batch",
            "m5.large",
            json!({"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]}),
        );
        let small = template("small", "m5.large", json!({}));
        let full = template("full", "m5.large", json!({}));
        let off = template("off", "m5.large", json!({}));
        let mut backed_off = group("off", 0, 10, &off);
        backed_off.safety = Safety::BackedOff;
        let groups =
            [group("batch", 0, 10, &tainted), group("small", 0, 10, &small), group("full", 3, 3, &full), backed_off];
        let huge = pods("huge", 2, "4", json!({}));
        let s = scale_up(&refs(&huge), &groups, &ReadyNodes::default(), &options(json!({})));
        assert_eq!(s.result, ScaleUpResult::NoOptionsAvailable);
        assert_eq!(s.remaining.len(), 2);
        let events = s.pod_events();
        assert_eq!(
            events[0].message,
            "pod didn't trigger scale-up: 1 Insufficient cpu, 1 in backoff after failed scale-up, \
             1 max node group size reached, 1 node(s) had untolerated taint {dedicated: batch}"
        );
        assert_eq!(events[0].reason, "NotTriggerScaleUp");
        // A pod some group takes is not told anything when another pod triggers the scale-up.
        let mut both = huge.clone();
        both.extend(pods("web", 1, "1", json!({})));
        let s = scale_up(&refs(&both), &groups, &ReadyNodes::default(), &options(json!({})));
        assert_eq!(s.result, ScaleUpResult::Successful);
        assert_eq!(s.pod_events().iter().map(|e| e.reason).collect::<Vec<_>>(), ["TriggeredScaleUp"]);
        // A group without a template is not ready.
        let mut none = group("small", 0, 10, &small);
        none.template = None;
        let s = scale_up(&refs(&huge), &[none], &ReadyNodes::default(), &options(json!({})));
        assert_eq!(s.pod_events()[0].message, "pod didn't trigger scale-up: 1 not ready for scale-up");
    }

    #[test]
    fn similar_groups_share_a_scale_up_when_balancing() {
        let a = template("web-a", "m5.large", json!({"zones": ["us-east-1a"]}));
        let b = template("web-b", "m5.large", json!({"zones": ["us-east-1b"]}));
        let big = template("web-big", "m5.xlarge", json!({}));
        let groups = [group("web-a", 2, 10, &a), group("web-b", 0, 10, &b), group("web-big", 0, 10, &big)];
        let six = pods("web", 6, "1", json!({}));
        let balancing = options(json!({"balanceSimilarNodeGroups": true, "expander": "least-nodes"}));
        // least-nodes takes web-big (three m5.xlarge) with or without balancing: it has no twin.
        let s = scale_up(&refs(&six), &groups, &ReadyNodes::default(), &balancing);
        assert_eq!(s.increases.iter().map(|i| i.group.as_str()).collect::<Vec<_>>(), ["web-big"]);
        // Of the twins, web-a is chosen (the first by name); web-b catches up first.
        let twins = &groups[..2];
        let balancing = options(json!({"balanceSimilarNodeGroups": true}));
        let s = scale_up(&refs(&six), twins, &ReadyNodes::default(), &balancing);
        assert_eq!(
            s.increases,
            [
                Increase { group: "web-b".into(), from: 0, to: 4, max: 10 },
                Increase { group: "web-a".into(), from: 2, to: 4, max: 10 }
            ]
        );
        assert_eq!(
            s.pod_events()[0].message,
            "pod triggered scale-up: [{web-b 0->4 (max: 10)} {web-a 2->4 (max: 10)}]"
        );
        // Without balancing web-a alone grows; the twins' room bounds the estimate when balancing.
        let s = scale_up(&refs(&six), twins, &ReadyNodes::default(), &options(json!({})));
        assert_eq!(s.increases, [Increase { group: "web-a".into(), from: 2, to: 8, max: 10 }]);
        let tight = [group("web-a", 2, 4, &a), group("web-b", 0, 3, &b)];
        let s = scale_up(&refs(&six), &tight, &ReadyNodes::default(), &balancing);
        assert_eq!(s.increases.iter().map(|i| i.to - i.from).sum::<i64>(), 5);
    }

    #[test]
    fn cluster_wide_limits_cap_the_count_and_skip_groups_that_would_pass_them() {
        let m5 = template("general", "m5.large", json!({}));
        let inflate = pods("inflate", 5, "1", json!({}));
        let groups = [group("general", 2, 10, &m5)];
        // Two ready m5.large: 4 cores, 16 GiB.
        let node: Node = serde_json::from_value(
            json!({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "2", "memory": "8Gi"}}}),
        )
        .unwrap();
        let ready = ReadyNodes::of([&node, &node]);
        assert_eq!((ready.count, ready.cores, ready.memory), (2, 4, 16 << 30));
        // --cores-total 0:10 leaves 6 cores: three more nodes.
        let s = scale_up(&refs(&inflate), &groups, &ready, &options(json!({"coresTotal": "0:10"})));
        assert_eq!(s.increases[0].to, 5);
        // 0:5 leaves 1 core: not even one node; the group is skipped.
        let s = scale_up(&refs(&inflate), &groups, &ready, &options(json!({"coresTotal": "0:5"})));
        assert_eq!(s.skipped["general"], Skip::Quota { resources: vec!["cpu".into()] });
        assert!(s.pod_events()[0].message.ends_with("1 exceeded quota: \"cluster-wide\", resources: cpu"));
        // --max-nodes-total 4: the estimate stops at two more (so the count needs no cap); at 2
        // nothing is tried.
        let s = scale_up(&refs(&inflate), &groups, &ready, &options(json!({"maxNodesTotal": 4})));
        assert_eq!((s.increases[0].to, s.triggered.len(), s.max_nodes_total_reached), (4, 2, false));
        let s = scale_up(&refs(&inflate), &groups, &ready, &options(json!({"maxNodesTotal": 2})));
        assert_eq!(s.result, ScaleUpResult::LimitedByMaxNodesTotal);
        assert_eq!(s.pod_events()[0].message, "pod didn't trigger scale-up: max total nodes in cluster reached");
    }
}
