//! The event log: every decision of the simulation as an event in the vocabulary of
//! `kubectl get events` (reason names are upstream's where upstream has the event), with a
//! structured reason and a message rendered from it. Unlike the API server's events, nothing is
//! deduplicated or rate-limited: every decision is visible.

use std::fmt;

use serde::Serialize;

use super::clock::SimTime;

/// Normal or Warning, as Kubernetes events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EventType {
    Normal,
    Warning,
}

/// The object an event is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Involved {
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl Involved {
    pub fn pod(namespace: &str, name: &str) -> Involved {
        Involved { kind: "Pod".into(), namespace: Some(namespace.into()), name: name.into() }
    }
    pub fn node(name: &str) -> Involved {
        Involved { kind: "Node".into(), namespace: None, name: name.into() }
    }
    pub fn nodeclaim(name: &str) -> Involved {
        Involved { kind: "NodeClaim".into(), namespace: None, name: name.into() }
    }
    pub fn nodepool(name: &str) -> Involved {
        Involved { kind: "NodePool".into(), namespace: None, name: name.into() }
    }
    pub fn workload(kind: &str, namespace: &str, name: &str) -> Involved {
        Involved { kind: kind.into(), namespace: Some(namespace.into()), name: name.into() }
    }
    pub fn scenario() -> Involved {
        Involved { kind: "Scenario".into(), namespace: None, name: "steps".into() }
    }
}

impl fmt::Display for Involved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind.to_lowercase(), ns, self.name),
            None => write!(f, "{}/{}", self.kind.to_lowercase(), self.name),
        }
    }
}

/// An offering: instance type, zone, capacity type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OfferingRef {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
}

impl fmt::Display for OfferingRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} in {}", self.capacity_type, self.instance_type, self.zone)
    }
}

/// Why a pod was removed from a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RemovalCause {
    /// Evicted through the Eviction API (PDBs honoured).
    Evicted,
    /// Deleted at the NodeClaim's terminationGracePeriod deadline (PDBs and do-not-disrupt bypassed).
    ForceDeleted,
    /// The instance went away under it (spot reclaim, a deleted node).
    NodeLost,
    /// Deleted by a step or scaled away by its controller.
    Deleted,
}

/// What happened, with the facts the message is rendered from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all_fields = "camelCase")]
pub enum Reason {
    /// Karpenter's pod event: the provisioning round planned the pod onto a NodeClaim or node.
    Nominated { target: Involved },
    /// Karpenter could not place the pod in a provisioning round.
    FailedScheduling { headline: String },
    /// kube-scheduler bound the pod.
    Scheduled { node: String },
    /// A provisioning round created a NodeClaim.
    NodeClaimCreated { nodepool: String, pods: usize, instance_types: usize, cheapest: Option<String> },
    /// CreateFleet returned an instance.
    Launched { offering: OfferingRef, price: f64, price_synthetic: bool },
    /// CreateFleet could not launch in an offering; Karpenter marks it unavailable for 3 minutes.
    InsufficientCapacityError { offering: OfferingRef, until: SimTime },
    /// No offering of the NodeClaim could launch: the NodeClaim is deleted.
    LaunchFailed { tried: usize },
    /// The Node joined and the NodeClaim is registered.
    Registered { node: String },
    /// The node is Ready and its startup taints are gone.
    Initialized { node: String },
    /// The ReplicaSet/StatefulSet/DaemonSet controller created a pod.
    SuccessfulCreate { pod: String },
    /// The controller deleted a pod (scale down).
    SuccessfulDelete { pod: String },
    /// A step scaled a workload.
    Scaled { from: i32, to: i32 },
    /// The node is being terminated: `karpenter.sh/disrupted:NoSchedule` and drain.
    Terminating { why: String },
    /// A pod left its node.
    PodRemoved { node: String, cause: RemovalCause },
    /// An eviction was refused by a PodDisruptionBudget.
    FailedDraining { pod: String, pdb: String },
    /// A pod with `karpenter.sh/do-not-disrupt` is waiting for the terminationGracePeriod.
    DrainBlockedByDoNotDisrupt { pod: String },
    /// The node is drained and the instance terminated.
    Terminated { node: String },
    /// A spot interruption notice: the node is drained and the instance reclaimed in 2 minutes.
    SpotInterrupted { node: String, reclaimed_at: SimTime },
    /// EC2 reclaimed the instance.
    InstanceReclaimed { node: String, pods_lost: usize },
    /// Drift detection found the NodeClaim drifted.
    Drifted { why: String },
    /// The node is not a disruption candidate (logged when the reasons change).
    DisruptionBlocked { blockers: Vec<String> },
    /// A consolidation or emptiness method passed the node over (logged when the reason changes).
    Unconsolidatable { method: String, why: String },
    /// A disruption method chose nodes; consolidation and emptiness re-validate after 15 s.
    DisruptionPlanned {
        method: String,
        decision: String,
        nodes: Vec<String>,
        replacements: Vec<String>,
        savings_per_hour: f64,
        why: String,
    },
    /// The 15 s validation found the command no longer valid.
    DisruptionRejected { method: String, nodes: Vec<String>, why: String },
    /// The node is being disrupted (after its replacements are ready, if any).
    Disrupting { method: String, decision: String },
    /// A replacement NodeClaim could not launch: the command is abandoned.
    DisruptionFailed { nodes: Vec<String>, why: String },
    /// expireAfter elapsed: the NodeClaim is deleted (no budgets, no replacement first).
    Expired { after: String },
    /// upstream liveness: not `Launched` 5 minutes after creation, or not `Registered` 15 minutes
    /// after launch: the NodeClaim is deleted and its pods are provisioned again.
    LivenessTimeout { condition: String, after: String },
    /// A step's action.
    StepApplied { action: String },
    /// A step that could not be carried out.
    StepFailed { action: String, why: String },
    /// Cluster Autoscaler's event (the comparison mode), with CA's reason and text.
    ClusterAutoscaler { ca_reason: String, message: String, warning: bool },
}

