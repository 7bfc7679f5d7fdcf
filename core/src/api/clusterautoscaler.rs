//! The scenario's side of the Cluster Autoscaler comparison: `carpentry.dev/v1alpha1 NodeGroup`,
//! an Auto Scaling group as Cluster Autoscaler sees it, and the Scenario's `spec.clusterAutoscaler`,
//! CA's flags with their defaults.
//!
//! upstream: kubernetes/autoscaler, tag `cluster-autoscaler-1.36.1`, under `cluster-autoscaler/`:
//! - a group's size: `cloudprovider/aws/auto_scaling_groups.go` (min, max, desired capacity);
//! - its template node: `cloudprovider/aws/aws_manager.go` `buildNodeFromTemplate` (the first
//!   mixed-instances override's type, the first zone, labels and taints from the
//!   `k8s.io/cluster-autoscaler/node-template/label|taint|resources/…` tags), here written as
//!   fields rather than tags;
//! - per-group options: `aws_manager.go` `GetAsgOptions` (the
//!   `k8s.io/cluster-autoscaler/node-template/autoscaling-options/<key>` tags);
//! - the flags: `config/flags/flags.go` and `config/const.go`.
//!
//! Durations are Go durations, as the flags take them; each is checked with its path and read
//! with [`ClusterAutoscalerOptions::resolved`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::api::duration::parse_go_duration;
use crate::api::validation::{self, idx, key, FieldError, Rule, Validate};
use crate::quantity::Quantity;

/// `carpentry.dev/v1alpha1`, the Scenario's group.
pub const API_VERSION: &str = "carpentry.dev/v1alpha1";
pub const NODE_GROUP_KIND: &str = "NodeGroup";

/// One Auto Scaling group (or EKS managed node group) Cluster Autoscaler scales.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeGroup {
    #[serde(default = "default_api_version")]
    pub api_version: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: NodeGroupSpec,
}

impl NodeGroup {
    /// A NodeGroup named `name` with `spec`.
    pub fn new(name: String, spec: NodeGroupSpec) -> NodeGroup {
        NodeGroup {
            api_version: default_api_version(),
            kind: default_kind(),
            metadata: ObjectMeta { name: Some(name), ..ObjectMeta::default() },
            spec,
        }
    }
}

fn default_api_version() -> String {
    API_VERSION.into()
}

fn default_kind() -> String {
    NODE_GROUP_KIND.into()
}

/// How a group is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupCapacityType {
    #[default]
    OnDemand,
    Spot,
}

impl GroupCapacityType {
    /// As the `karpenter.sh/capacity-type` label and the catalogue spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupCapacityType::OnDemand => "on-demand",
            GroupCapacityType::Spot => "spot",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeGroupSpec {
    /// The ASG's `MinSize`: CA never scales below it.
    #[serde(default)]
    pub min_size: i64,
    /// The ASG's `MaxSize`: CA never scales above it.
    pub max_size: i64,
    /// The ASG's `DesiredCapacity` at the start; unset: `minSize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_capacity: Option<i64>,
    /// The launch template's type, or the mixed-instances policy's overrides: CA's template node
    /// has the first one's shape (its AWS README: "only the first instance type found will be
    /// used"); the group may launch any of them.
    pub instance_types: Vec<String>,
    /// The group's zones (its subnets'): the template is labelled with the first.
    pub zones: Vec<String>,
    #[serde(default)]
    pub capacity_type: GroupCapacityType,
    /// Labels of the group's nodes (`node-template/label/<key>` tags; an EKS managed node group's
    /// labels).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Taints of the group's nodes (`node-template/taint/<key>` tags).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Extra capacity on the template (`node-template/resources/<name>` tags).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    /// Per-group overrides of CA's scale-down flags (`node-template/autoscaling-options/<key>`).
    #[serde(default, skip_serializing_if = "GroupOptions::is_empty")]
    pub autoscaling_options: GroupOptions,
}

/// The options an ASG may override (upstream `GetAsgOptions`'s keys; max-node-provision-time
/// cannot be overridden per group).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_utilization_threshold: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_gpu_utilization_threshold: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_unneeded_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_unready_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_daemonsets_utilization: Option<bool>,
}

