//! Node groups → NodePools: what a Cluster Autoscaler user moving to Karpenter would apply so that
//! the pods their Auto Scaling groups ran still find nodes. Each choice comes with a
//! [`ProposalNote`] saying why. No upstream counterpart: this is the migration users do by hand
//! (Karpenter's migration guide, `website/content/en/v1.14/getting-started/migrating-from-cas`,
//! starts from one NodePool and one EC2NodeClass; this starts from the groups they have).
//!
//! The rules:
//! - Groups whose nodes look alike to a pod (the same purchase option, the same custom labels,
//!   the same taints and the same scale-down timer) become one NodePool: Karpenter picks the
//!   shape per launch, so the many groups CA needs for one kind of node collapse. Groups that
//!   differ in what pods select or tolerate stay apart, as pods rely on that.
//! - A NodePool allows at least what its groups allowed: exactly their instance types, zones and
//!   capacity type as requirements; limits as large as the groups' `maxSize` over their largest
//!   type.
//! - Scale-down after the unneeded time becomes `WhenEmptyOrUnderutilized` consolidation after
//!   the same time (or `Never` when CA's scale-down is off).
//! - Labels Karpenter sets itself (well-known ones it derives from the instance type, the
//!   capacity type, `karpenter.sh/nodepool`, which names the NodePool) are left to it; labels a
//!   NodePool may not carry are dropped, each with its note.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::Taint;
use serde::Serialize;
use serde_json::json;

use crate::api::clusterautoscaler::{GroupCapacityType, NodeGroup, ResolvedOptions};
use crate::api::validation::{validate_template_labels, FieldError};
use crate::api::{EC2NodeClass, NodePool};
use crate::catalogue::Catalogue;
use crate::labels;

/// The tag Karpenter's getting-started guide puts on the cluster's subnets and security groups
/// for the EC2NodeClass to find them.
pub const DISCOVERY_TAG: &str = "karpenter.sh/discovery";

/// The EC2NodeClass every proposed NodePool refers to.
pub const NODE_CLASS_NAME: &str = "default";

/// Labels that name the group a node came from (eksctl's, and EKS's on a managed group's nodes):
/// each group has its own value, so they neither keep groups apart nor go on the NodePool.
const GROUP_NAME_LABELS: [&str; 2] = [labels::aws::EKSCTL_NODEGROUP_NAME, labels::aws::EKS_NODEGROUP];

/// What the proposal needs besides the groups.
#[derive(Debug, Clone, Copy)]
pub struct ProposalInput<'a> {
    pub groups: &'a [NodeGroup],
    /// CA's flags (the scale-down timer and whether scale-down runs at all).
    pub options: &'a ResolvedOptions,
    /// The EKS cluster: the node role's and the discovery tag's name.
    pub cluster_name: &'a str,
    pub catalogue: &'a Catalogue,
}

/// The objects to apply, and why each is as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub nodeclasses: Vec<EC2NodeClass>,
    pub nodepools: Vec<NodePool>,
    pub notes: Vec<ProposalNote>,
}

/// One choice the proposal made, about one object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposalNote {
    /// `NodePool/<name>` or `EC2NodeClass/<name>`.
    pub object: String,
    pub reason: ProposalReason,
}

impl fmt::Display for ProposalNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object, self.reason)
    }
}

/// Why a proposed object is as it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum ProposalReason {
    /// The groups this NodePool replaces (several when their nodes look alike to pods).
    Groups { groups: Vec<String> },
    /// The NodePool is named after the `karpenter.sh/nodepool` label the groups' nodes carried, so
    /// pods selecting it keep landing.
    NamedAfterLabel { value: String },
    /// Requirements: exactly the groups' instance types, zones and purchase option.
    Requirements { instance_types: Vec<String>, zones: Vec<String>, capacity_type: String },
    /// `limits` from the groups' sizes.
    Limits { cpu: i64, memory_gib: i64, max_nodes: i64 },
    /// CA's scale-down as consolidation.
    Consolidation { consolidate_after: String, utilization_threshold: f64 },
    /// CA's scale-down is off: consolidation is too.
    ConsolidationOff,
    /// Karpenter's default expiry, which CA has no counterpart of.
    Expiry { expire_after: String },
    /// Groups kept a minimum of nodes, which a NodePool does not.
    MinimumSize { groups: Vec<(String, i64)> },
    /// A label naming each node's group, which the NodePool's nodes cannot carry.
    GroupNameLabel { key: String, values: Vec<String>, nodepool: String },
    /// A label Karpenter puts on its nodes itself.
    LabelSetByKarpenter { key: String, value: String },
    /// A label a NodePool may not carry.
    LabelDropped { key: String, value: String, error: String },
    /// Extra capacity from `node-template/resources` tags that Karpenter cannot know of.
    ExtraResources { groups: Vec<String>, resources: Vec<String> },
    /// Per-group options with no NodePool counterpart.
    OptionsIgnored { group: String, options: Vec<String> },
    /// The node class: AMI, role and how subnets and security groups are found.
    NodeClass { ami_alias: String, role: String, discovery_tag: String },
}

