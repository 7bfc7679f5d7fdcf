//! Prices. Offline, on-demand prices are data (karpenter's us-east-1 table, applied to every
//! region as upstream does when it has no table for the region) and spot prices are
//! **synthetic**: no registry package ships usable spot prices, so a deterministic sample is
//! derived here. Live, the controller asks the Pricing API and `DescribeSpotPriceHistory`
//! ([`LivePrices`]); this module reads their answers as upstream karpenter-provider-aws v1.14.1
//! `pkg/providers/pricing/pricing.go` does (`onDemandPage`, `spotPage`, `NewAPI`).
//!
//! `spot(type, zone ID) = on-demand × r`, where `r = 0.30 + 0.20 × u` and `u ∈ [0, 1)` comes from the
//! 64-bit FNV-1a hash of `"<type>\0<zone ID>"` (top 53 bits). The band [0.30, 0.50] matches the
//! spot/on-demand ratios observed for 16 us-east-1 types (0.31–0.49, median 0.42).

/// Lower end of the synthetic spot/on-demand ratio.
pub const SPOT_RATIO_MIN: f64 = 0.30;
/// Upper end (exclusive) of the synthetic spot/on-demand ratio.
pub const SPOT_RATIO_MAX: f64 = 0.50;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_continue(FNV_OFFSET, bytes)
}

/// FNV-1a from state `h` over `bytes` (hashing `a` then `b` equals hashing their concatenation).
fn fnv1a64_continue(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// The synthetic spot/on-demand ratio of `(instance type, zone ID)`, in [0.30, 0.50).
pub fn spot_ratio(instance_type: &str, zone_id: &str) -> f64 {
    // The hash of `"<type>\0<zone ID>"`, without building the key.
    let h = fnv1a64_continue(fnv1a64_continue(fnv1a64(instance_type.as_bytes()), &[0]), zone_id.as_bytes());
    let u = (h >> 11) as f64 / (1u64 << 53) as f64;
    SPOT_RATIO_MIN + (SPOT_RATIO_MAX - SPOT_RATIO_MIN) * u
}

/// The synthetic spot price of a type in a zone, given its on-demand price.
pub fn synthetic_spot_price(instance_type: &str, zone_id: &str, on_demand: f64) -> f64 {
    on_demand * spot_ratio(instance_type, zone_id)
}

use std::collections::HashMap;

use serde::Deserialize;

/// The Pricing API's endpoint region for an EC2 region (`NewAPI`: the API is not in every region).
pub fn pricing_api_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// The currency of on-demand prices in a region.
pub fn currency(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "CNY"
    } else {
        "USD"
    }
}

/// Whether upstream asks the Pricing API at all (`UpdateOnDemandPricing`: not in us-gov regions).
pub fn asks_pricing_api(region: &str) -> bool {
    !region.starts_with("us-gov")
}

