//! `karpenter.sh/v1alpha5` Provisioner and `karpenter.k8s.aws/v1alpha1` AWSNodeTemplate (Karpenter ≤ v0.32), and
//! their conversion to v1.
//!
//! upstream: kubernetes-sigs/karpenter `v0.32.0:pkg/apis/v1alpha5`, aws/karpenter-provider-aws
//! `v0.32.0:pkg/apis/v1alpha1` (AWSNodeTemplate and the inline `provider` block), the v1alpha5→v1beta1 helpers
//! (`pkg/utils/nodepool/nodepool.go::New`, `pkg/utils/nodeclass/nodeclass.go::New`), the AWS provisioner defaults
//! (`v0.31.0:pkg/apis/v1alpha5/provisioner.go::SetDefaults`) and the v1beta1 and v1 migration guides.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::api::duration::NillableDuration;
use crate::api::ec2nodeclass::{self as v1nc, KubeletConfiguration};
use crate::api::nodepool as v1np;
use crate::conversion::{
    clean_metadata, convert_family_and_metadata_options, object_name, NodeClassVersion, Notes, PendingNodePool,
};
use crate::quantity::Quantity;
use crate::requirements::{NodeSelectorRequirementWithMinValues, Operator};
use crate::resources::ResourceList;

/// v1alpha1 `metadataOptions`: the same schema as v1beta1's.
pub use crate::conversion::v1beta1::MetadataOptions;
// v1's, as before, though they take `rootVolume` and `ebs.volumeInitializationRate`, which v1alpha1 did not have.
use crate::api::ec2nodeclass::BlockDeviceMapping;

/// The old label naming a node's Provisioner.
pub const PROVISIONER_NAME_LABEL: &str = "karpenter.sh/provisioner-name";
/// The old node annotation that blocked consolidation only.
pub const DO_NOT_CONSOLIDATE_ANNOTATION: &str = "karpenter.sh/do-not-consolidate";
/// The old pod annotation that blocked eviction.
pub const DO_NOT_EVICT_ANNOTATION: &str = "karpenter.sh/do-not-evict";
/// Its v1 replacement (pods and nodes).
pub const DO_NOT_DISRUPT_ANNOTATION: &str = crate::labels::DO_NOT_DISRUPT;

// ---------------------------------------------------------------------------------------------------------------
// Provisioner
// ---------------------------------------------------------------------------------------------------------------

/// A v1alpha5 Provisioner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Provisioner {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ProvisionerSpec,
    /// Ignored by conversion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvisionerSpec {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation: Option<Consolidation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_configuration: Option<ProvisionerKubeletConfiguration>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ProvisionerLimits>,
    /// The deprecated inline AWS settings (`apiVersion: extensions.karpenter.sh/v1alpha1`, `kind: AWS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<ProviderRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_empty: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_until_expired: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Consolidation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvisionerLimits {
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub resources: ResourceList,
}

/// `providerRef`: the same schema as v1beta1's `nodeClassRef` (`apiVersion`, `kind`, required `name`).
pub type ProviderRef = crate::conversion::v1beta1::NodeClassReference;

/// v1alpha5 `kubeletConfiguration`: v1's fields plus `containerRuntime`, so kept apart (v1's rejects that field).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvisionerKubeletConfiguration {
    #[serde(default, rename = "clusterDNS", skip_serializing_if = "Vec::is_empty")]
    pub cluster_dns: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_runtime: Option<String>,
    #[serde(default, rename = "cpuCFSQuota", skip_serializing_if = "Option::is_none")]
    pub cpu_cfs_quota: Option<bool>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_hard: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    #[serde(default, rename = "imageGCHighThresholdPercent", skip_serializing_if = "Option::is_none")]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(default, rename = "imageGCLowThresholdPercent", skip_serializing_if = "Option::is_none")]
    pub image_gc_low_threshold_percent: Option<i32>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kube_reserved: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_core: Option<i32>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_reserved: BTreeMap<String, Quantity>,
}

