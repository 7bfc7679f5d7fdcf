//! The Scenario document (`carpentry.dev/v1alpha1`, kind `Scenario`): the settings of a
//! simulation that are not Kubernetes objects. At most one per input; without one, the defaults
//! apply (region us-east-1, start now). See docs/scenario.md.

use serde::{Deserialize, Serialize};

use crate::catalogue::reservations::{self, Ec2CapacityReservation, ReservationState, ReservationType};
use crate::catalogue::UnavailableOffering;
pub use crate::options::{FeatureGates, MinValuesPolicy};

pub const API_VERSION: &str = "carpentry.dev/v1alpha1";
pub const KIND: &str = "Scenario";
/// The test-expectations kind of the scenario corpus (read by `tests/tests/scenarios.rs`; kept
/// here untyped so that scenario files load everywhere).
pub const EXPECTATIONS_KIND: &str = "Expectations";
pub const DEFAULT_REGION: &str = "us-east-1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    #[serde(default)]
    pub spec: ScenarioSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioSpec {
    /// The catalogue region (zones, offerings, prices).
    #[serde(default = "default_region")]
    pub region: String,
    /// RFC 3339; the simulated clock starts here (unset: the caller's "now").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// Offerings that cannot be launched (insufficient capacity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable_offerings: Vec<UnavailableOffering>,
    /// The account's capacity reservations (what EC2 `DescribeCapacityReservations` returns),
    /// selected by EC2NodeClass `capacityReservationSelectorTerms`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<Ec2CapacityReservation>,
    /// Timed actions of the simulation (`crate::simulation`), each at a duration after the start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    /// Karpenter's `--min-values-policy` (default Strict).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values_policy: Option<MinValuesPolicy>,
    /// Karpenter's `--feature-gates` (Helm `settings.featureGates`) that change decisions.
    #[serde(default, skip_serializing_if = "FeatureGates::is_default")]
    pub feature_gates: FeatureGates,
    /// How long things take in `simulate --until` (Go durations; `Never` for launch, registration
    /// and initialization: that step never happens, e.g. nodes whose user data breaks the join).
    #[serde(default, skip_serializing_if = "TimingOverrides::is_empty")]
    pub timings: TimingOverrides,
    /// Cluster Autoscaler's flags for the comparison (each unset for CA 1.36.1's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_autoscaler: Option<crate::api::clusterautoscaler::ClusterAutoscalerOptions>,
}

/// Overrides of the simulation's timings (docs/simulation.md has the defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimingOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_idle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_max: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_retry: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_termination: Option<String>,
}

impl TimingOverrides {
    fn is_empty(&self) -> bool {
        *self == TimingOverrides::default()
    }

    /// Each override as (field, text, whether `Never` is allowed).
    pub fn fields(&self) -> Vec<(&'static str, &str, bool)> {
        [
            ("batchIdle", &self.batch_idle, false),
            ("batchMax", &self.batch_max, false),
            ("launch", &self.launch, true),
            ("registration", &self.registration, true),
            ("initialization", &self.initialization, true),
            ("drainRetry", &self.drain_retry, false),
            ("instanceTermination", &self.instance_termination, false),
        ]
        .into_iter()
        .filter_map(|(name, value, never)| value.as_deref().map(|v| (name, v, never)))
        .collect()
    }
}

