//! The controller against a real control plane (tests/testenv: kube-apiserver, etcd,
//! kube-scheduler, KWOK), as users start it: the binary, a kubeconfig, `--dry-run`.
//!
//! Real: the API server with upstream's own CRDs (controller/deploy/chart/crds, installed as a user
//! installs them), kube-scheduler, kube-controller-manager (Deployments, PDB status), KWOK (it
//! makes the kwok provider's Nodes Ready and runs their pods), the watches, the Lease, the
//! Eviction API, the HTTP endpoints, SIGTERM. The kwok provider is the controller's own.
//!
//! - the dry run: `/readyz`, `/snapshot` loads in core and explains an unschedulable pod, events
//!   say what it would have done (`FailedScheduling`, `Nominated` for a new NodeClaim), nothing is
//!   created, `/metrics`, the Lease, SIGTERM releases it;
//! - inflate 0 → 3 (three NodeClaims, Nodes Ready, pods Running; the NodePool's status counts
//!   them, it is Ready and carries our hash version), `kubectl delete node` replaced, scale to 0
//!   removed by emptiness, a leaked instance garbage-collected;
//! - a NodePool requirement edit drifts the nodes: replaced under a budget of one node, except the
//!   nodes a `karpenter.sh/do-not-disrupt` pod and a PDB with `maxUnavailable: 0` hold, which say
//!   so in `DisruptionBlocked` events, each published once, not once a pass.
//! - bad objects beside good ones: a NodePool no instance type satisfies, one naming a missing
//!   EC2NodeClass, a pod whose `karpenter.sh/do-not-disrupt` value protects nothing; each said
//!   once on the object while a good NodePool provisions and the controller runs on;
//! - two replicas on one Lease: the follower writes nothing (its own `/metrics`); the leader
//!   SIGKILLed, the follower leads once the Lease runs out and launches nothing again;
//! - a leader cut off from the API server (a test-owned TCP proxy between them) no longer leads,
//!   by its own `/metrics`, before the Lease's duration has passed since its last renewTime (when
//!   another replica could take it over), and exits.
//!
//! Prediction is reality: each test also runs core's simulation of the controller's own
//! `/snapshot` (which carries the provider's timings) through the same edits, and compares what
//! the cluster ends up with (NodeClaims by NodePool and instance type, bound pods) and which
//! disruption commands ran (method, decision, candidates, replacement types) with what happened.

use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use carpentry_tests::testenv::{unique_name, wait_for, TestEnv};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::json;

#[path = "support/harness.rs"]
mod harness;
#[path = "support/prediction.rs"]
mod prediction;

