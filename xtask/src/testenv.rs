//! `cargo xtask testenv build|up|down|status`: the real Kubernetes control plane for tests.
//!
//! tests/testenv is a Go module that compiles kube-apiserver, etcd, kube-scheduler,
//! kube-controller-manager, KWOK and kubectl from the Go module proxy into one multi-call binary,
//! tests/testenv/bin/testenv (git-ignored). A stamp file holding a hash of go.mod, go.sum, the
//! Go sources and the Go version makes the (slow, cold) build a no-op when nothing changed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Subcommand;

use crate::util;

/// Names the binary also answers to (argv[0] symlinks in tests/testenv/bin). The directory is
/// thereby also usable as KUBEBUILDER_ASSETS for envtest.
const COMPONENTS: &[&str] = &["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok", "kubectl"];

/// Bump to force a rebuild when the build command itself changes.
const BUILD_RECIPE: &str = "testenv-build-v1";

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
        TestenvCommand::Status { dir } => util::run(Command::new(ensure_built()?).arg("status").arg("--dir").arg(&dir)),
    }
}

/// The testenv binary, built first if go.mod, go.sum, a Go source or the Go version changed.
pub fn ensure_built() -> Result<PathBuf> {
    build(false)
}

/// tests/testenv, the Go module.
pub fn module_dir() -> PathBuf {
    crate::workspace_root().join("tests/testenv")
}

fn build(force: bool) -> Result<PathBuf> {
    let module = module_dir();
    let bin_dir = module.join("bin");
    let bin = bin_dir.join("testenv");
    let stamp_path = bin_dir.join(".stamp");
    let go = find_go()?;
    let go_version = util::output(Command::new(&go).arg("version"))?;
    let stamp = format!("{BUILD_RECIPE} {:016x} {}", hash_inputs(&module)?, go_version.trim());
    if !force && bin.is_file() && std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
        link_components(&bin_dir)?;
        return Ok(bin);
    }
    let k8s_version = k8s_version(&module)?;
    util::step(&format!("build testenv (k8s {k8s_version}; a cold build takes a while, a warm one seconds)"), || {
        std::fs::create_dir_all(&bin_dir)?;
        let tmp = bin_dir.join("testenv.tmp");
        util::run(&mut build_command(&go, &module, &k8s_version, &tmp))?;
        std::fs::rename(&tmp, &bin)?;
        link_components(&bin_dir)?;
        std::fs::write(&stamp_path, &stamp)?;
        let size = std::fs::metadata(&bin)?.len();
        eprintln!("testenv: {} ({} MiB)", bin.display(), size >> 20);
        Ok(())
    })?;
    Ok(bin)
}

/// `go build` of the module, at low priority (developers' machines are shared with Rust builds).
/// CARPENTRY_GO_BUILD_JOBS sets `go build -p` (default: the number of CPUs).
fn build_command(go: &Path, module: &Path, k8s_version: &str, out: &Path) -> Command {
    // What the upstream release build stamps in, so /version and the compatibility version
    // report the real release instead of v0.0.0-master.
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
    let jobs = std::env::var("CARPENTRY_GO_BUILD_JOBS")
        .ok()
        .filter(|j| !j.is_empty())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()).to_string());
    let mut cmd = if util::have("nice") {
        let mut nice = Command::new("nice");
        nice.args(["-n", "19"]).arg(go);
        nice
    } else {
        Command::new(go)
    };
    cmd.current_dir(module)
        .args(["build", "-p", &jobs, "-trimpath", "-ldflags", &ldflags.join(" "), "-o"])
        .arg(out)
        .arg(".")
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local")
        // go.mod and go.sum are committed and complete: never rewrite them during a build.
        .env("GOFLAGS", "-mod=readonly -buildvcs=false");
    cmd
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

/// Go from PATH, else the usual install location.
pub(crate) fn find_go() -> Result<PathBuf> {
    if util::have("go") {
        return Ok(PathBuf::from("go"));
    }
    let usual = PathBuf::from("/usr/local/go/bin/go");
    if usual.is_file() {
        return Ok(usual);
    }
    bail!("Go (1.26 or newer) is needed to build the test control plane (tests/testenv) and was found neither on PATH nor at /usr/local/go/bin/go")
}

/// The k8s.io/kubernetes version required in go.mod.
fn k8s_version(module: &Path) -> Result<String> {
    let gomod = std::fs::read_to_string(module.join("go.mod")).context("read tests/testenv/go.mod")?;
    gomod
        .lines()
        .map(|line| line.trim().trim_start_matches("require").trim())
        .find_map(|line| line.strip_prefix("k8s.io/kubernetes ")?.split_whitespace().next().map(str::to_owned))
        .context("tests/testenv/go.mod does not require k8s.io/kubernetes")
}

/// FNV-1a over go.mod, go.sum and every .go file (path and contents), outside bin/.
pub(crate) fn hash_inputs(module: &Path) -> Result<u64> {
    let mut files = Vec::new();
    collect_inputs(module, module, &mut files)?;
    files.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for rel in files {
        feed(rel.as_bytes());
        feed(&[0]);
        let data = std::fs::read(module.join(&rel)).with_context(|| format!("read {rel}"))?;
        feed(&(data.len() as u64).to_le_bytes());
        feed(&data);
    }
    Ok(hash)
}

fn collect_inputs(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_dir() {
            if name != "bin" && !name.starts_with('.') {
                collect_inputs(root, &path, out)?;
            }
        } else if name == "go.mod" || name == "go.sum" || name.ends_with(".go") {
            out.push(path.strip_prefix(root)?.to_string_lossy().into_owned());
        }
    }
    Ok(())
}
