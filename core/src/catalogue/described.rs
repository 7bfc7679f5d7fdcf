//! What `DescribeInstanceTypes` says about one instance type, and the facts the catalogue keeps
//! of it ([`InstanceTypeInfo`]). The one place these rules live: the data generator reads moto's
//! records (the `DescribeInstanceTypes` JSON shape) into [`DescribedInstanceType`] with serde, the
//! controller fills it from the AWS SDK's answer, and both convert it here.
//!
//! Mirrors upstream karpenter-provider-aws v1.14.1 `pkg/providers/instancetype/instancetype.go`
//! (the `supported-virtualization-type=hvm`, `processor-info.supported-architecture` filter) and
//! the fields `pkg/providers/instancetype/types.go` reads. The tables EC2 does not answer
//! (on-demand prices, documented bandwidth, VPC branch-ENI limits) come in [`KarpenterTables`].

use serde::Deserialize;

use super::data::{Accelerator, Arch, Gpu, InstanceTypeInfo, NeuronDevice};

/// Why a described instance type cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("instance type {instance_type}: {problem}")]
pub struct DescribedError {
    pub instance_type: String,
    pub problem: String,
}

/// One `InstanceTypeInfo` record of `DescribeInstanceTypes`: the fields carpentry reads, named as
/// EC2 names them. Absent fields are `None` or empty; unknown fields are ignored.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedInstanceType {
    #[serde(rename = "InstanceType")]
    pub instance_type: String,
    #[serde(rename = "SupportedVirtualizationTypes")]
    pub virtualization_types: Vec<String>,
    #[serde(rename = "ProcessorInfo")]
    pub processor: DescribedProcessor,
    #[serde(rename = "VCpuInfo")]
    pub vcpu: DescribedVCpu,
    #[serde(rename = "MemoryInfo")]
    pub memory: DescribedMemory,
    #[serde(rename = "Hypervisor")]
    pub hypervisor: Option<String>,
    #[serde(rename = "BareMetal")]
    pub bare_metal: Option<bool>,
    #[serde(rename = "SupportedUsageClasses")]
    pub usage_classes: Vec<String>,
    #[serde(rename = "NetworkInfo")]
    pub network: DescribedNetwork,
    #[serde(rename = "GpuInfo")]
    pub gpu: Option<DescribedGpuInfo>,
    #[serde(rename = "InferenceAcceleratorInfo")]
    pub inference_accelerators: Option<DescribedAcceleratorInfo>,
    #[serde(rename = "NeuronInfo")]
    pub neuron: Option<DescribedNeuronInfo>,
    #[serde(rename = "InstanceStorageInfo")]
    pub instance_storage: Option<DescribedInstanceStorage>,
    #[serde(rename = "EbsInfo")]
    pub ebs: DescribedEbs,
    #[serde(rename = "NitroEnclavesSupport")]
    pub nitro_enclaves_support: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedProcessor {
    #[serde(rename = "SupportedArchitectures")]
    pub architectures: Vec<String>,
    #[serde(rename = "Manufacturer")]
    pub manufacturer: Option<String>,
    #[serde(rename = "SustainedClockSpeedInGhz")]
    pub sustained_clock_ghz: Option<f64>,
    #[serde(rename = "SupportedFeatures")]
    pub features: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedVCpu {
    #[serde(rename = "DefaultVCpus")]
    pub default_vcpus: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedMemory {
    #[serde(rename = "SizeInMiB")]
    pub size_mib: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedNetwork {
    #[serde(rename = "DefaultNetworkCardIndex")]
    pub default_card: Option<i64>,
    #[serde(rename = "NetworkCards")]
    pub cards: Vec<DescribedNetworkCard>,
    #[serde(rename = "Ipv4AddressesPerInterface")]
    pub ipv4_per_interface: Option<i64>,
    #[serde(rename = "EnaSupport")]
    pub ena_support: Option<String>,
    #[serde(rename = "EfaInfo")]
    pub efa: Option<DescribedEfa>,
    #[serde(rename = "EncryptionInTransitSupported")]
    pub encryption_in_transit: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedNetworkCard {
    #[serde(rename = "NetworkCardIndex")]
    pub index: Option<i64>,
    #[serde(rename = "MaximumNetworkInterfaces")]
    pub max_interfaces: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedEfa {
    #[serde(rename = "MaximumEfaInterfaces")]
    pub max_interfaces: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedGpuInfo {
    #[serde(rename = "Gpus")]
    pub gpus: Vec<DescribedDevice>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedAcceleratorInfo {
    #[serde(rename = "Accelerators")]
    pub accelerators: Vec<DescribedDevice>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedNeuronInfo {
    #[serde(rename = "NeuronDevices")]
    pub devices: Vec<DescribedDevice>,
}

/// A GPU, inference accelerator or Neuron device entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedDevice {
    #[serde(rename = "Name")]
    pub name: Option<String>,
    #[serde(rename = "Manufacturer")]
    pub manufacturer: Option<String>,
    #[serde(rename = "Count")]
    pub count: Option<i64>,
    /// GPUs: memory per device.
    #[serde(rename = "MemoryInfo")]
    pub memory: DescribedMemory,
    /// Neuron devices: cores per device.
    #[serde(rename = "CoreInfo")]
    pub cores: DescribedCoreInfo,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedCoreInfo {
    #[serde(rename = "Count")]
    pub count: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedInstanceStorage {
    #[serde(rename = "TotalSizeInGB")]
    pub total_gb: Option<i64>,
    #[serde(rename = "NvmeSupport")]
    pub nvme_support: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedEbs {
    #[serde(rename = "EbsOptimizedSupport")]
    pub optimized_support: Option<String>,
    #[serde(rename = "EbsOptimizedInfo")]
    pub optimized: DescribedEbsOptimized,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DescribedEbsOptimized {
    #[serde(rename = "MaximumBandwidthInMbps")]
    pub max_bandwidth_mbps: Option<i64>,
}

/// What karpenter-provider-aws knows of a type from its generated tables, not from EC2.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KarpenterTables {
    /// `InitialOnDemandPricesAWS` (USD/hour).
    pub on_demand_price: Option<f64>,
    /// `InstanceTypeBandwidthMegabits`.
    pub network_bandwidth_mbps: Option<u64>,
    /// `Limits[type].BranchInterface`, when `IsTrunkingCompatible`.
    pub branch_enis: Option<u32>,
    /// `Limits[type].IPv4PerInterface`.
    pub vpc_ipv4_per_eni: Option<u32>,
}

impl KarpenterTables {
    /// The table values a catalogue entry already carries (the controller keeps the embedded
    /// tables when EC2 describes the type afresh).
    pub fn of(info: &InstanceTypeInfo) -> KarpenterTables {
        KarpenterTables {
            on_demand_price: info.on_demand_price,
            network_bandwidth_mbps: info.network_bandwidth_mbps,
            branch_enis: info.branch_enis,
            vpc_ipv4_per_eni: info.vpc_ipv4_per_eni,
        }
    }
}

const HVM: &str = "hvm";
const X86_64: &str = "x86_64";
const ARM64: &str = "arm64";

impl DescribedInstanceType {
    /// Whether upstream's `DescribeInstanceTypes` filter keeps the type: hvm, and x86_64 or arm64.
    pub fn is_listed(&self) -> bool {
        self.virtualization_types.iter().any(|v| v == HVM)
            && self.processor.architectures.iter().any(|a| a == X86_64 || a == ARM64)
    }

    /// The catalogue's facts of this type; `None` when upstream's filter leaves it out.
    pub fn info(&self, tables: &KarpenterTables) -> Result<Option<InstanceTypeInfo>, DescribedError> {
        if !self.is_listed() {
            return Ok(None);
        }
        let name = &self.instance_type;
        let bad = |problem: String| DescribedError { instance_type: name.clone(), problem };
        let count = |v: Option<i64>, what: &str| -> Result<u32, DescribedError> {
            v.and_then(|n| u32::try_from(n).ok()).ok_or_else(|| bad(format!("missing or bad {what}")))
        };
        let archs = &self.processor.architectures;
        // Upstream maps the first recognised architecture; memory treats the type as Graviton when
        // the first listed architecture is arm64. Both must agree.
        let arch = match archs.iter().find(|a| *a == X86_64 || *a == ARM64).map(String::as_str) {
            Some(ARM64) => {
                if archs[0] != ARM64 {
                    return Err(bad("arm64 is not the first architecture".into()));
                }
                Arch::Arm64
            }
            _ => Arch::Amd64,
        };
        let net = &self.network;
        let default_card = net.default_card.unwrap_or(0);
        let mut card_max: Vec<(i64, u32)> = net
            .cards
            .iter()
            .map(|c| Ok((c.index.unwrap_or(0), count(c.max_interfaces, "NetworkCards[].MaximumNetworkInterfaces")?)))
            .collect::<Result<_, DescribedError>>()?;
        card_max.sort();
        let enis = card_max
            .iter()
            .find(|(i, _)| *i == default_card)
            .map(|(_, n)| *n)
            .ok_or_else(|| bad("no default network card".into()))?;
        let cards = if card_max.len() > 1 {
            if !card_max.iter().enumerate().all(|(i, (idx, _))| i as i64 == *idx) {
                return Err(bad("network card indices are not 0..n".into()));
            }
            card_max.iter().map(|(_, n)| *n).collect()
        } else {
            Vec::new()
        };
        let text = |s: &Option<String>| s.clone().unwrap_or_default();
        let gpus = self
            .gpu
            .iter()
            .flat_map(|g| &g.gpus)
            .map(|g| {
                Ok(Gpu {
                    name: text(&g.name),
                    manufacturer: text(&g.manufacturer),
                    count: count(g.count, "GpuInfo.Gpus[].Count")?,
                    mem_mib: g.memory.size_mib.and_then(|m| u64::try_from(m).ok()).unwrap_or(0),
                })
            })
            .collect::<Result<Vec<_>, DescribedError>>()?;
        let inference_accelerators = self
            .inference_accelerators
            .iter()
            .flat_map(|a| &a.accelerators)
            .map(|a| {
                Ok(Accelerator {
                    name: text(&a.name),
                    manufacturer: text(&a.manufacturer),
                    count: count(a.count, "InferenceAcceleratorInfo.Accelerators[].Count")?,
                })
            })
            .collect::<Result<Vec<_>, DescribedError>>()?;
        let neuron_devices = self
            .neuron
            .iter()
            .flat_map(|n| &n.devices)
            .map(|d| {
                Ok(NeuronDevice {
                    name: text(&d.name),
                    count: count(d.count, "NeuronDevices[].Count")?,
                    cores: count(d.cores.count, "NeuronDevices[].CoreInfo.Count")?,
                })
            })
            .collect::<Result<Vec<_>, DescribedError>>()?;
        let ebs_bandwidth_mbps = if self.ebs.optimized_support.as_deref() == Some("default") {
            self.ebs.optimized.max_bandwidth_mbps.and_then(|m| u64::try_from(m).ok())
        } else {
            None
        };
        let memory_mib =
            self.memory.size_mib.and_then(|m| u64::try_from(m).ok()).ok_or_else(|| bad("no memory".into()))?;
        Ok(Some(InstanceTypeInfo {
            name: name.clone(),
            vcpu: count(self.vcpu.default_vcpus, "VCpuInfo.DefaultVCpus")?,
            memory_mib,
            arch,
            cpu_manufacturer: text(&self.processor.manufacturer),
            sustained_clock_mhz: self.processor.sustained_clock_ghz.map(|ghz| (ghz * 1000.0).round() as u32),
            hypervisor: text(&self.hypervisor),
            bare_metal: self.bare_metal.unwrap_or(false),
            usage_classes: self.usage_classes.clone(),
            default_card_enis: enis,
            ipv4_per_eni: count(net.ipv4_per_interface, "NetworkInfo.Ipv4AddressesPerInterface")?,
            network_cards: cards,
            ena: net.ena_support.as_deref() != Some("unsupported"),
            efa_max_interfaces: net.efa.as_ref().and_then(|e| e.max_interfaces).map(|n| n as u32),
            gpus,
            inference_accelerators,
            neuron_devices,
            instance_storage_gb: self
                .instance_storage
                .as_ref()
                .and_then(|s| s.total_gb)
                .and_then(|g| u64::try_from(g).ok()),
            instance_storage_nvme: self
                .instance_storage
                .as_ref()
                .is_some_and(|s| s.nvme_support.as_deref() != Some("unsupported")),
            ebs_bandwidth_mbps,
            network_bandwidth_mbps: tables.network_bandwidth_mbps,
            encryption_in_transit: net.encryption_in_transit.unwrap_or(false),
            nitro_enclaves: self.nitro_enclaves_support.as_deref() == Some("supported"),
            nested_virtualization: self.processor.features.iter().any(|f| f == "nested-virtualization"),
            branch_enis: tables.branch_enis,
            vpc_ipv4_per_eni: tables.vpc_ipv4_per_eni,
            on_demand_price: tables.on_demand_price,
        }))
    }
}
