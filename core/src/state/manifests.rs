//! The round's input built from loaded manifests (upstream: cluster state plus
//! `CloudProvider.GetInstanceTypes` per NodePool). No I/O: the catalogue is the embedded one.

use std::collections::HashMap;
use std::sync::Arc;

use crate::api::ec2nodeclass::{EC2NodeClass, EC2NodeClassSpec};
use crate::catalogue::reservations::{self, ReservedCapacity};
use crate::catalogue::{Catalogue, CatalogueError, InstanceType};
use crate::manifest::scenario::DEFAULT_REGION;
use crate::manifest::Manifests;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::{Input, NodePoolInput, Options};

/// The input's claims plus the `implied` ones it does not hold, with a note naming the latter.
pub(crate) fn claims(
    manifests: &Manifests,
    implied: Vec<PersistentVolumeClaim>,
    notes: &mut Vec<String>,
) -> Vec<PersistentVolumeClaim> {
    let key = |c: &PersistentVolumeClaim| {
        (c.metadata.namespace.clone().unwrap_or_else(|| "default".into()), c.metadata.name.clone().unwrap_or_default())
    };
    let mut seen: std::collections::BTreeSet<(String, String)> = manifests.pvcs.iter().map(key).collect();
    let mut out = manifests.pvcs.clone();
    let mut added = Vec::new();
    for claim in implied {
        let k = key(&claim);
        if seen.insert(k.clone()) {
            added.push(k);
            out.push(claim);
        }
    }
    if !added.is_empty() {
        let names: Vec<String> = added.iter().take(5).map(|(ns, n)| format!("{ns}/{n}")).collect();
        let more = if added.len() > 5 { format!(" and {} more", added.len() - 5) } else { String::new() };
        notes.push(format!(
            "{} PersistentVolumeClaim{} not in the input assumed created, unbound, from StatefulSet volumeClaimTemplates \
             or ephemeral volume templates: {}{more}",
            added.len(),
            if added.len() == 1 { "" } else { "s" },
            names.join(", ")
        ));
    }
    out
}

/// Why the view of a round cannot be built from the manifests.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StateError {
    /// The region (given, or the Scenario's) is not in the catalogue.
    #[error("unknown region {region:?}; the catalogue has {}", known.join(", "))]
    UnknownRegion { region: String, known: Vec<String> },
    /// A Scenario capacity reservation is in a zone of another region (`--region` may differ
    /// from the Scenario's, against which loading checked it).
    #[error("Scenario spec.capacityReservations[{index}].availabilityZone: {zone:?} ({id}) is not a zone of {region}")]
    ReservationZone { index: usize, zone: String, id: String, region: String },
    /// The catalogue cannot list a NodePool's instance types for its EC2NodeClass.
    #[error("NodePool {nodepool}: no instance types")]
    InstanceTypes {
        nodepool: String,
        #[source]
        source: CatalogueError,
    },
}

/// The input and what was assumed to build it.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub input: Input,
    pub region: String,
    /// Assumptions worth telling the user (a missing EC2NodeClass, for instance).
    pub notes: Vec<String>,
}

