//! Scheduler unit tests on the fake instance types (reference upstream's scheduling suite, adapted).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::explain::{NodePoolFailure, NodeRejection};
use super::fake;
use super::scheduler::{schedule, Results};
use crate::api::nodepool::NodePool;
use crate::catalogue::InstanceType;
use crate::catalogue::UnavailableOffering;
use crate::options::MinValuesPolicy;
use crate::quantity::Quantity;
use crate::state::{Input, NodePoolInput};

mod reserved;

fn nodepool(yaml_spec: &str, name: &str) -> NodePool {
    let text = format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: {name}\nspec:\n{}",
        indent(yaml_spec, 2)
    );
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn indent(s: &str, n: usize) -> String {
    s.lines().map(|l| format!("{}{l}\n", " ".repeat(n))).collect()
}

/// A NodePool spec with the given requirements / extra template-spec lines.
fn np_spec(extra_template_spec: &str, extra_spec: &str) -> String {
    let empty = if extra_template_spec.contains("requirements:") { "" } else { "    requirements: []\n" };
    format!(
        "template:\n  spec:\n    nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n{empty}{}{}",
        indent(extra_template_spec, 4),
        extra_spec
    )
}

fn pod(name: &str, cpu: &str, memory: &str, extra_spec: &str) -> Pod {
    let text = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  containers:\n  - name: c\n    image: x\n    resources:\n      requests: {{cpu: \"{cpu}\", memory: \"{memory}\"}}\n{}",
        indent(extra_spec, 2)
    );
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn input(nodepools: Vec<NodePool>, its: Vec<InstanceType>, pods: Vec<Pod>) -> Input {
    let its = Arc::new(its);
    Input {
        nodepools: nodepools
            .into_iter()
            .map(|np| NodePoolInput { nodepool: np, instance_types: its.clone() })
            .collect(),
        pods,
        ..Default::default()
    }
}

fn small_types() -> Vec<InstanceType> {
    vec![
        fake::instance_type("small-instance-type", 2, Quantity::from_gibibytes(2), 5, "amd64"),
        fake::instance_type("default-instance-type", 4, Quantity::from_gibibytes(4), 5, "amd64"),
        fake::instance_type("arm-instance-type", 16, Quantity::from_gibibytes(128), 5, "arm64"),
    ]
}

fn placed(r: &Results) -> usize {
    r.nodeclaims.iter().map(|n| n.pods.len()).sum::<usize>()
        + r.existing_nodes.iter().map(|n| n.pods.len()).sum::<usize>()
}

#[test]
fn p1_one_pod_one_nodeclaim_cheapest_type() {
    let r = schedule(&input(
        vec![nodepool(&np_spec("", ""), "default")],
        small_types(),
        vec![pod("a", "100m", "100M", "")],
    ));
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
    let nc = &r.nodeclaims[0];
    assert_eq!(nc.instance_type_options[0], "small-instance-type");
    assert_eq!(nc.instance_type_options.len(), 3);
    let launch = nc.launch.as_ref().unwrap();
    assert_eq!(launch.instance_type, "small-instance-type");
    // capacity-type priority: spot before on-demand.
    assert_eq!(launch.capacity_type, "spot");
    assert_eq!(nc.labels.get("karpenter.sh/nodepool").map(String::as_str), Some("default"));
    assert!(nc.requirements.iter().all(|r| r.key != "kubernetes.io/hostname"));
    assert_eq!(nc.requests.get("pods"), Some(&Quantity::from_units(1)));
}

#[test]
fn p4_limits_only_pod_takes_the_cheapest_type_and_lists_all() {
    // Prices need not follow size: medium $3, small $2, large $1.
    let priced = |name: &str, cpu: i64, price: f64| {
        let mut it = fake::instance_type(name, cpu, Quantity::from_gibibytes(2 * cpu), 5, "amd64");
        for o in &mut it.offerings {
            o.price = price;
        }
        it
    };
    let its = vec![priced("medium", 4, 3.0), priced("small", 2, 2.0), priced("large", 8, 1.0)];
    // Limits only: the API server would default the requests to the limits.
    let limits_only: Pod = serde_yaml::from_str(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers: [{name: c, image: x, resources: {limits: {cpu: 1m}}}]",
    )
    .unwrap();
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], its, vec![limits_only]));
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
    let nc = &r.nodeclaims[0];
    assert_eq!(nc.instance_type_options, vec!["large", "small", "medium"]);
    assert_eq!(nc.launch.as_ref().unwrap().instance_type, "large");
    assert_eq!(nc.requests.get("cpu"), Some(&Quantity::from_millis(1)));
}

#[test]
fn p2_first_fit_decreasing() {
    let mut pods = Vec::new();
    for i in 0..40 {
        pods.push(pod(&format!("big-{i}"), "10m", "1.8G", "nodeSelector: {kubernetes.io/arch: amd64}"));
    }
    for i in 0..20 {
        pods.push(pod(&format!("small-{i}"), "10m", "400M", "nodeSelector: {kubernetes.io/arch: amd64}"));
    }
    let its = vec![
        fake::instance_type("small-instance-type", 2, Quantity::from_gibibytes(2), 5, "amd64"),
        fake::instance_type("default-instance-type", 4, Quantity::from_gibibytes(4), 5, "amd64"),
    ];
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], its, pods));
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(r.nodeclaims.len(), 20);
    for nc in &r.nodeclaims {
        assert_eq!(nc.pods.len(), 3);
        assert_eq!(nc.launch.as_ref().unwrap().instance_type, "default-instance-type");
    }
}

#[test]
fn equal_weights_by_name_descending_and_weight_first() {
    let np = |name: &str, weight: Option<i32>| {
        let extra = weight.map(|w| format!("weight: {w}\n")).unwrap_or_default();
        nodepool(&np_spec("", &extra), name)
    };
    let r = schedule(&input(vec![np("a", None), np("b", None)], small_types(), vec![pod("p", "1", "1Gi", "")]));
    assert_eq!(r.nodeclaims[0].nodepool, "b");
    let r = schedule(&input(
        vec![np("a", None), np("b", Some(20)), np("c", Some(100))],
        small_types(),
        vec![pod("p", "1", "1Gi", ""), pod("q", "1", "1Gi", "nodeSelector: {karpenter.sh/nodepool: a}")],
    ));
    let by_pod: Vec<(&str, &str)> =
        r.nodeclaims.iter().flat_map(|n| n.pods.iter().map(move |p| (p.name.as_str(), n.nodepool.as_str()))).collect();
    assert!(by_pod.contains(&("p", "c")) && by_pod.contains(&("q", "a")), "{by_pod:?}");
}

#[test]
fn taints_need_tolerations_and_explain_the_fix() {
    let tainted = nodepool(&np_spec("taints: [{key: workload, value: batch, effect: NoSchedule}]", ""), "batch");
    let r = schedule(&input(vec![tainted.clone()], small_types(), vec![pod("p", "1", "1Gi", "")]));
    assert_eq!(r.unschedulable.len(), 1);
    let e = &r.unschedulable[0].explanation;
    assert!(matches!(e.nodepools[0].failure, NodePoolFailure::Taint { .. }));
    assert!(e.headline().contains("add a toleration for workload=batch:NoSchedule"), "{}", e.headline());
    let tolerating = "tolerations: [{key: workload, operator: Equal, value: batch, effect: NoSchedule}]";
    let r = schedule(&input(vec![tainted], small_types(), vec![pod("p", "1", "1Gi", tolerating)]));
    assert_eq!(r.nodeclaims.len(), 1);
    assert_eq!(r.nodeclaims[0].taints.len(), 1);
}

#[test]
fn p9_prefer_no_schedule_is_hard_until_relaxed() {
    let pns = nodepool(&np_spec("taints: [{key: x, effect: PreferNoSchedule}]", ""), "pns");
    let r = schedule(&input(vec![pns.clone()], small_types(), vec![pod("p", "1", "1Gi", "")]));
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
    // With an untainted NodePool too, the untainted one is used (before relaxation).
    let plain = nodepool(&np_spec("", ""), "a-plain");
    let r = schedule(&input(vec![pns, plain], small_types(), vec![pod("p", "1", "1Gi", "")]));
    assert_eq!(r.nodeclaims[0].nodepool, "a-plain");
}

