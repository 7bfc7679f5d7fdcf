//! Synthetic instance types in the shape of upstream's fake cloud provider
//! (`pkg/cloudprovider/fake/instancetype.go`): used by the unit tests and by the
//! scheduling benchmark (upstream `scheduling_benchmark_test.go` uses `fake.InstanceTypes(400)`).
//!
//! Also the benchmark's pod mixes (upstream `scheduling_benchmark_test.go`), shared by the
//! criterion benchmark and the `schedule` example.
//!
//! Offerings: spot in test-zone-1/2 and on-demand in test-zone-1/2/3, all available, priced
//! 0.1 per vCPU + 0.1 per GB (decimal) of memory, spot and on-demand alike. Overhead:
//! kube-reserved 100m CPU / 10Mi. Labels: instance type, arch, os linux, zone, capacity type.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

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
        allocatable_memo: Default::default(),
        packed_memo: Default::default(),
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

const CPUS: [&str; 5] = ["100m", "250m", "500m", "1", "1.5"];
const MEMORIES: [&str; 6] = ["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"];

/// xorshift64*, seed 42: reproducible pod mixes without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

const LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

/// The kinds of upstream's diverse mix, in its order.
#[derive(Clone, Copy)]
enum Kind {
    Generic,
    Spread(&'static str),
    SelfAffinity(&'static str),
    AntiAffinity(&'static str),
}

fn pod(i: usize, kind: Kind, rng: &mut Rng) -> Pod {
    let (labels, extra) = match kind {
        Kind::Generic => (String::new(), String::new()),
        Kind::Spread(key) => {
            let own = LABEL_VALUES[rng.below(7)];
            let selected = LABEL_VALUES[rng.below(7)];
            (
                format!("my-label: {own}"),
                format!("  topologySpreadConstraints: [{{maxSkew: 1, topologyKey: {key}, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{my-label: {selected}}}}}}}]\n"),
            )
        }
        Kind::SelfAffinity(key) => {
            let v = LABEL_VALUES[rng.below(7)];
            (
                format!("my-affininity: {v}"),
                format!("  affinity: {{podAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{{topologyKey: {key}, labelSelector: {{matchLabels: {{my-affininity: {v}}}}}}}]}}}}\n"),
            )
        }
        Kind::AntiAffinity(key) => (
            "app: nginx".to_string(),
            format!("  affinity: {{podAntiAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{{topologyKey: {key}, labelSelector: {{matchLabels: {{app: nginx}}}}}}]}}}}\n"),
        ),
    };
    let text = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: pod-{i}, namespace: default, uid: uid-{i:06}, labels: {{{labels}}}}}\nspec:\n{extra}  containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{}\", memory: \"{}\"}}}}}}]",
        CPUS[rng.below(CPUS.len())],
        MEMORIES[rng.below(MEMORIES.len())]
    );
    serde_yaml::from_str(&text).expect("pod")
}

pub fn pods(n: usize) -> Vec<Pod> {
    let mut rng = Rng(42);
    (0..n).map(|i| pod(i, Kind::Generic, &mut rng)).collect()
}

/// Upstream `makeDiversePods(n)`: five equal fifths, the remainder generic.
pub fn diverse_pods(n: usize) -> Vec<Pod> {
    let mut rng = Rng(42);
    let fifth = n / 5;
    let kinds = [
        Kind::Generic,
        Kind::Spread("topology.kubernetes.io/zone"),
        Kind::Spread("kubernetes.io/hostname"),
        Kind::SelfAffinity("topology.kubernetes.io/zone"),
        Kind::AntiAffinity("kubernetes.io/hostname"),
    ];
    let mut out: Vec<Pod> = Vec::with_capacity(n);
    for kind in kinds {
        for _ in 0..fifth {
            out.push(pod(out.len(), kind, &mut rng));
        }
    }
    while out.len() < n {
        out.push(pod(out.len(), Kind::Generic, &mut rng));
    }
    out
}

/// Upstream's benchmark NodePool: no requirements, limits cpu 10000000 / memory 10000000Gi.
pub fn benchmark_nodepool() -> crate::api::nodepool::NodePool {
    serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  limits: {cpu: \"10000000\", memory: 10000000Gi}\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []",
    )
    .expect("the benchmark NodePool parses")
}

/// One round's input as the benchmark builds it: the benchmark NodePool over `instance_types`.
pub fn benchmark_input(instance_types: Arc<Vec<InstanceType>>, pods: Vec<Pod>) -> crate::state::Input {
    crate::state::Input {
        nodepools: vec![crate::state::NodePoolInput { nodepool: benchmark_nodepool(), instance_types }],
        pods,
        ..Default::default()
    }
}