/// The `GetProducts` term-match filters (field, value) of the two on-demand queries, in order:
/// shared tenancy (`Compute Instance`) and dedicated bare metal (`Compute Instance (bare metal)`).
pub fn on_demand_queries(region: &str) -> [Vec<(&'static str, String)>; 2] {
    let base = |tenancy: &str, family: &str| {
        vec![
            ("regionCode", region.to_string()),
            ("serviceCode", "AmazonEC2".to_string()),
            ("preInstalledSw", "NA".to_string()),
            ("operatingSystem", "Linux".to_string()),
            ("capacitystatus", "Used".to_string()),
            ("marketoption", "OnDemand".to_string()),
            ("tenancy", tenancy.to_string()),
            ("productFamily", family.to_string()),
        ]
    };
    [base("Shared", "Compute Instance"), base("Dedicated", "Compute Instance (bare metal)")]
}

/// `ProductDescriptions` of the spot price history query.
pub const SPOT_PRODUCT_DESCRIPTIONS: [&str; 2] = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"];

/// The part of a `GetProducts` price-list document upstream reads.
#[derive(Deserialize, Default)]
#[serde(default)]
struct PriceItem {
    product: PriceProduct,
    terms: PriceTerms,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PriceProduct {
    attributes: PriceAttributes,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PriceAttributes {
    #[serde(rename = "instanceType")]
    instance_type: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PriceTerms {
    #[serde(rename = "OnDemand")]
    on_demand: HashMap<String, PriceTerm>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PriceTerm {
    #[serde(rename = "priceDimensions")]
    dimensions: HashMap<String, PriceDimension>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PriceDimension {
    #[serde(rename = "pricePerUnit")]
    price_per_unit: HashMap<String, String>,
}

/// On-demand prices read from `GetProducts` price-list documents (`onDemandPage`): each
/// document's instance type and its OnDemand terms' price in `currency`; zero and unparsable prices
/// are ignored, as are documents without an instance type. The second value counts the documents
/// that were not JSON (upstream logs them).
pub fn on_demand_from_price_list<'a>(
    documents: impl IntoIterator<Item = &'a str>,
    currency: &str,
) -> (HashMap<String, f64>, usize) {
    let mut out = HashMap::new();
    let mut unreadable = 0;
    for document in documents {
        let Ok(item) = serde_json::from_str::<PriceItem>(document) else {
            unreadable += 1;
            continue;
        };
        if item.product.attributes.instance_type.is_empty() {
            continue;
        }
        // Terms and dimensions are maps: visit them in key order so that a document with several
        // prices gives the same answer every time (upstream takes Go's random map order).
        let mut terms: Vec<_> = item.terms.on_demand.iter().collect();
        terms.sort_by(|a, b| a.0.cmp(b.0));
        for (_, term) in terms {
            let mut dimensions: Vec<_> = term.dimensions.iter().collect();
            dimensions.sort_by(|a, b| a.0.cmp(b.0));
            for (_, dimension) in dimensions {
                match dimension.price_per_unit.get(currency).and_then(|p| p.parse::<f64>().ok()) {
                    Some(price) if price > 0.0 && price.is_finite() => {
                        out.insert(item.product.attributes.instance_type.clone(), price);
                    }
                    _ => {}
                }
            }
        }
    }
    (out, unreadable)
}

/// One `SpotPriceHistory` record as EC2 answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpotRecord {
    pub instance_type: String,
    /// The zone name (`us-west-2a`).
    pub zone: String,
    pub price: String,
    pub has_timestamp: bool,
}

/// Prices the controller fetched from an AWS API, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct LivePrices {
    /// Instance type → price (on-demand); instance type → zone name → price (spot).
    pub on_demand: HashMap<String, f64>,
    pub spot: HashMap<String, HashMap<String, f64>>,
    /// When the answer was received (RFC 3339).
    pub fetched_at: String,
}

impl LivePrices {
    /// On-demand prices from the Pricing API.
    pub fn on_demand(prices: HashMap<String, f64>, fetched_at: &str) -> LivePrices {
        LivePrices { on_demand: prices, spot: HashMap::new(), fetched_at: fetched_at.to_string() }
    }

    /// Spot prices from `DescribeSpotPriceHistory` records (`spotPage`): a record whose price does
    /// not parse, or without a timestamp, is ignored; a later record for the same type and zone
    /// replaces an earlier one. `None` when no record is usable (upstream: "no spot pricing found",
    /// and the previous prices stay).
    pub fn spot<'a>(records: impl IntoIterator<Item = &'a SpotRecord>, fetched_at: &str) -> Option<LivePrices> {
        let mut spot: HashMap<String, HashMap<String, f64>> = HashMap::new();
        for r in records {
            let Ok(price) = r.price.parse::<f64>() else { continue };
            if !r.has_timestamp || !price.is_finite() || price < 0.0 {
                continue;
            }
            spot.entry(r.instance_type.clone()).or_default().insert(r.zone.clone(), price);
        }
        (!spot.is_empty()).then(|| LivePrices { on_demand: HashMap::new(), spot, fetched_at: fetched_at.to_string() })
    }

    /// These prices over `previous` (upstream merges each update over what it had, so a partial
    /// answer keeps the rest): per type, and for spot per zone.
    pub fn merged_over(mut self, previous: Option<&LivePrices>) -> LivePrices {
        if let Some(previous) = previous {
            for (t, p) in &previous.on_demand {
                self.on_demand.entry(t.clone()).or_insert(*p);
            }
            for (t, zones) in &previous.spot {
                let mine = self.spot.entry(t.clone()).or_default();
                for (z, p) in zones {
                    mine.entry(z.clone()).or_insert(*p);
                }
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_get_products_documents_as_upstream() {
        let doc = |t: &str, usd: &str| {
            format!(
                r#"{{"product":{{"attributes":{{"instanceType":"{t}","tenancy":"Shared"}}}},"terms":{{"OnDemand":{{"A.B":{{"priceDimensions":{{"A.B.C":{{"unit":"Hrs","pricePerUnit":{{"USD":"{usd}"}}}}}}}}}}}}}}"#
            )
        };
        let docs = [
            doc("m5.large", "0.0960000000"),
            doc("m5.xlarge", "0.0000000000"),
            doc("", "1"),
            "not json".into(),
            doc("c5.large", "abc"),
        ];
        let (prices, unreadable) = on_demand_from_price_list(docs.iter().map(String::as_str), "USD");
        assert_eq!(prices.len(), 1, "{prices:?}");
        assert_eq!(prices["m5.large"], 0.096);
        assert_eq!(unreadable, 1);
        let (cny, _) = on_demand_from_price_list(docs.iter().map(String::as_str), "CNY");
        assert!(cny.is_empty(), "a CNY region reads only CNY prices");
    }

    #[test]
    fn endpoint_regions_and_currency() {
        assert_eq!(pricing_api_region("us-west-2"), "us-east-1");
        assert_eq!(pricing_api_region("ap-northeast-1"), "ap-south-1");
        assert_eq!(pricing_api_region("eu-west-1"), "eu-central-1");
        assert_eq!(pricing_api_region("cn-north-1"), "cn-northwest-1");
        assert_eq!(currency("cn-north-1"), "CNY");
        assert!(!asks_pricing_api("us-gov-west-1") && asks_pricing_api("us-east-1"));
        let [shared, metal] = on_demand_queries("us-west-2");
        assert!(shared.contains(&("tenancy", "Shared".into())) && metal.contains(&("tenancy", "Dedicated".into())));
        assert!(shared.contains(&("regionCode", "us-west-2".into())));
    }

    #[test]
    fn spot_history_last_record_wins_and_merges_over_the_previous() {
        let r = |t: &str, z: &str, p: &str, ts: bool| SpotRecord {
            instance_type: t.into(),
            zone: z.into(),
            price: p.into(),
            has_timestamp: ts,
        };
        let records = [
            r("m5.large", "us-west-2a", "0.04", true),
            r("m5.large", "us-west-2a", "0.05", true),
            r("m5.large", "us-west-2b", "x", true),
            r("c5.large", "us-west-2a", "0.03", false),
        ];
        let now = LivePrices::spot(&records, "2026-12-04T00:00:00Z").unwrap();
        assert_eq!(now.spot.len(), 1);
        assert_eq!(now.spot["m5.large"]["us-west-2a"], 0.05);
        assert!(LivePrices::spot(&records[2..], "t").is_none(), "nothing usable: no update");
        let before = LivePrices::spot(
            &[r("m5.large", "us-west-2b", "0.07", true), r("r5.large", "us-west-2a", "0.09", true)],
            "t0",
        )
        .unwrap();
        let merged = now.merged_over(Some(&before));
        assert_eq!(merged.spot["m5.large"]["us-west-2a"], 0.05);
        assert_eq!(merged.spot["m5.large"]["us-west-2b"], 0.07);
        assert_eq!(merged.spot["r5.large"]["us-west-2a"], 0.09);
        assert_eq!(merged.fetched_at, "2026-12-04T00:00:00Z");
    }

    #[test]
    fn fnv1a_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn ratio_hashes_type_nul_zone_id() {
        for (t, z) in [("m5.large", "use1-az1"), ("u-6tb1.metal", "apne2-az10"), ("", "")] {
            let key = format!("{t}\0{z}");
            let u = (fnv1a64(key.as_bytes()) >> 11) as f64 / (1u64 << 53) as f64;
            assert_eq!(spot_ratio(t, z), SPOT_RATIO_MIN + (SPOT_RATIO_MAX - SPOT_RATIO_MIN) * u);
        }
    }

    #[test]
    fn ratio_is_in_band_and_spread() {
        let mut min: f64 = 1.0;
        let mut max: f64 = 0.0;
        for i in 0..2000 {
            let r = spot_ratio(&format!("t{i}.large"), "use1-az1");
            assert!((SPOT_RATIO_MIN..SPOT_RATIO_MAX).contains(&r));
            min = min.min(r);
            max = max.max(r);
        }
        assert!(min < 0.31 && max > 0.49, "{min} {max}");
        assert_eq!(spot_ratio("m5.large", "use1-az1"), spot_ratio("m5.large", "use1-az1"));
        assert_ne!(spot_ratio("m5.large", "use1-az1"), spot_ratio("m5.large", "use1-az2"));
    }
}
