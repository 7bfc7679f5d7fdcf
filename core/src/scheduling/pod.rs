//! Pods as the provisioner sees them: which are provisionable, which are ignored and why
//! (upstream `pkg/utils/pod/scheduling.go`, `provisioner.go::GetPendingPods/Validate`), and the
//! per-pod data the scheduler works with (requests, tolerations, host ports, node-affinity terms
//! in relaxation order; upstream `preferences.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, Toleration, TopologySpreadConstraint};

use crate::api::validation::{label_value_errors, qualified_name_errors};
use crate::labels;
use crate::quantity::Quantity;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::{self, ResourceList};

use crate::pod::PodRef;

use super::explain::{IgnoreReason, Relaxation};
use super::hostports::{self, HostPort};
use super::taints;
use super::volumes::PodVolumes;

/// Upstream `IsProvisionable` minus the `nodeName` test (the caller splits bound pods first).
/// A pod without any PodScheduled condition is taken as rejected by kube-scheduler: offline
/// manifests never went through it (docs/divergences.md).
pub fn provisionable(pod: &Pod) -> Result<(), IgnoreReason> {
    if let Some(node) = pod.status.as_ref().and_then(|s| s.nominated_node_name.as_ref()).filter(|n| !n.is_empty()) {
        return Err(IgnoreReason::Nominated { node: node.clone() });
    }
    for owner in pod.metadata.owner_references.iter().flatten() {
        if owner.kind == "DaemonSet" && owner.api_version.starts_with("apps/") {
            return Err(IgnoreReason::DaemonSetPod);
        }
        if owner.kind == "Node" && owner.api_version == "v1" {
            return Err(IgnoreReason::MirrorPod);
        }
    }
    let scheduled = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
    if let Some(c) = scheduled {
        if !(c.status == "False" && c.reason.as_deref() == Some("Unschedulable")) {
            return Err(IgnoreReason::NotRejectedByKubeScheduler {
                condition: format!("{}/{}", c.status, c.reason.as_deref().unwrap_or("")),
            });
        }
    }
    Ok(())
}

/// Upstream `v1.ValidateRequirement` for one pod expression.
fn validate_requirement(key: &str, operator: &str, values: &[String]) -> Result<(), IgnoreReason> {
    let invalid = |message: String| IgnoreReason::InvalidRequirement { key: key.to_string(), message };
    let normalized = labels::normalize_key(key);
    labels::check_pod_requirement_key(normalized).map_err(|e| invalid(e.to_string()))?;
    let Some(op) = Operator::parse(operator) else {
        return Err(invalid(format!("key {key} has an unsupported operator {operator}")));
    };
    if let Some(e) = qualified_name_errors(normalized).first() {
        return Err(invalid(format!("key {key} is not a qualified name, {e}")));
    }
    for v in values {
        if let Some(e) = label_value_errors(v).first() {
            return Err(invalid(format!("invalid value {v} for key {key}, {e}")));
        }
    }
    if op == Operator::In && values.is_empty() {
        return Err(invalid(format!("key {key} with operator In must have a value defined")));
    }
    if op.is_bound() && (values.len() != 1 || values[0].parse::<u64>().is_err()) {
        return Err(invalid(format!("key {key} with operator {op} must have a single positive integer value")));
    }
    if normalized == labels::CAPACITY_TYPE
        && op == Operator::In
        && !values.iter().any(|v| labels::CAPACITY_TYPES.contains(&v.as_str()))
    {
        return Err(invalid(format!(
            "key {key} with operator In must have at least one of the values {:?}",
            labels::CAPACITY_TYPES
        )));
    }
    Ok(())
}

