//! `kubectl karpenter simulate` end to end: files in, report and exit status out.

mod common;

use common::{plugin, text};

#[test]
fn all_placed_exits_0_with_the_documented_json() {
    let out = plugin(&["simulate", "-f", "../tests/scenarios/inflate-2vcpu.yaml", "-o", "json"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let claims = report["nodeClaims"].as_array().expect("nodeClaims");
    assert_eq!(claims.len(), 3);
    for c in claims {
        assert_eq!(c["nodePool"], "default");
        assert_eq!(c["capacityType"], "on-demand");
        assert!(c["instanceType"].is_string() && c["zone"].is_string() && c["price"].is_f64());
        let options = c["instanceTypeOptions"].as_array().unwrap();
        assert!(!options.is_empty() && options.len() <= 600);
        assert_eq!(options[0], c["instanceType"], "cheapest option launched");
        assert_eq!(c["pods"].as_array().unwrap().len(), 1);
    }
    assert_eq!(report["unschedulable"], serde_json::json!([]));
    assert_eq!(report["existingNodes"], serde_json::json!([]));
}

#[test]
fn unschedulable_exits_1_with_the_reason() {
    let out = plugin(&["simulate", "-f", "../tests/scenarios/critical-static-group.yaml"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(stdout.contains("critical-a: kube-system/critical-0"), "{stdout}");
    assert!(
        stdout.contains("kube-system/critical-2: NodePool default: label \"node-group\" does not have known values")
    );
    assert!(stdout.contains("2 nodes: insufficient cpu (needs 1, most free 930m)"), "{stdout}");

    let out = plugin(&["simulate", "-f", "../tests/scenarios/critical-static-group.yaml", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let u = &report["unschedulable"][0];
    assert_eq!(u["pod"], "kube-system/critical-2");
    assert!(u["reason"].as_str().unwrap().contains("define node-group"));
    assert_eq!(u["explanation"]["nodepools"][0]["failure"]["constraint"], "requirements");
    assert_eq!(u["explanation"]["existingNodes"][0]["count"], 2);
    assert_eq!(report["existingNodes"][0]["pods"][0], "kube-system/critical-0");
}

#[test]
fn reserved_launches_and_deferred_pods_are_reported() {
    let out = plugin(&["simulate", "-f", "../tests/scenarios/reserved-first.yaml"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a deferred pod is not placed: {}", text(&out.stderr));
    assert!(stdout.contains("default: m5.large reserved (cr-0web1) us-east-1a"), "{stdout}");
    assert!(stdout.contains("Deferred to a later round: 1"), "{stdout}");
    assert!(stdout.contains("default/c: deferred: NodePool default: reservation cr-0web1"), "{stdout}");

    let out = plugin(&["simulate", "-f", "../tests/scenarios/reserved-first.yaml", "-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let reserved: Vec<&serde_json::Value> =
        report["nodeClaims"].as_array().unwrap().iter().filter(|c| c["capacityType"] == "reserved").collect();
    assert_eq!(reserved.len(), 2);
    assert!(reserved.iter().all(|c| c["reservationId"] == "cr-0web1"));
    let on_demand = report["nodeClaims"].as_array().unwrap().iter().find(|c| c["capacityType"] == "on-demand");
    assert!(on_demand.unwrap().get("reservationId").is_none(), "reservationId only for reserved launches");
    let d = &report["deferred"][0];
    assert_eq!(d["pod"], "default/c");
    assert_eq!(d["nodePool"], "default");
    assert_eq!(d["conflict"]["kind"], "exhausted");
    assert_eq!(d["conflict"]["reservations"][0]["left"], 0);
    assert_eq!(d["conflict"]["reservations"][0]["heldBy"], 2);
    assert_eq!(report["unschedulable"], serde_json::json!([]));
}

#[test]
fn several_files_form_one_input_and_bad_input_exits_2() {
    let out = plugin(&[
        "simulate",
        "-f",
        "tests/data/nodepool-c5.yaml",
        "-f",
        "../tests/scenarios/p14-host-ports.yaml",
        "--region",
        "us-east-1",
    ]);
    assert!(matches!(out.status.code(), Some(0)), "{}", text(&out.stderr));
    let out = plugin(&["simulate", "-f", "tests/data/bad-nodepool.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("line 10"));
    let out = plugin(&["simulate", "-f", "../tests/scenarios/p01-one-pod.yaml", "--region", "mars-1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown region"));
}

/// Every field name of the JSON report is camelCase (maps keyed by label or resource names
/// excepted), across the whole scenario corpus.
#[test]
fn json_field_names_are_camel_case() {
    fn check(v: &serde_json::Value, path: &str, bad: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, child) in map {
                    if k.contains('_') || k.contains('-') {
                        bad.push(format!("{path}.{k}"));
                    }
                    // Maps keyed by label, resource or domain names.
                    if !matches!(k.as_str(), "labels" | "requests" | "counts" | "daemonOverheadMax" | "shortfall") {
                        check(child, &format!("{path}.{k}"), bad);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|i| check(i, path, bad)),
            _ => {}
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir("../tests/scenarios").expect("the scenario corpus") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let out = plugin(&["simulate", "-f", path.to_str().unwrap(), "-o", "json"]);
        if out.status.code() == Some(2) {
            continue;
        }
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let mut bad = Vec::new();
        check(&report, "", &mut bad);
        assert!(bad.is_empty(), "{}: {bad:?}", path.display());
        let text = report.to_string();
        for field in ["mostFree", "smallestType", "toAtLeast"] {
            if text.contains(&format!("\"{field}\"")) {
                seen.insert(field);
            }
        }
    }
    // The corpus exercises the fields that used to be snake_case.
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["mostFree", "smallestType", "toAtLeast"]);
}

#[test]
fn until_runs_the_scenario_over_time() {
    let out =
        plugin(&["simulate", "-f", "../tests/scenarios/time-spot-interruption.yaml", "--until", "10m", "-o", "json"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["kind"], "Simulation");
    assert_eq!(report["time"], "10m0s");
    let kinds: Vec<&str> = report["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"SpotInterrupted") && kinds.contains(&"Evicted"), "{kinds:?}");
    let nodes = report["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0]["capacityType"], "spot");
    assert_eq!(nodes[0]["pods"].as_array().unwrap().len(), 3);
    assert!(nodes[0]["createdAt"].as_str().unwrap().starts_with("5m"));
    assert!(report["cost"]["total"].as_f64().unwrap() > 0.0);

    // Text: the log and the state; pods still pending at the end exit 1.
    let out = plugin(&["simulate", "-f", "../tests/scenarios/time-inflate-scale-up.yaml", "--until", "1m"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("NodeClaimCreated") && stdout.contains("PENDING: default/inflate-0"), "{stdout}");

    let out = plugin(&["simulate", "-f", "../tests/scenarios/time-inflate-scale-up.yaml", "--until", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--until \"soon\" is not a duration"), "{}", text(&out.stderr));
}

#[test]
fn until_reports_disruptions_nodepools_and_explanations() {
    let file = "../tests/scenarios/time-consolidation.yaml";
    let out = plugin(&["simulate", "-f", file, "--until", "20m", "-o", "json", "--explain", "node/ip-10-0-1-2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // The consolidation the log shows is also a disruption record.
    let d = &report["disruptions"][0];
    assert_eq!(d["reason"], "Underutilized");
    assert_eq!(d["decision"], "replace");
    assert_eq!(d["nodes"], serde_json::json!(["ip-10-0-1-1"]));
    assert_eq!(d["replacements"], serde_json::json!(["c5.xlarge"]));
    assert!(d["savingsPerHour"].as_f64().unwrap() > 0.0);
    // Every NodePool: usage, allowances per reason, a 7-day timeline in calendar time.
    let np = &report["nodePools"][0];
    assert_eq!(np["nodepool"], "default");
    let reasons: Vec<&str> = np["allowed"].as_array().unwrap().iter().map(|a| a["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["Empty", "Drifted", "Underutilized"]);
    assert_eq!(np["timeline"][0]["from"], "2026-01-05T09:20:00Z");
    assert!(np["usage"].as_array().unwrap().iter().any(|u| u["resource"] == "nodes" && u["used"] == "1"));
    // The node asked about: every check passed, and removing it saves nothing.
    let e = &report["explanations"][0];
    assert_eq!(e["kind"], "Node");
    assert_eq!(e["node"], "ip-10-0-1-2");
    assert_eq!(e["disruptable"], true);
    assert_eq!(e["removal"]["savingsPerHour"].as_f64(), Some(0.0));

    let out = plugin(&["simulate", "-f", file, "--until", "20m", "--explain", "node/ip-10-0-1-2"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("DISRUPTIONS") && stdout.contains("Underutilized replace ip-10-0-1-1 → c5.xlarge"),
        "{stdout}"
    );
    assert!(stdout.contains("removing it would save nothing"), "{stdout}");
    assert!(stdout.contains("budgets over the next 7 days"), "{stdout}");

    // A node that is gone, or a kind that is not explained, is a clear error.
    let out = plugin(&["simulate", "-f", file, "--until", "20m", "--explain", "node/ip-10-0-1-1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no node \"ip-10-0-1-1\""), "{}", text(&out.stderr));
    let out = plugin(&["simulate", "-f", file, "--until", "20m", "--explain", "pod/x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no pod default/x"), "{}", text(&out.stderr));
    let out = plugin(&["simulate", "-f", file, "--until", "20m", "--explain", "deployment/x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("expected pod/[NAMESPACE/]NAME, node/NAME or nodepool/NAME"),
        "{}",
        text(&out.stderr)
    );

    // A pod: running where, or what a round would do with it.
    let out = plugin(&["simulate", "-f", file, "--until", "20m", "-o", "json", "--explain", "pod/default/inflate-10"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["explanations"][0]["kind"], "Pod");
    assert_eq!(report["explanations"][0]["standing"]["state"], "running");
    assert_eq!(report["explanations"][0]["standing"]["node"], "ip-10-0-1-2");
}

#[test]
fn a_balanced_nodepool_scores_the_node_it_keeps() {
    let file = "../tests/scenarios/time-balanced-consolidation.yaml";
    let out = plugin(&["simulate", "-f", file, "--until", "19m", "-o", "json", "--explain", "node/ip-10-0-1-1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let e = &report["explanations"][0];
    let balanced =
        e["checks"].as_array().unwrap().iter().find(|c| c["condition"] == "Balanced policy approves the move");
    let balanced = balanced.expect("a Balanced check");
    assert_eq!(balanced["passed"], false);
    assert!(balanced["detail"].as_str().unwrap().starts_with("score 0.11 is below threshold 0.50"), "{balanced}");
    assert_eq!(e["disruptable"], false);
}

const COMPARE_INFLATE: &str = "tests/data/compare-inflate.yaml";

#[test]
fn compare_runs_both_autoscalers_over_the_same_steps() {
    let out = plugin(&["compare", "-f", COMPARE_INFLATE, "--until", "15m", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(c["kind"], "Comparison");
    assert_eq!(c["until"], "15m0s");
    let settled = |side: &str| -> Vec<(String, u64, String)> {
        c[side]["timeToAllRunning"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (s["at"].as_str().unwrap().into(), s["pending"].as_u64().unwrap(), s["after"].as_str().unwrap().into())
            })
            .collect()
    };
    let step = |at: &str, pending, after: &str| (at.to_string(), pending, after.to_string());
    // Karpenter: a round a second after the pods, CreateFleet, the join and Ready.
    assert_eq!(settled("karpenter"), [step("0s", 3, "56s"), step("5m0s", 2, "56s"), step("8m0s", 0, "0s")]);
    // CA: a scan interval of new-pod delay, the calibrated ASG delay, then the same node life.
    assert_eq!(settled("clusterAutoscaler"), [step("0s", 3, "1m55s"), step("5m0s", 2, "1m55s"), step("8m0s", 0, "0s")]);
    assert_eq!(c["karpenter"]["pendingPodSeconds"], 3.0 * 56.0 + 2.0 * 56.0);
    assert_eq!(c["clusterAutoscaler"]["pendingPodSeconds"], 5.0 * 115.0);
    // Karpenter consolidates the node the scale-in emptied at once; CA waits 10 minutes unneeded.
    assert_eq!(c["karpenter"]["nodes"].as_array().unwrap().len(), 4);
    assert_eq!(c["karpenter"]["disruptions"], 1);
    let ca_nodes = c["clusterAutoscaler"]["nodes"].as_array().unwrap();
    assert_eq!(ca_nodes.len(), 5);
    assert!(ca_nodes.iter().all(|n| n["nodeGroup"] == "general" && n["instanceType"] == "m5.large"));
    let per_hour = c["clusterAutoscaler"]["costPerHour"].as_f64().unwrap();
    assert!((per_hour - 5.0 * ca_nodes[0]["price"].as_f64().unwrap()).abs() < 1e-9);
    assert!(c["clusterAutoscaler"]["costTotal"].as_f64().unwrap() > c["karpenter"]["costTotal"].as_f64().unwrap());
    assert!(c["karpenter"]["cpuRequestedFraction"].as_f64().unwrap() > 0.5);
    assert_eq!(c["karpenter"]["nodePools"], serde_json::json!(["default"]));
    assert_eq!(c["clusterAutoscaler"]["nodeGroups"][0]["metadata"]["name"], "general");

    let out = plugin(&["compare", "-f", COMPARE_INFLATE, "--until", "15m"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    // CA's status ConfigMap and its last scale-down pass, node by node, in CA's words.
    assert!(stdout.contains("CLUSTER AUTOSCALER'S STATUS CONFIGMAP AT THE END"), "{stdout}");
    assert!(stdout.contains("general: Healthy (5/5 ready, target 5 of "), "{stdout}");
    assert!(stdout.contains("CLUSTER AUTOSCALER'S LAST SCALE-DOWN PASS, NODE BY NODE"), "{stdout}");
    assert!(stdout.contains(": unneeded since +8m"), "the node the scale-in emptied: {stdout}");
    let start = stdout.lines().find(|l| l.starts_with("all Running after the start")).unwrap_or_default();
    assert_eq!(start.split_whitespace().rev().take(2).collect::<Vec<_>>(), ["1m55s", "56s"], "{stdout}");
    assert!(stdout.contains("TriggeredScaleUp") && stdout.contains("NodeClaimCreated"), "{stdout}");

    // Over 30 minutes CA's scale-down removes the node the scale-in emptied, 10 minutes after.
    let out = plugin(&["compare", "-f", COMPARE_INFLATE, "--until", "30m", "-o", "json"]);
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(c["clusterAutoscaler"]["nodes"].as_array().unwrap().len(), 4);
    assert_eq!(c["clusterAutoscaler"]["disruptions"], 1);
    let removed = c["clusterAutoscaler"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "ScaleDownEmpty" && e["message"].as_str().unwrap().ends_with("removed"))
        .expect("a ScaleDownEmpty event");
    assert_eq!(removed["at"], "18m5s");
}

#[test]
fn compare_takes_groups_from_their_own_file_and_says_what_is_misplaced() {
    let out = plugin(&["compare", "-f", "../tests/scenarios/inflate-2vcpu.yaml", "--node-groups", COMPARE_INFLATE]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("holds objects other than NodeGroups"), "{}", text(&out.stderr));
    // Groups from their own file take the place of the files' groups.
    let groups = std::env::temp_dir().join(format!("carpentry-groups-{}.yaml", std::process::id()));
    std::fs::write(
        &groups,
        "apiVersion: carpentry.dev/v1alpha1\nkind: NodeGroup\nmetadata: {name: small}\n\
         spec: {minSize: 0, maxSize: 2, instanceTypes: [m5.large], zones: [us-east-1a]}\n",
    )
    .unwrap();
    let out = plugin(&["compare", "-f", COMPARE_INFLATE, "--node-groups", groups.to_str().unwrap(), "-o", "json"]);
    let _ = std::fs::remove_file(&groups);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(c["clusterAutoscaler"]["nodeGroups"].as_array().unwrap().len(), 1);
    assert_eq!(c["clusterAutoscaler"]["nodeGroups"][0]["metadata"]["name"], "small");
    assert_eq!(c["clusterAutoscaler"]["pending"].as_array().unwrap().len(), 2, "two nodes for four pods");
    assert_eq!(c["clusterAutoscaler"]["timeToAllRunning"][0]["after"], serde_json::Value::Null);
    // The groups as an eksctl ClusterConfig.
    let eksctl = std::env::temp_dir().join(format!("carpentry-eksctl-{}.yaml", std::process::id()));
    std::fs::write(
        &eksctl,
        "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {name: prod, region: us-east-1}\n\
         managedNodeGroups:\n- {name: small, instanceType: m5.large, minSize: 0, maxSize: 2, availabilityZones: [us-east-1a]}\n",
    )
    .unwrap();
    let out = plugin(&["compare", "-f", COMPARE_INFLATE, "--node-groups", eksctl.to_str().unwrap(), "-o", "json"]);
    let _ = std::fs::remove_file(&eksctl);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let group = &c["clusterAutoscaler"]["nodeGroups"][0];
    assert_eq!(
        (group["metadata"]["name"].as_str(), group["spec"]["desiredCapacity"].as_i64()),
        (Some("small"), Some(0))
    );
    assert_eq!(group["spec"]["labels"]["eks.amazonaws.com/nodegroup"], "small");
    assert_eq!(c["clusterAutoscaler"]["pending"].as_array().unwrap().len(), 2, "two nodes for four pods");
    // CA's status at the end: the group at its max, its two nodes ready.
    let status = &c["clusterAutoscaler"]["status"];
    assert_eq!(status["nodeGroups"][0]["health"]["cloudProviderTarget"], 2);
    assert_eq!(status["nodeGroups"][0]["health"]["nodeCounts"]["registered"]["ready"], 2);
    assert!(c["karpenter"].get("status").is_none(), "Karpenter writes no CA status");

    let out = plugin(&["compare", "-f", COMPARE_INFLATE, "--until", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--until \"soon\""));
}

#[test]
fn compare_derives_a_group_per_nodepool_shape_and_purchase_option_when_none_is_given() {
    let out =
        plugin(&["compare", "-f", "../tests/scenarios/resident-and-batch-spot.yaml", "--until", "30m", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let ca = &c["clusterAutoscaler"];
    let names: Vec<&str> =
        ca["nodeGroups"].as_array().unwrap().iter().map(|g| g["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["batch-spot-c6g-2xlarge-spot", "resident-m6g-large-on-demand"]);
    let batch = &ca["nodeGroups"][0]["spec"];
    assert_eq!(batch["capacityType"], "spot");
    assert_eq!(batch["labels"]["karpenter.sh/nodepool"], "batch-spot");
    assert_eq!(batch["taints"].as_array().unwrap().len(), 1, "the NodePool's taint");
    assert_eq!(ca["nodeGroupsDerived"][0]["nodes"], 1);
    assert_eq!(ca["nodeGroupsDerived"][0]["maxSizeFrom"]["from"], "unlimited");
    // The derived groups run every pod, each on the type Karpenter chose.
    assert_eq!(ca["pending"], serde_json::json!([]));
    let types = |side: &serde_json::Value| -> Vec<String> {
        let mut t: Vec<String> =
            side["nodes"].as_array().unwrap().iter().map(|n| n["instanceType"].as_str().unwrap().into()).collect();
        t.sort();
        t
    };
    assert_eq!(types(ca), types(&c["karpenter"]));
    assert_eq!(ca["timeToAllRunning"][0]["after"], "1m55s");

    let out = plugin(&["compare", "-f", "../tests/scenarios/resident-and-batch-spot.yaml", "--until", "30m"]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("NodePools / node groups, derived"), "{stdout}");
    assert!(
        stdout.contains("batch-spot-c6g-2xlarge-spot: NodePool batch-spot ran 1 spot c6g.2xlarge node(s)"),
        "{stdout}"
    );
}
