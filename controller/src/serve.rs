//! The controller's HTTP endpoints. Health port: `/healthz` (the process serves), `/readyz` (the
//! view has listed everything; otherwise 503 naming what has not, and why) and `/snapshot` (the
//! view as a Scenario file, redacted as `kubectl karpenter snapshot` redacts). Metrics port:
//! Prometheus `/metrics`, computed from the view when scraped.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::extract::{RawQuery, State as Extract};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use carpentry_core::manifest::scenario::Scenario;
use carpentry_core::manifest::write_snapshot;
use carpentry_core::nodeclaim::lifecycle::{phase, Phase};
use carpentry_core::pod::POD_STATE_LABELS;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::leader::LeaderStatus;
use crate::reconcile::Stalest;
use crate::view::ClusterView;

#[derive(Clone)]
pub struct State {
    pub view: Arc<ClusterView>,
    /// The view the reconcilers decide on, when there is one (this replica leads, every watch
    /// is synced): `/metrics` reads it rather than load a copy of the cluster on every scrape.
    pub published: tokio::sync::watch::Receiver<Option<Arc<crate::view::Loaded>>>,
    pub leader: LeaderStatus,
    pub region: String,
    /// The API server's URL.
    pub server: String,
    /// What the reconcilers counted and timed.
    pub metrics: crate::metrics::Metrics,
    /// The cloud provider's timings, for the snapshot's Scenario.
    pub timings: carpentry_core::manifest::scenario::TimingOverrides,
    /// The reconcilers' liveness.
    pub progress: crate::reconcile::Progress,
    /// The offerings the cloud provider cannot launch now, for the snapshot's Scenario.
    pub unavailable: crate::reconcile::UnavailableNow,
}

/// `/healthz` fails once a reconciler's task (the view's loader or a concern) has not begun a pass
/// for this long. A pass's calls are each bounded (the API server's read timeout, the AWS SDK's
/// operation timeout), so only a stuck or dead task gets here; the kubelet then restarts the
/// controller.
pub const LIVENESS_BOUND_SECONDS: i64 = 5 * 60;

