//! `kubectl karpenter simulate -f FILE [-f FILE …] [--region R] [-o text|json]`: one provisioning
//! round over every pending pod in the files, offline. Adapter only: loading, merging files and
//! rendering; the round and its explanations come from `carpentry_core::scheduling`.

use std::fmt::Write as _;

use carpentry_core::catalogue::Catalogue;
use carpentry_core::disruption::explain::{NodeExplanation, NodePoolExplanation};
use carpentry_core::manifest::Manifests;
use carpentry_core::scheduling::{self, explain, Results};
use carpentry_core::simulation;
use carpentry_core::state;
use serde::Serialize;

use crate::{input, Failure};

#[derive(clap::Args)]
pub struct SimulateArgs {
    /// Manifests (NodePools, EC2NodeClasses, Nodes, NodeClaims, pods and workloads, DaemonSets, a
    /// Scenario); repeat for several files; `-` reads stdin.
    #[arg(short = 'f', long = "filename", required = true)]
    files: Vec<String>,
    /// AWS region (default: the Scenario's, else us-east-1).
    #[arg(long)]
    region: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Run the cluster over simulated time up to this duration after the start (e.g. 90s, 10m,
    /// 1h30m), carrying out the Scenario's steps, and print the event log and the state reached;
    /// without it, one provisioning round.
    #[arg(long, value_name = "DURATION")]
    until: Option<String>,
    /// With --until: explain `pod/[NAMESPACE/]NAME` (where it stands; if pending, what a round now
    /// would do with it or why it cannot), `node/NAME` (why it stays or goes, and what removing it
    /// would do) or `nodepool/NAME` (usage against limits, disruptions allowed now and over the
    /// next 7 days) at the end time; repeatable.
    #[arg(long, value_name = "KIND/NAME", requires = "until")]
    explain: Vec<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Output {
    Text,
    Json,
}

/// The stable JSON shape (docs/simulate.md).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    region: &'a str,
    node_claims: Vec<NodeClaimRow<'a>>,
    existing_nodes: Vec<ExistingRow<'a>>,
    unschedulable: Vec<UnschedulableRow<'a>>,
    deferred: Vec<DeferredRow<'a>>,
    ignored: Vec<IgnoredRow<'a>>,
    skipped_node_pools: &'a [scheduling::SkippedNodePool],
    relaxed: Vec<RelaxedRow<'a>>,
    notes: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeClaimRow<'a> {
    node_pool: &'a str,
    instance_type: Option<&'a str>,
    capacity_type: Option<&'a str>,
    zone: Option<&'a str>,
    price: Option<f64>,
    price_synthetic: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reservation_id: Option<&'a str>,
    instance_type_options: &'a [String],
    pods: Vec<String>,
    requests: std::collections::BTreeMap<&'a str, String>,
    labels: &'a std::collections::BTreeMap<String, String>,
    requirements: &'a [carpentry_core::requirements::NodeSelectorRequirementWithMinValues],
    min_values_relaxed: bool,
}

#[derive(Serialize)]
struct ExistingRow<'a> {
    name: &'a str,
    pods: Vec<String>,
}

#[derive(Serialize)]
struct RelaxedRow<'a> {
    pod: String,
    relaxations: &'a [carpentry_core::scheduling::explain::Relaxation],
}

#[derive(Serialize)]
struct IgnoredRow<'a> {
    pod: String,
    reason: String,
    detail: &'a carpentry_core::scheduling::explain::IgnoreReason,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeferredRow<'a> {
    pod: String,
    reason: String,
    node_pool: &'a str,
    conflict: &'a explain::ReservationConflict,
}

#[derive(Serialize)]
struct UnschedulableRow<'a> {
    pod: String,
    reason: String,
    explanation: &'a explain::PodExplanation,
}

pub fn run(args: SimulateArgs) -> Result<(), Failure> {
    let mut manifests = Manifests::default();
    for file in &args.files {
        let m = input::load(file)?;
        manifests.merge(m).map_err(|e| Failure::Input(format!("{file}: {e}")))?;
    }
    let mut notes: Vec<String> = manifests.convert_legacy().into_iter().map(|n| n.on_load()).collect();
    if let Some(until) = &args.until {
        return run_over_time(&manifests, &args, until, notes);
    }
    let prepared = state::input_from_manifests(&manifests, Catalogue::embedded(), args.region.as_deref())?;
    notes.extend(prepared.notes.iter().cloned());
    let results = scheduling::schedule(&prepared.input);
    notes.extend(results.notes.iter().cloned());
    match args.output {
        Output::Json => {
            let report = report(&prepared.region, &results, notes);
            println!("{}", serde_json::to_string_pretty(&report).map_err(|e| Failure::Other(e.into()))?);
        }
        Output::Text => {
            for n in &notes {
                eprintln!("note: {n}");
            }
            print!("{}", text(&results));
        }
    }
    if results.unschedulable.is_empty() && results.deferred.is_empty() {
        Ok(())
    } else {
        Err(Failure::Exit(1))
    }
}