impl Reason {
    pub fn name(&self) -> &'static str {
        match self {
            Reason::Nominated { .. } => "Nominated",
            Reason::FailedScheduling { .. } => "FailedScheduling",
            Reason::Scheduled { .. } => "Scheduled",
            Reason::NodeClaimCreated { .. } => "NodeClaimCreated",
            Reason::Launched { .. } => "Launched",
            Reason::InsufficientCapacityError { .. } => "InsufficientCapacityError",
            Reason::LaunchFailed { .. } => "LaunchFailed",
            Reason::Registered { .. } => "Registered",
            Reason::Initialized { .. } => "Initialized",
            Reason::SuccessfulCreate { .. } => "SuccessfulCreate",
            Reason::SuccessfulDelete { .. } => "SuccessfulDelete",
            Reason::Scaled { .. } => "Scaled",
            Reason::Terminating { .. } => "Terminating",
            Reason::PodRemoved { cause: RemovalCause::Evicted, .. } => "Evicted",
            Reason::PodRemoved { cause: RemovalCause::ForceDeleted, .. } => "Disrupted",
            Reason::PodRemoved { cause: RemovalCause::NodeLost, .. } => "NodeLost",
            Reason::PodRemoved { cause: RemovalCause::Deleted, .. } => "Killing",
            Reason::FailedDraining { .. } => "FailedDraining",
            Reason::DrainBlockedByDoNotDisrupt { .. } => "FailedDraining",
            Reason::Terminated { .. } => "Terminated",
            Reason::SpotInterrupted { .. } => "SpotInterrupted",
            Reason::InstanceReclaimed { .. } => "InstanceReclaimed",
            Reason::Drifted { .. } => "Drifted",
            Reason::DisruptionBlocked { .. } => "DisruptionBlocked",
            Reason::Unconsolidatable { .. } => "Unconsolidatable",
            Reason::DisruptionPlanned { .. } => "DisruptionPlanned",
            Reason::DisruptionRejected { .. } => "DisruptionRejected",
            Reason::Disrupting { .. } => "Disrupting",
            Reason::DisruptionFailed { .. } => "DisruptionFailed",
            Reason::Expired { .. } => "Expired",
            Reason::LivenessTimeout { .. } => "LivenessTimeout",
            Reason::StepApplied { .. } => "StepApplied",
            Reason::StepFailed { .. } => "StepFailed",
            Reason::ClusterAutoscaler { ca_reason, .. } => match ca_reason.as_str() {
                "ScaledUpGroup" => "ScaledUpGroup",
                "TriggeredScaleUp" => "TriggeredScaleUp",
                "NotTriggerScaleUp" => "NotTriggerScaleUp",
                "ScaleUpTimedOut" => "ScaleUpTimedOut",
                "ClusterUnhealthy" => "ClusterUnhealthy",
                "MaxNodesTotalReached" => "MaxNodesTotalReached",
                "ScaleDown" => "ScaleDown",
                "ScaleDownEmpty" => "ScaleDownEmpty",
                "ScaleDownFailed" => "ScaleDownFailed",
                _ => "ClusterAutoscaler",
            },
        }
    }

    pub fn event_type(&self) -> EventType {
        match self {
            Reason::FailedScheduling { .. }
            | Reason::InsufficientCapacityError { .. }
            | Reason::LaunchFailed { .. }
            | Reason::FailedDraining { .. }
            | Reason::DrainBlockedByDoNotDisrupt { .. }
            | Reason::SpotInterrupted { .. }
            | Reason::InstanceReclaimed { .. }
            | Reason::StepFailed { .. }
            | Reason::DisruptionBlocked { .. }
            | Reason::DisruptionFailed { .. }
            | Reason::LivenessTimeout { .. }
            | Reason::PodRemoved { cause: RemovalCause::NodeLost | RemovalCause::ForceDeleted, .. }
            | Reason::ClusterAutoscaler { warning: true, .. } => EventType::Warning,
            _ => EventType::Normal,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Nominated { target } => write!(f, "Pod should schedule on: {target}"),
            Reason::FailedScheduling { headline } => write!(f, "Failed to schedule pod, {headline}"),
            Reason::Scheduled { node } => write!(f, "Successfully assigned to {node}"),
            Reason::NodeClaimCreated { nodepool, pods, instance_types, cheapest } => {
                write!(f, "Created from NodePool {nodepool} for {pods} pod(s), {instance_types} instance type(s)")?;
                match cheapest {
                    Some(c) => write!(f, ", cheapest {c}"),
                    None => Ok(()),
                }
            }
            Reason::Launched { offering, price, price_synthetic } => {
                let synthetic = if *price_synthetic { " (synthetic spot price)" } else { "" };
                write!(f, "Launched {offering} at ${price:.4}/hour{synthetic}")
            }
            Reason::InsufficientCapacityError { offering, until } => write!(
                f,
                "CreateFleet: insufficient capacity for {offering}; marked unavailable until {until}"
            ),
            Reason::LaunchFailed { tried } => write!(
                f,
                "No capacity in any of the {tried} offering(s) tried; the NodeClaim is deleted and its pods provisioned again"
            ),
            Reason::Registered { node } => write!(f, "Status condition transitioned, Type: Registered, Status: True (node {node})"),
            Reason::Initialized { node } => write!(f, "Status condition transitioned, Type: Initialized, Status: True (node {node} is Ready)"),
            Reason::SuccessfulCreate { pod } => write!(f, "Created pod: {pod}"),
            Reason::SuccessfulDelete { pod } => write!(f, "Deleted pod: {pod}"),
            Reason::Scaled { from, to } => write!(f, "Scaled from {from} to {to} replicas"),
            Reason::Terminating { why } => write!(f, "Tainted karpenter.sh/disrupted:NoSchedule and draining: {why}"),
            Reason::PodRemoved { node, cause } => match cause {
                RemovalCause::Evicted => write!(f, "Evicted pod from {node}"),
                RemovalCause::ForceDeleted => write!(
                    f,
                    "Deleting the pod to accommodate the terminationTime of {node}; this bypasses the PDB of the pod and the do-not-disrupt annotation"
                ),
                RemovalCause::NodeLost => write!(f, "Node {node} is gone; the pod is lost"),
                RemovalCause::Deleted => write!(f, "Stopping pod on {node}"),
            },
            Reason::FailedDraining { pod, pdb } => {
                write!(f, "Failed to drain node, evicting pod {pod} violates PDB {pdb}; retrying")
            }
            Reason::DrainBlockedByDoNotDisrupt { pod } => write!(
                f,
                "Pod {pod} has karpenter.sh/do-not-disrupt; it is not evicted and waits for the NodeClaim's terminationGracePeriod"
            ),
            Reason::Terminated { node } => write!(f, "Drained; instance of {node} terminated"),
            Reason::SpotInterrupted { node, reclaimed_at } => write!(
                f,
                "Spot interruption warning for {node}: the instance is reclaimed at {reclaimed_at}; deleting the NodeClaim"
            ),
            Reason::InstanceReclaimed { node, pods_lost } => {
                write!(f, "EC2 reclaimed the instance of {node}; {pods_lost} pod(s) still on it were lost")
            }
            Reason::Drifted { why } => write!(f, "Status condition transitioned, Type: Drifted, Status: True ({why})"),
            Reason::DisruptionBlocked { blockers } => write!(f, "Cannot disrupt Node: {}", blockers.join("; ")),
            Reason::Unconsolidatable { method, why } => write!(f, "{method}: {why}"),
            Reason::DisruptionPlanned { method, decision, nodes, replacements, savings_per_hour, why } => {
                write!(f, "{method}: {decision} [{}]", nodes.join(", "))?;
                if !replacements.is_empty() {
                    write!(f, " -> [{}]", replacements.join(", "))?;
                }
                write!(f, " (savings: ${savings_per_hour:.4}/hour): {why}")
            }
            Reason::DisruptionRejected { method, nodes, why } => {
                write!(f, "{method} rejected for [{}]: {why}", nodes.join(", "))
            }
            Reason::Disrupting { method, decision } => write!(f, "Disrupting Node: {method}/{decision}"),
            Reason::DisruptionFailed { nodes, why } => write!(f, "Disruption of [{}] abandoned: {why}", nodes.join(", ")),
            Reason::Expired { after } => write!(f, "NodeClaim expired after {after}; deleting it"),
            Reason::LivenessTimeout { condition, after } => {
                write!(f, "NodeClaim not {condition} after {after}; deleting it (liveness)")
            }
            Reason::StepApplied { action } => f.write_str(action),
            Reason::StepFailed { action, why } => write!(f, "{action}: {why}"),
            Reason::ClusterAutoscaler { message, .. } => write!(f, "{message}"),
        }
    }
}

