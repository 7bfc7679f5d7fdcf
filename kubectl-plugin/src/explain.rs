//! `kubectl karpenter explain pod|node|nodepool NAME`: the core's explanations of the cluster as
//! read (live or `--from-file`), rendered. The JSON shapes are documented in docs/plugin.md;
//! each has a `kind`.

use std::fmt::Write as _;

use carpentry_core::disruption::explain::{render_nodepool, NodeExplanation, NodePoolExplanation};
use carpentry_core::scheduling::explain::{failure_text, NodePoolFailure, PodEvaluation};
use carpentry_core::simulation::{self, PodReport, PodStanding, SimTime, Simulation};
use serde::Serialize;

use crate::common::{CommonArgs, Output};
use crate::render::{self, Paint};
use crate::source::{self, ClusterState};
use crate::Failure;

#[derive(clap::Args)]
pub struct ExplainArgs {
    #[command(subcommand)]
    pub what: What,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(clap::Subcommand)]
pub enum What {
    /// Where the pod runs or would go; if it cannot be scheduled, why, NodePool by NodePool.
    /// Exit 0: running or schedulable; 1: Karpenter will not place it; 2: an error.
    #[command(visible_alias = "po", alias = "pods")]
    Pod { name: String },
    /// The disruption checklist and what removing the node would do now.
    #[command(visible_alias = "no", alias = "nodes")]
    Node { name: String },
    /// Usage against limits, instance types, disruptions allowed now and over the next 7 days,
    /// drifted and expiring nodes.
    #[command(visible_alias = "np", alias = "nodepools")]
    Nodepool { name: String },
}

/// What every answer starts with.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Header<'a> {
    pub kind: &'static str,
    pub api_version: &'static str,
    /// Where the state came from (`context NAME (SERVER)` or the files).
    pub source: &'a str,
    pub region: &'a str,
    /// Where prices come from (`embedded (generated DATE)` or the `--catalog` file); spot prices
    /// are synthetic in both (marked where shown).
    pub catalogue: &'a str,
    /// The moment explained (RFC 3339): when the state was read.
    pub time: String,
    pub notes: &'a [String],
}

