//! The fidelity harness: our scheduler and upstream Karpenter v1.14.1's (through the Go oracle,
//! tests/oracle) on the same inputs, compared by equivalence classes. See docs/fidelity.md.

pub mod compare;
pub mod export;
pub mod generate;
pub mod oracle;
pub mod run;
