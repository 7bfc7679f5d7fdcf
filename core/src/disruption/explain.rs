//! "Why won't this node go away?": every condition upstream checks before disrupting a node (the
//! checks of `candidate` and the methods' filters, one by one), each passed or
//! failed with the concrete object, and a removal simulation (where each pod would go,
//! the replacement if one is needed, the $/hour saved).

use serde::Serialize;

use super::{budgets, pdb, Candidate, View};
use crate::api::nodepool::{BudgetReason, ConsolidationPolicy};
use crate::pod::do_not_disrupt;
use crate::style::{Mark, Plain, Style};

/// One condition.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub condition: String,
    pub passed: bool,
    pub detail: String,
}

/// What removing the node would do now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removal {
    /// Pod → the existing node (or in-flight NodeClaim) it would move to.
    pub moves: Vec<(String, String)>,
    /// New NodeClaims it would need: NodePool, cheapest instance type, $/hour, pods.
    pub new_nodeclaims: Vec<NewNodeClaim>,
    /// Pods that would not schedule, with the reason.
    pub unschedulable: Vec<(String, String)>,
    /// Pods that would not be moved at all (active do-not-disrupt, a fully blocking PDB).
    pub not_moved: Vec<String>,
    /// The node's $/hour minus the new NodeClaims' (negative: removing it costs more).
    pub savings_per_hour: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewNodeClaim {
    pub nodepool: String,
    pub instance_type: Option<String>,
    pub price: Option<f64>,
    pub pods: Vec<String>,
}

/// The explanation of one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeExplanation {
    pub node: String,
    pub nodeclaim: String,
    pub nodepool: String,
    pub price: f64,
    pub checks: Vec<Check>,
    /// Every check passed for the graceful methods (emptiness, consolidation).
    pub disruptable: bool,
    /// For a drifted node: whether drift replaces it now (its checks and the Drifted budget
    /// allow it; consolidateAfter and the consolidation policy do not apply to drift).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift_replaces_now: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removal: Option<Removal>,
}

// The conditions drift shares with consolidation, by name (the checklist is their one source).
const INITIALIZED: &str = "initialized";
const NOT_DELETING: &str = "not being deleted";
const NOT_NOMINATED: &str = "not nominated";
const NODE_NOT_PROTECTED: &str = "node has no karpenter.sh/do-not-disrupt";
const NODEPOOL_EXISTS: &str = "NodePool exists";
const PODS_NOT_PROTECTED: &str = "no pod has karpenter.sh/do-not-disrupt";
const PDBS_ALLOW: &str = "PodDisruptionBudgets allow evicting its pods";
const DRIFT_BUDGET: &str = "Drifted budget allows it";

fn check(condition: &str, passed: bool, detail: impl Into<String>) -> Check {
    Check { condition: condition.into(), passed, detail: detail.into() }
}

fn time(t: i64) -> String {
    crate::api::time::format_time(t)
}

