//! Conversion tests: every note case of the v1beta1→v1 and v1alpha5→v1 rules.

use super::*;
use crate::api::nodepool::ConsolidationPolicy;
use crate::api::validation::Validate;
use crate::requirements::Operator;

fn legacy(yaml: &str) -> LegacyObject {
    let value: serde_json::Value = serde_yaml::from_str(yaml).expect("test YAML parses");
    LegacyObject::from_value(value).expect("legacy object parses")
}

fn convert_yaml(docs: &[&str]) -> Converted {
    convert(docs.iter().map(|d| legacy(d)).collect())
}

/// The notes about `object` whose field is `field`.
fn notes_for<'a>(c: &'a Converted, object: &str, field: &str) -> Vec<&'a ConversionNote> {
    c.notes.iter().filter(|n| n.object == object && n.field == field).collect()
}

fn assert_note(c: &Converted, object: &str, field: &str, contains: &str) {
    let found = notes_for(c, object, field);
    assert!(
        found.iter().any(|n| n.message.contains(contains)),
        "no note on {object} {field} containing {contains:?}; notes:\n{}",
        c.notes.iter().map(|n| format!("  {n}")).collect::<Vec<_>>().join("\n")
    );
}

fn assert_no_note(c: &Converted, object: &str, field: &str) {
    let found = notes_for(c, object, field);
    assert!(found.is_empty(), "unexpected notes on {object} {field}: {found:#?}");
}

const PROVISIONER: &str = r#"
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  providerRef:
    name: default
  requirements:
    - key: karpenter.k8s.aws/instance-category
      operator: In
      values: [c, m, r]
    - key: karpenter.sh/capacity-type
      operator: In
      values: [spot]
    - key: kubernetes.io/arch
      operator: In
      values: [arm64]
    - key: kubernetes.io/os
      operator: In
      values: [linux]
  labels:
    team: a
  annotations:
    example.com/owner: me
  taints:
    - {key: example.com/special, value: "true", effect: NoSchedule}
  startupTaints:
    - {key: example.com/init, effect: NoExecute}
  limits:
    resources:
      cpu: 1000
      memory: 1000Gi
  weight: 50
"#;

const AWS_NODE_TEMPLATE: &str = r#"
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  instanceProfile: KarpenterNodeInstanceProfile
  subnetSelector:
    karpenter.sh/discovery: my-cluster
  securityGroupSelector:
    karpenter.sh/discovery: my-cluster
  amiFamily: Bottlerocket
  metadataOptions:
    httpEndpoint: enabled
    httpProtocolIPv6: disabled
    httpPutResponseHopLimit: 1
    httpTokens: required
"#;

// ---------------------------------------------------------------------------------------------------------------
// v1alpha5 Provisioner
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn provisioner_copies_unchanged_fields_without_notes() {
    let c = convert_yaml(&[PROVISIONER, AWS_NODE_TEMPLATE]);
    assert_eq!(c.nodepools.len(), 1);
    let np = &c.nodepools[0];
    assert_eq!(np.api_version, "karpenter.sh/v1");
    assert_eq!(np.name(), "default");
    let t = &np.spec.template;
    assert_eq!(t.metadata.labels["team"], "a");
    assert_eq!(t.metadata.annotations["example.com/owner"], "me");
    assert_eq!(t.spec.taints.len(), 1);
    assert_eq!(t.spec.startup_taints.len(), 1);
    assert_eq!(t.spec.requirements.len(), 4, "requirements copied, no defaults added");
    assert!(t.spec.requirements.iter().all(|r| r.min_values.is_none()));
    assert_eq!(np.spec.limits["cpu"], crate::quantity::Quantity::from_units(1000));
    assert_eq!(np.spec.weight, Some(50));
    for field in [
        "spec.labels",
        "spec.annotations",
        "spec.taints",
        "spec.startupTaints",
        "spec.requirements",
        "spec.limits",
        "spec.weight",
    ] {
        assert_no_note(&c, "Provisioner/default", field);
    }
    // The referenced AWSNodeTemplate was converted in the same batch.
    assert_eq!(
        t.spec.node_class_ref,
        NodeClassReference { group: "karpenter.k8s.aws".into(), kind: "EC2NodeClass".into(), name: "default".into() }
    );
    assert_note(&c, "Provisioner/default", "spec.providerRef", "became EC2NodeClass/default in this conversion");
    assert!(np.validate().is_empty(), "{:#?}", np.validate());
}

