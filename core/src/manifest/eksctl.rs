//! An eksctl `ClusterConfig` (`eksctl.io/v1alpha5`): its `nodeGroups` (self-managed Auto Scaling
//! groups) and `managedNodeGroups` (EKS managed node groups) as the [`NodeGroup`]s Cluster
//! Autoscaler scales.
//!
//! upstream: eksctl-io/eksctl `pkg/apis/eksctl.io/v1alpha5/types.go` (the fields, the taint forms
//! of `taintsWrapper`), `defaults.go` (`setDefaultNodeLabels`, the default instance type),
//! `validation.go` `ValidateManagedNodeGroup` and `pkg/cfn/builder/nodegroup.go` (the sizes a group
//! gets when they are not written). eksctl parses the file strictly (`pkg/eks/api.go`
//! `ParseConfig`), so a field it does not have is an error here too; fields it has that do not
//! change what CA does (IAM, SSH, volumes, bootstrap commands, …) are read over.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use serde_json::{Map, Value};

use super::{yaml, Ctx, FieldSources, ObjectRef, Problem, ProblemKind, ReadGroup, ReadGroups, TAINT_EFFECTS};
use crate::api::clusterautoscaler::{GroupCapacityType, NodeGroup, NodeGroupSpec};
use crate::labels::aws::{EKSCTL_CLUSTER_NAME, EKSCTL_NODEGROUP_NAME, EKS_CAPACITY_TYPE, EKS_NODEGROUP};

pub(super) const API_VERSION_EKSCTL: &str = "eksctl.io/v1alpha5";
pub(super) const KIND: &str = "ClusterConfig";

/// eksctl's `DefaultNodeType`.
const DEFAULT_INSTANCE_TYPE: &str = "m5.large";
/// eksctl's `DefaultNodeCount`: a group's size when none is written.
const DEFAULT_NODE_COUNT: i64 = 2;

const CLUSTER_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "upgradePolicy",
    "kubernetesNetworkConfig",
    "autoModeConfig",
    "remoteNetworkConfig",
    "iam",
    "iamIdentityMappings",
    "identityProviders",
    "accessConfig",
    "vpc",
    "addons",
    "addonsConfig",
    "privateCluster",
    "nodeGroups",
    "managedNodeGroups",
    "fargateProfiles",
    "availabilityZones",
    "localZones",
    "cloudWatch",
    "secretsEncryption",
    "gitops",
    "karpenter",
    "outpost",
    "controlPlaneScalingConfig",
    "zonalShiftConfig",
    "kubeAPIServerConfig",
    "kubeSchedulerConfig",
    "kubeControllerManagerConfig",
    "capabilities",
];
const METADATA_FIELDS: &[&str] =
    &["name", "region", "version", "forceUpdateVersion", "rollbackConfig", "tags", "annotations"];
/// `NodeGroupBase`, shared by both kinds of group.
const BASE_FIELDS: &[&str] = &[
    "name",
    "amiFamily",
    "instanceType",
    "availabilityZones",
    "subnets",
    "instancePrefix",
    "instanceName",
    "desiredCapacity",
    "minSize",
    "maxSize",
    "volumeSize",
    "ssh",
    "labels",
    "privateNetworking",
    "tags",
    "iam",
    "ami",
    "securityGroups",
    "maxPodsPerNode",
    "asgSuspendProcesses",
    "ebsOptimized",
    "volumeType",
    "volumeName",
    "volumeEncrypted",
    "volumeKmsKeyID",
    "volumeIOPS",
    "volumeThroughput",
    "additionalVolumes",
    "preBootstrapCommands",
    "overrideBootstrapCommand",
    "propagateASGTags",
    "disableIMDSv1",
    "disablePodIMDS",
    "placement",
    "efaEnabled",
    "instanceSelector",
    "bottlerocket",
    "enableDetailedMonitoring",
    "capacityReservation",
    "instanceMarketOptions",
    "outpostARN",
];
const SELF_MANAGED_FIELDS: &[&str] = &[
    "instancesDistribution",
    "asgMetricsCollection",
    "cpuCredits",
    "classicLoadBalancerNames",
    "targetGroupARNs",
    "taints",
    "updateConfig",
    "clusterDNS",
    "kubeletExtraConfig",
    "containerRuntime",
    "maxInstanceLifetime",
    "localZones",
    "enclaveEnabled",
];
const MANAGED_FIELDS: &[&str] =
    &["instanceTypes", "spot", "taints", "updateConfig", "launchTemplate", "releaseVersion", "nodeRepairConfig"];
