//! Hot paths of the requirements algebra: set intersection (`Requirements::add_all`), `compatible` of a pod
//! against a NodeClaim-like set, and `intersects` of a NodeClaim against an instance type.

use std::hint::black_box;

use carpentry_core::requirements::{AllowUndefined, Operator, Requirement, Requirements};
use criterion::{criterion_group, criterion_main, Criterion};

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values).expect("valid requirement")
}

/// A NodePool/NodeClaim-like set of ten keys.
fn node_pool() -> Requirements {
    [
        req("karpenter.sh/nodepool", Operator::In, &["default"]),
        req("karpenter.sh/capacity-type", Operator::In, &["on-demand", "spot"]),
        req("kubernetes.io/arch", Operator::In, &["amd64", "arm64"]),
        req("kubernetes.io/os", Operator::In, &["linux"]),
        req("topology.kubernetes.io/zone", Operator::In, &["us-east-1a", "us-east-1b", "us-east-1c"]),
        req("karpenter.k8s.aws/instance-category", Operator::In, &["c", "m", "r"]),
        req("karpenter.k8s.aws/instance-generation", Operator::Gt, &["4"]),
        req("karpenter.k8s.aws/instance-cpu", Operator::Lt, &["65"]),
        req("karpenter.k8s.aws/instance-hypervisor", Operator::NotIn, &["xen"]),
        req("example.com/team", Operator::In, &["payments"]),
    ]
    .into_iter()
    .collect()
}

/// An instance-type-like set of ten keys (single values, as a catalogue entry has).
fn instance_type() -> Requirements {
    [
        req("node.kubernetes.io/instance-type", Operator::In, &["m5.xlarge"]),
        req("karpenter.sh/capacity-type", Operator::In, &["on-demand", "reserved", "spot"]),
        req("kubernetes.io/arch", Operator::In, &["amd64"]),
        req("kubernetes.io/os", Operator::In, &["linux"]),
        req("topology.kubernetes.io/zone", Operator::In, &["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"]),
        req("karpenter.k8s.aws/instance-category", Operator::In, &["m"]),
        req("karpenter.k8s.aws/instance-generation", Operator::In, &["5"]),
        req("karpenter.k8s.aws/instance-cpu", Operator::In, &["4"]),
        req("karpenter.k8s.aws/instance-hypervisor", Operator::In, &["nitro"]),
        req("karpenter.k8s.aws/instance-memory", Operator::In, &["16384"]),
    ]
    .into_iter()
    .collect()
}

/// A pod-like set: nodeSelector plus one required term.
fn pod() -> Requirements {
    [
        req("kubernetes.io/arch", Operator::In, &["amd64"]),
        req("topology.kubernetes.io/zone", Operator::In, &["us-east-1b", "us-east-1c"]),
        req("karpenter.sh/capacity-type", Operator::NotIn, &["spot"]),
        req("example.com/team", Operator::In, &["payments"]),
        req("karpenter.k8s.aws/instance-cpu", Operator::Gt, &["2"]),
    ]
    .into_iter()
    .collect()
}

fn benches(c: &mut Criterion) {
    let np = node_pool();
    let it = instance_type();
    let pod = pod();
    let mut incompatible_pod = pod.clone();
    incompatible_pod.add(req("topology.kubernetes.io/zone", Operator::In, &["eu-west-1a"]));

    c.bench_function("requirements/intersection_10x10_keys", |b| {
        b.iter(|| {
            let mut out = black_box(&np).clone();
            out.add_all(black_box(&it));
            out
        })
    });
    c.bench_function("requirement/intersection_single_key", |b| {
        let a = np.get_ref("topology.kubernetes.io/zone").unwrap();
        let z = it.get_ref("topology.kubernetes.io/zone").unwrap();
        b.iter(|| black_box(a).intersection(black_box(z)))
    });
    c.bench_function("requirements/compatible_pod_vs_nodeclaim_ok", |b| {
        b.iter(|| black_box(&np).compatible(black_box(&pod), AllowUndefined::WellKnownLabels))
    });
    c.bench_function("requirements/is_compatible_pod_vs_nodeclaim_ok", |b| {
        b.iter(|| black_box(&np).is_compatible(black_box(&pod), AllowUndefined::WellKnownLabels))
    });
    c.bench_function("requirements/compatible_pod_vs_nodeclaim_conflict", |b| {
        b.iter(|| black_box(&np).compatible(black_box(&incompatible_pod), AllowUndefined::WellKnownLabels))
    });
    c.bench_function("requirements/compatible_pod_vs_instance_type_undefined_key", |b| {
        b.iter(|| black_box(&it).compatible(black_box(&pod), AllowUndefined::WellKnownLabels))
    });
    c.bench_function("requirements/intersects_nodeclaim_vs_instance_type", |b| {
        b.iter(|| black_box(&it).intersects(black_box(&np)))
    });
}

criterion_group!(requirements, benches);
criterion_main!(requirements);
