//! Tests of the v1 API types: CRD defaults, round trips, and one failing and one passing case per validation rule.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;

use super::ec2nodeclass::*;
use super::nodeclaim::{NodeClaim, NodeClaimSpec, NodeClassReference};
use super::nodepool::*;
use super::validation::{Rule, Validate, ValidateUpdate};
use super::{Duration, NillableDuration};
use crate::quantity::Quantity;
use crate::requirements::{NodeSelectorRequirementWithMinValues, Operator};

const MINIMAL_NODEPOOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
"#;

fn minimal_nodepool() -> NodePool {
    serde_yaml::from_str(MINIMAL_NODEPOOL).expect("minimal NodePool parses")
}

fn rules<T: Validate>(object: &T) -> Vec<Rule> {
    object.validate().into_iter().map(|e| e.rule).collect()
}

/// Asserts the object passes validation.
fn assert_valid<T: Validate + std::fmt::Debug>(object: &T) {
    let errors = object.validate();
    assert!(errors.is_empty(), "expected no errors, got {errors:#?}");
}

/// Asserts `rule` is reported, and returns the errors for further checks.
fn assert_rule<T: Validate>(object: &T, rule: Rule) -> Vec<super::FieldError> {
    let errors = object.validate();
    assert!(errors.iter().any(|e| e.rule == rule), "expected {rule:?}, got {errors:#?}");
    errors
}

fn req(key: &str, operator: Operator, values: &[&str]) -> NodeSelectorRequirementWithMinValues {
    NodeSelectorRequirementWithMinValues {
        key: key.to_string(),
        operator,
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    }
}

fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
    Taint { key: key.to_string(), value: value.map(str::to_string), effect: effect.to_string(), time_added: None }
}

// ---------------------------------------------------------------------------------------------------------------
// NodePool: defaults and round trip
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn nodepool_crd_defaults_are_applied_on_load() {
    let np = minimal_nodepool();
    assert_eq!(np.spec.template.spec.expire_after.as_str(), "720h");
    assert_eq!(np.spec.template.spec.expire_after.as_seconds(), Some(720 * 3600));
    assert_eq!(np.spec.disruption.consolidate_after.as_str(), "0s");
    assert_eq!(np.spec.disruption.consolidation_policy, ConsolidationPolicy::WhenEmptyOrUnderutilized);
    assert_eq!(np.spec.disruption.budgets, vec![Budget { nodes: "10%".to_string(), ..Budget::default() }]);
    assert_eq!(np.spec.weight, None);
    assert!(np.spec.limits.is_empty());
    assert_eq!(np.spec, NodePoolSpec { template: np.spec.template.clone(), ..NodePoolSpec::default() });
    assert_valid(&np);

    // A partial disruption block gets the per-field defaults; a budget without nodes gets 10%.
    let partial: NodePool = serde_yaml::from_str(&MINIMAL_NODEPOOL.replace(
        "spec:\n  template:",
        "spec:\n  disruption:\n    consolidationPolicy: WhenEmpty\n    budgets:\n      - schedule: \"@daily\"\n        duration: 10m\n  template:",
    ))
    .unwrap();
    assert_eq!(partial.spec.disruption.consolidate_after.as_str(), "0s");
    assert_eq!(partial.spec.disruption.consolidation_policy, ConsolidationPolicy::WhenEmpty);
    assert_eq!(partial.spec.disruption.budgets[0].nodes, "10%");
    assert_eq!(partial.spec.disruption.budgets[0].duration.as_ref().unwrap().as_str(), "10m");
    // Explicit empty budgets stay empty (the API server only defaults absent fields).
    let empty: NodePool = serde_yaml::from_str(
        &MINIMAL_NODEPOOL.replace("spec:\n  template:", "spec:\n  disruption:\n    budgets: []\n  template:"),
    )
    .unwrap();
    assert!(empty.spec.disruption.budgets.is_empty());
}

#[test]
fn nodepool_prints_defaulted_and_round_trips() {
    let np = minimal_nodepool();
    let yaml = serde_yaml::to_string(&np).unwrap();
    for expected in
        ["expireAfter: 720h", "consolidateAfter: 0s", "consolidationPolicy: WhenEmptyOrUnderutilized", "nodes: 10%"]
    {
        assert!(yaml.contains(expected), "{expected} missing from\n{yaml}");
    }
    // kubectl prints keys sorted; so do we.
    let disruption = yaml.find("disruption:").unwrap();
    assert!(disruption < yaml.find("template:").unwrap());
    let back: NodePool = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(back, np);
    let json = serde_json::to_string(&np).unwrap();
    assert_eq!(serde_json::from_str::<NodePool>(&json).unwrap(), np);

    // A full object with every optional field set round-trips too.
    let mut full = np.clone();
    full.spec.weight = Some(10);
    full.spec.limits.insert("cpu".to_string(), Quantity::parse("1000").unwrap());
    full.spec.template.metadata.labels.insert("team".to_string(), "a".to_string());
    full.spec.template.metadata.annotations.insert("note".to_string(), "x".to_string());
    full.spec.template.spec.taints.push(taint("example.com/gpu", Some("true"), "NoSchedule"));
    full.spec.template.spec.startup_taints.push(taint("example.com/init", None, "NoExecute"));
    full.spec.template.spec.termination_grace_period = Some(Duration::parse("48h").unwrap());
    full.spec.template.spec.expire_after = NillableDuration::never();
    full.spec.disruption.budgets.push(Budget {
        duration: Some(Duration::parse("1h30m").unwrap()),
        nodes: "0".to_string(),
        reasons: vec![BudgetReason::Drifted, BudgetReason::Empty],
        schedule: Some("0 9 * * mon-fri".to_string()),
    });
    full.status = Some(NodePoolStatus { nodes: Some(3), ..NodePoolStatus::default() });
    assert_valid(&full);
    let yaml = serde_yaml::to_string(&full).unwrap();
    assert_eq!(serde_yaml::from_str::<NodePool>(&yaml).unwrap(), full);
}

#[test]
fn nodepool_rejects_unknown_fields_and_bad_durations_on_load() {
    let typo = MINIMAL_NODEPOOL.replace("requirements:", "requirement:");
    assert!(serde_yaml::from_str::<NodePool>(&typo).is_err());
    let bad_field = MINIMAL_NODEPOOL.replace("spec:\n  template:", "spec:\n  disruptions: {}\n  template:");
    assert!(serde_yaml::from_str::<NodePool>(&bad_field).is_err());
    let bad_duration =
        MINIMAL_NODEPOOL.replace("spec:\n  template:", "spec:\n  disruption:\n    consolidateAfter: 1d\n  template:");
    assert!(serde_yaml::from_str::<NodePool>(&bad_duration).is_err());
    let bad_policy = MINIMAL_NODEPOOL
        .replace("spec:\n  template:", "spec:\n  disruption:\n    consolidationPolicy: WhenUnderutilized\n  template:");
    assert!(serde_yaml::from_str::<NodePool>(&bad_policy).is_err());
    let bad_reason = MINIMAL_NODEPOOL
        .replace("spec:\n  template:", "spec:\n  disruption:\n    budgets:\n      - reasons: [Expired]\n  template:");
    assert!(serde_yaml::from_str::<NodePool>(&bad_reason).is_err());
}

