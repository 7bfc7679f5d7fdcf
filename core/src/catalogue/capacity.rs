//! Capacity, overhead and allocatable (upstream `pkg/providers/instancetype/types.go`, v1.14.1).
//!
//! Floating-point steps are done in the same order and precision as upstream, so rounding matches.

use std::collections::BTreeMap;

use crate::labels::aws::resources as ext;
use crate::quantity::Quantity;
use crate::resources::{ResourceList, CPU, EPHEMERAL_STORAGE, MEMORY, PODS};

use super::data::{Arch, InstanceTypeInfo};
use super::CatalogueError;

/// `--vm-memory-overhead-percent` default.
pub const VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.075;
/// `--reserved-enis` default.
pub const RESERVED_ENIS: i64 = 0;
/// Pods when the family does not use ENI-limited density (Windows).
pub const DEFAULT_MAX_PODS: i64 = 110;
/// Graviton's CMA reservation.
pub const ARM64_RESERVED_MIB: u64 = 64;

const GI: i64 = 1024 * 1024 * 1024;

/// What upstream's AMI family decides for capacity (`FeatureFlags`, `EphemeralBlockDevice`,
/// `DefaultBlockDeviceMappings`, the Windows build).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FamilyTraits {
    /// kube-reserved memory uses the ENI-limited pod count (AL2, AL2023, Custom).
    pub uses_eni_limited_memory_overhead: bool,
    /// `podsPerCore` is honoured (not Bottlerocket).
    pub pods_per_core_enabled: bool,
    /// Pods default to the ENI formula (not Windows).
    pub supports_eni_limited_pod_density: bool,
    /// The device the kubelet's ephemeral storage lives on (`None` for Custom).
    pub ephemeral_device: Option<&'static str>,
    /// The default size of that device's volume, bytes (`None` for Custom: the AMI decides).
    pub ephemeral_default_bytes: Option<i64>,
    /// `Some(build)` for Windows families.
    pub windows_build: Option<&'static str>,
}

impl FamilyTraits {
    pub const AL2: FamilyTraits = FamilyTraits {
        uses_eni_limited_memory_overhead: true,
        pods_per_core_enabled: true,
        supports_eni_limited_pod_density: true,
        ephemeral_device: Some("/dev/xvda"),
        ephemeral_default_bytes: Some(20 * GI),
        windows_build: None,
    };
    pub const AL2023: FamilyTraits = FamilyTraits::AL2;
    pub const BOTTLEROCKET: FamilyTraits = FamilyTraits {
        uses_eni_limited_memory_overhead: false,
        pods_per_core_enabled: false,
        supports_eni_limited_pod_density: true,
        // /dev/xvda (4Gi) holds the OS; pods use the /dev/xvdb data volume.
        ephemeral_device: Some("/dev/xvdb"),
        ephemeral_default_bytes: Some(20 * GI),
        windows_build: None,
    };
    pub const CUSTOM: FamilyTraits = FamilyTraits {
        uses_eni_limited_memory_overhead: true,
        pods_per_core_enabled: true,
        supports_eni_limited_pod_density: true,
        ephemeral_device: None,
        ephemeral_default_bytes: None,
        windows_build: None,
    };
    pub const fn windows(build: &'static str) -> FamilyTraits {
        FamilyTraits {
            uses_eni_limited_memory_overhead: false,
            pods_per_core_enabled: true,
            supports_eni_limited_pod_density: false,
            ephemeral_device: Some("/dev/sda1"),
            ephemeral_default_bytes: Some(50 * GI),
            windows_build: Some(build),
        }
    }
}

/// An `evictionHard` value: a percentage of capacity or an absolute quantity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Signal {
    Percent(f64),
    Quantity(Quantity),
}

impl Signal {
    pub fn parse(key: &str, value: &str) -> Result<Signal, CatalogueError> {
        let bad = |reason: String| CatalogueError::InvalidKubelet { field: format!("evictionHard[{key}]"), reason };
        match value.trim().strip_suffix('%') {
            Some(p) => {
                let p: f64 = p.trim().parse().map_err(|_| bad(format!("{value:?} is not a percentage")))?;
                if !p.is_finite() || !(0.0..=100.0).contains(&p) {
                    return Err(bad(format!("{value:?} is not between 0% and 100%")));
                }
                // 100% disables the threshold (kubelet semantics).
                Ok(Signal::Percent(if p == 100.0 { 0.0 } else { p }))
            }
            None => Quantity::parse(value).map(Signal::Quantity).map_err(|e| bad(e.to_string())),
        }
    }

