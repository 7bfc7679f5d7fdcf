//! The plugin against a real control plane (tests/testenv: kube-apiserver, etcd, kube-scheduler,
//! KWOK), run the way users run it: `kubectl karpenter …` through kubectl's plugin discovery.
//!
//! The test installs minimal Karpenter CRDs of its own (cluster-scoped, schema-less, with a status
//! subresource), creates an EC2NodeClass, a NodePool, a launched NodeClaim with its Node (KWOK
//! makes it Ready), a pod running there and two pods kube-scheduler cannot place, then checks that
//! `explain` answers the same on the cluster and on its `snapshot`, and how bad input fails.
//!
//! The environment may be shared with other tests (their objects are in the snapshot too; that is
//! fine). Skipped with a loud message when the testenv binary is missing (unless CI=true).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use carpentry_tests::testenv::{unique_name, wait_for, TestEnv, KWOK_NODE_ANNOTATION};
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(60);
const FIELD_MANAGER: &str = "carpentry-plugin-live";
/// An env value the snapshot must not hold.
const SECRET: &str = "live-secret-value-7f3a";

/// The fields of an explanation that depend on when and from where the state was read: the
/// state's time (the live read's clock vs the snapshot's start time, seconds apart), the source
/// (`context NAME (SERVER)` vs the file), and the NodePool timeline's window (`from` = the state's
/// time, `to` = 7 days later).
const TIME_AND_SOURCE_FIELDS: [&str; 2] = ["time", "source"];
const TIMELINE_FIELDS: [&str; 2] = ["from", "to"];

struct Crd {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
}

const NODEPOOL: Crd = Crd { group: "karpenter.sh", kind: "NodePool", plural: "nodepools" };
const NODECLAIM: Crd = Crd { group: "karpenter.sh", kind: "NodeClaim", plural: "nodeclaims" };
const NODECLASS: Crd = Crd { group: "karpenter.k8s.aws", kind: "EC2NodeClass", plural: "ec2nodeclasses" };

impl Crd {
    fn name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(self.group, "v1", self.kind), self.plural)
    }

    /// A minimal CRD: v1, cluster-scoped, any fields, status as a subresource.
    fn definition(&self) -> Result<CustomResourceDefinition> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": self.name() },
            "spec": {
                "group": self.group,
                "scope": "Cluster",
                "names": {
                    "kind": self.kind,
                    "listKind": format!("{}List", self.kind),
                    "plural": self.plural,
                    "singular": self.kind.to_lowercase(),
                },
                "versions": [{
                    "name": "v1",
                    "served": true,
                    "storage": true,
                    "subresources": { "status": {} },
                    "schema": { "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                    } },
                }],
            },
        }))?)
    }
}

async fn install(client: &Client, crd: &Crd) -> Result<()> {
    carpentry_tests::testenv::apply_crd(client, &crd.definition()?, FIELD_MANAGER).await
}

async fn installed(client: &Client, crd: &Crd) -> Result<bool> {
    Ok(Api::<CustomResourceDefinition>::all(client.clone()).get_opt(&crd.name()).await?.is_some())
}

/// A directory holding `kubectl-karpenter` (a link to the binary under test), for PATH.
fn plugin_dir() -> Result<(PathBuf, String)> {
    let dir = std::env::temp_dir().join(unique_name("carpentry-live-plugin"));
    std::fs::create_dir_all(&dir)?;
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kubectl-karpenter"), dir.join("kubectl-karpenter"))?;
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    Ok((dir, path))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(cmd: &mut Command) -> Result<Output> {
    let started = Instant::now();
    let out = cmd.output().with_context(|| format!("run {cmd:?}"))?;
    eprintln!(
        "[{:>5} ms] exit {:?}: {:?}",
        started.elapsed().as_millis(),
        out.status.code(),
        cmd.get_args().collect::<Vec<_>>()
    );
    Ok(out)
}

/// `kubectl karpenter ARGS`, found on PATH by kubectl.
fn kubectl_karpenter(env: &TestEnv, path: &str, args: &[&str]) -> Result<Output> {
    run(env.kubectl().env("PATH", path).arg("karpenter").args(args))
}

/// The plugin binary itself (for --from-file and other kubeconfigs), with no KUBECONFIG.
fn plugin(args: &[&str]) -> Result<Output> {
    run(Command::new(env!("CARGO_BIN_EXE_kubectl-karpenter")).env_remove("KUBECONFIG").args(args))
}

fn explanation(out: &Output, what: &str) -> Result<Value> {
    let mut v: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("{what}: not JSON; stderr: {}", text(&out.stderr)))?;
    if let Some(map) = v.as_object_mut() {
        for field in TIME_AND_SOURCE_FIELDS {
            map.remove(field);
        }
        for window in map.get_mut("timeline").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(window) = window.as_object_mut() {
                for field in TIMELINE_FIELDS {
                    window.remove(field);
                }
            }
        }
    }
    Ok(v)
}