impl fmt::Display for ProposalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProposalReason::Groups { groups } if groups.len() == 1 => {
                write!(f, "replaces node group {}", groups[0])
            }
            ProposalReason::Groups { groups } => write!(
                f,
                "replaces node groups {}: their nodes carry the same labels and taints and the same purchase \
                 option, so one NodePool serves them and Karpenter picks the shape per launch",
                groups.join(", ")
            ),
            ProposalReason::NamedAfterLabel { value } => write!(
                f,
                "named {value:?} after the groups' {} label, which Karpenter sets to the NodePool's name: pods \
                 selecting it still land",
                labels::NODEPOOL
            ),
            ProposalReason::Requirements { instance_types, zones, capacity_type } => write!(
                f,
                "allows exactly the groups' instance types ({}), zones ({}) and {capacity_type} capacity; widen the \
                 instance types (for example to {} and {} requirements) to let Karpenter pick cheaper or better \
                 fitting shapes",
                instance_types.join(", "),
                zones.join(", "),
                labels::aws::INSTANCE_CATEGORY,
                labels::aws::INSTANCE_GENERATION
            ),
            ProposalReason::Limits { cpu, memory_gib, max_nodes } => write!(
                f,
                "limits cpu {cpu} and memory {memory_gib}Gi: the groups' maxSize ({max_nodes} node(s) in all) times \
                 their largest type's capacity, so the NodePool can grow as far as the groups could"
            ),
            ProposalReason::Consolidation { consolidate_after, utilization_threshold } => write!(
                f,
                "consolidationPolicy WhenEmptyOrUnderutilized after {consolidate_after}: CA removed a node \
                 {consolidate_after} after its requests fell under {utilization_threshold} of allocatable and its \
                 pods fit elsewhere; Karpenter removes or replaces any node whose pods fit elsewhere or on a \
                 cheaper node, whatever its utilization"
            ),
            ProposalReason::ConsolidationOff => write!(
                f,
                "consolidateAfter Never: CA's scale-down is off (--scale-down-enabled=false), so nodes are not \
                 consolidated either; empty and underutilized nodes then stay until they expire"
            ),
            ProposalReason::Expiry { expire_after } => write!(
                f,
                "expireAfter {expire_after}, Karpenter's default: a node is replaced once it is that old, which CA \
                 never did; set Never to keep nodes as long as they are needed"
            ),
            ProposalReason::MinimumSize { groups } => {
                let list: Vec<String> = groups.iter().map(|(g, n)| format!("{g} minSize {n}")).collect();
                write!(
                    f,
                    "{}: a NodePool keeps no minimum, Karpenter launches nodes only for pending pods; keep warm \
                     capacity with a low-priority placeholder Deployment",
                    list.join(", ")
                )
            }
            ProposalReason::GroupNameLabel { key, values, nodepool } => write!(
                f,
                "label {key} ({}) names the group a node came from and is not in the template; the NodePool's \
                 nodes carry {}={nodepool} instead: pods selecting {key} must select that",
                values.join(", "),
                labels::NODEPOOL
            ),
            ProposalReason::LabelSetByKarpenter { key, value } => write!(
                f,
                "label {key}={value} is not in the template: Karpenter labels its nodes with it from the instance \
                 type and the requirements"
            ),
            ProposalReason::LabelDropped { key, value, error } => {
                write!(f, "label {key}={value} dropped: {error}; pods selecting it need another label or a requirement")
            }
            ProposalReason::ExtraResources { groups, resources } => write!(
                f,
                "{} added {} through node-template/resources tags; Karpenter knows a node's resources from its \
                 instance type only, so pods requesting what the type does not have will not trigger a launch",
                groups.join(", "),
                resources.join(", ")
            ),
            ProposalReason::OptionsIgnored { group, options } => write!(
                f,
                "{group}'s autoscaling options {} have no NodePool counterpart and are not carried over",
                options.join(", ")
            ),
            ProposalReason::NodeClass { ami_alias, role, discovery_tag } => write!(
                f,
                "AMI alias {ami_alias}, node role {role}; subnets and security groups are those tagged \
                 {}={discovery_tag}: create the role and tag them as Karpenter's getting-started guide does",
                DISCOVERY_TAG
            ),
        }
    }
}