    /// upstream `computeEvictionSignal`: `ceil(capacity / 100 × p)` for a percentage.
    fn against(self, capacity: Quantity) -> Quantity {
        match self {
            Signal::Quantity(q) => q,
            Signal::Percent(p) => Quantity::from_units((capacity.value() as f64 / 100.0 * p).ceil() as i64),
        }
    }
}

/// The NodeClass settings that shape instance types, resolved once per `instance_types` call
/// (also the key of the catalogue's instance-type cache).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    pub family: FamilyTraits,
    /// AL2023 cannot run on a1 instances (upstream `amiFamilyCompatibility`).
    pub al2023: bool,
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    pub kube_reserved: ResourceList,
    pub system_reserved: ResourceList,
    pub eviction_memory: Option<Signal>,
    pub eviction_nodefs: Option<Signal>,
    /// RAID0 instance-store policy.
    pub raid0: bool,
    /// Ephemeral storage from the block device mappings or the family default (used unless RAID0
    /// applies to a type with instance storage).
    pub ebs_ephemeral: Quantity,
    /// `efa-only` network interfaces on card 0 (they take an ENI without IPs).
    pub efa_only_card0: i64,
    /// `efa-only` interfaces in total, when the NodeClass lists network interfaces.
    pub efa_only_total: Option<i64>,
    /// The NodeClass `networkInterfaces` as (card index, device index, efa-only), for the
    /// compatibility check; empty when not set.
    pub network_interfaces: Vec<(i64, i64, bool)>,
    /// `cpuOptions.nestedVirtualization: enabled`.
    pub nested_virtualization: bool,
    /// `connectionTracking` is set (needs a Nitro hypervisor).
    pub connection_tracking: bool,
}

/// A block device mapping reduced to what capacity needs.
#[derive(Debug, Clone)]
pub(crate) struct Bdm<'a> {
    pub device_name: Option<&'a str>,
    pub root_volume: bool,
    pub volume_size: Option<Quantity>,
}

