//! Tags an instance gets once its Node has registered (upstream karpenter-provider-aws v1.14.1
//! `pkg/controllers/nodeclaim/tagging/controller.go`): `Name` = the Node's name,
//! `karpenter.sh/nodeclaim` = the NodeClaim's, `eks:eks-cluster-name` = the cluster, each only if
//! the instance does not carry it yet; then the NodeClaim is annotated
//! `karpenter.k8s.aws/tagged` and `compatibility.karpenter.k8s.aws/cluster-name-tagged`.

use std::collections::BTreeMap;

use crate::api::NodeClaim;
use crate::labels::aws::EKS_CLUSTER_NAME_TAG;

/// upstream `v1.AnnotationInstanceTagged`.
pub const TAGGED_ANNOTATION: &str = "karpenter.k8s.aws/tagged";
/// upstream `v1.AnnotationClusterNameTaggedCompatability`.
pub const CLUSTER_NAME_TAGGED_ANNOTATION: &str = "compatibility.karpenter.k8s.aws/cluster-name-tagged";
/// upstream `v1.NameTagKey`.
pub const NAME_TAG: &str = "Name";
/// upstream `v1.NodeClaimTagKey`.
pub const NODECLAIM_TAG: &str = "karpenter.sh/nodeclaim";
/// upstream sleeps a second after each CreateTags: it shares EC2's rate limit with CreateFleet.
pub const SECONDS_BETWEEN_CALLS: u64 = 1;

/// upstream `isTaggable`: registered (its Node's name known), not being deleted, and not both
/// annotations `true` yet.
pub fn is_taggable(nodeclaim: &NodeClaim) -> bool {
    let annotated =
        |key: &str| nodeclaim.metadata.annotations.as_ref().and_then(|a| a.get(key)).is_some_and(|v| v == "true");
    if annotated(TAGGED_ANNOTATION) && annotated(CLUSTER_NAME_TAGGED_ANNOTATION) {
        return false;
    }
    let node_name = nodeclaim.status.as_ref().map(|s| s.node_name.as_str()).unwrap_or_default();
    !node_name.is_empty() && nodeclaim.metadata.deletion_timestamp.is_none()
}

/// The tags to add to the instance of `nodeclaim` in `cluster`, given the keys it has.
pub fn registration_tags(nodeclaim: &NodeClaim, cluster: &str, has: impl Fn(&str) -> bool) -> BTreeMap<String, String> {
    let node_name = nodeclaim.status.as_ref().map(|s| s.node_name.clone()).unwrap_or_default();
    [(NAME_TAG, node_name), (NODECLAIM_TAG, nodeclaim.name().to_string()), (EKS_CLUSTER_NAME_TAG, cluster.to_string())]
        .into_iter()
        .filter(|(k, _)| !has(k))
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// The annotations that mark `nodeclaim`'s instance tagged.
pub fn tagged_annotations() -> BTreeMap<String, String> {
    BTreeMap::from([
        (TAGGED_ANNOTATION.to_string(), "true".to_string()),
        (CLUSTER_NAME_TAGGED_ANNOTATION.to_string(), "true".to_string()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered(node: &str) -> NodeClaim {
        let mut nc = NodeClaim::new("default-abcde", Default::default());
        nc.status.get_or_insert_with(Default::default).node_name = node.into();
        nc
    }

    #[test]
    fn a_registered_nodeclaim_is_tagged_once() {
        assert!(!is_taggable(&registered("")), "no Node yet");
        let mut nc = registered("ip-10-0-1-1.ec2.internal");
        assert!(is_taggable(&nc));
        nc.metadata.annotations = Some(tagged_annotations());
        assert!(!is_taggable(&nc));
        // Tagged by a version that did not tag the cluster name: tagged again.
        nc.metadata.annotations = Some([(TAGGED_ANNOTATION.to_string(), "true".to_string())].into());
        assert!(is_taggable(&nc));
        let mut deleting = registered("ip-10-0-1-1.ec2.internal");
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
        assert!(!is_taggable(&deleting));
    }

    #[test]
    fn only_the_missing_tags_are_added() {
        let nc = registered("ip-10-0-1-1.ec2.internal");
        let all = registration_tags(&nc, "prod", |_| false);
        assert_eq!(
            all,
            BTreeMap::from([
                ("Name".to_string(), "ip-10-0-1-1.ec2.internal".to_string()),
                ("eks:eks-cluster-name".to_string(), "prod".to_string()),
                ("karpenter.sh/nodeclaim".to_string(), "default-abcde".to_string()),
            ])
        );
        let some = registration_tags(&nc, "prod", |k| k == "eks:eks-cluster-name" || k == "Name");
        assert_eq!(some.keys().collect::<Vec<_>>(), ["karpenter.sh/nodeclaim"]);
    }
}