const DISTRIBUTION_FIELDS: &[&str] = &[
    "instanceTypes",
    "maxPrice",
    "onDemandBaseCapacity",
    "onDemandPercentageAboveBaseCapacity",
    "spotInstancePools",
    "spotAllocationStrategy",
    "capacityRebalance",
];

/// Reads the node groups of a ClusterConfig; problems stop a group, warnings do not.
pub(super) fn read<'a>(
    config: &Map<String, Value>,
    ctx: &Ctx<'a>,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> ReadGroups<'a> {
    let mut fields = Fields { map: config, ctx, problems };
    fields.unknown(CLUSTER_FIELDS, "", "a ClusterConfig");
    let metadata = fields.map("metadata");
    let cluster_name = match metadata {
        Some(m) => {
            let mut meta = Fields { map: m, ctx, problems: fields.problems };
            meta.unknown(METADATA_FIELDS, "metadata.", "a ClusterConfig's metadata");
            let name = meta.string("name", "metadata.");
            if name.is_none() {
                meta.problem("metadata.name", "a ClusterConfig needs metadata.name".into());
            }
            let region = meta.string("region", "metadata.");
            (name, region)
        }
        None => {
            fields.problem("metadata", "a ClusterConfig needs metadata (name and region)".into());
            (None, None)
        }
    };
    let (cluster_name, region) = cluster_name;
    let cluster_zones = fields.strings("availabilityZones", "");
    let mut out = ReadGroups { groups: Vec::new(), cluster_name: cluster_name.clone() };
    let cluster =
        Cluster { name: cluster_name.as_deref().unwrap_or(""), region: region.as_deref(), zones: &cluster_zones };
    for (list, managed) in [("nodeGroups", false), ("managedNodeGroups", true)] {
        let Some(value) = config.get(list) else { continue };
        let Some(items) = value.as_array() else {
            problems.push(ctx.problem(ProblemKind::InvalidValue, Some(list), format!("{list} must be a list")));
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            let name = item.get("name").and_then(Value::as_str).unwrap_or("<unnamed>");
            let kind = if managed { "ManagedNodeGroup" } else { "SelfManagedNodeGroup" };
            let item_ctx = Ctx {
                doc: ctx.doc,
                item: None,
                prefix: yaml::child_index(&yaml::child_key(&ctx.prefix, list), i),
                object: Some(ObjectRef { kind: kind.into(), namespace: None, name: name.to_string() }),
            };
            let Some(map) = item.as_object() else {
                problems.push(item_ctx.problem(ProblemKind::InvalidValue, None, "expected a node group".into()));
                continue;
            };
            if let Some(group) = read_group(map, item_ctx, managed, &cluster, problems, warnings) {
                out.groups.push(group);
            }
        }
    }
    out
}

/// What a group takes from its cluster.
struct Cluster<'c> {
    name: &'c str,
    region: Option<&'c str>,
    zones: &'c [String],
}

/// Typed reads of one mapping, each failure a problem at its field.
struct Fields<'m, 'c, 'p> {
    map: &'m Map<String, Value>,
    ctx: &'c Ctx<'c>,
    problems: &'p mut Vec<Problem>,
}

impl<'m> Fields<'m, '_, '_> {
    fn problem(&mut self, field: &str, message: String) {
        self.problems.push(self.ctx.problem(ProblemKind::InvalidValue, Some(field), message));
    }

