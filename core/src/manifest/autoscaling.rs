//! Auto Scaling groups as the AWS CLI prints them (`aws autoscaling describe-auto-scaling-groups
//! --output json`: a document with `AutoScalingGroups`), read as Cluster Autoscaler reads them
//! into [`NodeGroup`]s.
//!
//! upstream: kubernetes/autoscaler, tag `cluster-autoscaler-1.36.1`, `cluster-autoscaler/`
//! `cloudprovider/aws/auto_scaling_groups.go` `buildAsgFromAWS` (sizes, zones, the mixed-instances
//! policy) and `cloudprovider/aws/aws_manager.go` `extractLabelsFromAsg`, `extractTaintsFromAsg`,
//! `extractAllocatableResourcesFromAsg`, `extractAutoscalingOptionsFromTags` (the
//! `k8s.io/cluster-autoscaler/node-template/…` tags). Where CA skips a tag it cannot read (a taint
//! without an effect, a bad quantity, an unknown option) this loader warns with the tag's place.
//! The AWS API grows fields over time, so fields not read here are not reported.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use serde_json::{Map, Value};

use super::{Ctx, FieldSources, ObjectRef, Problem, ProblemKind, ReadGroup, ReadGroups, TAINT_EFFECTS};
use crate::api::clusterautoscaler::{GroupCapacityType, GroupOptions, NodeGroup, NodeGroupSpec};
use crate::quantity::Quantity;

pub(super) const LABEL_TAG: &str = "k8s.io/cluster-autoscaler/node-template/label/";
pub(super) const TAINT_TAG: &str = "k8s.io/cluster-autoscaler/node-template/taint/";
pub(super) const RESOURCE_TAG: &str = "k8s.io/cluster-autoscaler/node-template/resources/";
pub(super) const OPTION_TAG: &str = "k8s.io/cluster-autoscaler/node-template/autoscaling-options/";

/// Reads the groups of a describe-auto-scaling-groups document; problems stop a group, warnings do
/// not.
pub(super) fn read<'a>(
    document: &Map<String, Value>,
    ctx: &Ctx<'a>,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> ReadGroups<'a> {
    let mut out = ReadGroups { groups: Vec::new(), cluster_name: None };
    let Some(list) = document.get("AutoScalingGroups").and_then(Value::as_array) else {
        problems.push(ctx.problem(ProblemKind::InvalidValue, Some("AutoScalingGroups"), "must be a list".into()));
        return out;
    };
    for (i, item) in list.iter().enumerate() {
        let prefix = super::yaml::child_index(&super::yaml::child_key(&ctx.prefix, "AutoScalingGroups"), i);
        let name = item.get("AutoScalingGroupName").and_then(Value::as_str).unwrap_or("<unnamed>");
        let item_ctx = Ctx {
            doc: ctx.doc,
            item: Some(i),
            prefix,
            object: Some(ObjectRef { kind: "AutoScalingGroup".into(), namespace: None, name: name.to_string() }),
        };
        let Some(map) = item.as_object() else {
            problems.push(item_ctx.problem(ProblemKind::InvalidValue, None, "expected an Auto Scaling group".into()));
            continue;
        };
        if let Some(group) = read_group(map, item_ctx, problems, warnings, &mut out.cluster_name) {
            out.groups.push(group);
        }
    }
    out
}

