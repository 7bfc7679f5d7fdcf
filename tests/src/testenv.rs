//! A real Kubernetes control plane for live tests: the harness around `tests/testenv`.
//!
//! `tests/testenv` builds one binary (`cargo xtask testenv build`) holding etcd,
//! kube-apiserver, kube-scheduler, kube-controller-manager, KWOK and kubectl. Its `up` command
//! starts a profile of them on 127.0.0.1 and writes `D/ready.json` and `D/kubeconfig`.
//!
//! [`TestEnv::shared`] gives every test of one test binary the same environment:
//!
//! * when `CARPENTRY_TESTENV_DIR` is set (as `cargo xtask test` and `. D/env` do), it uses the
//!   running environment described by `$CARPENTRY_TESTENV_DIR/ready.json`;
//! * otherwise it starts one with the binary (profile `CARPENTRY_TESTENV_PROFILE`, default
//!   `full`) in `target/testenv/<test binary>-<pid>`; it stops when the test process exits;
//! * when the binary is missing, the test fails under `CI=true` and is skipped with a loud
//!   message otherwise.
//!
//! Tests isolate themselves with [`TestEnv::namespace`] (one namespace each) and unique names
//! for cluster-scoped objects ([`unique_name`]).
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! let Some(env) = carpentry_tests::testenv::TestEnv::shared() else { return Ok(()) };
//! let client = env.client().await?;
//! let ns = env.namespace(&client, "my-test").await?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use serde_json::Value;

/// Environment variable naming a running environment's directory (holding `ready.json`).
pub const DIR_VAR: &str = "CARPENTRY_TESTENV_DIR";
/// Environment variable overriding the testenv binary.
pub const BIN_VAR: &str = "CARPENTRY_TESTENV_BIN";
/// Environment variable choosing the profile of a self-started environment: api, sched or full.
pub const PROFILE_VAR: &str = "CARPENTRY_TESTENV_PROFILE";
/// The annotation (`key=value`) that makes KWOK manage a Node.
pub const KWOK_NODE_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// A running environment.
#[derive(Debug)]
pub struct TestEnv {
    /// The state directory (`ready.json`, `kubeconfig`, `logs/`).
    pub dir: PathBuf,
    /// Admin kubeconfig (client certificate in `system:masters`).
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// api, sched or full.
    pub profile: String,
    /// The parsed `ready.json`.
    pub ready: Value,
    /// The testenv binary, when known (it also serves as kubectl).
    bin: Option<PathBuf>,
    /// The supervisor we started, if we did (it exits by itself when this process does).
    _supervisor: Option<Mutex<Child>>,
}

static SHARED: OnceLock<Result<Option<TestEnv>, String>> = OnceLock::new();