/// Builds the round's input from `manifests` (legacy objects already converted). The region is
/// `region` if given, else the Scenario's, else us-east-1. Every pod of the input takes part:
/// standalone pods and the pods of Deployments, ReplicaSets, StatefulSets and Jobs.
pub fn input_from_manifests(
    manifests: &Manifests,
    catalogue: &Catalogue,
    region: Option<&str>,
) -> Result<Prepared, StateError> {
    let region = region
        .map(str::to_string)
        .or_else(|| manifests.scenario.as_ref().map(|s| s.spec.region.clone()))
        .unwrap_or_else(|| DEFAULT_REGION.to_string());
    if !catalogue.regions().any(|r| r == region) {
        return Err(StateError::UnknownRegion { region, known: catalogue.regions().map(str::to_string).collect() });
    }
    let mut notes = Vec::new();
    let world = manifests.scenario.as_ref().map(|s| s.spec.capacity_reservations.as_slice()).unwrap_or(&[]);
    check_reservation_zones(catalogue, &region, world)?;
    let now = manifests.scenario.as_ref().and_then(|s| s.start_seconds());
    let selected: HashMap<&str, Vec<ReservedCapacity>> = manifests
        .nodeclasses
        .iter()
        .map(|nc| (nc.name(), nodeclass_reservations(nc, world, now, catalogue, &region, &mut notes)))
        .collect();
    for r in world {
        if !selected.values().flatten().any(|s| s.id == r.id) {
            notes.push(format!(
                "capacity reservation {} (Scenario spec.capacityReservations) is selected by no EC2NodeClass's \
                 capacityReservationSelectorTerms; it offers nothing",
                r.id
            ));
        }
    }
    // The instance types of each EC2NodeClass with its reserved offerings, built once per class.
    let mut with_reservations: HashMap<&str, Arc<Vec<InstanceType>>> = HashMap::new();
    let mut nodepools = Vec::new();
    for np in &manifests.nodepools {
        let nodeclass = manifests.nodeclass_for(np);
        let spec = match nodeclass {
            Some(nc) => nc.spec.clone(),
            None => {
                notes.push(format!(
                    "NodePool {} refers to EC2NodeClass {:?}, which is not in the input; assuming the default \
                     (AL2023, no kubelet overrides, default block devices)",
                    np.name(),
                    np.spec.template.spec.node_class_ref.name
                ));
                EC2NodeClassSpec::default()
            }
        };
        let subnets = nodeclass.and_then(|nc| nc.status.as_ref()).map_or(&[][..], |s| s.subnets.as_slice());
        let mut instance_types = catalogue
            .instance_types_in_subnets(&region, &spec, subnets)
            .map_err(|source| StateError::InstanceTypes { nodepool: np.name().to_string(), source })?;
        if let Some((nc, reserved)) = nodeclass.and_then(|nc| Some((nc, selected.get(nc.name())?))) {
            if let Some(types) = with_reservations.get(nc.name()) {
                instance_types = types.clone();
            } else if !reserved.is_empty() {
                instance_types = catalogue
                    .with_reservations(&region, &spec, instance_types, reserved)
                    .map_err(|source| StateError::InstanceTypes { nodepool: np.name().to_string(), source })?;
                with_reservations.insert(nc.name(), instance_types.clone());
            }
        }
        nodepools.push(NodePoolInput { nodepool: np.clone(), instance_types });
    }
    let (pods, implied) = crate::manifest::workloads::pods(manifests);
    let pvcs = claims(manifests, implied, &mut notes);
    let input = Input {
        nodepools,
        nodes: manifests.nodes.clone(),
        nodeclaims: manifests.nodeclaims.clone(),
        pods,
        daemonsets: manifests.daemonsets.clone(),
        pdbs: manifests.pdbs.clone(),
        unavailable_offerings: manifests
            .scenario
            .as_ref()
            .map(|s| s.spec.unavailable_offerings.clone())
            .unwrap_or_default(),
        options: Options {
            min_values_policy: manifests.scenario.as_ref().and_then(|s| s.spec.min_values_policy).unwrap_or_default(),
            now,
            ..Options::default()
        },
        pvcs,
        pvs: manifests.pvs.clone(),
        storage_classes: manifests.storageclasses.clone(),
        csinodes: manifests.csinodes.clone(),
        pod_requests: None,
    };
    Ok(Prepared { input, region, notes })
}

/// Every Scenario reservation must be in a zone of the round's region (`--region` may differ from
/// the Scenario's, against which loading checked them).
fn check_reservation_zones(
    catalogue: &Catalogue,
    region: &str,
    world: &[reservations::Ec2CapacityReservation],
) -> Result<(), StateError> {
    let zones = catalogue.zones(region).unwrap_or(&[]);
    for (i, r) in world.iter().enumerate() {
        if !zones.iter().any(|z| z.name == r.availability_zone) {
            return Err(StateError::ReservationZone {
                index: i,
                zone: r.availability_zone.clone(),
                id: r.id.clone(),
                region: region.to_string(),
            });
        }
    }
    Ok(())
}

