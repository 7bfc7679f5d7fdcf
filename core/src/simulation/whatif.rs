//! "What will this edit do?": the cluster run twice over the same stretch of simulated time, once
//! as it is and once with the edited objects applied at the start, and the difference reported —
//! the NodeClaims the edited run launches, the nodes it drifts and replaces under the budgets,
//! the pods it leaves pending and why, and what it does to the $/hour. Running the unedited
//! cluster too separates the edit's effect from work the cluster was about to do anyway (pending
//! pods, drift already under way).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Disruption, Reason, SimTime, Simulation, Timings};
use crate::catalogue::Catalogue;
use crate::manifest::Manifests;

/// A NodeClaim the edited run launched.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchedNodeClaim {
    pub nodeclaim: String,
    pub nodepool: String,
    pub at: SimTime,
    pub instance_type: String,
    pub capacity_type: String,
    pub zone: String,
    /// USD per hour.
    pub price: f64,
    pub price_synthetic: bool,
    /// Pods the round that created it planned onto it.
    pub pods: usize,
}

/// A NodeClaim drift detection flagged in the edited run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftedNodeClaim {
    pub nodeclaim: String,
    pub at: SimTime,
    pub why: String,
}

/// A node the edited run terminated.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemovedNode {
    pub nodeclaim: String,
    pub at: SimTime,
    pub why: String,
}

/// A pod still pending at the end of the edited run, with its latest scheduling event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingPod {
    pub pod: String,
    pub reason: String,
    /// Pending at the end without the edit too (the edit did not cause it).
    pub also_without_edit: bool,
}

/// $/hour at the start and at the end of both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CostDelta {
    pub now_per_hour: f64,
    pub unedited_per_hour: f64,
    pub edited_per_hour: f64,
    /// Edited minus unedited, at the end.
    pub delta_per_hour: f64,
    /// The same over 730 hours.
    pub delta_per_month: f64,
}

/// The unedited run, in counts, for comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unedited {
    pub launched: usize,
    pub drifted: usize,
    pub removed: usize,
    pub pending: usize,
}

/// What the edit does over `until`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WhatIf {
    /// How far both runs went.
    pub until: SimTime,
    /// The edited objects (`Kind/name`).
    pub applied: Vec<String>,
    pub launched: Vec<LaunchedNodeClaim>,
    pub drifted: Vec<DriftedNodeClaim>,
    /// Disruption commands carried out (replacement plans under the budgets, expirations).
    pub disruptions: Vec<Disruption>,
    pub removed: Vec<RemovedNode>,
    pub pending: Vec<PendingPod>,
    pub cost: CostDelta,
    pub unedited: Unedited,
    /// Assumptions of the edited run.
    pub notes: Vec<String>,
}

