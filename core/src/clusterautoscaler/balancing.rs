//! `--balance-similar-node-groups`: which groups are alike, and how a scale-up is split among them
//! (upstream `processors/nodegroupset/compare_nodegroups.go`, `aws_nodegroups.go` and
//! `balancing_processor.go` at cluster-autoscaler-1.36.1).
//!
//! Two groups are similar when their templates have the same capacity (every resource equal, but
//! memory within 1.5 %), allocatable and free (allocatable less the template's pods) each within
//! 5 %, and the same labels but for those that name a node, its zone or its group (and any
//! `--balancing-ignore-label`).
//!
//! A scale-up of `n` nodes is handed out one node at a time to the group with the fewest (its
//! target plus what it got), never past a group's max; the total is capped at the groups' room.
//! Equal sizes go in name order (upstream's sort is unstable).

use std::collections::BTreeMap;

use crate::resources::ResourceList;

use super::predicates::SchedulingNode;

/// upstream `config.NodeGroupDifferenceRatios` defaults.
pub const MAX_CAPACITY_MEMORY_DIFFERENCE_RATIO: f64 = 0.015;
pub const MAX_ALLOCATABLE_DIFFERENCE_RATIO: f64 = 0.05;
pub const MAX_FREE_DIFFERENCE_RATIO: f64 = 0.05;

/// Labels that never make two groups different: upstream `BasicIgnoredLabels` and the AWS
/// provider's own (`aws_nodegroups.go`).
pub const IGNORED_LABELS: [&str; 16] = [
    "kubernetes.io/hostname",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "beta.kubernetes.io/fluentd-ds-ready",
    "kops.k8s.io/instancegroup",
    "topology.ebs.csi.aws.com/zone",
    "topology.gke.io/zone",
    "topology.disk.csi.azure.com/zone",
    "alpha.eksctl.io/instance-id",
    "alpha.eksctl.io/nodegroup-name",
    "eks.amazonaws.com/nodegroup",
    "k8s.amazonaws.com/eniConfig",
    "lifecycle",
    "topology.k8s.aws/zone-id",
];

/// upstream `resourceListWithinTolerance`, on milli-values.
fn within(a: &crate::quantity::Quantity, b: &crate::quantity::Quantity, ratio: f64) -> bool {
    let (a, b) = (a.milli_value() as f64, b.milli_value() as f64);
    let (larger, smaller) = (a.max(b), a.min(b));
    larger - smaller <= larger * ratio
}

/// Every resource in both lists, each within `ratio` (a resource in one list only is not similar).
fn lists_within(a: &ResourceList, b: &ResourceList, ratio: f64) -> bool {
    a.len() == b.len() && a.iter().all(|(name, qa)| b.get(name).is_some_and(|qb| within(qa, qb, ratio)))
}

/// upstream `IsCloudProviderNodeInfoSimilar` with the AWS comparator's labels.
pub fn similar(a: &SchedulingNode, b: &SchedulingNode, ignored: &[String]) -> bool {
    let capacity_equal = a.capacity.len() == b.capacity.len()
        && a.capacity.iter().all(|(name, qa)| {
            b.capacity.get(name).is_some_and(|qb| match name.as_str() {
                "memory" => within(qa, qb, MAX_CAPACITY_MEMORY_DIFFERENCE_RATIO),
                _ => qa == qb,
            })
        });
    if !capacity_equal
        || !lists_within(&a.allocatable, &b.allocatable, MAX_ALLOCATABLE_DIFFERENCE_RATIO)
        || !lists_within(&a.free, &b.free, MAX_FREE_DIFFERENCE_RATIO)
    {
        return false;
    }
    let compared = |labels: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        labels
            .iter()
            .filter(|(k, _)| !IGNORED_LABELS.contains(&k.as_str()) && !ignored.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    compared(&a.label_values) == compared(&b.label_values)
}

/// One group's growth (upstream `nodegroupset.ScaleUpInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Increase {
    pub group: String,
    pub from: i64,
    pub to: i64,
    pub max: i64,
}

