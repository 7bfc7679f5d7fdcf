//! The labels of a pod's `karpenter_pods_state` series (upstream
//! `pkg/controllers/metrics/pod/controller.go` `makeLabels`, v1.14.1): who the pod is, where it
//! runs, and its phase and readiness. The adapter renders one series of value 1 per pod.

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::labels;

/// The label names, in upstream's order (`labelNames`).
pub const POD_STATE_LABELS: [&str; 13] = [
    "name",
    "namespace",
    "owner",
    "node",
    "scheduled",
    "nodepool",
    "zone",
    "arch",
    "capacity_type",
    "instance_type",
    "phase",
    "ready",
    "managed",
];

/// The values of [`POD_STATE_LABELS`] for `pod`, on `node` (the Node its `spec.nodeName` names,
/// if that Node exists: an unbound pod's, or one whose Node is gone, has empty node labels).
pub fn pod_state_labels(pod: &Pod, node: Option<&Node>) -> [String; 13] {
    let meta = &pod.metadata;
    let namespace = meta.namespace.clone().unwrap_or_default();
    // upstream builds the first owner's self link by hand (SelfLink is gone since Kubernetes 1.20).
    let owner = meta.owner_references.as_ref().and_then(|o| o.first()).map_or_else(String::new, |o| {
        format!("/apis/{}/namespaces/{namespace}/{}s/{}", o.api_version, o.kind.to_lowercase(), o.name)
    });
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let node_label =
        |key: &str| node.and_then(|n| n.metadata.labels.as_ref()).and_then(|l| l.get(key)).cloned().unwrap_or_default();
    let nodepool = node_label(labels::NODEPOOL);
    [
        meta.name.clone().unwrap_or_default(),
        namespace.clone(),
        owner,
        node_name.clone(),
        (!node_name.is_empty()).to_string(),
        nodepool.clone(),
        node_label(labels::TOPOLOGY_ZONE),
        node_label(labels::ARCH),
        node_label(labels::CAPACITY_TYPE),
        node_label(labels::INSTANCE_TYPE),
        status.and_then(|s| s.phase.clone()).unwrap_or_default(),
        ready.to_string(),
        (!nodepool.is_empty()).to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_labelled_by_its_owner_its_node_and_its_state() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "shop", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4", "uid": "u"}]},
            "spec": {"nodeName": "ip-10-0-0-1", "containers": []},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap();
        let node: Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "ip-10-0-0-1", "labels": {
            "karpenter.sh/nodepool": "default", "topology.kubernetes.io/zone": "us-west-2a",
            "kubernetes.io/arch": "arm64", "karpenter.sh/capacity-type": "spot",
            "node.kubernetes.io/instance-type": "m7g.large"}}}))
        .unwrap();
        assert_eq!(
            pod_state_labels(&pod, Some(&node)),
            [
                "web-1",
                "shop",
                "/apis/apps/v1/namespaces/shop/replicasets/web-7d4",
                "ip-10-0-0-1",
                "true",
                "default",
                "us-west-2a",
                "arm64",
                "spot",
                "m7g.large",
                "Running",
                "true",
                "true"
            ]
        );
        // Pending, unowned, on no node: the node's labels are empty and it is not managed.
        let pending: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": []},
            "status": {"phase": "Pending"}}))
        .unwrap();
        let labels = pod_state_labels(&pending, None);
        assert_eq!(labels[2..], ["", "", "false", "", "", "", "", "", "Pending", "false", "false"]);
    }
}