#[test]
fn p6_undefined_custom_label() {
    let np = nodepool(&np_spec("", ""), "default");
    let r = schedule(&input(vec![np.clone()], small_types(), vec![pod("p", "1", "1Gi", "nodeSelector: {team: a}")]));
    let e = &r.unschedulable[0].explanation;
    match &e.nodepools[0].failure {
        NodePoolFailure::Requirements(c) => {
            assert_eq!(c.key, "team");
            assert!(c.node.is_none());
        }
        other => panic!("{other:?}"),
    }
    assert!(e.headline().contains("define team in the NodePool"), "{}", e.headline());
    let not_in = "affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchExpressions: [{key: team, operator: NotIn, values: [a]}]";
    let r = schedule(&input(vec![np], small_types(), vec![pod("p", "1", "1Gi", not_in)]));
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
}

#[test]
fn p5_hostname_selector_is_ignored() {
    let r = schedule(&input(
        vec![nodepool(&np_spec("", ""), "default")],
        small_types(),
        vec![pod("p", "1", "1Gi", "nodeSelector: {kubernetes.io/hostname: x}")],
    ));
    assert_eq!(r.ignored.len(), 1);
    assert!(r.nodeclaims.is_empty());
}

#[test]
fn p7_required_terms_relax_in_order() {
    let aff = "affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [invalid]}]\n      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [invalid]}]\n      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]\n      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}]";
    let r =
        schedule(&input(vec![nodepool(&np_spec("", ""), "default")], small_types(), vec![pod("p", "1", "1Gi", aff)]));
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
    assert_eq!(r.nodeclaims[0].launch.as_ref().unwrap().zone, "test-zone-1");
}

#[test]
fn p8_heaviest_satisfiable_preference_wins() {
    let aff = "affinity:\n  nodeAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - weight: 100\n      preference: {matchExpressions: [{key: node.kubernetes.io/instance-type, operator: In, values: [test-zone-3]}]}\n    - weight: 50\n      preference: {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}]}\n    - weight: 1\n      preference: {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]}";
    let np = nodepool(
        &np_spec(
            "requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-2]}]",
            "",
        ),
        "default",
    );
    let r = schedule(&input(vec![np], small_types(), vec![pod("p", "1", "1Gi", aff)]));
    assert_eq!(r.nodeclaims[0].launch.as_ref().unwrap().zone, "test-zone-2", "{r:#?}");
    assert_eq!(r.relaxed[0].relaxations, [super::explain::Relaxation::DroppedPreferredNodeAffinity { weight: 100 }]);
}

#[test]
fn p12_limits_use_capacity() {
    let np = |limit: &str| nodepool(&np_spec("", &format!("limits: {{cpu: \"{limit}\"}}\n")), "default");
    let r = schedule(&input(vec![np("2")], small_types(), vec![pod("p", "2.1", "1Gi", "")]));
    assert_eq!(r.unschedulable.len(), 1);
    let r = schedule(&input(vec![np("2")], small_types(), vec![pod("p", "1.75", "1Gi", "")]));
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
    // In the same round, the first NodeClaim used up the limit (max capacity over its options).
    let r =
        schedule(&input(vec![np("2")], small_types(), vec![pod("p", "1.75", "1Gi", ""), pod("q", "1.75", "1Gi", "")]));
    assert_eq!(r.nodeclaims.len(), 1);
    assert_eq!(r.unschedulable.len(), 1);
    let e = &r.unschedulable[0].explanation;
    assert!(matches!(e.nodepools[0].failure, NodePoolFailure::ExceedsLimits { .. }), "{e:#?}");
    assert!(e.headline().contains("raise limits.cpu to at least 4"), "{}", e.headline());
}

#[test]
fn limits_that_exclude_every_fitting_type_are_the_reason() {
    // Types of 2, 4 and 16 vCPU; limits.cpu 4 keeps the 2- and 4-vCPU types, but only the
    // 16-vCPU type fits a 5-CPU pod: the limit is the reason, measured on that type.
    let np = nodepool(&np_spec("", "limits: {cpu: \"4\"}\n"), "default");
    let r = schedule(&input(vec![np], small_types(), vec![pod("p", "5", "1Gi", "")]));
    assert_eq!(r.unschedulable.len(), 1);
    let e = &r.unschedulable[0].explanation;
    match &e.nodepools[0].failure {
        NodePoolFailure::ExceedsLimits { resource, smallest_type, .. } => {
            assert_eq!((resource.as_str(), smallest_type.as_str()), ("cpu", "arm-instance-type"));
        }
        other => panic!("{other:#?}"),
    }
    assert!(e.headline().contains("raise limits.cpu to at least 16"), "{}", e.headline());
}

#[test]
fn planned_nodeclaims_are_named_in_topology_conflicts() {
    // Hostname anti-affinity: the second pod cannot join the first one's NodeClaim, and the
    // conflict names that NodeClaim as explanations do ("default #1"), not by an internal id.
    let anti = "labels: {app: a}\n";
    let mut p = pod("p", "1", "1Gi", "affinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: a}}}");
    let mut q = p.clone();
    q.metadata.name = Some("q".into());
    for x in [&mut p, &mut q] {
        x.metadata.labels = Some(serde_yaml::from_str(anti.trim_start_matches("labels: ")).unwrap());
    }
    let np = nodepool(&np_spec("", "limits: {cpu: \"4\"}\n"), "default");
    let its = vec![fake::instance_type("only", 4, Quantity::from_gibibytes(4), 5, "amd64")];
    let r = schedule(&input(vec![np], its, vec![p, q]));
    assert_eq!(r.unschedulable.len(), 1, "{r:#?}");
    let e = &r.unschedulable[0].explanation;
    let group = &e.planned_nodeclaims[0];
    assert_eq!(group.examples, vec!["default #1".to_string()]);
    match &group.rejection {
        NodeRejection::Topology(c) => {
            assert_eq!(c.node_domains, "kubernetes.io/hostname In [default #1]");
            assert_eq!(c.counts.get("default #1"), Some(&1));
        }
        other => panic!("{other:#?}"),
    }
}

#[test]
fn limits_nodes_not_decremented_within_a_round() {
    // limits.nodes counts existing nodes only; one round may exceed it.
    let np = nodepool(&np_spec("", "limits: {nodes: \"1\"}\n"), "default");
    let pods = (0..3).map(|i| pod(&format!("p{i}"), "1.5", "1Gi", "")).collect();
    let its = vec![fake::instance_type("small-instance-type", 2, Quantity::from_gibibytes(2), 5, "amd64")];
    let r = schedule(&input(vec![np], its, pods));
    assert_eq!(r.nodeclaims.len(), 3, "{r:#?}");
}

#[test]
fn p14_host_ports_conflict() {
    let ports = "containers:\n- name: c\n  image: x\n  resources: {requests: {cpu: 100m}}\n  ports: [{containerPort: 80, hostPort: 8080}]";
    let mk = |name: &str| -> Pod {
        serde_yaml::from_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n{}",
            indent(ports, 2)
        ))
        .unwrap()
    };
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], small_types(), vec![mk("a"), mk("b")]));
    assert_eq!(r.nodeclaims.len(), 2, "{r:#?}");
}

