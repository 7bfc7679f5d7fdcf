//! The status ConfigMap: its schema as upstream marshals it, each status's rule, and transition
//! times that move only on a change.

use super::*;
use crate::api::clusterautoscaler::ClusterAutoscalerOptions;

/// 2026-12-01T10:00:00Z.
const EPOCH: i64 = 1_796_119_200;

fn group(name: &str, target: i64, readiness: Readiness) -> GroupStatusInput<'_> {
    GroupStatusInput { counts: GroupCounts { name, target, readiness }, min_size: 0, max_size: 10 }
}

fn input<'a>(now: f64, groups: Vec<GroupStatusInput<'a>>, state: &'a ClusterState) -> StatusInput<'a> {
    let mut cluster = Readiness::default();
    for g in &groups {
        let r = g.counts.readiness;
        cluster.ready += r.ready;
        cluster.not_started += r.not_started;
        cluster.unregistered += r.unregistered;
    }
    StatusInput { now, now_epoch: EPOCH + now as i64, groups, cluster, cluster_healthy: true, state }
}

#[test]
fn the_first_loop_writes_every_condition_with_upstreams_keys_and_null_times() {
    let state = ClusterState::default();
    let mut registry = StatusRegistry::default();
    let ready = Readiness { ready: 2, ..Default::default() };
    let status =
        registry.build(&input(0.0, vec![group("general", 2, ready), group("idle", 0, Readiness::default())], &state));
    let yaml: serde_yaml::Value = serde_yaml::from_str(&status.to_yaml()).unwrap();
    // Keys in upstream's (alphabetical) order, as sigs.k8s.io/yaml writes them.
    let keys: Vec<&str> = yaml.as_mapping().unwrap().keys().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(keys, ["autoscalerStatus", "clusterWide", "nodeGroups", "time"]);
    assert_eq!(yaml["autoscalerStatus"], "Running");
    assert_eq!(yaml["time"], "2026-12-01 10:00:00 +0000 UTC");
    let wide = &yaml["clusterWide"];
    assert_eq!(wide["health"]["status"], "Healthy");
    assert_eq!(wide["health"]["lastProbeTime"], "2026-12-01T10:00:00Z");
    assert_eq!(wide["health"]["lastTransitionTime"], "2026-12-01T10:00:00Z", "the first loop is a transition");
    assert_eq!(wide["health"]["nodeCounts"]["registered"]["total"], 2);
    assert_eq!(wide["health"]["nodeCounts"]["registered"]["unready"]["total"], 0);
    assert!(wide["health"]["nodeCounts"]["registered"].get("beingDeleted").is_none(), "omitempty drops a zero");
    assert_eq!(wide["scaleUp"]["status"], "NoActivity");
    assert!(wide["scaleUp"].get("backoffInfo").is_none(), "the cluster's scale-up has no backoffInfo");
    // Scale-down has not reported: no candidates, no time.
    assert_eq!(wide["scaleDown"]["status"], "NoCandidates");
    assert!(wide["scaleDown"]["lastProbeTime"].is_null());
    assert!(wide["scaleDown"].get("candidates").is_none());

    let general = &yaml["nodeGroups"][0];
    let keys: Vec<&str> = general.as_mapping().unwrap().keys().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(keys, ["health", "name", "scaleDown", "scaleUp"]);
    assert_eq!(general["health"]["cloudProviderTarget"], 2);
    assert_eq!((general["health"]["minSize"].as_i64(), general["health"]["maxSize"].as_i64()), (Some(0), Some(10)));
    assert_eq!(general["scaleUp"]["backoffInfo"], serde_yaml::Value::Mapping(Default::default()), "written as {{}}");
    // A group with no instance at all has no readiness: its times are null.
    let idle = &yaml["nodeGroups"][1];
    assert_eq!(idle["name"], "idle");
    assert!(idle["health"]["lastProbeTime"].is_null() && idle["scaleUp"]["lastTransitionTime"].is_null());

    let cm = status.config_map();
    assert_eq!(cm.metadata.name.as_deref(), Some("cluster-autoscaler-status"));
    assert_eq!(cm.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(cm.metadata.annotations.unwrap()[LAST_UPDATED_ANNOTATION], "2026-12-01 10:00:00 +0000 UTC");
    assert_eq!(cm.data.unwrap()[STATUS_KEY], status.to_yaml());
}

#[test]
fn transition_times_move_only_when_a_status_changes() {
    let options = ClusterAutoscalerOptions::default().resolved();
    let mut state = ClusterState::default();
    let mut registry = StatusRegistry::default();
    let ready = |n| Readiness { ready: n, ..Default::default() };

    registry.update_candidates(BTreeMap::new(), EPOCH);
    let first = registry.build(&input(0.0, vec![group("general", 1, ready(1))], &state));
    assert_eq!(first.node_groups[0].scale_down.status, "NoCandidates");

    // A scale-up in flight 30 s later: InProgress from then, health unchanged since the start.
    state.register_scale_up("general", 2, 30.0, &options);
    let up = registry.build(&input(30.0, vec![group("general", 3, ready(1))], &state));
    let g = &up.node_groups[0];
    assert_eq!(g.scale_up.status, "InProgress");
    assert_eq!(g.scale_up.last_transition_time.as_deref(), Some("2026-12-01T10:00:30Z"));
    assert_eq!(g.health.last_transition_time.as_deref(), Some("2026-12-01T10:00:00Z"));
    assert_eq!(g.health.last_probe_time.as_deref(), Some("2026-12-01T10:00:30Z"));
    assert_eq!(up.cluster_wide.scale_up.status, "InProgress");

    // Two nodes unneeded at 60 s: candidates, and the scale-down transition then.
    registry.update_candidates(BTreeMap::from([("general".to_string(), 2)]), EPOCH + 60);
    let down = registry.build(&input(60.0, vec![group("general", 3, ready(3))], &state));
    let g = &down.node_groups[0];
    assert_eq!((g.scale_down.status, g.scale_down.candidates), ("CandidatesPresent", 2));
    assert_eq!(g.scale_down.last_transition_time.as_deref(), Some("2026-12-01T10:01:00Z"));
    assert_eq!(down.cluster_wide.scale_down.candidates, 2);
    // The nodes came: no node upcoming, so no scale-up in progress, even before the request is
    // cleared (upstream `IsNodeGroupScalingUp` asks for upcoming nodes).
    assert_eq!(g.scale_up.status, "NoActivity");
    assert_eq!(g.scale_up.last_transition_time.as_deref(), Some("2026-12-01T10:01:00Z"));
    state.update(&[GroupCounts { name: "general", target: 3, readiness: ready(3) }], 60.0, &options);
    assert!(state.request("general").is_none());
    let done = registry.build(&input(70.0, vec![group("general", 3, ready(3))], &state));
    assert_eq!(done.node_groups[0].scale_up.status, "NoActivity");
    assert_eq!(done.node_groups[0].scale_up.last_transition_time.as_deref(), Some("2026-12-01T10:01:00Z"));
    assert_eq!(
        done.node_groups[0].scale_down.last_transition_time.as_deref(),
        Some("2026-12-01T10:01:00Z"),
        "scale-down's probe is when it last reported, not the loop"
    );
}

#[test]
fn a_backed_off_group_says_why_in_upstreams_words() {
    let options = ClusterAutoscalerOptions::default().resolved();
    let mut state = ClusterState::default();
    state.register_scale_up("general", 1, 0.0, &options);
    // 15 minutes and a second later the node has not come: timed out and backed off.
    let counts = GroupCounts { name: "general", target: 1, readiness: Readiness::default() };
    let timed_out = state.update(&[counts], 901.0, &options);
    assert_eq!(timed_out.len(), 1);
    let mut registry = StatusRegistry::default();
    let status = registry.build(&input(901.0, vec![group("general", 0, Readiness::default())], &state));
    let up = &status.node_groups[0].scale_up;
    assert_eq!(up.status, "Backoff");
    let info = up.backoff_info.as_ref().unwrap();
    assert_eq!(info.error_code, "timeout");
    assert_eq!(info.error_message, "Scale-up timed out for node group general after 15m1s");

    state.register_failed_scale_up("spot", FailureCode::OutOfResources, 901.0, &options);
    let status = registry.build(&input(902.0, vec![group("spot", 1, Readiness::default())], &state));
    let info = status.node_groups[0].scale_up.backoff_info.clone().unwrap();
    assert_eq!(
        (info.error_code.as_str(), info.error_message.as_str()),
        ("placeholder-cannot-be-fulfilled", "AWS cannot provision any more instances for this node group")
    );
    assert_eq!(status.cluster_wide.scale_up.status, "NoActivity", "the cluster never reports Backoff");
    assert_eq!(truncated("x".repeat(501)).len(), 500 + "<truncated>".len());
}
