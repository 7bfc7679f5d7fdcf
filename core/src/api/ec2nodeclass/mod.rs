//! `karpenter.k8s.aws/v1` EC2NodeClass (aws/karpenter-provider-aws `pkg/apis/v1/ec2nodeclass.go`,
//! `ec2nodeclass_status.go`, CRD `karpenter.k8s.aws_ec2nodeclasses.yaml`, released v1.14.1 with the typed kubelet).
//!
//! The only CRD default is `spec.metadataOptions` = `{httpEndpoint: enabled, httpProtocolIPv6: disabled,
//! httpPutResponseHopLimit: 1, httpTokens: required}`, with the same per-field defaults when the block is partial.
//!
//! The types and their defaults are here; `validation` holds the openAPI patterns and CEL rules
//! of the CRD and the provider's runtime checks.

mod validation;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::api::validation::{idx, key, FieldError, Rule, Validate};
use crate::api::{is_false, Condition, AWS_API_VERSION};
use crate::quantity::Quantity;

/// `EC2NodeClass`.
pub const KIND: &str = "EC2NodeClass";

fn default_api_version() -> String {
    AWS_API_VERSION.to_string()
}

fn default_kind() -> String {
    KIND.to_string()
}

/// An EC2NodeClass: the AWS side of a NodePool's nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EC2NodeClass {
    #[serde(default = "default_api_version")]
    pub api_version: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: EC2NodeClassSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EC2NodeClassStatus>,
}

impl EC2NodeClass {
    /// An EC2NodeClass named `name` with `spec`.
    pub fn new(name: &str, spec: EC2NodeClassSpec) -> EC2NodeClass {
        EC2NodeClass {
            api_version: default_api_version(),
            kind: default_kind(),
            metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() },
            spec,
            status: None,
        }
    }

    /// `metadata.name`, or `""`.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }
}

/// `spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EC2NodeClassSpec {
    /// Required unless an alias term is used; then inferred from it (see [`EC2NodeClassSpec::resolved_ami_family`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<AmiFamily>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    #[serde(default, rename = "associatePublicIPAddress", skip_serializing_if = "Option::is_none")]
    pub associate_public_ip_address: Option<bool>,
    /// Empty means the family's defaults ([`default_block_device_mappings`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservation_selector_terms: Vec<CapacityReservationSelectorTerm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    /// The CreateFleet `Context` (reserved field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// An existing instance profile; exclusive with `role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<InstanceStorePolicy>,
    /// IPv4/IPv6 prefixes assigned to the primary ENI.
    #[serde(default, rename = "ipPrefixCount", skip_serializing_if = "Option::is_none")]
    pub ip_prefix_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    #[serde(default = "default_metadata_options_block", skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_interfaces: Vec<NetworkInterface>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
    /// The IAM role nodes use (Karpenter manages an instance profile for it); exclusive with `instanceProfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Tags applied to instances, volumes, launch templates, ENIs and spot requests.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
}

fn default_metadata_options_block() -> Option<MetadataOptions> {
    Some(MetadataOptions::default())
}

impl Default for EC2NodeClassSpec {
    /// A valid AL2023 nodeclass: alias `al2023@latest`, role `KarpenterNodeRole`, subnets and security groups
    /// selected by the tag `karpenter.sh/discovery: my-cluster`, CRD-default metadata options.
    fn default() -> Self {
        let discovery: BTreeMap<String, String> =
            [("karpenter.sh/discovery".to_string(), "my-cluster".to_string())].into_iter().collect();
        EC2NodeClassSpec {
            ami_selector_terms: vec![AmiSelectorTerm {
                alias: Some("al2023@latest".to_string()),
                ..Default::default()
            }],
            metadata_options: default_metadata_options_block(),
            role: Some("KarpenterNodeRole".to_string()),
            security_group_selector_terms: vec![SecurityGroupSelectorTerm {
                tags: discovery.clone(),
                ..Default::default()
            }],
            subnet_selector_terms: vec![SubnetSelectorTerm { tags: discovery, id: None }],
            ..EC2NodeClassSpec::empty()
        }
    }
}

