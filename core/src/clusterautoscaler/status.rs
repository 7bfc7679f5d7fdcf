//! The status ConfigMap CA writes at the end of every loop (`kube-system/cluster-autoscaler-status`,
//! key `status`): the cluster's and each group's health, scale-up and scale-down, with when each
//! was last probed and last changed.
//!
//! upstream: kubernetes/autoscaler, tag `cluster-autoscaler-1.36.1`, `cluster-autoscaler/`
//! `clusterstate/api/types.go` (the schema), `clusterstate/clusterstate.go` `GetStatus` and its
//! `build*Status*` helpers (how each status is decided), `UpdateScaleDownCandidates` (the scale-down
//! planner's unneeded nodes, per group) and `clusterstate/utils/status.go` `WriteStatusConfigMap`
//! (the ConfigMap, its annotation and time format).
//!
//! Upstream marshals through JSON, so keys come out in alphabetical order (the fields below are
//! declared so), a zero time is `null`, and `omitempty` drops only empty strings and zero
//! numbers. A transition time moves only when its status changes; the first loop's statuses are
//! all transitions (upstream starts from an empty status).

use std::collections::BTreeMap;

use serde::Serialize;

use super::clusterstate::{ClusterState, FailureCode, GroupCounts, Readiness};
use crate::api::duration::format_go_duration;
use crate::api::time::format_time;

/// The ConfigMap's name and namespace (upstream flags `--status-config-map-name`, `--namespace`).
pub const STATUS_CONFIGMAP: &str = "cluster-autoscaler-status";
pub const STATUS_NAMESPACE: &str = "kube-system";
/// The data key holding the YAML.
pub const STATUS_KEY: &str = "status";
/// upstream `ConfigMapLastUpdatedKey`.
pub const LAST_UPDATED_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/last-updated";