fn report<'a>(region: &'a str, r: &'a Results, notes: Vec<String>) -> Report<'a> {
    Report {
        region,
        node_claims: r
            .nodeclaims
            .iter()
            .map(|nc| NodeClaimRow {
                node_pool: &nc.nodepool,
                instance_type: nc.launch.as_ref().map(|l| l.instance_type.as_str()),
                capacity_type: nc.launch.as_ref().map(|l| l.capacity_type.as_str()),
                zone: nc.launch.as_ref().map(|l| l.zone.as_str()),
                price: nc.launch.as_ref().map(|l| l.price),
                price_synthetic: nc.launch.as_ref().is_some_and(|l| l.price_synthetic),
                reservation_id: nc.launch.as_ref().and_then(|l| l.reservation_id.as_deref()),
                instance_type_options: &nc.instance_type_options,
                pods: nc.pods.iter().map(ToString::to_string).collect(),
                requests: nc.requests.iter().map(|(k, v)| (k.as_str(), v.to_string())).collect(),
                labels: &nc.labels,
                requirements: &nc.requirements,
                min_values_relaxed: nc.min_values_relaxed,
            })
            .collect(),
        existing_nodes: r
            .existing_nodes
            .iter()
            .map(|n| ExistingRow { name: &n.name, pods: n.pods.iter().map(ToString::to_string).collect() })
            .collect(),
        unschedulable: r
            .unschedulable
            .iter()
            .map(|u| UnschedulableRow {
                pod: u.pod.to_string(),
                reason: u.explanation.headline(),
                explanation: &u.explanation,
            })
            .collect(),
        deferred: r
            .deferred
            .iter()
            .map(|d| DeferredRow {
                pod: d.pod.to_string(),
                reason: d.headline(),
                node_pool: &d.nodepool,
                conflict: &d.conflict,
            })
            .collect(),
        ignored: r
            .ignored
            .iter()
            .map(|i| IgnoredRow { pod: i.pod.to_string(), reason: i.reason.to_string(), detail: &i.reason })
            .collect(),
        skipped_node_pools: &r.skipped_nodepools,
        relaxed: r.relaxed.iter().map(|x| RelaxedRow { pod: x.pod.to_string(), relaxations: &x.relaxations }).collect(),
        notes,
    }
}

fn text(r: &Results) -> String {
    let mut s = String::new();
    let total: f64 = r.nodeclaims.iter().filter_map(|n| n.launch.as_ref()).fold(0.0, |sum, l| sum + l.price);
    let _ = writeln!(s, "NodeClaims: {} (${total:.4}/h)", r.nodeclaims.len());
    for nc in &r.nodeclaims {
        match &nc.launch {
            Some(l) => {
                let _ = writeln!(
                    s,
                    "  {}: {} {}{} {} ${:.4}/h{} ({} option{})",
                    nc.nodepool,
                    l.instance_type,
                    l.capacity_type,
                    l.reservation_id.as_ref().map(|id| format!(" ({id})")).unwrap_or_default(),
                    l.zone,
                    l.price,
                    if l.price_synthetic { " (synthetic spot price)" } else { "" },
                    nc.instance_type_options.len(),
                    if nc.instance_type_options.len() == 1 { "" } else { "s" }
                );
            }
            None => {
                let _ = writeln!(s, "  {}: no launchable offering", nc.nodepool);
            }
        }
        let pods: Vec<String> = nc.pods.iter().map(ToString::to_string).collect();
        let _ = writeln!(s, "    pods: {}", pods.join(", "));
    }
    if !r.existing_nodes.is_empty() {
        let _ = writeln!(s, "Existing nodes:");
        for n in &r.existing_nodes {
            let pods: Vec<String> = n.pods.iter().map(ToString::to_string).collect();
            let _ = writeln!(s, "  {}: {}", n.name, pods.join(", "));
        }
    }
    if !r.relaxed.is_empty() {
        let _ = writeln!(s, "Relaxed to place:");
        for x in &r.relaxed {
            let steps: Vec<String> = x.relaxations.iter().map(ToString::to_string).collect();
            let _ = writeln!(s, "  {}: {}", x.pod, steps.join("; "));
        }
    }
    if !r.unschedulable.is_empty() {
        let _ = writeln!(s, "Unschedulable: {}", r.unschedulable.len());
        for u in &r.unschedulable {
            for line in explain::render_unschedulable(u).lines() {
                let _ = writeln!(s, "  {line}");
            }
        }
    }
    if !r.deferred.is_empty() {
        let _ = writeln!(s, "Deferred to a later round: {}", r.deferred.len());
        for d in &r.deferred {
            let _ = write!(s, "  {}", explain::render_deferred(d));
        }
    }
    if !r.ignored.is_empty() {
        let _ = writeln!(s, "Ignored: {}", r.ignored.len());
        for i in &r.ignored {
            let _ = writeln!(s, "  {}: {}", i.pod, i.reason);
        }
    }
    for np in &r.skipped_nodepools {
        let _ = writeln!(s, "NodePool {} not used: {}", np.nodepool, np.why);
    }
    s
}

