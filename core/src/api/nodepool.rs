//! `karpenter.sh/v1` NodePool (upstream `pkg/apis/v1/nodepool.go`, `nodepool_status.go`, CRD
//! `karpenter.sh_nodepools.yaml`).
//!
//! CRD defaults, applied when a field is absent: `spec.disruption` = `{consolidateAfter: 0s}`, then inside it
//! `consolidationPolicy: WhenEmptyOrUnderutilized` and `budgets: [{nodes: "10%"}]`; a budget's `nodes` = `10%`;
//! `spec.template.spec.expireAfter` = `720h`; `status.nodes` = 0.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

pub use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::api::duration::{Duration, NillableDuration};
use crate::api::nodeclaim::{
    default_expire_after, validate_node_class_ref, NodeClaim, NodeClaimSpec, NodeClassReference,
};
use crate::api::validation::{self, idx, FieldError, KeyContext, Rule, Validate, ValidateUpdate};
use crate::api::{Condition, KARPENTER_API_VERSION};
use crate::quantity::Quantity;
use crate::requirements::NodeSelectorRequirementWithMinValues;
use crate::resources::ResourceList;

/// `NodePool`.
pub const KIND: &str = "NodePool";

/// The annotation upstream's v1beta1 conversion webhook stashed a NodePool's kubelet block in.
pub const KUBELET_COMPATIBILITY_ANNOTATION: &str = "compatibility.karpenter.sh/v1beta1-kubelet-conversion";
/// The annotation upstream's v1beta1 conversion webhook stashed the original nodeClassRef in.
pub const NODE_CLASS_REFERENCE_ANNOTATION: &str = "compatibility.karpenter.sh/v1beta1-nodeclass-reference";

fn default_api_version() -> String {
    KARPENTER_API_VERSION.to_string()
}

fn default_kind() -> String {
    KIND.to_string()
}

/// A NodePool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePool {
    #[serde(default = "default_api_version")]
    pub api_version: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: NodePoolSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NodePoolStatus>,
}

impl NodePool {
    /// A NodePool named `name` with `spec`.
    pub fn new(name: &str, spec: NodePoolSpec) -> NodePool {
        NodePool {
            api_version: default_api_version(),
            kind: default_kind(),
            metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() },
            spec,
            status: None,
        }
    }

    /// `metadata.name`, or `""`.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    /// A static NodePool (`spec.replicas` set) keeps a fixed node count.
    pub fn is_static(&self) -> bool {
        self.spec.replicas.is_some()
    }
}

/// `spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePoolSpec {
    #[serde(default)]
    pub disruption: Disruption,
    #[serde(default, skip_serializing_if = "Limits::is_empty")]
    pub limits: Limits,
    /// Static NodePools (alpha): the fixed node count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    pub template: NodeClaimTemplate,
    /// Scheduling priority, 1..100; higher first; unset counts as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

impl Default for NodePoolSpec {
    /// A dynamic NodePool with no requirements that uses the EC2NodeClass `default`, all defaults applied.
    fn default() -> Self {
        NodePoolSpec {
            disruption: Disruption::default(),
            limits: Limits::default(),
            replicas: None,
            template: NodeClaimTemplate::default(),
            weight: None,
        }
    }
}

/// `spec.disruption`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Disruption {
    /// Budgets limit how many nodes may be disrupted at once; the most restrictive active budget wins.
    #[serde(default = "default_budgets", skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<Budget>,
    /// How long a node must be consolidatable before Karpenter acts; `Never` disables consolidation.
    #[serde(default = "default_consolidate_after")]
    pub consolidate_after: NillableDuration,
    #[serde(default)]
    pub consolidation_policy: ConsolidationPolicy,
}

impl Default for Disruption {
    fn default() -> Self {
        Disruption {
            budgets: default_budgets(),
            consolidate_after: default_consolidate_after(),
            consolidation_policy: ConsolidationPolicy::default(),
        }
    }
}

