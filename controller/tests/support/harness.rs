//! What the controller's live tests share: the CRDs installed as a user installs them, the
//! controller binary started against the test control plane, its HTTP endpoints.

#![allow(dead_code)] // each test binary uses its part

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use carpentry_tests::testenv::{apply_crd, unique_name, TestEnv};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::json;

pub const FIELD_MANAGER: &str = "carpentry-controller-live";

/// Installs the CRDs the controller ships, as `kubectl apply -f controller/deploy/chart/crds/` would.
pub async fn install_crds(client: &Client) -> Result<()> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/chart/crds");
    for file in ["karpenter.sh_nodepools.yaml", "karpenter.sh_nodeclaims.yaml", "karpenter.k8s.aws_ec2nodeclasses.yaml"]
    {
        let text = std::fs::read_to_string(dir.join(file))?;
        let crd: CustomResourceDefinition = serde_yaml::from_str(&text).with_context(|| file.to_string())?;
        apply_crd(client, &crd, FIELD_MANAGER).await.with_context(|| format!("apply {file}"))?;
    }
    Ok(())
}

/// The `inflate` Deployment of upstream's getting-started guide, at 0 replicas: pause pods of
/// 1 CPU each, kept on the test's NodePool by `nodeSelector: {node-type: <node_type>}`; with
/// `one_per_node`, a required hostname anti-affinity puts each on a node of its own.
pub fn inflate_deployment(node_type: &str, one_per_node: bool) -> Result<Deployment> {
    let mut spec = json!({
        "nodeSelector": { "node-type": node_type },
        "containers": [{ "name": "inflate", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
            "resources": { "requests": { "cpu": "1" } } }],
    });
    if one_per_node {
        spec["affinity"] = json!({ "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [
            { "labelSelector": { "matchLabels": { "app": "inflate" } }, "topologyKey": "kubernetes.io/hostname" },
        ] } });
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "inflate" },
        "spec": {
            "replicas": 0,
            "selector": { "matchLabels": { "app": "inflate" } },
            "template": { "metadata": { "labels": { "app": "inflate" } }, "spec": spec },
        },
    }))?)
}

/// The pods of `pods` that are Running and not being deleted, as (pod, node), when there are
/// exactly `want` of them: a [`wait_for`](carpentry_tests::testenv::wait_for) check.
pub async fn running_exactly(pods: &Api<Pod>, want: usize) -> Result<Option<Vec<(String, String)>>> {
    let running: Vec<(String, String)> = pods
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .map(|p| (p.metadata.name.unwrap_or_default(), p.spec.and_then(|s| s.node_name).unwrap_or_default()))
        .collect();
    Ok((running.len() == want).then_some(running))
}

pub fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

/// A port nothing listens on now.
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `GET path` on 127.0.0.1:port: the status code and body (HTTP/1.0, so the server closes).
pub fn get(port: u16, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").context("no HTTP header")?;
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).context("no status code")?;
    Ok((status, body.to_string()))
}

pub struct Controller {
    pub child: Child,
    pub log: PathBuf,
}

impl Controller {
    pub fn start(env: &TestEnv, args: &[&str]) -> Result<Controller> {
        Self::start_with_env(env, args, &[])
    }

    /// [`start`](Self::start) with these environment variables set.
    pub fn start_with_env(env: &TestEnv, args: &[&str], vars: &[(&str, &str)]) -> Result<Controller> {
        Self::start_as(&env.kubeconfig, args, vars)
    }