/// The JSON shape of `simulate --until` (docs/simulate.md).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TimelineReport<'a> {
    kind: &'static str,
    region: &'a str,
    start: String,
    time: simulation::SimTime,
    timings: &'a simulation::Timings,
    events: &'a [simulation::Event],
    rounds: &'a [simulation::RoundSummary],
    /// `nodes`, `pending`, `running`, `pricePerHour` (and `at`, the same as `time`).
    #[serde(flatten)]
    state: simulation::Snapshot,
    cost: simulation::CostSummary,
    disruptions: &'a [simulation::Disruption],
    /// Every NodePool's usage and budgets at the end time.
    node_pools: Vec<NodePoolExplanation>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    explanations: Vec<Explained>,
    notes: Vec<String>,
}

/// An `--explain` answer.
#[derive(Serialize)]
#[serde(tag = "kind")]
enum Explained {
    Pod { pod: String, standing: simulation::PodStanding },
    Node(NodeExplanation),
    NodePool(NodePoolExplanation),
}

/// Resolves `--explain` arguments against the simulation at its end time.
fn explanations(sim: &simulation::Simulation, asked: &[String]) -> Result<Vec<Explained>, Failure> {
    asked
        .iter()
        .map(|a| {
            let (kind, name) = a.split_once('/').unwrap_or(("", a));
            match kind.to_ascii_lowercase().as_str() {
                "pod" | "pods" | "po" => {
                    let (namespace, pod) = name.split_once('/').unwrap_or(("default", name));
                    let standing = sim.explain_pod(namespace, pod).ok_or_else(|| {
                        Failure::Input(format!("--explain {a}: no pod {namespace}/{pod} at {}", sim.now()))
                    })?;
                    Ok(Explained::Pod { pod: format!("{namespace}/{pod}"), standing })
                }
                "node" | "nodes" | "no" => sim.explain_node(name).map(Explained::Node).ok_or_else(|| {
                    Failure::Input(format!(
                        "--explain {a}: no node {name:?} managed by Karpenter at {} (see the node table)",
                        sim.now()
                    ))
                }),
                "nodepool" | "nodepools" => sim
                    .explain_nodepool(name)
                    .map(Explained::NodePool)
                    .ok_or_else(|| Failure::Input(format!("--explain {a}: no NodePool {name:?}"))),
                _ => Err(Failure::Input(format!(
                    "--explain {a:?}: expected pod/[NAMESPACE/]NAME, node/NAME or nodepool/NAME"
                ))),
            }
        })
        .collect()
}