// ---------------------------------------------------------------------------------------------------------------
// NodePool: validation rules
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn type_meta_and_name() {
    let mut np = minimal_nodepool();
    np.api_version = "karpenter.sh/v1beta1".to_string();
    assert_rule(&np, Rule::TypeMeta);
    let mut np = minimal_nodepool();
    np.metadata.name = None;
    assert_rule(&np, Rule::MetadataName);
}

#[test]
fn template_labels() {
    let with_label = |k: &str, v: &str| {
        let mut np = minimal_nodepool();
        np.spec.template.metadata.labels.insert(k.to_string(), v.to_string());
        np
    };
    assert_valid(&with_label("team", "a"));
    assert_valid(&with_label("node-role.kubernetes.io/worker", ""));
    assert_valid(&with_label("karpenter.sh/capacity-type", "spot"));
    assert_valid(&with_label("karpenter.k8s.aws/instance-family", "m5"));

    let errors = assert_rule(&with_label("team", "a b"), Rule::LabelValue);
    assert_eq!(errors[0].path, r#"spec.template.metadata.labels["team"]"#);
    assert_rule(&with_label("team", &"x".repeat(64)), Rule::LabelValue);
    assert_rule(&with_label("bad key!", "a"), Rule::LabelKeyQualifiedName);
    assert_rule(&with_label("karpenter.sh/custom", "a"), Rule::KarpenterDomainRestricted);
    assert_rule(&with_label("sub.karpenter.sh/custom", "a"), Rule::KarpenterDomainRestricted);
    assert_rule(&with_label("karpenter.sh/nodepool", "a"), Rule::NodePoolLabelRestricted);
    assert_rule(&with_label("kubernetes.io/hostname", "a"), Rule::HostnameLabelRestricted);
    assert_rule(&with_label("karpenter.k8s.aws/custom", "a"), Rule::RestrictedLabel);
    // One report per problem: the CEL rule, not also the runtime check.
    assert_eq!(with_label("karpenter.sh/custom", "a").validate().len(), 1);

    let mut np = minimal_nodepool();
    for i in 0..101 {
        np.spec.template.metadata.labels.insert(format!("l{i}"), "v".to_string());
    }
    assert_rule(&np, Rule::LabelsMaxProperties);
    np.spec.template.metadata.labels.remove("l0");
    assert_valid(&np);
}

#[test]
fn taints() {
    let with_taints = |taints: Vec<Taint>, startup: Vec<Taint>| {
        let mut np = minimal_nodepool();
        np.spec.template.spec.taints = taints;
        np.spec.template.spec.startup_taints = startup;
        np
    };
    assert_valid(&with_taints(
        vec![taint("example.com/a", Some("x"), "NoSchedule"), taint("example.com/a", None, "NoExecute")],
        vec![taint("example.com/b", None, "PreferNoSchedule")],
    ));
    let errors = assert_rule(&with_taints(vec![taint("", None, "NoSchedule")], vec![]), Rule::TaintKey);
    assert_eq!(errors[0].path, "spec.template.spec.taints[0].key");
    assert_rule(&with_taints(vec![taint("a b", None, "NoSchedule")], vec![]), Rule::TaintKey);
    assert_rule(&with_taints(vec![taint("a", Some("no good"), "NoSchedule")], vec![]), Rule::TaintValue);
    let errors = assert_rule(&with_taints(vec![], vec![taint("a", None, "Sometimes")]), Rule::TaintEffect);
    assert_eq!(errors[0].path, "spec.template.spec.startupTaints[0].effect");
    assert_rule(&with_taints(vec![taint("a", None, "")], vec![]), Rule::TaintEffect);
    // Duplicates across taints and startupTaints.
    let errors = assert_rule(
        &with_taints(vec![taint("a", Some("1"), "NoSchedule")], vec![taint("a", Some("2"), "NoSchedule")]),
        Rule::TaintDuplicate,
    );
    assert_eq!(errors[0].path, "spec.template.spec.startupTaints[0]");
}

#[test]
fn requirements() {
    let with_reqs = |reqs: Vec<NodeSelectorRequirementWithMinValues>| {
        let mut np = minimal_nodepool();
        np.spec.template.spec.requirements = reqs;
        np
    };
    assert_valid(&with_reqs(vec![]));
    assert_valid(&with_reqs(vec![
        req("kubernetes.io/arch", Operator::In, &["amd64", "arm64"]),
        req("karpenter.k8s.aws/instance-cpu", Operator::Gt, &["3"]),
        req("karpenter.k8s.aws/instance-memory", Operator::Lte, &["65536"]),
        req("example.com/team", Operator::Exists, &[]),
        req("example.com/other", Operator::NotIn, &[]),
        NodeSelectorRequirementWithMinValues {
            min_values: Some(2),
            ..req("karpenter.k8s.aws/instance-family", Operator::In, &["m5", "c5"])
        },
    ]));

    let errors = assert_rule(&with_reqs(vec![req("example.com/a", Operator::In, &[])]), Rule::RequirementInNeedsValue);
    assert_eq!(errors[0].path, "spec.template.spec.requirements[0].values");
    for values in [&[][..], &["1", "2"], &["-1"], &["one"], &["1.5"]] {
        assert_rule(&with_reqs(vec![req("example.com/a", Operator::Gt, values)]), Rule::RequirementNumericValue);
    }
    assert_rule(&with_reqs(vec![req("example.com/a", Operator::Gte, &["x"])]), Rule::RequirementNumericValue);
    assert_valid(&with_reqs(vec![req("example.com/a", Operator::Lt, &["0"])]));

    let min = |n: i64, values: &[&str]| NodeSelectorRequirementWithMinValues {
        min_values: Some(n),
        ..req("example.com/a", Operator::In, values)
    };
    assert_rule(&with_reqs(vec![min(3, &["a", "b"])]), Rule::RequirementMinValuesExceedValues);
    assert_rule(&with_reqs(vec![min(0, &["a"])]), Rule::RequirementMinValuesRange);
    assert_rule(&with_reqs(vec![min(51, &["a"; 51])]), Rule::RequirementMinValuesRange);
    assert_valid(&with_reqs(vec![min(50, &["a"; 50])]));

    assert_rule(&with_reqs(vec![req("bad key!", Operator::Exists, &[])]), Rule::RequirementKey);
    let longest = format!("{}/{}", "a".repeat(253), "b".repeat(62));
    assert_eq!(longest.len(), 316);
    assert_valid(&with_reqs(vec![req(&longest, Operator::Exists, &[])]));
    let too_long = format!("{}/{}", "a".repeat(253), "b".repeat(63));
    let errors = assert_rule(&with_reqs(vec![req(&too_long, Operator::Exists, &[])]), Rule::RequirementKey);
    assert!(errors[0].message.contains("316"), "{}", errors[0].message);
    assert_rule(
        &with_reqs(vec![req(&format!("example.com/{}", "b".repeat(64)), Operator::Exists, &[])]),
        Rule::RequirementKey,
    );
    assert_rule(&with_reqs(vec![req("example.com/a", Operator::In, &["not valid"])]), Rule::RequirementValue);
    assert_rule(&with_reqs(vec![req("karpenter.sh/nodepool", Operator::In, &["a"])]), Rule::NodePoolLabelRestricted);
    assert_rule(&with_reqs(vec![req("kubernetes.io/hostname", Operator::In, &["a"])]), Rule::HostnameLabelRestricted);
    assert_rule(&with_reqs(vec![req("karpenter.sh/foo", Operator::Exists, &[])]), Rule::KarpenterDomainRestricted);
    assert_rule(&with_reqs(vec![req("karpenter.k8s.aws/foo", Operator::Exists, &[])]), Rule::RestrictedLabel);

    // Well-known values: only invalid values fail; mixed values pass.
    assert_rule(&with_reqs(vec![req("karpenter.sh/capacity-type", Operator::In, &["cheap"])]), Rule::WellKnownValues);
    assert_valid(&with_reqs(vec![req("karpenter.sh/capacity-type", Operator::In, &["cheap", "spot"])]));
    assert_valid(&with_reqs(vec![req("karpenter.sh/capacity-type", Operator::NotIn, &["cheap"])]));
    assert_rule(
        &with_reqs(vec![NodeSelectorRequirementWithMinValues {
            min_values: Some(2),
            ..req("karpenter.sh/capacity-type", Operator::In, &["cheap", "spot"])
        }]),
        Rule::WellKnownValues,
    );

    assert_rule(&with_reqs(vec![req("example.com/a", Operator::Exists, &[]); 101]), Rule::RequirementsMaxItems);
    assert_valid(&with_reqs(vec![req("example.com/a", Operator::Exists, &[]); 100]));
}

#[test]
fn node_class_ref() {
    let with_ref = |group: &str, kind: &str, name: &str| {
        let mut np = minimal_nodepool();
        np.spec.template.spec.node_class_ref =
            NodeClassReference { group: group.to_string(), kind: kind.to_string(), name: name.to_string() };
        np
    };
    assert_valid(&with_ref("karpenter.k8s.aws", "EC2NodeClass", "x"));
    assert_rule(&with_ref("", "EC2NodeClass", "x"), Rule::NodeClassRefGroup);
    assert_rule(&with_ref("karpenter.k8s.aws/v1", "EC2NodeClass", "x"), Rule::NodeClassRefGroup);
    assert_rule(&with_ref("karpenter.k8s.aws", "", "x"), Rule::NodeClassRefKind);
    assert_rule(&with_ref("karpenter.k8s.aws", "EC2NodeClass", ""), Rule::NodeClassRefName);

    let old = minimal_nodepool();
    assert!(old.validate_update(&old).is_empty());
    let mut renamed = old.clone();
    renamed.spec.template.spec.node_class_ref.name = "other".to_string();
    assert!(renamed.validate_update(&old).is_empty(), "the name may change");
    let regrouped = with_ref("example.com", "EC2NodeClass", "default");
    assert_eq!(regrouped.validate_update(&old)[0].rule, Rule::NodeClassRefGroupImmutable);
    let rekinded = with_ref("karpenter.k8s.aws", "Other", "default");
    assert_eq!(rekinded.validate_update(&old)[0].rule, Rule::NodeClassRefKindImmutable);
}

#[test]
fn durations() {
    let mut np = minimal_nodepool();
    np.spec.template.spec.termination_grace_period = Some(Duration::parse("1h30m").unwrap());
    np.spec.template.spec.expire_after = NillableDuration::parse("Never").unwrap();
    np.spec.disruption.consolidate_after = NillableDuration::parse("Never").unwrap();
    assert_valid(&np);

    np.spec.template.spec.termination_grace_period = Some(Duration::parse("1.5h").unwrap());
    assert_rule(&np, Rule::TerminationGracePeriodPattern);
    np.spec.template.spec.termination_grace_period = Some(Duration::parse("300ms").unwrap());
    assert_rule(&np, Rule::TerminationGracePeriodPattern);
    np.spec.template.spec.termination_grace_period = None;

    np.spec.template.spec.expire_after = NillableDuration::parse("-1h").unwrap();
    let errors = assert_rule(&np, Rule::ExpireAfterPattern);
    assert_eq!(errors[0].path, "spec.template.spec.expireAfter");
    np.spec.template.spec.expire_after = NillableDuration::parse("720h").unwrap();

    np.spec.disruption.consolidate_after = NillableDuration::parse("0").unwrap();
    let errors = assert_rule(&np, Rule::ConsolidateAfterPattern);
    assert_eq!(errors[0].path, "spec.disruption.consolidateAfter");
    np.spec.disruption.consolidate_after = NillableDuration::parse("30s").unwrap();
    assert_valid(&np);
}

#[test]
fn budgets() {
    let with_budget = |nodes: &str, schedule: Option<&str>, duration: Option<&str>| {
        let mut np = minimal_nodepool();
        np.spec.disruption.budgets = vec![Budget {
            duration: duration.map(|d| Duration::parse(d).unwrap()),
            nodes: nodes.to_string(),
            reasons: vec![],
            schedule: schedule.map(str::to_string),
        }];
        np
    };
    assert_valid(&with_budget("0", Some("@daily"), Some("10m")));
    assert_valid(&with_budget("100%", Some("0 9 * * mon-fri"), Some("8h")));
    assert_valid(&with_budget("5", None, None));

    for bad in ["101%", "10.5%", "-1", "ten", ""] {
        let errors = assert_rule(&with_budget(bad, None, None), Rule::BudgetNodes);
        assert_eq!(errors[0].path, "spec.disruption.budgets[0].nodes");
    }
    assert_rule(&with_budget("10%", Some("@daily"), None), Rule::BudgetScheduleWithDuration);
    assert_rule(&with_budget("10%", None, Some("10m")), Rule::BudgetScheduleWithDuration);
    assert_rule(&with_budget("10%", Some("daily"), Some("10m")), Rule::BudgetSchedulePattern);
    assert_rule(&with_budget("10%", Some("@every 5m"), Some("10m")), Rule::BudgetSchedulePattern);
    // Matches the CRD pattern, but cron rejects it.
    assert_rule(&with_budget("10%", Some("61 * * * *"), Some("10m")), Rule::BudgetScheduleCron);
    assert_rule(&with_budget("10%", Some("* * * * * *"), Some("10m")), Rule::BudgetScheduleCron);
    assert_rule(&with_budget("10%", Some("@dailyish"), Some("10m")), Rule::BudgetScheduleCron);
    assert_rule(&with_budget("10%", Some("@daily"), Some("30s")), Rule::BudgetDurationPattern);
    assert_valid(&with_budget("10%", Some("@daily"), Some("1h30m0s")));

    let mut np = with_budget("10%", None, None);
    np.spec.disruption.budgets[0].reasons = vec![BudgetReason::Empty, BudgetReason::Empty];
    assert_rule(&np, Rule::BudgetReasonsUnique);
    np.spec.disruption.budgets[0].reasons = vec![BudgetReason::Empty, BudgetReason::Underutilized];
    assert_valid(&np);

    let mut np = minimal_nodepool();
    np.spec.disruption.budgets = vec![Budget::default(); 51];
    assert_rule(&np, Rule::BudgetsMaxItems);
    np.spec.disruption.budgets.pop();
    assert_valid(&np);
}

#[test]
fn weight_and_static_nodepools() {
    let mut np = minimal_nodepool();
    for ok in [1, 100] {
        np.spec.weight = Some(ok);
        assert_valid(&np);
    }
    for bad in [0, 101, -5] {
        np.spec.weight = Some(bad);
        assert_rule(&np, Rule::WeightRange);
    }

    let mut np = minimal_nodepool();
    np.spec.replicas = Some(3);
    np.spec.limits.insert("nodes".to_string(), Quantity::from_units(5));
    assert_valid(&np);
    assert!(np.is_static());
    np.spec.replicas = Some(-1);
    assert_rule(&np, Rule::ReplicasMinimum);
    np.spec.replicas = Some(1);
    np.spec.limits.insert("cpu".to_string(), Quantity::from_units(5));
    assert_rule(&np, Rule::StaticLimits);
    np.spec.limits.remove("cpu");
    np.spec.weight = Some(10);
    assert_rule(&np, Rule::StaticWeight);

    let dynamic = minimal_nodepool();
    let mut stat = dynamic.clone();
    stat.spec.replicas = Some(2);
    assert_eq!(stat.validate_update(&dynamic)[0].rule, Rule::ReplicasTransition);
    assert_eq!(dynamic.validate_update(&stat)[0].rule, Rule::ReplicasTransition);
}

#[test]
fn limits_exceeded_by() {
    let mut np = minimal_nodepool();
    np.spec.limits.insert("cpu".to_string(), Quantity::from_units(10));
    let usage: crate::resources::ResourceList =
        [("cpu".to_string(), Quantity::from_units(11)), ("memory".to_string(), Quantity::from_gibibytes(1))].into();
    let (name, used, limit) = np.spec.limits.exceeded_by(&usage).unwrap();
    assert_eq!((name.as_str(), used, limit), ("cpu", Quantity::from_units(11), Quantity::from_units(10)));
    np.spec.limits.insert("cpu".to_string(), Quantity::from_units(11));
    assert!(np.spec.limits.exceeded_by(&usage).is_none());
}

// ---------------------------------------------------------------------------------------------------------------
// NodeClaim
// ---------------------------------------------------------------------------------------------------------------

const MINIMAL_NODECLAIM: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abcde
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
    - {key: karpenter.sh/nodepool, operator: In, values: [default]}
  resources:
    requests: {cpu: 1500m, memory: 2Gi}
status:
  providerID: aws:///us-west-2a/i-0123
  nodeName: ip-10-0-0-1.ec2.internal
  imageID: ami-0123
  conditions:
    - {type: Launched, status: "True", lastTransitionTime: "2026-01-01T00:00:00Z", reason: Launched, message: ""}
"#;

#[test]
fn nodeclaim_defaults_validation_and_immutability() {
    let nc: NodeClaim = serde_yaml::from_str(MINIMAL_NODECLAIM).unwrap();
    assert_eq!(nc.spec.expire_after.as_str(), "720h");
    assert_eq!(nc.spec.resources.requests["cpu"], Quantity::from_millis(1500));
    let status = nc.status.as_ref().unwrap();
    assert_eq!(status.provider_id, "aws:///us-west-2a/i-0123");
    assert!(super::find_condition(&status.conditions, "Launched").unwrap().is_true());
    // NodeClaims may use karpenter.sh/nodepool in requirements.
    assert_valid(&nc);
    let yaml = serde_yaml::to_string(&nc).unwrap();
    assert!(yaml.contains("providerID:") && yaml.contains("imageID:"));
    assert_eq!(serde_yaml::from_str::<NodeClaim>(&yaml).unwrap(), nc);

    let mut bad = nc.clone();
    bad.spec.requirements.push(req("kubernetes.io/hostname", Operator::In, &["a"]));
    bad.spec.requirements.push(req("karpenter.sh/other", Operator::Exists, &[]));
    bad.spec.taints.push(taint("a", None, "Never"));
    let found = rules(&bad);
    assert!(found.contains(&Rule::HostnameLabelRestricted));
    assert!(found.contains(&Rule::KarpenterDomainRestricted));
    assert!(found.contains(&Rule::TaintEffect));

    assert!(nc.validate_update(&nc).is_empty());
    let mut changed = nc.clone();
    changed.spec.taints.push(taint("a", None, "NoSchedule"));
    assert_eq!(changed.validate_update(&nc)[0].rule, Rule::NodeClaimSpecImmutable);
    let mut status_only = nc.clone();
    status_only.status = None;
    assert!(status_only.validate_update(&nc).is_empty());

    // A template's NodeClaim carries the template's labels and spec.
    let mut np = minimal_nodepool();
    np.spec.template.metadata.labels.insert("team".to_string(), "a".to_string());
    let from_template = np.spec.template.to_node_claim();
    assert_eq!(from_template.metadata.labels.unwrap()["team"], "a");
    assert_eq!(from_template.spec.requirements, np.spec.template.spec.requirements);
    assert_eq!(NodeClaimSpec::default().expire_after.as_str(), "720h");
}

// ---------------------------------------------------------------------------------------------------------------
// EC2NodeClass
// ---------------------------------------------------------------------------------------------------------------

const MINIMAL_NODECLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-my-cluster
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: my-cluster}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: my-cluster}
"#;

