//! NodePools → node groups: the Auto Scaling groups a Cluster Autoscaler user would need to run
//! what Karpenter ran. An Auto Scaling group as Cluster Autoscaler scales it has one shape (its
//! template is the first instance type: `cloudprovider/aws/aws_manager.go` `buildNodeFromTemplate`,
//! tag `cluster-autoscaler-1.36.1`) and one purchase option, so each NodePool becomes one group per
//! instance type and capacity type its nodes actually landed on, carrying the NodePool's taints
//! and the labels those nodes had. No upstream counterpart: this is the migration users do by hand.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::api::clusterautoscaler::{GroupCapacityType, GroupOptions, NodeGroup, NodeGroupSpec};
use crate::api::NodePool;
use crate::catalogue::Catalogue;
use crate::labels;

/// A group's size when its NodePool sets no limit: large enough never to bind where the NodePool
/// would not.
pub const UNLIMITED_MAX_SIZE: i64 = 1000;

/// Karpenter's nodes of one NodePool, instance type and capacity type over a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Landed {
    pub node_pool: String,
    pub instance_type: String,
    pub capacity_type: String,
    pub zones: BTreeSet<String>,
    /// Distinct nodes.
    pub nodes: BTreeSet<String>,
    /// The labels every one of them carried that a group's nodes would carry too (see
    /// [`group_labels`]).
    pub labels: BTreeMap<String, String>,
}

impl Landed {
    /// Counts in a node of this kind with its labels (the labels kept are those all share).
    pub fn add(&mut self, node: &str, zone: Option<&str>, node_labels: &BTreeMap<String, String>) {
        let kept = group_labels(node_labels);
        if self.nodes.is_empty() {
            self.labels = kept;
        } else {
            self.labels.retain(|k, v| kept.get(k) == Some(v));
        }
        self.nodes.insert(node.to_string());
        if let Some(zone) = zone {
            self.zones.insert(zone.to_string());
        }
    }
}

/// Of a Karpenter node's labels, those a group's nodes carry so that the pods that select them
/// land alike: the custom ones, the instance type's descriptive `karpenter.k8s.aws/*` ones, and
/// `karpenter.sh/nodepool` and `karpenter.sh/capacity-type` (pods select those; rename them when
/// migrating). Left out: what differs node to node (hostname, zone, region), what CA's template
/// sets itself (instance type, architecture, OS) and Karpenter's lifecycle labels.
pub fn group_labels(node_labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    const PER_NODE: &[&str] = &[
        labels::HOSTNAME,
        labels::TOPOLOGY_ZONE,
        labels::TOPOLOGY_REGION,
        labels::INSTANCE_TYPE,
        labels::ARCH,
        labels::OS,
        crate::clusterautoscaler::template::EBS_CSI_ZONE,
        "topology.k8s.aws/zone-id",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
    ];
    node_labels
        .iter()
        .filter(|(k, _)| !PER_NODE.contains(&k.as_str()))
        .filter(|(k, _)| {
            !k.starts_with("karpenter.sh/") || k.as_str() == labels::NODEPOOL || k.as_str() == labels::CAPACITY_TYPE
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Where a derived group's `maxSize` comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "from", rename_all = "camelCase")]
pub enum MaxSize {
    /// The NodePool's limit on a resource, over the type's capacity of it (each group of the
    /// NodePool may reach it: CA has no limit across groups).
    Limit { resource: String, limit: String },
    /// No limit on the NodePool.
    Unlimited,
}

/// Why a group was derived.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Derivation {
    pub node_group: String,
    pub node_pool: String,
    pub instance_type: String,
    pub capacity_type: String,
    pub zones: Vec<String>,
    /// Karpenter's nodes of this kind over the run.
    pub nodes: usize,
    /// Taints from the NodePool's template.
    pub taints: usize,
    pub max_size: i64,
    pub max_size_from: MaxSize,
}

impl fmt::Display for Derivation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: NodePool {} ran {} {} {} node(s) in {}; an Auto Scaling group has one shape and one purchase option",
            self.node_group,
            self.node_pool,
            self.nodes,
            self.capacity_type,
            self.instance_type,
            self.zones.join(", ")
        )?;
        if self.taints > 0 {
            write!(f, "; {} taint(s) from the NodePool", self.taints)?;
        }
        match &self.max_size_from {
            MaxSize::Limit { resource, limit } => {
                write!(f, "; maxSize {} from the NodePool's {resource} limit {limit}", self.max_size)
            }
            MaxSize::Unlimited => write!(f, "; maxSize {} (the NodePool has no limit)", self.max_size),
        }
    }
}