use harness::{
    free_port, get, has_sample, inflate_deployment, install_crds, metric_sum, resource, running_exactly, Controller,
    Partition,
};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Controllers that act (not `--dry-run`) see every NodePool and Node of the shared control
/// plane: one at a time, each test removing its nodes before it ends.
static ACTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Creates an EC2NodeClass named `class` (discovery tag `tag`) and a NodePool named `nodepool` with
/// `template` as its `spec.template` (its `spec.nodeClassRef` is filled in).
async fn create_class_and_nodepool(
    client: &Client,
    class: &str,
    tag: &str,
    nodepool: &str,
    mut template: serde_json::Value,
    disruption: Option<serde_json::Value>,
) -> Result<()> {
    let pp = PostParams::default();
    let classes = resource("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses");
    let mut obj = DynamicObject::new(class, &classes);
    obj.data = json!({ "spec": {
        "amiSelectorTerms": [{ "alias": "al2023@latest" }],
        "role": format!("KarpenterNodeRole-{tag}"),
        "subnetSelectorTerms": [{ "tags": { "karpenter.sh/discovery": tag } }],
        "securityGroupSelectorTerms": [{ "tags": { "karpenter.sh/discovery": tag } }],
    } });
    Api::<DynamicObject>::all_with(client.clone(), &classes).create(&pp, &obj).await?;
    template["spec"]["nodeClassRef"] = json!({ "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class });
    let pools = resource("karpenter.sh", "NodePool", "nodepools");
    let mut obj = DynamicObject::new(nodepool, &pools);
    obj.data = json!({ "spec": { "template": template } });
    if let Some(d) = disruption {
        obj.data["spec"]["disruption"] = d;
    }
    Api::<DynamicObject>::all_with(client.clone(), &pools).create(&pp, &obj).await?;
    Ok(())
}

/// The controller's `/snapshot` once its view holds NodePool `nodepool`, as a [`prediction::Prediction`].
async fn predict(health: u16, nodepool: &str) -> Result<prediction::Prediction> {
    let body = wait_for("/snapshot to hold the NodePool", TIMEOUT, || async {
        let (code, body) = get(health, "/snapshot")?;
        ensure!(code == 200, "/snapshot answered {code}: {body}");
        Ok(body.contains(&format!("name: {nodepool}")).then_some(body))
    })
    .await?;
    prediction::Prediction::new(&body)
}

/// What the controller process has used so far (Linux `/proc`): reported, never asserted.
#[derive(Debug, Clone, Copy)]
struct Usage {
    rss_kb: u64,
    peak_rss_kb: u64,
    /// User + system CPU time, in clock ticks (1/100 s).
    cpu_ticks: u64,
    at: std::time::Instant,
}

impl Usage {
    fn of(controller: &Controller) -> Option<Usage> {
        let pid = controller.child.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kb = |key: &str| -> Option<u64> {
            status.lines().find(|l| l.starts_with(key))?.split_whitespace().nth(1)?.parse().ok()
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(Usage {
            rss_kb: kb("VmRSS:")?,
            peak_rss_kb: kb("VmHWM:")?,
            cpu_ticks: ticks,
            at: std::time::Instant::now(),
        })
    }

    fn describe(&self) -> String {
        format!("RSS {} kB (peak {} kB), CPU {} ticks", self.rss_kb, self.peak_rss_kb, self.cpu_ticks)
    }

    /// CPU used since `before`, as a share of one core.
    fn cpu_share_since(&self, before: &Usage) -> f64 {
        let wall = self.at.duration_since(before.at).as_secs_f64().max(1e-3);
        (self.cpu_ticks.saturating_sub(before.cpu_ticks)) as f64 / 100.0 / wall
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn dry_run_watches_serves_a_snapshot_and_leads() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    env.require("kube-scheduler")?;
    let client = env.client().await?;
    install_crds(&client).await?;
    let ns = env.namespace(&client, "controller-live").await?;
    let (class, nodepool) = (unique_name("ctl-class"), unique_name("ctl-np"));
    let pp = PostParams::default();

    let template = json!({ "spec": {
        "requirements": [{ "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"] }],
    } });
    create_class_and_nodepool(&client, &class, "live", &nodepool, template, None).await?;
    // Pending for good: no NodePool gives the label it selects.
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "picky" },
        "spec": {
            "nodeSelector": { "carpentry.dev/controller-live": "nowhere" },
            "containers": [{ "name": "app", "image": "registry.example.com/app:1",
                "resources": { "requests": { "cpu": "100m" } } }],
        },
    }))?;
    Api::<Pod>::namespaced(client.clone(), &ns).create(&pp, &pod).await?;
    // Provisionable: only this test's NodePool gives its label; a dry run says what it would create.
    let able: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "able" },
        "spec": {
            "nodeSelector": { "karpenter.sh/nodepool": nodepool },
            "containers": [{ "name": "app", "image": "registry.example.com/app:1",
                "resources": { "requests": { "cpu": "100m" } } }],
        },
    }))?;
    Api::<Pod>::namespaced(client.clone(), &ns).create(&pp, &able).await?;

    let (health, metrics) = (free_port()?, free_port()?);
    let lease_name = unique_name("carpentry-leader");
    let mut controller = Controller::start(
        env,
        &[
            "--dry-run",
            "--health-port",
            &health.to_string(),
            "--metrics-port",
            &metrics.to_string(),
            "--leader-election-namespace",
            &ns,
            "--leader-election-name",
            &lease_name,
        ],
    )?;

    let started = std::time::Instant::now();
    wait_for("/readyz to answer 200", TIMEOUT, || async {
        match get(health, "/readyz") {
            Ok((200, _)) => Ok(Some(())),
            Ok((code, body)) => {
                eprintln!("/readyz {code}: {}", body.lines().take(3).collect::<Vec<_>>().join(" | "));
                Ok(None)
            }
            Err(_) => Ok(None),
        }
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    eprintln!("ready {} ms after start", started.elapsed().as_millis());
    assert_eq!(get(health, "/healthz")?.0, 200);
    // Verbose: every task, each having begun a pass within its bound.
    let (code, verbose) = get(health, "/healthz?verbose")?;
    ensure!(code == 200 && verbose.starts_with("ok\n"), "/healthz?verbose answered {code}: {verbose}");
    for task in ["view", "scheduling", "nodeclaim.lifecycle", "node.termination"] {
        ensure!(verbose.contains(&format!("[+]{task}: last pass began")), "/healthz?verbose has no {task}: {verbose}");
    }

    // The snapshot: a Scenario core loads, holding what the test made, explaining the pod.
    let snapshot = wait_for("/snapshot to hold the test's objects", TIMEOUT, || async {
        let (code, body) = get(health, "/snapshot")?;
        ensure!(code == 200, "/snapshot answered {code}: {body}");
        let m = carpentry_core::load(&body).map_err(|e| anyhow::anyhow!("the snapshot does not load: {e}"))?;
        let has_pool = m.nodepools.iter().any(|p| p.metadata.name.as_deref() == Some(nodepool.as_str()));
        // Both pods: a snapshot taken between their creates would predict nothing for `able`.
        let has = |name: &str| {
            m.pods.iter().any(|p| {
                p.metadata.namespace.as_deref() == Some(ns.as_str()) && p.metadata.name.as_deref() == Some(name)
            })
        };
        Ok((has_pool && has("picky") && has("able")).then_some((body, m)))
    })
    .await?;
    let (text, manifests) = snapshot;
    ensure!(text.starts_with("# A carpentry snapshot"), "no header: {}", &text[..text.len().min(200)]);
    let scenario = manifests.scenario.as_ref().context("the snapshot has no Scenario")?;
    assert_eq!(scenario.spec.region, "us-east-1");
    ensure!(scenario.spec.start_time.is_some(), "the snapshot has no start time");
    let prepared = carpentry_core::input_from_manifests(&manifests, carpentry_core::Catalogue::embedded(), None)?;
    let results = carpentry_core::schedule(&prepared.input);
    let picky = results
        .unschedulable
        .iter()
        .find(|u| u.pod.namespace == ns && u.pod.name == "picky")
        .context("core does not find the test's pod unschedulable in the snapshot")?;
    eprintln!("picky: {}", picky.explanation.headline());

    // Dry run: the provisioning round reports on the pod with an event that ends with the command
    // that explains it, and creates nothing.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let note = wait_for("the controller's FailedScheduling event on the pod", TIMEOUT, || async {
        let list = events.list(&Default::default()).await?;
        Ok(list.items.into_iter().find_map(|e| {
            let on_pod = e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("picky");
            let ours = e.reporting_controller.as_deref() == Some("karpenter");
            (on_pod && ours && e.reason.as_deref() == Some("FailedScheduling")).then(|| e.note.unwrap_or_default())
        }))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    eprintln!("event: {note}");
    ensure!(note.starts_with("dry run: "), "{note}");
    ensure!(note.ends_with(&format!("(kubectl karpenter explain pod {ns}/picky)")), "{note}");
    let nominated = wait_for("the controller's Nominated event on the provisionable pod", TIMEOUT, || async {
        let list = events.list(&Default::default()).await?;
        Ok(list.items.into_iter().find_map(|e| {
            let on_pod = e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("able");
            let ours = e.reporting_controller.as_deref() == Some("karpenter");
            (on_pod && ours && e.reason.as_deref() == Some("Nominated")).then(|| e.note.unwrap_or_default())
        }))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    eprintln!("event: {nominated}");
    let would = format!(
        "dry run: Pod should schedule on: a new NodeClaim of NodePool {nodepool} (kubectl karpenter explain pod {ns}/able)"
    );
    ensure!(nominated == would, "{nominated}");
    // What it would have done is what the simulation of its snapshot does: the same NodeClaims
    // for this NodePool (by cheapest instance type; a dry run launches nothing, so no zone).
    let mut predicted = prediction::Prediction::new(&text)?;
    predicted.settle(60);
    let sim: Vec<String> = predicted.shape(&nodepool, &ns).nodeclaims.into_iter().map(|(t, _)| t).collect();
    let would_create: Vec<String> = controller
        .log()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["reason"] == "NodeClaimCreated" && v["fields"]["dry_run"] == true)
        .filter_map(|v| serde_json::from_str::<serde_json::Value>(v["fields"]["decision"].as_str()?).ok())
        .filter(|d| d["nodepool"] == nodepool.as_str())
        .filter_map(|d| d["cheapest"].as_str().map(String::from))
        .collect();
    ensure!(!would_create.is_empty(), "the dry run logs no NodeClaim it would create");
    ensure!(
        would_create.iter().all(|t| sim == vec![t.clone()]),
        "the dry run would create {would_create:?}; the simulation of its snapshot creates {sim:?}"
    );
    ensure!(
        controller.log().contains("dry run: not written") && controller.log().contains("create NodeClaim"),
        "the dry run does not log the create it would have made"
    );
    let nodeclaims = resource("karpenter.sh", "NodeClaim", "nodeclaims");
    let created = Api::<DynamicObject>::all_with(client.clone(), &nodeclaims).list(&Default::default()).await?;
    ensure!(
        !created.items.iter().any(|nc| nc.metadata.name.as_deref().is_some_and(|n| n.starts_with(&nodepool))),
        "--dry-run created a NodeClaim"
    );

    // The Lease: this controller holds it, and says so in /metrics.
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let holder = wait_for("the controller to hold the Lease", TIMEOUT, || async {
        let lease = leases.get_opt(&lease_name).await?;
        Ok(lease.and_then(|l| l.spec).and_then(|s| s.holder_identity).filter(|h| !h.is_empty()))
    })
    .await?;
    eprintln!("Lease {ns}/{lease_name} held by {holder}");
    let body = wait_for("/metrics to report the leader", TIMEOUT, || async {
        let (code, body) = get(metrics, "/metrics")?;
        ensure!(code == 200, "/metrics answered {code}");
        Ok(has_sample(&body, "carpentry_leader 1").then_some(body))
    })
    .await?;
    ensure!(has_sample(&body, "carpentry_view_synced 1"), "/metrics:\n{body}");
    for sample in ["carpentry_pods_pending ", "carpentry_view_objects{resource=\"nodepools.karpenter.sh\"} "] {
        ensure!(body.lines().any(|l| l.starts_with(sample)), "/metrics lacks {sample:?}:\n{body}");
    }
    // upstream's per-pod state, for the pending pod no node is made for.
    let picky = format!(
        "karpenter_pods_state{{name=\"picky\",namespace=\"{ns}\",owner=\"\",node=\"\",scheduled=\"false\",nodepool=\"\",zone=\"\",arch=\"\",capacity_type=\"\",instance_type=\"\",phase=\"Pending\",ready=\"false\",managed=\"false\"}} 1"
    );
    ensure!(body.lines().any(|l| l == picky), "/metrics lacks {picky:?}:\n{body}");
    // A dry run writes nothing but events.
    let writes = metric_sum(&body, "carpentry_api_writes_total", &[]);
    let events = metric_sum(&body, "carpentry_api_writes_total", &[("resource", "Event")]);
    ensure!(writes == events, "--dry-run wrote {} objects other than events:\n{body}", writes - events);

    // Reported, not asserted: what the controller costs when idle on a small cluster.
    if let Some(u) = Usage::of(&controller) {
        eprintln!("controller (dry run): {} over {} ms", u.describe(), started.elapsed().as_millis());
    }

    // SIGTERM: a clean exit that gives the Lease up.
    let status = controller.terminate(Duration::from_secs(20))?;
    ensure!(status.success(), "exit status {status} after SIGTERM; log:\n{}", controller.log());
    let lease = leases.get(&lease_name).await?;
    let holder_after = lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
    ensure!(holder_after.is_empty(), "the Lease is still held by {holder_after} after shutdown");
    let log = controller.log();
    for line in log.lines() {
        let _: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("a log line is not JSON: {line}"))?;
    }
    ensure!(log.contains("became the leader") && log.contains("released the Lease"), "log:\n{log}");
    Ok(())
}

/// The first test users run, on KWOK: the `inflate` Deployment (1 CPU each, nodeSelector
/// `node-type`) scaled 0 → 3 on a NodePool of 2-vCPU on-demand types → 3 NodeClaims, 3 Nodes Ready,
/// 3 pods Running. Then `kubectl delete node` on one: its NodeClaim and Node go, the pod runs on a
/// replacement. Then deleting the NodeClaims ends every Node and clears every finalizer.
///
/// Real: the API server, kube-scheduler, the workload controllers (kube-controller-manager) and
/// KWOK, which makes the provider's Nodes Ready and runs their pods; the controller as users run
/// it, without `--dry-run`. Nothing is injected.
#[tokio::test(flavor = "multi_thread")]
async fn inflate_provisions_nodes_and_a_deleted_node_is_replaced() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    let _acting = ACTING.lock().await;
    env.require("kube-controller-manager")?;
    let client = env.client().await?;
    install_crds(&client).await?;
    let ns = env.namespace(&client, "inflate").await?;
    let (class, nodepool, node_type) = (unique_name("inflate-class"), unique_name("inflate-np"), unique_name("k"));
    let pp = PostParams::default();
    let template = json!({
        "metadata": { "labels": { "node-type": node_type } },
        "spec": {
            "requirements": [
                { "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"] },
                { "key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": ["2"] },
            ],
        },
    });
    // Every node may go at once when empty (the default budget, 10%, would take them one by one).
    let disruption = json!({ "consolidateAfter": "0s", "budgets": [{ "nodes": "100%" }] });
    create_class_and_nodepool(&client, &class, "inflate", &nodepool, template, Some(disruption)).await?;
    // A NodePool the CRD's schema admits and Karpenter's runtime validation refuses (no valid
    // capacity type): the controller leaves it out and goes on with the rest.
    let invalid = format!("{nodepool}-invalid");
    let nodepools_api =
        Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodePool", "nodepools"));
    let mut obj = DynamicObject::new(&invalid, &resource("karpenter.sh", "NodePool", "nodepools"));
    obj.data = json!({ "spec": { "template": { "spec": {
        "nodeClassRef": { "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class },
        "requirements": [{ "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["bogus"] }],
    } } } });
    nodepools_api.create(&pp, &obj).await?;
    let deployment = inflate_deployment(&node_type, false)?;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &ns);
    deployments.create(&pp, &deployment).await?;

    let (health, metrics) = (free_port()?, free_port()?);
    let lease_name = unique_name("carpentry-leader");
    let controller = Controller::start(
        env,
        &[
            "--kwok-registration-delay",
            "1s",
            // Its pods only: the dry-run test's pending pod is not this controller's to provision.
            "--namespace",
            &ns,
            "--health-port",
            &health.to_string(),
            "--metrics-port",
            &metrics.to_string(),
            "--leader-election-namespace",
            &ns,
            "--leader-election-name",
            &lease_name,
        ],
    )?;
    wait_for("/readyz to answer 200", TIMEOUT, || async {
        Ok(matches!(get(health, "/readyz"), Ok((200, _))).then_some(()))
    })
    .await?;
    // The prediction: the simulation of the snapshot at the start, given what the test does.
    let mut predicted = predict(health, &nodepool).await?;
    let mut applied = serde_json::to_value(&deployment)?;
    applied["metadata"]["namespace"] = json!(ns);
    applied["spec"]["replicas"] = json!(3);
    predicted.apply(&[applied])?;
    predicted.settle(120);
    let predicted_running = predicted.seconds_to_bound(&ns).context("the simulation binds no pod")?;

    // Idle: synced, nothing pending, for 5 s.
    let idle_from = Usage::of(&controller);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle = Usage::of(&controller);

    let scaled = std::time::Instant::now();
    let patch = json!({ "spec": { "replicas": 3 } });
    deployments.patch("inflate", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let running = |want: usize| running_exactly(&pods, want);
    let placed = wait_for("3 inflate pods Running", Duration::from_secs(120), || running(3))
        .await
        .with_context(|| format!("controller log:\n{}", controller.log()))?;
    eprintln!(
        "inflate 0 → 3: all Running {} ms after the scale-up (the simulation predicts every pod bound after {:.1} s)",
        scaled.elapsed().as_millis(),
        predicted_running
    );
    // Reported, not asserted: the controller's cost when idle and while it provisions.
    if let (Some(from), Some(idle), Some(busy)) = (idle_from, idle, Usage::of(&controller)) {
        eprintln!(
            "controller usage: idle {:.1}% of a core, RSS {} kB; inflate 0 → 3 {:.1}% of a core, RSS {} kB (peak {} kB) ({})",
            100.0 * idle.cpu_share_since(&from),
            idle.rss_kb,
            100.0 * busy.cpu_share_since(&idle),
            busy.rss_kb,
            busy.peak_rss_kb,
            Controller::binary().display()
        );
    }
    let live = prediction::live_shape(&client, &nodepool, &ns).await?;
    ensure!(
        live == predicted.shape(&nodepool, &ns),
        "inflate: live {live:?}, predicted {:?}",
        predicted.shape(&nodepool, &ns)
    );

    let nodeclaims_api =
        Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodeClaim", "nodeclaims"));
    let ours = |list: Vec<DynamicObject>| -> Vec<DynamicObject> {
        list.into_iter()
            .filter(|nc| nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&nodepool))
            .collect()
    };
    let claims = ours(nodeclaims_api.list(&Default::default()).await?.items);
    ensure!(claims.len() == 3, "{} NodeClaims for 3 pods of 1 CPU on 2-vCPU types", claims.len());
    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let mut pod_nodes: Vec<&str> = placed.iter().map(|(_, n)| n.as_str()).collect();
    pod_nodes.sort();
    pod_nodes.dedup();
    ensure!(pod_nodes.len() == 3, "the pods share nodes: {placed:?}");
    for nc in &claims {
        let status = &nc.data["status"];
        ensure!(status["providerID"].as_str().is_some_and(|p| p.starts_with("kwok://")), "{status}");
        let node = nodes_api.get(status["nodeName"].as_str().context("no nodeName")?).await?;
        let labels = node.metadata.labels.clone().unwrap_or_default();
        ensure!(labels.get("karpenter.sh/initialized").map(String::as_str) == Some("true"), "{labels:?}");
        ensure!(labels.get("node-type") == Some(&node_type), "{labels:?}");
        let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
        ensure!(!taints.iter().any(|t| t.key == "karpenter.sh/unregistered"), "still unregistered: {taints:?}");
        ensure!(nc.metadata.finalizers.iter().flatten().any(|f| f == "karpenter.sh/termination"));
        eprintln!(
            "NodeClaim {}: {} {}",
            nc.metadata.name.as_deref().unwrap_or_default(),
            labels.get("node.kubernetes.io/instance-type").map_or("?", String::as_str),
            labels.get("topology.kubernetes.io/zone").map_or("?", String::as_str)
        );
    }

    // The NodePool's status counts its three 2-vCPU nodes; it is Ready, its NodeClaims registered
    // (NodeRegistrationHealthy), and it and its NodeClaims carry the hash and our hash version.
    let status = wait_for("the NodePool's status to count 3 registered nodes", TIMEOUT, || async {
        let np = nodepools_api.get(&nodepool).await?;
        let status = np.data["status"].clone();
        let healthy = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "NodeRegistrationHealthy" && c["status"] == "True");
        Ok((status["nodes"] == 3 && status["resources"]["cpu"] == "6" && healthy).then_some((np, status)))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    let (np, status) = status;
    eprintln!("NodePool status: {status}");
    ensure!(status["resources"]["nodes"] == "3", "{status}");
    let condition = |name: &str| {
        status["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == name).map(|c| c["status"].clone())
    };
    for name in ["Ready", "ValidationSucceeded", "NodeClassReady", "NodeRegistrationHealthy"] {
        ensure!(condition(name) == Some(json!("True")), "{name}: {status}");
    }
    let version = |o: &DynamicObject| {
        o.metadata.annotations.as_ref().and_then(|a| a.get("karpenter.sh/nodepool-hash-version")).cloned()
    };
    ensure!(version(&np).as_deref() == Some("carpentry-fnv1a-v1"), "{:?}", np.metadata.annotations);
    ensure!(claims.iter().all(|nc| version(nc) == version(&np)), "a NodeClaim without our hash version");

    // The invalid NodePool: its status says why (upstream's nodepool.validation), an event on it
    // says what it holds back, the snapshot and /metrics name it.
    let invalid_status = wait_for("the invalid NodePool's ValidationSucceeded=False", TIMEOUT, || async {
        let status = nodepools_api.get(&invalid).await?.data["status"].clone();
        let validation = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "ValidationSucceeded" && c["status"] == "False")
            .cloned();
        Ok(validation.map(|v| (v, status)))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    let (validation, invalid_status) = invalid_status;
    eprintln!("invalid NodePool: {validation}");
    ensure!(validation["reason"] == "NodePoolValidationFailed", "{validation}");
    ensure!(validation["message"].as_str().is_some_and(|m| m.contains("bogus")), "{validation}");
    let ready = invalid_status["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Ready");
    ensure!(ready.is_some_and(|c| c["status"] == "False"), "{invalid_status}");
    let about = events_about(&client, &invalid).await?;
    ensure!(
        about.iter().any(|(reason, note)| reason == "InvalidObject"
            && note.contains("no node is provisioned from it")
            && note.contains("bogus")),
        "events on the invalid NodePool: {about:?}"
    );
    let (_, snapshot) = get(health, "/snapshot")?;
    ensure!(
        snapshot.lines().any(|l| l.starts_with(&format!("#   NodePool/{invalid}: "))),
        "the snapshot does not name the NodePool it leaves out:\n{}",
        snapshot.lines().take(8).collect::<Vec<_>>().join("\n")
    );
    let (_, body) = get(metrics, "/metrics")?;
    ensure!(body.contains("carpentry_view_skipped_objects{gap=\"Object\"}"), "/metrics:\n{body}");
    // upstream's metrics: three NodeClaims created by provisioning, each launched through the
    // cloud provider's Create; the writes, each concern's passes and each object's reconciles counted.
    let created = [("reason", "provisioned"), ("nodepool", nodepool.as_str()), ("min_values_relaxed", "false")];
    let creates = [("controller", "nodeclaim.lifecycle"), ("method", "Create"), ("provider", "kwok")];
    for (name, labels, at_least) in [
        ("karpenter_nodeclaims_created_total", &created[..], 3.0),
        ("karpenter_cloudprovider_duration_seconds_count", &creates[..], 3.0),
        ("carpentry_api_writes_total", &[("verb", "create"), ("resource", "NodeClaim")][..], 3.0),
        ("carpentry_reconcile_pass_duration_seconds_count", &[("concern", "scheduling")][..], 1.0),
        // Each NodeClaim reconciled on its own: the finalizer, the launch, registration, initialization.
        ("controller_runtime_reconcile_total", &[("controller", "nodeclaim.lifecycle")][..], 12.0),
    ] {
        let value = metric_sum(&body, name, labels);
        ensure!(value >= at_least, "{name}{labels:?} = {value}, expected at least {at_least}:\n{body}");
    }
    ensure!(metric_sum(&body, "karpenter_nodeclaims_created_total", &created) == 3.0, "/metrics:\n{body}");
    // Each Node counted once it registered, and upstream's NodePool gauges: its usage as counted
    // into its status (a node has a CPU at least).
    let usage = [("resource_type", "cpu"), ("nodepool", nodepool.as_str())];
    wait_for("karpenter_nodes_created_total and karpenter_nodepools_usage to count the nodes", TIMEOUT, || async {
        let (_, body) = get(metrics, "/metrics")?;
        let created = metric_sum(&body, "karpenter_nodes_created_total", &[("nodepool", nodepool.as_str())]);
        Ok((created == 3.0 && metric_sum(&body, "karpenter_nodepools_usage", &usage) >= 1.0).then_some(()))
    })
    .await?;

    // `kubectl delete node`: the NodeClaim and the Node go; the pod runs on a replacement. A
    // VolumeAttachment on the node holds its instance once it is drained, until it goes.
    // Injected: testenv runs no attach-detach controller (nor a CSI driver), so the test writes
    // the attachment and later deletes it, as that controller does once the volume is unmounted.
    let victim = pod_nodes[0].to_string();
    let attachments: Api<k8s_openapi::api::storage::v1::VolumeAttachment> = Api::all(client.clone());
    let attachment = format!("csi-{victim}");
    let va = json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": attachment},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": victim, "source": {"persistentVolumeName": "pv-data"}}});
    attachments.create(&PostParams::default(), &serde_json::from_value(va)?).await?;
    let victim_claim = ours(nodeclaims_api.list(&Default::default()).await?.items)
        .into_iter()
        .find(|nc| nc.data["status"]["nodeName"].as_str() == Some(victim.as_str()))
        .and_then(|nc| nc.metadata.name)
        .context("no NodeClaim for the victim node")?;
    nodes_api.delete(&victim, &Default::default()).await?;
    wait_for("the drained node to await its volume", TIMEOUT, || async {
        let nc = nodeclaims_api.get(&victim_claim).await?;
        let conditions = nc.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let c = conditions.iter().find(|c| c["type"] == "VolumesDetached");
        Ok(c.filter(|c| c["status"] == "Unknown" && c["reason"] == "AwaitingVolumeDetachment").map(|_| ()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    ensure!(nodes_api.get_opt(&victim).await?.is_some(), "the Node went while a volume was attached");
    let about = events_about(&client, &victim).await?;
    ensure!(
        about.iter().any(|(reason, note)| reason == "AwaitingVolumeDetachment" && note.contains(&attachment)),
        "events on {victim}: {about:?}"
    );
    attachments.delete(&attachment, &Default::default()).await?;
    wait_for("the deleted Node to go", TIMEOUT, || async {
        Ok(nodes_api.get_opt(&victim).await?.is_none().then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    let placed = wait_for("3 inflate pods Running again", Duration::from_secs(120), || running(3)).await?;
    ensure!(!placed.iter().any(|(_, n)| *n == victim), "a pod still runs on {victim}");
    let sim_victim = predicted.nodes(&nodepool).first().cloned().context("the simulation has no node")?;
    predicted.delete_node(&sim_victim)?;
    predicted.settle(120);
    let live = prediction::live_shape(&client, &nodepool, &ns).await?;
    ensure!(
        live == predicted.shape(&nodepool, &ns),
        "delete node: live {live:?}, predicted {:?}",
        predicted.shape(&nodepool, &ns)
    );
    // The deleted Node's NodeClaim may still be finishing (its finalizer comes off once the
    // instance is gone) when the pod runs again on the replacement.
    let claims = wait_for("the deleted Node's NodeClaim to go", TIMEOUT, || async {
        let claims = ours(nodeclaims_api.list(&Default::default()).await?.items);
        Ok((claims.len() == 3).then_some(claims))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    ensure!(
        !claims.iter().any(|nc| nc.data["status"]["nodeName"].as_str() == Some(victim.as_str())),
        "the deleted Node's NodeClaim remains"
    );
    // upstream's termination metrics: the node drained and terminated, its NodeClaim too (the
    // counts follow the finalizers' writes; emptiness may have removed a node too).
    let pool = [("nodepool", nodepool.as_str())];
    let names = [
        "karpenter_nodes_drained_total",
        "karpenter_nodes_terminated_total",
        "karpenter_nodes_termination_duration_seconds_count",
        "karpenter_nodes_lifetime_duration_seconds_count",
        "karpenter_nodeclaims_terminated_total",
    ];
    wait_for("the termination metrics", Duration::from_secs(10), || async {
        let (_, body) = get(metrics, "/metrics")?;
        Ok(names.iter().all(|name| metric_sum(&body, name, &pool) >= 1.0).then_some(()))
    })
    .await
    .with_context(|| format!("/metrics:\n{}", get(metrics, "/metrics").map(|(_, body)| body).unwrap_or_default()))?;

    // Scaled to 0: the nodes are empty, and emptiness removes them after its 15 s validation,
    // in one command or, when the pods stop in different seconds, in several.
    let patch = json!({ "spec": { "replicas": 0 } });
    let emptied = std::time::Instant::now();
    deployments.patch("inflate", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await?;
    let nodes_of_pool = || async {
        let nodes = nodes_api.list(&Default::default()).await?.items;
        let ours: Vec<k8s_openapi::api::core::v1::Node> = nodes
            .into_iter()
            .filter(|n| n.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&nodepool))
            .collect();
        anyhow::Ok(ours)
    };
    let before: Vec<String> = nodes_of_pool().await?.into_iter().filter_map(|n| n.metadata.name).collect();
    ensure!(before.len() == 3, "{before:?}");
    wait_for("emptiness to remove every node", Duration::from_secs(240), || async {
        let nodes = nodes_of_pool().await?;
        let left = ours(nodeclaims_api.list(&Default::default()).await?.items);
        Ok((left.is_empty() && nodes.is_empty()).then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    eprintln!("scale 3 → 0: every node removed {} ms after the scale-down", emptied.elapsed().as_millis());
    predicted.scale("Deployment", &ns, "inflate", 0)?;
    predicted.settle(120);
    let (live, sim) = (prediction::live_decisions(&controller.log()), predicted.decisions());
    eprintln!("disruptions: live {live:?}, predicted {sim:?}");
    let (live, sim) = (prediction::merged_deletions(&live), prediction::merged_deletions(&sim));
    ensure!(live == sim, "disruptions (consecutive deletions merged): live {live:?}, predicted {sim:?}");
    ensure!(predicted.shape(&nodepool, &ns).nodeclaims.is_empty(), "the simulation keeps nodes");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let list = events.list(&Default::default()).await?.items;
    for node in &before {
        let about: Vec<_> = list
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(node.as_str()))
            .filter(|e| e.reporting_controller.as_deref() == Some("karpenter"))
            // The dry-run test's controller, if it runs meanwhile, reports on these nodes too.
            .filter(|e| !e.note.as_deref().unwrap_or_default().starts_with("dry run: "))
            .collect();
        let terminating = about.iter().find(|e| e.reason.as_deref() == Some("DisruptionTerminating"));
        let note = terminating.and_then(|e| e.note.clone()).unwrap_or_default();
        ensure!(
            note == "Disrupting Node: Empty/Delete",
            "node {node}: {:?}",
            about.iter().map(|e| (e.reason.clone(), e.note.clone())).collect::<Vec<_>>()
        );
    }
    // upstream's disruption metrics: the emptiness commands, each node disrupted and terminated
    // (the deleted victim's too).
    let (_, body) = get(metrics, "/metrics")?;
    let decisions = [("decision", "delete"), ("reason", "empty"), ("consolidation_type", "empty")];
    let disrupted = [("reason", "empty"), ("nodepool", nodepool.as_str())];
    for (name, labels, want) in [
        ("karpenter_voluntary_disruption_decisions_total", &decisions[..], 1.0),
        ("karpenter_nodeclaims_disrupted_total", &disrupted[..], before.len() as f64),
        ("karpenter_nodeclaims_terminated_total", &[("nodepool", nodepool.as_str())][..], before.len() as f64 + 1.0),
    ] {
        let value = metric_sum(&body, name, labels);
        ensure!(value >= want, "{name}{labels:?} = {value}, expected at least {want}:\n{body}");
    }
    // A leaked instance (a kwok Node of the NodePool that no NodeClaim has) is collected once
    // it is 30 s old.
    let leak = format!("leak-{ns}");
    let leaked: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": leak, "labels": {"karpenter.sh/nodepool": nodepool, "kwok.x-k8s.io/node": "fake"},
            "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"providerID": format!("kwok://{leak}")},
    }))?;
    nodes_api.create(&PostParams::default(), &leaked).await?;
    let created = std::time::Instant::now();
    wait_for("instance garbage collection to delete the leaked Node", Duration::from_secs(90), || async {
        Ok(nodes_api.get_opt(&leak).await?.is_none().then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    let after = created.elapsed();
    eprintln!("a leaked instance collected {} ms after it appeared", after.as_millis());
    ensure!(after >= Duration::from_secs(30), "collected within its 30 s grace");

    // The emptiness commands planned name every node, each once. Each event is on its command's
    // first node, which may be one deleted since: a node left empty for a moment (its pod not yet
    // bound) can be planned away before the scale-down and validated after it, beside the victim
    // of the node deletion above (upstream validates the same way).
    let planned: Vec<String> = list
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()).is_some_and(|n| n.starts_with(&nodepool)))
        .filter(|e| e.reason.as_deref() == Some("DisruptionPlanned"))
        .filter_map(|e| e.note.clone())
        .filter(|n| !n.starts_with("dry run: ") && n.starts_with("Emptiness: delete"))
        .collect();
    ensure!(!planned.is_empty(), "no DisruptionPlanned event for the emptiness commands");
    for node in &before {
        let naming = planned.iter().filter(|n| n.contains(node.as_str())).count();
        ensure!(
            naming == 1,
            "{naming} emptiness commands name {node}: {planned:?}\ncontroller log lines naming it:\n{}",
            controller.log().lines().filter(|l| l.contains(node.as_str())).collect::<Vec<_>>().join("\n")
        );
    }
    deployments.delete("inflate", &Default::default()).await?;
    nodepools_api.delete(&invalid, &Default::default()).await?;
    Ok(())
}

/// The events the acting controller published about `object` (the dry-run test's controller, if
/// it runs meanwhile, reports too: its notes start with "dry run: ").
async fn events_about(client: &Client, object: &str) -> Result<Vec<(String, String)>> {
    Ok(controller_events(client, object)
        .await?
        .into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .filter(|(_, note)| !note.starts_with("dry run: "))
        .collect())
}

/// How many times each of the acting controller's `reason` events on `object` was written: 1, or
/// its series' count.
async fn publish_counts(client: &Client, object: &str, reason: &str) -> Result<Vec<i32>> {
    Ok(controller_events(client, object)
        .await?
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| !e.note.as_deref().unwrap_or_default().starts_with("dry run: "))
        .map(|e| e.series.map_or(1, |s| s.count))
        .collect())
}

/// The events the controller published about `object`.
async fn controller_events(client: &Client, object: &str) -> Result<Vec<k8s_openapi::api::events::v1::Event>> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    Ok(events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(object))
        .filter(|e| e.reporting_controller.as_deref() == Some("karpenter"))
        .collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_requirement_edit_drifts_nodes_at_the_budget_pace_except_those_pods_hold() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    env.require("kube-controller-manager")?;
    let _acting = ACTING.lock().await;
    let client = env.client().await?;
    install_crds(&client).await?;
    let ns = env.namespace(&client, "drift").await?;
    let (class, nodepool, node_type) = (unique_name("drift-class"), unique_name("drift-np"), unique_name("k"));
    let pp = PostParams::default();
    let requirements = |arch: Option<&str>| {
        let mut r = vec![
            json!({ "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"] }),
            json!({ "key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": ["2"] }),
        ];
        if let Some(arch) = arch {
            r.push(json!({ "key": "kubernetes.io/arch", "operator": "In", "values": [arch] }));
        }
        r
    };
    let template = json!({
        "metadata": { "labels": { "node-type": node_type } },
        "spec": { "requirements": requirements(None) },
    });
    // Drift only: no emptiness or consolidation, one node disrupted at a time.
    let disruption = json!({ "consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never",
        "budgets": [{ "nodes": "1" }] });
    create_class_and_nodepool(&client, &class, "drift", &nodepool, template, Some(disruption)).await?;
    let (health, metrics) = (free_port()?, free_port()?);
    let lease_name = unique_name("carpentry-leader");
    let controller = Controller::start(
        env,
        &[
            "--kwok-registration-delay",
            "1s",
            "--namespace",
            &ns,
            "--health-port",
            &health.to_string(),
            "--metrics-port",
            &metrics.to_string(),
            "--leader-election-namespace",
            &ns,
            "--leader-election-name",
            &lease_name,
        ],
    )?;
    let log = || format!("controller log:\n{}", controller.log());
    wait_for("/readyz to answer 200", TIMEOUT, || async {
        Ok(matches!(get(health, "/readyz"), Ok((200, _))).then_some(()))
    })
    .await?;
    // The prediction starts from the snapshot before the workloads exist.
    let mut predicted = predict(health, &nodepool).await?;
    // One pod per node (1 CPU on 2-vCPU types): two plain replicas, one pod with
    // karpenter.sh/do-not-disrupt, one under a PodDisruptionBudget with maxUnavailable 0.
    let pod_spec = json!({
        "nodeSelector": { "node-type": node_type },
        "containers": [{ "name": "app", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
            "resources": { "requests": { "cpu": "1" } } }],
    });
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &ns);
    let mut applied = Vec::new();
    for (app, replicas) in [("plain", 2), ("guarded", 1)] {
        let d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": app, "namespace": ns },
            "spec": { "replicas": replicas, "selector": { "matchLabels": { "app": app } },
                "template": { "metadata": { "labels": { "app": app } }, "spec": pod_spec } },
        });
        deployments.create(&pp, &serde_json::from_value(d.clone())?).await?;
        applied.push(d);
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pinned = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "pinned", "namespace": ns, "annotations": { "karpenter.sh/do-not-disrupt": "true" } },
        "spec": pod_spec,
    });
    pods.create(&pp, &serde_json::from_value(pinned.clone())?).await?;
    let pdb = json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": { "name": "guarded", "namespace": ns },
        "spec": { "maxUnavailable": 0, "selector": { "matchLabels": { "app": "guarded" } } },
    });
    Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(client.clone(), &ns)
        .create(&pp, &serde_json::from_value(pdb.clone())?)
        .await?;
    applied.extend([pinned, pdb]);
    predicted.apply(&applied)?;
    predicted.settle(120);

    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    // Pod name → (node, the node's arch), for the test's Running pods.
    let placement = || async {
        let mut out = std::collections::BTreeMap::new();
        for p in pods.list(&Default::default()).await?.items {
            let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            let Some(node) =
                p.spec.and_then(|s| s.node_name).filter(|_| running && p.metadata.deletion_timestamp.is_none())
            else {
                continue;
            };
            let arch = nodes_api.get(&node).await?.metadata.labels.unwrap_or_default().remove("kubernetes.io/arch");
            out.insert(p.metadata.name.unwrap_or_default(), (node, arch.unwrap_or_default()));
        }
        anyhow::Ok(out)
    };
    let first = wait_for("4 pods Running", Duration::from_secs(120), || async {
        let p = placement().await?;
        Ok((p.len() == 4).then_some(p))
    })
    .await
    .with_context(log)?;
    ensure!(first.values().all(|(_, arch)| arch == "arm64"), "the cheapest 2-vCPU types are arm64: {first:?}");
    let node_of = |app: &str| first.iter().find(|(pod, _)| pod.starts_with(app)).map(|(_, (n, _))| n.clone());
    let (pinned_node, guarded_node) = (node_of("pinned").context("pinned")?, node_of("guarded").context("guarded")?);

    // The edit: amd64 only. Every node drifts (RequirementsDrifted).
    let live = prediction::live_shape(&client, &nodepool, &ns).await?;
    ensure!(
        live == predicted.shape(&nodepool, &ns),
        "before the edit: live {live:?}, predicted {:?}",
        predicted.shape(&nodepool, &ns)
    );
    let pools = resource("karpenter.sh", "NodePool", "nodepools");
    let mut edited_pool =
        serde_json::to_value(Api::<DynamicObject>::all_with(client.clone(), &pools).get(&nodepool).await?)?;
    edited_pool["spec"]["template"]["spec"]["requirements"] = json!(requirements(Some("amd64")));
    let patch = json!({ "spec": { "template": { "spec": { "requirements": requirements(Some("amd64")) } } } });
    Api::<DynamicObject>::all_with(client.clone(), &pools)
        .patch(&nodepool, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
        .await?;
    let edited = std::time::Instant::now();
    let going = std::cell::Cell::new(0);
    let replaced = wait_for("the plain pods on amd64 nodes", Duration::from_secs(180), || async {
        let nodes = nodes_api.list(&Default::default()).await?.items;
        let disrupted = nodes
            .iter()
            .filter(|n| n.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&nodepool))
            .filter(|n| {
                n.metadata.deletion_timestamp.is_some()
                    || n.spec.iter().flat_map(|s| s.taints.iter().flatten()).any(|t| t.key == "karpenter.sh/disrupted")
            })
            .count();
        going.set(going.get().max(disrupted));
        let p = placement().await?;
        let plain_moved = p.iter().filter(|(pod, (_, arch))| pod.starts_with("plain") && arch == "amd64").count();
        Ok((plain_moved == 2).then_some(p))
    })
    .await
    .with_context(log)?;
    eprintln!("drift: both plain pods on amd64 nodes {} ms after the edit", edited.elapsed().as_millis());
    ensure!(going.get() <= 1, "{} nodes disrupted at once under a budget of 1", going.get());

    // The held nodes stay, and say why.
    ensure!(replaced.get("pinned").map(|(n, _)| n) == Some(&pinned_node), "{replaced:?}");
    ensure!(replaced.iter().any(|(pod, (n, _))| pod.starts_with("guarded") && *n == guarded_node), "{replaced:?}");
    let said = |node: String, needle: &'static str| {
        let client = client.clone();
        async move {
            let events = events_about(&client, &node).await?;
            Ok(events.iter().any(|(reason, note)| reason == "DisruptionBlocked" && note.contains(needle)).then_some(()))
        }
    };
    wait_for("DisruptionBlocked naming do-not-disrupt", TIMEOUT, || {
        said(pinned_node.clone(), "karpenter.sh/do-not-disrupt")
    })
    .await
    .with_context(log)?;
    wait_for("DisruptionBlocked naming the PDB", TIMEOUT, || said(guarded_node.clone(), "prevents pod evictions"))
        .await
        .with_context(log)?;
    let nodeclaims_api =
        Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodeClaim", "nodeclaims"));
    let ours = |list: Vec<DynamicObject>| -> Vec<DynamicObject> {
        list.into_iter()
            .filter(|nc| nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&nodepool))
            .collect()
    };
    // The replaced nodes' NodeClaims finish terminating.
    let claims = wait_for("4 NodeClaims, none deleting", TIMEOUT, || async {
        let claims = ours(nodeclaims_api.list(&Default::default()).await?.items);
        let settled = claims.len() == 4 && claims.iter().all(|nc| nc.metadata.deletion_timestamp.is_none());
        Ok(settled.then_some(claims))
    })
    .await
    .with_context(log)?;
    predicted.apply(&[edited_pool])?;
    predicted.settle(300);
    let live = prediction::live_shape(&client, &nodepool, &ns).await?;
    ensure!(
        live == predicted.shape(&nodepool, &ns),
        "after the edit: live {live:?}, predicted {:?}",
        predicted.shape(&nodepool, &ns)
    );
    let (live, sim) = (prediction::live_decisions(&controller.log()), predicted.decisions());
    eprintln!("disruptions: live {live:?}, predicted {sim:?}");
    ensure!(live == sim, "disruptions: live {live:?}, predicted {sim:?}");
    let drifted: Vec<&str> = claims
        .iter()
        .filter(|nc| {
            nc.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Drifted" && c["status"] == "True" && c["reason"] == "RequirementsDrifted")
        })
        .filter_map(|nc| nc.metadata.name.as_deref())
        .collect();
    ensure!(drifted.len() == 2, "the two held NodeClaims are Drifted (RequirementsDrifted): {drifted:?}");

    // A drain the do-not-disrupt pod holds is decided again every pass; its DisruptionBlocked
    // event is written once per 2 minutes (upstream's recorder), not once a pass.
    let pinned_claim = claims
        .iter()
        .find(|nc| nc.data["status"]["nodeName"].as_str() == Some(pinned_node.as_str()))
        .and_then(|nc| nc.metadata.name.clone())
        .context("the pinned node's NodeClaim")?;
    nodeclaims_api.delete(&pinned_claim, &Default::default()).await?;
    wait_for("DisruptionBlocked for the drain", TIMEOUT, || said(pinned_node.clone(), "is not evicted before"))
        .await
        .with_context(log)?;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let counts = publish_counts(&client, &pinned_node, "DisruptionBlocked").await?;
    ensure!(
        counts.iter().all(|n| *n == 1),
        "DisruptionBlocked on {pinned_node} written {counts:?} times (a count per event) within 20 s"
    );

    // Clean up: this pool's NodeClaims and Nodes go before the next acting test.
    for d in ["plain", "guarded"] {
        deployments.delete(d, &Default::default()).await?;
    }
    pods.delete("pinned", &Default::default()).await?;
    for nc in claims.iter().filter(|nc| nc.metadata.name.as_ref() != Some(&pinned_claim)) {
        nodeclaims_api.delete(nc.metadata.name.as_deref().unwrap_or_default(), &Default::default()).await?;
    }
    wait_for("the NodeClaims and their Nodes to go", Duration::from_secs(120), || async {
        let left = ours(nodeclaims_api.list(&Default::default()).await?.items).len();
        let nodes = nodes_api.list(&Default::default()).await?.items;
        let of_pool = nodes
            .iter()
            .filter(|n| n.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&nodepool))
            .count();
        Ok((left == 0 && of_pool == 0).then_some(()))
    })
    .await
    .with_context(log)?;
    Ok(())
}