fn default_budgets() -> Vec<Budget> {
    vec![Budget::default()]
}

fn default_consolidate_after() -> NillableDuration {
    NillableDuration::parse("0s").expect("0s is a duration")
}

/// `consolidationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    /// Only empty nodes are consolidated.
    WhenEmpty,
    /// Empty and underutilized nodes are consolidated (the default).
    #[default]
    WhenEmptyOrUnderutilized,
    /// Like WhenEmptyOrUnderutilized, but a move must save enough relative to its disruption (since v1.14).
    Balanced,
}

impl ConsolidationPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsolidationPolicy::WhenEmpty => "WhenEmpty",
            ConsolidationPolicy::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
            ConsolidationPolicy::Balanced => "Balanced",
        }
    }
}

/// A disruption budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// How long the budget is active after each schedule hit (hours and minutes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    /// An integer or a percentage of the NodePool's nodes (`"10%"`, `"5"`, `"0"`).
    #[serde(default = "default_budget_nodes")]
    pub nodes: String,
    /// The disruption reasons the budget applies to; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<BudgetReason>,
    /// A cron schedule, evaluated in UTC, when the budget begins being active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { duration: None, nodes: default_budget_nodes(), reasons: Vec::new(), schedule: None }
    }
}

fn default_budget_nodes() -> String {
    "10%".to_string()
}

/// A disruption reason a budget may be restricted to (upstream `DisruptionReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BudgetReason {
    Underutilized,
    Empty,
    Drifted,
}

impl BudgetReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetReason::Underutilized => "Underutilized",
            BudgetReason::Empty => "Empty",
            BudgetReason::Drifted => "Drifted",
        }
    }
}

/// `spec.limits`: resource name → maximum total over the NodePool's nodes (`nodes` counts nodes).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Limits(pub ResourceList);

impl Limits {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The first resource (in name order) whose usage exceeds its limit: `(name, usage, limit)`.
    pub fn exceeded_by(&self, usage: &ResourceList) -> Option<(String, Quantity, Quantity)> {
        usage.iter().find_map(|(name, used)| {
            self.0.get(name).filter(|limit| used > *limit).map(|limit| (name.clone(), *used, *limit))
        })
    }
}

impl Deref for Limits {
    type Target = ResourceList;
    fn deref(&self) -> &ResourceList {
        &self.0
    }
}

impl DerefMut for Limits {
    fn deref_mut(&mut self) -> &mut ResourceList {
        &mut self.0
    }
}

impl From<ResourceList> for Limits {
    fn from(list: ResourceList) -> Self {
        Limits(list)
    }
}

/// `spec.template`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimTemplate {
    #[serde(default, skip_serializing_if = "TemplateMetadata::is_empty")]
    pub metadata: TemplateMetadata,
    pub spec: NodeClaimTemplateSpec,
}

impl NodeClaimTemplate {
    /// The NodeClaim this template describes (upstream `ToNodeClaim`): labels, annotations and spec copied; no
    /// name, no resource requests.
    pub fn to_node_claim(&self) -> NodeClaim {
        let mut nc = NodeClaim::new(
            "",
            NodeClaimSpec {
                expire_after: self.spec.expire_after.clone(),
                node_class_ref: self.spec.node_class_ref.clone(),
                requirements: self.spec.requirements.clone(),
                resources: Default::default(),
                startup_taints: self.spec.startup_taints.clone(),
                taints: self.spec.taints.clone(),
                termination_grace_period: self.spec.termination_grace_period.clone(),
            },
        );
        nc.metadata.name = None;
        if !self.metadata.labels.is_empty() {
            nc.metadata.labels = Some(self.metadata.labels.clone());
        }
        if !self.metadata.annotations.is_empty() {
            nc.metadata.annotations = Some(self.metadata.annotations.clone());
        }
        nc
    }
}

