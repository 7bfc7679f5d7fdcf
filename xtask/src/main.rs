//! The project's task runner, invoked as `cargo xtask <task>` (a cargo alias in .cargo/config.toml).
//!
//! Each task installs what it needs on a fresh machine, so that the README's two commands
//! (`cargo xtask play`, `cargo xtask test`) work on a clean clone.

mod catalog;
mod chaos;
mod crds;
mod fidelity;
mod freshness;
mod gobin;
mod gomod;
mod helm;
mod moto;
mod play;
mod scale;
mod testenv;
mod testrun;
mod tidy;
mod util;

use std::path::PathBuf;

use anyhow::{Context, Result};
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
    /// Write upstream's CRDs (NodePool, NodeClaim, EC2NodeClass) under controller/deploy/chart/crds/.
    Crds(crds::CrdsArgs),
    /// Build and run the live-test control plane (tests/testenv): build | up | down | status.
    Testenv(testenv::TestenvArgs),
    /// Compare our scheduler with upstream Karpenter's on the corpus and on generated scenarios.
    Fidelity(fidelity::FidelityArgs),
    /// Pods/second of our scheduler and upstream's, side by side (ends with `min speedup: X`).
    BenchVsUpstream(fidelity::BenchArgs),
    /// Kill the controller N times at random points of launch, registration, drain and
    /// termination (controller/tests/chaos.rs); ends with `leaked instances: N` and
    /// `stuck NodeClaims: N`, and fails unless both are 0.
    Chaos(chaos::ChaosArgs),
    /// The controller's scale figures (controller/tests/scale.rs): one provisioning round of N
    /// pending pods on the testenv with the kwok provider, beside core's own time, then a minute
    /// at rest (API writes, CPU, memory).
    Scale(scale::ScaleArgs),
    /// Check the code's shape: no module cycles in core, a //! doc on every source file, no
    /// references outside the repository (`--report`: core's module graph and API size).
    Tidy(tidy::TidyArgs),
}

#[derive(clap::Args)]
struct TestArgs {
    /// Skip rustfmt and clippy (for quick local iterations).
    #[arg(long)]
    no_lint: bool,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let root = workspace_root();
    std::env::set_current_dir(&root).with_context(|| format!("enter the workspace {}", root.display()))?;
    // The tasks that build in the shared target directory hold its lock while they build and run
    // what they built; `play` lets it go before it serves (it takes it even with `--prebuilt`,
    // which builds nothing, so that path is the one a building `play` runs).
    let lock = match &cli.task {
        Task::Play(args) if args.prebuilt.is_some() => lock_shared_target()?,
        Task::Play(_)
        | Task::Test(_)
        | Task::Fidelity(_)
        | Task::BenchVsUpstream(_)
        | Task::Chaos(_)
        | Task::Scale(_) => restore_freshness()?,
        _ => None,
    };
    match cli.task {
        Task::Play(args) => play::run(args, lock),
        Task::Test(args) => test(args),
        Task::Catalog(args) => catalog::run(args),
        Task::Crds(args) => crds::run(args),
        Task::Testenv(args) => testenv::run(args),
        Task::Fidelity(args) => fidelity::run(args),
        Task::BenchVsUpstream(args) => fidelity::bench(args),
        Task::Tidy(args) => tidy::run(args),
        Task::Chaos(args) => chaos::run(args),
        Task::Scale(args) => scale::run(args),
    }
}

/// Before any task builds in the machine's shared target directory, unchanged files get back the
/// times they had when last built there ([`freshness`]), so a new clone rebuilds only the crates
/// that changed. A target directory given by `CARGO_TARGET_DIR` is the user's: left alone.
fn restore_freshness() -> Result<Option<freshness::Lock>> {
    let Some(lock) = lock_shared_target()? else { return Ok(None) };
    match freshness::restore(&workspace_root(), &lock.target) {
        Ok(r) => eprintln!(
            "freshness: {} files as last built here, {} changed, {} name the checkout's folder (rebuilt)",
            r.unchanged, r.changed, r.folder_dependent
        ),
        // Not a git checkout, or no git: cargo's own mtimes decide (everything rebuilds).
        Err(e) => eprintln!("freshness: not restored ({e:#}); every workspace crate is rebuilt"),
    }
    Ok(Some(lock))
}

/// The shared target directory's lock ([`freshness::lock`]); none when `CARGO_TARGET_DIR` names
/// the user's own.
fn lock_shared_target() -> Result<Option<freshness::Lock>> {
    if std::env::var_os("CARGO_TARGET_DIR").is_some_and(|d| !d.is_empty()) {
        return Ok(None);
    }
    let Some(target) = shared_target_dir() else { return Ok(None) };
    freshness::lock(&target).map(Some)
}

