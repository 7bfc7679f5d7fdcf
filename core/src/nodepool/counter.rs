//! upstream `nodepool/counter`: `status.resources` is what the NodePool's nodes hold (cpu, memory,
//! pods, ephemeral-storage and `nodes` always present, zero when none), `status.nodes` their count.
//! What counts is the limit check's usage (`crate::scheduling::nodepool_usage`): nodes and launched
//! NodeClaims not marked for deletion, by capacity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use crate::api::nodepool::NodePoolStatus;
use crate::api::NodeClaim;
use crate::quantity::Quantity;
use crate::resources::ResourceList;
use crate::state::Input;

/// upstream `nodepool.counter` counts again every 5 s (`RequeueAfter: time.Second * 5`).
pub const COUNT_EVERY_MILLIS: u64 = 5_000;
/// ... and looks again every second while the cluster state is not synced (`RequeueAfter:
/// time.Second`), when it counts nothing.
pub const UNSYNCED_RECHECK_MILLIS: u64 = 1_000;

/// What a NodePool's counter does on a reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// Count now, and again in [`COUNT_EVERY_MILLIS`].
    Now,
    /// The cluster state is not synced: nothing counted, looked at again in a second.
    NotSynced,
    /// Counted less than 5 s ago (the reconcile is for a condition): again after this many
    /// milliseconds. Upstream's counter ignores updates and counts on its requeue alone.
    Wait(u64),
}

impl Count {
    /// When the counter is to run again.
    pub fn requeue_millis(self) -> u64 {
        match self {
            Count::Now => COUNT_EVERY_MILLIS,
            Count::NotSynced => UNSYNCED_RECHECK_MILLIS,
            Count::Wait(millis) => millis,
        }
    }
}

/// Whether a NodePool last counted at `last` (milliseconds on any clock; `None`: never) is
/// counted at `now`.
pub fn count(last: Option<u64>, now: u64, synced: bool) -> Count {
    if !synced {
        return Count::NotSynced;
    }
    match last.map(|last| now.saturating_sub(last)) {
        Some(since) if since < COUNT_EVERY_MILLIS => Count::Wait(COUNT_EVERY_MILLIS - since),
        _ => Count::Now,
    }
}

/// What each NodePool's nodes hold (by NodePool name): the limit check's count
/// ([`crate::scheduling::nodepool_usage`]) on the cluster's Nodes and NodeClaims alone, without
/// the pods, volumes and instance types a scheduling round prepares, none of which it reads.
pub fn usage(nodes: &[Node], nodeclaims: &[NodeClaim]) -> BTreeMap<String, ResourceList> {
    let input = Input { nodes: nodes.to_vec(), nodeclaims: nodeclaims.to_vec(), ..Input::default() };
    crate::scheduling::nodepool_usage(&input)
}

/// upstream `BaseResources`.
const BASE: [&str; 5] = ["cpu", "memory", "pods", "ephemeral-storage", "nodes"];

/// Writes `usage` into the status.
pub fn write(usage: &ResourceList, status: &mut NodePoolStatus) {
    let mut resources: ResourceList = BASE.iter().map(|r| (r.to_string(), Quantity::from_units(0))).collect();
    resources.extend(usage.iter().map(|(k, v)| (k.clone(), *v)));
    let nodes = resources.get("nodes").map_or(0, |q| q.value() as i64);
    status.resources = resources;
    status.nodes = Some(nodes);
}