impl TestEnv {
    /// The environment shared by the tests of this test binary, started on first use.
    ///
    /// `None` means "skip this test": the binary is missing and `CI` is not `true` (a loud
    /// message says so). Panics when the environment cannot be started, or when the binary is
    /// missing under `CI=true`.
    pub fn shared() -> Option<&'static TestEnv> {
        match SHARED.get_or_init(|| Self::init().map_err(|e| format!("{e:#}"))) {
            Ok(env) => env.as_ref(),
            Err(message) => panic!("testenv: {message}"),
        }
    }

    fn init() -> Result<Option<TestEnv>> {
        if let Some(dir) = std::env::var_os(DIR_VAR).filter(|d| !d.is_empty()) {
            let dir = PathBuf::from(dir);
            let env = Self::from_dir(&dir, find_binary(), None)
                .with_context(|| format!("{DIR_VAR}={} does not hold a ready environment", dir.display()))?;
            return Ok(Some(env));
        }
        let Some(bin) = find_binary() else {
            let wanted = default_binary();
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                bail!(
                    "the testenv binary is missing at {} (CI=true, so live tests must not be skipped); \
                     build it with `cargo xtask testenv build`",
                    wanted.display()
                );
            }
            say(&format!(
                "\n\
                 ************************************************************************\n\
                 * SKIPPING live Kubernetes tests: no testenv binary at\n\
                 *   {}\n\
                 * Build it with `cargo xtask testenv build` (cold: several minutes),\n\
                 * or point {DIR_VAR} at a running environment.\n\
                 ************************************************************************\n",
                wanted.display()
            ));
            return Ok(None);
        };
        let profile = std::env::var(PROFILE_VAR).ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "full".into());
        Self::start(bin, &profile).map(Some)
    }

    /// Reads `dir/ready.json`.
    pub fn from_dir(dir: &Path, bin: Option<PathBuf>, supervisor: Option<Child>) -> Result<TestEnv> {
        let path = dir.join("ready.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        let ready: Value = serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))?;
        let field = |name: &str| -> Result<String> {
            ready[name].as_str().map(str::to_owned).with_context(|| format!("{} has no {name:?}", path.display()))
        };
        Ok(TestEnv {
            dir: dir.to_path_buf(),
            kubeconfig: PathBuf::from(field("kubeconfig")?),
            server: field("server")?,
            profile: field("profile")?,
            bin,
            _supervisor: supervisor.map(Mutex::new),
            ready,
        })
    }

    /// Starts `testenv up` as a child of this process (it tears down when we exit) in
    /// target/testenv/<test binary>-<pid> and waits for its ready.json.
    fn start(bin: PathBuf, profile: &str) -> Result<TestEnv> {
        let root = target_dir().join("testenv");
        remove_stale_dirs(&root);
        let exe = std::env::current_exe().ok();
        let stem = exe.as_deref().and_then(Path::file_stem).and_then(|s| s.to_str()).unwrap_or("test");
        let dir = root.join(format!("{stem}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs")).with_context(|| format!("create {}", dir.display()))?;
        let log_path = dir.join("logs/supervisor.log");
        let log = std::fs::File::create(&log_path)?;
        let started = Instant::now();
        say(&format!("testenv: starting profile {profile} in {}", dir.display()));
        let mut child = Command::new(&bin)
            .args(["up", "--profile", profile, "--parent-pid", &std::process::id().to_string(), "--dir"])
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {}", bin.display()))?;
        let timeout = Duration::from_secs(
            std::env::var("CARPENTRY_TESTENV_TIMEOUT").ok().and_then(|s| s.parse().ok()).unwrap_or(240),
        );
        loop {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "`testenv up` exited with {status} before it was ready; {}:\n{}",
                    log_path.display(),
                    tail(&log_path, 40)
                );
            }
            let ready = std::fs::read_to_string(dir.join("ready.json")).ok();
            if let Some(ready) = ready.and_then(|r| serde_json::from_str::<Value>(&r).ok()) {
                if ready["supervisorPid"].as_u64() == Some(u64::from(child.id())) {
                    break;
                }
            }
            if started.elapsed() > timeout {
                let _ = child.kill();
                bail!("`testenv up` not ready after {timeout:?}; {}:\n{}", log_path.display(), tail(&log_path, 40));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        say(&format!("testenv: profile {profile} ready in {:.1?}", started.elapsed()));
        Self::from_dir(&dir, Some(bin), Some(child))
    }

    /// Whether the environment runs `component` (etcd, kube-apiserver, kube-scheduler,
    /// kube-controller-manager, kwok).
    pub fn has(&self, component: &str) -> bool {
        self.ready["components"].get(component).is_some()
    }

    /// Fails with a clear message unless the environment runs `component`.
    pub fn require(&self, component: &str) -> Result<()> {
        if !self.has(component) {
            bail!(
                "this test needs {component}, which profile {:?} of {} does not run",
                self.profile,
                self.dir.display()
            );
        }
        Ok(())
    }

    /// A client for the admin kubeconfig. Make one per test: a client belongs to the tokio
    /// runtime it was made on, and each `#[tokio::test]` has its own.
    pub async fn client(&self) -> Result<Client> {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        Ok(Client::try_from(config)?)
    }

    /// Creates a fresh namespace `<prefix>-<random>` for one test and returns its name.
    pub async fn namespace(&self, client: &Client, prefix: &str) -> Result<String> {
        let name = unique_name(prefix);
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some([("carpentry.dev/test".to_string(), truncate_label(prefix))].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
        Ok(name)
    }

    /// Restarts `component` in place (`testenv restart`): stopped (SIGTERM and up to 10 s, or
    /// SIGKILL when `kill`), kept down for `down_for`, started again on the same port with the
    /// same arguments and data; returns once it serves again. For faults a control plane has: an
    /// upgrade or a crash of kube-apiserver (etcd and every client kept).
    pub fn restart(&self, component: &str, down_for: Duration, kill: bool) -> Result<()> {
        let bin = self.bin.as_ref().context("restarting a component needs the testenv binary")?;
        let mut cmd = Command::new(bin);
        cmd.args(["restart", "--component", component, "--down-for", &format!("{}ms", down_for.as_millis()), "--dir"])
            .arg(&self.dir);
        if kill {
            cmd.arg("--kill");
        }
        let output = cmd.output().with_context(|| format!("run {}", bin.display()))?;
        if !output.status.success() {
            bail!("testenv restart {component} {}: {}", output.status, String::from_utf8_lossy(&output.stderr));
        }
        say(String::from_utf8_lossy(&output.stdout).trim_end());
        Ok(())
    }

    /// kubectl against this environment (KUBECONFIG set): the one built into the testenv
    /// binary when known (it matches the server's version), else `kubectl` from PATH.
    pub fn kubectl(&self) -> Command {
        let mut cmd = match &self.bin {
            Some(bin) => {
                let mut cmd = Command::new(bin);
                cmd.arg("kubectl");
                cmd
            }
            None => Command::new("kubectl"),
        };
        cmd.env("KUBECONFIG", &self.kubeconfig);
        cmd
    }
}

/// Applies `crd` server-side (as `field_manager`) and waits until it is Established, so that
/// its objects can be created.
pub async fn apply_crd(
    client: &Client,
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    field_manager: &str,
) -> Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let name = crd.metadata.name.clone().context("the CRD has no name")?;
    crds.patch(&name, &PatchParams::apply(field_manager).force(), &Patch::Apply(crd)).await?;
    wait_for(&format!("CRD {name} to be Established"), Duration::from_secs(60), || async {
        let crd = crds.get(&name).await?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        Ok(established.then_some(()))
    })
    .await
}

