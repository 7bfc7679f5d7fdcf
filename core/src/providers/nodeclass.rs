//! An EC2NodeClass's status from what EC2, SSM and IAM answered (upstream
//! `pkg/controllers/nodeclass/{controller,ami,subnet,securitygroup,instanceprofile}.go`):
//! `status.subnets`, `securityGroups`, `amis`, `instanceProfile`, and the conditions `AMIsReady`,
//! `SubnetsReady`, `SecurityGroupsReady`, `InstanceProfileReady` rolled up into `Ready`.
//!
//! Divergences (docs/divergences.md): a lookup that fails (a denied IAM action, an endpoint that
//! does not answer) sets its condition `False` with the action to allow in the message, where
//! upstream returns the error and leaves the condition as it was, so a user sees it on the object;
//! the status field keeps its last value, as upstream's. Not done yet (docs/controller.md): `ValidationSucceeded` (upstream's dry-run
//! CreateFleet / CreateLaunchTemplate / RunInstances) is not a dependent yet: carpentry does not
//! send those dry runs.

use serde::Serialize;

use super::amifamily::{choose_amis, Image};
use super::securitygroup::{security_group_status, DiscoveredSecurityGroup};
use super::subnet::{subnet_status, DiscoveredSubnet};
use crate::api::condition_set::ConditionSet;
use crate::api::ec2nodeclass::EC2NodeClassStatus;
use crate::api::{Condition, EC2NodeClass};

pub const AMIS_READY: &str = "AMIsReady";
pub const SUBNETS_READY: &str = "SubnetsReady";
pub const SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
pub const INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
/// The conditions `Ready` rolls up, in upstream's reconciler order.
pub const DEPENDENTS: &[&str] = &[AMIS_READY, SUBNETS_READY, SECURITY_GROUPS_READY, INSTANCE_PROFILE_READY];

/// Why a lookup has no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum LookupError {
    /// The controller's IAM identity may not call `action` (EC2 `UnauthorizedOperation`,
    /// `AccessDenied*`).
    #[error("the controller's IAM policy does not allow {action}: {message}")]
    Denied { action: String, message: String },
    /// Any other failure of `action` (throttling, a 5xx, a timeout, a connection that failed):
    /// no answer about the NodeClass, so its conditions and status stay as they were (upstream
    /// returns the error and leaves the status) and the reconcile fails, to be tried again after
    /// the controller's backoff ([`RATE_LIMITER`]).
    #[error("{action} failed: {message}")]
    Failed { action: String, message: String },
    /// What the NodeClass asks for is not something this controller does yet.
    #[error("{0}")]
    Unsupported(String),
}

/// upstream's EC2NodeClass reconcile asks to run again after the shortest wait its parts ask for
/// (`controller.go` `result.Min`): the subnets' minute (`subnet.go`; the AMIs and security groups
/// ask for 5 minutes), so that a NodeClass's status follows its subnets, security groups and AMIs.
pub const REQUEUE_SECONDS: u64 = super::refresh::LOOKUP_TTL_SECONDS;

/// The EC2NodeClass controller's wait after a failed reconcile (a lookup without an answer, a
/// status write refused, a clean-up that failed): upstream `Register`'s `reasonable.RateLimiter()`.
pub const RATE_LIMITER: crate::workqueue::RateLimiter = crate::workqueue::REASONABLE;

impl LookupError {
    /// No answer about the NodeClass (see [`LookupError::Failed`]).
    pub fn is_transient(&self) -> bool {
        matches!(self, LookupError::Failed { .. })
    }

    fn reason(&self, not_found: &str) -> String {
        match self {
            LookupError::Denied { .. } => "UnauthorizedOperation".into(),
            LookupError::Failed { .. } => format!("{not_found}LookupFailed"),
            LookupError::Unsupported(_) => "Unsupported".into(),
        }
    }
}

/// One lookup's answer.
pub type Lookup<T> = Result<T, LookupError>;

