//! The Helm chart (controller/deploy/chart) with real Helm (tests/helm: upstream's `helm` built
//! from its Go module) and the real control plane (tests/testenv).
//!
//! - `helm lint --strict` passes for both providers; `helm template` renders what the chart
//!   promises (2 replicas, the IRSA annotation, the PDB, requests, the zone spread, the affinity
//!   that keeps the controller off the nodes it manages); bad values fail naming the value
//!   (a misspelt key, a setting this version does not read, aws without a cluster name).
//! - `helm install` into the testenv (the CRDs from the chart's `crds/`, the ServiceAccount, the
//!   RBAC, the Deployment, the PDB, the Service); then the controller binary runs as the chart's
//!   Deployment runs it (its args and env read back from the installed Deployment) with a token
//!   of the chart's own ServiceAccount (TokenRequest API), so every request it makes is
//!   authorized by the chart's ClusterRole and Role only. inflate 0 → 3 with the kwok provider
//!   passes; the controller's log shows no forbidden request; it holds the Lease in the release's
//!   namespace; the chart's own (pending) controller pods get no node, as their affinity says.
//! - A missing rule fails: with `create` on NodeClaims taken out of the ClusterRole, a fourth
//!   replica gets no NodeClaim and the log names the forbidden request.
//!
//! Real: Helm, the API server's RBAC authorizer and TokenRequest, kube-scheduler,
//! kube-controller-manager (the chart's Deployment and PDB, inflate's ReplicaSet), KWOK. The
//! controller runs outside the cluster (the testenv runs no kubelet, so the chart's pods never
//! start a container): only the process's place differs from a pod's, not its credentials.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use carpentry_tests::testenv::{unique_name, wait_for, TestEnv};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};

#[path = "support/harness.rs"]
mod harness;

use harness::{free_port, get, inflate_deployment, resource, running_exactly, Controller};

const RELEASE: &str = "carpentry-controller";
const TIMEOUT: Duration = Duration::from_secs(60);

/// The chart under test.
fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/chart")
}

/// Helm: `CARPENTRY_HELM` (set by `cargo xtask test`), else tests/helm/bin/helm. `None`: skip
/// (loudly), unless `CI=true`.
fn helm_binary() -> Option<PathBuf> {
    let wanted = std::env::var_os("CARPENTRY_HELM")
        .filter(|h| !h.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/helm/bin/helm"), PathBuf::from);
    if wanted.is_file() {
        return Some(wanted);
    }
    assert!(
        !std::env::var("CI").is_ok_and(|v| v == "true"),
        "helm is missing at {} (CI=true, so the chart's tests must not be skipped); `cargo xtask test` builds it",
        wanted.display()
    );
    eprintln!("\n*** SKIPPING the chart's tests: no helm at {} (`cargo xtask test` builds it)\n", wanted.display());
    None
}

/// Helm with its own cache, config and data folders (never the user's).
struct Helm {
    bin: PathBuf,
    home: PathBuf,
}

impl Helm {
    fn new(bin: PathBuf) -> Result<Helm> {
        let home = std::env::temp_dir().join(unique_name("carpentry-helm-home"));
        std::fs::create_dir_all(&home)?;
        Ok(Helm { bin, home })
    }

    /// `helm ARGS`: its exit status and stdout + stderr.
    fn run(&self, args: &[&str]) -> Result<(bool, String)> {
        let output = Command::new(&self.bin)
            .args(args)
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            .output()
            .with_context(|| format!("run {}", self.bin.display()))?;
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        Ok((output.status.success(), text))
    }

    fn ok(&self, args: &[&str]) -> Result<String> {
        let (ok, text) = self.run(args)?;
        ensure!(ok, "helm {} failed:\n{text}", args.join(" "));
        Ok(text)
    }

    /// `helm template` of the chart: its documents, by kind.
    fn template(&self, args: &[&str]) -> Result<Vec<Value>> {
        let chart = chart_dir();
        let mut all = vec!["template", RELEASE, chart.to_str().context("chart path")?, "--namespace", "karpenter"];
        all.extend_from_slice(args);
        let text = self.ok(&all)?;
        let mut docs = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(doc)?;
            if !value.is_null() {
                docs.push(value);
            }
        }
        Ok(docs)
    }
}

