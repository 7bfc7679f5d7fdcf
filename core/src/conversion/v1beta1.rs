//! `karpenter.sh/v1beta1` NodePool and `karpenter.k8s.aws/v1beta1` EC2NodeClass (Karpenter v0.32–v0.37), and their
//! conversion to v1.
//!
//! upstream: kubernetes-sigs/karpenter `v0.37.0:pkg/apis/v1beta1`, aws/karpenter-provider-aws
//! `v0.37.0:pkg/apis/v1beta1`, and the conversion webhooks of v1.0.0 (`pkg/apis/v1/nodepool_conversion.go`,
//! `ec2nodeclass_conversion.go`), plus the v1 migration guide. Optional fields are `Option` here so the converter
//! can tell a field the user left out (and that v1beta1 defaulted) from one they set.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::api::duration::{Duration, NillableDuration};
use crate::api::ec2nodeclass::{self as v1nc, AmiFamily};
use crate::api::nodepool as v1np;
use crate::conversion::{
    clean_metadata, convert_family_and_metadata_options, object_name, NodeClassVersion, Notes, PendingNodePool,
};
use crate::requirements::NodeSelectorRequirementWithMinValues;
use crate::resources::ResourceList;

// v1beta1 schemas that are field-for-field those of v1: the v1 types serve as both.
pub use crate::api::ec2nodeclass::{
    InstanceStorePolicy, KubeletConfiguration, SecurityGroupSelectorTerm, SubnetSelectorTerm,
};
pub use crate::api::nodepool::TemplateMetadata;
// Also v1's, as before, though its `ebs` takes `volumeInitializationRate`, which v1beta1 did not have.
use crate::api::ec2nodeclass::BlockDeviceMapping;

// ---------------------------------------------------------------------------------------------------------------
// NodePool
// ---------------------------------------------------------------------------------------------------------------

/// A v1beta1 NodePool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePool {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: NodePoolSpec,
    /// Ignored by conversion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

/// Kept apart from v1's: its `disruption` and `template` differ, and it has no `replicas`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePoolSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<Disruption>,
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub limits: ResourceList,
    pub template: NodeClaimTemplate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// Kept apart from v1's: it has `expireAfter` and every field is optional, so the v1beta1 defaults can be noted.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Disruption {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Vec<Budget>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidate_after: Option<NillableDuration>,
    /// Defaulted to WhenUnderutilized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation_policy: Option<ConsolidationPolicy>,
    /// Defaulted to 720h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<NillableDuration>,
}

/// Kept apart from v1's: `WhenUnderutilized` is v1's `WhenEmptyOrUnderutilized`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    WhenUnderutilized,
}

/// A v1beta1 budget: kept apart from v1's, which also takes `reasons`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    #[serde(default = "ten_percent")]
    pub nodes: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

fn ten_percent() -> String {
    "10%".to_string()
}

/// Kept apart from v1's for its spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimTemplate {
    #[serde(default, skip_serializing_if = "TemplateMetadata::is_empty")]
    pub metadata: TemplateMetadata,
    pub spec: NodeClaimSpec,
}

/// Kept apart from v1's: it has `kubelet` and `resources` but not `expireAfter` or `terminationGracePeriod`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimSpec {
    /// Moved to the EC2NodeClass in v1 (same fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    pub node_class_ref: NodeClassReference,
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Never allowed on NodePools by the webhook, rejected by CEL since v0.34; dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

/// v1beta1 `nodeClassRef` (also v1alpha5's `providerRef`): kept apart from v1's, which has `group` instead of
/// `apiVersion` and requires every field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClassReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
}

impl NodeClassReference {
    /// The API group of `apiVersion` (`karpenter.k8s.aws/v1beta1` → `karpenter.k8s.aws`), if one is given.
    pub(crate) fn given_group(&self) -> Option<String> {
        self.api_version.as_deref().filter(|v| !v.is_empty()).map(|v| v.split('/').next().unwrap_or("").to_string())
    }

    /// `kind`, if one is given.
    pub(crate) fn given_kind(&self) -> Option<String> {
        self.kind.clone().filter(|k| !k.is_empty())
    }
}