/// A pending pod prepared for scheduling.
#[derive(Debug, Clone)]
pub struct PodData {
    pub pod_ref: PodRef,
    pub uid: String,
    pub creation: String,
    /// Upstream `resources.RequestsForPods` (includes `pods: 1`).
    pub requests: ResourceList,
    pub cpu_millis: i128,
    pub memory_bytes: i128,
    pub tolerations: Vec<Toleration>,
    pub host_ports: Vec<HostPort>,
    /// nodeSelector as `In` requirements.
    pub node_selector: Requirements,
    /// Required node-selector terms (ORed), in the order written.
    pub required_terms: Vec<Requirements>,
    /// Preferred node-affinity terms, heaviest first (stable: equal weights keep the written order).
    pub preferred_terms: Vec<(i32, Requirements)>,
    /// The pod's labels (topology selectors select on them).
    pub labels: BTreeMap<String, String>,
    /// Topology spread constraints, in the order written.
    pub spreads: Vec<TopologySpreadConstraint>,
    /// Required pod-affinity terms.
    pub affinity_required: Vec<PodAffinityTerm>,
    /// Preferred pod-affinity terms, heaviest first (upstream: stable sort by weight).
    pub affinity_preferred: Vec<(i32, PodAffinityTerm)>,
    /// Required pod-anti-affinity terms.
    pub anti_required: Vec<PodAffinityTerm>,
    /// Preferred pod-anti-affinity terms, heaviest first.
    pub anti_preferred: Vec<(i32, PodAffinityTerm)>,
    /// Volume topology alternatives and CSI volume usage (empty for pods without claims; set by
    /// the scheduler, which has the claims, volumes and classes).
    pub volumes: PodVolumes,
    /// A pod of a consolidation candidate (set by the scheduler in a consolidation simulation): it
    /// may not move onto a node still inside its consolidateAfter window.
    pub from_candidate: bool,
}

