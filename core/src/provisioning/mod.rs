//! The provisioner (upstream `pkg/controllers/provisioning`, v1.14.1) around the scheduler: when a
//! round runs, and the NodeClaim a round's plan becomes. The round itself is
//! [`crate::scheduling::schedule`].
//!
//! Module map: `batcher` [`provisioning/batcher.go`: the idle and maximum batch windows],
//! `nodeclaim` [`provisioner.go::Create` and `scheduling/nodeclaimtemplate.go::ToNodeClaim`: the
//! object created for a planned NodeClaim], `limits` [`provisioner.go::Create`: the NodePool limits
//! re-checked right before each create], `trigger` [`provisioning/controller.go`: `PodController`
//! and `NodeController`, what opens the batch window].

mod batcher;
mod limits;
mod nodeclaim;
mod trigger;

pub use batcher::{Batcher, BATCH_IDLE_MILLIS, BATCH_MAX_MILLIS};
pub use limits::{exceeded, usage, LimitExceeded};
pub use nodeclaim::nodeclaim_for;
pub use trigger::{Triggers, RETRIGGER_MILLIS};