/// A group with why it is there.
#[derive(Debug, Clone, PartialEq)]
pub struct DerivedGroup {
    pub group: NodeGroup,
    pub why: Derivation,
}

/// One group per NodePool × instance type × capacity type in `landed` (in that order), starting
/// empty (minSize 0: Karpenter's nodes that were there at the start stay as they are).
pub fn node_groups_for(nodepools: &[NodePool], landed: &[Landed], catalogue: &Catalogue) -> Vec<DerivedGroup> {
    let mut sorted: Vec<&Landed> = landed.iter().filter(|l| !l.nodes.is_empty()).collect();
    sorted.sort_by(|a, b| {
        (&a.node_pool, &a.instance_type, &a.capacity_type).cmp(&(&b.node_pool, &b.instance_type, &b.capacity_type))
    });
    sorted
        .into_iter()
        .map(|l| {
            let nodepool = nodepools.iter().find(|np| np.name() == l.node_pool);
            let taints = nodepool.map(|np| np.spec.template.spec.taints.clone()).unwrap_or_default();
            let (max_size, max_size_from) = max_size(nodepool, &l.instance_type, catalogue);
            let name = format!("{}-{}-{}", l.node_pool, l.instance_type.replace('.', "-"), l.capacity_type);
            let capacity_type =
                if l.capacity_type == "spot" { GroupCapacityType::Spot } else { GroupCapacityType::OnDemand };
            let why = Derivation {
                node_group: name.clone(),
                node_pool: l.node_pool.clone(),
                instance_type: l.instance_type.clone(),
                capacity_type: l.capacity_type.clone(),
                zones: l.zones.iter().cloned().collect(),
                nodes: l.nodes.len(),
                taints: taints.len(),
                max_size,
                max_size_from,
            };
            let group = NodeGroup::new(
                name,
                NodeGroupSpec {
                    min_size: 0,
                    max_size,
                    desired_capacity: None,
                    instance_types: vec![l.instance_type.clone()],
                    zones: l.zones.iter().cloned().collect(),
                    capacity_type,
                    labels: l.labels.clone(),
                    taints,
                    resources: BTreeMap::new(),
                    autoscaling_options: GroupOptions::default(),
                },
            );
            DerivedGroup { group, why }
        })
        .collect()
}

/// The fewest nodes of `instance_type` that reach one of the NodePool's limits.
fn max_size(nodepool: Option<&NodePool>, instance_type: &str, catalogue: &Catalogue) -> (i64, MaxSize) {
    let Some(np) = nodepool else { return (UNLIMITED_MAX_SIZE, MaxSize::Unlimited) };
    let Some(info) = catalogue.info(instance_type) else { return (UNLIMITED_MAX_SIZE, MaxSize::Unlimited) };
    let mut best: Option<(i64, MaxSize)> = None;
    for (resource, limit) in &np.spec.limits.0 {
        let per_node = match resource.as_str() {
            "cpu" => f64::from(info.vcpu),
            "memory" => info.memory_mib as f64 * 1024.0 * 1024.0,
            _ => continue,
        };
        let nodes = (limit.as_f64() / per_node).floor().max(0.0) as i64;
        if best.as_ref().is_none_or(|(n, _)| nodes < *n) {
            best = Some((nodes, MaxSize::Limit { resource: resource.clone(), limit: limit.to_string() }));
        }
    }
    best.unwrap_or((UNLIMITED_MAX_SIZE, MaxSize::Unlimited))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodepool(yaml: &str) -> NodePool {
        crate::manifest::load(yaml).unwrap_or_else(|e| panic!("{e}")).nodepools.remove(0)
    }

    const BATCH: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: batch}