impl PodData {
    /// Reads and validates a pending pod as upstream's provisioner does (`Validate`): every
    /// nodeSelector entry and required expression must pass `ValidateRequirement`, no term may use
    /// `matchFields`, and a pod requiring `karpenter.sh/nodepool DoesNotExist` is left alone.
    pub fn new(pod: &Pod) -> Result<PodData, IgnoreReason> {
        let spec = pod.spec.as_ref();
        for (k, v) in spec.and_then(|s| s.node_selector.as_ref()).into_iter().flatten() {
            validate_requirement(k, "In", std::slice::from_ref(v))?;
        }
        let required = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref());
        for term in required.map(|r| r.node_selector_terms.as_slice()).unwrap_or(&[]) {
            if term.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
                return Err(IgnoreReason::MatchFields);
            }
            for e in term.match_expressions.iter().flatten() {
                validate_requirement(&e.key, &e.operator, e.values.as_deref().unwrap_or(&[]))?;
            }
        }
        let data = PodData::read(pod)?;
        let reqs = data.requirements(&Preferences::default());
        if reqs.get_ref(labels::NODEPOOL).is_some_and(|r| r.operator() == Operator::DoesNotExist) {
            return Err(IgnoreReason::AvoidsKarpenter);
        }
        Ok(data)
    }

    /// Reads a pod without validating it (DaemonSet pods, whose affinity comes from the template).
    pub fn read(pod: &Pod) -> Result<PodData, IgnoreReason> {
        let unreadable = |message: String| IgnoreReason::Unreadable { message };
        let requests =
            resources::pod_requests(pod).map_err(|(resource, e)| unreadable(format!("resource {resource}: {e}")))?;
        let spec = pod.spec.as_ref();
        let mut node_selector = Requirements::new();
        for (k, v) in spec.and_then(|s| s.node_selector.as_ref()).into_iter().flatten() {
            node_selector.add(Requirement::in_values(k, &[v]));
        }
        let node_affinity = spec.and_then(|s| s.affinity.as_ref()).and_then(|a| a.node_affinity.as_ref());
        let mut required_terms = Vec::new();
        let required = node_affinity.and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref());
        for term in required.map(|r| r.node_selector_terms.as_slice()).unwrap_or(&[]) {
            let expressions = term.match_expressions.as_deref().unwrap_or(&[]);
            required_terms.push(
                Requirements::from_k8s_node_selector_requirements(expressions)
                    .map_err(|e| unreadable(e.to_string()))?,
            );
        }
        let mut preferred_terms = Vec::new();
        let preferred = node_affinity.and_then(|n| n.preferred_during_scheduling_ignored_during_execution.as_ref());
        for term in preferred.into_iter().flatten() {
            let expressions = term.preference.match_expressions.as_deref().unwrap_or(&[]);
            let reqs = Requirements::from_k8s_node_selector_requirements(expressions)
                .map_err(|e| unreadable(format!("preferred node affinity: {e}")))?;
            preferred_terms.push((term.weight, reqs));
        }
        // upstream sorts by weight with an unstable sort; equal weights keep the written order here.
        preferred_terms.sort_by_key(|(w, _)| std::cmp::Reverse(*w));
        let affinity = spec.and_then(|s| s.affinity.as_ref());
        let pod_affinity = affinity.and_then(|a| a.pod_affinity.as_ref());
        let anti = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        // upstream `preferences.go` sorts preferred pod (anti-)affinity terms with a stable sort.
        let weighted = |terms: Option<&Vec<k8s_openapi::api::core::v1::WeightedPodAffinityTerm>>| {
            let mut out: Vec<(i32, PodAffinityTerm)> =
                terms.into_iter().flatten().map(|t| (t.weight, t.pod_affinity_term.clone())).collect();
            out.sort_by_key(|(w, _)| std::cmp::Reverse(*w));
            out
        };
        Ok(PodData {
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            spreads: spec.and_then(|s| s.topology_spread_constraints.clone()).unwrap_or_default(),
            affinity_required: pod_affinity
                .and_then(|a| a.required_during_scheduling_ignored_during_execution.clone())
                .unwrap_or_default(),
            affinity_preferred: weighted(
                pod_affinity.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
            ),
            anti_required: anti
                .and_then(|a| a.required_during_scheduling_ignored_during_execution.clone())
                .unwrap_or_default(),
            anti_preferred: weighted(
                anti.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
            ),
            pod_ref: PodRef::of(pod),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            creation: pod.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()).unwrap_or_default(),
            cpu_millis: requests.get(resources::CPU).map_or(0, Quantity::milli_value),
            memory_bytes: requests.get(resources::MEMORY).map_or(0, Quantity::value),
            requests,
            tolerations: spec.and_then(|s| s.tolerations.clone()).unwrap_or_default(),
            host_ports: hostports::pod_host_ports(pod),
            node_selector,
            required_terms,
            preferred_terms,
            volumes: PodVolumes::default(),
            from_candidate: false,
        })
    }

    /// Upstream `NewPodRequirements` under the given relaxation state: nodeSelector ∩ the heaviest
    /// remaining preferred term ∩ the first remaining required term.
    pub fn requirements(&self, prefs: &Preferences) -> Requirements {
        let mut out = self.node_selector.clone();
        if let Some((_, term)) = self.preferred_terms.get(prefs.dropped_preferred) {
            out.add_all(term);
        }
        if let Some(term) = self.required_terms.get(prefs.dropped_required) {
            out.add_all(term);
        }
        out
    }

    /// Upstream `NewStrictPodRequirements`: without the preferred term (daemon matching, and the
    /// domains over which a topology spread takes its global minimum).
    pub fn strict_requirements(&self, prefs: &Preferences) -> Requirements {
        let mut out = self.node_selector.clone();
        if let Some(term) = self.required_terms.get(prefs.dropped_required) {
            out.add_all(term);
        }
        out
    }

    /// Every pod (anti-)affinity term, required and preferred.
    pub fn pod_affinity_terms(&self) -> impl Iterator<Item = &PodAffinityTerm> + '_ {
        self.affinity_required
            .iter()
            .chain(self.affinity_preferred.iter().map(|(_, t)| t))
            .chain(self.anti_required.iter())
            .chain(self.anti_preferred.iter().map(|(_, t)| t))
    }

    /// The tolerations in force: the pod's, plus `Exists:PreferNoSchedule` once relaxed so.
    pub fn tolerations(&self, prefs: &Preferences) -> Vec<Toleration> {
        let mut t = self.tolerations.clone();
        if prefs.tolerate_prefer_no_schedule {
            t.push(taints::prefer_no_schedule_toleration());
        }
        t
    }
}

