//! What a CreateFleet answer that launched nothing means (upstream
//! `pkg/providers/instance/instance.go` `combineFleetErrors`, `updateUnavailableOfferingsCache`,
//! and `pkg/errors/errors.go` `ToReasonMessage`, v1.14.1): insufficient capacity only when every
//! error says so, which offerings (or which whole capacity type) to mark unavailable, and for
//! any other failure the `Launched` condition's reason and message. The adapter makes the call
//! and hands the answer's errors here.

use super::unavailable::{is_insufficient_capacity, UnavailableOfferings};

/// upstream `IsServiceLinkedRoleCreationNotPermitted`: spot needs its service-linked role.
const SPOT_SERVICE_LINKED_ROLE_CODE: &str = "AuthFailure.ServiceLinkedRoleCreationNotPermitted";

/// One entry of CreateFleet's `Errors`, with the override it was about where it names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetErrorEntry {
    pub code: String,
    pub message: String,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
}

/// What a fleet's errors mark unavailable for [`super::UNAVAILABLE_OFFERING_TTL_SECONDS`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum UnavailableMark {
    /// One offering had no capacity (an unfulfillable-capacity code).
    Offering { instance_type: String, zone: String, capacity_type: String },
    /// Spot cannot be launched at all: its service-linked role could not be created.
    CapacityType(String),
}

impl UnavailableMark {
    /// Carries the mark out on `cache` at `now`.
    pub fn apply(&self, cache: &mut UnavailableOfferings, now: i64) {
        match self {
            UnavailableMark::Offering { instance_type, zone, capacity_type } => {
                cache.mark(instance_type, zone, capacity_type, now)
            }
            UnavailableMark::CapacityType(capacity_type) => cache.mark_capacity_type(capacity_type, now),
        }
    }
}

/// upstream `updateUnavailableOfferingsCache` (launches that are not reserved, which carpentry
/// does not make): each unfulfillable-capacity error marks its offering, the spot service-linked
/// role error marks every spot offering. In the errors' order, each once.
pub fn unavailable_marks(errors: &[FleetErrorEntry], capacity_type: &str) -> Vec<UnavailableMark> {
    let mut marks = Vec::new();
    for error in errors {
        let mark = if error.code == SPOT_SERVICE_LINKED_ROLE_CODE {
            UnavailableMark::CapacityType(crate::catalogue::CapacityType::Spot.as_str().to_string())
        } else if is_insufficient_capacity(&error.code) {
            let (Some(instance_type), Some(zone)) = (&error.instance_type, &error.zone) else { continue };
            UnavailableMark::Offering {
                instance_type: instance_type.clone(),
                zone: zone.clone(),
                capacity_type: capacity_type.to_string(),
            }
        } else {
            continue;
        };
        if !marks.contains(&mark) {
            marks.push(mark);
        }
    }
    marks
}

/// Why a launch made no instance, as upstream's cloud provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchFailure {
    /// Every error was about capacity (upstream `InsufficientCapacityError`): the NodeClaim is
    /// deleted and its pods provisioned again without these offerings.
    #[error("insufficient capacity, with fleet error(s), {errors}")]
    InsufficientCapacity { errors: String },
    /// Anything else (upstream `CreateError`): the NodeClaim stays, `Launched` is Unknown with
    /// `reason` and `message`, and the launch is tried again after a backoff.
    #[error("{context}{errors}")]
    Create { reason: &'static str, message: String, context: &'static str, errors: String },
}

impl LaunchFailure {
    /// upstream `launch.go`: an insufficient-capacity error deletes the NodeClaim (a new round
    /// provisions its pods again); any other keeps it and is tried again.
    pub fn deletes_nodeclaim(&self) -> bool {
        matches!(self, LaunchFailure::InsufficientCapacity { .. })
    }
}

/// upstream `combineFleetErrors`: the distinct `code: message` entries joined with `; `
/// (upstream in Go's random map order, carpentry sorted: docs/divergences.md); insufficient
/// capacity when every entry is an unfulfillable-capacity code or the spot service-linked-role
/// code, else a create error with [`reason_message`] of the whole text. An answer with neither
/// an instance nor an error is upstream's batcher's "too few instances returned".
pub fn fleet_failure(errors: &[FleetErrorEntry]) -> LaunchFailure {
    let mut entries: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.code, e.message)).collect();
    if entries.is_empty() {
        entries.push("too few instances returned: too few instances returned".into());
    }
    entries.sort();
    entries.dedup();
    let joined = entries.join("; ");
    let all_capacity = !errors.is_empty()
        && errors.iter().all(|e| is_insufficient_capacity(&e.code) || e.code == SPOT_SERVICE_LINKED_ROLE_CODE);
    if all_capacity {
        return LaunchFailure::InsufficientCapacity { errors: joined };
    }
    let (reason, message) = reason_message(&joined);
    LaunchFailure::Create { reason, message: message.to_string(), context: "", errors: joined }
}

