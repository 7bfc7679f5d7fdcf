//! Smoke test of the live test environment (tests/testenv): a real kube-apiserver, etcd,
//! kube-scheduler and KWOK, driven with kube-rs and kubectl.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use carpentry_tests::testenv::{unique_name, wait_for, TestEnv, KWOK_NODE_ANNOTATION};
use k8s_openapi::api::core::v1::{
    Container, Namespace, Node, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, PostParams};
use kube::core::GroupVersionKind;
use kube::Api;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn lists_namespaces_and_serves_a_crd() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    let client = env.client().await?;

    let names: Vec<String> = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for wanted in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        ensure!(names.iter().any(|n| n == wanted), "namespace {wanted} missing from {names:?}");
    }

    // A CRD, applied server-side, served once Established.
    let group = format!("{}.smoke.carpentry.dev", unique_name("g"));
    let crd_name = format!("widgets.{group}");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": crd_name },
        "spec": {
            "group": group,
            "names": { "kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList" },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "properties": {
                    "spec": { "type": "object", "properties": { "size": { "type": "integer", "minimum": 1 } } }
                } } }
            }]
        }
    }))?;
    carpentry_tests::testenv::apply_crd(&client, &crd, "carpentry-smoke").await?;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());

    // Its objects are validated against the schema and stored.
    let ns = env.namespace(&client, "smoke-crd").await?;
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Widget"), "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let mut widget = DynamicObject::new("w1", &resource);
    widget.data = json!({ "spec": { "size": 3 } });
    widgets.create(&PostParams::default(), &widget).await?;
    let mut invalid = DynamicObject::new("w2", &resource);
    invalid.data = json!({ "spec": { "size": 0 } });
    ensure!(
        widgets.create(&PostParams::default(), &invalid).await.is_err(),
        "size 0 violates minimum 1 but was accepted"
    );
    ensure!(widgets.get("w1").await?.data["spec"]["size"] == 3);

    crds.delete(&crd_name, &DeleteParams::default()).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn kwok_node_gets_a_scheduled_pod_running_and_deleted() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    env.require("kube-scheduler")?;
    env.require("kwok")?;
    let client = env.client().await?;
    let ns = env.namespace(&client, "smoke-pod").await?;

    // A fake node as a cloud provider would register it: KWOK manages it by annotation.
    let node_name = unique_name("smoke-node");
    let label = ("carpentry.dev/smoke-node".to_string(), node_name.clone());
    let node = Node {
        metadata: ObjectMeta {
            name: Some(node_name.clone()),
            annotations: Some([(KWOK_NODE_ANNOTATION.0.to_string(), KWOK_NODE_ANNOTATION.1.to_string())].into()),
            labels: Some([label.clone(), ("kubernetes.io/hostname".to_string(), node_name.clone())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec { provider_id: Some(format!("kwok://{node_name}")), ..Default::default() }),
        status: Some(NodeStatus {
            capacity: Some(quantities(&[("cpu", "4"), ("memory", "16Gi"), ("pods", "110")])),
            allocatable: Some(quantities(&[("cpu", "4"), ("memory", "15Gi"), ("pods", "110")])),
            ..Default::default()
        }),
    };
    let nodes = Api::<Node>::all(client.clone());
    nodes.create(&PostParams::default(), &node).await?;
    wait_for("KWOK to make the node Ready", TIMEOUT, || async {
        let node = nodes.get(&node_name).await?;
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        Ok(ready.then_some(()))
    })
    .await?;

    // A pod without nodeName: kube-scheduler binds it, KWOK runs it.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = Pod {
        metadata: ObjectMeta { name: Some("web".into()), ..Default::default() },
        spec: Some(PodSpec {
            node_selector: Some([label].into()),
            containers: vec![Container {
                name: "web".into(),
                image: Some("registry.invalid/web:1".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(&[("cpu", "500m"), ("memory", "1Gi")])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    pods.create(&PostParams::default(), &pod).await?;
    let bound_to = wait_for("the pod to be bound and Running", TIMEOUT, || async {
        let pod = pods.get("web").await?;
        let node = pod.spec.and_then(|s| s.node_name);
        let phase = pod.status.and_then(|s| s.phase);
        Ok((node.is_some() && phase.as_deref() == Some("Running")).then_some(node.unwrap_or_default()))
    })
    .await?;
    ensure!(bound_to == node_name, "pod bound to {bound_to}, expected {node_name}");

    // Deleting it: KWOK plays the kubelet and finishes the deletion.
    pods.delete("web", &DeleteParams::default()).await?;
    wait_for("the pod to disappear", TIMEOUT, || async {
        match pods.get_opt("web").await? {
            None => Ok(Some(())),
            Some(_) => Ok(None),
        }
    })
    .await?;
    nodes.delete(&node_name, &DeleteParams::default()).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_works_and_finds_plugins_on_path() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };

    let out = env.kubectl().args(["get", "namespaces", "-o", "name"]).output().context("run kubectl")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success(), "kubectl get namespaces failed: {}", String::from_utf8_lossy(&out.stderr));
    ensure!(stdout.lines().any(|l| l == "namespace/kube-system"), "unexpected kubectl output: {stdout}");

    // A `kubectl-<name>` executable on PATH is a plugin, run with the same KUBECONFIG.
    let plugin_dir = std::env::temp_dir().join(unique_name("carpentry-plugin"));
    std::fs::create_dir_all(&plugin_dir)?;
    let plugin = plugin_dir.join("kubectl-carpentry_smoke");
    std::fs::write(&plugin, "#!/bin/sh\necho \"smoke plugin args=[$*] kubeconfig=$KUBECONFIG\"\n")?;
    let mut perms = std::fs::metadata(&plugin)?.permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&plugin, perms)?;
    let path = format!("{}:{}", plugin_dir.display(), std::env::var("PATH").unwrap_or_default());

    let out = env.kubectl().env("PATH", &path).args(["carpentry-smoke", "hello", "--flag"]).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success(), "plugin failed: {}", String::from_utf8_lossy(&out.stderr));
    ensure!(
        stdout.contains("smoke plugin args=[hello --flag]") && stdout.contains(&env.kubeconfig.display().to_string()),
        "unexpected plugin output: {stdout}"
    );

    let out = env.kubectl().env("PATH", &path).args(["plugin", "list", "--name-only"]).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(stdout.contains("kubectl-carpentry_smoke"), "plugin list did not show it: {stdout}");

    std::fs::remove_dir_all(&plugin_dir)?;
    Ok(())
}
