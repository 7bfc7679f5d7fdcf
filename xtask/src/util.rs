//! Small helpers shared by the tasks: running commands and installing prerequisites.

use std::process::Command;

use anyhow::{bail, Context, Result};

/// Runs one named step and reports how long it took.
pub fn step(name: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
    eprintln!("==> {name}");
    let started = std::time::Instant::now();
    let result = f().with_context(|| format!("step failed: {name}"));
    eprintln!("<== {name} ({:.1?})", started.elapsed());
    result
}

/// Runs a command, inheriting stdio; fails when it exits non-zero.
pub fn run(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
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

/// `cargo <args>` with the same toolchain that runs xtask.
pub fn cargo(args: &[&str]) -> Result<()> {
    run(Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())).args(args))
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

/// Installs Debian packages that are missing (`dpkg -s` decides), as root or through sudo. The
/// browser tests need Debian's `chromium` and `chromium-driver`.
pub fn ensure_debian_packages(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !Command::new("dpkg").args(["-s", p]).output().is_ok_and(|o| o.status.success()))
        .collect();
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