fn run_over_time(
    manifests: &Manifests,
    args: &SimulateArgs,
    until: &str,
    mut notes: Vec<String>,
) -> Result<(), Failure> {
    let end = carpentry_core::manifest::scenario::parse_offset(until).ok_or_else(|| {
        Failure::Input(format!("--until {until:?} is not a duration after the start (e.g. 90s, 10m, 1h30m)"))
    })?;
    let mut sim = simulation::Simulation::new(manifests, args.region.as_deref(), simulation::Timings::default())
        .map_err(|e| Failure::Input(carpentry_core::error_chain(&e)))?;
    sim.run_until(simulation::SimTime(end));
    notes.extend(sim.notes().map(str::to_string));
    let explained = explanations(&sim, &args.explain)?;
    let node_pools: Vec<NodePoolExplanation> =
        manifests.nodepools.iter().filter_map(|np| sim.explain_nodepool(np.name())).collect();
    let state = sim.snapshot();
    let pending = state.pending.len();
    match args.output {
        Output::Json => {
            let report = TimelineReport {
                kind: "Simulation",
                region: sim.region(),
                start: sim.clock().rfc3339(simulation::SimTime::ZERO),
                time: sim.now(),
                timings: sim.timings(),
                events: sim.events(),
                rounds: sim.rounds(),
                state,
                cost: sim.cost(),
                disruptions: sim.disruptions(),
                node_pools,
                explanations: explained,
                notes,
            };
            println!("{}", serde_json::to_string_pretty(&report).map_err(|e| Failure::Other(e.into()))?);
        }
        Output::Text => {
            for n in &notes {
                eprintln!("note: {n}");
            }
            print!("{}", timeline_text(&sim, &state, &node_pools, &explained));
        }
    }
    if pending == 0 {
        Ok(())
    } else {
        Err(Failure::Exit(1))
    }
}

fn timeline_text(
    sim: &simulation::Simulation,
    state: &simulation::Snapshot,
    node_pools: &[NodePoolExplanation],
    explained: &[Explained],
) -> String {
    use carpentry_core::disruption::explain::{render_node, render_nodepool};
    let mut out = String::new();
    let _ = writeln!(out, "EVENTS (start {})", sim.clock().rfc3339(simulation::SimTime::ZERO));
    for e in sim.events() {
        let _ = writeln!(out, "{e}");
    }
    let cost = sim.cost();
    let _ = writeln!(
        out,
        "\nAT {}: {} node(s), {} pod(s) running, {} pending; ${:.4}/hour (${:.2}/month); spent ${:.4}",
        state.at,
        state.nodes.len(),
        state.running,
        state.pending.len(),
        cost.per_hour,
        cost.per_month,
        cost.spent
    );
    if !state.nodes.is_empty() {
        let _ = writeln!(
            out,
            "{:<20} {:<14} {:<12} {:<14} {:<11} {:<10} {:>9}  PODS",
            "NODE", "NODEPOOL", "STATE", "INSTANCE TYPE", "ZONE", "CAPACITY", "$/HOUR"
        );
        for n in &state.nodes {
            let price = if n.price_synthetic { format!("{:.4}*", n.price) } else { format!("{:.4}", n.price) };
            let _ = writeln!(
                out,
                "{:<20} {:<14} {:<12} {:<14} {:<11} {:<10} {:>9}  {}",
                n.name,
                n.nodepool.as_deref().unwrap_or("-"),
                format!("{:?}", n.state),
                n.instance_type.as_deref().unwrap_or("-"),
                n.zone.as_deref().unwrap_or("-"),
                n.capacity_type.as_deref().unwrap_or("-"),
                price,
                n.pods.len()
            );
        }
        if state.nodes.iter().any(|n| n.price_synthetic) {
            let _ = writeln!(out, "* synthetic spot price (core/data/PROVENANCE.md)");
        }
    }
    if !state.pending.is_empty() {
        let _ = writeln!(out, "PENDING: {}", state.pending.join(", "));
    }
    if !sim.disruptions().is_empty() {
        let _ = writeln!(out, "\nDISRUPTIONS");
        for d in sim.disruptions() {
            let replacements =
                if d.replacements.is_empty() { String::new() } else { format!(" → {}", d.replacements.join(", ")) };
            let savings = if d.savings_per_hour > 0.0 {
                format!(", saves ${:.4}/hour", d.savings_per_hour)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{:>9}  {:<13} {:<7} {}{replacements}{savings} ({})",
                d.at.to_string(),
                d.reason,
                d.decision,
                d.nodes.join(", "),
                d.why
            );
        }
    }
    let _ = writeln!(out);
    for np in node_pools {
        out.push_str(&render_nodepool(np));
    }
    for e in explained {
        let _ = writeln!(out);
        match e {
            Explained::Pod { pod, standing } => {
                let _ = writeln!(out, "Pod {pod}: {standing}");
            }
            Explained::Node(n) => out.push_str(&render_node(n)),
            // Every NodePool is above already.
            Explained::NodePool(_) => {}
        }
    }
    out
}
