//! The `kwok` cloud provider (upstream `kwok/cloudprovider`, sigs.k8s.io/karpenter v1.14.1): an
//! "instance" is a Node object that KWOK (kwok.x-k8s.io) runs. Create takes core's launch choice
//! over the embedded catalogue (the cheapest compatible offering; KWOK never runs out of capacity,
//! so no offering becomes unavailable), and after the registration delay creates the Node:
//! `spec.providerID=kwok://<name>`, the NodeClaim's labels with the instance type's, capacity and
//! allocatable, the NodeClaim's taints and startup taints with `karpenter.sh/unregistered:NoExecute`,
//! and the annotation `kwok.x-k8s.io/node: fake` that makes KWOK manage it (Ready, pods Running).
//! Delete deletes that Node; the instance is gone when the Node is. List is those Nodes (a kwok
//! providerID and a NodePool label) as the view holds them. An EC2NodeClass needs no AWS:
//! it is Ready with one subnet per zone of `--region`, its condition saying it is simulated.
//!
//! Divergence (docs/divergences.md): upstream names the Node `<nodeclaim>-<random>`; here it is
//! named after its NodeClaim, so a snapshot's names and the simulation's line up.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use carpentry_core::api::ec2nodeclass::{EC2NodeClassStatus, Subnet};
use carpentry_core::api::{Condition, EC2NodeClass, NodeClaim};
use carpentry_core::catalogue::InstanceType;
use carpentry_core::labels;
use carpentry_core::manifest::scenario::TimingOverrides;
use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::garbagecollection::CloudInstance;
use carpentry_core::nodeclaim::lifecycle::Instance;
use carpentry_core::scheduling::launch_for;
use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use tracing::{info, warn};

use super::{CloudProvider, CreateError, Deletion, ResolvedStatus};

/// upstream kwok's providerID scheme.
pub const PROVIDER_ID_PREFIX: &str = "kwok://";
/// The annotation (and label) KWOK manages Nodes by.
pub const KWOK_NODE: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

pub struct Kwok {
    client: kube::Client,
    region: String,
    registration_delay: Duration,
    /// Launches whose Node is not made yet, by NodeClaim name, and whether the NodeClaim was
    /// deleted meanwhile (then the Node is not made). An entry goes when its launch ends.
    launching: Arc<Mutex<HashMap<String, bool>>>,
}

impl Kwok {
    pub fn new(client: kube::Client, region: String, registration_delay: Duration) -> Kwok {
        Kwok { client, region, registration_delay, launching: Arc::default() }
    }

    /// The machine boots: its Node `name` is made after the registration delay (not when its
    /// NodeClaim was deleted meanwhile). As a kubelet retries its registration until the API
    /// server takes it (kubelet `registerWithAPIServer`: up to 7 s apart), a create that fails
    /// (the API server restarting) is tried again; without it the NodeClaim waited out the
    /// 15-minute registration timeout.
    fn boot(&self, name: String, node: Node) {
        if let Ok(mut l) = self.launching.lock() {
            l.insert(name.clone(), false);
        }
        let (client, delay, launching) = (self.client.clone(), self.registration_delay, self.launching.clone());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let nodes: Api<Node> = Api::all(client);
            let mut retry_in = Duration::from_millis(500);
            loop {
                if launching.lock().map(|l| l.get(&name) == Some(&true)).unwrap_or(false) {
                    break;
                }
                match nodes.create(&PostParams::default(), &node).await {
                    Ok(_) => info!(node = %name, "kwok: the Node joined"),
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => {
                        let error = carpentry_core::error_chain(&e);
                        warn!(node = %name, error = %error, "kwok: cannot create the Node; retried");
                        tokio::time::sleep(retry_in).await;
                        retry_in = (retry_in * 2).min(Duration::from_secs(7));
                        continue;
                    }
                }
                break;
            }
            if let Ok(mut l) = launching.lock() {
                l.remove(&name);
            }
        });
    }

    /// Deletes the Node that is the instance; gone once the Node is.
    async fn delete_node(&self, node_name: &str) -> anyhow::Result<Deletion> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        match nodes.get_opt(node_name).await.context("kwok: read the Node")? {
            // The instance is the Node: once it is deleting, the instance is gone (upstream's
            // kwok provider, v1.14.1: `Get` takes a deleting Node as not found, and `Delete`
            // answers "instance terminated" as soon as it deleted the Node). Waiting for the
            // Node to go would wait on its own finalizer.
            None => Ok(Deletion::Gone),
            Some(n) if n.metadata.deletion_timestamp.is_some() => Ok(Deletion::Gone),
            Some(_) => match nodes.delete(node_name, &DeleteParams::default()).await {
                Ok(_) => Ok(Deletion::Gone),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(Deletion::Gone),
                Err(e) => Err(e).context("kwok: delete the Node"),
            },
        }
    }
}