fn is_empty(s: &&'static str) -> bool {
    s.is_empty()
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// upstream `ClusterAutoscalerStatus`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAutoscalerStatus {
    /// `Running` once loops run.
    #[serde(skip_serializing_if = "is_empty")]
    pub autoscaler_status: &'static str,
    pub cluster_wide: ClusterWideStatus,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_groups: Vec<NodeGroupStatus>,
    /// The loop's time in Go's `time.Time` format (`2006-01-02 15:04:05.999999999 -0700 MST`).
    pub time: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterWideStatus {
    pub health: ClusterHealthCondition,
    pub scale_down: ScaleDownCondition,
    pub scale_up: ScaleUpCondition,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupStatus {
    pub health: NodeGroupHealthCondition,
    pub name: String,
    pub scale_down: ScaleDownCondition,
    pub scale_up: ScaleUpCondition,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterHealthCondition {
    pub last_probe_time: Option<String>,
    pub last_transition_time: Option<String>,
    pub node_counts: NodeCount,
    /// `Healthy` or `Unhealthy`.
    #[serde(skip_serializing_if = "is_empty")]
    pub status: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupHealthCondition {
    pub cloud_provider_target: i64,
    pub last_probe_time: Option<String>,
    pub last_transition_time: Option<String>,
    pub max_size: i64,
    pub min_size: i64,
    pub node_counts: NodeCount,
    #[serde(skip_serializing_if = "is_empty")]
    pub status: &'static str,
}

/// The cluster's (`InProgress` or `NoActivity`) or a group's (also `Unhealthy`, `Backoff`)
/// scale-up; `backoffInfo` is written for groups only.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleUpCondition {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_info: Option<BackoffInfo>,
    pub last_probe_time: Option<String>,
    pub last_transition_time: Option<String>,
    #[serde(skip_serializing_if = "is_empty")]
    pub status: &'static str,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackoffInfo {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error_code: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error_message: String,
}

/// `CandidatesPresent` with their number, or `NoCandidates`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleDownCondition {
    #[serde(skip_serializing_if = "is_zero")]
    pub candidates: i64,
    pub last_probe_time: Option<String>,
    pub last_transition_time: Option<String>,
    #[serde(skip_serializing_if = "is_empty")]
    pub status: &'static str,
}

impl ScaleDownCondition {
    /// upstream `buildScaleDownStatusNodeGroup` / `buildScaleDownStatusClusterwide`.
    fn new(candidates: i64, probe: &Option<String>, last: Option<&ScaleDownCondition>) -> ScaleDownCondition {
        let status = if candidates > 0 { "CandidatesPresent" } else { "NoCandidates" };
        ScaleDownCondition {
            candidates,
            last_transition_time: transition(status, probe, last.map(|l| (l.status, &l.last_transition_time))),
            last_probe_time: probe.clone(),
            status,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCount {
    pub long_unregistered: i64,
    pub registered: RegisteredNodeCount,
    pub unregistered: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredNodeCount {
    #[serde(skip_serializing_if = "is_zero")]
    pub being_deleted: i64,
    pub not_started: i64,
    pub ready: i64,
    pub suspended: i64,
    pub total: i64,
    pub unready: RegisteredUnreadyNodeCount,
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredUnreadyNodeCount {
    pub resource_unready: i64,
    pub total: i64,
}

impl NodeCount {
    /// upstream `buildNodeCount`.
    fn of(r: &Readiness) -> NodeCount {
        NodeCount {
            long_unregistered: r.long_unregistered,
            registered: RegisteredNodeCount {
                being_deleted: r.deleted,
                not_started: r.not_started,
                ready: r.ready,
                suspended: 0,
                total: r.ready + r.unready + r.not_started + r.deleted,
                unready: RegisteredUnreadyNodeCount { resource_unready: 0, total: r.unready },
            },
            unregistered: r.unregistered,
        }
    }
}

/// One group as the status reads it.
#[derive(Debug, Clone, Copy)]
pub struct GroupStatusInput<'a> {
    pub counts: GroupCounts<'a>,
    pub min_size: i64,
    pub max_size: i64,
}

/// What one loop's status is built from.
#[derive(Debug, Clone)]
pub struct StatusInput<'a> {
    /// The loop's time on the caller's clock (seconds), as [`ClusterState`] takes it.
    pub now: f64,
    /// The same instant, seconds since the epoch.
    pub now_epoch: i64,
    /// In the cloud provider's order.
    pub groups: Vec<GroupStatusInput<'a>>,
    /// Every node, in a group or not.
    pub cluster: Readiness,
    pub cluster_healthy: bool,
    pub state: &'a ClusterState,
}

/// What the status remembers from loop to loop (upstream keeps `lastStatus`,
/// `candidatesForScaleDown` and `lastScaleDownUpdateTime` on the registry).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusRegistry {
    last: Option<ClusterAutoscalerStatus>,
    candidates: BTreeMap<String, i64>,
    /// When scale-down last reported its unneeded nodes (seconds since the epoch).
    candidates_time: Option<i64>,
}

/// `status` now, and when it last changed (the previous transition if it is the same).
fn transition(
    status: &'static str,
    probe: &Option<String>,
    previous: Option<(&'static str, &Option<String>)>,
) -> Option<String> {
    match previous {
        Some((last, time)) if last == status => time.clone(),
        _ => probe.clone(),
    }
}

impl StatusRegistry {
    /// upstream `UpdateScaleDownCandidates`: the scale-down planner's unneeded nodes this loop,
    /// counted by group (nodes in no group are not counted).
    pub fn update_candidates(&mut self, per_group: BTreeMap<String, i64>, now_epoch: i64) {
        self.candidates = per_group;
        self.candidates_time = Some(now_epoch);
    }

    /// upstream `GetStatus`, remembered for the next loop's transition times.
    pub fn build(&mut self, input: &StatusInput<'_>) -> &ClusterAutoscalerStatus {
        let probe = Some(format_time(input.now_epoch));
        let scale_down_probe = self.candidates_time.map(format_time);
        let last_groups: BTreeMap<&str, &NodeGroupStatus> =
            self.last.iter().flat_map(|s| s.node_groups.iter()).map(|g| (g.name.as_str(), g)).collect();
        let mut node_groups = Vec::with_capacity(input.groups.len());
        for g in &input.groups {
            let c = &g.counts;
            let last = last_groups.get(c.name);
            let r = c.readiness;
            // A group with no instance at all has no readiness entry upstream: no probe time.
            let seen = r.ready + r.unready + r.not_started + r.deleted + r.unregistered + r.long_unregistered > 0;
            let group_probe = if seen { probe.clone() } else { None };
            let healthy = input.state.healthy(c);
            let health_status = if healthy { "Healthy" } else { "Unhealthy" };
            let health = NodeGroupHealthCondition {
                cloud_provider_target: c.target,
                last_transition_time: transition(
                    health_status,
                    &group_probe,
                    last.map(|l| (l.health.status, &l.health.last_transition_time)),
                ),
                last_probe_time: group_probe.clone(),
                max_size: g.max_size,
                min_size: g.min_size,
                node_counts: NodeCount::of(&r),
                status: health_status,
            };
            let (up_status, backoff_info) = if input.state.scaling_up(c) {
                ("InProgress", None)
            } else if !healthy {
                ("Unhealthy", None)
            } else if let Some((_, code, message)) = input.state.backoff_status(c.name, input.now) {
                ("Backoff", Some(BackoffInfo { error_code: code.as_str().into(), error_message: truncated(message) }))
            } else {
                ("NoActivity", None)
            };
            let scale_up = ScaleUpCondition {
                backoff_info: Some(backoff_info.unwrap_or_default()),
                last_transition_time: transition(
                    up_status,
                    &group_probe,
                    last.map(|l| (l.scale_up.status, &l.scale_up.last_transition_time)),
                ),
                last_probe_time: group_probe,
                status: up_status,
            };
            let candidates = self.candidates.get(c.name).copied().unwrap_or(0);
            let scale_down = ScaleDownCondition::new(candidates, &scale_down_probe, last.map(|l| &l.scale_down));
            node_groups.push(NodeGroupStatus { health, name: c.name.to_string(), scale_down, scale_up });
        }

        let last_wide = self.last.as_ref().map(|s| &s.cluster_wide);
        let health_status = if input.cluster_healthy { "Healthy" } else { "Unhealthy" };
        let health = ClusterHealthCondition {
            last_transition_time: transition(
                health_status,
                &probe,
                last_wide.map(|l| (l.health.status, &l.health.last_transition_time)),
            ),
            last_probe_time: probe.clone(),
            node_counts: NodeCount::of(&input.cluster),
            status: health_status,
        };
        let up_status =
            if node_groups.iter().any(|g| g.scale_up.status == "InProgress") { "InProgress" } else { "NoActivity" };
        let scale_up = ScaleUpCondition {
            backoff_info: None,
            last_transition_time: transition(
                up_status,
                &probe,
                last_wide.map(|l| (l.scale_up.status, &l.scale_up.last_transition_time)),
            ),
            last_probe_time: probe,
            status: up_status,
        };
        let candidates: i64 = node_groups.iter().map(|g| g.scale_down.candidates).sum();
        let scale_down = ScaleDownCondition::new(candidates, &scale_down_probe, last_wide.map(|l| &l.scale_down));
        let status = ClusterAutoscalerStatus {
            autoscaler_status: "Running",
            cluster_wide: ClusterWideStatus { health, scale_down, scale_up },
            node_groups,
            time: go_time(input.now_epoch),
        };
        self.last.insert(status)
    }

    /// The status the last loop wrote.
    pub fn last(&self) -> Option<&ClusterAutoscalerStatus> {
        self.last.as_ref()
    }
}

/// upstream cuts a backoff's message to 500 characters.
fn truncated(message: String) -> String {
    const MAX: usize = 500;
    if message.chars().count() <= MAX {
        return message;
    }
    let mut cut: String = message.chars().take(MAX).collect();
    cut.push_str("<truncated>");
    cut
}

/// Seconds since the epoch in Go's default `time.Time` format, as upstream's
/// `ConfigMapLastUpdateFormat` writes a UTC time (`2023-12-21 00:00:00 +0000 UTC`).
pub fn go_time(seconds: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map(|ts| ts.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string())
        .unwrap_or_default()
}

impl ClusterAutoscalerStatus {
    /// The ConfigMap's `status` value, as `sigs.k8s.io/yaml` writes it.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).unwrap_or_default()
    }

    /// The whole ConfigMap as CA writes it.
    pub fn config_map(&self) -> k8s_openapi::api::core::v1::ConfigMap {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        k8s_openapi::api::core::v1::ConfigMap {
            metadata: ObjectMeta {
                name: Some(STATUS_CONFIGMAP.into()),
                namespace: Some(STATUS_NAMESPACE.into()),
                annotations: Some(BTreeMap::from([(LAST_UPDATED_ANNOTATION.to_string(), self.time.clone())])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(STATUS_KEY.to_string(), self.to_yaml())])),
            ..Default::default()
        }
    }
}

impl FailureCode {
    /// upstream's `errorMessage` for the failure (`clusterstate.go` for a timeout, the AWS
    /// provider's placeholder instances for capacity).
    pub fn message(&self, group: &str, after_seconds: f64) -> String {
        match self {
            FailureCode::Timeout => format!(
                "Scale-up timed out for node group {group} after {}",
                format_go_duration((after_seconds * 1e9) as i64)
            ),
            FailureCode::OutOfResources => "AWS cannot provision any more instances for this node group".into(),
        }
    }
}

#[cfg(test)]
mod tests;
