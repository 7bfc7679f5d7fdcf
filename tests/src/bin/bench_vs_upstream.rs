//! The identical-input half of `cargo xtask bench-vs-upstream`: for each benchmark input (upstream's
//! 400 synthetic instance types or the real us-east-1 catalogue, upstream's diverse pod mix), the
//! same input document goes to the oracle's `bench` mode and to our scheduler, and both outcomes
//! are compared. Prints one JSON row per input (the xtask renders the table).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use carpentry_core::api::ec2nodeclass::EC2NodeClassSpec;
use carpentry_core::catalogue::Catalogue;
use carpentry_core::scheduling::{fake, schedule};
use carpentry_tests::fidelity::{export, oracle, run};
use clap::Parser;
use serde::Deserialize;
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// Pod counts.
    #[arg(long, value_delimiter = ',', default_value = "1000,5000,20000")]
    sizes: Vec<usize>,
    /// Rounds per engine and input (the median is reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long)]
    oracle: Option<PathBuf>,
    /// Where the input documents are written.
    #[arg(long, default_value = "target/bench-vs-upstream")]
    dir: PathBuf,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OracleBench {
    /// The whole `Provisioner.Schedule`.
    median_seconds: f64,
    /// `Scheduler.Solve` alone (what upstream's own benchmark times).
    solve_median_seconds: f64,
    #[serde(default)]
    node_claims: usize,
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> Result<()> {
    let args = Args::parse();
    let oracle_path = args.oracle.clone().unwrap_or_else(oracle::default_path);
    std::fs::create_dir_all(&args.dir)?;
    let catalogue =
        Catalogue::embedded().instance_types_shared("us-east-1", &EC2NodeClassSpec::default()).context("us-east-1")?;
    let inputs = [("fake-400-types", Arc::new(fake::instance_types(400))), ("us-east-1", catalogue)];
    let mut checker = oracle::Oracle::start(&oracle_path)?;
    for (types_name, types) in &inputs {
        for &n in &args.sizes {
            let name = format!("{types_name}-diverse-{n}");
            let mut input = fake::benchmark_input(types.clone(), fake::diverse_pods(n));
            export::normalise(&mut input);
            let file = args.dir.join(format!("{name}.json"));
            std::fs::write(&file, serde_json::to_vec(&export::oracle_input(&name, &input, run::DEFAULT_NOW, None))?)?;

            let out = Command::new(&oracle_path)
                .args(["bench", "--rounds", &args.rounds.to_string()])
                .arg(&file)
                .output()
                .with_context(|| format!("running {}", oracle_path.display()))?;
            if !out.status.success() {
                bail!("oracle bench {name}: {}", String::from_utf8_lossy(&out.stderr));
            }
            let upstream: OracleBench = serde_json::from_slice(&out.stdout)
                .with_context(|| format!("oracle bench output: {}", String::from_utf8_lossy(&out.stdout)))?;

            let mut times = Vec::new();
            let mut nodeclaims = 0;
            for _ in 0..args.rounds {
                let started = Instant::now();
                let r = schedule(&input);
                times.push(started.elapsed().as_secs_f64());
                nodeclaims = r.nodeclaims.len();
            }
            let ours = median(times);
            let comparison = run::compare_input(&mut checker, &name, &input, run::DEFAULT_NOW, 1)?;
            println!(
                "{}",
                json!({
                    "input": name, "pods": n,
                    "oursSeconds": ours,
                    "upstreamScheduleSeconds": upstream.median_seconds,
                    "upstreamSolveSeconds": upstream.solve_median_seconds,
                    "oursPodsPerSecond": n as f64 / ours,
                    "upstreamSchedulePodsPerSecond": n as f64 / upstream.median_seconds,
                    "upstreamPodsPerSecond": n as f64 / upstream.solve_median_seconds,
                    "oursNodeClaims": nodeclaims, "upstreamNodeClaims": upstream.node_claims,
                    "agree": comparison.differences.is_empty(),
                    "differences": comparison.differences.iter().map(ToString::to_string).collect::<Vec<_>>(),
                })
            );
        }
    }
    Ok(())
}