fn minimal_nodeclass() -> EC2NodeClass {
    serde_yaml::from_str(MINIMAL_NODECLASS).expect("minimal EC2NodeClass parses")
}

fn nodeclass(spec: EC2NodeClassSpec) -> EC2NodeClass {
    EC2NodeClass::new("test", spec)
}

#[test]
fn pinning_an_ami_alias_is_validated_as_the_api_server_would() {
    let nc = minimal_nodeclass();
    let pinned = nc.with_ami_alias(" al2023@v20250101 ").expect("a well-formed alias");
    assert_eq!(pinned.spec.alias(), Some("al2023@v20250101"));
    assert_eq!(pinned.spec.ami_selector_terms.len(), 1);
    assert!(pinned.status.is_none());
    let malformed = nc.with_ami_alias("latest").unwrap_err();
    assert!(malformed.iter().all(|e| e.path == "spec.amiSelectorTerms[0].alias"), "{malformed:?}");
    assert!(malformed.iter().any(|e| e.message.contains("family@version")), "{malformed:?}");
    assert!(nc.with_ami_alias("windows2022@v1").unwrap_err().iter().any(|e| e.rule == Rule::AmiAliasWindowsVersion));
    // The family must agree with an explicit amiFamily.
    let mut bottlerocket = nc.clone();
    bottlerocket.spec.ami_family = Some(AmiFamily::Bottlerocket);
    assert!(bottlerocket.with_ami_alias("bottlerocket@v1.20.0").is_ok());
    let mismatch = bottlerocket.with_ami_alias("al2023@v20250101").unwrap_err();
    assert!(mismatch.iter().any(|e| e.message.contains("amiFamily must be")), "{mismatch:?}");
}

