//! `kubectl karpenter explain pod` end to end on a 500-node / 5,000-pod snapshot, offline: the
//! process as users run it (read and load the file, build the round, explain, print JSON).
//! Target: under 300 ms (docs/performance.md has the figures).

use std::process::Command;

use criterion::{criterion_group, criterion_main, Criterion};

#[path = "../tests/common/large.rs"]
mod large;

fn explain_pod(c: &mut Criterion) {
    let path = std::env::temp_dir().join(format!("carpentry-bench-large-{}.yaml", std::process::id()));
    // 500 nodes × (9 app pods + 1 DaemonSet pod) + 500 pending = 5,500 pods.
    std::fs::write(&path, large::snapshot(500, 9, 500)).expect("write the snapshot");
    let file = path.to_str().expect("a UTF-8 temp path").to_string();
    let mut group = c.benchmark_group("plugin");
    group.sample_size(10);
    group.bench_function("explain-pod/500-nodes-5000-pods", |b| {
        b.iter(|| {
            let out = Command::new(env!("CARGO_BIN_EXE_kubectl-karpenter"))
                .args(["explain", "pod", "batch-7", "-n", "apps", "--from-file", &file, "-o", "json"])
                .output()
                .expect("run kubectl-karpenter");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        })
    });
    group.finish();
    let _ = std::fs::remove_file(&path);
}

criterion_group!(benches, explain_pod);
criterion_main!(benches);