impl ProvisionerKubeletConfiguration {
    fn to_v1(&self) -> KubeletConfiguration {
        KubeletConfiguration {
            cluster_dns: self.cluster_dns.clone(),
            cpu_cfs_quota: self.cpu_cfs_quota,
            eviction_hard: self.eviction_hard.clone(),
            eviction_max_pod_grace_period: self.eviction_max_pod_grace_period,
            eviction_soft: self.eviction_soft.clone(),
            eviction_soft_grace_period: self.eviction_soft_grace_period.clone(),
            image_gc_high_threshold_percent: self.image_gc_high_threshold_percent,
            image_gc_low_threshold_percent: self.image_gc_low_threshold_percent,
            kube_reserved: self.kube_reserved.clone(),
            max_pods: self.max_pods,
            pods_per_core: self.pods_per_core,
            system_reserved: self.system_reserved.clone(),
        }
    }
}

/// How the Provisioner's NodeClass is to be found.
pub(crate) enum ProviderSource {
    /// `providerRef` to an AWSNodeTemplate (or other kind) by name.
    Ref { kind: String, group: String, name: String },
    /// The inline `provider` block, parsed.
    Inline(Box<AWSNodeTemplateSpec>),
    /// The inline block could not be parsed.
    InlineUnparsable(String),
    /// Neither.
    None,
}

/// A Provisioner converted except for the cross-object parts (nodeClassRef target, kubelet move).
pub(crate) struct PendingProvisioner {
    pub pending: PendingNodePool,
    pub source: ProviderSource,
}

