//! Launch templates (upstream `pkg/providers/launchtemplate/launchtemplate.go`,
//! `amifamily/resolver.go`): a launch's instance types are grouped by the AMI each runs (the
//! newest AMI whose requirements the type meets) and by the pods the kubelet may run; each group
//! has one launch template, named `karpenter.k8s.aws/<hash of its options>` so that identical
//! options share one template, tagged for the cluster and the NodeClass.
//!
//! Each template's user data is the node's bootstrap configuration for its AMI family merged with
//! `spec.userData` ([`super::bootstrap`]): the NodeClaim's labels, taints and capacity type and
//! the group's max pods are in it, so templates differ by those as upstream's do. Block devices
//! are the NodeClass's, else the AMI family's default.

use std::collections::BTreeMap;

use serde::Serialize;

use super::bootstrap::{BootstrapError, ClusterBootstrap, Options};
use crate::api::ec2nodeclass::{AmiFamily, EC2NodeClass};
use crate::api::NodeClaim;
use crate::catalogue::InstanceType;
use crate::requirements::{AllowUndefined, Requirements};

/// upstream's launch template name prefix (`apis.Group` of the AWS provider).
pub const NAME_PREFIX: &str = "karpenter.k8s.aws/";

/// A block device of a launch template.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    pub device_name: String,
    pub volume_size_gib: i64,
    pub volume_type: String,
    pub encrypted: bool,
    pub delete_on_termination: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
}

/// The instance metadata options (the CRD's defaults when unset).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    pub http_endpoint: String,
    pub http_protocol_ipv6: String,
    pub http_put_response_hop_limit: i64,
    pub http_tokens: String,
}

/// One launch template: its options, and the instance types of the launch that use it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchTemplate {
    pub name: String,
    pub image_id: String,
    pub instance_profile: String,
    pub security_group_ids: Vec<String>,
    pub block_devices: Vec<BlockDevice>,
    pub metadata_options: MetadataOptions,
    pub detailed_monitoring: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub associate_public_ip_address: Option<bool>,
    /// The user data as text (EC2 takes it base64-encoded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// The template's own tags (upstream: the launch's, with `eks:eks-cluster-name` and
    /// `karpenter.k8s.aws/ec2nodeclass`), which the IAM policy's conditions match.
    pub tags: BTreeMap<String, String>,
    /// The launch's instance types that run with this template (not part of its name's hash).
    #[serde(skip)]
    pub instance_types: Vec<String>,
}

/// The family's default block devices (upstream `amifamily/*.go` `DefaultBlockDeviceMappings`):
/// gp3, encrypted, deleted with the instance.
fn default_block_devices(family: AmiFamily) -> Vec<BlockDevice> {
    let device = |name: &str, gib| BlockDevice {
        device_name: name.to_string(),
        volume_size_gib: gib,
        volume_type: "gp3".into(),
        encrypted: true,
        delete_on_termination: true,
        iops: None,
        throughput: None,
        kms_key_id: None,
        snapshot_id: None,
    };
    match family {
        AmiFamily::AL2 | AmiFamily::AL2023 => vec![device("/dev/xvda", 20)],
        AmiFamily::Bottlerocket => vec![device("/dev/xvda", 4), device("/dev/xvdb", 20)],
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => vec![device("/dev/sda1", 50)],
        AmiFamily::Custom => Vec::new(),
    }
}

fn block_devices(class: &EC2NodeClass) -> Vec<BlockDevice> {
    if class.spec.block_device_mappings.is_empty() {
        return default_block_devices(class.spec.resolved_ami_family());
    }
    class
        .spec
        .block_device_mappings
        .iter()
        .filter_map(|b| {
            let ebs = b.ebs.as_ref()?;
            Some(BlockDevice {
                device_name: b.device_name.clone().unwrap_or_default(),
                volume_size_gib: ebs.volume_size.as_ref().map_or(0, |q| ((q.value() + (1 << 30) - 1) >> 30) as i64),
                volume_type: ebs.volume_type.clone().unwrap_or_else(|| "gp3".into()),
                encrypted: ebs.encrypted.unwrap_or(false),
                delete_on_termination: ebs.delete_on_termination.unwrap_or(true),
                iops: ebs.iops,
                throughput: ebs.throughput,
                kms_key_id: ebs.kms_key_id.clone(),
                snapshot_id: ebs.snapshot_id.clone(),
            })
        })
        .collect()
}