/// A timed action: `at` (a Go duration after the start, e.g. `90s`, `5m`, `1h30m`) and exactly one
/// action.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    pub at: String,
    /// Set a workload's replicas (Deployment, ReplicaSet, StatefulSet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<ScaleAction>,
    /// Create or replace objects (an edited NodePool, EC2NodeClass, a new Deployment…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply: Option<Vec<serde_json::Value>>,
    /// Delete an object (Node, NodeClaim, Pod, or a workload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete: Option<DeleteAction>,
    /// A spot interruption notice for a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt: Option<InterruptAction>,
    /// EC2 runs out of capacity for an offering (launches there fail with an insufficient-capacity
    /// error from then on, or for `duration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_offering: Option<CapacityShortage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScaleAction {
    pub kind: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteAction {
    pub kind: String,
    /// For namespaced kinds (default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InterruptAction {
    pub node: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapacityShortage {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// How long the shortage lasts (a Go duration); unset: until the end of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
}

/// The kinds a `scale` step accepts.
pub const SCALABLE_KINDS: &[&str] = &["Deployment", "ReplicaSet", "StatefulSet"];
/// The kinds a `delete` step accepts.
pub const DELETABLE_KINDS: &[&str] =
    &["Node", "NodeClaim", "Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "NodePool"];

impl Step {
    /// Scale a workload at `at` (a Go duration after the start).
    pub fn scale(at: impl Into<String>, action: ScaleAction) -> Step {
        Step { at: at.into(), scale: Some(action), ..Step::default() }
    }

    /// Delete an object at `at`.
    pub fn delete(at: impl Into<String>, action: DeleteAction) -> Step {
        Step { at: at.into(), delete: Some(action), ..Step::default() }
    }

    /// A spot interruption notice for `node` at `at`.
    pub fn interrupt(at: impl Into<String>, node: impl Into<String>) -> Step {
        Step { at: at.into(), interrupt: Some(InterruptAction { node: node.into() }), ..Step::default() }
    }

    /// EC2 runs out of capacity for an offering at `at`.
    pub fn unavailable_offering(at: impl Into<String>, shortage: CapacityShortage) -> Step {
        Step { at: at.into(), unavailable_offering: Some(shortage), ..Step::default() }
    }

    /// The step's time in milliseconds after the start, if `at` is a valid, non-negative duration.
    pub fn at_millis(&self) -> Option<u64> {
        parse_offset(&self.at)
    }

    /// The number of actions the step sets (exactly one is valid).
    fn actions(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.scale.is_some() {
            out.push("scale");
        }
        if self.apply.is_some() {
            out.push("apply");
        }
        if self.delete.is_some() {
            out.push("delete");
        }
        if self.interrupt.is_some() {
            out.push("interrupt");
        }
        if self.unavailable_offering.is_some() {
            out.push("unavailableOffering");
        }
        out
    }
}

/// A non-negative Go duration (`90s`, `5m`, `1h30m`) in milliseconds.
pub fn parse_offset(text: &str) -> Option<u64> {
    let nanos = crate::api::duration::parse_go_duration(text).ok()?;
    u64::try_from(nanos).ok().map(|n| n / 1_000_000)
}

fn default_namespace() -> String {
    "default".to_string()
}

fn default_region() -> String {
    DEFAULT_REGION.to_string()
}

impl Default for ScenarioSpec {
    fn default() -> Self {
        ScenarioSpec {
            region: default_region(),
            start_time: None,
            unavailable_offerings: Vec::new(),
            capacity_reservations: Vec::new(),
            steps: Vec::new(),
            min_values_policy: None,
            feature_gates: FeatureGates::default(),
            timings: TimingOverrides::default(),
            cluster_autoscaler: None,
        }
    }
}

impl Scenario {
    /// Field errors as (path, message).
    pub fn validate(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.spec.region.is_empty() {
            out.push(("spec.region".into(), "must not be empty".into()));
        }
        if let Some(t) = &self.spec.start_time {
            let parsed: Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time, _> =
                serde_json::from_value(serde_json::Value::String(t.clone()));
            if parsed.is_err() {
                out.push(("spec.startTime".into(), format!("{t:?} is not an RFC 3339 time")));
            }
        }
        for (i, u) in self.spec.unavailable_offerings.iter().enumerate() {
            if !crate::labels::CAPACITY_TYPES.contains(&u.capacity_type.as_str()) {
                out.push((
                    format!("spec.unavailableOfferings[{i}].capacityType"),
                    format!("{:?} is not one of on-demand, reserved, spot", u.capacity_type),
                ));
            }
            // A typo would otherwise mark nothing unavailable, silently.
            let catalogue = crate::catalogue::Catalogue::embedded();
            if u.instance_type.is_empty() {
                out.push((format!("spec.unavailableOfferings[{i}].instanceType"), "must not be empty".into()));
            } else if catalogue.info(&u.instance_type).is_none() {
                out.push((
                    format!("spec.unavailableOfferings[{i}].instanceType"),
                    format!("{:?} is not an EC2 instance type in the catalogue", u.instance_type),
                ));
            }
            match catalogue.zones(&self.spec.region) {
                _ if u.zone.is_empty() => {
                    out.push((format!("spec.unavailableOfferings[{i}].zone"), "must not be empty".into()));
                }
                Some(zones) if !zones.iter().any(|z| z.name == u.zone) => {
                    let names: Vec<&str> = zones.iter().map(|z| z.name.as_str()).collect();
                    out.push((
                        format!("spec.unavailableOfferings[{i}].zone"),
                        format!("{:?} is not a zone of {} (zones: {})", u.zone, self.spec.region, names.join(", ")),
                    ));
                }
                _ => {}
            }
        }
        self.validate_capacity_reservations(&mut out);
        self.validate_steps(&mut out);
        if let Some(options) = &self.spec.cluster_autoscaler {
            let mut errors = Vec::new();
            options.validate_into("spec.clusterAutoscaler", &mut errors);
            out.extend(errors.into_iter().map(|e| (e.path, e.message)));
        }
        for (field, value, never_allowed) in self.spec.timings.fields() {
            let ok = (never_allowed && value == "Never") || parse_offset(value).is_some();
            if !ok {
                let also = if never_allowed { " or Never" } else { "" };
                out.push((
                    format!("spec.timings.{field}"),
                    format!("{value:?} is not a duration (e.g. 3s, 40s, 2m){also}"),
                ));
            }
        }
        out
    }

    fn validate_steps(&self, out: &mut Vec<(String, String)>) {
        let catalogue = crate::catalogue::Catalogue::embedded();
        for (i, step) in self.spec.steps.iter().enumerate() {
            let path = |field: &str| format!("spec.steps[{i}].{field}");
            if step.at_millis().is_none() {
                out.push((
                    path("at"),
                    format!("{:?} is not a duration after the start (e.g. 90s, 5m, 1h30m)", step.at),
                ));
            }
            match step.actions().as_slice() {
                [_] => {}
                [] => out.push((
                    format!("spec.steps[{i}]"),
                    "needs one action: scale, apply, delete, interrupt or unavailableOffering".into(),
                )),
                many => out.push((
                    format!("spec.steps[{i}]"),
                    format!("has {} actions ({}); a step takes exactly one", many.len(), many.join(", ")),
                )),
            }
            if let Some(scale) = &step.scale {
                if !SCALABLE_KINDS.contains(&scale.kind.as_str()) {
                    out.push((
                        path("scale.kind"),
                        format!("{:?} cannot be scaled; one of {}", scale.kind, SCALABLE_KINDS.join(", ")),
                    ));
                }
                if scale.replicas < 0 {
                    out.push((path("scale.replicas"), format!("{} is negative", scale.replicas)));
                }
            }
            if let Some(delete) = &step.delete {
                if !DELETABLE_KINDS.contains(&delete.kind.as_str()) {
                    out.push((
                        path("delete.kind"),
                        format!("{:?} cannot be deleted by a step; one of {}", delete.kind, DELETABLE_KINDS.join(", ")),
                    ));
                }
            }
            if let Some(apply) = &step.apply {
                if apply.is_empty() {
                    out.push((path("apply"), "lists no objects".into()));
                }
            }
            if let Some(u) = &step.unavailable_offering {
                if !crate::labels::CAPACITY_TYPES.contains(&u.capacity_type.as_str()) {
                    out.push((
                        path("unavailableOffering.capacityType"),
                        format!("{:?} is not one of on-demand, reserved, spot", u.capacity_type),
                    ));
                }
                if catalogue.info(&u.instance_type).is_none() {
                    out.push((
                        path("unavailableOffering.instanceType"),
                        format!("{:?} is not an EC2 instance type in the catalogue", u.instance_type),
                    ));
                }
                if let Some(zones) = catalogue.zones(&self.spec.region) {
                    if !zones.iter().any(|z| z.name == u.zone) {
                        let names: Vec<&str> = zones.iter().map(|z| z.name.as_str()).collect();
                        out.push((
                            path("unavailableOffering.zone"),
                            format!("{:?} is not a zone of {} (zones: {})", u.zone, self.spec.region, names.join(", ")),
                        ));
                    }
                }
                if let Some(d) = &u.duration {
                    if parse_offset(d).is_none_or(|ms| ms == 0) {
                        out.push((
                            path("unavailableOffering.duration"),
                            format!("{d:?} is not a positive duration (e.g. 10m)"),
                        ));
                    }
                }
            }
        }
    }

    /// The simulated clock's start in seconds since the epoch, if set and valid.
    pub fn start_seconds(&self) -> Option<i64> {
        self.spec.start_time.as_deref().and_then(crate::api::time::parse_time)
    }

    fn validate_capacity_reservations(&self, out: &mut Vec<(String, String)>) {
        if self.spec.capacity_reservations.is_empty() {
            return;
        }
        let catalogue = crate::catalogue::Catalogue::embedded();
        let zones = catalogue.zones(&self.spec.region);
        for (i, r) in self.spec.capacity_reservations.iter().enumerate() {
            let path = |field: &str| format!("spec.capacityReservations[{i}].{field}");
            if !reservations::is_reservation_id(&r.id) {
                out.push((
                    path("id"),
                    format!("{:?} must look like \"cr-0123abcd\" (cr- and lowercase letters or digits)", r.id),
                ));
            } else if self.spec.capacity_reservations[..i].iter().any(|o| o.id == r.id) {
                out.push((path("id"), format!("{} is listed twice", r.id)));
            }
            if catalogue.info(&r.instance_type).is_none() {
                out.push((
                    path("instanceType"),
                    format!("{:?} is not an EC2 instance type in the catalogue", r.instance_type),
                ));
            }
            match zones {
                Some(zones) if !zones.iter().any(|z| z.name == r.availability_zone) => {
                    let names: Vec<&str> = zones.iter().map(|z| z.name.as_str()).collect();
                    out.push((
                        path("availabilityZone"),
                        format!(
                            "{:?} is not a zone of {} (zones: {})",
                            r.availability_zone,
                            self.spec.region,
                            names.join(", ")
                        ),
                    ));
                }
                _ => {}
            }
            if r.available_instance_count < 0 {
                out.push((path("availableInstanceCount"), format!("{} is negative", r.available_instance_count)));
            }
            if let Some(owner) = &r.owner_id {
                if owner.len() != 12 || !owner.bytes().all(|b| b.is_ascii_digit()) {
                    out.push((path("ownerID"), format!("{owner:?} must be a 12-digit AWS account id")));
                }
            }
            // upstream: there is no such thing as an interruptible capacity block.
            if r.interruptible && r.reservation_type == ReservationType::CapacityBlock {
                out.push((path("interruptible"), "a capacity block cannot be interruptible".into()));
            }
            // upstream: only capacity blocks may be in the expiring state.
            if r.state == Some(ReservationState::Expiring) && r.reservation_type != ReservationType::CapacityBlock {
                out.push((
                    path("state"),
                    "only a capacity block (reservationType: capacity-block) can be expiring".into(),
                ));
            }
            if let Some(end) = &r.end_time {
                if crate::api::time::parse_time(end).is_none() {
                    out.push((path("endTime"), format!("{end:?} is not an RFC 3339 time")));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::manifest::{load, ProblemKind};

    #[test]
    fn scenario_loads_with_defaults() {
        let m = load("apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec: {}\n").unwrap();
        let s = m.scenario.unwrap();
        assert_eq!(s.spec.region, "us-east-1");
        assert!(s.spec.unavailable_offerings.is_empty());
        let m = load("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n").unwrap();
        assert!(m.scenario.is_none());
    }

    #[test]
    fn scenario_fields_are_read() {
        let text = "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec:\n  region: eu-west-1\n  startTime: \"2026-12-01T10:00:00Z\"\n  unavailableOfferings: [{instanceType: c5.large, zone: eu-west-1a, capacityType: spot}]\n  steps: []\n";
        let s = load(text).unwrap().scenario.unwrap();
        assert_eq!(s.spec.region, "eu-west-1");
        assert_eq!(s.spec.unavailable_offerings[0].instance_type, "c5.large");
        assert_eq!(s.spec.start_time.as_deref(), Some("2026-12-01T10:00:00Z"));
    }

    #[test]
    fn scenario_errors_are_located() {
        let text = "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec:\n  region: us-east-1\n  unavailableOfferings:\n  - {instanceType: c5.large, zone: us-east-1a, capacityType: cheap}\n";
        let e = load(text).unwrap_err();
        let p = &e.problems[0];
        assert_eq!(p.kind, ProblemKind::Validation);
        assert_eq!(p.field.as_deref(), Some("spec.unavailableOfferings[0].capacityType"));
        assert_eq!(p.position.line, 6, "{p}");

        // Typos in the instance type or zone are errors, not offerings silently left available.
        let text = "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec:\n  region: us-east-1\n  unavailableOfferings:\n  - {instanceType: c5.larg, zone: us-east-1q, capacityType: spot}\n";
        let e = load(text).unwrap_err();
        let fields: Vec<&str> = e.problems.iter().filter_map(|p| p.field.as_deref()).collect();
        assert_eq!(fields, ["spec.unavailableOfferings[0].instanceType", "spec.unavailableOfferings[0].zone"]);
        assert!(e.problems[1].message.contains("is not a zone of us-east-1 (zones: us-east-1a"), "{}", e.problems[1]);

        let text = "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec:\n  regoin: us-east-1\n";
        let e = load(text).unwrap_err();
        assert_eq!(e.problems[0].kind, ProblemKind::UnknownField);
        assert_eq!(e.problems[0].position.line, 4, "{}", e.problems[0]);

        let text = "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec: {startTime: yesterday}\n";
        assert!(load(text).unwrap_err().problems[0].message.contains("RFC 3339"));

        let two = "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nmetadata: {name: a}\n---\napiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nmetadata: {name: b}\n";
        let e = load(two).unwrap_err();
        assert_eq!(e.problems[0].document, 2);
        assert!(e.problems[0].message.contains("at most one"));
    }

    #[test]
    fn capacity_reservations_load_and_errors_are_located() {
        let head = "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec:\n  capacityReservations:\n";
        let ok = format!(
            "{head}  - {{id: cr-0123abcd, instanceType: m5.large, availabilityZone: us-east-1a, availableInstanceCount: 2, \
             ownerID: \"123456789012\", instanceMatchCriteria: targeted, reservationType: capacity-block, \
             endTime: \"2026-12-01T12:00:00Z\", tags: {{team: ml}}}}\n"
        );
        let s = load(&ok).unwrap().scenario.unwrap();
        let r = &s.spec.capacity_reservations[0];
        assert_eq!((r.id.as_str(), r.available_instance_count), ("cr-0123abcd", 2));
        assert_eq!(r.reservation_type, crate::catalogue::reservations::ReservationType::CapacityBlock);

        let cases = [
            ("{id: r-1, instanceType: m5.large, availabilityZone: us-east-1a, availableInstanceCount: 1}", "id", "cr-0123abcd"),
            ("{id: cr-1, instanceType: m5.lage, availabilityZone: us-east-1a, availableInstanceCount: 1}", "instanceType", "not an EC2 instance type"),
            ("{id: cr-1, instanceType: m5.large, availabilityZone: eu-west-1a, availableInstanceCount: 1}", "availabilityZone", "not a zone of us-east-1"),
            ("{id: cr-1, instanceType: m5.large, availabilityZone: us-east-1a, availableInstanceCount: -1}", "availableInstanceCount", "negative"),
            ("{id: cr-1, instanceType: m5.large, availabilityZone: us-east-1a, availableInstanceCount: 1, ownerID: \"12\"}", "ownerID", "12-digit"),
            ("{id: cr-1, instanceType: m5.large, availabilityZone: us-east-1a, availableInstanceCount: 1, reservationType: capacity-block, interruptible: true}", "interruptible", "cannot be interruptible"),
            ("{id: cr-1, instanceType: m5.large, availabilityZone: us-east-1a, availableInstanceCount: 1, state: expiring}", "state", "only a capacity block"),
            ("{id: cr-1, instanceType: m5.large, availabilityZone: us-east-1a, availableInstanceCount: 1, endTime: soon}", "endTime", "RFC 3339"),
        ];
        for (item, field, text) in cases {
            let e = load(&format!("{head}  - {item}\n")).unwrap_err();
            let p = &e.problems[0];
            assert_eq!(p.field.as_deref(), Some(format!("spec.capacityReservations[0].{field}").as_str()), "{p}");
            assert!(p.message.contains(text), "{p}");
            assert_eq!(p.position.line, 5, "{p}");
        }
        let twice = format!(
            "{head}  - {{id: cr-1, instanceType: m5.large, availabilityZone: us-east-1a, availableInstanceCount: 1}}\n  - {{id: cr-1, instanceType: m5.large, availabilityZone: us-east-1b, availableInstanceCount: 1}}\n"
        );
        let e = load(&twice).unwrap_err();
        assert_eq!(e.problems[0].field.as_deref(), Some("spec.capacityReservations[1].id"));
        assert!(e.problems[0].message.contains("listed twice"));
        let unknown =
            format!("{head}  - {{id: cr-1, instanceType: m5.large, availabilityZone: us-east-1a, count: 1}}\n");
        assert!(load(&unknown).is_err());
        let bad_type = format!(
            "{head}  - {{id: cr-1, instanceType: m5.large, availabilityZone: us-east-1a, availableInstanceCount: 1, reservationType: odcr}}\n"
        );
        let e = load(&bad_type).unwrap_err();
        assert!(e.problems[0].message.contains("capacity-block"), "{}", e.problems[0]);
    }

    #[test]
    fn steps_are_typed_and_their_errors_located() {
        let head = "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec:\n  steps:\n";
        let ok = format!(
            "{head}  - {{at: 5m, scale: {{kind: Deployment, namespace: default, name: inflate, replicas: 0}}}}\n  - {{at: 1h30m, interrupt: {{node: ip-10-0-1-2}}}}\n  - {{at: 90s, unavailableOffering: {{instanceType: c5.large, zone: us-east-1a, capacityType: spot}}}}\n  - {{at: 12m, delete: {{kind: Node, name: ip-10-0-1-1}}}}\n"
        );
        let s = load(&ok).unwrap().scenario.unwrap();
        let at: Vec<Option<u64>> = s.spec.steps.iter().map(|s| s.at_millis()).collect();
        assert_eq!(at, [Some(300_000), Some(5_400_000), Some(90_000), Some(720_000)]);
        assert_eq!(s.spec.steps[1].interrupt.as_ref().unwrap().node, "ip-10-0-1-2");

        let cases = [
            ("{at: soon, interrupt: {node: a}}", "spec.steps[0].at", "not a duration"),
            ("{at: -5m, interrupt: {node: a}}", "spec.steps[0].at", "not a duration"),
            ("{at: 5m}", "spec.steps[0]", "needs one action"),
            ("{at: 5m, interrupt: {node: a}, delete: {kind: Node, name: a}}", "spec.steps[0]", "exactly one"),
            (
                "{at: 5m, scale: {kind: DaemonSet, name: a, replicas: 1}}",
                "spec.steps[0].scale.kind",
                "cannot be scaled",
            ),
            ("{at: 5m, delete: {kind: Secret, name: a}}", "spec.steps[0].delete.kind", "cannot be deleted"),
            (
                "{at: 5m, unavailableOffering: {instanceType: c5.large, zone: us-east-1q, capacityType: spot}}",
                "spec.steps[0].unavailableOffering.zone",
                "not a zone",
            ),
        ];
        for (step, field, text) in cases {
            let e = load(&format!("{head}  - {step}\n")).unwrap_err();
            let p = &e.problems[0];
            assert_eq!(p.field.as_deref(), Some(field), "{p}");
            assert!(p.message.contains(text), "{p}");
            assert_eq!(p.position.line, 5, "{p}");
        }
        let unknown = load(&format!("{head}  - {{at: 5m, reboot: {{node: a}}}}\n")).unwrap_err();
        assert_eq!(unknown.problems[0].kind, ProblemKind::UnknownField, "{}", unknown.problems[0]);

        // Objects of an apply step are loaded, and their errors located inside the step.
        let apply = format!(
            "{head}  - at: 10m\n    apply:\n    - apiVersion: karpenter.sh/v1\n      kind: NodePool\n      metadata: {{name: edited}}\n      spec:\n        template:\n          spec:\n            nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n            requirements: []\n        limits: {{cpu: lots}}\n"
        );
        let e = load(&apply).unwrap_err();
        let p = &e.problems[0];
        assert_eq!(p.object.as_ref().map(|o| o.name.as_str()), Some("edited"), "{p}");
        assert_eq!(p.position.line, 15, "{p}");
        let fixed = apply.replace("cpu: lots", "cpu: 100");
        let m = load(&fixed).unwrap();
        assert_eq!(m.step_objects[&0].nodepools[0].name(), "edited");
        assert!(m.nodepools.is_empty(), "step objects are not part of the initial state");
    }

    #[test]
    fn expectations_are_kept_untyped() {
        let m = load("apiVersion: carpentry.dev/v1alpha1\nkind: Expectations\nspec: {nodeClaims: 1}\n").unwrap();
        assert_eq!(m.expectations[0]["spec"]["nodeClaims"], 1);
    }
}
