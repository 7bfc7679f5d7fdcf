//! `kubectl karpenter compare -f FILE [--node-groups FILE] [--until 1h] [-o text|json]`: the
//! cluster in the files run once with Karpenter's NodePools and once with Cluster Autoscaler on
//! the node groups (given, else derived from Karpenter's run), side by side. Adapter only: loading and rendering; both runs and what is
//! measured come from `carpentry_core::simulation::compare`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use carpentry_core::catalogue::Catalogue;
use carpentry_core::manifest::Manifests;
use carpentry_core::simulation::{self, AutoscalerRun, Comparison, Event, SimTime};

use crate::{input, Failure};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// Manifests (NodePools, EC2NodeClasses, NodeGroups, pods and workloads, DaemonSets, a
    /// Scenario with its steps); repeat for several files; `-` reads stdin.
    #[arg(short = 'f', long = "filename", required = true)]
    files: Vec<String>,
    /// A file of `carpentry.dev/v1alpha1 NodeGroup`s for Cluster Autoscaler, in place of any
    /// NodeGroups in the other files. Without any, the groups are derived from where Karpenter's
    /// nodes landed: one per NodePool, instance type and capacity type.
    #[arg(long, value_name = "FILE")]
    node_groups: Option<String>,
    /// AWS region (default: the Scenario's, else us-east-1).
    #[arg(long)]
    region: Option<String>,
    /// How long both runs last, after the start (e.g. 30m, 2h).
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    until: String,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Output {
    Text,
    Json,
}

/// Event lines shown per autoscaler in the text; JSON has them all.
const EVENT_LINES: usize = 25;

pub fn run(args: CompareArgs) -> Result<(), Failure> {
    let mut manifests = Manifests::default();
    for file in &args.files {
        let m = input::load(file)?;
        manifests.merge(m).map_err(|e| Failure::Input(format!("{file}: {e}")))?;
    }
    if let Some(file) = &args.node_groups {
        let mut groups = input::load(file)?;
        let nodegroups = std::mem::take(&mut groups.nodegroups);
        groups.origins.clear();
        groups.warnings.clear();
        // An eksctl ClusterConfig or the groups' tags name their cluster: not another object.
        groups.cluster_name = None;
        if !groups.is_empty() {
            return Err(Failure::Input(format!(
                "--node-groups {file}: holds objects other than NodeGroups (give those with -f)"
            )));
        }
        if nodegroups.is_empty() {
            return Err(Failure::Input(format!(
                "--node-groups {file}: no node group in it (NodeGroups, an eksctl ClusterConfig or \
                 describe-auto-scaling-groups output)"
            )));
        }
        manifests.nodegroups = nodegroups;
    }
    let notes: Vec<String> = manifests.convert_legacy().into_iter().map(|n| n.on_load()).collect();
    let until =
        carpentry_core::manifest::scenario::parse_offset(&args.until).filter(|ms| *ms > 0).ok_or_else(|| {
            Failure::Input(format!("--until {:?} is not a duration after the start (e.g. 30m, 2h)", args.until))
        })?;
    let comparison = simulation::compare(&manifests, args.region.as_deref(), SimTime(until), Catalogue::embedded())
        .map_err(|e| Failure::Input(carpentry_core::error_chain(&e)))?;
    match args.output {
        Output::Json => {
            println!("{}", serde_json::to_string_pretty(&comparison).map_err(|e| Failure::Other(e.into()))?);
        }
        Output::Text => {
            for n in &notes {
                eprintln!("note: {n}");
            }
            for (side, run) in
                [("Karpenter", &comparison.karpenter), ("Cluster Autoscaler", &comparison.cluster_autoscaler)]
            {
                for n in &run.notes {
                    eprintln!("note: {side}: {n}");
                }
            }
            print!("{}", text(&comparison));
        }
    }
    Ok(())
}

