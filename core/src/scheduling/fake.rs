//! Synthetic instance types in the shape of upstream's fake cloud provider
//! (`pkg/cloudprovider/fake/instancetype.go`, reference §7.1): used by the unit tests and by the
//! scheduling benchmark (upstream `scheduling_benchmark_test.go` uses `fake.InstanceTypes(400)`).
//!
//! Offerings: spot in test-zone-1/2 and on-demand in test-zone-1/2/3, all available, priced
//! 0.1 per vCPU + 0.1 per GB (decimal) of memory, spot and on-demand alike. Overhead:
//! kube-reserved 100m CPU / 10Mi. Labels: instance type, arch, os linux, zone, capacity type.

use std::sync::Arc;

use crate::catalogue::{CapacityType, InstanceType, Offering, Overhead, PriceSource};
use crate::labels;
use crate::quantity::Quantity;
use crate::requirements::{Requirement, Requirements};
use crate::resources::{self, ResourceList};

pub const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];

/// The requirements of an offering, shared by every type (like the catalogue's).
fn offering_requirements(ct: CapacityType, zone: &str) -> Arc<Requirements> {
    use std::sync::OnceLock;
    static SHARED: OnceLock<Vec<(CapacityType, &'static str, Arc<Requirements>)>> = OnceLock::new();
    let shared = SHARED.get_or_init(|| {
        [CapacityType::Spot, CapacityType::OnDemand]
            .into_iter()
            .flat_map(|ct| ZONES.iter().map(move |z| (ct, *z)))
            .map(|(ct, z)| {
                let mut r = Requirements::new();
                r.add(Requirement::in_values(labels::CAPACITY_TYPE, &[ct.as_str()]));
                r.add(Requirement::in_values(labels::TOPOLOGY_ZONE, &[z]));
                (ct, z, Arc::new(r))
            })
            .collect()
    });
    shared.iter().find(|(c, z, _)| *c == ct && *z == zone).map(|(_, _, r)| r.clone()).expect("a fake zone")
}

/// An instance type with `cpu` vCPUs, `memory` and `pods` capacity, and the default offerings.
pub fn instance_type(name: &str, cpu: i64, memory: Quantity, pods: i64, arch: &str) -> InstanceType {
    let mut capacity = ResourceList::new();
    capacity.insert(resources::CPU.into(), Quantity::from_units(cpu));
    capacity.insert(resources::MEMORY.into(), memory);
    capacity.insert(resources::PODS.into(), Quantity::from_units(pods));
    let price = 0.1 * cpu as f64 + 0.1 * (memory.value() as f64 / 1e9);
    let mut offerings = Vec::new();
    for (ct, zones) in [(CapacityType::Spot, &ZONES[..2]), (CapacityType::OnDemand, &ZONES[..])] {
        for zone in zones {
            let r = offering_requirements(ct, zone);
            offerings.push(Offering {
                zone: zone.to_string(),
                zone_id: zone.to_string(),
                capacity_type: ct,
                price,
                price_source: PriceSource::SyntheticSpot,
                available: true,
                requirements: r,
                reservation: None,
            });
        }
    }
    let mut requirements = Requirements::new();
    requirements.add(Requirement::in_values(labels::INSTANCE_TYPE, &[name]));
    requirements.add(Requirement::in_values(labels::ARCH, &[arch]));
    requirements.add(Requirement::in_values(labels::OS, &["linux"]));
    requirements.add(Requirement::in_values(labels::TOPOLOGY_ZONE, &ZONES));
    requirements.add(Requirement::in_values(labels::CAPACITY_TYPE, &["on-demand", "spot"]));
    let mut kube_reserved = ResourceList::new();
    kube_reserved.insert(resources::CPU.into(), Quantity::from_millis(100));
    kube_reserved.insert(resources::MEMORY.into(), Quantity::from_mebibytes(10));
    InstanceType {
        name: name.to_string(),
        requirements,
        capacity,
        overhead: Overhead { kube_reserved, ..Default::default() },
        offerings,
    }
}

/// Upstream `fake.InstanceTypes(n)`: `fake-it-i` with i+1 vCPU, 2(i+1) GiB, 10(i+1) pods.
pub fn instance_types(n: usize) -> Vec<InstanceType> {
    (0..n as i64)
        .map(|i| {
            instance_type(&format!("fake-it-{i}"), i + 1, Quantity::from_gibibytes(2 * (i + 1)), 10 * (i + 1), "amd64")
        })
        .collect()
}