#[test]
fn nodeclass_defaults_and_round_trip() {
    let nc = minimal_nodeclass();
    assert_eq!(nc.spec.metadata_options, Some(MetadataOptions::default()));
    let mo = nc.spec.metadata_options.as_ref().unwrap();
    assert_eq!(mo.http_endpoint.as_deref(), Some("enabled"));
    assert_eq!(mo.http_protocol_ipv6.as_deref(), Some("disabled"));
    assert_eq!(mo.http_put_response_hop_limit, Some(1));
    assert_eq!(mo.http_tokens.as_deref(), Some("required"));
    assert_eq!(nc.spec.resolved_ami_family(), AmiFamily::AL2023);
    assert_valid(&nc);
    assert_valid(&nodeclass(EC2NodeClassSpec::default()));
    assert_eq!(EC2NodeClassSpec::default().resolved_ami_family(), AmiFamily::AL2023);

    // A partial block gets the field defaults.
    let partial: EC2NodeClass =
        serde_yaml::from_str(&format!("{MINIMAL_NODECLASS}  metadataOptions:\n    httpPutResponseHopLimit: 2\n"))
            .unwrap();
    let mo = partial.spec.metadata_options.unwrap();
    assert_eq!(mo.http_put_response_hop_limit, Some(2));
    assert_eq!(mo.http_tokens.as_deref(), Some("required"));

    let full = format!(
        "{MINIMAL_NODECLASS}{}",
        r#"  kubelet:
    clusterDNS: [10.0.0.10]
    maxPods: 110
    systemReserved: {cpu: 100m, memory: 100Mi}
    kubeReserved: {ephemeral-storage: 1Gi}
    evictionHard: {memory.available: 5%}
    evictionSoft: {nodefs.available: 10%}
    evictionSoftGracePeriod: {nodefs.available: 1m30s}
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
    cpuCFSQuota: true
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs: {volumeSize: 100Gi, volumeType: gp3, encrypted: true, kmsKeyID: arn:aws:kms:x, snapshotID: snap-1, iops: 3000, throughput: 125, volumeInitializationRate: 200, deleteOnTermination: true}
  instanceStorePolicy: RAID0
  associatePublicIPAddress: false
  ipPrefixCount: 1
  tags: {team: a}
  userData: "echo hi"
  detailedMonitoring: true
  context: ctx
  cpuOptions: {nestedVirtualization: enabled}
  connectionTracking: {tcpEstablishedTimeout: 3600}
  networkInterfaces:
    - {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}
    - {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}
  placementGroupSelector: {name: my-pg}
  capacityReservationSelectorTerms:
    - {id: cr-0123abcd}
    - {ownerID: "123456789012", tags: {team: a}}
"#
    );
    let nc: EC2NodeClass = serde_yaml::from_str(&full).unwrap();
    assert_valid(&nc);
    assert_eq!(nc.spec.instance_store_policy, Some(InstanceStorePolicy::Raid0));
    let kubelet = nc.spec.kubelet.as_ref().unwrap();
    assert_eq!(kubelet.cluster_dns, vec!["10.0.0.10"]);
    assert_eq!(kubelet.system_reserved["memory"], Quantity::from_mebibytes(100));
    let yaml = serde_yaml::to_string(&nc).unwrap();
    for spelled in [
        "clusterDNS:",
        "imageGCHighThresholdPercent:",
        "cpuCFSQuota:",
        "kmsKeyID:",
        "snapshotID:",
        "associatePublicIPAddress:",
        "instanceStorePolicy: RAID0",
        "httpProtocolIPv6:",
        "ownerID:",
    ] {
        assert!(yaml.contains(spelled), "{spelled} missing from\n{yaml}");
    }
    assert_eq!(serde_yaml::from_str::<EC2NodeClass>(&yaml).unwrap(), nc);
    assert!(serde_yaml::from_str::<EC2NodeClass>(&MINIMAL_NODECLASS.replace("role:", "roles:")).is_err());
}

