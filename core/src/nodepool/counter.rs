//! upstream `nodepool/counter`: `status.resources` is what the NodePool's nodes hold (cpu, memory,
//! pods, ephemeral-storage and `nodes` always present, zero when none), `status.nodes` their count.
//! What counts is the limit check's usage (`crate::scheduling::nodepool_usage`): nodes and launched
//! NodeClaims not marked for deletion, by capacity.

use crate::api::nodepool::NodePoolStatus;
use crate::quantity::Quantity;
use crate::resources::ResourceList;

/// upstream `nodepool.counter` counts again every 5 s (`RequeueAfter: time.Second * 5`).
pub const COUNT_EVERY_SECONDS: i64 = 5;

/// upstream `BaseResources`.
const BASE: [&str; 5] = ["cpu", "memory", "pods", "ephemeral-storage", "nodes"];

/// Writes `usage` into the status.
pub fn count(usage: &ResourceList, status: &mut NodePoolStatus) {
    let mut resources: ResourceList = BASE.iter().map(|r| (r.to_string(), Quantity::from_units(0))).collect();
    resources.extend(usage.iter().map(|(k, v)| (k.clone(), *v)));
    let nodes = resources.get("nodes").map_or(0, |q| q.value() as i64);
    status.resources = resources;
    status.nodes = Some(nodes);
}
