//! The provisioning scheduler (upstream `pkg/controllers/provisioning/scheduling`): one round as a
//! pure function ([`schedule`]), the NodeClaimTemplate a NodePool becomes, and the structured
//! explanations of every outcome ([`explain`]).
//!
//! Module map (upstream file in brackets): `scheduler` [scheduler.go, provisioner.go::Schedule,
//! queue.go, existingnode.go, nodeclaim.go], `nodeclaim_template` [nodeclaimtemplate.go], `pod`
//! [utils/pod/scheduling.go, preferences.go], `daemons` [scheduler.go daemon overhead], `taints`
//! [scheduling/taints.go], `hostports` [scheduling/hostportusage.go], `topology` [topology.go,
//! topologygroup.go, topologynodefilter.go], `volumes` [volumetopology.go, scheduling/volumeusage.go,
//! utils/volume], `reservations` [reservationmanager.go, nodeclaim.go::offeringsToReserve],
//! `cloudprovider` [the simulated CreateFleet choice], `explain` [our explanations],
//! `cluster` [building the input from manifests].

pub mod cloudprovider;
pub mod cluster;
pub mod daemons;
pub mod explain;
pub mod fake;
mod go_sort;
pub mod hostports;
pub mod nodeclaim_template;
pub mod pod;
mod reservations;
pub mod scheduler;
pub mod selector;
pub mod taints;
pub mod topology;
pub mod volumes;

pub use nodeclaim_template::{InstanceTypeOption, NodeClaimTemplate, Prefilter, Rejection};
pub use scheduler::{
    nodepool_usage, schedule, ConsolidationSimulation, ExistingPlacement, Input, MinValuesPolicy, NodePoolInput,
    Options, PlannedNodeClaim, RelaxedPod, Results, SkippedNodePool, UnavailableOffering, MAX_INSTANCE_TYPES,
};

#[cfg(test)]
mod tests;
