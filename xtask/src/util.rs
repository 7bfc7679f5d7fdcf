//! Small helpers shared by the tasks: running commands, timing steps (a table at the end of
//! `cargo xtask test`), jobs in the background, and installing prerequisites.

use std::cell::RefCell;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// One timed step: its name, when it started (from the first step), how long it took, whether it
/// ran in the background and whether it passed.
struct StepRecord {
    name: String,
    start: Duration,
    took: Duration,
    background: bool,
    passed: bool,
}

static STEPS: Mutex<Vec<StepRecord>> = Mutex::new(Vec::new());
static EPOCH: Mutex<Option<Instant>> = Mutex::new(None);

thread_local! {
    /// Where commands run by this thread write their output: the terminal (None), or a job's log.
    static LOG: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
    /// Whether this thread is a background job (its steps are marked so in the table).
    static IN_BACKGROUND: RefCell<bool> = const { RefCell::new(false) };
}

fn since_epoch() -> Duration {
    let mut epoch = EPOCH.lock().unwrap_or_else(|e| e.into_inner());
    epoch.get_or_insert_with(Instant::now).elapsed()
}

/// Runs one named step, reports how long it took and records it for [`print_step_table`].
pub fn step(name: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
    let background = IN_BACKGROUND.with(|b| *b.borrow());
    let start = since_epoch();
    if !background {
        eprintln!("==> {name}");
    }
    let started = Instant::now();
    let result = f().with_context(|| format!("step failed: {name}"));
    let took = started.elapsed();
    eprintln!("<== {name} ({took:.1?}){}", if background { " [background]" } else { "" });
    STEPS.lock().unwrap_or_else(|e| e.into_inner()).push(StepRecord {
        name: name.to_string(),
        start,
        took,
        background,
        passed: result.is_ok(),
    });
    result
}

/// Every step recorded so far, in the order they started, with start offset and wall time.
pub fn print_step_table(total: Duration) {
    let mut steps = STEPS.lock().unwrap_or_else(|e| e.into_inner());
    steps.sort_by_key(|s| s.start);
    eprintln!();
    eprintln!("{:>8} {:>9}  {:<4} {:<4} step", "start", "wall", "bg", "ok");
    for s in steps.iter() {
        eprintln!(
            "{:>8} {:>9}  {:<4} {:<4} {}",
            clock(s.start),
            clock(s.took),
            if s.background { "bg" } else { "" },
            if s.passed { "ok" } else { "FAIL" },
            s.name
        );
    }
    eprintln!("{:>8} {:>9}            total", "", clock(total));
}

/// m:ss (or h:mm:ss), the form the step table uses.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// A job started by [`background`]; [`Background::wait`] joins it and gives its result.
pub struct Background<T = ()> {
    name: String,
    log: PathBuf,
    handle: JoinHandle<Result<T>>,
}

/// Starts `f` on its own thread, so that downloads, installs and Go builds overlap with the
/// compiles in front. Commands it runs through [`run`] write to `target/xtask-logs/<log>.log`
/// instead of the terminal; the log's end is shown when the job fails.
pub fn background(name: &str, log: &str, f: impl FnOnce() -> Result<()> + Send + 'static) -> Result<Background> {
    background_with(name, log, f)
}

/// [`background`] for a job with a result.
pub fn background_with<T: Send + 'static>(
    name: &str,
    log: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<Background<T>> {
    let dir = crate::target_dir().join("xtask-logs");
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let log = dir.join(format!("{log}.log"));
    File::create(&log).with_context(|| format!("create {}", log.display()))?;
    eprintln!("==> {name} [background; log: {}]", log.display());
    let log_for_thread = log.clone();
    let step_name = name.to_string();
    let handle = std::thread::Builder::new().name(name.to_string()).spawn(move || {
        LOG.with(|l| *l.borrow_mut() = Some(log_for_thread));
        IN_BACKGROUND.with(|b| *b.borrow_mut() = true);
        let mut value = None;
        step(&step_name, || {
            value = Some(f()?);
            Ok(())
        })?;
        value.ok_or_else(|| anyhow!("{step_name} gave no result"))
    })?;
    Ok(Background { name: name.to_string(), log, handle })
}

impl<T> Background<T> {
    /// Waits for the job; on failure prints the end of its log. The wait itself is a step, so the
    /// table shows how long the foreground stood still for it.
    pub fn wait(self) -> Result<T> {
        let Background { name, log, handle } = self;
        let mut value = None;
        step(&format!("wait for: {name}"), || {
            let result = handle.join().map_err(|_| anyhow!("{name} panicked"))?;
            if result.is_err() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                eprintln!("--- last lines of {} ---", log.display());
                for line in &lines[lines.len().saturating_sub(60)..] {
                    eprintln!("{line}");
                }
                eprintln!("---");
            }
            value = Some(result.with_context(|| format!("{name} (log: {})", log.display()))?);
            Ok(())
        })?;
        value.ok_or_else(|| anyhow!("{name} gave no result"))
    }
}