#[test]
fn provisioner_without_ttl_until_expired_never_expires() {
    let c = convert_yaml(&[PROVISIONER]);
    let np = &c.nodepools[0];
    assert!(np.spec.template.spec.expire_after.is_never());
    assert_note(&c, "Provisioner/default", "spec.ttlSecondsUntilExpired", "expireAfter: Never");

    let with_ttl = PROVISIONER.replace("  weight: 50", "  weight: 50\n  ttlSecondsUntilExpired: 2592000");
    let c = convert_yaml(&[&with_ttl]);
    assert_eq!(c.nodepools[0].spec.template.spec.expire_after.as_str(), "2592000s");
    assert_eq!(c.nodepools[0].spec.template.spec.expire_after.as_seconds(), Some(2_592_000));
    assert_note(&c, "Provisioner/default", "spec.ttlSecondsUntilExpired", "forceful");
}

#[test]
fn provisioner_ttl_after_empty_becomes_when_empty() {
    let yaml = PROVISIONER.replace("  weight: 50", "  weight: 50\n  ttlSecondsAfterEmpty: 30");
    let c = convert_yaml(&[&yaml]);
    let d = &c.nodepools[0].spec.disruption;
    assert_eq!(d.consolidation_policy, ConsolidationPolicy::WhenEmpty);
    assert_eq!(d.consolidate_after.as_str(), "30s");
    assert_note(&c, "Provisioner/default", "spec.ttlSecondsAfterEmpty", "WhenEmpty with consolidateAfter: 30s");
}

#[test]
fn provisioner_with_neither_ttl_nor_consolidation_never_consolidates() {
    let c = convert_yaml(&[PROVISIONER]);
    let d = &c.nodepools[0].spec.disruption;
    assert!(d.consolidate_after.is_never());
    assert_note(&c, "Provisioner/default", "spec.consolidation", "consolidateAfter: Never");
}

#[test]
fn provisioner_consolidation_enabled() {
    let yaml = PROVISIONER.replace("  weight: 50", "  weight: 50\n  consolidation:\n    enabled: true");
    let c = convert_yaml(&[&yaml]);
    let d = &c.nodepools[0].spec.disruption;
    assert_eq!(d.consolidation_policy, ConsolidationPolicy::WhenEmptyOrUnderutilized);
    assert_eq!(d.consolidate_after.as_str(), "0s");
    assert_note(&c, "Provisioner/default", "spec.consolidation.enabled", "WhenEmptyOrUnderutilized");

    // Both set (invalid in v1alpha5): consolidation wins, as upstream's helper did.
    let both = yaml.replace("  weight: 50", "  weight: 50\n  ttlSecondsAfterEmpty: 30");
    let c = convert_yaml(&[&both]);
    assert_eq!(c.nodepools[0].spec.disruption.consolidation_policy, ConsolidationPolicy::WhenEmptyOrUnderutilized);
    assert_note(&c, "Provisioner/default", "spec.ttlSecondsAfterEmpty", "ignored");
}

#[test]
fn provisioner_keeps_default_budget_and_says_so() {
    let c = convert_yaml(&[PROVISIONER]);
    assert_eq!(c.nodepools[0].spec.disruption.budgets, vec![crate::api::nodepool::Budget::default()]);
    assert_note(&c, "Provisioner/default", "spec", "nodes: 10%");
}