fn metadata_options(class: &EC2NodeClass) -> MetadataOptions {
    let m = class.spec.metadata_options.as_ref();
    MetadataOptions {
        http_endpoint: m.and_then(|m| m.http_endpoint.clone()).unwrap_or_else(|| "enabled".into()),
        http_protocol_ipv6: m.and_then(|m| m.http_protocol_ipv6.clone()).unwrap_or_else(|| "disabled".into()),
        http_put_response_hop_limit: m.and_then(|m| m.http_put_response_hop_limit).unwrap_or(1),
        http_tokens: m.and_then(|m| m.http_tokens.clone()).unwrap_or_else(|| "required".into()),
    }
}

/// What a launch's templates are for: the NodeClaim launched, as which capacity type, in which
/// cluster, with which tags (upstream's `GetTags`).
#[derive(Debug, Clone, Copy)]
pub struct TemplateFor<'a> {
    pub nodeclaim: &'a NodeClaim,
    pub capacity_type: &'a str,
    pub cluster: &'a ClusterBootstrap,
    pub launch_tags: &'a BTreeMap<String, String>,
}

/// The launch templates of a launch of `instance_types` with `class` (its status resolved), for
/// `launch`'s cluster, tagged with the launch's tags and the cluster's and NodeClass's: one per
/// (AMI, max pods) group, in AMI order then max pods. Types no AMI's requirements admit are in no
/// template. Fails when the user data cannot be written (see [`BootstrapError`]).
pub fn launch_templates(
    class: &EC2NodeClass,
    instance_types: &[&InstanceType],
    launch: TemplateFor<'_>,
) -> Result<Vec<LaunchTemplate>, BootstrapError> {
    let status = class.status.clone().unwrap_or_default();
    let amis: Vec<(String, Requirements)> = status
        .amis
        .iter()
        .filter_map(|a| Some((a.id.clone(), Requirements::from_k8s_node_selector_requirements(&a.requirements).ok()?)))
        .collect();
    // (AMI index, max pods) → types, in launch order within each group.
    let mut groups: BTreeMap<(usize, i64), Vec<String>> = BTreeMap::new();
    for it in instance_types {
        let Some(ami) = amis.iter().position(|(_, r)| it.requirements.is_compatible(r, AllowUndefined::Nothing)) else {
            continue;
        };
        let pods = it.capacity.get(crate::resources::PODS).map_or(0, |q| q.value() as i64);
        groups.entry((ami, pods)).or_default().push(it.name.clone());
    }
    let mut tags = launch.launch_tags.clone();
    tags.insert(crate::labels::aws::EKS_CLUSTER_NAME_TAG.into(), launch.cluster.name.clone());
    tags.insert(crate::labels::aws::EC2_NODE_CLASS.into(), class.metadata.name.clone().unwrap_or_default());
    let mut security_group_ids: Vec<String> = status.security_groups.iter().map(|g| g.id.clone()).collect();
    security_group_ids.sort();
    let family = class.spec.resolved_ami_family();
    groups
        .into_iter()
        .map(|((ami, pods), types)| {
            let user_data = Options::for_launch(
                launch.cluster,
                family,
                class.spec.kubelet.as_ref(),
                launch.nodeclaim,
                launch.capacity_type,
                pods,
                class.spec.user_data.as_deref(),
                class.spec.instance_store_policy,
            )
            .user_data(family)?;
            let mut lt = LaunchTemplate {
                name: String::new(),
                image_id: amis[ami].0.clone(),
                instance_profile: status.instance_profile.clone(),
                security_group_ids: security_group_ids.clone(),
                block_devices: block_devices(class),
                metadata_options: metadata_options(class),
                detailed_monitoring: class.spec.detailed_monitoring.unwrap_or(false),
                associate_public_ip_address: class.spec.associate_public_ip_address,
                user_data,
                tags: tags.clone(),
                instance_types: types,
            };
            lt.name = format!("{NAME_PREFIX}{}", options_hash(&lt, pods));
            Ok(lt)
        })
        .collect()
}

/// The hash in a template's name: of every option (and the max pods its user data would carry),
/// not of the instance types.
fn options_hash(lt: &LaunchTemplate, max_pods: i64) -> u64 {
    let options = serde_json::to_string(&(lt, max_pods)).unwrap_or_default();
    crate::catalogue::pricing::fnv1a64(options.as_bytes())
}

/// upstream `DeleteAll`: the DescribeLaunchTemplates filters that find every launch template the
/// cluster made for `class`, to delete with it.
pub fn nodeclass_template_filters(cluster: &str, class: &EC2NodeClass) -> Vec<super::Filter> {
    let name = class.metadata.name.as_deref().unwrap_or_default();
    vec![
        super::Filter::new(&format!("tag:{}", crate::labels::aws::EKS_CLUSTER_NAME_TAG), &[cluster]),
        super::Filter::new(&format!("tag:{}", crate::labels::aws::EC2_NODE_CLASS), &[name]),
    ]
}
