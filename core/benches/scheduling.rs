//! One provisioning round: `cargo bench -p carpentry-core --bench scheduling`.
//!
//! Inputs follow upstream's `scheduling_benchmark_test.go` (reference §5.1): one NodePool with
//! limits cpu 10000000 / memory 10000000Gi, 400 synthetic instance types (`fake-it-i`: i+1 vCPU,
//! 2(i+1) GiB, 10(i+1) pods, price 0.1·vCPU + 0.1·GB, spot z1/z2 and on-demand z1/z2/z3), no
//! existing nodes, no DaemonSets; CPU drawn from {100m, 250m, 500m, 1, 1.5} and memory from
//! {100, 256, 512, 1024, 2048, 4096} Mi with a fixed seed. Upstream's mix is five-way (generic,
//! zonal spread, hostname spread, zonal self-affinity, hostname anti-affinity); four of the five
//! need topology (Core II part 2), so until then every pod here is a generic pod. A second group
//! runs the real catalogue (us-east-1, a default NodePool).

use std::hint::black_box;
use std::sync::Arc;

use carpentry_core::api::ec2nodeclass::EC2NodeClassSpec;
use carpentry_core::api::nodepool::NodePool;
use carpentry_core::catalogue::{Catalogue, InstanceType};
use carpentry_core::scheduling::{fake, schedule, Input, NodePoolInput};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use k8s_openapi::api::core::v1::Pod;

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

fn pods(n: usize) -> Vec<Pod> {
    let mut rng = Rng(42);
    (0..n)
        .map(|i| {
            let text = format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: pod-{i}, namespace: default, uid: uid-{i:06}}}\nspec:\n  containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{}\", memory: \"{}\"}}}}}}]",
                CPUS[rng.below(CPUS.len())],
                MEMORIES[rng.below(MEMORIES.len())]
            );
            serde_yaml::from_str(&text).expect("pod")
        })
        .collect()
}

fn nodepool() -> NodePool {
    serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  limits: {cpu: \"10000000\", memory: 10000000Gi}\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []",
    )
    .expect("nodepool")
}

fn input(instance_types: Arc<Vec<InstanceType>>, n: usize) -> Input {
    Input {
        nodepools: vec![NodePoolInput { nodepool: nodepool(), instance_types }],
        pods: pods(n),
        ..Default::default()
    }
}

fn synthetic(c: &mut Criterion) {
    let types = Arc::new(fake::instance_types(400));
    let mut group = c.benchmark_group("scheduling/fake-400-types");
    group.sample_size(10);
    for n in [100usize, 1_000, 5_000, 20_000] {
        let input = input(types.clone(), n);
        let r = schedule(&input);
        assert!(r.unschedulable.is_empty(), "every pod schedules");
        eprintln!("{n} pods → {} NodeClaims", r.nodeclaims.len());
        group
            .bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| b.iter(|| schedule(black_box(input))));
    }
    group.finish();
}

fn real_catalogue(c: &mut Criterion) {
    let types =
        Catalogue::embedded().instance_types_shared("us-east-1", &EC2NodeClassSpec::default()).expect("us-east-1");
    let mut group = c.benchmark_group("scheduling/us-east-1-default");
    group.sample_size(10);
    for n in [1_000usize, 5_000, 20_000] {
        let input = input(types.clone(), n);
        let r = schedule(&input);
        assert!(r.unschedulable.is_empty(), "every pod schedules");
        eprintln!("{n} pods → {} NodeClaims", r.nodeclaims.len());
        group
            .bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| b.iter(|| schedule(black_box(input))));
    }
    group.finish();
}

criterion_group!(benches, synthetic, real_catalogue);
criterion_main!(benches);