/// The CreateFleet call itself failed with `code` and `message` (upstream `launchInstance`: never
/// insufficient capacity, and nothing is marked unavailable).
pub fn fleet_call_failure(code: &str, message: &str) -> LaunchFailure {
    let errors = if code.is_empty() { message.to_string() } else { format!("{code}: {message}") };
    let (reason, text) = reason_message(&errors);
    let (context, prefix) = if is_launch_template_not_found(code) {
        (
            "launch templates not found when creating fleet request, ",
            "Launch templates not found when creating fleet request: ",
        )
    } else {
        ("creating fleet request, ", "Error creating fleet request: ")
    };
    LaunchFailure::Create { reason, message: format!("{prefix}{text}"), context, errors }
}

/// upstream `IsLaunchTemplateNotFound`: the fleet named a launch template EC2 does not have (it
/// was deleted behind the provider's back): the provider forgets its templates.
pub fn is_launch_template_not_found(code: &str) -> bool {
    code == "InvalidLaunchTemplateName.NotFoundException"
}

/// upstream `ToReasonMessage`: a well-known condition reason and message for a launch error's
/// text, by the first rule that matches, in upstream's order.
pub fn reason_message(text: &str) -> (&'static str, &'static str) {
    let has = |needle: &str| text.contains(needle);
    if has(SPOT_SERVICE_LINKED_ROLE_CODE) {
        return (
            "SpotSLRCreationFailed",
            "User does not have sufficient permission to create the Spot ServiceLinkedRole to launch spot instances",
        );
    }
    if has("UnauthorizedOperation") || has("AccessDenied") || has("AuthFailure") {
        if has("with an explicit deny in a permissions boundary") {
            return ("Unauthorized", "User is not authorized to perform this operation due to a permission boundary");
        }
        if has("with an explicit deny in a service control policy") {
            return (
                "Unauthorized",
                "User is not authorized to perform this operation due to a service control policy",
            );
        }
        if has("Not authorized for images") {
            return ("AMIAuthorizationFailure", "User is not authorized for AMI used in instance launch");
        }
        return (
            "Unauthorized",
            "User is not authorized to perform this operation because no identity-based policy allows it",
        );
    }
    const RULES: &[(&[&str], &str, &str)] = &[
        (
            &["InvalidParameter", "belong to different networks"],
            "SecurityGroupSubnetVPCMismatch",
            "Security groups and subnets must be in the same VPC.",
        ),
        (
            &["iamInstanceProfile.name is invalid"],
            "InstanceProfileNameInvalid",
            "Instance profile name used from EC2NodeClass status does not exist",
        ),
        (&["InvalidLaunchTemplateId.NotFound"], "LaunchTemplateNotFound", "Launch template used for instance launch wasn't found"),
        (&["User data is limited to"], "UserDataSizeLimitExceeded", "Rendered user data exceeds the EC2 user data size limit"),
        (&["InvalidAMIID.Malformed"], "InvalidAMIID", "AMI used for instance launch is invalid"),
        (
            &["InvalidAMIID.NotFound"],
            "AMINotFound",
            "AMI used for instance launch either does not exist or you don't have permissions to use it",
        ),
        (&["RequestLimitExceeded"], "RequestLimitExceeded", "Request limit exceeded"),
        (&["InternalError"], "InternalError", "An internal error has occurred"),
        (&["not eligible for Free Tier"], "FreeTierIneligible", "The specified instance type is not eligible for Free Tier"),
        // The capacity codes last: a set of capacity errors alone is insufficient capacity.
        (
            &["MaxFleetCountExceeded"],
            "FleetQuotaExceeded",
            "A fleet launch was requested but this would exceed your fleet request quota",
        ),
        (
            &["PendingVerification"],
            "AccountPendingVerification",
            "An instance launch was requested but the request for launching resources in this region is still being verified",
        ),
        (
            &["MaxSpotInstanceCountExceeded"],
            "SpotQuotaExceeded",
            "A spot instance launch was requested but this would exceed your spot instance quota",
        ),
        (&["VcpuLimitExceeded"], "VCPULimitExceeded", "An instance was requested that would exceed your VCPU quota"),
        (
            &["InsufficientFreeAddressesInSubnet"],
            "InsufficientFreeAddressesInSubnet",
            "There are not enough free IP addresses to launch an instance in this subnet",
        ),
    ];
    RULES
        .iter()
        .find(|(needles, _, _)| needles.iter().all(|n| has(n)))
        .map_or(("LaunchFailed", "Instance launch failed"), |(_, reason, message)| (*reason, *message))
}
