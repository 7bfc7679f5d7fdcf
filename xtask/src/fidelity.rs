//! `cargo xtask fidelity` and `cargo xtask bench-vs-upstream`: our scheduler against upstream
//! Karpenter v1.14.1's, which the Go module tests/oracle runs in-process (docs/fidelity.md).
//!
//! The oracle binary goes to tests/oracle/bin/oracle (git-ignored); like testenv, a stamp with a
//! hash of go.mod, go.sum, the Go sources and the Go version makes the build a no-op when nothing
//! changed, and a machine-wide cache keeps the build for fresh clones (`gobin`).

use std::path::PathBuf;
use std::process::Command;

use anyhow::Result;

use crate::gobin::{self, GoBinary};
use crate::util;

/// Bump to force a rebuild when the build command itself changes.
const BUILD_RECIPE: &str = "oracle-build-v2";

#[derive(clap::Args)]
pub struct FidelityArgs {
    /// Generated scenarios to compare after the corpus.
    #[arg(long, default_value_t = 100)]
    count: u64,
    /// The first generated scenario's seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Skip the scenario corpus.
    #[arg(long)]
    no_corpus: bool,
    /// Where minimal reproducing scenarios are written.
    #[arg(long, default_value = "target/fidelity")]
    out: PathBuf,
    /// Oracle calls allowed to shrink one divergence.
    #[arg(long, default_value_t = 150)]
    shrink_budget: usize,
    /// Only build the oracle.
    #[arg(long)]
    build_only: bool,
}

pub fn run(args: FidelityArgs) -> Result<()> {
    let oracle = ensure_built()?;
    if args.build_only {
        eprintln!("oracle: {}", oracle.display());
        return Ok(());
    }
    let (count, seed, budget) = (args.count.to_string(), args.seed.to_string(), args.shrink_budget.to_string());
    let mut cmd = util::cargo_command();
    // The `ci` profile (optimised, with debug assertions) that `cargo xtask test` builds anyway.
    cmd.args(["run", "--profile", "ci", "--locked", "-q", "-p", "carpentry-tests", "--bin", "fidelity", "--"])
        .args(["--count", &count, "--seed", &seed, "--shrink-budget", &budget, "--out"])
        .arg(&args.out)
        .arg("--oracle")
        .arg(&oracle);
    if args.no_corpus {
        cmd.arg("--no-corpus");
    }
    util::run(&mut cmd)
}

/// tests/oracle, the Go module.
pub fn module_dir() -> PathBuf {
    crate::workspace_root().join("tests/oracle")
}

/// The oracle binary, built first (or linked from the machine's cache) if its inputs or the Go
/// version changed.
pub fn ensure_built() -> Result<PathBuf> {
    GoBinary {
        name: "oracle",
        module: module_dir(),
        package: ".",
        recipe: BUILD_RECIPE,
        ldflags: "-s -w".into(),
        what: "build the upstream oracle (tests/oracle, sigs.k8s.io/karpenter v1.14.1)".into(),
    }
    .ensure(false)
}

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Pod counts (upstream's BenchmarkScheduling sizes; each must be one of 1, 50, 100, 500,
    /// 1000, 2000, 5000, 10000, 20000).
    #[arg(long, value_delimiter = ',', default_value = "1000,5000,20000")]
    sizes: Vec<usize>,
    /// Rounds per engine on the identical inputs.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Skip the two projects' own harnesses (upstream's `go test -bench`, our criterion) and
    /// only run the identical-input comparison.
    #[arg(long)]
    identical_only: bool,
}

/// One row of the speed table.
struct Row {
    what: String,
    ours: f64,
    upstream: f64,
    note: String,
}