spec:
  limits: {cpu: \"20\", memory: 1000Gi}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      taints: [{key: batch, value: \"true\", effect: NoSchedule}]
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
";

    fn node_labels(zone: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut l: BTreeMap<String, String> = [
            (labels::NODEPOOL, "batch"),
            (labels::CAPACITY_TYPE, "spot"),
            (labels::INSTANCE_TYPE, "c5.xlarge"),
            (labels::TOPOLOGY_ZONE, zone),
            (labels::HOSTNAME, "ip-10-0-1-1"),
            ("karpenter.sh/initialized", "true"),
            ("karpenter.k8s.aws/instance-family", "c5"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        l
    }

    #[test]
    fn one_group_per_shape_and_purchase_option_with_the_nodepools_taints_and_the_shared_labels() {
        let mut c5 = Landed {
            node_pool: "batch".into(),
            instance_type: "c5.xlarge".into(),
            capacity_type: "spot".into(),
            ..Default::default()
        };
        c5.add("a", Some("us-east-1b"), &node_labels("us-east-1b", &[("team", "ml"), ("run", "1")]));
        c5.add("b", Some("us-east-1a"), &node_labels("us-east-1a", &[("team", "ml"), ("run", "2")]));
        c5.add("b", Some("us-east-1a"), &node_labels("us-east-1a", &[("team", "ml"), ("run", "2")]));
        let idle = Landed { node_pool: "batch".into(), instance_type: "c5.large".into(), ..Default::default() };
        let groups = node_groups_for(&[nodepool(BATCH)], &[c5, idle], Catalogue::embedded());
        assert_eq!(groups.len(), 1, "a kind with no node gets no group");
        let g = &groups[0];
        assert_eq!(g.group.metadata.name.as_deref(), Some("batch-c5-xlarge-spot"));
        assert_eq!(g.group.spec.instance_types, ["c5.xlarge"]);
        assert_eq!(g.group.spec.zones, ["us-east-1a", "us-east-1b"]);
        assert_eq!(g.group.spec.capacity_type, GroupCapacityType::Spot);
        assert_eq!(g.group.spec.taints.len(), 1);
        let kept: Vec<&str> = g.group.spec.labels.keys().map(String::as_str).collect();
        // Labels that differed between the nodes (run) and per-node or lifecycle labels are left out.
        assert_eq!(kept, ["karpenter.k8s.aws/instance-family", labels::CAPACITY_TYPE, labels::NODEPOOL, "team"]);
        // 20 CPUs over 4 vCPUs; 1000Gi over 8Gi would allow more.
        assert_eq!((g.group.spec.min_size, g.group.spec.max_size), (0, 5));
        assert_eq!(g.why.max_size_from, MaxSize::Limit { resource: "cpu".into(), limit: "20".into() });
        assert_eq!(
            g.why.to_string(),
            "batch-c5-xlarge-spot: NodePool batch ran 2 spot c5.xlarge node(s) in us-east-1a, us-east-1b; an Auto \
             Scaling group has one shape and one purchase option; 1 taint(s) from the NodePool; maxSize 5 from the \
             NodePool's cpu limit 20"
        );
        // The group is a valid NodeGroup as a user would write it.
        let yaml = serde_yaml::to_string(&g.group).unwrap();
        assert_eq!(crate::manifest::load(&yaml).unwrap().nodegroups[0], g.group);
    }

    #[test]
    fn a_nodepool_without_limits_gets_a_large_group() {
        let np = nodepool(&BATCH.replace("  limits: {cpu: \"20\", memory: 1000Gi}\n", ""));
        let mut l = Landed {
            node_pool: "batch".into(),
            instance_type: "c5.xlarge".into(),
            capacity_type: "on-demand".into(),
            ..Default::default()
        };
        l.add("a", Some("us-east-1a"), &BTreeMap::new());
        let g = &node_groups_for(&[np], &[l], Catalogue::embedded())[0];
        assert_eq!((g.group.spec.max_size, &g.why.max_size_from), (UNLIMITED_MAX_SIZE, &MaxSize::Unlimited));
        assert_eq!(g.group.spec.capacity_type, GroupCapacityType::OnDemand);
    }
}
