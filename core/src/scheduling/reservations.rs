//! Reserved capacity during one round (upstream `scheduling/reservationmanager.go` and
//! `nodeclaim.go::offeringsToReserve`, v1.14.1), in the **Strict** mode provisioning uses
//! (`provisioner.go` passes `DisableReservedCapacityFallback`).
//!
//! - Capacity per reservation ID starts at the smallest count any NodePool's offerings show for it
//!   (two NodePools may share a reservation; upstream guards against counts refreshed between
//!   their `GetInstanceTypes` calls).
//! - Each NodeClaim planned this round holds **one instance of every** compatible available
//!   reservation it can: pessimistic, since which instance type the cloud provider launches is
//!   not known yet. As pods narrow the NodeClaim, reservations it can no longer use are released;
//!   released capacity can be picked up again later in the round.
//! - A NodeClaim that ends with no reservation while compatible reserved offerings exist, or that
//!   would lose every reservation it holds, is rejected with upstream's `ReservedOfferingError`:
//!   never relaxed, it stops lower-weight NodePools from being tried, and the pod is deferred to
//!   a later round instead of being reported unschedulable.
//!
//! NodePools without reserved offerings skip all of this (an empty per-template table).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::catalogue::reservations::ReservedCapacity;
use crate::catalogue::{CapacityType, InstanceType};
use crate::labels::{self, aws};
use crate::requirements::{AllowUndefined, Requirement, Requirements};

use super::explain::{ReservationConflict, ReservationUse};

/// The reservations a NodeClaim holds: indices into the manager's reservations, sorted, unique.
pub(super) type Held = Vec<u32>;

/// Why a NodeClaim cannot take a pod because of reserved capacity (upstream
/// `ReservedOfferingError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Conflict {
    /// Compatible reserved offerings exist but none could be reserved: their capacity is held by
    /// NodeClaims planned earlier this round.
    Exhausted(Held),
    /// The NodeClaim holds reservations and adding the pod would leave it none of them.
    WouldDropAll(Held),
}

/// A reserved offering of one instance-type option of a template.
struct ReservedOffering {
    reservation: u32,
    requirements: Arc<Requirements>,
}

/// Upstream `ReservationManager`, plus the per-template lookup of reserved offerings.
pub(super) struct ReservationManager {
    reservations: Vec<Arc<ReservedCapacity>>,
    /// Capacity at the start of the round, by reservation.
    initial: Vec<i64>,
    /// Capacity not held by any NodeClaim of this round, by reservation.
    remaining: Vec<i64>,
    /// Per template, per option index: its available reserved offerings. Empty (no allocation)
    /// for a template whose options have none.
    by_template: Vec<Vec<Vec<ReservedOffering>>>,
}

