//! The scheduler filters CA runs a pending pod through on a template node (upstream
//! `simulator/clustersnapshot` `CheckPredicates` at cluster-autoscaler-1.36.1 runs kube-scheduler's
//! framework; the plugins are Kubernetes v1.36's `pkg/scheduler/framework/plugins`), in the
//! scheduler's filter order, stopping at the first that fails, whose reasons are what
//! `NotTriggerScaleUp` counts:
//!
//! 0. `NodeUnschedulable`: a cordoned node, unless the pod tolerates
//!    `node.kubernetes.io/unschedulable`, "node(s) were unschedulable";
//! 1. `TaintToleration`: an untolerated NoSchedule or NoExecute taint, "node(s) had untolerated
//!    taint {key: value}";
//! 2. `NodeAffinity`: the node selector and one required node-affinity term against the node's
//!    labels, "node(s) didn't match Pod's node affinity/selector";
//! 3. `NodeResourcesFit`: each resource the pod requests beyond what is free, "Insufficient cpu"
//!    (pods: "Too many pods").
//!
//! Not modelled yet: host ports, volumes, pod (anti-)affinity and topology spread.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};

use crate::requirements::{AllowUndefined, Requirements};
use crate::resources::{self, ResourceList};
use crate::scheduling::pod::{PodData, Preferences};
use crate::scheduling::taints;

use super::template::Template;

/// The taint a cordoned node is treated as having (`node.kubernetes.io/unschedulable`).
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A pending pod, read once for every group it is checked against.
#[derive(Debug, Clone)]
pub struct PendingPod {
    /// `namespace/name`.
    pub key: String,
    pub data: PodData,
}

impl PendingPod {
    /// `None` for a pod that cannot be read (its requests do not parse): the caller reports it.
    pub fn read(pod: &Pod) -> Option<PendingPod> {
        let data = PodData::read(pod).ok()?;
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        Some(PendingPod { key: format!("{namespace}/{}", pod.metadata.name.as_deref().unwrap_or_default()), data })
    }
}

/// A node as the filters read it: a group's template, or a node of the cluster.
#[derive(Debug, Clone)]
pub struct SchedulingNode {
    /// Cordoned (`spec.unschedulable`).
    pub unschedulable: bool,
    pub labels: Requirements,
    /// The same labels, as the node has them.
    pub label_values: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// What cluster-wide limits and `least-waste` count.
    pub capacity: ResourceList,
    pub allocatable: ResourceList,
    /// Allocatable less the pods on it (a template's kube-proxy and DaemonSet pods): what is left
    /// for pending pods.
    pub free: ResourceList,
}

impl SchedulingNode {
    /// A group's template.
    pub fn of(template: &Template) -> SchedulingNode {
        let requests: Vec<&ResourceList> = template.pods.iter().map(|p| &p.requests).collect();
        SchedulingNode::with_requests(&template.node, &requests)
    }

    /// A node of the cluster with pods bound to it that request `pods`.
    pub fn with_requests(node: &Node, pods: &[&ResourceList]) -> SchedulingNode {
        let status = node.status.as_ref();
        let read = |list: Option<&BTreeMap<_, _>>| list.and_then(|l| resources::from_k8s(l).ok()).unwrap_or_default();
        let allocatable = read(status.and_then(|s| s.allocatable.as_ref()));
        let capacity = read(status.and_then(|s| s.capacity.as_ref()));
        let mut free = allocatable.clone();
        for requests in pods {
            resources::subtract_into(&mut free, requests);
        }
        let label_values = node.metadata.labels.clone().unwrap_or_default();
        SchedulingNode {
            unschedulable: node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
            labels: Requirements::from_labels(&label_values),
            label_values,
            taints: node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default(),
            capacity,
            allocatable,
            free,
        }
    }
}

/// What a node's scheduling view is read from: while these are unchanged, so is the view.
#[derive(Debug, Clone, PartialEq)]
struct NodeParts {
    labels: Option<BTreeMap<String, String>>,
    taints: Option<Vec<Taint>>,
    unschedulable: Option<bool>,
    allocatable: Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    capacity: Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
}

