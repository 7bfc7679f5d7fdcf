//! carpentry-controller: the live adapter of carpentry-core. It watches the objects Karpenter
//! reads, keeps them as a cluster view ([`view`]), and serves what an operator needs around it
//! ([`serve`]): `/healthz`, `/readyz` (the view has listed everything) and `/snapshot` (the view as
//! a Scenario file the plugin, `simulate` and the playground load) on the health port, Prometheus
//! `/metrics` on the metrics port. One replica at a time leads, elected on a
//! `coordination.k8s.io/v1` Lease ([`leader`]).
//!
//! The decisions are core's; this crate holds only I/O: the reconcilers that apply them
//! ([`reconcile`]: provisioning, the NodeClaim lifecycle, termination) and the cloud providers
//! ([`cloud`]: `kwok`, `aws`). With `--dry-run` it decides and reports but writes nothing except events.
//! docs/controller.md says what works today.

mod clock;
mod cloud;
mod leader;
mod metrics;
mod ratelimit;
mod reconcile;
mod serve;
#[cfg(test)]
mod testing;
mod view;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use tracing::{info, warn};

/// See Cargo.toml: the resident memory of a controller at rest follows what it holds, not the
/// most it ever held.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CloudProvider {
    /// Nodes are KWOK Node objects (no cloud): try the controller on any cluster.
    Kwok,
    /// EC2.
    Aws,
}

/// Command-line flags (upstream's names where upstream has the option).
#[derive(Debug, Parser)]
#[command(name = "carpentry-controller", version, about = "Karpenter's controller on carpentry-core")]
pub struct Args {
    /// Where nodes come from.
    #[arg(long, value_enum, default_value = "kwok")]
    pub cloud_provider: CloudProvider,
    /// Kubeconfig file; without it, the in-cluster configuration (service account), else
    /// $KUBECONFIG or ~/.kube/config.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Watch, decide and report, but create, patch and delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Watch pods (and PodDisruptionBudgets, PersistentVolumeClaims) in this namespace only.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Namespace of the leader-election Lease (default: the pod's namespace, else `default`).
    #[arg(long, value_name = "NS")]
    pub leader_election_namespace: Option<String>,
    /// Run without leader election: this replica acts at once and alone (upstream
    /// `--disable-leader-election`). Only for a single replica.
    #[arg(long, env = "DISABLE_LEADER_ELECTION", value_parser = clap::builder::BoolishValueParser::new())]
    pub disable_leader_election: bool,
    /// Requests a second to the API server, smoothed (upstream `--kube-client-qps`); 0 or less:
    /// no limit. The leader election's requests are not counted.
    #[arg(long, env = "KUBE_CLIENT_QPS", default_value_t = 200, allow_negative_numbers = true)]
    pub kube_client_qps: i32,
    /// Requests at once before the rate applies (upstream `--kube-client-burst`).
    #[arg(long, env = "KUBE_CLIENT_BURST", default_value_t = 300)]
    pub kube_client_burst: u32,
    /// Name of the leader-election Lease (upstream `LEADER_ELECTION_NAME`).
    #[arg(long, default_value = "karpenter-leader-election")]
    pub leader_election_name: String,
    /// Prometheus /metrics port.
    #[arg(long, default_value_t = 8080)]
    pub metrics_port: u16,
    /// /healthz, /readyz and /snapshot port.
    #[arg(long, default_value_t = 8081)]
    pub health_port: u16,
    /// The kwok provider's delay from launch to the Node object (e.g. 5s, 500ms).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub kwok_registration_delay: Duration,
    /// The AWS region (the catalogue's offerings and prices in kwok mode; EC2's region with
    /// `--cloud-provider aws`). Default: with `aws`, the SDK's region chain (`AWS_DEFAULT_REGION`,
    /// the profile, instance metadata), and an error when it finds none; with `kwok`, the
    /// catalogue's default region.
    #[arg(long, env = "AWS_REGION")]
    pub region: Option<String>,
    /// The EKS cluster's name (upstream `CLUSTER_NAME`): instances, volumes and launch templates
    /// are tagged with it, and only instances tagged with it are listed and collected. Required
    /// with `--cloud-provider aws`.
    #[arg(long, env = "CLUSTER_NAME")]
    pub cluster_name: Option<String>,
    /// The SQS queue (its name) that EventBridge sends EC2's interruption events to (upstream
    /// `INTERRUPTION_QUEUE`): a spot interruption warning, an AWS Health scheduled change or an
    /// instance stopping drains and replaces its node ahead of time. `--cloud-provider aws` only.
    #[arg(long, env = "INTERRUPTION_QUEUE")]
    pub interruption_queue: Option<String>,
    /// The API server endpoint nodes join through, written into their bootstrap user data
    /// (upstream `CLUSTER_ENDPOINT`). Default: EKS DescribeCluster's answer. `--cloud-provider aws`
    /// only.
    #[arg(long, env = "CLUSTER_ENDPOINT")]
    pub cluster_endpoint: Option<String>,
    /// The cluster's CA bundle (base64 of the PEM) for nodes' bootstrap (upstream
    /// `CLUSTER_CA_BUNDLE`). Default: the CA this controller's own connection trusts.
    /// `--cloud-provider aws` only.
    #[arg(long, env = "CLUSTER_CA_BUNDLE")]
    pub cluster_ca_bundle: Option<String>,
}

