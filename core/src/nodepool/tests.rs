//! The NodePool controllers' decisions: conditions from validation and the NodeClass, the counter,
//! the hash annotations and the re-stamp of another scheme's NodeClaims.

use super::*;
use crate::api::nodeclaim::NodeClaim;
use crate::disruption::drift::{Expected, HASH_VERSION, NODEPOOL_HASH, NODEPOOL_HASH_VERSION};

const NODEPOOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default, generation: 2, creationTimestamp: '2026-01-01T00:00:00Z'}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
";

fn nodepool(text: &str) -> NodePool {
    serde_yaml::from_str(text).unwrap()
}

fn nodeclass(ready: Option<(&str, &str)>) -> EC2NodeClass {
    let mut text = "apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default, generation: 3}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
"
    .to_string();
    if let Some((status, reason)) = ready {
        text.push_str(&format!(
            "status:\n  conditions: [{{type: Ready, status: \"{status}\", reason: {reason}, message: why}}]\n"
        ));
    }
    serde_yaml::from_str(&text).unwrap()
}

fn condition<'a>(s: &'a NodePoolStatus, type_: &str) -> (&'a str, &'a str) {
    let c = crate::api::find_condition(&s.conditions, type_).unwrap_or_else(|| panic!("no {type_}"));
    (c.status.as_str(), c.reason.as_deref().unwrap_or_default())
}

#[test]
fn a_nodepool_is_ready_when_valid_and_its_nodeclass_is() {
    let np = nodepool(NODEPOOL);
    let class = nodeclass(Some(("True", "Ready")));
    let usage = ResourceList::from([("cpu".to_string(), crate::quantity::Quantity::from_units(4))]);
    let s = status(&np, Some(&class), Some(&usage), "2026-01-01T00:05:00Z").expect("a first status");
    assert_eq!(condition(&s, VALIDATION_SUCCEEDED), ("True", "ValidationSucceeded"));
    assert_eq!(condition(&s, NODECLASS_READY), ("True", "NodeClassReady"));
    assert_eq!(condition(&s, "Ready"), ("True", "Ready"));
    assert_eq!(condition(&s, NODE_REGISTRATION_HEALTHY), ("Unknown", "AwaitingReconciliation"));
    assert_eq!(s.node_class_observed_generation, Some(3));
    // The counter: upstream's base resources at zero, what the nodes hold, and the node count.
    let shown: Vec<(&str, String)> = s.resources.iter().map(|(k, v)| (k.as_str(), v.to_string())).collect();
    assert_eq!(
        shown,
        [("cpu", "4"), ("ephemeral-storage", "0"), ("memory", "0"), ("nodes", "0"), ("pods", "0")]
            .map(|(k, v)| (k, v.to_string()))
    );
    assert_eq!(s.nodes, Some(0));
    // Written back, the same inputs change nothing; unsynced, the counter leaves it.
    let mut written = np.clone();
    written.status = Some(s);
    assert_eq!(status(&written, Some(&class), Some(&usage), "2026-01-01T00:06:00Z"), None);
    assert_eq!(status(&written, Some(&class), None, "2026-01-01T00:06:00Z"), None);
}

#[test]
fn a_missing_or_unready_nodeclass_and_an_invalid_nodepool_say_why() {
    let np = nodepool(NODEPOOL);
    let s = status(&np, None, None, "2026-01-01T00:05:00Z").unwrap();
    assert_eq!(condition(&s, NODECLASS_READY), ("False", "NodeClassNotFound"));
    assert_eq!(condition(&s, "Ready"), ("False", "UnhealthyDependents"));
    let s = status(&np, Some(&nodeclass(Some(("False", "SubnetsNotFound")))), None, "t").unwrap();
    assert_eq!(condition(&s, NODECLASS_READY), ("False", "SubnetsNotFound"));
    let s = status(&np, Some(&nodeclass(None)), None, "t").unwrap();
    assert_eq!(condition(&s, NODECLASS_READY), ("False", "NodeClassReadinessUnknown"));
    let invalid = nodepool(&NODEPOOL.replace("operator: In, values: [on-demand]", "operator: In, values: []"));
    let s = status(&invalid, Some(&nodeclass(Some(("True", "Ready")))), None, "t").unwrap();
    assert_eq!(condition(&s, VALIDATION_SUCCEEDED).0, "False");
    assert_eq!(condition(&s, VALIDATION_SUCCEEDED).1, "NodePoolValidationFailed");
}

