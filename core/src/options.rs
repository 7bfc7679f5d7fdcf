//! Karpenter's operator settings that change decisions (upstream `pkg/operator/options`,
//! v1.14.1): `--min-values-policy` and the `--feature-gates` the engine reads. A Scenario sets
//! them for a simulation; the controller will read them from its flags.

use serde::{Deserialize, Serialize};

/// `--min-values-policy` (upstream `options.MinValuesPolicy`): `Strict` leaves a pod pending when
/// a NodePool's `minValues` cannot be met; `BestEffort` relaxes `minValues` to what the instance
/// types offer and marks the NodeClaim `karpenter.sh/nodeclaim-min-values-relaxed`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MinValuesPolicy {
    #[default]
    Strict,
    BestEffort,
}

/// The upstream feature gates (`--feature-gates`, Helm `settings.featureGates`) that change
/// decisions, with upstream's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeatureGates {
    /// `SpotToSpotConsolidation` (default off): consolidation may replace a spot node with a
    /// cheaper spot node.
    #[serde(default)]
    pub spot_to_spot_consolidation: bool,
}

impl FeatureGates {
    pub(crate) fn is_default(&self) -> bool {
        *self == FeatureGates::default()
    }
}
