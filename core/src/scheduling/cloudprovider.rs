//! The simulated cloud provider's launch decision (upstream: Karpenter sends the ordered instance
//! types to `CloudProvider.Create`; the AWS provider calls EC2 CreateFleet).
//!
//! Stand-in, documented in docs/divergences.md: among the NodeClaim's instance-type options whose
//! allocatable fits the requests, the capacity type is chosen by priority reserved > spot >
//! on-demand (the first that has a compatible available offering; upstream's launch precedence),
//! then the **cheapest** compatible available offering of that capacity type. EC2 uses
//! lowest-price for on-demand (so this matches) and price-capacity-optimized for spot, which also
//! weighs pool capacity we do not model; lowest price is our stand-in. Ties: the option order
//! (cheapest first, then name), then zone name.
//!
//! Reserved offerings: only reservations with instances left for launches qualify, and each
//! reserved launch takes one (upstream: the fake cloud provider decrements the offering's
//! capacity; the AWS provider's availability cache `MarkLaunched`). Within one instance type and
//! zone, the reservation with the most instances left wins, then the smaller ID (upstream's launch
//! filter keeps one reserved offering per zone, the one with the greatest capacity).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalogue::{CapacityType, InstanceType, Offering, OfferingCompatibility, PriceSource};
use crate::requirements::Requirements;
use crate::resources::{Packed, ResourceList};

/// The instance the simulated cloud provider launches for a NodeClaim.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Launch {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// USD per hour.
    pub price: f64,
    /// Spot prices are synthetic (see core/data/PROVENANCE.md).
    pub price_synthetic: bool,
    /// The capacity reservation launched into (capacity type `reserved`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<String>,
}

/// Picks the launched instance from `options` (in NodeClaim order, with their allocatable laid
/// out by [`Packed`]).
/// `reservations_left` holds the instances each reservation still has for launches; a reserved
/// launch takes one.
pub fn launch<'a>(
    requirements: &Requirements,
    requests: &ResourceList,
    options: impl IntoIterator<Item = (&'a InstanceType, &'a Packed)>,
    reservations_left: &mut BTreeMap<String, i64>,
) -> Option<Launch> {
    let compatible = OfferingCompatibility::new(requirements);
    let requests = Packed::new(requests);
    // The cheapest offering per capacity type, in one pass over the options.
    let mut best: [Option<(&InstanceType, &Offering)>; 3] = [None; 3];
    for (it, allocatable) in options {
        if !requests.fits(allocatable) {
            continue;
        }
        for o in &it.offerings {
            if !o.available || (o.capacity_type == CapacityType::Reserved && left(o, reservations_left) <= 0) {
                continue;
            }
            let slot = &mut best[priority(o.capacity_type)];
            let better = match slot {
                None => true,
                Some((best_it, best_o)) => {
                    let same_type = std::ptr::eq(*best_it, it);
                    let fuller = || {
                        let (mine, theirs) = (left(o, reservations_left), left(best_o, reservations_left));
                        mine > theirs || (mine == theirs && reservation_id(o) < reservation_id(best_o))
                    };
                    o.price < best_o.price
                        || (o.price == best_o.price
                            && same_type
                            && (o.zone < best_o.zone || (o.zone == best_o.zone && fuller())))
                }
            };
            if better && compatible.test(&o.requirements) {
                *slot = Some((it, o));
            }
        }
    }
    let (it, o) = best.into_iter().flatten().next()?;
    let reservation_id = o.reservation.as_ref().map(|r| r.id.clone());
    if let Some(n) = reservation_id.as_ref().and_then(|id| reservations_left.get_mut(id)) {
        *n -= 1;
    }
    Some(Launch {
        instance_type: it.name.clone(),
        zone: o.zone.clone(),
        capacity_type: o.capacity_type.as_str().to_string(),
        price: o.price,
        price_synthetic: matches!(o.price_source, PriceSource::SyntheticSpot),
        reservation_id,
    })
}

/// Launch precedence: reserved, then spot, then on-demand.
fn priority(capacity_type: CapacityType) -> usize {
    match capacity_type {
        CapacityType::Reserved => 0,
        CapacityType::Spot => 1,
        CapacityType::OnDemand => 2,
    }
}

