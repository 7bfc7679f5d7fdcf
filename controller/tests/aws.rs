//! The `aws` cloud provider against an EC2 API endpoint: moto 5.2.5 (`moto_server`, pinned and
//! installed by `cargo xtask test`) with the test control plane (tests/testenv).
//!
//! Real: the API server, kube-scheduler, kube-controller-manager, KWOK (it runs the pods of the
//! Nodes the registrar makes); the controller binary as users start it (`--cloud-provider aws`,
//! `AWS_ENDPOINT_URL`), its AWS SDK calls over HTTP; moto's EC2, SSM, IAM and SQS: the default VPC's
//! subnets and their free-IP counts, security groups, images, launch templates (found or created by
//! name, with tags, deleted), CreateFleet's instances with their tags, DescribeInstances filters,
//! TerminateInstances, roles and instance profiles (paths, tags, the role they hold).
//!
//! Injected (`support/moto_layer.py`, in moto's process; moto lacks each): CreateFleet trying
//! overrides in `Priority` order; insufficient-capacity answers for offerings the test lists, and
//! a fleet whose every override fails with one code; an
//! `UnauthorizedOperation` for an action the test denies; a Pricing API answer (moto has no
//! Pricing service) with one on-demand price, m5.large's; the EKS-optimized AMI parameters under
//! `/aws/service/eks/` (pointing at moto's own AL2023 images); an instance that stays
//! `shutting-down` for some seconds after TerminateInstances (moto terminates at once). And the
//! kubelet: moto runs no
//! machines, so the test's registrar makes each running instance's Node (name = its private DNS
//! name, providerID `aws:///<zone>/<id>`, the unregistered taint, the capacity the NodeClaim
//! says, KWOK's annotation so that it becomes Ready) and deletes it once EC2 says terminated, as
//! the cloud node-lifecycle controller does. And the network between the controller and EC2: its
//! EC2 calls (`AWS_ENDPOINT_URL_EC2`) go through a test-owned TCP proxy that 5b cuts.
//!
//! 1. inflate 0 → 3: the controller's catalogue is refreshed from moto's DescribeInstanceTypes
//!    and zone-ID offerings; three CreateFleet requests, each with the overrides types × the two
//!    tagged subnets, priorities = the prices (m5.large's from the Pricing API, the others from
//!    the embedded table, as the launch log says), on-demand `lowest-price`, upstream's tags and
//!    a `karpenter.k8s.aws/<hash>` launch template that exists with its tags; 3 instances, 3 Nodes
//!    Ready, 3 pods Running; the EC2NodeClass's status holds what EC2 answered, and an instance
//!    profile made for its `role` (IAM path, tags, the role), which its launch template and
//!    NodeClaims name; once registered, each instance is tagged with its Node's and NodeClaim's
//!    names and its NodeClaim annotated `karpenter.k8s.aws/tagged`.
//! 2. No capacity for any offering of the cheapest type nor for any type in its zone: the
//!    cheapest offering left is launched, the others are cached unavailable (and listed in
//!    `/snapshot`'s Scenario; the next launch offers neither that type nor that zone;
//!    CreateFleet calls = launches).
//!    2b. Every override failing with `UnauthorizedOperation` (a node role the controller may not
//!    pass): the NodeClaim stays with `Launched` Unknown, reason `Unauthorized` and upstream's
//!    message, a `LaunchFailed` event naming the code, a few CreateFleet tries in 25 s (a
//!    backoff, no create → delete loop); once allowed, that same NodeClaim launches.
//!    2c. CreateFleet throttled for 20 s: a bounded number of requests (the SDK's retries within
//!    upstream's launch backoff), `Launched` says `RequestLimitExceeded`, the pod is told,
//!    `karpenter_cloudprovider_errors_total` counts the failed Creates.
//!    2d. DescribeSubnets throttled from 2b to 2d's checks: each EC2NodeClass keeps its status
//!    (Ready), its failed reconciles (`controller_runtime_reconcile_errors_total`) follow
//!    upstream's backoff (bounded: no hot loop), and one succeeds once EC2 answers.
//!    2e. Every offering of a NodePool out of capacity (its one type, on-demand, in both zones):
//!    one CreateFleet with an error per override, the NodeClaim deleted and counted, its pod
//!    told; no NodeClaim made or launch tried again while the offerings are cached unavailable.
//! 3. A deleted NodeClaim's instance is terminated, and its Node and NodeClaim stay until EC2 says
//!    terminated (10 s of `shutting-down`); an instance tagged for the cluster that no
//!    NodeClaim has is collected after its 30 s grace; an instance terminated behind the
//!    controller's back takes its NodeClaim with it.
//! 4. An AMI change (`amiSelectorTerms` pinned to another image id): every NodeClaim drifts
//!    (`AMIDrift`) and is replaced under a budget of 2 nodes, never more at once; the replacements
//!    run the new image.
//! 5. Interruption through an SQS queue (`--interruption-queue`): a rebalance recommendation
//!    is an event on the NodeClaim only; a malformed message and an event of another kind are
//!    deleted; a spot interruption warning deletes the NodeClaim, which is drained and replaced,
//!    with upstream's events; every message leaves the queue.
//!    5b. EC2 stops answering mid-launch (the proxy holds every request unanswered): the
//!    launch waits while spot interruptions are read from the queue and their nodes drained (the
//!    second while the first one's instance deletion waits on EC2), and `/healthz` stays ok; once EC2 answers, the waiting launch is made with one CreateFleet
//!    (the held request never reached EC2), and every instance has a NodeClaim.
//! 6. An EC2NodeClass whose selectors match nothing (made at the start): `SubnetsReady` and
//!    `SecurityGroupsReady` are `False` with upstream's reasons, each said in one event however
//!    often it was resolved since. A denied `ec2:DescribeSubnets`: the EC2NodeClass says so (condition and event naming the
//!    action), its NodePool is `NodeClassReady=False`, and no NodeClaim is even planned for it
//!    (no CreateFleet either).
//! 7. The EC2NodeClass deleted while its NodeClaims run: its `karpenter.k8s.aws/termination`
//!    finalizer holds it and an event names the NodeClaims it waits for; once they are gone, it
//!    goes, and so do the instance profile made for its `role` and its launch templates, while
//!    the user's own profile (the `instanceProfile` of the other class) stays.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use aws_sdk_ec2::types as ec2;
use carpentry_tests::testenv::{unique_name, wait_for, TestEnv};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};

#[path = "support/harness.rs"]
mod harness;

use harness::{
    free_port, get, inflate_deployment, install_crds, metric_sum, resource, running_exactly, Controller, Partition,
};

const TIMEOUT: Duration = Duration::from_secs(90);
const REGION: &str = "us-west-2";
/// The EC2NodeClass's user data, which the launch template carries base64-encoded.
const USER_DATA: &str = "#!/bin/bash\necho carpentry aws test\n";
/// The cluster's service CIDR, as EKS answers it.
const SERVICE_CIDR: &str = "10.96.0.0/16";
/// The controller's access key ID, by which the layer tells its calls from the test's.
const CONTROLLER_KEY: &str = "carpentry-controller";
/// An instance profile the user made (named in `spec.instanceProfile`), not the controller's.
const USERS_PROFILE: &str = "KarpenterNodeInstanceProfile-test";

/// moto_server with the test's layer, on a free port; killed on drop.
struct Moto {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Moto {
    fn start() -> Result<Moto> {
        let port = free_port()?;
        let dir = std::env::temp_dir().join(unique_name("moto-layer"));
        std::fs::create_dir_all(&dir)?;
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/moto_layer.py");
        let python = std::env::var("CARPENTRY_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut child = Command::new(&python)
            .arg(&script)
            .arg(port.to_string())
            .env("MOTO_LAYER_DIR", &dir)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("moto.log"))?)
            .spawn()
            .with_context(|| format!("start {python} {} (cargo xtask test installs moto)", script.display()))?;
        let stdout = child.stdout.take().context("moto's stdout")?;
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        if line.trim() != "ready" {
            let log = std::fs::read_to_string(dir.join("moto.log")).unwrap_or_default();
            bail!("moto did not start (is moto[server]==5.2.5 installed for {python}?):\n{log}");
        }
        Ok(Moto { child, port, dir })
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn write(&self, file: &str, value: &Value) -> Result<()> {
        std::fs::write(self.dir.join(file), serde_json::to_vec(value)?)?;
        Ok(())
    }

    /// The CreateFleet requests so far, as the layer parsed them.
    fn fleet_requests(&self) -> Result<Vec<Value>> {
        let text = std::fs::read_to_string(self.dir.join("create_fleet.jsonl")).unwrap_or_default();
        text.lines().map(|l| Ok(serde_json::from_str(l)?)).collect()
    }

