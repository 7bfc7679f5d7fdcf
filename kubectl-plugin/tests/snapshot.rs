//! `kubectl karpenter snapshot`, offline: from files (redaction, loading back, idempotence,
//! `--keep-images`) and the failures of a live read that need no cluster (no kubeconfig, unknown
//! context, nothing listening). The live read itself is tested in tests/live.rs.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::{plugin, text};

const CLUSTER: &str = "tests/data/snapshot-cluster.yaml";

/// A fresh directory under the system temp dir.
fn temp_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir = std::env::temp_dir().join(format!("carpentry-snapshot-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn snapshot(args: &[&str]) -> (Output, String) {
    let mut all = vec!["snapshot"];
    all.extend(args);
    let out = plugin(&all);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "snapshot {args:?}: {}", text(&out.stderr));
    (out, stdout)
}

/// The YAML documents after the header comment.
fn documents(snapshot: &str) -> Vec<serde_yaml::Value> {
    snapshot.split("\n---\n").skip(1).map(|d| serde_yaml::from_str(d).expect("a YAML document")).collect()
}

/// The snapshot without its header comment (which names the source).
fn body(snapshot: &str) -> &str {
    let start = snapshot.find("\n---\n").expect("a header then documents");
    &snapshot[start..]
}

#[test]
fn redacts_what_the_engine_does_not_read() {
    let (_, out) = snapshot(&["--from-file", CLUSTER]);
    for secret in [
        "hunter2",
        "s3cr3t-token",
        "very-secret",
        "registry.example.com",
        "sha256",
        "secretKeyRef",
        "shop-secrets",
        "last-applied-configuration",
        "prometheus.io",
        "node.alpha.kubernetes.io/ttl",
        "example.com/ticket",
        "checksum/config",
        "deprecated.daemonset.template.generation",
        "--db-password",
        "/migrate",
    ] {
        assert!(!out.contains(secret), "{secret:?} left in the snapshot:\n{out}");
    }
    assert!(out.starts_with("# A carpentry snapshot"), "{out}");
    assert!(out.contains(&format!("# Taken from {CLUSTER} (the state at 2026-12-01T12:00:00Z).")), "{out}");
    assert!(out.contains("# Redacted: "), "{out}");
    assert!(out.contains("8 objects: 1 NodePool, 1 EC2NodeClass, 1 NodeClaim, 1 Node, 1 DaemonSet, 3 Pods"), "{out}");

    let docs = documents(&out);
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Scenario", "NodePool", "EC2NodeClass", "NodeClaim", "Node", "DaemonSet", "Pod", "Pod", "Pod"]);
    assert_eq!(docs[0]["apiVersion"], "carpentry.dev/v1alpha1");
    assert_eq!(docs[0]["spec"]["region"], "us-west-2", "the nodes' region");

    // Kept: what Karpenter and the scheduler read.
    let web = docs.iter().find(|d| d["metadata"]["name"] == "web-1").unwrap();
    assert_eq!(web["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"], "true");
    assert_eq!(web["metadata"]["annotations"].as_mapping().unwrap().len(), 1);
    let web_container = &web["spec"]["containers"][0];
    let env: Vec<&str> =
        web_container["env"].as_sequence().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(env, ["DB_PASSWORD", "DB_USER"]);
    assert!(web_container["env"][1].get("valueFrom").is_none());
    assert!(web_container.get("envFrom").is_none());
    assert_eq!(web_container["image"], "redacted");
    assert_eq!(web_container["resources"]["requests"]["cpu"], "1");
    assert_eq!(web["spec"]["initContainers"][0]["image"], "redacted");
    assert_eq!(web["status"]["containerStatuses"][0]["imageID"], "redacted");
    let agent = docs.iter().find(|d| d["metadata"]["name"] == "node-agent-abcde").unwrap();
    assert_eq!(agent["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
    assert_eq!(agent["metadata"]["ownerReferences"][0]["uid"], "5b1f5d0e-0000-4000-8000-000000000001");
    let nodepool = &docs[1];
    assert_eq!(nodepool["metadata"]["annotations"]["karpenter.sh/nodepool-hash"], "4012513481623584108");
    assert_eq!(
        nodepool["spec"]["template"]["metadata"]["annotations"]["team.example.com/owner"], "payments",
        "a NodePool's template is kept whole (it decides drift)"
    );
    let node = &docs[4];
    assert!(node["status"].get("images").is_none());
    assert_eq!(node["metadata"]["annotations"]["karpenter.k8s.aws/ec2nodeclass-hash"], "123");
}

#[test]
fn loads_back_to_the_same_snapshot() {
    let dir = temp_dir("idempotent");
    let first = dir.join("first.yaml");
    let out = plugin(&["snapshot", "--from-file", CLUSTER, "-o", first.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(stderr.contains(&format!("wrote 8 objects (1 NodePool, 1 EC2NodeClass, 1 NodeClaim, 1 Node, 1 DaemonSet, 3 Pods) from {CLUSTER} to {}", first.display())), "{stderr}");
    let first_text = std::fs::read_to_string(&first).unwrap();
    let (_, second) = snapshot(&["--from-file", first.to_str().unwrap()]);
    assert_eq!(body(&first_text), body(&second));
    assert!(
        second.contains(&format!("# Taken from {} (the state at 2026-12-01T12:00:00Z).", first.display())),
        "{second}"
    );
    // With images kept, a second pass keeps them too.
    let kept = dir.join("kept.yaml");
    snapshot(&["--keep-images", "--from-file", CLUSTER, "-o", kept.to_str().unwrap()]);
    let kept_text = std::fs::read_to_string(&kept).unwrap();
    let (_, again) = snapshot(&["--keep-images", "--from-file", kept.to_str().unwrap()]);
    assert_eq!(body(&kept_text), body(&again));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn keep_images_keeps_image_names_only() {
    let (_, out) = snapshot(&["--keep-images", "--from-file", CLUSTER]);
    assert!(out.contains("(image names are kept: --keep-images)"), "{out}");
    let docs = documents(&out);
    let web = docs.iter().find(|d| d["metadata"]["name"] == "web-1").unwrap();
    assert_eq!(web["spec"]["containers"][0]["image"], "registry.example.com/shop/web:7");
    assert_eq!(web["spec"]["initContainers"][0]["image"], "registry.example.com/shop/migrate:7");
    assert_eq!(web["status"]["containerStatuses"][0]["imageID"], "registry.example.com/shop/web@sha256:feed");
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    assert_eq!(ds["spec"]["template"]["spec"]["containers"][0]["image"], "registry.example.com/agent:2.0");
    for secret in ["hunter2", "s3cr3t-token", "last-applied-configuration"] {
        assert!(!out.contains(secret), "{secret:?} left in the snapshot");
    }
}

#[test]
fn explain_answers_the_same_on_the_snapshot() {
    let dir = temp_dir("answers");
    let file = dir.join("snapshot.yaml");
    snapshot(&["--from-file", CLUSTER, "-o", file.to_str().unwrap()]);
    for (args, code) in [
        (vec!["pod", "web-1", "-n", "shop"], 0),
        (vec!["pod", "batch-1", "-n", "shop"], 0),
        (vec!["node", "ip-10-0-1-17.us-west-2.compute.internal"], 0),
        (vec!["nodepool", "general"], 0),
    ] {
        let answer = |from: &str| {
            let mut all = vec!["explain"];
            all.extend(&args);
            all.extend(["-o", "json", "--from-file", from]);
            let out = plugin(&all);
            assert_eq!(out.status.code(), Some(code), "{all:?}: {}", text(&out.stderr));
            let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
            v.as_object_mut().unwrap().remove("source");
            v
        };
        assert_eq!(answer(CLUSTER), answer(file.to_str().unwrap()), "explain {args:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn live_snapshot(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-karpenter"))
        .arg("snapshot")
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", dir)
        .output()
        .expect("run kubectl-karpenter")
}

#[test]
fn live_read_failures_without_a_cluster() {
    let dir = temp_dir("live-failures");

    // No kubeconfig anywhere.
    let out = live_snapshot(&dir, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("no kubeconfig at {}", dir.join(".kube/config").display())), "{stderr}");
    let out = live_snapshot(&dir, &["--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no kubeconfig at /nonexistent/kubeconfig"), "{}", text(&out.stderr));

    // A kubeconfig whose server is not listening; an unknown context.
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: here\n\
         clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n\
         users: [{name: u, user: {token: abc}}]\n\
         contexts: [{name: here, context: {cluster: c, user: u}}]\n",
    )
    .unwrap();
    let path = kubeconfig.to_str().unwrap();
    let out = live_snapshot(&dir, &["--kubeconfig", path]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot reach the API server at https://127.0.0.1:1 (context here)"), "{stderr}");
    let out = live_snapshot(&dir, &["--kubeconfig", path, "--context", "elsewhere"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("context \"elsewhere\" is not in kubeconfig {path} (it has: here)")), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