/// Explains node `index` of the view.
pub fn explain_node(view: &View<'_>, index: usize) -> NodeExplanation {
    let f = &view.nodes[index];
    let mut checks = Vec::new();
    checks.push(check(
        INITIALIZED,
        f.initialized,
        if f.initialized { "Ready, startup taints gone" } else { "not initialized yet" },
    ));
    checks.push(check(
        NOT_DELETING,
        !f.deleting,
        if f.deleting { "already being disrupted or terminated" } else { "" },
    ));
    let nominated = f.nominated_until.filter(|u| *u > view.now);
    checks.push(check(
        NOT_NOMINATED,
        nominated.is_none(),
        nominated.map(|u| format!("a provisioning round planned pods onto it; until {}", time(u))).unwrap_or_default(),
    ));
    let node = view.objects.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(&f.node));
    let protected = node.is_some_and(do_not_disrupt::node_protected);
    checks.push(check(
        NODE_NOT_PROTECTED,
        !protected,
        if protected { "the node carries karpenter.sh/do-not-disrupt: \"true\"" } else { "" },
    ));
    let nodepool = view.objects.nodepools.iter().find(|np| np.name() == f.nodepool);
    checks.push(check(
        NODEPOOL_EXISTS,
        nodepool.is_some(),
        if nodepool.is_some() { String::new() } else { format!("NodePool {} not found", f.nodepool) },
    ));
    let pods: Vec<_> = view.pods_on(&f.node).filter(|p| crate::pod::is_active(p)).collect();
    let mut dnd = Vec::new();
    let mut blocked_by_pdb = Vec::new();
    for p in &pods {
        let key = format!(
            "{}/{}",
            p.metadata.namespace.as_deref().unwrap_or("default"),
            p.metadata.name.as_deref().unwrap_or_default()
        );
        match do_not_disrupt::pod_protection(p, view.now) {
            do_not_disrupt::Protection::None => {}
            do_not_disrupt::Protection::Indefinite => dnd.push(format!("{key} (indefinitely)")),
            do_not_disrupt::Protection::Until(t) => dnd.push(format!("{key} (until {})", time(t))),
        }
        if let Some(b) = pdb::blocking(p, &view.objects.pdbs, &view.objects.pods, &view.scales) {
            blocked_by_pdb.push(format!("{key} by {}", pdb::name(b)));
        }
    }
    checks.push(check(PODS_NOT_PROTECTED, dnd.is_empty(), dnd.join(", ")));
    checks.push(check(PDBS_ALLOW, blocked_by_pdb.is_empty(), blocked_by_pdb.join(", ")));
    if let Some(np) = nodepool {
        let after = np.spec.disruption.consolidate_after.as_seconds();
        let quiet = match (after, f.last_pod_event) {
            (None, _) => check("consolidateAfter elapsed", false, "consolidateAfter: Never (consolidation disabled)"),
            (Some(a), Some(t)) if view.now < t + a as i64 => check(
                "consolidateAfter elapsed",
                false,
                format!("quiet since {}; consolidatable at {}", time(t), time(t + a as i64)),
            ),
            (Some(_), _) => check("consolidateAfter elapsed", true, ""),
        };
        checks.push(quiet);
        let empty = pods.iter().all(|p| crate::pod::daemonset_owner(p).is_some());
        let when_empty = np.spec.disruption.consolidation_policy == ConsolidationPolicy::WhenEmpty;
        checks.push(check(
            "consolidation policy allows it",
            empty || !when_empty,
            if when_empty && !empty { "consolidationPolicy: WhenEmpty and the node is not empty" } else { "" },
        ));
        let (counted, disrupting) = view.budget_counts(np.name());
        let reason = if empty { BudgetReason::Empty } else { BudgetReason::Underutilized };
        let a = budgets::allowance(np, reason, counted, disrupting, view.now);
        let binding = a.binding.and_then(|i| a.budgets.iter().find(|b| b.index == i));
        let detail = match binding {
            Some(b) => {
                let window = b.window_ends.map(|e| format!(", its window ends {}", time(e))).unwrap_or_default();
                format!(
                    "{} allowed for {} (budget #{} nodes {}{window}; {disrupting} disrupting)",
                    a.allowed,
                    reason.as_str(),
                    b.index,
                    b.nodes
                )
            }
            None => format!("no budget limits {}", reason.as_str()),
        };
        checks.push(check("disruption budget allows it", a.allowed > 0, detail));
    }
    let mut drift_replaces_now = None;
    if let Some((why, since)) = f.drifted {
        checks.push(check(
            "drifted (drift replaces it regardless of consolidation)",
            true,
            format!("{why} since {}", time(since)),
        ));
        if let Some(np) = nodepool {
            let (counted, disrupting) = view.budget_counts(np.name());
            let a = budgets::allowance(np, BudgetReason::Drifted, counted, disrupting, view.now);
            checks.push(check(
                DRIFT_BUDGET,
                a.allowed > 0,
                format!("{} allowed for Drifted ({disrupting} disrupting)", a.allowed),
            ));
            // The checks drift shares with consolidation (upstream's candidate filter), and its
            // own budget. upstream: for drift (the eventual class) a NodeClaim with a
            // terminationGracePeriod is a candidate whatever its pods say (as
            // `candidates::candidate`); the drain waits for them until the grace period.
            let mut shared =
                vec![INITIALIZED, NOT_DELETING, NOT_NOMINATED, NODE_NOT_PROTECTED, NODEPOOL_EXISTS, DRIFT_BUDGET];
            if !f.termination_grace_period {
                shared.extend([PODS_NOT_PROTECTED, PDBS_ALLOW]);
            }
            debug_assert!(shared.iter().all(|name| checks.iter().any(|c| c.condition == *name)));
            drift_replaces_now =
                Some(checks.iter().filter(|c| shared.contains(&c.condition.as_str())).all(|c| c.passed));
        }
    }
    let removal = nodepool.map(|np| {
        let candidate = Candidate {
            index,
            nodepool: np.clone(),
            reschedulable: pods
                .iter()
                .filter(|p| crate::pod::daemonset_owner(p).is_none())
                .map(|p| {
                    format!(
                        "{}/{}",
                        p.metadata.namespace.as_deref().unwrap_or("default"),
                        p.metadata.name.as_deref().unwrap_or_default()
                    )
                })
                .collect(),
            disruption_cost: 1.0,
        };
        removal(view, &candidate)
    });
    // A Balanced NodePool scores the move: what removing it saves against what it disrupts.
    if let (Some(np), Some(r)) = (nodepool, &removal) {
        if np.spec.disruption.consolidation_policy == ConsolidationPolicy::Balanced {
            let all: Vec<Candidate> =
                (0..view.nodes.len()).filter_map(|i| super::candidates::candidate(view, i, false).ok()).collect();
            let totals = super::balanced::totals(view, &all);
            let cost = all.iter().find(|c| c.index == index).map_or(1.0, |c| c.disruption_cost);
            let score = totals.get(np.name()).map(|t| super::balanced::score_move(r.savings_per_hour, cost, t));
            checks.push(match score {
                Some(s) => check("Balanced policy approves the move", s.approved(), s.to_string()),
                None => check("Balanced policy approves the move", false, "the node is not a candidate to score"),
            });
        }
    }
    let disruptable = checks.iter().filter(|c| c.condition != DRIFT_BUDGET).all(|c| c.passed);
    NodeExplanation {
        node: f.node.clone(),
        nodeclaim: f.nodeclaim.clone(),
        nodepool: f.nodepool.clone(),
        price: f.price,
        checks,
        disruptable,
        drift_replaces_now,
        removal,
    }
}