impl std::fmt::Display for Increase {
    /// upstream `ScaleUpInfo.String`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{{} {}->{} (max: {})}}", self.group, self.from, self.to, self.max)
    }
}

/// A group taking part in a balanced scale-up.
#[derive(Debug, Clone)]
pub struct Member<'a> {
    pub name: &'a str,
    pub target: i64,
    pub max: i64,
}

/// upstream `BalanceScaleUpBetweenGroups`: `new_nodes` split among `members`, the groups that grow.
pub fn balance(members: &[Member], new_nodes: i64) -> Vec<Increase> {
    let mut sizes: Vec<(&Member, i64)> = members.iter().filter(|m| m.target < m.max).map(|m| (m, m.target)).collect();
    sizes.sort_by(|a, b| a.0.target.cmp(&b.0.target).then(a.0.name.cmp(b.0.name)));
    let room: i64 = sizes.iter().map(|(m, _)| m.max - m.target).sum();
    for _ in 0..new_nodes.min(room).max(0) {
        // The first of the smallest below its max (the list is ordered, so ties go to it).
        let Some(smallest) = sizes.iter_mut().filter(|(m, size)| *size < m.max).min_by_key(|(_, size)| *size) else {
            break;
        };
        smallest.1 += 1;
    }
    sizes
        .into_iter()
        .filter(|(m, size)| *size != m.target)
        .map(|(m, size)| Increase { group: m.name.to_string(), from: m.target, to: size, max: m.max })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::clusterautoscaler::NodeGroup;
    use crate::catalogue::Catalogue;
    use serde_json::json;

    fn template(name: &str, instance_type: &str, zone: &str, labels: serde_json::Value) -> SchedulingNode {
        let group: NodeGroup = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"maxSize": 10, "instanceTypes": [instance_type], "zones": [zone], "labels": labels},
        }))
        .unwrap();
        SchedulingNode::of(&super::super::template(&group, Catalogue::embedded(), "us-east-1", &[]).unwrap())
    }

    #[test]
    fn groups_alike_but_for_zone_and_name_are_similar() {
        let a = template("web-a", "m5.large", "us-east-1a", json!({"eks.amazonaws.com/nodegroup": "web-a"}));
        let b = template("web-b", "m5.large", "us-east-1b", json!({"eks.amazonaws.com/nodegroup": "web-b"}));
        assert!(similar(&a, &b, &[]));
        // Another instance type: its label differs (and here its shape too).
        assert!(!similar(&a, &template("big", "m5.xlarge", "us-east-1b", json!({})), &[]));
        // m5a.large has m5.large's shape; only the instance-type label differs.
        let amd = template("amd", "m5a.large", "us-east-1b", json!({"eks.amazonaws.com/nodegroup": "amd"}));
        assert!(!similar(&a, &amd, &[]));
        assert!(similar(&a, &amd, &["node.kubernetes.io/instance-type".to_string()]));
        // A label of the group's own.
        let team = template("team", "m5.large", "us-east-1b", json!({"team": "x"}));
        assert!(!similar(&a, &team, &[]));
    }

    #[test]
    fn a_scale_up_goes_to_the_smallest_group_first_and_never_past_a_max() {
        let members = [
            Member { name: "c", target: 1, max: 10 },
            Member { name: "a", target: 3, max: 4 },
            Member { name: "b", target: 1, max: 10 },
        ];
        let split = |n| balance(&members, n).into_iter().map(|i| (i.group, i.from, i.to)).collect::<Vec<_>>();
        // b and c (1 each) catch up with a (3); then one each, in that order; a stops at its max.
        assert_eq!(split(4), [("b".to_string(), 1, 3), ("c".to_string(), 1, 3)]);
        assert_eq!(split(5), [("b".to_string(), 1, 4), ("c".to_string(), 1, 3)]);
        assert_eq!(split(8), [("b".to_string(), 1, 5), ("c".to_string(), 1, 4), ("a".to_string(), 3, 4)]);
        // Capped at the groups' room (9 + 9 + 1).
        assert_eq!(split(100).iter().map(|(_, from, to)| to - from).sum::<i64>(), 19);
        assert_eq!(split(0), []);
    }
}
