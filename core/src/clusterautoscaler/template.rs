//! A node group's template node: what CA assumes a new node of the group will be when no node of
//! the group exists yet (upstream `cloudprovider/aws/aws_manager.go` `buildNodeFromTemplate` at
//! cluster-autoscaler-1.36.1).
//!
//! - The shape is the group's first instance type: vCPU, memory (`MemoryInfo.SizeInMiB`, no
//!   overhead taken off), NVIDIA GPUs, and 110 pods; allocatable is the capacity (upstream: "TODO:
//!   use proper allocatable"), plus the group's `node-template/resources` tags.
//! - Labels: the group's (its `node-template/label` tags), then the generic ones, which win:
//!   arch, os `linux`, instance type, region, the **first** zone, the hostname, and
//!   `topology.ebs.csi.aws.com/zone`.
//! - Taints: the group's (its `node-template/taint` tags).
//! - Pods on a fresh node (`podsExpectedOnFreshNode`): a kube-proxy requesting 100m CPU
//!   (`cloudprovider/utils.go` `BuildKubeProxy`) and each DaemonSet whose pod the DaemonSet
//!   controller would run there: its node selector and required node affinity match the labels,
//!   and it tolerates the NoSchedule and NoExecute taints.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::clusterautoscaler::NodeGroup;
use crate::catalogue::Catalogue;
use crate::labels;
use crate::quantity::Quantity;
use crate::requirements::{AllowUndefined, Requirements};
use crate::resources::ResourceList;
use crate::scheduling::daemons::{daemon_requirement_options, daemons};
use crate::scheduling::taints;

/// upstream `BuildKubeProxy`: the pod every template carries.
pub const KUBE_PROXY: &str = "kube-proxy";
/// upstream `buildNodeFromTemplate`: pods per node.
pub const PODS_PER_NODE: i64 = 110;
/// `topology.ebs.csi.aws.com/zone`, set on templates as the EBS CSI driver sets it on nodes.
pub const EBS_CSI_ZONE: &str = "topology.ebs.csi.aws.com/zone";

/// A pod CA expects on a fresh node of the group.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplatePod {
    /// `kube-proxy`, or the DaemonSet's `namespace/name`.
    pub name: String,
    pub requests: ResourceList,
}

/// A group's template node.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub group: String,
    /// The shape the template has: the group's first instance type.
    pub instance_type: String,
    /// The zone its labels name: the group's first.
    pub zone: String,
    pub node: Node,
    pub pods: Vec<TemplatePod>,
}

/// Why a group has no template (it takes part in no scale-up, as CA skips a group whose
/// `SchedulingNodeInfo` fails).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("NodeGroup {group}: instance type {instance_type:?} is not in the catalogue")]
    UnknownInstanceType { group: String, instance_type: String },
    #[error("NodeGroup {group}: zone {zone:?} is not a zone of region {region}")]
    ZoneNotInRegion { group: String, zone: String, region: String },
    #[error("NodeGroup {group}: no instance type or no zone")]
    Empty { group: String },
}

