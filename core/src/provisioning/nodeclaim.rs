//! The NodeClaim a provisioning round (or a disruption command's replacement) creates for a planned
//! NodeClaim (upstream `NodeClaimTemplate.ToNodeClaim` and `Provisioner.Create`): the NodePool
//! template's metadata and spec, the plan's requirements, resources, labels and taints, the hash
//! annotations drift is judged by, and an owner reference to the NodePool.

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::api::nodeclaim::{NodeClaim, NodeClaimSpec, ResourceRequirements};
use crate::api::{EC2NodeClassSpec, NodePool, KARPENTER_API_VERSION};
use crate::scheduling::explain::TaintRef;
use crate::scheduling::PlannedNodeClaim;

/// upstream `v1.NodeClaimMinValuesRelaxedAnnotationKey`: the plan had to relax a `minValues`.
use crate::labels::NODECLAIM_MIN_VALUES_RELAXED as MIN_VALUES_RELAXED;

fn taint_of(t: &TaintRef) -> Taint {
    Taint { key: t.key.clone(), value: t.value.clone(), effect: t.effect.clone(), time_added: None }
}

/// The NodeClaim to create for `planned`, a plan for `nodepool` whose EC2NodeClass has `nodeclass`.
/// It has `metadata.generateName` (`<nodepool>-`) and no name: the API server names it, the
/// simulation names it as the API server would.
pub fn nodeclaim_for(planned: &PlannedNodeClaim, nodepool: &NodePool, nodeclass: &EC2NodeClassSpec) -> NodeClaim {
    let template = &nodepool.spec.template;
    let mut annotations = template.metadata.annotations.clone();
    // Drift is judged against what the NodeClaim was made from.
    annotations.extend(crate::disruption::drift::stamps(nodepool, nodeclass));
    if planned.min_values_relaxed {
        annotations.insert(MIN_VALUES_RELAXED.into(), "true".into());
    }
    let spec = NodeClaimSpec {
        expire_after: template.spec.expire_after.clone(),
        node_class_ref: template.spec.node_class_ref.clone(),
        requirements: planned.requirements.clone(),
        resources: ResourceRequirements { requests: planned.requests.clone() },
        startup_taints: planned.startup_taints.iter().map(taint_of).collect(),
        taints: planned.taints.iter().map(taint_of).collect(),
        termination_grace_period: template.spec.termination_grace_period.clone(),
    };
    let mut nc = NodeClaim::new("", spec);
    nc.metadata.name = None;
    nc.metadata.generate_name = Some(format!("{}-", planned.nodepool));
    nc.metadata.labels = Some(planned.labels.clone());
    nc.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    // Only a NodePool read from the API server has a UID to own by.
    if let Some(uid) = nodepool.metadata.uid.clone().filter(|u| !u.is_empty()) {
        nc.metadata.owner_references = Some(vec![OwnerReference {
            api_version: KARPENTER_API_VERSION.into(),
            kind: crate::api::nodepool::KIND.into(),
            name: nodepool.name().to_string(),
            uid,
            block_owner_deletion: Some(true),
            controller: None,
        }]);
    }
    nc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodepool(yaml: &str) -> NodePool {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn the_nodeclaim_carries_the_template_the_plan_and_the_hashes() {
        let np = nodepool(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default, uid: np-uid}\nspec:\n  template:\n    metadata:\n      annotations: {team: a}\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n      terminationGracePeriod: 1h\n",
        );
        let planned = PlannedNodeClaim {
            nodepool: "default".into(),
            labels: [("karpenter.sh/nodepool".to_string(), "default".to_string())].into(),
            taints: vec![TaintRef { key: "dedicated".into(), value: Some("a".into()), effect: "NoSchedule".into() }],
            min_values_relaxed: true,
            ..PlannedNodeClaim::default()
        };
        let nc = nodeclaim_for(&planned, &np, &EC2NodeClassSpec::default());
        assert_eq!(nc.metadata.name, None);
        assert_eq!(nc.metadata.generate_name.as_deref(), Some("default-"));
        let annotations = nc.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations["team"], "a");
        assert_eq!(annotations[MIN_VALUES_RELAXED], "true");
        assert!(annotations.contains_key("karpenter.sh/nodepool-hash"));
        assert_eq!(nc.spec.taints[0].value.as_deref(), Some("a"));
        assert_eq!(nc.spec.node_class_ref.name, "default");
        assert!(nc.spec.termination_grace_period.is_some());
        let owner = &nc.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()), ("NodePool", "default", "np-uid"));
    }
}
