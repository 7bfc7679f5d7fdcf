//! Capacity reservations (on-demand capacity reservations and capacity blocks) and the reserved
//! offerings they add to a NodeClass's instance types.
//!
//! Three upstream steps of karpenter-provider-aws v1.14.1, offline:
//! 1. **The account's reservations** ([`Ec2CapacityReservation`]): what EC2
//!    `DescribeCapacityReservations` returns, written by the user in the Scenario document
//!    (`spec.capacityReservations`), including `availableInstanceCount`.
//! 2. **Selection** ([`select`]): upstream's nodeclass controller
//!    (`pkg/controllers/nodeclass/capacityreservation.go`) turns `capacityReservationSelectorTerms`
//!    into DescribeCapacityReservations queries (`pkg/providers/capacityreservation/types.go`
//!    `QueriesFromSelectorTerms`), drops duplicates and ended reservations, derives the state
//!    (`expiring` for a capacity block within 40 minutes of its end, `CapacityReservationFromEC2`)
//!    and writes `status.capacityReservations` sorted by ID.
//! 3. **Offerings** ([`Catalogue::with_reservations`]): upstream's `ReservedCapacityResolver`
//!    (`pkg/providers/instancetype/offering/reserved_capacity_resolver.go`) adds one `reserved`
//!    offering per reservation to its instance type, priced at on-demand ÷ 10,000,000 and
//!    available while the reservation has instances left, is in a zone the type is offered in and
//!    is not expiring; `computeRequirements` (`instancetype/types.go`) adds `reserved` to the
//!    type's capacity types and lists the reservation IDs, types and interruptibility on it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{settings, Catalogue, CatalogueError, InstanceType, Offering};
use crate::api::ec2nodeclass::{CapacityReservationSelectorTerm, EC2NodeClassSpec};
use crate::api::time::parse_time;
use crate::labels::{self, aws};
use crate::requirements::{Requirement, Requirements};

/// upstream: the reserved price is the on-demand price divided by this, so a reservation is
/// effectively free (always preferred) while keeping the relative order of instance types.
pub const RESERVED_PRICE_DIVISOR: f64 = 10_000_000.0;

/// upstream `capacityReservationExpirationPeriod`: a capacity block this close to its end is
/// `expiring` and no longer offered.
const EXPIRATION_PERIOD_SECONDS: i64 = 40 * 60;

/// `reservationType` (upstream `CapacityReservationType`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReservationType {
    /// An on-demand capacity reservation (ODCR).
    #[default]
    Default,
    /// An EC2 capacity block for ML.
    CapacityBlock,
}

impl ReservationType {
    /// The label value (`default`, `capacity-block`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationType::Default => "default",
            ReservationType::CapacityBlock => "capacity-block",
        }
    }
}

/// `instanceMatchCriteria` of a reservation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceMatchCriteria {
    /// EC2's default: matching instances use the reservation automatically.
    #[default]
    Open,
    /// Only launches that name the reservation use it.
    Targeted,
}

impl InstanceMatchCriteria {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceMatchCriteria::Open => "open",
            InstanceMatchCriteria::Targeted => "targeted",
        }
    }
}

/// `state` of a resolved reservation (upstream `CapacityReservationState`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReservationState {
    #[default]
    Active,
    /// A capacity block in its last 40 minutes: no longer offered.
    Expiring,
}

