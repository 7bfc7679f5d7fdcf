//! One provisioning round: `cargo bench -p carpentry-core --bench scheduling`.
//!
//! Inputs follow upstream's `scheduling_benchmark_test.go` (reference §5.1): one NodePool with
//! limits cpu 10000000 / memory 10000000Gi, 400 synthetic instance types (`fake-it-i`: i+1 vCPU,
//! 2(i+1) GiB, 10(i+1) pods, price 0.1·vCPU + 0.1·GB, spot z1/z2 and on-demand z1/z2/z3), no
//! existing nodes, no DaemonSets; CPU drawn from {100m, 250m, 500m, 1, 1.5} and memory from
//! {100, 256, 512, 1024, 2048, 4096} Mi with a fixed seed. Two mixes: generic pods only, and
//! upstream's five-way `makeDiversePods` (generic; zonal spread and hostname spread, maxSkew 1,
//! with a random `my-label` ∈ {a..g} label and selector; zonal self-affinity on a random
//! `my-affininity` ∈ {a..g}; hostname anti-affinity among all `app: nginx` pods; the remainder
//! generic). A second group runs the real catalogue (us-east-1, a default NodePool).

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

fn pods(n: usize) -> Vec<Pod> {
    let mut rng = Rng(42);
    (0..n).map(|i| pod(i, Kind::Generic, &mut rng)).collect()
}

/// Upstream `makeDiversePods(n)`: five equal fifths, the remainder generic.
fn diverse_pods(n: usize) -> Vec<Pod> {
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

fn nodepool() -> NodePool {
    serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  limits: {cpu: \"10000000\", memory: 10000000Gi}\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []",
    )
    .expect("nodepool")
}

fn input(instance_types: Arc<Vec<InstanceType>>, pods: Vec<Pod>) -> Input {
    Input { nodepools: vec![NodePoolInput { nodepool: nodepool(), instance_types }], pods, ..Default::default() }
}

fn synthetic(c: &mut Criterion) {
    let types = Arc::new(fake::instance_types(400));
    let mut group = c.benchmark_group("scheduling/fake-400-types");
    group.sample_size(10);
    for n in sizes(&[100, 1_000, 5_000, 20_000]) {
        let input = input(types.clone(), pods(n));
        let r = schedule(&input);
        assert!(r.unschedulable.is_empty(), "every pod schedules");
        eprintln!("{n} pods → {} NodeClaims", r.nodeclaims.len());
        group
            .bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| b.iter(|| schedule(black_box(input))));
    }
    group.finish();
}

fn synthetic_diverse(c: &mut Criterion) {
    let types = Arc::new(fake::instance_types(400));
    let mut group = c.benchmark_group("scheduling/fake-400-types-diverse");
    group.sample_size(10);
    for n in sizes(&[100, 1_000, 5_000, 20_000]) {
        let input = input(types.clone(), diverse_pods(n));
        let r = schedule(&input);
        assert!(r.unschedulable.is_empty(), "every pod schedules: {:?}", r.unschedulable.first());
        eprintln!("{n} diverse pods → {} NodeClaims", r.nodeclaims.len());
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
    for n in sizes(&[1_000, 5_000, 20_000]) {
        let input = input(types.clone(), pods(n));
        let r = schedule(&input);
        assert!(r.unschedulable.is_empty(), "every pod schedules");
        eprintln!("{n} pods → {} NodeClaims", r.nodeclaims.len());
        group
            .bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| b.iter(|| schedule(black_box(input))));
    }
    group.finish();
    let mut group = c.benchmark_group("scheduling/us-east-1-default-diverse");
    group.sample_size(10);
    let n = *sizes(&[1_000, 20_000]).last().expect("one size");
    let input = input(types, diverse_pods(n));
    let r = schedule(&input);
    // Not every pod schedules here: each new NodeClaim subtracts the largest capacity among its
    // options from the limits (upstream's pessimism), and the 4000 anti-affinity NodeClaims may
    // each launch a 24 TiB type, which exhausts limits.memory (10000000Gi).
    eprintln!("{n} diverse pods → {} NodeClaims, {} unschedulable", r.nodeclaims.len(), r.unschedulable.len());
    group.bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| b.iter(|| schedule(black_box(input))));
    group.finish();
}

/// Pod counts to run. `cargo test --benches` (CI's smoke run, a debug build without `--bench`)
/// runs each benchmark once; there the sizes stop at 1,000 pods so the smoke run stays cheap,
/// while `cargo bench` measures every size.
fn sizes(all: &[usize]) -> Vec<usize> {
    let measuring = std::env::args().any(|a| a == "--bench");
    all.iter().copied().filter(|&n| measuring || n <= 1_000).collect()
}

criterion_group!(benches, synthetic, synthetic_diverse, real_catalogue);
criterion_main!(benches);
