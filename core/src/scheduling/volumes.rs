//! Volumes (upstream `provisioning/scheduling/volumetopology.go`, `pkg/scheduling/volumeusage.go`
//! and `pkg/utils/volume`):
//!
//! - **volume topology** ([`PodVolumes::alternatives`]): where a pod's PersistentVolumeClaims let
//!   it run. A bound claim contributes its PersistentVolume's `nodeAffinity.required` terms, an
//!   unbound one its StorageClass's `allowedTopologies` terms, each term one alternative; several
//!   volumes combine as a cross product. The scheduler adds an alternative to the *node's*
//!   requirements only, never to the pod's, so topology spread counts and domains keep using the
//!   pod's own affinity; it tries the alternatives in order, the first that fits wins, and
//!   relaxation never removes them ([`try_alternatives`]);
//! - **volume limits** ([`NodeVolumes`]): per CSI driver, an existing node's CSINode
//!   `allocatable.count` caps the distinct claims of its pods. New NodeClaims are never limited;
//! - **validation** ([`PodVolumes::resolve`]): a pending pod whose claim is missing, lost, bound
//!   to a missing volume, or unbound without a usable StorageClass is ignored, as upstream's
//!   `ValidatePersistentVolumeClaims`;
//!
//! The claims the StatefulSet and ephemeral-volume controllers would create, for inputs that
//! never went through a cluster, are made with the workloads' pods
//! ([`crate::manifest::workloads`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::labels;
use crate::requirements::{AllowUndefined, IncompatibleReason, Operator, Requirement, Requirements};

use super::explain::{IgnoreReason, VolumeConflict, VolumeLimit, VolumeOrigin, VolumeProblem};

/// The AWS EBS CSI driver.
pub const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";

/// In-tree volume plugin names and the CSI drivers that replace them (the plugins
/// `k8s.io/csi-translation-lib` registers, which upstream uses to name a StorageClass's driver).
const IN_TREE_TO_CSI: [(&str, &str); 7] = [
    ("kubernetes.io/aws-ebs", EBS_CSI_DRIVER),
    ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    ("kubernetes.io/azure-file", "file.csi.azure.com"),
    ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
    ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
];

/// The CSI driver a provisioner stands for: in-tree plugin names are translated, anything else
/// is already a CSI driver name.
pub fn csi_driver_name(provisioner: &str) -> &str {
    IN_TREE_TO_CSI.iter().find(|(in_tree, _)| *in_tree == provisioner).map_or(provisioner, |(_, csi)| csi)
}

/// The claim a pod volume uses, if any (upstream `volume.GetPersistentVolumeClaim`): a
/// `persistentVolumeClaim` volume names it; a generic ephemeral volume's claim is
/// `<pod>-<volume>`.
fn claim_name(pod_name: &str, volume: &Volume) -> Option<String> {
    if let Some(source) = &volume.persistent_volume_claim {
        return Some(source.claim_name.clone());
    }
    volume.ephemeral.as_ref().map(|_| format!("{pod_name}-{}", volume.name))
}

fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or("default")
}

fn bound_volume(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).filter(|v| !v.is_empty())
}

/// The claims, volumes, classes and CSINodes of the round, indexed by name.
pub struct Storage<'a> {
    claims: HashMap<(&'a str, &'a str), &'a PersistentVolumeClaim>,
    volumes: HashMap<&'a str, &'a PersistentVolume>,
    classes: HashMap<&'a str, &'a StorageClass>,
    csinodes: HashMap<&'a str, &'a CSINode>,
    default_class: Option<&'a str>,
}