#[test]
fn provisioner_kubelet_moves_to_nodeclass_in_batch() {
    let yaml = PROVISIONER.replace(
        "  weight: 50",
        "  weight: 50\n  kubeletConfiguration:\n    maxPods: 20\n    containerRuntime: dockerd\n    systemReserved:\n      cpu: 100m",
    );
    let c = convert_yaml(&[&yaml, AWS_NODE_TEMPLATE]);
    let nc = &c.nodeclasses[0];
    let kubelet = nc.spec.kubelet.as_ref().expect("kubelet moved");
    assert_eq!(kubelet.max_pods, Some(20));
    assert_eq!(kubelet.system_reserved["cpu"], crate::quantity::Quantity::from_millis(100));
    assert_note(&c, "Provisioner/default", "spec.kubeletConfiguration", "moved to EC2NodeClass/default spec.kubelet");
    assert_note(&c, "Provisioner/default", "spec.kubeletConfiguration.containerRuntime", "no v1 equivalent");
}

#[test]
fn kubelet_outside_batch_is_reported() {
    let yaml = PROVISIONER.replace("  weight: 50", "  weight: 50\n  kubeletConfiguration:\n    maxPods: 20");
    let c = convert_yaml(&[&yaml]);
    assert!(c.nodeclasses.is_empty());
    assert_note(
        &c,
        "Provisioner/default",
        "spec.kubeletConfiguration",
        "EC2NodeClass/default is not part of this conversion",
    );
    assert_note(&c, "Provisioner/default", "spec.kubeletConfiguration", "\"maxPods\":20");
    assert_note(&c, "Provisioner/default", "spec.providerRef", "was not part of this conversion");
}