/// How far a pod has been relaxed in the current attempt (upstream mutates a pod copy; here the
/// pod stays as read and this state says which terms are dropped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preferences {
    /// Required node-selector terms dropped from the front.
    pub dropped_required: usize,
    /// Preferred node-affinity terms dropped, heaviest first.
    pub dropped_preferred: usize,
    /// The `Exists:PreferNoSchedule` toleration was added.
    pub tolerate_prefer_no_schedule: bool,
    /// Preferred pod-affinity terms dropped, heaviest first.
    pub dropped_pod_affinity: usize,
    /// Preferred pod-anti-affinity terms dropped, heaviest first.
    pub dropped_pod_anti_affinity: usize,
    /// The topology spread constraints still in force, as indices in their current order
    /// (`None`: all, as written). Upstream removes a ScheduleAnyway constraint by moving the last
    /// one into its place, so the order changes.
    pub spreads: Option<Vec<usize>>,
}

impl Preferences {
    /// The topology spread constraints in force, in their current order.
    pub fn active_spreads(&self, n: usize) -> Vec<usize> {
        self.spreads.clone().unwrap_or_else(|| (0..n).collect())
    }

    /// Applies the first relaxation step that changes something, in upstream's order
    /// (`preferences.go::Relax`): 1 a required node-affinity term (never the last), 2 the
    /// heaviest preferred pod-affinity term, 3 the heaviest preferred pod-anti-affinity term, 4 the
    /// heaviest preferred node-affinity term, 5 one ScheduleAnyway spread, 6 PreferNoSchedule.
    pub fn relax(&mut self, pod: &PodData, tolerate_prefer_no_schedule: bool) -> Option<Relaxation> {
        if pod.required_terms.len() > self.dropped_required + 1 {
            self.dropped_required += 1;
            return Some(Relaxation::DroppedRequiredTerm { index: self.dropped_required - 1 });
        }
        if let Some((weight, t)) = pod.affinity_preferred.get(self.dropped_pod_affinity) {
            self.dropped_pod_affinity += 1;
            return Some(Relaxation::DroppedPreferredPodAffinity {
                weight: *weight,
                topology_key: t.topology_key.clone(),
            });
        }
        if let Some((weight, t)) = pod.anti_preferred.get(self.dropped_pod_anti_affinity) {
            self.dropped_pod_anti_affinity += 1;
            return Some(Relaxation::DroppedPreferredPodAntiAffinity {
                weight: *weight,
                topology_key: t.topology_key.clone(),
            });
        }
        if let Some((weight, _)) = pod.preferred_terms.get(self.dropped_preferred) {
            self.dropped_preferred += 1;
            return Some(Relaxation::DroppedPreferredNodeAffinity { weight: *weight });
        }
        let mut active = self.active_spreads(pod.spreads.len());
        if let Some(i) = active.iter().position(|&s| pod.spreads[s].when_unsatisfiable == "ScheduleAnyway") {
            let tsc = &pod.spreads[active[i]];
            let relaxation = Relaxation::DroppedScheduleAnywaySpread {
                topology_key: tsc.topology_key.clone(),
                max_skew: tsc.max_skew,
            };
            // upstream: the last constraint takes the dropped one's place.
            active.swap_remove(i);
            self.spreads = Some(active);
            return Some(relaxation);
        }
        if tolerate_prefer_no_schedule && !self.tolerate_prefer_no_schedule {
            self.tolerate_prefer_no_schedule = true;
            return Some(Relaxation::ToleratedPreferNoSchedule);
        }
        None
    }
}
