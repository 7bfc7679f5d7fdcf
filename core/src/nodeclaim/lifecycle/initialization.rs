//! upstream `initialization.go`: a registered NodeClaim is `Initialized` once its Node is Ready, none
//! of the NodeClaim's startup taints and no known ephemeral taint remain, and every resource the
//! NodeClaim requests is allocatable on the Node; the Node is then labelled
//! `karpenter.sh/initialized=true`. Until then pods planned for it wait, and the scheduler still
//! counts it as capacity that is coming.

use k8s_openapi::api::core::v1::Node;

use crate::api::nodeclaim::conditions;
use crate::api::NodeClaim;
use crate::labels;
use crate::quantity::Quantity;
use crate::scheduling::taints::is_known_ephemeral;

use super::{is_true, set_ready_if_all_true, set_true};

/// Why a NodeClaim is not initialized yet (upstream's reasons on `Initialized=Unknown`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error)]
pub enum NotInitialized {
    #[error("the NodeClaim is not registered")]
    NotRegistered,
    #[error("the Node is not Ready")]
    NodeNotReady,
    #[error("startup taint {taint} remains")]
    StartupTaintsExist { taint: String },
    #[error("known ephemeral taint {taint} remains")]
    KnownEphemeralTaintsExist { taint: String },
    #[error("requested resource {resource} is not allocatable on the Node")]
    ResourceNotRegistered { resource: String },
}

impl NotInitialized {
    /// upstream's condition reason.
    pub fn reason(&self) -> &'static str {
        match self {
            NotInitialized::NotRegistered => "NotRegistered",
            NotInitialized::NodeNotReady => "NodeNotReady",
            NotInitialized::StartupTaintsExist { .. } => "StartupTaintsExist",
            NotInitialized::KnownEphemeralTaintsExist { .. } => "KnownEphemeralTaintsExist",
            NotInitialized::ResourceNotRegistered { .. } => "ResourceNotRegistered",
        }
    }
}

fn taint_text(t: &k8s_openapi::api::core::v1::Taint) -> String {
    match t.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
        _ => format!("{}:{}", t.key, t.effect),
    }
}

/// The NodeClaim and its Node once initialized at RFC 3339 time `at`, or why not yet.
pub fn initialize(nodeclaim: &NodeClaim, node: &Node, at: &str) -> Result<(NodeClaim, Node), NotInitialized> {
    if !is_true(nodeclaim, conditions::REGISTERED) {
        return Err(NotInitialized::NotRegistered);
    }
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    if !ready {
        return Err(NotInitialized::NodeNotReady);
    }
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
    if let Some(t) =
        nodeclaim.spec.startup_taints.iter().find(|s| taints.iter().any(|t| t.key == s.key && t.effect == s.effect))
    {
        return Err(NotInitialized::StartupTaintsExist { taint: taint_text(t) });
    }
    if let Some(t) = taints.iter().find(|t| is_known_ephemeral(t)) {
        return Err(NotInitialized::KnownEphemeralTaintsExist { taint: taint_text(t) });
    }
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    // Requests in name order (upstream ranges over a Go map; the first missing one is reported).
    for (resource, quantity) in &nodeclaim.spec.resources.requests {
        if quantity.is_zero() {
            continue;
        }
        let on_node = allocatable.and_then(|a| a.get(resource)).and_then(|q| Quantity::parse(&q.0).ok());
        if on_node.is_none_or(|q| q.is_zero()) {
            return Err(NotInitialized::ResourceNotRegistered { resource: resource.clone() });
        }
    }
    let mut node = node.clone();
    node.metadata.labels.get_or_insert_with(Default::default).insert(labels::NODE_INITIALIZED.into(), "true".into());
    let mut nc = nodeclaim.clone();
    set_true(&mut nc.status.get_or_insert_with(Default::default).conditions, conditions::INITIALIZED, at);
    set_ready_if_all_true(&mut nc, at);
    Ok((nc, node))
}
