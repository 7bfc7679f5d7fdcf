//! A NodeClaim's launch as EC2 CreateFleet input (upstream `pkg/providers/instance/instance.go`,
//! `instance/filter/filter.go`, `pkg/utils/utils.go`, v1.14.1):
//!
//! 1. the NodeClaim's instance types (its `node.kubernetes.io/instance-type` values) whose
//!    allocatable fits its requests and that have an available offering compatible with its
//!    requirements, in a zone with a subnet, not marked unavailable;
//! 2. the capacity type: spot when the NodeClaim allows it and a spot offering is left, else
//!    on-demand;
//! 3. for spot, types whose cheapest spot offering costs more than the cheapest on-demand one are
//!    dropped; GPU, accelerator and metal types are dropped unless nothing else is left; then the
//!    cheapest 60 are kept;
//! 4. one launch template per AMI and max-pods group ([`super::launchtemplate`]), its overrides the
//!    cross product of its types and the zones' subnets (the freest subnet per zone), each with
//!    `Priority` = the offering's price, so that EC2 tries the cheapest first;
//! 5. `Type=instant`, one instance, spot `price-capacity-optimized`, on-demand `lowest-price`, and
//!    upstream's tags on the instance, its volumes and the fleet.
//!
//! Not done yet (docs/controller.md, "Not yet"): reserved capacity (ODCRs, capacity blocks) is not launched
//! through the `aws` provider yet; a NodeClaim that allows only `reserved` gets no launch.

use std::collections::BTreeMap;

use serde::Serialize;

use super::bootstrap::{BootstrapError, ClusterBootstrap};
use super::launchtemplate::{launch_templates, LaunchTemplate, TemplateFor};
use super::subnet::zonal_subnets;
use crate::api::{EC2NodeClass, NodeClaim};
use crate::catalogue::{CapacityType, InstanceType, Offering, OfferingCompatibility};
use crate::labels::{self, aws};
use crate::requirements::Requirements;
use crate::resources::Packed;
use crate::scheduling::{Launch, NoLaunch};

pub use crate::labels::aws::EKS_CLUSTER_NAME_TAG;
/// upstream's cap on the instance types of one CreateFleet (`instance.go` `maxInstanceTypes`).
pub const MAX_INSTANCE_TYPES: usize = 60;

/// `aws:///<zone>/<instance-id>`.
pub fn provider_id(zone: &str, instance_id: &str) -> String {
    format!("aws:///{zone}/{instance_id}")
}

/// The zone and instance ID of an AWS providerID (upstream `utils.ParseInstanceID`:
/// `(.*):///(.*)/(.*)`).
pub fn parse_provider_id(provider_id: &str) -> Option<(&str, &str)> {
    let rest = provider_id.strip_prefix("aws:///")?;
    let (zone, id) = rest.rsplit_once('/')?;
    (!id.is_empty()).then_some((zone, id))
}

/// What the launch is for.
#[derive(Debug, Clone, Copy)]
pub struct LaunchContext<'a> {
    /// The cluster the node joins (its name tags the launch; the rest is the node's bootstrap).
    pub cluster: &'a ClusterBootstrap,
    /// The NodeClaim's EC2NodeClass, its status resolved.
    pub class: &'a EC2NodeClass,
}

/// One override of a launch template.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetOverride {
    pub instance_type: String,
    pub subnet_id: String,
    pub zone: String,
    pub image_id: String,
    /// The offering's price (USD per hour): lower is tried first.
    pub priority: f64,
}

/// A launch template and its overrides.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetLaunchTemplate {
    pub template: LaunchTemplate,
    pub overrides: Vec<FleetOverride>,
}

/// The CreateFleet input of one NodeClaim's launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetRequest {
    /// `spot` or `on-demand` (`DefaultTargetCapacityType`).
    pub capacity_type: String,
    /// `price-capacity-optimized` (spot) or `lowest-price` (on-demand).
    pub allocation_strategy: String,
    pub launch_templates: Vec<FleetLaunchTemplate>,
    /// On the instance, its volumes and the fleet.
    pub tags: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

