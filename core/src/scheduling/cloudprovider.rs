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

use serde::Serialize;

use crate::catalogue::{CapacityType, InstanceType, Offering, OfferingCompatibility, PriceSource};
use crate::requirements::Requirements;
use crate::resources::{self, ResourceList};

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
}

/// Picks the launched instance from `options` (in NodeClaim order, with their allocatable).
pub fn launch<'a>(
    requirements: &Requirements,
    requests: &ResourceList,
    options: impl IntoIterator<Item = (&'a InstanceType, &'a ResourceList)>,
) -> Option<Launch> {
    let compatible = OfferingCompatibility::new(requirements);
    // The cheapest offering per capacity type, in one pass over the options.
    let mut best: [Option<(&InstanceType, &Offering)>; 3] = [None; 3];
    for (it, allocatable) in options {
        if !resources::fits(requests, allocatable) {
            continue;
        }
        for o in &it.offerings {
            let slot = &mut best[priority(o.capacity_type)];
            let better = match slot {
                None => true,
                Some((best_it, best_o)) => {
                    o.price < best_o.price
                        || (o.price == best_o.price && std::ptr::eq(*best_it, it) && o.zone < best_o.zone)
                }
            };
            if better && o.available && compatible.test(&o.requirements) {
                *slot = Some((it, o));
            }
        }
    }
    let (it, o) = best.into_iter().flatten().next()?;
    Some(Launch {
        instance_type: it.name.clone(),
        zone: o.zone.clone(),
        capacity_type: o.capacity_type.as_str().to_string(),
        price: o.price,
        price_synthetic: matches!(o.price_source, PriceSource::SyntheticSpot),
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
