//! Shared helpers for the scenario and end-to-end tests.

pub mod catalog;
pub mod fidelity;
pub mod testenv;
