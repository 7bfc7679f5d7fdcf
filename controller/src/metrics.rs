//! The controller's Prometheus metrics that count and time what the reconcilers do, with
//! upstream Karpenter v1.14.1's names and labels where upstream has the metric (`pkg/metrics`,
//! `pkg/controllers/disruption/metrics.go`, `pkg/controllers/node/termination/metrics.go`,
//! `pkg/cloudprovider/metrics/cloudprovider.go`, `pkg/controllers/provisioning/scheduling/metrics.go`,
//! `pkg/controllers/state/metrics.go`; karpenter-provider-aws v1.14.1
//! `pkg/controllers/interruption/metrics.go`), and
//! `carpentry_*` for what upstream leaves to controller-runtime or does not measure: each
//! concern's pass, and every write to the API server. The gauges of the view (objects, pending
//! pods, NodeClaims by phase) are read at scrape time ([`crate::serve`]).

use std::time::Instant;

use carpentry_core::api::NodeClaim;
use carpentry_core::disruption::Method;
use carpentry_core::labels;
use k8s_openapi::api::core::v1::Node;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

pub type Labels = Vec<(String, String)>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// client_golang's `DefBuckets` (upstream's cloud-provider histogram sets none).
fn default_buckets() -> Histogram {
    Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
}

/// upstream `NodeLifetimeDurationSeconds`'s buckets: 15 minutes to 30 days.
fn lifetime_buckets() -> Histogram {
    const HOUR: f64 = 3600.0;
    const DAY: f64 = 24.0 * HOUR;
    Histogram::new([
        0.25 * HOUR,
        0.5 * HOUR,
        0.75 * HOUR,
        HOUR,
        2.0 * HOUR,
        4.0 * HOUR,
        6.0 * HOUR,
        8.0 * HOUR,
        10.0 * HOUR,
        12.0 * HOUR,
        16.0 * HOUR,
        20.0 * HOUR,
        DAY,
        2.0 * DAY,
        3.0 * DAY,
        5.0 * DAY,
        10.0 * DAY,
        15.0 * DAY,
        20.0 * DAY,
        25.0 * DAY,
        30.0 * DAY,
    ])
}

/// From 1 s doubling to about 4.5 hours: from a node with nothing to drain to one that waits out a
/// long terminationGracePeriod.
fn termination_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

/// upstream `metrics.DurationBuckets` (controller-runtime's, with longer ones for singletons).
fn duration_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5,
        1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
        120.0, 150.0, 300.0, 450.0, 600.0,
    ])
}

