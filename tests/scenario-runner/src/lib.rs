//! The scenario runner: one `tests/scenarios/*.yaml` file in, one JSON document out with
//! everything carpentry-core decided about it. It is built natively and for `wasm32-wasip1`, and
//! the parity test (tests/tests/wasm_parity.rs, docs/parity.md) requires both builds to print the
//! same bytes for every scenario.
//!
//! Loading follows the scenario test (tests/tests/scenarios.rs) and `kubectl karpenter simulate`:
//! the file's documents are loaded with [`manifest::load`], legacy objects converted, and one
//! provisioning round is run over the embedded catalogue. For every distinct `at` of the file's
//! Expectations, the simulation is also run from the start to that moment (as `simulate --until`
//! does), and its event log, rounds, disruptions, cost and state are reported, with every
//! node's and pending pod's explanation and every NodePool's at that moment. A Scenario with
//! steps but no Expectations `at` is run until its last step plus [`AFTER_LAST_STEP`].
//!
//! Adapter only: no Karpenter logic here, just loading, calls into the core and serialization.

use std::io::Write;

use carpentry_core::catalogue::Catalogue;
use carpentry_core::conversion::ConversionNote;
use carpentry_core::disruption::explain::{NodeExplanation, NodePoolExplanation};
use carpentry_core::manifest::{self, Manifests, Problem};
use carpentry_core::scheduling::{self, Results};
use carpentry_core::simulation::{self, SimTime, Simulation, Timings};
use carpentry_core::state;
use serde::Serialize;

/// How long past its last step a Scenario without Expectations `at` is run (ten minutes).
pub const AFTER_LAST_STEP: u64 = 10 * 60 * 1000;

/// Runs the command line `args` (exactly one scenario file) and writes the JSON document, or a
/// JSON error, to `out`; returns the exit code (0, or 1 on any error).
pub fn main_with(args: &[String], out: &mut impl Write) -> u8 {
    let (document, code) = match args {
        [path] => match run_file(path) {
            Ok(json) => (json, 0),
            Err(e) => (error_document(path, &e), 1),
        },
        _ => (error_document("", "usage: carpentry-scenario-runner SCENARIO.yaml"), 1),
    };
    match writeln!(out, "{document}") {
        Ok(()) => code,
        Err(_) => 1,
    }
}

fn error_document(path: &str, message: &str) -> String {
    serde_json::json!({ "kind": "ScenarioRunError", "scenario": file_name(path), "error": message }).to_string()
}

/// The file name without its directory, so that the document is the same wherever the file is.
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// Reads and runs one scenario file; the pretty-printed JSON document.
pub fn run_file(path: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    run_text(file_name(path), &text)
}

/// Runs one scenario given as text; the pretty-printed JSON document.
pub fn run_text(name: &str, text: &str) -> Result<String, String> {
    let mut m = manifest::load(text).map_err(|e| e.to_string())?;
    let conversions = m.convert_legacy();

    let prepared =
        state::input_from_manifests(&m, Catalogue::embedded(), None).map_err(|e| carpentry_core::error_chain(&e))?;
    let results = scheduling::schedule(&prepared.input);

    let mut sims = Vec::new();
    for (until, end) in time_runs(&m)? {
        let mut sim = Simulation::new(&m, None, Timings::default()).map_err(|e| carpentry_core::error_chain(&e))?;
        sim.run_until(SimTime(end));
        sims.push((until, sim));
    }
    let timelines = sims.iter().map(|(until, sim)| timeline(&m, until, sim)).collect::<Result<Vec<_>, _>>()?;

    let run = Run {
        kind: "ScenarioRun",
        scenario: name,
        warnings: &m.warnings,
        conversions,
        round: Round { region: &prepared.region, input_notes: &prepared.notes, results: &results },
        timelines,
    };
    serde_json::to_string_pretty(&run).map_err(|e| e.to_string())
}