pub(crate) fn convert_nodepool(np: &NodePool, notes: &mut Notes) -> PendingNodePool {
    let object = object_name("NodePool", &np.metadata);
    let spec = &np.spec;
    let tspec = &spec.template.spec;
    let mut note = |field: &str, message: String| notes.add(&object, field, message);

    let disruption = spec.disruption.clone().unwrap_or_default();
    let mut v1 = v1np::NodePoolSpec::default();

    // expireAfter moved into the template.
    v1.template.spec.expire_after =
        disruption.expire_after.clone().unwrap_or_else(crate::api::nodeclaim::default_expire_after);
    if !v1.template.spec.expire_after.is_never() {
        let field = if disruption.expire_after.is_some() { "spec.disruption.expireAfter" } else { "spec.disruption" };
        note(
            field,
            format!(
                "expireAfter {} moved to spec.template.spec.expireAfter{}. In v1 expiry is forceful: an expired node \
                 drains at once without waiting for replacement capacity; set terminationGracePeriod to bound how \
                 long it may take",
                v1.template.spec.expire_after,
                if disruption.expire_after.is_none() { " (the v1beta1 default)" } else { "" }
            ),
        );
    }

    match disruption.consolidation_policy {
        None | Some(ConsolidationPolicy::WhenUnderutilized) => {
            v1.disruption.consolidation_policy = v1np::ConsolidationPolicy::WhenEmptyOrUnderutilized;
            v1.disruption.consolidate_after = NillableDuration::parse("0s").expect("duration");
            let field = if disruption.consolidation_policy.is_some() {
                "spec.disruption.consolidationPolicy"
            } else {
                "spec.disruption"
            };
            note(
                field,
                format!(
                    "consolidationPolicy WhenUnderutilized{} is called WhenEmptyOrUnderutilized in v1, with \
                     consolidateAfter: 0s (v1beta1 waited about 15s internally)",
                    if disruption.consolidation_policy.is_none() { " (the v1beta1 default)" } else { "" }
                ),
            );
            if disruption.consolidate_after.as_ref().is_some_and(NillableDuration::is_never) {
                note(
                    "spec.disruption.consolidateAfter",
                    "consolidateAfter: Never had no effect with WhenUnderutilized in v1beta1 and was converted to \
                     0s; set consolidateAfter: Never in v1 to disable consolidation"
                        .to_string(),
                );
            }
        }
        Some(ConsolidationPolicy::WhenEmpty) => {
            v1.disruption.consolidation_policy = v1np::ConsolidationPolicy::WhenEmpty;
            match &disruption.consolidate_after {
                Some(after) => v1.disruption.consolidate_after = after.clone(),
                None => note(
                    "spec.disruption.consolidateAfter",
                    "consolidateAfter was required with WhenEmpty in v1beta1 and is missing; v1's default 0s is used"
                        .to_string(),
                ),
            }
        }
    }
    if let Some(budgets) = &disruption.budgets {
        v1.disruption.budgets = budgets
            .iter()
            .map(|b| v1np::Budget {
                duration: b.duration.clone(),
                nodes: b.nodes.clone(),
                reasons: Vec::new(),
                schedule: b.schedule.clone(),
            })
            .collect();
    }

    v1.limits = v1np::Limits(spec.limits.clone());
    v1.weight = spec.weight;
    v1.template.metadata = spec.template.metadata.clone();
    v1.template.spec.taints = tspec.taints.clone();
    v1.template.spec.startup_taints = tspec.startup_taints.clone();
    v1.template.spec.requirements = tspec.requirements.clone();
    v1.template.spec.node_class_ref =
        convert_node_class_ref(&tspec.node_class_ref, "spec.template.spec.nodeClassRef", &mut note);
    if tspec.resources.as_ref().is_some_and(|r| !r.is_null() && r.as_object().is_none_or(|o| !o.is_empty())) {
        note(
            "spec.template.spec.resources",
            "resources has no v1 equivalent on NodePools (Karpenter never used it) and was dropped".to_string(),
        );
    }

    let nodepool = v1np::NodePool { metadata: clean_metadata(&np.metadata), ..v1np::NodePool::new("", v1) };
    PendingNodePool { object, nodepool, kubelet: tspec.kubelet.clone(), kubelet_field: "spec.template.spec.kubelet" }
}

