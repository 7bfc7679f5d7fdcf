//! `cargo xtask scale --pods N --per-node K`: the controller's scale figures
//! (controller/tests/scale.rs, with `CARPENTRY_SCALE_PODS` and `CARPENTRY_SCALE_PER_NODE`): one
//! provisioning round of N pending pods on a testenv of its own with the kwok provider, then a
//! minute at rest. Prints the benchmark's `scale:` lines; fails when the test does (the
//! controller did not create what its dry run planned, the pods did not all run, or it wrote to an
//! object at rest).

use anyhow::{Context, Result};

use crate::{testenv, util};

#[derive(clap::Args)]
pub struct ScaleArgs {
    /// Pending pods made before the controller starts (one provisioning round).
    #[arg(long, default_value_t = 1000)]
    pods: usize,
    /// Pods to a 16-vCPU node (their CPU request follows): N / K nodes.
    #[arg(long, default_value_t = 15)]
    per_node: usize,
}

pub fn run(args: ScaleArgs) -> Result<()> {
    util::ensure_rust_toolchain()?;
    testenv::ensure_built()?;
    let mut cmd = util::cargo_command();
    cmd.args(["test", "--locked", "--profile", "ci", "-p", "carpentry-controller", "--test", "scale", "--"])
        .args(["--ignored", "--nocapture", "--test-threads=1"])
        .env("CARPENTRY_SCALE_PODS", args.pods.to_string())
        .env("CARPENTRY_SCALE_PER_NODE", args.per_node.to_string());
    util::run(&mut cmd).context("the scale benchmark (controller/tests/scale.rs)")
}