/// Instances left in the offering's reservation (0 when it has none).
fn left(o: &Offering, reservations_left: &BTreeMap<String, i64>) -> i64 {
    o.reservation.as_ref().map_or(0, |r| reservations_left.get(&r.id).copied().unwrap_or(0))
}

fn reservation_id(o: &Offering) -> &str {
    o.reservation.as_ref().map_or("", |r| r.id.as_str())
}

/// Why a cloud provider launches nothing for a NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub enum NoLaunch {
    /// The NodeClaim's requirements do not parse (an object edited by hand).
    #[error("the NodeClaim's requirements are invalid: {0}")]
    InvalidRequirements(String),
    /// upstream `InsufficientCapacityError`: no offering of its instance types is available.
    #[error("no available offering of the NodeClaim's {types} instance types fits its requirements and requests")]
    InsufficientCapacity { types: usize },
}

/// The launch for a NodeClaim as the API server holds it (upstream: Karpenter hands
/// `CloudProvider.Create` the NodeClaim, and the provider launches among the values of its
/// `node.kubernetes.io/instance-type` requirement; the kwok provider picks the cheapest
/// compatible offering). `instance_types` are the NodeClaim's NodePool's; `unavailable` says
/// which offerings (instance type, zone, capacity type) are known to have no capacity now.
pub fn launch_for(
    nodeclaim: &crate::api::NodeClaim,
    instance_types: &[InstanceType],
    unavailable: impl Fn(&str, &str, &str) -> bool,
) -> Result<Launch, NoLaunch> {
    let requirements = Requirements::from_node_selector_requirements(&nodeclaim.spec.requirements)
        .map_err(|e| NoLaunch::InvalidRequirements(e.to_string()))?;
    let named = requirements.get(crate::labels::INSTANCE_TYPE);
    let types: Vec<InstanceType> = instance_types
        .iter()
        .filter(|it| named.has(&it.name))
        .map(|it| {
            let mut it = it.clone();
            for o in &mut it.offerings {
                if unavailable(&it.name, &o.zone, o.capacity_type.as_str()) {
                    o.available = false;
                }
            }
            it
        })
        .collect();
    launch_among(&requirements, &nodeclaim.spec.resources.requests, &types)
        .ok_or(NoLaunch::InsufficientCapacity { types: types.len() })
}

/// The offering a node's labels name (instance type, zone, capacity type), as a [`Launch`]:
/// what a running node costs. `None` when the labels name no catalogue offering.
pub fn launch_from_labels(
    catalogue: &crate::catalogue::Catalogue,
    region: &str,
    node_labels: &BTreeMap<String, String>,
) -> Option<Launch> {
    let instance_type = node_labels.get(crate::labels::INSTANCE_TYPE)?;
    let zone = node_labels.get(crate::labels::TOPOLOGY_ZONE)?;
    let capacity_type =
        node_labels.get(crate::labels::CAPACITY_TYPE).map_or(crate::labels::CAPACITY_TYPE_ON_DEMAND, String::as_str);
    let types = catalogue.instance_types_shared(region, &crate::api::ec2nodeclass::EC2NodeClassSpec::default()).ok()?;
    let it = types.iter().find(|it| &it.name == instance_type)?;
    let o = it.offerings.iter().find(|o| &o.zone == zone && o.capacity_type.as_str() == capacity_type)?;
    Some(Launch {
        instance_type: it.name.clone(),
        zone: o.zone.clone(),
        capacity_type: capacity_type.to_string(),
        price: o.price,
        price_synthetic: matches!(o.price_source, PriceSource::SyntheticSpot),
        reservation_id: None,
    })
}

/// [`launch`] over `types` as they are (their availability already marked), without reservations.
pub fn launch_among(requirements: &Requirements, requests: &ResourceList, types: &[InstanceType]) -> Option<Launch> {
    let packed: Vec<Packed> = types.iter().map(|it| Packed::new(it.allocatable())).collect();
    launch(requirements, requests, types.iter().zip(packed.iter()), &mut BTreeMap::new())
}
