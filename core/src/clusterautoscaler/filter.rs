//! Pending pods that need no new node (upstream `core/podlistprocessor/filter_out_schedulable.go`
//! at cluster-autoscaler-1.36.1): before a scale-up, each unschedulable pod, highest priority
//! first, is tried on the cluster's nodes and then on the upcoming ones (template copies of the
//! nodes a scale-up already asked for); a pod that fits is placed there, its requests taken from
//! that node's room, and needs no scale-up. This is why a pod that a node on its way will take does
//! not cause another node.
//!
//! Upstream tries the node it placed the pod on last loop first, then the nodes from a start index
//! that rotates; carpentry tries them in the order given (the cluster's by name, then the upcoming
//! ones by group) and takes the first that fits (docs/divergences.md). Equal priorities keep their
//! order.

use k8s_openapi::api::core::v1::Pod;

use std::borrow::Cow;

use crate::resources::{self, ResourceList};

use super::predicates::{self, PendingPod, SchedulingNode};

/// A node a pending pod may go to.
#[derive(Debug, Clone)]
pub struct Room<'a> {
    /// The node's name, or `<group>-upcoming-<n>` for an upcoming one.
    pub name: Cow<'a, str>,
    pub node: &'a SchedulingNode,
    /// What is left on it as pods are placed.
    pub free: ResourceList,
}

impl<'a> Room<'a> {
    pub fn new(name: Cow<'a, str>, node: &'a SchedulingNode) -> Room<'a> {
        Room { name, node, free: node.free.clone() }
    }
}

/// The pending pods split by whether an existing or upcoming node takes them.
#[derive(Debug, Default)]
pub struct Filtered<'a> {
    /// Still pending, in the order given: what the scale-up is for.
    pub pending: Vec<&'a Pod>,
    /// `namespace/name` → the node it fits.
    pub placed: Vec<(String, String)>,
}

/// Splits `pending` by whether some node of `rooms` takes it, placing each that fits (the rooms'
/// free resources shrink by it).
pub fn filter_out_schedulable<'a>(pending: &[&'a Pod], rooms: &mut [Room]) -> Filtered<'a> {
    let mut ordered: Vec<(usize, &'a Pod)> = pending.iter().copied().enumerate().collect();
    // Highest priority first; a stable sort keeps equal priorities in order.
    ordered.sort_by_key(|(_, p)| std::cmp::Reverse(p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)));
    let mut filtered = Filtered::default();
    let mut left = Vec::new();
    for (index, pod) in ordered {
        // A pod that cannot be read stays pending: the scale-up reports it.
        let Some(read) = PendingPod::read(pod) else {
            left.push(index);
            continue;
        };
        match rooms.iter_mut().find(|r| predicates::check(&read.data, r.node, &r.free).is_ok()) {
            Some(room) => {
                resources::subtract_into(&mut room.free, &read.data.requests);
                filtered.placed.push((read.key, room.name.to_string()));
            }
            None => left.push(index),
        }
    }
    // Back to the order given, so that equivalence groups and the estimator see the pods as listed.
    left.sort_unstable();
    filtered.pending = left.into_iter().map(|i| pending[i]).collect();
    filtered
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    fn node(name: &str, cpu: &str, extra: serde_json::Value) -> (String, SchedulingNode) {
        let mut node = json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                              "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}});
        node.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
        let node: Node = serde_json::from_value(node).unwrap();
        (name.into(), SchedulingNode::with_requests(&node, &[]))
    }

    fn rooms(nodes: &[(String, SchedulingNode)]) -> Vec<Room<'_>> {
        nodes.iter().map(|(name, node)| Room::new(name.as_str().into(), node)).collect()
    }

    fn pod(name: &str, cpu: &str, priority: Option<i32>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"priority": priority, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        }))
        .unwrap()
    }

    #[test]
    fn pods_that_fit_a_node_or_an_upcoming_one_need_no_scale_up() {
        let nodes = [
            node("a", "1", json!({})),
            node("cordoned", "4", json!({"spec": {"unschedulable": true}})),
            node("general-upcoming-0", "2", json!({})),
        ];
        let mut rooms = rooms(&nodes);
        let (p1, p2, p3, p4) = (pod("p1", "1", None), pod("p2", "1", None), pod("p3", "1", None), pod("p4", "1", None));
        let f = filter_out_schedulable(&[&p1, &p2, &p3, &p4], &mut rooms);
        let placed: Vec<(&str, &str)> = f.placed.iter().map(|(p, n)| (p.as_str(), n.as_str())).collect();
        assert_eq!(
            placed,
            [("default/p1", "a"), ("default/p2", "general-upcoming-0"), ("default/p3", "general-upcoming-0")]
        );
        assert_eq!(f.pending.iter().map(|p| p.metadata.name.as_deref().unwrap()).collect::<Vec<_>>(), ["p4"]);
    }

    #[test]
    fn higher_priorities_take_the_room_first() {
        let nodes = [node("a", "1", json!({}))];
        let mut rooms = rooms(&nodes);
        let (low, high) = (pod("low", "1", Some(-5)), pod("high", "1", Some(100)));
        let f = filter_out_schedulable(&[&low, &high], &mut rooms);
        assert_eq!(f.placed, [("default/high".to_string(), "a".to_string())]);
        assert_eq!(f.pending.len(), 1);
        assert_eq!(f.pending[0].metadata.name.as_deref(), Some("low"));
    }
}