/// upstream `ephemeralStorage` without the RAID0 branch (which depends on the type).
pub(crate) fn ebs_ephemeral_storage(family: &FamilyTraits, bdms: &[Bdm<'_>]) -> Quantity {
    let default = Quantity::from_bytes(20 * GI);
    if !bdms.is_empty() {
        if let Some(size) = bdms.iter().find(|b| b.root_volume).and_then(|b| b.volume_size) {
            return size;
        }
        match family.ephemeral_device {
            // Custom: we cannot know the AMI's layout; take the last mapping.
            None => return bdms.last().and_then(|b| b.volume_size).unwrap_or(default),
            Some(device) => {
                if let Some(size) = bdms.iter().find(|b| b.device_name == Some(device)).and_then(|b| b.volume_size) {
                    return size;
                }
            }
        }
    }
    family.ephemeral_default_bytes.map(Quantity::from_bytes).unwrap_or(default)
}

impl InstanceTypeInfo {
    /// The ENI-limited pod count with no reserved ENIs: `ENIs × (IPv4 per ENI − 1) + 2`.
    pub fn eni_limited_pods(&self) -> i64 {
        eni_limited_pods(self, 0, 0)
    }
}

/// upstream `ENILimitedPods`: `usableENIs × (IPv4 per ENI − 1) + 2`, 0 when no ENI is usable.
pub(crate) fn eni_limited_pods(info: &InstanceTypeInfo, reserved_enis: i64, efa_only_card0: i64) -> i64 {
    let usable = (i64::from(info.default_card_enis) - reserved_enis - efa_only_card0).max(0);
    if usable == 0 {
        return 0;
    }
    usable * (i64::from(info.ipv4_per_eni) - 1) + 2
}

/// upstream `pods`.
pub(crate) fn pods(info: &InstanceTypeInfo, s: &Settings) -> i64 {
    let mut count = match s.max_pods {
        Some(n) => n,
        None if s.family.supports_eni_limited_pod_density => eni_limited_pods(info, RESERVED_ENIS, s.efa_only_card0),
        None => DEFAULT_MAX_PODS,
    };
    if let Some(ppc) = s.pods_per_core.filter(|p| *p > 0) {
        if s.family.pods_per_core_enabled {
            count = count.min(ppc * i64::from(info.vcpu));
        }
    }
    count
}

/// upstream `memory`: MiB, minus 64 MiB on arm64, minus `ceil(MiB × VM overhead)`.
pub(crate) fn memory(info: &InstanceTypeInfo) -> Quantity {
    let mut mib = info.memory_mib as i64;
    if info.arch == Arch::Arm64 {
        mib -= ARM64_RESERVED_MIB as i64;
    }
    let bytes = mib * 1024 * 1024;
    let overhead_mib = (bytes as f64 * VM_MEMORY_OVERHEAD_PERCENT / 1024.0 / 1024.0).ceil() as i64;
    Quantity::from_mebibytes(mib - overhead_mib)
}

/// upstream `ephemeralStorage`.
pub(crate) fn ephemeral_storage(info: &InstanceTypeInfo, s: &Settings) -> Quantity {
    match info.instance_storage_gb {
        Some(gb) if s.raid0 => Quantity::from_units(gb as i64 * 1_000_000_000),
        _ => s.ebs_ephemeral,
    }
}

/// upstream `kubeReservedResources`: memory `11Mi × pods + 255Mi`, ephemeral 1Gi, tiered CPU,
/// then the user's keys replace the defaults.
pub(crate) fn kube_reserved(vcpu: u32, pods: i64, overrides: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert(MEMORY.into(), Quantity::from_mebibytes(11 * pods + 255));
    out.insert(EPHEMERAL_STORAGE.into(), Quantity::from_gibibytes(1));
    out.insert(CPU.into(), Quantity::from_millis(kube_reserved_cpu_millis(i64::from(vcpu) * 1000)));
    for (k, v) in overrides {
        out.insert(k.clone(), *v);
    }
    out
}

/// 6% of the first core, 1% of the second, 0.5% of cores 3–4, 0.25% of the rest (each tier
/// truncated to whole millicores, as upstream).
pub(crate) fn kube_reserved_cpu_millis(cpu_millis: i64) -> i64 {
    const TIERS: [(i64, i64, f64); 4] =
        [(0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025)];
    let mut total = 0;
    for (start, end, pct) in TIERS {
        if cpu_millis >= start {
            let r = if cpu_millis < end { cpu_millis - start } else { end - start };
            total += (r as f64 * pct) as i64;
        }
    }
    total
}

/// upstream `evictionThreshold`: memory 100Mi and ephemeral `ceil(10% of storage)`, replaced by
/// `evictionHard` `memory.available` / `nodefs.available` when set.
pub(crate) fn eviction_threshold(memory: Quantity, storage: Quantity, s: &Settings) -> ResourceList {
    let mut out = ResourceList::new();
    let mem = s.eviction_memory.map_or(Quantity::from_mebibytes(100), |sig| sig.against(memory));
    let eph = s.eviction_nodefs.map_or_else(
        || Quantity::from_units((storage.value() as f64 / 100.0 * 10.0).ceil() as i64),
        |sig| sig.against(storage),
    );
    out.insert(MEMORY.into(), mem);
    out.insert(EPHEMERAL_STORAGE.into(), eph);
    out
}

/// upstream `computeCapacity` (plus the Windows `PrivateIPv4Address`, added by the caller).
pub(crate) fn capacity(info: &InstanceTypeInfo, s: &Settings) -> ResourceList {
    let count =
        |mfr: &str| -> i64 { info.gpus.iter().filter(|g| g.manufacturer == mfr).map(|g| i64::from(g.count)).sum() };
    let neuron_devices: i64 = info.neuron_devices.iter().map(|d| i64::from(d.count)).sum();
    let neuron_cores = info.neuron_devices.first().map_or(0, |d| i64::from(d.count) * i64::from(d.cores));
    let efa = match s.efa_only_total {
        Some(n) => n,
        None => info.efa_max_interfaces.map_or(0, i64::from),
    };
    let entries: [(&str, Quantity); 11] = [
        (CPU, Quantity::from_units(i64::from(info.vcpu))),
        (MEMORY, memory(info)),
        (EPHEMERAL_STORAGE, ephemeral_storage(info, s)),
        (PODS, Quantity::from_units(pods(info, s))),
        (ext::AWS_POD_ENI, Quantity::from_units(info.branch_enis.map_or(0, i64::from))),
        (ext::NVIDIA_GPU, Quantity::from_units(count("NVIDIA"))),
        (ext::AMD_GPU, Quantity::from_units(count("AMD"))),
        (ext::AWS_NEURON, Quantity::from_units(neuron_devices)),
        (ext::AWS_NEURON_CORE, Quantity::from_units(neuron_cores)),
        (ext::HABANA_GAUDI, Quantity::from_units(count("Habana"))),
        (ext::EFA, Quantity::from_units(efa)),
    ];
    entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Kubelet reservations given as a map of resource name → quantity, validated.
pub(crate) fn reserved_list(field: &str, map: &BTreeMap<String, Quantity>) -> Result<ResourceList, CatalogueError> {
    for (k, v) in map {
        if v.is_negative() {
            return Err(CatalogueError::InvalidKubelet {
                field: format!("{field}[{k}]"),
                reason: format!("{v} is negative"),
            });
        }
    }
    Ok(map.clone())
}
