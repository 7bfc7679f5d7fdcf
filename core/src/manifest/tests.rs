//! Manifest loading tests: documents of every kind, upstream defaults, and located errors for bad
//! syntax, unknown fields, quantities and validation failures.

use super::*;

const NODEPOOL: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
"#;

const NODECLASS: &str = r#"apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
"#;

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: inflate
spec:
  replicas: 2
  selector:
    matchLabels: {app: inflate}
  template:
    metadata:
      labels: {app: inflate}
    spec:
      containers:
        - name: inflate
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources:
            requests:
              cpu: "1"
"#;

fn only_problem(text: &str) -> Problem {
    let err = load(text).expect_err("input should be rejected");
    assert_eq!(err.problems.len(), 1, "{err}");
    err.problems.into_iter().next().unwrap()
}

#[test]
fn loads_a_mix_of_kinds_across_documents() {
    let text = format!("{NODEPOOL}---\n{NODECLASS}---\n{DEPLOYMENT}");
    let m = load(&text).unwrap();
    assert_eq!(m.nodepools.len(), 1);
    assert_eq!(m.nodeclasses.len(), 1);
    assert_eq!(m.deployments.len(), 1);
    let pods = m.all_pods();
    assert_eq!(pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect::<Vec<_>>(), ["inflate-0", "inflate-1"]);
    assert!(m.nodeclass_for(&m.nodepools[0]).is_some());
    // A NodeClaim launches with the class it names, whatever its NodePool says now.
    let mut other = m.nodeclasses[0].clone();
    other.metadata.name = Some("other".into());
    let mut m2 = m.clone();
    m2.nodeclasses.push(other);
    let mut claim: crate::api::NodeClaim = serde_yaml::from_str(
        "spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: other}, requirements: []}",
    )
    .unwrap();
    assert_eq!(m2.nodeclass_of(&claim).and_then(|c| c.metadata.name.as_deref()), Some("other"));
    claim.spec.node_class_ref.name = "gone".into();
    assert!(m2.nodeclass_of(&claim).is_none());
    let origin = &m.origins[&ObjectRef { kind: "EC2NodeClass".into(), namespace: None, name: "default".into() }];
    assert_eq!(origin.document, 2);
    assert!(m.warnings.is_empty());
}

#[test]
fn applies_upstream_defaults() {
    let m = load(NODEPOOL).unwrap();
    let np = &m.nodepools[0];
    let yaml = serde_yaml::to_string(np).unwrap();
    assert!(yaml.contains("expireAfter: 720h"), "{yaml}");
    assert!(yaml.contains("consolidateAfter: 0s"), "{yaml}");
    assert!(yaml.contains("consolidationPolicy: WhenEmptyOrUnderutilized"), "{yaml}");
    assert!(yaml.contains("nodes: 10%"), "{yaml}");
}

#[test]
fn reads_json_and_lists() {
    let list = serde_json::json!({
        "apiVersion": "v1", "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "c"}]}},
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
        ]
    });
    let m = load(&serde_json::to_string_pretty(&list).unwrap()).unwrap();
    assert_eq!(m.pods.len(), 1);
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(m.origins[&ObjectRef { kind: "Node".into(), namespace: None, name: "n1".into() }].item, Some(1));
}

#[test]
fn unknown_kinds_are_skipped_with_a_warning() {
    let text = format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n---\n{NODEPOOL}");
    let m = load(&text).unwrap();
    assert_eq!(m.nodepools.len(), 1);
    assert_eq!(m.warnings.len(), 1);
    let w = &m.warnings[0];
    assert_eq!(w.kind, ProblemKind::UnknownKind);
    assert_eq!(w.document, 1);
    assert!(w.to_string().contains("v1 Service"), "{w}");
}

#[test]
fn syntax_errors_name_document_and_line() {
    let text = format!("{NODEPOOL}---\nkind: Pod\nmetadata: {{name: [unclosed\n");
    let p = only_problem(&text);
    assert_eq!(p.kind, ProblemKind::Syntax);
    assert_eq!(p.document, 2);
    assert!(p.position.line >= 19, "{p}");
}