/// Polls `check` every 200 ms until it returns `Some`, failing after `timeout` with the last
/// error or state it reported.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let started = Instant::now();
    loop {
        let last = match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => "condition not met yet".to_string(),
            Err(e) => format!("{e:#}"),
        };
        if started.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what} ({last})");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `<prefix>-<6 random characters>`, a valid DNS-1123 label when the prefix is one.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut x = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // splitmix64 finaliser, then base36
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    let alphabet = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let suffix: String = (0..6).map(|i| alphabet[((x >> (i * 6)) % 36) as usize] as char).collect();
    let prefix: String = prefix.chars().take(63 - 7).collect();
    format!("{prefix}-{suffix}")
}

fn truncate_label(value: &str) -> String {
    value.chars().take(63).collect()
}

/// `$CARPENTRY_TESTENV_BIN`, else tests/testenv/bin/testenv, if it exists.
fn find_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os(BIN_VAR).filter(|b| !b.is_empty()) {
        return Some(PathBuf::from(bin)).filter(|b| b.is_file());
    }
    Some(default_binary()).filter(|b| b.is_file())
}

fn default_binary() -> PathBuf {
    match std::env::var_os(BIN_VAR).filter(|b| !b.is_empty()) {
        Some(bin) => PathBuf::from(bin),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("testenv/bin/testenv"),
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        manifest.parent().unwrap_or(manifest).join("target")
    })
}

/// Removes state directories of self-started environments whose supervisor is gone.
fn remove_stale_dirs(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(pid) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit_once('-'))
            .and_then(|(_, p)| p.parse::<u32>().ok())
        else {
            continue;
        };
        let supervisor_alive = std::fs::read_to_string(path.join("testenv.pid"))
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok())
            .is_some_and(|p| Path::new(&format!("/proc/{p}")).exists());
        let owner_alive = Path::new(&format!("/proc/{pid}")).exists();
        if !owner_alive && !supervisor_alive {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Writes a line to the real stderr: libtest captures `eprintln!` of passing tests, and a
/// skip or the environment's start-up must be visible.
fn say(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{message}");
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
