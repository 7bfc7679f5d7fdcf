//! One provisioning round: `cargo bench -p carpentry-core --bench scheduling`.
//!
//! Inputs follow upstream's `scheduling_benchmark_test.go`: one NodePool with
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
use carpentry_core::catalogue::{Catalogue, InstanceType};
use carpentry_core::scheduling::fake::{self, benchmark_input, diverse_pods, pods};
use carpentry_core::scheduling::schedule;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use k8s_openapi::api::core::v1::Pod;

/// One benchmark group: a round per size over `types` with the pods `make` builds. Each input
/// is scheduled once first to report its outcome (and, when `all_placed`, to check that every
/// pod was placed).
fn group(
    c: &mut Criterion,
    name: &str,
    types: &Arc<Vec<InstanceType>>,
    ns: &[usize],
    make: fn(usize) -> Vec<Pod>,
    all_placed: bool,
) {
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    for n in sizes(ns) {
        let input = benchmark_input(types.clone(), make(n));
        let r = schedule(&input);
        assert!(!all_placed || r.unschedulable.is_empty(), "{name}/{n}: {:?}", r.unschedulable.first());
        eprintln!("{name}/{n}: {} NodeClaims, {} unschedulable", r.nodeclaims.len(), r.unschedulable.len());
        group
            .bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| b.iter(|| schedule(black_box(input))));
    }
    group.finish();
}

fn synthetic(c: &mut Criterion) {
    let types = Arc::new(fake::instance_types(400));
    group(c, "scheduling/fake-400-types", &types, &[100, 1_000, 5_000, 20_000], pods, true);
    group(c, "scheduling/fake-400-types-diverse", &types, &[100, 1_000, 5_000, 20_000], diverse_pods, true);
}

fn real_catalogue(c: &mut Criterion) {
    let types =
        Catalogue::embedded().instance_types_shared("us-east-1", &EC2NodeClassSpec::default()).expect("us-east-1");
    group(c, "scheduling/us-east-1-default", &types, &[1_000, 5_000, 20_000], pods, true);
    // Not every pod schedules here: each new NodeClaim subtracts the largest capacity among its
    // options from the limits (upstream's pessimism), and the 4000 anti-affinity NodeClaims may
    // each launch a 24 TiB type, which exhausts limits.memory (10000000Gi).
    group(c, "scheduling/us-east-1-default-diverse", &types, &[1_000, 5_000, 20_000], diverse_pods, false);
}

/// Pod counts to run. `cargo test --benches` (CI's smoke run, a debug build without `--bench`)
/// runs each benchmark once; there the sizes stop at 1,000 pods so the smoke run stays cheap,
/// while `cargo bench` measures every size.
fn sizes(all: &[usize]) -> Vec<usize> {
    let measuring = std::env::args().any(|a| a == "--bench");
    all.iter().copied().filter(|&n| measuring || n <= 1_000).collect()
}

criterion_group!(benches, synthetic, real_catalogue);
criterion_main!(benches);