fn quantities(list: &carpentry_core::resources::ResourceList) -> BTreeMap<String, Quantity> {
    list.iter().map(|(k, v)| (k.clone(), Quantity(v.to_string()))).collect()
}

/// The Node KWOK runs for `nodeclaim`'s `instance`.
fn node_of(nodeclaim: &NodeClaim, instance: &Instance, region: &str) -> Node {
    let name = nodeclaim.name().to_string();
    let mut node_labels = instance.labels.clone();
    node_labels.extend(nodeclaim.metadata.labels.clone().unwrap_or_default());
    node_labels.insert(labels::HOSTNAME.into(), name.clone());
    node_labels.insert(labels::TOPOLOGY_REGION.into(), region.to_string());
    node_labels.insert(KWOK_NODE.0.into(), KWOK_NODE.1.into());
    let mut taints: Vec<Taint> = nodeclaim.spec.taints.clone();
    taints.extend(nodeclaim.spec.startup_taints.iter().cloned());
    taints.push(carpentry_core::nodeclaim::lifecycle::unregistered_taint());
    Node {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(node_labels),
            annotations: Some([(KWOK_NODE.0.to_string(), KWOK_NODE.1.to_string())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(instance.provider_id.clone()),
            taints: Some(taints),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(quantities(&instance.capacity)),
            allocatable: Some(quantities(&instance.allocatable)),
            ..Default::default()
        }),
    }
}