/// `cargo xtask bench-vs-upstream`: pods/second of both engines, side by side.
pub fn bench(args: BenchArgs) -> Result<()> {
    let oracle = ensure_built()?;
    let sizes: Vec<String> = args.sizes.iter().map(ToString::to_string).collect();
    let mut rows = Vec::new();
    if !args.identical_only {
        let upstream = upstream_go_bench(&sizes)?;
        let ours = criterion_bench(&sizes)?;
        for n in &args.sizes {
            let (Some(u), Some(o)) = (upstream.iter().find(|(k, _)| k == n), ours.iter().find(|(k, _)| k == n)) else {
                continue;
            };
            rows.push(Row {
                what: format!("own harness, 400 synthetic types, diverse {n}"),
                ours: o.1,
                upstream: u.1,
                note: "upstream: go test BenchmarkScheduling; ours: criterion median".into(),
            });
        }
    }
    let out = util::output(
        util::cargo_command()
            .args(["run", "--release", "--locked", "-q", "-p", "carpentry-tests", "--bin", "bench_vs_upstream", "--"])
            .args(["--sizes", &sizes.join(","), "--rounds", &args.rounds.to_string(), "--oracle"])
            .arg(&oracle),
    )?;
    for line in out.lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
        let agree = v["agree"].as_bool().unwrap_or(false);
        rows.push(Row {
            what: format!("identical input, {}", v["input"].as_str().unwrap_or("?")),
            ours: f("oursPodsPerSecond"),
            upstream: f("upstreamPodsPerSecond"),
            note: format!(
                "upstream Solve only (whole Schedule: {:.0} pods/s); {} / {} NodeClaims, {}",
                f("upstreamSchedulePodsPerSecond"),
                v["oursNodeClaims"],
                v["upstreamNodeClaims"],
                if agree {
                    "outcomes agree".to_string()
                } else {
                    // One difference is enough for the table; the harness explains the rest.
                    let all = v["differences"].as_array().map_or(0, Vec::len);
                    let first = v["differences"][0].as_str().unwrap_or_default();
                    format!(
                        "outcomes differ ({all} differences; first: {})",
                        first.chars().take(160).collect::<String>()
                    )
                }
            ),
        });
    }
    println!("{:<58} {:>14} {:>14} {:>8}  note", "benchmark", "ours pods/s", "upstream pods/s", "ratio");
    let mut min = f64::INFINITY;
    for r in &rows {
        let ratio = r.ours / r.upstream;
        min = min.min(ratio);
        println!("{:<58} {:>14.0} {:>14.0} {:>7.1}×  {}", r.what, r.ours, r.upstream, ratio, r.note);
    }
    println!("min speedup: {min:.1}");
    Ok(())
}

/// Upstream's own benchmark, run from the module cache inside tests/oracle: pods/second per size.
fn upstream_go_bench(sizes: &[String]) -> Result<Vec<(usize, f64)>> {
    let go = gobin::find_go()?;
    let pattern = format!("^BenchmarkScheduling({})$", sizes.join("|"));
    let out = util::output(
        Command::new(go)
            .current_dir(module_dir())
            .args(["test", "-tags=test_performance", "-run", "^$", "-bench", &pattern, "-benchtime", "1x"])
            .arg("sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling")
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=readonly -buildvcs=false"),
    )?;
    let mut rows = Vec::new();
    for line in out.lines() {
        // BenchmarkScheduling1000-2   1   123 ns/op   8000 pods/sec   1000 pods   12 nodes
        let Some(rest) = line.strip_prefix("BenchmarkScheduling") else { continue };
        let n: usize = rest.chars().take_while(char::is_ascii_digit).collect::<String>().parse()?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let Some(i) = fields.iter().position(|f| *f == "pods/sec") {
            rows.push((n, fields[i - 1].parse()?));
        }
    }
    eprintln!("{out}");
    Ok(rows)
}

/// Our criterion benchmark (400 synthetic types, diverse mix): pods/second from the median.
fn criterion_bench(sizes: &[String]) -> Result<Vec<(usize, f64)>> {
    let filter = format!("scheduling/fake-400-types-diverse/({})$", sizes.join("|"));
    util::cargo(&["bench", "--locked", "-p", "carpentry-core", "--bench", "scheduling", "--", &filter])?;
    let target = crate::target_dir();
    let mut rows = Vec::new();
    for n in sizes {
        let path = target.join("criterion/scheduling_fake-400-types-diverse").join(n).join("new/estimates.json");
        let estimates: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
        let ns = estimates["median"]["point_estimate"].as_f64().unwrap_or(f64::NAN);
        rows.push((n.parse()?, n.parse::<f64>()? / (ns / 1e9)));
    }
    Ok(rows)
}
