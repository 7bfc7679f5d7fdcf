//! Our round's input as the upstream oracle reads it (tests/oracle/README.md): the same NodePools,
//! pods, nodes, NodeClaims and DaemonSets, and the instance types our catalogue resolved for each
//! NodePool, offering by offering, so that both engines decide over identical data.

use std::collections::BTreeMap;
use std::sync::Arc;

use carpentry_core::catalogue::UnavailableOffering;
use carpentry_core::catalogue::{InstanceType, Offering};
use carpentry_core::options::MinValuesPolicy;
use carpentry_core::resources::ResourceList;
use carpentry_core::state::Input;
use serde_json::{json, Value};

/// The label upstream's AWS provider reads an offering's reservation from.
const RESERVATION_ID_LABEL: &str = "karpenter.k8s.aws/capacity-reservation-id";

/// Makes the input identical for both engines where upstream needs more than we do: every pod
/// gets an explicit namespace and a unique UID (upstream keys its per-pod data by UID and orders
/// equal pods by it; ours falls back to input order, so the generated UIDs follow input order).
pub fn normalise(input: &mut Input) {
    for (i, pod) in input.pods.iter_mut().enumerate() {
        if pod.metadata.namespace.is_none() {
            pod.metadata.namespace = Some("default".into());
        }
        if pod.metadata.uid.as_deref().is_none_or(str::is_empty) {
            pod.metadata.uid = Some(format!("00000000-0000-4000-8000-{i:012}"));
        }
    }
}

/// The instance-type sets already sent to one oracle process (`oracle batch` keeps them by id, so
/// a scenario reuses the catalogue without sending its ~1,400 types again). The Arcs are held so
/// that an address is never reused for different types.
#[derive(Default)]
pub struct SentSets {
    sent: Vec<(Arc<Vec<InstanceType>>, String)>,
}

/// The oracle's input document for `input` (already [`normalise`]d). With `sent`, sets the oracle
/// already has are referred to by id only.
pub fn oracle_input(name: &str, input: &Input, now: &str, mut sent: Option<&mut SentSets>) -> Value {
    let mut local = SentSets::default();
    let mut sets = serde_json::Map::new();
    let mut by_nodepool = BTreeMap::new();
    for np in &input.nodepools {
        if np.instance_types.is_empty() {
            continue;
        }
        // Unavailable offerings are applied to the set, so such a set is never shared.
        let cache =
            if input.unavailable_offerings.is_empty() { sent.as_deref_mut().unwrap_or(&mut local) } else { &mut local };
        let id = match cache.sent.iter().find(|(k, _)| Arc::ptr_eq(k, &np.instance_types)) {
            Some((_, id)) => id.clone(),
            None => {
                let id = if input.unavailable_offerings.is_empty() {
                    format!("set-{}", cache.sent.len())
                } else {
                    format!("scenario-set-{}", cache.sent.len())
                };
                cache.sent.push((np.instance_types.clone(), id.clone()));
                let types = np.instance_types.iter().map(|it| instance_type(it, &input.unavailable_offerings));
                sets.insert(id.clone(), Value::Array(types.collect()));
                id
            }
        };
        by_nodepool.insert(np.nodepool.metadata.name.clone().unwrap_or_default(), id);
    }
    json!({
        "name": name,
        "now": now,
        "nodePools": input.nodepools.iter().map(|np| &np.nodepool).collect::<Vec<_>>(),
        "instanceTypeSets": sets,
        "nodePoolInstanceTypes": by_nodepool,
        "pods": input.pods,
        "nodes": input.nodes,
        "nodeClaims": input.nodeclaims,
        "daemonSets": input.daemonsets,
        "pdbs": input.pdbs,
        "pvcs": input.pvcs,
        "pvs": input.pvs,
        "storageClasses": input.storage_classes,
        "csiNodes": input.csinodes,
        "reservationIdLabel": RESERVATION_ID_LABEL,
        "minValuesPolicy": match input.options.min_values_policy {
            MinValuesPolicy::Strict => "Strict",
            MinValuesPolicy::BestEffort => "BestEffort",
        },
        "maxInstanceTypes": input.options.max_instance_types,
    })
}

fn resources(list: &ResourceList) -> Value {
    Value::Object(list.iter().map(|(k, v)| (k.clone(), Value::String(v.to_string()))).collect())
}

/// Whether the round's unavailable offerings (insufficient capacity) include this offering of `it`.
pub fn is_unavailable(unavailable: &[UnavailableOffering], it: &InstanceType, o: &Offering) -> bool {
    unavailable
        .iter()
        .any(|u| u.instance_type == it.name && u.zone == o.zone && u.capacity_type == o.capacity_type.as_str())
}

/// Our scheduler reads the round's unavailable offerings (insufficient capacity) beside the
/// catalogue; upstream's cloud provider marks the offerings themselves unavailable.
fn instance_type(it: &InstanceType, unavailable: &[UnavailableOffering]) -> Value {
    json!({
        "name": it.name,
        "requirements": it.requirements.to_node_selector_requirements(),
        "capacity": resources(&it.capacity),
        "overhead": {
            "kubeReserved": resources(&it.overhead.kube_reserved),
            "systemReserved": resources(&it.overhead.system_reserved),
            "evictionThreshold": resources(&it.overhead.eviction_threshold),
        },
        "offerings": it.offerings.iter().map(|o| json!({
            "requirements": o.requirements.to_node_selector_requirements(),
            "price": o.price,
            "available": o.available && !is_unavailable(unavailable, it, o),
            "reservationCapacity": o.reservation.as_ref().map_or(0, |r| r.available_instances),
        })).collect::<Vec<_>>(),
    })
}