/// The workspace root: the parent of this crate's manifest directory, as `cargo xtask` gives it
/// when it runs the task runner. The directory compiled in names the checkout that built the
/// binary, which a target directory shared between checkouts (a clone, a worktree) may have
/// reused for another: cargo's fingerprints do not depend on the checkout's folder.
pub fn workspace_root() -> PathBuf {
    manifest_dir(std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

/// `given` (the manifest directory cargo ran the binary with) when it is this crate's, else the
/// one compiled in (the binary run by hand, or by another crate's process that set its own).
fn manifest_dir(given: Option<PathBuf>) -> PathBuf {
    given
        .filter(|dir| dir.file_name().is_some_and(|name| name == "xtask") && dir.join("Cargo.toml").is_file())
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// The target directory of every cargo command the tasks run: `CARGO_TARGET_DIR` when it is set
/// (relative to the workspace root, where the tasks run), else one per machine,
/// `<cache>/target` (the cache of `gobin::cache_dir`, `~/.cache/carpentry` by default). A shared
/// one lets a fresh clone reuse every registry crate compiled before on the machine and, with
/// [`freshness`], every workspace crate that did not change, as the Go builds are reused;
/// [`limit_shared_target`] keeps it from growing without bound. (The xtask binary itself is built in the clone's
/// `target/` by the cargo alias.)
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => workspace_root().join(dir),
        None => shared_target_dir().unwrap_or_else(|| workspace_root().join("target")),
    }
}

fn shared_target_dir() -> Option<PathBuf> {
    gobin::cache_dir().ok().map(|cache| cache.join("target"))
}

/// The size past which the machine's shared target directory is emptied before a test run.
/// Cargo names artifacts independently of the clone's folder, so clones overwrite each other's;
/// what accumulates is artifacts of earlier dependency versions, profiles and toolchains.
/// Emptying it costs one build of the dependencies (a cold Rust build).
const SHARED_TARGET_LIMIT_BYTES: u64 = 40 << 30;

/// Empties the shared target directory when it has grown past [`SHARED_TARGET_LIMIT_BYTES`]
/// (a directory given by `CARGO_TARGET_DIR` is the user's and left alone).
fn limit_shared_target() -> Result<()> {
    if std::env::var_os("CARGO_TARGET_DIR").is_some_and(|d| !d.is_empty()) {
        return Ok(());
    }
    let Some(dir) = shared_target_dir() else { return Ok(()) };
    let size = dir_size(&dir);
    if size > SHARED_TARGET_LIMIT_BYTES {
        let name =
            format!("empty the shared target directory ({} GiB > {} GiB)", size >> 30, SHARED_TARGET_LIMIT_BYTES >> 30);
        util::step(&name, || {
            std::fs::remove_dir_all(&dir).map_err(|e| anyhow::anyhow!("remove {}: {e}", dir.display()))
        })?;
    }
    Ok(())
}

fn dir_size(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// `cargo xtask test`. Everything native is built with the `ci` profile (Cargo.toml) so that core
/// and its dependencies compile once per target: clippy's check, the `ci` build (tests, runners,
/// benches, xtask), wasm32 release (the playground and the wasm adapter in one invocation) and
/// wasm32-wasip1 (the parity runner). What waits on the network or can use a core the compiles
/// leave idle runs in the background from the start: Debian's chromium, the catalogue's input
/// downloads, the Go builds (testenv, the oracle, helm; at low priority; cached machine-wide, see `gobin`) and
/// wasm-bindgen-cli's install. A table of every step's start and wall time ends the run.
fn test(args: TestArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let result = test_steps(args);
    util::print_step_table(started.elapsed());
    match &result {
        Ok(()) => eprintln!("xtask test: all steps passed in {:.0?}", started.elapsed()),
        Err(e) => eprintln!("xtask test: FAILED after {:.0?}: {e:#}", started.elapsed()),
    }
    result
}

fn test_steps(args: TestArgs) -> Result<()> {
    limit_shared_target()?;
    eprintln!("cargo target directory: {}", target_dir().display());
    util::ensure_rust_toolchain()?;
    // The browser end-to-end test (tests/tests/browser.rs) drives Debian's Chromium.
    let chromium = util::background("apt: chromium, chromium-driver", "apt", || {
        util::ensure_debian_packages(&["chromium", "chromium-driver"])
    })?;
    let catalogue_inputs =
        util::background_with("fetch the EC2 catalogue's inputs (pip, go mod download)", "catalogue", || {
            catalog::fetch(&catalog::CatalogArgs::check())
        })?;
    let go = util::background_with("Go builds: testenv, the upstream oracle, helm", "go", || {
        // Each shows as a step of its own only when it really builds (not linked from the cache).
        testenv::ensure_built()?;
        fidelity::ensure_built()?;
        helm::ensure_built()
    })?;
    let bindgen = play::ensure_wasm_bindgen_cli_in_background()?;
    // moto, the EC2 endpoint of the aws provider's tests (controller/tests/aws.rs).
    let moto =
        util::background_with("pip: moto[server] (the aws provider's EC2 endpoint)", "moto", moto::ensure_installed)?;
    if !args.no_lint {
        util::step("rustfmt", || util::cargo(&["fmt", "--all", "--check"]))?;
        util::step("tidy: core's module graph, file docs, outside references", || {
            tidy::run(tidy::TidyArgs { report: false, root: None })
        })?;
        util::step("clippy", || {
            // The ci profile: its build scripts and proc-macros are the ones the test build runs.
            util::cargo(&[
                "clippy",
                "--workspace",
                "--all-targets",
                "--locked",
                "--profile",
                "ci",
                "--",
                "-D",
                "warnings",
            ])
        })?;
        // Core's API docs build without a warning (broken intra-doc links, bad HTML). After
        // clippy, so the dependencies' metadata is already built in this profile.
        util::step("core's API docs (rustdoc -D warnings)", || {
            let mut cmd = util::cargo_command();
            cmd.args(["doc", "--locked", "--profile", "ci", "-p", "carpentry-core", "--no-deps"]);
            cmd.env("RUSTDOCFLAGS", "-D warnings");
            util::run(&mut cmd)
        })?;
    }
    // The playground: its wasm32 release build beside the native builds (a target directory of its
    // own, so neither waits for the other's lock; on two cores the native builds leave one idle
    // for long stretches), then wasm-bindgen once wasm-bindgen-cli is installed.
    let bundle =
        util::background_with("playground bundle (wasm32 release build, wasm-bindgen)", "playground", move || {
            let target = play::playground_target_dir();
            play::build_wasm(&target)?;
            bindgen.wait()?;
            play::package(&target)
        })?;
    // Every native test and bench binary in one profile and one invocation (one feature
    // resolution, so nothing is compiled twice). It includes the native scenario runner that the
    // parity test runs: cargo builds a package's binaries for its integration tests.
    util::step("build: tests, benches and the native scenario runner (ci profile)", || {
        // `--timings` leaves target/cargo-timings/cargo-timing.html: which crates the CI budget goes to.
        util::cargo(&["test", "--workspace", "--locked", "--profile", "ci", "--all-targets", "--no-run", "--timings"])
    })?;
    util::step("scenario runner for wasm32-wasip1 (the parity test runs it under wasmtime)", || {
        util::cargo(&[
            "build",
            "--locked",
            "--profile",
            "ci",
            "-p",
            "carpentry-scenario-runner",
            "--target",
            "wasm32-wasip1",
        ])
    })?;
    let bundle = bundle.wait()?;
    anyhow::ensure!(
        ["index.html", "carpentry_web.js", "carpentry_web_bg.wasm"].iter().all(|f| bundle.join(f).is_file()),
        "the playground bundle in {} is incomplete",
        bundle.display()
    );
    let catalogue_inputs = catalogue_inputs.wait()?;
    util::step("the committed EC2 catalogue is what the generator produces", || {
        catalog::check_with_built_generator(&catalogue_inputs)
    })?;
    util::step("the committed CRDs are upstream's (controller/deploy/chart/crds)", || {
        crds::run(crds::CrdsArgs::check())
    })?;
    chromium.wait()?;
    // Read by controller/tests/chart.rs.
    std::env::set_var("CARPENTRY_HELM", go.wait()?);
    // Read by controller/tests/aws.rs; the test processes inherit it.
    std::env::set_var("CARPENTRY_PYTHON", moto.wait()?);
    // `--all-targets` runs the benchmarks once each too (criterion's test mode: no timing), so
    // they cannot rot; it leaves out doc tests, which the next step runs.
    // Two at a time on two cores: the longest binaries mostly wait on other processes.
    let lanes = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    util::step("tests (and each bench once)", || {
        testrun::run(&["--workspace", "--locked", "--profile", "ci", "--all-targets"], lanes)
    })?;
    util::step("doc tests", || util::cargo(&["test", "--workspace", "--locked", "--profile", "ci", "--doc"]))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_is_the_checkout_cargo_ran_the_task_runner_from() {
        let clone = std::env::temp_dir().join(format!("xtask-root-{}", std::process::id()));
        let xtask = clone.join("xtask");
        std::fs::create_dir_all(&xtask).unwrap();
        std::fs::write(xtask.join("Cargo.toml"), "[package]\nname = \"xtask\"\n").unwrap();
        let compiled_in = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        // Another checkout's binary reused: cargo's manifest directory is the checkout run in.
        assert_eq!(manifest_dir(Some(xtask.clone())), xtask);
        // Another crate's manifest directory, a folder gone, none: the one compiled in.
        assert_eq!(manifest_dir(Some(clone.join("core"))), compiled_in);
        std::fs::remove_dir_all(&clone).unwrap();
        assert_eq!(manifest_dir(Some(xtask)), compiled_in);
        assert_eq!(manifest_dir(None), compiled_in);
    }
}