fn quantities(pairs: &[(&str, &str)]) -> Value {
    pairs.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect::<serde_json::Map<_, _>>().into()
}

struct Objects {
    ns: String,
    class: String,
    nodepool: String,
    nodeclaim: String,
    node: String,
    running: &'static str,
    /// Karpenter would launch a node for it (kube-scheduler cannot place it: too big).
    launchable: &'static str,
    /// No NodePool can give it the label it selects.
    impossible: &'static str,
}

/// The cluster of the test: EC2NodeClass, NodePool, a NodeClaim with its Node, three pods.
async fn create_objects(env: &TestEnv, client: &Client) -> Result<Objects> {
    let ns = env.namespace(client, "plugin-live").await?;
    let class = unique_name("live-class");
    let nodepool = unique_name("live-np");
    let nodeclaim = unique_name("live-nc");
    let node = unique_name("live-node");
    let provider_id = "aws:///us-west-2a/i-0f1e2d3c4b5a69788";
    let pp = PostParams::default();

    let classes: Api<DynamicObject> = Api::all_with(client.clone(), &NODECLASS.resource());
    let mut obj = DynamicObject::new(&class, &NODECLASS.resource());
    obj.data = json!({ "spec": {
        "amiSelectorTerms": [{ "alias": "al2023@latest" }],
        "role": "KarpenterNodeRole-live",
        "subnetSelectorTerms": [{ "tags": { "karpenter.sh/discovery": "live" } }],
        "securityGroupSelectorTerms": [{ "tags": { "karpenter.sh/discovery": "live" } }],
    } });
    classes.create(&pp, &obj).await?;

    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &NODEPOOL.resource());
    let mut obj = DynamicObject::new(&nodepool, &NODEPOOL.resource());
    obj.data = json!({ "spec": {
        "template": { "spec": {
            "nodeClassRef": { "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class },
            "requirements": [
                { "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"] },
                { "key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"] },
            ],
        } },
        "limits": { "cpu": "64" },
    } });
    pools.create(&pp, &obj).await?;

    let labels = json!({
        "karpenter.sh/nodepool": nodepool,
        "node.kubernetes.io/instance-type": "m5.large",
        "karpenter.sh/capacity-type": "on-demand",
        "topology.kubernetes.io/zone": "us-west-2a",
        "topology.kubernetes.io/region": "us-west-2",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
    });
    let capacity = quantities(&[("cpu", "2"), ("memory", "7577Mi"), ("pods", "29"), ("ephemeral-storage", "20Gi")]);
    let allocatable =
        quantities(&[("cpu", "1930m"), ("memory", "6903Mi"), ("pods", "29"), ("ephemeral-storage", "17Gi")]);
    let claims: Api<DynamicObject> = Api::all_with(client.clone(), &NODECLAIM.resource());
    let mut obj = DynamicObject::new(&nodeclaim, &NODECLAIM.resource());
    obj.metadata.labels = Some(serde_json::from_value(labels.clone())?);
    obj.data = json!({ "spec": {
        "nodeClassRef": { "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class },
        "requirements": [
            { "key": "karpenter.sh/nodepool", "operator": "In", "values": [nodepool] },
            { "key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"] },
        ],
    } });
    claims.create(&pp, &obj).await?;
    let status = json!({ "status": {
        "providerID": provider_id,
        "nodeName": node,
        "capacity": capacity,
        "allocatable": allocatable,
    } });
    claims.patch_status(&nodeclaim, &PatchParams::default(), &Patch::Merge(&status)).await?;

    let mut node_labels: BTreeMap<String, String> = serde_json::from_value(labels)?;
    node_labels.insert("karpenter.sh/registered".into(), "true".into());
    node_labels.insert("karpenter.sh/initialized".into(), "true".into());
    node_labels.insert("kubernetes.io/hostname".into(), node.clone());
    let node_object: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node,
            "labels": node_labels,
            "annotations": { KWOK_NODE_ANNOTATION.0: KWOK_NODE_ANNOTATION.1 },
        },
        "spec": { "providerID": provider_id },
        "status": { "capacity": capacity, "allocatable": allocatable },
    }))?;
    let nodes = Api::<Node>::all(client.clone());
    nodes.create(&pp, &node_object).await?;
    wait_for("KWOK to make the node Ready", TIMEOUT, || async {
        let n = nodes.get(&node).await?;
        let ready = n
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        Ok(ready.then_some(()))
    })
    .await?;

    let objects = Objects {
        ns: ns.clone(),
        class,
        nodepool,
        nodeclaim,
        node: node.clone(),
        running: "web",
        launchable: "big",
        impossible: "picky",
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = |name: &str, extra: Value, cpu: &str| -> Result<Pod> {
        let mut spec = json!({
            "containers": [{
                "name": "app",
                "image": "registry.example.com/live/app:1",
                "env": [{ "name": "PASSWORD", "value": SECRET }],
                "resources": { "requests": { "cpu": cpu, "memory": "256Mi" } },
            }],
        });
        spec.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
        Ok(serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": name, "labels": { "app": name }, "annotations": { "example.com/note": SECRET } },
            "spec": spec,
        }))?)
    };
    pods.create(&pp, &pod(objects.running, json!({ "nodeName": node }), "500m")?).await?;
    pods.create(
        &pp,
        &pod(objects.launchable, json!({ "nodeSelector": { "karpenter.sh/nodepool": objects.nodepool } }), "3")?,
    )
    .await?;
    pods.create(
        &pp,
        &pod(objects.impossible, json!({ "nodeSelector": { "carpentry.dev/live-missing": "yes" } }), "100m")?,
    )
    .await?;
    wait_for("the bound pod to run and the others to be found unschedulable", TIMEOUT, || async {
        let running = pods.get(objects.running).await?.status.and_then(|s| s.phase).as_deref() == Some("Running");
        let mut unschedulable = true;
        for name in [objects.launchable, objects.impossible] {
            let p = pods.get(name).await?;
            ensure!(p.spec.and_then(|s| s.node_name).is_none(), "kube-scheduler placed {name}");
            unschedulable &= p
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable"));
        }
        Ok((running && unschedulable).then_some(()))
    })
    .await?;
    Ok(objects)
}