fn nodeclaim(name: &str, annotations: &[(&str, &str)], drifted: bool) -> NodeClaim {
    let mut nc: NodeClaim = serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {{name: {name}, labels: {{karpenter.sh/nodepool: default, karpenter.sh/capacity-type: on-demand}}}}
spec: {{nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}, requirements: []}}
status: {{providerID: 'kwok://{name}'}}
"
    ))
    .unwrap();
    nc.metadata.annotations = Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    if drifted {
        nc.status.as_mut().unwrap().conditions.push(crate::api::Condition {
            type_: "Drifted".into(),
            status: "True".into(),
            reason: Some("NodePoolDrifted".into()),
            ..Default::default()
        });
    }
    nc
}

#[test]
fn upstream_stamped_nodeclaims_are_restamped_not_drifted() {
    // Upstream Karpenter ran this cluster: its hashstructure values, version v3.
    let mut np = nodepool(NODEPOOL);
    np.metadata.annotations = Some(
        [
            (NODEPOOL_HASH.to_string(), "4012513481623584108".to_string()),
            (NODEPOOL_HASH_VERSION.to_string(), "v3".into()),
        ]
        .into(),
    );
    let upstream = [(NODEPOOL_HASH, "4012513481623584108"), (NODEPOOL_HASH_VERSION, "v3")];
    let claims = [nodeclaim("a", &upstream, false), nodeclaim("b", &upstream, true)];
    let expected = Expected::new(&np, &Default::default());
    assert!(claims.iter().all(|nc| expected.drifted(nc).is_none()), "another version is never compared");
    let restamped = hash::restamps(&np, &claims);
    assert_eq!(restamped.len(), 2);
    let ours = crate::disruption::drift::nodepool_hash(&np);
    assert_eq!(restamped[0].0, "a");
    assert_eq!(restamped[0].1[NODEPOOL_HASH], ours);
    assert_eq!(restamped[0].1[NODEPOOL_HASH_VERSION], HASH_VERSION);
    assert!(!restamped[1].1.contains_key(NODEPOOL_HASH), "a Drifted NodeClaim keeps its hash: it stays drifted");
    let mut a = claims[0].clone();
    a.metadata.annotations.as_mut().unwrap().extend(restamped[0].1.clone());
    assert_eq!(expected.drifted(&a), None, "re-stamped, it matches the NodePool now");
    // The NodePool takes our hash and version; after that nothing more is re-stamped.
    let stamp = hash::nodepool_annotations(&np).expect("the NodePool is re-stamped");
    np.metadata.annotations.as_mut().unwrap().extend(stamp);
    assert_eq!(hash::nodepool_annotations(&np), None);
    assert!(hash::restamps(&np, &claims).is_empty());
}

#[test]
fn registration_health_turns_true_on_a_registration_and_false_at_half_of_four_failures() {
    use registrationhealth::{Health, Tracker};
    // Each outcome is recorded after its status is decided (and written), as the controller does.
    fn registered(np: &NodePool, tracker: &mut Tracker, now: &str) -> Option<NodePoolStatus> {
        let status = registrationhealth::registered(np, tracker, now);
        tracker.record(true);
        status
    }
    fn failed(np: &NodePool, nc: &NodeClaim, tracker: &mut Tracker, now: &str) -> Option<NodePoolStatus> {
        let status = registrationhealth::failed(np, nc, tracker, now);
        tracker.record(false);
        status
    }
    let mut np = nodepool(NODEPOOL);
    np.metadata.uid = Some("np-uid".into());
    let mut nc = nodeclaim("a", &[], false);
    let launched_false = crate::api::Condition {
        type_: "Launched".into(),
        status: "False".into(),
        reason: Some("InsufficientCapacity".into()),
        message: Some("no offering".into()),
        ..Default::default()
    };
    let mut tracker = Tracker::default();
    assert_eq!(tracker.health(), Health::Unknown);
    // The first registration: True.
    let status = registered(&np, &mut tracker, "2026-01-02T00:00:00Z").expect("turns True");
    assert_eq!(condition(&status, NODE_REGISTRATION_HEALTHY), ("True", "NodeRegistrationHealthy"));
    np.status = Some(status);
    // Already True: nothing to write.
    assert_eq!(registered(&np, &mut tracker, "2026-01-02T00:01:00Z"), None);
    // One failure of [true, true, false] is not half of four.
    nc.status.as_mut().unwrap().conditions.push(launched_false.clone());
    assert_eq!(failed(&np, &nc, &mut tracker, "2026-01-02T00:02:00Z"), None);
    assert_eq!(tracker.health(), Health::Healthy);
    // The second is: False, with the Launched condition's reason (the NodeClaim never launched).
    let status = failed(&np, &nc, &mut tracker, "2026-01-02T00:03:00Z").expect("turns False");
    assert_eq!(condition(&status, NODE_REGISTRATION_HEALTHY), ("False", "InsufficientCapacity"));
    np.status = Some(status);
    // Already False: nothing to write; a registration does not yet outweigh two of four failures.
    assert_eq!(failed(&np, &nc, &mut tracker, "2026-01-02T00:04:00Z"), None);
    assert_eq!(registered(&np, &mut tracker, "2026-01-02T00:05:00Z"), None);
    assert_eq!(tracker.health(), Health::Unhealthy);
    // [false, false, true, true] still is half; one more success pushes the oldest failure out.
    assert_eq!(registered(&np, &mut tracker, "2026-01-02T00:06:00Z"), None);
    let status = registered(&np, &mut tracker, "2026-01-02T00:07:00Z").expect("turns True again");
    assert_eq!(condition(&status, NODE_REGISTRATION_HEALTHY).0, "True");
    np.status = Some(status);
    // A NodeClaim that launched but did not register fails as RegistrationFailed.
    nc.status.as_mut().unwrap().conditions =
        vec![crate::api::Condition { type_: "Launched".into(), status: "True".into(), ..Default::default() }];
    let mut tracker = Tracker::default();
    tracker.record(false);
    let status = failed(&np, &nc, &mut tracker, "2026-01-02T00:08:00Z").expect("turns False");
    assert_eq!(condition(&status, NODE_REGISTRATION_HEALTHY), ("False", "RegistrationFailed"));
    // After a restart the tracker takes the health the condition states.
    np.status = Some(status);
    let mut restarted = Tracker::default();
    restarted.hydrate(&np);
    assert_eq!(restarted.health(), Health::Unhealthy);
    // NodeClaims are judged only for the NodePool that owns them.
    assert!(!registrationhealth::owned_by(&nc, &np));
    nc.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodePool".into(),
        name: "default".into(),
        uid: "np-uid".into(),
        ..Default::default()
    }]);
    assert!(registrationhealth::owned_by(&nc, &np));
}