#[test]
fn provisioner_inline_provider_becomes_a_nodeclass() {
    let yaml = PROVISIONER.replace(
        "  providerRef:\n    name: default\n",
        "  provider:\n    apiVersion: extensions.karpenter.sh/v1alpha1\n    kind: AWS\n    instanceProfile: KarpenterNodeInstanceProfile\n    subnetSelector:\n      aws-ids: subnet-1, subnet-2\n    securityGroupSelector:\n      Name: a,b\n    launchTemplate: my-template\n    tags:\n      team: a\n",
    );
    let with_kubelet = yaml.replace("  weight: 50", "  weight: 50\n  kubeletConfiguration:\n    maxPods: 30");
    let c = convert_yaml(&[&with_kubelet]);
    assert_eq!(c.nodeclasses.len(), 1);
    let nc = &c.nodeclasses[0];
    assert_eq!(nc.name(), "default");
    assert_eq!(c.nodepools[0].spec.template.spec.node_class_ref.name, "default");
    assert_note(&c, "Provisioner/default", "spec.provider", "no v1 equivalent; EC2NodeClass/default was created");
    let ids: Vec<_> = nc.spec.subnet_selector_terms.iter().map(|t| t.id.clone().unwrap()).collect();
    assert_eq!(ids, ["subnet-1", "subnet-2"]);
    let names: Vec<_> = nc.spec.security_group_selector_terms.iter().map(|t| t.tags["Name"].clone()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_note(&c, "Provisioner/default", "spec.provider.securityGroupSelector", "one per combination");
    assert_note(&c, "Provisioner/default", "spec.provider.launchTemplate", "no v1 equivalent");
    assert_note(&c, "Provisioner/default", "spec.provider.amiFamily", "v1alpha1 used AL2");
    assert_eq!(nc.spec.ami_selector_terms[0].alias.as_deref(), Some("al2@latest"));
    assert_eq!(nc.spec.instance_profile.as_deref(), Some("KarpenterNodeInstanceProfile"));
    assert_eq!(nc.spec.kubelet.as_ref().unwrap().max_pods, Some(30));
    assert!(nc.validate().is_empty(), "{:#?}", nc.validate());

    // A provider block we cannot read is reported, not guessed at.
    let unreadable = PROVISIONER.replace("  providerRef:\n    name: default\n", "  provider:\n    bogusField: 1\n");
    let c = convert_yaml(&[&unreadable]);
    assert!(c.nodeclasses.is_empty());
    assert_note(&c, "Provisioner/default", "spec.provider", "could not be read");
}

#[test]
fn provisioner_renames_and_defaults() {
    let yaml = r#"
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: gpu
spec:
  providerRef: {name: gpu}
  annotations:
    karpenter.sh/do-not-consolidate: "true"
    karpenter.sh/do-not-evict: "true"
  requirements:
    - {key: karpenter.sh/provisioner-name, operator: In, values: [gpu]}
    - {key: beta.kubernetes.io/arch, operator: In, values: [arm64]}
"#;
    let c = convert_yaml(&[yaml]);
    let t = &c.nodepools[0].spec.template;
    assert_eq!(t.metadata.annotations.get("karpenter.sh/do-not-disrupt").map(String::as_str), Some("true"));
    assert!(!t.metadata.annotations.contains_key("karpenter.sh/do-not-consolidate"));
    assert_note(
        &c,
        "Provisioner/gpu",
        r#"spec.annotations["karpenter.sh/do-not-consolidate"]"#,
        "renamed to karpenter.sh/do-not-disrupt",
    );
    assert_note(&c, "Provisioner/gpu", r#"spec.annotations["karpenter.sh/do-not-evict"]"#, "pod annotation");
    assert_note(&c, "Provisioner/gpu", "spec.requirements[0]", "karpenter.sh/nodepool");
    assert_note(
        &c,
        "Provisioner/gpu",
        "metadata.name",
        "karpenter.sh/nodepool=gpu instead of karpenter.sh/provisioner-name=gpu",
    );
    let keys: Vec<&str> = t.spec.requirements.iter().map(|r| r.key.as_str()).collect();
    assert!(!keys.contains(&"karpenter.sh/provisioner-name"));
    // v1alpha5's defaulted requirements are made explicit; the beta arch key counts as arch.
    assert!(!keys.contains(&"kubernetes.io/arch"));
    assert!(keys.contains(&"kubernetes.io/os"));
    assert!(keys.contains(&"karpenter.sh/capacity-type"));
    let generation = t.spec.requirements.iter().find(|r| r.key == "karpenter.k8s.aws/instance-generation").unwrap();
    assert_eq!((generation.operator, generation.values.clone()), (Operator::Gt, vec!["2".to_string()]));
    assert_note(&c, "Provisioner/gpu", "spec.requirements", "karpenter.sh/capacity-type In [\"on-demand\"]");
    assert!(c.nodepools[0].validate().is_empty(), "{:#?}", c.nodepools[0].validate());
}

#[test]
fn provisioner_without_provider_points_at_default() {
    let yaml = PROVISIONER.replace("  providerRef:\n    name: default\n", "");
    let c = convert_yaml(&[&yaml]);
    assert_eq!(c.nodepools[0].spec.template.spec.node_class_ref, NodeClassReference::default());
    assert_note(&c, "Provisioner/default", "spec.providerRef", "neither provider nor providerRef");
}

// ---------------------------------------------------------------------------------------------------------------
// v1alpha1 AWSNodeTemplate
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn aws_node_template_selectors_and_family() {
    let yaml = r#"
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: custom
  resourceVersion: "123"
  uid: abc
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: "{}"
    karpenter.k8s.aws/nodetemplate-hash: "42"
    example.com/keep: "yes"
spec:
  subnetSelector:
    aws::ids: subnet-1,subnet-2
  securityGroupSelector:
    karpenter.sh/discovery: my-cluster
    tier: web
  amiSelector:
    aws::name: my-ami-1,my-ami-2
    aws::owners: "123456789012,amazon"
  amiFamily: AL2
  userData: echo hi
  detailedMonitoring: true
status:
  subnets: [{id: subnet-1, zone: us-west-2a}]
"#;
    let c = convert_yaml(&[yaml]);
    let nc = &c.nodeclasses[0];
    assert_eq!(nc.metadata.resource_version, None);
    assert_eq!(nc.metadata.uid, None);
    let annotations = nc.metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations.len(), 1);
    assert_eq!(annotations["example.com/keep"], "yes");
    assert_eq!(nc.spec.subnet_selector_terms.len(), 2);
    assert_eq!(nc.spec.security_group_selector_terms.len(), 1);
    assert_eq!(nc.spec.security_group_selector_terms[0].tags.len(), 2);
    assert_no_note(&c, "AWSNodeTemplate/custom", "spec.securityGroupSelector");
    // names × owners.
    assert_eq!(nc.spec.ami_selector_terms.len(), 4);
    assert!(nc.spec.ami_selector_terms.iter().all(|t| t.name.is_some() && t.owner.is_some()));
    assert_note(&c, "AWSNodeTemplate/custom", "spec.amiSelector", "4 terms");
    assert_eq!(nc.spec.ami_family, Some(AmiFamily::AL2));
    assert_eq!(nc.spec.user_data.as_deref(), Some("echo hi"));
    assert_eq!(nc.spec.detailed_monitoring, Some(true));
    assert_note(&c, "AWSNodeTemplate/custom", "spec.instanceProfile", "defaultInstanceProfile");
    // v1alpha1's metadata defaults differ from v1's: made explicit.
    let mo = nc.spec.metadata_options.as_ref().unwrap();
    assert_eq!(mo.http_put_response_hop_limit, Some(2));
    assert_note(&c, "AWSNodeTemplate/custom", "spec.metadataOptions", "v1 defaults to 1");
}

#[test]
fn aws_node_template_partial_metadata_and_ami_tags() {
    let yaml = r#"
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: partial}
spec:
  instanceProfile: profile
  subnetSelector: {Name: "private-a,private-b"}
  securityGroupSelector: {aws-ids: sg-1}
  amiSelector: {team: a}
  amiFamily: Custom
  metadataOptions: {httpPutResponseHopLimit: 3}
"#;
    let c = convert_yaml(&[yaml]);
    let nc = &c.nodeclasses[0];
    assert_eq!(nc.spec.subnet_selector_terms.len(), 2);
    assert_note(&c, "AWSNodeTemplate/partial", "spec.subnetSelector", "literal in v1");
    assert_eq!(nc.spec.security_group_selector_terms[0].id.as_deref(), Some("sg-1"));
    assert_note(&c, "AWSNodeTemplate/partial", "spec.amiSelector", "no longer add scheduling requirements");
    assert_note(&c, "AWSNodeTemplate/partial", "spec.amiFamily", "karpenter.sh/unregistered:NoExecute");
    let mo = nc.spec.metadata_options.as_ref().unwrap();
    assert_eq!(mo.http_put_response_hop_limit, Some(3));
    // EC2 defaulted the missing httpTokens of a partial block to optional; v1 would require tokens.
    assert_eq!(mo.http_tokens.as_deref(), Some("optional"));
    assert_note(&c, "AWSNodeTemplate/partial", "spec.metadataOptions.httpTokens", "v1 defaults to required");
    assert_no_note(&c, "AWSNodeTemplate/partial", "spec.metadataOptions.httpPutResponseHopLimit");
    assert!(nc.validate().is_empty(), "{:#?}", nc.validate());
}