    /// The test's own SDK configuration (another access key than the controller's).
    async fn config(&self) -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(REGION))
            .endpoint_url(self.endpoint())
            .credentials_provider(aws_sdk_ec2::config::Credentials::new("test", "test", None, None, "test"))
            .http_client(aws_smithy_http_client::Builder::new().build_http())
            .load()
            .await
    }

    async fn ec2(&self) -> aws_sdk_ec2::Client {
        aws_sdk_ec2::Client::new(&self.config().await)
    }

    async fn iam(&self) -> aws_sdk_iam::Client {
        aws_sdk_iam::Client::new(&self.config().await)
    }

    async fn sqs(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&self.config().await)
    }

    async fn eks(&self) -> aws_sdk_eks::Client {
        aws_sdk_eks::Client::new(&self.config().await)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tag(key: &str, value: &str) -> ec2::Tag {
    ec2::Tag::builder().key(key).value(value).build()
}

fn filter(name: &str, values: &[&str]) -> ec2::Filter {
    ec2::Filter::builder().name(name).set_values(Some(values.iter().map(|v| v.to_string()).collect())).build()
}

/// The cluster's running instances: (id, zone, private DNS name, state).
async fn instances(ec2c: &aws_sdk_ec2::Client, cluster: &str) -> Result<Vec<(String, String, String, String)>> {
    let answer = ec2c.describe_instances().filters(filter("tag:eks:eks-cluster-name", &[cluster])).send().await?;
    Ok(answer
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .map(|i| {
            (
                i.instance_id().unwrap_or_default().to_string(),
                i.placement().and_then(|p| p.availability_zone()).unwrap_or_default().to_string(),
                i.private_dns_name().unwrap_or_default().to_string(),
                i.state().and_then(|s| s.name()).map(|n| n.as_str().to_string()).unwrap_or_default(),
            )
        })
        .collect())
}

/// Plays the kubelet (and the cloud node-lifecycle controller) for the cluster's instances until
/// dropped.
fn registrar(client: Client, ec2c: aws_sdk_ec2::Client, cluster: String) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let nodes: Api<Node> = Api::all(client.clone());
        let claims =
            Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodeClaim", "nodeclaims"));
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (Ok(list), Ok(nodeclaims)) = (instances(&ec2c, &cluster).await, claims.list(&Default::default()).await)
            else {
                continue;
            };
            for (id, zone, dns, state) in list {
                let provider_id = format!("aws:///{zone}/{id}");
                if state == "terminated" || state == "shutting-down" {
                    let _ = nodes.delete(&dns, &Default::default()).await;
                    continue;
                }
                if state != "running" || nodes.get_opt(&dns).await.ok().flatten().is_some() {
                    continue;
                }
                // The kubelet reports what the machine has: the NodeClaim's capacity.
                let Some(nc) = nodeclaims.items.iter().find(|nc| nc.data["status"]["providerID"] == provider_id) else {
                    continue;
                };
                let node: Node = match serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {
                        "name": dns,
                        "labels": { "kubernetes.io/hostname": dns, "kwok.x-k8s.io/node": "fake",
                            "topology.kubernetes.io/zone": zone },
                        "annotations": { "kwok.x-k8s.io/node": "fake" },
                    },
                    "spec": {
                        "providerID": provider_id,
                        "taints": [{ "key": "karpenter.sh/unregistered", "effect": "NoExecute" }],
                    },
                    "status": { "capacity": nc.data["status"]["capacity"], "allocatable": nc.data["status"]["allocatable"] },
                })) {
                    Ok(n) => n,
                    Err(_) => continue,
                };
                let _ = nodes.create(&PostParams::default(), &node).await;
            }
        }
    })
}

/// Tags two of the default VPC's subnets (the two zones with the lowest names) and makes a
/// security group, for discovery tag `discovery`. Returns the subnets' (id, zone) and the group.
async fn seed_network(ec2c: &aws_sdk_ec2::Client, discovery: &str) -> Result<(Vec<(String, String)>, String)> {
    let subnets = ec2c.describe_subnets().filters(filter("default-for-az", &["true"])).send().await?;
    let mut by_zone: Vec<(String, String)> = subnets
        .subnets()
        .iter()
        .map(|s| (s.availability_zone().unwrap_or_default().to_string(), s.subnet_id().unwrap_or_default().to_string()))
        .collect();
    by_zone.sort();
    by_zone.truncate(2);
    ensure!(by_zone.len() == 2, "moto's default VPC has fewer than 2 subnets: {by_zone:?}");
    for (_, id) in &by_zone {
        ec2c.create_tags().resources(id).tags(tag("karpenter.sh/discovery", discovery)).send().await?;
    }
    let vpc = subnets.subnets()[0].vpc_id().unwrap_or_default().to_string();
    let group = ec2c
        .create_security_group()
        .group_name(format!("nodes-{discovery}"))
        .description("carpentry aws test nodes")
        .vpc_id(vpc)
        .tag_specifications(
            ec2::TagSpecification::builder()
                .resource_type(ec2::ResourceType::SecurityGroup)
                .tags(tag("karpenter.sh/discovery", discovery))
                .build(),
        )
        .send()
        .await?;
    let group_id = group.group_id().unwrap_or_default().to_string();
    Ok((by_zone.into_iter().map(|(z, id)| (id, z)).collect(), group_id))
}

/// The EKS AL2023 parameters for the cluster's version, pointing at moto's AL2023 images (what
/// `/aws/service/ami-amazon-linux-latest/` names, which moto ships).
async fn seed_ami_parameters(moto: &Moto, kubernetes: &str) -> Result<(String, String)> {
    let ssm_config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(REGION))
        .endpoint_url(moto.endpoint())
        .credentials_provider(aws_sdk_ec2::config::Credentials::new("test", "test", None, None, "test"))
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .load()
        .await;
    let ssm = aws_sdk_ssm::Client::new(&ssm_config);
    let mut ids = Vec::new();
    for arch in ["x86_64", "arm64"] {
        let name = format!("/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-{arch}");
        let p = ssm.get_parameter().name(&name).send().await.with_context(|| name.clone())?;
        ids.push(p.parameter().and_then(|p| p.value()).context("no value")?.to_string());
    }
    let base = format!("/aws/service/eks/optimized-ami/{kubernetes}/amazon-linux-2023");
    moto.write(
        "ssm.json",
        &json!({
            format!("{base}/x86_64/standard/recommended/image_id"): ids[0],
            format!("{base}/arm64/standard/recommended/image_id"): ids[1],
        }),
    )?;
    Ok((ids[0].clone(), ids[1].clone()))
}

/// An EC2NodeClass whose nodes run as `identity` (`{"role": …}` or `{"instanceProfile": …}`).
async fn create_class(client: &Client, name: &str, discovery: &str, identity: Value) -> Result<()> {
    let classes = resource("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses");
    let mut obj = DynamicObject::new(name, &classes);
    obj.data = json!({ "spec": {
        "amiSelectorTerms": [{ "alias": "al2023@latest" }],
        "subnetSelectorTerms": [{ "tags": { "karpenter.sh/discovery": discovery } }],
        "securityGroupSelectorTerms": [{ "tags": { "karpenter.sh/discovery": discovery } }],
        "tags": { "team": "carpentry" },
        "userData": USER_DATA,
    } });
    if let (Some(spec), Value::Object(identity)) = (obj.data["spec"].as_object_mut(), identity) {
        spec.extend(identity);
    }
    Api::<DynamicObject>::all_with(client.clone(), &classes).create(&PostParams::default(), &obj).await?;
    Ok(())
}

async fn create_nodepool(client: &Client, name: &str, class: &str, node_type: &str, types: &[&str]) -> Result<()> {
    let pools = resource("karpenter.sh", "NodePool", "nodepools");
    let mut obj = DynamicObject::new(name, &pools);
    obj.data = json!({ "spec": {
        "template": {
            "metadata": { "labels": { "node-type": node_type } },
            "spec": {
                "nodeClassRef": { "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class },
                "requirements": [
                    { "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"] },
                    { "key": "node.kubernetes.io/instance-type", "operator": "In", "values": types },
                ],
            },
        },
        "disruption": { "consolidateAfter": "Never" },
    } });
    Api::<DynamicObject>::all_with(client.clone(), &pools).create(&PostParams::default(), &obj).await?;
    Ok(())
}

/// The notes of the `reason` events on the pods of namespace `ns`.
async fn pod_events(events: &Api<k8s_openapi::api::events::v1::Event>, ns: &str, reason: &str) -> Result<Vec<String>> {
    Ok(events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| r.kind.as_deref() == Some("Pod") && r.namespace.as_deref() == Some(ns))
        })
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.note)
        .collect())
}

async fn nodeclass_status(client: &Client, name: &str) -> Result<Value> {
    let classes = Api::<DynamicObject>::all_with(
        client.clone(),
        &resource("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses"),
    );
    Ok(classes.get(name).await?.data["status"].clone())
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

/// The launched NodeClaims of `nodepool`: name → providerID.
async fn launched(client: &Client, nodepool: &str) -> Result<BTreeMap<String, String>> {
    let claims = Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodeClaim", "nodeclaims"));
    Ok(claims
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|nc| {
            nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&nodepool.to_string())
        })
        .filter(|nc| nc.metadata.deletion_timestamp.is_none())
        .filter_map(|nc| {
            let id = nc.data["status"]["providerID"].as_str()?.to_string();
            Some((nc.metadata.name.clone()?, id))
        })
        .collect())
}

/// The overrides of a recorded CreateFleet request: (type, zone, subnet, priority).
fn overrides(request: &Value) -> Vec<(String, String, String, f64)> {
    let mut out = Vec::new();
    for config in request["LaunchTemplateConfigs"].as_array().into_iter().flatten() {
        for o in config["Overrides"].as_array().into_iter().flatten() {
            out.push((
                o["InstanceType"].as_str().unwrap_or_default().to_string(),
                o["AvailabilityZone"].as_str().unwrap_or_default().to_string(),
                o["SubnetId"].as_str().unwrap_or_default().to_string(),
                number(&o["Priority"]).unwrap_or(f64::NAN),
            ));
        }
    }
    out
}

/// A number the layer recorded as sent (moto parses some as strings).
fn number(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_str()?.parse().ok())
}

/// The `kube-system/kube-dns` Service's cluster IP, the Service made when the testenv has none.
async fn kube_dns(client: &Client) -> Result<String> {
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), "kube-system");
    if services.get_opt("kube-dns").await?.is_none() {
        let service = serde_json::from_value(json!({
            "metadata": { "name": "kube-dns" },
            "spec": { "ports": [{ "name": "dns", "port": 53, "protocol": "UDP" }] },
        }))?;
        match services.create(&PostParams::default(), &service).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let service = services.get("kube-dns").await?;
    service.spec.and_then(|s| s.cluster_ip).filter(|ip| !ip.is_empty()).context("kube-dns has no cluster IP")
}