/// `5s`, `500ms`, `2m`: Go's duration units a flag takes.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("{text:?} is not a duration (like 5s, 500ms or 2m)"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("{text:?}: unknown unit {unit:?} (use ms, s or m)")),
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    init_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("start the runtime")?;
    let result = runtime.block_on(run(args));
    if let Err(e) = &result {
        tracing::error!(error = %format!("{e:#}"), "carpentry-controller stopped");
    }
    result
}

/// JSON lines on stderr; `RUST_LOG` filters (default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().json().with_env_filter(filter).with_writer(std::io::stderr).init();
}

async fn run(args: Args) -> Result<()> {
    let given_region = args.region.clone().filter(|r| !r.is_empty());
    let region = match args.cloud_provider {
        CloudProvider::Kwok => {
            given_region.unwrap_or_else(|| carpentry_core::manifest::scenario::DEFAULT_REGION.to_string())
        }
        CloudProvider::Aws => cloud::aws::region(given_region).await?,
    };
    if carpentry_core::Catalogue::embedded().zones(&region).is_none() {
        bail!(
            "--region {:?} is not in the embedded catalogue (it has: {})",
            region,
            carpentry_core::Catalogue::embedded().regions().collect::<Vec<_>>().join(", ")
        );
    }
    let cluster_name = match (args.cloud_provider, args.cluster_name.as_deref()) {
        (CloudProvider::Aws, None | Some("")) => {
            bail!("--cloud-provider aws needs --cluster-name (or CLUSTER_NAME): the EKS cluster's name, which its instances are tagged with")
        }
        (_, name) => name.unwrap_or_default().to_string(),
    };
    let interruption_queue = args.interruption_queue.clone().filter(|q| !q.is_empty());
    if interruption_queue.is_some() && args.cloud_provider != CloudProvider::Aws {
        bail!("--interruption-queue is read by the aws provider only (EC2's interruption events)");
    }
    let bootstrap_given =
        [&args.cluster_endpoint, &args.cluster_ca_bundle].iter().any(|a| a.as_deref().is_some_and(|v| !v.is_empty()));
    if bootstrap_given && args.cloud_provider != CloudProvider::Aws {
        bail!(
            "--cluster-endpoint and --cluster-ca-bundle are read by the aws provider only (nodes' bootstrap user data)"
        );
    }
    let metrics = metrics::Metrics::default();
    let limit = |client: &str| {
        ratelimit::RateLimitLayer::new(
            f64::from(args.kube_client_qps),
            args.kube_client_burst,
            metrics.api_requests(client),
        )
    };
    let (limits, kubeconfig) = ((limit("requests"), limit("watches")), args.kubeconfig.as_deref());
    let (clients, server, trusted_ca) = connect(kubeconfig, limits, metrics).await?;
    let client = clients.requests.clone();
    info!(server = %server, dry_run = args.dry_run, region = %region, "carpentry-controller starting");
    match args.cloud_provider {
        CloudProvider::Kwok => {
            let kwok = cloud::kwok::Kwok::new(client.clone(), region.clone(), args.kwok_registration_delay);
            drive(args, region, clients, server, kwok).await
        }
        CloudProvider::Aws => {
            let bootstrap = cloud::aws::BootstrapSettings {
                cluster_endpoint: args.cluster_endpoint.clone(),
                cluster_ca_bundle: args.cluster_ca_bundle.clone().filter(|c| !c.is_empty()).or(trusted_ca),
            };
            let aws =
                cloud::aws::Aws::new(client.clone(), &region, cluster_name, interruption_queue, bootstrap).await?;
            drive(args, region, clients, server, aws).await
        }
    }
}