#[test]
fn resolved_family_and_default_block_devices() {
    let with_terms = |family: Option<AmiFamily>, alias: Option<&str>| EC2NodeClassSpec {
        ami_family: family,
        ami_selector_terms: vec![match alias {
            Some(a) => AmiSelectorTerm { alias: Some(a.to_string()), ..Default::default() },
            None => AmiSelectorTerm { id: Some("ami-123".to_string()), ..Default::default() },
        }],
        ..EC2NodeClassSpec::default()
    };
    assert_eq!(with_terms(None, Some("al2@latest")).resolved_ami_family(), AmiFamily::AL2);
    assert_eq!(with_terms(None, Some("bottlerocket@v1.10.0")).resolved_ami_family(), AmiFamily::Bottlerocket);
    assert_eq!(with_terms(None, Some("windows2019@latest")).resolved_ami_family(), AmiFamily::Windows2019);
    assert_eq!(with_terms(None, Some("windows2022@latest")).resolved_ami_family(), AmiFamily::Windows2022);
    assert_eq!(with_terms(None, Some("windows2025@latest")).resolved_ami_family(), AmiFamily::Windows2025);
    assert_eq!(with_terms(Some(AmiFamily::Custom), Some("al2023@latest")).resolved_ami_family(), AmiFamily::Custom);
    assert_eq!(with_terms(Some(AmiFamily::Bottlerocket), None).resolved_ami_family(), AmiFamily::Bottlerocket);
    assert_eq!(with_terms(None, None).resolved_ami_family(), AmiFamily::Custom);

    let al2023 = default_block_device_mappings(AmiFamily::AL2023);
    assert_eq!(al2023.len(), 1);
    assert_eq!(al2023[0].device_name.as_deref(), Some("/dev/xvda"));
    let ebs = al2023[0].ebs.as_ref().unwrap();
    assert_eq!(
        (ebs.volume_size, ebs.volume_type.as_deref(), ebs.encrypted),
        (Some(Quantity::from_gibibytes(20)), Some("gp3"), Some(true))
    );
    let br = default_block_device_mappings(AmiFamily::Bottlerocket);
    assert_eq!(br.iter().map(|b| b.device_name.clone().unwrap()).collect::<Vec<_>>(), ["/dev/xvda", "/dev/xvdb"]);
    assert_eq!(br[0].ebs.as_ref().unwrap().volume_size, Some(Quantity::from_gibibytes(4)));
    assert_eq!(br[1].ebs.as_ref().unwrap().volume_size, Some(Quantity::from_gibibytes(20)));
    let win = default_block_device_mappings(AmiFamily::Windows2022);
    assert_eq!(
        (win[0].device_name.as_deref(), win[0].ebs.as_ref().unwrap().volume_size),
        (Some("/dev/sda1"), Some(Quantity::from_gibibytes(50)))
    );
    assert!(default_block_device_mappings(AmiFamily::Custom).is_empty());
    assert_eq!(EC2NodeClassSpec::default().effective_block_device_mappings(), al2023);
}

