//! Offerings that cannot be launched now (upstream karpenter-provider-aws
//! `pkg/cache/unavailableofferings.go`, v1.14.1): after an insufficient-capacity error the
//! provider marks the instance type, zone and capacity type unavailable for a while, and the
//! scheduler leaves such offerings out.

use serde::{Deserialize, Serialize};

/// An offering that cannot be launched now (insufficient capacity).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UnavailableOffering {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
}