/// The template node of `group` in `region`, with the pods of `daemonsets` that would run on it.
pub fn template(
    group: &NodeGroup,
    catalogue: &Catalogue,
    region: &str,
    daemonsets: &[DaemonSet],
) -> Result<Template, TemplateError> {
    let name = group.metadata.name.clone().unwrap_or_default();
    let spec = &group.spec;
    let (Some(instance_type), Some(zone)) = (spec.instance_types.first(), spec.zones.first()) else {
        return Err(TemplateError::Empty { group: name });
    };
    let info = catalogue.info(instance_type).ok_or_else(|| TemplateError::UnknownInstanceType {
        group: name.clone(),
        instance_type: instance_type.clone(),
    })?;
    if !catalogue.zones(region).is_some_and(|zones| zones.iter().any(|z| z.name == *zone)) {
        return Err(TemplateError::ZoneNotInRegion { group: name, zone: zone.clone(), region: region.into() });
    }
    let node_name = format!("template-node-for-{name}");
    let mut capacity: ResourceList = BTreeMap::new();
    capacity.insert("pods".into(), Quantity::from_units(PODS_PER_NODE));
    capacity.insert("cpu".into(), Quantity::from_units(i64::from(info.vcpu)));
    let nvidia: u32 = info.gpus.iter().filter(|g| g.manufacturer.eq_ignore_ascii_case("NVIDIA")).map(|g| g.count).sum();
    capacity.insert("nvidia.com/gpu".into(), Quantity::from_units(i64::from(nvidia)));
    capacity.insert("memory".into(), Quantity::from_mebibytes(info.memory_mib as i64));
    capacity.extend(spec.resources.iter().map(|(k, v)| (k.clone(), *v)));
    let mut node_labels = spec.labels.clone();
    node_labels.extend([
        (labels::ARCH.to_string(), info.arch.as_str().to_string()),
        (labels::OS.to_string(), "linux".to_string()),
        (labels::INSTANCE_TYPE.to_string(), instance_type.clone()),
        (labels::TOPOLOGY_REGION.to_string(), region.to_string()),
        (labels::TOPOLOGY_ZONE.to_string(), zone.clone()),
        (labels::HOSTNAME.to_string(), node_name.clone()),
        (EBS_CSI_ZONE.to_string(), zone.clone()),
    ]);
    let mut pods = vec![TemplatePod { name: KUBE_PROXY.into(), requests: kube_proxy_requests() }];
    pods.extend(daemon_pods(&node_labels, &spec.taints, daemonsets));
    let node = Node {
        metadata: ObjectMeta { name: Some(node_name), labels: Some(node_labels), ..Default::default() },
        spec: Some(NodeSpec { taints: (!spec.taints.is_empty()).then(|| spec.taints.clone()), ..Default::default() }),
        status: Some(NodeStatus {
            capacity: Some(capacity.iter().map(|(k, v)| (k.clone(), k8s_quantity(v))).collect()),
            allocatable: Some(capacity.iter().map(|(k, v)| (k.clone(), k8s_quantity(v))).collect()),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    };
    Ok(Template { group: name, instance_type: instance_type.clone(), zone: zone.clone(), node, pods })
}

/// What `BuildKubeProxy`'s pod takes: 100m CPU, and its place among the node's pods.
fn kube_proxy_requests() -> ResourceList {
    BTreeMap::from([
        ("cpu".into(), Quantity::from_millis(100)),
        (crate::resources::PODS.into(), Quantity::from_units(1)),
    ])
}

fn k8s_quantity(q: &Quantity) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    k8s_openapi::apimachinery::pkg::api::resource::Quantity(q.to_string())
}

/// The DaemonSets whose pod would run on a node with `node_labels` and `node_taints` (the
/// DaemonSet controller's `NodeShouldRunDaemonPod`: PreferNoSchedule taints do not keep it off).
fn daemon_pods(
    node_labels: &BTreeMap<String, String>,
    node_taints: &[k8s_openapi::api::core::v1::Taint],
    daemonsets: &[DaemonSet],
) -> Vec<TemplatePod> {
    let node = Requirements::from_labels(node_labels);
    let (daemons, _unreadable) = daemons(daemonsets);
    daemons
        .into_iter()
        .filter(|d| {
            let mut tolerations = d.pod.tolerations.clone();
            tolerations.push(taints::prefer_no_schedule_toleration());
            taints::first_untolerated(node_taints, &tolerations).is_none()
                && daemon_requirement_options(d).iter().any(|r| node.is_compatible(r, AllowUndefined::Nothing))
        })
        .map(|d| TemplatePod { name: d.name, requests: d.pod.requests })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn group(types: &[&str], zones: &[&str]) -> NodeGroup {
        serde_json::from_value(json!({
            "apiVersion": "carpentry.dev/v1alpha1", "kind": "NodeGroup", "metadata": {"name": "general"},
            "spec": {
                "minSize": 0, "maxSize": 10, "instanceTypes": types, "zones": zones,
                // A tag naming a generic label loses to it, as upstream joins the generic labels last.
                "labels": {"workload": "general", "kubernetes.io/arch": "arm64"},
                "taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
                "resources": {"ephemeral-storage": "100Gi"},
            },
        }))
        .expect("a NodeGroup")
    }

    fn daemonset(name: &str, spec: serde_json::Value) -> DaemonSet {
        let mut pod_spec = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "50m"}}}]});
        pod_spec.as_object_mut().unwrap().extend(spec.as_object().cloned().unwrap_or_default());
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"spec": pod_spec}},
        }))
        .expect("a DaemonSet")
    }

    fn quantity(node: &Node, resource: &str) -> Quantity {
        let status = node.status.as_ref().unwrap();
        let capacity = Quantity::try_from(&status.capacity.as_ref().unwrap()[resource]).unwrap();
        let allocatable = Quantity::try_from(&status.allocatable.as_ref().unwrap()[resource]).unwrap();
        assert_eq!(capacity, allocatable, "{resource}: allocatable is the capacity");
        capacity
    }

    #[test]
    fn the_template_is_the_first_type_in_the_first_zone_with_the_groups_labels_and_taints() {
        let t = template(
            &group(&["m5.large", "c6g.large"], &["us-east-1b", "us-east-1a"]),
            Catalogue::embedded(),
            "us-east-1",
            &[],
        )
        .expect("a template");
        assert_eq!((t.instance_type.as_str(), t.zone.as_str()), ("m5.large", "us-east-1b"));
        // m5.large: 2 vCPU, 8 GiB as EC2 lists it, nothing held back.
        assert_eq!(quantity(&t.node, "cpu"), Quantity::from_units(2));
        assert_eq!(quantity(&t.node, "memory"), Quantity::from_gibibytes(8));
        assert_eq!(quantity(&t.node, "pods"), Quantity::from_units(110));
        assert_eq!(quantity(&t.node, "nvidia.com/gpu"), Quantity::from_units(0));
        assert_eq!(quantity(&t.node, "ephemeral-storage"), Quantity::from_gibibytes(100));
        let node_labels = t.node.metadata.labels.as_ref().unwrap();
        for (key, value) in [
            ("workload", "general"),
            (labels::ARCH, "amd64"),
            (labels::OS, "linux"),
            (labels::INSTANCE_TYPE, "m5.large"),
            (labels::TOPOLOGY_REGION, "us-east-1"),
            (labels::TOPOLOGY_ZONE, "us-east-1b"),
            (EBS_CSI_ZONE, "us-east-1b"),
            (labels::HOSTNAME, "template-node-for-general"),
        ] {
            assert_eq!(node_labels.get(key).map(String::as_str), Some(value), "{key}");
        }
        let taints = t.node.spec.as_ref().unwrap().taints.as_ref().unwrap();
        assert_eq!((taints[0].key.as_str(), taints[0].effect.as_str()), ("dedicated", "NoSchedule"));
        assert_eq!(t.pods, [TemplatePod { name: KUBE_PROXY.into(), requests: kube_proxy_requests() }]);
    }

    #[test]
    fn a_daemonset_is_on_the_template_when_its_controller_would_run_it_there() {
        let tolerates = json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]});
        let daemonsets = [
            daemonset("everywhere", json!({"tolerations": [{"operator": "Exists"}]})),
            daemonset("tolerates", tolerates.clone()),
            daemonset("untolerated", json!({})),
            daemonset(
                "arm-only",
                json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}, "tolerations": [{"operator": "Exists"}]}),
            ),
            daemonset(
                "by-label",
                json!({"nodeSelector": {"workload": "general"}, "tolerations": [{"operator": "Exists"}]}),
            ),
            daemonset(
                "other-zone",
                json!({"tolerations": [{"operator": "Exists"}], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}]}}}}),
            ),
        ];
        let t =
            template(&group(&["m5.large"], &["us-east-1b"]), Catalogue::embedded(), "us-east-1", &daemonsets).unwrap();
        let names: Vec<&str> = t.pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, [KUBE_PROXY, "kube-system/everywhere", "kube-system/tolerates", "kube-system/by-label"]);
        assert_eq!(t.pods[1].requests.get("cpu"), Some(&Quantity::from_millis(50)));
    }

    #[test]
    fn a_group_the_catalogue_or_region_cannot_place_has_no_template() {
        let err =
            template(&group(&["m5.enormous"], &["us-east-1a"]), Catalogue::embedded(), "us-east-1", &[]).unwrap_err();
        assert!(matches!(err, TemplateError::UnknownInstanceType { .. }), "{err}");
        let err =
            template(&group(&["m5.large"], &["us-west-2a"]), Catalogue::embedded(), "us-east-1", &[]).unwrap_err();
        assert_eq!(err.to_string(), "NodeGroup general: zone \"us-west-2a\" is not a zone of region us-east-1");
    }
}