#[tokio::test(flavor = "multi_thread")]
async fn snapshot_and_explain_agree_with_the_live_cluster() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    env.require("kube-scheduler")?;
    env.require("kwok")?;
    let client = env.client().await?;
    let (dir, path) = plugin_dir()?;
    let snapshot_file = dir.join("snapshot.yaml");
    let snapshot = snapshot_file.to_str().context("temp path")?;

    // Karpenter's CRDs absent (a fresh environment; another run may have left them in a shared
    // one): snapshot names them; then a partial install names what is still missing.
    if !installed(&client, &NODEPOOL).await? && !installed(&client, &NODECLAIM).await? {
        let out = kubectl_karpenter(env, &path, &["snapshot", "-o", snapshot])?;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("Karpenter's CRDs are not installed on this cluster"), "{stderr}");
        for name in ["nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"] {
            assert!(stderr.contains(name), "{name} not named: {stderr}");
        }
        install(&client, &NODEPOOL).await?;
        install(&client, &NODECLASS).await?;
        let out = kubectl_karpenter(env, &path, &["snapshot", "-o", snapshot])?;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("does not serve nodeclaims.karpenter.sh (karpenter.sh/v1/NodeClaim)"), "{stderr}");
        assert!(!stderr.contains("nodepools.karpenter.sh"), "{stderr}");
    } else {
        eprintln!("live: Karpenter CRDs already installed in this environment; not testing their absence");
    }
    for crd in [&NODEPOOL, &NODECLASS, &NODECLAIM] {
        install(&client, crd).await?;
    }

    let setup = Instant::now();
    let o = create_objects(env, &client).await?;
    eprintln!("live: objects ready in {:.1?}", setup.elapsed());

    // The same answers live and on the snapshot. Other tests sharing the environment may change
    // it between the two reads: retry a couple of times before calling a difference a failure.
    let queries: Vec<(Vec<&str>, &str, i32)> = vec![
        (vec!["explain", "pod", o.running, "-n", &o.ns], "PodExplanation", 0),
        (vec!["explain", "pod", o.launchable, "-n", &o.ns], "PodExplanation", 0),
        (vec!["explain", "pod", o.impossible, "-n", &o.ns], "PodExplanation", 1),
        (vec!["explain", "node", &o.node], "NodeExplanation", 0),
        (vec!["explain", "nodepool", &o.nodepool], "NodePoolExplanation", 0),
    ];
    let mut attempt = 0;
    loop {
        attempt += 1;
        let started = Instant::now();
        // Two objects a page: every list is paginated (continue tokens), as on a large cluster.
        let out = run(env.kubectl().env("PATH", &path).env("KUBECTL_KARPENTER_PAGE_SIZE", "2").args([
            "karpenter",
            "snapshot",
            "-o",
            snapshot,
        ]))?;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "snapshot through kubectl: {stderr}");
        eprintln!("live: snapshot (read + write) in {:.1?}: {}", started.elapsed(), stderr.trim());
        assert!(stderr.contains(snapshot), "{stderr}");
        let mut differences = Vec::new();
        for (args, kind, code) in &queries {
            let mut live_args = args.clone();
            live_args.extend(["-o", "json"]);
            let live = kubectl_karpenter(env, &path, &live_args)?;
            let mut file_args = live_args.clone();
            file_args.extend(["--from-file", snapshot]);
            let file = plugin(&file_args)?;
            let what = args.join(" ");
            assert_eq!(live.status.code(), Some(*code), "{what} (live): {}", text(&live.stderr));
            assert_eq!(file.status.code(), Some(*code), "{what} (snapshot): {}", text(&file.stderr));
            let (live, file) = (explanation(&live, &what)?, explanation(&file, &what)?);
            assert_eq!(live["kind"], *kind, "{what}: {live}");
            if live != file {
                differences.push(format!(
                    "{what}:\n live: {}\n file: {}",
                    serde_json::to_string(&live)?,
                    serde_json::to_string(&file)?
                ));
            }
        }
        if differences.is_empty() {
            break;
        }
        if attempt == 3 {
            bail!("live and snapshot answers differ:\n{}", differences.join("\n"));
        }
        eprintln!("live: answers differ (attempt {attempt}), retrying:\n{}", differences.join("\n"));
    }

    // The snapshot holds our objects, redacted.
    let written = std::fs::read_to_string(&snapshot_file)?;
    let written = &written[written.find("\n---\n").context("a header, then documents")?..];
    for name in [&o.nodepool, &o.node] {
        assert!(written.contains(&format!("name: {name}\n")), "{name} missing from the snapshot");
    }
    let ours = format!("namespace: {}\n", o.ns);
    assert_eq!(written.matches(&ours).count(), 3, "our three pods, across list pages");
    assert!(!written.contains(SECRET), "the snapshot holds an env value or annotation it should redact");
    assert!(!written.contains("registry.example.com/live"), "the snapshot holds an image name");
    assert!(!written.contains("managedFields"), "managedFields in the snapshot");
    assert!(written.contains("kind: Scenario") && written.contains("startTime:"), "no Scenario with a start time");

    // Bad input: an unknown pod, through kubectl.
    let out = kubectl_karpenter(env, &path, &["explain", "pod", "no-such-pod-x1", "-n", &o.ns, "-o", "json"])?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no-such-pod-x1"), "{stderr}");

    // An object the engine cannot read (our CRDs check no schema): left out with a warning naming
    // it and its field, and in the snapshot's header; the read goes on.
    let broken = unique_name("live-broken");
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &NODEPOOL.resource());
    let mut obj = DynamicObject::new(&broken, &NODEPOOL.resource());
    obj.data = json!({ "spec": { "template": { "spec": {
        "nodeClassRef": { "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x" },
        "requirements": [],
        "bogusField": true,
    } } } });
    pools.create(&PostParams::default(), &obj).await?;
    let out = kubectl_karpenter(env, &path, &["snapshot", "-o", snapshot]);
    pools.delete(&broken, &Default::default()).await?;
    let out = out?;
    let stderr = text(&out.stderr);
    // The object that does not load is left out, named with its field, and the read goes on.
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&format!("NodePool/{broken} is left out")), "{stderr}");
    assert!(stderr.contains("spec.template.spec.bogusField: unknown field `bogusField`"), "{stderr}");
    let written = std::fs::read_to_string(snapshot)?;
    assert!(written.lines().any(|l| l.starts_with(&format!("#   NodePool/{broken}: "))), "{written}");
    assert!(carpentry_core::load(&written).is_ok_and(|m| !m.nodepools.iter().any(|p| p.name() == broken)));

    // Our cluster-scoped objects go (the environment may be shared; the namespace stays, as
    // every test's does).
    let dp = Default::default();
    Api::<Node>::all(client.clone()).delete(&o.node, &dp).await?;
    Api::<DynamicObject>::all_with(client.clone(), &NODECLAIM.resource()).delete(&o.nodeclaim, &dp).await?;
    pools.delete(&o.nodepool, &dp).await?;
    Api::<DynamicObject>::all_with(client.clone(), &NODECLASS.resource()).delete(&o.class, &dp).await?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// A kubeconfig for `server` with `ca` (base64 PEM) and a bearer token.
