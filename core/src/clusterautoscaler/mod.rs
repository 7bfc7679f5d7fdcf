//! Cluster Autoscaler's decisions, for the comparison with Karpenter: the same workload through
//! CA's node groups, on the same simulated clock. Upstream: kubernetes/autoscaler, tag
//! `cluster-autoscaler-1.36.1`, under `cluster-autoscaler/`. The groups and CA's flags are the
//! scenario's ([`crate::api::clusterautoscaler`]).
//!
//! | file | upstream |
//! |---|---|
//! | [`autoscaler`] | `core/static_autoscaler.go` `RunOnce` (its scale-up half) |
//! | [`balancing`] | `processors/nodegroupset/compare_nodegroups.go`, `aws_nodegroups.go`, `balancing_processor.go` |
//! | [`clusterstate`] | `clusterstate/clusterstate.go` (scale-up requests, health, upcoming nodes), `utils/backoff/exponential_backoff.go` |
//! | [`equivalence`] | `core/scaleup/equivalence/groups.go` |
//! | [`estimator`] | `estimator/binpacking_estimator.go`, `estimator/decreasing_pod_orderer.go` |
//! | [`expander`] | `expander/factory/chain.go`, `expander/waste`, `expander/mostpods`, `expander/leastnodes`, `expander/random` |
//! | [`filter`] | `core/podlistprocessor/filter_out_schedulable.go` |
//! | [`from_nodepools`] | none: NodePools → the node groups a CA user would need (a group's one shape: `cloudprovider/aws/aws_manager.go`) |
//! | [`predicates`] | `simulator/clustersnapshot` `CheckPredicates` (kube-scheduler's NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit filters) |
//! | [`scaledown`] | `core/scaledown/planner/planner.go`, `eligibility/eligibility.go`, `unneeded/nodes.go`, `unremovable/nodes.go`, `budgets/budgets.go`; `simulator/cluster.go`, `simulator/drain.go`, `simulator/utilization/info.go`; `isScaleDownInCooldown` of `core/static_autoscaler.go` |
//! | [`scaledown::drainability`](mod@scaledown::drainability) | `simulator/drainability/rules/*`, `utils/drain/drain.go` |
//! | [`scaleup`] | `core/scaleup/orchestrator/orchestrator.go`, `resourcequotas/tracker.go`, `processors/status/eventing_scale_up_processor.go`; the max-nodes-total gate of `core/static_autoscaler.go` |
//! | [`to_nodepools`] | none: node groups → the NodePools and EC2NodeClass a CA user moving to Karpenter would apply |
//! | [`status`] | `clusterstate/api/types.go`, `clusterstate/clusterstate.go` `GetStatus`, `clusterstate/utils/status.go` |
//! | [`template`](mod@template) | `cloudprovider/aws/aws_manager.go` `buildNodeFromTemplate`, `buildGenericLabels`; `cloudprovider/utils.go` `BuildKubeProxy`; `simulator/node_info_utils.go` `podsExpectedOnFreshNode` |

pub mod autoscaler;
pub mod balancing;
pub mod clusterstate;
pub mod equivalence;
pub mod estimator;
pub mod expander;
pub mod filter;
pub mod from_nodepools;
pub mod predicates;
pub mod scaledown;
pub mod scaleup;
pub mod status;
pub mod template;
pub mod to_nodepools;

pub use autoscaler::{run_once, LoopInput, LoopOutput, ScaleUpOutcome};
pub use clusterstate::ClusterState;
pub use estimator::{estimate, Estimate};
pub use expander::{choose, Expansion, ScaleUpOption};
pub use filter::{filter_out_schedulable, Filtered, Room};
pub use from_nodepools::{node_groups_for, Derivation, DerivedGroup, Landed};
pub use predicates::{NodeCache, PendingPod, SchedulingNode, Unfit};
pub use scaledown::{plan as plan_scale_down, ScaleDownInput, ScaleDownPlan, ScaleDownState, Unremovable};
pub use scaleup::{scale_up, GroupState, ScaleUpResult, ScaleUpStatus};
pub use status::{ClusterAutoscalerStatus, StatusRegistry};
pub use template::{template, Template, TemplateError, TemplatePod};
pub use to_nodepools::{propose_nodepools, Proposal, ProposalInput, ProposalNote, ProposalReason};
