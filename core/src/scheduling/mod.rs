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
//! `cloudprovider` [the simulated CreateFleet choice], `explain` [our explanations, the
//! vocabulary at the bottom of this module]. The round's input is [`crate::state::Input`].

pub(crate) mod cloudprovider;
pub(crate) mod daemons;
pub mod explain;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod go_sort;
pub(crate) mod hostports;
pub(crate) mod nodeclaim_template;
pub(crate) mod pod;
mod reservations;
pub(crate) mod scheduler;
pub(crate) mod taints;
pub(crate) mod topology;
pub(crate) mod volumes;

pub use cloudprovider::{launch_for, Launch, NoLaunch};
pub use nodeclaim_template::{AllowedInstanceTypes, InstanceTypeOption, NodeClaimTemplate, Prefilter, Rejection};
pub use scheduler::{
    nodepool_usage, schedule, ExistingPlacement, PlannedNodeClaim, RelaxedPod, Results, SkipNotice, SkippedNodePool,
};

#[cfg(test)]
mod tests;
