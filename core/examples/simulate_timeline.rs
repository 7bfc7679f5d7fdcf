//! For adapter authors: what happens over time? Runs a simulation — pods go pending, a NodeClaim
//! launches and registers, the Deployment scales to zero, emptiness removes the node — and prints
//! the event log, the path `kubectl karpenter simulate --until` and the playground take.
//!
//! ```text
//! cargo run -p carpentry-core --example simulate_timeline
//! ```
//!
//! `cargo xtask test` runs it (its test below); it fails unless a node is launched and then
//! removed.

use std::process::ExitCode;

use carpentry_core::simulation::Reason;
use carpentry_core::{error_chain, load, SimTime, Simulation, Timings};

/// A NodePool, a Deployment of three 1-CPU pods, and a Scenario that scales it to zero at 10m.
const MANIFESTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, resources: {requests: {cpu: "1"}}}]
---
apiVersion: carpentry.dev/v1alpha1
kind: Scenario
spec:
  startTime: "2026-12-01T10:00:00Z"
  steps:
  - {at: 10m, scale: {kind: Deployment, name: web, replicas: 0}}
"#;

fn main() -> ExitCode {
    match timeline() {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// The event log of 30 simulated minutes, as text.
fn timeline() -> Result<String, String> {
    let manifests = load(MANIFESTS).map_err(|e| e.to_string())?;
    // The simulated clock starts at the Scenario's startTime; nothing reads the wall clock.
    let mut simulation = Simulation::new(&manifests, None, Timings::default()).map_err(|e| error_chain(&e))?;
    simulation.run_until(SimTime::from_secs(30 * 60));
    let mut text: String = simulation.events().iter().map(|event| format!("{event}\n")).collect();
    let launched = simulation.events().iter().any(|e| matches!(e.reason, Reason::Launched { .. }));
    let terminated = simulation.events().iter().any(|e| matches!(e.reason, Reason::Terminated { .. }));
    let snapshot = simulation.snapshot();
    text.push_str(&format!("after 30m: {} nodes, {} pods running\n", snapshot.nodes.len(), snapshot.running));
    if !(launched && terminated && snapshot.nodes.is_empty()) {
        return Err(format!("expected a node launched and then removed:\n{text}"));
    }
    Ok(text)
}

// `cargo test --all-targets` (so `cargo xtask test`) runs the example through this test.
#[test]
fn a_node_is_launched_and_removed() {
    timeline().unwrap();
}
