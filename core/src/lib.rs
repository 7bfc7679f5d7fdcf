//! carpentry-core: Karpenter v1 semantics (upstream v1.14.1) as a pure library.
//!
//! No I/O, no async runtime and no wall clock: everything here builds for the host and for
//! `wasm32-unknown-unknown`. Adapters (wasm, web, kubectl plugin, controller) translate and render;
//! every Karpenter rule lives in the modules below, each named after the upstream concept it mirrors.

pub mod api;
pub mod catalogue;
pub mod conversion;
pub mod disruption;
pub mod labels;
pub mod manifest;
pub mod quantity;
pub mod requirements;
pub mod resources;
pub mod scheduling;
pub mod simulation;