fn read_group<'a>(
    asg: &Map<String, Value>,
    ctx: Ctx<'a>,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
    cluster_name: &mut Option<String>,
) -> Option<ReadGroup<'a>> {
    let before = problems.len();
    let mut problem =
        |field: &str, message: String| problems.push(ctx.problem(ProblemKind::InvalidValue, Some(field), message));
    let name = match asg.get("AutoScalingGroupName").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => {
            problem("AutoScalingGroupName", "an Auto Scaling group needs its AutoScalingGroupName".into());
            String::new()
        }
    };
    let mut size = |field: &str| -> Option<i64> {
        match asg.get(field) {
            Some(v) => v.as_i64().or_else(|| {
                problem(field, format!("{field} must be a whole number, got {v}"));
                None
            }),
            None => None,
        }
    };
    let min_size = size("MinSize");
    let max_size = size("MaxSize");
    let desired = size("DesiredCapacity");
    if max_size.is_none() && !asg.contains_key("MaxSize") {
        problem("MaxSize", "an Auto Scaling group needs its MaxSize".into());
    }
    let mut sources = FieldSources::default();
    sources.add("minSize", "MinSize", "");
    sources.add("maxSize", "MaxSize", "");
    sources.add("desiredCapacity", "DesiredCapacity", "");
    sources.add("zones", "AvailabilityZones", "");

    let zones = strings(asg.get("AvailabilityZones"), "AvailabilityZones", &mut problem);

    // The instance types: the mixed-instances policy's overrides, whose first is CA's template;
    // else the types the group's instances run (the launch template's own type is not in the
    // CLI's output).
    let policy = asg.get("MixedInstancesPolicy");
    let overrides =
        policy.and_then(|p| p.get("LaunchTemplate")).and_then(|l| l.get("Overrides")).and_then(Value::as_array);
    let mut instance_types = Vec::new();
    if let Some(overrides) = overrides {
        sources.add("instanceTypes", "MixedInstancesPolicy.LaunchTemplate.Overrides", ".InstanceType");
        for (j, o) in overrides.iter().enumerate() {
            let at = format!("MixedInstancesPolicy.LaunchTemplate.Overrides[{j}]");
            match o.get("InstanceType").and_then(Value::as_str) {
                Some(t) => instance_types.push(t.to_string()),
                None if o.get("InstanceRequirements").is_some() => problem(
                    &format!("{at}.InstanceRequirements"),
                    "attribute-based instance type selection is not modelled: list the instance types the \
                     requirements select as overrides (CA's template takes the first type EC2 returns for them)"
                        .into(),
                ),
                None => problem(&at, "an override needs an InstanceType".into()),
            }
        }
    } else if let Some(instances) = asg.get("Instances").and_then(Value::as_array).filter(|l| !l.is_empty()) {
        sources.add("instanceTypes", "Instances", ".InstanceType");
        for i in instances {
            if let Some(t) = i.get("InstanceType").and_then(Value::as_str) {
                if !instance_types.iter().any(|x| x == t) {
                    instance_types.push(t.to_string());
                }
            }
        }
    }
    if instance_types.is_empty() && problems.len() == before {
        let from =
            if asg.contains_key("LaunchConfigurationName") { "LaunchConfigurationName" } else { "LaunchTemplate" };
        problems.push(
            ctx.problem(
                ProblemKind::InvalidValue,
                Some(from),
                "no instance type: the group's launch template or configuration holds it, which \
             describe-auto-scaling-groups does not print, and the group has no overrides or instances to read it \
             from; write the group as a NodeGroup with its instanceTypes"
                    .into(),
            ),
        );
    }

    // The purchase option: spot only when nothing above the on-demand base is on-demand and the
    // base is empty (the ASG API's defaults: base 0, 100% on-demand above it).
    let distribution = policy.and_then(|p| p.get("InstancesDistribution"));
    let number =
        |field: &str, default: i64| distribution.and_then(|d| d.get(field)).and_then(Value::as_i64).unwrap_or(default);
    let (base, percent) = (number("OnDemandBaseCapacity", 0), number("OnDemandPercentageAboveBaseCapacity", 100));
    let capacity_type = if base == 0 && percent == 0 { GroupCapacityType::Spot } else { GroupCapacityType::OnDemand };
    if percent > 0 && percent < 100 || (base > 0 && percent == 0) {
        warnings.push(ctx.problem(
            ProblemKind::InvalidValue,
            Some("MixedInstancesPolicy.InstancesDistribution"),
            format!(
                "the group mixes on-demand (base {base}, {percent}% above it) and spot; a node group here has one \
                 purchase option, so it is read as on-demand"
            ),
        ));
    }

    let mut labels = BTreeMap::new();
    let mut taints = Vec::new();
    let mut resources = BTreeMap::new();
    let mut options = GroupOptions::default();
    let tags = asg.get("Tags").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut managed = false;
    for (j, tag) in tags.iter().enumerate() {
        let (Some(key), Some(value)) =
            (tag.get("Key").and_then(Value::as_str), tag.get("Value").and_then(Value::as_str))
        else {
            continue;
        };
        let at = format!("Tags[{j}].Value");
        let mut warn = |message: String| warnings.push(ctx.problem(ProblemKind::InvalidValue, Some(&at), message));
        if let Some(label) = key.strip_prefix(LABEL_TAG).filter(|l| !l.is_empty()) {
            labels.insert(label.to_string(), value.to_string());
        } else if let Some(taint) = key.strip_prefix(TAINT_TAG).filter(|t| !t.is_empty()) {
            match value.split_once(':') {
                Some((v, effect)) if TAINT_EFFECTS.contains(&effect) => taints.push(Taint {
                    key: taint.to_string(),
                    value: (!v.is_empty()).then(|| v.to_string()),
                    effect: effect.to_string(),
                    time_added: None,
                }),
                _ => warn(format!(
                    "taint tag {key} = {value:?} is not <value>:<NoSchedule|NoExecute|PreferNoSchedule>; Cluster \
                     Autoscaler skips it, and so does this"
                )),
            }
        } else if let Some(resource) = key.strip_prefix(RESOURCE_TAG).filter(|r| !r.is_empty()) {
            match value.parse::<Quantity>() {
                Ok(q) => {
                    resources.insert(resource.to_string(), q);
                }
                Err(e) => warn(format!("resource tag {key} = {value:?} is not a quantity ({e}); skipped as CA does")),
            }
        } else if let Some(option) = key.strip_prefix(OPTION_TAG) {
            if let Err(message) = set_option(&mut options, option, value) {
                warn(message);
            }
        } else if key == "eks:nodegroup-name" {
            managed = true;
        }
        if cluster_name.is_none() {
            *cluster_name = cluster_of_tag(key, value);
        }
    }
    if managed && labels.is_empty() && taints.is_empty() {
        warnings.push(
            ctx.problem(
                ProblemKind::InvalidValue,
                Some("Tags"),
                "an EKS managed node group keeps its Kubernetes labels and taints in the EKS API (aws eks \
             describe-nodegroup), not in its group's tags; CA reads them there: give them as node-template tags, \
             the eksctl ClusterConfig or a NodeGroup"
                    .into(),
            ),
        );
    }
    if problems.len() > before {
        return None;
    }
    let group = NodeGroup::new(
        name,
        NodeGroupSpec {
            min_size: min_size.unwrap_or(0),
            max_size: max_size.unwrap_or(0),
            desired_capacity: desired,
            instance_types,
            zones,
            capacity_type,
            labels,
            taints,
            resources,
            autoscaling_options: options,
        },
    );
    Some(ReadGroup { group, ctx, sources })
}