impl FleetRequest {
    /// The launch EC2 made, from the override it reports (type and zone): its price and labels.
    pub fn launched(&self, instance_type: &str, zone: &str) -> Option<Launch> {
        let o = self
            .launch_templates
            .iter()
            .flat_map(|lt| &lt.overrides)
            .find(|o| o.instance_type == instance_type && o.zone == zone)?;
        Some(Launch {
            instance_type: o.instance_type.clone(),
            zone: o.zone.clone(),
            capacity_type: self.capacity_type.clone(),
            price: o.priority,
            price_synthetic: self.capacity_type == CapacityType::Spot.as_str(),
            reservation_id: None,
        })
    }

    /// Every (instance type, zone) the request offers EC2.
    pub fn offerings(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.launch_templates
            .iter()
            .flat_map(|lt| lt.overrides.iter())
            .map(|o| (o.instance_type.as_str(), o.zone.as_str()))
    }
}

/// The annotations a launched NodeClaim gets from its NodeClass (upstream `cloudprovider.Create`:
/// the instance profile it launched with, which the profile garbage collection spares).
pub fn launched_annotations(class: &EC2NodeClass) -> BTreeMap<String, String> {
    let profile = class.status.as_ref().map(|s| s.instance_profile.clone()).unwrap_or_default();
    BTreeMap::from([(super::instanceprofile::INSTANCE_PROFILE_ANNOTATION.to_string(), profile)])
}

/// upstream `utils.GetTags`: the NodeClass's tags under the ones Karpenter owns.
pub fn launch_tags(class: &EC2NodeClass, nodeclaim: &NodeClaim, cluster: &str) -> BTreeMap<String, String> {
    let mut tags = class.spec.tags.clone();
    tags.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    let nodepool = nodeclaim.metadata.labels.as_ref().and_then(|l| l.get(labels::NODEPOOL)).cloned();
    tags.insert(labels::NODEPOOL.into(), nodepool.unwrap_or_default());
    tags.insert(EKS_CLUSTER_NAME_TAG.into(), cluster.into());
    tags.insert(aws::EC2_NODE_CLASS.into(), class.metadata.name.clone().unwrap_or_default());
    tags
}

/// An offering of `ct` the launch may use: available, not marked unavailable, compatible with
/// the NodeClaim, in a zone with a subnet.
fn usable<'o>(
    it: &'o InstanceType,
    ct: CapacityType,
    compatible: &OfferingCompatibility<'_>,
    zones: &BTreeMap<&str, &crate::api::ec2nodeclass::Subnet>,
    unavailable: &impl Fn(&str, &str, &str) -> bool,
) -> Vec<&'o Offering> {
    it.offerings
        .iter()
        .filter(|o| o.capacity_type == ct && o.available && zones.contains_key(o.zone.as_str()))
        .filter(|o| !unavailable(&it.name, &o.zone, ct.as_str()))
        .filter(|o| compatible.test(&o.requirements))
        .collect()
}

fn cheapest(offerings: impl Iterator<Item = f64>) -> Option<f64> {
    offerings.fold(None, |m: Option<f64>, p| Some(m.map_or(p, |m| m.min(p))))
}

/// Exotic types (upstream `filter.go` `ExoticInstanceTypeFilter`): GPUs, accelerators, metal.
fn is_exotic(it: &InstanceType) -> bool {
    let defined = |key: &str| it.requirements.get_ref(key).is_some_and(|r| r.any_value().is_some_and(|v| v != "0"));
    defined(aws::INSTANCE_GPU_COUNT)
        || defined(aws::INSTANCE_ACCELERATOR_COUNT)
        || it.requirements.get_ref(aws::INSTANCE_SIZE).is_some_and(|r| r.values().any(|v| v.contains("metal")))
}

/// Why a NodeClaim gets no CreateFleet request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetError {
    /// Nothing to launch (upstream `InsufficientCapacityError`).
    #[error(transparent)]
    NoLaunch(#[from] NoLaunch),
    /// The launch templates' user data cannot be written.
    #[error("the user data of EC2NodeClass {nodeclass}'s launch templates cannot be written")]
    UserData {
        nodeclass: String,
        #[source]
        source: BootstrapError,
    },
}