impl Drop for Helm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

fn one<'a>(docs: &'a [Value], kind: &str) -> Result<&'a Value> {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    ensure!(found.len() == 1, "expected one {kind} in the rendered chart, found {}", found.len());
    Ok(found[0])
}

#[test]
fn the_chart_lints_renders_and_refuses_bad_values() -> Result<()> {
    let Some(bin) = helm_binary() else { return Ok(()) };
    let helm = Helm::new(bin)?;
    let chart = chart_dir();
    let chart = chart.to_str().context("chart path")?;
    helm.ok(&["lint", "--strict", chart, "--set", "settings.clusterName=demo"])?;
    helm.ok(&["lint", "--strict", chart, "--set", "settings.cloudProvider=kwok"])?;

    let role_arn = "arn:aws:iam::111122223333:role/KarpenterControllerRole-demo";
    let docs = helm.template(&[
        "--set",
        "settings.clusterName=demo",
        "--set",
        "settings.interruptionQueue=demo-interruptions",
        "--set",
        &format!("serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn={role_arn}"),
    ])?;
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
    ] {
        ensure!(kinds.contains(&kind), "the chart renders no {kind} (it renders {kinds:?})");
    }
    let sa = one(&docs, "ServiceAccount")?;
    ensure!(sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == role_arn, "no IRSA annotation: {sa}");
    let deployment = one(&docs, "Deployment")?;
    let spec = &deployment["spec"]["template"]["spec"];
    ensure!(deployment["spec"]["replicas"] == 2, "replicas: {}", deployment["spec"]["replicas"]);
    ensure!(spec["serviceAccountName"] == sa["metadata"]["name"], "the pods do not run as the chart's ServiceAccount");
    let container = &spec["containers"][0];
    let args: Vec<&str> = container["args"].as_array().context("args")?.iter().filter_map(Value::as_str).collect();
    ensure!(args.contains(&"--cloud-provider=aws"), "args: {args:?}");
    ensure!(
        container["env"].as_array().context("env")?.iter().any(|e| e["name"] == "CLUSTER_NAME" && e["value"] == "demo"),
        "no CLUSTER_NAME in {}",
        container["env"]
    );
    ensure!(
        container["env"]
            .as_array()
            .context("env")?
            .iter()
            .any(|e| e["name"] == "INTERRUPTION_QUEUE" && e["value"] == "demo-interruptions"),
        "no INTERRUPTION_QUEUE in {}",
        container["env"]
    );
    ensure!(container["resources"]["requests"]["cpu"] == "1", "requests: {}", container["resources"]);
    let terms =
        &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    ensure!(
        terms[0]["matchExpressions"][0] == json!({ "key": "karpenter.sh/nodepool", "operator": "DoesNotExist" }),
        "the controller may land on nodes it manages: {terms}"
    );
    let spread = &spec["topologySpreadConstraints"][0];
    ensure!(
        spread["topologyKey"] == "topology.kubernetes.io/zone"
            && spread["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"],
        "zone spread: {spread}"
    );
    let pdb = one(&docs, "PodDisruptionBudget")?;
    ensure!(pdb["spec"]["maxUnavailable"] == 1, "PDB: {pdb}");
    ensure!(pdb["spec"]["selector"] == deployment["spec"]["selector"], "the PDB selects other pods: {pdb}");
    // A minAvailable of the user's replaces the default maxUnavailable: the API server refuses a
    // PDB with both.
    for (value, want) in [("1", json!(1)), ("50%", json!("50%"))] {
        let set = format!("podDisruptionBudget.minAvailable={value}");
        let docs = helm.template(&["--set", "settings.cloudProvider=kwok", "--set", &set])?;
        let spec = &one(&docs, "PodDisruptionBudget")?["spec"];
        ensure!(spec["minAvailable"] == want && spec.get("maxUnavailable").is_none(), "PDB with {set}: {spec}");
    }
    // The aws provider never creates Node objects; the kwok provider does.
    let node_verbs = |docs: &[Value]| -> Result<Vec<String>> {
        let role = one(docs, "ClusterRole")?;
        Ok(role["rules"]
            .as_array()
            .context("rules")?
            .iter()
            .filter(|r| r["apiGroups"] == json!([""]) && r["resources"] == json!(["nodes"]))
            .flat_map(|r| r["verbs"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect())
    };
    ensure!(!node_verbs(&docs)?.contains(&"create".to_string()), "the aws provider's role may create Nodes");
    let kwok = helm.template(&["--set", "settings.cloudProvider=kwok"])?;
    ensure!(node_verbs(&kwok)?.contains(&"create".to_string()), "the kwok provider's role cannot create Nodes");
    // The EC2NodeClass finalizer is the aws provider's only.
    let patches_nodeclasses = |docs: &[Value]| -> Result<bool> {
        let role = one(docs, "ClusterRole")?;
        Ok(role["rules"].as_array().context("rules")?.iter().any(|r| {
            r["resources"].as_array().is_some_and(|res| res.iter().any(|x| x == "ec2nodeclasses"))
                && r["verbs"].as_array().is_some_and(|v| v.iter().any(|x| x == "patch"))
        }))
    };
    ensure!(patches_nodeclasses(&docs)?, "the aws provider's role cannot patch EC2NodeClasses (their finalizer)");
    ensure!(!patches_nodeclasses(&kwok)?, "the kwok provider's role may patch EC2NodeClasses");
    // The CRDs ship in crds/ (installed before the templates, never deleted by an uninstall).
    let with_crds = helm.template(&["--set", "settings.clusterName=demo", "--include-crds"])?;
    let crds: Vec<&str> = with_crds
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .filter_map(|d| d["metadata"]["name"].as_str())
        .collect();
    ensure!(crds.len() == 3, "CRDs: {crds:?}");

    // Bad values fail, naming the value.
    let refused = |args: &[&str], says: &str| -> Result<()> {
        let mut all = vec!["template", RELEASE, chart];
        all.extend_from_slice(args);
        let (ok, text) = helm.run(&all)?;
        ensure!(!ok, "helm template {args:?} passed");
        ensure!(text.contains(says), "helm template {args:?} failed without saying {says:?}:\n{text}");
        Ok(())
    };
    refused(&["--set", "settings.clusterNmae=demo"], "clusterNmae")?;
    refused(&["--set", "replicas=two"], "replicas")?;
    refused(&[], "settings.clusterName")?;
    refused(
        &["--set", "settings.cloudProvider=kwok", "--set", "settings.interruptionQueue=q"],
        "settings.interruptionQueue",
    )?;
    refused(&["--set", "settings.clusterName=demo", "--set", "settings.cloudProvider=gce"], "cloudProvider")?;
    Ok(())
}

/// A kubeconfig for the testenv's API server that authenticates with `token` (a ServiceAccount's).
fn token_kubeconfig(env: &TestEnv, token: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(unique_name("carpentry-sa-kubeconfig"));
    std::fs::create_dir_all(&dir)?;
    let token_file = dir.join("token");
    std::fs::write(&token_file, token)?;
    let ca = env.ready["ca"].as_str().context("ready.json names no CA")?;
    let kubeconfig = dir.join("kubeconfig");
    let text = serde_json::to_string_pretty(&json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "testenv", "cluster": { "server": env.server, "certificate-authority": ca } }],
        "users": [{ "name": "controller", "user": { "tokenFile": token_file } }],
        "contexts": [{ "name": "controller", "context": { "cluster": "testenv", "user": "controller" } }],
        "current-context": "controller",
    }))?;
    std::fs::write(&kubeconfig, text)?;
    Ok(kubeconfig)
}

