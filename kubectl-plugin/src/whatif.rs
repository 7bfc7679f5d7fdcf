//! `kubectl karpenter whatif -f FILE`: the objects in FILE applied on top of the cluster's state,
//! in simulation only (`carpentry_core::simulation::whatif`), and what Karpenter would do. Nothing
//! is written to the cluster.

use std::fmt::Write as _;

use carpentry_core::manifest::Manifests;
use carpentry_core::simulation::{self, SimTime, WhatIf};
use serde::Serialize;

use crate::common::{CommonArgs, Output};
use crate::explain::{Header, API_VERSION};
use crate::render::{self, Paint};
use crate::{input, source, Failure};

#[derive(clap::Args)]
pub struct WhatifArgs {
    /// The objects to apply on top of the cluster's state (NodePools, EC2NodeClasses, pods,
    /// workloads…); repeatable; `-` reads stdin.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<String>,
    /// How much simulated time to look ahead (e.g. 30m, 2h): long enough for launches, drift
    /// replacement under the budgets and consolidation to play out.
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub until: String,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Answer<'a> {
    #[serde(flatten)]
    header: Header<'a>,
    #[serde(flatten)]
    whatif: &'a WhatIf,
}

pub fn run(args: WhatifArgs) -> Result<(), Failure> {
    let until = carpentry_core::manifest::scenario::parse_offset(&args.until)
        .ok_or_else(|| Failure::Input(format!("--until {:?} is not a duration (e.g. 30m, 2h)", args.until)))?;
    let state = source::read(&args.common.read)?;
    let mut edits = Manifests::default();
    for file in &args.files {
        edits.merge(input::load(file)?).map_err(|e| Failure::Input(format!("{file}: {e}")))?;
    }
    if edits.scenario.is_some() {
        return Err(Failure::Input(
            "a Scenario document cannot be applied; give the objects to change (NodePools, EC2NodeClasses, pods…)"
                .into(),
        ));
    }
    let mut notes = state.notes.clone();
    notes.extend(edits.convert_legacy().into_iter().map(|n| n.on_load()));
    let result = simulation::whatif(&state.manifests, edits, state.catalogue, SimTime(until))
        .map_err(|e| Failure::Input(format!("whatif: {}", carpentry_core::error_chain(&e))))?;
    notes.extend(result.notes.iter().cloned());
    notes.sort();
    notes.dedup();
    let start = state
        .manifests
        .scenario
        .as_ref()
        .and_then(|s| s.spec.start_time.clone())
        .unwrap_or_else(|| simulation::DEFAULT_START.to_string());
    let header = Header {
        kind: "WhatIf",
        api_version: API_VERSION,
        source: &state.source,
        region: state.region(),
        catalogue: &state.catalogue_source,
        time: start,
        notes: &notes,
    };
    let out = &args.common.out;
    match out.output {
        Output::Json | Output::Yaml => render::structured(&Answer { header, whatif: &result }, out.output)?,
        Output::Text | Output::Wide => {
            for n in &notes {
                eprintln!("note: {n}");
            }
            print!("{}", text(&result, out.output == Output::Wide, Paint::new(out.colour())));
            println!(
                "Prices: {} catalogue, region {}; spot prices are synthetic.",
                state.catalogue_source,
                state.region()
            );
        }
    }
    // Like `explain pod`, usable as a gate: 1 when the edit leaves pods pending at the end that
    // would not be pending without it.
    if result.pending.iter().all(|p| p.also_without_edit) {
        Ok(())
    } else {
        Err(Failure::Exit(1))
    }
}

fn text(w: &WhatIf, wide: bool, paint: Paint) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}",
        paint.bold(&format!(
            "Applying {} (simulated; nothing is written), over {}:",
            w.applied.join(", "),
            simulation::Duration::millis(w.until.0)
        ))
    );
    let c = &w.cost;
    let sign = if c.delta_per_hour >= 0.0 { "+" } else { "-" };
    let delta = format!("{sign}${:.4}/hour ({sign}${:.2}/month)", c.delta_per_hour.abs(), c.delta_per_month.abs());
    let delta = if c.delta_per_hour > 0.0005 {
        paint.bad(&delta)
    } else if c.delta_per_hour < -0.0005 {
        paint.good(&delta)
    } else {
        delta
    };
    let _ = writeln!(
        s,
        "Cost: ${:.4}/hour now; at the end ${:.4}/hour with the edit, ${:.4}/hour without: {delta}",
        c.now_per_hour, c.edited_per_hour, c.unedited_per_hour
    );
    let _ = writeln!(
        s,
        "Without the edit: {} NodeClaim(s) launched, {} drifted, {} node(s) removed, {} pod(s) pending at the end.",
        w.unedited.launched, w.unedited.drifted, w.unedited.removed, w.unedited.pending
    );
    if w.launched.is_empty() {
        let _ = writeln!(s, "New NodeClaims: none");
    } else {
        let total: f64 = w.launched.iter().map(|l| l.price).sum();
        let _ = writeln!(s, "New NodeClaims: {} (${total:.4}/hour)", w.launched.len());
        for l in &w.launched {
            let _ = writeln!(
                s,
                "  {:>9}  {:<24} {:<12} {:<14} {:<10} {:<11} ${:.4}/h{}  {} pod(s)",
                l.at.to_string(),
                l.nodeclaim,
                l.nodepool,
                l.instance_type,
                l.capacity_type,
                l.zone,
                l.price,
                if l.price_synthetic { "*" } else { "" },
                l.pods
            );
        }
        if w.launched.iter().any(|l| l.price_synthetic) {
            let _ = writeln!(s, "  * synthetic spot price (no public registry ships real spot prices)");
        }
    }
    if !w.drifted.is_empty() {
        let _ = writeln!(s, "Drifted: {}", w.drifted.len());
        for d in &w.drifted {
            let _ = writeln!(s, "  {:>9}  {}: {}", d.at.to_string(), d.nodeclaim, d.why);
        }
    }
    if !w.disruptions.is_empty() {
        let _ = writeln!(s, "Disruptions (under the budgets):");
        for d in &w.disruptions {
            let replacements =
                if d.replacements.is_empty() { String::new() } else { format!(" → {}", d.replacements.join(", ")) };
            let _ = writeln!(
                s,
                "  {:>9}  {:<13} {:<7} {}{replacements}{}",
                d.at.to_string(),
                d.reason,
                d.decision,
                d.nodes.join(", "),
                if wide { format!(" ({})", d.why) } else { String::new() }
            );
        }
    }
    if !w.removed.is_empty() {
        let _ = writeln!(s, "Removed: {}", w.removed.len());
        if wide {
            for r in &w.removed {
                let _ = writeln!(s, "  {:>9}  {}: {}", r.at.to_string(), r.nodeclaim, r.why);
            }
        }
    }
    if w.pending.is_empty() {
        let _ = writeln!(s, "Pending at the end: none");
    } else {
        let _ = writeln!(s, "{}", paint.bad(&format!("Pending at the end: {}", w.pending.len())));
        let shown = if wide { w.pending.len() } else { w.pending.len().min(20) };
        for p in w.pending.iter().take(shown) {
            let without = if p.also_without_edit { " (pending without the edit too)" } else { "" };
            let _ = writeln!(s, "  {}{without}: {}", p.pod, p.reason);
        }
        if shown < w.pending.len() {
            let _ = writeln!(s, "  … {} more (-o wide lists them all)", w.pending.len() - shown);
        }
    }
    s
}