/// The launch template's user data, as an AL2023 node reads it: the user's script first, then
/// the nodeadm NodeConfig that joins the cluster (its endpoint, CA, service CIDR, DNS, max pods,
/// the unregistered taint, the NodeClaim's labels).
fn check_node_config(user_data: &str, cluster: &str, endpoint: &str, dns: &str, label: &str, pods: u64) -> Result<()> {
    let parts: Vec<&str> = user_data.split("\n--//\n").collect();
    ensure!(parts.len() == 3, "a MIME archive of 2 parts, boundary //:\n{user_data}");
    ensure!(parts[0].starts_with("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\""), "{user_data}");
    ensure!(
        parts[1] == format!("Content-Type: text/x-shellscript; charset=\"us-ascii\"\n\n{USER_DATA}"),
        "{user_data}"
    );
    let (headers, yaml) = parts[2].split_once("\n\n").context("the NodeConfig part has no body")?;
    ensure!(headers == "Content-Type: application/node.eks.aws", "{user_data}");
    let yaml = yaml.strip_suffix("\n--//--\n").context("no closing delimiter")?;
    let config: Value = serde_yaml::from_str(yaml)?;
    ensure!(config["kind"] == "NodeConfig" && config["apiVersion"] == "node.eks.aws/v1alpha1", "{yaml}");
    let spec = &config["spec"];
    ensure!(spec["cluster"]["name"] == cluster && spec["cluster"]["apiServerEndpoint"] == endpoint, "{yaml}");
    ensure!(spec["cluster"]["cidr"] == SERVICE_CIDR, "{yaml}");
    // The CA this controller's connection trusts: the testenv's, as PEM.
    let ca = aws_smithy_types::base64::decode(spec["cluster"]["certificateAuthority"].as_str().unwrap_or_default())?;
    ensure!(String::from_utf8(ca)?.starts_with("-----BEGIN CERTIFICATE-----\n"), "{yaml}");
    let kubelet = &spec["kubelet"]["config"];
    ensure!(kubelet["clusterDNS"] == json!([dns]), "{yaml}");
    ensure!(kubelet["maxPods"] == pods, "maxPods {pods}:\n{yaml}");
    ensure!(
        kubelet["registerWithTaints"] == json!([{ "effect": "NoExecute", "key": "karpenter.sh/unregistered" }]),
        "{yaml}"
    );
    let flags = spec["kubelet"]["flags"][0].as_str().unwrap_or_default();
    ensure!(flags.starts_with("--node-labels=\"") && flags.contains(label), "{yaml}");
    ensure!(flags.contains("karpenter.sh/capacity-type=on-demand"), "{yaml}");
    Ok(())
}

