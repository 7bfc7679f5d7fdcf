//! `explain` and `whatif` offline, on tests/data/cluster.yaml: golden text (tests/golden; run with
//! `UPDATE_GOLDEN=1` to rewrite after a deliberate change), exit codes, and the JSON shapes
//! docs/plugin.md documents (the exact top-level keys of each `kind`, so that a change to a
//! stable schema fails here first).

mod common;

use std::collections::BTreeSet;

use common::{plugin, text};
use serde_json::Value;

const CLUSTER: &str = "tests/data/cluster.yaml";
const NODE_OLD: &str = "ip-10-0-1-10.us-west-2.compute.internal";
const NODE_DRIFTED: &str = "ip-10-0-2-20.us-west-2.compute.internal";
const NODE_GROUP: &str = "ip-10-0-3-30.us-west-2.compute.internal";

fn run(args: &[&str]) -> (i32, String, String) {
    let out = plugin(args);
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// Compares `actual` with tests/golden/NAME (or writes it when UPDATE_GOLDEN is set).
fn golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(actual, expected, "output differs from {} (UPDATE_GOLDEN=1 rewrites it)", path.display());
}

fn json(args: &[&str], code: i32) -> Value {
    let mut all = args.to_vec();
    all.extend(["--from-file", CLUSTER, "-o", "json"]);
    let (status, stdout, stderr) = run(&all);
    assert_eq!(status, code, "{args:?}: {stderr}\n{stdout}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON: {e}\n{stdout}"))
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().expect("an object").keys().map(String::as_str).collect()
}