    /// Every key not in `known` is a problem, as eksctl's strict parsing makes it.
    fn unknown(&mut self, known: &[&str], prefix: &str, what: &str) {
        for key in self.map.keys() {
            if !known.contains(&key.as_str()) {
                let p = self.ctx.problem(
                    ProblemKind::UnknownField,
                    Some(&format!("{prefix}{key}")),
                    format!("unknown field {key:?}: not a field of {what} (eksctl.io/v1alpha5)"),
                );
                self.problems.push(p);
            }
        }
    }

    fn map(&mut self, key: &str) -> Option<&'m Map<String, Value>> {
        let value = self.map.get(key)?;
        let map = value.as_object();
        if map.is_none() && !value.is_null() {
            self.problem(key, format!("{key} must be a mapping"));
        }
        map
    }

    fn string(&mut self, key: &str, prefix: &str) -> Option<String> {
        let value = self.map.get(key)?;
        match value.as_str() {
            Some(s) => Some(s.to_string()),
            None => {
                self.problem(&format!("{prefix}{key}"), format!("{key} must be a string"));
                None
            }
        }
    }

    fn int(&mut self, key: &str, prefix: &str) -> Option<i64> {
        let value = self.map.get(key)?;
        match value.as_i64() {
            Some(n) => Some(n),
            None => {
                self.problem(&format!("{prefix}{key}"), format!("{key} must be a whole number, got {value}"));
                None
            }
        }
    }

    fn bool(&mut self, key: &str) -> bool {
        match self.map.get(key) {
            None => false,
            Some(v) => v.as_bool().unwrap_or_else(|| {
                self.problem(key, format!("{key} must be true or false"));
                false
            }),
        }
    }

    fn strings(&mut self, key: &str, prefix: &str) -> Vec<String> {
        let Some(value) = self.map.get(key) else { return Vec::new() };
        let Some(list) = value.as_array() else {
            self.problem(&format!("{prefix}{key}"), format!("{key} must be a list of strings"));
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, v) in list.iter().enumerate() {
            match v.as_str() {
                Some(s) => out.push(s.to_string()),
                None => self.problem(&format!("{prefix}{key}[{i}]"), "must be a string".into()),
            }
        }
        out
    }

    fn string_map(&mut self, key: &str) -> BTreeMap<String, String> {
        let Some(map) = self.map(key) else { return BTreeMap::new() };
        let mut out = BTreeMap::new();
        for (k, v) in map {
            match v.as_str() {
                Some(s) => {
                    out.insert(k.clone(), s.to_string());
                }
                None => self.problem(&format!("{key}.{k}"), format!("the value of {k:?} must be a string")),
            }
        }
        out
    }
}