/// Why the reconcilers count as stuck, if they do: `stalest` is what has gone longest without
/// progress (a task's last pass, or a reconcile under way).
fn stalled(stalest: Option<&Stalest>, now: i64) -> Option<String> {
    let stalest = stalest?;
    let idle = now - stalest.began();
    (idle > LIVENESS_BOUND_SECONDS).then(|| match stalest {
        Stalest::Pass { task, .. } => format!(
            "the {task} reconciler has not begun a pass for {idle} s (bound {LIVENESS_BOUND_SECONDS} s): a call is \
             stuck or the task stopped; the controller's log says which\n"
        ),
        Stalest::Reconcile { controller, object, .. } => format!(
            "the {controller} reconcile of {object} has run for {idle} s (bound {LIVENESS_BOUND_SECONDS} s): a call \
             is stuck; the controller's log says which\n"
        ),
    })
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// A resource's name as upstream's NodePool metrics label it: lower case, `-` as `_`.
fn resource_type(resource: &str) -> String {
    resource.to_lowercase().replace('-', "_")
}

/// A quantity as upstream's NodePool metrics give it: CPU in cores (thousandths kept), any other
/// resource in whole units rounded up (bytes, pods, devices).
fn gauge_value(resource: &str, quantity: &carpentry_core::quantity::Quantity) -> f64 {
    if resource == "cpu" {
        quantity.milli_value() as f64 / 1000.0
    } else {
        quantity.value() as f64
    }
}

/// `/healthz?verbose` (controller-runtime's healthz takes the same parameter) adds each task and
/// how long ago it began its last pass: every task begins one at least every second while it is
/// not stuck in a call, so one that lags names where the controller stopped.
async fn healthz(Extract(state): Extract<State>, RawQuery(query): RawQuery) -> Response {
    let now = crate::clock::now_seconds();
    let verbose = query.is_some_and(|q| q.split('&').any(|p| p == "verbose" || p.starts_with("verbose=")));
    let stuck = stalled(state.progress.stalest().as_ref(), now);
    let status = if stuck.is_some() { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
    let mut body = stuck.unwrap_or_else(|| "ok\n".into());
    if verbose {
        body.push_str(&passes(&state.progress.marks(), now));
        for (controller, object, began) in state.progress.oldest_reconciles() {
            body.push_str(&format!(
                "   {controller}: its oldest reconcile under way, of {object}, began {} s ago\n",
                now - began
            ));
        }
    }
    text(status, body)
}

/// Each task, `[+]` or `[-]` past the liveness bound, with the seconds since its last pass began.
fn passes(marks: &[(&str, i64)], now: i64) -> String {
    marks
        .iter()
        .map(|(task, at)| {
            let idle = now - at;
            let sign = if idle > LIVENESS_BOUND_SECONDS { '-' } else { '+' };
            format!("[{sign}]{task}: last pass began {idle} s ago\n")
        })
        .collect()
}

/// Serves the health port until `shutdown`.
pub async fn health(state: State, addr: SocketAddr, shutdown: tokio::sync::watch::Receiver<bool>) -> Result<()> {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/snapshot", get(snapshot))
        .with_state(state);
    serve(app, addr, "health", shutdown).await
}

/// Serves the metrics port until `shutdown`.
pub async fn metrics(state: State, addr: SocketAddr, shutdown: tokio::sync::watch::Receiver<bool>) -> Result<()> {
    let app = Router::new().route("/metrics", get(prometheus)).with_state(state);
    serve(app, addr, "metrics", shutdown).await
}

async fn serve(
    app: Router,
    addr: SocketAddr,
    what: &str,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<()> {
    let listener =
        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr} ({what} port)"))?;
    tracing::info!(address = %addr, "serving the {what} port");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        })
        .await
        .with_context(|| format!("the {what} server failed"))
}

fn text(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

/// 503 naming the watches that have not listed everything, with their errors; `None` once synced.
fn not_synced(view: &ClusterView) -> Option<Response> {
    let unsynced = view.unsynced();
    if unsynced.is_empty() {
        return None;
    }
    let mut body = String::from("the cluster view is not synced yet; waiting for:\n");
    for (resource, error) in unsynced {
        body.push_str(&format!("  {resource}{}\n", error.map(|e| format!(": {e}")).unwrap_or_default()));
    }
    Some(text(StatusCode::SERVICE_UNAVAILABLE, body))
}

async fn readyz(Extract(state): Extract<State>) -> Response {
    not_synced(&state.view).unwrap_or_else(|| text(StatusCode::OK, "ok\n".into()))
}

/// Runs `render` off the async workers: a scrape or a snapshot walks every object (thousands of
/// pods), which on a worker thread would hold up the reconcilers' tasks scheduled on it.
async fn off_the_runtime(render: impl FnOnce() -> Response + Send + 'static) -> Response {
    match tokio::task::spawn_blocking(render).await {
        Ok(response) => response,
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("rendering the answer failed: {e}\n")),
    }
}

async fn snapshot(Extract(state): Extract<State>) -> Response {
    off_the_runtime(move || render_snapshot(&state)).await
}

fn render_snapshot(state: &State) -> Response {
    if let Some(unavailable) = not_synced(&state.view) {
        return unavailable;
    }
    let crate::view::Loaded { live, .. } = state.view.load();
    let (mut m, skipped) = (live.manifests, live.skipped);
    let mut scenario = Scenario {
        api_version: "carpentry.dev/v1alpha1".into(),
        kind: "Scenario".into(),
        metadata: None,
        spec: Default::default(),
    };
    scenario.spec.region = state.region.clone();
    scenario.spec.start_time = Some(crate::clock::now_rfc3339());
    scenario.spec.timings = state.timings.clone();
    scenario.spec.unavailable_offerings = (state.unavailable)();
    m.scenario = Some(scenario);
    match write_snapshot(&m, &format!("carpentry-controller ({})", state.server), true, false, &skipped) {
        Ok(s) => ([(header::CONTENT_TYPE, "application/yaml")], s.text).into_response(),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, carpentry_core::error_chain(&e) + "\n"),
    }
}

