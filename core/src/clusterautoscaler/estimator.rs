//! How many new nodes of one group the pending pods need (upstream
//! `estimator/binpacking_estimator.go` and `estimator/decreasing_pod_orderer.go` at
//! cluster-autoscaler-1.36.1).
//!
//! The pods come in equivalence groups (pods of one controller with the same labels and spec).
//! Groups are ordered by `podCPU / templateCPU + podMemory / templateMemory` of their first pod,
//! highest first; upstream's sort is unstable, here equal scores keep the input order (a
//! deterministic choice). Then, for each equivalence group:
//!
//! 1. its pods go first-fit onto the new nodes of this estimation, until one does not fit;
//! 2. each remaining pod tries the node added last;
//! 3. if it does not fit there and that node is still empty, the group stops: its pods do not fit
//!    a fresh node;
//! 4. otherwise, within the limit, a new template node is added and the pod placed on it.
//!
//! The estimate is the number of new nodes that got a pod, and the pods placed. A pod fits a node
//! when the node's free allocatable (after the template's own pods and those placed) holds its
//! requests, it tolerates the node's NoSchedule and NoExecute taints, and its node selector and
//! one of its required node-affinity terms match the node's labels ([`super::predicates`]).

use crate::resources::{self, ResourceList};

use super::predicates::{self, PendingPod, SchedulingNode};

/// What the estimator made of one group's pods.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Estimate {
    /// New nodes that got at least one pod.
    pub node_count: usize,
    /// The pods placed (`namespace/name`), in the order they were placed.
    pub pods: Vec<String>,
}

/// A new node of this estimation: what is left of its allocatable.
struct NewNode {
    free: ResourceList,
    pods: usize,
}

impl NewNode {
    /// The scheduler's NodeResourcesFit: only what the pod requests is compared (a template
    /// pod's request the template lacks does not keep every pod off).
    fn fits(&self, pod: &PendingPod) -> bool {
        resources::first_exceeded(&pod.data.requests, &self.free).is_none()
    }

    fn place(&mut self, pod: &PendingPod) {
        self.free = resources::subtract(&self.free, &pod.data.requests);
        self.pods += 1;
    }
}

/// How many new nodes of a group (its template `node`) `groups` (equivalence groups of pending
/// pods, each non-empty) need, with at most `limit` new nodes.
pub fn estimate(node: &SchedulingNode, groups: &[&[PendingPod]], limit: usize) -> Estimate {
    let share = |requests: &ResourceList, resource: &str| -> f64 {
        let total = node.allocatable.get(resource).map_or(0.0, |q| q.as_f64());
        if total > 0.0 {
            requests.get(resource).map_or(0.0, |q| q.as_f64()) / total
        } else {
            0.0
        }
    };
    let score = |group: &[PendingPod]| share(&group[0].data.requests, "cpu") + share(&group[0].data.requests, "memory");
    let mut ordered: Vec<(f64, &[PendingPod])> =
        groups.iter().filter(|g| !g.is_empty()).map(|g| (score(g), *g)).collect();
    // A stable sort: equal scores keep the input order.
    ordered.sort_by(|a, b| b.0.total_cmp(&a.0));

    let mut nodes: Vec<NewNode> = Vec::new();
    let mut placed = Vec::new();
    for (_, group) in ordered {
        // Scheduling predicates other than resources are the same on every copy of the template.
        if predicates::check_placement(&group[0].data, node).is_err() {
            continue;
        }
        let mut pods = group.iter().peekable();
        // 1. First-fit onto the nodes added so far, until a pod does not fit.
        while let Some(pod) = pods.peek() {
            let Some(new) = nodes.iter_mut().find(|n| n.fits(pod)) else { break };
            new.place(pod);
            placed.push(pod.key.clone());
            pods.next();
        }
        // 2–4. The rest: the last node, else a new one.
        for pod in pods {
            if let Some(last) = nodes.last_mut() {
                if last.fits(pod) {
                    last.place(pod);
                    placed.push(pod.key.clone());
                    continue;
                }
                if last.pods == 0 {
                    break;
                }
            }
            if nodes.len() >= limit {
                break;
            }
            let mut fresh = NewNode { free: node.free.clone(), pods: 0 };
            if fresh.fits(pod) {
                fresh.place(pod);
                placed.push(pod.key.clone());
            }
            nodes.push(fresh);
        }
    }
    Estimate { node_count: nodes.iter().filter(|n| n.pods > 0).count(), pods: placed }
}

