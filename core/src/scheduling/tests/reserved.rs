//! Reserved capacity in a round, after upstream's "Reserved Instance Types" suite
//! (`pkg/controllers/provisioning/scheduling/suite_test.go`, v1.14.1): three fake types, large
//! (6 vCPU), medium (3) and small (2); medium and small each have a one-instance reservation in
//! test-zone-1 priced at their on-demand price ÷ 100,000. Upstream's later rounds are simulated by
//! lowering the counts the way the launches would.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::{indent, input, nodepool, np_spec};
use crate::catalogue::reservations::{ReservationState, ReservationType, ReservedCapacity};
use crate::catalogue::{CapacityType, InstanceType, Offering, PriceSource};
use crate::labels::{self, aws};
use crate::quantity::Quantity;
use crate::requirements::{Requirement, Requirements};
use crate::scheduling::explain::{render_deferred, ReservationConflict};
use crate::scheduling::fake;
use crate::scheduling::scheduler::{schedule, Results};

/// Adds a reservation of `count` instances in test-zone-1 to `it`.
fn reserve(it: &mut InstanceType, id: &str, count: i64) {
    let on_demand = it.offerings.iter().find(|o| o.capacity_type == CapacityType::OnDemand).unwrap().price;
    let requirements: Requirements = [
        Requirement::in_values(labels::CAPACITY_TYPE, &[labels::CAPACITY_TYPE_RESERVED]),
        Requirement::in_values(labels::TOPOLOGY_ZONE, &["test-zone-1"]),
        Requirement::in_values(aws::CAPACITY_RESERVATION_ID, &[id]),
    ]
    .into_iter()
    .collect();
    it.offerings.push(Offering {
        zone: "test-zone-1".into(),
        zone_id: "test-zone-1".into(),
        capacity_type: CapacityType::Reserved,
        price: on_demand / 100_000.0,
        price_source: PriceSource::Unpriced,
        available: count > 0,
        requirements: Arc::new(requirements),
        reservation: Some(Arc::new(ReservedCapacity {
            id: id.into(),
            instance_type: it.name.clone(),
            zone: "test-zone-1".into(),
            reservation_type: ReservationType::Default,
            interruptible: false,
            state: ReservationState::Active,
            available_instances: count,
        })),
    });
    let mut capacity_types: Vec<String> =
        it.requirements.get(labels::CAPACITY_TYPE).values().map(str::to_string).collect();
    capacity_types.push(labels::CAPACITY_TYPE_RESERVED.into());
    it.requirements.remove(labels::CAPACITY_TYPE);
    it.requirements.add(Requirement::in_values(labels::CAPACITY_TYPE, &capacity_types));
}

/// large, medium and small; medium and small reserved with `medium` and `small` instances left.
fn types(medium: i64, small: i64) -> Vec<InstanceType> {
    let mut large = fake::instance_type("large-instance-type", 6, Quantity::from_gibibytes(6), 5, "amd64");
    let mut mid = fake::instance_type("medium-instance-type", 3, Quantity::from_gibibytes(3), 5, "amd64");
    let mut sm = fake::instance_type("small-instance-type", 2, Quantity::from_gibibytes(2), 5, "amd64");
    reserve(&mut mid, "r-medium-instance-type", medium);
    reserve(&mut sm, "r-small-instance-type", small);
    // Upstream's fake types are compatible with everything; keep large plain.
    large.offerings.retain(|o| o.capacity_type != CapacityType::Reserved);
    vec![large, mid, sm]
}