type Labels = Vec<(String, String)>;

async fn prometheus(Extract(state): Extract<State>) -> Response {
    off_the_runtime(move || render_metrics(&state)).await
}

fn render_metrics(state: &State) -> Response {
    let mut root = Registry::default();
    state.metrics.register(&mut root);
    // upstream's `karpenter_pods_state` (pkg/controllers/metrics/pod), one series per pod.
    let pods_state = Family::<Labels, Gauge>::default();
    // upstream's `karpenter_nodepools_usage` and `_limit` (pkg/controllers/metrics/nodepool):
    // each NodePool's `status.resources` and `spec.limits`, by resource type.
    let (usage, limit) = (Family::<Labels, FloatGauge>::default(), Family::<Labels, FloatGauge>::default());
    let registry = root.sub_registry_with_prefix("carpentry");
    let objects = Family::<Labels, Gauge>::default();
    for (resource, count) in state.view.counts() {
        objects.get_or_create(&vec![("resource".into(), resource)]).set(count as i64);
    }
    registry.register("view_objects", "Objects in the controller's view, by resource", objects);
    let synced = Gauge::<i64>::default();
    synced.set(i64::from(state.view.unsynced().is_empty()));
    registry.register("view_synced", "1 once every watch has listed everything", synced);
    let leader = Gauge::<i64>::default();
    leader.set(i64::from(state.leader.leading()));
    registry.register("leader", "1 while this replica holds the leader-election Lease", leader);
    let decoded = Counter::<u64>::default();
    decoded.inc_by(state.view.decoded_total());
    registry.register(
        "view_objects_decoded",
        "Objects the view has loaded for core (again only when they change)",
        decoded,
    );
    {
        let published = state.published.borrow().clone();
        let loaded = published.unwrap_or_else(|| Arc::new(state.view.load()));
        let skipped = Family::<Labels, Gauge>::default();
        for s in &loaded.live.skipped {
            skipped.get_or_create(&vec![("gap".into(), format!("{:?}", s.gap))]).inc();
        }
        registry.register(
            "view_skipped_objects",
            "Objects left out of every decision because they do not load, by what that holds back",
            skipped,
        );
        let m = loaded.manifests();
        let pending = Gauge::<i64>::default();
        pending.set(m.pods.iter().filter(|p| carpentry_core::pod::is_pending(p)).count() as i64);
        registry.register("pods_pending", "Pods not bound to a node and not finished", pending);
        let nodeclaims = Family::<Labels, Gauge>::default();
        for nc in &m.nodeclaims {
            let nodepool = nc
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(carpentry_core::labels::NODEPOOL))
                .cloned()
                .unwrap_or_default();
            let phase = match phase(nc) {
                Phase::Launching => "Launching",
                Phase::Launched => "Launched",
                Phase::Registered => "Registered",
                Phase::Initialized => "Initialized",
                Phase::Terminating => "Terminating",
            };
            nodeclaims.get_or_create(&vec![("nodepool".into(), nodepool), ("phase".into(), phase.into())]).inc();
        }
        registry.register("nodeclaims", "NodeClaims by NodePool and lifecycle phase", nodeclaims);
        // Only the leader reports it, as upstream's metrics controller runs only on the leader.
        let leading = state.leader.leading();
        let nodes: HashMap<&str, &k8s_openapi::api::core::v1::Node> = if leading {
            m.nodes.iter().filter_map(|n| Some((n.metadata.name.as_deref()?, n))).collect()
        } else {
            HashMap::new()
        };
        for np in m.nodepools.iter().filter(|_| leading) {
            let held = np.status.as_ref().map(|s| &s.resources);
            let lists = [(&usage, held), (&limit, Some(&np.spec.limits.0))];
            for (gauges, list) in lists.into_iter().filter_map(|(g, l)| Some((g, l?))) {
                for (resource, quantity) in list {
                    let labels =
                        vec![("resource_type".into(), resource_type(resource)), ("nodepool".into(), np.name().into())];
                    gauges.get_or_create(&labels).set(gauge_value(resource, quantity));
                }
            }
        }
        for pod in m.pods.iter().filter(|_| leading) {
            let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).and_then(|n| nodes.get(n).copied());
            let values = carpentry_core::pod::pod_state_labels(pod, node);
            let labels: Labels = POD_STATE_LABELS.iter().map(|k| (*k).to_string()).zip(values).collect();
            pods_state.get_or_create(&labels).set(1);
        }
    }
    root.sub_registry_with_prefix("karpenter").register(
        "pods_state",
        "Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity type, instance type, pod phase, and pod readiness.",
        pods_state,
    );
    let nodepools = root.sub_registry_with_prefix("karpenter").sub_registry_with_prefix("nodepools");
    nodepools.register(
        "usage",
        "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.",
        usage,
    );
    nodepools.register(
        "limit",
        "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.",
        limit,
    );
    let mut body = String::new();
    match encode(&mut body, &root) {
        Ok(()) => ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], body)
            .into_response(),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the metrics: {e}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_fails_once_a_task_has_not_begun_a_pass_or_a_reconcile_has_not_ended_within_its_bound() {
        let now = 1_800_000_000;
        let pass = |began| Stalest::Pass { task: "lifecycle", began };
        assert_eq!(stalled(None, now), None);
        assert_eq!(stalled(Some(&pass(now - 1)), now), None);
        assert_eq!(stalled(Some(&pass(now - LIVENESS_BOUND_SECONDS)), now), None);
        let why = stalled(Some(&pass(now - LIVENESS_BOUND_SECONDS - 1)), now).expect("stuck");
        assert!(
            why.contains(&format!(
                "the lifecycle reconciler has not begun a pass for {} s",
                LIVENESS_BOUND_SECONDS + 1
            )),
            "{why}"
        );
        let reconcile = |began| Stalest::Reconcile { controller: "node.termination", object: "n1".into(), began };
        assert_eq!(stalled(Some(&reconcile(now - LIVENESS_BOUND_SECONDS)), now), None);
        let why = stalled(Some(&reconcile(now - LIVENESS_BOUND_SECONDS - 2)), now).expect("stuck");
        assert!(
            why.contains(&format!("the node.termination reconcile of n1 has run for {} s", LIVENESS_BOUND_SECONDS + 2)),
            "{why}"
        );
    }

    #[test]
    fn nodepool_quantities_are_gauged_as_upstream_gauges_them() {
        let q = |s: &str| s.parse::<carpentry_core::quantity::Quantity>().unwrap();
        assert_eq!(gauge_value("cpu", &q("1500m")), 1.5);
        assert_eq!(gauge_value("memory", &q("1Gi")), 1_073_741_824.0);
        assert_eq!(gauge_value("memory", &q("1.5")), 2.0, "rounded up, as Value()");
        assert_eq!(resource_type("ephemeral-storage"), "ephemeral_storage");
        assert_eq!(resource_type("nvidia.com/gpu"), "nvidia.com/gpu");
    }

    #[test]
    fn the_verbose_report_names_each_task_and_the_one_past_its_bound() {
        let now = 1_800_000_000;
        let report = passes(&[("view", now), ("node.termination", now - LIVENESS_BOUND_SECONDS - 9)], now);
        assert_eq!(
            report,
            format!(
                "[+]view: last pass began 0 s ago\n[-]node.termination: last pass began {} s ago\n",
                LIVENESS_BOUND_SECONDS + 9
            )
        );
    }
}