pub const API_VERSION: &str = "carpentry.dev/v1alpha1";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodAnswer<'a> {
    #[serde(flatten)]
    header: Header<'a>,
    /// `running`, `wouldBind`, `wouldLaunch`, `deferred`, `unschedulable` or `ignored`.
    verdict: &'static str,
    /// Running, or a round places it (now or, when deferred, next round).
    schedulable: bool,
    #[serde(flatten)]
    report: &'a PodReport,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeAnswer<'a> {
    #[serde(flatten)]
    header: Header<'a>,
    /// Whether Karpenter manages the node (a NodeClaim of a NodePool).
    managed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    why_unmanaged: Option<String>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    explanation: Option<&'a NodeExplanation>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodePoolAnswer<'a> {
    #[serde(flatten)]
    header: Header<'a>,
    #[serde(flatten)]
    explanation: &'a NodePoolExplanation,
}

pub fn run(args: ExplainArgs) -> Result<(), Failure> {
    // Never dropped: the process ends after the answer, and freeing a large snapshot's objects
    // one by one costs a tenth of the run (benches/explain.rs).
    let state = std::mem::ManuallyDrop::new(source::read(&args.common.read)?);
    for n in &state.notes {
        eprintln!("note: {n}");
    }
    let out = &args.common.out;
    let paint = Paint::new(out.colour());
    match &args.what {
        What::Pod { name } => explain_pod(&state, &args.common, name, paint),
        What::Node { name } => {
            let sim = simulation_of(&state)?;
            let header = header(&state, &sim, "NodeExplanation");
            let explanation = sim.explain_node(name);
            let why_unmanaged = match &explanation {
                Some(_) => None,
                None => Some(unmanaged_reason(&state, name)?),
            };
            let answer =
                NodeAnswer { header, managed: explanation.is_some(), why_unmanaged, explanation: explanation.as_ref() };
            match out.output {
                Output::Json | Output::Yaml => render::structured(&answer, out.output),
                Output::Text | Output::Wide => {
                    match (&explanation, &answer.why_unmanaged) {
                        (Some(e), _) => print!("{}", carpentry_core::render_node_styled(e, &paint)),
                        (None, Some(why)) => println!("Node {name} is not managed by Karpenter: {why}"),
                        (None, None) => {}
                    }
                    Ok(())
                }
            }
        }
        What::Nodepool { name } => {
            let sim = simulation_of(&state)?;
            let explanation = sim.explain_nodepool(name).ok_or_else(|| {
                let known: Vec<&str> = state.manifests.nodepools.iter().map(|np| np.name()).collect();
                Failure::Input(format!(
                    "NodePool {name:?} not found in {} (NodePools: {})",
                    state.source,
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ))
            })?;
            let answer =
                NodePoolAnswer { header: header(&state, &sim, "NodePoolExplanation"), explanation: &explanation };
            match out.output {
                Output::Json | Output::Yaml => render::structured(&answer, out.output),
                Output::Text | Output::Wide => {
                    print!("{}", paint.headline(&render_nodepool(&explanation)));
                    println!(
                        "Prices: {} catalogue, region {}; spot prices are synthetic.",
                        state.catalogue_source,
                        state.region()
                    );
                    Ok(())
                }
            }
        }
    }
}

/// The cluster state as a simulation at its start: node and NodePool explanations read it.
fn simulation_of(state: &ClusterState) -> Result<Simulation, Failure> {
    Simulation::observe(&state.manifests, None, state.catalogue)
        .map_err(|e| Failure::Input(format!("{}: {e}", state.source)))
}

fn header<'a>(state: &'a ClusterState, sim: &Simulation, kind: &'static str) -> Header<'a> {
    Header {
        kind,
        api_version: API_VERSION,
        source: &state.source,
        region: state.region(),
        catalogue: &state.catalogue_source,
        time: sim.clock().rfc3339(SimTime::ZERO),
        notes: &state.notes,
    }
}

/// Why a node has no explanation: it is not Karpenter's (say how we know), or there is no such
/// node (an error).
fn unmanaged_reason(state: &ClusterState, name: &str) -> Result<String, Failure> {
    let node = state.manifests.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(name));
    let claim = state
        .manifests
        .nodeclaims
        .iter()
        .find(|nc| nc.status.as_ref().is_some_and(|s| s.node_name == name) || nc.name() == name);
    match (node, claim) {
        (None, None) => Err(Failure::Input(format!("node {name:?} not found in {}", state.source))),
        (_, Some(nc)) => {
            Ok(format!("its NodeClaim {} is not running yet (no provider ID or Node) or names no NodePool", nc.name()))
        }
        (Some(n), None) => {
            let labels = n.metadata.labels.clone().unwrap_or_default();
            Ok(match labels.get("eks.amazonaws.com/nodegroup") {
                Some(group) => format!(
                    "no NodeClaim owns it; it belongs to EKS managed node group {group:?}, which Cluster Autoscaler or \
                     the node group itself scales — Karpenter never disrupts it"
                ),
                None => {
                    "no NodeClaim owns it (no karpenter.sh/nodepool label); Karpenter never disrupts it, though its \
                         free room counts when pods are placed"
                        .to_string()
                }
            })
        }
    }
}

fn explain_pod(state: &ClusterState, common: &CommonArgs, name: &str, paint: Paint) -> Result<(), Failure> {
    let namespace = find_namespace(state, common, name)?;
    let clock = simulation::Clock::new(state.manifests.scenario.as_ref().and_then(|s| s.spec.start_time.as_deref()))
        .ok_or_else(|| Failure::Input(format!("{}: the Scenario's startTime is not an RFC 3339 time", state.source)))?;
    let prepared = carpentry_core::state::input_from_manifests(&state.manifests, state.catalogue, Some(state.region()))
        .map_err(|e| Failure::Input(format!("{}: {}", state.source, carpentry_core::error_chain(&e))))?;
    let mut notes = state.notes.clone();
    notes.extend(prepared.notes.iter().cloned());
    let mut input = prepared.input;
    input.options.now = Some(clock.start_epoch);
    let report = simulation::report_pod(input, &namespace, name)
        .ok_or_else(|| Failure::Input(format!("pod {namespace}/{name} not found in {}", state.source)))?;
    let (verdict, schedulable) = match &report.standing {
        PodStanding::Running { .. } => ("running", true),
        PodStanding::Completed { .. } => ("completed", true),
        PodStanding::WouldBind { .. } => ("wouldBind", true),
        PodStanding::WouldLaunch { .. } => ("wouldLaunch", true),
        PodStanding::Deferred { .. } => ("deferred", true),
        PodStanding::Unschedulable { .. } => ("unschedulable", false),
        PodStanding::Ignored { .. } => ("ignored", false),
    };
    let answer = PodAnswer {
        header: Header {
            kind: "PodExplanation",
            api_version: API_VERSION,
            source: &state.source,
            region: state.region(),
            catalogue: &state.catalogue_source,
            time: clock.rfc3339(SimTime::ZERO),
            notes: &notes,
        },
        verdict,
        schedulable,
        report: &report,
    };
    let out = &common.out;
    match out.output {
        Output::Json | Output::Yaml => render::structured(&answer, out.output)?,
        Output::Text | Output::Wide => {
            for n in notes.iter().skip(state.notes.len()) {
                eprintln!("note: {n}");
            }
            print!("{}", pod_text(&report, out.output == Output::Wide, out.no_headers, paint));
            if report.nodeclaim.is_some() || report.evaluation.is_some() {
                println!(
                    "Prices: {} catalogue, region {}; spot prices are synthetic.",
                    state.catalogue_source,
                    state.region()
                );
            }
        }
    }
    if schedulable {
        Ok(())
    } else {
        Err(Failure::Exit(1))
    }
}