fn removal(view: &View<'_>, c: &Candidate) -> Removal {
    let moving: std::collections::BTreeSet<&str> = c.reschedulable.iter().map(String::as_str).collect();
    let Ok((results, _)) = super::consolidation::simulate(view, &[c]) else {
        return Removal {
            moves: Vec::new(),
            new_nodeclaims: Vec::new(),
            unschedulable: Vec::new(),
            not_moved: Vec::new(),
            savings_per_hour: 0.0,
        };
    };
    let key = |p: &crate::pod::PodRef| format!("{}/{}", p.namespace, p.name);
    let mut moves = Vec::new();
    for e in &results.existing_nodes {
        for p in &e.pods {
            if moving.contains(key(p).as_str()) {
                moves.push((key(p), e.name.clone()));
            }
        }
    }
    let new_nodeclaims: Vec<NewNodeClaim> = results
        .nodeclaims
        .iter()
        .filter(|n| n.pods.iter().any(|p| moving.contains(key(p).as_str())))
        .map(|n| NewNodeClaim {
            nodepool: n.nodepool.clone(),
            instance_type: n.launch.as_ref().map(|l| l.instance_type.clone()),
            price: n.launch.as_ref().map(|l| l.price),
            pods: n.pods.iter().map(key).collect(),
        })
        .collect();
    let unschedulable = results
        .unschedulable
        .iter()
        .filter(|u| moving.contains(key(&u.pod).as_str()))
        .map(|u| (key(&u.pod), u.explanation.headline()))
        .collect();
    let unschedulable: Vec<(String, String)> = unschedulable;
    let placed: std::collections::BTreeSet<String> = moves
        .iter()
        .map(|(p, _)| p.clone())
        .chain(new_nodeclaims.iter().flat_map(|n| n.pods.iter().cloned()))
        .chain(unschedulable.iter().map(|(p, _)| p.clone()))
        .collect();
    let not_moved = c.reschedulable.iter().filter(|p| !placed.contains(*p)).cloned().collect();
    let added: f64 = new_nodeclaims.iter().filter_map(|n| n.price).sum();
    Removal { moves, new_nodeclaims, unschedulable, not_moved, savings_per_hour: c.facts(view).price - added }
}