impl ReservationManager {
    /// Builds the manager from each template's instance types and the type index of each of its
    /// options, in template order.
    pub(super) fn new<'a, I, O>(templates: I) -> ReservationManager
    where
        I: IntoIterator<Item = (&'a [InstanceType], O)>,
        O: IntoIterator<Item = usize>,
    {
        let mut index: HashMap<String, u32> = HashMap::new();
        let mut reservations: Vec<Arc<ReservedCapacity>> = Vec::new();
        let mut initial: Vec<i64> = Vec::new();
        let mut by_template = Vec::new();
        for (types, options) in templates {
            // upstream `NewReservationManager`: every reserved offering counts, available or not;
            // a reservation seen with different counts keeps the smallest.
            let mut any = false;
            for o in types.iter().flat_map(|it| &it.offerings) {
                let Some(r) = &o.reservation else { continue };
                any = true;
                match index.get(&r.id) {
                    Some(&i) => initial[i as usize] = initial[i as usize].min(r.available_instances),
                    None => {
                        index.insert(r.id.clone(), reservations.len() as u32);
                        reservations.push(r.clone());
                        initial.push(r.available_instances);
                    }
                }
            }
            let mut per_option: Vec<Vec<ReservedOffering>> = Vec::new();
            if any {
                for it in options {
                    let offerings = types[it]
                        .offerings
                        .iter()
                        .filter(|o| o.available && o.capacity_type == CapacityType::Reserved)
                        .filter_map(|o| {
                            let r = o.reservation.as_ref()?;
                            Some(ReservedOffering { reservation: index[&r.id], requirements: o.requirements.clone() })
                        })
                        .collect();
                    per_option.push(offerings);
                }
                if per_option.iter().all(Vec::is_empty) {
                    per_option = Vec::new();
                }
            }
            by_template.push(per_option);
        }
        let remaining = initial.clone();
        ReservationManager { reservations, initial, remaining, by_template }
    }

    /// True when no NodePool of the round has a reserved offering.
    pub(super) fn is_empty(&self) -> bool {
        self.reservations.is_empty()
    }

    /// Upstream `offeringsToReserve` for a NodeClaim of `template` holding `held`, whose
    /// remaining options would be `kept` under `requirements`: every compatible available
    /// reserved offering it already holds or that has capacity left, one per reservation.
    pub(super) fn to_reserve(
        &self,
        template: usize,
        held: &[u32],
        kept: &[u32],
        requirements: &Requirements,
    ) -> Result<Held, Conflict> {
        let per_option = &self.by_template[template];
        if per_option.is_empty() {
            return Ok(Held::new());
        }
        let mut compatible = false;
        let mut reserve = Held::new();
        let mut exhausted = Held::new();
        for &o in kept {
            for offering in &per_option[o as usize] {
                if !requirements.is_compatible(&offering.requirements, AllowUndefined::WellKnownLabels) {
                    continue;
                }
                compatible = true;
                let r = offering.reservation;
                // upstream `CanReserve` is idempotent: a reservation this NodeClaim holds stays
                // reservable even at zero capacity.
                if held.contains(&r) || self.remaining[r as usize] > 0 {
                    reserve.push(r);
                } else {
                    exhausted.push(r);
                }
            }
        }
        reserve.sort_unstable();
        reserve.dedup();
        if compatible && reserve.is_empty() {
            exhausted.sort_unstable();
            exhausted.dedup();
            return Err(Conflict::Exhausted(exhausted));
        }
        if !held.is_empty() && reserve.is_empty() {
            return Err(Conflict::WouldDropAll(held.to_vec()));
        }
        Ok(reserve)
    }

    /// Upstream `NodeClaim.Add`: reserve what is new, release what is no longer held.
    pub(super) fn commit(&mut self, held: &mut Held, updated: Held) {
        if held.is_empty() && updated.is_empty() {
            return;
        }
        for &r in &updated {
            if !held.contains(&r) {
                debug_assert!(self.remaining[r as usize] > 0, "over-reserved reservation {r}");
                self.remaining[r as usize] -= 1;
            }
        }
        for &r in held.iter() {
            if !updated.contains(&r) {
                self.remaining[r as usize] += 1;
            }
        }
        *held = updated;
    }

    /// Upstream `FinalizeScheduling`: a NodeClaim holding reservations is pinned to reserved
    /// capacity (which also lets drift notice a changed capacity-type label) and to the
    /// reservations it holds, so that it cannot over-launch into another.
    pub(super) fn finalize_requirements(&self, held: &[u32], requirements: &mut Requirements) {
        if held.is_empty() {
            return;
        }
        // upstream assigns the capacity-type requirement (no intersection, minValues dropped).
        requirements.remove(labels::CAPACITY_TYPE);
        requirements.add(Requirement::in_values(labels::CAPACITY_TYPE, &[labels::CAPACITY_TYPE_RESERVED]));
        let ids: Vec<&str> = held.iter().map(|&r| self.reservations[r as usize].id.as_str()).collect();
        requirements.add(Requirement::in_values(aws::CAPACITY_RESERVATION_ID, &ids));
    }

    /// Instances each reservation has for launches at the start of the round (the simulated
    /// cloud provider takes one per reserved launch).
    pub(super) fn launch_capacity(&self) -> BTreeMap<String, i64> {
        self.reservations.iter().zip(&self.initial).map(|(r, &n)| (r.id.clone(), n)).collect()
    }

    /// The explanation of `conflict`, counting the holders among `claims` (the held sets of this
    /// round's NodeClaims).
    pub(super) fn describe<'a>(
        &self,
        conflict: &Conflict,
        claims: impl Iterator<Item = &'a Held> + Clone,
    ) -> ReservationConflict {
        let uses = |held: &Held| -> Vec<ReservationUse> {
            held.iter()
                .map(|&r| {
                    let facts = &self.reservations[r as usize];
                    ReservationUse {
                        id: facts.id.clone(),
                        instance_type: facts.instance_type.clone(),
                        zone: facts.zone.clone(),
                        available: self.initial[r as usize],
                        left: self.remaining[r as usize],
                        held_by: claims.clone().filter(|h| h.contains(&r)).count(),
                    }
                })
                .collect()
        };
        match conflict {
            Conflict::Exhausted(r) => ReservationConflict::Exhausted { reservations: uses(r) },
            Conflict::WouldDropAll(r) => ReservationConflict::WouldDropAll { reservations: uses(r) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::reservations::{ReservationState, ReservationType};
    use crate::catalogue::{Offering, PriceSource};
    use crate::scheduling::fake;

    fn reserved(it: &mut InstanceType, id: &str, zone: &str, count: i64) {
        let r = ReservedCapacity {
            id: id.into(),
            instance_type: it.name.clone(),
            zone: zone.into(),
            reservation_type: ReservationType::Default,
            interruptible: false,
            state: ReservationState::Active,
            available_instances: count,
        };
        let requirements: Requirements = [
            Requirement::in_values(labels::CAPACITY_TYPE, &["reserved"]),
            Requirement::in_values(labels::TOPOLOGY_ZONE, &[zone]),
            Requirement::in_values(aws::CAPACITY_RESERVATION_ID, &[id]),
        ]
        .into_iter()
        .collect();
        it.offerings.push(Offering {
            zone: zone.into(),
            zone_id: zone.into(),
            capacity_type: CapacityType::Reserved,
            price: 0.0,
            price_source: PriceSource::Unpriced,
            available: count > 0,
            requirements: Arc::new(requirements),
            reservation: Some(Arc::new(r)),
        });
    }

    fn types() -> Vec<InstanceType> {
        let mut small = fake::instance_type("small", 2, crate::quantity::Quantity::from_gibibytes(2), 5, "amd64");
        reserved(&mut small, "cr-a", "test-zone-1", 2);
        reserved(&mut small, "cr-b", "test-zone-2", 1);
        let large = fake::instance_type("large", 8, crate::quantity::Quantity::from_gibibytes(8), 5, "amd64");
        vec![small, large]
    }

    #[test]
    fn templates_without_reservations_have_no_table() {
        let plain = [fake::instance_type("x", 2, crate::quantity::Quantity::from_gibibytes(2), 5, "amd64")];
        let m = ReservationManager::new([(&plain[..], vec![0])]);
        assert!(m.by_template[0].is_empty());
        assert_eq!(m.to_reserve(0, &[], &[0], &Requirements::new()), Ok(vec![]));
    }

    #[test]
    fn capacity_is_the_smallest_count_across_nodepools() {
        let a = types();
        let mut b = types();
        b[0].offerings.last_mut().unwrap().reservation = Some(Arc::new(ReservedCapacity {
            available_instances: 0,
            ..(**b[0].offerings.last().unwrap().reservation.as_ref().unwrap()).clone()
        }));
        let m = ReservationManager::new([(&a[..], vec![0, 1]), (&b[..], vec![0, 1])]);
        assert_eq!(m.launch_capacity(), BTreeMap::from([("cr-a".to_string(), 2), ("cr-b".to_string(), 0)]));
    }

    #[test]
    fn pessimistic_reservation_release_and_errors() {
        let its = types();
        let mut m = ReservationManager::new([(&its[..], vec![0, 1])]);
        let any = Requirements::new();
        // A NodeClaim that could launch `small` holds one instance of both reservations.
        let mut first = Held::new();
        let r = m.to_reserve(0, &first, &[0, 1], &any).unwrap();
        assert_eq!(r, vec![0, 1]);
        m.commit(&mut first, r);
        assert_eq!(m.remaining, vec![1, 0]);
        // A second one only gets cr-a; a third none: Exhausted (cr-a is full, cr-b too).
        let mut second = Held::new();
        let r = m.to_reserve(0, &second, &[0], &any).unwrap();
        assert_eq!(r, vec![0]);
        m.commit(&mut second, r);
        assert_eq!(m.to_reserve(0, &[], &[0, 1], &any), Err(Conflict::Exhausted(vec![0, 1])));
        // Only `large` left (no reserved offering): no conflict for a fresh NodeClaim...
        assert_eq!(m.to_reserve(0, &[], &[1], &any), Ok(vec![]));
        // ...but a NodeClaim holding reservations would lose them all.
        assert_eq!(m.to_reserve(0, &first, &[1], &any), Err(Conflict::WouldDropAll(vec![0, 1])));
        // Narrowing the first to zone 1 releases cr-b; the holder keeps cr-a at zero capacity.
        let zone1: Requirements =
            [Requirement::in_values(labels::TOPOLOGY_ZONE, &["test-zone-1"])].into_iter().collect();
        let r = m.to_reserve(0, &first, &[0], &zone1).unwrap();
        assert_eq!(r, vec![0]);
        m.commit(&mut first, r);
        assert_eq!(m.remaining, vec![0, 1]);
        let d = m.describe(&Conflict::Exhausted(vec![0]), [&first, &second].into_iter());
        let ReservationConflict::Exhausted { reservations } = d else { panic!("{d:?}") };
        assert_eq!((reservations[0].available, reservations[0].left, reservations[0].held_by), (2, 0, 2));
    }

    #[test]
    fn finalize_pins_capacity_type_and_ids() {
        let its = types();
        let m = ReservationManager::new([(&its[..], vec![0, 1])]);
        let mut reqs: Requirements =
            [Requirement::in_values(labels::CAPACITY_TYPE, &["spot", "on-demand", "reserved"])].into_iter().collect();
        m.finalize_requirements(&[1], &mut reqs);
        assert_eq!(reqs.get(labels::CAPACITY_TYPE).values().collect::<Vec<_>>(), ["reserved"]);
        assert_eq!(reqs.get(aws::CAPACITY_RESERVATION_ID).values().collect::<Vec<_>>(), ["cr-b"]);
    }
}