impl EC2NodeClassSpec {
    /// A spec with nothing set, not even the CRD-default metadataOptions (the legacy converters fill it in;
    /// [`Default`] is an example nodeclass instead).
    pub(crate) fn empty() -> EC2NodeClassSpec {
        EC2NodeClassSpec {
            ami_family: None,
            ami_selector_terms: Vec::new(),
            associate_public_ip_address: None,
            block_device_mappings: Vec::new(),
            capacity_reservation_selector_terms: Vec::new(),
            connection_tracking: None,
            context: None,
            cpu_options: None,
            detailed_monitoring: None,
            instance_profile: None,
            instance_store_policy: None,
            ip_prefix_count: None,
            kubelet: None,
            metadata_options: None,
            network_interfaces: Vec::new(),
            placement_group_selector: None,
            role: None,
            security_group_selector_terms: Vec::new(),
            subnet_selector_terms: Vec::new(),
            tags: BTreeMap::new(),
            user_data: None,
        }
    }

    /// The alias term's value, if any term has one.
    pub fn alias(&self) -> Option<&str> {
        self.ami_selector_terms.iter().find_map(|t| t.alias.as_deref().filter(|a| !a.is_empty()))
    }

    /// The AMI family in effect (upstream `EC2NodeClass.AMIFamily()`): `amiFamily` when set, else the alias's
    /// family, else `Custom`.
    pub fn resolved_ami_family(&self) -> AmiFamily {
        if let Some(family) = self.ami_family {
            return family;
        }
        self.alias()
            .and_then(|alias| alias.split('@').next())
            .and_then(AmiFamily::from_alias_family)
            .unwrap_or(AmiFamily::Custom)
    }

    /// The block device mappings launches use: the spec's, or the family's defaults when none are given.
    pub fn effective_block_device_mappings(&self) -> Vec<BlockDeviceMapping> {
        if self.block_device_mappings.is_empty() {
            default_block_device_mappings(self.resolved_ami_family())
        } else {
            self.block_device_mappings.clone()
        }
    }
}

/// `amiFamily`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AmiFamily {
    AL2,
    AL2023,
    Bottlerocket,
    Custom,
    Windows2019,
    Windows2022,
    Windows2025,
}

impl AmiFamily {
    pub const ALL: [AmiFamily; 7] = [
        AmiFamily::AL2,
        AmiFamily::AL2023,
        AmiFamily::Bottlerocket,
        AmiFamily::Custom,
        AmiFamily::Windows2019,
        AmiFamily::Windows2022,
        AmiFamily::Windows2025,
    ];

    /// The CRD spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AmiFamily::AL2 => "AL2",
            AmiFamily::AL2023 => "AL2023",
            AmiFamily::Bottlerocket => "Bottlerocket",
            AmiFamily::Custom => "Custom",
            AmiFamily::Windows2019 => "Windows2019",
            AmiFamily::Windows2022 => "Windows2022",
            AmiFamily::Windows2025 => "Windows2025",
        }
    }

    /// The alias family (`al2023`), or `None` for Custom, which has no alias.
    pub fn alias_family(self) -> Option<&'static str> {
        match self {
            AmiFamily::AL2 => Some("al2"),
            AmiFamily::AL2023 => Some("al2023"),
            AmiFamily::Bottlerocket => Some("bottlerocket"),
            AmiFamily::Custom => None,
            AmiFamily::Windows2019 => Some("windows2019"),
            AmiFamily::Windows2022 => Some("windows2022"),
            AmiFamily::Windows2025 => Some("windows2025"),
        }
    }

    /// The family an alias family names (`al2023` → AL2023).
    pub fn from_alias_family(family: &str) -> Option<AmiFamily> {
        AmiFamily::ALL.into_iter().find(|f| f.alias_family() == Some(family))
    }

    pub fn is_windows(self) -> bool {
        matches!(self, AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025)
    }
}

