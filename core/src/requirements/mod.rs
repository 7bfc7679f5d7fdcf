//! The requirements algebra (upstream `pkg/scheduling/requirement.go` and `requirements.go`, v1.14.1).
//!
//! A [`Requirement`] is a set of allowed values for one label key: either a finite set (`In`, `DoesNotExist` when
//! empty) or the complement of a finite set (`NotIn`, `Exists` when nothing is excluded), optionally restricted to
//! an inclusive integer range (`Gt`/`Lt`/`Gte`/`Lte` are canonicalised to inclusive bounds). [`Requirements`] maps
//! keys to requirements; adding a requirement for a key already present intersects the two.
//!
//! Deterministic where upstream is not: upstream iterates Go maps (error order, typo hint, `Any()`) and uses
//! `rand` in `Any()`. Here keys iterate sorted, value sets are sorted, and [`Requirement::any_value`] picks a
//! documented value.
//!
//! Files: `requirement` [requirement.go], `set` [requirements.go; not named `requirements`, which
//! would repeat its parent's name], `key` (interned label keys), `tests`.

mod key;
mod requirement;
mod set;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1 as core;
use serde::{Deserialize, Serialize};

use crate::labels;

/// A node selector operator, as written in NodePools, NodeClaims and pods. `Gte`/`Lte` exist since v1.9.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    Gte,
    Lte,
}

impl Operator {
    /// All operators.
    pub const ALL: [Operator; 8] = [
        Operator::In,
        Operator::NotIn,
        Operator::Exists,
        Operator::DoesNotExist,
        Operator::Gt,
        Operator::Lt,
        Operator::Gte,
        Operator::Lte,
    ];

    /// The Kubernetes spelling (`In`, `NotIn`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
            Operator::Gte => "Gte",
            Operator::Lte => "Lte",
        }
    }

    /// Parses the Kubernetes spelling (case-sensitive, as the API server).
    pub fn parse(s: &str) -> Option<Operator> {
        Operator::ALL.into_iter().find(|op| op.as_str() == s)
    }

    /// True for the integer-bound operators `Gt`, `Lt`, `Gte`, `Lte`.
    pub fn is_bound(self) -> bool {
        matches!(self, Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte)
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Operator {
    type Err = RequirementError;
    fn from_str(s: &str) -> Result<Operator, RequirementError> {
        Operator::parse(s)
            .ok_or_else(|| RequirementError::UnknownOperator { key: String::new(), operator: s.to_string() })
    }
}

/// The NodePool / NodeClaim requirement item (karpenter.sh/v1 NodeSelectorRequirementWithMinValues).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSelectorRequirementWithMinValues {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
}

/// Why a requirement could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    /// `Gt`/`Lt`/`Gte`/`Lte` take exactly one value that parses as a (64-bit) integer.
    #[error("key {key}: operator {operator} needs exactly one integer value, got [{}]", .values.join(" "))]
    NeedsOneInteger { key: String, operator: Operator, values: Vec<String> },
    /// The operator is not one of the eight supported ones.
    #[error("key {key} has an unsupported operator {operator:?}, expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte")]
    UnknownOperator { key: String, operator: String },
}

/// The number [`Requirement::len`] reports for a complement that excludes nothing: upstream's `math.MaxInt64`
/// (saturated to `usize::MAX` on 32-bit targets such as wasm32).
pub const UNBOUNDED_LEN: usize = if usize::BITS >= 64 { i64::MAX as usize } else { usize::MAX };

use key::Key;
pub use requirement::{InternedKey, Requirement};
pub use set::{heaviest_preferred_term, AllowUndefined, IncompatibleReason, KeyConflict, Requirements};
