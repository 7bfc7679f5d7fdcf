//! The AWS provider's decisions over what EC2 answered (upstream karpenter-provider-aws v1.14.1
//! `pkg/providers`, `pkg/controllers/nodeclass`): which EC2 queries a NodeClass's selector terms
//! make, what its status becomes from the answers, which launch template and CreateFleet request
//! a NodeClaim's launch sends, and what an insufficient-capacity answer marks unavailable. The
//! controller's `aws` provider makes the calls and hands the answers here; nothing in this module
//! does I/O.
//!
//! | file | upstream |
//! |---|---|
//! | `selectors.rs` | `pkg/providers/subnet/subnet.go`, `securitygroup/securitygroup.go`, `amifamily/ami.go` (filter sets) |
//! | `subnet.rs` | `pkg/providers/subnet/subnet.go` (`List`, `ZonalSubnetsForLaunch`), `pkg/controllers/nodeclass/subnet.go` |
//! | `securitygroup.rs` | `pkg/controllers/nodeclass/securitygroup.go` |
//! | `amifamily.rs` | `pkg/providers/amifamily/{ami,al2,al2023,bottlerocket,windows}.go`, `pkg/controllers/nodeclass/ami.go` |
//! | `nodeclass.rs` | `pkg/controllers/nodeclass/{controller,readiness}.go`: the status conditions |
//! | `bootstrap/` | `pkg/providers/amifamily/bootstrap/*` (user data per AMI family; its own table) |
//! | `fleet.rs` | `pkg/providers/instance/instance.go` (`combineFleetErrors`, `updateUnavailableOfferingsCache`), `pkg/errors/errors.go` (`ToReasonMessage`) |
//! | `launchtemplate.rs` | `pkg/providers/launchtemplate/launchtemplate.go` (grouping, naming, tags) |
//! | `instance.rs` | `pkg/providers/instance/instance.go`, `instance/filter/filter.go`, `pkg/utils/utils.go` (CreateFleet input, tags, providerID) |
//! | `interruption.rs` | `pkg/controllers/interruption/{parser,utils}.go`, `messages/*`, `events/events.go` |
//! | `instanceprofile.rs` | `pkg/controllers/nodeclass/instanceprofile.go`, `pkg/providers/instanceprofile/instanceprofile.go`, `pkg/controllers/nodeclass/garbagecollection/controller.go` |
//! | `refresh.rs` | `pkg/controllers/providers/{instancetype,pricing,version}/controller.go`, `pkg/cache/cache.go` (cadences) |
//! | `tagging.rs` | `pkg/controllers/nodeclaim/tagging/controller.go` |
//! | `termination.rs` | `pkg/controllers/nodeclass/controller.go` (the `karpenter.k8s.aws/termination` finalizer), `events.go` |
//! | `unavailable.rs` | `pkg/cache/unavailableofferings.go`, `pkg/errors/errors.go` (insufficient-capacity codes) |

pub mod amifamily;
pub mod bootstrap;
pub mod fleet;
pub mod instance;
pub mod instanceprofile;
pub mod interruption;
pub mod launchtemplate;
pub mod nodeclass;
pub mod refresh;
pub mod securitygroup;
pub mod selectors;
pub mod subnet;
pub mod tagging;
pub mod termination;
pub mod unavailable;

#[cfg(test)]
mod tests;

pub use amifamily::{alias_parameters, ami_queries, choose_amis, AliasError, AliasParameter, Image};
pub use bootstrap::{BootstrapError, ClusterBootstrap};
pub use fleet::{
    fleet_call_failure, fleet_failure, unavailable_marks, FleetErrorEntry, LaunchFailure, UnavailableMark,
};
pub use instance::{
    fleet_request, parse_provider_id, provider_id, FleetError, FleetLaunchTemplate, FleetOverride, FleetRequest,
    LaunchContext,
};
pub use instanceprofile::{profile_plan, ExistingProfile, ManagedProfile, ProfilePlan, INSTANCE_PROFILE_ANNOTATION};
pub use launchtemplate::{launch_templates, LaunchTemplate, TemplateFor};
pub use nodeclass::{nodeclass_status, Lookup, LookupError, Resolved};
pub use securitygroup::{security_group_status, DiscoveredSecurityGroup};
pub use selectors::{security_group_queries, subnet_queries, Filter};
pub use subnet::{subnet_status, zonal_subnets, DiscoveredSubnet};
pub use termination::{NodeClassTermination, TERMINATION_FINALIZER};
pub use unavailable::{is_insufficient_capacity, UnavailableOfferings, UNAVAILABLE_OFFERING_TTL_SECONDS};