fn read_group<'a>(
    map: &Map<String, Value>,
    ctx: Ctx<'a>,
    managed: bool,
    cluster: &Cluster<'_>,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> Option<ReadGroup<'a>> {
    let before = problems.len();
    let mut f = Fields { map, ctx: &ctx, problems };
    let (kind_fields, what) = if managed {
        (MANAGED_FIELDS, "a managedNodeGroups entry")
    } else {
        (SELF_MANAGED_FIELDS, "a nodeGroups entry")
    };
    let known: Vec<&str> = BASE_FIELDS.iter().chain(kind_fields).copied().collect();
    f.unknown(&known, "", what);
    let name = f.string("name", "").unwrap_or_default();
    if name.is_empty() {
        f.problem("name", "a node group needs its name".into());
    }
    let mut sources = FieldSources::default();

    if f.map.get("instanceSelector").is_some_and(|v| v.as_object().is_some_and(|m| !m.is_empty())) {
        f.problem(
            "instanceSelector",
            "instanceSelector is resolved to instance types by the EC2 API when eksctl creates the group: list \
             them as instanceTypes"
                .into(),
        );
    }

    // Instance types and the purchase option.
    let instance_type = f.string("instanceType", "");
    let mut instance_types = Vec::new();
    let mut capacity_type = GroupCapacityType::OnDemand;
    if managed {
        let listed = f.strings("instanceTypes", "");
        if !listed.is_empty() {
            sources.add("instanceTypes", "instanceTypes", "");
            instance_types = listed;
        } else if let Some(t) = &instance_type {
            sources.add("instanceTypes", "instanceType", "");
            instance_types.push(t.clone());
        } else if f.map.contains_key("launchTemplate") {
            f.problem(
                "launchTemplate",
                "no instance type: it is in the launch template, which this file does not hold; add instanceType \
                 or instanceTypes"
                    .into(),
            );
        } else {
            instance_types.push(DEFAULT_INSTANCE_TYPE.into());
        }
        if f.bool("spot") {
            capacity_type = GroupCapacityType::Spot;
        }
    } else {
        let distribution = f.map("instancesDistribution");
        if let Some(d) = distribution {
            let mut df = Fields { map: d, ctx: f.ctx, problems: f.problems };
            df.unknown(DISTRIBUTION_FIELDS, "instancesDistribution.", "instancesDistribution");
            instance_types = df.strings("instanceTypes", "instancesDistribution.");
            sources.add("instanceTypes", "instancesDistribution.instanceTypes", "");
            let base = df.int("onDemandBaseCapacity", "instancesDistribution.").unwrap_or(0);
            let percent = df.int("onDemandPercentageAboveBaseCapacity", "instancesDistribution.").unwrap_or(100);
            if base == 0 && percent == 0 {
                capacity_type = GroupCapacityType::Spot;
            } else if percent < 100 {
                warnings.push(f.ctx.problem(
                    ProblemKind::InvalidValue,
                    Some("instancesDistribution"),
                    format!(
                        "the group mixes on-demand (base {base}, {percent}% above it) and spot; a node group here \
                         has one purchase option, so it is read as on-demand"
                    ),
                ));
            }
        }
        match (&instance_type, instance_types.is_empty()) {
            (Some(t), true) if t != "mixed" => {
                sources.add("instanceTypes", "instanceType", "");
                instance_types.push(t.clone());
            }
            (None, true) => instance_types.push(DEFAULT_INSTANCE_TYPE.into()),
            _ => {}
        }
        if instance_types.is_empty() {
            f.problem("instanceType", "instanceType mixed needs instancesDistribution.instanceTypes".into());
        }
    }

    // Sizes, with eksctl's defaults for what is not written.
    let desired = f.int("desiredCapacity", "");
    let written_min = f.int("minSize", "");
    let written_max = f.int("maxSize", "");
    let min_size = written_min.unwrap_or(desired.unwrap_or(DEFAULT_NODE_COUNT));
    let mut max_size = written_max.unwrap_or(desired.unwrap_or(min_size));
    if managed && written_max.is_none() && max_size == 0 {
        max_size = 1;
    }
    let desired_capacity = if managed { Some(desired.unwrap_or(min_size)) } else { desired };
    sources.add("minSize", if written_min.is_some() { "minSize" } else { "desiredCapacity" }, "");
    sources.add("maxSize", if written_max.is_some() { "maxSize" } else { "desiredCapacity" }, "");
    sources.add("desiredCapacity", "desiredCapacity", "");

    // Zones: the group's, else the cluster's, else every zone of the region (eksctl picked some at
    // creation; which is not in the file).
    let mut zones = f.strings("availabilityZones", "");
    if !zones.is_empty() {
        sources.add("zones", "availabilityZones", "");
    } else if !cluster.zones.is_empty() {
        zones = cluster.zones.to_vec();
    } else {
        let catalogue = crate::catalogue::Catalogue::embedded();
        match cluster.region.and_then(|r| catalogue.zones(r)) {
            Some(region_zones) => {
                zones = region_zones.iter().map(|z| z.name.clone()).collect();
                warnings.push(f.ctx.problem(
                    ProblemKind::InvalidValue,
                    Some("availabilityZones"),
                    format!(
                        "no availabilityZones on the group or the cluster: eksctl chose them when it created the \
                         cluster; read as every zone of {} ({})",
                        cluster.region.unwrap_or_default(),
                        zones.join(", ")
                    ),
                ));
            }
            None => f.problem(
                "availabilityZones",
                "no availabilityZones on the group or the cluster, and no known metadata.region to take them from"
                    .into(),
            ),
        }
    }

    // Labels: the group's, eksctl's own, and for a managed group EKS's.
    let mut labels = f.string_map("labels");
    labels.insert(EKSCTL_CLUSTER_NAME.into(), cluster.name.to_string());
    labels.insert(EKSCTL_NODEGROUP_NAME.into(), name.clone());
    if managed {
        labels.insert(EKS_NODEGROUP.into(), name.clone());
        let eks_capacity = if capacity_type == GroupCapacityType::Spot { "SPOT" } else { "ON_DEMAND" };
        labels.insert(EKS_CAPACITY_TYPE.into(), eks_capacity.into());
    }
    sources.add("labels", "labels", "");

    let taints = read_taints(&mut f, managed);
    sources.add("taints", "taints", "");

    if f.problems.len() > before {
        return None;
    }
    let group = NodeGroup::new(
        name,
        NodeGroupSpec {
            min_size,
            max_size,
            desired_capacity,
            instance_types,
            zones,
            capacity_type,
            labels,
            taints,
            resources: BTreeMap::new(),
            autoscaling_options: Default::default(),
        },
    );
    Some(ReadGroup { group, ctx, sources })
}