pub(crate) fn convert_provisioner(p: &Provisioner, notes: &mut Notes) -> PendingProvisioner {
    let object = object_name("Provisioner", &p.metadata);
    let name = p.metadata.name.clone().unwrap_or_default();
    let s = &p.spec;
    let mut note = |field: &str, message: String| notes.add(&object, field, message);
    let mut v1 = v1np::NodePoolSpec::default();

    // Template metadata, with the node annotation renames.
    v1.template.metadata.labels = s.labels.clone();
    let mut annotations = s.annotations.clone();
    if let Some(value) = annotations.remove(DO_NOT_CONSOLIDATE_ANNOTATION) {
        annotations.insert(DO_NOT_DISRUPT_ANNOTATION.to_string(), value);
        note(
            &format!("spec.annotations[{DO_NOT_CONSOLIDATE_ANNOTATION:?}]"),
            format!(
                "renamed to {DO_NOT_DISRUPT_ANNOTATION}; it now blocks every voluntary disruption of the node \
                 (consolidation and drift), not only consolidation"
            ),
        );
    }
    if annotations.contains_key(DO_NOT_EVICT_ANNOTATION) {
        note(
            &format!("spec.annotations[{DO_NOT_EVICT_ANNOTATION:?}]"),
            format!(
                "{DO_NOT_EVICT_ANNOTATION} is a pod annotation and has no effect on nodes (kept as written); on pods \
                 use {DO_NOT_DISRUPT_ANNOTATION} instead"
            ),
        );
    }
    v1.template.metadata.annotations = annotations;

    v1.template.spec.taints = s.taints.clone();
    v1.template.spec.startup_taints = s.startup_taints.clone();
    let mut requirements = Vec::new();
    for (i, r) in s.requirements.iter().enumerate() {
        if r.key == PROVISIONER_NAME_LABEL {
            note(
                &format!("spec.requirements[{i}]"),
                format!(
                    "{PROVISIONER_NAME_LABEL} is now {}, which a NodePool may not constrain (every node of a NodePool \
                     carries its name); the requirement was dropped",
                    crate::labels::NODEPOOL
                ),
            );
            continue;
        }
        requirements.push(r.clone());
    }
    add_default_requirements(&mut requirements, &mut note);
    v1.template.spec.requirements = requirements;

    // Expiry: absent means never in v1alpha5.
    match s.ttl_seconds_until_expired {
        Some(ttl) => {
            v1.template.spec.expire_after = NillableDuration::from_seconds(ttl.max(0) as u64);
            note(
                "spec.ttlSecondsUntilExpired",
                format!(
                    "became spec.template.spec.expireAfter: {}. In v1 expiry is forceful: an expired node drains at \
                     once without waiting for replacement capacity; set terminationGracePeriod to bound how long it \
                     may take",
                    v1.template.spec.expire_after
                ),
            );
        }
        None => {
            v1.template.spec.expire_after = NillableDuration::never();
            note(
                "spec.ttlSecondsUntilExpired",
                "not set, so nodes never expired in v1alpha5; expireAfter: Never keeps that (v1 would default to \
                 720h)"
                    .to_string(),
            );
        }
    }

    // Consolidation and emptiness.
    let consolidation = s.consolidation.as_ref().and_then(|c| c.enabled).unwrap_or(false);
    if consolidation {
        v1.disruption.consolidation_policy = v1np::ConsolidationPolicy::WhenEmptyOrUnderutilized;
        v1.disruption.consolidate_after = NillableDuration::parse("0s").expect("duration");
        note(
            "spec.consolidation.enabled",
            "became consolidationPolicy: WhenEmptyOrUnderutilized with consolidateAfter: 0s".to_string(),
        );
        if s.ttl_seconds_after_empty.is_some() {
            note(
                "spec.ttlSecondsAfterEmpty",
                "ignored: it was mutually exclusive with consolidation.enabled in v1alpha5, and consolidation also \
                 removes empty nodes"
                    .to_string(),
            );
        }
    } else if let Some(ttl) = s.ttl_seconds_after_empty {
        v1.disruption.consolidation_policy = v1np::ConsolidationPolicy::WhenEmpty;
        v1.disruption.consolidate_after = NillableDuration::from_seconds(ttl.max(0) as u64);
        note(
            "spec.ttlSecondsAfterEmpty",
            format!(
                "became consolidationPolicy: WhenEmpty with consolidateAfter: {}: empty nodes are removed after that \
                 long, and underutilized nodes are left alone as before",
                v1.disruption.consolidate_after
            ),
        );
    } else {
        v1.disruption.consolidate_after = NillableDuration::never();
        note(
            "spec.consolidation",
            "neither consolidation nor ttlSecondsAfterEmpty was set, so v1alpha5 never removed empty or \
             underutilized nodes; consolidateAfter: Never keeps that (v1 would default to consolidating after 0s)"
                .to_string(),
        );
    }
    note(
        "spec",
        "v1alpha5 had no disruption budgets; the NodePool gets v1's default budget (nodes: 10%), so at most 10% of \
         its nodes (rounded up) are disrupted at once. Set spec.disruption.budgets to [{nodes: \"100%\"}] to lift the \
         limit"
            .to_string(),
    );

    v1.limits = v1np::Limits(s.limits.as_ref().map(|l| l.resources.clone()).unwrap_or_default());
    v1.weight = s.weight;

    let kubelet = s.kubelet_configuration.as_ref().map(|k| {
        if let Some(runtime) = &k.container_runtime {
            note(
                "spec.kubeletConfiguration.containerRuntime",
                format!("containerRuntime ({runtime}) has no v1 equivalent (containerd is the only runtime) and was dropped"),
            );
        }
        k.to_v1()
    });

    let source = match (&s.provider, &s.provider_ref) {
        (Some(provider), provider_ref) => {
            if provider_ref.is_some() {
                note(
                    "spec.providerRef",
                    "both provider and providerRef are set (invalid in v1alpha5); the inline provider is used"
                        .to_string(),
                );
            }
            match serde_json::from_value::<AwsProvider>(provider.clone()) {
                Ok(aws) => ProviderSource::Inline(Box::new(aws.into_template_spec())),
                Err(e) => ProviderSource::InlineUnparsable(e.to_string()),
            }
        }
        (None, Some(r)) => {
            let kind = r.given_kind().unwrap_or_else(|| "AWSNodeTemplate".to_string());
            let group = r.given_group().unwrap_or_else(|| crate::api::AWS_GROUP.to_string());
            ProviderSource::Ref { kind, group, name: r.name.clone() }
        }
        (None, None) => ProviderSource::None,
    };

    note(
        "metadata.name",
        format!(
            "nodes of this pool are labelled {}={name} instead of {PROVISIONER_NAME_LABEL}={name}: rewrite pod \
             nodeSelectors, affinities and topology spread constraints that use the old label, and replace the pod \
             annotation {DO_NOT_EVICT_ANNOTATION} with {DO_NOT_DISRUPT_ANNOTATION}",
            crate::labels::NODEPOOL
        ),
    );

    let nodepool = v1np::NodePool { metadata: clean_metadata(&p.metadata), ..v1np::NodePool::new(&name, v1) };
    PendingProvisioner {
        pending: PendingNodePool { object, nodepool, kubelet, kubelet_field: "spec.kubeletConfiguration" },
        source,
    }
}