#[test]
fn p20_daemon_overhead_in_requests_and_type_choice() {
    let ds: k8s_openapi::api::apps::v1::DaemonSet = serde_yaml::from_str(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent, namespace: kube-system}\nspec:\n  selector: {matchLabels: {app: agent}}\n  template:\n    metadata: {labels: {app: agent}}\n    spec:\n      containers: [{name: a, image: x, resources: {requests: {cpu: \"1\"}}}]",
    )
    .unwrap();
    let mut i = input(vec![nodepool(&np_spec("", ""), "default")], small_types(), vec![pod("p", "1", "1Gi", "")]);
    i.daemonsets = vec![ds.clone()];
    let r = schedule(&i);
    let nc = &r.nodeclaims[0];
    assert_eq!(nc.requests.get("cpu"), Some(&Quantity::from_units(2)), "{nc:#?}");
    assert_eq!(nc.requests.get("pods"), Some(&Quantity::from_units(2)));
    // 1 + 1 CPU does not fit the 2-vCPU type (1.9 allocatable).
    assert_eq!(nc.launch.as_ref().unwrap().instance_type, "default-instance-type");
    // A DaemonSet that does not tolerate the NodePool's taint adds nothing.
    let tainted = nodepool(&np_spec("taints: [{key: t, effect: NoSchedule}]", ""), "default");
    let mut i =
        input(vec![tainted], small_types(), vec![pod("p", "1", "1Gi", "tolerations: [{key: t, operator: Exists}]")]);
    i.daemonsets = vec![ds];
    let r = schedule(&i);
    assert_eq!(r.nodeclaims[0].requests.get("cpu"), Some(&Quantity::from_units(1)));
}

#[test]
fn p16_min_values_strict_and_best_effort() {
    let its = vec![
        fake::instance_type("it1", 1, Quantity::from_gibibytes(1), 5, "amd64"),
        fake::instance_type("it2", 2, Quantity::from_gibibytes(2), 5, "amd64"),
    ];
    let np = nodepool(
        &np_spec(
            "requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [it1, it2], minValues: 2}]",
            "",
        ),
        "default",
    );
    let pods = vec![pod("a", "0.9", "0.9Gi", ""), pod("b", "0.9", "0.9Gi", "")];
    let r = schedule(&input(vec![np.clone()], its.clone(), pods.clone()));
    assert_eq!(r.nodeclaims.len(), 2, "{r:#?}");
    assert!(r.nodeclaims.iter().all(|n| n.instance_type_options.len() == 2));
    let mut i = input(vec![np.clone()], its.clone(), pods.clone());
    i.options.max_instance_types = 1;
    let r = schedule(&i);
    assert_eq!(r.unschedulable.len(), 2, "{r:#?}");
    assert!(matches!(
        r.unschedulable[0].explanation.nodepools[0].failure,
        NodePoolFailure::MinValuesAfterTruncation { .. }
    ));
    // BestEffort: truncation below minValues is allowed (upstream `Truncate` only validates under
    // Strict). The second pod does not join the first NodeClaim (that would narrow it to it2 and
    // minValues is checked strictly on NodeClaims planned earlier in the round), so each pod keeps
    // its own NodeClaim, truncated to one type.
    i.options.min_values_policy = MinValuesPolicy::BestEffort;
    let r = schedule(&i);
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(r.nodeclaims.len(), 2);
    assert!(r.nodeclaims.iter().all(|n| n.instance_type_options.len() == 1 && !n.min_values_relaxed));
    // A pod that only it2 fits opens a NodeClaim with minValues relaxed to 1 (annotated); a small
    // pod then joins it, checked against the relaxed minValues.
    let pods = vec![pod("big", "1.5", "0.5Gi", ""), pod("small", "0.2", "0.2Gi", "")];
    let mut i = input(vec![np.clone()], its.clone(), pods);
    let r = schedule(&i);
    assert_eq!(r.unschedulable.len(), 1, "Strict: {r:#?}");
    assert_eq!(r.unschedulable[0].pod.name, "big");
    i.options.min_values_policy = MinValuesPolicy::BestEffort;
    let r = schedule(&i);
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(r.nodeclaims.len(), 1);
    assert!(r.nodeclaims[0].min_values_relaxed);
    assert_eq!(r.nodeclaims[0].instance_type_options, ["it2"]);
}

fn node(name: &str, labels: &str, cpu: &str, taints: &str) -> Node {
    serde_yaml::from_str(&format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\nspec: {{providerID: \"aws:///test/{name}\", taints: [{taints}]}}\nstatus:\n  allocatable: {{cpu: \"{cpu}\", memory: 16Gi, pods: \"110\"}}\n  capacity: {{cpu: \"{cpu}\", memory: 16Gi, pods: \"110\"}}"
    ))
    .unwrap()
}

#[test]
fn existing_nodes_first_and_grouped_rejections() {
    let np = nodepool(&np_spec("", ""), "default");
    let mut i = input(vec![np], small_types(), vec![pod("p", "1", "1Gi", ""), pod("big", "3", "1Gi", "")]);
    i.nodes = vec![
        node("n-b", "kubernetes.io/arch: amd64", "2", ""),
        node("n-a", "kubernetes.io/arch: amd64", "2", "{key: dedicated, value: critical, effect: NoSchedule}"),
    ];
    let r = schedule(&i);
    assert_eq!(r.existing_nodes.len(), 1);
    assert_eq!(r.existing_nodes[0].name, "n-b");
    assert_eq!(r.existing_nodes[0].pods[0].name, "p");
    // "big" (3 CPU) goes to a new NodeClaim.
    assert_eq!(r.nodeclaims.len(), 1);
    assert_eq!(placed(&r), 2);
}

#[test]
fn unschedulable_explains_nodes_and_funnel() {
    let np =
        nodepool(&np_spec("requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]", ""), "default");
    let mut i = input(vec![np], small_types(), vec![pod("huge", "96", "1Gi", "")]);
    i.nodes =
        vec![node("n-1", "", "2", ""), node("n-2", "", "2", ""), node("n-3", "", "2", "{key: d, effect: NoSchedule}")];
    let r = schedule(&i);
    assert_eq!(r.unschedulable.len(), 1);
    let e = &r.unschedulable[0].explanation;
    assert_eq!(e.existing_nodes.len(), 2);
    assert_eq!(e.existing_nodes[0].count, 2);
    assert!(matches!(e.existing_nodes[0].rejection, NodeRejection::Resources { .. }));
    match &e.nodepools[0].failure {
        NodePoolFailure::InstanceTypes(f) => {
            assert_eq!(f.allowed, 2);
            assert_eq!(f.requirements, 2);
            assert_eq!(f.resources, 0);
            let s = f.shortfall.as_ref().unwrap();
            assert_eq!(s.resource, "cpu");
            assert_eq!(s.largest_type, "default-instance-type");
            assert_eq!(f.cheapest_lost[0].instance_type, "small-instance-type");
            assert_eq!((f.cheapest_lost[0].stage, f.cheapest_lost[0].detail.as_deref()), ("resources", Some("cpu")));
        }
        other => panic!("{other:?}"),
    }
    let text = super::explain::render_unschedulable(&r.unschedulable[0]);
    assert!(text.contains("2 nodes: insufficient cpu (needs 96, most free 2)"), "{text}");
    assert!(text.contains("1 node: taint d:NoSchedule not tolerated"), "{text}");
    assert!(text.contains("largest, default-instance-type, offers 3900m"), "{text}");
}

#[test]
fn unavailable_offerings_move_the_launch() {
    let np = nodepool(
        &np_spec("requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]", ""),
        "default",
    );
    let mut i = input(vec![np], small_types(), vec![pod("p", "1", "1Gi", "")]);
    i.unavailable_offerings = ["test-zone-1", "test-zone-2"]
        .iter()
        .map(|z| UnavailableOffering {
            instance_type: "small-instance-type".into(),
            zone: z.to_string(),
            capacity_type: "spot".into(),
        })
        .collect();
    let r = schedule(&i);
    assert_eq!(r.nodeclaims[0].instance_type_options[0], "default-instance-type");
    assert_eq!(r.nodeclaims[0].launch.as_ref().unwrap().capacity_type, "spot");
}

#[test]
fn in_flight_claims_fewest_pods_first() {
    // Two NodeClaims created by big pods, then small pods spread: fewest pods first.
    let np = nodepool(&np_spec("", ""), "default");
    let pods = vec![
        pod("big-1", "3", "1Gi", ""),
        pod("big-2", "3", "1Gi", ""),
        pod("s-1", "100m", "100Mi", ""),
        pod("s-2", "100m", "100Mi", ""),
    ];
    let its = vec![fake::instance_type("default-instance-type", 4, Quantity::from_gibibytes(4), 5, "amd64")];
    let r = schedule(&input(vec![np], its, pods));
    assert_eq!(r.nodeclaims.len(), 2);
    assert_eq!(r.nodeclaims[0].pods.len(), 2);
    assert_eq!(r.nodeclaims[1].pods.len(), 2);
}

#[test]
fn uninitialized_nodes_ignore_startup_and_ephemeral_taints() {
    let np = nodepool(&np_spec("", ""), "default");
    let labels = "karpenter.sh/nodepool: default, karpenter.sh/registered: \"true\"";
    let taints = "{key: node.kubernetes.io/not-ready, effect: NoSchedule}, {key: agent, effect: NoSchedule}";
    let mut i = input(vec![np.clone()], small_types(), vec![pod("p", "1", "1Gi", "")]);
    i.nodes = vec![node("starting", labels, "4", taints)];
    i.nodes[0].spec.as_mut().unwrap().provider_id = Some("aws:///z/i-1".into());
    let claim: crate::api::nodeclaim::NodeClaim = serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: default-x}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n  requirements: []\n  startupTaints: [{key: agent, effect: NoSchedule}]\nstatus: {providerID: \"aws:///z/i-1\", nodeName: starting}",
    )
    .unwrap();
    i.nodeclaims = vec![claim];
    let r = schedule(&i);
    assert_eq!(r.existing_nodes.len(), 1, "{r:#?}");
    // Once initialized, the same taints are real.
    let labels = format!("{labels}, karpenter.sh/initialized: \"true\"");
    i.nodes = vec![node("started", &labels, "4", taints)];
    let r = schedule(&i);
    assert!(r.existing_nodes.is_empty());
    assert_eq!(r.nodeclaims.len(), 1);
}

#[test]
fn existing_node_daemon_overhead_is_reserved() {
    let ds: k8s_openapi::api::apps::v1::DaemonSet = serde_yaml::from_str(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent, namespace: kube-system}\nspec:\n  selector: {matchLabels: {app: agent}}\n  template:\n    metadata: {labels: {app: agent}}\n    spec:\n      containers: [{name: a, image: x, resources: {requests: {cpu: \"1\"}}}]",
    )
    .unwrap();
    let np = nodepool(&np_spec("", ""), "default");
    let mut i = input(vec![np], small_types(), vec![pod("p", "1.5", "1Gi", "")]);
    i.nodes = vec![node("n", "", "2", "")];
    i.daemonsets = vec![ds];
    // 2 CPU − 1 CPU of the daemon not yet running: the 1.5-CPU pod does not fit.
    let r = schedule(&i);
    assert!(r.existing_nodes.is_empty(), "{r:#?}");
    // With the daemon pod already running there (and counted as bound), the same holds.
    let mut running = pod("agent-x", "1", "0", "nodeName: n");
    running.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "apps/v1".into(),
        kind: "DaemonSet".into(),
        name: "agent".into(),
        uid: "u".into(),
        ..Default::default()
    }]);
    i.pods.push(running);
    let r = schedule(&i);
    assert!(r.existing_nodes.is_empty());
    // Without DaemonSets the pod fits.
    i.daemonsets.clear();
    i.pods.pop();
    assert_eq!(schedule(&i).existing_nodes.len(), 1);
}

#[test]
fn pods_of_deleting_nodes_are_rescheduled_unless_blocked() {
    let np = nodepool(&np_spec("", ""), "default");
    let mut i = input(vec![np], small_types(), Vec::new());
    let mut n = node("old", "", "4", "");
    n.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
    i.nodes = vec![n];
    let mut protected = pod("protected", "1", "1Gi", "nodeName: old");
    protected.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
    let mut pinned = pod("pinned", "1", "1Gi", "nodeName: old");
    pinned.metadata.annotations = Some([("karpenter.sh/do-not-disrupt".to_string(), "true".to_string())].into());
    i.pods = vec![pod("movable", "1", "1Gi", "nodeName: old"), protected, pinned];
    i.pdbs = vec![serde_yaml::from_str(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: db, namespace: default}\nspec: {maxUnavailable: 0, selector: {matchLabels: {app: db}}}",
    )
    .unwrap()];
    let r = schedule(&i);
    let moved: Vec<&str> = r.nodeclaims.iter().flat_map(|n| n.pods.iter().map(|p| p.name.as_str())).collect();
    assert_eq!(moved, ["movable"], "{r:#?}");

    // A do-not-disrupt duration runs from the pod's start: without a clock it counts as active;
    // with one, the pod moves once it has lapsed.
    let t0 = crate::api::time::parse_time("2026-12-01T10:00:00Z").unwrap();
    let mut timed = pod("timed", "1", "1Gi", "nodeName: old");
    timed.metadata.annotations = Some([("karpenter.sh/do-not-disrupt".to_string(), "10m".to_string())].into());
    timed.status.get_or_insert_with(Default::default).start_time = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::from_second(t0).unwrap()),
    );
    i.pods = vec![timed];
    let moved = |i: &Input| schedule(i).nodeclaims.iter().map(|n| n.pods.len()).sum::<usize>();
    assert_eq!(moved(&i), 0, "no clock");
    i.options.now = Some(t0 + 599);
    assert_eq!(moved(&i), 0, "protected for 10 minutes");
    i.options.now = Some(t0 + 600);
    assert_eq!(moved(&i), 1, "lapsed");
}