/// A pod labelled app=test; `anti` adds required hostname anti-affinity to its peers.
fn pod(name: &str, cpu: &str, anti: bool, extra_spec: &str) -> Pod {
    let affinity = if anti {
        "affinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - labelSelector: {matchLabels: {app: test}}\n      topologyKey: kubernetes.io/hostname\n"
    } else {
        ""
    };
    let text = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  labels: {{app: test}}\nspec:\n  containers:\n  - name: c\n    image: x\n    resources:\n      requests: {{cpu: \"{cpu}\"}}\n{}{}",
        indent(affinity, 2),
        indent(extra_spec, 2)
    );
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn launched(r: &Results) -> Vec<(String, String, Option<String>)> {
    r.nodeclaims
        .iter()
        .map(|n| {
            let l = n.launch.as_ref().expect("a launch");
            (l.instance_type.clone(), l.capacity_type.clone(), l.reservation_id.clone())
        })
        .collect()
}

fn deferred(r: &Results) -> Vec<&str> {
    r.deferred.iter().map(|d| d.pod.name.as_str()).collect()
}

#[test]
fn no_fallback_to_on_demand_or_spot_while_compatible_reservations_exist() {
    let pods = || (0..3).map(|i| pod(&format!("p{i}"), "1800m", false, "")).collect::<Vec<_>>();
    let np = || vec![nodepool(&np_spec("", ""), "default")];
    // Round 1: the first NodeClaim could launch small or medium, so it holds both reservations;
    // the other pods fit neither with it nor on a NodeClaim of their own: deferred, not on large.
    let r = schedule(&input(np(), types(1, 1), pods()));
    assert_eq!(launched(&r), [("small-instance-type".into(), "reserved".into(), Some("r-small-instance-type".into()))]);
    assert_eq!(deferred(&r), ["p1", "p2"], "{r:#?}");
    assert!(r.unschedulable.is_empty() && r.relaxed.is_empty());
    let nc = &r.nodeclaims[0];
    let req = |key: &str| nc.requirements.iter().find(|q| q.key == key).map(|q| q.values.clone());
    assert_eq!(req(labels::CAPACITY_TYPE), Some(vec!["reserved".to_string()]));
    assert_eq!(
        req(aws::CAPACITY_RESERVATION_ID),
        Some(vec!["r-medium-instance-type".to_string(), "r-small-instance-type".to_string()])
    );
    let ReservationConflict::Exhausted { reservations } = &r.deferred[0].conflict else { panic!() };
    assert_eq!(reservations.len(), 2);
    assert!(reservations.iter().all(|u| u.available == 1 && u.left == 0 && u.held_by == 1));
    assert!(render_deferred(&r.deferred[0]).contains("Karpenter retries next round"));
    // Round 2 (small's reservation used): one pod on medium, one deferred.
    let r = schedule(&input(np(), types(1, 0), pods().into_iter().skip(1).collect()));
    assert_eq!(
        launched(&r),
        [("medium-instance-type".into(), "reserved".into(), Some("r-medium-instance-type".into()))]
    );
    assert_eq!(deferred(&r).len(), 1);
    // Round 3: both used; the last pod goes to the cheapest non-reserved offering.
    let r = schedule(&input(np(), types(0, 0), pods().into_iter().skip(2).collect()));
    let l = launched(&r);
    assert_eq!((l[0].0.as_str(), l[0].2.as_ref()), ("small-instance-type", None));
    assert_ne!(l[0].1, "reserved");
    assert!(r.deferred.is_empty());
}

#[test]
fn a_reservation_shared_by_two_nodepools_is_counted_once() {
    let np = |name: &str| nodepool(&np_spec("", ""), name);
    let pods: Vec<Pod> = (1..=2)
        .map(|i| {
            let select = format!(
                "nodeSelector: {{node.kubernetes.io/instance-type: small-instance-type, karpenter.sh/nodepool: np-{i}}}"
            );
            pod(&format!("p{i}"), "100m", true, &select)
        })
        .collect();
    let r = schedule(&input(vec![np("np-1"), np("np-2")], types(1, 1), pods));
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
    assert_eq!(launched(&r)[0].2.as_deref(), Some("r-small-instance-type"));
    assert_eq!(r.deferred.len(), 1);
}

#[test]
fn distinct_reservations_of_two_nodepools_are_separate_pools() {
    let np = |name: &str| nodepool(&np_spec("", ""), name);
    let mut other = types(1, 1);
    other[2].offerings.retain(|o| o.capacity_type != CapacityType::Reserved);
    reserve(&mut other[2], "r-distinct", 1);
    let mut i = input(vec![np("np-1"), np("np-2")], types(1, 1), Vec::new());
    i.nodepools[1].instance_types = Arc::new(other);
    i.pods = (1..=2)
        .map(|n| {
            let select = format!(
                "nodeSelector: {{node.kubernetes.io/instance-type: small-instance-type, karpenter.sh/nodepool: np-{n}}}"
            );
            pod(&format!("p{n}"), "100m", true, &select)
        })
        .collect();
    let r = schedule(&i);
    let mut ids: Vec<Option<String>> = launched(&r).into_iter().map(|l| l.2).collect();
    ids.sort();
    assert_eq!(ids, [Some("r-distinct".into()), Some("r-small-instance-type".into())], "{r:#?}");
}

#[test]
fn several_reservations_of_one_pool_are_held_pessimistically() {
    let mut its = types(1, 1);
    reserve(&mut its[2], "r-small-instance-type-2", 2);
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            pod(&format!("p{i}"), "100m", true, "nodeSelector: {node.kubernetes.io/instance-type: small-instance-type}")
        })
        .collect();
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], its, pods));
    // The first NodeClaim holds one of each (3 instances in all), the second the last of the
    // two-instance reservation: two NodeClaims, two pods deferred.
    assert_eq!(r.nodeclaims.len(), 2, "{r:#?}");
    assert_eq!(r.deferred.len(), 2);
    // Launches: the first takes the fuller reservation, the second what is left of it.
    let ids: Vec<Option<String>> = launched(&r).into_iter().map(|l| l.2).collect();
    assert_eq!(ids, [Some("r-small-instance-type-2".into()), Some("r-small-instance-type-2".into())]);
}