#[test]
fn bad_operator_names_field_and_line() {
    let text = NODEPOOL.replace("operator: In", "operator: Within");
    let p = only_problem(&text);
    assert_eq!(p.kind, ProblemKind::InvalidValue);
    assert_eq!(p.field.as_deref(), Some("spec.template.spec.requirements[0].operator"));
    assert_eq!(p.position.line, 10);
    assert_eq!(p.object.as_ref().unwrap().to_string(), "NodePool/default");
    let text = p.to_string();
    assert!(
        text.starts_with("document 1 (NodePool/default), field spec.template.spec.requirements[0].operator, line 10"),
        "{text}"
    );
}

#[test]
fn unknown_fields_are_errors_in_karpenter_and_kubernetes_kinds() {
    let text = NODEPOOL.replace("      nodeClassRef:", "      nodeClasRef: {}\n      nodeClassRef:");
    let p = load(&text)
        .unwrap_err()
        .problems
        .into_iter()
        .find(|p| p.kind == ProblemKind::UnknownField)
        .expect("unknown field");
    assert_eq!(p.field.as_deref(), Some("spec.template.spec.nodeClasRef"));
    assert_eq!(p.position.line, 12);

    let text =
        DEPLOYMENT.replace("      containers:", "      containres: []\n      nodeSelectr: {a: b}\n      containers:");
    let problems = load(&text).unwrap_err().problems;
    let fields: Vec<_> = problems.iter().map(|p| (p.kind, p.field.clone().unwrap(), p.position.line)).collect();
    assert_eq!(
        fields,
        [
            (ProblemKind::UnknownField, "spec.template.spec.containres".to_string(), 13),
            (ProblemKind::UnknownField, "spec.template.spec.nodeSelectr".to_string(), 14)
        ]
    );
}

#[test]
fn bad_quantities_are_located() {
    let text = DEPLOYMENT.replace("cpu: \"1\"", "cpu: \"1 core\"");
    // k8s-openapi carries quantities as strings; the loader parses every request.
    let p = only_problem(&text);
    assert_eq!(p.kind, ProblemKind::InvalidValue);
    assert_eq!(p.field.as_deref(), Some("spec.template.spec.containers[0].resources.requests.cpu"));
    assert_eq!(p.position.line, 18);
    assert!(p.message.contains("1 core"), "{p}");
}

#[test]
fn validation_failures_are_located() {
    let text = NODEPOOL.replace("values: [\"spot\", \"on-demand\"]", "values: []");
    let err = load(&text).unwrap_err();
    let p = err.problems.iter().find(|p| p.kind == ProblemKind::Validation).expect("validation problem");
    assert!(p.field.as_deref().unwrap().starts_with("spec.template.spec.requirements[0]"), "{p}");
    assert_eq!(p.position.line, 11, "{p}");
}

#[test]
fn missing_kind_and_non_objects_are_errors() {
    assert_eq!(only_problem("apiVersion: v1\nmetadata: {name: x}\n").kind, ProblemKind::MissingTypeInfo);
    assert_eq!(only_problem("- just\n- a list\n").kind, ProblemKind::MissingTypeInfo);
    assert_eq!(only_problem("plain text").kind, ProblemKind::MissingTypeInfo);
}

#[test]
fn duplicate_objects_are_errors() {
    let p = only_problem(&format!("{NODEPOOL}---\n{NODEPOOL}"));
    assert!(p.message.contains("defined twice"), "{p}");
    assert_eq!(p.document, 2);
}

#[test]
fn collects_every_problem() {
    let bad_pool = NODEPOOL.replace("operator: In", "operator: Within");
    let bad_deploy = DEPLOYMENT.replace("replicas: 2", "replicas: two");
    let err = load(&format!("{bad_pool}---\n{bad_deploy}")).unwrap_err();
    assert_eq!(err.problems.len(), 2, "{err}");
    assert_eq!(err.problems[1].document, 2);
    assert_eq!(err.problems[1].field.as_deref(), Some("spec.replicas"));
}