#[test]
fn nodeclass_identity() {
    let base = EC2NodeClassSpec::default();
    let errors = assert_rule(&nodeclass(EC2NodeClassSpec { role: None, ..base.clone() }), Rule::RoleXorInstanceProfile);
    assert_eq!(errors[0].path, "spec");
    assert_rule(
        &nodeclass(EC2NodeClassSpec { instance_profile: Some("p".to_string()), ..base.clone() }),
        Rule::RoleXorInstanceProfile,
    );
    assert_valid(&nodeclass(EC2NodeClassSpec { role: None, instance_profile: Some("p".to_string()), ..base.clone() }));
    assert_rule(&nodeclass(EC2NodeClassSpec { role: Some(String::new()), ..base.clone() }), Rule::RoleEmpty);
    assert_rule(
        &nodeclass(EC2NodeClassSpec { role: None, instance_profile: Some(String::new()), ..base }),
        Rule::InstanceProfileEmpty,
    );
}

#[test]
fn nodeclass_subnet_and_security_group_terms() {
    let base = EC2NodeClassSpec::default();
    let tags: BTreeMap<String, String> = [("k".to_string(), "v".to_string())].into();
    let subnet = |id: Option<&str>, tags: &BTreeMap<String, String>| SubnetSelectorTerm {
        id: id.map(str::to_string),
        tags: tags.clone(),
    };
    let with_subnets =
        |terms: Vec<SubnetSelectorTerm>| nodeclass(EC2NodeClassSpec { subnet_selector_terms: terms, ..base.clone() });

    assert_valid(&with_subnets(vec![subnet(Some("subnet-0abc"), &BTreeMap::new()), subnet(None, &tags)]));
    assert_rule(&with_subnets(vec![]), Rule::SelectorTermsCount);
    assert_rule(&with_subnets(vec![subnet(None, &tags); 31]), Rule::SelectorTermsCount);
    assert_valid(&with_subnets(vec![subnet(None, &tags); 30]));
    let errors = assert_rule(&with_subnets(vec![subnet(None, &BTreeMap::new())]), Rule::SelectorTermEmpty);
    assert_eq!(errors[0].path, "spec.subnetSelectorTerms[0]");
    assert_rule(&with_subnets(vec![subnet(Some("subnet-1"), &tags)]), Rule::SelectorTermExclusive);
    // Upstream's `!self.all(...)`: one plain term among them hides the combination.
    assert!(!rules(&with_subnets(vec![subnet(Some("subnet-1"), &tags), subnet(None, &tags)]))
        .contains(&Rule::SelectorTermExclusive));
    assert_rule(&with_subnets(vec![subnet(Some("sub-1"), &BTreeMap::new())]), Rule::SelectorIdPattern);
    let empty_value: BTreeMap<String, String> = [("k".to_string(), String::new())].into();
    assert_rule(&with_subnets(vec![subnet(None, &empty_value)]), Rule::SelectorTags);
    let many: BTreeMap<String, String> = (0..21).map(|i| (format!("k{i}"), "v".to_string())).collect();
    assert_rule(&with_subnets(vec![subnet(None, &many)]), Rule::SelectorTags);

    let sg = |id: Option<&str>, name: Option<&str>, tags: &BTreeMap<String, String>| SecurityGroupSelectorTerm {
        id: id.map(str::to_string),
        name: name.map(str::to_string),
        tags: tags.clone(),
    };
    let with_sgs = |terms: Vec<SecurityGroupSelectorTerm>| {
        nodeclass(EC2NodeClassSpec { security_group_selector_terms: terms, ..base.clone() })
    };
    assert_valid(&with_sgs(vec![
        sg(Some("sg-1"), None, &BTreeMap::new()),
        sg(None, Some("web"), &BTreeMap::new()),
        sg(None, None, &tags),
    ]));
    assert_rule(&with_sgs(vec![]), Rule::SelectorTermsCount);
    assert_rule(&with_sgs(vec![sg(None, None, &BTreeMap::new())]), Rule::SelectorTermEmpty);
    let errors =
        assert_rule(&with_sgs(vec![sg(Some("sg-1"), Some("web"), &BTreeMap::new())]), Rule::SelectorTermExclusive);
    assert_eq!(errors.iter().filter(|e| e.rule == Rule::SelectorTermExclusive).count(), 2, "id and name rules");
    assert_rule(&with_sgs(vec![sg(None, Some("web"), &tags)]), Rule::SelectorTermExclusive);
    assert_rule(&with_sgs(vec![sg(Some("group-1"), None, &BTreeMap::new())]), Rule::SelectorIdPattern);
}

#[test]
fn nodeclass_ami_terms_and_family() {
    let base = EC2NodeClassSpec::default();
    let alias = |a: &str| AmiSelectorTerm { alias: Some(a.to_string()), ..Default::default() };
    let id = |i: &str| AmiSelectorTerm { id: Some(i.to_string()), ..Default::default() };
    let with = |family: Option<AmiFamily>, terms: Vec<AmiSelectorTerm>| {
        nodeclass(EC2NodeClassSpec { ami_family: family, ami_selector_terms: terms, ..base.clone() })
    };
    assert_valid(&with(None, vec![alias("bottlerocket@v1.10.0")]));
    assert_valid(&with(Some(AmiFamily::AL2023), vec![alias("al2023@v20240807")]));
    assert_valid(&with(Some(AmiFamily::Custom), vec![alias("al2023@latest")]));
    assert_valid(&with(
        Some(AmiFamily::AL2),
        vec![
            id("ami-0123"),
            AmiSelectorTerm { name: Some("my-ami-*".into()), owner: Some("self".into()), ..Default::default() },
        ],
    ));
    assert_valid(&with(
        Some(AmiFamily::Custom),
        vec![AmiSelectorTerm { ssm_parameter: Some("/my/ami".into()), ..Default::default() }],
    ));

    assert_rule(&with(None, vec![]), Rule::SelectorTermsCount);
    assert_rule(&with(Some(AmiFamily::AL2), vec![id("ami-1"); 31]), Rule::SelectorTermsCount);
    assert_rule(
        &with(Some(AmiFamily::AL2), vec![AmiSelectorTerm { owner: Some("self".into()), ..Default::default() }]),
        Rule::SelectorTermEmpty,
    );
    assert_rule(
        &with(
            Some(AmiFamily::AL2),
            vec![AmiSelectorTerm { id: Some("ami-1".into()), name: Some("n".into()), ..Default::default() }],
        ),
        Rule::SelectorTermExclusive,
    );
    assert_rule(
        &with(
            None,
            vec![AmiSelectorTerm {
                alias: Some("al2@latest".into()),
                owner: Some("self".into()),
                ..Default::default()
            }],
        ),
        Rule::SelectorTermExclusive,
    );
    assert_rule(&with(Some(AmiFamily::AL2), vec![id("image-1")]), Rule::SelectorIdPattern);
    let errors = assert_rule(&with(None, vec![alias("al2023@latest"), id("ami-1")]), Rule::AmiAliasSingleTerm);
    assert_eq!(errors.iter().find(|e| e.rule == Rule::AmiAliasSingleTerm).unwrap().path, "spec.amiSelectorTerms");

    assert_rule(&with(None, vec![alias("al2023")]), Rule::AmiAlias);
    assert_rule(&with(None, vec![alias("al-2023@latest")]), Rule::AmiAlias);
    assert_rule(&with(None, vec![alias("ubuntu@latest")]), Rule::AmiAlias);
    assert_rule(&with(None, vec![alias("bottlerocket@v1.20.0-really-long-version")]), Rule::AmiAlias);
    assert_rule(&with(None, vec![alias("windows2022@v2024")]), Rule::AmiAliasWindowsVersion);
    assert_valid(&with(None, vec![alias("windows2022@latest")]));

    let errors =
        assert_rule(&with(Some(AmiFamily::Bottlerocket), vec![alias("al2023@latest")]), Rule::AmiFamilyAliasMismatch);
    assert!(errors[0].message.contains("'AL2023' or 'Custom'"), "{}", errors[0].message);
    assert_eq!(errors[0].path, "spec.amiFamily");
    assert_rule(&with(None, vec![id("ami-1")]), Rule::AmiFamilyRequired);
}