fn tags_of(request: &Value, resource_type: &str) -> BTreeMap<String, String> {
    request["TagSpecifications"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["ResourceType"] == resource_type)
        .flat_map(|t| t["Tags"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| Some((t["Key"].as_str()?.to_string(), t["Value"].as_str()?.to_string())))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_aws_provider_launches_through_create_fleet_falls_back_on_insufficient_capacity_and_collects() -> Result<()>
{
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    env.require("kube-controller-manager")?;
    let client = env.client().await?;
    install_crds(&client).await?;
    let moto = Moto::start()?;
    let ec2c = moto.ec2().await;
    let ns = env.namespace(&client, "aws").await?;
    let cluster = unique_name("cluster");
    let discovery = unique_name("disc");
    let (subnets, group) = seed_network(&ec2c, &discovery).await?;
    // The EKS cluster, as the user made it: DescribeCluster (real moto) answers its endpoint and
    // service CIDR for the nodes' bootstrap. The cluster DNS address is the kube-dns Service's.
    let eksc = moto.eks().await;
    eksc.create_cluster()
        .name(&cluster)
        .role_arn("arn:aws:iam::123456789012:role/eks-cluster")
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .set_subnet_ids(Some(subnets.iter().map(|(id, _)| id.clone()).collect()))
                .build(),
        )
        .kubernetes_network_config(
            aws_sdk_eks::types::KubernetesNetworkConfigRequest::builder().service_ipv4_cidr(SERVICE_CIDR).build(),
        )
        .send()
        .await?;
    let described = eksc.describe_cluster().name(&cluster).send().await?;
    let cluster_endpoint =
        described.cluster().and_then(|c| c.endpoint()).context("moto's cluster has no endpoint")?.to_string();
    let kube_dns_ip = kube_dns(&client).await?;
    let version = client.apiserver_version().await?;
    let kubernetes = format!("{}.{}", version.major, version.minor.trim_end_matches('+'));
    let (ami_x86, _) = seed_ami_parameters(&moto, &kubernetes).await?;
    let (class, nodepool, node_type) = (unique_name("aws-class"), unique_name("aws-np"), unique_name("k"));
    let types = ["m5.large", "c5.large", "m5.xlarge"];
    // The Pricing API answers one price: m5.large's, below c5.large's table price, so that the
    // cheapest launch is priced by the API and the rest by the embedded table.
    const API_PRICED: (&str, f64) = ("m5.large", 0.05);
    moto.write("pricing.json", &json!({ REGION: { API_PRICED.0: API_PRICED.1.to_string() } }))?;
    // The node role, made by the user; the instance profile the controller makes for it. And a
    // profile of the user's own, which the controller uses as given and never deletes.
    let iamc = moto.iam().await;
    let classes_api = resource("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses");
    let node_role = format!("KarpenterNodeRole-{cluster}");
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    iamc.create_role().role_name(&node_role).assume_role_policy_document(trust).send().await?;
    iamc.create_instance_profile().instance_profile_name(USERS_PROFILE).send().await?;
    iamc.add_role_to_instance_profile().instance_profile_name(USERS_PROFILE).role_name(&node_role).send().await?;
    create_class(&client, &class, &discovery, json!({ "role": node_role })).await?;
    create_nodepool(&client, &nodepool, &class, &node_type, &types).await?;

    let deployment = inflate_deployment(&node_type, true)?;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &ns);
    deployments.create(&PostParams::default(), &deployment).await?;

    // The interruption queue, as upstream's CloudFormation makes it (EventBridge's rules feed it;
    // here the test sends the events).
    let sqsc = moto.sqs().await;
    let queue = unique_name("interruptions");
    let queue_url = sqsc.create_queue().queue_name(&queue).send().await?.queue_url().unwrap_or_default().to_string();

    let (health, metrics) = (free_port()?, free_port()?);
    let lease = unique_name("carpentry-leader");
    let endpoint = moto.endpoint();
    // The controller's EC2 calls go through a proxy the test can cut (5b); the rest straight to moto.
    let ec2_link = Partition::to(&endpoint).await?;
    let ec2_endpoint = ec2_link.url("http");
    let controller = Controller::start_with_env(
        env,
        &[
            "--cloud-provider",
            "aws",
            "--cluster-name",
            &cluster,
            "--region",
            REGION,
            "--namespace",
            &ns,
            "--health-port",
            &health.to_string(),
            "--metrics-port",
            &metrics.to_string(),
            "--leader-election-namespace",
            &ns,
            "--leader-election-name",
            &lease,
            "--interruption-queue",
            &queue,
        ],
        &[
            ("AWS_ENDPOINT_URL", endpoint.as_str()),
            ("AWS_ENDPOINT_URL_EC2", ec2_endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", CONTROLLER_KEY),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ],
    )?;
    let log = || controller.log();
    wait_for("/readyz to answer 200", TIMEOUT, || async {
        Ok(matches!(get(health, "/readyz"), Ok((200, _))).then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    let _registrar = AbortOnDrop(registrar(client.clone(), ec2c.clone(), cluster.clone()));

    // The EC2NodeClass's status: what EC2 and SSM answered.
    let status = wait_for("the EC2NodeClass to be Ready", TIMEOUT, || async {
        let s = nodeclass_status(&client, &class).await?;
        Ok((condition(&s, "Ready").map(|c| c["status"] == "True") == Some(true)).then_some(s))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    let found: BTreeSet<(String, String)> = status["subnets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| (s["id"].as_str().unwrap_or_default().to_string(), s["zone"].as_str().unwrap_or_default().to_string()))
        .collect();
    assert_eq!(found, subnets.iter().cloned().collect::<BTreeSet<_>>());
    assert_eq!(status["securityGroups"][0]["id"], group.as_str());
    // The instance profile made for the role: under the NodeClass's IAM path, holding the role,
    // tagged as upstream tags it.
    let profile_name = status["instanceProfile"].as_str().unwrap_or_default().to_string();
    ensure!(profile_name.starts_with(&format!("{cluster}_")), "status.instanceProfile: {status}");
    let class_uid = Api::<DynamicObject>::all_with(client.clone(), &classes_api)
        .get(&class)
        .await?
        .metadata
        .uid
        .context("the EC2NodeClass has no UID")?;
    let profile = iamc.get_instance_profile().instance_profile_name(&profile_name).send().await?;
    let profile = profile.instance_profile().context("no instance profile")?;
    assert_eq!(profile.path(), format!("/karpenter/{REGION}/{cluster}/{class_uid}/"));
    let roles: Vec<&str> = profile.roles().iter().map(|r| r.role_name()).collect();
    assert_eq!(roles, [node_role.as_str()]);
    let profile_tags: BTreeMap<&str, &str> = profile.tags().iter().map(|t| (t.key(), t.value())).collect();
    for (k, v) in [
        (format!("kubernetes.io/cluster/{cluster}"), "owned"),
        ("eks:eks-cluster-name".into(), cluster.as_str()),
        ("karpenter.k8s.aws/ec2nodeclass".into(), class.as_str()),
        ("topology.kubernetes.io/region".into(), REGION),
        ("team".into(), "carpentry"),
    ] {
        assert_eq!(profile_tags.get(k.as_str()), Some(&v), "instance profile tag {k}: {profile_tags:?}");
    }
    eprintln!("instance profile {profile_name} at {} holds {roles:?}", profile.path());
    ensure!(status["amis"].as_array().is_some_and(|a| a.iter().any(|a| a["id"] == ami_x86.as_str())), "{status}");

    // An EC2NodeClass whose selectors match nothing (#45 3.7): checked at 6, by when it has been
    // resolved again many times, that each condition it fails was said in one event.
    let unmatched_class = unique_name("aws-unmatched");
    let unmatched_tag = unique_name("nothing-has-this-tag");
    create_class(&client, &unmatched_class, &unmatched_tag, json!({ "instanceProfile": USERS_PROFILE })).await?;

    // 1. inflate 0 → 3.
    let patch = json!({ "spec": { "replicas": 3 } });
    deployments.patch("inflate", &Default::default(), &kube::api::Patch::Merge(&patch)).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let running = |want: usize| running_exactly(&pods, want);
    wait_for("3 inflate pods Running", Duration::from_secs(150), || running(3))
        .await
        .with_context(|| format!("controller log:\n{}", log()))?;
    let claims = launched(&client, &nodepool).await?;
    ensure!(claims.len() == 3, "{claims:?}");
    // Each NodeClaim names the profile it launched with (the profile collection spares those).
    let nodeclaims_api =
        Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodeClaim", "nodeclaims"));
    for name in claims.keys() {
        let nc = nodeclaims_api.get(name).await?;
        let annotation = nc.metadata.annotations.unwrap_or_default().remove("karpenter.k8s.aws/instance-profile-name");
        assert_eq!(
            annotation.as_deref(),
            Some(profile_name.as_str()),
            "NodeClaim {name}'s instance-profile annotation"
        );
    }
    ensure!(claims.values().all(|id| id.starts_with("aws:///")), "{claims:?}");
    let requests = moto.fleet_requests()?;
    ensure!(requests.len() == 3, "{} CreateFleet calls for 3 launches: {requests:#?}", requests.len());
    // The on-demand prices in these zones, as core prices each decision: the Pricing API's where it
    // answered, the embedded table's otherwise.
    let catalogue_types = carpentry_core::Catalogue::embedded().instance_types_shared(REGION, &Default::default())?;
    let price = |t: &str| {
        if t == API_PRICED.0 {
            return Some(API_PRICED.1);
        }
        catalogue_types
            .iter()
            .find(|it| it.name == t)
            .and_then(|it| it.offerings.iter().find(|o| o.capacity_type.as_str() == "on-demand").map(|o| o.price))
    };
    // The controller says where its catalogue and each launch's price came from.
    let said = log();
    ensure!(said.contains("instance types, offerings and prices refreshed from the cloud"), "{said}");
    ensure!(said.contains("the Pricing API (GetProducts at"), "a launch priced by the Pricing API:\n{said}");
    if let Some(line) = said.lines().find(|l| l.contains("refreshed from the cloud")) {
        eprintln!("catalogue: {line}");
    }
    for request in &requests {
        eprintln!("CreateFleet: {}", serde_json::to_string(request)?);
        assert_eq!(request["Type"], "instant");
        assert_eq!(request["TargetCapacitySpecification"]["TotalTargetCapacity"].to_string().trim_matches('"'), "1");
        assert_eq!(request["TargetCapacitySpecification"]["DefaultTargetCapacityType"], "on-demand");
        assert_eq!(request["OnDemandOptions"]["AllocationStrategy"], "lowest-price");
        let offered: BTreeSet<(String, String, String)> =
            overrides(request).into_iter().map(|(t, z, s, _)| (t, z, s)).collect();
        let expected: BTreeSet<(String, String, String)> = types
            .iter()
            .flat_map(|t| subnets.iter().map(move |(s, z)| (t.to_string(), z.clone(), s.clone())))
            .collect();
        assert_eq!(offered, expected, "overrides = instance types × zonal subnets");
        for (t, _, _, priority) in overrides(request) {
            assert_eq!(Some(priority), price(&t), "{t}'s priority is its price");
        }
        let instance_tags = tags_of(request, "instance");
        for (k, v) in [
            (format!("kubernetes.io/cluster/{cluster}"), "owned".to_string()),
            ("karpenter.sh/nodepool".into(), nodepool.clone()),
            ("eks:eks-cluster-name".into(), cluster.clone()),
            ("karpenter.k8s.aws/ec2nodeclass".into(), class.clone()),
            ("team".into(), "carpentry".into()),
        ] {
            assert_eq!(instance_tags.get(&k), Some(&v), "instance tag {k}");
        }
        assert_eq!(tags_of(request, "volume"), instance_tags);
        let lt_name = request["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        ensure!(lt_name.starts_with("karpenter.k8s.aws/"), "{lt_name}");
        let lts = ec2c.describe_launch_templates().launch_template_names(&lt_name).send().await?;
        let lt = lts.launch_templates().first().context("the launch template does not exist")?;
        ensure!(lt
            .tags()
            .iter()
            .any(|t| t.key() == Some("eks:eks-cluster-name") && t.value() == Some(cluster.as_str())));
        let versions = ec2c.describe_launch_template_versions().launch_template_name(&lt_name).send().await?;
        let data =
            versions.launch_template_versions().first().and_then(|v| v.launch_template_data()).context("no data")?;
        assert_eq!(data.image_id(), Some(ami_x86.as_str()));
        assert_eq!(data.security_group_ids(), std::slice::from_ref(&group));
        assert_eq!(data.iam_instance_profile().and_then(|p| p.name()), Some(profile_name.as_str()));
        let user_data = String::from_utf8(aws_smithy_types::base64::decode(data.user_data().unwrap_or_default())?)?;
        let nodepool_label = format!("karpenter.sh/nodepool={nodepool}");
        // The template's max pods: its types' (the first one's, as they share it).
        let first_type =
            request["LaunchTemplateConfigs"][0]["Overrides"][0]["InstanceType"].as_str().unwrap_or_default();
        let pods = catalogue_types
            .iter()
            .find(|it| it.name == first_type)
            .and_then(|it| it.capacity.get("pods"))
            .map(|q| q.value() as u64)
            .context("the launched type is not in the catalogue")?;
        check_node_config(&user_data, &cluster, &cluster_endpoint, &kube_dns_ip, &nodepool_label, pods)?;
        // The cheapest override was launched (the layer honours Priority).
        let cheapest = overrides(request).into_iter().map(|o| o.3).fold(f64::INFINITY, f64::min);
        let launched_price = number(&request["Launched"]["Priority"]);
        assert_eq!(launched_price, Some(cheapest));
    }
    let ready_nodes = wait_for("3 Nodes Ready", TIMEOUT, || async {
        let nodes: Api<Node> = Api::all(client.clone());
        let ready: Vec<String> = nodes
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|n| claims.values().any(|id| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(id)))
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .filter_map(|n| n.metadata.name)
            .collect();
        Ok((ready.len() == 3).then_some(ready))
    })
    .await?;
    eprintln!("Nodes Ready: {ready_nodes:?}");
    // Registered: each instance is tagged with its Node's and NodeClaim's names, and the NodeClaim
    // says so.
    wait_for("the registered instances tagged", TIMEOUT, || async {
        for (name, provider_id) in &claims {
            let id = provider_id.rsplit('/').next().unwrap_or_default();
            let answer = ec2c.describe_instances().instance_ids(id).send().await?;
            let instance = answer.reservations().iter().flat_map(|r| r.instances()).next().context("no instance")?;
            let tag = |key: &str| instance.tags().iter().find(|t| t.key() == Some(key)).and_then(|t| t.value());
            let node = instance.private_dns_name().unwrap_or_default();
            if tag("Name") != Some(node) || tag("karpenter.sh/nodeclaim") != Some(name.as_str()) {
                return Ok(None);
            }
            let nc = nodeclaims_api.get(name).await?;
            let annotations = nc.metadata.annotations.unwrap_or_default();
            for key in ["karpenter.k8s.aws/tagged", "compatibility.karpenter.k8s.aws/cluster-name-tagged"] {
                if annotations.get(key).map(String::as_str) != Some("true") {
                    return Ok(None);
                }
            }
        }
        Ok(Some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;

    // 2. Capacity runs out for every offering of the cheapest type and for every type in the
    //    cheapest offering's zone: CreateFleet launches the cheapest offering left and reports
    //    the others; the controller marks each unavailable and the next launch offers none of
    //    them (neither the type nor the zone).
    let first = &requests[0];
    let offered = overrides(first);
    let (cheap_type, cheap_zone, _, _) = offered
        .iter()
        .min_by(|a, b| a.3.total_cmp(&b.3).then_with(|| a.1.cmp(&b.1)))
        .cloned()
        .context("no overrides")?;
    let out: BTreeSet<(String, String)> = offered
        .iter()
        .filter(|(t, z, _, _)| *t == cheap_type || *z == cheap_zone)
        .map(|(t, z, _, _)| (t.clone(), z.clone()))
        .collect();
    ensure!(out.len() < offered.len(), "nothing left to launch: {offered:?}");
    let ice: Vec<Value> = out.iter().map(|(t, z)| json!([t, z, "on-demand"])).collect();
    moto.write("ice.json", &json!(ice))?;
    let patch = json!({ "spec": { "replicas": 4 } });
    deployments.patch("inflate", &Default::default(), &kube::api::Patch::Merge(&patch)).await?;
    wait_for("4 inflate pods Running", Duration::from_secs(150), || running(4))
        .await
        .with_context(|| format!("controller log:\n{}", log()))?;
    // The snapshot carries what is cached unavailable, so that a simulation of it avoids the same
    // offerings (the cache holds them for 3 minutes; the launch was moments ago).
    let (code, body) = get(health, "/snapshot")?;
    ensure!(code == 200, "/snapshot answered {code}: {body}");
    let snapshot = carpentry_core::load(&body).map_err(|e| anyhow::anyhow!("the snapshot does not load: {e}"))?;
    let cached: BTreeSet<(String, String)> = snapshot
        .scenario
        .as_ref()
        .context("the snapshot has no Scenario")?
        .spec
        .unavailable_offerings
        .iter()
        .filter(|o| o.capacity_type == "on-demand")
        .map(|o| (o.instance_type.clone(), o.zone.clone()))
        .collect();
    ensure!(out.is_subset(&cached), "the snapshot's unavailable offerings {cached:?} lack some of {out:?}");
    let patch = json!({ "spec": { "replicas": 5 } });
    deployments.patch("inflate", &Default::default(), &kube::api::Patch::Merge(&patch)).await?;
    wait_for("5 inflate pods Running", Duration::from_secs(150), || running(5))
        .await
        .with_context(|| format!("controller log:\n{}", log()))?;
    let requests = moto.fleet_requests()?;
    ensure!(requests.len() == 5, "{} CreateFleet calls for 5 launches (a hot loop?)", requests.len());
    let fourth = &requests[3];
    eprintln!("CreateFleet with insufficient capacity: {}", serde_json::to_string(fourth)?);
    assert_eq!(fourth["Errors"].as_array().map(Vec::len), Some(out.len()), "each ICE'd offering is reported");
    let launched_at = (fourth["Launched"]["InstanceType"].as_str(), fourth["Launched"]["AvailabilityZone"].as_str());
    ensure!(
        launched_at.0 != Some(cheap_type.as_str()) && launched_at.1 != Some(cheap_zone.as_str()),
        "{launched_at:?}"
    );
    let fifth = overrides(&requests[4]);
    ensure!(
        !fifth.iter().any(|(t, z, _, _)| *t == cheap_type || *z == cheap_zone),
        "{cheap_type} or {cheap_zone}, out of capacity, is offered again within 3 minutes: {fifth:?}"
    );
    moto.write("ice.json", &json!([]))?;

    // 2b. A fleet that fails for another reason than capacity (the node role may not be passed):
    //     the NodeClaim stays, says why on `Launched` (upstream's reason), is tried again after a
    //     backoff (no create → CreateFleet → delete loop), and launches once the cause is gone.
    moto.write(
        "fleet_error.json",
        &json!([
            "UnauthorizedOperation",
            "You are not authorized to perform this operation. User is not authorized to perform: iam:PassRole"
        ]),
    )?;
    // EC2 throttles DescribeSubnets from here to 2d.
    let nodeclass_reconciles = |result: &str| -> Result<f64> {
        let (_, body) = get(metrics, "/metrics")?;
        let name = "controller_runtime_reconcile_total";
        Ok(metric_sum(&body, name, &[("controller", "nodeclass"), ("result", result)]))
    };
    let failed_before = nodeclass_reconciles("error")?;
    moto.write("throttle.json", &json!(["ec2:DescribeSubnets"]))?;
    let subnets_throttled = std::time::Instant::now();
    let calls_before = moto.fleet_requests()?.len();
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let patch = json!({ "spec": { "replicas": 6 } });
    deployments.patch("inflate", &Default::default(), &kube::api::Patch::Merge(&patch)).await?;
    let unlaunched = || async {
        let list = nodeclaims_api.list(&Default::default()).await?.items;
        Ok::<_, anyhow::Error>(
            list.into_iter()
                .filter(|nc| {
                    nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&nodepool)
                })
                .filter(|nc| nc.data["status"]["providerID"].as_str().unwrap_or_default().is_empty())
                .collect::<Vec<_>>(),
        )
    };
    let (failing, launched_condition) =
        wait_for("a NodeClaim whose Launched condition says Unauthorized", TIMEOUT, || async {
            Ok(unlaunched().await?.into_iter().find_map(|nc| {
                let conditions = nc.data["status"]["conditions"].as_array()?;
                let c = conditions.iter().find(|c| c["type"] == "Launched" && c["reason"] == "Unauthorized")?;
                Some((nc.metadata.name.clone()?, c.clone()))
            }))
        })
        .await
        .with_context(|| format!("controller log:\n{}", log()))?;
    eprintln!("failing launch: {failing}: {launched_condition}");
    assert_eq!(launched_condition["status"], "Unknown");
    assert_eq!(
        launched_condition["message"],
        "User is not authorized to perform this operation because no identity-based policy allows it"
    );
    // Given time for several tries, it is still the one NodeClaim, and CreateFleet was tried
    // a few times, not once a pass.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let still: Vec<String> = unlaunched().await?.into_iter().filter_map(|nc| nc.metadata.name).collect();
    ensure!(still == [failing.clone()], "the failing NodeClaim was replaced: {still:?} (was {failing})");
    let tries = moto.fleet_requests()?.len() - calls_before;
    // upstream's backoff (1 s doubling, core nodeclaim::lifecycle::RATE_LIMITER) gives
    // about 5 in 25 s; once a pass would be about 25.
    ensure!((3..=8).contains(&tries), "{tries} CreateFleet calls in about 25 s of a failing launch");
    let event = events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .find(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(failing.as_str())
                && e.reason.as_deref() == Some("LaunchFailed")
        })
        .context("no LaunchFailed event on the failing NodeClaim")?;
    let note = event.note.unwrap_or_default();
    ensure!(note.contains("UnauthorizedOperation: You are not authorized"), "the event names the code: {note}");
    // The pod the NodeClaim was made for is told too.
    let on_pods = pod_events(&events, &ns, "LaunchFailed").await?;
    ensure!(
        on_pods.iter().any(|n| n.contains(&format!("nodeclaim/{failing}")) && n.contains("UnauthorizedOperation")),
        "no LaunchFailed event on the nominated pod naming the NodeClaim and the code: {on_pods:?}"
    );

    // 2c. EC2 throttles CreateFleet (RequestLimitExceeded, HTTP 503; a minute in the issue, here
    //     until the NodeClaim says so plus 20 s, sized to CI): the SDK retries each call a bounded
    //     number of times, the NodeClaim says so on `Launched` (upstream's reason) and is tried
    //     again after its backoff (carried over from 2b, as upstream's per-object rate limiter
    //     keeps it across errors), its pod is told, upstream's error metric counts each failed
    //     Create; no hot loop.
    let controller_calls = || -> Result<usize> {
        let text = std::fs::read_to_string(moto.dir.join("actions.log")).unwrap_or_default();
        Ok(text.lines().filter(|l| *l == format!("{CONTROLLER_KEY} ec2:CreateFleet")).count())
    };
    let create_errors = || -> Result<f64> {
        let (_, body) = get(metrics, "/metrics")?;
        Ok(metric_sum(&body, "karpenter_cloudprovider_errors_total", &[("method", "Create")]))
    };
    let (errors_before, calls_before) = (create_errors()?, controller_calls()?);
    moto.write("throttle.json", &json!(["ec2:CreateFleet", "ec2:DescribeSubnets"]))?;
    moto.write("fleet_error.json", &json!(null))?;
    let throttled = std::time::Instant::now();
    let throttled_condition =
        wait_for("the failing NodeClaim's Launched to say RequestLimitExceeded", TIMEOUT, || async {
            let nc = nodeclaims_api.get(&failing).await?;
            let conditions = nc.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
            Ok(conditions.into_iter().find(|c| c["type"] == "Launched" && c["reason"] == "RequestLimitExceeded"))
        })
        .await
        .with_context(|| format!("controller log:\n{}", log()))?;
    eprintln!("throttled launch: {throttled_condition}");
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (calls, errors) = (controller_calls()? - calls_before, create_errors()? - errors_before);
    let window = throttled.elapsed().as_secs();
    eprintln!(
        "throttled for {window} s: {calls} CreateFleet requests (SDK attempts included), {errors} failed Creates"
    );
    // Each launch is at most the SDK's 3 attempts, launches at most one per backoff (1 s and
    // doubling); a launch once a pass would be 3 requests a second.
    ensure!(calls >= 2 && calls as u64 <= window, "{calls} CreateFleet requests in {window} s of throttling");
    ensure!(errors >= 1.0 && errors <= calls as f64, "{errors} failed Creates counted for {calls} requests");
    let on_pods = pod_events(&events, &ns, "LaunchFailed").await?;
    ensure!(
        on_pods.iter().any(|n| n.contains(&format!("nodeclaim/{failing}")) && n.contains("RequestLimitExceeded")),
        "no LaunchFailed event on the nominated pod naming the throttling: {on_pods:?}"
    );

    // 2d. With DescribeSubnets throttled since 2b, each EC2NodeClass's reconcile fails (no
    //     answer about its subnets): its status stays as it was (Ready: upstream returns the
    //     error and keeps the last good status), and it is reconciled again after upstream's
    //     backoff (`reasonable.RateLimiter`: 100 ms doubling to a minute), not at once (a hot
    //     loop on EC2) nor only every 10 s or at the next minute's requeue. Two EC2NodeClasses
    //     (the test's and the unmatched one) each wait 100 ms × (2ⁿ − 1) before their n+1th
    //     failure, which bounds the failures in the window.
    let first = wait_for("a failed EC2NodeClass reconcile", TIMEOUT, || async {
        let failed = nodeclass_reconciles("error")? - failed_before;
        Ok((failed >= 1.0).then_some(failed))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    // From the first failure, one class alone fails 4 more times within 15 s (waits of 0.1,
    // 0.2, 0.4 and 0.8 s, each try at most about 3 s of the SDK's own retries); retried only
    // every 10 s (or at the minute's requeue), the two classes would fail at most 4 times.
    let failed = wait_for("4 more failed EC2NodeClass reconciles", Duration::from_secs(15), || async {
        let failed = nodeclass_reconciles("error")? - failed_before;
        Ok((failed >= first + 4.0).then_some(failed))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    let window = subnets_throttled.elapsed().as_secs_f64();
    let bound = 2.0 * ((10.0 * window + 1.0).log2() + 1.0);
    eprintln!(
        "DescribeSubnets throttled for {window:.0} s: {failed} failed EC2NodeClass reconciles (at most {bound:.1})"
    );
    ensure!(failed <= bound, "{failed} failed EC2NodeClass reconciles in {window:.0} s (backoff bound {bound:.1})");
    let kept = nodeclass_status(&client, &class).await?;
    for type_ in ["SubnetsReady", "Ready"] {
        ensure!(condition(&kept, type_).is_some_and(|c| c["status"] == "True"), "{type_} not kept True: {kept}");
    }
    let succeeded_before = nodeclass_reconciles("requeue_after")?;
    moto.write("throttle.json", &json!([]))?;
    wait_for("6 inflate pods Running", Duration::from_secs(150), || running(6))
        .await
        .with_context(|| format!("controller log:\n{}", log()))?;
    ensure!(launched(&client, &nodepool).await?.contains_key(&failing), "the failing NodeClaim itself launched");
    wait_for("an EC2NodeClass reconcile to succeed after the throttling", TIMEOUT, || async {
        Ok((nodeclass_reconciles("requeue_after")? > succeeded_before).then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    // 2e. Every offering of a NodePool out of capacity (its one type, on-demand, in each zone):
    //     its one CreateFleet reports an insufficient-capacity error per override and launches
    //     nothing; the NodeClaim is deleted, its pod told, the NodeClaim counted as disrupted for
    //     insufficient capacity, and with every offering cached unavailable (3 minutes) nothing
    //     is planned or launched for it again (no create → CreateFleet → delete loop).
    let ice_pool = unique_name("ice");
    let ice_type = "c5.xlarge";
    let ice: Vec<Value> = subnets.iter().map(|(_, zone)| json!([ice_type, zone, "on-demand"])).collect();
    moto.write("ice.json", &json!(ice))?;
    create_nodepool(&client, &ice_pool, &class, "ice", &[ice_type]).await?;
    let ice_pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "ice" },
        "spec": {
            "nodeSelector": { "karpenter.sh/nodepool": ice_pool },
            "containers": [{ "name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": { "requests": { "cpu": "1" } } }],
        },
    }))?;
    pods.create(&PostParams::default(), &ice_pod).await?;
    let told = wait_for("the pod of an all-out-of-capacity NodeClaim to be told", TIMEOUT, || async {
        let notes = pod_events(&events, &ns, "InsufficientCapacityError").await?;
        Ok(notes.into_iter().find(|n| n.contains("nodeclaim/") && n.contains("InsufficientInstanceCapacity")))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    eprintln!("all offerings out of capacity: {told}");
    let of_ice_pool = || async {
        let list = nodeclaims_api.list(&Default::default()).await?.items;
        Ok::<_, anyhow::Error>(
            list.into_iter()
                .filter(|nc| {
                    nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&ice_pool)
                })
                .count(),
        )
    };
    // Time for a loop to show: the NodeClaim goes and no other is made.
    tokio::time::sleep(Duration::from_secs(15)).await;
    ensure!(of_ice_pool().await? == 0, "a NodeClaim of {ice_pool} remains or was made again");
    let ice_fleets: Vec<Value> =
        moto.fleet_requests()?.into_iter().filter(|r| overrides(r).iter().any(|(t, _, _, _)| t == ice_type)).collect();
    ensure!(ice_fleets.len() == 1, "{} CreateFleet calls for {ice_pool} (a loop?)", ice_fleets.len());
    assert_eq!(ice_fleets[0]["Errors"].as_array().map(Vec::len), Some(subnets.len()), "{}", ice_fleets[0]);
    let (_, body) = get(metrics, "/metrics")?;
    let disrupted = metric_sum(
        &body,
        "karpenter_nodeclaims_disrupted_total",
        &[("reason", "insufficient_capacity"), ("nodepool", &ice_pool)],
    );
    ensure!(disrupted == 1.0, "{disrupted} NodeClaims of {ice_pool} counted disrupted for insufficient capacity");
    let phase = pods.get("ice").await?.status.and_then(|s| s.phase);
    ensure!(phase.as_deref() == Some("Pending"), "the pod with no capacity is {phase:?}");
    pods.delete("ice", &Default::default()).await?;
    let pools = resource("karpenter.sh", "NodePool", "nodepools");
    Api::<DynamicObject>::all_with(client.clone(), &pools).delete(&ice_pool, &Default::default()).await?;
    moto.write("ice.json", &json!([]))?;

    // Back to 5 pods on 5 nodes for what follows (the NodePool never consolidates): the node the
    // scale-down emptied goes with its NodeClaim.
    let patch = json!({ "spec": { "replicas": 5 } });
    deployments.patch("inflate", &Default::default(), &kube::api::Patch::Merge(&patch)).await?;
    let busy: BTreeSet<String> = wait_for("5 inflate pods Running", Duration::from_secs(60), || running(5))
        .await?
        .into_iter()
        .map(|(_, node)| node)
        .collect();
    let empty = nodeclaims_api
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|nc| nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&nodepool))
        .find(|nc| nc.data["status"]["nodeName"].as_str().is_some_and(|n| !busy.contains(n)))
        .and_then(|nc| nc.metadata.name)
        .context("no NodeClaim left empty by the scale-down")?;
    nodeclaims_api.delete(&empty, &Default::default()).await?;
    wait_for("the emptied NodeClaim to go", TIMEOUT, || async {
        Ok(nodeclaims_api.get_opt(&empty).await?.is_none().then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;

    // 3. Deleting a NodeClaim terminates its instance. EC2 (the layer) keeps it shutting-down for
    // 10 s: the Node and the NodeClaim keep their finalizers until it is terminated (upstream
    // `awaitInstanceTermination`), so nothing takes the node for gone while it may still run.
    moto.write("shutting_down.json", &json!(10))?;
    let claims = launched(&client, &nodepool).await?;
    let (victim, victim_id) = claims.iter().next().map(|(n, id)| (n.clone(), id.clone())).context("no NodeClaim")?;
    let victim_instance = victim_id.rsplit('/').next().unwrap_or_default().to_string();
    let nodeclaims =
        Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodeClaim", "nodeclaims"));
    let victim_node = nodeclaims.get(&victim).await?.data["status"]["nodeName"]
        .as_str()
        .context("the victim has no nodeName")?
        .to_string();
    nodeclaims.delete(&victim, &Default::default()).await?;
    let state_of_victim = || async {
        let all = instances(&ec2c, &cluster).await?;
        anyhow::Ok(all.into_iter().find(|(id, _, _, _)| *id == victim_instance).map(|(_, _, _, s)| s))
    };
    wait_for("the deleted NodeClaim's instance to be shutting down", TIMEOUT, || async {
        Ok((state_of_victim().await?.as_deref() == Some("shutting-down")).then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    ensure!(state_of_victim().await?.as_deref() == Some("shutting-down"), "the layer's 10 s ran out early");
    let nodes_api: Api<Node> = Api::all(client.clone());
    ensure!(
        nodes_api.get_opt(&victim_node).await?.is_some(),
        "the Node went while its instance was shutting down:\n{}",
        log()
    );
    ensure!(nodeclaims.get_opt(&victim).await?.is_some(), "the NodeClaim went while its instance was shutting down");
    wait_for("the deleted NodeClaim's instance to be terminated", TIMEOUT, || async {
        let all = instances(&ec2c, &cluster).await?;
        Ok(all.iter().any(|(id, _, _, state)| *id == victim_instance && state == "terminated").then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    wait_for("the deleted NodeClaim and its Node to go", TIMEOUT, || async {
        let gone = nodeclaims.get_opt(&victim).await?.is_none() && nodes_api.get_opt(&victim_node).await?.is_none();
        Ok(gone.then_some(()))
    })
    .await?;
    moto.write("shutting_down.json", &json!(null))?;

    // An instance tagged for the cluster that no NodeClaim has: terminated after its grace.
    let leak = ec2c
        .run_instances()
        .image_id(&ami_x86)
        .instance_type(ec2::InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .subnet_id(&subnets[0].0)
        .tag_specifications(
            ec2::TagSpecification::builder()
                .resource_type(ec2::ResourceType::Instance)
                .tags(tag("eks:eks-cluster-name", &cluster))
                .tags(tag("karpenter.sh/nodepool", &nodepool))
                .tags(tag("karpenter.k8s.aws/ec2nodeclass", &class))
                .tags(tag(&format!("kubernetes.io/cluster/{cluster}"), "owned"))
                .build(),
        )
        .send()
        .await?;
    let leaked = leak.instances()[0].instance_id().unwrap_or_default().to_string();
    let started = std::time::Instant::now();
    // The collector runs every 10 s for its first 20 runs, then every 2 minutes (upstream's
    // cadence): when this test reaches here past the first 200 s (the EC2NodeClass failures above
    // wait for its minute's requeue), an instance still inside its 30 s grace at one run is
    // collected at the next, up to 2.5 minutes after its launch.
    wait_for("the leaked instance to be collected", Duration::from_secs(180), || async {
        let all = instances(&ec2c, &cluster).await?;
        Ok(all.iter().any(|(id, _, _, state)| *id == leaked && state == "terminated").then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    let after = started.elapsed();
    eprintln!("leaked instance collected {} s after launch", after.as_secs());
    ensure!(after >= Duration::from_secs(25), "collected after {after:?}, inside the 30 s grace");

    // An instance terminated behind the controller's back takes its NodeClaim with it.
    let claims = launched(&client, &nodepool).await?;
    let (gone, gone_id) = claims.iter().next().map(|(n, id)| (n.clone(), id.clone())).context("no NodeClaim")?;
    let gone_instance = gone_id.rsplit('/').next().unwrap_or_default().to_string();
    ec2c.terminate_instances().instance_ids(&gone_instance).send().await?;
    wait_for("the vanished instance's NodeClaim to go", Duration::from_secs(120), || async {
        Ok(nodeclaims.get_opt(&gone).await?.is_none().then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;

    wait_for("5 inflate pods Running after the replacements", Duration::from_secs(150), || running(5))
        .await
        .with_context(|| format!("controller log:\n{}", log()))?;

    // The EC2NodeClass pinned to another AMI: every node drifts (AMIDrift) and is replaced at the
    // budget's pace (2 at a time), each replacement launched with the new image.
    let images = ec2c
        .describe_images()
        .owners("amazon")
        .filters(filter("architecture", &["x86_64"]))
        .filters(filter("state", &["available"]))
        .send()
        .await?;
    let other_ami = images
        .images()
        .iter()
        .filter_map(|i| i.image_id())
        .filter(|id| *id != ami_x86)
        .min()
        .context("moto has no second x86_64 image")?
        .to_string();
    let pools = Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodePool", "nodepools"));
    let budget = json!({ "spec": { "disruption": { "budgets": [{ "nodes": "2" }] } } });
    pools.patch(&nodepool, &Default::default(), &kube::api::Patch::Merge(&budget)).await?;
    let classes = Api::<DynamicObject>::all_with(
        client.clone(),
        &resource("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses"),
    );
    let pin = json!({ "spec": { "amiFamily": "AL2023", "amiSelectorTerms": [{ "id": other_ami }] } });
    classes.patch(&class, &Default::default(), &kube::api::Patch::Merge(&pin)).await?;
    let drift_started = std::time::Instant::now();
    // (most NodeClaims being deleted at once, every NodeClaim seen Drifted)
    let seen = std::sync::Mutex::new((0usize, BTreeSet::new()));
    let replaced = wait_for("every node replaced with the new AMI", Duration::from_secs(240), || {
        let (nodeclaims, ec2c, other_ami) = (nodeclaims.clone(), ec2c.clone(), other_ami.clone());
        let nodepool = nodepool.clone();
        let seen = &seen;
        async move {
            let ours: Vec<DynamicObject> = nodeclaims
                .list(&Default::default())
                .await?
                .items
                .into_iter()
                .filter(|nc| {
                    nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&nodepool)
                })
                .collect();
            let disrupting = ours.iter().filter(|nc| nc.metadata.deletion_timestamp.is_some()).count();
            {
                let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                seen.0 = seen.0.max(disrupting);
                for nc in &ours {
                    if condition(&nc.data["status"], "Drifted").is_some_and(|c| c["status"] == "True") {
                        seen.1.insert(nc.metadata.name.clone().unwrap_or_default());
                    }
                }
            }
            let ids: Vec<String> = ours
                .iter()
                .filter_map(|nc| Some(nc.data["status"]["providerID"].as_str()?.rsplit('/').next()?.to_string()))
                .collect();
            if disrupting > 0 || ours.len() != 5 || ids.len() != 5 {
                return Ok(None);
            }
            let answer = ec2c.describe_instances().set_instance_ids(Some(ids)).send().await?;
            let images: Vec<String> = answer
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .map(|i| i.image_id().unwrap_or_default().to_string())
                .collect();
            Ok((images.len() == 5 && images.iter().all(|i| *i == other_ami)).then_some(images))
        }
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    let (most_disrupting, drifted_seen) = seen.into_inner().unwrap_or_else(|e| e.into_inner());
    eprintln!(
        "AMI drift: {} NodeClaims drifted, all {} replaced with {other_ami} in {} s, at most {most_disrupting} at once",
        drifted_seen.len(),
        replaced.len(),
        drift_started.elapsed().as_secs()
    );
    ensure!(drifted_seen.len() >= 5, "only {} NodeClaims were marked Drifted", drifted_seen.len());
    ensure!(most_disrupting <= 2, "{most_disrupting} nodes disrupted at once under a budget of 2");
    wait_for("5 inflate pods Running on the new nodes", Duration::from_secs(150), || running(5))
        .await
        .with_context(|| format!("controller log:\n{}", log()))?;

    // 5. Interruption events through the queue: a rebalance recommendation only says so on the
    //    NodeClaim; a message that does not parse and an event of no interest are deleted; a spot
    //    interruption warning deletes the NodeClaim (drained, replaced) and says why.
    let nodeclaim_events = |name: String| {
        let events = Api::<k8s_openapi::api::events::v1::Event>::all(client.clone());
        async move {
            let reasons: Vec<String> = events
                .list(&Default::default())
                .await?
                .items
                .into_iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str()))
                .filter_map(|e| e.reason)
                .collect();
            anyhow::Ok(reasons)
        }
    };
    let before = launched(&client, &nodepool).await?;
    let (victim, victim_id) = before.iter().next().map(|(n, p)| (n.clone(), p.clone())).context("no NodeClaim")?;
    let victim_instance = victim_id.rsplit('/').next().unwrap_or_default().to_string();
    let event = |detail_type: &str, source: &str, detail: Value| {
        json!({ "version": "0", "id": unique_name("event"), "detail-type": detail_type, "source": source,
            "account": "123456789012", "time": "2026-12-04T20:00:00Z", "region": REGION,
            "resources": [], "detail": detail })
        .to_string()
    };
    for body in [
        event("EC2 Instance Rebalance Recommendation", "aws.ec2", json!({ "instance-id": victim_instance })),
        "not an event".to_string(),
        event("Object Created", "aws.s3", json!({ "bucket": { "name": "b" } })),
    ] {
        sqsc.send_message().queue_url(&queue_url).message_body(body).send().await?;
    }
    wait_for("a SpotRebalanceRecommendation event on the NodeClaim", TIMEOUT, || async {
        let reasons = nodeclaim_events(victim.clone()).await?;
        Ok(reasons.iter().any(|r| r == "SpotRebalanceRecommendation").then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    let queue_empty = || async {
        let attributes = sqsc
            .get_queue_attributes()
            .queue_url(&queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await?;
        let count =
            |name| attributes.attributes().and_then(|a| a.get(&name)).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
        let left = count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            + count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible);
        anyhow::Ok((left == 0).then_some(()))
    };
    wait_for("every message deleted from the queue", TIMEOUT, queue_empty)
        .await
        .with_context(|| format!("controller log:\n{}", log()))?;
    ensure!(launched(&client, &nodepool).await?.contains_key(&victim), "a rebalance recommendation deleted {victim}");
    // upstream's interruption metrics: each parsed message by its kind (the S3 event a no-op,
    // the malformed one not received), all three deleted, the handled ones timed from their
    // event's time.
    let (_, body) = get(metrics, "/metrics")?;
    let received =
        |kind: &str| metric_sum(&body, "karpenter_interruption_received_messages_total", &[("message_type", kind)]);
    ensure!(received("rebalance_recommendation") == 1.0 && received("no_op") == 1.0, "received: {body}");
    ensure!(metric_sum(&body, "karpenter_interruption_deleted_messages_total", &[]) == 3.0, "deleted: {body}");
    let handled = metric_sum(&body, "karpenter_interruption_message_queue_duration_seconds_count", &[]);
    ensure!(handled == 2.0, "{handled} messages timed: {body}");
    let spot = event(
        "EC2 Spot Instance Interruption Warning",
        "aws.ec2",
        json!({ "instance-id": victim_instance, "instance-action": "terminate" }),
    );
    let interrupted = std::time::Instant::now();
    sqsc.send_message().queue_url(&queue_url).message_body(spot).send().await?;
    wait_for("the interrupted NodeClaim to go", TIMEOUT, || async {
        Ok(nodeclaims_api.get_opt(&victim).await?.is_none().then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    let reasons = nodeclaim_events(victim.clone()).await?;
    for reason in ["SpotInterrupted", "TerminatingOnInterruption"] {
        ensure!(reasons.iter().any(|r| r == reason), "no {reason} event on {victim}: {reasons:?}");
    }
    wait_for("5 inflate pods Running after the interruption", Duration::from_secs(150), || running(5))
        .await
        .with_context(|| format!("controller log:\n{}", log()))?;
    wait_for("the spot interruption deleted from the queue", TIMEOUT, queue_empty).await?;
    eprintln!(
        "spot interruption: {victim} drained and replaced, 5 pods Running {} s after the warning",
        interrupted.elapsed().as_secs()
    );

    // 5b. EC2 stops answering mid-launch: the proxy holds every EC2 request unanswered (SQS, IAM
    //     and the API server still answer). The launch waits, and meanwhile the other concerns go
    //     on: the interruption queue is read and the interrupted node drained, and a second one
    //     too while the first one's instance deletion waits on EC2; /healthz stays ok.
    //     (Provisioning waits, as upstream's does: `Synced` holds every round until each NodeClaim
    //     has launched.) Once EC2 answers again, each waiting launch is made once (the held
    //     requests never reached it) and every instance has a NodeClaim.
    let fleet_before = moto.fleet_requests()?.len();
    let before = launched(&client, &nodepool).await?;
    ec2_link.cut();
    let hung = std::time::Instant::now();
    let patch = json!({ "spec": { "replicas": 6 } });
    deployments.patch("inflate", &Default::default(), &kube::api::Patch::Merge(&patch)).await?;
    let waiting = wait_for("a NodeClaim for the sixth pod, its launch held", TIMEOUT, || async {
        let unlaunched = nodeclaims_api
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|nc| !before.contains_key(nc.metadata.name.as_deref().unwrap_or_default()))
            .find(|nc| nc.data["status"]["providerID"].as_str().is_none_or(str::is_empty));
        Ok(unlaunched.and_then(|nc| nc.metadata.name))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    // A spot interruption for `victim`, and its node drained (its pods evicted), the NodeClaim
    // deleting and the message gone from the queue.
    let interrupt_and_drain = |victim: String, provider_id: String| {
        let (nodeclaims_api, pods, sqsc, queue_url) = (&nodeclaims_api, &pods, &sqsc, &queue_url);
        let (event, queue_empty) = (&event, &queue_empty);
        async move {
            let nc = nodeclaims_api.get(&victim).await?;
            let node = nc.data["status"]["nodeName"].as_str().unwrap_or_default().to_string();
            let on_node: Vec<String> = pods
                .list(&Default::default())
                .await?
                .items
                .into_iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str()))
                .filter_map(|p| p.metadata.name)
                .collect();
            ensure!(!on_node.is_empty(), "no inflate pod on {node}");
            let instance = provider_id.rsplit('/').next().unwrap_or_default();
            let detail = json!({ "instance-id": instance, "instance-action": "terminate" });
            let spot = event("EC2 Spot Instance Interruption Warning", "aws.ec2", detail);
            sqsc.send_message().queue_url(queue_url).message_body(spot).send().await?;
            wait_for(&format!("{victim} interrupted and its node drained while EC2 hangs"), TIMEOUT, || async {
                let left = pods.list(&Default::default()).await?.items;
                let drained = !left.iter().any(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && on_node.contains(p.metadata.name.as_ref().unwrap_or(&String::new()))
                });
                let deleting =
                    nodeclaims_api.get_opt(&victim).await?.is_none_or(|nc| nc.metadata.deletion_timestamp.is_some());
                Ok((drained && deleting && queue_empty().await?.is_some()).then_some(()))
            })
            .await
        }
    };
    let mut victims = before.iter().take(2).map(|(n, p)| (n.clone(), p.clone()));
    let (first, first_id) = victims.next().context("no NodeClaim")?;
    let (second, second_id) = victims.next().context("no second NodeClaim")?;
    interrupt_and_drain(first.clone(), first_id).await.with_context(|| format!("controller log:\n{}", log()))?;
    let first_drained = hung.elapsed().as_secs();
    // The first node's instance deletion begins once its drain has lasted upstream's 5 s
    // MinDrainTime, and waits on EC2.
    tokio::time::sleep(Duration::from_secs(8)).await;
    interrupt_and_drain(second.clone(), second_id).await.with_context(|| format!("controller log:\n{}", log()))?;
    let (code, _) = get(health, "/healthz")?;
    ensure!(code == 200, "/healthz answered {code} during a {} s EC2 hang", hung.elapsed().as_secs());
    let held = nodeclaims_api.get(&waiting).await?;
    ensure!(held.data["status"]["providerID"].as_str().is_none_or(str::is_empty), "{waiting} launched while EC2 hung");
    ensure!(moto.fleet_requests()?.len() == fleet_before, "a CreateFleet reached EC2 through the cut");
    eprintln!(
        "EC2 hung: {first} drained {first_drained} s and {second} {} s into the hang, {waiting} waiting on its launch",
        hung.elapsed().as_secs()
    );
    ec2_link.mend();
    wait_for("6 inflate pods Running once EC2 answers", Duration::from_secs(150), || running(6))
        .await
        .with_context(|| format!("controller log:\n{}", log()))?;
    // Counted before the NodeClaims are read: a launched NodeClaim's request is always counted.
    let fleet_calls = moto.fleet_requests()?.len() - fleet_before;
    let after = launched(&client, &nodepool).await?;
    let new: Vec<&String> = after.keys().filter(|n| !before.contains_key(*n)).collect();
    ensure!(new.contains(&&waiting), "{waiting} did not launch: {after:?}");
    ensure!(fleet_calls == new.len(), "{fleet_calls} CreateFleet calls for {} launches ({new:?})", new.len());
    wait_for("every running instance to have a NodeClaim", TIMEOUT, || async {
        let ids: BTreeSet<String> = launched(&client, &nodepool)
            .await?
            .values()
            .filter_map(|p| p.rsplit('/').next().map(str::to_string))
            .collect();
        let live: BTreeSet<String> = instances(&ec2c, &cluster)
            .await?
            .into_iter()
            .filter(|(_, _, _, state)| state == "running" || state == "pending")
            .map(|(id, ..)| id)
            .collect();
        Ok((live == ids).then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    eprintln!("EC2 back after {} s: {} launches, one CreateFleet each", hung.elapsed().as_secs(), new.len());

    // The EC2NodeClass whose selectors match nothing: its subnets and security groups conditions
    // say so (upstream's reasons), it is not Ready, and each was said in one event, not one per
    // resolution.
    let unmatched = nodeclass_status(&client, &unmatched_class).await?;
    eprintln!("selectors that match nothing: {unmatched}");
    for (type_, reason) in [("SubnetsReady", "SubnetsNotFound"), ("SecurityGroupsReady", "SecurityGroupsNotFound")] {
        let c = condition(&unmatched, type_).with_context(|| format!("no {type_}: {unmatched}"))?;
        ensure!(c["status"] == "False" && c["reason"] == reason, "{type_}: {c}");
    }
    ensure!(condition(&unmatched, "Ready").is_some_and(|c| c["status"] == "False"), "{unmatched}");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let on_unmatched: Vec<(String, i32)> = events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(unmatched_class.as_str()))
        .map(|e| (e.reason.unwrap_or_default(), e.series.map_or(1, |s| s.count)))
        .collect();
    let mut reasons: Vec<&str> = on_unmatched.iter().map(|(r, _)| r.as_str()).collect();
    reasons.sort();
    ensure!(
        reasons == ["SecurityGroupsNotFound", "SubnetsNotFound"] && on_unmatched.iter().all(|(_, n)| *n == 1),
        "events on the EC2NodeClass whose selectors match nothing (reason, count): {on_unmatched:?}"
    );
    Api::<DynamicObject>::all_with(client.clone(), &classes_api).delete(&unmatched_class, &Default::default()).await?;

    // 6. A denied action: the EC2NodeClass says which, and nothing launches for it.
    moto.write("deny.json", &json!(["ec2:DescribeSubnets"]))?;
    let (denied_class, denied_pool) = (unique_name("aws-denied"), unique_name("aws-denied-np"));
    create_class(&client, &denied_class, &discovery, json!({ "instanceProfile": USERS_PROFILE })).await?;
    create_nodepool(&client, &denied_pool, &denied_class, &unique_name("k"), &types).await?;
    let status = wait_for("the denied EC2NodeClass's SubnetsReady=False", TIMEOUT, || async {
        let s = nodeclass_status(&client, &denied_class).await?;
        Ok(condition(&s, "SubnetsReady").filter(|c| c["status"] == "False").cloned())
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    eprintln!("denied: {status}");
    assert_eq!(status["reason"], "UnauthorizedOperation");
    ensure!(status["message"].as_str().is_some_and(|m| m.contains("ec2:DescribeSubnets")), "{status}");
    let note = wait_for("an event on the EC2NodeClass naming the action", TIMEOUT, || async {
        Ok(events.list(&Default::default()).await?.items.into_iter().find_map(|e| {
            let on = e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(denied_class.as_str());
            (on && e.note.as_deref().is_some_and(|n| n.contains("ec2:DescribeSubnets")))
                .then(|| e.note.unwrap_or_default())
        }))
    })
    .await?;
    eprintln!("event: {note}");
    // A pod only the denied NodeClass's NodePool could run: no CreateFleet is sent for it.
    let calls_before = moto.fleet_requests()?.len();
    let denied_type = unique_name("k");
    let mut denied_deployment = deployment.clone();
    denied_deployment.metadata.name = Some("denied".into());
    let mut d = serde_json::to_value(&denied_deployment)?;
    d["spec"]["replicas"] = json!(1);
    d["spec"]["template"]["spec"]["nodeSelector"] = json!({ "node-type": denied_type });
    d["spec"]["selector"] = json!({ "matchLabels": { "app": "denied" } });
    d["spec"]["template"]["metadata"]["labels"] = json!({ "app": "denied" });
    let pools = Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodePool", "nodepools"));
    let relabel = json!({ "spec": { "template": { "metadata": { "labels": { "node-type": denied_type } } } } });
    pools.patch(&denied_pool, &Default::default(), &kube::api::Patch::Merge(&relabel)).await?;
    deployments.create(&PostParams::default(), &serde_json::from_value(d)?).await?;
    tokio::time::sleep(Duration::from_secs(15)).await;
    // Not even planned: the NodePool's NodeClassReady follows the EC2NodeClass's Ready, and a
    // NodePool that is not Ready takes no part in scheduling (upstream `Provisioner.NewScheduler`).
    let planned: Vec<String> = nodeclaims
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|nc| nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&denied_pool))
        .filter_map(|nc| nc.metadata.name)
        .collect();
    ensure!(planned.is_empty(), "NodeClaims for the denied NodeClass's NodePool: {planned:?}");
    let ready = pools.get(&denied_pool).await?.data["status"]["conditions"].clone();
    ensure!(
        ready.as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "NodeClassReady" && c["status"] == "False")),
        "the denied NodeClass's NodePool is not NodeClassReady=False: {ready}"
    );
    let calls_after = moto.fleet_requests()?.len();
    ensure!(calls_after == calls_before, "{} CreateFleet calls for the denied NodeClass", calls_after - calls_before);
    deployments.delete("denied", &Default::default()).await?;
    moto.write("deny.json", &json!([]))?;

    // 7. Deleting the EC2NodeClass while its NodeClaims run: it stays, held by its finalizer,
    //    and says which NodeClaims it waits for.
    let classes = Api::<DynamicObject>::all_with(client.clone(), &classes_api);
    classes.delete(&class, &Default::default()).await?;
    let waiting = wait_for("a WaitingOnNodeClaimTermination event on the deleted EC2NodeClass", TIMEOUT, || async {
        Ok(events.list(&Default::default()).await?.items.into_iter().find_map(|e| {
            let on = e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(class.as_str());
            (on && e.reason.as_deref() == Some("WaitingOnNodeClaimTermination")).then(|| e.note.unwrap_or_default())
        }))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    eprintln!("deleted EC2NodeClass: {waiting}");
    let held = classes.get(&class).await?;
    ensure!(held.metadata.deletion_timestamp.is_some(), "the deleted EC2NodeClass has no deletionTimestamp");
    ensure!(
        held.metadata.finalizers.iter().flatten().any(|f| f == "karpenter.k8s.aws/termination"),
        "the EC2NodeClass is not held by karpenter.k8s.aws/termination: {:?}",
        held.metadata.finalizers
    );
    ensure!(
        launched(&client, &nodepool).await?.keys().any(|nc| waiting.contains(nc.as_str())),
        "the event names none of the NodeClaims: {waiting}"
    );
    classes.delete(&denied_class, &Default::default()).await?;

    // Clean up: no NodeClaim left for the shared control plane's other tests.
    deployments.delete("inflate", &Default::default()).await?;
    for p in [&nodepool, &denied_pool] {
        pools.delete(p, &Default::default()).await?;
    }
    let all_claims = nodeclaims.list(&Default::default()).await?;
    for nc in all_claims.items {
        let pool =
            nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")).cloned().unwrap_or_default();
        if pool == nodepool || pool == denied_pool {
            let _ = nodeclaims.delete(&nc.metadata.name.unwrap_or_default(), &Default::default()).await;
        }
    }
    wait_for("every NodeClaim of the test to go", Duration::from_secs(120), || async {
        let left = nodeclaims
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|nc| {
                nc.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("karpenter.sh/nodepool"))
                    .is_some_and(|p| *p == nodepool || *p == denied_pool)
            })
            .count();
        Ok((left == 0).then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    // Once its NodeClaims are gone the EC2NodeClass goes, and with it the instance profile and the
    // launch templates made for it; the user's own profile stays.
    wait_for("the deleted EC2NodeClasses to go", TIMEOUT, || async {
        let left = [classes.get_opt(&class).await?, classes.get_opt(&denied_class).await?];
        Ok(left.iter().all(Option::is_none).then_some(()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", log()))?;
    let gone = iamc.get_instance_profile().instance_profile_name(&profile_name).send().await;
    ensure!(
        gone.as_ref().err().and_then(|e| aws_sdk_iam::error::ProvideErrorMetadata::code(e)) == Some("NoSuchEntity"),
        "the instance profile {profile_name} outlived its EC2NodeClass: {gone:?}"
    );
    let templates = ec2c
        .describe_launch_templates()
        .filters(filter("tag:eks:eks-cluster-name", &[&cluster]))
        .filters(filter("tag:karpenter.k8s.aws/ec2nodeclass", &[&class]))
        .send()
        .await?;
    let left: Vec<&str> = templates.launch_templates().iter().filter_map(|t| t.launch_template_name()).collect();
    ensure!(left.is_empty(), "launch templates outlived their EC2NodeClass: {left:?}");
    let kept = iamc.get_instance_profile().instance_profile_name(USERS_PROFILE).send().await?;
    ensure!(kept.instance_profile().is_some(), "the user's own instance profile was deleted");

    // Every call the controller made is one the committed IAM policy allows.
    let policy: Value = serde_json::from_str(&std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/iam/controller-policy.json"),
    )?)?;
    let allowed: BTreeSet<String> = policy["Statement"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| match &s["Action"] {
            Value::String(a) => vec![a.clone()],
            Value::Array(list) => list.iter().filter_map(|a| a.as_str().map(str::to_string)).collect(),
            _ => Vec::new(),
        })
        .collect();
    // The controller calls with its own access key ID (the test's calls use another).
    let called: BTreeSet<String> = std::fs::read_to_string(moto.dir.join("actions.log"))?
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{CONTROLLER_KEY} ")))
        .map(str::to_string)
        .collect();
    eprintln!("IAM actions the controller called: {called:?}");
    ensure!(called.contains("ec2:CreateFleet") && called.contains("ssm:GetParameter"), "{called:?}");
    for action in &called {
        ensure!(allowed.contains(action), "{action} was called but the IAM policy does not allow it");
    }

    Ok(())
}

/// Aborts the task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
