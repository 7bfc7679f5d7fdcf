//! upstream `launch.go`: what `CloudProvider.Create` returned is written onto the NodeClaim
//! (`PopulateNodeClaimDetails`) and `Launched` goes `True`. An insufficient-capacity error deletes
//! the NodeClaim instead; that is the caller's to carry out (a new round provisions its pods again).
//! Any other error leaves `Launched` Unknown with the error's reason and message
//! ([`launch_failed`]) and the launch is tried again.

use crate::workqueue::RateLimiter;
use std::collections::BTreeMap;

use crate::api::nodeclaim::conditions;
use crate::api::nodeclaim::NodeClaimStatus;
use crate::api::{Condition, NodeClaim};
use crate::catalogue::InstanceType;
use crate::labels;
use crate::resources::ResourceList;
use crate::scheduling::cloudprovider::Launch;

use super::set_true;

/// The instance a cloud provider started for a NodeClaim (upstream: the NodeClaim
/// `CloudProvider.Create` returns).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Instance {
    pub provider_id: String,
    pub image_id: String,
    /// The labels the provider resolved for it.
    pub labels: BTreeMap<String, String>,
    /// The annotations the provider puts on the NodeClaim (the AWS provider: the instance
    /// profile it launched with).
    pub annotations: BTreeMap<String, String>,
    pub capacity: ResourceList,
    pub allocatable: ResourceList,
}

impl Instance {
    /// The instance of a launch decision: its instance type's single-valued labels (architecture,
    /// family, size, …) with its instance type, zone and capacity type, and the type's capacity and
    /// allocatable. `instance_type` is `None` when the catalogue no longer lists it.
    pub fn of_launch(launch: &Launch, instance_type: Option<&InstanceType>, provider_id: String) -> Instance {
        let mut labels = instance_type.map(|it| it.requirements.labels()).unwrap_or_default();
        labels.insert(labels::INSTANCE_TYPE.into(), launch.instance_type.clone());
        labels.insert(labels::TOPOLOGY_ZONE.into(), launch.zone.clone());
        labels.insert(labels::CAPACITY_TYPE.into(), launch.capacity_type.clone());
        Instance {
            provider_id,
            image_id: String::new(),
            labels,
            annotations: BTreeMap::new(),
            capacity: instance_type.map(|it| it.capacity.clone()).unwrap_or_default(),
            allocatable: instance_type.map(|it| it.allocatable().clone()).unwrap_or_default(),
        }
    }
}

/// The NodeClaim once `instance` runs for it, at RFC 3339 time `at`: the provider's labels under
/// the NodeClaim's own (which win), the provider's annotations over them (upstream
/// `lo.Assign(nodeClaim.Annotations, created.Annotations)`), providerID, imageID, capacity and allocatable, `Launched=True`.
pub fn launched(nodeclaim: &NodeClaim, instance: &Instance, at: &str) -> NodeClaim {
    let mut nc = nodeclaim.clone();
    let mut labels = instance.labels.clone();
    labels.extend(nc.metadata.labels.take().unwrap_or_default());
    nc.metadata.labels = Some(labels);
    if !instance.annotations.is_empty() {
        let mut annotations = nc.metadata.annotations.take().unwrap_or_default();
        annotations.extend(instance.annotations.clone());
        nc.metadata.annotations = Some(annotations);
    }
    let status = nc.status.get_or_insert_with(Default::default);
    status.provider_id = instance.provider_id.clone();
    status.image_id = instance.image_id.clone();
    status.capacity = instance.capacity.clone();
    status.allocatable = instance.allocatable.clone();
    set_true(&mut status.conditions, conditions::LAUNCHED, at);
    nc
}

/// How long a launch result is kept by NodeClaim UID, so that a failed status write never
/// launches twice (upstream `launch.go`: `cache.New(time.Hour, time.Minute)`).
pub const LAUNCH_CACHE_SECONDS: u64 = 60 * 60;

/// How many NodeClaims launch at once: upstream's lifecycle controller runs this many reconciles
/// concurrently (`lifecycle/controller.go`: `LinearScaleReconciles(CPUCount, 1000, 5000)`, 1000
/// at the default one-CPU request), so that one slow launch holds up no other.
pub const MAX_CONCURRENT_LAUNCHES: usize = 1000;

/// upstream's lifecycle controller requeues a failed reconcile (a launch that failed otherwise
/// than for capacity, a write refused) through its rate limiter (`lifecycle/controller.go`:
/// `NewTypedItemExponentialFailureRateLimiter(time.Second, time.Minute)`): after 1 s, doubling
/// with each failure, at most a minute.
pub const RATE_LIMITER: RateLimiter = RateLimiter { base_millis: 1_000, max_millis: 60_000 };

/// upstream `truncateMessage`: a condition message longer than 300 characters is cut there.
const MAX_MESSAGE_CHARS: usize = 300;

/// upstream `launch.go` on an error that is not insufficient capacity: the NodeClaim's status
/// with `Launched` Unknown, `reason` and `message` (cut to 300 characters and `...`), its
/// transition time kept while it stays Unknown (liveness counts from the first); `None` when the
/// condition says so already (no write).
pub fn launch_failed(nodeclaim: &NodeClaim, reason: &str, message: &str, at: &str) -> Option<NodeClaimStatus> {
    let message = match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}...", &message[..cut]),
        None => message.to_string(),
    };
    let mut status = nodeclaim.status.clone().unwrap_or_default();
    let existing = status.conditions.iter().position(|c| c.type_ == conditions::LAUNCHED);
    let transitioned = existing
        .map(|i| &status.conditions[i])
        .filter(|c| c.status == "Unknown")
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| at.to_string());
    let condition = Condition {
        last_transition_time: Some(transitioned),
        message: Some(message),
        observed_generation: nodeclaim.metadata.generation,
        reason: Some(reason.to_string()),
        status: "Unknown".into(),
        type_: conditions::LAUNCHED.into(),
    };
    match existing {
        Some(i) if status.conditions[i] == condition => return None,
        Some(i) => status.conditions[i] = condition,
        None => status.conditions.push(condition),
    }
    Some(status)
}