#[test]
fn aws_node_template_launch_template_has_no_equivalent() {
    let yaml = r#"
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: lt}
spec:
  launchTemplate: my-launch-template
  subnetSelector: {karpenter.sh/discovery: c}
  securityGroupSelector: {karpenter.sh/discovery: c}
"#;
    let c = convert_yaml(&[yaml]);
    assert_note(&c, "AWSNodeTemplate/lt", "spec.launchTemplate", "no v1 equivalent");
    assert_note(&c, "AWSNodeTemplate/lt", "spec.amiFamily", "AL2");
}

// ---------------------------------------------------------------------------------------------------------------
// v1beta1 NodePool
// ---------------------------------------------------------------------------------------------------------------

const NODEPOOL_V1BETA1: &str = r#"
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels: {team: a}
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5], minValues: 2}
      nodeClassRef:
        apiVersion: karpenter.k8s.aws/v1beta1
        kind: EC2NodeClass
        name: default
  limits:
    cpu: 1000
  disruption:
    consolidationPolicy: WhenUnderutilized
    expireAfter: 720h
    budgets:
      - nodes: "20%"
      - nodes: "0"
        schedule: "@daily"
        duration: 10m
"#;

const NODECLASS_V1BETA1: &str = r#"
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiFamily: AL2023
  role: KarpenterNodeRole
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: my-cluster}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: my-cluster}
"#;