/// The installed Deployment's container: its args and env, as a pod would run them.
async fn installed_command(client: &Client, ns: &str) -> Result<(Vec<String>, Vec<(String, String)>)> {
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns).get(RELEASE).await?;
    let spec = deployment.spec.context("no spec")?.template.spec.context("no pod spec")?;
    let container = spec.containers.into_iter().next().context("no container")?;
    let env = container.env.unwrap_or_default().into_iter().map(|e| (e.name, e.value.unwrap_or_default())).collect();
    Ok((container.args.unwrap_or_default(), env))
}

/// Log lines of requests the API server refused for lack of permission.
fn forbidden_lines(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains("forbidden") || l.contains("Forbidden")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_chart_rbac_is_enough_for_inflate() -> Result<()> {
    let Some(bin) = helm_binary() else { return Ok(()) };
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    env.require("kube-controller-manager")?;
    let helm = Helm::new(bin)?;
    let client = env.client().await?;
    let ns = unique_name("karpenter");
    let (health, metrics) = (free_port()?, free_port()?);
    let chart = chart_dir();
    let kubeconfig = env.kubeconfig.to_str().context("kubeconfig path")?;
    helm.ok(&[
        "install",
        RELEASE,
        chart.to_str().context("chart path")?,
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        &ns,
        "--create-namespace",
        "--set",
        "settings.cloudProvider=kwok",
        "--set",
        &format!("healthPort={health}"),
        "--set",
        &format!("metricsPort={metrics}"),
    ])?;
    let status = helm.ok(&["status", RELEASE, "--kubeconfig", kubeconfig, "--namespace", &ns])?;
    ensure!(status.contains("STATUS: deployed"), "helm status:\n{status}");

    // A token of the chart's ServiceAccount, as the kubelet would mount it.
    let sa_name = RELEASE;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() }),
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .create_token_request(sa_name, &PostParams::default(), &request)
        .await
        .context("TokenRequest for the chart's ServiceAccount")?
        .status
        .context("the TokenRequest has no status")?
        .token
        .context("the TokenRequest has no token")?;
    let sa_kubeconfig = token_kubeconfig(env, &token)?;

    // The workload: a NodePool, its EC2NodeClass and inflate at 0 replicas.
    let node_type = unique_name("chart");
    create_nodepool(&client, &node_type).await?;
    let inflate_ns = env.namespace(&client, "inflate").await?;
    let deployment = inflate_deployment(&node_type, false)?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &inflate_ns);
    deployments.create(&PostParams::default(), &deployment).await?;

    // The controller as the chart runs it: the installed Deployment's args and env; the Lease's
    // namespace, which a pod reads from its ServiceAccount mount, given as a flag.
    let (args, vars) = installed_command(&client, &ns).await?;
    ensure!(args.iter().any(|a| a == "--cloud-provider=kwok"), "the installed args: {args:?}");
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(["--leader-election-namespace", &ns, "--kwok-registration-delay", "1s"]);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let controller = Controller::start_as(&sa_kubeconfig, &args, &vars)?;
    wait_for("/readyz to answer 200 (every watch allowed)", TIMEOUT, || async {
        Ok(matches!(get(health, "/readyz"), Ok((200, _))).then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    wait_for("the controller to hold the Lease in the release's namespace", TIMEOUT, || async {
        let lease = leases.get_opt("karpenter-leader-election").await?;
        Ok(lease.and_then(|l| l.spec?.holder_identity).filter(|h| !h.is_empty()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;

    deployments.patch("inflate", &PatchParams::default(), &Patch::Merge(&json!({ "spec": { "replicas": 3 } }))).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &inflate_ns);
    let running = |want: usize| running_exactly(&pods, want);
    wait_for("3 inflate pods Running", Duration::from_secs(120), || running(3))
        .await
        .with_context(|| format!("controller log:\n{}", controller.log()))?;
    let nodeclaims =
        Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodeClaim", "nodeclaims"));
    let count = nodeclaims.list(&Default::default()).await?.items.len();
    ensure!(count == 3, "{count} NodeClaims for 3 one-CPU pods on 2-CPU nodes");
    let log = controller.log();
    let forbidden = forbidden_lines(&log);
    ensure!(forbidden.is_empty(), "the chart's RBAC refused requests:\n{}", forbidden.join("\n"));
    // The chart's own pods (2 replicas, nowhere to run: the testenv's only nodes are the
    // NodePool's, which their affinity excludes) are pending and got no node.
    let own: Vec<Pod> = Api::<Pod>::namespaced(client.clone(), &ns).list(&Default::default()).await?.items;
    ensure!(own.len() == 2, "the chart's Deployment has {} pods", own.len());
    ensure!(
        own.iter().all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none()),
        "a controller pod was scheduled onto a node the NodePool manages"
    );

    // A missing rule fails: no `create` on NodeClaims, and a fourth replica gets no NodeClaim.
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let mut role = roles.get(RELEASE).await?;
    let rules = role.rules.as_mut().context("the ClusterRole has no rules")?;
    let mut removed = false;
    for rule in rules.iter_mut() {
        if rule.resources.as_deref() == Some(&["nodeclaims".to_string()][..]) {
            let before = rule.verbs.len();
            rule.verbs.retain(|v| v != "create");
            removed |= rule.verbs.len() < before;
        }
    }
    ensure!(removed, "the ClusterRole grants no create on NodeClaims: {rules:?}");
    roles.replace(RELEASE, &PostParams::default(), &role).await?;
    deployments.patch("inflate", &PatchParams::default(), &Patch::Merge(&json!({ "spec": { "replicas": 4 } }))).await?;
    let refusal = wait_for("the controller to log the forbidden NodeClaim create", TIMEOUT, || async {
        let log = controller.log();
        Ok(forbidden_lines(&log).into_iter().find(|l| l.contains("nodeclaims")).map(str::to_owned))
    })
    .await
    .with_context(|| format!("controller log:\n{}", controller.log()))?;
    eprintln!("without the rule: {refusal}");
    let count = nodeclaims.list(&Default::default()).await?.items.len();
    ensure!(count == 3, "a NodeClaim was created without the rule ({count})");

    // Uninstall removes what the templates made; the CRDs (crds/) and their objects stay.
    drop(controller);
    helm.ok(&["uninstall", RELEASE, "--kubeconfig", kubeconfig, "--namespace", &ns])?;
    ensure!(roles.get_opt(RELEASE).await?.is_none(), "the ClusterRole outlived the uninstall");
    let count = nodeclaims.list(&Default::default()).await?.items.len();
    ensure!(count == 3, "the uninstall removed NodeClaims ({count} left)");
    Ok(())
}

/// An EC2NodeClass and a NodePool of 2-CPU on-demand nodes labelled `node-type`.
async fn create_nodepool(client: &Client, node_type: &str) -> Result<()> {
    let pp = PostParams::default();
    let classes = resource("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses");
    let mut class = DynamicObject::new(node_type, &classes);
    class.data = json!({ "spec": {
        "amiSelectorTerms": [{ "alias": "al2023@latest" }],
        "role": "KarpenterNodeRole-chart",
        "subnetSelectorTerms": [{ "tags": { "karpenter.sh/discovery": "chart" } }],
        "securityGroupSelectorTerms": [{ "tags": { "karpenter.sh/discovery": "chart" } }],
    } });
    Api::<DynamicObject>::all_with(client.clone(), &classes).create(&pp, &class).await?;
    let pools = resource("karpenter.sh", "NodePool", "nodepools");
    let mut pool = DynamicObject::new(node_type, &pools);
    pool.data = json!({ "spec": { "template": {
        "metadata": { "labels": { "node-type": node_type } },
        "spec": {
            "nodeClassRef": { "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_type },
            "requirements": [
                { "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"] },
                { "key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": ["2"] },
            ],
        },
    } } });
    Api::<DynamicObject>::all_with(client.clone(), &pools).create(&pp, &pool).await?;
    Ok(())
}
