//! Disruption (upstream `pkg/controllers/disruption`, `pkg/utils/pdb`, `pkg/utils/disruption`):
//! which nodes may go, when, and what replaces them.
//!
//! [`decide`] is one pass of upstream's disruption loop over a [`View`] of the cluster: the
//! methods in upstream's order (emptiness, drift, multi-node consolidation, single-node
//! consolidation, one file each in `methods/`, sharing `consolidation.rs`); the first that
//! produces a [`Command`] wins. Every node that is not a candidate carries its
//! [`candidates::Blocker`]s, every method that declines a node says why ([`Declined`], a
//! [`Decline`] per node; `decline.rs` is the vocabulary at the bottom of the module). Expiration is not a method: expired NodeClaims are deleted regardless
//! ([`expired`]). What happens to a command next — the 15 s validation, waiting for its
//! replacements, which verdicts are news — is `orchestration` (upstream
//! `orchestration/queue.go`; the validation itself is `validation`, upstream `validation.go`); the simulation (`crate::simulation`) and the controller keep the
//! commands and carry them out. `facts` reads a node's [`NodeFacts`] from the API objects (the
//! controller's and a snapshot's view; the simulation keeps its own).

pub(crate) mod balanced;
pub(crate) mod budgets;
pub(crate) mod candidates;
pub(crate) mod consolidation;
pub(crate) mod decline;
pub mod drift;
pub mod explain;
pub mod facts;
mod methods;
pub mod orchestration;
pub(crate) mod pdb;
mod validation;

use serde::Serialize;

use crate::api::nodepool::BudgetReason;
use crate::catalogue::UnavailableOffering;
use crate::manifest::Manifests;
use crate::scheduling::PlannedNodeClaim;

pub use candidates::{Blocker, Candidate};
pub use decline::{BindingBudget, Decline, GuardedDestination};
pub use drift::DriftReason;

/// What disruption knows about a node beyond its objects (upstream: cluster state).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFacts {
    pub node: String,
    pub nodeclaim: String,
    pub nodepool: String,
    pub initialized: bool,
    /// Marked for deletion or already terminating.
    pub deleting: bool,
    /// A provisioning round nominated pods onto it until then (epoch seconds).
    pub nominated_until: Option<i64>,
    /// The NodeClaim has a terminationGracePeriod.
    pub termination_grace_period: bool,
    /// USD per hour of its offering (0 when unknown).
    pub price: f64,
    pub capacity_type: String,
    pub instance_type: String,
    /// Since when its consolidateAfter window runs (the last pod event, else initialization).
    pub last_pod_event: Option<i64>,
    /// Drifted, and since when.
    pub drifted: Option<(DriftReason, i64)>,
    /// When its `expireAfter` runs out (epoch seconds; `None`: never).
    pub expires_at: Option<i64>,
}

/// The cluster as disruption reads it.
pub struct View<'a> {
    /// Objects with workloads expanded into pods (as a provisioning round reads them).
    pub objects: &'a Manifests,
    /// The instance types and prices the pass simulates with (the controller's live catalogue,
    /// the simulation's own).
    pub catalogue: &'a crate::catalogue::Catalogue,
    pub region: &'a str,
    /// Epoch seconds.
    pub now: i64,
    pub nodes: Vec<NodeFacts>,
    pub unavailable: Vec<UnavailableOffering>,
    /// upstream feature gate `SpotToSpotConsolidation` (default off).
    pub spot_to_spot: bool,
    /// The provisioning round's input over `objects`, built on first use and shared by every
    /// simulation of the pass.
    pub input: std::cell::RefCell<Option<crate::state::Input>>,
    /// Indices into `objects.pods` of the pods bound to each node.
    pub pods_by_node: std::collections::HashMap<String, Vec<usize>>,
    /// The replicas of the pods' controllers, for PodDisruptionBudgets (from `objects`' workloads;
    /// the simulation sets its own).
    pub scales: pdb::Scales,
}