impl NodeParts {
    fn of(node: &Node) -> NodeParts {
        let status = node.status.as_ref();
        NodeParts {
            labels: node.metadata.labels.clone(),
            taints: node.spec.as_ref().and_then(|s| s.taints.clone()),
            unschedulable: node.spec.as_ref().and_then(|s| s.unschedulable),
            allocatable: status.and_then(|s| s.allocatable.clone()),
            capacity: status.and_then(|s| s.capacity.clone()),
        }
    }

    fn matches(&self, node: &Node) -> bool {
        let status = node.status.as_ref();
        self.labels == node.metadata.labels
            && self.taints.as_ref() == node.spec.as_ref().and_then(|s| s.taints.as_ref())
            && self.unschedulable == node.spec.as_ref().and_then(|s| s.unschedulable)
            && self.allocatable.as_ref() == status.and_then(|s| s.allocatable.as_ref())
            && self.capacity.as_ref() == status.and_then(|s| s.capacity.as_ref())
    }
}

/// The cluster's nodes' scheduling views (without pods), kept from loop to loop and read again
/// only when a node's labels, taints, cordon or resources change: reading quantities and labels
/// for every node every 10 s was most of a loop.
#[derive(Debug, Clone, Default)]
pub struct NodeCache {
    nodes: BTreeMap<String, (NodeParts, SchedulingNode)>,
}

impl NodeCache {
    /// Brings the views up to date with `nodes`, forgetting the nodes not among them; returns
    /// how many it read.
    pub fn refresh<'n>(&mut self, nodes: impl IntoIterator<Item = &'n Node>) -> usize {
        let mut kept = std::mem::take(&mut self.nodes);
        let mut read = 0;
        for node in nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let entry = match kept.remove(&name) {
                Some(known) if known.0.matches(node) => known,
                _ => {
                    read += 1;
                    (NodeParts::of(node), SchedulingNode::with_requests(node, &[]))
                }
            };
            self.nodes.insert(name, entry);
        }
        read
    }

    /// The view of a node given to the last [`NodeCache::refresh`].
    pub fn get(&self, name: &str) -> Option<&SchedulingNode> {
        self.nodes.get(name).map(|(_, view)| view)
    }
}

/// The first filter a pod fails on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfit {
    Unschedulable,
    Taint {
        key: String,
        value: String,
    },
    Affinity,
    /// The resources short, by name.
    Resources(Vec<String>),
}

impl Unfit {
    /// The filter's reasons, in the scheduler's words.
    pub fn reasons(&self) -> Vec<String> {
        match self {
            Unfit::Unschedulable => vec!["node(s) were unschedulable".into()],
            Unfit::Taint { key, value } => vec![format!("node(s) had untolerated taint {{{key}: {value}}}")],
            Unfit::Affinity => vec!["node(s) didn't match Pod's node affinity/selector".into()],
            Unfit::Resources(names) => names
                .iter()
                .map(|r| if r == "pods" { "Too many pods".into() } else { format!("Insufficient {r}") })
                .collect(),
        }
    }
}

/// The filters other than resources: the same on every copy of a template.
pub fn check_placement(pod: &PodData, node: &SchedulingNode) -> Result<(), Unfit> {
    // NodeUnschedulable: a cordoned node takes only pods that tolerate its taint.
    if node.unschedulable {
        let cordon = Taint { key: UNSCHEDULABLE_TAINT.into(), effect: "NoSchedule".into(), ..Default::default() };
        if taints::first_untolerated(std::iter::once(&cordon), &pod.tolerations).is_some() {
            return Err(Unfit::Unschedulable);
        }
    }
    // TaintToleration filters on NoSchedule and NoExecute only.
    let mut tolerations = pod.tolerations.clone();
    tolerations.push(taints::prefer_no_schedule_toleration());
    if let Some(t) = taints::first_untolerated(&node.taints, &tolerations) {
        return Err(Unfit::Taint { key: t.key.clone(), value: t.value.clone().unwrap_or_default() });
    }
    let options = pod.required_terms.len().max(1);
    let matches = (0..options).any(|i| {
        let prefs = Preferences { dropped_required: i, ..Default::default() };
        node.labels.is_compatible(&pod.strict_requirements(&prefs), AllowUndefined::Nothing)
    });
    if !matches {
        return Err(Unfit::Affinity);
    }
    Ok(())
}

