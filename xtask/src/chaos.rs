//! `cargo xtask chaos --kills N --seed S`: the controller killed and restarted N times
//! (controller/tests/chaos.rs, with `CARPENTRY_CHAOS_KILLS` and `CARPENTRY_CHAOS_SEED`), for
//! runs longer than CI's. Ends with the test's `leaked instances: N` and `stuck NodeClaims: N`
//! and fails unless the test passed and both are 0.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use anyhow::{bail, Context, Result};

use crate::{testenv, util};

#[derive(clap::Args)]
pub struct ChaosArgs {
    /// How many times the controller is killed.
    #[arg(long, default_value_t = 100)]
    kills: usize,
    /// The seed of the kills' phases, delays and workload changes (default: from the clock;
    /// printed, so that a run reproduces).
    #[arg(long)]
    seed: Option<u64>,
}

pub fn run(args: ChaosArgs) -> Result<()> {
    util::ensure_rust_toolchain()?;
    testenv::ensure_built()?;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("chaos: {} kills, seed {seed}", args.kills);
    let mut cmd = util::cargo_command();
    cmd.args(["test", "--locked", "--profile", "ci", "-p", "carpentry-controller", "--test", "chaos", "--"])
        .args(["--nocapture", "--test-threads=1"])
        .env("CARPENTRY_CHAOS_KILLS", args.kills.to_string())
        .env("CARPENTRY_CHAOS_SEED", seed.to_string())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().context("cargo test --test chaos")?;
    let stderr = child.stderr.take().context("the test's stderr")?;
    let (mut leaked, mut stuck) = (None, None);
    for line in BufReader::new(stderr).split(b'\n') {
        let Ok(line) = line else { break };
        let line = String::from_utf8_lossy(&line);
        eprintln!("{line}");
        let count = |prefix: &str| line.strip_prefix(prefix).and_then(|n| n.trim().parse::<u64>().ok());
        leaked = count("leaked instances: ").or(leaked);
        stuck = count("stuck NodeClaims: ").or(stuck);
    }
    let status = child.wait()?;
    match (leaked, stuck) {
        (Some(leaked), Some(stuck)) => {
            println!("leaked instances: {leaked}");
            println!("stuck NodeClaims: {stuck}");
            if leaked > 0 || stuck > 0 || !status.success() {
                bail!("chaos (seed {seed}): {leaked} leaked instances, {stuck} stuck NodeClaims, the test {status}");
            }
            Ok(())
        }
        _ => bail!("chaos (seed {seed}): the test ended ({status}) without its counts"),
    }
}