fn text(c: &Comparison) -> String {
    let (k, ca) = (&c.karpenter, &c.cluster_autoscaler);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<46} {:<30} CLUSTER AUTOSCALER",
        format!("SAME CLUSTER, {} ({})", span(c.until.0), c.region),
        "KARPENTER",
    );
    let mut row = |label: String, a: String, b: String| {
        let _ = writeln!(out, "{label:<46} {a:<30} {b}");
    };
    for (i, (a, b)) in k.time_to_all_running.iter().zip(&ca.time_to_all_running).enumerate() {
        let moment = if i == 0 { "the start".to_string() } else { a.at.to_string() };
        let pending = if a.pending == b.pending {
            format!("{} pending", a.pending)
        } else {
            format!("{}/{} pending", a.pending, b.pending)
        };
        let after =
            |s: &simulation::Settling| s.after.map_or_else(|| format!("not by {}", span(c.until.0)), |d| span(d.0));
        row(format!("all Running after {moment} ({pending})"), after(a), after(b));
    }
    row(
        "pending pod-seconds".into(),
        format!("{:.0}", k.pending_pod_seconds),
        format!("{:.0}", ca.pending_pod_seconds),
    );
    row("pods pending at the end".into(), k.pending.len().to_string(), ca.pending.len().to_string());
    row("nodes at the end".into(), nodes(k), nodes(ca));
    let mark = |run: &AutoscalerRun| if run.price_synthetic { "*" } else { "" };
    row(
        "$/hour at the end".into(),
        format!("{:.4}{}", k.cost_per_hour, mark(k)),
        format!("{:.4}{}", ca.cost_per_hour, mark(ca)),
    );
    row("$ spent".into(), format!("{:.4}{}", k.cost_total, mark(k)), format!("{:.4}{}", ca.cost_total, mark(ca)));
    let percent = |f: f64| format!("{:.0}%", f * 100.0);
    row("CPU requested / allocatable".into(), percent(k.cpu_requested_fraction), percent(ca.cpu_requested_fraction));
    row(
        "memory requested / allocatable".into(),
        percent(k.memory_requested_fraction),
        percent(ca.memory_requested_fraction),
    );
    let names = |n: Vec<&str>| format!("{} ({})", n.len(), n.join(", "));
    let derived = if ca.node_groups_derived.is_empty() { "" } else { ", derived" };
    row(
        format!("NodePools / node groups{derived}"),
        names(k.node_pools.iter().map(String::as_str).collect()),
        names(ca.node_groups.iter().map(|g| g.metadata.name.as_deref().unwrap_or_default()).collect()),
    );
    row("disruptions".into(), k.disruptions.to_string(), ca.disruptions.to_string());
    row("evictions".into(), k.evictions.to_string(), ca.evictions.to_string());
    if k.price_synthetic || ca.price_synthetic {
        let _ = writeln!(out, "* includes a synthetic spot price (core/data/PROVENANCE.md)");
    }
    if let Some(status) = &ca.status {
        let _ =
            writeln!(out, "\nCLUSTER AUTOSCALER'S STATUS CONFIGMAP AT THE END (kube-system/cluster-autoscaler-status)");
        let wide = &status.cluster_wide;
        let counts = |c: &carpentry_core::clusterautoscaler::status::NodeCount| {
            format!("{}/{} ready", c.registered.ready, c.registered.total)
        };
        let _ = writeln!(
            out,
            "cluster: {} ({}), scale-up {}, scale-down {}",
            wide.health.status,
            counts(&wide.health.node_counts),
            wide.scale_up.status,
            candidates(&wide.scale_down)
        );
        for g in &status.node_groups {
            let backoff = g
                .scale_up
                .backoff_info
                .as_ref()
                .filter(|b| !b.error_code.is_empty())
                .map(|b| format!(" ({}: {})", b.error_code, b.error_message))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{}: {} ({}, target {} of {}..{}), scale-up {}{backoff}, scale-down {}",
                g.name,
                g.health.status,
                counts(&g.health.node_counts),
                g.health.cloud_provider_target,
                g.health.min_size,
                g.health.max_size,
                g.scale_up.status,
                candidates(&g.scale_down)
            );
        }
    }
    if let Some(plan) = &ca.scale_down {
        let _ = writeln!(out, "\nCLUSTER AUTOSCALER'S LAST SCALE-DOWN PASS, NODE BY NODE");
        for u in &plan.unneeded {
            let since = carpentry_core::simulation::SimTime((u.since * 1000.0).round() as u64);
            let _ = writeln!(
                out,
                "{}: unneeded since {since}, utilization {:.0}%{}",
                u.node,
                u.utilization * 100.0,
                if u.pods_to_move.is_empty() {
                    ", empty".to_string()
                } else {
                    format!(", would move {}", u.pods_to_move.join(", "))
                }
            );
        }
        for n in &plan.unremovable {
            let _ = writeln!(out, "{}: {}", n.node, n.message);
        }
        if let Some(cooldown) = &plan.cooldown {
            let _ = writeln!(out, "({cooldown})");
        }
    }
    if !ca.node_groups_derived.is_empty() {
        let _ =
            writeln!(out, "\nNODE GROUPS DERIVED FROM WHERE KARPENTER'S NODES LANDED (-o json has them as NodeGroups)");
        for d in &ca.node_groups_derived {
            let _ = writeln!(out, "{d}");
        }
    }
    for (side, run) in [("KARPENTER", k), ("CLUSTER AUTOSCALER", ca)] {
        let _ = writeln!(out, "\n{side}: what happened");
        out.push_str(&milestones(&run.events));
    }
    out
}

