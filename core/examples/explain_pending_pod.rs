//! For adapter authors: why is this pod pending? Loads manifests, builds the view a provisioning
//! round reads, runs one round and prints the explanation of the pod that cannot schedule — the
//! path `kubectl karpenter explain pod` and the playground take.
//!
//! ```text
//! cargo run -p carpentry-core --example explain_pending_pod
//! ```
//!
//! `cargo xtask test` runs it (its test below); it fails if the explanation does not name the
//! failing constraint (the architecture the NodePool does not offer).

use std::process::ExitCode;

use carpentry_core::{error_chain, input_from_manifests, load, render_unschedulable, schedule, Catalogue};

/// A NodePool that launches amd64 on-demand capacity only, and a pod that needs arm64.
const MANIFESTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: v1
kind: Pod
metadata: {name: builder, namespace: ci}
spec:
  nodeSelector: {kubernetes.io/arch: arm64}
  containers: [{name: build, image: builder, resources: {requests: {cpu: "2", memory: 4Gi}}}]
"#;

fn main() -> ExitCode {
    match explain() {
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

/// The explanation of the pending pod, as text.
fn explain() -> Result<String, String> {
    // 1. Load: every problem is located (document, object, field, line).
    let manifests = load(MANIFESTS).map_err(|e| e.to_string())?;
    // 2. The view one round reads: NodePools with the instance types their EC2NodeClass can
    //    launch in the region (the embedded catalogue), and the cluster's objects.
    let prepared =
        input_from_manifests(&manifests, Catalogue::embedded(), Some("us-east-1")).map_err(|e| error_chain(&e))?;
    // 3. One provisioning round, a pure function of its input.
    let results = schedule(&prepared.input);
    // 4. The structured explanation, rendered as text (it serialises to JSON as well).
    let pending =
        results.unschedulable.first().ok_or("expected the pod to be unschedulable, but the round placed it")?;
    let text = render_unschedulable(pending);
    if !text.contains("kubernetes.io/arch") {
        return Err(format!("the explanation does not name kubernetes.io/arch:\n{text}"));
    }
    Ok(text)
}

// `cargo test --all-targets` (so `cargo xtask test`) runs the example through this test.
#[test]
fn the_explanation_names_the_architecture() {
    explain().unwrap();
}