fn token_kubeconfig(dir: &Path, server: &str, ca: &str, token: &str) -> Result<PathBuf> {
    let path = dir.join("kubeconfig");
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "live", "cluster": { "server": server, "certificate-authority-data": ca } }],
        "users": [{ "name": "nobody", "user": { "token": token } }],
        "contexts": [{ "name": "no-rights", "context": { "cluster": "live", "user": "nobody" } }],
        "current-context": "no-rights",
    });
    std::fs::write(&path, serde_json::to_string_pretty(&config)?)?;
    Ok(path)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_without_rbac_rights_is_told_which_rules_to_add() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    let client = env.client().await?;
    let ns = env.namespace(&client, "plugin-rbac").await?;

    // A ServiceAccount with no bindings, and a token for it (TokenRequest API).
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    let sa: ServiceAccount = serde_json::from_value(json!({ "metadata": { "name": "no-rights" } }))?;
    accounts.create(&PostParams::default(), &sa).await?;
    let request = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": { "expirationSeconds": 600 },
    });
    let response: Value = wait_for("a token for the ServiceAccount", TIMEOUT, || async {
        Ok(Some(accounts.create_subresource::<_, Value>("token", "no-rights", &PostParams::default(), &request).await?))
    })
    .await?;
    let token = response["status"]["token"].as_str().context("TokenRequest returned no token")?;

    let admin: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(&env.kubeconfig)?)?;
    let ca = admin["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .context("the env's kubeconfig has no certificate-authority-data")?
        .to_string();
    let dir = std::env::temp_dir().join(unique_name("carpentry-live-rbac"));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = token_kubeconfig(&dir, &env.server, &ca, token)?;

    let out = plugin(&["snapshot", "--kubeconfig", kubeconfig.to_str().context("path")?])?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty());
    for line in [
        "forbidden: cannot list nodepools.karpenter.sh at the cluster scope: add {apiGroups: [karpenter.sh], \
         resources: [nodepools], verbs: [list]} to your ClusterRole",
        "forbidden: cannot list ec2nodeclasses.karpenter.k8s.aws at the cluster scope: add {apiGroups: \
         [karpenter.k8s.aws], resources: [ec2nodeclasses], verbs: [list]}",
        "forbidden: cannot list pods at the cluster scope: add {apiGroups: [\"\"], resources: [pods], verbs: [list]}",
        "forbidden: cannot list csinodes.storage.k8s.io at the cluster scope",
        &format!("system:serviceaccount:{ns}:no-rights"),
    ] {
        assert!(stderr.contains(line), "missing {line:?} in:\n{stderr}");
    }

    // The same token from an exec credential plugin (as `aws eks get-token` gives one).
    let credential = dir.join("credential.json");
    std::fs::write(
        &credential,
        serde_json::to_string(&json!({
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "kind": "ExecCredential",
            "status": { "token": token },
        }))?,
    )?;
    let exec_config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "live", "cluster": { "server": env.server, "certificate-authority-data": ca } }],
        "users": [{ "name": "exec", "user": { "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "cat",
            "args": [credential.to_str().context("path")?],
            "interactiveMode": "Never",
        } } }],
        "contexts": [{ "name": "exec", "context": { "cluster": "live", "user": "exec" } }],
        "current-context": "exec",
    });
    let exec_path = dir.join("exec-kubeconfig");
    std::fs::write(&exec_path, serde_json::to_string(&exec_config)?)?;
    let out = plugin(&["snapshot", "--kubeconfig", exec_path.to_str().context("path")?])?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("forbidden: cannot list nodeclaims.karpenter.sh"), "{stderr}");
    assert!(stderr.contains(&format!("system:serviceaccount:{ns}:no-rights")), "exec credential not used: {stderr}");

    // The admin's credentials, and a server URL under which nothing is served.
    let mut wrong = admin.clone();
    wrong["clusters"][0]["cluster"]["server"] = format!("{}/not-kubernetes", env.server).into();
    let wrong_path = dir.join("wrong-server");
    std::fs::write(&wrong_path, serde_yaml::to_string(&wrong)?)?;
    let out = plugin(&["snapshot", "--kubeconfig", wrong_path.to_str().context("path")?])?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is it a Kubernetes API server"), "{stderr}");

    // Nothing listening.
    let mut closed = admin;
    closed["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1".into();
    let closed_path = dir.join("closed");
    std::fs::write(&closed_path, serde_yaml::to_string(&closed)?)?;
    let out = plugin(&["snapshot", "--kubeconfig", closed_path.to_str().context("path")?])?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot reach the API server at https://127.0.0.1:1"), "{stderr}");

    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
