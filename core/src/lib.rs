//! carpentry-core: Karpenter v1 semantics (upstream v1.14.1) as a pure library.
//!
//! No I/O, no async runtime and no wall clock: everything here builds for the host and for
//! `wasm32-unknown-unknown`, and every decision takes `now` from its caller. Adapters (the wasm
//! session, the web playground, the kubectl plugin, the controller) translate and render; every
//! Karpenter rule lives in the modules below, each named after the upstream package it mirrors.
//! `docs/architecture.md` has the bird's-eye view, the code map and the invariants.
//!
//! # Start here
//!
//! - **Load** manifests (YAML or JSON, many documents, legacy kinds converted):
//!   [`load`] → [`Manifests`], or a [`LoadError`] whose [`Problem`]s name the document, object,
//!   field and line. [`load_from_api_server`] reads objects a live cluster returned.
//! - **The view a decision reads**: [`input_from_manifests`] → [`Prepared`] (an [`Input`]: NodePools
//!   with their instance types from the [`Catalogue`], nodes, NodeClaims, pods, volumes, options).
//! - **One provisioning round**: [`schedule`]`(&input)` → [`Results`]: new NodeClaims, pods placed
//!   on existing capacity, and for every pod that cannot schedule a [`PodExplanation`] (the
//!   failing constraint per NodePool, with its fix; [`Unschedulable`] pairs it with the pod).
//! - **Time**: [`Simulation`] runs provisioning, registration, disruption, drains and
//!   interruptions on a simulated clock ([`SimTime`], [`Timings`]); [`whatif`] compares two runs
//!   from the same point, with and without an edit ([`WhatIf`]).
//! - **Why a node stays or goes**: [`NodeExplanation`] and [`NodePoolExplanation`], from a
//!   simulation's current state.
//! - **Migrating**: [`convert`] turns v1alpha5/v1beta1 objects into v1, with a [`ConversionNote`]
//!   for everything that changed meaning.
//!
//! Each explanation is a structured value (serde-serialisable); its text is rendered from it
//! ([`render_unschedulable`], [`render_node`], [`render_nodepool`]); the `*_styled` variants take a
//! [`style::Style`] for adapters that colour what passed and what failed.
//!
//! The modules stay public as namespaces for the vocabulary adapters name (the API types in
//! [`api`], well-known [`labels`], [`quantity`], [`requirements`]); what an adapter needs beyond
//! the items above is re-exported at each module's root, and the rest is private to the crate.

pub mod api;
pub mod catalogue;
pub mod clusterautoscaler;
pub mod conversion;
pub mod disruption;
pub mod events;
pub mod labels;
pub mod manifest;
pub mod nodeclaim;
pub mod nodepool;
pub mod options;
pub mod pod;
pub mod providers;
pub mod provisioning;
pub mod quantity;
pub mod requirements;
pub mod resources;
pub mod scheduling;
pub mod simulation;
pub mod state;
pub mod style;
pub mod termination;
pub mod workqueue;

pub use catalogue::Catalogue;
pub use conversion::{convert, ConversionNote, Converted, LegacyObject};
pub use disruption::explain::{
    render_node, render_node_styled, render_nodepool, NodeExplanation, NodePoolExplanation, NodeVerdict,
};
pub use manifest::{
    load, load_from_api_server, load_from_api_server_skipping, HeldDecision, LiveLoad, LiveObject, LoadError,
    Manifests, Problem, Skipped, ViewGap,
};
pub use scheduling::explain::{render_unschedulable, PodExplanation, Unschedulable};
pub use scheduling::{schedule, Results};
pub use simulation::{whatif, SimTime, Simulation, SimulationError, StepError, Timings, WhatIf, WhatIfError};
pub use state::{input_from_manifests, Input, Prepared, StateError};

/// An error and its causes (`#[source]` chain) on one line, `outer: cause: root`, as the adapters
/// print errors for users (core's errors name what failed in their `Display` and keep the cause
/// as their source).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}