#[test]
fn legacy_objects_are_kept_for_conversion() {
    let text = r#"apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  ttlSecondsAfterEmpty: 30
  providerRef:
    name: default
"#;
    let mut m = load(text).unwrap();
    assert_eq!(m.legacy.len(), 1);
    let notes = m.convert_legacy();
    assert_eq!(m.nodepools.len(), 1);
    assert!(notes.iter().any(|n| n.message.contains("WhenEmpty")), "{notes:?}");
}

mod fuzz {
    use proptest::prelude::*;

    const SEEDS: [&str; 3] = [super::NODEPOOL, super::NODECLASS, super::DEPLOYMENT];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Arbitrary bytes never panic the loader.
        #[test]
        fn arbitrary_text_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = super::load(&text);
        }

        /// Valid manifests with a byte replaced, deleted or duplicated never panic the loader.
        #[test]
        fn mutated_manifests_never_panic(seed in 0usize..3, edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..6)) {
            let mut bytes = SEEDS[seed].as_bytes().to_vec();
            for (at, op, byte) in edits {
                if bytes.is_empty() { break; }
                let i = at.index(bytes.len());
                match op {
                    0 => bytes[i] = b" :-[]{}\n#&*!|>'\"0aZ"[byte as usize % 19],
                    1 => { bytes.remove(i); }
                    _ => { let b = bytes[i]; bytes.insert(i, b); }
                }
            }
            let _ = super::load(&String::from_utf8_lossy(&bytes));
        }
    }
}

#[test]
fn merging_inputs_rejects_duplicates_and_second_scenarios() {
    let mut a = load(NODEPOOL).unwrap();
    let b = load(DEPLOYMENT).unwrap();
    a.merge(b).unwrap();
    assert_eq!((a.nodepools.len(), a.deployments.len()), (1, 1));
    let err = a.merge(load(NODEPOOL).unwrap()).unwrap_err();
    assert_eq!(err.to_string(), "NodePool/default is also defined in an earlier file (document 1, line 1, column 1)");
    let scenario = "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec: {region: eu-west-1}\n";
    a.merge(load(scenario).unwrap()).unwrap();
    assert_eq!(a.merge(load(scenario).unwrap()).unwrap_err(), MergeError::SecondScenario);
}

#[test]
fn an_api_servers_newer_kubernetes_fields_are_warnings_karpenters_stay_errors() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers: [{name: c, image: x}]\n  futureField: {enabled: true}\n";
    // A file is strict: an unknown field is an error naming it.
    let err = load(pod).unwrap_err();
    assert_eq!(err.problems[0].kind, ProblemKind::UnknownField);
    assert_eq!(err.problems[0].field.as_deref(), Some("spec.futureField"));
    // An API server's answer: the pod loads, the field is a located warning.
    let m = load_from_api_server(pod).unwrap();
    assert_eq!(m.pods.len(), 1);
    assert_eq!(m.warnings.len(), 1);
    assert_eq!(m.warnings[0].kind, ProblemKind::UnknownField);
    assert_eq!(m.warnings[0].field.as_deref(), Some("spec.futureField"));
    assert_eq!(m.warnings[0].position.line, 6);
    // Karpenter's kinds stay strict either way.
    let nodepool = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n  futureField: 1\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n";
    assert!(load_from_api_server(nodepool).is_err());
}