/// The pod's namespace: `-n`, else `default`; with `-A`, the one namespace that has a pod of that
/// name.
fn find_namespace(state: &ClusterState, common: &CommonArgs, name: &str) -> Result<String, Failure> {
    let read = &common.read;
    if !read.all_namespaces {
        return Ok(read.namespace.clone().unwrap_or_else(|| state.default_namespace.clone()));
    }
    let mut found: Vec<String> = state
        .manifests
        .all_pods()
        .iter()
        .filter(|p| p.metadata.name.as_deref() == Some(name))
        .map(|p| p.metadata.namespace.clone().unwrap_or_else(|| "default".into()))
        .collect();
    found.sort();
    found.dedup();
    match found.len() {
        0 => Err(Failure::Input(format!("no pod named {name:?} in any namespace of {}", state.source))),
        1 => Ok(found.remove(0)),
        _ => Err(Failure::Input(format!(
            "pods named {name:?} are in several namespaces ({}); choose one with -n",
            found.join(", ")
        ))),
    }
}

/// The pod explanation as text: the verdict, the NodeClaim, the NodePool grid, existing nodes,
/// relaxations.
fn pod_text(r: &PodReport, wide: bool, no_headers: bool, paint: Paint) -> String {
    let mut s = String::new();
    let verdict = match &r.standing {
        PodStanding::Running { node } => paint.good(&format!("running on node {node}")),
        PodStanding::Completed { node, phase } => format!("completed ({phase}) on node {node}; it needs no room"),
        PodStanding::WouldBind { target } => paint.good(&format!(
            "pending; would go to existing node {target} (it binds once that node is Ready and has room)"
        )),
        PodStanding::WouldLaunch { nodepool, .. } => {
            paint.good(&format!("pending; a provisioning round would create a NodeClaim from NodePool {nodepool}"))
        }
        PodStanding::Deferred { headline } => paint.warn(&format!("pending; waits for a later round: {headline}")),
        PodStanding::Unschedulable { headline, .. } => paint.bad(&format!("cannot be scheduled: {headline}")),
        PodStanding::Ignored { reason } => paint.warn(&format!("pending; Karpenter leaves it alone: {reason}")),
    };
    let _ = writeln!(s, "Pod {}: {verdict}", paint.bold(&r.pod));
    if let Some(c) = &r.nodeclaim {
        let launch = c.launch.as_ref().map_or("no launchable offering".to_string(), |l| {
            format!(
                "{} {} in {} at ${:.4}/hour{}",
                l.instance_type,
                l.capacity_type,
                l.zone,
                l.price,
                if l.price_synthetic { " (synthetic spot price)" } else { "" }
            )
        });
        let _ = writeln!(s, "  NodeClaim: {} pod(s), {} instance type(s); launches {launch}", c.pods, c.options);
        let shown = if wide { c.cheapest.len() } else { c.cheapest.len().min(5) };
        if shown > 0 {
            let types: Vec<String> =
                c.cheapest.iter().take(shown).map(|t| format!("{} ${:.4}/h", t.instance_type, t.price)).collect();
            let _ = writeln!(s, "  cheapest first: {}", types.join(", "));
        }
    }
    match (&r.evaluation, &r.standing) {
        (Some(e), _) => s.push_str(&evaluation_text(e, wide, no_headers, paint)),
        // Unschedulable without an evaluation (a DRA pod, no NodePools): the round's own words.
        (None, PodStanding::Unschedulable { explanation, .. }) => {
            for line in carpentry_core::scheduling::explain::render_unschedulable(explanation).lines().skip(1) {
                let _ = writeln!(s, "{line}");
            }
        }
        _ => {}
    }
    // The round's view, for a pod it could not place: other pods of the round may have taken
    // the room it would have had alone.
    if let PodStanding::Unschedulable { explanation, .. } = &r.standing {
        if !explanation.explanation.planned_nodeclaims.is_empty() {
            let total: usize = explanation.explanation.planned_nodeclaims.iter().map(|g| g.count).sum();
            let _ = writeln!(s, "NodeClaims the round planned for other pods ({total}) cannot take it either:");
            for g in &explanation.explanation.planned_nodeclaims {
                let _ = writeln!(s, "  {} × {}", g.count, g.rejection);
            }
        }
    }
    if !r.relaxations.is_empty() {
        let steps: Vec<String> = r.relaxations.iter().map(ToString::to_string).collect();
        let _ = writeln!(s, "Relaxed: {}", steps.join("; "));
    }
    s
}

