//! Instance-type requirements (upstream `computeRequirements` in
//! `pkg/providers/instancetype/types.go`, v1.14.1).
//!
//! Every well-known AWS label is present: `In [value]` when it applies, `DoesNotExist` when it does
//! not (so pods can select "no GPU"). Only single-valued requirements become node labels.
//!
//! Split for speed: [`base`] holds what depends only on the type (built once per catalogue);
//! [`Dynamic`] adds the region, zone, zone-ID, OS and Windows-build keys per query.

use std::sync::OnceLock;

use crate::labels::{self, aws};
use crate::requirements::{Requirement, Requirements};

use super::capacity::FamilyTraits;
use super::data::{Arch, InstanceTypeInfo};

/// upstream `lowerKabobCase`.
pub(crate) fn lower_kebab(s: &str) -> String {
    s.replace(' ', "-").to_lowercase()
}

/// Category and generation as upstream's `(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.` extracts them
/// (`m7i-flex.large` → `m`, `7`; `u-6tb1.metal` → `u`, `1`); `None` when the pattern does not match
/// (`mac-m4.metal`).
pub(crate) fn category_and_generation(name: &str) -> Option<(&str, &str)> {
    let b = name.as_bytes();
    let letters = b.iter().take_while(|c| c.is_ascii_lowercase()).count();
    if letters == 0 {
        return None;
    }
    let digits_at = |i: usize| b[i.min(b.len())..].iter().take_while(|c| c.is_ascii_digit()).count();
    let generation_from = |start: usize| -> Option<(&str, &str)> {
        let n = digits_at(start);
        // `([0-9]+).*\.`: at least one digit, then a dot somewhere after.
        (n > 0 && name[start + n..].contains('.')).then(|| (&name[..letters], &name[start..start + n]))
    };
    // The optional `-<n>tb` group is tried first (greedy), then without it.
    if b.get(letters) == Some(&b'-') {
        let n = digits_at(letters + 1);
        let tb = letters + 1 + n;
        if n > 0 && name[tb..].starts_with("tb") {
            if let Some(found) = generation_from(tb + 2) {
                return Some(found);
            }
        }
    }
    generation_from(letters)
}

fn one(key: &str, value: impl AsRef<str>) -> Requirement {
    Requirement::in_values(key, &[value.as_ref()])
}

/// The keys [`base`] leaves out: they depend on the region, the zones offering the type, or the
/// NodeClass's AMI family, and are added per query by [`Dynamic::complete`].
pub(crate) const DYNAMIC_KEYS: [&str; 5] =
    [labels::OS, labels::TOPOLOGY_ZONE, labels::TOPOLOGY_REGION, labels::WINDOWS_BUILD, aws::TOPOLOGY_ZONE_ID];