#[test]
fn a_live_read_leaves_out_what_does_not_load_and_says_what_that_takes_from_the_view() {
    let bad_nodepool = NODEPOOL
        .replace("name: default\nspec", "name: bogus\nspec")
        .replace("[\"spot\", \"on-demand\"]", "[\"bogus\"]");
    let pod = |name: &str, node: &str, cpu: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  nodeName: \"{node}\"\n  containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]\n"
        )
    };
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {capacity: {cpu: \"4x\"}}\n";
    let docs = [
        NODEPOOL.to_string(),
        bad_nodepool,
        pod("pending-ok", "", "1"),
        pod("pending-bad", "", "1x"),
        pod("bound-bad", "n1", "1y"),
    ];
    let live = load_from_api_server_skipping(&docs.join("---\n")).unwrap();
    assert_eq!(live.manifests.nodepools.len(), 1);
    assert_eq!(
        live.manifests.pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect::<Vec<_>>(),
        ["pending-ok"]
    );
    let skipped: Vec<_> =
        live.skipped.iter().map(|s| (s.document, s.object.as_ref().unwrap().to_string(), s.gap)).collect();
    assert_eq!(
        skipped,
        [
            (2, "NodePool/bogus".to_string(), ViewGap::Object),
            (4, "Pod/default/pending-bad".to_string(), ViewGap::Object),
            (5, "Pod/default/bound-bad".to_string(), ViewGap::Workloads),
        ]
    );
    // The NodePool that fails validation is kept aside, so that its status can say why.
    assert_eq!(live.invalid_nodepools.iter().map(|np| np.name()).collect::<Vec<_>>(), ["bogus"]);
    assert!(
        live.skipped[0].summary().contains("spec.template.spec.requirements[0].values: no valid values found"),
        "{}",
        live.skipped[0].summary()
    );
    assert_eq!(live.gap(), Some(ViewGap::Workloads));
    assert_eq!(live.first_at_least(ViewGap::Workloads).unwrap().document, 5);
    assert_eq!(live.skipped_on("n1").map(|s| s.document), Some(5));
    // What each gap holds back: the bound pod holds disruption and its node's drain, no more.
    let held = |live: &LiveLoad, d| live.holding_back(d).map(|s| s.document);
    assert_eq!(held(&live, HeldDecision::Any), None);
    assert_eq!(held(&live, HeldDecision::Disruption), Some(5));
    assert_eq!(held(&live, HeldDecision::Drain("n1")), Some(5));
    assert_eq!(held(&live, HeldDecision::Drain("n2")), None);
    assert_eq!(live.skipped[2].held_back(), "disruption waits until it loads, and node n1 is not drained");
    assert_eq!(live.skipped[1].held_back(), "no node is provisioned for it");
    // A Node that does not load leaves the capacity incomplete: it holds back every decision.
    let live = load_from_api_server_skipping(&[NODEPOOL, node].join("---\n")).unwrap();
    assert_eq!(live.gap(), Some(ViewGap::Capacity));
    assert!(live.manifests.nodes.is_empty());
    assert_eq!(held(&live, HeldDecision::Any), Some(2));
    assert_eq!(held(&live, HeldDecision::Drain("n2")), Some(2));
    // A VolumeAttachment that does not load holds back disruption and its node's termination
    // (the instance must not go while a volume may still be attached); a good one loads.
    let attachment = |name: &str, node: &str, attacher: &str| {
        format!("apiVersion: storage.k8s.io/v1\nkind: VolumeAttachment\nmetadata: {{name: {name}}}\nspec: {{attacher: {attacher}, nodeName: {node}, source: {{persistentVolumeName: pv-{name}}}}}\n")
    };
    let docs = [attachment("va-ok", "n1", "ebs.csi.aws.com"), attachment("va-bad", "n3", "[not, a, string]")];
    let live = load_from_api_server_skipping(&docs.join("---\n")).unwrap();
    assert_eq!(live.manifests.volumeattachments.len(), 1);
    assert_eq!(live.skipped.iter().map(|s| (s.document, s.gap)).collect::<Vec<_>>(), [(2, ViewGap::Workloads)]);
    assert_eq!(held(&live, HeldDecision::Drain("n3")), Some(2));
    assert_eq!(held(&live, HeldDecision::Drain("n1")), None);
    assert_eq!(held(&live, HeldDecision::Disruption), Some(2));
    // An object defined twice: the second definition is left out on a second read.
    let live = load_from_api_server_skipping(&[NODEPOOL, NODEPOOL].join("---\n")).unwrap();
    assert_eq!((live.manifests.nodepools.len(), live.skipped.len(), live.skipped[0].document), (1, 1, 2));
    // A clean read skips nothing; text that is not YAML still fails whole.
    assert_eq!(load_from_api_server_skipping(NODEPOOL).unwrap().gap(), None);
    assert!(load_from_api_server_skipping("a: [unclosed").is_err());
}

#[test]
fn a_live_read_assembled_from_objects_loaded_one_at_a_time_is_the_read_of_their_text() {
    let bad_nodepool = NODEPOOL
        .replace("name: default\nspec", "name: bogus\nspec")
        .replace("[\"spot\", \"on-demand\"]", "[\"bogus\"]");
    let pod = |name: &str, node: &str, cpu: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  nodeName: \"{node}\"\n{extra}  containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]\n"
        )
    };
    let docs = [
        NODEPOOL.to_string(),
        bad_nodepool,
        NODECLASS.to_string(),
        pod("pending-ok", "", "1", ""),
        pod("newer-field", "n1", "1", "  futureField: 1\n"),
        pod("pending-bad", "", "1x", ""),
        pod("bound-bad", "n1", "1y", ""),
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {capacity: {cpu: \"4x\"}}\n".into(),
        "apiVersion: v1\nkind: Node\nmetadata: {name: n2}\nstatus: {capacity: {cpu: \"4\"}}\n".into(),
        NODEPOOL.to_string(),
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n".into(),
    ];
    let whole = load_from_api_server_skipping(&docs.join("---\n")).unwrap();
    let objects: Vec<LiveObject> = docs
        .iter()
        .map(|d| {
            let mut value = None;
            yaml::each_document(d, &mut |doc| value = Some(doc.value)).unwrap();
            LiveObject::load(value.unwrap())
        })
        .collect();
    assert_eq!(objects.iter().filter(|o| !o.loads()).count(), 4);
    let assembled = LiveLoad::from_objects(&objects);
    // Everything but the lines problems are on (the objects have no text) is the same.
    let at_start = |p: &Problem| Problem { position: Position { line: 1, column: 1 }, ..p.clone() };
    let shown = |live: &LiveLoad| {
        let mut m = live.manifests.clone();
        m.warnings = m.warnings.iter().map(at_start).collect();
        for origin in m.origins.values_mut() {
            origin.position = Position { line: 1, column: 1 };
        }
        let skipped: Vec<Skipped> = live
            .skipped
            .iter()
            .map(|s| Skipped { problems: s.problems.iter().map(at_start).collect(), ..s.clone() })
            .collect();
        format!("{m:#?}\n{skipped:#?}\n{:#?}", live.invalid_nodepools)
    };
    assert_eq!(shown(&assembled), shown(&whole));
    // The read holds what the parts say: documents numbered by object, warnings and gaps kept.
    let skipped: Vec<_> = assembled.skipped.iter().map(|s| (s.document, s.gap)).collect();
    assert_eq!(
        skipped,
        [
            (2, ViewGap::Object),
            (6, ViewGap::Object),
            (7, ViewGap::Workloads),
            (8, ViewGap::Capacity),
            (10, ViewGap::Object)
        ]
    );
    assert!(
        assembled.skipped[4].summary().contains("defined twice (first in document 1"),
        "{:?}",
        assembled.skipped[4]
    );
    assert_eq!(assembled.manifests.warnings.iter().map(|w| w.document).collect::<Vec<_>>(), [5, 11]);
    assert_eq!(
        assembled.manifests.origins[&ObjectRef { kind: "Node".into(), namespace: None, name: "n2".into() }].document,
        9
    );
    assert_eq!(assembled.invalid_nodepools.len(), 1);
}

const NODE_GROUP: &str = r#"apiVersion: carpentry.dev/v1alpha1
kind: NodeGroup
metadata:
  name: general
spec:
  minSize: 1
  maxSize: 10
  instanceTypes: [m5.large, m5a.large]
  zones: [us-east-1a, us-east-1b]
  labels: {workload: general}
  taints:
    - key: dedicated
      value: batch
      effect: NoSchedule
  resources:
    ephemeral-storage: 100Gi
  autoscalingOptions:
    scaleDownUnneededTime: 5m
"#;

#[test]
fn node_groups_load_with_cas_defaults() {
    let m = load(NODE_GROUP).expect("a valid NodeGroup");
    let group = &m.nodegroups[0];
    assert_eq!(group.metadata.name.as_deref(), Some("general"));
    assert_eq!(group.spec.desired(), 1, "desiredCapacity unset: minSize");
    assert_eq!(group.spec.capacity_type.as_str(), "on-demand");
    assert_eq!(group.spec.instance_types[0], "m5.large");
    assert_eq!(group.spec.resources["ephemeral-storage"].to_string(), "100Gi");
    assert!(m.origins.keys().any(|o| o.to_string() == "NodeGroup/general"));
    // Read back as written.
    let written = serde_yaml::to_string(group).unwrap();
    assert_eq!(load(&written).unwrap().nodegroups[0], *group);
}

#[test]
fn a_node_groups_problems_are_located() {
    let cases = [
        ("  maxSize: 10", "  maxSzie: 10\n  maxSize: 10", ProblemKind::UnknownField, "spec.maxSzie", 7),
        ("  maxSize: 10", "  maxSize: 0", ProblemKind::Validation, "spec.maxSize", 7),
        ("  maxSize: 10", "  maxSize: 10\n  desiredCapacity: 11", ProblemKind::Validation, "spec.desiredCapacity", 8),
        ("[m5.large, m5a.large]", "[]", ProblemKind::Validation, "spec.instanceTypes", 8),
        ("[us-east-1a, us-east-1b]", "[us-east-1a, us-east-1a]", ProblemKind::Validation, "spec.zones[1]", 9),
        ("{workload: general}", "{\"bad key!\": general}", ProblemKind::Validation, "spec.labels[\"bad key!\"]", 10),
        ("m5a.large]", "m5a.largish]", ProblemKind::Validation, "spec.instanceTypes[1]", 8),
        ("us-east-1b]", "us-east-1z]", ProblemKind::Validation, "spec.zones[1]", 9),
        ("effect: NoSchedule", "effect: Never", ProblemKind::Validation, "spec.taints[0].effect", 14),
        ("100Gi", "a lot", ProblemKind::InvalidValue, "spec.resources.ephemeral-storage", 16),
        ("100Gi", "-1Gi", ProblemKind::Validation, "spec.resources[\"ephemeral-storage\"]", 16),
        ("5m", "5 minutes", ProblemKind::Validation, "spec.autoscalingOptions.scaleDownUnneededTime", 18),
    ];
    for (from, to, kind, field, line) in cases {
        let text = NODE_GROUP.replace(from, to);
        let p = only_problem(&text);
        assert_eq!((p.kind, p.field.as_deref(), p.position.line), (kind, Some(field), line), "{to}: {p}");
        assert_eq!(p.object.as_ref().map(ToString::to_string).as_deref(), Some("NodeGroup/general"), "{p}");
    }
}

const CA_SCENARIO: &str = r#"apiVersion: carpentry.dev/v1alpha1
kind: Scenario
spec:
  clusterAutoscaler:
    expander: priority,least-waste
    scaleDownUtilizationThreshold: 0.6
    scaleDownUnneededTime: 2m
    maxNodesTotal: 50
    coresTotal: "4:64"
"#;

#[test]
fn cluster_autoscaler_flags_default_as_ca_1_36_1s() {
    let options = load(CA_SCENARIO).unwrap().scenario.unwrap().spec.cluster_autoscaler.unwrap().resolved();
    assert_eq!(options.expanders, ["priority", "least-waste"]);
    assert_eq!(options.scale_down_utilization_threshold, 0.6);
    assert_eq!(options.scale_down_unneeded_time_seconds, 120.0);
    assert_eq!(options.max_nodes_total, 50);
    assert_eq!((options.cores_total, options.memory_total), ((4, 64), (0, 6_400_000 << 30)));
    // The rest: config/flags/flags.go and config/const.go.
    let defaults = crate::api::clusterautoscaler::ClusterAutoscalerOptions::default().resolved();
    assert_eq!(defaults.expanders, ["least-waste"]);
    assert_eq!(
        (
            defaults.scan_interval_seconds,
            defaults.scale_down_unneeded_time_seconds,
            defaults.scale_down_unready_time_seconds
        ),
        (10.0, 600.0, 1200.0)
    );
    assert_eq!(
        (defaults.scale_down_delay_after_add_seconds, defaults.scale_down_delay_after_failure_seconds),
        (600.0, 180.0)
    );
    assert_eq!((defaults.max_node_provision_time_seconds, defaults.max_graceful_termination_seconds), (900.0, 600));
    assert_eq!((defaults.max_scale_down_parallelism, defaults.max_drain_parallelism), (10, 1));
    assert_eq!((defaults.initial_node_group_backoff_seconds, defaults.max_node_group_backoff_seconds), (300.0, 1800.0));
    assert_eq!(defaults.expendable_pods_priority_cutoff, -10);
    assert!(!defaults.balance_similar_node_groups && defaults.scale_down_enabled);
    assert_eq!((defaults.cores_total, defaults.max_nodes_per_scaleup), ((0, 320_000), 1000));
}

#[test]
fn cluster_autoscaler_flags_are_checked_as_cas_factory_checks_them() {
    let cases = [
        ("expander: priority,least-waste", "expander: cheapest", "spec.clusterAutoscaler.expander", "not one of"),
        ("expander: priority,least-waste", "expander: price", "spec.clusterAutoscaler.expander", "cannot run on AWS"),
        ("expander: priority,least-waste", "expander: random,most-pods", "spec.clusterAutoscaler.expander", "follows"),
        ("expander: priority,least-waste", "expander: most-pods,most-pods", "spec.clusterAutoscaler.expander", "twice"),
        ("0.6", "1.5", "spec.clusterAutoscaler.scaleDownUtilizationThreshold", "between 0 and 1"),
        ("2m", "2 minutes", "spec.clusterAutoscaler.scaleDownUnneededTime", "invalid duration"),
        ("maxNodesTotal: 50", "maxNodesTotal: -1", "spec.clusterAutoscaler.maxNodesTotal", "0 or more"),
        ("maxNodesTotal: 50", "scanInterval: 0s", "spec.clusterAutoscaler.scanInterval", "positive"),
        ("4:64", "64:4", "spec.clusterAutoscaler.coresTotal", "max must not be less than min"),
        ("4:64", "64", "spec.clusterAutoscaler.coresTotal", "not min:max"),
        ("4:64", "4:lots", "spec.clusterAutoscaler.coresTotal", "not a whole number"),
        ("maxNodesTotal: 50", "maxNodesPerScaleup: 0", "spec.clusterAutoscaler.maxNodesPerScaleup", "1 or more"),
    ];
    for (from, to, field, says) in cases {
        let p = only_problem(&CA_SCENARIO.replace(from, to));
        assert_eq!((p.kind, p.field.as_deref()), (ProblemKind::Validation, Some(field)), "{to}: {p}");
        assert!(p.message.contains(says), "{to}: {p}");
    }
    let p = only_problem(&CA_SCENARIO.replace("maxNodesTotal", "maxNodeTotal"));
    assert_eq!((p.kind, p.field.as_deref()), (ProblemKind::UnknownField, Some("spec.clusterAutoscaler.maxNodeTotal")));
}