impl<'a> Storage<'a> {
    pub fn new(
        claims: &'a [PersistentVolumeClaim],
        volumes: &'a [PersistentVolume],
        classes: &'a [StorageClass],
        csinodes: &'a [CSINode],
    ) -> Storage<'a> {
        let name = |m: &'a ObjectMeta| m.name.as_deref().unwrap_or("");
        // The API server's DefaultStorageClass admission picks the newest default class, then
        // the first by name.
        let default_class = classes
            .iter()
            .filter(|c| {
                let annotations = c.metadata.annotations.as_ref();
                crate::labels::DEFAULT_STORAGE_CLASS
                    .iter()
                    .any(|a| annotations.and_then(|m| m.get(*a)).is_some_and(|v| v == "true"))
            })
            .max_by(|a, b| {
                a.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0)
                    .cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0))
                    .then_with(|| name(&b.metadata).cmp(name(&a.metadata)))
            })
            .map(|c| name(&c.metadata));
        Storage {
            claims: claims.iter().map(|c| ((namespace_of(&c.metadata), name(&c.metadata)), c)).collect(),
            volumes: volumes.iter().map(|v| (name(&v.metadata), v)).collect(),
            classes: classes.iter().map(|c| (name(&c.metadata), c)).collect(),
            csinodes: csinodes.iter().map(|c| (name(&c.metadata), c)).collect(),
            default_class,
        }
    }

    /// The claim's storage class: its own, or when unset the default StorageClass (what the API
    /// server's DefaultStorageClass admission, or the volume controller's retroactive assignment,
    /// writes into a claim a cluster holds). An empty class (`""`) stays empty: it opts out.
    fn class_name(&self, claim: &'a PersistentVolumeClaim) -> &'a str {
        match claim.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()) {
            Some(class) => class,
            None => self.default_class.unwrap_or(""),
        }
    }

    /// Upstream `ValidatePersistentVolumeClaims` for one claim (the checks kube-scheduler's volume
    /// binding also rejects). The AWS provider registers no unsupported provisioners or topology
    /// keys, so those two checks never fail.
    fn validate(&self, claim: &'a PersistentVolumeClaim) -> Result<(), VolumeProblem> {
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(VolumeProblem::ClaimDeleting);
        }
        if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
            return Err(VolumeProblem::ClaimLost);
        }
        if let Some(name) = bound_volume(claim) {
            let persistent_volume = name.to_string();
            let Some(volume) = self.volumes.get(name) else {
                return Err(VolumeProblem::PersistentVolumeNotFound { persistent_volume });
            };
            if volume.metadata.deletion_timestamp.is_some() {
                return Err(VolumeProblem::PersistentVolumeDeleting { persistent_volume });
            }
            // upstream: kube-scheduler treats a claim with a volumeName but without this
            // annotation as unbound.
            if !claim.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(crate::labels::PV_BIND_COMPLETED)) {
                return Err(VolumeProblem::BindNotCompleted { persistent_volume });
            }
            return Ok(());
        }
        let class = self.class_name(claim);
        if class.is_empty() {
            return Err(VolumeProblem::NoStorageClass);
        }
        let Some(storage_class) = self.classes.get(class) else {
            return Err(VolumeProblem::StorageClassNotFound { storage_class: class.to_string() });
        };
        // The API server defaults an unset volumeBindingMode to Immediate.
        match storage_class.volume_binding_mode.as_deref() {
            None => Err(VolumeProblem::ImmediateBinding { storage_class: class.to_string(), defaulted: true }),
            Some("Immediate") => {
                Err(VolumeProblem::ImmediateBinding { storage_class: class.to_string(), defaulted: false })
            }
            Some(_) => Ok(()),
        }
    }

    /// Upstream `VolumeTopology.getRequirements` for one claim: where it comes from and its
    /// alternatives (none: unconstrained).
    fn topology(
        &self,
        claim: &'a PersistentVolumeClaim,
    ) -> Result<Option<(VolumeOrigin, Vec<Requirements>)>, VolumeProblem> {
        if let Some(name) = bound_volume(claim) {
            let Some(volume) = self.volumes.get(name) else {
                return Err(VolumeProblem::PersistentVolumeNotFound { persistent_volume: name.to_string() });
            };
            let origin = VolumeOrigin::PersistentVolume { name: name.to_string() };
            let terms = volume_terms(volume)
                .map_err(|e| VolumeProblem::InvalidTopology { origin: origin.clone(), message: e.to_string() })?;
            return Ok(Some((origin, terms)));
        }
        let class = self.class_name(claim);
        if class.is_empty() {
            return Ok(None);
        }
        let Some(storage_class) = self.classes.get(class) else {
            return Err(VolumeProblem::StorageClassNotFound { storage_class: class.to_string() });
        };
        let origin = VolumeOrigin::StorageClass { name: class.to_string() };
        let mut terms = Vec::new();
        for term in storage_class.allowed_topologies.iter().flatten() {
            let mut requirements = Requirements::new();
            for e in term.match_label_expressions.iter().flatten() {
                let r = Requirement::new(&e.key, Operator::In, &e.values)
                    .map_err(|e| VolumeProblem::InvalidTopology { origin: origin.clone(), message: e.to_string() })?;
                requirements.add(r);
            }
            if !requirements.is_empty() {
                terms.push(requirements);
            }
        }
        Ok(Some((origin, terms)))
    }

    /// Upstream `ResolveDriver`: a bound claim's driver comes from its volume (`csi.driver`, or
    /// the EBS driver for an in-tree EBS volume; any other volume is not counted), an unbound
    /// one's from its StorageClass's provisioner (no class, or a missing one: not counted).
    /// `Err` names a bound volume that is missing.
    fn driver(&self, claim: &'a PersistentVolumeClaim) -> Result<Option<&'a str>, &'a str> {
        if let Some(name) = bound_volume(claim) {
            let volume = self.volumes.get(name).ok_or(name)?;
            let spec = volume.spec.as_ref();
            if let Some(csi) = spec.and_then(|s| s.csi.as_ref()) {
                return Ok(Some(csi.driver.as_str()));
            }
            return Ok(spec.and_then(|s| s.aws_elastic_block_store.as_ref()).map(|_| EBS_CSI_DRIVER));
        }
        let class = self.class_name(claim);
        Ok(self.classes.get(class).filter(|_| !class.is_empty()).map(|c| csi_driver_name(&c.provisioner)))
    }
}

