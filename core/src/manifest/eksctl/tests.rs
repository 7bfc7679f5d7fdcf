//! eksctl ClusterConfigs read into node groups with eksctl's defaults, and their mistakes located.

use crate::api::clusterautoscaler::{GroupCapacityType, NodeGroup};
use crate::labels::aws::{EKSCTL_CLUSTER_NAME, EKSCTL_NODEGROUP_NAME, EKS_CAPACITY_TYPE, EKS_NODEGROUP};
use crate::manifest::{load, ProblemKind};

const CLUSTER: &str = r#"apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata:
  name: prod
  region: us-east-1
  version: "1.33"
availabilityZones: [us-east-1a, us-east-1b, us-east-1c]
iam:
  withOIDC: true
vpc:
  cidr: 10.0.0.0/16
managedNodeGroups:
  - name: general
    instanceTypes: [m5.large, m5a.large]
    minSize: 1
    maxSize: 5
    volumeSize: 100
    labels: {workload: general}
  - name: spot-workers
    instanceType: c5.xlarge
    spot: true
    desiredCapacity: 3
    taints:
      - {key: spot, value: "true", effect: NoSchedule}
nodeGroups:
  - name: runners-arm
    instanceType: m6g.large
    availabilityZones: [us-east-1a]
    minSize: 0
    maxSize: 10
    labels: {gitlab: runner}
    taints:
      dedicated: "runners:NoSchedule"
      arm: NoExecute
  - name: mixed
    instanceType: mixed
    instancesDistribution:
      instanceTypes: [r5.large, r5a.large]
      onDemandBaseCapacity: 0
      onDemandPercentageAboveBaseCapacity: 0
    maxSize: 4
"#;

fn named<'a>(groups: &'a [NodeGroup], name: &str) -> &'a NodeGroup {
    groups.iter().find(|g| g.metadata.name.as_deref() == Some(name)).unwrap_or_else(|| panic!("{name}"))
}

fn sizes(g: &NodeGroup) -> (i64, i64, Option<i64>) {
    (g.spec.min_size, g.spec.max_size, g.spec.desired_capacity)
}

#[test]
fn an_eksctl_cluster_config_gives_its_groups_with_eksctls_defaults_and_labels() {
    let m = load(CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.cluster_name.as_deref(), Some("prod"));
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    let names: Vec<&str> = m.nodegroups.iter().map(|g| g.metadata.name.as_deref().unwrap()).collect();
    assert_eq!(names, ["runners-arm", "mixed", "general", "spot-workers"], "nodeGroups, then managedNodeGroups");

    let general = named(&m.nodegroups, "general");
    assert_eq!(general.spec.instance_types, ["m5.large", "m5a.large"]);
    assert_eq!(sizes(general), (1, 5, Some(1)), "a managed group's desired size defaults to its minimum");
    assert_eq!(general.spec.zones, ["us-east-1a", "us-east-1b", "us-east-1c"], "the cluster's zones");
    assert_eq!(general.spec.capacity_type, GroupCapacityType::OnDemand);
    let labels: Vec<(&str, &str)> = general.spec.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        labels,
        [
            (EKSCTL_CLUSTER_NAME, "prod"),
            (EKSCTL_NODEGROUP_NAME, "general"),
            (EKS_CAPACITY_TYPE, "ON_DEMAND"),
            (EKS_NODEGROUP, "general"),
            ("workload", "general")
        ]
    );

    let spot = named(&m.nodegroups, "spot-workers");
    assert_eq!((spot.spec.capacity_type, sizes(spot)), (GroupCapacityType::Spot, (3, 3, Some(3))));
    assert_eq!(spot.spec.labels[EKS_CAPACITY_TYPE], "SPOT");
    assert_eq!(spot.spec.taints[0].key, "spot");

    let runners = named(&m.nodegroups, "runners-arm");
    assert_eq!(sizes(runners), (0, 10, None), "a self-managed group's desired size is the ASG's to choose");
    assert_eq!(runners.spec.zones, ["us-east-1a"]);
    assert!(!runners.spec.labels.contains_key(EKS_NODEGROUP), "EKS labels only a managed group's nodes");
    let taints: Vec<(&str, Option<&str>, &str)> =
        runners.spec.taints.iter().map(|t| (t.key.as_str(), t.value.as_deref(), t.effect.as_str())).collect();
    assert_eq!(taints, [("arm", None, "NoExecute"), ("dedicated", Some("runners"), "NoSchedule")]);

    let mixed = named(&m.nodegroups, "mixed");
    assert_eq!(mixed.spec.instance_types, ["r5.large", "r5a.large"]);
    assert_eq!(mixed.spec.capacity_type, GroupCapacityType::Spot, "nothing on-demand");
    assert_eq!(sizes(mixed), (2, 4, None), "eksctl's minimum of 2 when none is written");
}

#[test]
fn mistakes_in_an_eksctl_config_are_located() {
    let text = r#"apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata: {name: prod, region: us-east-1}
nodegroups: []
managedNodeGroups:
  - name: typo
    instanceTypes: [m5.lrage]
  - name: unknown
    minsize: 1
  - name: mapped-taints
    taints: {a: "b:NoSchedule"}
nodeGroups:
  - name: selector
    instanceSelector: {vCPUs: 2, memory: "4"}
  - name: bad-effect
    taints: [{key: a, value: b, effect: NoScheduled}]
"#;
    let e = load(text).expect_err("broken groups");
    let problems: Vec<String> = e.problems.iter().map(ToString::to_string).collect();
    let find = |needle: &str| problems.iter().find(|p| p.contains(needle)).unwrap_or_else(|| panic!("{problems:#?}"));
    assert!(find("unknown field \"nodegroups\"").contains("line 4"));
    let typo = find("\"m5.lrage\" is not an EC2 instance type");
    assert!(typo.contains("(ManagedNodeGroup/typo), field instanceTypes[0], line 7"), "{typo}");
    assert!(find("unknown field \"minsize\"").contains("(ManagedNodeGroup/unknown), field minsize, line 9"));
    assert!(find("a managed node group's taints are a list").contains("line 11"));
    assert!(find("instanceSelector is resolved to instance types").contains("(SelfManagedNodeGroup/selector)"));
    assert!(find("taint effect \"NoScheduled\"").contains("taints[0].effect, line 16"));
    assert_eq!(problems.len(), 6, "{problems:#?}");
    assert_eq!(e.problems.iter().filter(|p| p.kind == ProblemKind::UnknownField).count(), 2);

    // Zones nowhere in the file: the region's, with a warning.
    let text = "apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata: {name: prod, region: eu-west-1}
managedNodeGroups: [{name: general}]
";
    let m = load(text).unwrap_or_else(|e| panic!("{e}"));
    let general = &m.nodegroups[0];
    assert_eq!(general.spec.instance_types, ["m5.large"], "eksctl's default type");
    assert_eq!(sizes(general), (2, 2, Some(2)), "eksctl's default count");
    assert!(general.spec.zones.iter().all(|z| z.starts_with("eu-west-1")) && general.spec.zones.len() >= 2);
    assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
    assert!(m.warnings[0].message.contains("read as every zone of eu-west-1"), "{}", m.warnings[0]);
}
