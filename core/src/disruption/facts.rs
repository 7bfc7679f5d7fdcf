//! A node's disruption facts read from the API objects, as a live cluster holds them (upstream
//! `state/statenode.go`: the NodeClaim and Node pair, `Initialized`, `MarkedForDeletion`,
//! `Nominated`; the NodeClaim's `status.lastPodEventTime`, its `Drifted` condition, its creation
//! time for `expireAfter`). The simulation keeps these facts itself as its world changes; the
//! controller and a snapshot read them from the objects here.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;

use super::{DriftReason, NodeFacts};
use crate::api::nodeclaim::{conditions, NodeClaim};
use crate::api::time::parse_time;
use crate::catalogue::Catalogue;
use crate::labels;
use crate::manifest::Manifests;

/// The Node a launched NodeClaim is, by `status.nodeName` or by provider ID.
pub fn node_of<'a>(objects: &'a Manifests, nodeclaim: &NodeClaim) -> Option<&'a Node> {
    let status = nodeclaim.status.as_ref()?;
    objects.nodes.iter().find(|n| {
        (!status.node_name.is_empty() && n.metadata.name.as_deref() == Some(status.node_name.as_str()))
            || (!status.provider_id.is_empty()
                && n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(status.provider_id.as_str()))
    })
}

fn condition_true<'a>(nodeclaim: &'a NodeClaim, type_: &str) -> Option<&'a crate::api::Condition> {
    let status = nodeclaim.status.as_ref()?;
    crate::api::find_condition(&status.conditions, type_).filter(|c| c.is_true())
}

/// The facts of every NodeClaim that has a Node. `nominated_until`: node → until when a
/// provisioning round nominated pods onto it (epoch seconds; the controller keeps these, as
/// upstream's cluster state does in memory). `marked_for_deletion`: nodes whose NodeClaim the
/// caller deleted and the objects may not show deleting yet (upstream's cluster state
/// `MarkForDeletion`): they are deleting, so that budgets count them at once.
pub fn of_objects(
    objects: &Manifests,
    catalogue: &Catalogue,
    region: &str,
    nominated_until: &BTreeMap<String, i64>,
    marked_for_deletion: &BTreeSet<String>,
) -> Vec<NodeFacts> {
    let mut out = Vec::new();
    for nc in &objects.nodeclaims {
        let Some(node) = node_of(objects, nc) else { continue };
        let Some(node_name) = node.metadata.name.clone() else { continue };
        let labels = nc.metadata.labels.clone().unwrap_or_default();
        let launch = crate::scheduling::cloudprovider::launch_from_labels(catalogue, region, &labels);
        let status = nc.status.clone().unwrap_or_default();
        let initialized = condition_true(nc, conditions::INITIALIZED);
        let initialized_at = initialized.and_then(|c| c.last_transition_time.as_deref()).and_then(parse_time);
        let last_pod_event = status.last_pod_event_time.as_deref().and_then(parse_time);
        let created = nc.metadata.creation_timestamp.as_ref().map(|t| t.0.as_second());
        out.push(NodeFacts {
            nodeclaim: nc.name().to_string(),
            nodepool: labels.get(labels::NODEPOOL).cloned().unwrap_or_default(),
            initialized: initialized.is_some(),
            deleting: nc.metadata.deletion_timestamp.is_some()
                || node.metadata.deletion_timestamp.is_some()
                || crate::scheduling::taints::is_disrupted(node)
                || marked_for_deletion.contains(&node_name),
            nominated_until: nominated_until.get(&node_name).copied(),
            termination_grace_period: nc.spec.termination_grace_period.is_some(),
            price: launch.as_ref().map_or(0.0, |l| l.price),
            capacity_type: launch.as_ref().map(|l| l.capacity_type.clone()).unwrap_or_default(),
            instance_type: launch.as_ref().map(|l| l.instance_type.clone()).unwrap_or_default(),
            last_pod_event: match (last_pod_event, initialized_at) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
            drifted: condition_true(nc, conditions::DRIFTED).map(|c| {
                let since = c.last_transition_time.as_deref().and_then(parse_time).or(created).unwrap_or_default();
                (DriftReason::of_condition_reason(c.reason.as_deref()), since)
            }),
            expires_at: nc.spec.expire_after.as_seconds().and_then(|after| Some(created? + after as i64)),
            node: node_name,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects() -> Manifests {
        let mut m = Manifests::default();
        for name in ["a", "b"] {
            m.nodeclaims.push(
                serde_yaml::from_str(&format!(
                    "apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {{name: {name}, labels: {{karpenter.sh/nodepool: default}}}}
spec: {{nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}, requirements: []}}
status:
  providerID: 'kwok://{name}'
  nodeName: {name}
  conditions: [{{type: Initialized, status: 'True', reason: Initialized, lastTransitionTime: '2026-01-01T00:00:00Z'}}]
"
                ))
                .unwrap(),
            );
            m.nodes.push(
                serde_yaml::from_str(&format!(
                    "metadata: {{name: {name}, labels: {{karpenter.sh/nodepool: default}}}}\nspec: {{providerID: 'kwok://{name}'}}"
                ))
                .unwrap(),
            );
        }
        m
    }

    #[test]
    fn a_nodeclaim_the_caller_deleted_counts_as_deleting_before_the_objects_show_it() {
        let m = objects();
        let catalogue = Catalogue::embedded();
        let region = crate::manifest::scenario::DEFAULT_REGION;
        let view = |marked: &BTreeSet<String>| {
            let facts = of_objects(&m, catalogue, region, &BTreeMap::new(), marked);
            crate::disruption::View::new(&m, catalogue, region, 0, facts, Vec::new()).budget_counts("default")
        };
        assert_eq!(view(&BTreeSet::new()), (2, 0));
        // Expiration deleted a's NodeClaim in this pass: the budget counts it as disrupting.
        assert_eq!(view(&["a".to_string()].into()), (2, 1));
    }
}