/// `spec.template.metadata`: only labels and annotations.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl TemplateMetadata {
    pub fn is_empty(&self) -> bool {
        self.annotations.is_empty() && self.labels.is_empty()
    }
}

/// `spec.template.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimTemplateSpec {
    /// How long a node lives before it is replaced; `Never` disables expiry.
    #[serde(default = "default_expire_after")]
    pub expire_after: NillableDuration,
    pub node_class_ref: NodeClassReference,
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// How long a draining node may take before pods are deleted forcefully; unset waits indefinitely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<Duration>,
}

impl Default for NodeClaimTemplateSpec {
    fn default() -> Self {
        NodeClaimTemplateSpec {
            expire_after: default_expire_after(),
            node_class_ref: NodeClassReference::default(),
            requirements: Vec::new(),
            startup_taints: Vec::new(),
            taints: Vec::new(),
            termination_grace_period: None,
        }
    }
}

/// `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePoolStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// The number of nodes the NodePool owns (CRD default 0).
    #[serde(default = "default_status_nodes", skip_serializing_if = "Option::is_none")]
    pub nodes: Option<i64>,
    /// The resources the NodePool's nodes have in total.
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub resources: ResourceList,
}

impl Default for NodePoolStatus {
    fn default() -> Self {
        NodePoolStatus {
            conditions: Vec::new(),
            node_class_observed_generation: None,
            nodes: default_status_nodes(),
            resources: ResourceList::new(),
        }
    }
}

fn default_status_nodes() -> Option<i64> {
    Some(0)
}

// ---------------------------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------------------------

impl Validate for NodePool {
    fn validate(&self) -> Vec<FieldError> {
        let mut out = Vec::new();
        crate::api::validate_type_meta(
            &self.api_version,
            &self.kind,
            &self.metadata,
            KARPENTER_API_VERSION,
            KIND,
            &mut out,
        );
        self.spec.validate_into("spec", &mut out);
        out
    }
}

impl NodePoolSpec {
    /// Checks the spec; `path` is where it sits (`spec`).
    pub fn validate_into(&self, path: &str, out: &mut Vec<FieldError>) {
        let t = &self.template;
        let tpath = format!("{path}.template");
        validation::validate_template_labels(&t.metadata.labels, &format!("{tpath}.metadata.labels"), out);
        let spath = format!("{tpath}.spec");
        validation::validate_taints(&t.spec.taints, &t.spec.startup_taints, &spath, true, out);
        validation::validate_requirements(
            &t.spec.requirements,
            &format!("{spath}.requirements"),
            KeyContext::NodePool,
            out,
        );
        validate_node_class_ref(&t.spec.node_class_ref, &format!("{spath}.nodeClassRef"), out);
        if let Some(tgp) = &t.spec.termination_grace_period {
            validation::validate_termination_grace_period(tgp, &format!("{spath}.terminationGracePeriod"), out);
        }
        validation::validate_expire_after(&t.spec.expire_after, &format!("{spath}.expireAfter"), out);
        self.disruption.validate_into(&format!("{path}.disruption"), out);

        if let Some(weight) = self.weight {
            if !(1..=100).contains(&weight) {
                out.push(FieldError::new(
                    format!("{path}.weight"),
                    Rule::WeightRange,
                    format!("weight must be between 1 and 100, got {weight}"),
                ));
            }
        }
        if let Some(replicas) = self.replicas {
            if replicas < 0 {
                out.push(FieldError::new(
                    format!("{path}.replicas"),
                    Rule::ReplicasMinimum,
                    format!("replicas must be 0 or more, got {replicas}"),
                ));
            }
            if self.limits.keys().any(|k| k != "nodes") {
                out.push(FieldError::new(
                    format!("{path}.limits"),
                    Rule::StaticLimits,
                    "only 'limits.nodes' is supported on static NodePools (spec.replicas is set)",
                ));
            }
            if self.weight.is_some() {
                out.push(FieldError::new(
                    format!("{path}.weight"),
                    Rule::StaticWeight,
                    "'weight' is not supported on static NodePools (spec.replicas is set)",
                ));
            }
        }
    }
}

