//! upstream `registration.go`: the Node whose `spec.providerID` is the NodeClaim's has joined. Karpenter
//! syncs it from the NodeClaim (its termination finalizer, an owner reference to the NodeClaim,
//! labels and annotations, taints and, on first registration, startup taints, unless the Node is
//! labelled `karpenter.sh/do-not-sync-taints=true`), removes `karpenter.sh/unregistered:NoExecute`,
//! labels it `karpenter.sh/registered=true`, and sets the NodeClaim's `status.nodeName` and
//! `Registered=True`.

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::api::nodeclaim::conditions;
use crate::api::{NodeClaim, KARPENTER_API_VERSION};
use crate::labels;
use crate::scheduling::taints::{NO_EXECUTE, UNREGISTERED};

use super::{is_true, set_true};

/// `karpenter.sh/unregistered:NoExecute`: a Node joins with it (the instance's bootstrap puts it
/// on) and keeps it until Karpenter has registered it, so that no pod runs before then.
pub fn unregistered_taint() -> Taint {
    Taint { key: UNREGISTERED.into(), value: None, effect: NO_EXECUTE.into(), time_added: None }
}

/// Why a NodeClaim cannot register yet.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error)]
pub enum NotRegistered {
    #[error("the NodeClaim has not launched (no providerID)")]
    NotLaunched,
    #[error("no Node has providerID {provider_id}")]
    NodeNotFound { provider_id: String },
    /// upstream: an error; a providerID names one instance.
    #[error("{count} Nodes have providerID {provider_id}")]
    MultipleNodesFound { provider_id: String, count: usize },
}

/// The NodeClaim's Node among `nodes`, by providerID.
pub fn node_for<'a>(
    nodeclaim: &NodeClaim,
    nodes: impl IntoIterator<Item = &'a Node>,
) -> Result<&'a Node, NotRegistered> {
    let provider_id = nodeclaim.status.as_ref().map(|s| s.provider_id.as_str()).unwrap_or_default();
    if provider_id.is_empty() {
        return Err(NotRegistered::NotLaunched);
    }
    let mut found =
        nodes.into_iter().filter(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id));
    match (found.next(), found.count()) {
        (Some(node), 0) => Ok(node),
        (None, _) => Err(NotRegistered::NodeNotFound { provider_id: provider_id.to_string() }),
        (Some(_), more) => {
            Err(NotRegistered::MultipleNodesFound { provider_id: provider_id.to_string(), count: more + 1 })
        }
    }
}

/// The Node and NodeClaim after registration.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    pub node: Node,
    pub nodeclaim: NodeClaim,
    /// The Node had neither the unregistered taint nor the registered label (upstream's
    /// `UnregisteredTaintMissing` event: something else registered it, or removed the taint).
    pub unregistered_taint_missing: bool,
}

/// Registers `nodeclaim` with its `node` at RFC 3339 time `at`.
pub fn register(nodeclaim: &NodeClaim, node: &Node, at: &str) -> Registration {
    let mut node = node.clone();
    let meta = &mut node.metadata;
    let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == labels::TERMINATION_FINALIZER) {
        finalizers.push(labels::TERMINATION_FINALIZER.to_string());
    }
    let owner = OwnerReference {
        api_version: KARPENTER_API_VERSION.into(),
        kind: crate::api::nodeclaim::KIND.into(),
        name: nodeclaim.name().to_string(),
        uid: nodeclaim.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    };
    let owners = meta.owner_references.get_or_insert_with(Vec::new);
    if !owners.iter().any(|o| o.kind == owner.kind && o.name == owner.name) {
        owners.push(owner);
    }
    let node_labels = meta.labels.get_or_insert_with(Default::default);
    node_labels.extend(nodeclaim.metadata.labels.clone().unwrap_or_default());
    if let Some(annotations) = nodeclaim.metadata.annotations.as_ref().filter(|a| !a.is_empty()) {
        meta.annotations.get_or_insert_with(Default::default).extend(annotations.clone());
    }
    let sync_taints = node_labels.get(labels::NODE_DO_NOT_SYNC_TAINTS).map(String::as_str) != Some("true");
    let was_registered = node_labels.get(labels::NODE_REGISTERED).map(String::as_str) == Some("true");
    node_labels.insert(labels::NODE_REGISTERED.into(), "true".into());

    let spec = node.spec.get_or_insert_with(Default::default);
    let taints = spec.taints.get_or_insert_with(Vec::new);
    if sync_taints {
        merge_taints(taints, &nodeclaim.spec.taints);
        if !is_true(nodeclaim, conditions::REGISTERED) {
            merge_taints(taints, &nodeclaim.spec.startup_taints);
        }
    }
    let before = taints.len();
    taints.retain(|t| !(t.key == UNREGISTERED && t.effect == NO_EXECUTE));
    let unregistered_taint_missing = before == taints.len() && !was_registered;

    let mut nc = nodeclaim.clone();
    let status = nc.status.get_or_insert_with(Default::default);
    status.node_name = node.metadata.name.clone().unwrap_or_default();
    set_true(&mut status.conditions, conditions::REGISTERED, at);
    Registration { node, nodeclaim: nc, unregistered_taint_missing }
}

/// upstream `scheduling.Taints.Merge`: adds each taint whose key and effect the list lacks.
fn merge_taints(taints: &mut Vec<Taint>, with: &[Taint]) {
    for t in with {
        if !taints.iter().any(|have| have.key == t.key && have.effect == t.effect) {
            taints.push(t.clone());
        }
    }
}