#[cfg(test)]
mod tests {
    use super::super::Template;
    use super::*;
    use crate::api::clusterautoscaler::NodeGroup;
    use crate::catalogue::Catalogue;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    /// m5.large (2 vCPU, 8 GiB), optionally tainted `dedicated=batch:NoSchedule`; kube-proxy takes
    /// 100m of it.
    fn m5_large(tainted: bool) -> Template {
        let taints =
            if tainted { json!([{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]) } else { json!([]) };
        let group: NodeGroup = serde_json::from_value(json!({
            "metadata": {"name": "general"},
            "spec": {"maxSize": 10, "instanceTypes": ["m5.large"], "zones": ["us-east-1a"],
                     "labels": {"workload": "general"}, "taints": taints},
        }))
        .unwrap();
        super::super::template(&group, Catalogue::embedded(), "us-east-1", &[]).unwrap()
    }

    fn pods(prefix: &str, n: usize, cpu: &str, extra: serde_json::Value) -> Vec<Pod> {
        (0..n)
            .map(|i| {
                let mut spec = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
                spec.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
                serde_json::from_value(
                    json!({"metadata": {"name": format!("{prefix}-{i}"), "namespace": "default"}, "spec": spec}),
                )
                .unwrap()
            })
            .collect()
    }

    fn run(template: &Template, groups: &[&[Pod]], limit: usize) -> Estimate {
        let groups: Vec<Vec<PendingPod>> =
            groups.iter().map(|g| g.iter().map(|p| PendingPod::read(p).unwrap()).collect()).collect();
        let groups: Vec<&[PendingPod]> = groups.iter().map(Vec::as_slice).collect();
        estimate(&SchedulingNode::of(template), &groups, limit)
    }

    #[test]
    fn inflate_needs_a_node_per_pod_of_one_cpu_on_two_vcpu_nodes() {
        let inflate = pods("inflate", 3, "1", json!({}));
        let e = run(&m5_large(false), &[&inflate], 1000);
        assert_eq!(e.node_count, 3);
        assert_eq!(e.pods, ["default/inflate-0", "default/inflate-1", "default/inflate-2"]);
        // The limiter: no more new nodes than allowed.
        assert_eq!(run(&m5_large(false), &[&inflate], 2), Estimate { node_count: 2, pods: e.pods[..2].to_vec() });
    }

    #[test]
    fn only_what_the_pod_requests_is_compared() {
        // A DaemonSet on the template asks for ephemeral storage the template does not list.
        let mut template = m5_large(false);
        template.pods.push(super::super::TemplatePod {
            name: "kube-system/logs".into(),
            requests: ResourceList::from([("ephemeral-storage".into(), crate::quantity::Quantity::from_gibibytes(1))]),
        });
        assert_eq!(run(&template, &[&pods("p", 1, "1", json!({}))], 10).node_count, 1);
    }

    #[test]
    fn a_pod_too_big_for_a_fresh_node_adds_none() {
        let big = pods("big", 2, "3", json!({}));
        assert_eq!(run(&m5_large(false), &[&big], 1000), Estimate::default());
    }

    #[test]
    fn larger_groups_go_first_and_later_groups_fill_the_nodes_already_added() {
        // Listed small first; the 1-CPU group scores 0.5 against 0.25 and goes first.
        let small = pods("small", 3, "500m", json!({}));
        let large = pods("large", 1, "1", json!({}));
        let e = run(&m5_large(false), &[&small, &large], 1000);
        // large-0 on node 1 (1.1 of 2 used); small-0 fits there first-fit (1.6); small-1 does
        // not, nor on the last node: node 2 takes small-1 and small-2.
        assert_eq!(e.pods, ["default/large-0", "default/small-0", "default/small-1", "default/small-2"]);
        assert_eq!(e.node_count, 2);
    }

    #[test]
    fn taints_and_node_affinity_are_checked_against_the_template() {
        let plain = pods("plain", 1, "1", json!({}));
        let tolerating =
            pods("tolerating", 1, "1", json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}));
        let tainted = m5_large(true);
        assert_eq!(run(&tainted, &[&plain], 10).node_count, 0, "an untolerated NoSchedule taint");
        assert_eq!(run(&tainted, &[&tolerating], 10).node_count, 1);
        let matching = pods("matching", 1, "1", json!({"nodeSelector": {"workload": "general"}}));
        let arm = pods("arm", 1, "1", json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}}));
        let either = pods(
            "either",
            1,
            "1",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]},
                {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]},
            ]}}}}),
        );
        let untemplated = pods("untemplated", 1, "1", json!({"nodeSelector": {"team": "x"}}));
        let plain_node = m5_large(false);
        assert_eq!(run(&plain_node, &[&matching], 10).node_count, 1);
        assert_eq!(run(&plain_node, &[&arm], 10).node_count, 0);
        assert_eq!(run(&plain_node, &[&either], 10).node_count, 1, "one required term matches");
        assert_eq!(run(&plain_node, &[&untemplated], 10).node_count, 0, "a label the template lacks");
    }
}