/// What makes groups' nodes alike to a pod: groups sharing it become one NodePool.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct PoolKey {
    capacity_type: GroupCapacityType,
    /// Labels other than those Karpenter derives from the instance type.
    labels: BTreeMap<String, String>,
    /// (key, value, effect), sorted.
    taints: Vec<(String, String, String)>,
    consolidate_after: String,
}

/// NodePools and an EC2NodeClass that allow at least what `input.groups` allowed.
pub fn propose_nodepools(input: ProposalInput<'_>) -> Proposal {
    let mut pools: BTreeMap<PoolKey, Vec<&NodeGroup>> = BTreeMap::new();
    let mut sorted: Vec<&NodeGroup> = input.groups.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for group in sorted {
        pools.entry(pool_key(group, input.options)).or_default().push(group);
    }
    let mut notes = Vec::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut nodepools = Vec::new();
    // Pools in the order of their first group's name, so the output reads like the input.
    let mut ordered: Vec<(PoolKey, Vec<&NodeGroup>)> = pools.into_iter().collect();
    ordered.sort_by(|a, b| a.1[0].metadata.name.cmp(&b.1[0].metadata.name));
    for (key, groups) in ordered {
        let (nodepool, pool_notes) = nodepool_for(&key, &groups, input, &mut names);
        nodepools.push(nodepool);
        notes.extend(pool_notes);
    }
    let (nodeclass, note) = nodeclass(input.cluster_name);
    notes.insert(0, note);
    Proposal { nodeclasses: vec![nodeclass], nodepools, notes }
}

fn group_name(group: &NodeGroup) -> &str {
    group.metadata.name.as_deref().unwrap_or("")
}

fn consolidate_after(group: &NodeGroup, options: &ResolvedOptions) -> String {
    if !options.scale_down_enabled {
        return "Never".into();
    }
    match &group.spec.autoscaling_options.scale_down_unneeded_time {
        Some(time) => time.clone(),
        None => go_duration(options.scale_down_unneeded_time_seconds),
    }
}

