//! The NodePool limit check the provisioner makes right before it creates each NodeClaim
//! (upstream `provisioner.go::Create`: `nodePool.Spec.Limits.ExceededBy` on the NodePool's
//! resources in cluster state), so that NodeClaims created since the round began, by this round
//! or by anyone else, cannot carry a NodePool past its limits.

use serde::Serialize;

use crate::api::{NodeClaim, NodePool};
use crate::quantity::Quantity;
use crate::resources::{add_into, ResourceList};

/// A NodePool limit its NodeClaims already reach past.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("NodePool {nodepool} is at its limit: {resource} {usage} in use, limit {limit}")]
pub struct LimitExceeded {
    pub nodepool: String,
    pub resource: String,
    pub usage: String,
    pub limit: String,
}

/// What the NodePool's NodeClaims hold: their capacity (as launched; a NodeClaim that has not
/// launched holds none yet, as in upstream's state) and `nodes`, their count.
pub fn usage(nodepool: &str, nodeclaims: &[NodeClaim]) -> ResourceList {
    let mut used = ResourceList::new();
    let mut count = 0;
    for nc in nodeclaims.iter().filter(|nc| {
        nc.metadata.labels.as_ref().and_then(|l| l.get(crate::labels::NODEPOOL)).map(String::as_str) == Some(nodepool)
    }) {
        count += 1;
        if let Some(status) = &nc.status {
            add_into(&mut used, &status.capacity);
        }
    }
    used.insert("nodes".into(), Quantity::from_units(count));
    used
}

/// The limit of `nodepool` its NodeClaims exceed, if any.
pub fn exceeded(nodepool: &NodePool, nodeclaims: &[NodeClaim]) -> Option<LimitExceeded> {
    let (resource, usage, limit) = nodepool.spec.limits.exceeded_by(&usage(nodepool.name(), nodeclaims))?;
    Some(LimitExceeded {
        nodepool: nodepool.name().to_string(),
        resource,
        usage: usage.to_string(),
        limit: limit.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launched_capacity_and_the_node_count_meet_the_limits() {
        let np: NodePool = serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  limits: {cpu: '4', nodes: '2'}\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}\n      requirements: []\n",
        )
        .unwrap();
        let nc = |name: &str, cpu: &str| -> NodeClaim {
            serde_yaml::from_str(&format!(
                "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}, labels: {{karpenter.sh/nodepool: a}}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}}\n  requirements: []\nstatus:\n  capacity: {{cpu: '{cpu}'}}\n"
            ))
            .unwrap()
        };
        assert_eq!(exceeded(&np, &[nc("a-1", "2"), nc("a-2", "2")]), None, "at the limit is within it");
        let over = exceeded(&np, &[nc("a-1", "4"), nc("a-2", "2")]).unwrap();
        assert_eq!((over.resource.as_str(), over.usage.as_str()), ("cpu", "6"));
        let over = exceeded(&np, &[nc("a-1", "1"), nc("a-2", "1"), nc("a-3", "1")]).unwrap();
        assert_eq!(over.resource, "nodes");
        assert_eq!(over.to_string(), "NodePool a is at its limit: nodes 3 in use, limit 2");
    }
}