#[test]
fn a_node_the_disruption_queue_tainted_is_deleting() {
    // upstream: the queue taints karpenter.sh/disrupted:NoSchedule and marks the node for deletion
    // together; its pods are provisioned for elsewhere.
    let np = nodepool(&np_spec("", ""), "default");
    let mut i = input(vec![np], small_types(), vec![pod("moving", "1", "1Gi", "nodeName: old")]);
    let mut n = node("old", "", "4", "");
    n.spec.get_or_insert_with(Default::default).taints = Some(vec![k8s_openapi::api::core::v1::Taint {
        key: "karpenter.sh/disrupted".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    i.nodes = vec![n];
    let r = schedule(&i);
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
    assert_eq!(r.nodeclaims[0].pods[0].name, "moving");
}

#[test]
fn existing_required_anti_affinity_keeps_selected_pods_out() {
    // Inverse anti-affinity: the bound `owner` keeps pods labelled app=web off its host.
    let np = nodepool(&np_spec("", ""), "default");
    let anti = "nodeName: n\naffinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}";
    let web = labeled(pod("web", "100m", "100Mi", ""), &[("app", "web")]);
    let mut i = input(
        vec![np],
        small_types(),
        vec![pod("owner", "100m", "100Mi", anti), web, pod("other", "100m", "100Mi", "")],
    );
    i.nodes = vec![node("n", "", "4", "")];
    let r = schedule(&i);
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    let on_node: Vec<&str> = r.existing_nodes[0].pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(on_node, ["other"]);
    assert_eq!(r.nodeclaims.len(), 1);
    assert_eq!(r.nodeclaims[0].pods[0].name, "web");
}

fn labeled(mut p: Pod, labels: &[(&str, &str)]) -> Pod {
    p.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    p
}

fn zone_counts(r: &Results) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for nc in &r.nodeclaims {
        *out.entry(nc.launch.as_ref().unwrap().zone.clone()).or_insert(0) += nc.pods.len();
    }
    out
}

fn spread(key: &str, max_skew: u32, when: &str, app: &str) -> String {
    format!(
        "topologySpreadConstraints: [{{maxSkew: {max_skew}, topologyKey: {key}, whenUnsatisfiable: {when}, labelSelector: {{matchLabels: {{app: {app}}}}}}}]"
    )
}

#[test]
fn t1_zonal_spread_over_three_zones() {
    let tsc = spread("topology.kubernetes.io/zone", 1, "DoNotSchedule", "s");
    let pods = (0..4).map(|i| labeled(pod(&format!("p{i}"), "100m", "100Mi", &tsc), &[("app", "s")])).collect();
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], small_types(), pods));
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    let mut counts: Vec<usize> = zone_counts(&r).into_values().collect();
    counts.sort_unstable();
    assert_eq!(counts, [1, 1, 2]);
    // Every NodeClaim is pinned to one zone.
    for nc in &r.nodeclaims {
        let zone = nc.requirements.iter().find(|q| q.key == "topology.kubernetes.io/zone").unwrap();
        assert_eq!(zone.values.len(), 1, "{zone:?}");
    }
}

