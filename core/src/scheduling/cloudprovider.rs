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

use crate::catalogue::{CapacityType, InstanceType, PriceSource};
use crate::requirements::{AllowUndefined, Requirements};
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
    options: impl IntoIterator<Item = (&'a InstanceType, &'a ResourceList)> + Clone,
) -> Option<Launch> {
    for capacity_type in [CapacityType::Reserved, CapacityType::Spot, CapacityType::OnDemand] {
        let mut best: Option<(f64, &InstanceType, &crate::catalogue::Offering)> = None;
        for (it, allocatable) in options.clone() {
            if !resources::fits(requests, allocatable) {
                continue;
            }
            for o in &it.offerings {
                if !o.available
                    || o.capacity_type != capacity_type
                    || !requirements.is_compatible(&o.requirements, AllowUndefined::WellKnownLabels)
                {
                    continue;
                }
                let better = match &best {
                    None => true,
                    Some((price, best_it, best_o)) => {
                        o.price < *price || (o.price == *price && std::ptr::eq(*best_it, it) && o.zone < best_o.zone)
                    }
                };
                if better {
                    best = Some((o.price, it, o));
                }
            }
        }
        if let Some((price, it, o)) = best {
            return Some(Launch {
                instance_type: it.name.clone(),
                zone: o.zone.clone(),
                capacity_type: capacity_type.as_str().to_string(),
                price,
                price_synthetic: matches!(o.price_source, PriceSource::SyntheticSpot),
            });
        }
    }
    None
}
