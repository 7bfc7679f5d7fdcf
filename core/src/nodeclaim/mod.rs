//! The NodeClaim controllers (upstream `pkg/controllers/nodeclaim`, v1.14.1) as decisions: each
//! function reads a NodeClaim, its Node and the time, and returns the objects as they should
//! become, or why not yet. Nothing here writes anywhere: the simulation keeps the result in its
//! world at simulated times, the controller writes it through the API server at real times. Both
//! driving these same functions is what lets a simulation predict the controller.
//!
//! Module map: `consistency` [`nodeclaim/consistency`: `controller.go`, `nodeshape.go`],
//! `lifecycle` [`nodeclaim/lifecycle`: `launch.go`, `registration.go`,
//! `initialization.go`, `liveness.go`], `disruption` [`nodeclaim/disruption`: `drift.go`,
//! `consolidation.go`; `nodeclaim/podevents`], `garbagecollection` [`nodeclaim/garbagecollection`;
//! the AWS provider's `pkg/controllers/nodeclaim/garbagecollection`].

pub mod consistency;
pub mod disruption;
pub mod garbagecollection;
pub mod lifecycle;