#[test]
fn v1beta1_nodepool_conversion() {
    let c = convert_yaml(&[NODEPOOL_V1BETA1, NODECLASS_V1BETA1]);
    let np = &c.nodepools[0];
    let object = "NodePool/default";
    // expireAfter moves into the template.
    assert_eq!(np.spec.template.spec.expire_after.as_str(), "720h");
    assert_note(&c, object, "spec.disruption.expireAfter", "moved to spec.template.spec.expireAfter");
    // WhenUnderutilized → WhenEmptyOrUnderutilized + 0s.
    assert_eq!(np.spec.disruption.consolidation_policy, ConsolidationPolicy::WhenEmptyOrUnderutilized);
    assert_eq!(np.spec.disruption.consolidate_after.as_str(), "0s");
    assert_note(&c, object, "spec.disruption.consolidationPolicy", "WhenEmptyOrUnderutilized");
    // Budgets copied unchanged.
    assert_eq!(np.spec.disruption.budgets.len(), 2);
    assert_eq!(np.spec.disruption.budgets[1].schedule.as_deref(), Some("@daily"));
    assert_no_note(&c, object, "spec.disruption.budgets");
    // nodeClassRef: apiVersion → group.
    assert_eq!(np.spec.template.spec.node_class_ref.group, "karpenter.k8s.aws");
    assert_no_note(&c, object, "spec.template.spec.nodeClassRef");
    assert_eq!(np.spec.template.spec.requirements[1].min_values, Some(2));
    assert_eq!(np.spec.template.metadata.labels["team"], "a");
    assert!(np.validate().is_empty(), "{:#?}", np.validate());
}

#[test]
fn v1beta1_nodepool_defaults_and_odd_cases() {
    let yaml = r#"
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: odd}
spec:
  template:
    spec:
      requirements: []
      nodeClassRef: {name: default}
      resources: {requests: {cpu: "1"}}
  disruption:
    consolidateAfter: Never
"#;
    let c = convert_yaml(&[yaml]);
    let np = &c.nodepools[0];
    let object = "NodePool/odd";
    // Defaulted v1beta1 policy is noted; Never with WhenUnderutilized had no effect and becomes 0s.
    assert_note(&c, object, "spec.disruption", "(the v1beta1 default) is called WhenEmptyOrUnderutilized");
    assert_note(&c, object, "spec.disruption.consolidateAfter", "set consolidateAfter: Never in v1");
    assert_eq!(np.spec.disruption.consolidate_after.as_str(), "0s");
    assert_note(&c, object, "spec.disruption", "(the v1beta1 default)");
    assert_eq!(np.spec.template.spec.node_class_ref, NodeClassReference::default());
    assert_note(&c, object, "spec.template.spec.nodeClassRef", "apiVersion and kind were unset");
    assert_note(&c, object, "spec.template.spec.resources", "dropped");

    let when_empty = r#"
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: empty}
spec:
  template:
    spec:
      requirements: []
      nodeClassRef: {apiVersion: karpenter.k8s.aws/v1beta1, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5m
    expireAfter: Never
"#;
    let c = convert_yaml(&[when_empty]);
    let np = &c.nodepools[0];
    assert_eq!(np.spec.disruption.consolidation_policy, ConsolidationPolicy::WhenEmpty);
    assert_eq!(np.spec.disruption.consolidate_after.as_str(), "5m");
    assert!(np.spec.template.spec.expire_after.is_never());
    assert!(c.notes.is_empty(), "nothing changes meaning: {:#?}", c.notes);
}