/// Runs the view, the leader election, the reconcilers on `cloud` and the HTTP servers until
/// SIGTERM.
async fn drive<P: cloud::CloudProvider>(
    args: Args,
    region: String,
    clients: Clients,
    server: String,
    cloud: P,
) -> Result<()> {
    let client = clients.requests;
    let (shutdown_tx, shutdown) = tokio::sync::watch::channel(false);
    let view = Arc::new(view::ClusterView::start(clients.watches.clone(), args.namespace.as_deref(), shutdown.clone()));
    let leader = if args.disable_leader_election {
        warn!("leader election is disabled: this replica acts alone; run one replica only");
        leader::Leader::unelected()
    } else {
        leader::Leader::start(
            clients.leader.clone(),
            clients.watches.clone(),
            args.leader_election_namespace.clone().unwrap_or_else(pod_namespace),
            args.leader_election_name.clone(),
            shutdown.clone(),
        )
        .await?
    };
    let metrics = clients.metrics.clone();
    let act = reconcile::act::Act::new(client.clone(), args.dry_run, identity(), metrics.clone(), leader.status());
    let events = act.clone();
    info!(cloud_provider = cloud.name(), "cloud provider ready");
    let timings = cloud.timings();
    let reconciler = reconcile::Reconciler::new(act, view.clone(), cloud, leader.status(), region.clone());
    let progress = reconciler.progress();
    let unavailable = reconciler.unavailable_offerings();
    let published = reconciler.views();
    let mut reconciling = tokio::spawn(reconciler.run(shutdown.clone()));
    let state = serve::State {
        view: view.clone(),
        published,
        leader: leader.status(),
        region,
        server,
        metrics,
        timings,
        progress,
        unavailable,
    };
    let health = serve::health(state.clone(), SocketAddr::from(([0, 0, 0, 0], args.health_port)), shutdown.clone());
    let metrics = serve::metrics(state, SocketAddr::from(([0, 0, 0, 0], args.metrics_port)), shutdown.clone());
    let (health, metrics) = (tokio::spawn(health), tokio::spawn(metrics));

    // The reconcilers end only on shutdown: if they end before (a panic), the process stops with
    // an error, to be restarted clean, instead of serving a healthy /healthz with nothing acting.
    // So does a watch that panicked: its part of the view would be frozen.
    let leadership_lost = leader.lost();
    let view_broken = view.broken();
    let (mut lost, mut broken) = (None, None);
    let stopped_early = tokio::select! {
        _ = wait_for_signal() => None,
        ended = &mut reconciling => Some(ended),
        why = leadership_lost => {
            lost = Some(why);
            None
        }
        why = view_broken => {
            broken = Some(why);
            None
        }
    };
    info!("shutting down");
    let _ = shutdown_tx.send(true);
    let failure = match (stopped_early, lost) {
        (Some(Err(e)), _) => Some(format!("the reconcilers panicked: {e}")),
        (Some(Ok(())), _) => Some("the reconcilers stopped before shutdown".to_string()),
        (None, Some(lost)) => {
            // Not waited for: a pass may be in a call to an API server out of reach.
            reconciling.abort();
            Some(lost)
        }
        (None, None) => {
            if let Err(e) = reconciling.await {
                warn!(error = %e, "the reconcilers panicked");
            }
            // The events the last passes queued, written (bounded: the API server may be gone).
            if tokio::time::timeout(EVENTS_FLUSH_TIMEOUT, events.events_written()).await.is_err() {
                warn!("events still queued at shutdown were not written");
            }
            broken
        }
    };
    for (name, task) in [("health server", health), ("metrics server", metrics)] {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(error = %format!("{e:#}"), "{name} stopped with an error"),
            Err(e) => warn!(error = %e, "{name} panicked"),
        }
    }
    if let Some(failure) = failure {
        // A lost Lease is another replica's now (or the API server is out of reach): not released.
        bail!("{failure}");
    }
    leader.release().await;
    info!("stopped");
    Ok(())
}