/// The CreateFleet input for `nodeclaim` among its NodePool's `instance_types`; `unavailable`
/// says which offerings (type, zone, capacity type) are known to have no capacity now.
pub fn fleet_request(
    nodeclaim: &NodeClaim,
    instance_types: &[InstanceType],
    ctx: LaunchContext<'_>,
    unavailable: impl Fn(&str, &str, &str) -> bool,
) -> Result<FleetRequest, FleetError> {
    let requirements = Requirements::from_node_selector_requirements(&nodeclaim.spec.requirements)
        .map_err(|e| NoLaunch::InvalidRequirements(e.to_string()))?;
    let status = ctx.class.status.clone().unwrap_or_default();
    let zones = zonal_subnets(&status.subnets);
    let named = requirements.get(labels::INSTANCE_TYPE);
    let compatible = OfferingCompatibility::new(&requirements);
    let requests = Packed::new(&nodeclaim.spec.resources.requests);
    let fits: Vec<&InstanceType> = instance_types
        .iter()
        .filter(|it| named.has(&it.name) && requests.fits(&Packed::new(it.allocatable())))
        .collect();
    let allowed = requirements.get(labels::CAPACITY_TYPE);
    let price_of = |it: &InstanceType, ct| {
        cheapest(usable(it, ct, &compatible, &zones, &unavailable).into_iter().map(|o| o.price))
    };
    let has = |ct: CapacityType| allowed.has(ct.as_str()) && fits.iter().any(|it| price_of(it, ct).is_some());
    let ct = if has(CapacityType::Spot) {
        CapacityType::Spot
    } else if has(CapacityType::OnDemand) {
        CapacityType::OnDemand
    } else {
        return Err(NoLaunch::InsufficientCapacity { types: fits.len() }.into());
    };
    let mut types: Vec<(&InstanceType, f64)> = fits.iter().filter_map(|it| Some((*it, price_of(it, ct)?))).collect();
    if ct == CapacityType::Spot {
        if let Some(on_demand) = cheapest(fits.iter().filter_map(|it| price_of(it, CapacityType::OnDemand))) {
            types.retain(|(_, spot)| *spot <= on_demand);
        }
    }
    if types.iter().any(|(it, _)| !is_exotic(it)) {
        types.retain(|(it, _)| !is_exotic(it));
    }
    types.sort_by(|(a, pa), (b, pb)| pa.total_cmp(pb).then_with(|| a.name.cmp(&b.name)));
    types.truncate(MAX_INSTANCE_TYPES);
    let ordered: Vec<&InstanceType> = types.iter().map(|(it, _)| *it).collect();
    let tags = launch_tags(ctx.class, nodeclaim, &ctx.cluster.name);
    let launch = TemplateFor { nodeclaim, capacity_type: ct.as_str(), cluster: ctx.cluster, launch_tags: &tags };
    let built = launch_templates(ctx.class, &ordered, launch).map_err(|source| FleetError::UserData {
        nodeclass: ctx.class.metadata.name.clone().unwrap_or_default(),
        source,
    })?;
    let mut templates = Vec::new();
    for template in built {
        let mut overrides = Vec::new();
        for name in &template.instance_types {
            let Some(it) = ordered.iter().find(|it| it.name == *name) else { continue };
            let mut offerings = usable(it, ct, &compatible, &zones, &unavailable);
            offerings.sort_by(|a, b| a.zone.cmp(&b.zone));
            for o in offerings {
                let Some(subnet) = zones.get(o.zone.as_str()) else { continue };
                overrides.push(FleetOverride {
                    instance_type: it.name.clone(),
                    subnet_id: subnet.id.clone(),
                    zone: o.zone.clone(),
                    image_id: template.image_id.clone(),
                    priority: o.price,
                });
            }
        }
        if !overrides.is_empty() {
            templates.push(FleetLaunchTemplate { template, overrides });
        }
    }
    if templates.is_empty() {
        return Err(NoLaunch::InsufficientCapacity { types: fits.len() }.into());
    }
    Ok(FleetRequest {
        capacity_type: ct.as_str().to_string(),
        allocation_strategy: if ct == CapacityType::Spot { "price-capacity-optimized" } else { "lowest-price" }.into(),
        launch_templates: templates,
        tags,
        context: ctx.class.spec.context.clone(),
    })
}