/// What the provider found for a NodeClass.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub subnets: Lookup<Vec<DiscoveredSubnet>>,
    pub security_groups: Lookup<Vec<DiscoveredSecurityGroup>>,
    /// Images, or why none can be looked up; an alias that does not parse is `Unsupported`.
    pub images: Lookup<Vec<Image>>,
    /// The instance profile's name.
    pub instance_profile: Lookup<String>,
}

impl Resolved {
    /// Whether a lookup failed without an answer (it is then tried again soon).
    pub fn has_transient_failure(&self) -> bool {
        [
            self.subnets.as_ref().err(),
            self.security_groups.as_ref().err(),
            self.images.as_ref().err(),
            self.instance_profile.as_ref().err(),
        ]
        .into_iter()
        .flatten()
        .any(LookupError::is_transient)
    }
}

/// The status `class` gets from `resolved` at RFC 3339 time `now` (transition times move only
/// when a condition's status does; a lookup that failed without an answer leaves its part as it
/// was).
pub fn nodeclass_status(class: &EC2NodeClass, resolved: &Resolved, now: &str) -> EC2NodeClassStatus {
    let mut status = class.status.clone().unwrap_or_default();
    let created = class.metadata.creation_timestamp.as_ref().map_or_else(|| now.to_string(), |t| t.0.to_string());
    let mut conditions = std::mem::take(&mut status.conditions);
    {
        let mut set = ConditionSet::new(&mut conditions, DEPENDENTS, class.metadata.generation, &created, now);
        match &resolved.images {
            Ok(images) if images.is_empty() => {
                status.amis.clear();
                set.set_false(AMIS_READY, "AMINotFound", "AMISelector did not match any AMIs");
            }
            Ok(images) => {
                status.amis = choose_amis(images);
                set.set_true(AMIS_READY);
            }
            Err(e) if e.is_transient() => {}
            Err(e) => set.set_false(AMIS_READY, &e.reason("AMI"), &e.to_string()),
        }
        match &resolved.subnets {
            Ok(found) if found.is_empty() => {
                status.subnets.clear();
                set.set_false(SUBNETS_READY, "SubnetsNotFound", "SubnetSelector did not match any Subnets");
            }
            Ok(found) => {
                status.subnets = subnet_status(found);
                set.set_true(SUBNETS_READY);
            }
            Err(e) if e.is_transient() => {}
            Err(e) => set.set_false(SUBNETS_READY, &e.reason("Subnet"), &e.to_string()),
        }
        match &resolved.security_groups {
            Ok(found) if found.is_empty() => {
                status.security_groups.clear();
                set.set_false(
                    SECURITY_GROUPS_READY,
                    "SecurityGroupsNotFound",
                    "SecurityGroupSelector did not match any SecurityGroups",
                );
            }
            Ok(found) => {
                status.security_groups = security_group_status(found);
                set.set_true(SECURITY_GROUPS_READY);
            }
            Err(e) if e.is_transient() => {}
            Err(e) => set.set_false(SECURITY_GROUPS_READY, &e.reason("SecurityGroup"), &e.to_string()),
        }
        match &resolved.instance_profile {
            Ok(name) => {
                status.instance_profile = name.clone();
                set.set_true(INSTANCE_PROFILE_READY);
            }
            Err(e) if e.is_transient() => {}
            Err(e) => set.set_false(INSTANCE_PROFILE_READY, &e.reason("InstanceProfile"), &e.to_string()),
        }
    }
    status.conditions = conditions;
    status
}

/// The EC2NodeClass's conditions that are also said in a Warning event on it: every dependent
/// that turns `False` ([`crate::api::condition_set::turned_false`]).
pub fn warnings<'a>(before: Option<&'a EC2NodeClassStatus>, after: &'a EC2NodeClassStatus) -> Vec<&'a Condition> {
    let before = before.map(|s| s.conditions.as_slice()).unwrap_or_default();
    crate::api::condition_set::turned_false(before, &after.conditions).collect()
}

/// Whether a NodeClass can launch now: `Ready=True` at its generation.
pub fn is_ready(class: &EC2NodeClass) -> bool {
    class.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.is_true() && c.observed_generation == class.metadata.generation)
    })
}