/// One capacity reservation of the account, as EC2 `DescribeCapacityReservations` would return it
/// (the Scenario's `spec.capacityReservations[]`). The field names follow the EC2NodeClass
/// `status.capacityReservations` entries, so a pasted status entry plus `availableInstanceCount`
/// is a valid item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ec2CapacityReservation {
    /// `cr-…`.
    pub id: String,
    pub instance_type: String,
    /// A zone name of the region (`us-east-1a`).
    pub availability_zone: String,
    /// Instances that can still be launched into the reservation (EC2 `AvailableInstanceCount`).
    pub available_instance_count: i64,
    /// The owning account (12 digits); only matched by selector terms that set `ownerID`.
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    #[serde(default)]
    pub instance_match_criteria: InstanceMatchCriteria,
    #[serde(default)]
    pub reservation_type: ReservationType,
    #[serde(default)]
    pub interruptible: bool,
    /// RFC 3339. Compared with the Scenario's `startTime` (when set): an ended reservation is not
    /// listed, a capacity block within 40 minutes of its end is `expiring`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// `expiring` marks a capacity block in its last 40 minutes without an `endTime` (as pasted
    /// from an EC2NodeClass status); otherwise derived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ReservationState>,
    /// Matched by selector-term `tags`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// Whether `text` is a capacity-reservation ID (`^cr-[0-9a-z]+$`, the status CRD pattern).
pub fn is_reservation_id(text: &str) -> bool {
    text.strip_prefix("cr-")
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()))
}

/// A reservation an EC2NodeClass offers, with its availability (upstream: an entry of
/// `status.capacityReservations` joined with the provider's availability cache).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedCapacity {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub reservation_type: ReservationType,
    pub interruptible: bool,
    pub state: ReservationState,
    /// Instances left when the round starts.
    pub available_instances: i64,
}

/// Upstream `Query.matches` as EC2 evaluates the filters of one selector term: the term's `id`
/// query, or its tags/instanceMatchCriteria query (with `ownerID` when set). A term can yield
/// both queries (`QueriesFromSelectorTerms`).
fn term_selects(term: &CapacityReservationSelectorTerm, r: &Ec2CapacityReservation) -> bool {
    if term.id.as_deref() == Some(r.id.as_str()) {
        return true;
    }
    if term.tags.is_empty() && term.instance_match_criteria.is_none() {
        // upstream builds no filter query for such a term (an `ownerID` alone selects nothing).
        return false;
    }
    if term.owner_id.as_ref().is_some_and(|o| Some(o) != r.owner_id.as_ref()) {
        return false;
    }
    if term.instance_match_criteria.as_deref().is_some_and(|c| c != r.instance_match_criteria.as_str()) {
        return false;
    }
    // upstream: a tag value `*` becomes a `tag-key` filter (the key exists), anything else `tag:<k>`.
    term.tags.iter().all(|(k, v)| match r.tags.get(k) {
        Some(actual) => v == "*" || v == actual,
        None => false,
    })
}

