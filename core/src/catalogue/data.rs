//! The schema of the catalogue data file (`core/data/ec2-catalogue.json`, schema [`SCHEMA`]):
//! the only definition of its layout. The reader ([`super::Catalogue::from_json`]) deserialises
//! these types and the generator (`cargo xtask catalog`, `xtask/src/catalog.rs`) builds and
//! serialises them, so the two cannot drift apart. The format is documented in
//! `core/data/PROVENANCE.md`.
//!
//! Serialisation writes the compact form the data file uses: optional fields are left out when
//! `None`, `false` (`true` for `ena`) or empty, and deserialisation restores those defaults.

use serde::{Deserialize, Serialize};

/// The schema version: written by the generator, checked by the reader. Bump it whenever the
/// layout of these types changes.
pub const SCHEMA: u32 = 1;

/// The whole file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CatalogueFile {
    pub schema: u32,
    pub provenance: Provenance,
    pub types: Vec<InstanceTypeInfo>,
    pub regions: Vec<RegionFile>,
}

/// One region: its zone IDs and, aligned with `types`, a bitmask of the zones offering each type.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RegionFile {
    pub name: String,
    /// Sorted by prefix, then by trailing number (`az2` before `az10`); zone names follow this order.
    pub zone_ids: Vec<String>,
    /// One entry per element of `types`: bit i set when the type is offered in `zone_ids[i]`.
    pub offered: Vec<u64>,
}

/// Where the data came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// The generator and schema version (`carpentry xtask catalog 0.1.0 (schema 1)`).
    pub generator: String,
    /// The generation date, YYYY-MM-DD.
    pub generated_at: String,
    pub inputs: Vec<ProvenanceInput>,
    /// Human-readable notes on what is data and what is derived.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One input file of one registry package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvenanceInput {
    /// Package name (`moto`, `github.com/aws/karpenter-provider-aws`).
    pub package: String,
    /// The registry it came from (`PyPI`, `Go module proxy`).
    pub registry: String,
    pub version: String,
    /// The file inside the package.
    pub file: String,
    /// When the data in that file was produced (the file's own "generated at" stamp or the
    /// package build date), YYYY-MM-DD.
    pub date: String,
    /// What was taken from it.
    pub content: String,
}

/// CPU architecture as Kubernetes spells it (`kubernetes.io/arch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// EC2 `x86_64` (including types that also list `i386`).
    Amd64,
    /// EC2 `arm64` (Graviton).
    Arm64,
}

impl Arch {
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }
}

/// One GPU entry of `GpuInfo.Gpus`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    pub name: String,
    #[serde(rename = "mfr")]
    pub manufacturer: String,
    pub count: u32,
    /// Memory per GPU.
    pub mem_mib: u64,
}

/// One entry of `InferenceAcceleratorInfo.Accelerators`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accelerator {
    pub name: String,
    #[serde(rename = "mfr")]
    pub manufacturer: String,
    pub count: u32,
}

/// One entry of `NeuronInfo.NeuronDevices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeuronDevice {
    pub name: String,
    pub count: u32,
    /// Neuron cores per device.
    pub cores: u32,
}