/// One entry of the log. JSON: `at` (duration since the start), `type`, `kind` (the reason's
/// name), `object` (`kind/[namespace/]name`), `message`, and `detail` (the structured reason).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub at: SimTime,
    pub event_type: EventType,
    pub object: Involved,
    pub reason: Reason,
    pub message: String,
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Event", 6)?;
        st.serialize_field("at", &self.at)?;
        st.serialize_field("type", &self.event_type)?;
        st.serialize_field("kind", self.reason.name())?;
        st.serialize_field("object", &self.object.to_string())?;
        st.serialize_field("message", &self.message)?;
        st.serialize_field("detail", &self.reason)?;
        st.end()
    }
}

impl Event {
    pub fn new(at: SimTime, object: Involved, reason: Reason) -> Event {
        Event { at, event_type: reason.event_type(), message: reason.to_string(), object, reason }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = match self.event_type {
            EventType::Normal => "Normal ",
            EventType::Warning => "Warning",
        };
        write!(
            f,
            "{:>10}  {t}  {:<26} {:<40} {}",
            self.at.to_string(),
            self.reason.name(),
            self.object.to_string(),
            self.message
        )
    }
}

impl super::Simulation {
    /// Pending pod (`namespace/name`) → the message of its latest scheduling event (Karpenter's
    /// `FailedScheduling`, or `Nominated` for a pod waiting for its node); pods without one are
    /// left out.
    pub fn latest_scheduling_events(&self, pending: &[String]) -> std::collections::BTreeMap<String, String> {
        let wanted: std::collections::BTreeSet<&str> = pending.iter().map(String::as_str).collect();
        let mut out = std::collections::BTreeMap::new();
        for e in self.events().iter().rev() {
            if e.object.kind != "Pod" || !matches!(e.reason, Reason::FailedScheduling { .. } | Reason::Nominated { .. })
            {
                continue;
            }
            let key = format!("{}/{}", e.object.namespace.as_deref().unwrap_or("default"), e.object.name);
            if wanted.contains(key.as_str()) {
                out.entry(key).or_insert_with(|| e.message.clone());
            }
        }
        out
    }
}
