//! describe-auto-scaling-groups output read as Cluster Autoscaler reads ASGs, and its mistakes located.

use crate::api::clusterautoscaler::GroupCapacityType;
use crate::manifest::{load, ProblemKind};

/// Two groups as `aws autoscaling describe-auto-scaling-groups --output json` prints them (fields
/// not read are kept, as the CLI prints many).
const DESCRIBED: &str = r#"{
  "AutoScalingGroups": [
    {
      "AutoScalingGroupName": "eks-general-2ec8",
      "AutoScalingGroupARN": "arn:aws:autoscaling:us-east-1:111122223333:autoScalingGroup:1:autoScalingGroupName/eks-general-2ec8",
      "MixedInstancesPolicy": {
        "LaunchTemplate": {
          "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-0a", "Version": "1"},
          "Overrides": [{"InstanceType": "m5.large"}, {"InstanceType": "m5a.large"}]
        },
        "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0, "SpotAllocationStrategy": "capacity-optimized"}
      },
      "MinSize": 1,
      "MaxSize": 6,
      "DesiredCapacity": 2,
      "AvailabilityZones": ["us-east-1a", "us-east-1b"],
      "HealthCheckType": "EC2",
      "Tags": [
        {"ResourceId": "eks-general-2ec8", "ResourceType": "auto-scaling-group", "Key": "eks:cluster-name", "Value": "prod", "PropagateAtLaunch": true},
        {"ResourceId": "eks-general-2ec8", "ResourceType": "auto-scaling-group", "Key": "eks:nodegroup-name", "Value": "general", "PropagateAtLaunch": true},
        {"ResourceId": "eks-general-2ec8", "ResourceType": "auto-scaling-group", "Key": "k8s.io/cluster-autoscaler/node-template/label/workload", "Value": "general", "PropagateAtLaunch": false}
      ]
    },
    {
      "AutoScalingGroupName": "batch",
      "LaunchTemplate": {"LaunchTemplateId": "lt-0b", "LaunchTemplateName": "batch", "Version": "$Latest"},
      "MinSize": 0,
      "MaxSize": 4,
      "DesiredCapacity": 2,
      "AvailabilityZones": ["us-east-1c"],
      "Instances": [
        {"InstanceId": "i-1", "InstanceType": "c5.xlarge", "AvailabilityZone": "us-east-1c"},
        {"InstanceId": "i-2", "InstanceType": "c5.xlarge", "AvailabilityZone": "us-east-1c"}
      ],
      "Tags": [
        {"Key": "k8s.io/cluster-autoscaler/node-template/taint/dedicated", "Value": "batch:NoSchedule"},
        {"Key": "k8s.io/cluster-autoscaler/node-template/taint/eksctl-style", "Value": "true"},
        {"Key": "k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage", "Value": "100Gi"},
        {"Key": "k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledownunneededtime", "Value": "5m"},
        {"Key": "k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledownunneededtimes", "Value": "5m"}
      ]
    },
    {
      "AutoScalingGroupName": "eks-tools-9f1a",
      "MixedInstancesPolicy": {"LaunchTemplate": {"Overrides": [{"InstanceType": "t3.large"}]}},
      "MinSize": 0, "MaxSize": 2, "AvailabilityZones": ["us-east-1a"],
      "Tags": [{"Key": "eks:nodegroup-name", "Value": "tools"}]
    }
  ]
}"#;

#[test]
fn described_groups_read_as_cluster_autoscaler_reads_them() {
    let m = load(DESCRIBED).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.cluster_name.as_deref(), Some("prod"));
    assert_eq!(m.nodegroups.len(), 3);
    let general = &m.nodegroups[0];
    assert_eq!(general.metadata.name.as_deref(), Some("eks-general-2ec8"));
    assert_eq!((general.spec.min_size, general.spec.max_size, general.spec.desired_capacity), (1, 6, Some(2)));
    assert_eq!(general.spec.instance_types, ["m5.large", "m5a.large"], "the overrides, the first is the template");
    assert_eq!(general.spec.capacity_type, GroupCapacityType::Spot, "0 on-demand above a base of 0");
    assert_eq!(general.spec.labels["workload"], "general");

    let batch = &m.nodegroups[1];
    assert_eq!(batch.spec.instance_types, ["c5.xlarge"], "read from the instances when there are no overrides");
    assert_eq!(batch.spec.capacity_type, GroupCapacityType::OnDemand);
    assert_eq!(batch.spec.taints.len(), 1, "a taint tag without an effect is skipped, as CA skips it");
    assert_eq!(
        (
            batch.spec.taints[0].key.as_str(),
            batch.spec.taints[0].value.as_deref(),
            batch.spec.taints[0].effect.as_str()
        ),
        ("dedicated", Some("batch"), "NoSchedule")
    );
    assert_eq!(batch.spec.resources["ephemeral-storage"].to_string(), "100Gi");
    assert_eq!(batch.spec.autoscaling_options.scale_down_unneeded_time.as_deref(), Some("5m"));

    // What CA skips is said, where it is written.
    let warnings: Vec<String> = m.warnings.iter().map(ToString::to_string).collect();
    let find = |needle: &str| warnings.iter().find(|w| w.contains(needle)).unwrap_or_else(|| panic!("{warnings:#?}"));
    assert!(find("taint tag k8s.io/cluster-autoscaler/node-template/taint/eksctl-style").contains("Tags[1].Value"));
    assert!(find("unknown autoscaling option \"scaledownunneededtimes\"").contains("line 40"), "{warnings:#?}");
    // A managed group's labels live in the EKS API unless node-template tags repeat them.
    assert!(find("keeps its Kubernetes labels and taints in the EKS API").contains("AutoScalingGroup/eks-tools-9f1a"));
    assert_eq!(m.warnings.iter().filter(|w| w.kind == ProblemKind::InvalidValue).count(), 3, "{warnings:#?}");
}

#[test]
fn broken_groups_are_located_at_the_field_they_came_from() {
    let text = r#"AutoScalingGroups:
- AutoScalingGroupName: typo
  MinSize: 0
  MaxSize: 2
  AvailabilityZones: [us-east-1a]
  MixedInstancesPolicy:
    LaunchTemplate:
      Overrides:
      - InstanceType: m5.large
      - InstanceType: m5.lrage
- AutoScalingGroupName: upside-down
  MinSize: 3
  MaxSize: 1
  AvailabilityZones: [us-east-1a]
  Instances: [{InstanceType: m5.large}]
- AutoScalingGroupName: from-a-template
  MaxSize: 1
  AvailabilityZones: [us-east-1a]
  LaunchTemplate: {LaunchTemplateName: web}
"#;
    let e = load(text).expect_err("three broken groups");
    let problems: Vec<String> = e.problems.iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 3, "{problems:#?}");
    let find = |needle: &str| problems.iter().find(|p| p.contains(needle)).unwrap_or_else(|| panic!("{problems:#?}"));
    let typo = find("\"m5.lrage\" is not an EC2 instance type");
    assert!(typo.contains("AutoScalingGroup/typo"), "{typo}");
    assert!(typo.contains("MixedInstancesPolicy.LaunchTemplate.Overrides[1].InstanceType"), "{typo}");
    assert!(typo.contains("line 10"), "{typo}");
    let size = find("maxSize 1 is below minSize 3");
    assert!(size.contains("AutoScalingGroups[1].MaxSize") || size.contains("MaxSize"), "{size}");
    assert!(size.contains("line 13"), "{size}");
    let template = find("no instance type");
    assert!(template.contains("LaunchTemplate"), "{template}");
    assert!(template.contains("line 19"), "{template}");
}