/// Every filter, with `free` what the node has left.
pub fn check(pod: &PodData, node: &SchedulingNode, free: &ResourceList) -> Result<(), Unfit> {
    check_placement(pod, node)?;
    let short = resources::exceeded(&pod.requests, free);
    if !short.is_empty() {
        return Err(Unfit::Resources(short.into_iter().map(str::to_string).collect()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::clusterautoscaler::NodeGroup;
    use crate::catalogue::Catalogue;
    use serde_json::json;

    fn node(taints: serde_json::Value) -> SchedulingNode {
        let group: NodeGroup = serde_json::from_value(json!({
            "metadata": {"name": "general"},
            "spec": {"maxSize": 10, "instanceTypes": ["m5.large"], "zones": ["us-east-1a"],
                     "labels": {"workload": "general"}, "taints": taints},
        }))
        .unwrap();
        SchedulingNode::of(&super::super::template(&group, Catalogue::embedded(), "us-east-1", &[]).unwrap())
    }

    fn pod(spec: serde_json::Value) -> PodData {
        let mut full = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]});
        full.as_object_mut().unwrap().extend(spec.as_object().cloned().unwrap_or_default());
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": full})).unwrap();
        PendingPod::read(&pod).unwrap().data
    }

    #[test]
    fn the_first_failing_filter_gives_the_schedulers_reasons() {
        let tainted = node(json!([{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]));
        let plain = node(json!([]));
        let reasons = |pod: &PodData, node: &SchedulingNode| match check(pod, node, &node.free) {
            Ok(()) => vec![],
            Err(unfit) => unfit.reasons(),
        };
        // Taints come before affinity, affinity before resources.
        let arm = pod(json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}}));
        assert_eq!(reasons(&arm, &tainted), ["node(s) had untolerated taint {dedicated: batch}"]);
        assert_eq!(reasons(&arm, &plain), ["node(s) didn't match Pod's node affinity/selector"]);
        let prefer = node(json!([{"key": "soft", "effect": "PreferNoSchedule"}]));
        assert_eq!(reasons(&pod(json!({})), &prefer), Vec::<String>::new(), "PreferNoSchedule does not filter");
        // Every resource short is a reason (kube-proxy's 100m is taken from the 2 vCPU).
        let big = pod(json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "9Gi"}}}]}));
        assert_eq!(reasons(&big, &plain), ["Insufficient cpu", "Insufficient memory"]);
        let mut full = plain.free.clone();
        full.insert("pods".into(), crate::quantity::Quantity::ZERO);
        assert_eq!(check(&pod(json!({})), &plain, &full).unwrap_err().reasons(), ["Too many pods"]);
        assert_eq!(reasons(&pod(json!({"nodeSelector": {"workload": "general"}})), &plain), Vec::<String>::new());
    }

    #[test]
    fn the_node_cache_reads_a_node_again_only_when_it_changes() {
        let node = |cpu: &str, taints: serde_json::Value| -> Node {
            serde_json::from_value(json!({
                "metadata": {"name": "a", "labels": {"kubernetes.io/hostname": "a"}},
                "spec": {"taints": taints},
                "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
            }))
            .unwrap()
        };
        let mut cache = NodeCache::default();
        assert_eq!(cache.refresh([&node("2", json!([]))]), 1);
        assert_eq!(cache.refresh([&node("2", json!([]))]), 0, "unchanged: not read again");
        let tainted = node("2", json!([{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]));
        assert_eq!(cache.refresh([&tainted]), 1);
        assert_eq!(cache.get("a").unwrap().taints.len(), 1, "a new taint is read");
        cache.refresh([&node("4", json!([]))]);
        let cpu = cache.get("a").unwrap().free.get("cpu").map(|q| q.as_f64());
        assert_eq!((cache.get("a").unwrap().taints.len(), cpu), (0, Some(4.0)), "so are new resources");
        cache.refresh([]);
        assert!(cache.get("a").is_none(), "a node gone is forgotten");
    }
}
