//! `cargo xtask testenv build|up|down|status`: the real Kubernetes control plane for tests.
//!
//! tests/testenv is a Go module that compiles kube-apiserver, etcd, kube-scheduler,
//! kube-controller-manager, KWOK and kubectl from the Go module proxy into one multi-call binary,
//! tests/testenv/bin/testenv (git-ignored). A stamp file holding a hash of go.mod, go.sum, the
//! Go sources and the Go version makes the (slow, cold) build a no-op when nothing changed, and
//! the build itself is kept in a machine-wide cache so that a fresh clone links it (`gobin`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use clap::Subcommand;

use crate::gobin::{self, GoBinary};
use crate::util;

/// Names the binary also answers to (argv[0] symlinks in tests/testenv/bin). The directory is
/// thereby also usable as KUBEBUILDER_ASSETS for envtest.
const COMPONENTS: &[&str] = &["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok", "kubectl"];

/// Bump to force a rebuild when the build command itself changes.
const BUILD_RECIPE: &str = "testenv-build-v2";

#[derive(clap::Args)]
pub struct TestenvArgs {
    #[command(subcommand)]
    command: TestenvCommand,
}

#[derive(Subcommand)]
enum TestenvCommand {
    /// Build tests/testenv/bin/testenv (skipped when its inputs did not change).
    Build {
        /// Rebuild even when the stamp says the binary is current.
        #[arg(long)]
        force: bool,
    },
    /// Build if needed, start an environment in the background and wait until it is ready.
    Up {
        /// State directory (kubeconfig, env, ready.json, logs/).
        #[arg(long, default_value = "target/testenv/dev")]
        dir: PathBuf,
        /// api (etcd + kube-apiserver), sched (+ kube-scheduler + kwok) or full (+ kube-controller-manager).
        #[arg(long, default_value = "full")]
        profile: String,
        /// Extra arguments for `testenv up`, e.g. -- --apiserver-arg=--v=4
        #[arg(last = true)]
        extra: Vec<String>,
    },
    /// Stop the environment in DIR and remove its state (logs stay).
    Down {
        #[arg(long, default_value = "target/testenv/dev")]
        dir: PathBuf,
    },
    /// Restart one component of the environment in DIR in place (same port, arguments and data),
    /// as a control-plane upgrade (or, with --kill, a crash) does; returns once it serves again.
    Restart {
        #[arg(long, default_value = "target/testenv/dev")]
        dir: PathBuf,
        /// etcd, kube-apiserver, kube-scheduler, kube-controller-manager or kwok.
        #[arg(long, default_value = "kube-apiserver")]
        component: String,
        /// How long it stays stopped, e.g. 10s.
        #[arg(long, default_value = "0s")]
        down_for: String,
        /// SIGKILL rather than an orderly SIGTERM.
        #[arg(long)]
        kill: bool,
    },
    /// Show the environment in DIR: components, ports, memory.
    Status {
        #[arg(long, default_value = "target/testenv/dev")]
        dir: PathBuf,
    },
}

pub fn run(args: TestenvArgs) -> Result<()> {
    match args.command {
        TestenvCommand::Build { force } => {
            let bin = build(force)?;
            eprintln!("testenv binary: {}", bin.display());
            Ok(())
        }
        TestenvCommand::Up { dir, profile, extra } => {
            let bin = ensure_built()?;
            util::run(
                Command::new(bin).args(["up", "--detach", "--profile", &profile, "--dir"]).arg(&dir).args(&extra),
            )?;
            eprintln!("use it with: . {}/env   (or KUBECONFIG={}/kubeconfig)", dir.display(), dir.display());
            Ok(())
        }
        TestenvCommand::Down { dir } => util::run(Command::new(ensure_built()?).arg("down").arg("--dir").arg(&dir)),
        TestenvCommand::Restart { dir, component, down_for, kill } => {
            let mut cmd = Command::new(ensure_built()?);
            cmd.args(["restart", "--component", &component, "--down-for", &down_for, "--dir"]).arg(&dir);
            if kill {
                cmd.arg("--kill");
            }
            util::run(&mut cmd)
        }
        TestenvCommand::Status { dir } => util::run(Command::new(ensure_built()?).arg("status").arg("--dir").arg(&dir)),
    }
}

/// The testenv binary, built first (or linked from the machine's cache) if go.mod, go.sum, a Go
/// source or the Go version changed.
pub fn ensure_built() -> Result<PathBuf> {
    build(false)
}

/// tests/testenv, the Go module.
pub fn module_dir() -> PathBuf {
    crate::workspace_root().join("tests/testenv")
}

fn build(force: bool) -> Result<PathBuf> {
    let module = module_dir();
    let k8s_version = gobin::required_version(&module, "k8s.io/kubernetes")?;
    let binary = GoBinary {
        name: "testenv",
        what: format!("build testenv (k8s {k8s_version}; a cold build takes a while, a warm one seconds)"),
        ldflags: ldflags(&k8s_version),
        module,
        package: ".",
        recipe: BUILD_RECIPE,
    };
    let bin = binary.ensure(force)?;
    link_components(bin.parent().context("testenv has a directory")?)?;
    Ok(bin)
}

/// What the upstream release build stamps in, so /version and the compatibility version report
/// the real release instead of v0.0.0-master.
fn ldflags(k8s_version: &str) -> String {
    let (major, minor) = {
        let mut parts = k8s_version.trim_start_matches('v').split('.');
        (parts.next().unwrap_or("1").to_string(), parts.next().unwrap_or("0").to_string())
    };
    let mut ldflags = vec!["-s".to_string(), "-w".to_string()];
    for pkg in ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"] {
        ldflags.push(format!("-X={pkg}.gitVersion={k8s_version}"));
        ldflags.push(format!("-X={pkg}.gitMajor={major}"));
        ldflags.push(format!("-X={pkg}.gitMinor={minor}"));
        ldflags.push(format!("-X={pkg}.gitTreeState=clean"));
    }
    ldflags.join(" ")
}

fn link_components(bin_dir: &Path) -> Result<()> {
    for name in COMPONENTS {
        let link = bin_dir.join(name);
        if std::fs::read_link(&link).is_ok_and(|target| target == Path::new("testenv")) {
            continue;
        }
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("testenv", &link).with_context(|| format!("symlink {}", link.display()))?;
    }
    Ok(())
}
