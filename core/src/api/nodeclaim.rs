//! `karpenter.sh/v1` NodeClaim (upstream `pkg/apis/v1/nodeclaim.go`, `nodeclaim_status.go`, CRD
//! `karpenter.sh_nodeclaims.yaml`).
//!
//! CRD default: `spec.expireAfter` = `720h`. The spec is immutable (`self == oldSelf`).

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::api::duration::{Duration, NillableDuration};
use crate::api::validation::{self, FieldError, KeyContext, Rule, Validate, ValidateUpdate};
use crate::api::{Condition, AWS_GROUP, KARPENTER_API_VERSION};
use crate::requirements::NodeSelectorRequirementWithMinValues;
use crate::resources::ResourceList;

/// `NodeClaim`.
pub const KIND: &str = "NodeClaim";

/// Status condition types (upstream `nodeclaim_status.go`).
pub mod conditions {
    pub const LAUNCHED: &str = "Launched";
    pub const REGISTERED: &str = "Registered";
    pub const INITIALIZED: &str = "Initialized";
    pub const CONSOLIDATABLE: &str = "Consolidatable";
    pub const DRIFTED: &str = "Drifted";
    pub const DRAINED: &str = "Drained";
    pub const VOLUMES_DETACHED: &str = "VolumesDetached";
    pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";
    pub const CONSISTENT_STATE_FOUND: &str = "ConsistentStateFound";
    pub const DISRUPTION_REASON: &str = "DisruptionReason";
    pub const READY: &str = "Ready";
}

/// `nodeClassRef`: the provider NodeClass a NodePool or NodeClaim uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClassReference {
    /// The API group, without a version (`karpenter.k8s.aws`).
    pub group: String,
    pub kind: String,
    pub name: String,
}

impl Default for NodeClassReference {
    /// The EC2NodeClass named `default`.
    fn default() -> Self {
        NodeClassReference {
            group: AWS_GROUP.to_string(),
            kind: "EC2NodeClass".to_string(),
            name: "default".to_string(),
        }
    }
}

pub(crate) fn default_expire_after() -> NillableDuration {
    NillableDuration::parse("720h").expect("720h is a duration")
}

pub(crate) fn validate_node_class_ref(r: &NodeClassReference, path: &str, out: &mut Vec<FieldError>) {
    if r.group.is_empty() {
        out.push(FieldError::new(format!("{path}.group"), Rule::NodeClassRefGroup, "group may not be empty"));
    } else if r.group.contains('/') {
        out.push(FieldError::new(
            format!("{path}.group"),
            Rule::NodeClassRefGroup,
            format!(
                "group {:?} must be an API group without a version (for example \"karpenter.k8s.aws\", not \
                 \"karpenter.k8s.aws/v1\")",
                r.group
            ),
        ));
    }
    if r.kind.is_empty() {
        out.push(FieldError::new(format!("{path}.kind"), Rule::NodeClassRefKind, "kind may not be empty"));
    }
    if r.name.is_empty() {
        out.push(FieldError::new(format!("{path}.name"), Rule::NodeClassRefName, "name may not be empty"));
    }
}

fn default_api_version() -> String {
    KARPENTER_API_VERSION.to_string()
}

fn default_kind() -> String {
    KIND.to_string()
}

/// A NodeClaim: Karpenter's request for one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaim {
    #[serde(default = "default_api_version")]
    pub api_version: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: NodeClaimSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NodeClaimStatus>,
}

impl NodeClaim {
    /// A NodeClaim named `name` with `spec`.
    pub fn new(name: &str, spec: NodeClaimSpec) -> NodeClaim {
        NodeClaim {
            api_version: default_api_version(),
            kind: default_kind(),
            metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() },
            spec,
            status: None,
        }
    }

    /// `metadata.name`, or `""`.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }
}

/// `spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimSpec {
    #[serde(default = "default_expire_after")]
    pub expire_after: NillableDuration,
    pub node_class_ref: NodeClassReference,
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The resources the pods bound to this NodeClaim request (set by the scheduler).
    #[serde(default, skip_serializing_if = "ResourceRequirements::is_empty")]
    pub resources: ResourceRequirements,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<Duration>,
}

impl Default for NodeClaimSpec {
    fn default() -> Self {
        NodeClaimSpec {
            expire_after: default_expire_after(),
            node_class_ref: NodeClassReference::default(),
            requirements: Vec::new(),
            resources: ResourceRequirements::default(),
            startup_taints: Vec::new(),
            taints: Vec::new(),
            termination_grace_period: None,
        }
    }
}

/// `spec.resources`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceRequirements {
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub requests: ResourceList,
}

impl ResourceRequirements {
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// `status`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimStatus {
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub allocatable: ResourceList,
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub capacity: ResourceList,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, rename = "imageID", skip_serializing_if = "String::is_empty")]
    pub image_id: String,
    /// RFC 3339 time of the last pod scheduling or removal event on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    #[serde(default, rename = "providerID", skip_serializing_if = "String::is_empty")]
    pub provider_id: String,
}

impl Validate for NodeClaim {
    fn validate(&self) -> Vec<FieldError> {
        let mut out = Vec::new();
        crate::api::validate_type_meta(
            &self.api_version,
            &self.kind,
            &self.metadata,
            KARPENTER_API_VERSION,
            KIND,
            &mut out,
        );
        let s = &self.spec;
        validation::validate_taints(&s.taints, &s.startup_taints, "spec", false, &mut out);
        validation::validate_requirements(&s.requirements, "spec.requirements", KeyContext::NodeClaim, &mut out);
        validate_node_class_ref(&s.node_class_ref, "spec.nodeClassRef", &mut out);
        if let Some(tgp) = &s.termination_grace_period {
            validation::validate_termination_grace_period(tgp, "spec.terminationGracePeriod", &mut out);
        }
        validation::validate_expire_after(&s.expire_after, "spec.expireAfter", &mut out);
        out
    }
}

impl ValidateUpdate for NodeClaim {
    fn validate_update(&self, old: &Self) -> Vec<FieldError> {
        if self.spec == old.spec {
            Vec::new()
        } else {
            vec![FieldError::new("spec", Rule::NodeClaimSpecImmutable, "spec is immutable")]
        }
    }
}