/// A PersistentVolume's `nodeAffinity.required` terms, each one alternative. For `local` and
/// `hostPath` volumes the hostname expressions are dropped (upstream: the pod is being placed on
/// a new node anyway) and a term that held only those becomes an unconstrained alternative.
fn volume_terms(volume: &PersistentVolume) -> Result<Vec<Requirements>, crate::requirements::RequirementError> {
    let Some(spec) = volume.spec.as_ref() else { return Ok(Vec::new()) };
    let node_local = spec.local.is_some() || spec.host_path.is_some();
    let terms = spec.node_affinity.as_ref().and_then(|a| a.required.as_ref()).map(|r| r.node_selector_terms.as_slice());
    let mut out = Vec::new();
    for term in terms.unwrap_or(&[]) {
        let expressions = term.match_expressions.as_deref().unwrap_or(&[]);
        let kept: Vec<NodeSelectorRequirement> = if node_local {
            expressions.iter().filter(|e| e.key != labels::HOSTNAME).cloned().collect()
        } else {
            expressions.to_vec()
        };
        if kept.is_empty() {
            if !expressions.is_empty() {
                out.push(Requirements::new());
            }
            continue;
        }
        out.push(Requirements::from_k8s_node_selector_requirements(&kept)?);
    }
    Ok(out)
}

/// Upstream `mergeVolumeRequirementAlternatives`: the cross product of the alternatives so far
/// and a volume's, keeping only compatible combinations; when none is compatible the whole
/// product is kept (upstream keeps its older behaviour there rather than failing the pod here).
fn cross(current: &[Requirements], volume: &[Requirements]) -> Vec<Requirements> {
    let merge = |a: &Requirements, b: &Requirements| {
        let mut merged = a.clone();
        merged.add_all(b);
        merged
    };
    let compatible: Vec<Requirements> = current
        .iter()
        .flat_map(|a| volume.iter().filter(|b| a.has_intersection(b)).map(move |b| merge(a, b)))
        .collect();
    if !compatible.is_empty() {
        return compatible;
    }
    current.iter().flat_map(|a| volume.iter().map(move |b| merge(a, b))).collect()
}

/// A volume that constrains topology, for explanations.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TopologySource {
    volume: String,
    claim: String,
    origin: VolumeOrigin,
    terms: Vec<Requirements>,
}

/// A pod's volumes as the scheduler uses them. Empty for pods without claims, which then pay
/// nothing more than the emptiness tests of `alternatives` and `usage`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumes {
    /// Volume topology alternatives, tried in order (empty: unconstrained).
    pub alternatives: Vec<Requirements>,
    sources: Vec<TopologySource>,
    /// (CSI driver, claim `namespace/name`), sorted, without duplicates.
    usage: Vec<(String, String)>,
}