/// One resource of a NodePool: what its nodes hold and its limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    pub resource: String,
    pub used: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// At or over its limit: the NodePool launches nothing more that needs it.
    pub at_limit: bool,
}

/// "What may this NodePool do?": usage against limits, the disruptions its budgets allow now per
/// reason, and how that changes over the week ahead.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolExplanation {
    pub nodepool: String,
    /// Nodes its budgets count now, and those being disrupted.
    pub nodes: i64,
    pub disrupting: i64,
    pub usage: Vec<ResourceUsage>,
    /// Empty, Drifted, Underutilized, in that order.
    pub allowed: Vec<budgets::Allowance>,
    /// The next 7 days, at today's node count.
    pub timeline: Vec<budgets::BudgetSegment>,
    /// The instance types it may launch now (offerings marked unavailable left out), cheapest first.
    pub instance_types: crate::scheduling::nodeclaim_template::AllowedInstanceTypes,
    /// Its drifted nodes, oldest drift first: drift replaces them as the Drifted budget allows.
    pub drifted: Vec<DriftedNode>,
    /// Its nodes whose expireAfter runs out within the next 7 days, soonest first (expiration
    /// ignores budgets).
    pub expiring: Vec<ExpiringNode>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftedNode {
    pub node: String,
    pub reason: super::DriftReason,
    /// Since when (RFC 3339).
    pub since: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpiringNode {
    pub node: String,
    /// RFC 3339.
    pub at: String,
    /// Already past: Karpenter is deleting it.
    pub expired: bool,
}

/// How far ahead a NodePool explanation looks at its budgets.
pub const BUDGET_HORIZON: i64 = 7 * 86_400;

/// Explains NodePool `name` (`None`: there is none).
pub fn explain_nodepool(view: &View<'_>, name: &str) -> Option<NodePoolExplanation> {
    let np = view.objects.nodepools.iter().find(|np| np.name() == name)?;
    let (nodes, disrupting) = view.budget_counts(name);
    let input = view.input().ok();
    let used =
        input.as_ref().and_then(|input| crate::scheduling::nodepool_usage(input).remove(name)).unwrap_or_default();
    let instance_types = input
        .as_ref()
        .and_then(|input| input.nodepools.iter().find(|p| p.nodepool.name() == name))
        .and_then(|p| {
            let template = crate::scheduling::NodeClaimTemplate::new(&p.nodepool).ok()?;
            Some(template.prefilter(&p.instance_types).allowed())
        })
        .unwrap_or_default();
    let mut names: Vec<&String> = used.keys().chain(np.spec.limits.keys()).collect();
    names.sort();
    names.dedup();
    let usage = names
        .into_iter()
        .map(|resource| {
            let u = used.get(resource).copied().unwrap_or(crate::quantity::Quantity::ZERO);
            let limit = np.spec.limits.get(resource).copied();
            ResourceUsage {
                resource: resource.clone(),
                used: u.to_string(),
                limit: limit.map(|l| l.to_string()),
                at_limit: limit.is_some_and(|l| u >= l),
            }
        })
        .collect();
    let allowed = [BudgetReason::Empty, BudgetReason::Drifted, BudgetReason::Underutilized]
        .into_iter()
        .map(|reason| budgets::allowance(np, reason, nodes, disrupting, view.now))
        .collect();
    let timeline = budgets::timeline(np, nodes, disrupting, view.now, BUDGET_HORIZON);
    let mine = || view.nodes.iter().filter(|f| f.nodepool == name);
    let mut drifted: Vec<(i64, DriftedNode)> = mine()
        .filter_map(|f| {
            let (reason, since) = f.drifted?;
            Some((since, DriftedNode { node: f.node.clone(), reason, since: time(since) }))
        })
        .collect();
    drifted.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.node.cmp(&b.1.node)));
    let mut expiring: Vec<(i64, ExpiringNode)> = mine()
        .filter_map(|f| {
            let at = f.expires_at.filter(|at| *at <= view.now + BUDGET_HORIZON)?;
            Some((at, ExpiringNode { node: f.node.clone(), at: time(at), expired: at <= view.now }))
        })
        .collect();
    expiring.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.node.cmp(&b.1.node)));
    Some(NodePoolExplanation {
        nodepool: name.to_string(),
        nodes,
        disrupting,
        usage,
        allowed,
        timeline,
        instance_types,
        drifted: drifted.into_iter().map(|(_, d)| d).collect(),
        expiring: expiring.into_iter().map(|(_, e)| e).collect(),
    })
}