/// A leader cut off from the API server stops acting once its renewals have not been seen for the
/// renew deadline, and exits (to be restarted clean), before the Lease could pass to another
/// replica; kube-lease-manager alone kept it "leading" while every renewal failed.
#[tokio::test(flavor = "multi_thread")]
async fn a_leader_cut_off_from_the_api_server_steps_down_and_exits() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    let client = env.client().await?;
    install_crds(&client).await?;
    let ns = env.namespace(&client, "fencing").await?;
    let partition = Partition::to(&env.server).await?;
    let kubeconfig = partition.kubeconfig(env)?;
    let (health, metrics) = (free_port()?, free_port()?);
    let lease_name = unique_name("carpentry-leader");
    let mut controller = Controller::start_as(
        &kubeconfig,
        &[
            "--dry-run",
            "--health-port",
            &health.to_string(),
            "--metrics-port",
            &metrics.to_string(),
            "--leader-election-namespace",
            &ns,
            "--leader-election-name",
            &lease_name,
        ],
        &[],
    )?;
    wait_for("the controller to lead", TIMEOUT, || async {
        Ok(get(metrics, "/metrics").is_ok_and(|(_, body)| has_sample(&body, "carpentry_leader 1")).then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;

    let cut = std::time::Instant::now();
    partition.cut();
    // When it stopped acting: the first `/metrics` answer saying it no longer leads (the gauge is
    // read from the very flag every write and cloud call is checked against), or its exit. The
    // answer's arrival bounds the moment from above.
    let mut stopped = None;
    while stopped.is_none() && cut.elapsed() < Duration::from_secs(90) {
        let answer = get(metrics, "/metrics");
        let now = k8s_openapi::jiff::Timestamp::now();
        if answer.is_ok_and(|(_, body)| has_sample(&body, "carpentry_leader 0")) || controller.has_exited()? {
            stopped = Some(now);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // A guard against a leader that never steps down (what kube-lease-manager alone does), far
    // above the 10 s renew deadline.
    let status = controller.exited_within(Duration::from_secs(90))?;
    eprintln!("cut off: exited {} ms later ({status})", cut.elapsed().as_millis());
    let log = controller.log();
    let stopped = stopped.with_context(|| format!("it still led 90 s after the cut:\n{log}"))?;
    ensure!(!status.success(), "a lost leadership is a failure exit: {status}\n{log}");
    ensure!(
        log.contains("lost the leadership of Lease") && log.contains("renew deadline"),
        "the log says why it stopped:\n{log}"
    );
    // The Lease was neither released nor renewed after the cut: its holder is still this replica,
    // so another replica waits out its duration, by which time this one has stopped.
    let lease = Api::<Lease>::namespaced(client.clone(), &ns).get(&lease_name).await?;
    let spec = lease.spec.unwrap_or_default();
    ensure!(spec.holder_identity.as_deref().is_some_and(|h| !h.is_empty()), "{spec:?}");
    // The safety bound itself: another replica may take the Lease once its duration has passed
    // since the last renewal (renewTime, written from this machine's clock); this one had
    // stopped acting by then.
    let (Some(renewed), Some(duration)) = (spec.renew_time.clone(), spec.lease_duration_seconds) else {
        bail!("the Lease has no renewTime or duration: {spec:?}")
    };
    let passable = renewed.0 + k8s_openapi::jiff::SignedDuration::from_secs(i64::from(duration));
    eprintln!("stopped acting at {stopped}, the Lease could pass at {passable} (renewed {})", renewed.0);
    ensure!(stopped < passable, "it stopped acting at {stopped}, after the Lease could pass at {passable}:\n{log}");
    Ok(())
}

/// Two replicas on one Lease: only the leader writes (the follower's writes, from its own
/// `/metrics`, stay 0); the leader SIGKILLed (no release), the follower leads once the Lease runs
/// out (15 s after the last renewal) and does not launch again what the dead leader launched: no
/// NodeClaim created, none launched anew, each keeps its instance.
#[tokio::test(flavor = "multi_thread")]
async fn a_follower_writes_nothing_and_takes_over_a_killed_leader_without_launching_again() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    env.require("kube-controller-manager")?;
    let _acting = ACTING.lock().await;
    let client = env.client().await?;
    install_crds(&client).await?;
    let ns = env.namespace(&client, "replicas").await?;
    let (class, nodepool, node_type) = (unique_name("ha-class"), unique_name("ha-np"), unique_name("k"));
    let template = json!({
        "metadata": { "labels": { "node-type": node_type } },
        "spec": { "requirements": [
            { "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"] },
            { "key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": ["2"] },
        ] },
    });
    let disruption = json!({ "consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never" });
    create_class_and_nodepool(&client, &class, "ha", &nodepool, template, Some(disruption)).await?;
    let lease_name = unique_name("carpentry-leader");
    let replica = |metrics: u16| -> Result<Controller> {
        let (health, metrics) = (free_port()?.to_string(), metrics.to_string());
        Controller::start(
            env,
            &[
                "--kwok-registration-delay",
                "1s",
                "--namespace",
                &ns,
                "--health-port",
                &health,
                "--metrics-port",
                &metrics,
                "--leader-election-namespace",
                &ns,
                "--leader-election-name",
                &lease_name,
            ],
        )
    };
    let says = |port: u16, text: &'static str| async move {
        Ok(get(port, "/metrics").is_ok_and(|(_, body)| has_sample(&body, text)).then_some(()))
    };
    let (first_metrics, second_metrics) = (free_port()?, free_port()?);
    let mut first = replica(first_metrics)?;
    wait_for("the first replica to lead", TIMEOUT, || says(first_metrics, "carpentry_leader 1"))
        .await
        .with_context(|| format!("first replica's log:\n{}", first.log()))?;
    let second = replica(second_metrics)?;
    let (first_log, second_log) = (first.log.clone(), second.log.clone());
    let logs = || {
        let read = |path: &std::path::PathBuf| std::fs::read_to_string(path).unwrap_or_default();
        format!("first replica's log:\n{}\nsecond replica's log:\n{}", read(&first_log), read(&second_log))
    };
    wait_for("the second replica's view to sync", TIMEOUT, || says(second_metrics, "carpentry_view_synced 1"))
        .await
        .with_context(logs)?;

    let mut deployment = inflate_deployment(&node_type, true)?;
    if let Some(spec) = deployment.spec.as_mut() {
        spec.replicas = Some(2);
    }
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &ns);
    deployments.create(&PostParams::default(), &deployment).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    wait_for("2 inflate pods Running", Duration::from_secs(120), || running_exactly(&pods, 2))
        .await
        .with_context(logs)?;
    let nodeclaims_api =
        Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodeClaim", "nodeclaims"));
    let launched = || async {
        let list = nodeclaims_api.list(&Default::default()).await?.items;
        anyhow::Ok(
            list.into_iter()
                .filter(|nc| {
                    nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&nodepool)
                })
                .map(|nc| {
                    let id = nc.data["status"]["providerID"].as_str().unwrap_or_default().to_string();
                    (nc.metadata.name.unwrap_or_default(), id)
                })
                .collect::<std::collections::BTreeMap<String, String>>(),
        )
    };
    let before = launched().await?;
    ensure!(before.len() == 2 && before.values().all(|id| !id.is_empty()), "{before:?}");
    let (_, follower) = get(second_metrics, "/metrics")?;
    ensure!(has_sample(&follower, "carpentry_leader 0"), "the second replica leads too:\n{follower}");
    let follower_writes = metric_sum(&follower, "carpentry_api_writes_total", &[]);
    ensure!(follower_writes == 0.0, "the follower wrote {follower_writes} times:\n{follower}");
    let (_, leader) = get(first_metrics, "/metrics")?;
    let leader_writes = metric_sum(&leader, "carpentry_api_writes_total", &[]);
    ensure!(leader_writes > 0.0, "the leader wrote nothing:\n{leader}");

    first.child.kill()?;
    first.child.wait()?;
    let killed = std::time::Instant::now();
    wait_for("the second replica to lead", TIMEOUT, || says(second_metrics, "carpentry_leader 1"))
        .await
        .with_context(logs)?;
    let handover = killed.elapsed();
    // The Lease runs 15 s from the dead leader's last renewal (at most 3 s before the kill); the
    // follower tries every few seconds.
    ensure!(handover <= Duration::from_secs(25), "handover took {} ms", handover.as_millis());
    // ...and not before: the dead leader released nothing, so a quicker handover would be two
    // leaders at once.
    ensure!(
        handover >= Duration::from_secs(10),
        "handover after {} ms: the Lease had not run out",
        handover.as_millis()
    );
    // A while for the new leader to reconcile what it found: registered, initialized, launched.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let after = launched().await?;
    ensure!(after == before, "the new leader changed the NodeClaims: before {before:?}, after {after:?}");
    let (_, body) = get(second_metrics, "/metrics")?;
    let creates = [("method", "Create")];
    for (name, labels) in [
        ("karpenter_nodeclaims_created_total", &[][..]),
        ("karpenter_cloudprovider_duration_seconds_count", &creates[..]),
    ] {
        let value = metric_sum(&body, name, labels);
        ensure!(value == 0.0, "the new leader's {name} = {value}:\n{body}");
    }
    ensure!(running_exactly(&pods, 2).await?.is_some(), "the pods did not keep running");
    eprintln!(
        "two replicas: the follower wrote 0 times while the leader wrote {leader_writes}; handover {} ms after SIGKILL",
        handover.as_millis()
    );

    // Clean up: this pool's NodeClaims and Nodes go before the next acting test.
    deployments.delete("inflate", &Default::default()).await?;
    for name in before.keys() {
        nodeclaims_api.delete(name, &Default::default()).await?;
    }
    wait_for("the NodeClaims to go", Duration::from_secs(120), || async {
        Ok(launched().await?.is_empty().then_some(()))
    })
    .await
    .with_context(logs)?;
    Ok(())
}

