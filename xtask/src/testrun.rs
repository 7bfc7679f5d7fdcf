//! The tests step of `cargo xtask test`: every test binary `cargo test --all-targets` would run,
//! run as cargo runs them (in its package's folder, with its package's variables), but two at a
//! time instead of one after another. Most of the step's time goes to a few binaries, and the
//! longest of them wait on other processes (the upstream oracle, a control plane) rather than
//! use both cores; run in turn they added up.
//!
//! The longest run first, each on the first free lane (the longest-processing-time rule), by the
//! times the last run recorded (`xtask-test-times.tsv` in the target directory); a binary with
//! no record counts as the longest. Each binary's output is printed whole when it ends, under
//! cargo's `Running` line, so that lanes do not interleave. Every binary runs even when one
//! fails (cargo's `--no-fail-fast`); the step fails naming each that failed.

use std::collections::{HashMap, VecDeque};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

const TIMES: &str = "xtask-test-times.tsv";

/// One test binary cargo built.
#[derive(Debug, Clone)]
struct TestBinary {
    /// `carpentry-core unittests src/lib.rs`, `carpentry-tests tests/fidelity.rs`.
    name: String,
    executable: PathBuf,
    package_dir: PathBuf,
    package_name: String,
    package_version: String,
}

/// The test binaries of `cargo test <args> --no-run` (already built: cargo only lists them).
fn list(args: &[&str]) -> Result<Vec<TestBinary>> {
    let mut cmd = crate::util::cargo_command();
    cmd.args(["test"]).args(args).args(["--no-run", "--message-format=json-render-diagnostics"]);
    cmd.stderr(std::process::Stdio::inherit());
    let output = cmd.output().context("cargo test --no-run")?;
    anyhow::ensure!(output.status.success(), "cargo test --no-run failed");
    let mut binaries = Vec::new();
    for line in output.stdout.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(message) = serde_json::from_slice::<serde_json::Value>(line) else { continue };
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
            continue;
        }
        let Some(executable) = message["executable"].as_str() else { continue };
        let manifest = PathBuf::from(message["manifest_path"].as_str().context("no manifest_path")?);
        let package_dir = manifest.parent().context("a manifest without a folder")?.to_path_buf();
        let src = PathBuf::from(message["target"]["src_path"].as_str().unwrap_or_default());
        let src = src.strip_prefix(&package_dir).unwrap_or(&src).display().to_string();
        // package_id: `path+file:///…/core#carpentry-core@0.1.0` (or `…/core#0.1.0` when the
        // folder is the package's name).
        let id = message["package_id"].as_str().unwrap_or_default();
        let (name_part, version) =
            id.rsplit_once('#').map_or(("", ""), |(_, nv)| nv.rsplit_once('@').unwrap_or(("", nv)));
        let package_name = if name_part.is_empty() {
            package_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
        } else {
            name_part.to_string()
        };
        let kinds = message["target"]["kind"].as_array().cloned().unwrap_or_default();
        let unit = if kinds.iter().any(|k| k == "lib" || k == "bin") { "unittests " } else { "" };
        binaries.push(TestBinary {
            name: format!("{package_name} {unit}{src}"),
            executable: PathBuf::from(executable),
            package_dir,
            package_name,
            package_version: version.to_string(),
        });
    }
    Ok(binaries)
}

fn read_times(path: &Path) -> HashMap<String, Duration> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (ms, name) = l.split_once('\t')?;
            Some((name.to_string(), Duration::from_millis(ms.parse().ok()?)))
        })
        .collect()
}

/// What one binary came to.
struct Outcome {
    name: String,
    took: Duration,
    passed: bool,
}

/// Runs the test binaries of `cargo test <args>`, `lanes` at a time.
pub fn run(args: &[&str], lanes: usize) -> Result<()> {
    let binaries = list(args)?;
    anyhow::ensure!(!binaries.is_empty(), "cargo built no test binary");
    let times_path = crate::target_dir().join(TIMES);
    let times = read_times(&times_path);
    let mut order = binaries;
    // Longest first; unrecorded ones count as longest; by name among equals.
    order.sort_by(|a, b| {
        let key = |t: &TestBinary| times.get(&t.name).copied().unwrap_or(Duration::MAX);
        key(b).cmp(&key(a)).then_with(|| a.name.cmp(&b.name))
    });
    eprintln!("{} test binaries, {lanes} at a time, longest first (by the last run's times)", order.len());
    let queue = Mutex::new(VecDeque::from(order));
    let outcomes = Mutex::new(Vec::new());
    let print = Mutex::new(());
    std::thread::scope(|scope| {
        for _ in 0..lanes.max(1) {
            scope.spawn(|| loop {
                let Some(binary) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front() else { return };
                let outcome = run_one(&binary, &print);
                outcomes.lock().unwrap_or_else(|e| e.into_inner()).push(outcome);
            });
        }
    });
    let mut outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    outcomes.sort_by_key(|o| std::cmp::Reverse(o.took));
    let record: String = outcomes.iter().map(|o| format!("{}\t{}\n", o.took.as_millis(), o.name)).collect();
    if let Err(e) = std::fs::write(&times_path, record) {
        eprintln!("warning: cannot record the test times in {}: {e}", times_path.display());
    }
    eprintln!("test binaries by wall time:");
    for o in &outcomes {
        eprintln!("  {:>7.1}s  {}  {}", o.took.as_secs_f64(), if o.passed { "ok    " } else { "FAILED" }, o.name);
    }
    let failed: Vec<&str> = outcomes.iter().filter(|o| !o.passed).map(|o| o.name.as_str()).collect();
    anyhow::ensure!(failed.is_empty(), "test binaries failed: {}", failed.join(", "));
    Ok(())
}

fn run_one(binary: &TestBinary, print: &Mutex<()>) -> Outcome {
    let started = Instant::now();
    // As cargo runs a test: in its package's folder, with its package's variables (and not
    // xtask's own, which `cargo_command` drops for the same reason).
    let cargo = crate::util::cargo_command();
    let mut test = std::process::Command::new(&binary.executable);
    for (name, value) in cargo.get_envs() {
        match value {
            Some(v) => test.env(name, v),
            None => test.env_remove(name),
        };
    }
    test.current_dir(&binary.package_dir)
        .env("CARGO_MANIFEST_DIR", &binary.package_dir)
        .env("CARGO_PKG_NAME", &binary.package_name)
        .env("CARGO_PKG_VERSION", &binary.package_version);
    let result = test.output();
    let took = started.elapsed();
    let _printing = print.lock().unwrap_or_else(|e| e.into_inner());
    eprintln!("     Running {} ({})", binary.name, binary.executable.display());
    let passed = match result {
        Ok(output) => {
            let _ = std::io::stdout().write_all(&output.stdout);
            let _ = std::io::stdout().flush();
            let _ = std::io::stderr().write_all(&output.stderr);
            if !output.status.success() {
                eprintln!("error: {} failed: {}", binary.name, output.status);
            }
            output.status.success()
        }
        Err(e) => {
            eprintln!("error: cannot run {}: {e}", binary.executable.display());
            false
        }
    };
    Outcome { name: binary.name.clone(), took, passed }
}