fn yes() -> bool {
    true
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The raw facts of one instance type, as `DescribeInstanceTypes` (via moto) and karpenter's
/// generated tables state them. Nothing here depends on a NodeClass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceTypeInfo {
    pub name: String,
    /// `VCpuInfo.DefaultVCpus`.
    pub vcpu: u32,
    /// `MemoryInfo.SizeInMiB` (raw; capacity subtracts overheads).
    #[serde(rename = "mem_mib")]
    pub memory_mib: u64,
    pub arch: Arch,
    /// `ProcessorInfo.Manufacturer` as EC2 spells it (`Intel`, `AMD`, `AWS`).
    #[serde(rename = "cpu_mfr")]
    pub cpu_manufacturer: String,
    /// `round(SustainedClockSpeedInGhz × 1000)`; absent for a few old types.
    #[serde(rename = "mhz", default, skip_serializing_if = "Option::is_none")]
    pub sustained_clock_mhz: Option<u32>,
    /// `nitro`, `xen`, or empty (bare metal).
    #[serde(rename = "hv", default, skip_serializing_if = "String::is_empty")]
    pub hypervisor: String,
    #[serde(rename = "metal", default, skip_serializing_if = "is_false")]
    pub bare_metal: bool,
    /// `SupportedUsageClasses`: `on-demand`, `spot`, `capacity-block`.
    #[serde(rename = "usage")]
    pub usage_classes: Vec<String>,
    /// `MaximumNetworkInterfaces` of the default network card (what the VPC CNI uses).
    #[serde(rename = "enis")]
    pub default_card_enis: u32,
    /// `Ipv4AddressesPerInterface`.
    #[serde(rename = "ipv4")]
    pub ipv4_per_eni: u32,
    /// Maximum ENIs of every network card by index, only for types with more than one card.
    #[serde(rename = "cards", default, skip_serializing_if = "Vec::is_empty")]
    pub network_cards: Vec<u32>,
    /// ENA support is not `unsupported`.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub ena: bool,
    /// `EfaInfo.MaximumEfaInterfaces`, for EFA-capable types.
    #[serde(rename = "efa", default, skip_serializing_if = "Option::is_none")]
    pub efa_max_interfaces: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<Gpu>,
    #[serde(rename = "accels", default, skip_serializing_if = "Vec::is_empty")]
    pub inference_accelerators: Vec<Accelerator>,
    #[serde(rename = "neuron", default, skip_serializing_if = "Vec::is_empty")]
    pub neuron_devices: Vec<NeuronDevice>,
    /// `InstanceStorageInfo.TotalSizeInGB` (decimal GB).
    #[serde(rename = "storage_gb", default, skip_serializing_if = "Option::is_none")]
    pub instance_storage_gb: Option<u64>,
    /// Instance storage exists and its NVMe support is not `unsupported`.
    #[serde(rename = "nvme", default, skip_serializing_if = "is_false")]
    pub instance_storage_nvme: bool,
    /// `EbsOptimizedInfo.MaximumBandwidthInMbps`, only when EBS optimisation is `default`.
    #[serde(rename = "ebs_mbps", default, skip_serializing_if = "Option::is_none")]
    pub ebs_bandwidth_mbps: Option<u64>,
    /// karpenter's `InstanceTypeBandwidthMegabits` (absent where the docs give only vague values).
    #[serde(rename = "net_mbps", default, skip_serializing_if = "Option::is_none")]
    pub network_bandwidth_mbps: Option<u64>,
    #[serde(rename = "eit", default, skip_serializing_if = "is_false")]
    pub encryption_in_transit: bool,
    /// `NitroEnclavesSupport == supported`.
    #[serde(rename = "enclaves", default, skip_serializing_if = "is_false")]
    pub nitro_enclaves: bool,
    /// `ProcessorInfo.SupportedFeatures` contains `nested-virtualization`.
    #[serde(rename = "nested_virt", default, skip_serializing_if = "is_false")]
    pub nested_virtualization: bool,
    /// `BranchInterface` from karpenter's vpclimits table, when the type is trunking-compatible.
    #[serde(rename = "pod_eni", default, skip_serializing_if = "Option::is_none")]
    pub branch_enis: Option<u32>,
    /// `IPv4PerInterface` from karpenter's vpclimits table, when the type is listed there (Windows
    /// `vpc.amazonaws.com/PrivateIPv4Address` uses it).
    #[serde(rename = "vpc_ipv4", default, skip_serializing_if = "Option::is_none")]
    pub vpc_ipv4_per_eni: Option<u32>,
    /// On-demand USD/hour from karpenter's us-east-1 table; `None` when the table has no price.
    #[serde(rename = "od_usd", default, skip_serializing_if = "Option::is_none")]
    pub on_demand_price: Option<f64>,
}

impl InstanceTypeInfo {
    /// Whether the type supports a usage class (`on-demand`, `spot`, `capacity-block`).
    pub fn supports(&self, usage_class: &str) -> bool {
        self.usage_classes.iter().any(|u| u == usage_class)
    }
}