/// From 5 ms doubling to about 80 s: a pass is usually milliseconds, one waiting on a cloud call
/// up to its 2-minute bound.
fn pass_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// Every counter and histogram, shared by the reconcilers (clones share the values).
#[derive(Clone)]
pub struct Metrics {
    /// `carpentry_decisions_total{reason}`.
    pub decisions: Family<Labels, Counter>,
    /// `carpentry_api_writes_total{verb, resource}`: every write sent to the API server.
    api_writes: Family<Labels, Counter>,
    /// `carpentry_api_write_errors_total{verb, resource}`.
    api_write_errors: Family<Labels, Counter>,
    /// `carpentry_api_requests_total{client}`: every request through a rate-limited client.
    api_requests: Family<Labels, Counter>,
    /// `carpentry_events_dropped_total`: events not queued (the queue full, or its writer gone).
    events_dropped: Counter,
    /// `karpenter_nodeclaims_created_total{reason, nodepool, min_values_relaxed}`.
    nodeclaims_created: Family<Labels, Counter>,
    /// `karpenter_nodeclaims_terminated_total{nodepool, capacity_type, zone}`.
    nodeclaims_terminated: Family<Labels, Counter>,
    /// `karpenter_nodeclaims_disrupted_total{reason, nodepool, capacity_type}`.
    nodeclaims_disrupted: Family<Labels, Counter>,
    /// `karpenter_nodes_terminated_total{nodepool, zone}`.
    nodes_terminated: Family<Labels, Counter>,
    /// `karpenter_nodes_created_total{nodepool, zone}`: a NodeClaim's Node registered.
    nodes_created: Family<Labels, Counter>,
    /// `karpenter_nodes_drained_total{nodepool}`.
    nodes_drained: Family<Labels, Counter>,
    /// `karpenter_nodes_termination_duration_seconds{nodepool}` (upstream's is a summary).
    node_termination_duration: Histograms,
    /// `karpenter_nodes_lifetime_duration_seconds{nodepool}`.
    node_lifetime: Histograms,
    /// `karpenter_voluntary_disruption_decisions_total{decision, reason, consolidation_type}`.
    disruption_decisions: Family<Labels, Counter>,
    /// `karpenter_cloudprovider_duration_seconds{controller, method, provider}`.
    cloud_duration: Histograms,
    /// `karpenter_cloudprovider_errors_total{controller, method, provider, error}`.
    cloud_errors: Family<Labels, Counter>,
    /// `carpentry_reconcile_pass_duration_seconds{concern}`.
    pass_duration: Histograms,
    /// `controller_runtime_reconcile_total{controller, result}`: each per-object reconcile.
    reconciles: Family<Labels, Counter>,
    /// `controller_runtime_reconcile_errors_total{controller}`.
    reconcile_errors: Family<Labels, Counter>,
    /// `controller_runtime_reconcile_time_seconds{controller}`.
    reconcile_time: Histograms,
    /// `karpenter_scheduler_scheduling_duration_seconds{controller}`.
    scheduling_duration: Histograms,
    /// `karpenter_scheduler_unschedulable_pods_count{controller}`: the last round's.
    unschedulable_pods: Family<Labels, Gauge>,
    /// `karpenter_cluster_state_synced`, `_node_count`, `_unsynced_time_seconds`.
    cluster_state_synced: Gauge,
    cluster_state_nodes: Gauge,
    cluster_state_unsynced_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// `karpenter_interruption_received_messages_total{message_type}`.
    interruption_received: Family<Labels, Counter>,
    /// `karpenter_interruption_deleted_messages_total`.
    interruption_deleted: Counter,
    /// `karpenter_interruption_message_queue_duration_seconds`.
    interruption_latency: Histograms,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            decisions: Family::default(),
            api_writes: Family::default(),
            api_write_errors: Family::default(),
            api_requests: Family::default(),
            events_dropped: Counter::default(),
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            nodes_terminated: Family::default(),
            nodes_created: Family::default(),
            nodes_drained: Family::default(),
            node_termination_duration: Family::new_with_constructor(termination_buckets),
            node_lifetime: Family::new_with_constructor(lifetime_buckets),
            disruption_decisions: Family::default(),
            cloud_duration: Family::new_with_constructor(default_buckets),
            cloud_errors: Family::default(),
            pass_duration: Family::new_with_constructor(pass_buckets),
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(pass_buckets),
            scheduling_duration: Family::new_with_constructor(duration_buckets),
            unschedulable_pods: Family::default(),
            cluster_state_synced: Gauge::default(),
            cluster_state_nodes: Gauge::default(),
            cluster_state_unsynced_seconds: Gauge::default(),
            interruption_received: Family::default(),
            interruption_deleted: Counter::default(),
            interruption_latency: Family::new_with_constructor(duration_buckets),
        }
    }
}

fn label(name: &str, value: impl Into<String>) -> (String, String) {
    (name.to_string(), value.into())
}

fn nodeclaim_label(nc: &NodeClaim, key: &str) -> String {
    nc.metadata.labels.as_ref().and_then(|l| l.get(key)).cloned().unwrap_or_default()
}