fn evaluation_text(e: &PodEvaluation, wide: bool, no_headers: bool, paint: Paint) -> String {
    let mut s = String::new();
    if !e.nodepools.is_empty() {
        let width = e.nodepools.iter().map(|c| c.nodepool.len()).max().unwrap_or(8).max(8);
        let _ = writeln!(s, "NodePools, for this pod on its own with its preferences required (weight order):");
        if !no_headers {
            let _ = writeln!(s, "{:<width$}  {:<6}  DETAIL", "NODEPOOL", "RESULT");
        }
        for c in &e.nodepools {
            let (result, detail) = if c.passes {
                let detail = c.funnel.as_ref().map_or(String::new(), |f| {
                    let cheapest: Vec<String> = f.cheapest.iter().map(|(n, p)| format!("{n} ${p:.4}/h")).collect();
                    format!(
                        "instance types {} → requirements {} → resources {} → offerings {}; cheapest {}",
                        f.allowed,
                        f.requirements,
                        f.resources,
                        f.offerings,
                        if cheapest.is_empty() { "-".to_string() } else { cheapest.join(", ") }
                    )
                });
                (paint.good("pass  "), detail)
            } else {
                let failure = c.failure.as_ref().map(failure_text).unwrap_or_default();
                let fix = c.fix.as_ref().map(|f| format!("; fix: {f}")).unwrap_or_default();
                (paint.bad("FAIL  "), format!("{failure}{fix}"))
            };
            let _ = writeln!(s, "{:<width$}  {result}  {detail}", c.nodepool);
            if wide {
                if let Some(NodePoolFailure::InstanceTypes(f)) = &c.failure {
                    for loss in &f.cheapest_lost {
                        let _ = writeln!(s, "{:<width$}          lost: {loss}", "");
                    }
                }
                if let Some(f) = &c.funnel {
                    if !f.narrowed_by.is_empty() {
                        let _ = writeln!(s, "{:<width$}          narrowed by: {}", "", f.narrowed_by.join(", "));
                    }
                }
            }
        }
    }
    let rejected: usize = e.existing_nodes.iter().map(|g| g.count).sum();
    let fitting = e.existing_nodes_fitting.len();
    if fitting + rejected > 0 {
        let _ = write!(s, "Existing nodes: {fitting} could take it alone");
        if fitting > 0 {
            let shown: Vec<&str> =
                e.existing_nodes_fitting.iter().take(if wide { 20 } else { 3 }).map(String::as_str).collect();
            let _ = write!(s, " ({}{})", shown.join(", "), if fitting > shown.len() { ", …" } else { "" });
        }
        let _ = writeln!(s, "; {rejected} cannot:");
        for g in &e.existing_nodes {
            let examples = if wide { format!(" (e.g. {})", g.examples.join(", ")) } else { String::new() };
            let _ = writeln!(s, "  {} × {}{examples}", g.count, g.rejection);
        }
    }
    s
}