#[test]
fn t2_existing_pods_count_and_restrict_the_skew() {
    // NodePool restricted to zones 2 and 3; zone 1 holds one matching pod on an existing node
    // that is full: 10 pods → zone 2 and zone 3 get 2 each, 6 fail.
    let reqs = "requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2, test-zone-3]}]";
    let tsc = spread("topology.kubernetes.io/zone", 1, "DoNotSchedule", "s");
    let mut pods: Vec<Pod> =
        (0..10).map(|i| labeled(pod(&format!("p{i}"), "100m", "100Mi", &tsc), &[("app", "s")])).collect();
    pods.push(labeled(pod("old", "100m", "100Mi", "nodeName: n1"), &[("app", "s")]));
    let mut i = input(vec![nodepool(&np_spec(reqs, ""), "default")], small_types(), pods);
    i.nodes = vec![node("n1", "topology.kubernetes.io/zone: test-zone-1", "100m", "")];
    let r = schedule(&i);
    assert_eq!(r.unschedulable.len(), 6, "{r:#?}");
    let counts = zone_counts(&r);
    assert_eq!(counts.get("test-zone-2"), Some(&2));
    assert_eq!(counts.get("test-zone-3"), Some(&2));
    let why = r.unschedulable[0].explanation.headline();
    assert!(why.contains("unsatisfiable topology spread on topology.kubernetes.io/zone"), "{why}");
    // When the zone-1 pod does not match, zone 1 is still a domain (discovered from the node)
    // with 0 pods: the global minimum is 0, so zones 2 and 3 take one pod each.
    i.pods.last_mut().unwrap().metadata.labels = None;
    let r = schedule(&i);
    assert_eq!(r.unschedulable.len(), 8, "{r:#?}");
}

#[test]
fn t4_min_domains_forces_the_minimum_to_zero() {
    let reqs = "requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-2]}]";
    let tsc = "topologySpreadConstraints: [{maxSkew: 1, minDomains: 3, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: s}}}]";
    let pods = (0..3).map(|i| labeled(pod(&format!("p{i}"), "100m", "100Mi", tsc), &[("app", "s")])).collect();
    let r = schedule(&input(vec![nodepool(&np_spec(reqs, ""), "default")], small_types(), pods));
    assert_eq!(r.unschedulable.len(), 1, "{r:#?}");
    assert_eq!(zone_counts(&r).into_values().collect::<Vec<_>>(), [1, 1]);
}

#[test]
fn t5_hostname_spread() {
    for (skew, nodeclaims) in [(1, 4), (4, 1)] {
        let tsc = spread("kubernetes.io/hostname", skew, "DoNotSchedule", "s");
        let pods = (0..4).map(|i| labeled(pod(&format!("p{i}"), "100m", "100Mi", &tsc), &[("app", "s")])).collect();
        let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], small_types(), pods));
        assert!(r.unschedulable.is_empty(), "{r:#?}");
        assert_eq!(r.nodeclaims.len(), nodeclaims, "maxSkew {skew}");
    }
}

#[test]
fn t6_self_affinity_on_hostname_fills_the_first_node_only() {
    let aff = "affinity:\n  podAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: a}}}";
    let pods = (0..10).map(|i| labeled(pod(&format!("p{i}"), "100m", "100Mi", aff), &[("app", "a")])).collect();
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], small_types(), pods));
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
    assert_eq!(r.nodeclaims[0].pods.len(), 5);
    assert_eq!(r.unschedulable.len(), 5);
    assert!(r.unschedulable[0].explanation.headline().contains("pod affinity"), "{r:#?}");
}

#[test]
fn zonal_affinity_follows_the_target() {
    // A pod with required zonal affinity to app=db lands in the zone of the existing db pod.
    let aff = "affinity:\n  podAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: db}}}";
    let db = labeled(pod("db", "100m", "100Mi", "nodeName: n"), &[("app", "db")]);
    let mut i =
        input(vec![nodepool(&np_spec("", ""), "default")], small_types(), vec![db, pod("web", "1", "1Gi", aff)]);
    i.nodes = vec![node("n", "topology.kubernetes.io/zone: test-zone-2", "200m", "")];
    let r = schedule(&i);
    assert_eq!(zone_counts(&r).into_keys().collect::<Vec<_>>(), ["test-zone-2"], "{r:#?}");
}

#[test]
fn t7_schrodinger_anti_affinity_blocks_every_possible_zone() {
    let anti = "affinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: b}}}";
    let a = pod("a", "2", "1Gi", anti);
    let b = labeled(pod("b", "100m", "100Mi", ""), &[("app", "b")]);
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], small_types(), vec![a, b]));
    let failed: Vec<&str> = r.unschedulable.iter().map(|u| u.pod.name.as_str()).collect();
    assert_eq!(failed, ["b"], "{r:#?}");
    let why = r.unschedulable[0].explanation.headline();
    assert!(why.contains("anti-affinity of default/a"), "{why}");
    // Next round: `a` is bound in zone 1; `b` goes to another zone.
    let a = pod("a", "2", "1Gi", &format!("nodeName: n\n{anti}"));
    let b = labeled(pod("b", "100m", "100Mi", ""), &[("app", "b")]);
    let mut i = input(vec![nodepool(&np_spec("", ""), "default")], small_types(), vec![a, b]);
    i.nodes = vec![node("n", "topology.kubernetes.io/zone: test-zone-1", "4", "")];
    let r = schedule(&i);
    assert!(r.unschedulable.is_empty() && r.existing_nodes.is_empty(), "{r:#?}");
    assert_ne!(r.nodeclaims[0].launch.as_ref().unwrap().zone, "test-zone-1");
}

#[test]
fn t8_preferred_anti_affinity_is_relaxed() {
    let anti = "affinity:\n  podAntiAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - weight: 10\n      podAffinityTerm: {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: x}}}";
    let pods = (0..5).map(|i| labeled(pod(&format!("p{i}"), "100m", "100Mi", anti), &[("app", "x")])).collect();
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], small_types(), pods));
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    // The first pod's NodeClaim may still be in any zone, so anti-affinity blocks all three
    // ("Schrödinger"); every later pod drops its preference and schedules.
    assert_eq!(r.relaxed.len(), 4, "{:?}", r.relaxed);
    assert!(matches!(
        r.relaxed[0].relaxations[0],
        super::explain::Relaxation::DroppedPreferredPodAntiAffinity { weight: 10, .. }
    ));
}

#[test]
fn t9_preferred_node_affinity_does_not_narrow_spread_domains() {
    let spec = format!(
        "{}\naffinity:\n  nodeAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - weight: 1\n      preference: {{matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}}]}}",
        spread("topology.kubernetes.io/zone", 1, "DoNotSchedule", "s")
    );
    let pods = (0..3).map(|i| labeled(pod(&format!("p{i}"), "100m", "100Mi", &spec), &[("app", "s")])).collect();
    let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], small_types(), pods));
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(zone_counts(&r).into_values().collect::<Vec<_>>(), [1, 1, 1]);
}

#[test]
fn schedule_anyway_spread_is_dropped_only_when_needed() {
    // Zone 1 (the only zone of the NodePool) already holds one matching pod and zone 2 an empty
    // but full node: maxSkew 1 cannot be met in zone 1.
    let reqs = "requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]";
    for (when, placed_pods) in [("DoNotSchedule", 0), ("ScheduleAnyway", 1)] {
        let tsc = spread("topology.kubernetes.io/zone", 1, when, "s");
        let pods = vec![
            labeled(pod("new", "100m", "100Mi", &tsc), &[("app", "s")]),
            labeled(pod("old", "100m", "100Mi", "nodeName: n1"), &[("app", "s")]),
        ];
        let mut i = input(vec![nodepool(&np_spec(reqs, ""), "default")], small_types(), pods);
        i.nodes = vec![
            node("n1", "topology.kubernetes.io/zone: test-zone-1", "100m", ""),
            node("n2", "topology.kubernetes.io/zone: test-zone-2", "50m", ""),
        ];
        let r = schedule(&i);
        assert_eq!(placed(&r), placed_pods, "{when}: {r:#?}");
        if when == "ScheduleAnyway" {
            assert!(matches!(
                r.relaxed[0].relaxations[..],
                [super::explain::Relaxation::DroppedScheduleAnywaySpread { max_skew: 1, .. }]
            ));
        }
    }
}