/// upstream `pretty.ToSnakeCase` of a reason (`LaunchTimeout` → `launch_timeout`).
fn snake_case(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

impl Metrics {
    /// Registers every metric in `root`: upstream's as `karpenter_*`, the rest as `carpentry_*`.
    pub fn register(&self, root: &mut Registry) {
        self.register_carpentry(root.sub_registry_with_prefix("carpentry"));
        self.register_karpenter(root.sub_registry_with_prefix("karpenter"));
        self.register_controller_runtime(root.sub_registry_with_prefix("controller_runtime"));
    }

    /// controller-runtime's reconcile metrics (`pkg/internal/controller/metrics`), which upstream
    /// Karpenter exposes for each of its controllers: here, for each per-object reconciler.
    fn register_controller_runtime(&self, controller_runtime: &mut Registry) {
        controller_runtime.register(
            "reconcile",
            "Total number of reconciliations per controller",
            self.reconciles.clone(),
        );
        controller_runtime.register(
            "reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.reconcile_errors.clone(),
        );
        controller_runtime.register(
            "reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            self.reconcile_time.clone(),
        );
    }

    fn register_carpentry(&self, carpentry: &mut Registry) {
        carpentry.register(
            "decisions",
            "Decisions the reconcilers made (or, in --dry-run, would have carried out), by reason",
            self.decisions.clone(),
        );
        carpentry.register(
            "api_writes",
            "Writes sent to the API server (creates, patches, deletes, evictions, events), by verb and resource",
            self.api_writes.clone(),
        );
        carpentry.register(
            "api_write_errors",
            "Writes the API server refused or did not answer, by verb and resource",
            self.api_write_errors.clone(),
        );
        carpentry.register(
            "api_requests",
            "Requests sent to the API server through the client's rate limit (reads, writes, lists and watch starts), by client",
            self.api_requests.clone(),
        );
        carpentry.register(
            "events_dropped",
            "Events not queued: the queue to the API server was full (offered again by the next pass), or its writer was gone",
            self.events_dropped.clone(),
        );
        carpentry.register(
            "reconcile_pass_duration_seconds",
            "How long each concern's pass took, by concern",
            self.pass_duration.clone(),
        );
    }

    fn register_karpenter(&self, karpenter: &mut Registry) {
        karpenter.register(
            "nodeclaims_created",
            "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created, the owning nodepool, and if min values was relaxed for this nodeclaim.",
            self.nodeclaims_created.clone(),
        );
        karpenter.register(
            "nodeclaims_terminated",
            "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, capacity type, and zone.",
            self.nodeclaims_terminated.clone(),
        );
        karpenter.register(
            "nodeclaims_disrupted",
            "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted and the owning nodepool.",
            self.nodeclaims_disrupted.clone(),
        );
        karpenter.register(
            "nodes_terminated",
            "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone.",
            self.nodes_terminated.clone(),
        );
        karpenter.register(
            "nodes_created",
            "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone.",
            self.nodes_created.clone(),
        );
        karpenter.register(
            "nodes_drained",
            "The total number of nodes drained by Karpenter",
            self.nodes_drained.clone(),
        );
        karpenter.register(
            "nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer",
            self.node_termination_duration.clone(),
        );
        karpenter.register(
            "nodes_lifetime_duration_seconds",
            "The lifetime duration of the nodes since creation.",
            self.node_lifetime.clone(),
        );
        karpenter.register(
            "voluntary_disruption_decisions",
            "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type.",
            self.disruption_decisions.clone(),
        );
        karpenter.register(
            "cloudprovider_duration_seconds",
            "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
            self.cloud_duration.clone(),
        );
        karpenter.register(
            "cloudprovider_errors",
            "Total number of errors returned from CloudProvider calls.",
            self.cloud_errors.clone(),
        );
        karpenter.register(
            "scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
            self.scheduling_duration.clone(),
        );
        karpenter.register(
            "scheduler_unschedulable_pods_count",
            "The number of unschedulable Pods.",
            self.unschedulable_pods.clone(),
        );
        karpenter.register(
            "cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are stored in the APIServer have the same representation as Karpenter's cluster state",
            self.cluster_state_synced.clone(),
        );
        karpenter.register(
            "cluster_state_node_count",
            "Current count of nodes in cluster state",
            self.cluster_state_nodes.clone(),
        );
        karpenter.register(
            "cluster_state_unsynced_time_seconds",
            "The time for which cluster state is not synced",
            self.cluster_state_unsynced_seconds.clone(),
        );
        karpenter.register(
            "interruption_received_messages",
            "Count of messages received from the SQS queue. Broken down by message type and whether the message was actionable.",
            self.interruption_received.clone(),
        );
        karpenter.register(
            "interruption_deleted_messages",
            "Count of messages deleted from the SQS queue.",
            self.interruption_deleted.clone(),
        );
        karpenter.register(
            "interruption_message_queue_duration_seconds",
            "Amount of time an interruption message is on the queue before it is processed by karpenter.",
            self.interruption_latency.clone(),
        );
    }

    /// upstream `provisioner.Schedule`: one scheduling run of `controller` (`provisioner`) that
    /// began at `started`, leaving `unschedulable` pods.
    pub fn scheduled(&self, controller: &str, started: Instant, unschedulable: usize) {
        let labels = vec![label("controller", controller)];
        self.scheduling_duration.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
        self.unschedulable_pods.get_or_create(&labels).set(unschedulable as i64);
    }

    /// upstream `Cluster.Synced`'s gauges: whether the view is synced, the nodes it holds, and
    /// for how long it has not been synced (`unsynced_for`, 0 when synced).
    pub fn cluster_state(&self, synced: bool, nodes: Option<usize>, unsynced_for: f64) {
        self.cluster_state_synced.set(i64::from(synced));
        if let Some(nodes) = nodes {
            self.cluster_state_nodes.set(nodes as i64);
        }
        self.cluster_state_unsynced_seconds.set(unsynced_for);
    }

    /// upstream interruption: a message of `kind` received and parsed.
    pub fn interruption_received(&self, kind: &str) {
        self.interruption_received.get_or_create(&vec![label("message_type", kind)]).inc();
    }

    /// upstream interruption: a message handled `latency` seconds after its event's time.
    pub fn interruption_handled(&self, latency: f64) {
        self.interruption_latency.get_or_create(&Vec::new()).observe(latency.max(0.0));
    }

    /// upstream interruption: a message deleted from the queue.
    pub fn interruption_deleted(&self) {
        self.interruption_deleted.inc();
    }

    /// The counter of the requests client `client` (`requests`, `watches`) sends.
    pub fn api_requests(&self, client: &str) -> Counter {
        self.api_requests.get_or_create(&vec![label("client", client)]).clone()
    }

    /// An event not queued: the queue was full.
    pub fn event_dropped(&self) {
        self.events_dropped.inc();
    }

    /// A write `what` ("patch NodeClaim x status", "evict Pod ns/x") sent, or failed.
    pub fn api_write(&self, what: &str, failed: bool) {
        let mut words = what.split(' ');
        let verb = words.next().unwrap_or_default();
        let mut resource = words.next().unwrap_or_default().to_string();
        if what.ends_with(" status") {
            resource.push_str("/status");
        }
        let labels = vec![label("verb", verb), label("resource", resource)];
        match failed {
            false => self.api_writes.get_or_create(&labels).inc(),
            true => self.api_write_errors.get_or_create(&labels).inc(),
        };
    }

    /// upstream `provisioner.go` and `disruption/queue.go`: a NodeClaim created, `reason`
    /// `provisioned` or the disruption's reason in lower case.
    pub fn nodeclaim_created(&self, nc: &NodeClaim, reason: &str) {
        let relaxed = nc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::NODECLAIM_MIN_VALUES_RELAXED))
            .cloned()
            .unwrap_or_else(|| "false".into());
        let labels = vec![
            label("reason", reason),
            label("nodepool", nodeclaim_label(nc, labels::NODEPOOL)),
            label("min_values_relaxed", relaxed),
        ];
        self.nodeclaims_created.get_or_create(&labels).inc();
    }

    /// upstream lifecycle `controller.go`: the termination finalizer came off.
    /// A NodeClaim's Node registered (upstream `registration.go` counts it then), labelled by the
    /// NodeClaim's NodePool and zone.
    pub fn node_created(&self, nc: &NodeClaim) {
        let labels = vec![
            label("nodepool", nodeclaim_label(nc, labels::NODEPOOL)),
            label("zone", nodeclaim_label(nc, labels::TOPOLOGY_ZONE)),
        ];
        self.nodes_created.get_or_create(&labels).inc();
    }

    pub fn nodeclaim_terminated(&self, nc: &NodeClaim) {
        let labels = vec![
            label("nodepool", nodeclaim_label(nc, labels::NODEPOOL)),
            label("capacity_type", nodeclaim_label(nc, labels::CAPACITY_TYPE)),
            label("zone", nodeclaim_label(nc, labels::TOPOLOGY_ZONE)),
        ];
        self.nodeclaims_terminated.get_or_create(&labels).inc();
    }

    /// A NodeClaim deleted for `reason` (upstream's words in CamelCase: `Empty`, `Expired`,
    /// `LaunchTimeout`, `InsufficientCapacity`, `GarbageCollected`), as upstream labels it: snake
    /// case.
    pub fn nodeclaim_disrupted(&self, nc: &NodeClaim, reason: &str) {
        let labels = vec![
            label("reason", snake_case(reason)),
            label("nodepool", nodeclaim_label(nc, labels::NODEPOOL)),
            label("capacity_type", nodeclaim_label(nc, labels::CAPACITY_TYPE)),
        ];
        self.nodeclaims_disrupted.get_or_create(&labels).inc();
    }

    /// upstream node.termination `removeFinalizer`: the finalizer came off `node` at `now` (epoch
    /// seconds), counted with how long since its deletion and its creation.
    pub fn node_terminated(&self, node: &Node, now: i64) {
        let node_label =
            |key: &str| node.metadata.labels.as_ref().and_then(|l| l.get(key)).cloned().unwrap_or_default();
        let by_pool = vec![label("nodepool", node_label(labels::NODEPOOL))];
        let mut labels = by_pool.clone();
        labels.push(label("zone", node_label(labels::TOPOLOGY_ZONE)));
        self.nodes_terminated.get_or_create(&labels).inc();
        let since = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
            t.map(|t| (now - t.0.as_second()).max(0) as f64)
        };
        if let Some(seconds) = since(node.metadata.deletion_timestamp.as_ref()) {
            self.node_termination_duration.get_or_create(&by_pool).observe(seconds);
        }
        if let Some(seconds) = since(node.metadata.creation_timestamp.as_ref()) {
            self.node_lifetime.get_or_create(&by_pool).observe(seconds);
        }
    }

    /// upstream node.termination: a node's NodeClaim turned `Drained`.
    pub fn node_drained(&self, nodepool: &str) {
        self.nodes_drained.get_or_create(&vec![label("nodepool", nodepool)]).inc();
    }

    /// upstream `queue.go` `StartCommand`: a disruption command begun.
    pub fn disruption_decision(&self, method: Method, reason: &str, replaces: bool) {
        let consolidation_type = match method {
            Method::Emptiness => "empty",
            Method::SingleNodeConsolidation => "single",
            Method::MultiNodeConsolidation => "multi",
            Method::Drift => "",
        };
        let labels = vec![
            label("decision", if replaces { "replace" } else { "delete" }),
            label("reason", reason.to_lowercase()),
            label("consolidation_type", consolidation_type),
        ];
        self.disruption_decisions.get_or_create(&labels).inc();
    }

    /// upstream's cloud-provider decorator: a call of `method` (`Create`, `Delete`, `List`) by
    /// `controller`, begun at `started`; `error` the upstream error type it failed with
    /// (`InsufficientCapacityError`, `NodeClaimNotFoundError`, `NodeClassNotReadyError`, or
    /// empty), `None` when it succeeded.
    pub fn cloud_call(&self, controller: &str, method: &str, provider: &str, started: Instant, error: Option<&str>) {
        let labels = vec![label("controller", controller), label("method", method), label("provider", provider)];
        self.cloud_duration.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
        if let Some(error) = error {
            let mut labels = labels;
            labels.push(label("error", error));
            self.cloud_errors.get_or_create(&labels).inc();
        }
    }

    /// A per-object reconcile of `controller`, begun at `started`: `None` when it failed, else
    /// whether it asked to run again after a while.
    pub fn reconcile(&self, controller: &str, started: Instant, requeued: Option<bool>) {
        let by_controller = vec![label("controller", controller)];
        self.reconcile_time.get_or_create(&by_controller).observe(started.elapsed().as_secs_f64());
        let result = match requeued {
            None => "error",
            Some(true) => "requeue_after",
            Some(false) => "success",
        };
        if requeued.is_none() {
            self.reconcile_errors.get_or_create(&by_controller).inc();
        }
        let mut labels = by_controller;
        labels.push(label("result", result));
        self.reconciles.get_or_create(&labels).inc();
    }

    /// A concern's pass, begun at `started`.
    pub fn pass(&self, concern: &str, started: Instant) {
        self.pass_duration.get_or_create(&vec![label("concern", concern)]).observe(started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_labelled_as_upstream_labels_them() {
        assert_eq!(snake_case("LaunchTimeout"), "launch_timeout");
        assert_eq!(snake_case("Empty"), "empty");
        assert_eq!(snake_case("GarbageCollected"), "garbage_collected");
    }

    #[test]
    fn writes_count_by_verb_and_resource_and_render_under_their_prefixes() {
        let metrics = Metrics::default();
        metrics.api_write("patch NodeClaim default-x status", false);
        metrics.api_write("patch NodeClaim default-x status", false);
        metrics.api_write("evict Pod ns/p", true);
        metrics.disruption_decision(Method::SingleNodeConsolidation, "Underutilized", true);
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "labels": {"karpenter.sh/nodepool": "default",
                "topology.kubernetes.io/zone": "us-west-2a"},
                "creationTimestamp": "2026-12-06T00:00:00Z", "deletionTimestamp": "2026-12-06T01:59:00Z"},
        }))
        .unwrap();
        metrics.node_terminated(&node, carpentry_core::api::time::parse_time("2026-12-06T02:00:00Z").unwrap());
        metrics.node_drained("default");
        let started = Instant::now();
        metrics.reconcile("nodeclass", started, Some(true));
        metrics.reconcile("nodeclass", started, None);
        metrics.reconcile("nodeclass", started, None);
        let mut root = Registry::default();
        metrics.register(&mut root);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &root).expect("encode");
        assert!(text.contains(r#"carpentry_api_writes_total{verb="patch",resource="NodeClaim/status"} 2"#), "{text}");
        assert!(text.contains(r#"carpentry_api_write_errors_total{verb="evict",resource="Pod"} 1"#), "{text}");
        let decision = r#"karpenter_voluntary_disruption_decisions_total{decision="replace",reason="underutilized",consolidation_type="single"} 1"#;
        assert!(text.contains(decision), "{text}");
        for sample in [
            r#"karpenter_nodes_terminated_total{nodepool="default",zone="us-west-2a"} 1"#,
            r#"karpenter_nodes_drained_total{nodepool="default"} 1"#,
            r#"karpenter_nodes_termination_duration_seconds_sum{nodepool="default"} 60.0"#,
            r#"karpenter_nodes_lifetime_duration_seconds_sum{nodepool="default"} 7200.0"#,
            r#"karpenter_nodes_lifetime_duration_seconds_count{nodepool="default"} 1"#,
        ] {
            assert!(text.contains(sample), "{sample} in {text}");
        }
        // controller-runtime's names, as upstream exposes them.
        for sample in [
            r#"controller_runtime_reconcile_total{controller="nodeclass",result="requeue_after"} 1"#,
            r#"controller_runtime_reconcile_total{controller="nodeclass",result="error"} 2"#,
            r#"controller_runtime_reconcile_errors_total{controller="nodeclass"} 2"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="nodeclass"} 3"#,
        ] {
            assert!(text.contains(sample), "{sample} in {text}");
        }
    }

    /// The scheduling, cluster-state and interruption metrics render under upstream's names.
    #[test]
    fn scheduling_state_and_interruption_render_under_upstreams_names() {
        let metrics = Metrics::default();
        metrics.scheduled("provisioner", Instant::now(), 3);
        metrics.cluster_state(false, Some(7), 42.5);
        metrics.interruption_received("spot_interrupted");
        metrics.interruption_received("spot_interrupted");
        metrics.interruption_received("no_op");
        metrics.interruption_handled(2.0);
        metrics.interruption_deleted();
        let mut root = Registry::default();
        metrics.register(&mut root);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &root).expect("encode");
        for sample in [
            r#"karpenter_scheduler_scheduling_duration_seconds_count{controller="provisioner"} 1"#,
            r#"karpenter_scheduler_unschedulable_pods_count{controller="provisioner"} 3"#,
            "karpenter_cluster_state_synced 0",
            "karpenter_cluster_state_node_count 7",
            "karpenter_cluster_state_unsynced_time_seconds 42.5",
            r#"karpenter_interruption_received_messages_total{message_type="spot_interrupted"} 2"#,
            r#"karpenter_interruption_received_messages_total{message_type="no_op"} 1"#,
            "karpenter_interruption_deleted_messages_total 1",
            "karpenter_interruption_message_queue_duration_seconds_sum 2.0",
        ] {
            assert!(text.contains(sample), "{sample} in {text}");
        }
    }
}