impl std::fmt::Display for AmiFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An `amiSelectorTerms` item; fields within a term are ANDed, terms are ORed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AmiSelectorTerm {
    /// `family@version`, e.g. `al2023@latest` or `bottlerocket@v1.10.0`; must be the only term and field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The AMI name (not the Name tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An account id, `self`, `amazon` or `aws-marketplace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The name or ARN of an SSM parameter holding an AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
    /// Tag filters; a value of `*` means the key exists.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// A `subnetSelectorTerms` item.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubnetSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// A `securityGroupSelectorTerms` item.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecurityGroupSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The group name (not the Name tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// A `capacityReservationSelectorTerms` item.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapacityReservationSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `open` or `targeted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<String>,
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// `placementGroupSelector`: exactly one of name and id.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementGroupSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `kubelet` (the typed struct of released v1.14.1).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeletConfiguration {
    #[serde(default, rename = "clusterDNS", skip_serializing_if = "Vec::is_empty")]
    pub cluster_dns: Vec<String>,
    #[serde(default, rename = "cpuCFSQuota", skip_serializing_if = "Option::is_none")]
    pub cpu_cfs_quota: Option<bool>,
    /// Signal → threshold (a quantity or a percentage).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_hard: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft: BTreeMap<String, String>,
    /// Signal → Go duration.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    #[serde(default, rename = "imageGCHighThresholdPercent", skip_serializing_if = "Option::is_none")]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(default, rename = "imageGCLowThresholdPercent", skip_serializing_if = "Option::is_none")]
    pub image_gc_low_threshold_percent: Option<i32>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kube_reserved: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_core: Option<i32>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_reserved: BTreeMap<String, Quantity>,
}

impl KubeletConfiguration {
    /// The JSON names of the fields that are set, for messages.
    pub fn set_fields(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut push = |set: bool, name| {
            if set {
                out.push(name)
            }
        };
        push(!self.cluster_dns.is_empty(), "clusterDNS");
        push(self.cpu_cfs_quota.is_some(), "cpuCFSQuota");
        push(!self.eviction_hard.is_empty(), "evictionHard");
        push(self.eviction_max_pod_grace_period.is_some(), "evictionMaxPodGracePeriod");
        push(!self.eviction_soft.is_empty(), "evictionSoft");
        push(!self.eviction_soft_grace_period.is_empty(), "evictionSoftGracePeriod");
        push(self.image_gc_high_threshold_percent.is_some(), "imageGCHighThresholdPercent");
        push(self.image_gc_low_threshold_percent.is_some(), "imageGCLowThresholdPercent");
        push(!self.kube_reserved.is_empty(), "kubeReserved");
        push(self.max_pods.is_some(), "maxPods");
        push(self.pods_per_core.is_some(), "podsPerCore");
        push(!self.system_reserved.is_empty(), "systemReserved");
        out
    }
}

/// A `blockDeviceMappings` item.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockDeviceMapping {
    /// For example `/dev/xvda`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    /// Whether this volume holds the kubelet root directory; at most one.
    #[serde(default, skip_serializing_if = "is_false")]
    pub root_volume: bool,
}

/// An EBS volume.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(default, rename = "snapshotID", skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    /// MiB/s, gp3 only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    /// MiB/s, 100..300, needs a snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_initialization_rate: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
}

/// The family's default block device mappings (gp3, encrypted), used when the spec lists none.
pub fn default_block_device_mappings(family: AmiFamily) -> Vec<BlockDeviceMapping> {
    let ebs = |gib: i64| {
        Some(BlockDevice {
            encrypted: Some(true),
            volume_size: Some(Quantity::from_gibibytes(gib)),
            volume_type: Some("gp3".to_string()),
            ..BlockDevice::default()
        })
    };
    let mapping = |device: &str, gib: i64| BlockDeviceMapping {
        device_name: Some(device.to_string()),
        ebs: ebs(gib),
        root_volume: false,
    };
    match family {
        AmiFamily::AL2 | AmiFamily::AL2023 => vec![mapping("/dev/xvda", 20)],
        AmiFamily::Bottlerocket => vec![mapping("/dev/xvda", 4), mapping("/dev/xvdb", 20)],
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => vec![mapping("/dev/sda1", 50)],
        AmiFamily::Custom => Vec::new(),
    }
}

