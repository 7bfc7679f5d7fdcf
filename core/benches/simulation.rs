//! The simulation over time: `cargo bench -p carpentry-core --bench simulation`.
//!
//! - `consolidation-decision/1000-nodes-10000-pods`: one pass of the disruption loop (every
//!   method, every candidate) over a cluster the simulation built: 1,000 c5.4xlarge nodes with
//!   ten 1.5-CPU pods each, then scaled to half the pods (underutilized nodes everywhere).
//! - `diurnal-24h/500-nodes`: a simulated day of a Deployment that follows a daily load curve
//!   (scale steps every hour between 1,000 and 5,000 pods of 1.5 CPU on 16-vCPU nodes, about 500
//!   nodes at the peak), with provisioning, consolidation and emptiness running all day.
//! - `ca-diurnal-24h/500-nodes`: the same day with Cluster Autoscaler on a c5.4xlarge node group
//!   in Karpenter's place (a loop every 10 s with its scale-up and scale-down planning).

use std::hint::black_box;

use carpentry_core::catalogue::Catalogue;
use carpentry_core::manifest::load;
use carpentry_core::simulation::{SimTime, Simulation, Timings};
use criterion::{criterion_group, criterion_main, Criterion};

fn cluster(replicas: usize, steps: &str) -> String {
    format!(
        "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  disruption:
    budgets: [{{nodes: \"10%\"}}]
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [c5.4xlarge, c5.2xlarge, c5.xlarge, c5.large]}}
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: nginx, resources: {{requests: {{cpu: 1500m, memory: 1Gi}}}}}}]
---
apiVersion: carpentry.dev/v1alpha1
kind: Scenario
spec:
  startTime: \"2026-12-01T00:00:00Z\"
  steps:
{steps}"
    )
}

/// `cargo test --benches` runs each benchmark once, unoptimised: a small cluster then.
fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn consolidation_decision(c: &mut Criterion) {
    let (pods, half) = if measuring() { (10_000, 5_000) } else { (200, 100) };
    let text = cluster(pods, &format!("  - {{at: 3m, scale: {{kind: Deployment, name: web, replicas: {half}}}}}\n"));
    let m = load(&text).unwrap();
    let mut sim = Simulation::new(&m, None, Timings::default()).unwrap();
    sim.run_until(SimTime::from_secs(181));
    let snap = sim.snapshot();
    eprintln!("consolidation-decision: {} nodes, {} pods running", snap.nodes.len(), snap.running);
    let mut group = c.benchmark_group("consolidation-decision");
    group.sample_size(10);
    group.bench_function("1000-nodes-10000-pods", |b| b.iter(|| black_box(sim.plan_disruption())));
    group.finish();
}

/// A day: low at night, peak in the afternoon (a hundredth of it when only checking).
fn day() -> String {
    let scale = if measuring() { 1 } else { 100 };
    let curve = [
        1000, 1000, 1000, 1000, 1200, 1600, 2200, 3000, 3800, 4400, 4800, 5000, 5000, 4800, 4600, 4400, 4000, 3400,
        2800, 2200, 1800, 1400, 1200, 1000,
    ];
    let steps: String = curve
        .iter()
        .enumerate()
        .map(|(h, n)| format!("  - {{at: {h}h, scale: {{kind: Deployment, name: web, replicas: {}}}}}\n", n / scale))
        .collect();
    cluster(1000 / scale, &steps)
}

fn diurnal(c: &mut Criterion) {
    let m = load(&day()).unwrap();
    let mut group = c.benchmark_group("diurnal-24h");
    group.sample_size(10);
    group.bench_function("500-nodes", |b| {
        b.iter(|| {
            let mut sim = Simulation::new(&m, None, Timings::default()).unwrap();
            sim.run_until(SimTime::from_secs(24 * 3600));
            black_box(sim.events().len())
        })
    });
    group.finish();
}

fn ca_diurnal(c: &mut Criterion) {
    let group_yaml = "---
apiVersion: carpentry.dev/v1alpha1
kind: NodeGroup
metadata: {name: c5-4xlarge}
spec: {minSize: 0, maxSize: 1000, instanceTypes: [c5.4xlarge], zones: [us-east-1a, us-east-1b, us-east-1c]}
";
    let m = load(&format!("{}{group_yaml}", day())).unwrap();
    let run = || {
        let mut sim = Simulation::cluster_autoscaler(&m, None, Timings::default(), Catalogue::embedded()).unwrap();
        sim.run_until(SimTime::from_secs(24 * 3600));
        sim
    };
    let sim = run();
    eprintln!(
        "ca-diurnal-24h: {} loops, {} events, {} nodes removed by scale-down",
        sim.ca_loops().len(),
        sim.events().len(),
        sim.ca_scale_downs().len()
    );
    let mut group = c.benchmark_group("ca-diurnal-24h");
    group.sample_size(10);
    group.bench_function("500-nodes", |b| b.iter(|| black_box(run().events().len())));
    group.finish();
}

/// The playground's recompute of its 1,000-pod example: the YAML loaded, the pods created and the
/// first provisioning round run (what the browser test times in Chromium; this is the native
/// figure beside it).
fn playground_recompute(c: &mut Criterion) {
    let text = include_str!("../../web/examples/thousand-pods.yaml");
    let mut group = c.benchmark_group("playground-recompute");
    group.sample_size(20);
    group.bench_function("1000-pods-first-round", |b| {
        b.iter(|| {
            let mut m = load(text).unwrap();
            m.convert_legacy();
            let mut sim = Simulation::new(&m, None, Timings::default()).unwrap();
            sim.run_until(SimTime::from_secs(2));
            black_box(sim.snapshot().nodes.len())
        })
    });
    group.finish();
}

criterion_group!(benches, consolidation_decision, diurnal, ca_diurnal, playground_recompute);
criterion_main!(benches);
