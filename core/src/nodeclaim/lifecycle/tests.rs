//! The lifecycle decisions on one NodeClaim and its Node, step by step: launch, registration,
//! initialization, liveness and the phase they add up to.

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;
use crate::api::nodeclaim::conditions;
use crate::api::time::parse_time;
use crate::api::{find_condition, NodeClaimSpec};
use crate::labels;
use crate::quantity::Quantity;

const T0: &str = "2026-12-01T10:00:00Z";
const T1: &str = "2026-12-01T10:00:03Z";
const T2: &str = "2026-12-01T10:00:43Z";

fn taint(key: &str, effect: &str) -> Taint {
    Taint { key: key.into(), value: None, effect: effect.into(), time_added: None }
}

fn nodeclaim() -> NodeClaim {
    let mut spec = NodeClaimSpec {
        taints: vec![taint("dedicated", "NoSchedule")],
        startup_taints: vec![taint("example.com/agent-not-ready", "NoSchedule")],
        ..NodeClaimSpec::default()
    };
    spec.resources.requests.insert("cpu".into(), Quantity::parse("1").unwrap());
    spec.resources.requests.insert("example.com/device".into(), Quantity::parse("0").unwrap());
    let mut nc = NodeClaim::new("default-abcde", spec);
    nc.metadata.uid = Some("uid-1".into());
    nc.metadata.creation_timestamp = Some(Time(T0.parse().unwrap()));
    nc.metadata.labels = Some([(labels::NODEPOOL.to_string(), "default".to_string())].into());
    nc.metadata.annotations = Some([("karpenter.sh/nodepool-hash".to_string(), "1".to_string())].into());
    nc
}

fn instance() -> Instance {
    Instance {
        provider_id: "kwok://ip-10-0-1-1".into(),
        labels: [
            (labels::INSTANCE_TYPE.to_string(), "m5.large".to_string()),
            // The NodeClaim's own label wins over the provider's.
            (labels::NODEPOOL.to_string(), "provider-says".to_string()),
        ]
        .into(),
        allocatable: [("cpu".to_string(), Quantity::parse("1930m").unwrap())].into(),
        ..Instance::default()
    }
}

/// The Node the kubelet registers for a launched NodeClaim.
fn joined_node(nc: &NodeClaim) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("ip-10-0-1-1".into()),
            labels: Some([(labels::HOSTNAME.to_string(), "ip-10-0-1-1".to_string())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(nc.status.as_ref().unwrap().provider_id.clone()),
            taints: Some(vec![
                taint("karpenter.sh/unregistered", "NoExecute"),
                taint("node.kubernetes.io/not-ready", "NoSchedule"),
            ]),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            allocatable: Some([("cpu".to_string(), K8sQuantity("1930m".into()))].into()),
            ..Default::default()
        }),
    }
}

fn condition_time(nc: &NodeClaim, type_: &str) -> Option<String> {
    find_condition(&nc.status.as_ref()?.conditions, type_).filter(|c| c.is_true())?.last_transition_time.clone()
}

#[test]
fn launch_copies_the_instance_and_keeps_the_nodeclaims_labels() {
    let nc = launched(&nodeclaim(), &instance(), T1);
    let labels = nc.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[labels::INSTANCE_TYPE], "m5.large");
    assert_eq!(labels[labels::NODEPOOL], "default");
    let status = nc.status.as_ref().unwrap();
    assert_eq!(status.provider_id, "kwok://ip-10-0-1-1");
    assert_eq!(status.allocatable["cpu"], Quantity::parse("1930m").unwrap());
    assert_eq!(condition_time(&nc, conditions::LAUNCHED).as_deref(), Some(T1));
    // Launching again does not move the transition time.
    let again = launched(&nc, &instance(), T2);
    assert_eq!(condition_time(&again, conditions::LAUNCHED).as_deref(), Some(T1));
}