/// `instanceStorePolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InstanceStorePolicy {
    /// A RAID-0 over the NVMe instance store holds the kubelet and containerd state.
    #[serde(rename = "RAID0")]
    Raid0,
}

/// `metadataOptions` (IMDS settings of the launch template).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetadataOptions {
    /// `enabled` or `disabled`.
    #[serde(default = "default_http_endpoint", skip_serializing_if = "Option::is_none")]
    pub http_endpoint: Option<String>,
    /// `enabled` or `disabled`.
    #[serde(
        default = "default_http_protocol_ipv6",
        rename = "httpProtocolIPv6",
        skip_serializing_if = "Option::is_none"
    )]
    pub http_protocol_ipv6: Option<String>,
    /// 1..64.
    #[serde(default = "default_hop_limit", skip_serializing_if = "Option::is_none")]
    pub http_put_response_hop_limit: Option<i64>,
    /// `required` or `optional`.
    #[serde(default = "default_http_tokens", skip_serializing_if = "Option::is_none")]
    pub http_tokens: Option<String>,
}

fn default_http_endpoint() -> Option<String> {
    Some("enabled".to_string())
}
fn default_http_protocol_ipv6() -> Option<String> {
    Some("disabled".to_string())
}
fn default_hop_limit() -> Option<i64> {
    Some(1)
}
fn default_http_tokens() -> Option<String> {
    Some("required".to_string())
}

impl Default for MetadataOptions {
    /// The CRD default.
    fn default() -> Self {
        MetadataOptions {
            http_endpoint: default_http_endpoint(),
            http_protocol_ipv6: default_http_protocol_ipv6(),
            http_put_response_hop_limit: default_hop_limit(),
            http_tokens: default_http_tokens(),
        }
    }
}

/// A `networkInterfaces` item.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkInterface {
    pub device_index: i32,
    /// `interface` or `efa-only`.
    pub interface_type: String,
    pub network_card_index: i32,
}

/// `connectionTracking` idle timeouts, in seconds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionTracking {
    #[serde(default, rename = "tcpEstablishedTimeout", skip_serializing_if = "Option::is_none")]
    pub tcp_established_timeout: Option<i32>,
    #[serde(default, rename = "udpStreamTimeout", skip_serializing_if = "Option::is_none")]
    pub udp_stream_timeout: Option<i32>,
    #[serde(default, rename = "udpTimeout", skip_serializing_if = "Option::is_none")]
    pub udp_timeout: Option<i32>,
}

/// `cpuOptions`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CpuOptions {
    /// `enabled` or `disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virtualization: Option<String>,
}

/// `status`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EC2NodeClassStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<Ami>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<CapacityReservation>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_profile: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroup>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<Subnet>,
}

/// A resolved subnet.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subnet {
    pub id: String,
    pub zone: String,
    #[serde(default, rename = "zoneID", skip_serializing_if = "String::is_empty")]
    pub zone_id: String,
}

/// A resolved security group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecurityGroup {
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// A resolved AMI with the requirements an instance type must meet to use it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ami {
    #[serde(default, skip_serializing_if = "is_false")]
    pub deprecated: bool,
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirement>,
}

/// A resolved capacity reservation.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapacityReservation {
    pub availability_zone: String,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    pub id: String,
    pub instance_match_criteria: String,
    pub instance_type: String,
    #[serde(default)]
    pub interruptible: bool,
    #[serde(rename = "ownerID")]
    pub owner_id: String,
    /// `default` or `capacity-block`.
    #[serde(default = "default_reservation_type")]
    pub reservation_type: String,
    /// `active` or `expiring`.
    #[serde(default = "default_reservation_state")]
    pub state: String,
}

fn default_reservation_type() -> String {
    "default".to_string()
}
fn default_reservation_state() -> String {
    "active".to_string()
}