#[test]
fn a_reservation_error_blocks_lower_weight_nodepools() {
    let primary = nodepool(&np_spec("", "weight: 100\n"), "np-primary");
    let fallback = nodepool(&np_spec("", "weight: 50\n"), "np-fallback");
    let mut other = types(1, 1);
    other[2].offerings.retain(|o| o.capacity_type != CapacityType::Reserved);
    reserve(&mut other[2], "r-fallback", 1);
    let mut i = input(vec![primary, fallback], types(1, 1), Vec::new());
    i.nodepools[1].instance_types = Arc::new(other);
    i.pods = (0..2)
        .map(|n| {
            pod(&format!("p{n}"), "100m", true, "nodeSelector: {node.kubernetes.io/instance-type: small-instance-type}")
        })
        .collect();
    let r = schedule(&i);
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
    assert_eq!(r.nodeclaims[0].nodepool, "np-primary");
    assert_eq!(r.deferred.len(), 1);
    assert_eq!(r.deferred[0].nodepool, "np-primary");
}

#[test]
fn a_reservation_error_is_not_relaxed() {
    // Both pods prefer np-1 (the tie-break would put np-2 first once relaxed); np-2 has its own
    // reservation. The second pod waits instead of dropping its preference.
    let mut other = types(1, 1);
    other[2].offerings.retain(|o| o.capacity_type != CapacityType::Reserved);
    reserve(&mut other[2], "r-distinct", 1);
    let np = |name: &str| nodepool(&np_spec("", ""), name);
    let mut i = input(vec![np("np-1"), np("np-2")], types(1, 1), Vec::new());
    i.nodepools[1].instance_types = Arc::new(other);
    let prefer = "nodeSelector: {node.kubernetes.io/instance-type: small-instance-type}\naffinity:\n  nodeAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - weight: 1\n      preference:\n        matchExpressions: [{key: karpenter.sh/nodepool, operator: In, values: [np-1]}]\n";
    let node_affinity = pod("x", "1", false, prefer).spec.unwrap().affinity.unwrap().node_affinity;
    i.pods = (0..2)
        .map(|n| {
            let mut p = pod(
                &format!("p{n}"),
                "100m",
                true,
                "nodeSelector: {node.kubernetes.io/instance-type: small-instance-type}",
            );
            p.spec.as_mut().unwrap().affinity.as_mut().unwrap().node_affinity = node_affinity.clone();
            p
        })
        .collect();
    let r = schedule(&i);
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
    assert_eq!(r.nodeclaims[0].nodepool, "np-1");
    assert_eq!(r.deferred.len(), 1);
    assert!(r.relaxed.is_empty(), "{:?}", r.relaxed);
}

#[test]
fn pods_that_exclude_reserved_capacity_do_not_wait() {
    let pods = vec![
        pod("first", "1800m", false, ""),
        pod("on-demand", "1800m", false, "nodeSelector: {karpenter.sh/capacity-type: on-demand}"),
        pod("big", "5", false, ""),
    ];
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], types(1, 1), pods));
    assert!(r.deferred.is_empty(), "{:?}", r.deferred);
    let mut got = launched(&r);
    got.sort();
    assert_eq!(
        got[0],
        ("large-instance-type".into(), "spot".into(), None),
        "big fits only large: no reserved offering"
    );
    assert_eq!(got[1].1, "on-demand");
    assert_eq!(got[2].2.as_deref(), Some("r-small-instance-type"));
}

#[test]
fn pods_fill_a_reserved_nodeclaim() {
    let pods: Vec<Pod> = (0..2)
        .map(|i| {
            pod(
                &format!("p{i}"),
                "500m",
                false,
                "nodeSelector: {karpenter.sh/capacity-type: reserved, topology.kubernetes.io/zone: test-zone-1}",
            )
        })
        .collect();
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], types(1, 1), pods));
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
    assert_eq!(r.nodeclaims[0].pods.len(), 2);
    assert_eq!(launched(&r)[0].1, "reserved");
}

#[test]
fn nodepools_without_reservations_are_unaffected() {
    let pods: Vec<Pod> = (0..3).map(|i| pod(&format!("p{i}"), "1800m", false, "")).collect();
    let plain = types(0, 0)
        .into_iter()
        .map(|mut it| {
            it.offerings.retain(|o| o.capacity_type != CapacityType::Reserved);
            it
        })
        .collect();
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], plain, pods));
    // Without reservations all three share a large NodeClaim.
    assert!(r.deferred.is_empty());
    assert_eq!(r.nodeclaims.len(), 1);
    assert!(launched(&r).iter().all(|l| l.2.is_none()));
}