/// The requirements of one instance type that depend only on the type's own facts (everything but
/// [`DYNAMIC_KEYS`]). Built once per catalogue and cloned per query (a clone shares every key and
/// value list).
pub(crate) fn base(info: &InstanceTypeInfo) -> Requirements {
    let mut capacity_types: Vec<&str> = Vec::with_capacity(2);
    for ct in [labels::CAPACITY_TYPE_ON_DEMAND, labels::CAPACITY_TYPE_SPOT] {
        if info.supports(ct) {
            capacity_types.push(ct);
        }
    }
    let dne = Requirement::does_not_exist;
    let mut r: Vec<Requirement> = Vec::with_capacity(40);
    // Well known upstream.
    r.push(one(labels::INSTANCE_TYPE, &info.name));
    r.push(one(labels::ARCH, info.arch.as_str()));
    // Well known to karpenter.
    r.push(Requirement::in_values(labels::CAPACITY_TYPE, &capacity_types));
    // Well known to AWS.
    r.push(one(aws::INSTANCE_CPU, info.vcpu.to_string()));
    r.push(one(aws::INSTANCE_CPU_MANUFACTURER, lower_kebab(&info.cpu_manufacturer)));
    // upstream reads a missing clock speed as 0 GHz and so labels it "0".
    r.push(one(aws::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, info.sustained_clock_mhz.unwrap_or(0).to_string()));
    r.push(one(aws::INSTANCE_MEMORY, info.memory_mib.to_string()));
    r.push(match info.ebs_bandwidth_mbps {
        Some(b) => one(aws::INSTANCE_EBS_BANDWIDTH, b.to_string()),
        None => dne(aws::INSTANCE_EBS_BANDWIDTH),
    });
    r.push(match info.network_bandwidth_mbps {
        Some(b) => one(aws::INSTANCE_NETWORK_BANDWIDTH, b.to_string()),
        None => dne(aws::INSTANCE_NETWORK_BANDWIDTH),
    });
    match category_and_generation(&info.name) {
        Some((category, generation)) => {
            r.push(one(aws::INSTANCE_CATEGORY, category));
            r.push(one(aws::INSTANCE_GENERATION, generation));
        }
        None => {
            r.push(dne(aws::INSTANCE_CATEGORY));
            r.push(dne(aws::INSTANCE_GENERATION));
        }
    }
    let parts: Vec<&str> = info.name.split('.').collect();
    match parts.as_slice() {
        [family_name, size] => {
            r.push(one(aws::INSTANCE_FAMILY, family_name));
            r.push(one(aws::INSTANCE_SIZE, size));
        }
        _ => {
            r.push(dne(aws::INSTANCE_FAMILY));
            r.push(dne(aws::INSTANCE_SIZE));
        }
    }
    r.push(one(aws::INSTANCE_CAPABILITY_FLEX, if parts[0].contains("-flex") { "true" } else { "false" }));
    r.push(match info.instance_storage_gb {
        Some(gb) if info.instance_storage_nvme => one(aws::INSTANCE_LOCAL_NVME, gb.to_string()),
        _ => dne(aws::INSTANCE_LOCAL_NVME),
    });
    match info.gpus.as_slice() {
        [gpu] => {
            r.push(one(aws::INSTANCE_GPU_NAME, lower_kebab(&gpu.name)));
            r.push(one(aws::INSTANCE_GPU_MANUFACTURER, lower_kebab(&gpu.manufacturer)));
            r.push(one(aws::INSTANCE_GPU_COUNT, gpu.count.to_string()));
            r.push(one(aws::INSTANCE_GPU_MEMORY, gpu.mem_mib.to_string()));
        }
        _ => {
            for key in [
                aws::INSTANCE_GPU_NAME,
                aws::INSTANCE_GPU_MANUFACTURER,
                aws::INSTANCE_GPU_COUNT,
                aws::INSTANCE_GPU_MEMORY,
            ] {
                r.push(dne(key));
            }
        }
    }
    // Accelerators: a single Neuron device wins; otherwise a single inference accelerator, but
    // only on types without Neuron info.
    let accelerator = match (info.neuron_devices.as_slice(), info.inference_accelerators.as_slice()) {
        ([device], _) => Some((lower_kebab(&device.name), "aws".to_string(), device.count)),
        ([], [acc]) => Some((lower_kebab(&acc.name), lower_kebab(&acc.manufacturer), acc.count)),
        _ => None,
    };
    match accelerator {
        Some((name, manufacturer, count)) => {
            r.push(one(aws::INSTANCE_ACCELERATOR_NAME, name));
            r.push(one(aws::INSTANCE_ACCELERATOR_MANUFACTURER, manufacturer));
            r.push(one(aws::INSTANCE_ACCELERATOR_COUNT, count.to_string()));
        }
        None => {
            for key in [
                aws::INSTANCE_ACCELERATOR_NAME,
                aws::INSTANCE_ACCELERATOR_MANUFACTURER,
                aws::INSTANCE_ACCELERATOR_COUNT,
            ] {
                r.push(dne(key));
            }
        }
    }
    r.push(one(aws::INSTANCE_HYPERVISOR, &info.hypervisor));
    r.push(one(aws::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED, info.encryption_in_transit.to_string()));
    r.push(Requirement::in_values(aws::INSTANCE_TENANCY, &["default", "dedicated"]));
    // No reservation by default; `Catalogue::with_reservations` lists a NodeClass's reservations here.
    r.push(dne(aws::CAPACITY_RESERVATION_ID));
    r.push(dne(aws::CAPACITY_RESERVATION_TYPE));
    r.push(dne(aws::CAPACITY_RESERVATION_INTERRUPTIBLE));
    in_key_order(r).into_iter().collect()
}

