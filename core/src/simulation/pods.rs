//! "Why is this pod pending?" at a moment of the simulation: where the pod is, and for a pending
//! pod what a provisioning round now would do with it — the scheduler's own answer
//! ([`crate::scheduling::schedule`] over the cluster as it is, with the unavailable offerings
//! Karpenter knows of), not a separate rule.

use serde::Serialize;

use crate::scheduling::explain::Unschedulable;

use super::Simulation;

/// Where a pod stands now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum PodStanding {
    /// Bound to a node.
    Running { node: String },
    /// Ran to completion on a node (`Succeeded` or `Failed`): it takes no room and is not placed
    /// again.
    Completed { node: String, phase: String },
    /// Pending; a round now would place it on this existing node or in-flight NodeClaim (it binds
    /// when that node is Ready and has room).
    #[serde(rename_all = "camelCase")]
    WouldBind { target: String },
    /// Pending; a round now would launch a NodeClaim for it.
    #[serde(rename_all = "camelCase")]
    WouldLaunch { nodepool: String, instance_type: Option<String>, price: Option<f64>, options: usize },
    /// Pending and no NodePool can take it: the failing constraints, NodePool by NodePool.
    Unschedulable { headline: String, explanation: Box<Unschedulable> },
    /// Waiting for reserved capacity (a later round).
    Deferred { headline: String },
    /// Karpenter leaves it alone (not rejected by kube-scheduler, a DaemonSet pod, invalid).
    Ignored { reason: String },
}

impl std::fmt::Display for PodStanding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PodStanding::Running { node } => write!(f, "running on {node}"),
            PodStanding::Completed { node, phase } => write!(f, "completed ({phase}) on {node}"),
            PodStanding::WouldBind { target } => {
                write!(f, "pending; a provisioning round now places it on {target}, where it binds once that node is Ready")
            }
            PodStanding::WouldLaunch { nodepool, instance_type, price, options } => write!(
                f,
                "pending; a provisioning round now launches a NodeClaim of NodePool {nodepool} for it ({} option(s), cheapest {}{})",
                options,
                instance_type.as_deref().unwrap_or("none launchable"),
                price.map(|p| format!(" at ${p:.4}/hour")).unwrap_or_default()
            ),
            PodStanding::Unschedulable { explanation, .. } => {
                f.write_str(&crate::scheduling::explain::render_unschedulable(explanation))
            }
            PodStanding::Deferred { headline } => write!(f, "pending; deferred to a later round: {headline}"),
            PodStanding::Ignored { reason } => write!(f, "pending; Karpenter ignores it: {reason}"),
        }
    }
}

/// "Why is this pod pending?" in full: where the pod stands (the round's own answer) and, for a
/// pending pod, the pod checked on its own against every existing node and NodePool (the grid),
/// the NodeClaim the round would launch for it and the relaxations it needed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReport {
    /// `namespace/name`.
    pub pod: String,
    pub standing: PodStanding,
    /// For a pending pod Karpenter provisions for: every existing node's and NodePool's answer
    /// for it alone, before the round places anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<crate::scheduling::explain::PodEvaluation>,
    /// For a pod the round launches a NodeClaim for: that NodeClaim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodeclaim: Option<NodeClaimPlan>,
    /// The preferences relaxed to place it (or, if it cannot be placed, tried).
    pub relaxations: Vec<crate::scheduling::explain::Relaxation>,
}

/// The NodeClaim a round would launch for a pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimPlan {
    pub nodepool: String,
    /// Pods the round puts on it (this one included).
    pub pods: usize,
    /// How many instance types it may launch as.
    pub options: usize,
    /// The cheapest of them (at most 10), each at its cheapest offering the NodeClaim allows.
    pub cheapest: Vec<TypePrice>,
    /// What CreateFleet would launch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch: Option<crate::scheduling::cloudprovider::Launch>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TypePrice {
    pub instance_type: String,
    /// USD per hour.
    pub price: f64,
}

