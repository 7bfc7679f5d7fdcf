//! Cluster Autoscaler's decisions, for the comparison with Karpenter: the same workload through
//! CA's node groups, on the same simulated clock. Upstream: kubernetes/autoscaler, tag
//! `cluster-autoscaler-1.36.1`, under `cluster-autoscaler/`. The groups and CA's flags are the
//! scenario's ([`crate::api::clusterautoscaler`]).
//!
//! | file | upstream |
//! |---|---|
//! | [`template`] | `cloudprovider/aws/aws_manager.go` `buildNodeFromTemplate`, `buildGenericLabels`; `cloudprovider/utils.go` `BuildKubeProxy`; `simulator/node_info_utils.go` `podsExpectedOnFreshNode` |

pub mod template;

pub use template::{template, Template, TemplateError, TemplatePod};