/// `{apiVersion, kind, name}` → `{group, kind, name}`; empty fields default to the AWS provider's EC2NodeClass,
/// as upstream's webhook did.
fn convert_node_class_ref(
    r: &NodeClassReference,
    field: &str,
    note: &mut impl FnMut(&str, String),
) -> crate::api::nodeclaim::NodeClassReference {
    let (group, kind) = (r.given_group(), r.given_kind());
    if group.is_none() || kind.is_none() {
        note(
            field,
            format!(
                "nodeClassRef {} unset; v1 requires group, kind and name, so {} {} was filled in",
                match (group.is_none(), kind.is_none()) {
                    (true, true) => "apiVersion and kind were",
                    (true, false) => "apiVersion was",
                    _ => "kind was",
                },
                crate::api::AWS_GROUP,
                v1nc::KIND
            ),
        );
    }
    crate::api::nodeclaim::NodeClassReference {
        group: group.unwrap_or_else(|| crate::api::AWS_GROUP.to_string()),
        kind: kind.unwrap_or_else(|| v1nc::KIND.to_string()),
        name: r.name.clone(),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// EC2NodeClass
// ---------------------------------------------------------------------------------------------------------------

/// A v1beta1 EC2NodeClass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EC2NodeClass {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: EC2NodeClassSpec,
    /// Ignored by conversion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

/// Kept apart from v1's: `amiFamily` is free text (Ubuntu too), and v1's later fields (kubelet, capacity
/// reservations, network interfaces, …) are absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EC2NodeClassSpec {
    /// AL2, AL2023, Bottlerocket, Ubuntu, Custom, Windows2019, Windows2022 (required in v1beta1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    #[serde(default, rename = "associatePublicIPAddress", skip_serializing_if = "Option::is_none")]
    pub associate_public_ip_address: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<InstanceStorePolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default)]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    #[serde(default)]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
}

/// v1beta1 AMI term: kept apart from v1's, which also takes `alias` and `ssmParameter`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AmiSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

impl From<&AmiSelectorTerm> for v1nc::AmiSelectorTerm {
    fn from(t: &AmiSelectorTerm) -> Self {
        v1nc::AmiSelectorTerm {
            id: t.id.clone(),
            name: t.name.clone(),
            owner: t.owner.clone(),
            tags: t.tags.clone(),
            ..Default::default()
        }
    }
}

/// Metadata options as written, shared with v1alpha1: kept apart from v1's, whose fields default when left out, as
/// conversion must know which were.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetadataOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_endpoint: Option<String>,
    #[serde(default, rename = "httpProtocolIPv6", skip_serializing_if = "Option::is_none")]
    pub http_protocol_ipv6: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_put_response_hop_limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_tokens: Option<String>,
}

/// v1beta1 EC2NodeClass: `amiSelectorTerms`, and the CRD defaults for metadataOptions, both for the absent block
/// and for absent fields.
pub(crate) const V1BETA1: NodeClassVersion = NodeClassVersion {
    name: "v1beta1",
    ami_selector: "amiSelectorTerms",
    metadata_when_absent: ("enabled", "disabled", 2, "required"),
    metadata_when_partial: ("enabled", "disabled", 2, "required"),
};

pub(crate) fn convert_nodeclass(nc: &EC2NodeClass, notes: &mut Notes) -> v1nc::EC2NodeClass {
    let object = object_name("EC2NodeClass", &nc.metadata);
    let s = &nc.spec;
    let mut v1 = v1nc::EC2NodeClassSpec {
        ami_selector_terms: s.ami_selector_terms.iter().map(Into::into).collect(),
        associate_public_ip_address: s.associate_public_ip_address,
        block_device_mappings: s.block_device_mappings.clone(),
        context: s.context.clone(),
        detailed_monitoring: s.detailed_monitoring,
        instance_profile: s.instance_profile.clone(),
        instance_store_policy: s.instance_store_policy,
        role: s.role.clone(),
        security_group_selector_terms: s.security_group_selector_terms.clone(),
        subnet_selector_terms: s.subnet_selector_terms.clone(),
        tags: s.tags.clone(),
        user_data: s.user_data.clone(),
        ..v1nc::EC2NodeClassSpec::empty()
    };
    convert_family_and_metadata_options(
        &mut v1,
        s.ami_family.as_deref(),
        s.metadata_options.as_ref(),
        &V1BETA1,
        "spec.",
        &object,
        notes,
    );
    if v1.role.is_none() && v1.instance_profile.is_none() {
        notes.add(
            &object,
            "spec.role",
            "neither role nor instanceProfile is set; v1 requires exactly one (set spec.role to the nodes' IAM role)"
                .to_string(),
        );
    }
    v1nc::EC2NodeClass { metadata: clean_metadata(&nc.metadata), ..v1nc::EC2NodeClass::new("", v1) }
}

/// The family string of a legacy object, parsed.
pub(crate) fn parse_family(family: &str) -> Option<AmiFamily> {
    AmiFamily::ALL.into_iter().find(|f| f.as_str() == family)
}