#[test]
fn nodeclass_capacity_reservations_and_placement() {
    let base = EC2NodeClassSpec::default();
    let with_cr = |terms: Vec<CapacityReservationSelectorTerm>| {
        nodeclass(EC2NodeClassSpec { capacity_reservation_selector_terms: terms, ..base.clone() })
    };
    let cr = |id: Option<&str>, owner: Option<&str>, criteria: Option<&str>| CapacityReservationSelectorTerm {
        id: id.map(str::to_string),
        instance_match_criteria: criteria.map(str::to_string),
        owner_id: owner.map(str::to_string),
        tags: BTreeMap::new(),
    };
    assert_valid(&with_cr(vec![cr(Some("cr-0abc"), None, None), cr(None, None, Some("open"))]));
    assert_rule(&with_cr(vec![cr(None, None, None)]), Rule::SelectorTermEmpty);
    assert_rule(&with_cr(vec![cr(Some("cr-1"), None, Some("open"))]), Rule::SelectorTermExclusive);
    assert_rule(&with_cr(vec![cr(Some("cr-1x!"), None, None)]), Rule::SelectorIdPattern);
    assert_rule(&with_cr(vec![cr(None, Some("1234"), Some("open"))]), Rule::SelectorIdPattern);
    assert_rule(&with_cr(vec![cr(None, None, Some("closed"))]), Rule::InstanceMatchCriteria);
    assert_rule(&with_cr(vec![cr(None, None, Some("open")); 31]), Rule::SelectorTermsCount);

    let with_pg = |name: Option<&str>, id: Option<&str>| {
        nodeclass(EC2NodeClassSpec {
            placement_group_selector: Some(PlacementGroupSelector {
                id: id.map(str::to_string),
                name: name.map(str::to_string),
            }),
            ..base.clone()
        })
    };
    assert_valid(&with_pg(Some("pg"), None));
    assert_valid(&with_pg(None, Some("pg-0abc")));
    assert_rule(&with_pg(None, None), Rule::PlacementGroupSelector);
    assert_rule(&with_pg(Some("pg"), Some("pg-1")), Rule::PlacementGroupSelector);
    assert_rule(&with_pg(Some(""), None), Rule::PlacementGroupSelector);
    assert_rule(&with_pg(None, Some("group-1")), Rule::SelectorIdPattern);
}

#[test]
fn nodeclass_tags() {
    let with_tag = |k: &str| {
        let mut spec = EC2NodeClassSpec::default();
        spec.tags.insert(k.to_string(), "v".to_string());
        nodeclass(spec)
    };
    assert_valid(&with_tag("team"));
    assert_valid(&with_tag("karpenter.sh/discovery"));
    for restricted in [
        "",
        "eks:eks-cluster-name",
        "kubernetes.io/cluster/my-cluster",
        "karpenter.sh/nodepool",
        "karpenter.sh/nodeclaim",
        "karpenter.k8s.aws/ec2nodeclass",
    ] {
        assert_rule(&with_tag(restricted), Rule::Tags);
    }
}