/// Runs a command, inheriting stdio (or writing to the background job's log); fails when it exits
/// non-zero.
pub fn run(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    if let Some(log) = LOG.with(|l| l.borrow().clone()) {
        let out = std::fs::OpenOptions::new().append(true).open(&log)?;
        let err = out.try_clone()?;
        use std::io::Write;
        writeln!(&out, "$ {shown}")?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    }
    let status = cmd.status().with_context(|| format!("could not start {shown}"))?;
    if !status.success() {
        bail!("{shown} exited with {status}");
    }
    Ok(())
}

/// Runs a command and returns its standard output.
pub fn output(cmd: &mut Command) -> Result<String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().with_context(|| format!("could not start {shown}"))?;
    if !out.status.success() {
        bail!("{shown} exited with {}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// `cargo <args>` with the same toolchain that runs xtask, in the tasks' target directory.
pub fn cargo(args: &[&str]) -> Result<()> {
    run(cargo_command().args(args))
}

/// [`cargo`] with `target` as its target directory.
pub fn cargo_in(target: &std::path::Path, args: &[&str]) -> Result<()> {
    run(cargo_command().env("CARGO_TARGET_DIR", target).args(args))
}

/// A cargo command with the toolchain that runs xtask, in the tasks' target directory
/// ([`crate::target_dir`]; the tests it runs see it as `CARGO_TARGET_DIR` too), without the
/// variables `cargo run` set for xtask itself. Build scripts that track `CARGO_MANIFEST_DIR` or
/// `CARGO_PKG_*` (ring's does) read them from cargo's own environment, where xtask's values
/// (this clone's path) would make every new clone rebuild them and all that depends on them.
pub fn cargo_command() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo_run = name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || matches!(name.as_ref(), "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE" | "OUT_DIR");
        if set_by_cargo_run {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd.env("CARGO_TARGET_DIR", crate::target_dir());
    cmd
}

/// `program` at the lowest CPU priority (`nice -n 19`, where `nice` exists): the background jobs of
/// `cargo xtask test` then take only what the compiles in front leave idle.
pub fn low_priority(program: impl AsRef<std::ffi::OsStr>) -> Command {
    if have("nice") {
        let mut nice = Command::new("nice");
        nice.args(["-n", "19"]).arg(program);
        nice
    } else {
        Command::new(program)
    }
}

/// Whether a program is on PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program} >/dev/null 2>&1"))
        .status()
        .is_ok_and(|s| s.success())
}

/// The wasm targets and the lint components (rust-toolchain.toml names the browser's target and the
/// components; rustup installs them on first use, but an explicit step gives a clear error when
/// rustup is missing). `wasm32-wasip1` is for the parity test's scenario runner (docs/parity.md).
pub fn ensure_rust_toolchain() -> Result<()> {
    if have("rustup") {
        step("rustup: wasm32 targets, rustfmt, clippy", || {
            run(Command::new("rustup").args(["target", "add", "wasm32-unknown-unknown", "wasm32-wasip1"]))?;
            run(Command::new("rustup").args(["component", "add", "rustfmt", "clippy"]))
        })?;
    }
    Ok(())
}

/// Whether a Debian package is installed: its status is `install ok installed` (`dpkg -s` alone
/// also succeeds for a package removed with its configuration files left behind).
fn debian_package_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "install ok installed")
}

/// Installs Debian packages that are missing, as root or through sudo. The browser tests need
/// Debian's `chromium` and `chromium-driver`.
pub fn ensure_debian_packages(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages.iter().copied().filter(|p| !debian_package_installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !have("apt-get") {
        bail!("missing Debian packages {}: this machine has no apt-get; install them by hand", missing.join(" "));
    }
    let root = output(Command::new("id").arg("-u")).is_ok_and(|u| u.trim() == "0");
    let sudo: &[&str] = if root { &[] } else { &["sudo"] };
    step(&format!("apt-get install {}", missing.join(" ")), || {
        let apt = |args: &[&str]| {
            let mut all: Vec<&str> = sudo.to_vec();
            all.push("apt-get");
            all.extend_from_slice(args);
            run(Command::new(all[0]).args(&all[1..]).env("DEBIAN_FRONTEND", "noninteractive"))
        };
        apt(&["update", "-qq"])?;
        apt(&[&["install", "-y", "-qq", "--no-install-recommends"], &missing[..]].concat())
    })
}