impl GroupOptions {
    fn is_empty(&self) -> bool {
        *self == GroupOptions::default()
    }

    fn validate_into(&self, path: &str, out: &mut Vec<FieldError>) {
        let thresholds = [
            ("scaleDownUtilizationThreshold", self.scale_down_utilization_threshold),
            ("scaleDownGpuUtilizationThreshold", self.scale_down_gpu_utilization_threshold),
        ];
        for (field, value) in thresholds {
            validate_fraction(value, &format!("{path}.{field}"), out);
        }
        let durations = [
            ("scaleDownUnneededTime", &self.scale_down_unneeded_time),
            ("scaleDownUnreadyTime", &self.scale_down_unready_time),
        ];
        for (field, value) in durations {
            validate_duration(value.as_deref(), &format!("{path}.{field}"), out);
        }
    }
}

impl Validate for NodeGroup {
    fn validate(&self) -> Vec<FieldError> {
        let mut out = Vec::new();
        crate::api::validate_type_meta(
            &self.api_version,
            &self.kind,
            &self.metadata,
            API_VERSION,
            NODE_GROUP_KIND,
            &mut out,
        );
        self.spec.validate_into("spec", &mut out);
        out
    }
}

impl NodeGroupSpec {
    /// The desired capacity at the start.
    pub fn desired(&self) -> i64 {
        self.desired_capacity.unwrap_or(self.min_size)
    }

    fn validate_into(&self, path: &str, out: &mut Vec<FieldError>) {
        let size =
            |field: &str, message: String| FieldError::new(format!("{path}.{field}"), Rule::NodeGroupSize, message);
        if self.min_size < 0 {
            out.push(size("minSize", format!("minSize must be 0 or more, got {}", self.min_size)));
        }
        if self.max_size < self.min_size.max(0) {
            out.push(size("maxSize", format!("maxSize {} is below minSize {}", self.max_size, self.min_size)));
        }
        if let Some(desired) = self.desired_capacity {
            if desired < self.min_size || desired > self.max_size {
                out.push(size(
                    "desiredCapacity",
                    format!(
                        "desiredCapacity {desired} is outside minSize..maxSize ({}..{}): the ASG API refuses it",
                        self.min_size, self.max_size
                    ),
                ));
            }
        }
        for (field, list) in [("instanceTypes", &self.instance_types), ("zones", &self.zones)] {
            let p = format!("{path}.{field}");
            if list.is_empty() {
                out.push(FieldError::new(&p, Rule::NodeGroupList, format!("{field} needs at least one entry")));
            }
            for (i, item) in list.iter().enumerate() {
                if item.trim().is_empty() {
                    out.push(FieldError::new(idx(&p, i), Rule::NodeGroupList, "must not be empty"));
                } else if list[..i].contains(item) {
                    out.push(FieldError::new(idx(&p, i), Rule::NodeGroupList, format!("{item:?} is listed twice")));
                }
            }
        }
        let labels = format!("{path}.labels");
        for (k, v) in &self.labels {
            for e in validation::qualified_name_errors(k) {
                out.push(FieldError::new(
                    key(&labels, k),
                    Rule::LabelKeyQualifiedName,
                    format!("invalid label key {k:?}: {e}"),
                ));
            }
            for e in validation::label_value_errors(v) {
                out.push(FieldError::new(key(&labels, k), Rule::LabelValue, format!("invalid label value {v:?}: {e}")));
            }
        }
        validation::validate_taints(&self.taints, &[], path, true, out);
        let resources = format!("{path}.resources");
        for (name, quantity) in &self.resources {
            if quantity.is_negative() {
                out.push(FieldError::new(
                    key(&resources, name),
                    Rule::NodeGroupResources,
                    format!("{name} must not be negative"),
                ));
            }
        }
        self.autoscaling_options.validate_into(&format!("{path}.autoscalingOptions"), out);
    }
}

