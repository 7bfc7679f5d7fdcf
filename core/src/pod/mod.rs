//! Pod helpers every layer above uses (upstream `pkg/utils/pod` and `pkg/utils/pdb`, v1.14.1):
//! a pod's identity, whether it is active, who owns it, the `karpenter.sh/do-not-disrupt`
//! protection (`do_not_disrupt`), whether a pod of a deleting node is rescheduled, and the labels
//! of its `karpenter_pods_state` series (`metrics`).
//!
//! A leaf: it reads Kubernetes objects, labels and durations, and no scheduling, disruption or
//! simulation type.

pub(crate) mod do_not_disrupt;
pub mod metrics;

pub use do_not_disrupt::{node_value_ignored, pod_value_ignored, IgnoredValue};
pub use metrics::{pod_state_labels, POD_STATE_LABELS};

use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use crate::labels;

/// `namespace/name` of a pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
}

impl PodRef {
    pub fn of(pod: &Pod) -> PodRef {
        PodRef {
            namespace: pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
            name: pod.metadata.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Whether a pod is owned by a DaemonSet (and which).
pub fn daemonset_owner(pod: &Pod) -> Option<&str> {
    pod.metadata.owner_references.iter().flatten().find(|o| o.kind == "DaemonSet").map(|o| o.name.as_str())
}

/// Whether a bound pod still occupies its node (not Succeeded/Failed).
pub fn is_active(pod: &Pod) -> bool {
    !matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// Whether the pod waits for a node: bound to none (no `spec.nodeName`) and not finished, as
/// `kubectl get pods` shows `Pending` for a pod no scheduler has placed.
pub fn is_pending(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none() && is_active(pod)
}

/// upstream `pod.IsProvisionable`: a pod Karpenter provisions for. kube-scheduler has tried and
/// failed (`PodScheduled=False`, reason `Unschedulable`), it is not bound, not nominated for
/// preemption, not terminating or finished, and not a DaemonSet's or a mirror pod (those follow
/// their node).
pub fn is_provisionable(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let unschedulable = status.and_then(|s| s.conditions.as_ref()).is_some_and(|c| {
        c.iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
    });
    let preempting = status.and_then(|s| s.nominated_node_name.as_deref()).is_some_and(|n| !n.is_empty());
    let owned_by_node_or_daemonset = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" || (o.kind == "Node" && o.api_version == "v1"));
    is_pending(pod)
        && unschedulable
        && !preempting
        && pod.metadata.deletion_timestamp.is_none()
        && !owned_by_node_or_daemonset
}

/// Upstream `pdb.IsCurrentlyReschedulable`: a pod of a deleting node is rescheduled
/// when it is active (or a terminating StatefulSet pod), not a DaemonSet or mirror pod, not under
/// an active `karpenter.sh/do-not-disrupt` (a duration runs from the pod's start until `now`;
/// without a clock any duration counts as active), and not covered by a fully blocking
/// PodDisruptionBudget (maxUnavailable 0 or 0%, minAvailable 100%).
pub fn reschedulable(pod: &Pod, pdbs: &[k8s_openapi::api::policy::v1::PodDisruptionBudget], now: Option<i64>) -> bool {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let owners = pod.metadata.owner_references.iter().flatten();
    let statefulset = owners.clone().any(|o| o.kind == "StatefulSet");
    if !is_active(pod) || (pod.metadata.deletion_timestamp.is_some() && !statefulset) {
        return false;
    }
    if owners.clone().any(|o| o.kind == "DaemonSet" || (o.kind == "Node" && o.api_version == "v1")) {
        return false;
    }
    let protected = match now {
        Some(now) => do_not_disrupt::pod_protection(pod, now) != do_not_disrupt::Protection::None,
        None => pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::DO_NOT_DISRUPT))
            .is_some_and(|v| v == "true" || crate::api::Duration::parse(v).is_ok()),
    };
    if protected {
        return false;
    }
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    !pdbs.iter().any(|pdb| {
        let Some(spec) = &pdb.spec else { return false };
        let blocking = matches!(&spec.max_unavailable, Some(IntOrString::Int(0)))
            || matches!(&spec.max_unavailable, Some(IntOrString::String(s)) if s == "0%")
            || matches!(&spec.min_available, Some(IntOrString::String(s)) if s == "100%");
        blocking
            && pdb.metadata.namespace.as_deref().unwrap_or("default") == namespace
            && spec.selector.as_ref().is_some_and(|s| labels::selector::matches(s, &labels))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn pending_means_unbound_and_not_finished() {
        assert!(is_pending(&pod(serde_json::json!({"spec": {"containers": []}}))));
        assert!(!is_pending(&pod(serde_json::json!({"spec": {"containers": [], "nodeName": "n"}}))));
        assert!(!is_pending(&pod(serde_json::json!({"spec": {"containers": []}, "status": {"phase": "Failed"}}))));
    }

    #[test]
    fn provisionable_means_kube_scheduler_gave_up_on_it() {
        let unschedulable = serde_json::json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]);
        assert!(is_provisionable(&pod(
            serde_json::json!({"spec": {"containers": []}, "status": {"conditions": unschedulable}})
        )));
        assert!(!is_provisionable(&pod(serde_json::json!({"spec": {"containers": []}}))), "not tried yet");
        assert!(
            !is_provisionable(&pod(serde_json::json!({
                "spec": {"containers": []},
                "status": {"conditions": unschedulable, "nominatedNodeName": "n1"},
            }))),
            "preempting"
        );
        assert!(
            !is_provisionable(&pod(serde_json::json!({
                "metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u"}]},
                "spec": {"containers": []},
                "status": {"conditions": unschedulable},
            }))),
            "a DaemonSet pod"
        );
    }
}