#[test]
fn v1beta1_kubelet_moves_and_clones_on_conflict() {
    let with_kubelet = |name: &str, max_pods: Option<u32>| {
        let kubelet = max_pods.map(|m| format!("      kubelet:\n        maxPods: {m}\n")).unwrap_or_default();
        NODEPOOL_V1BETA1
            .replace("name: default\nspec:", &format!("name: {name}\nspec:"))
            .replace("    spec:\n      requirements:", &format!("    spec:\n{kubelet}      requirements:"))
    };
    let a = with_kubelet("a", Some(10));
    let b = with_kubelet("b", Some(20));
    let d = with_kubelet("d", Some(10));
    let e = with_kubelet("e", None);
    let c = convert_yaml(&[&a, &b, &d, &e, NODECLASS_V1BETA1]);
    let names: Vec<&str> = c.nodeclasses.iter().map(|nc| nc.name()).collect();
    assert_eq!(names, ["default", "default-b", "default-e"]);
    assert_eq!(c.nodeclasses[0].spec.kubelet.as_ref().unwrap().max_pods, Some(10));
    assert_eq!(c.nodeclasses[1].spec.kubelet.as_ref().unwrap().max_pods, Some(20));
    assert_eq!(c.nodeclasses[2].spec.kubelet, None);
    let refs: Vec<&str> = c.nodepools.iter().map(|np| np.spec.template.spec.node_class_ref.name.as_str()).collect();
    assert_eq!(refs, ["default", "default-b", "default", "default-e"]);
    assert_note(&c, "NodePool/a", "spec.template.spec.kubelet", "moved to EC2NodeClass/default");
    assert_note(&c, "NodePool/b", "spec.template.spec.kubelet", "EC2NodeClass/default-b was created");
    assert_note(&c, "NodePool/e", "spec", "copy without them");
    for nc in &c.nodeclasses {
        assert!(nc.validate().is_empty(), "{}: {:#?}", nc.name(), nc.validate());
    }
}

// ---------------------------------------------------------------------------------------------------------------
// v1beta1 EC2NodeClass
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn v1beta1_nodeclass_family_becomes_alias() {
    let c = convert_yaml(&[NODECLASS_V1BETA1]);
    let nc = &c.nodeclasses[0];
    assert_eq!(nc.api_version, "karpenter.k8s.aws/v1");
    assert_eq!(nc.spec.ami_family, None);
    assert_eq!(nc.spec.ami_selector_terms[0].alias.as_deref(), Some("al2023@latest"));
    assert_eq!(nc.spec.resolved_ami_family(), AmiFamily::AL2023);
    assert_note(&c, "EC2NodeClass/default", "spec.amiFamily", "al2023@latest");
    // v1beta1's default hop limit 2 is kept explicitly.
    assert_eq!(nc.spec.metadata_options.as_ref().unwrap().http_put_response_hop_limit, Some(2));
    assert_note(
        &c,
        "EC2NodeClass/default",
        "spec.metadataOptions",
        "httpPutResponseHopLimit was not set, so v1beta1 used 2",
    );
    assert!(nc.validate().is_empty(), "{:#?}", nc.validate());

    // With terms, the family stays and nothing is noted about it.
    let with_terms = format!(
        "{NODECLASS_V1BETA1}  amiSelectorTerms:\n    - id: ami-0123\n  metadataOptions:\n    httpEndpoint: enabled\n    httpProtocolIPv6: disabled\n    httpPutResponseHopLimit: 1\n    httpTokens: required\n"
    );
    let c = convert_yaml(&[&with_terms]);
    let nc = &c.nodeclasses[0];
    assert_eq!(nc.spec.ami_family, Some(AmiFamily::AL2023));
    assert_eq!(nc.spec.ami_selector_terms[0].id.as_deref(), Some("ami-0123"));
    assert!(c.notes.is_empty(), "{:#?}", c.notes);
}

