//! Node groups to NodePools: merging, limits, consolidation, labels, names, and that the output applies.

use super::*;
use crate::api::clusterautoscaler::ClusterAutoscalerOptions;
use crate::api::Validate;

fn groups(yaml: &str) -> Vec<NodeGroup> {
    crate::manifest::load(yaml).unwrap_or_else(|e| panic!("{e}")).nodegroups
}

fn propose(groups: &[NodeGroup], options: &ClusterAutoscalerOptions) -> Proposal {
    let resolved = options.resolved();
    propose_nodepools(ProposalInput {
        groups,
        options: &resolved,
        cluster_name: "prod",
        catalogue: Catalogue::embedded(),
    })
}

fn notes_of<'a>(p: &'a Proposal, object: &str) -> Vec<&'a ProposalReason> {
    p.notes.iter().filter(|n| n.object == object).map(|n| &n.reason).collect()
}

/// Every proposed object is valid and loads back as written (what `kubectl apply` needs).
fn assert_applies(p: &Proposal) {
    let mut yaml = String::new();
    for nc in &p.nodeclasses {
        assert_eq!(nc.validate(), [], "{}", nc.name());
        yaml.push_str(&serde_yaml::to_string(nc).unwrap());
        yaml.push_str("---\n");
    }
    for np in &p.nodepools {
        assert_eq!(np.validate(), [], "{}", np.name());
        yaml.push_str(&serde_yaml::to_string(np).unwrap());
        yaml.push_str("---\n");
    }
    let loaded = crate::manifest::load(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(loaded.nodepools, p.nodepools);
    assert_eq!(loaded.nodeclasses, p.nodeclasses);
}

const LAYOUT: &str = "apiVersion: carpentry.dev/v1alpha1
kind: NodeGroup
metadata: {name: web-b}
spec:
  minSize: 2
  maxSize: 4
  instanceTypes: [m5.xlarge, m5.2xlarge]
  zones: [us-east-1b]
  labels: {role: web, karpenter.k8s.aws/instance-family: m5}
---
apiVersion: carpentry.dev/v1alpha1
kind: NodeGroup
metadata: {name: web-a}
spec:
  maxSize: 10
  instanceTypes: [m5.large]
  zones: [us-east-1a]
  labels: {role: web}
---
apiVersion: carpentry.dev/v1alpha1
kind: NodeGroup
metadata: {name: batch}
spec:
  maxSize: 3
  instanceTypes: [c5.xlarge]
  zones: [us-east-1a, us-east-1c]
  capacityType: spot
  labels: {role: web, karpenter.sh/team: batch}
  taints: [{key: batch, value: \"true\", effect: NoSchedule}]
  resources: {example.com/dongle: \"1\"}
  autoscalingOptions: {scaleDownUnneededTime: 5m, scaleDownUnreadyTime: 30m}
";

#[test]
fn groups_whose_nodes_look_alike_share_a_nodepool_that_allows_all_they_allowed() {
    let p = propose(&groups(LAYOUT), &ClusterAutoscalerOptions::default());
    assert_applies(&p);
    let names: Vec<&str> = p.nodepools.iter().map(NodePool::name).collect();
    // web-a and web-b differ only in shape and zone; batch is spot, tainted and on another timer.
    assert_eq!(names, ["batch", "web"], "web-a and web-b make web");
    let web = &p.nodepools[1];
    let requirement = |key: &str| -> Vec<String> {
        web.spec.template.spec.requirements.iter().find(|r| r.key == key).unwrap().values.clone()
    };
    assert_eq!(requirement(labels::INSTANCE_TYPE), ["m5.large", "m5.xlarge", "m5.2xlarge"]);
    assert_eq!(requirement(labels::TOPOLOGY_ZONE), ["us-east-1a", "us-east-1b"]);
    assert_eq!(requirement(labels::CAPACITY_TYPE), ["on-demand"]);
    assert_eq!(web.spec.template.metadata.labels, BTreeMap::from([("role".to_string(), "web".to_string())]));
    assert!(web.spec.template.spec.taints.is_empty());
    // 10 × m5.large (2 vCPU, 8 GiB) + 4 × m5.2xlarge (8 vCPU, 32 GiB).
    let limits: BTreeMap<&str, String> = web.spec.limits.0.iter().map(|(k, v)| (k.as_str(), v.to_string())).collect();
    assert_eq!(limits, BTreeMap::from([("cpu", "52".to_string()), ("memory", "208Gi".to_string())]));
    assert_eq!(web.spec.disruption.consolidate_after.to_string(), "10m");
    let web_notes = notes_of(&p, "NodePool/web");
    assert_eq!(web_notes[0], &ProposalReason::Groups { groups: vec!["web-a".into(), "web-b".into()] });
    assert!(web_notes.contains(&&ProposalReason::Limits { cpu: 52, memory_gib: 208, max_nodes: 14 }));
    assert!(web_notes.contains(&&ProposalReason::Expiry { expire_after: "720h".into() }));
    assert!(web_notes.contains(&&ProposalReason::MinimumSize { groups: vec![("web-b".into(), 2)] }));
    assert!(web_notes.contains(&&ProposalReason::LabelSetByKarpenter {
        key: "karpenter.k8s.aws/instance-family".into(),
        value: "m5".into()
    }));

    let batch = &p.nodepools[0];
    assert_eq!(batch.spec.template.spec.taints.len(), 1);
    assert_eq!(batch.spec.template.spec.taints[0].key, "batch");
    assert_eq!(batch.spec.disruption.consolidate_after.to_string(), "5m");
    let batch_notes = notes_of(&p, "NodePool/batch");
    let rendered: Vec<String> = batch_notes.iter().map(ToString::to_string).collect();
    assert!(
        rendered.iter().any(|n| n.starts_with("label karpenter.sh/team=batch dropped: ")),
        "a label in a restricted domain is dropped with the rule: {rendered:#?}"
    );
    assert!(!batch.spec.template.metadata.labels.contains_key("karpenter.sh/team"));
    assert!(batch_notes.contains(&&ProposalReason::ExtraResources {
        groups: vec!["batch".into()],
        resources: vec!["example.com/dongle=1".into()]
    }));
    assert!(batch_notes.contains(&&ProposalReason::OptionsIgnored {
        group: "batch".into(),
        options: vec!["scaleDownUnreadyTime".into()]
    }));
    assert_eq!(
        rendered.iter().find(|n| n.starts_with("consolidationPolicy")).map(String::as_str),
        Some(
            "consolidationPolicy WhenEmptyOrUnderutilized after 5m: CA removed a node 5m after its requests fell \
             under 0.5 of allocatable and its pods fit elsewhere; Karpenter removes or replaces any node whose pods \
             fit elsewhere or on a cheaper node, whatever its utilization"
        )
    );

    let nodeclass = &p.nodeclasses[0];
    assert_eq!(nodeclass.spec.role.as_deref(), Some("KarpenterNodeRole-prod"));
    assert_eq!(
        p.notes[0].to_string(),
        "EC2NodeClass/default: AMI alias al2023@latest, node role KarpenterNodeRole-prod; subnets and security \
         groups are those tagged karpenter.sh/discovery=prod: create the role and tag them as Karpenter's \
         getting-started guide does"
    );
}

#[test]
fn groups_derived_from_nodepools_come_back_as_those_nodepools() {
    let yaml = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: batch}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
      taints: [{key: batch, value: \"true\", effect: NoSchedule}]
";
    let nodepools = crate::manifest::load(yaml).unwrap().nodepools;
    let landed: Vec<crate::clusterautoscaler::Landed> = ["c5.xlarge", "m5.large"]
        .iter()
        .map(|t| {
            let mut l = crate::clusterautoscaler::Landed {
                node_pool: "batch".into(),
                instance_type: t.to_string(),
                capacity_type: "spot".into(),
                ..Default::default()
            };
            let node_labels = BTreeMap::from([
                (labels::NODEPOOL.to_string(), "batch".to_string()),
                (labels::CAPACITY_TYPE.to_string(), "spot".to_string()),
                ("karpenter.k8s.aws/instance-family".to_string(), t.split('.').next().unwrap().to_string()),
            ]);
            l.add(&format!("node-{t}"), Some("us-east-1a"), &node_labels);
            l
        })
        .collect();
    let derived: Vec<NodeGroup> = crate::clusterautoscaler::node_groups_for(&nodepools, &landed, Catalogue::embedded())
        .into_iter()
        .map(|d| d.group)
        .collect();
    assert_eq!(derived.len(), 2, "one group per shape");
    let p = propose(&derived, &ClusterAutoscalerOptions::default());
    assert_applies(&p);
    assert_eq!(p.nodepools.len(), 1, "the two shapes of one NodePool are one NodePool again");
    let np = &p.nodepools[0];
    assert_eq!(np.name(), "batch");
    assert!(notes_of(&p, "NodePool/batch").contains(&&ProposalReason::NamedAfterLabel { value: "batch".into() }));
    assert_eq!(np.spec.template.spec.taints, nodepools[0].spec.template.spec.taints);
    assert!(np.spec.template.metadata.labels.is_empty(), "{:?}", np.spec.template.metadata.labels);
}

#[test]
fn scale_down_off_means_consolidation_never_and_names_are_made_valid_and_unique() {
    let yaml = "apiVersion: carpentry.dev/v1alpha1
kind: NodeGroup
metadata: {name: Web_Nodes}
spec: {maxSize: 1, instanceTypes: [m5.large], zones: [us-east-1a]}
---
apiVersion: carpentry.dev/v1alpha1
kind: NodeGroup
metadata: {name: web-nodes}
spec: {maxSize: 1, instanceTypes: [m5.large], zones: [us-east-1a], labels: {tier: two}}
";
    let options = ClusterAutoscalerOptions { scale_down_enabled: Some(false), ..Default::default() };
    let p = propose(&groups(yaml), &options);
    assert_applies(&p);
    let names: Vec<&str> = p.nodepools.iter().map(NodePool::name).collect();
    assert_eq!(names, ["web-nodes", "web-nodes-2"]);
    for np in &p.nodepools {
        assert_eq!(np.spec.disruption.consolidate_after.to_string(), "Never");
        assert!(notes_of(&p, &format!("NodePool/{}", np.name())).contains(&&ProposalReason::ConsolidationOff));
    }
}

#[test]
fn go_durations_are_the_shortest_form() {
    assert_eq!(go_duration(600.0), "10m");
    assert_eq!(go_duration(5400.0), "1h30m");
    assert_eq!(go_duration(45.0), "45s");
    assert_eq!(go_duration(0.0), "0s");
}