/// The AWS provider's v1alpha5 defaulting (`Provisioner.SetDefaults`): requirements it added when missing, which
/// v1 no longer adds.
fn add_default_requirements(
    requirements: &mut Vec<NodeSelectorRequirementWithMinValues>,
    note: &mut impl FnMut(&str, String),
) {
    let has = |reqs: &[NodeSelectorRequirementWithMinValues], key: &str| {
        reqs.iter().any(|r| crate::labels::normalize_key(&r.key) == key)
    };
    let req = |key: &str, operator: Operator, values: &[&str]| NodeSelectorRequirementWithMinValues {
        key: key.to_string(),
        operator,
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    };
    let mut added = Vec::new();
    if !has(requirements, crate::labels::OS) {
        added.push(req(crate::labels::OS, Operator::In, &["linux"]));
    }
    if !has(requirements, crate::labels::ARCH) {
        added.push(req(crate::labels::ARCH, Operator::In, &["amd64"]));
    }
    if !has(requirements, crate::labels::CAPACITY_TYPE) {
        added.push(req(crate::labels::CAPACITY_TYPE, Operator::In, &["on-demand"]));
    }
    let instance_keys = [
        crate::labels::INSTANCE_TYPE,
        "karpenter.k8s.aws/instance-family",
        "karpenter.k8s.aws/instance-category",
        "karpenter.k8s.aws/instance-generation",
    ];
    if !instance_keys.iter().any(|k| has(requirements, k)) {
        added.push(req("karpenter.k8s.aws/instance-category", Operator::In, &["c", "m", "r"]));
        added.push(req("karpenter.k8s.aws/instance-generation", Operator::Gt, &["2"]));
    }
    if !added.is_empty() {
        let described: Vec<String> =
            added.iter().map(|r| format!("{} {} {:?}", r.key, r.operator.as_str(), r.values)).collect();
        note(
            "spec.requirements",
            format!(
                "v1alpha5 added default requirements when these keys were missing; v1 does not, so they were made \
                 explicit: {}",
                described.join("; ")
            ),
        );
        requirements.extend(added);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// AWSNodeTemplate and the inline provider
// ---------------------------------------------------------------------------------------------------------------

/// A v1alpha1 AWSNodeTemplate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AWSNodeTemplate {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: AWSNodeTemplateSpec,
    /// Ignored by conversion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

/// The AWSNodeTemplate spec: the inline provider's fields plus userData, amiSelector and detailedMonitoring.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AWSNodeTemplateSpec {
    /// Defaulted to AL2 at launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    /// Selector map; special keys `aws-ids`/`aws::ids`, `aws::name`, `aws::owners`; comma-separated values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ami_selector: BTreeMap<String, String>,
    /// Inline TypeMeta of the provider struct; ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// Inline TypeMeta of the provider struct; ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// An unmanaged launch template: no v1 equivalent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub security_group_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subnet_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
}

/// The inline `spec.provider` block of a Provisioner (upstream `v1alpha1.AWS`): kept apart from
/// [`AWSNodeTemplateSpec`], whose `userData`, `amiSelector` and `detailedMonitoring` it rejects.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AwsProvider {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub security_group_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subnet_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

impl AwsProvider {
    fn into_template_spec(self) -> AWSNodeTemplateSpec {
        AWSNodeTemplateSpec {
            ami_family: self.ami_family,
            ami_selector: BTreeMap::new(),
            api_version: None,
            block_device_mappings: self.block_device_mappings,
            context: self.context,
            detailed_monitoring: None,
            instance_profile: self.instance_profile,
            kind: None,
            launch_template: self.launch_template,
            metadata_options: self.metadata_options,
            security_group_selector: self.security_group_selector,
            subnet_selector: self.subnet_selector,
            tags: self.tags,
            user_data: None,
        }
    }
}

/// v1alpha1 AWSNodeTemplate and inline provider: `amiSelector`, and for metadata options Karpenter's defaults when
/// the block is absent (hop limit 2), EC2's defaults for fields left out of a partial block (hop limit 1, tokens
/// optional).
pub(crate) const V1ALPHA1: NodeClassVersion = NodeClassVersion {
    name: "v1alpha1",
    ami_selector: "amiSelector",
    metadata_when_absent: ("enabled", "disabled", 2, "required"),
    metadata_when_partial: ("enabled", "disabled", 1, "optional"),
};

/// Splits a comma-separated selector value, trimming each item and dropping empty ones.
fn split_values(v: &str) -> Vec<String> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

fn is_ids_key(k: &str) -> bool {
    k == "aws-ids" || k == "aws::ids"
}

/// Tag filters where a value may list alternatives (`a,b`): v1alpha1 matched any of them, v1 matches the literal
/// text, so the map expands into one tag set per combination.
fn expand_tags(tags: &BTreeMap<String, String>) -> (Vec<BTreeMap<String, String>>, bool) {
    let mut sets = vec![BTreeMap::new()];
    let mut expanded = false;
    for (k, v) in tags {
        let values = if v.contains(',') { split_values(v) } else { vec![v.clone()] };
        expanded |= values.len() > 1;
        sets = sets
            .into_iter()
            .flat_map(|set| {
                values.iter().map(move |value| {
                    let mut s = set.clone();
                    s.insert(k.clone(), value.clone());
                    s
                })
            })
            .collect();
    }
    (sets, expanded)
}

fn convert_simple_selector(
    selector: &BTreeMap<String, String>,
    field: &str,
    object: &str,
    notes: &mut Notes,
) -> Vec<(Option<String>, BTreeMap<String, String>)> {
    let ids: Vec<String> = selector.iter().filter(|(k, _)| is_ids_key(k)).flat_map(|(_, v)| split_values(v)).collect();
    let tags: BTreeMap<String, String> =
        selector.iter().filter(|(k, _)| !is_ids_key(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut terms = Vec::new();
    if !ids.is_empty() {
        if !tags.is_empty() {
            notes.add(
                object,
                field,
                "ids were combined with tag filters (rejected since v0.30); the tag filters were dropped and each id \
                 became its own term"
                    .to_string(),
            );
        }
        terms.extend(ids.into_iter().map(|id| (Some(id), BTreeMap::new())));
    } else if !tags.is_empty() {
        let (sets, expanded) = expand_tags(&tags);
        if expanded {
            notes.add(
                object,
                field,
                format!(
                    "comma-separated tag values matched any of the values in v1alpha1 but are literal in v1; the \
                     selector became {} terms, one per combination",
                    sets.len()
                ),
            );
        }
        terms.extend(sets.into_iter().map(|t| (None, t)));
    }
    terms
}

fn convert_ami_selector(
    selector: &BTreeMap<String, String>,
    field: &str,
    object: &str,
    notes: &mut Notes,
) -> Vec<v1nc::AmiSelectorTerm> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut ids = Vec::new();
    let mut names = Vec::new();
    let mut owners = Vec::new();
    let mut tags = BTreeMap::new();
    for (k, v) in selector {
        match k.as_str() {
            k if is_ids_key(k) => ids = split_values(v),
            "aws::name" => names = split_values(v),
            "aws::owners" => owners = split_values(v),
            _ => {
                tags.insert(k.clone(), v.clone());
            }
        }
    }
    if !tags.is_empty() {
        notes.add(
            object,
            field,
            "AMI tags no longer add scheduling requirements in v1 (v1alpha1 turned AMI tags named after well-known \
             labels, such as kubernetes.io/arch, into requirements); use separate NodePools and EC2NodeClasses to \
             pair AMIs with instance types"
                .to_string(),
        );
    }
    if !ids.is_empty() {
        if !names.is_empty() || !owners.is_empty() || !tags.is_empty() {
            notes.add(
                object,
                field,
                "ids were combined with other filters (rejected since v0.30); only the ids were kept".to_string(),
            );
        }
        return ids.into_iter().map(|id| v1nc::AmiSelectorTerm { id: Some(id), ..Default::default() }).collect();
    }
    let (tag_sets, expanded) = if tags.is_empty() { (vec![BTreeMap::new()], false) } else { expand_tags(&tags) };
    let names: Vec<Option<String>> = if names.is_empty() { vec![None] } else { names.into_iter().map(Some).collect() };
    let owners: Vec<Option<String>> =
        if owners.is_empty() { vec![None] } else { owners.into_iter().map(Some).collect() };
    let mut terms = Vec::new();
    for owner in &owners {
        for name in &names {
            for t in &tag_sets {
                terms.push(v1nc::AmiSelectorTerm {
                    name: name.clone(),
                    owner: owner.clone(),
                    tags: t.clone(),
                    ..Default::default()
                });
            }
        }
    }
    if terms.len() > 1 {
        notes.add(
            object,
            field,
            format!(
                "comma-separated {}values matched any of the values in v1alpha1; the selector became {} terms, one \
                 per combination",
                if expanded { "tag " } else { "name/owner " },
                terms.len()
            ),
        );
    }
    terms
}

/// Converts an AWSNodeTemplate spec (or an inline provider turned into one) to a v1 EC2NodeClass named `name`.
pub(crate) fn convert_template_spec(
    s: &AWSNodeTemplateSpec,
    metadata: ObjectMeta,
    object: &str,
    prefix: &str,
    notes: &mut Notes,
) -> v1nc::EC2NodeClass {
    let f = |field: &str| format!("{prefix}{field}");
    let subnet_selector_terms = convert_simple_selector(&s.subnet_selector, &f("subnetSelector"), object, notes)
        .into_iter()
        .map(|(id, tags)| v1nc::SubnetSelectorTerm { id, tags })
        .collect::<Vec<_>>();
    let security_group_selector_terms =
        convert_simple_selector(&s.security_group_selector, &f("securityGroupSelector"), object, notes)
            .into_iter()
            .map(|(id, tags)| v1nc::SecurityGroupSelectorTerm { id, name: None, tags })
            .collect::<Vec<_>>();
    for (missing, field, what) in [
        (subnet_selector_terms.is_empty(), "subnetSelector", "subnet"),
        (security_group_selector_terms.is_empty(), "securityGroupSelector", "security group"),
    ] {
        if missing {
            notes.add(object, &f(field), format!("no {what} selector; v1 requires {field}Terms"));
        }
    }
    let ami_selector_terms = convert_ami_selector(&s.ami_selector, &f("amiSelector"), object, notes);
    let mut v1 = v1nc::EC2NodeClassSpec {
        ami_selector_terms,
        block_device_mappings: s.block_device_mappings.clone(),
        context: s.context.clone(),
        detailed_monitoring: s.detailed_monitoring,
        instance_profile: s.instance_profile.clone(),
        security_group_selector_terms,
        subnet_selector_terms,
        tags: s.tags.clone(),
        user_data: s.user_data.clone(),
        ..v1nc::EC2NodeClassSpec::empty()
    };
    if s.instance_profile.is_none() {
        notes.add(
            object,
            &f("instanceProfile"),
            "not set, so v1alpha1 used the global defaultInstanceProfile setting, which v1 does not have; set \
             spec.role (Karpenter then manages the instance profile) or spec.instanceProfile"
                .to_string(),
        );
    }
    if let Some(lt) = &s.launch_template {
        notes.add(
            object,
            &f("launchTemplate"),
            format!(
                "unmanaged launch templates ({lt}) have no v1 equivalent and the field was dropped; move its \
                 settings (AMI, user data, block devices, metadata options, security groups) into this EC2NodeClass"
            ),
        );
    }
    let family = match s.ami_family.as_deref() {
        Some(f) => Some(f),
        None => {
            notes.add(object, &f("amiFamily"), "not set, so v1alpha1 used AL2; AL2 is now explicit".to_string());
            Some("AL2")
        }
    };
    convert_family_and_metadata_options(&mut v1, family, s.metadata_options.as_ref(), &V1ALPHA1, prefix, object, notes);
    v1nc::EC2NodeClass { metadata, ..v1nc::EC2NodeClass::new("", v1) }
}

pub(crate) fn convert_awsnodetemplate(t: &AWSNodeTemplate, notes: &mut Notes) -> v1nc::EC2NodeClass {
    let object = object_name("AWSNodeTemplate", &t.metadata);
    convert_template_spec(&t.spec, clean_metadata(&t.metadata), &object, "spec.", notes)
}