#[test]
fn a_failed_launch_leaves_launched_unknown_with_its_reason_once() {
    let nc = nodeclaim();
    let status = launch_failed(&nc, "Unauthorized", "User is not authorized", T1).expect("a first write");
    let launched_condition = status.conditions.iter().find(|c| c.type_ == conditions::LAUNCHED).unwrap();
    assert_eq!(
        (
            launched_condition.status.as_str(),
            launched_condition.reason.as_deref(),
            launched_condition.message.as_deref()
        ),
        ("Unknown", Some("Unauthorized"), Some("User is not authorized"))
    );
    let mut failed = nc.clone();
    failed.status = Some(status);
    // The same failure again writes nothing; another keeps the first transition time.
    assert_eq!(launch_failed(&failed, "Unauthorized", "User is not authorized", T2), None);
    let long = "x".repeat(400);
    let again = launch_failed(&failed, "LaunchFailed", &long, T2).unwrap();
    let c = again.conditions.iter().find(|c| c.type_ == conditions::LAUNCHED).unwrap();
    assert_eq!(c.last_transition_time.as_deref(), Some(T1));
    assert_eq!(c.message.as_deref().map(str::len), Some(303), "cut to 300 characters and ...");
    // A launch that then succeeds turns it True.
    failed.status = Some(again);
    assert_eq!(condition_time(&launched(&failed, &instance(), T2), conditions::LAUNCHED).as_deref(), Some(T2));
}

#[test]
fn registration_finds_the_node_by_provider_id() {
    let nc = nodeclaim();
    assert_eq!(node_for(&nc, []), Err(NotRegistered::NotLaunched));
    let nc = launched(&nc, &instance(), T1);
    let node = joined_node(&nc);
    let mut other = node.clone();
    other.spec.as_mut().unwrap().provider_id = Some("kwok://other".into());
    assert_eq!(node_for(&nc, [&other, &node]), Ok(&node));
    assert_eq!(node_for(&nc, [&other]), Err(NotRegistered::NodeNotFound { provider_id: "kwok://ip-10-0-1-1".into() }));
    assert_eq!(
        node_for(&nc, [&node, &node]),
        Err(NotRegistered::MultipleNodesFound { provider_id: "kwok://ip-10-0-1-1".into(), count: 2 })
    );
}

#[test]
fn registration_syncs_the_node_and_removes_the_unregistered_taint() {
    let nc = launched(&nodeclaim(), &instance(), T1);
    let r = register(&nc, &joined_node(&nc), T2);
    assert!(!r.unregistered_taint_missing);
    let meta = &r.node.metadata;
    assert_eq!(meta.finalizers.as_deref(), Some(&["karpenter.sh/termination".to_string()][..]));
    let owner = &meta.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()), ("NodeClaim", "default-abcde", "uid-1"));
    let node_labels = meta.labels.as_ref().unwrap();
    assert_eq!(node_labels[labels::NODE_REGISTERED], "true");
    assert_eq!(node_labels[labels::INSTANCE_TYPE], "m5.large");
    assert_eq!(node_labels[labels::HOSTNAME], "ip-10-0-1-1");
    assert_eq!(meta.annotations.as_ref().unwrap()["karpenter.sh/nodepool-hash"], "1");
    let taints: Vec<&str> =
        r.node.spec.as_ref().unwrap().taints.as_ref().unwrap().iter().map(|t| t.key.as_str()).collect();
    assert_eq!(taints, ["node.kubernetes.io/not-ready", "dedicated", "example.com/agent-not-ready"]);
    let status = r.nodeclaim.status.as_ref().unwrap();
    assert_eq!(status.node_name, "ip-10-0-1-1");
    assert_eq!(condition_time(&r.nodeclaim, conditions::REGISTERED).as_deref(), Some(T2));

    // Registering again changes nothing, and does not put removed startup taints back.
    let mut node = r.node.clone();
    node.spec.as_mut().unwrap().taints.as_mut().unwrap().retain(|t| t.key != "example.com/agent-not-ready");
    let again = register(&r.nodeclaim, &node, T2);
    assert_eq!(again.node, node);
    assert!(!again.unregistered_taint_missing);
}

#[test]
fn registration_honours_do_not_sync_taints_and_reports_a_missing_unregistered_taint() {
    let nc = launched(&nodeclaim(), &instance(), T1);
    let mut node = joined_node(&nc);
    node.metadata.labels.as_mut().unwrap().insert(labels::NODE_DO_NOT_SYNC_TAINTS.into(), "true".into());
    node.spec.as_mut().unwrap().taints = Some(vec![]);
    let r = register(&nc, &node, T2);
    assert!(r.unregistered_taint_missing);
    assert_eq!(r.node.spec.as_ref().unwrap().taints.as_deref(), Some(&[][..]));
}

fn ready(mut node: Node) -> Node {
    node.status.get_or_insert_with(Default::default).conditions =
        Some(vec![NodeCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() }]);
    node
}

