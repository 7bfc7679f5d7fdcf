//! AWS provider labels (upstream karpenter-provider-aws `pkg/apis/v1/labels.go`, v1.14.1).
//!
//! Every key below is derived by the instance-type catalogue ([`crate::catalogue`]) from EC2
//! instance-type data, except the capacity-reservation and placement-group keys, which come from a
//! NodeClass's resolved reservations and placement group.

/// The label group of the AWS provider; also a restricted label domain.
pub const GROUP: &str = "karpenter.k8s.aws";

/// The tag on everything Karpenter launches for an EKS cluster (upstream `v1.EKSClusterNameTagKey`).
pub const EKS_CLUSTER_NAME_TAG: &str = "eks:eks-cluster-name";

pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
pub const CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
pub const CAPACITY_RESERVATION_INTERRUPTIBLE: &str = "karpenter.k8s.aws/capacity-reservation-interruptible";
/// `nitro`, `xen`, or empty for bare metal.
pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
pub const INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: &str = "karpenter.k8s.aws/instance-encryption-in-transit-supported";
/// The leading letters of the type name (`m7i-flex.large` → `m`, `u-6tb1.metal` → `u`).
pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
/// `true` when the family contains `-flex`, else `false`.
pub const INSTANCE_CAPABILITY_FLEX: &str = "karpenter.k8s.aws/instance-capability-flex";
/// The text before the dot (`m7i-flex`).
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
/// The digits after the category (`m7i` → `7`).
pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
/// Total instance-store size in GB, when the storage supports NVMe.
pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
/// The text after the dot (`large`, `metal-48xl`).
pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
/// `intel`, `amd`, `aws`.
pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
pub const INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: &str = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz";
/// The raw memory size in MiB (not the overhead-adjusted capacity).
pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
pub const INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
pub const INSTANCE_ACCELERATOR_MANUFACTURER: &str = "karpenter.k8s.aws/instance-accelerator-manufacturer";
pub const INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
/// The EC2NodeClass a node was launched from (not well-known: users cannot select on it).
pub const EC2_NODE_CLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// `default` or `dedicated`.
pub const INSTANCE_TENANCY: &str = "karpenter.k8s.aws/instance-tenancy";
pub const PLACEMENT_GROUP_ID: &str = "karpenter.k8s.aws/placement-group-id";
pub const PLACEMENT_GROUP_PARTITION: &str = "karpenter.k8s.aws/placement-group-partition";
/// `nitro-sandbox` (Nitro Enclaves support is `supported`). Listed by the reference notes, but
/// v1.14.1 neither registers nor derives it; the catalogue keeps the fact
/// ([`crate::catalogue::InstanceTypeInfo::nitro_enclaves`]) without emitting the label.
pub const NITRO_SANDBOX: &str = "karpenter.k8s.aws/nitro-sandbox";

/// The availability-zone ID (`use1-az1`), which, unlike the zone name, is the same in every account.
pub const TOPOLOGY_ZONE_ID: &str = "topology.k8s.aws/zone-id";

/// `node.kubernetes.io/windows-build`; upstream's AWS provider registers it as well-known too.
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";

/// Labels eksctl puts on every node of the groups it creates (eksctl-io/eksctl
/// `pkg/apis/eksctl.io/v1alpha5/defaults.go` `setDefaultNodeLabels`), and EKS on a managed node
/// group's nodes. Not Karpenter's: read when moving from node groups to NodePools.
pub const EKSCTL_CLUSTER_NAME: &str = "alpha.eksctl.io/cluster-name";
pub const EKSCTL_NODEGROUP_NAME: &str = "alpha.eksctl.io/nodegroup-name";
pub const EKS_NODEGROUP: &str = "eks.amazonaws.com/nodegroup";
pub const EKS_CAPACITY_TYPE: &str = "eks.amazonaws.com/capacityType";

/// The labels the AWS provider adds to karpenter's well-known set (`init()` in `labels.go`), in
/// upstream's order.
pub const WELL_KNOWN_LABELS: &[&str] = &[
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    INSTANCE_HYPERVISOR,
    INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
    INSTANCE_CATEGORY,
    INSTANCE_CAPABILITY_FLEX,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_SIZE,
    INSTANCE_LOCAL_NVME,
    INSTANCE_CPU,
    INSTANCE_CPU_MANUFACTURER,
    INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    INSTANCE_MEMORY,
    INSTANCE_EBS_BANDWIDTH,
    INSTANCE_NETWORK_BANDWIDTH,
    INSTANCE_GPU_NAME,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MEMORY,
    INSTANCE_ACCELERATOR_NAME,
    INSTANCE_ACCELERATOR_MANUFACTURER,
    INSTANCE_ACCELERATOR_COUNT,
    TOPOLOGY_ZONE_ID,
    INSTANCE_TENANCY,
    WINDOWS_BUILD,
    PLACEMENT_GROUP_ID,
    PLACEMENT_GROUP_PARTITION,
];

/// Windows build numbers by AMI family (`node.kubernetes.io/windows-build`).
pub const WINDOWS_2019_BUILD: &str = "10.0.17763";
pub const WINDOWS_2022_BUILD: &str = "10.0.20348";
pub const WINDOWS_2025_BUILD: &str = "10.0.26100";

/// Extended resources the AWS provider reports in instance-type capacity.
pub mod resources {
    pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
    pub const AMD_GPU: &str = "amd.com/gpu";
    pub const AWS_NEURON: &str = "aws.amazon.com/neuron";
    pub const AWS_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
    pub const HABANA_GAUDI: &str = "habana.ai/gaudi";
    pub const AWS_POD_ENI: &str = "vpc.amazonaws.com/pod-eni";
    pub const PRIVATE_IPV4_ADDRESS: &str = "vpc.amazonaws.com/PrivateIPv4Address";
    pub const EFA: &str = "vpc.amazonaws.com/efa";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_labels_are_unique_and_exclude_the_nodeclass_label() {
        let set: std::collections::BTreeSet<_> = WELL_KNOWN_LABELS.iter().collect();
        assert_eq!(set.len(), WELL_KNOWN_LABELS.len());
        assert!(!WELL_KNOWN_LABELS.contains(&EC2_NODE_CLASS));
        assert!(!WELL_KNOWN_LABELS.contains(&NITRO_SANDBOX));
        assert!(WELL_KNOWN_LABELS.contains(&TOPOLOGY_ZONE_ID));
    }
}