#[test]
fn match_label_keys_split_the_spread_per_value() {
    // matchLabelKeys [version] adds `version In [<own value>]` to the selector: each version is
    // spread on its own, so two pods of different versions may share a host.
    for (keys, nodeclaims) in [("", 2), (", matchLabelKeys: [version]", 1)] {
        let tsc = format!(
            "topologySpreadConstraints: [{{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule{keys}, labelSelector: {{matchLabels: {{app: web}}}}}}]"
        );
        let pods = vec![
            labeled(pod("v1", "100m", "100Mi", &tsc), &[("app", "web"), ("version", "1")]),
            labeled(pod("v2", "100m", "100Mi", &tsc), &[("app", "web"), ("version", "2")]),
        ];
        let r = schedule(&input(vec![nodepool(&np_spec("", ""), "default")], small_types(), pods));
        assert!(r.unschedulable.is_empty(), "{r:#?}");
        assert_eq!(r.nodeclaims.len(), nodeclaims, "matchLabelKeys {keys:?}");
    }
}

#[test]
fn node_taints_policy_honor_drops_domains_of_untolerated_nodepools() {
    // Zones 1–2 from an untainted NodePool, zone 3 only from a tainted one the pods do not
    // tolerate. Ignore (default): zone 3 is a domain stuck at 0, so zones 1 and 2 take one pod
    // each and the third fails. Honor: zone 3 is not a domain and all three schedule.
    let plain = nodepool(
        &np_spec(
            "requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-2]}]",
            "",
        ),
        "plain",
    );
    let tainted = nodepool(
        &np_spec(
            "requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-3]}]\ntaints: [{key: t, effect: NoSchedule}]",
            "",
        ),
        "tainted",
    );
    for (policy, unschedulable) in [("", 1), (", nodeTaintsPolicy: Honor", 0)] {
        let tsc = format!(
            "topologySpreadConstraints: [{{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule{policy}, labelSelector: {{matchLabels: {{app: s}}}}}}]"
        );
        let pods = (0..3).map(|i| labeled(pod(&format!("p{i}"), "100m", "100Mi", &tsc), &[("app", "s")])).collect();
        let r = schedule(&input(vec![plain.clone(), tainted.clone()], small_types(), pods));
        assert_eq!(r.unschedulable.len(), unschedulable, "policy {policy:?}: {r:#?}");
    }
}

#[test]
fn topology_conflicts_are_explained() {
    let tsc = spread("kubernetes.io/hostname", 1, "DoNotSchedule", "s");
    let pods = (0..2).map(|i| labeled(pod(&format!("p{i}"), "100m", "100Mi", &tsc), &[("app", "s")])).collect();
    let np = nodepool(&np_spec("", "limits: {cpu: \"2\"}\n"), "default");
    let its = vec![fake::instance_type("small-instance-type", 2, Quantity::from_gibibytes(2), 5, "amd64")];
    let r = schedule(&input(vec![np], its, pods));
    assert_eq!(r.unschedulable.len(), 1, "{r:#?}");
    let text = super::explain::render_unschedulable(&r.unschedulable[0]);
    // The planned NodeClaim is rejected by the spread; the NodePool by its cpu limit.
    assert!(text.contains("1 node: unsatisfiable topology spread on kubernetes.io/hostname, maxSkew 1"), "{text}");
    assert!(text.contains("limits.cpu"), "{text}");
}

#[test]
fn relaxation_order_is_upstreams() {
    use super::explain::Relaxation;
    use super::pod::{PodData, Preferences};
    let spec = "affinity:\n  nodeAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - {weight: 5, preference: {matchExpressions: [{key: a, operator: In, values: [b]}]}}\n  podAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - {weight: 1, podAffinityTerm: {topologyKey: kubernetes.io/hostname}}\n    - {weight: 9, podAffinityTerm: {topologyKey: topology.kubernetes.io/zone}}\n  podAntiAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - {weight: 3, podAffinityTerm: {topologyKey: kubernetes.io/hostname}}\ntopologySpreadConstraints:\n- {maxSkew: 1, topologyKey: a, whenUnsatisfiable: ScheduleAnyway}\n- {maxSkew: 2, topologyKey: b, whenUnsatisfiable: DoNotSchedule}\n- {maxSkew: 3, topologyKey: c, whenUnsatisfiable: ScheduleAnyway}";
    let data = PodData::read(&pod("p", "1", "1Gi", spec)).unwrap();
    let mut prefs = Preferences::default();
    let mut steps = Vec::new();
    while let Some(r) = prefs.relax(&data, true) {
        steps.push(r);
    }
    let text: Vec<String> = steps.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "dropped the preferred pod-affinity term of weight 9 (on topology.kubernetes.io/zone)",
            "dropped the preferred pod-affinity term of weight 1 (on kubernetes.io/hostname)",
            "dropped the preferred pod-anti-affinity term of weight 3 (on kubernetes.io/hostname)",
            "dropped the preferred node-affinity term of weight 5",
            "dropped the ScheduleAnyway topology spread on a (maxSkew 1)",
            "dropped the ScheduleAnyway topology spread on c (maxSkew 3)",
            "tolerated PreferNoSchedule taints",
        ]
    );
    assert!(matches!(steps[4], Relaxation::DroppedScheduleAnywaySpread { .. }));
    // Upstream moves the last constraint into the dropped one's place: c then b remain.
    let mut prefs = Preferences::default();
    for _ in 0..5 {
        prefs.relax(&data, false);
    }
    assert_eq!(prefs.active_spreads(3), [2, 1]);
}

#[test]
fn p15_nodeclaim_labels_and_requirements() {
    let reqs = "requirements:\n- {key: test-key-2, operator: In, values: [two]}\n- {key: test-key-3, operator: NotIn, values: [x]}\n- {key: test-key-4, operator: Lt, values: [\"4\"]}\n- {key: test-key-5, operator: Gt, values: [\"5\"]}\n- {key: test-key-6, operator: Exists}\n- {key: test-key-7, operator: DoesNotExist}";
    let np = nodepool(
        &format!("template:\n  metadata:\n    labels: {{test-key-1: one}}\n  spec:\n    nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n{}", indent(reqs, 4)),
        "default",
    );
    let r = schedule(&input(vec![np], small_types(), vec![pod("p", "100m", "100Mi", "")]));
    let labels = &r.nodeclaims[0].labels;
    assert_eq!(labels.get("test-key-1").map(String::as_str), Some("one"));
    assert_eq!(labels.get("test-key-2").map(String::as_str), Some("two"));
    for key in ["test-key-3", "test-key-4", "test-key-5", "test-key-6"] {
        assert!(labels.contains_key(key), "{key} missing from {labels:?}");
    }
    let four: i64 = labels["test-key-4"].parse().unwrap();
    let five: i64 = labels["test-key-5"].parse().unwrap();
    assert!(four < 4 && five > 5);
    assert!(!labels.contains_key("test-key-7"));
    assert_eq!(labels.get("karpenter.k8s.aws/ec2nodeclass").map(String::as_str), Some("default"));
    let it = r.nodeclaims[0].requirements.iter().find(|r| r.key == "node.kubernetes.io/instance-type").unwrap();
    // The requirement is a set (printed sorted); the options carry the price order.
    let mut options = r.nodeclaims[0].instance_type_options.clone();
    options.sort();
    assert_eq!(it.values, options);
}

#[test]
fn failed_pods_list_the_relaxations_tried() {
    let aff = "affinity:\n  nodeAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - weight: 10\n      preference: {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]}";
    let r =
        schedule(&input(vec![nodepool(&np_spec("", ""), "default")], small_types(), vec![pod("p", "64", "1Gi", aff)]));
    let e = &r.unschedulable[0].explanation;
    assert_eq!(e.relaxations, [super::explain::Relaxation::DroppedPreferredNodeAffinity { weight: 10 }]);
    assert!(super::explain::render_unschedulable(&r.unschedulable[0])
        .contains("relaxed: dropped the preferred node-affinity term of weight 10"));
}

mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::resources;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Placements respect resources, taints, requirements and limits; same input, same output.
        #[test]
        fn placements_are_valid_and_deterministic(
            specs in proptest::collection::vec((1u32..4000, 64u32..8192, 0u8..4), 1..40),
            limit in 4u32..64,
            memory_limit in 8u32..256,
        ) {
            // amd64 types fake-it-0..19 and arm64 types arm-0..9.
            let catalogue = || {
                let mut its = fake::instance_types(20);
                its.extend((0..10i64).map(|i| {
                    fake::instance_type(&format!("arm-{i}"), i + 1, Quantity::from_gibibytes(2 * (i + 1)), 10 * (i + 1), "arm64")
                }));
                its
            };
            let pods: Vec<Pod> = specs.iter().enumerate().map(|(i, (cpu, mem, kind))| {
                let extra = match kind {
                    0 => "",
                    1 => "nodeSelector: {kubernetes.io/arch: arm64}",
                    2 => "tolerations: [{key: workload, operator: Exists}]",
                    _ => "nodeSelector: {karpenter.sh/capacity-type: on-demand}",
                };
                pod(&format!("p{i}"), &format!("{cpu}m"), &format!("{mem}Mi"), extra)
            }).collect();
            let plain = nodepool(&np_spec("", &format!("limits: {{cpu: \"{limit}\", memory: {memory_limit}Gi}}\n")), "plain");
            let tainted = nodepool(&np_spec("taints: [{key: workload, effect: NoSchedule}]", ""), "tainted");
            let mut i = input(vec![plain, tainted], catalogue(), pods.clone());
            i.nodes = vec![
                node("n-plain", "kubernetes.io/arch: amd64", "3", ""),
                node("n-tainted", "kubernetes.io/arch: amd64", "3", "{key: workload, effect: NoSchedule}"),
            ];
            let r = schedule(&i);
            for placement in &r.existing_nodes {
                let mut used = resources::ResourceList::new();
                for p in &placement.pods {
                    let idx: usize = p.name[1..].parse().unwrap();
                    let kind = specs[idx].2;
                    prop_assert!(kind != 1 && kind != 3, "pod {} of kind {} on an existing node", p, kind);
                    if placement.name == "n-tainted" {
                        prop_assert_eq!(kind, 2);
                    }
                    resources::add_into(&mut used, &crate::resources::pod_requests(&pods[idx]).unwrap());
                }
                prop_assert!(used["cpu"] <= Quantity::from_units(3) && used["pods"] <= Quantity::from_units(110));
                prop_assert!(used["memory"] <= Quantity::from_gibibytes(16));
            }
            prop_assert_eq!(&r, &schedule(&i));
            prop_assert_eq!(placed(&r) + r.unschedulable.len(), pods.len());
            let (mut plain_cpu, mut plain_memory) = (Quantity::ZERO, Quantity::ZERO);
            let types = catalogue();
            for nc in &r.nodeclaims {
                let launch = nc.launch.as_ref().expect("a launch");
                let it = types.iter().find(|t| t.name == launch.instance_type).unwrap();
                prop_assert!(resources::fits(&nc.requests, it.allocatable()));
                if nc.nodepool == "plain" {
                    plain_cpu += it.capacity["cpu"];
                    plain_memory += it.capacity["memory"];
                }
                for p in &nc.pods {
                    let idx: usize = p.name[1..].parse().unwrap();
                    let kind = specs[idx].2;
                    if nc.nodepool == "tainted" {
                        prop_assert_eq!(kind, 2, "untolerating pod on tainted pool");
                    }
                    if kind == 1 {
                        prop_assert!(launch.instance_type.starts_with("arm-"), "arm64 pod on {}", launch.instance_type);
                    }
                    if kind == 3 {
                        prop_assert_eq!(&launch.capacity_type, "on-demand");
                    }
                }
            }
            prop_assert!(plain_cpu <= Quantity::from_units(limit as i64), "limit exceeded: {} > {}", plain_cpu, limit);
            prop_assert!(plain_memory <= Quantity::from_gibibytes(memory_limit as i64), "memory limit exceeded: {}", plain_memory);
        }

        /// Placements respect every DoNotSchedule spread's maxSkew (zone and hostname) and
        /// required hostname anti-affinity; same input, same output.
        #[test]
        fn placements_respect_spread_and_anti_affinity(
            specs in proptest::collection::vec((0u8..6, 1u32..3000), 1..40),
        ) {
            // kind 0: generic; 1: zonal spread maxSkew 1 (app=z1); 2: zonal spread maxSkew 2
            // (app=z2); 3: hostname anti-affinity (app=anti); 4: hostname spread maxSkew 2 (app=h);
            // 5: zonal anti-affinity (app=za).
            let pods: Vec<Pod> = specs.iter().enumerate().map(|(i, (kind, cpu))| {
                let (extra, app) = match kind {
                    1 => (spread("topology.kubernetes.io/zone", 1, "DoNotSchedule", "z1"), "z1"),
                    2 => (spread("topology.kubernetes.io/zone", 2, "DoNotSchedule", "z2"), "z2"),
                    3 => ("affinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: anti}}}".to_string(), "anti"),
                    4 => (spread("kubernetes.io/hostname", 2, "DoNotSchedule", "h"), "h"),
                    5 => ("affinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: za}}}".to_string(), "za"),
                    _ => (String::new(), "none"),
                };
                labeled(pod(&format!("p{i}"), &format!("{cpu}m"), "128Mi", &extra), &[("app", app)])
            }).collect();
            let i = input(vec![nodepool(&np_spec("", ""), "default")], fake::instance_types(8), pods.clone());
            let r = schedule(&i);
            prop_assert_eq!(&r, &schedule(&i));
            prop_assert_eq!(placed(&r) + r.unschedulable.len(), pods.len());
            let kind_of = |p: &crate::pod::PodRef| specs[p.name[1..].parse::<usize>().unwrap()].0;
            let mut zones: std::collections::BTreeMap<(u8, String), usize> = std::collections::BTreeMap::new();
            for nc in &r.nodeclaims {
                let zone = nc.launch.as_ref().expect("a launch").zone.clone();
                let count = |k: u8| nc.pods.iter().filter(|p| kind_of(p) == k).count();
                prop_assert!(count(3) <= 1, "two anti-affinity pods share a NodeClaim: {:?}", nc.pods);
                prop_assert!(count(4) <= 2, "hostname spread maxSkew 2 exceeded: {:?}", nc.pods);
                for k in [1u8, 2, 5] {
                    *zones.entry((k, zone.clone())).or_default() += count(k);
                }
            }
            for z in fake::ZONES {
                let n = zones.get(&(5, z.to_string())).copied().unwrap_or(0);
                prop_assert!(n <= 1, "{} zonal anti-affinity pods in {}", n, z);
            }
            for (k, skew) in [(1u8, 1usize), (2, 2)] {
                let counts: Vec<usize> = fake::ZONES
                    .iter()
                    .map(|z| zones.get(&(k, z.to_string())).copied().unwrap_or(0))
                    .collect();
                let (min, max) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
                prop_assert!(max - min <= skew, "zonal spread app=z{} skew {:?} > {}", k, counts, skew);
            }
        }
    }
}

mod review {
    //! Semantics that other tests exercise only incidentally.

    use super::*;