/// Whole seconds as the shortest Go duration (`10m`, `1h30m`, `45s`).
fn go_duration(seconds: f64) -> String {
    let total = seconds.round() as i64;
    let (h, m, s) = (total / 3600, total % 3600 / 60, total % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Labels the instance type or the capacity type decide; Karpenter sets them on its nodes.
fn set_by_karpenter(key: &str) -> bool {
    key == labels::NODEPOOL || key == labels::CAPACITY_TYPE || labels::is_well_known(key)
}

fn pool_key(group: &NodeGroup, options: &ResolvedOptions) -> PoolKey {
    let labels = group
        .spec
        .labels
        .iter()
        .filter(|(k, _)| !set_by_karpenter(k) || k.as_str() == labels::NODEPOOL)
        .filter(|(k, _)| !GROUP_NAME_LABELS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut taints: Vec<(String, String, String)> = group
        .spec
        .taints
        .iter()
        .map(|t| (t.key.clone(), t.value.clone().unwrap_or_default(), t.effect.clone()))
        .collect();
    taints.sort();
    PoolKey {
        capacity_type: group.spec.capacity_type,
        labels,
        taints,
        consolidate_after: consolidate_after(group, options),
    }
}

/// A NodePool name from a group name: lower case, DNS-1123 characters, unique among `taken`.
fn unique_name(wanted: &str, taken: &mut BTreeSet<String>) -> String {
    let mut base: String = wanted
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' })
        .collect();
    base = base.trim_matches(|c| c == '-' || c == '.').chars().take(60).collect();
    if base.is_empty() {
        base = "nodepool".into();
    }
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}-{n}");
        n += 1;
    }
    taken.insert(name.clone());
    name
}

/// The words (split at `-`, `_` and `.`) all group names start with, so `general-1a` and
/// `general-1b` make `general`; the first group's name when they share none.
fn shared_name(groups: &[&NodeGroup]) -> String {
    let split = |g: &NodeGroup| -> Vec<String> { group_name(g).split(['-', '_', '.']).map(str::to_string).collect() };
    let mut words = split(groups[0]);
    for group in &groups[1..] {
        let other = split(group);
        let same = words.iter().zip(&other).take_while(|(a, b)| a == b).count();
        words.truncate(same);
    }
    if words.iter().all(|w| w.is_empty()) {
        group_name(groups[0]).to_string()
    } else {
        words.join("-")
    }
}

/// Pushes `item` unless it is already in `into`, keeping first-seen order.
fn push_new(into: &mut Vec<String>, item: &str) {
    if !into.iter().any(|i| i == item) {
        into.push(item.to_string());
    }
}

fn nodepool_for(
    key: &PoolKey,
    groups: &[&NodeGroup],
    input: ProposalInput<'_>,
    names: &mut BTreeSet<String>,
) -> (NodePool, Vec<ProposalNote>) {
    let first = groups[0];
    let from_label = key.labels.get(labels::NODEPOOL);
    let shared = shared_name(groups);
    let name = unique_name(from_label.map_or(shared.as_str(), String::as_str), names);
    let object = format!("NodePool/{name}");
    let mut reasons =
        vec![ProposalReason::Groups { groups: groups.iter().map(|g| group_name(g).to_string()).collect() }];
    if let Some(value) = from_label.filter(|v| **v == name) {
        reasons.push(ProposalReason::NamedAfterLabel { value: value.clone() });
    }

    let (mut instance_types, mut zones) = (Vec::new(), Vec::new());
    let (mut cpu, mut memory_mib, mut max_nodes) = (0i64, 0i64, 0i64);
    for group in groups {
        for t in &group.spec.instance_types {
            push_new(&mut instance_types, t);
        }
        for z in &group.spec.zones {
            push_new(&mut zones, z);
        }
        let largest = |f: &dyn Fn(&crate::catalogue::InstanceTypeInfo) -> i64| {
            group.spec.instance_types.iter().filter_map(|t| input.catalogue.info(t)).map(f).max().unwrap_or(0)
        };
        let size = group.spec.max_size.max(0);
        max_nodes = max_nodes.saturating_add(size);
        cpu = cpu.saturating_add(size.saturating_mul(largest(&|i| i64::from(i.vcpu))));
        memory_mib = memory_mib.saturating_add(size.saturating_mul(largest(&|i| i.memory_mib as i64)));
    }
    let memory_gib = (memory_mib + 1023) / 1024;
    let capacity_type = key.capacity_type.as_str();
    reasons.push(ProposalReason::Requirements {
        instance_types: instance_types.clone(),
        zones: zones.clone(),
        capacity_type: capacity_type.to_string(),
    });
    reasons.push(ProposalReason::Limits { cpu, memory_gib, max_nodes });
    reasons.push(if key.consolidate_after == "Never" {
        ProposalReason::ConsolidationOff
    } else {
        let threshold = first
            .spec
            .autoscaling_options
            .scale_down_utilization_threshold
            .unwrap_or(input.options.scale_down_utilization_threshold);
        ProposalReason::Consolidation {
            consolidate_after: key.consolidate_after.clone(),
            utilization_threshold: threshold,
        }
    });
    let minimums: Vec<(String, i64)> =
        groups.iter().filter(|g| g.spec.min_size > 0).map(|g| (group_name(g).to_string(), g.spec.min_size)).collect();
    if !minimums.is_empty() {
        reasons.push(ProposalReason::MinimumSize { groups: minimums });
    }

    let mut template_labels = BTreeMap::new();
    // Every group of the pool has the same labels but for those Karpenter sets: note those once.
    let mut noted: BTreeSet<&String> = BTreeSet::new();
    let mut group_names: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for group in groups {
        for (k, v) in &group.spec.labels {
            if let Some(key) = GROUP_NAME_LABELS.iter().find(|l| **l == k.as_str()) {
                group_names.entry(key).or_default().push(v.clone());
                continue;
            }
            if k == labels::NODEPOOL && from_label.is_some_and(|l| *l == name) {
                continue;
            }
            if set_by_karpenter(k) && k != labels::NODEPOOL {
                if noted.insert(k) {
                    reasons.push(ProposalReason::LabelSetByKarpenter { key: k.clone(), value: v.clone() });
                }
                continue;
            }
            if template_labels.contains_key(k) || !noted.insert(k) {
                continue;
            }
            let mut errors: Vec<FieldError> = Vec::new();
            validate_template_labels(&BTreeMap::from([(k.clone(), v.clone())]), "labels", &mut errors);
            if let Some(e) = errors.first() {
                reasons.push(ProposalReason::LabelDropped {
                    key: k.clone(),
                    value: v.clone(),
                    error: e.message.clone(),
                });
            } else {
                template_labels.insert(k.clone(), v.clone());
            }
        }
    }
    for (key, values) in group_names {
        reasons.push(ProposalReason::GroupNameLabel { key: key.to_string(), values, nodepool: name.clone() });
    }
    let taints: Vec<Taint> = key
        .taints
        .iter()
        .map(|(k, v, effect)| Taint {
            key: k.clone(),
            value: (!v.is_empty()).then(|| v.clone()),
            effect: effect.clone(),
            time_added: None,
        })
        .collect();
    for group in groups {
        if !group.spec.resources.is_empty() {
            reasons.push(ProposalReason::ExtraResources {
                groups: vec![group_name(group).to_string()],
                resources: group.spec.resources.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            });
        }
        let o = &group.spec.autoscaling_options;
        let ignored: Vec<String> = [
            ("scaleDownGpuUtilizationThreshold", o.scale_down_gpu_utilization_threshold.is_some()),
            ("scaleDownUnreadyTime", o.scale_down_unready_time.is_some()),
            ("ignoreDaemonsetsUtilization", o.ignore_daemonsets_utilization.is_some()),
        ]
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(field, _)| field.to_string())
        .collect();
        if !ignored.is_empty() {
            reasons.push(ProposalReason::OptionsIgnored { group: group_name(group).to_string(), options: ignored });
        }
    }

    let value = json!({
        "apiVersion": crate::api::KARPENTER_API_VERSION,
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": key.consolidate_after,
            },
            "limits": {"cpu": cpu.to_string(), "memory": format!("{memory_gib}Gi")},
            "template": {
                "metadata": {"labels": template_labels},
                "spec": {
                    "nodeClassRef": {"group": crate::api::AWS_GROUP, "kind": "EC2NodeClass", "name": NODE_CLASS_NAME},
                    "requirements": [
                        {"key": labels::INSTANCE_TYPE, "operator": "In", "values": instance_types},
                        {"key": labels::TOPOLOGY_ZONE, "operator": "In", "values": zones},
                        {"key": labels::CAPACITY_TYPE, "operator": "In", "values": [capacity_type]},
                    ],
                    "taints": taints,
                },
            },
        },
    });
    let nodepool: NodePool = serde_json::from_value(value).expect("a NodePool built from its own fields deserializes");
    reasons.push(ProposalReason::Expiry { expire_after: nodepool.spec.template.spec.expire_after.to_string() });
    let notes = reasons.into_iter().map(|reason| ProposalNote { object: object.clone(), reason }).collect();
    (nodepool, notes)
}

fn nodeclass(cluster_name: &str) -> (EC2NodeClass, ProposalNote) {
    let role = format!("KarpenterNodeRole-{cluster_name}");
    let ami_alias = "al2023@latest".to_string();
    let selector = json!([{"tags": {DISCOVERY_TAG: cluster_name}}]);
    let value = json!({
        "apiVersion": crate::api::AWS_API_VERSION,
        "kind": "EC2NodeClass",
        "metadata": {"name": NODE_CLASS_NAME},
        "spec": {
            "amiSelectorTerms": [{"alias": ami_alias}],
            "role": role,
            "securityGroupSelectorTerms": selector,
            "subnetSelectorTerms": selector,
        },
    });
    let nodeclass: EC2NodeClass =
        serde_json::from_value(value).expect("an EC2NodeClass built from its own fields deserializes");
    let note = ProposalNote {
        object: format!("EC2NodeClass/{NODE_CLASS_NAME}"),
        reason: ProposalReason::NodeClass { ami_alias, role, discovery_tag: cluster_name.to_string() },
    };
    (nodeclass, note)
}

#[cfg(test)]
mod tests;