/// The explanation as text: one line per fact.
pub fn render_nodepool(e: &NodePoolExplanation) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "NodePool {}: {} node(s) counted, {} disrupting", e.nodepool, e.nodes, e.disrupting);
    // Resources without a limit are listed when users size by them (the JSON has them all).
    let sized_by =
        ["cpu", "memory", "nodes", "nvidia.com/gpu", "amd.com/gpu", "aws.amazon.com/neuron", "habana.ai/gaudi"];
    for u in e.usage.iter().filter(|u| u.limit.is_some() || (sized_by.contains(&u.resource.as_str()) && u.used != "0"))
    {
        let limit = match &u.limit {
            Some(l) if u.at_limit => format!(" of {l} (at its limit: nothing more is launched that needs it)"),
            Some(l) => format!(" of {l}"),
            None => " (no limit)".to_string(),
        };
        let _ = writeln!(s, "  {}: {}{limit}", u.resource, u.used);
    }
    for a in &e.allowed {
        let why = match a.binding.and_then(|i| a.budgets.iter().find(|b| b.index == i)) {
            Some(b) => {
                let window = b.window_ends.map(|t| format!(", window ends {}", time(t))).unwrap_or_default();
                format!("{} (budget #{} nodes {}{window})", a.allowed, b.index, b.nodes)
            }
            None => "no limit".to_string(),
        };
        let _ = writeln!(s, "  allowed now for {}: {why}", a.reason.as_str());
    }
    let t = &e.instance_types;
    let _ = writeln!(s, "  instance types allowed: {} ({} left out)", t.count, t.rejected);
    if let Some(shortfall) = &t.min_values_shortfall {
        let _ = writeln!(s, "    minValues cannot be met ({shortfall}): nothing is launched");
    }
    for it in t.cheapest.iter().take(5) {
        let _ = writeln!(
            s,
            "    {} ({} vCPU, {}): ${:.4}/hour {} in {}{}",
            it.name,
            it.cpu,
            it.memory,
            it.price,
            it.capacity_type,
            it.zone,
            if it.price_synthetic { " (synthetic spot price)" } else { "" }
        );
    }
    if !e.drifted.is_empty() {
        let _ = writeln!(s, "  drifted ({}), replaced as the Drifted budget allows:", e.drifted.len());
        for d in &e.drifted {
            let _ = writeln!(s, "    {}: {} (since {})", d.node, d.reason, d.since);
        }
    }
    if !e.expiring.is_empty() {
        let _ = writeln!(s, "  expiring within 7 days ({}), regardless of budgets:", e.expiring.len());
        for x in &e.expiring {
            let when = if x.expired { "expired at" } else { "expires at" };
            let _ = writeln!(s, "    {}: {when} {}", x.node, x.at);
        }
    }
    let _ = writeln!(s, "  budgets over the next 7 days (Empty / Drifted / Underutilized):");
    let n = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    for seg in &e.timeline {
        let _ = writeln!(
            s,
            "    {} → {}: {} / {} / {}",
            time(seg.from),
            time(seg.to),
            n(seg.empty),
            n(seg.drifted),
            n(seg.underutilized)
        );
    }
    s
}