/// The reservations `terms` select among `world`, as upstream's nodeclass controller resolves
/// them at time `now` (seconds since the epoch; `None`: no reservation has ended or is expiring
/// by time): ORed terms, duplicates dropped, ended reservations dropped, sorted by ID.
pub fn select(
    terms: &[CapacityReservationSelectorTerm],
    world: &[Ec2CapacityReservation],
    now: Option<i64>,
) -> Vec<ReservedCapacity> {
    let mut out: Vec<ReservedCapacity> = Vec::new();
    for r in world {
        if !terms.iter().any(|t| term_selects(t, r)) || out.iter().any(|o| o.id == r.id) {
            continue;
        }
        let end = r.end_time.as_deref().and_then(parse_time);
        // upstream `filterReservations`: a reservation whose end date is not after now is gone.
        if let (Some(end), Some(now)) = (end, now) {
            if end <= now {
                continue;
            }
        }
        // upstream `CapacityReservationFromEC2`: only capacity blocks expire, 40 minutes early.
        let expiring_by_time = r.reservation_type == ReservationType::CapacityBlock
            && matches!((end, now), (Some(end), Some(now)) if now >= end - EXPIRATION_PERIOD_SECONDS);
        let state = if expiring_by_time { ReservationState::Expiring } else { r.state.unwrap_or_default() };
        out.push(ReservedCapacity {
            id: r.id.clone(),
            instance_type: r.instance_type.clone(),
            zone: r.availability_zone.clone(),
            reservation_type: r.reservation_type,
            interruptible: r.interruptible,
            state,
            available_instances: r.available_instance_count.max(0),
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

impl Catalogue {
    /// `types` (the NodeClass's instance types in `region`, as [`Catalogue::instance_types_shared`]
    /// returns them) with the reserved offerings of `reservations` added. Without a reservation
    /// for any of the types, `types` is returned as is (no copy).
    pub fn with_reservations(
        &self,
        region: &str,
        nodeclass: &EC2NodeClassSpec,
        types: Arc<Vec<InstanceType>>,
        reservations: &[ReservedCapacity],
    ) -> Result<Arc<Vec<InstanceType>>, CatalogueError> {
        let touched = |it: &InstanceType| reservations.iter().any(|r| r.instance_type == it.name);
        if !types.iter().any(touched) {
            return Ok(types);
        }
        self.region(region)?;
        let settings = settings(nodeclass)?;
        let mut types = types;
        for it in Arc::make_mut(&mut types).iter_mut() {
            let mine: Vec<&ReservedCapacity> = reservations.iter().filter(|r| r.instance_type == it.name).collect();
            if mine.is_empty() {
                continue;
            }
            let compatible = self.info(&it.name).is_some_and(|info| super::is_compatible(info, &settings));
            let offered_zones = it.requirements.get(labels::TOPOLOGY_ZONE);
            // upstream: reserved offerings are priced off the on-demand price; without one the
            // offering is still created, at price 0.
            let on_demand = it.offerings.iter().find(|o| o.capacity_type == super::CapacityType::OnDemand);
            let price = on_demand.filter(|o| o.price_source != super::PriceSource::Unpriced).map_or(0.0, |o| o.price);
            let price_source = on_demand.map_or(super::PriceSource::Unpriced, |o| o.price_source.clone());
            for r in &mine {
                // The zone's ID as the type's offerings name it (the account's zone names when the
                // NodeClass's subnets renamed them).
                let zone_id = it.offerings.iter().find(|o| o.zone == r.zone).map(|o| o.zone_id.clone());
                let mut requirements: Requirements = [
                    Requirement::in_values(labels::CAPACITY_TYPE, &[labels::CAPACITY_TYPE_RESERVED]),
                    Requirement::in_values(labels::TOPOLOGY_ZONE, &[r.zone.as_str()]),
                    Requirement::in_values(aws::CAPACITY_RESERVATION_ID, &[r.id.as_str()]),
                    Requirement::in_values(aws::CAPACITY_RESERVATION_TYPE, &[r.reservation_type.as_str()]),
                    Requirement::in_values(aws::CAPACITY_RESERVATION_INTERRUPTIBLE, &[r.interruptible.to_string()]),
                ]
                .into_iter()
                .collect();
                // upstream adds the zone ID only when the zone has a NodeClass subnet.
                if let Some(id) = &zone_id {
                    requirements.add(Requirement::in_values(aws::TOPOLOGY_ZONE_ID, &[id.as_str()]));
                }
                it.offerings.push(Offering {
                    zone: r.zone.clone(),
                    zone_id: zone_id.unwrap_or_default(),
                    capacity_type: super::CapacityType::Reserved,
                    price: price / RESERVED_PRICE_DIVISOR,
                    price_source: price_source.clone(),
                    available: compatible
                        && r.available_instances != 0
                        && offered_zones.has(&r.zone)
                        && r.state != ReservationState::Expiring,
                    requirements: Arc::new(requirements),
                    reservation: Some(Arc::new((*r).clone())),
                });
            }
            // upstream `computeRequirements`: `reserved` joins the capacity types, and the
            // reservation labels list every reservation of the type instead of DoesNotExist.
            let mut capacity_types: Vec<String> =
                it.requirements.get(labels::CAPACITY_TYPE).values().map(str::to_string).collect();
            capacity_types.push(labels::CAPACITY_TYPE_RESERVED.to_string());
            let ids: Vec<&str> = mine.iter().map(|r| r.id.as_str()).collect();
            let kinds: Vec<&str> = mine.iter().map(|r| r.reservation_type.as_str()).collect();
            let interruptible: Vec<String> = mine.iter().map(|r| r.interruptible.to_string()).collect();
            for (key, values) in [
                (labels::CAPACITY_TYPE, capacity_types),
                (aws::CAPACITY_RESERVATION_ID, ids.iter().map(|s| s.to_string()).collect()),
                (aws::CAPACITY_RESERVATION_TYPE, kinds.iter().map(|s| s.to_string()).collect()),
                (aws::CAPACITY_RESERVATION_INTERRUPTIBLE, interruptible),
            ] {
                it.requirements.remove(key);
                it.requirements.add(Requirement::in_values(key, &values));
            }
        }
        Ok(types)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::CapacityType;
    use crate::requirements::AllowUndefined;

    fn world(id: &str, it: &str, zone: &str, count: i64) -> Ec2CapacityReservation {
        Ec2CapacityReservation {
            id: id.into(),
            instance_type: it.into(),
            availability_zone: zone.into(),
            available_instance_count: count,
            owner_id: None,
            instance_match_criteria: InstanceMatchCriteria::Open,
            reservation_type: ReservationType::Default,
            interruptible: false,
            end_time: None,
            state: None,
            tags: BTreeMap::new(),
        }
    }

    fn term(f: impl FnOnce(&mut CapacityReservationSelectorTerm)) -> CapacityReservationSelectorTerm {
        let mut t = CapacityReservationSelectorTerm::default();
        f(&mut t);
        t
    }

    fn ids(selected: &[ReservedCapacity]) -> Vec<&str> {
        selected.iter().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn selector_terms_select_like_describe_capacity_reservations() {
        let mut tagged = world("cr-2", "m5.large", "us-east-1a", 1);
        tagged.tags.insert("team".into(), "ml".into());
        tagged.owner_id = Some("123456789012".into());
        let mut targeted = world("cr-3", "m5.large", "us-east-1b", 1);
        targeted.instance_match_criteria = InstanceMatchCriteria::Targeted;
        let all = [world("cr-1", "m5.large", "us-east-1a", 1), tagged, targeted];
        let by_id = term(|t| t.id = Some("cr-1".into()));
        assert_eq!(ids(&select(std::slice::from_ref(&by_id), &all, None)), ["cr-1"]);
        let any_team = term(|t| {
            t.tags.insert("team".into(), "*".into());
        });
        assert_eq!(ids(&select(&[any_team], &all, None)), ["cr-2"]);
        let wrong_owner = term(|t| {
            t.tags.insert("team".into(), "ml".into());
            t.owner_id = Some("000000000000".into());
        });
        assert!(select(&[wrong_owner], &all, None).is_empty());
        let targeted_only = term(|t| t.instance_match_criteria = Some("targeted".into()));
        assert_eq!(ids(&select(std::slice::from_ref(&targeted_only), &all, None)), ["cr-3"]);
        // Terms are ORed, duplicates dropped, the result sorted by ID.
        assert_eq!(ids(&select(&[targeted_only, by_id.clone(), by_id], &all, None)), ["cr-1", "cr-3"]);
        // An ownerID alone builds no query upstream: it selects nothing.
        let owner_only = term(|t| t.owner_id = Some("123456789012".into()));
        assert!(select(&[owner_only], &all, None).is_empty());
    }

    #[test]
    fn ended_reservations_are_gone_and_capacity_blocks_expire_40_minutes_early() {
        let now = parse_time("2026-12-01T10:00:00Z").unwrap();
        let mut block = world("cr-b", "p5.48xlarge", "us-east-1a", 1);
        block.reservation_type = ReservationType::CapacityBlock;
        block.end_time = Some("2026-12-01T10:30:00Z".into());
        let mut odcr = world("cr-o", "m5.large", "us-east-1a", 1);
        odcr.end_time = Some("2026-12-01T10:30:00Z".into());
        let mut ended = world("cr-e", "m5.large", "us-east-1a", 1);
        ended.end_time = Some("2026-12-01T10:00:00Z".into());
        let terms = [term(|t| t.instance_match_criteria = Some("open".into()))];
        let s = select(&terms, &[block.clone(), odcr, ended], Some(now));
        assert_eq!(ids(&s), ["cr-b", "cr-o"]);
        assert_eq!(s[0].state, ReservationState::Expiring);
        assert_eq!(s[1].state, ReservationState::Active, "only capacity blocks expire");
        // Without a start time nothing is compared; 41 minutes before the end a block is active.
        assert_eq!(select(&terms, &[block.clone()], None)[0].state, ReservationState::Active);
        block.end_time = Some("2026-12-01T10:41:00Z".into());
        assert_eq!(select(&terms, &[block], Some(now))[0].state, ReservationState::Active);
    }

    #[test]
    fn reserved_offerings_are_nearly_free_and_labelled() {
        let cat = Catalogue::embedded();
        let spec = EC2NodeClassSpec::default();
        let types = cat.instance_types_shared("us-east-1", &spec).unwrap();
        let selected = select(
            &[term(|t| t.instance_match_criteria = Some("open".into()))],
            &[world("cr-1", "m5.large", "us-east-1a", 2), world("cr-0", "m5.large", "us-east-1c", 0)],
            None,
        );
        let untouched = cat.with_reservations("us-east-1", &spec, types.clone(), &[]).unwrap();
        assert!(Arc::ptr_eq(&untouched, &types), "no reservation, no copy");
        let with = cat.with_reservations("us-east-1", &spec, types, &selected).unwrap();
        let it = with.iter().find(|t| t.name == "m5.large").unwrap();
        let od = it.offerings.iter().find(|o| o.capacity_type == CapacityType::OnDemand).unwrap().price;
        let reserved: Vec<&Offering> =
            it.offerings.iter().filter(|o| o.capacity_type == CapacityType::Reserved).collect();
        assert_eq!(reserved.len(), 2);
        let a = reserved.iter().find(|o| o.zone == "us-east-1a").unwrap();
        assert!((a.price - od / RESERVED_PRICE_DIVISOR).abs() < 1e-15);
        assert!(a.available);
        let zero = reserved.iter().find(|o| o.reservation.as_ref().unwrap().id == "cr-0").unwrap();
        assert!(!zero.available, "no instances left: unavailable (and us-east-1c does not offer m5.large)");
        for (key, value) in [
            (labels::CAPACITY_TYPE, "reserved"),
            (aws::CAPACITY_RESERVATION_ID, "cr-1"),
            (aws::CAPACITY_RESERVATION_TYPE, "default"),
            (aws::CAPACITY_RESERVATION_INTERRUPTIBLE, "false"),
        ] {
            assert!(a.requirements.get(key).has(value), "{key}");
        }
        assert!(a.requirements.has(aws::TOPOLOGY_ZONE_ID));
        // The type now lists reserved and both reservation IDs; other types still say DoesNotExist.
        assert!(it.requirements.get(labels::CAPACITY_TYPE).has("reserved"));
        assert_eq!(it.requirements.get(aws::CAPACITY_RESERVATION_ID).values().collect::<Vec<_>>(), ["cr-0", "cr-1"]);
        let other = with.iter().find(|t| t.name == "m5.xlarge").unwrap();
        assert!(other.requirements.get(aws::CAPACITY_RESERVATION_ID).is_empty());
        // A pod asking for a reservation ID is compatible only with that reserved offering.
        let wants: Requirements =
            [Requirement::in_values(aws::CAPACITY_RESERVATION_ID, &["cr-1"])].into_iter().collect();
        let compatible: Vec<_> = it
            .offerings
            .iter()
            .filter(|o| wants.is_compatible(&o.requirements, AllowUndefined::WellKnownLabels))
            .map(|o| o.capacity_type)
            .collect();
        assert_eq!(compatible, [CapacityType::Reserved]);
    }

    #[test]
    fn reservation_ids_follow_the_status_pattern() {
        assert!(is_reservation_id("cr-0123abcd"));
        for bad in ["cr-", "cr-ABC", "r-123", "cr-12_3"] {
            assert!(!is_reservation_id(bad), "{bad}");
        }
    }
}