#[test]
fn a_missing_nodeclass_is_a_warning_once_and_a_class_not_yet_reconciled_is_none() {
    let np = nodepool(NODEPOOL);
    let now = "2026-01-01T00:05:00Z";
    let missing = status(&np, None, None, now).expect("a first status");
    let said: Vec<(&str, Option<&str>)> =
        warnings(None, &missing).iter().map(|c| (c.type_.as_str(), c.reason.as_deref())).collect();
    assert_eq!(said, [(NODECLASS_READY, Some("NodeClassNotFound"))]);
    // Written, then seen again: nothing new to say.
    let mut written = np.clone();
    written.status = Some(missing.clone());
    assert_eq!(status(&written, None, None, now), None);
    assert!(warnings(Some(&missing), &missing).is_empty());
    // A class created with the NodePool and not reconciled yet.
    let fresh = status(&np, Some(&nodeclass(None)), None, now).expect("a first status");
    assert_eq!(condition(&fresh, NODECLASS_READY), ("False", "NodeClassReadinessUnknown"));
    assert!(warnings(None, &fresh).is_empty());
    // A NodePool that fails validation says so in the view's event, not here.
    let invalid = nodepool(&NODEPOOL.replace("values: [on-demand]", "values: [bogus]"));
    let s = status(&invalid, Some(&nodeclass(Some(("True", "Ready")))), None, now).expect("a first status");
    assert_eq!(condition(&s, VALIDATION_SUCCEEDED).0, "False");
    assert!(warnings(None, &s).is_empty());
}

#[test]
fn the_counter_counts_every_5_s_once_synced_and_looks_each_second_until_then() {
    use counter::{count, Count};
    assert_eq!(count(None, 10_000, false), Count::NotSynced);
    assert_eq!(Count::NotSynced.requeue_millis(), 1_000);
    assert_eq!(count(None, 10_000, true), Count::Now);
    assert_eq!(Count::Now.requeue_millis(), 5_000);
    // A reconcile for something else (a condition) 2 s after a count: the count waits 3 s more.
    assert_eq!(count(Some(10_000), 12_000, true), Count::Wait(3_000));
    assert_eq!(Count::Wait(3_000).requeue_millis(), 3_000);
    assert_eq!(count(Some(10_000), 15_000, true), Count::Now);
    // Not synced wins over a count due.
    assert_eq!(count(Some(10_000), 20_000, false), Count::NotSynced);
}

#[test]
fn the_counters_usage_is_the_limit_checks_without_preparing_a_round() {
    let m = crate::manifest::load(include_str!("../../../kubectl-plugin/tests/data/cluster.yaml")).unwrap();
    let prepared = crate::input_from_manifests(&m, crate::Catalogue::embedded(), None).unwrap();
    let round = crate::scheduling::nodepool_usage(&prepared.input);
    assert!(!round.is_empty(), "the fixture has nodes of a NodePool");
    assert_eq!(counter::usage(&m.nodes, &m.nodeclaims), round);
}
