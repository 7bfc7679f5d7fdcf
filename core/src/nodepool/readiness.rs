//! upstream `nodepool/readiness`: `NodeClassReady` follows the EC2NodeClass's `Ready` condition
//! (`False` with its reason and message; `NodeClassReadinessUnknown` while it has none), and is
//! `False` when the class is missing (`NodeClassNotFound`) or being deleted
//! (`NodeClassTerminating`). A NodePool whose nodeClassRef is not an EC2NodeClass is left as it is.

use crate::api::condition_set::{ConditionSet, READY};
use crate::api::{EC2NodeClass, NodePool, AWS_GROUP};

/// Sets `NodeClassReady`.
pub fn condition(nodepool: &NodePool, nodeclass: Option<&EC2NodeClass>, set: &mut ConditionSet<'_>) {
    let reference = &nodepool.spec.template.spec.node_class_ref;
    if reference.group != AWS_GROUP || reference.kind != "EC2NodeClass" {
        return;
    }
    let Some(class) = nodeclass else {
        set.set_false(super::NODECLASS_READY, "NodeClassNotFound", "NodeClass not found on cluster");
        return;
    };
    if class.metadata.deletion_timestamp.is_some() {
        set.set_false(super::NODECLASS_READY, "NodeClassTerminating", "NodeClass is Terminating");
        return;
    }
    let ready = class.status.as_ref().and_then(|s| crate::api::find_condition(&s.conditions, READY));
    match ready.map(|c| c.status.as_str()) {
        Some("True") => set.set_true(super::NODECLASS_READY),
        Some("False") => {
            let ready = ready.expect("matched above");
            set.set_false(
                super::NODECLASS_READY,
                ready.reason.as_deref().unwrap_or_default(),
                ready.message.as_deref().unwrap_or_default(),
            );
        }
        _ => set.set_false(super::NODECLASS_READY, "NodeClassReadinessUnknown", "Node Class Readiness Unknown"),
    }
}