/// The expanders CA 1.36.1 knows (`expander/expander.go`).
pub const EXPANDERS: [&str; 7] = ["random", "most-pods", "least-waste", "least-nodes", "price", "priority", "grpc"];

/// CA's flags that change its decisions, each unset for its default (`config/flags/flags.go`,
/// `config/const.go` of cluster-autoscaler-1.36.1).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterAutoscalerOptions {
    /// `--expander`, a comma-separated chain (default `least-waste`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expander: Option<String>,
    /// `--scan-interval` (10s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan_interval: Option<String>,
    /// `--new-pod-scale-up-delay` (0s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_pod_scale_up_delay: Option<String>,
    /// `--max-node-provision-time` (15m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_node_provision_time: Option<String>,
    /// `--max-nodes-total` (0: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nodes_total: Option<i64>,
    /// `--cores-total`, `min:max` cores over the ready nodes' capacity (`0:320000`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores_total: Option<String>,
    /// `--memory-total`, `min:max` GiB over the ready nodes' capacity (`0:6400000`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_total: Option<String>,
    /// `--max-nodes-per-scaleup` (1000): the estimator adds no more in one scale-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nodes_per_scaleup: Option<i64>,
    /// `--balance-similar-node-groups` (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance_similar_node_groups: Option<bool>,
    /// `--balancing-ignore-label`, repeated: labels that may differ between similar groups, beside
    /// those CA always ignores.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub balancing_ignore_labels: Vec<String>,
    /// `--scale-down-enabled` (true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_enabled: Option<bool>,
    /// `--scale-down-utilization-threshold` (0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_utilization_threshold: Option<f64>,
    /// `--scale-down-gpu-utilization-threshold` (0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_gpu_utilization_threshold: Option<f64>,
    /// `--scale-down-unneeded-time` (10m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_unneeded_time: Option<String>,
    /// `--scale-down-unready-time` (20m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_unready_time: Option<String>,
    /// `--scale-down-delay-after-add` (10m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_after_add: Option<String>,
    /// `--scale-down-delay-after-delete` (0s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_after_delete: Option<String>,
    /// `--scale-down-delay-after-failure` (3m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_after_failure: Option<String>,
    /// `--ignore-daemonsets-utilization` (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_daemonsets_utilization: Option<bool>,
    /// `--max-scale-down-parallelism` (10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_scale_down_parallelism: Option<i64>,
    /// `--max-drain-parallelism` (1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_drain_parallelism: Option<i64>,
    /// `--max-graceful-termination-sec` (600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_graceful_termination_sec: Option<i64>,
    /// `--initial-node-group-backoff-duration` (5m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_node_group_backoff_duration: Option<String>,
    /// `--max-node-group-backoff-duration` (30m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_node_group_backoff_duration: Option<String>,
    /// `--node-group-backoff-reset-timeout` (3h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_group_backoff_reset_timeout: Option<String>,
    /// `--expendable-pods-priority-cutoff` (-10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expendable_pods_priority_cutoff: Option<i32>,
    /// Not a CA flag: how long the Auto Scaling group takes from `SetDesiredCapacity` to the EC2
    /// launch. No published source measures it; it is a calibration (see
    /// [`ResolvedOptions::asg_launch_delay_seconds`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asg_launch_delay: Option<String>,
}

