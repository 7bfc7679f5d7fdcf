//! The plugin binary end to end: arguments in, stdout/stderr/exit code out.

mod common;

use common::{plugin, text};
use std::process::Command;

#[test]
fn convert_prints_v1_yaml_and_notes() {
    let out = plugin(&["convert", "-f", "tests/data/provisioner.yaml"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let docs: Vec<serde_yaml::Value> =
        stdout.split("\n---\n").map(|d| serde_yaml::from_str(d).expect("valid YAML document")).collect();
    let nodepool = docs.iter().find(|d| d["kind"] == "NodePool").expect("a NodePool");
    assert_eq!(nodepool["apiVersion"], "karpenter.sh/v1");
    assert_eq!(nodepool["spec"]["template"]["spec"]["expireAfter"], "Never");
    assert_eq!(nodepool["spec"]["disruption"]["consolidationPolicy"], "WhenEmpty");
    assert_eq!(nodepool["spec"]["disruption"]["consolidateAfter"], "30s");
    assert_eq!(nodepool["spec"]["limits"]["cpu"], "1k");
    let nodeclass = docs.iter().find(|d| d["kind"] == "EC2NodeClass").expect("an EC2NodeClass");
    assert_eq!(nodeclass["apiVersion"], "karpenter.k8s.aws/v1");
    assert!(stderr.contains("ttlSecondsUntilExpired"), "{stderr}");
    assert!(stderr.contains("ttlSecondsAfterEmpty"), "{stderr}");
}

#[test]
fn convert_to_nodepools_proposes_applicable_objects_with_their_reasons() {
    let out = plugin(&["convert", "--to", "nodepools", "-f", "tests/data/node-groups.yaml", "--cluster-name", "prod"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("proposed 2 NodePool(s) and 1 EC2NodeClass for 3 node group(s)"), "{stderr}");
    let docs: Vec<serde_yaml::Value> =
        stdout.split("\n---\n").map(|d| serde_yaml::from_str(d).expect("valid YAML document")).collect();
    let kinds: Vec<(&str, &str)> =
        docs.iter().map(|d| (d["kind"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap())).collect();
    assert_eq!(kinds, [("EC2NodeClass", "default"), ("NodePool", "batch-spot"), ("NodePool", "general")]);
    assert_eq!(docs[0]["spec"]["role"], "KarpenterNodeRole-prod");
    let general = &docs[2];
    assert_eq!(general["spec"]["template"]["metadata"]["labels"]["workload"], "general");
    assert_eq!(general["spec"]["limits"]["cpu"], "80", "20 m5.xlarge of 4 vCPU");
    // Each object is preceded by why it is so.
    assert!(stdout.contains("# replaces node groups general-1a, general-1b: "), "{stdout}");
    assert!(stdout.contains("# general-1a minSize 1, general-1b minSize 1: a NodePool keeps no minimum"), "{stdout}");
    // What was printed loads again as valid objects.
    let dir = std::env::temp_dir().join(format!("convert-nodepools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("nodepools.yaml");
    std::fs::write(&file, &stdout).unwrap();
    let again = plugin(&["convert", "-f", file.to_str().unwrap()]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    std::fs::remove_dir_all(&dir).ok();

    // describe-auto-scaling-groups output names its cluster in the groups' tags.
    let out = plugin(&["convert", "--to", "nodepools", "-f", "tests/data/asgs.json"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("role: KarpenterNodeRole-staging"), "{stdout}");
    assert!(stdout.contains("name: eks-general-2ec8"), "{stdout}");
    assert!(stdout.contains("- spot"), "{stdout}");

    // An eksctl ClusterConfig: five groups, three kinds of node.
    let out = plugin(&["convert", "--to", "nodepools", "-f", "tests/data/eksctl-cluster.yaml"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("proposed 3 NodePool(s) and 1 EC2NodeClass for 5 node group(s)"), "{stderr}");
    assert!(stdout.contains("role: KarpenterNodeRole-prod"), "{stdout}");
    for name in ["name: batch-spot", "name: resident", "name: runners"] {
        assert!(stdout.contains(name), "{name}: {stdout}");
    }
    assert!(
        stdout.contains(
            "# label alpha.eksctl.io/nodegroup-name (runners-amd64, runners-arm64) names the group a node came from"
        ),
        "{stdout}"
    );

    let out = plugin(&["convert", "--to", "nodepools", "-f", "tests/data/node-groups.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--cluster-name is required"), "{}", text(&out.stderr));
    let out = plugin(&["convert", "--to", "nodepools", "-f", "tests/data/provisioner.yaml", "--cluster-name", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no node groups found"), "{}", text(&out.stderr));
}

#[test]
fn bad_input_exits_2_with_a_located_error() {
    let out = plugin(&["convert", "-f", "tests/data/bad-nodepool.yaml"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("tests/data/bad-nodepool.yaml"), "{stderr}");
    assert!(stderr.contains("document 1 (NodePool/broken)"), "{stderr}");
    assert!(stderr.contains("spec.template.spec.requirements[0].operator"), "{stderr}");
    assert!(stderr.contains("line 10"), "{stderr}");
    assert!(out.stdout.is_empty());

    let out = plugin(&["types", "-f", "tests/data/does-not-exist.yaml"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn types_lists_allowed_instance_types_cheapest_first() {
    let out = plugin(&["types", "-f", "tests/data/nodepool-c5.yaml", "--region", "eu-west-1", "-o", "json"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    let rows = rows.as_array().expect("a list");
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["c5.large", "c5.xlarge", "c5.2xlarge", "c5.4xlarge"], "{stderr}");
    let prices: Vec<f64> = rows.iter().map(|r| r["offerings"][0]["price"].as_f64().unwrap()).collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
    for row in rows {
        for offering in row["offerings"].as_array().unwrap() {
            assert!(offering["zone"].as_str().unwrap().starts_with("eu-west-1"));
            assert_eq!(offering["capacityType"], "on-demand");
            assert_eq!(offering["priceSource"], "published");
        }
    }
    let c5_4xlarge = &rows[3];
    assert_eq!(c5_4xlarge["allocatable"]["pods"], "234");
    assert_eq!(c5_4xlarge["allocatable"]["cpu"], "15890m");
}

#[test]
fn types_table_marks_synthetic_spot_prices() {
    let out = plugin(&["types", "-f", "tests/data/provisioner.yaml"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.lines().next().unwrap().starts_with("NODEPOOL"), "{stdout}");
    assert!(stdout.contains("spot"), "{stdout}");
    assert!(stdout.contains("synthetic"), "{stdout}");
    assert!(stderr.contains("note:"), "conversion notes are shown: {stderr}");
}

#[test]
fn types_reports_the_worked_example() {
    let input = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: m5}
spec:
  template:
    spec:
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: missing}
"#;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-karpenter"))
        .args(["types", "-f", "-", "-o", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("assuming the default"), "{stderr}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let alloc = &rows[0]["allocatable"];
    assert_eq!(rows[0]["name"], "m5.large");
    assert_eq!(alloc["cpu"], "1930m");
    assert_eq!(alloc["memory"], "6903Mi");
    assert_eq!(alloc["ephemeral-storage"], "17Gi");
    assert_eq!(alloc["pods"], "29");
}

#[test]
fn krew_manifest_template_names_the_binary_for_every_platform() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/krew/karpenter.yaml")).unwrap();
    let manifest: serde_yaml::Value = serde_yaml::from_str(&text).expect("valid YAML");
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "karpenter", "kubectl karpenter ↔ plugin name karpenter");
    let platforms = manifest["spec"]["platforms"].as_sequence().unwrap();
    assert!(platforms.len() >= 4);
    for p in platforms {
        let bin = p["bin"].as_str().unwrap();
        assert!(bin == "kubectl-karpenter" || bin == "kubectl-karpenter.exe", "{bin}");
        assert!(p["files"].as_sequence().unwrap().iter().any(|f| f["from"] == bin), "{bin} is not in the archive");
        assert!(p["uri"].as_str().unwrap().contains("vVERSION"));
    }
}