#[test]
fn v1beta1_nodeclass_ubuntu_and_unknown_families() {
    let ubuntu = NODECLASS_V1BETA1.replace("amiFamily: AL2023", "amiFamily: Ubuntu");
    let c = convert_yaml(&[&ubuntu]);
    let nc = &c.nodeclasses[0];
    assert_eq!(nc.spec.ami_family, Some(AmiFamily::AL2));
    assert_eq!(nc.spec.block_device_mappings[0].device_name.as_deref(), Some("/dev/sda1"));
    assert!(nc.spec.block_device_mappings[0].root_volume);
    assert_eq!(nc.spec.ami_selector_terms[0].id.as_deref(), Some("ami-placeholder"));
    assert_note(&c, "EC2NodeClass/default", "spec.amiFamily", "Ubuntu is not a v1 family");
    assert_note(&c, "EC2NodeClass/default", "spec.amiFamily", "placeholder");

    let custom = NODECLASS_V1BETA1.replace("amiFamily: AL2023", "amiFamily: Custom");
    let c = convert_yaml(&[&custom]);
    assert_eq!(c.nodeclasses[0].spec.ami_family, Some(AmiFamily::Custom));
    assert_note(&c, "EC2NodeClass/default", "spec.amiSelectorTerms", "needs AMI selector terms");

    let unknown = NODECLASS_V1BETA1.replace("amiFamily: AL2023", "amiFamily: Gentoo");
    let c = convert_yaml(&[&unknown]);
    assert_eq!(c.nodeclasses[0].spec.ami_family, Some(AmiFamily::Custom));
    assert_note(&c, "EC2NodeClass/default", "spec.amiFamily", "\"Gentoo\" is not a v1 family");

    let no_identity = NODECLASS_V1BETA1.replace("  role: KarpenterNodeRole\n", "");
    let c = convert_yaml(&[&no_identity]);
    assert_note(&c, "EC2NodeClass/default", "spec.role", "neither role nor instanceProfile");
}

// ---------------------------------------------------------------------------------------------------------------
// Batches
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn name_collisions_between_generations_rename_the_older_object() {
    let c = convert_yaml(&[PROVISIONER, AWS_NODE_TEMPLATE, NODEPOOL_V1BETA1, NODECLASS_V1BETA1]);
    let pools: Vec<&str> = c.nodepools.iter().map(|np| np.name()).collect();
    assert_eq!(pools, ["default-v1alpha5", "default"]);
    let classes: Vec<&str> = c.nodeclasses.iter().map(|nc| nc.name()).collect();
    assert_eq!(classes, ["default-v1alpha1", "default"]);
    assert_eq!(c.nodepools[0].spec.template.spec.node_class_ref.name, "default-v1alpha1");
    assert_note(&c, "Provisioner/default", "metadata.name", "renamed \"default-v1alpha5\"");
    assert_note(&c, "AWSNodeTemplate/default", "metadata.name", "renamed \"default-v1alpha1\"");
}

#[test]
fn legacy_objects_parse_strictly_and_display() {
    let bad = PROVISIONER.replace("weight: 50", "wieght: 50");
    let value: serde_json::Value = serde_yaml::from_str(&bad).unwrap();
    assert!(matches!(LegacyObject::from_value(value), Err(LegacyError::Invalid { .. })));
    let v1: serde_json::Value = serde_yaml::from_str("apiVersion: karpenter.sh/v1\nkind: NodePool\n").unwrap();
    assert!(matches!(LegacyObject::from_value(v1), Err(LegacyError::NotLegacy { .. })));
    assert!(LegacyObject::is_legacy("karpenter.sh/v1alpha5", "Provisioner"));
    assert!(!LegacyObject::is_legacy("karpenter.sh/v1", "NodePool"));
    assert_eq!(legacy(PROVISIONER).display_name(), "Provisioner/default");
    let note =
        ConversionNote { object: "Provisioner/default".into(), field: "spec.weight".into(), message: "m".into() };
    assert_eq!(note.to_string(), "Provisioner/default spec.weight: m");
    // The converted objects print as v1 YAML and load back.
    let c = convert_yaml(&[PROVISIONER, AWS_NODE_TEMPLATE]);
    let yaml = serde_yaml::to_string(&c.nodepools[0]).unwrap();
    assert!(yaml.contains("apiVersion: karpenter.sh/v1\n") && yaml.contains("expireAfter: Never"), "{yaml}");
    assert_eq!(serde_yaml::from_str::<NodePool>(&yaml).unwrap(), c.nodepools[0]);
    let yaml = serde_yaml::to_string(&c.nodeclasses[0]).unwrap();
    assert_eq!(serde_yaml::from_str::<EC2NodeClass>(&yaml).unwrap(), c.nodeclasses[0]);
}
