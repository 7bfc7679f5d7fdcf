//! Garbage collection, both ways (upstream sigs.k8s.io/karpenter `nodeclaim/garbagecollection`
//! and aws/karpenter-provider-aws `pkg/controllers/nodeclaim/garbagecollection`, v1.14.1):
//!
//! - a **NodeClaim whose instance is gone**: registered, not being deleted, its providerID not
//!   among the provider's instances, and its Node missing or not Ready (a Ready Node means the
//!   kubelet still runs, whatever the provider says) → delete the NodeClaim. Every 2 minutes.
//! - an **instance with no NodeClaim**: the provider lists it, no NodeClaim has its providerID, and
//!   it is older than 30 s (a launch whose NodeClaim write is still in flight is not a leak) →
//!   terminate it and delete its Node. Every 10 s for the first 20 runs, then every 2 minutes.

use k8s_openapi::api::core::v1::Node;

use crate::api::nodeclaim::{conditions, NodeClaim};

/// upstream: the NodeClaim collector runs every 2 minutes.
pub const NODECLAIM_GC_SECONDS: i64 = 120;
/// upstream AWS: an instance younger than this is never collected.
pub const INSTANCE_GRACE_SECONDS: i64 = 30;
/// upstream AWS: the instance collector's cadence for its first runs, and how many.
pub const INSTANCE_GC_FAST_SECONDS: i64 = 10;
pub const INSTANCE_GC_FAST_RUNS: u32 = 20;

/// An instance as the cloud provider lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudInstance {
    pub provider_id: String,
    /// When it was launched (epoch seconds).
    pub created: i64,
    /// Already terminating (upstream drops those from the list).
    pub terminating: bool,
}

fn provider_id(nc: &NodeClaim) -> &str {
    nc.status.as_ref().map(|s| s.provider_id.as_str()).unwrap_or_default()
}

/// The Node's `Ready` condition is `True` (upstream `nodeutils.GetCondition(node, NodeReady)`).
pub(crate) fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The NodeClaims to delete because their instance is gone.
pub fn nodeclaims_without_instance<'a>(
    nodeclaims: &'a [NodeClaim],
    nodes: &[Node],
    instances: &[CloudInstance],
) -> Vec<&'a NodeClaim> {
    let listed: std::collections::HashSet<&str> =
        instances.iter().filter(|i| !i.terminating).map(|i| i.provider_id.as_str()).collect();
    nodeclaims
        .iter()
        .filter(|nc| crate::nodeclaim::lifecycle::is_true(nc, conditions::REGISTERED))
        .filter(|nc| nc.metadata.deletion_timestamp.is_none() && !listed.contains(provider_id(nc)))
        .filter(|nc| {
            let id = provider_id(nc);
            !nodes.iter().any(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(id) && node_ready(n))
        })
        .collect()
}

/// The instances to terminate because no NodeClaim has them.
pub fn instances_without_nodeclaim<'a>(
    instances: &'a [CloudInstance],
    nodeclaims: &[NodeClaim],
    now: i64,
) -> Vec<&'a CloudInstance> {
    let claimed: std::collections::HashSet<&str> = nodeclaims.iter().map(provider_id).collect();
    instances
        .iter()
        .filter(|i| !i.terminating && !claimed.contains(i.provider_id.as_str()))
        .filter(|i| now - i.created > INSTANCE_GRACE_SECONDS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodeclaim(name: &str, registered: bool) -> NodeClaim {
        let mut nc = NodeClaim::new(name, Default::default());
        let status = nc.status.get_or_insert_with(Default::default);
        status.provider_id = format!("kwok://{name}");
        if registered {
            crate::nodeclaim::lifecycle::set_true(&mut status.conditions, conditions::REGISTERED, "t");
        }
        nc
    }

    fn node(name: &str, ready: bool) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"providerID": format!("kwok://{name}")},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    fn instance(name: &str, created: i64) -> CloudInstance {
        CloudInstance { provider_id: format!("kwok://{name}"), created, terminating: false }
    }

    #[test]
    fn a_registered_nodeclaim_whose_instance_is_gone_goes_unless_its_node_is_ready() {
        let claims =
            [nodeclaim("listed", true), nodeclaim("gone", true), nodeclaim("ready", true), nodeclaim("new", false)];
        let nodes = [node("ready", true), node("gone", false)];
        let instances = [instance("listed", 0)];
        let names: Vec<&str> =
            nodeclaims_without_instance(&claims, &nodes, &instances).iter().map(|nc| nc.name()).collect();
        assert_eq!(names, ["gone"], "not registered yet: the registration timeout's business");
    }

    #[test]
    fn an_instance_no_nodeclaim_has_goes_after_its_grace() {
        let claims = [nodeclaim("a", true)];
        let instances = [instance("a", 0), instance("leak", 100), instance("young", 125)];
        let ids: Vec<&str> =
            instances_without_nodeclaim(&instances, &claims, 140).iter().map(|i| i.provider_id.as_str()).collect();
        assert_eq!(ids, ["kwok://leak"]);
    }
}