/// The User-Agent of every request to the API server.
const USER_AGENT: &str = concat!("carpentry-controller/", env!("CARGO_PKG_VERSION"));

/// How long a clean shutdown waits for the events still queued to be written.
const EVENTS_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a request to the API server may go without an answer (a watch is not bounded so: the
/// API server ends each after minutes, and kube's watcher has its own idle timeout). A request
/// that times out fails like any other and is retried by the next pass, so a hung API server
/// stops no loop for longer than this.
const API_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Clients of one API server: `requests` (every call that gets an answer, bounded by
/// [`API_READ_TIMEOUT`]) and `watches` (long-lived watch streams), each under the client-side
/// rate limit; and `leader`, the leader election's, bounded and not limited (upstream gives it a
/// config of its own: a burst of writes waiting for tokens must not delay a renewal).
struct Clients {
    requests: kube::Client,
    watches: kube::Client,
    leader: kube::Client,
    /// The metrics, which count the clients' requests.
    metrics: metrics::Metrics,
}

/// The clients for `kubeconfig`, else the in-cluster configuration, else the default kubeconfig;
/// the server's URL, for logs and the snapshot's header; and the CA certificates the connection
/// trusts, as base64 of their PEM (upstream `GetCABundle`: nodes' bootstrap trusts the same CA).
async fn connect(
    kubeconfig: Option<&std::path::Path>,
    (requests_limit, watches_limit): (ratelimit::RateLimitLayer, ratelimit::RateLimitLayer),
    metrics: metrics::Metrics,
) -> Result<(Clients, String, Option<String>)> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}: cannot read it", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .with_context(|| format!("--kubeconfig {}: no usable context", path.display()))?
        }
        None => kube::Config::infer().await.context("no in-cluster configuration and no usable kubeconfig")?,
    };
    let mut config = config;
    // Named in the API server's audit log and its request metrics, as client-go's binaries are
    // (kube's client sends no User-Agent of its own).
    config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(USER_AGENT)));
    let server = config.cluster_url.to_string();
    let trusted_ca = config.root_cert.as_deref().filter(|certs| !certs.is_empty()).map(|certs| {
        let pem: String = certs.iter().map(|der| pem_certificate(der)).collect();
        aws_smithy_types::base64::encode(pem)
    });
    let build = |config: kube::Config, limit: Option<ratelimit::RateLimitLayer>| -> Result<kube::Client> {
        let builder = kube::client::ClientBuilder::try_from(config).context("cannot build the Kubernetes client")?;
        Ok(match limit {
            Some(limit) => builder.with_layer(&limit).build(),
            None => builder.build(),
        })
    };
    let watches = build(config.clone(), Some(watches_limit))?;
    let mut bounded = config;
    bounded.read_timeout = Some(API_READ_TIMEOUT);
    // The timeout counts from each request, not from when its pooled connection went idle.
    bounded.reset_reader_on_write = true;
    let requests = build(bounded.clone(), Some(requests_limit))?;
    let leader = build(bounded, None)?;
    Ok((Clients { requests, watches, leader, metrics }, server, trusted_ca))
}

/// One DER certificate as PEM (base64 in lines of 64).
fn pem_certificate(der: &[u8]) -> String {
    let body = aws_smithy_types::base64::encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

/// The namespace the controller's pod runs in (the service account's), else `default`.
fn pod_namespace() -> String {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".into())
}

/// This replica's name in events: the pod's name (`HOSTNAME` in a pod), else the process id.
fn identity() -> String {
    std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| format!("pid-{}", std::process::id()))
}

/// SIGTERM (the kubelet stopping the pod) or Ctrl-C.
async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "cannot watch SIGTERM; stopping on Ctrl-C only");
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_flags_give_them() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("5h").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("soon").unwrap_err().contains("not a duration"));
    }

    #[test]
    fn flags_have_upstreams_defaults() {
        let args = Args::parse_from(["carpentry-controller", "--dry-run"]);
        assert_eq!((args.metrics_port, args.health_port), (8080, 8081));
        assert_eq!(args.leader_election_name, "karpenter-leader-election");
        assert_eq!(args.cloud_provider, CloudProvider::Kwok);
        assert_eq!(args.kwok_registration_delay, Duration::from_secs(5));
    }
}