    /// The controller with `kubeconfig`'s credentials (the admin's, or a ServiceAccount's token).
    pub fn start_as(kubeconfig: &std::path::Path, args: &[&str], vars: &[(&str, &str)]) -> Result<Controller> {
        let log = std::env::temp_dir().join(format!("{}.log", unique_name("carpentry-controller")));
        let child = Command::new(Self::binary())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .envs(vars.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        Ok(Controller { child, log })
    }

    /// The binary under test: `CARPENTRY_CONTROLLER_BIN` when set (a release build, an installed
    /// one), else the one cargo built with these tests.
    pub fn binary() -> PathBuf {
        std::env::var_os("CARPENTRY_CONTROLLER_BIN")
            .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_carpentry-controller")), PathBuf::from)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process has exited (without waiting).
    pub fn has_exited(&mut self) -> Result<bool> {
        Ok(self.child.try_wait()?.is_some())
    }

    /// The exit status, once the controller exits by itself within `timeout`.
    pub fn exited_within(&mut self, timeout: Duration) -> Result<std::process::ExitStatus> {
        let started = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if started.elapsed() > timeout {
                bail!("the controller still runs after {timeout:?}; its log:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What a controller that did not do what a test waited for was doing, for the failure: its
    /// `/healthz?verbose` on `health` (each task and when it last began a pass; one that lags is
    /// stuck in a call) and, where gdb is installed and may attach, each thread's innermost frames
    /// (a thread blocked on a lock shows where; idle runtime workers park in epoll or a futex).
    pub fn diagnose(&self, health: u16) -> String {
        let mut report = match get(health, "/healthz?verbose") {
            Ok((code, body)) => format!("/healthz?verbose answered {code}:\n{body}"),
            Err(e) => format!("/healthz?verbose did not answer: {e:#}\n"),
        };
        let pid = self.child.id().to_string();
        let stacks = Command::new("timeout")
            .args(["60", "gdb", "-p", &pid, "-batch", "-ex", "thread apply all bt 12"])
            .stdin(Stdio::null())
            .output();
        match stacks {
            Ok(out) if out.status.success() => {
                report.push_str("threads (gdb):\n");
                for line in String::from_utf8_lossy(&out.stdout).lines() {
                    if line.starts_with("Thread ") || line.starts_with('#') {
                        report.extend(line.chars().take(240));
                        report.push('\n');
                    }
                }
            }
            Ok(out) => report.push_str(&format!("no thread stacks: gdb exited {}\n", out.status)),
            Err(e) => report.push_str(&format!("no thread stacks: gdb not run ({e})\n")),
        }
        report
    }

    /// SIGTERM, and the exit status within `timeout`.
    pub fn terminate(&mut self, timeout: Duration) -> Result<std::process::ExitStatus> {
        let pid = self.child.id().to_string();
        ensure!(Command::new("kill").args(["-TERM", &pid]).status()?.success(), "kill -TERM {pid}");
        self.exited_within(timeout).context("SIGTERM did not stop it")
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP proxy the test can cut, as a network partition cuts a replica off from a server (the API
/// server, an AWS endpoint): once cut, it closes every open connection and holds new ones without
/// a byte; once mended, it closes the held ones unanswered (what they sent never reaches the
/// server) and forwards new ones again.
pub struct Partition {
    pub port: u16,
    cut: tokio::sync::watch::Sender<bool>,
}

impl Partition {
    /// A proxy to `server` (`https://host:port` or `http://host:port`).
    pub async fn to(server: &str) -> Result<Partition> {
        let upstream = server.trim_start_matches("https://").trim_start_matches("http://").trim_end_matches('/');
        let upstream = upstream.to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (cut, cut_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let (upstream, mut cut_rx) = (upstream.clone(), cut_rx.clone());
                tokio::spawn(async move {
                    if *cut_rx.borrow() {
                        let _ = cut_rx.wait_for(|cut| !*cut).await; // held, silent, until mended
                        return;
                    }
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut_rx.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Ok(Partition { port, cut })
    }

    /// The proxy's URL, with `scheme`.
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    pub fn mend(&self) {
        self.cut.send_replace(false);
    }

    /// A copy of `kubeconfig` whose server is this proxy (the API server's certificate names
    /// 127.0.0.1, which the proxy's address is too).
    pub fn kubeconfig(&self, env: &TestEnv) -> Result<std::path::PathBuf> {
        let text = std::fs::read_to_string(&env.kubeconfig)?;
        ensure!(text.contains(&env.server), "the kubeconfig names {}", env.server);
        let path = std::env::temp_dir().join(format!("{}.kubeconfig", unique_name("partition")));
        std::fs::write(&path, text.replace(&env.server, &self.url("https")))?;
        Ok(path)
    }
}

/// The sum of the samples of `name` in a Prometheus text exposition `body` whose labels include
/// every pair of `labels` (0 when there is none).
pub fn metric_sum(body: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    body.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (set, value) = match rest.strip_prefix('{') {
                Some(labelled) => labelled.split_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            let has = |(k, v): &(&str, &str)| set.split(',').any(|pair| pair == format!("{k}=\"{v}\""));
            labels.iter().all(has).then(|| value.split(' ').next()?.parse::<f64>().ok())?
        })
        .sum()
}

/// Whether a Prometheus text exposition `body` has the sample line `sample` (`carpentry_leader 1`):
/// a whole line, as a `# HELP` text may hold the same words.
pub fn has_sample(body: &str, sample: &str) -> bool {
    body.lines().any(|line| line == sample)
}

/// An EC2NodeClass and a NodePool named after `prefix`, its nodes labelled with a fresh
/// `node-type` (for pods' nodeSelector), with these NodePool `requirements` and `disruption`; the
/// NodePool's name and the label's value. The class's selectors are the kwok provider's: any.
pub async fn create_pool(
    client: &Client,
    prefix: &str,
    requirements: serde_json::Value,
    disruption: serde_json::Value,
) -> Result<(String, String)> {
    let (class, nodepool, node_type) =
        (unique_name(&format!("{prefix}-class")), unique_name(&format!("{prefix}-np")), unique_name("k"));
    let pp = PostParams::default();
    let classes = resource("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses");
    let mut obj = DynamicObject::new(&class, &classes);
    obj.data = json!({ "spec": {
        "amiSelectorTerms": [{ "alias": "al2023@latest" }],
        "role": format!("KarpenterNodeRole-{prefix}"),
        "subnetSelectorTerms": [{ "tags": { "karpenter.sh/discovery": prefix } }],
        "securityGroupSelectorTerms": [{ "tags": { "karpenter.sh/discovery": prefix } }],
    } });
    Api::<DynamicObject>::all_with(client.clone(), &classes).create(&pp, &obj).await?;
    let pools = resource("karpenter.sh", "NodePool", "nodepools");
    let mut obj = DynamicObject::new(&nodepool, &pools);
    obj.data = json!({ "spec": {
        "template": {
            "metadata": { "labels": { "node-type": node_type } },
            "spec": {
                "nodeClassRef": { "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class },
                "requirements": requirements,
            },
        },
        "disruption": disruption,
    } });
    Api::<DynamicObject>::all_with(client.clone(), &pools).create(&pp, &obj).await?;
    Ok((nodepool, node_type))
}

/// One controller without leader election (it acts at once after a restart), kwok nodes joining
/// 1 s after launch, pods of `ns` only, with `extra` arguments; with its health and metrics ports.
pub fn start_alone(env: &TestEnv, ns: &str, extra: &[&str]) -> Result<(Controller, u16, u16)> {
    let (health, metrics) = (free_port()?, free_port()?);
    let (health_arg, metrics_arg) = (health.to_string(), metrics.to_string());
    let mut args = vec![
        "--disable-leader-election",
        "--kwok-registration-delay",
        "1s",
        "--namespace",
        ns,
        "--health-port",
        &health_arg,
        "--metrics-port",
        &metrics_arg,
    ];
    args.extend_from_slice(extra);
    Ok((Controller::start(env, &args)?, health, metrics))
}