/// `taints`: a list of `{key, value, effect}`; a self-managed group may also write a map of
/// `key: value:Effect` (or `key: Effect`), as eksctl's `taintsWrapper` reads it.
fn read_taints(f: &mut Fields<'_, '_, '_>, managed: bool) -> Vec<Taint> {
    let Some(value) = f.map.get("taints") else { return Vec::new() };
    let mut out = Vec::new();
    let mut push = |f: &mut Fields<'_, '_, '_>, at: String, key: &str, value: &str, effect: &str| {
        if !TAINT_EFFECTS.contains(&effect) {
            f.problem(&at, format!("taint effect {effect:?} is not NoSchedule, PreferNoSchedule or NoExecute"));
            return;
        }
        out.push(Taint {
            key: key.to_string(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.to_string(),
            time_added: None,
        });
    };
    match value {
        Value::Array(list) => {
            for (i, item) in list.iter().enumerate() {
                let at = format!("taints[{i}]");
                let Some(t) = item.as_object() else {
                    f.problem(&at, "a taint is {key, value, effect}".into());
                    continue;
                };
                if let Some(k) = t.keys().find(|k| !["key", "value", "effect"].contains(&k.as_str())) {
                    f.problem(&format!("{at}.{k}"), format!("unknown field {k:?}: a taint has key, value and effect"));
                    continue;
                }
                let text = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                push(f, format!("{at}.effect"), &text("key"), &text("value"), &text("effect"));
            }
        }
        Value::Object(map) if !managed => {
            for (key, v) in map {
                let at = format!("taints.{key}");
                let Some(text) = v.as_str() else {
                    f.problem(&at, "a taint is written value:Effect".into());
                    continue;
                };
                let parts: Vec<&str> = text.split(':').collect();
                match parts.as_slice() {
                    [effect] => push(f, at, key, "", effect),
                    [value, effect] => push(f, at, key, value, effect),
                    _ => f.problem(&at, format!("taint {text:?} is not value:Effect")),
                }
            }
        }
        _ => f.problem(
            "taints",
            if managed {
                "a managed node group's taints are a list of {key, value, effect}".into()
            } else {
                "taints must be a {key: value:Effect} mapping or a list of {key, value, effect}".into()
            },
        ),
    }
    out
}

#[cfg(test)]
mod tests;