/// Why a what-if cannot be answered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WhatIfError {
    /// The edits hold no object.
    #[error("the file holds no objects to apply")]
    NothingToApply,
    /// The current state does not start a simulation.
    #[error(transparent)]
    Simulation(#[from] super::SimulationError),
    /// The edits could not be applied.
    #[error(transparent)]
    Apply(#[from] super::StepError),
}

/// Runs `current` with and without `edits` (applied at the start) for `until` of simulated time.
pub fn whatif(
    current: &Manifests,
    edits: Manifests,
    catalogue: &'static Catalogue,
    until: SimTime,
) -> Result<WhatIf, WhatIfError> {
    let applied: Vec<String> = edits.origins.keys().map(|o| format!("{}/{}", o.kind, o.name)).collect();
    if applied.is_empty() {
        return Err(WhatIfError::NothingToApply);
    }
    let mut unedited = Simulation::with_catalogue(current, None, Timings::default(), catalogue)?;
    let mut edited = Simulation::with_catalogue(current, None, Timings::default(), catalogue)?;
    let now_per_hour = edited.cost().per_hour;
    // Both runs are counted from here: after the start's bindings, before the first round (the
    // edit applies before any provisioning round runs).
    let first_event = edited.events().len();
    let unedited_first_event = unedited.events().len();
    edited.apply(edits)?;
    unedited.run_until(until);
    edited.run_until(until);
    let facts = Facts::of(&edited, first_event);
    let baseline = Facts::of(&unedited, unedited_first_event);
    let pending_unedited = unedited.snapshot().pending;
    let (unedited_per_hour, edited_per_hour) = (unedited.cost().per_hour, edited.cost().per_hour);
    let delta = edited_per_hour - unedited_per_hour;
    Ok(WhatIf {
        until,
        applied,
        unedited: Unedited {
            launched: baseline.launched.len(),
            drifted: baseline.drifted.len(),
            removed: baseline.removed.len(),
            pending: pending_unedited.len(),
        },
        launched: facts.launched,
        drifted: facts.drifted,
        disruptions: edited.disruptions().to_vec(),
        removed: facts.removed,
        pending: pending(&edited, &pending_unedited),
        cost: CostDelta {
            now_per_hour,
            unedited_per_hour,
            edited_per_hour,
            delta_per_hour: delta,
            delta_per_month: delta * super::cost::HOURS_PER_MONTH,
        },
        notes: edited.notes().map(str::to_string).collect(),
    })
}

/// What a run's event log says happened.
struct Facts {
    launched: Vec<LaunchedNodeClaim>,
    drifted: Vec<DriftedNodeClaim>,
    removed: Vec<RemovedNode>,
}

impl Facts {
    fn of(sim: &Simulation, from: usize) -> Facts {
        let mut created: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
        let mut terminating: BTreeMap<&str, &str> = BTreeMap::new();
        let mut facts = Facts { launched: Vec::new(), drifted: Vec::new(), removed: Vec::new() };
        for e in &sim.events()[from.min(sim.events().len())..] {
            if e.object.kind != "NodeClaim" {
                continue;
            }
            let name = e.object.name.as_str();
            match &e.reason {
                Reason::NodeClaimCreated { nodepool, pods, .. } => {
                    created.insert(name, (nodepool, *pods));
                }
                Reason::Launched { offering, price, price_synthetic } => {
                    let (nodepool, pods) = created.get(name).copied().unwrap_or(("", 0));
                    facts.launched.push(LaunchedNodeClaim {
                        nodeclaim: name.to_string(),
                        nodepool: nodepool.to_string(),
                        at: e.at,
                        instance_type: offering.instance_type.clone(),
                        capacity_type: offering.capacity_type.clone(),
                        zone: offering.zone.clone(),
                        price: *price,
                        price_synthetic: *price_synthetic,
                        pods,
                    });
                }
                Reason::Drifted { why } => {
                    facts.drifted.push(DriftedNodeClaim { nodeclaim: name.to_string(), at: e.at, why: why.clone() })
                }
                Reason::Terminating { why } => {
                    terminating.insert(name, why);
                }
                Reason::Terminated { .. } => facts.removed.push(RemovedNode {
                    nodeclaim: name.to_string(),
                    at: e.at,
                    why: terminating.get(name).map_or_else(String::new, |w| w.to_string()),
                }),
                _ => {}
            }
        }
        facts
    }
}

/// How many pending pods without a scheduling event get a round of their own to explain them.
const EXPLAINED_WITHOUT_EVENT: usize = 20;

/// Pending pods with their latest scheduling event (Karpenter's `FailedScheduling`, or
/// `Nominated` for a pod waiting for its node).
fn pending(sim: &Simulation, pending_unedited: &[String]) -> Vec<PendingPod> {
    let unedited: std::collections::BTreeSet<&str> = pending_unedited.iter().map(String::as_str).collect();
    let pending = sim.snapshot().pending;
    let mut reasons = sim.latest_scheduling_events(&pending);
    // Pods without an event (Karpenter ignores them): ask a round for the first few (each asks
    // one round).
    let mut asked = 0;
    pending
        .into_iter()
        .map(|pod| {
            let reason = reasons.remove(&pod).unwrap_or_else(|| {
                asked += 1;
                let (namespace, name) = pod.split_once('/').unwrap_or(("default", &pod));
                let standing = if asked <= EXPLAINED_WITHOUT_EVENT { sim.explain_pod(namespace, name) } else { None };
                match standing {
                    Some(standing) => standing.to_string(),
                    None => format!(
                        "no scheduling event (only the first {EXPLAINED_WITHOUT_EVENT} such pods are explained; \
                         `kubectl karpenter explain pod` explains this one)"
                    ),
                }
            });
            let also_without_edit = unedited.contains(pod.as_str());
            PendingPod { pod, reason, also_without_edit }
        })
        .collect()
}