/// Bad objects beside good ones (#45 3.7): a NodePool whose requirement no instance type meets, a
/// NodePool naming an EC2NodeClass that does not exist, and a pod whose
/// `karpenter.sh/do-not-disrupt` value protects nothing (`"True"`). Each is said once, on the
/// object (a condition where the object has one, and one Warning event), while a pod of a good
/// NodePool is provisioned as usual and the controller never restarts. (A NodePool that fails
/// validation is the inflate test's; an EC2NodeClass whose selectors match nothing is aws.rs's.)
#[tokio::test(flavor = "multi_thread")]
async fn bad_objects_are_each_said_once_on_the_object_and_the_rest_provisions() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    let _acting = ACTING.lock().await;
    let client = env.client().await?;
    install_crds(&client).await?;
    let ns = env.namespace(&client, "bad-objects").await?;
    let (class, nodepool, node_type) = (unique_name("bad-class"), unique_name("bad-good-np"), unique_name("k"));
    let (impossible, orphan, impossible_type) =
        (unique_name("bad-impossible-np"), unique_name("bad-orphan-np"), unique_name("k"));
    let pp = PostParams::default();
    let cpu2 = json!({ "key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": ["2"] });
    let template = json!({
        "metadata": { "labels": { "node-type": node_type } },
        "spec": { "requirements": [cpu2] },
    });
    create_class_and_nodepool(&client, &class, "bad-objects", &nodepool, template, None).await?;
    let nodepools_api =
        Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodePool", "nodepools"));
    let mut obj = DynamicObject::new(&impossible, &resource("karpenter.sh", "NodePool", "nodepools"));
    obj.data = json!({ "spec": { "template": {
        "metadata": { "labels": { "node-type": impossible_type } },
        "spec": {
            "nodeClassRef": { "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class },
            "requirements": [{ "key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["no-such-type"] }],
        },
    } } });
    nodepools_api.create(&pp, &obj).await?;
    let mut obj = DynamicObject::new(&orphan, &resource("karpenter.sh", "NodePool", "nodepools"));
    obj.data = json!({ "spec": { "template": { "spec": {
        "nodeClassRef": { "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": unique_name("missing") },
        "requirements": [cpu2],
    } } } });
    nodepools_api.create(&pp, &obj).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = |name: &str, selected: &str, annotations: serde_json::Value| -> Result<Pod> {
        Ok(serde_json::from_value(json!({
            "metadata": { "name": name, "annotations": annotations },
            "spec": {
                "nodeSelector": { "node-type": selected },
                "containers": [{ "name": "pause", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                    "resources": { "requests": { "cpu": "1" } } }],
            },
        }))?)
    };
    pods.create(&pp, &pod("bad-guarded", &node_type, json!({ "karpenter.sh/do-not-disrupt": "True" }))?).await?;
    pods.create(&pp, &pod("bad-pinned", &impossible_type, json!({}))?).await?;

    let (health, metrics) = (free_port()?, free_port()?);
    let lease_name = unique_name("carpentry-leader");
    let mut controller = Controller::start(
        env,
        &[
            "--kwok-registration-delay",
            "1s",
            "--namespace",
            &ns,
            "--health-port",
            &health.to_string(),
            "--metrics-port",
            &metrics.to_string(),
            "--leader-election-namespace",
            &ns,
            "--leader-election-name",
            &lease_name,
        ],
    )?;
    let log = || format!("controller log:\n{}", controller.log());
    // The good NodePool provisions as usual.
    let placed = wait_for("the guarded pod Running", Duration::from_secs(90), || running_exactly(&pods, 1))
        .await
        .with_context(log)?;
    eprintln!("bad objects beside: {placed:?} Running");

    // The NodePool naming a missing EC2NodeClass: NodeClassReady=False (NodeClassNotFound), so not
    // Ready, and one event on it.
    let missing = wait_for("the orphan NodePool's NodeClassReady=False", TIMEOUT, || async {
        let status = nodepools_api.get(&orphan).await?.data["status"].clone();
        let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        let find = |t: &str| conditions.iter().find(|c| c["type"] == t && c["status"] == "False").cloned();
        Ok(find("NodeClassReady").zip(find("Ready")))
    })
    .await
    .with_context(log)?;
    eprintln!("orphan NodePool: {}", missing.0);
    ensure!(missing.0["reason"] == "NodeClassNotFound", "{}", missing.0);
    let said = |object: String, reason: &'static str, words: &'static str| {
        let client = client.clone();
        async move {
            let about = events_about(&client, &object).await?;
            Ok(about.into_iter().find(|(r, note)| r == reason && note.contains(words)).map(|(_, note)| note))
        }
    };
    let note = wait_for("NodeClassNotFound on the orphan NodePool", TIMEOUT, || {
        said(orphan.clone(), "NodeClassNotFound", "NodeClassReady")
    })
    .await
    .with_context(log)?;
    eprintln!("event: {note}");
    // The NodePool no instance type satisfies: its pod cannot be placed, and the NodePool is told
    // which requirement leaves every instance type out.
    let note = wait_for("NoCompatibleInstanceTypes on the impossible NodePool", TIMEOUT, || {
        said(impossible.clone(), "NoCompatibleInstanceTypes", "node.kubernetes.io/instance-type In [no-such-type]")
    })
    .await
    .with_context(log)?;
    eprintln!("event: {note}");
    let note = wait_for("FailedScheduling on the pinned pod", TIMEOUT, || {
        said("bad-pinned".to_string(), "FailedScheduling", "")
    })
    .await
    .with_context(log)?;
    eprintln!("event: {note}");
    // The pod whose do-not-disrupt value is "True": said to protect nothing.
    let note = wait_for("InvalidAnnotation on the guarded pod", TIMEOUT, || {
        said("bad-guarded".to_string(), "InvalidAnnotation", "\"True\"")
    })
    .await
    .with_context(log)?;
    eprintln!("event: {note}");

    // Each said once: decided on every pass (provisioning retries the pinned pod, disruption
    // looks at the guarded one every 10 s), written once within upstream's 2-minute dedupe.
    tokio::time::sleep(Duration::from_secs(25)).await;
    for (object, reason) in [
        (orphan.as_str(), "NodeClassNotFound"),
        (impossible.as_str(), "NoCompatibleInstanceTypes"),
        ("bad-pinned", "FailedScheduling"),
        ("bad-guarded", "InvalidAnnotation"),
    ] {
        let counts = publish_counts(&client, object, reason).await?;
        ensure!(counts == [1], "{reason} on {object} written {counts:?} times (a count per event) within 25 s");
    }
    // Nothing launched for the bad NodePools, and the controller never stopped.
    let nodeclaims_api =
        Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodeClaim", "nodeclaims"));
    let of_pool = |list: &[DynamicObject], pool: &str| {
        list.iter()
            .filter(|nc| {
                nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")).map(String::as_str)
                    == Some(pool)
            })
            .count()
    };
    let claims = nodeclaims_api.list(&Default::default()).await?.items;
    ensure!(of_pool(&claims, &impossible) + of_pool(&claims, &orphan) == 0, "NodeClaims for a bad NodePool");
    ensure!(of_pool(&claims, &nodepool) == 1, "{} NodeClaims for one pod", of_pool(&claims, &nodepool));
    ensure!(controller.child.try_wait()?.is_none(), "the controller exited:\n{}", controller.log());
    ensure!(!controller.log().contains("panicked"), "{}", controller.log());
    let log = || format!("controller log:\n{}", controller.log());
    let (_, body) = get(metrics, "/metrics")?;
    ensure!(has_sample(&body, "carpentry_leader 1"), "/metrics:\n{body}");

    // Clean up: the pool's NodeClaim and Node go before the next acting test; the bad NodePools too.
    for p in ["bad-guarded", "bad-pinned"] {
        pods.delete(p, &Default::default()).await?;
    }
    for np in [&impossible, &orphan] {
        nodepools_api.delete(np, &Default::default()).await?;
    }
    for nc in claims.iter().filter(|nc| of_pool(std::slice::from_ref(nc), &nodepool) == 1) {
        nodeclaims_api.delete(nc.metadata.name.as_deref().unwrap_or_default(), &Default::default()).await?;
    }
    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    wait_for("the NodeClaim and its Node to go", Duration::from_secs(120), || async {
        let left = of_pool(&nodeclaims_api.list(&Default::default()).await?.items, &nodepool);
        let nodes = nodes_api.list(&Default::default()).await?.items;
        let on_pool = nodes
            .iter()
            .filter(|n| n.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&nodepool))
            .count();
        Ok((left == 0 && on_pool == 0).then_some(()))
    })
    .await
    .with_context(log)?;
    Ok(())
}
