//! The unavailable-offerings cache (upstream `pkg/cache/unavailableofferings.go`,
//! `pkg/errors/errors.go`, v1.14.1): an insufficient-capacity answer from CreateFleet marks the
//! (instance type, zone, capacity type) unavailable for 3 minutes, and launches leave it out.
//! Times are the caller's `now` (seconds).

use std::collections::BTreeMap;

use crate::catalogue::{Catalogue, UnavailableOffering};

/// upstream `UnavailableOfferingsTTL`.
pub const UNAVAILABLE_OFFERING_TTL_SECONDS: i64 = 3 * 60;

/// upstream `unfulfillableCapacityErrorCodes`: the CreateFleet error codes that mean "no capacity
/// for this offering now".
const INSUFFICIENT_CAPACITY_CODES: &[&str] = &[
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
    "ReservationCapacityExceeded",
];

/// Whether a CreateFleet error code marks its offering unavailable.
pub fn is_insufficient_capacity(code: &str) -> bool {
    INSUFFICIENT_CAPACITY_CODES.contains(&code)
}

/// Offerings marked unavailable, each until an expiry (seconds); and whole capacity types
/// (upstream `MarkCapacityTypeUnavailable`, for spot without its service-linked role).
#[derive(Debug, Clone, Default)]
pub struct UnavailableOfferings {
    until: BTreeMap<UnavailableOffering, i64>,
    capacity_types: BTreeMap<String, i64>,
}

impl UnavailableOfferings {
    /// Marks the offering unavailable from `now` for the TTL (a second mark extends it).
    pub fn mark(&mut self, instance_type: &str, zone: &str, capacity_type: &str, now: i64) {
        let key = UnavailableOffering {
            instance_type: instance_type.into(),
            zone: zone.into(),
            capacity_type: capacity_type.into(),
        };
        self.until.insert(key, now + UNAVAILABLE_OFFERING_TTL_SECONDS);
    }

    /// Marks every offering of `capacity_type` unavailable from `now` for the TTL.
    pub fn mark_capacity_type(&mut self, capacity_type: &str, now: i64) {
        self.capacity_types.insert(capacity_type.to_string(), now + UNAVAILABLE_OFFERING_TTL_SECONDS);
    }

    /// Whether the offering is unavailable at `now`.
    pub fn is_unavailable(&self, instance_type: &str, zone: &str, capacity_type: &str, now: i64) -> bool {
        self.capacity_types.get(capacity_type).is_some_and(|until| *until > now)
            || self.until.iter().any(|(k, until)| {
                *until > now && k.instance_type == instance_type && k.zone == zone && k.capacity_type == capacity_type
            })
    }

    /// Drops expired marks (upstream sweeps every 10 s).
    pub fn sweep(&mut self, now: i64) {
        self.until.retain(|_, until| *until > now);
        self.capacity_types.retain(|_, until| *until > now);
    }

    /// The offerings unavailable at `now` as the scheduler's input lists them (upstream's
    /// instance type provider applies this cache to the offerings it lists, so that provisioning
    /// and disruption plan none of them): each offering marked, and for a capacity type marked as
    /// a whole, every offering of it `catalogue` has in `region`. Sorted, without repeats.
    pub fn listed(&self, now: i64, catalogue: &Catalogue, region: &str) -> Vec<UnavailableOffering> {
        let mut out: Vec<UnavailableOffering> = self.current(now).map(|(o, _)| o.clone()).collect();
        for (capacity_type, _) in self.capacity_types.iter().filter(|(_, until)| **until > now) {
            for info in catalogue.infos() {
                for zone in catalogue.offered_zones(region, &info.name) {
                    out.push(UnavailableOffering {
                        instance_type: info.name.clone(),
                        zone: zone.name.clone(),
                        capacity_type: capacity_type.clone(),
                    });
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The offerings unavailable at `now`, with when each becomes available again.
    pub fn current(&self, now: i64) -> impl Iterator<Item = (&UnavailableOffering, i64)> + '_ {
        self.until.iter().filter(move |(_, u)| **u > now).map(|(k, u)| (k, *u))
    }
}
