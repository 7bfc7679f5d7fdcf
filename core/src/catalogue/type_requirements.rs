//! Instance-type requirements (upstream `computeRequirements` in
//! `pkg/providers/instancetype/types.go`, v1.14.1).
//!
//! Every well-known AWS label is present: `In [value]` when it applies, `DoesNotExist` when it does
//! not (so pods can select "no GPU"). Only single-valued requirements become node labels.

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

/// The `os` values: `linux`, or for Windows families `windows` on amd64 and nothing on arm64.
pub(crate) fn os_values(info: &InstanceTypeInfo, family: &FamilyTraits) -> &'static [&'static str] {
    match (family.windows_build, info.arch) {
        (None, _) => &["linux"],
        (Some(_), Arch::Amd64) => &["windows"],
        (Some(_), Arch::Arm64) => &[],
    }
}

fn one(key: &str, value: impl AsRef<str>) -> Requirement {
    Requirement::in_values(key, &[value.as_ref()])
}

/// The requirements of one instance type in one region. `zones` are the names of the zones that
/// offer it and `zone_ids` their IDs, in the same order.
pub(crate) fn compute(
    info: &InstanceTypeInfo,
    region: &str,
    zones: &[&str],
    zone_ids: &[&str],
    family: &FamilyTraits,
) -> Requirements {
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
    r.push(Requirement::in_values(labels::OS, os_values(info, family)));
    r.push(Requirement::in_values(labels::TOPOLOGY_ZONE, zones));
    r.push(one(labels::TOPOLOGY_REGION, region));
    r.push(match family.windows_build {
        Some(build) => one(labels::WINDOWS_BUILD, build),
        None => dne(labels::WINDOWS_BUILD),
    });
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
    // Only when some offering zone maps to a zone ID (upstream: from the NodeClass subnets).
    if !zone_ids.is_empty() {
        r.push(Requirement::in_values(aws::TOPOLOGY_ZONE_ID, zone_ids));
    }
    // No capacity reservations are modelled.
    r.push(dne(aws::CAPACITY_RESERVATION_ID));
    r.push(dne(aws::CAPACITY_RESERVATION_TYPE));
    r.push(dne(aws::CAPACITY_RESERVATION_INTERRUPTIBLE));
    r.into_iter().collect()
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
