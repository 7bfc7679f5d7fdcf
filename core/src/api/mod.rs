//! The Karpenter v1 API: `karpenter.sh/v1` NodePool and NodeClaim, `karpenter.k8s.aws/v1` EC2NodeClass.
//!
//! upstream: kubernetes-sigs/karpenter `pkg/apis/v1` and aws/karpenter-provider-aws `pkg/apis/v1` at v1.14.1, with
//! the CRD defaults applied at deserialisation (serde default functions), so a loaded object prints as
//! `kubectl get -o yaml` would show it after the API server defaulted it. Struct fields are declared in
//! alphabetical order of their JSON names, which is the order `kubectl` prints them in.
//!
//! Validation (openAPI patterns, CEL rules and the runtime checks) is in `validation`; every type here implements
//! [`validation::Validate`].

pub mod clusterautoscaler;
pub mod condition_set;
pub(crate) mod cron;
pub(crate) mod duration;
pub mod ec2nodeclass;
pub mod nodeclaim;
pub mod nodepool;
pub mod time;
pub(crate) mod validation;

use serde::{Deserialize, Serialize};

pub use duration::{Duration, NillableDuration};
pub use ec2nodeclass::{AmiFamily, EC2NodeClass, EC2NodeClassSpec};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassReference};
pub use nodepool::{NodePool, NodePoolSpec};
pub use validation::{FieldError, Rule, Validate, ValidateUpdate};

/// The API group of NodePool and NodeClaim.
pub const KARPENTER_GROUP: &str = "karpenter.sh";
/// `karpenter.sh/v1`.
pub const KARPENTER_API_VERSION: &str = "karpenter.sh/v1";
/// The API group of EC2NodeClass.
pub const AWS_GROUP: &str = "karpenter.k8s.aws";
/// `karpenter.k8s.aws/v1`.
pub const AWS_API_VERSION: &str = "karpenter.k8s.aws/v1";

/// A status condition (upstream `operatorpkg/status.Condition`, the shape of `metav1.Condition`). Fields are
/// optional here so that partially written status blocks load.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// RFC 3339 time of the last status change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(rename = "type")]
    pub type_: String,
}

impl Condition {
    /// True if the condition's status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// The condition of `type_` in `conditions`, if any.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

/// Shared checks of `apiVersion`, `kind` and `metadata.name`.
pub(crate) fn validate_type_meta(
    api_version: &str,
    kind: &str,
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    want_api_version: &str,
    want_kind: &str,
    out: &mut Vec<FieldError>,
) {
    if api_version != want_api_version {
        out.push(FieldError::new(
            "apiVersion",
            Rule::TypeMeta,
            format!("apiVersion must be {want_api_version:?} for a {want_kind}, got {api_version:?}"),
        ));
    }
    if kind != want_kind {
        out.push(FieldError::new("kind", Rule::TypeMeta, format!("kind must be {want_kind:?}, got {kind:?}")));
    }
    let named = metadata.name.as_deref().is_some_and(|n| !n.is_empty())
        || metadata.generate_name.as_deref().is_some_and(|n| !n.is_empty());
    if !named {
        out.push(FieldError::new("metadata.name", Rule::MetadataName, "metadata.name is required"));
    }
}

#[cfg(test)]
mod tests;
