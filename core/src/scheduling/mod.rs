//! The provisioning scheduler (upstream `pkg/controllers/provisioning/scheduling`). So far: the
//! NodeClaimTemplate a NodePool becomes, and the instance-type prefilter it applies.

pub mod nodeclaim_template;

pub use nodeclaim_template::{InstanceTypeOption, NodeClaimTemplate, Prefilter, Rejection};