#[test]
fn initialization_waits_for_ready_startup_taints_ephemeral_taints_and_resources() {
    let nc = launched(&nodeclaim(), &instance(), T1);
    assert_eq!(initialize(&nc, &joined_node(&nc), T2), Err(NotInitialized::NotRegistered));
    let r = register(&nc, &joined_node(&nc), T2);
    let (nc, node) = (r.nodeclaim, r.node);
    assert_eq!(initialize(&nc, &node, T2).unwrap_err().reason(), "NodeNotReady");
    let mut node = ready(node);
    assert_eq!(
        initialize(&nc, &node, T2),
        Err(NotInitialized::StartupTaintsExist { taint: "example.com/agent-not-ready:NoSchedule".into() })
    );
    node.spec.as_mut().unwrap().taints.as_mut().unwrap().retain(|t| t.key != "example.com/agent-not-ready");
    assert_eq!(
        initialize(&nc, &node, T2),
        Err(NotInitialized::KnownEphemeralTaintsExist { taint: "node.kubernetes.io/not-ready:NoSchedule".into() })
    );
    node.spec.as_mut().unwrap().taints.as_mut().unwrap().retain(|t| t.key != "node.kubernetes.io/not-ready");
    let mut no_cpu = node.clone();
    no_cpu.status.as_mut().unwrap().allocatable = Some([("cpu".to_string(), K8sQuantity("0".into()))].into());
    assert_eq!(initialize(&nc, &no_cpu, T2), Err(NotInitialized::ResourceNotRegistered { resource: "cpu".into() }));
    // The zero request for example.com/device needs nothing on the node.
    let (nc, node) = initialize(&nc, &node, T2).unwrap();
    assert_eq!(node.metadata.labels.as_ref().unwrap()[labels::NODE_INITIALIZED], "true");
    assert_eq!(condition_time(&nc, conditions::INITIALIZED).as_deref(), Some(T2));
    assert_eq!(condition_time(&nc, conditions::READY).as_deref(), Some(T2));
    assert_eq!(phase(&nc), Phase::Initialized);
}

#[test]
fn the_phase_follows_the_conditions() {
    let nc = nodeclaim();
    assert_eq!(phase(&nc), Phase::Launching);
    let nc = launched(&nc, &instance(), T1);
    assert_eq!(phase(&nc), Phase::Launched);
    assert!(!finalize_deletes_nodes(&nc), "a Node of a NodeClaim not registered is left to its instance");
    let mut nc = register(&nc, &joined_node(&nc), T2).nodeclaim;
    assert_eq!(phase(&nc), Phase::Registered);
    nc.metadata.deletion_timestamp = Some(Time(T2.parse().unwrap()));
    assert_eq!(phase(&nc), Phase::Terminating);
    assert!(finalize_deletes_nodes(&nc));
}

#[test]
fn liveness_times_out_launch_after_five_minutes_and_registration_after_fifteen() {
    let t0 = parse_time(T0).unwrap();
    let nc = nodeclaim();
    assert_eq!(liveness(&nc, t0 + 60), Liveness::CheckAfter(240));
    assert_eq!(liveness(&nc, t0 + 300), Liveness::TimedOut(LivenessTimeout::Launch));
    let nc = launched(&nc, &instance(), T1);
    let t1 = parse_time(T1).unwrap();
    assert_eq!(liveness(&nc, t0 + 300), Liveness::CheckAfter(t1 + 900 - (t0 + 300)));
    assert_eq!(liveness(&nc, t1 + 900), Liveness::TimedOut(LivenessTimeout::Registration));
    let registered = register(&nc, &joined_node(&nc), T2).nodeclaim;
    assert_eq!(liveness(&registered, t1 + 3600), Liveness::Done);
    let mut deleting = nc.clone();
    deleting.metadata.deletion_timestamp = Some(Time(T2.parse().unwrap()));
    assert_eq!(liveness(&deleting, t1 + 3600), Liveness::Done);
    assert_eq!(LivenessTimeout::Registration.condition(), "Registered");
}

#[test]
fn a_failed_launch_backs_off_from_1_s_doubling_to_a_minute() {
    let waits: Vec<u64> = (1..=8).map(|failures| RATE_LIMITER.wait_millis(failures)).collect();
    assert_eq!(waits, [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
}
