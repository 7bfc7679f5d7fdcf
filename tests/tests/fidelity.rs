//! Fidelity against upstream Karpenter v1.14.1 in CI: every corpus scenario and a fixed set of
//! generated scenarios run through our scheduler and upstream's (the Go oracle, tests/oracle),
//! compared by equivalence classes (docs/fidelity.md). A divergence fails the test unless it is
//! listed below as deliberate, with its entry in docs/divergences.md, or upstream's own runs of
//! the scenario differ from each other: then upstream broke a tie at random (Go map order) and
//! none of its draws happened to break it our way, which is reported but cannot fail the test
//! without making it flaky. `cargo xtask fidelity --count N --seed S` runs longer streams and
//! shrinks each divergence to a minimal scenario file.

use carpentry_tests::fidelity::{generate, oracle, run};

/// Generated scenarios CI compares (seeds 1..=SEEDS).
const SEEDS: u64 = 60;

/// Scenarios whose divergence is deliberate: (name, difference kind, docs/divergences.md entry).
const DELIBERATE: &[(&str, &str, &str)] = &[];

fn oracle_or_skip() -> Option<oracle::Oracle> {
    let path = oracle::default_path();
    if !path.is_file() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "the upstream oracle is missing at {} (CI=true, so the fidelity test must not be skipped); build it with `cargo xtask fidelity --build-only`",
            path.display()
        );
        eprintln!(
            "SKIPPING the fidelity test: no oracle at {} (build it with `cargo xtask fidelity --build-only`)",
            path.display()
        );
        return None;
    }
    Some(oracle::Oracle::start(&path).expect("the oracle starts"))
}

#[test]
fn corpus_and_generated_scenarios_agree_with_upstream() {
    let Some(oracle) = oracle_or_skip() else { return };
    let mut cases: Vec<(String, String)> = Vec::new();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).collect();
    files.sort();
    for f in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
        cases.push((f.file_stem().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&f).unwrap()));
    }
    for seed in 1..=SEEDS {
        let g = generate::scenario(seed);
        cases.push((g.name, g.yaml));
    }
    // Upstream's runs dominate (a draw of a scenario with a random tie takes up to 3 s, and some
    // take twenty draws), and each oracle answers one request at a time: one oracle per core,
    // each taking the next case.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let outcomes: Vec<(usize, anyhow::Result<run::Comparison>)> = std::thread::scope(|scope| {
        let worker = |mut oracle: oracle::Oracle| {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some((name, yaml)) = cases.get(i) else { return done };
                done.push((i, run::compare_one(&mut oracle, name, yaml)));
            }
        };
        let mut handles = vec![scope.spawn(move || worker(oracle))];
        for _ in 1..workers {
            let oracle = oracle::Oracle::start(&oracle::default_path()).expect("another oracle starts");
            handles.push(scope.spawn(move || worker(oracle)));
        }
        let mut all: Vec<_> = handles.into_iter().flat_map(|h| h.join().expect("a fidelity worker panicked")).collect();
        all.sort_by_key(|(i, _)| *i);
        all
    });
    let mut failures = Vec::new();
    let mut agreeing = 0;
    let mut random_ties = Vec::new();
    for (i, outcome) in outcomes {
        let name = &cases[i].0;
        let c = match outcome {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{name}: {e:#}"));
                continue;
            }
        };
        let unexplained: Vec<_> =
            c.differences.iter().filter(|d| !DELIBERATE.iter().any(|(n, k, _)| n == name && *k == d.kind())).collect();
        if unexplained.is_empty() {
            agreeing += 1;
        } else if c.upstream_varies {
            random_ties.push(name.clone());
        } else {
            failures.push(format!(
                "{name}:\n{}",
                unexplained.iter().map(|d| format!("    {d}")).collect::<Vec<_>>().join("\n")
            ));
        }
    }
    eprintln!("fidelity agreement: {agreeing}/{}", cases.len());
    eprintln!("diverging only where upstream's own runs differ: {random_ties:?}");
    assert!(
        failures.is_empty(),
        "divergences from upstream (reproduce with `cargo xtask fidelity`):\n{}",
        failures.join("\n")
    );
}