impl Disruption {
    /// Checks `spec.disruption`; `path` is where it sits.
    pub fn validate_into(&self, path: &str, out: &mut Vec<FieldError>) {
        if !self.consolidate_after.matches_crd_pattern() {
            out.push(FieldError::new(
                format!("{path}.consolidateAfter"),
                Rule::ConsolidateAfterPattern,
                format!(
                    "consolidateAfter {:?} must be whole hours, minutes and seconds (for example \"30s\" or \"1h\") \
                     or \"Never\"",
                    self.consolidate_after.as_str()
                ),
            ));
        }
        let bpath = format!("{path}.budgets");
        if self.budgets.len() > 50 {
            out.push(FieldError::new(
                &bpath,
                Rule::BudgetsMaxItems,
                format!("at most 50 budgets are allowed, found {}", self.budgets.len()),
            ));
        }
        for (i, budget) in self.budgets.iter().enumerate() {
            let p = idx(&bpath, i);
            if !validation::matches_budget_nodes(&budget.nodes) {
                out.push(FieldError::new(
                    format!("{p}.nodes"),
                    Rule::BudgetNodes,
                    format!(
                        "nodes {:?} must be a whole number (\"5\") or a percentage from 0% to 100% (\"10%\")",
                        budget.nodes
                    ),
                ));
            }
            if budget.schedule.is_some() != budget.duration.is_some() {
                out.push(FieldError::new(
                    &p,
                    Rule::BudgetScheduleWithDuration,
                    "'schedule' must be set with 'duration'",
                ));
            }
            if let Some(schedule) = &budget.schedule {
                validation::validate_schedule(schedule, &format!("{p}.schedule"), out);
            }
            if let Some(duration) = &budget.duration {
                if !duration.matches_budget_pattern() {
                    out.push(FieldError::new(
                        format!("{p}.duration"),
                        Rule::BudgetDurationPattern,
                        format!(
                            "duration {:?} must be hours and/or minutes (for example \"10m\", \"8h\" or \"1h30m\"); \
                             seconds are not allowed",
                            duration.as_str()
                        ),
                    ));
                }
            }
            for (j, reason) in budget.reasons.iter().enumerate() {
                if budget.reasons[..j].contains(reason) {
                    out.push(FieldError::new(
                        idx(&format!("{p}.reasons"), j),
                        Rule::BudgetReasonsUnique,
                        format!("duplicate reason {:?}", reason.as_str()),
                    ));
                }
            }
        }
    }
}

impl ValidateUpdate for NodePool {
    fn validate_update(&self, old: &Self) -> Vec<FieldError> {
        let mut out = Vec::new();
        let (new_ref, old_ref) = (&self.spec.template.spec.node_class_ref, &old.spec.template.spec.node_class_ref);
        let path = "spec.template.spec.nodeClassRef";
        if new_ref.group != old_ref.group {
            out.push(FieldError::new(
                format!("{path}.group"),
                Rule::NodeClassRefGroupImmutable,
                format!("nodeClassRef.group is immutable (was {:?}, now {:?})", old_ref.group, new_ref.group),
            ));
        }
        if new_ref.kind != old_ref.kind {
            out.push(FieldError::new(
                format!("{path}.kind"),
                Rule::NodeClassRefKindImmutable,
                format!("nodeClassRef.kind is immutable (was {:?}, now {:?})", old_ref.kind, new_ref.kind),
            ));
        }
        if self.spec.replicas.is_some() != old.spec.replicas.is_some() {
            out.push(FieldError::new(
                "spec.replicas",
                Rule::ReplicasTransition,
                "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning \
                 modes",
            ));
        }
        out
    }
}