/// `3: 2×m5.large, 1×c5.xlarge` (not registered yet counted in).
fn nodes(run: &AutoscalerRun) -> String {
    let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &run.nodes {
        *by_type.entry(n.instance_type.as_deref().unwrap_or("?")).or_default() += 1;
    }
    let mut parts: Vec<(usize, &str)> = by_type.into_iter().map(|(t, n)| (n, t)).collect();
    parts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let parts: Vec<String> = parts.iter().map(|(n, t)| format!("{n}×{t}")).collect();
    if parts.is_empty() {
        "0".into()
    } else {
        format!("{}: {}", run.nodes.len(), parts.join(", "))
    }
}

/// The events that shape the figures: capacity asked for, launched, joined, Ready, taken away,
/// and the autoscalers' own verdicts; the same reason at the same instant once, with a count.
fn milestones(events: &[Event]) -> String {
    const SHOWN: &[&str] = &[
        "NodeClaimCreated",
        "Launched",
        "InsufficientCapacityError",
        "LaunchFailed",
        "Registered",
        "Initialized",
        "Disrupting",
        "Terminated",
        "Evicted",
        "SpotInterrupted",
        "StepApplied",
        "TriggeredScaleUp",
        "NotTriggerScaleUp",
        "ScaledUpGroup",
        "ScaleUpTimedOut",
        "FailedToScaleUpGroup",
        "ScaleDown",
        "ScaleDownEmpty",
        "ScaleDownFailed",
    ];
    // Events about pods, nodes and NodeClaims collapse; a group's or CA's status only with its twin.
    let alike = |a: &Event, b: &Event| {
        a.at == b.at
            && a.reason.name() == b.reason.name()
            && a.object.kind == b.object.kind
            && (matches!(a.object.kind.as_str(), "Pod" | "Node" | "NodeClaim")
                || (a.object == b.object && a.message == b.message))
    };
    let mut lines: Vec<(&Event, usize)> = Vec::new();
    for e in events.iter().filter(|e| SHOWN.contains(&e.reason.name())) {
        match lines.last_mut() {
            Some((first, count)) if alike(first, e) => *count += 1,
            _ => lines.push((e, 1)),
        }
    }
    let mut out = String::new();
    for (e, count) in lines.iter().take(EVENT_LINES) {
        let times = if *count > 1 { format!(" (×{count})") } else { String::new() };
        let _ = writeln!(out, "{e}{times}");
    }
    if lines.len() > EVENT_LINES {
        let _ = writeln!(out, "… {} more (-o json has every event)", lines.len() - EVENT_LINES);
    }
    if lines.is_empty() {
        let _ = writeln!(out, "(nothing launched or taken away)");
    }
    out
}

/// A duration as Go prints it (`1m55s`).
fn span(millis: u64) -> String {
    simulation::Duration(millis).to_string()
}

/// `CandidatesPresent (2)` or `NoCandidates`.
fn candidates(c: &carpentry_core::clusterautoscaler::status::ScaleDownCondition) -> String {
    if c.candidates > 0 {
        format!("{} ({})", c.status, c.candidates)
    } else {
        c.status.to_string()
    }
}
