//! The project's task runner, invoked as `cargo xtask <task>` (a cargo alias in .cargo/config.toml).
//!
//! Each task installs what it needs on a fresh machine, so that the README's two commands
//! (`cargo xtask play`, `cargo xtask test`) work on a clean clone.

mod catalog;
mod fidelity;
mod play;
mod testenv;
mod util;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "carpentry's task runner")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Build the browser playground (core as wasm) and serve it on localhost.
    Play(play::PlayArgs),
    /// Install what the tests need, then run every check and test CI runs.
    Test(TestArgs),
    /// Regenerate core/data/ec2-catalogue.json from the pinned registry packages.
    Catalog(catalog::CatalogArgs),
    /// Build and run the live-test control plane (tests/testenv): build | up | down | status.
    Testenv(testenv::TestenvArgs),
    /// Compare our scheduler with upstream Karpenter's on the corpus and on generated scenarios.
    Fidelity(fidelity::FidelityArgs),
    /// Pods/second of our scheduler and upstream's, side by side (ends with `min speedup: X`).
    BenchVsUpstream(fidelity::BenchArgs),
}

#[derive(clap::Args)]
struct TestArgs {
    /// Skip rustfmt and clippy (for quick local iterations).
    #[arg(long)]
    no_lint: bool,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    std::env::set_current_dir(workspace_root())?;
    match cli.task {
        Task::Play(args) => play::run(args),
        Task::Test(args) => test(args),
        Task::Catalog(args) => catalog::run(args),
        Task::Testenv(args) => testenv::run(args),
        Task::Fidelity(args) => fidelity::run(args),
        Task::BenchVsUpstream(args) => fidelity::bench(args),
    }
}

/// The workspace root: the parent of this crate's manifest directory.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives inside the workspace").to_path_buf()
}

fn test(args: TestArgs) -> Result<()> {
    let started = std::time::Instant::now();
    util::ensure_rust_toolchain()?;
    if !args.no_lint {
        util::step("rustfmt", || util::cargo(&["fmt", "--all", "--check"]))?;
        util::step("clippy", || {
            util::cargo(&["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"])
        })?;
    }
    util::step("core builds for wasm32-unknown-unknown", || {
        util::cargo(&[
            "build",
            "--locked",
            "-p",
            "carpentry-core",
            "-p",
            "carpentry-wasm",
            "--target",
            "wasm32-unknown-unknown",
        ])
    })?;
    util::step("the committed EC2 catalogue is what the generator produces", || {
        catalog::run(catalog::CatalogArgs::check())
    })?;
    // The browser end-to-end test (tests/tests/browser.rs) drives Debian's Chromium.
    util::ensure_debian_packages(&["chromium", "chromium-driver"])?;
    util::step("playground bundle builds (cargo xtask play --build-only)", || {
        let dist = play::build_bundle()?;
        for file in ["index.html", "carpentry_web.js", "carpentry_web_bg.wasm"] {
            anyhow::ensure!(dist.join(file).is_file(), "{file} is missing from {}", dist.display());
        }
        Ok(())
    })?;
    util::step("testenv: build the test control plane (tests/testenv)", || testenv::ensure_built().map(drop))?;
    util::step("fidelity: build the upstream oracle (tests/oracle)", || fidelity::ensure_built().map(drop))?;
    util::step("scenario runner builds natively and for wasm32-wasip1 (the parity test runs both)", || {
        let build = ["build", "--locked", "--release", "-p", "carpentry-scenario-runner"];
        util::cargo(&build)?;
        util::cargo(&[&build[..], &["--target", "wasm32-wasip1"]].concat())
    })?;
    util::step("tests", || util::cargo(&["test", "--workspace", "--locked"]))?;
    // Benchmarks are compiled and each run once (no timing) so they cannot rot.
    util::step("benches compile and run once", || {
        util::cargo(&["test", "--locked", "-p", "carpentry-core", "-p", "kubectl-karpenter", "--benches"])
    })?;
    eprintln!("xtask test: all steps passed in {:.0?}", started.elapsed());
    Ok(())
}