/// [`ClusterAutoscalerOptions`] with every default applied; durations in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedOptions {
    pub expanders: Vec<String>,
    pub scan_interval_seconds: f64,
    pub new_pod_scale_up_delay_seconds: f64,
    pub max_node_provision_time_seconds: f64,
    pub max_nodes_total: i64,
    /// `--cores-total` (cores) and `--memory-total` (bytes), each `(min, max)`.
    pub cores_total: (i64, i64),
    pub memory_total: (i64, i64),
    pub max_nodes_per_scaleup: i64,
    pub balance_similar_node_groups: bool,
    pub balancing_ignore_labels: Vec<String>,
    pub scale_down_enabled: bool,
    pub scale_down_utilization_threshold: f64,
    pub scale_down_gpu_utilization_threshold: f64,
    pub scale_down_unneeded_time_seconds: f64,
    pub scale_down_unready_time_seconds: f64,
    pub scale_down_delay_after_add_seconds: f64,
    pub scale_down_delay_after_delete_seconds: f64,
    pub scale_down_delay_after_failure_seconds: f64,
    pub ignore_daemonsets_utilization: bool,
    pub max_scale_down_parallelism: i64,
    pub max_drain_parallelism: i64,
    pub max_graceful_termination_seconds: i64,
    pub initial_node_group_backoff_seconds: f64,
    pub max_node_group_backoff_seconds: f64,
    pub node_group_backoff_reset_seconds: f64,
    pub expendable_pods_priority_cutoff: i32,
    /// The calibrated ASG overhead: 50 s by default, so that the inflate test (0 → 3 pods of
    /// 1 CPU, one a node) reaches Running about a minute after Karpenter does with carpentry's
    /// node timings, as users report (about 2 minutes against about 1). Calibration, not fact.
    pub asg_launch_delay_seconds: f64,
}

/// The calibrated ASG overhead by default (see [`ResolvedOptions::asg_launch_delay_seconds`]).
pub const DEFAULT_ASG_LAUNCH_DELAY: &str = "50s";

/// `--cores-total` and `--memory-total` by default (`config/const.go`).
pub const DEFAULT_CORES_TOTAL: &str = "0:320000";
pub const DEFAULT_MEMORY_TOTAL: &str = "0:6400000";
const GIB: i64 = 1 << 30;

/// CA's `parseMinMaxFlag`: `min:max`, whole numbers, 0 ≤ min ≤ max.
fn parse_min_max(text: &str) -> Result<(i64, i64), String> {
    let Some((min, max)) = text.split_once(':') else {
        return Err(format!("{text:?} is not min:max"));
    };
    let number = |part: &str, what: &str| {
        part.trim().parse::<i64>().map_err(|_| format!("{text:?}: the {what} {part:?} is not a whole number"))
    };
    let (min, max) = (number(min, "min")?, number(max, "max")?);
    if min < 0 {
        return Err(format!("{text:?}: min must be 0 or more"));
    }
    if max < min {
        return Err(format!("{text:?}: max must not be less than min"));
    }
    Ok((min, max))
}

fn min_max(text: &Option<String>, default: &str) -> (i64, i64) {
    // Checked by `validate`; a default always parses.
    let text = text.as_deref().unwrap_or(default);
    parse_min_max(text).or_else(|_| parse_min_max(default)).unwrap_or((0, i64::MAX))
}

fn seconds(text: &Option<String>, default: &str) -> f64 {
    let text = text.as_deref().unwrap_or(default);
    // Checked by `validate`; a default always parses.
    parse_go_duration(text).or_else(|_| parse_go_duration(default)).unwrap_or(0) as f64 / 1e9
}