/// `r` in key order, cheaply: every type pushes the same keys in the same order, so the sorting
/// permutation is found once and reused. (Collecting into [`Requirements`] checks the order and
/// sorts if it is wrong, so this is only ever a shortcut.)
fn in_key_order(r: Vec<Requirement>) -> Vec<Requirement> {
    static ORDER: OnceLock<Vec<usize>> = OnceLock::new();
    let order = ORDER.get_or_init(|| {
        let mut order: Vec<usize> = (0..r.len()).collect();
        order.sort_by(|&a, &b| r[a].key().cmp(r[b].key()));
        order
    });
    if order.len() != r.len() {
        return r;
    }
    let mut slots: Vec<Option<Requirement>> = r.into_iter().map(Some).collect();
    order.iter().filter_map(|&i| slots[i].take()).collect()
}

/// The requirements that depend on the region, the offering zones or the AMI family
/// ([`DYNAMIC_KEYS`]), built once per query and shared by every type.
pub(crate) struct Dynamic {
    region: Requirement,
    windows_build: Requirement,
    /// `os` by [`Arch`] (amd64, arm64).
    os: [Requirement; 2],
    /// (offering-zone mask, zone requirement, zone-ID requirement), built on first use per mask.
    zones: Vec<(u64, Requirement, Requirement)>,
}

impl Dynamic {
    pub(crate) fn new(region: &str, family: &FamilyTraits) -> Dynamic {
        // `linux`, or for Windows families `windows` on amd64 and nothing on arm64.
        let os = |arch: Arch| -> Requirement {
            let values: &[&str] = match (family.windows_build, arch) {
                (None, _) => &["linux"],
                (Some(_), Arch::Amd64) => &["windows"],
                (Some(_), Arch::Arm64) => &[],
            };
            Requirement::in_values(labels::OS, values)
        };
        Dynamic {
            region: one(labels::TOPOLOGY_REGION, region),
            windows_build: match family.windows_build {
                Some(build) => one(labels::WINDOWS_BUILD, build),
                None => Requirement::does_not_exist(labels::WINDOWS_BUILD),
            },
            os: [os(Arch::Amd64), os(Arch::Arm64)],
            zones: Vec::new(),
        }
    }

    /// The full requirements of one instance type in one region: its [`base`] plus the dynamic
    /// keys. `mask` identifies the offering zones; `zones` are their names and `zone_ids` their
    /// IDs, in the same order.
    pub(crate) fn complete(
        &mut self,
        info: &InstanceTypeInfo,
        base: &Requirements,
        mask: u64,
        zones: &[&str],
        zone_ids: &[&str],
    ) -> Requirements {
        let (zone, zone_id) = match self.zones.iter().find(|(m, _, _)| *m == mask) {
            Some((_, zone, zone_id)) => (zone.clone(), zone_id.clone()),
            None => {
                let zone = Requirement::in_values(labels::TOPOLOGY_ZONE, zones);
                let zone_id = Requirement::in_values(aws::TOPOLOGY_ZONE_ID, zone_ids);
                self.zones.push((mask, zone.clone(), zone_id.clone()));
                (zone, zone_id)
            }
        };
        let mut r = base.clone_with_room(DYNAMIC_KEYS.len());
        let [amd64, arm64] = &self.os;
        r.add(match info.arch {
            Arch::Amd64 => amd64.clone(),
            Arch::Arm64 => arm64.clone(),
        });
        r.add(zone);
        r.add(self.region.clone());
        r.add(self.windows_build.clone());
        // Only when some offering zone maps to a zone ID (upstream: from the NodeClass subnets).
        if !zone_ids.is_empty() {
            r.add(zone_id);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn category_and_generation_follow_upstreams_pattern() {
        let cases = [
            ("m7i-flex.large", Some(("m", "7"))),
            ("u-6tb1.metal", Some(("u", "1"))),
            ("u7i-12tb.224xlarge", Some(("u", "7"))),
            ("x2iezn.2xlarge", Some(("x", "2"))),
            ("p6-b200.48xlarge", Some(("p", "6"))),
            ("mac2-m2pro.metal", Some(("mac", "2"))),
            ("mac-m4.metal", None),
            ("c5.large", Some(("c", "5"))),
            ("m5", None),
        ];
        for (name, want) in cases {
            assert_eq!(category_and_generation(name), want, "{name}");
        }
    }

    #[test]
    fn kebab() {
        assert_eq!(lower_kebab("RTX PRO Server 6000"), "rtx-pro-server-6000");
        assert_eq!(lower_kebab("AWS"), "aws");
    }
}