/// The moments to run the simulation to: each distinct Expectations `at` (as written, and in
/// milliseconds), in time order; for a Scenario with steps and no `at`, its last step plus
/// [`AFTER_LAST_STEP`].
fn time_runs(m: &Manifests) -> Result<Vec<(String, u64)>, String> {
    let mut runs: Vec<(String, u64)> = Vec::new();
    for e in &m.expectations {
        let Some(at) = e.pointer("/spec/at") else { continue };
        let at = at.as_str().ok_or_else(|| format!("Expectations spec.at {at} is not a string"))?;
        let end =
            manifest::scenario::parse_offset(at).ok_or_else(|| format!("Expectations at: {at:?} is not a duration"))?;
        if !runs.iter().any(|(_, t)| *t == end) {
            runs.push((at.to_string(), end));
        }
    }
    if runs.is_empty() {
        let last_step = m.scenario.iter().flat_map(|s| &s.spec.steps).filter_map(|s| s.at_millis()).max();
        if let Some(last) = last_step {
            let end = last.saturating_add(AFTER_LAST_STEP);
            runs.push((SimTime(end).to_string(), end));
        }
    }
    runs.sort_by_key(|(_, t)| *t);
    Ok(runs)
}

/// The document: what was loaded, the provisioning round, and the runs over time.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run<'a> {
    kind: &'static str,
    scenario: &'a str,
    warnings: &'a [Problem],
    conversions: Vec<ConversionNote>,
    round: Round<'a>,
    timelines: Vec<Timeline<'a>>,
}

/// One provisioning round over every pending pod, as `kubectl karpenter simulate` runs it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Round<'a> {
    region: &'a str,
    input_notes: &'a [String],
    results: &'a Results,
}

/// The simulation run from the start to `until`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Timeline<'a> {
    until: &'a str,
    region: &'a str,
    start: String,
    time: SimTime,
    timings: &'a Timings,
    events: &'a [simulation::Event],
    rounds: &'a [simulation::RoundSummary],
    state: simulation::Snapshot,
    cost: simulation::CostSummary,
    disruptions: &'a [simulation::Disruption],
    node_pools: Vec<NodePoolExplanation>,
    nodes: Vec<NodeExplanation>,
    pending: Vec<PendingPod>,
    notes: Vec<&'a str>,
}

#[derive(Serialize)]
struct PendingPod {
    pod: String,
    standing: simulation::PodStanding,
}

fn timeline<'a>(m: &Manifests, until: &'a str, sim: &'a Simulation) -> Result<Timeline<'a>, String> {
    let state = sim.snapshot();
    let node_pools = m.nodepools.iter().filter_map(|np| sim.explain_nodepool(np.name())).collect();
    // Nodes the disruption controller does not manage have no explanation.
    let nodes = state.nodes.iter().filter_map(|n| sim.explain_node(&n.name)).collect();
    let pending = state
        .pending
        .iter()
        .map(|pod| {
            let (namespace, name) =
                pod.split_once('/').ok_or_else(|| format!("pending pod {pod:?} has no namespace"))?;
            let standing = sim.explain_pod(namespace, name).ok_or_else(|| format!("pending pod {pod} is unknown"))?;
            Ok(PendingPod { pod: pod.clone(), standing })
        })
        .collect::<Result<_, String>>()?;
    Ok(Timeline {
        until,
        region: sim.region(),
        start: sim.clock().rfc3339(SimTime::ZERO),
        time: sim.now(),
        timings: sim.timings(),
        events: sim.events(),
        rounds: sim.rounds(),
        state,
        cost: sim.cost(),
        disruptions: sim.disruptions(),
        node_pools,
        nodes,
        pending,
        notes: sim.notes().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_json_and_exit_non_zero() {
        let mut out = Vec::new();
        assert_eq!(main_with(&[], &mut out), 1);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["kind"], "ScenarioRunError");

        let mut out = Vec::new();
        assert_eq!(main_with(&["/nonexistent/dir/x.yaml".into()], &mut out), 1);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["scenario"], "x.yaml");
    }

    #[test]
    fn a_round_and_a_run_over_time() {
        let text = "\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}]
---
apiVersion: carpentry.dev/v1alpha1
kind: Expectations
spec: {at: 2m}
";
        let json = run_text("t.yaml", text).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["round"]["results"]["nodeclaims"].as_array().map(Vec::len), Some(1), "{json}");
        assert_eq!(v["timelines"][0]["until"], "2m");
        assert_eq!(v["timelines"][0]["state"]["running"], 1, "{json}");
    }
}
