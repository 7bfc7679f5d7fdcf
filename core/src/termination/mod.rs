//! Node termination (upstream `pkg/controllers/node/termination`, v1.14.1) as decisions: which pods
//! one drain pass evicts, and the taint a terminating node carries. The effects are the drivers':
//! the simulation removes the pods it evicts (its Eviction API stand-in refuses what a
//! PodDisruptionBudget forbids), the controller calls the `pods/eviction` subresource and the
//! API server refuses with 429.
//!
//! Module map: `terminator` [`terminator/terminator.go`: `Drain` and its tiers,
//! `utils/pod/scheduling.go`: `IsEvictable`, `IsWaitingEviction`], `controller`
//! [`controller.go`: the NodeClaim's `Drained`, `VolumesDetached`, `InstanceTerminating`;
//! `pendingVolumeAttachments`, `filterVolumeAttachments`].

pub mod controller;
mod terminator;

pub use crate::scheduling::taints::is_disrupted;
pub use terminator::{disrupted_taint, drain, eviction_backoff_millis, DrainPass, Tier};