#[test]
fn nodeclass_kubelet() {
    let with = |f: &dyn Fn(&mut KubeletConfiguration)| {
        let mut k = KubeletConfiguration::default();
        f(&mut k);
        nodeclass(EC2NodeClassSpec { kubelet: Some(k), ..EC2NodeClassSpec::default() })
    };
    assert_valid(&with(&|k| {
        k.max_pods = Some(0);
        k.pods_per_core = Some(10);
        k.system_reserved.insert("cpu".into(), Quantity::from_millis(100));
        k.kube_reserved.insert("pid".into(), Quantity::from_units(1000));
        k.eviction_hard.insert("memory.available".into(), "100Mi".into());
        k.eviction_hard.insert("nodefs.available".into(), "10.5%".into());
        k.eviction_hard.insert("imagefs.available".into(), "100%".into());
        k.eviction_soft.insert("pid.available".into(), "5%".into());
        k.eviction_soft_grace_period.insert("pid.available".into(), "1m".into());
        k.image_gc_high_threshold_percent = Some(90);
        k.image_gc_low_threshold_percent = Some(10);
    }));
    assert_rule(&with(&|k| k.max_pods = Some(-1)), Rule::KubeletMinimum);
    assert_rule(&with(&|k| k.pods_per_core = Some(-1)), Rule::KubeletMinimum);
    assert_rule(
        &with(&|k| {
            k.system_reserved.insert("gpu".into(), Quantity::from_units(1));
        }),
        Rule::KubeletReserved,
    );
    let errors = assert_rule(
        &with(&|k| {
            k.kube_reserved.insert("memory".into(), -Quantity::from_mebibytes(1));
        }),
        Rule::KubeletReserved,
    );
    assert_eq!(errors[0].path, r#"spec.kubelet.kubeReserved["memory"]"#);
    assert_rule(
        &with(&|k| {
            k.eviction_hard.insert("memory.free".into(), "1Gi".into());
        }),
        Rule::KubeletEviction,
    );
    assert_rule(
        &with(&|k| {
            k.eviction_hard.insert("memory.available".into(), "101%".into());
        }),
        Rule::KubeletEviction,
    );
    assert_rule(
        &with(&|k| {
            k.eviction_hard.insert("memory.available".into(), "lots".into());
        }),
        Rule::KubeletEviction,
    );
    assert_rule(
        &with(&|k| {
            k.eviction_soft.insert("memory.available".into(), "1Gi".into());
            k.eviction_soft_grace_period.insert("memory.available".into(), "1 minute".into());
        }),
        Rule::KubeletEviction,
    );
    assert_rule(
        &with(&|k| {
            k.eviction_soft.insert("memory.available".into(), "1Gi".into());
        }),
        Rule::KubeletEvictionSoftPairs,
    );
    assert_rule(
        &with(&|k| {
            k.eviction_soft_grace_period.insert("memory.available".into(), "1m".into());
        }),
        Rule::KubeletEvictionSoftPairs,
    );
    assert_rule(&with(&|k| k.image_gc_high_threshold_percent = Some(101)), Rule::KubeletImageGc);
    assert_rule(
        &with(&|k| {
            k.image_gc_high_threshold_percent = Some(50);
            k.image_gc_low_threshold_percent = Some(50);
        }),
        Rule::KubeletImageGc,
    );
}

#[test]
fn nodeclass_block_devices() {
    let bdm = |size: Option<&str>, f: &dyn Fn(&mut BlockDevice)| {
        let mut ebs = BlockDevice { volume_size: size.map(|s| Quantity::parse(s).unwrap()), ..Default::default() };
        f(&mut ebs);
        BlockDeviceMapping { device_name: Some("/dev/xvda".into()), ebs: Some(ebs), root_volume: false }
    };
    let with = |bdms: Vec<BlockDeviceMapping>| {
        nodeclass(EC2NodeClassSpec { block_device_mappings: bdms, ..EC2NodeClassSpec::default() })
    };
    for ok in ["1Gi", "20Gi", "59000Gi", "64000G", "1Ti", "58Ti", "64T", "100G"] {
        assert_valid(&with(vec![bdm(Some(ok), &|_| {})]));
    }
    for bad in ["0", "500Mi", "1.5Gi", "59001Gi", "65T", "1000000"] {
        assert_rule(&with(vec![bdm(Some(bad), &|_| {})]), Rule::VolumeSize);
    }
    assert_rule(&with(vec![bdm(None, &|_| {})]), Rule::BlockDevice);
    assert_valid(&with(vec![bdm(None, &|e| e.snapshot_id = Some("snap-1".into()))]));
    assert_rule(&with(vec![bdm(Some("20Gi"), &|e| e.volume_initialization_rate = Some(200))]), Rule::BlockDevice);
    assert_rule(
        &with(vec![bdm(Some("20Gi"), &|e| {
            e.snapshot_id = Some("snap-1".into());
            e.volume_initialization_rate = Some(50);
        })]),
        Rule::BlockDevice,
    );
    assert_rule(&with(vec![bdm(Some("20Gi"), &|e| e.volume_type = Some("gp4".into()))]), Rule::VolumeType);
    let mut root = bdm(Some("20Gi"), &|_| {});
    root.root_volume = true;
    assert_valid(&with(vec![root.clone(), bdm(Some("20Gi"), &|_| {})]));
    assert_rule(&with(vec![root.clone(), root]), Rule::BlockDeviceMappings);
    assert_rule(&with(vec![bdm(Some("20Gi"), &|_| {}); 51]), Rule::BlockDeviceMappings);
    assert!(serde_yaml::from_str::<InstanceStorePolicy>("RAID1").is_err());
}

#[test]
fn nodeclass_metadata_network_and_misc() {
    let with = |f: &dyn Fn(&mut EC2NodeClassSpec)| {
        let mut spec = EC2NodeClassSpec::default();
        f(&mut spec);
        nodeclass(spec)
    };
    let mo = |f: &dyn Fn(&mut MetadataOptions)| {
        with(&|s| {
            let mut m = MetadataOptions::default();
            f(&mut m);
            s.metadata_options = Some(m);
        })
    };
    assert_valid(&mo(&|m| m.http_put_response_hop_limit = Some(64)));
    assert_rule(&mo(&|m| m.http_put_response_hop_limit = Some(0)), Rule::MetadataHopLimit);
    assert_rule(&mo(&|m| m.http_put_response_hop_limit = Some(65)), Rule::MetadataHopLimit);
    assert_rule(&mo(&|m| m.http_endpoint = Some("on".into())), Rule::MetadataOptions);
    assert_rule(&mo(&|m| m.http_protocol_ipv6 = Some("yes".into())), Rule::MetadataOptions);
    assert_rule(&mo(&|m| m.http_tokens = Some("always".into())), Rule::MetadataOptions);
    assert_valid(&mo(&|m| m.http_tokens = Some("optional".into())));

    assert_rule(&with(&|s| s.ip_prefix_count = Some(-1)), Rule::IpPrefixCount);
    assert_valid(&with(&|s| s.ip_prefix_count = Some(0)));

    let nic = |card: i32, device: i32, t: &str| NetworkInterface {
        device_index: device,
        interface_type: t.into(),
        network_card_index: card,
    };
    assert_valid(&with(&|s| {
        s.network_interfaces = vec![nic(0, 0, "interface"), nic(0, 1, "efa-only"), nic(1, 0, "efa-only")]
    }));
    assert_rule(&with(&|s| s.network_interfaces = vec![nic(0, 1, "interface")]), Rule::NetworkInterfaces);
    assert_rule(
        &with(&|s| s.network_interfaces = vec![nic(0, 0, "interface"), nic(0, 0, "interface")]),
        Rule::NetworkInterfaces,
    );
    assert_rule(
        &with(&|s| s.network_interfaces = vec![nic(0, 0, "interface"), nic(1, 0, "efa-only"), nic(1, 1, "efa-only")]),
        Rule::NetworkInterfaces,
    );
    assert_rule(
        &with(&|s| s.network_interfaces = vec![nic(0, 0, "interface"), nic(0, 1, "ena")]),
        Rule::NetworkInterfaces,
    );
    assert_rule(
        &with(&|s| s.network_interfaces = vec![nic(0, 0, "interface"), nic(-1, 1, "interface")]),
        Rule::NetworkInterfaces,
    );

    let ct = |tcp: Option<i32>, stream: Option<i32>, udp: Option<i32>| {
        with(&move |s| {
            s.connection_tracking =
                Some(ConnectionTracking { tcp_established_timeout: tcp, udp_stream_timeout: stream, udp_timeout: udp })
        })
    };
    assert_valid(&ct(Some(60), Some(180), Some(30)));
    assert_rule(&ct(None, None, None), Rule::ConnectionTracking);
    assert_rule(&ct(Some(59), None, None), Rule::ConnectionTracking);
    assert_rule(&ct(Some(432_001), None, None), Rule::ConnectionTracking);
    assert_rule(&ct(None, Some(181), None), Rule::ConnectionTracking);
    assert_rule(&ct(None, None, Some(61)), Rule::ConnectionTracking);

    assert_rule(
        &with(&|s| s.cpu_options = Some(CpuOptions { nested_virtualization: Some("on".into()) })),
        Rule::CpuOptions,
    );
    assert_valid(&with(&|s| s.cpu_options = Some(CpuOptions { nested_virtualization: Some("disabled".into()) })));
}