/// A list of strings at `field`; anything else is a problem.
fn strings(value: Option<&Value>, field: &str, problem: &mut impl FnMut(&str, String)) -> Vec<String> {
    let Some(value) = value else { return Vec::new() };
    let Some(list) = value.as_array() else {
        problem(field, "must be a list of strings".into());
        return Vec::new();
    };
    list.iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let s = v.as_str().map(str::to_string);
            if s.is_none() {
                problem(&format!("{field}[{i}]"), "must be a string".into());
            }
            s
        })
        .collect()
}

/// One `autoscaling-options/<key>` tag (upstream `aws_manager.go` `GetAsgOptions`, whose keys are
/// lower case).
pub(super) fn set_option(options: &mut GroupOptions, key: &str, value: &str) -> Result<(), String> {
    let fraction =
        || value.parse::<f64>().map_err(|_| format!("option {key} = {value:?} is not a number; skipped as CA does"));
    let duration = || {
        crate::api::duration::parse_go_duration(value)
            .map(|_| value.to_string())
            .map_err(|e| format!("option {key} = {value:?} is not a Go duration ({e}); skipped as CA does"))
    };
    match key {
        "scaledownutilizationthreshold" => options.scale_down_utilization_threshold = Some(fraction()?),
        "scaledowngpuutilizationthreshold" => options.scale_down_gpu_utilization_threshold = Some(fraction()?),
        "scaledownunneededtime" => options.scale_down_unneeded_time = Some(duration()?),
        "scaledownunreadytime" => options.scale_down_unready_time = Some(duration()?),
        "ignoredaemonsetsutilization" => {
            options.ignore_daemonsets_utilization =
                Some(value.parse::<bool>().map_err(|_| format!("option {key} = {value:?} is not true or false"))?)
        }
        _ => {
            return Err(format!(
                "unknown autoscaling option {key:?} (CA reads scaledownutilizationthreshold, \
                 scaledowngpuutilizationthreshold, scaledownunneededtime, scaledownunreadytime, \
                 ignoredaemonsetsutilization)"
            ))
        }
    }
    Ok(())
}

/// The cluster a tag names, if it is one of the tags EKS, eksctl or CA's auto-discovery put on a
/// cluster's groups.
fn cluster_of_tag(key: &str, value: &str) -> Option<String> {
    let named = match key {
        "eks:cluster-name" | "alpha.eksctl.io/cluster-name" => Some(value),
        _ => key.strip_prefix("kubernetes.io/cluster/").or_else(|| {
            key.strip_prefix("k8s.io/cluster-autoscaler/").filter(|rest| *rest != "enabled" && !rest.contains('/'))
        }),
    };
    named.filter(|n| !n.is_empty()).map(str::to_string)
}

#[cfg(test)]
mod tests;