/// The reservations an EC2NodeClass's selector terms select among the Scenario's (upstream's
/// nodeclass controller re-resolves `status.capacityReservations` every minute, so a pasted status
/// that disagrees is reported and not used), with notes on reservations that cannot be offered.
fn nodeclass_reservations(
    nc: &EC2NodeClass,
    world: &[reservations::Ec2CapacityReservation],
    now: Option<i64>,
    catalogue: &Catalogue,
    region: &str,
    notes: &mut Vec<String>,
) -> Vec<ReservedCapacity> {
    let terms = &nc.spec.capacity_reservation_selector_terms;
    let selected = reservations::select(terms, world, now);
    let status: Vec<&str> =
        nc.status.as_ref().map(|s| s.capacity_reservations.iter().map(|r| r.id.as_str()).collect()).unwrap_or_default();
    let ids: Vec<&str> = selected.iter().map(|r| r.id.as_str()).collect();
    if !terms.is_empty() && world.is_empty() {
        notes.push(format!(
            "EC2NodeClass {} selects capacity reservations, but the Scenario describes none \
             (spec.capacityReservations, with availableInstanceCount); no reserved offerings",
            nc.name()
        ));
    } else if !status.is_empty() && {
        let mut sorted = status.clone();
        sorted.sort_unstable();
        sorted != ids
    } {
        notes.push(format!(
            "EC2NodeClass {}: status.capacityReservations lists [{}], but its capacityReservationSelectorTerms select \
             [{}] among the Scenario's reservations; the latter are used",
            nc.name(),
            status.join(", "),
            ids.join(", ")
        ));
    }
    for r in &selected {
        let offered = catalogue.offered_zones(region, &r.instance_type);
        if !offered.iter().any(|z| z.name == r.zone) {
            notes.push(format!(
                "capacity reservation {}: the catalogue does not offer {} in {}; its reserved offering is unavailable",
                r.id, r.instance_type, r.zone
            ));
        }
    }
    selected
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODECLASS: &str = "apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  capacityReservationSelectorTerms: [{tags: {team: ml}}]
status:
  capacityReservations:
  - {id: cr-stale, availabilityZone: us-east-1a, instanceType: m5.large, instanceMatchCriteria: open, ownerID: \"123456789012\"}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m}}}]
";

    fn scenario(reservations: &str) -> String {
        format!("apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec:\n  capacityReservations:\n{reservations}---\n{NODECLASS}")
    }

    #[test]
    fn selected_reservations_become_reserved_offerings() {
        let text = scenario(
            "  - {id: cr-ml, instanceType: m5.large, availabilityZone: us-east-1b, availableInstanceCount: 1, tags: {team: ml}}\n  - {id: cr-other, instanceType: m5.large, availabilityZone: us-east-1a, availableInstanceCount: 1}\n",
        );
        let m = crate::manifest::load(&text).unwrap();
        let prepared = input_from_manifests(&m, Catalogue::embedded(), None).unwrap();
        let notes = prepared.notes.join("\n");
        assert!(notes.contains("lists [cr-stale], but its capacityReservationSelectorTerms select [cr-ml]"), "{notes}");
        assert!(
            notes.contains("cr-other (Scenario spec.capacityReservations) is selected by no EC2NodeClass"),
            "{notes}"
        );
        let r = crate::scheduling::schedule(&prepared.input);
        let launch = r.nodeclaims[0].launch.as_ref().unwrap();
        assert_eq!(
            (launch.instance_type.as_str(), launch.capacity_type.as_str(), launch.zone.as_str()),
            ("m5.large", "reserved", "us-east-1b")
        );
        assert_eq!(launch.reservation_id.as_deref(), Some("cr-ml"));
    }

    #[test]
    fn a_region_without_the_reservation_zone_is_an_error() {
        let text = scenario(
            "  - {id: cr-ml, instanceType: m5.large, availabilityZone: us-east-1b, availableInstanceCount: 1, tags: {team: ml}}\n",
        );
        let m = crate::manifest::load(&text).unwrap();
        let e = input_from_manifests(&m, Catalogue::embedded(), Some("eu-west-1")).unwrap_err();
        assert!(matches!(&e, StateError::ReservationZone { index: 0, region, .. } if region == "eu-west-1"), "{e:?}");
        assert!(e.to_string().contains("spec.capacityReservations[0].availabilityZone"), "{e}");
    }

    #[test]
    fn selector_terms_without_a_scenario_are_noted() {
        let m = crate::manifest::load(NODECLASS).unwrap();
        let prepared = input_from_manifests(&m, Catalogue::embedded(), None).unwrap();
        assert!(prepared.notes.iter().any(|n| n.contains("the Scenario describes none")), "{:?}", prepared.notes);
        let r = crate::scheduling::schedule(&prepared.input);
        assert_ne!(r.nodeclaims[0].launch.as_ref().unwrap().capacity_type, "reserved");
    }
}