impl PodVolumes {
    /// The volumes of `pod`. With `validate` (pending pods, upstream `Provisioner.Validate`) the
    /// claims are checked first; without it (pods of deleting nodes) only the lookups the
    /// topology needs can fail, as upstream's `GetRequirements`, whose failure drops the pod from
    /// the round. Either way a failure keeps the pod out of the round, with the reason.
    pub fn resolve(pod: &Pod, storage: &Storage<'_>, validate: bool) -> Result<PodVolumes, IgnoreReason> {
        let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
        if volumes.is_empty() {
            return Ok(PodVolumes::default());
        }
        let namespace = namespace_of(&pod.metadata);
        let pod_name = pod.metadata.name.as_deref().unwrap_or("");
        let ignored = |volume: &str, claim: &str, problem: VolumeProblem| IgnoreReason::Volume {
            volume: volume.to_string(),
            claim: format!("{namespace}/{claim}"),
            problem,
        };
        // Every claim is validated before any topology is looked up, as upstream validates the
        // pod before the round computes volume requirements.
        let mut claims = Vec::new();
        for volume in volumes {
            let Some(name) = claim_name(pod_name, volume) else { continue };
            let Some(claim) = storage.claims.get(&(namespace, name.as_str())).copied() else {
                return Err(ignored(&volume.name, &name, VolumeProblem::ClaimNotFound));
            };
            if validate {
                storage.validate(claim).map_err(|p| ignored(&volume.name, &name, p))?;
            }
            claims.push((volume.name.as_str(), name, claim));
        }
        let mut out = PodVolumes::default();
        for (volume, name, claim) in claims {
            if let Some((origin, terms)) = storage.topology(claim).map_err(|p| ignored(volume, &name, p))? {
                if !terms.is_empty() {
                    out.alternatives =
                        if out.sources.is_empty() { terms.clone() } else { cross(&out.alternatives, &terms) };
                    out.sources.push(TopologySource {
                        volume: volume.to_string(),
                        claim: format!("{namespace}/{name}"),
                        origin,
                        terms,
                    });
                }
            }
            // A bound volume that is missing was rejected above (validated) or by the topology
            // lookup (not validated), so only counted drivers are left here.
            if let Ok(Some(driver)) = storage.driver(claim) {
                out.usage.push((driver.to_string(), format!("{namespace}/{name}")));
            }
        }
        out.usage.sort();
        out.usage.dedup();
        Ok(out)
    }

    /// The first alternative compatible with `base` (the NodeClaim's and pod's requirements).
    pub fn first_compatible(&self, base: &Requirements, allow: AllowUndefined) -> Option<&Requirements> {
        self.alternatives.iter().find(|a| base.is_compatible(a, allow))
    }

    /// The explanation of `reason`, an alternative's incompatibility with a node or NodePool:
    /// its first key, attributed to the first volume that constrains that key.
    pub fn conflict(&self, reason: &IncompatibleReason) -> VolumeConflict {
        let (key, requires, offers) = match reason {
            IncompatibleReason::UndefinedLabel { key, incoming, .. } => (key.clone(), incoming.to_string(), None),
            IncompatibleReason::Conflicts(conflicts) => match conflicts.first() {
                Some(c) => (c.key.clone(), c.incoming.to_string(), Some(c.existing.to_string())),
                None => (String::new(), String::new(), None),
            },
        };
        let source = self.sources.iter().find(|s| s.terms.iter().any(|t| t.has(&key))).or(self.sources.first());
        VolumeConflict {
            volume: source.map(|s| s.volume.clone()).unwrap_or_default(),
            claim: source.map(|s| s.claim.clone()).unwrap_or_default(),
            origin: source.map(|s| s.origin.clone()).unwrap_or(VolumeOrigin::StorageClass { name: String::new() }),
            key,
            requires,
            offers,
            alternatives: self.alternatives.len(),
        }
    }
}

/// Upstream `CanAdd` over the volume topology alternatives: `without` when the pod has none,
/// else `with` for each alternative in order until one succeeds.
///
/// On failure upstream returns the last alternative's error. For the explanation this returns
/// the first alternative that got past the volume check (its failure is further along), else the
/// first volume conflict.
pub fn try_alternatives<T, E>(
    volumes: &PodVolumes,
    without: impl FnOnce() -> Result<T, E>,
    mut with: impl FnMut(&Requirements) -> Result<T, E>,
    is_volume_conflict: impl Fn(&E) -> bool,
) -> Result<T, E> {
    let mut failure: Option<E> = None;
    for alternative in &volumes.alternatives {
        match with(alternative) {
            Ok(t) => return Ok(t),
            Err(e) => {
                if failure.as_ref().is_none_or(|f| is_volume_conflict(f) && !is_volume_conflict(&e)) {
                    failure = Some(e);
                }
            }
        }
    }
    match failure {
        Some(e) => Err(e),
        None => without(),
    }
}