impl ClusterAutoscalerOptions {
    /// Every option, its default where unset. Call [`ClusterAutoscalerOptions::validate_into`]
    /// first: an unparseable value reads as its default here.
    pub fn resolved(&self) -> ResolvedOptions {
        let expanders = self
            .expander
            .as_deref()
            .unwrap_or("least-waste")
            .split(',')
            .map(|e| e.trim().to_string())
            .filter(|e| !e.is_empty())
            .collect();
        ResolvedOptions {
            expanders,
            scan_interval_seconds: seconds(&self.scan_interval, "10s"),
            new_pod_scale_up_delay_seconds: seconds(&self.new_pod_scale_up_delay, "0s"),
            max_node_provision_time_seconds: seconds(&self.max_node_provision_time, "15m"),
            max_nodes_total: self.max_nodes_total.unwrap_or(0),
            cores_total: min_max(&self.cores_total, DEFAULT_CORES_TOTAL),
            memory_total: {
                let (min, max) = min_max(&self.memory_total, DEFAULT_MEMORY_TOTAL);
                (min.saturating_mul(GIB), max.saturating_mul(GIB))
            },
            max_nodes_per_scaleup: self.max_nodes_per_scaleup.unwrap_or(1000),
            balance_similar_node_groups: self.balance_similar_node_groups.unwrap_or(false),
            balancing_ignore_labels: self.balancing_ignore_labels.clone(),
            scale_down_enabled: self.scale_down_enabled.unwrap_or(true),
            scale_down_utilization_threshold: self.scale_down_utilization_threshold.unwrap_or(0.5),
            scale_down_gpu_utilization_threshold: self.scale_down_gpu_utilization_threshold.unwrap_or(0.5),
            scale_down_unneeded_time_seconds: seconds(&self.scale_down_unneeded_time, "10m"),
            scale_down_unready_time_seconds: seconds(&self.scale_down_unready_time, "20m"),
            scale_down_delay_after_add_seconds: seconds(&self.scale_down_delay_after_add, "10m"),
            scale_down_delay_after_delete_seconds: seconds(&self.scale_down_delay_after_delete, "0s"),
            scale_down_delay_after_failure_seconds: seconds(&self.scale_down_delay_after_failure, "3m"),
            ignore_daemonsets_utilization: self.ignore_daemonsets_utilization.unwrap_or(false),
            max_scale_down_parallelism: self.max_scale_down_parallelism.unwrap_or(10),
            max_drain_parallelism: self.max_drain_parallelism.unwrap_or(1),
            max_graceful_termination_seconds: self.max_graceful_termination_sec.unwrap_or(600),
            initial_node_group_backoff_seconds: seconds(&self.initial_node_group_backoff_duration, "5m"),
            max_node_group_backoff_seconds: seconds(&self.max_node_group_backoff_duration, "30m"),
            node_group_backoff_reset_seconds: seconds(&self.node_group_backoff_reset_timeout, "3h"),
            expendable_pods_priority_cutoff: self.expendable_pods_priority_cutoff.unwrap_or(-10),
            asg_launch_delay_seconds: seconds(&self.asg_launch_delay, DEFAULT_ASG_LAUNCH_DELAY),
        }
    }