fn set(keys: &[&'static str]) -> BTreeSet<&'static str> {
    keys.iter().copied().collect()
}

const HEADER: [&str; 7] = ["kind", "apiVersion", "source", "region", "catalogue", "time", "notes"];

#[test]
fn explain_pod_text_is_golden_and_exit_codes_gate() {
    for (pod, code) in [("api-1", 0), ("small", 0), ("big", 0), ("huge", 1), ("typo", 1)] {
        let (status, stdout, stderr) =
            run(&["explain", "pod", pod, "-n", "shop", "--from-file", CLUSTER, "--color", "never"]);
        assert_eq!(status, code, "{pod}: {stderr}\n{stdout}");
        golden(&format!("explain-pod-{pod}.txt"), &stdout);
    }
    let (_, wide, _) = run(&["explain", "pod", "huge", "-n", "shop", "--from-file", CLUSTER, "-o", "wide"]);
    golden("explain-pod-huge-wide.txt", &wide);
}

#[test]
fn explain_pod_json_has_the_documented_shape() {
    let v = json(&["explain", "pod", "big", "-n", "shop"], 0);
    let mut expected = set(&HEADER);
    expected.extend(["verdict", "schedulable", "pod", "standing", "evaluation", "nodeclaim", "relaxations"]);
    assert_eq!(keys(&v), expected);
    assert_eq!(v["kind"], "PodExplanation");
    assert_eq!(v["apiVersion"], "carpentry.dev/v1alpha1");
    assert_eq!(v["verdict"], "wouldLaunch");
    assert_eq!(v["region"], "us-west-2");
    assert!(v["catalogue"].as_str().unwrap().starts_with("embedded (generated 20"), "{}", v["catalogue"]);
    assert_eq!(v["time"], "2026-12-01T12:00:00Z");
    assert_eq!(v["standing"]["state"], "wouldLaunch");
    // Every NodePool in weight order: gpu (weight 10) fails on its taint with a fix, general passes.
    let rows = v["evaluation"]["nodepools"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["nodepool"], "gpu");
    assert_eq!(rows[0]["passes"], false);
    assert_eq!(rows[0]["failure"]["constraint"], "taint");
    assert_eq!(rows[0]["fix"]["fix"], "addToleration");
    assert_eq!(rows[1]["nodepool"], "general");
    assert_eq!(rows[1]["passes"], true);
    assert!(rows[1]["funnel"]["offerings"].as_u64().unwrap() > 0);
    // The NodeClaim's cheapest options, cheapest first, the launch among them.
    let cheapest: Vec<f64> =
        v["nodeclaim"]["cheapest"].as_array().unwrap().iter().map(|t| t["price"].as_f64().unwrap()).collect();
    assert!(!cheapest.is_empty() && cheapest.windows(2).all(|w| w[0] <= w[1]), "{cheapest:?}");
    assert_eq!(v["nodeclaim"]["launch"]["instanceType"], v["nodeclaim"]["cheapest"][0]["instanceType"]);
    // Existing nodes: none fits 6 CPUs; two are short of CPU, the node group's is tainted.
    assert_eq!(v["evaluation"]["existingNodesFitting"].as_array().unwrap().len(), 0);
    assert_eq!(v["evaluation"]["existingNodes"][0]["count"], 2);

    let v = json(&["explain", "pod", "huge", "-n", "shop"], 1);
    assert_eq!(v["verdict"], "unschedulable");
    assert_eq!(v["schedulable"], false);
    assert_eq!(v["evaluation"]["nodepools"][1]["failure"]["constraint"], "exceedsLimits");
    assert_eq!(v["evaluation"]["nodepools"][1]["fix"]["fix"], "raiseLimit");

    let v = json(&["explain", "pod", "migrate-1", "-n", "shop"], 0);
    assert_eq!(v["verdict"], "completed");
    assert_eq!(v["standing"]["phase"], "Succeeded");

    let v = json(&["explain", "pod", "api-1", "-n", "shop"], 0);
    assert_eq!(v["verdict"], "running");
    assert_eq!(v["standing"]["node"], NODE_OLD);

    // YAML carries the same answer.
    let (status, yaml, _) = run(&["explain", "pod", "small", "-n", "shop", "--from-file", CLUSTER, "-o", "yaml"]);
    assert_eq!(status, 0);
    let v: Value = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(v["kind"], "PodExplanation");
    assert_eq!(v["verdict"], "wouldBind");
}

#[test]
fn namespaces_work_as_in_kubectl() {
    // Without -n the pod is looked up in `default`.
    let (status, _, stderr) = run(&["explain", "pod", "big", "--from-file", CLUSTER]);
    assert_eq!(status, 2);
    assert!(stderr.contains("pod default/big not found"), "{stderr}");
    // -A finds it in whichever namespace has it.
    let (status, stdout, _) = run(&["explain", "pod", "big", "-A", "--from-file", CLUSTER]);
    assert_eq!(status, 0);
    assert!(stdout.starts_with("Pod shop/big:"), "{stdout}");
    let (status, _, stderr) = run(&["explain", "pod", "nope", "-A", "--from-file", CLUSTER]);
    assert_eq!(status, 2);
    assert!(stderr.contains("no pod named \"nope\" in any namespace"), "{stderr}");
}

#[test]
fn explain_node_checklist_and_unmanaged_nodes() {
    let (status, stdout, stderr) = run(&["explain", "node", NODE_OLD, "--from-file", CLUSTER, "--color", "never"]);
    assert_eq!(status, 0, "{stderr}");
    golden("explain-node-old.txt", &stdout);
    let (_, stdout, _) = run(&["explain", "node", NODE_DRIFTED, "--from-file", CLUSTER]);
    golden("explain-node-drifted.txt", &stdout);

    let v = json(&["explain", "node", NODE_OLD], 0);
    let mut expected = set(&HEADER);
    expected.extend(["managed", "node", "nodeclaim", "nodepool", "price", "checks", "disruptable", "removal"]);
    assert_eq!(keys(&v), expected);
    assert_eq!(v["kind"], "NodeExplanation");
    assert_eq!(v["managed"], true);
    // The node has been quiet since 2026-11-30T08:00 (status.lastPodEventTime), so consolidateAfter
    // (1m) has long elapsed; the weekday budget window blocks Underutilized until 17:00.
    let check = |name: &str| v["checks"].as_array().unwrap().iter().find(|c| c["condition"] == name).unwrap().clone();
    assert_eq!(check("consolidateAfter elapsed")["passed"], true);
    assert_eq!(check("disruption budget allows it")["passed"], false);

    let v = json(&["explain", "node", NODE_GROUP], 0);
    assert_eq!(v["managed"], false);
    assert!(v["whyUnmanaged"].as_str().unwrap().contains("EKS managed node group \"system\""));
    let (status, stdout, _) = run(&["explain", "node", NODE_GROUP, "--from-file", CLUSTER]);
    assert_eq!(status, 0);
    assert!(stdout.contains("is not managed by Karpenter"), "{stdout}");

    let (status, stdout, stderr) = run(&["explain", "node", "nope", "--from-file", CLUSTER]);
    assert_eq!(status, 2);
    assert!(stdout.is_empty());
    assert!(stderr.contains("node \"nope\" not found"), "{stderr}");
}

#[test]
fn explain_nodepool_lists_usage_budgets_drift_and_expiry() {
    let (status, stdout, stderr) = run(&["explain", "nodepool", "general", "--from-file", CLUSTER]);
    assert_eq!(status, 0, "{stderr}");
    golden("explain-nodepool-general.txt", &stdout);

    let v = json(&["explain", "nodepool", "general"], 0);
    let mut expected = set(&HEADER);
    expected.extend([
        "nodepool",
        "nodes",
        "disrupting",
        "usage",
        "allowed",
        "timeline",
        "instanceTypes",
        "drifted",
        "expiring",
    ]);
    assert_eq!(keys(&v), expected);
    assert_eq!(v["kind"], "NodePoolExplanation");
    // Drift Karpenter recorded (the Drifted condition) and expiry from the creation time.
    assert_eq!(v["drifted"][0]["node"], NODE_DRIFTED);
    assert_eq!(v["drifted"][0]["reason"], "AMIDrift");
    assert_eq!(v["expiring"][0]["node"], NODE_OLD);
    assert_eq!(v["expiring"][0]["at"], "2026-12-03T04:00:00Z");

    let (status, _, stderr) = run(&["explain", "nodepool", "nope", "--from-file", CLUSTER]);
    assert_eq!(status, 2);
    assert!(stderr.contains("NodePool \"nope\" not found") && stderr.contains("general, gpu"), "{stderr}");
}

#[test]
fn whatif_reports_the_edit_against_the_unedited_cluster() {
    let edit = "tests/data/edit-nodepool.yaml";
    let (status, stdout, stderr) = run(&["whatif", "-f", edit, "--from-file", CLUSTER, "--color", "never"]);
    // shop/huge and shop/typo stay pending, but without the edit too: exit 0.
    assert_eq!(status, 0, "{stderr}");
    golden("whatif-nodepool.txt", &stdout);

    let v = json(&["whatif", "-f", edit], 0);
    let mut expected = set(&HEADER);
    expected.extend([
        "until",
        "applied",
        "launched",
        "drifted",
        "disruptions",
        "removed",
        "pending",
        "cost",
        "unedited",
    ]);
    assert_eq!(keys(&v), expected);
    assert_eq!(v["kind"], "WhatIf");
    assert_eq!(v["applied"][0], "NodePool/general");
    // The m5.xlarge node no longer meets the NodePool's requirements: drifted and replaced.
    assert_eq!(v["drifted"][0]["nodeclaim"], "general-abcde");
    assert!(v["disruptions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["reason"] == "Drifted" && d["nodes"][0] == NODE_OLD && d["decision"] == "replace"));
    // Only c-category types launch with the edit.
    for l in v["launched"].as_array().unwrap() {
        assert!(l["instanceType"].as_str().unwrap().starts_with('c'), "{l}");
    }
    let cost = &v["cost"];
    let delta = cost["editedPerHour"].as_f64().unwrap() - cost["uneditedPerHour"].as_f64().unwrap();
    assert!((delta - cost["deltaPerHour"].as_f64().unwrap()).abs() < 1e-9);

    assert!(v["pending"].as_array().unwrap().iter().all(|p| p["alsoWithoutEdit"] == true));

    // An edit that leaves a pod pending which would not be without it: exit 1, and it says so.
    let v = json(&["whatif", "-f", "tests/data/edit-limits.yaml"], 1);
    let big = v["pending"].as_array().unwrap().iter().find(|p| p["pod"] == "shop/big").expect("shop/big pending");
    assert_eq!(big["alsoWithoutEdit"], false);
    assert!(big["reason"].as_str().unwrap().contains("limits.cpu"), "{big}");

    // An input error in the edit file: exit 2, located.
    let (status, _, stderr) = run(&["whatif", "-f", "tests/data/bad-nodepool.yaml", "--from-file", CLUSTER]);
    assert_eq!(status, 2);
    assert!(stderr.contains("bad-nodepool.yaml") && stderr.contains("line 10"), "{stderr}");
    let (status, _, stderr) = run(&["whatif", "-f", edit, "--from-file", CLUSTER, "--until", "soon"]);
    assert_eq!(status, 2);
    assert!(stderr.contains("--until \"soon\""), "{stderr}");
}

#[test]
fn colour_headers_region_and_catalogue_flags() {
    let args = ["explain", "pod", "big", "-n", "shop", "--from-file", CLUSTER];
    let with = |extra: &[&str]| {
        let mut all = args.to_vec();
        all.extend(extra);
        run(&all)
    };
    assert!(with(&["--color", "always"]).1.contains("\x1b[32m"));
    assert!(!with(&["--color", "never"]).1.contains('\x1b'));
    // auto: stdout is a pipe here, so no colour.
    assert!(!with(&[]).1.contains('\x1b'));
    assert!(with(&[]).1.contains("NODEPOOL  RESULT"));
    assert!(!with(&["--no-headers"]).1.contains("NODEPOOL  RESULT"));

    let (status, _, stderr) = with(&["--region", "mars-1"]);
    assert_eq!(status, 2);
    assert!(stderr.contains("region \"mars-1\" is not in the catalogue"), "{stderr}");

    // A catalogue where one type is nearly free: the NodeClaim launches it.
    let path = std::env::temp_dir().join(format!("carpentry-catalogue-{}.json", std::process::id()));
    let mut catalogue: Value =
        serde_json::from_str(&std::fs::read_to_string("../core/data/ec2-catalogue.json").unwrap()).unwrap();
    for t in catalogue["types"].as_array_mut().unwrap() {
        if t["name"] == "m7g.2xlarge" {
            t["od_usd"] = Value::from(0.001);
        }
    }
    std::fs::write(&path, catalogue.to_string()).unwrap();
    let (status, stdout, stderr) = with(&["--catalog", path.to_str().unwrap()]);
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.contains("launches m7g.2xlarge on-demand in us-west-2a at $0.0010/hour"), "{stdout}");
    std::fs::write(&path, "{\"schema\": 1}").unwrap();
    let (status, _, stderr) = with(&["--catalog", path.to_str().unwrap()]);
    assert_eq!(status, 2);
    assert!(stderr.contains("not a catalogue"), "{stderr}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn help_speaks_as_kubectl_karpenter() {
    let (status, stdout, _) = run(&["explain", "--help"]);
    assert_eq!(status, 0);
    assert!(stdout.contains("Usage: kubectl karpenter explain"), "{stdout}");
    for flag in
        ["--kubeconfig", "--context", "--namespace", "--all-namespaces", "--from-file", "--no-headers", "--color"]
    {
        assert!(stdout.contains(flag), "{flag} missing from\n{stdout}");
    }
}

#[path = "common/large.rs"]
mod large;

/// The scale of the performance target (500 nodes, 5,000 pods): the answer is right (timing is
/// the benchmark's business: benches/explain.rs).
#[test]
fn explains_a_pod_of_a_500_node_5000_pod_snapshot() {
    let path = std::env::temp_dir().join(format!("carpentry-large-{}.yaml", std::process::id()));
    std::fs::write(&path, large::snapshot(500, 9, 500)).unwrap();
    let file = path.to_str().unwrap();
    let (status, stdout, stderr) = run(&["explain", "pod", "batch-7", "-n", "apps", "--from-file", file, "-o", "json"]);
    assert_eq!(status, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    // 9 × 600m + the agent's 100m leave 2,410m of 7,910m: no node takes 3 CPUs.
    assert_eq!(v["evaluation"]["existingNodesFitting"].as_array().unwrap().len(), 0);
    assert_eq!(v["evaluation"]["existingNodes"][0]["count"], 500);
    assert_eq!(v["verdict"], "wouldLaunch");
    assert_eq!(v["nodeclaim"]["nodepool"], "default");
    if std::env::var_os("KEEP_LARGE").is_none() {
        let _ = std::fs::remove_file(&path);
    }
}

/// A manifest dump without a Scenario (no start time) is explained as of now, and says so.
#[test]
fn a_file_without_a_start_time_is_explained_as_of_now() {
    let nodepool = std::fs::read_to_string("tests/data/nodepool-c5.yaml").unwrap();
    let pod = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers: [{name: c, image: x, resources: {requests: {cpu: \"1\"}}}]\nstatus:\n  conditions: [{type: PodScheduled, status: \"False\", reason: Unschedulable}]\n";
    let path = std::env::temp_dir().join(format!("carpentry-dump-{}.yaml", std::process::id()));
    std::fs::write(&path, format!("{nodepool}{pod}")).unwrap();
    let (status, stdout, stderr) = run(&["explain", "pod", "p", "--from-file", path.to_str().unwrap(), "-o", "json"]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(status, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let note =
        v["notes"].as_array().unwrap().iter().filter_map(Value::as_str).find(|n| n.contains("explained as of now"));
    let note = note.unwrap_or_else(|| panic!("no note in {v}"));
    assert!(note.contains(v["time"].as_str().unwrap()), "{note} vs {}", v["time"]);
    assert_ne!(v["time"], "2026-01-05T09:00:00Z", "not the simulation's default start");
}
