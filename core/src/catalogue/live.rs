//! A catalogue from what EC2 answers in one region: the controller's instance-type and price
//! refresh (upstream karpenter-provider-aws v1.14.1 `pkg/providers/instancetype/instancetype.go`
//! `List` over `DescribeInstanceTypes` and `DescribeInstanceTypeOfferings`, refreshed by
//! `pkg/controllers/providers/instancetype`; prices by `pkg/providers/pricing`).
//!
//! Capacity, overhead, allocatable, requirements and offerings are then computed exactly as for
//! the embedded catalogue: only the inputs differ. Zones are keyed by zone ID (the offerings are
//! asked for with `LocationType=availability-zone-id`), so a zone's name comes from the
//! NodeClass's subnets as offline ([`Catalogue::instance_types_in_subnets`]). The tables EC2 does
//! not answer (bandwidth, VPC limits, the static on-demand prices) are the base catalogue's.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};

use super::described::{DescribedInstanceType, KarpenterTables};
use super::pricing::LivePrices;
use super::{
    zone_id_sort_key, zone_name, Catalogue, CatalogueError, InstanceTypeInfo, Provenance, ProvenanceInput, Region, Zone,
};

/// What the controller fetched for one region.
pub struct LiveAnswers<'a> {
    pub region: &'a str,
    /// `DescribeInstanceTypes` (every page).
    pub types: &'a [DescribedInstanceType],
    /// `DescribeInstanceTypeOfferings` with `LocationType=availability-zone-id`: (type, zone ID).
    pub offerings: &'a [(String, String)],
    /// The Pricing API's on-demand prices, when it answered (else the table prices).
    pub on_demand: Option<Arc<LivePrices>>,
    /// `DescribeSpotPriceHistory`'s spot prices, when it answered (else synthetic ones).
    pub spot: Option<Arc<LivePrices>>,
    /// When the types were described (RFC 3339).
    pub fetched_at: &'a str,
}

impl Catalogue {
    /// The catalogue of `answers.region` as EC2 describes it, keeping this catalogue's tables for
    /// each type it knows (a type it does not know has no bandwidth, branch-ENI limit or table
    /// price). Types upstream's filter leaves out (not hvm, not x86_64/arm64) are left out.
    pub fn live(&self, answers: LiveAnswers<'_>) -> Result<Catalogue, CatalogueError> {
        let invalid = |m: String| CatalogueError::Invalid(m);
        let mut types: Vec<InstanceTypeInfo> = Vec::with_capacity(answers.types.len());
        for described in answers.types {
            let tables = self.info(&described.instance_type).map(KarpenterTables::of).unwrap_or_default();
            if let Some(info) = described.info(&tables)? {
                if info.vcpu == 0 || info.memory_mib == 0 {
                    return Err(invalid(format!("EC2 describes {} with no vCPU or memory", info.name)));
                }
                types.push(info);
            }
        }
        types.sort_by(|a, b| a.name.cmp(&b.name));
        // A type on two pages is the same type: keep the first.
        types.dedup_by(|a, b| a.name == b.name);
        if types.is_empty() {
            return Err(invalid(format!("DescribeInstanceTypes listed no usable type in {}", answers.region)));
        }
        let mut zone_ids: Vec<String> =
            answers.offerings.iter().map(|(_, z)| z.clone()).collect::<BTreeSet<_>>().into_iter().collect();
        zone_ids.sort_by(|a, b| zone_id_sort_key(a).cmp(&zone_id_sort_key(b)).then(a.cmp(b)));
        if zone_ids.is_empty() || zone_ids.len() > 26 {
            return Err(invalid(format!(
                "DescribeInstanceTypeOfferings listed {} zones in {} (1–26 supported)",
                zone_ids.len(),
                answers.region
            )));
        }
        let mut offered = vec![0u64; types.len()];
        for (instance_type, zone_id) in answers.offerings {
            let (Ok(t), Some(z)) = (
                types.binary_search_by(|i| i.name.as_str().cmp(instance_type)),
                zone_ids.iter().position(|id| id == zone_id),
            ) else {
                continue;
            };
            offered[t] |= 1 << z;
        }
        let zones = zone_ids
            .iter()
            .enumerate()
            .map(|(i, id)| Zone { name: zone_name(answers.region, i), id: id.clone() })
            .collect();
        let region = Region { name: answers.region.to_string(), zones, offered };
        let api = |action: &str, content: String| ProvenanceInput {
            package: format!("EC2 API ({})", answers.region),
            registry: "live".into(),
            version: action.to_string(),
            file: action.to_string(),
            date: answers.fetched_at.get(..10).unwrap_or(answers.fetched_at).to_string(),
            content,
        };
        let mut inputs = vec![
            api("DescribeInstanceTypes", format!("{} instance types", types.len())),
            api(
                "DescribeInstanceTypeOfferings",
                format!("{} offerings in {} zones", answers.offerings.len(), zone_ids.len()),
            ),
        ];
        if let Some(p) = &answers.on_demand {
            inputs.push(api(
                "pricing:GetProducts",
                format!("{} on-demand prices at {}", p.on_demand.len(), p.fetched_at),
            ));
        }
        if let Some(p) = &answers.spot {
            inputs.push(api(
                "DescribeSpotPriceHistory",
                format!("spot prices of {} types at {}", p.spot.len(), p.fetched_at),
            ));
        }
        // The tables still come from the base catalogue's packages.
        inputs.extend(self.provenance.inputs.iter().filter(|i| i.package != "moto").cloned());
        let provenance = Provenance {
            generator: "carpentry live refresh".into(),
            generated_at: answers.fetched_at.to_string(),
            inputs,
            notes: vec![
                "Instance types and zone-ID offerings as EC2 answered; bandwidth, VPC limits and table prices from \
                 the embedded catalogue."
                    .into(),
                match (&answers.on_demand, &answers.spot) {
                    (Some(_), Some(_)) => "Prices from the Pricing API and DescribeSpotPriceHistory.".into(),
                    (Some(_), None) => "On-demand prices from the Pricing API; spot prices synthetic.".into(),
                    (None, Some(_)) => {
                        "On-demand prices from the table; spot prices from DescribeSpotPriceHistory.".into()
                    }
                    (None, None) => "On-demand prices from the table; spot prices synthetic.".into(),
                },
            ],
        };
        Ok(Catalogue {
            provenance,
            types,
            regions: vec![region],
            on_demand_source: self.on_demand_source.clone(),
            live_on_demand: answers.on_demand,
            live_spot: answers.spot,
            base_requirements: OnceLock::new(),
            cache: Mutex::new(Vec::new()),
        })
    }
}