impl CloudProvider for Kwok {
    fn name(&self) -> &'static str {
        "kwok"
    }

    async fn create(
        &self,
        nodeclaim: &NodeClaim,
        _class: &EC2NodeClass,
        instance_types: &[InstanceType],
    ) -> Result<Instance, CreateError> {
        // KWOK has capacity for every offering: none is ever unavailable (upstream kwok's too).
        let launch = launch_for(nodeclaim, instance_types, |_, _, _| false)?;
        let name = nodeclaim.name().to_string();
        let it = instance_types.iter().find(|it| it.name == launch.instance_type);
        let instance = Instance::of_launch(&launch, it, format!("{PROVIDER_ID_PREFIX}{name}"));
        let node = node_of(nodeclaim, &instance, &self.region);
        info!(nodeclaim = %name, instance_type = %launch.instance_type, zone = %launch.zone,
            capacity_type = %launch.capacity_type, price = launch.price, "kwok: launched");
        self.boot(name, node);
        Ok(instance)
    }

    /// A launched NodeClaim whose Node neither exists nor is being made by this process (it was
    /// launched before a restart) gets its Node now, after the registration delay. Not one that
    /// registered (its Node going is the instance going) nor one being deleted.
    async fn resume(&self, view: &Manifests) {
        let nodes: HashSet<&str> = view.nodes.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
        for nc in &view.nodeclaims {
            let Some(status) = nc.status.as_ref() else { continue };
            let registered =
                carpentry_core::api::find_condition(&status.conditions, "Registered").is_some_and(|c| c.is_true());
            let booting = self.launching.lock().map(|l| l.contains_key(nc.name())).unwrap_or(true);
            // The machine's Node is named in its providerID (this provider names it after the
            // NodeClaim; upstream's kwok provider otherwise).
            let Some(node_name) = status.provider_id.strip_prefix(PROVIDER_ID_PREFIX) else { continue };
            if registered || booting || nc.metadata.deletion_timestamp.is_some() || nodes.contains(node_name) {
                continue;
            }
            let instance = Instance {
                provider_id: status.provider_id.clone(),
                image_id: status.image_id.clone(),
                labels: nc.metadata.labels.clone().unwrap_or_default(),
                annotations: Default::default(),
                capacity: status.capacity.clone(),
                allocatable: status.allocatable.clone(),
            };
            info!(nodeclaim = %nc.name(), "kwok: launched before a restart; its Node is made now");
            let mut node = node_of(nc, &instance, &self.region);
            node.metadata.name = Some(node_name.to_string());
            self.boot(node_name.to_string(), node);
        }
    }

    /// Ready without AWS: one subnet per zone of `--region` in the catalogue, saying it is simulated.
    /// KWOK's instances are the embedded catalogue's: nothing to refresh.
    async fn refresh_catalogue(
        &self,
        _base: &carpentry_core::Catalogue,
    ) -> Option<anyhow::Result<carpentry_core::Catalogue>> {
        None
    }

    fn timings(&self) -> TimingOverrides {
        let delay = self.registration_delay.as_millis();
        TimingOverrides {
            // The Node is made at once after the delay and KWOK marks it Ready within a moment;
            // the controller initializes it on its next pass (at most a second later).
            launch: Some("0s".into()),
            registration: Some(format!("{delay}ms")),
            initialization: Some("1s".into()),
            instance_termination: Some("0s".into()),
            ..Default::default()
        }
    }

    async fn nodeclass_status(&self, class: &EC2NodeClass, now: &str) -> ResolvedStatus {
        let zones = carpentry_core::Catalogue::embedded().zones(&self.region).unwrap_or_default();
        let subnets: Vec<Subnet> = zones
            .iter()
            .map(|z| Subnet { id: format!("subnet-kwok-{}", z.name), zone: z.name.clone(), zone_id: z.id.clone() })
            .collect();
        let current = class.status.clone().unwrap_or_default();
        let ready = current.conditions.iter().any(|c| c.type_ == "Ready" && c.is_true());
        if ready && current.subnets == subnets {
            return ResolvedStatus { status: current, lookup_failed: false };
        }
        let message = format!(
            "simulated by carpentry-controller --cloud-provider kwok: no AWS; the zones of {} from the embedded catalogue",
            self.region
        );
        let condition = Condition {
            last_transition_time: Some(now.to_string()),
            message: Some(message),
            observed_generation: class.metadata.generation,
            reason: Some("Simulated".into()),
            status: "True".into(),
            type_: "Ready".into(),
        };
        let mut conditions: Vec<Condition> = current.conditions.into_iter().filter(|c| c.type_ != "Ready").collect();
        conditions.push(condition);
        ResolvedStatus { status: EC2NodeClassStatus { subnets, conditions, ..current }, lookup_failed: false }
    }

    async fn delete(&self, nodeclaim: &NodeClaim) -> anyhow::Result<Deletion> {
        let name = nodeclaim.name().to_string();
        let provider_id = nodeclaim.status.as_ref().map(|s| s.provider_id.as_str()).unwrap_or_default();
        let Some(node_name) = provider_id.strip_prefix(PROVIDER_ID_PREFIX) else {
            // Never launched here: nothing to terminate.
            return Ok(Deletion::Gone);
        };
        if let Some(cancelled) = self.launching.lock().ok().as_mut().and_then(|l| l.get_mut(&name)) {
            *cancelled = true;
        }
        self.delete_node(node_name).await
    }

    /// The Nodes this provider made (a kwok providerID and a NodePool label), from the view.
    async fn list(&self, m: &Manifests) -> anyhow::Result<Vec<CloudInstance>> {
        Ok(m.nodes
            .iter()
            .filter(|n| n.metadata.labels.as_ref().is_some_and(|l| l.contains_key(labels::NODEPOOL)))
            .filter_map(|n| {
                let id = n.spec.as_ref()?.provider_id.as_deref()?;
                id.starts_with(PROVIDER_ID_PREFIX).then(|| CloudInstance {
                    provider_id: id.to_string(),
                    created: n.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
                    terminating: n.metadata.deletion_timestamp.is_some(),
                })
            })
            .collect())
    }

    /// upstream kwok's `Get`: the instance is its Node, gone once the Node is gone or deleting.
    async fn exists(&self, provider_id: &str) -> anyhow::Result<bool> {
        let Some(node_name) = provider_id.strip_prefix(PROVIDER_ID_PREFIX) else { return Ok(true) };
        let nodes: Api<Node> = Api::all(self.client.clone());
        let node = nodes.get_opt(node_name).await.context("kwok: read the Node")?;
        Ok(node.is_some_and(|n| n.metadata.deletion_timestamp.is_none()))
    }

    async fn delete_instance(&self, provider_id: &str) -> anyhow::Result<Deletion> {
        match provider_id.strip_prefix(PROVIDER_ID_PREFIX) {
            Some(node_name) => self.delete_node(node_name).await,
            None => Ok(Deletion::Gone),
        }
    }

    /// KWOK Nodes are not tagged.
    const TAGS_INSTANCES: bool = false;

    async fn tag_instance(&self, _nodeclaim: &NodeClaim) -> anyhow::Result<super::Tagged> {
        Ok(super::Tagged::Already)
    }

    /// KWOK has no interruption queue.
    async fn interruption_messages(&self) -> anyhow::Result<Vec<super::QueuedMessage>> {
        Ok(Vec::new())
    }

    async fn delete_message(&self, _receipt: &str) -> anyhow::Result<()> {
        Ok(())
    }

    fn mark_unavailable(&self, _instance_type: &str, _zone: &str, _capacity_type: &str) {}

    /// KWOK Nodes need no instance profile or launch template.
    const FINALIZES_NODECLASSES: bool = false;

    async fn finalize_nodeclass(&self, _class: &EC2NodeClass) -> anyhow::Result<()> {
        Ok(())
    }

    async fn collect_nodeclass_garbage(&self, _view: &Manifests, _dry_run: bool) -> anyhow::Result<Vec<String>> {
        Ok(Vec::new())
    }
}