/// Explains pod `namespace/name` on a cluster state as it is (a round's input: bound pods stay
/// where they are); `None`: no such pod.
pub fn report_pod(mut input: crate::state::Input, namespace: &str, name: &str) -> Option<PodReport> {
    let is_it = |p: &crate::pod::PodRef| p.namespace == namespace && p.name == name;
    let pod = input.pods.iter().find(|p| {
        p.metadata.name.as_deref() == Some(name) && p.metadata.namespace.as_deref().unwrap_or("default") == namespace
    })?;
    let key = format!("{namespace}/{name}");
    if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()) {
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        let standing = match phase.as_str() {
            "Succeeded" | "Failed" => PodStanding::Completed { node, phase },
            _ => PodStanding::Running { node },
        };
        return Some(PodReport { pod: key, standing, evaluation: None, nodeclaim: None, relaxations: Vec::new() });
    }
    input.options.evaluate = Some(crate::pod::PodRef { namespace: namespace.into(), name: name.into() });
    let results = crate::scheduling::schedule(&input);
    let mut report = PodReport {
        pod: key,
        standing: standing(&results, &is_it),
        evaluation: results.evaluation.clone(),
        nodeclaim: None,
        relaxations: Vec::new(),
    };
    if let Some(u) = results.unschedulable.iter().find(|u| is_it(&u.pod)) {
        report.relaxations = u.explanation.relaxations.clone();
    } else if let Some(r) = results.relaxed.iter().find(|r| is_it(&r.pod)) {
        report.relaxations = r.relaxations.clone();
    }
    if let Some(c) = results.nodeclaims.iter().find(|c| c.pods.iter().any(is_it)) {
        report.nodeclaim = Some(plan(&input, c));
    }
    Some(report)
}

/// The planned NodeClaim with its cheapest options priced.
fn plan(input: &crate::state::Input, c: &crate::scheduling::PlannedNodeClaim) -> NodeClaimPlan {
    let mut cheapest = Vec::new();
    let pool = input.nodepools.iter().find(|np| np.nodepool.name() == c.nodepool);
    if let (Some(pool), Ok(requirements)) =
        (pool, crate::requirements::Requirements::from_node_selector_requirements(&c.requirements))
    {
        let offerings = crate::catalogue::OfferingCompatibility::new(&requirements);
        for name in &c.instance_type_options {
            if let Some(it) = pool.instance_types.iter().find(|it| &it.name == name) {
                let price = offerings.cheapest(it);
                if price.is_finite() {
                    cheapest.push(TypePrice { instance_type: name.clone(), price });
                }
            }
        }
        cheapest.sort_by(|a, b| a.price.total_cmp(&b.price).then_with(|| a.instance_type.cmp(&b.instance_type)));
        cheapest.truncate(10);
    }
    NodeClaimPlan {
        nodepool: c.nodepool.clone(),
        pods: c.pods.len(),
        options: c.instance_type_options.len(),
        cheapest,
        launch: c.launch.clone(),
    }
}

/// Where the round put the pod.
fn standing(results: &crate::scheduling::Results, is_it: &dyn Fn(&crate::pod::PodRef) -> bool) -> PodStanding {
    if let Some(u) = results.unschedulable.iter().find(|u| is_it(&u.pod)) {
        return PodStanding::Unschedulable { headline: u.explanation.headline(), explanation: Box::new(u.clone()) };
    }
    if let Some(d) = results.deferred.iter().find(|d| is_it(&d.pod)) {
        return PodStanding::Deferred { headline: d.headline() };
    }
    if let Some(i) = results.ignored.iter().find(|i| is_it(&i.pod)) {
        return PodStanding::Ignored { reason: i.reason.to_string() };
    }
    if let Some(e) = results.existing_nodes.iter().find(|e| e.pods.iter().any(is_it)) {
        return PodStanding::WouldBind { target: e.name.clone() };
    }
    if let Some(c) = results.nodeclaims.iter().find(|c| c.pods.iter().any(is_it)) {
        return PodStanding::WouldLaunch {
            nodepool: c.nodepool.clone(),
            instance_type: c.launch.as_ref().map(|l| l.instance_type.clone()),
            price: c.launch.as_ref().map(|l| l.price),
            options: c.instance_type_options.len(),
        };
    }
    PodStanding::Ignored { reason: "the round did not consider it".into() }
}

impl Simulation {
    /// Where pod `namespace/name` stands now (`None`: no such pod).
    pub fn explain_pod(&self, namespace: &str, name: &str) -> Option<PodStanding> {
        self.pod_report(namespace, name).map(|r| r.standing)
    }

    /// The full explanation of pod `namespace/name` now (`None`: no such pod).
    pub fn pod_report(&self, namespace: &str, name: &str) -> Option<PodReport> {
        self.pod_index(namespace, name)?;
        let prepared = match crate::state::input_from_manifests(&self.objects, self.catalogue, Some(&self.region)) {
            Ok(p) => p,
            Err(e) => {
                return Some(PodReport {
                    pod: format!("{namespace}/{name}"),
                    standing: PodStanding::Ignored { reason: format!("no round can run: {e}") },
                    evaluation: None,
                    nodeclaim: None,
                    relaxations: Vec::new(),
                })
            }
        };
        let mut input = prepared.input;
        input.unavailable_offerings = self.known_unavailable();
        input.options.now = Some(self.clock.epoch_seconds(self.now));
        report_pod(input, namespace, name)
    }
}