    fn daemonset(name: &str, cpu: &str, affinity: &str) -> k8s_openapi::api::apps::v1::DaemonSet {
        let text = format!(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: {name}, namespace: kube-system}}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n{}      containers: [{{name: a, image: x, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]",
            indent(affinity, 6)
        );
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn existing_nodes_initialized_first_then_by_name() {
        let np = nodepool(&np_spec("", ""), "default");
        let managed = |name: &str, initialized: bool| {
            let labels = format!(
                "kubernetes.io/arch: amd64, karpenter.sh/nodepool: default, karpenter.sh/registered: \"true\"{}",
                if initialized { ", karpenter.sh/initialized: \"true\"" } else { "" }
            );
            node(name, &labels, "4", "")
        };
        // upstream `StateNode.Managed`: a node is Karpenter's when a NodeClaim is paired with it.
        let claim = |node: &str| -> crate::api::nodeclaim::NodeClaim {
            serde_yaml::from_str(&format!(
                "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: default-{node}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements: []\nstatus: {{nodeName: {node}}}"
            ))
            .unwrap()
        };
        // "a" sorts first by name but is not initialized: the initialized "b" is tried first.
        let mut i = input(vec![np.clone()], small_types(), vec![pod("p", "1", "1Gi", "")]);
        i.nodes = vec![managed("a", false), managed("b", true)];
        i.nodeclaims = vec![claim("a"), claim("b")];
        let r = schedule(&i);
        assert_eq!(r.existing_nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["b"], "{r:#?}");
        // Without its NodeClaim, "a" is not Karpenter's, so initialized whatever its labels say.
        i.nodeclaims = vec![claim("b")];
        let r = schedule(&i);
        assert_eq!(r.existing_nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["a"], "{r:#?}");
        // Both initialized: by name.
        let mut i = input(vec![np], small_types(), vec![pod("p", "1", "1Gi", "")]);
        i.nodes = vec![managed("d", true), managed("c", true)];
        let r = schedule(&i);
        assert_eq!(r.existing_nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn a_failed_pod_is_retried_from_scratch_after_others_are_placed() {
        // "big" sorts first (more cpu) and needs a pod labelled app=db in its zone: none is placed
        // yet, so it fails and goes to the back of the queue unrelaxed (it has nothing to relax);
        // once "db" is placed, the retry succeeds in db's zone.
        let aff = "affinity:\n  podAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: db}}}";
        let mut db = pod("db", "1", "1Gi", "nodeSelector: {topology.kubernetes.io/zone: test-zone-2}");
        db.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
        let r = schedule(&input(
            vec![nodepool(&np_spec("", ""), "default")],
            small_types(),
            vec![pod("big", "3", "1Gi", aff), db],
        ));
        assert!(r.unschedulable.is_empty(), "{r:#?}");
        assert!(r.relaxed.is_empty());
        let zone_of = |name: &str| {
            let nc = r.nodeclaims.iter().find(|n| n.pods.iter().any(|p| p.name == name)).unwrap();
            nc.requirements.iter().find(|q| q.key == "topology.kubernetes.io/zone").unwrap().values.clone()
        };
        assert_eq!(zone_of("big"), ["test-zone-2"]);
    }

    #[test]
    fn existing_nodes_use_limits_and_node_limits_can_be_exhausted() {
        let existing = node(
            "n",
            "kubernetes.io/arch: amd64, karpenter.sh/nodepool: default, karpenter.sh/registered: \"true\", karpenter.sh/initialized: \"true\"",
            "4",
            "{key: full, effect: NoSchedule}",
        );
        // limits.cpu 6 with a 4-CPU node of the NodePool: 2 left, so a 3-CPU pod exceeds it.
        let np = nodepool(&np_spec("", "limits: {cpu: \"6\"}\n"), "default");
        let mut i = input(vec![np], small_types(), vec![pod("p", "3", "1Gi", "")]);
        i.nodes = vec![existing.clone()];
        let r = schedule(&i);
        match &r.unschedulable[0].explanation.nodepools[0].failure {
            NodePoolFailure::ExceedsLimits { remaining, .. } => assert_eq!(*remaining, Quantity::from_units(2)),
            other => panic!("{other:#?}"),
        }
        // limits.nodes 1 with one node: no new NodeClaim.
        let np = nodepool(&np_spec("", "limits: {nodes: \"1\"}\n"), "default");
        let mut i = input(vec![np], small_types(), vec![pod("p", "1", "1Gi", "")]);
        i.nodes = vec![existing];
        let r = schedule(&i);
        assert!(
            matches!(r.unschedulable[0].explanation.nodepools[0].failure, NodePoolFailure::NodeLimitsExhausted { .. }),
            "{r:#?}"
        );
    }

    #[test]
    fn daemon_overhead_is_per_instance_type_group_and_daemon_terms_relax() {
        // The agent only runs on arm64 (its first required term can never match, the second
        // selects arm64): it counts on the arm type only.
        let arm_only = "affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [nowhere]}]\n      - matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]\n";
        let run = |pod_spec: &str| {
            let mut i = input(
                vec![nodepool(&np_spec("", ""), "default")],
                small_types(),
                vec![pod("p", "100m", "1Gi", pod_spec)],
            );
            i.daemonsets = vec![daemonset("agent", "1", arm_only)];
            schedule(&i)
        };
        // An amd64 pod: the NodeClaim's options include the arm type, but the minimum overhead
        // over the groups is the amd64 group's (none).
        let r = run("");
        assert_eq!(r.nodeclaims[0].requests.get("cpu"), Some(&Quantity::from_millis(100)), "{r:#?}");
        // An arm64 pod: only the arm group is left, with the agent's 1 CPU.
        let r = run("nodeSelector: {kubernetes.io/arch: arm64}");
        assert_eq!(r.nodeclaims[0].requests.get("cpu"), Some(&Quantity::from_millis(1100)), "{r:#?}");
    }

    #[test]
    fn node_affinity_policy_decides_which_nodes_a_spread_counts() {
        // Two existing nodes in test-zone-1 and test-zone-2, labelled team=a, each running one
        // app=web pod. The new pods select team=b (which only new NodeClaims get) and spread
        // over zones with maxSkew 1. Honor (the default): nodes outside the pod's node affinity
        // are not counted, so the three zones start equal. Ignore: zones 1 and 2 start at 1.
        let web_on = |name: &str, node: &str| {
            let mut p = pod(name, "100m", "100Mi", &format!("nodeName: {node}"));
            p.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
            p
        };
        let run = |policy: &str| {
            let np = nodepool(
                &np_spec("", "").replace("template:\n", "template:\n  metadata: {labels: {team: b}}\n"),
                "default",
            );
            let spread = format!("nodeSelector: {{team: b}}\ntopologySpreadConstraints: [{{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, nodeAffinityPolicy: {policy}, labelSelector: {{matchLabels: {{app: web}}}}}}]");
            let mut pods = vec![web_on("old-1", "n1"), web_on("old-2", "n2")];
            for k in 0..3 {
                let mut p = pod(&format!("new-{k}"), "100m", "100Mi", &spread);
                p.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
                pods.push(p);
            }
            let mut i = input(vec![np], small_types(), pods);
            i.nodes = vec![
                node("n1", "team: a, topology.kubernetes.io/zone: test-zone-1", "4", "{key: no, effect: NoSchedule}"),
                node("n2", "team: a, topology.kubernetes.io/zone: test-zone-2", "4", "{key: no, effect: NoSchedule}"),
            ];
            let r = schedule(&i);
            assert!(r.unschedulable.is_empty(), "{policy}: {r:#?}");
            let mut zones: std::collections::BTreeMap<String, usize> = Default::default();
            for nc in &r.nodeclaims {
                let z = nc.requirements.iter().find(|q| q.key == "topology.kubernetes.io/zone").unwrap();
                *zones.entry(z.values.join(",")).or_default() += nc.pods.len();
            }
            zones
        };
        let honor = run("Honor");
        assert_eq!(honor.values().copied().collect::<Vec<_>>(), [1, 1, 1], "{honor:?}");
        let ignore = run("Ignore");
        assert_eq!(ignore.get("test-zone-3"), Some(&2), "{ignore:?}");
    }
}

#[test]
fn resource_shortfall_names_the_requirements_that_narrowed_the_types() {
    let r = schedule(&input(
        vec![nodepool(&np_spec("", ""), "default")],
        small_types(),
        vec![pod("p", "32", "1Gi", "nodeSelector: {kubernetes.io/arch: arm64}")],
    ));
    let text = r.unschedulable[0].explanation.headline();
    assert!(
        text.contains("no instance type has cpu 32 (pod and daemons); of the 1 meeting the requirements (kubernetes.io/arch In [arm64]) the largest, arm-instance-type, offers"),
        "{text}"
    );
}

#[test]
fn explanations_of_many_topology_pods_agree_with_the_full_check() {
    // Upstream's diverse mix with limits that run out: hundreds of unschedulable pods with
    // spread, affinity and anti-affinity are explained against every planned NodeClaim, where
    // the topology pre-check stands in for the full check (and debug builds verify it does).
    let mut input = fake::benchmark_input(Arc::new(fake::instance_types(40)), fake::diverse_pods(400));
    input.nodepools[0].nodepool.spec.limits =
        std::collections::BTreeMap::from([("cpu".to_string(), Quantity::from_units(400))]).into();
    let r = schedule(&input);
    assert!(r.unschedulable.len() > 100, "{}", r.unschedulable.len());
    let topology_groups: usize = r
        .unschedulable
        .iter()
        .flat_map(|u| &u.explanation.planned_nodeclaims)
        .filter(|g| matches!(g.rejection, NodeRejection::Topology(_)))
        .map(|g| g.count)
        .sum();
    assert!(topology_groups > 1000, "{topology_groups}");
}