    /// Checks every option; `path` is where they sit (`spec.clusterAutoscaler`).
    pub fn validate_into(&self, path: &str, out: &mut Vec<FieldError>) {
        let option =
            |field: &str, message: String| FieldError::new(format!("{path}.{field}"), Rule::AutoscalerOption, message);
        if let Some(chain) = &self.expander {
            self::validate_expanders(chain, &format!("{path}.expander"), out);
        }
        let durations = [
            ("scanInterval", &self.scan_interval),
            ("newPodScaleUpDelay", &self.new_pod_scale_up_delay),
            ("maxNodeProvisionTime", &self.max_node_provision_time),
            ("scaleDownUnneededTime", &self.scale_down_unneeded_time),
            ("scaleDownUnreadyTime", &self.scale_down_unready_time),
            ("scaleDownDelayAfterAdd", &self.scale_down_delay_after_add),
            ("scaleDownDelayAfterDelete", &self.scale_down_delay_after_delete),
            ("scaleDownDelayAfterFailure", &self.scale_down_delay_after_failure),
            ("initialNodeGroupBackoffDuration", &self.initial_node_group_backoff_duration),
            ("maxNodeGroupBackoffDuration", &self.max_node_group_backoff_duration),
            ("nodeGroupBackoffResetTimeout", &self.node_group_backoff_reset_timeout),
            ("asgLaunchDelay", &self.asg_launch_delay),
        ];
        for (field, value) in durations {
            validate_duration(value.as_deref(), &format!("{path}.{field}"), out);
        }
        if self.scan_interval.as_deref().and_then(|d| parse_go_duration(d).ok()).is_some_and(|n| n <= 0) {
            out.push(option("scanInterval", "scanInterval must be positive: CA would loop without pause".into()));
        }
        for (field, value) in [("coresTotal", &self.cores_total), ("memoryTotal", &self.memory_total)] {
            if let Some(Err(message)) = value.as_deref().map(parse_min_max) {
                out.push(option(field, message));
            }
        }
        for (field, value) in [
            ("scaleDownUtilizationThreshold", self.scale_down_utilization_threshold),
            ("scaleDownGpuUtilizationThreshold", self.scale_down_gpu_utilization_threshold),
        ] {
            validate_fraction(value, &format!("{path}.{field}"), out);
        }
        for (field, value, least) in [
            ("maxNodesTotal", self.max_nodes_total, 0),
            ("maxNodesPerScaleup", self.max_nodes_per_scaleup, 1),
            ("maxScaleDownParallelism", self.max_scale_down_parallelism, 1),
            ("maxDrainParallelism", self.max_drain_parallelism, 1),
            ("maxGracefulTerminationSec", self.max_graceful_termination_sec, 0),
        ] {
            if let Some(v) = value.filter(|v| *v < least) {
                out.push(option(field, format!("{field} must be {least} or more, got {v}")));
            }
        }
    }
}

/// `--expander`'s chain as CA's factory checks it (`expander/factory/expander_factory.go`,
/// `chain.go`): known names, none twice, nothing after `random` (it always leaves one option);
/// `price` and `grpc` are refused with why.
fn validate_expanders(chain: &str, path: &str, out: &mut Vec<FieldError>) {
    let names: Vec<&str> = chain.split(',').map(str::trim).collect();
    let error = |message: String| FieldError::new(path, Rule::AutoscalerOption, message);
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() {
            out.push(error(format!("expander {chain:?}: an empty name in the chain")));
        } else if !EXPANDERS.contains(name) {
            out.push(error(format!("expander {name:?} is not one of {}", EXPANDERS.join(", "))));
        } else if names[..i].contains(name) {
            out.push(error(format!("expander {name:?} is listed twice")));
        } else if *name == "price" {
            out.push(error(
                "expander \"price\" cannot run on AWS: CA's AWS provider has no pricing (Pricing() returns \
                 ErrNotImplemented) and CA exits at start"
                    .into(),
            ));
        } else if *name == "grpc" {
            out.push(error("expander \"grpc\" asks an outside server, which a scenario cannot model".into()));
        } else if i > 0 && names[i - 1] == "random" {
            out.push(error(format!("expander {name:?} follows \"random\", which always leaves exactly one option")));
        }
    }
}

fn validate_duration(value: Option<&str>, path: &str, out: &mut Vec<FieldError>) {
    let Some(text) = value else { return };
    match parse_go_duration(text) {
        Err(e) => out.push(FieldError::new(path, Rule::AutoscalerOption, e.to_string())),
        Ok(n) if n < 0 => {
            out.push(FieldError::new(path, Rule::AutoscalerOption, format!("{text:?} must not be negative")))
        }
        Ok(_) => {}
    }
}

fn validate_fraction(value: Option<f64>, path: &str, out: &mut Vec<FieldError>) {
    if let Some(v) = value.filter(|v| !(0.0..=1.0).contains(v)) {
        out.push(FieldError::new(
            path,
            Rule::AutoscalerOption,
            format!("a utilization threshold is between 0 and 1, got {v}"),
        ));
    }
}