/// What happens to a node, in one word (from [`NodeExplanation::verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NodeVerdict {
    /// Drifted, and drift replaces it now (its checks and the Drifted budget allow it).
    DriftReplacesNow,
    /// Drifted, but a check holds its replacement back.
    DriftHeldBack,
    /// Every check passes and removing it saves money: consolidation may take it.
    Consolidatable,
    /// Every check passes, but removing it would save nothing: consolidation leaves it.
    SavesNothing,
    /// A check fails: it stays.
    Stays,
}

impl NodeVerdict {
    /// The verdict as the predicate of a sentence about the node ("Node x … is drifted: …").
    pub fn describe(self) -> &'static str {
        match self {
            NodeVerdict::DriftReplacesNow => "is drifted: drift replaces it now (the checks drift makes pass)",
            NodeVerdict::DriftHeldBack => "is drifted, but a check holds its replacement back",
            NodeVerdict::Consolidatable => "passes every check, and removing it saves money: consolidation may take it",
            NodeVerdict::SavesNothing => {
                "passes every check, but removing it would save nothing: consolidation leaves it"
            }
            NodeVerdict::Stays => "stays: a check fails",
        }
    }
}

impl NodeExplanation {
    /// Drift first (its checks differ); else consolidation, which takes a node only when every check
    /// passes and removing it saves money (upstream `computeConsolidation` refuses a replacement
    /// that is not cheaper, and a delete of a node that costs nothing saves nothing).
    pub fn verdict(&self) -> NodeVerdict {
        let saves = self.removal.as_ref().map_or(0.0, |r| r.savings_per_hour);
        match (self.drift_replaces_now, self.disruptable) {
            (Some(true), _) => NodeVerdict::DriftReplacesNow,
            (Some(false), _) => NodeVerdict::DriftHeldBack,
            (None, true) if saves > 0.0 => NodeVerdict::Consolidatable,
            (None, true) => NodeVerdict::SavesNothing,
            (None, false) => NodeVerdict::Stays,
        }
    }
}

/// A node's explanation as text: the checklist, then what removing it would do.
pub fn render_node(e: &NodeExplanation) -> String {
    render_node_styled(e, &Plain)
}

/// [`render_node`] with each check's mark passed through `style`.
pub fn render_node_styled(e: &NodeExplanation, style: &dyn Style) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Node {} (NodeClaim {}, NodePool {}, ${:.4}/hour) {}:",
        e.node,
        e.nodeclaim,
        e.nodepool,
        e.price,
        e.verdict().describe()
    );
    for c in &e.checks {
        let mark = if c.passed { style.mark(Mark::Pass, "ok  ") } else { style.mark(Mark::Fail, "FAIL") };
        let detail = if c.detail.is_empty() { String::new() } else { format!(": {}", c.detail) };
        let _ = writeln!(s, "  [{mark}] {}{detail}", c.condition);
    }
    if let Some(r) = &e.removal {
        let _ = writeln!(s, "  if it were removed now:");
        for (pod, to) in &r.moves {
            let _ = writeln!(s, "    {pod} → {to}");
        }
        for n in &r.new_nodeclaims {
            let _ = writeln!(
                s,
                "    a new {} NodeClaim ({}, ${:.4}/hour) for {}",
                n.nodepool,
                n.instance_type.as_deref().unwrap_or("no launchable offering"),
                n.price.unwrap_or(0.0),
                n.pods.join(", ")
            );
        }
        for (pod, why) in &r.unschedulable {
            let _ = writeln!(s, "    {pod} would not schedule: {why}");
        }
        if !r.not_moved.is_empty() {
            let _ = writeln!(s, "    not moved: {}", r.not_moved.join(", "));
        }
        if r.savings_per_hour < 0.0 {
            let _ = writeln!(s, "    costs ${:.4}/hour more", -r.savings_per_hour);
        } else {
            let _ = writeln!(s, "    saves ${:.4}/hour", r.savings_per_hour);
        }
    }
    s
}