impl<'a> View<'a> {
    pub fn new(
        objects: &'a Manifests,
        catalogue: &'a crate::catalogue::Catalogue,
        region: &'a str,
        now: i64,
        nodes: Vec<NodeFacts>,
        unavailable: Vec<UnavailableOffering>,
    ) -> View<'a> {
        let mut pods_by_node: std::collections::HashMap<String, Vec<usize>> = Default::default();
        for (i, p) in objects.pods.iter().enumerate() {
            if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                pods_by_node.entry(n.to_string()).or_default().push(i);
            }
        }
        View {
            objects,
            catalogue,
            region,
            now,
            nodes,
            unavailable,
            spot_to_spot: false,
            input: Default::default(),
            pods_by_node,
            scales: pdb::scales_of(objects),
        }
    }

    /// The nodes of a NodePool its budgets count (upstream: managed, initialized and not
    /// InstanceTerminating; a draining node still counts) and those being disrupted.
    pub fn budget_counts(&self, nodepool: &str) -> (i64, i64) {
        let of = || self.nodes.iter().filter(move |n| n.nodepool == nodepool);
        (of().filter(|n| n.initialized).count() as i64, of().filter(|n| n.deleting).count() as i64)
    }

    /// The round's input over `objects` (built on first use, then shared).
    pub fn input(&self) -> Result<std::cell::RefMut<'_, crate::state::Input>, crate::state::StateError> {
        let mut cell = self.input.borrow_mut();
        if cell.is_none() {
            let prepared = crate::state::input_from_manifests(self.objects, self.catalogue, Some(self.region))?;
            let mut input = prepared.input;
            input.unavailable_offerings = self.unavailable.clone();
            input.options.now = Some(self.now);
            // Every simulation of the pass reads the same pods: their requests are read once.
            input.pod_requests = Some(std::sync::Arc::new(
                input.pods.iter().map(|p| crate::resources::pod_requests(p).unwrap_or_default()).collect(),
            ));
            *cell = Some(input);
        }
        Ok(std::cell::RefMut::map(cell, |c| c.as_mut().expect("built above")))
    }

    /// The pods bound to `node`.
    pub fn pods_on(&self, node: &str) -> impl Iterator<Item = &'a k8s_openapi::api::core::v1::Pod> + '_ {
        let objects = self.objects;
        self.pods_by_node.get(node).into_iter().flatten().map(move |&i| &objects.pods[i])
    }
}

/// The disruption methods, in upstream's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Method {
    Emptiness,
    Drift,
    MultiNodeConsolidation,
    SingleNodeConsolidation,
}

impl Method {
    pub fn reason(self) -> BudgetReason {
        match self {
            Method::Emptiness => BudgetReason::Empty,
            Method::Drift => BudgetReason::Drifted,
            Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => BudgetReason::Underutilized,
        }
    }

    /// Consolidation and emptiness wait 15 s and re-validate; drift does not.
    pub fn validates(self) -> bool {
        self != Method::Drift
    }
}

/// A decision to disrupt nodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    pub method: Method,
    pub reason: BudgetReason,
    /// Node names.
    pub candidates: Vec<String>,
    /// NodeClaims to launch first (empty: delete).
    pub replacements: Vec<PlannedNodeClaim>,
    /// USD per hour saved (candidates' price − the replacement's cheapest offering).
    pub savings_per_hour: f64,
    /// Why: the drift reason, or the consolidation's.
    pub why: String,
}

impl Command {
    pub fn decision(&self) -> &'static str {
        if self.replacements.is_empty() {
            "delete"
        } else {
            "replace"
        }
    }
}

/// Why a method produced nothing this pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Declined {
    pub method: Method,
    /// Node → why (in JSON, the reason's text).
    pub nodes: Vec<(String, Decline)>,
}

/// One pass of the disruption loop.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pass {
    pub command: Option<Command>,
    pub declined: Vec<Declined>,
    /// Nodes that are no candidate, with every blocker.
    pub blocked: Vec<(String, Vec<Blocker>)>,
}

/// Runs the methods in order; the first command wins.
pub fn decide(view: &View<'_>) -> Pass {
    let mut pass = Pass { command: None, declined: Vec::new(), blocked: Vec::new() };
    let mut graceful = Vec::new();
    for i in 0..view.nodes.len() {
        match candidates::candidate(view, i, false) {
            Ok(c) => graceful.push(c),
            Err(b) => pass.blocked.push((view.nodes[i].node.clone(), b)),
        }
    }
    let eventual: Vec<Candidate> =
        (0..view.nodes.len()).filter_map(|i| candidates::candidate(view, i, true).ok()).collect();
    let methods: [(Method, &[Candidate]); 4] = [
        (Method::Emptiness, &graceful),
        (Method::Drift, &eventual),
        (Method::MultiNodeConsolidation, &graceful),
        (Method::SingleNodeConsolidation, &graceful),
    ];
    for (method, cands) in methods {
        match methods::run(view, method, cands) {
            Ok(command) => {
                pass.command = Some(command);
                break;
            }
            Err(nodes) => {
                if !nodes.is_empty() {
                    pass.declined.push(Declined { method, nodes });
                }
            }
        }
    }
    pass
}

/// NodeClaims whose `expireAfter` has passed (deleted regardless of budgets,
/// do-not-disrupt and PDBs; the drain still honours the latter until the grace period).
pub fn expired(objects: &Manifests, created: impl Fn(&str) -> Option<i64>, now: i64) -> Vec<String> {
    objects
        .nodeclaims
        .iter()
        .filter(|nc| nc.metadata.deletion_timestamp.is_none())
        .filter(|nc| {
            let Some(after) = nc.spec.expire_after.as_seconds() else { return false };
            created(nc.name()).is_some_and(|c| now >= c + after as i64)
        })
        .map(|nc| nc.name().to_string())
        .collect()
}