/// An existing node's CSI volume limits and the claims counted against them (upstream
/// `VolumeUsage` of a state node).
#[derive(Debug, Clone, Default)]
pub struct NodeVolumes {
    /// Per CSI driver, sorted by driver. Empty (no CSINode, or no driver with an allocatable
    /// count): nothing is limited or tracked.
    limits: Vec<(String, usize)>,
    /// Distinct claims per driver: the node's pods and the pods placed this round.
    attached: BTreeMap<String, BTreeSet<String>>,
    /// The first driver (by name) whose node is already over its limit.
    over: Option<VolumeLimit>,
}

impl NodeVolumes {
    /// The limits of node `node` from its CSINode, and the claims of the pods bound to it.
    /// Claims that cannot be counted are said in `notes`.
    pub fn new(node: &str, pods: &[&Pod], storage: &Storage<'_>, notes: &mut Vec<String>) -> NodeVolumes {
        let Some(csinode) = storage.csinodes.get(node) else { return NodeVolumes::default() };
        let drivers = csinode.spec.drivers.iter();
        // upstream `populateVolumeLimits`: a driver with `allocatable` but no count gets 0.
        let mut limits: Vec<(String, usize)> = drivers
            .filter_map(|d| {
                let count = d.allocatable.as_ref()?.count.unwrap_or(0);
                Some((d.name.clone(), usize::try_from(count).unwrap_or(0)))
            })
            .collect();
        if limits.is_empty() {
            return NodeVolumes::default();
        }
        limits.sort();
        let mut attached: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for pod in pods {
            let namespace = namespace_of(&pod.metadata);
            let pod_name = pod.metadata.name.as_deref().unwrap_or("");
            for volume in pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]) {
                let Some(name) = claim_name(pod_name, volume) else { continue };
                // upstream: a claim that no longer exists is skipped when counting.
                let Some(claim) = storage.claims.get(&(namespace, name.as_str())).copied() else { continue };
                match storage.driver(claim) {
                    Ok(Some(driver)) => {
                        attached.entry(driver.to_string()).or_default().insert(format!("{namespace}/{name}"));
                    }
                    Ok(None) => {}
                    Err(missing) => notes.push(format!(
                        "PersistentVolume {missing} (claim {namespace}/{name} of pod {namespace}/{pod_name}) is not in \
                         the input; it is not counted against node {node}'s volume limits"
                    )),
                }
            }
        }
        let over = limits.iter().find_map(|(driver, limit)| {
            let count = attached.get(driver).map_or(0, BTreeSet::len);
            (count > *limit).then(|| VolumeLimit { driver: driver.clone(), attached: count, limit: *limit, needs: 0 })
        });
        NodeVolumes { limits, attached, over }
    }

    /// Upstream `ExceedsLimits`: every limited driver of the union of the node's claims and the
    /// pod's must stay within its limit. Where upstream walks a Go map, the first driver by name
    /// is reported.
    pub fn fits(&self, pod: &PodVolumes) -> Result<(), VolumeLimit> {
        if self.limits.is_empty() {
            return Ok(());
        }
        if pod.usage.is_empty() {
            // The pod adds nothing; only a node already over a limit refuses it.
            return self.over.clone().map_or(Ok(()), Err);
        }
        for (driver, limit) in &self.limits {
            let attached = self.attached.get(driver);
            let count = attached.map_or(0, BTreeSet::len);
            let needs = pod
                .usage
                .iter()
                .filter(|(d, claim)| d == driver && !attached.is_some_and(|a| a.contains(claim)))
                .count();
            if count + needs > *limit {
                return Err(VolumeLimit { driver: driver.clone(), attached: count, limit: *limit, needs });
            }
        }
        Ok(())
    }

    /// Counts the pod's claims on the node.
    pub fn add(&mut self, pod: &PodVolumes) {
        if self.limits.is_empty() {
            return;
        }
        for (driver, claim) in &pod.usage {
            self.attached.entry(driver.clone()).or_default().insert(claim.clone());
        }
    }
}

#[cfg(test)]
mod tests;
