//! DaemonSet overhead (upstream `scheduler.go::getDaemonSetPods / buildDaemonOverheadGroups /
//! isDaemonPodCompatible`, `existingnode.go`).
//!
//! A DaemonSet is modelled by a pod built from its template (limits standing in for missing
//! requests), whose required node affinity is the template's. Per NodePool template and instance
//! type it is compatible when it tolerates the template taints (PreferNoSchedule implicitly
//! tolerated), its strict requirements are compatible with the template's (which include
//! `karpenter.sh/registered` and `karpenter.sh/initialized` = true) and they intersect the
//! instance type's; failing that, the required node-affinity terms are tried one by one.
//! Instance types with the same compatible DaemonSets form a group with the summed overhead.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Pod, Taint};

use crate::catalogue::InstanceType;
use crate::labels;
use crate::requirements::{AllowUndefined, Requirement, Requirements};
use crate::resources::{self, ResourceList};

use super::hostports::HostPort;
use super::pod::{PodData, Preferences};
use super::taints;

/// A DaemonSet's pod as the scheduler counts it.
#[derive(Debug, Clone)]
pub struct Daemon {
    /// `namespace/name` of the DaemonSet.
    pub name: String,
    pub pod: PodData,
}

/// The daemons of the input, in input order. DaemonSets whose template cannot be read are
/// returned as errors (`namespace/name`, message).
pub fn daemons(daemonsets: &[DaemonSet]) -> (Vec<Daemon>, Vec<(String, String)>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for ds in daemonsets {
        let namespace = ds.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let name = format!("{namespace}/{}", ds.metadata.name.as_deref().unwrap_or_default());
        let Some(spec) = &ds.spec else { continue };
        // upstream skips daemon pods with DRA claims while --ignore-dra-requests (the default).
        if spec.template.spec.as_ref().and_then(|s| s.resource_claims.as_ref()).is_some_and(|c| !c.is_empty()) {
            continue;
        }
        let pod = Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: ds.metadata.name.clone(),
                namespace: Some(namespace),
                labels: spec.template.metadata.as_ref().and_then(|m| m.labels.clone()),
                ..Default::default()
            },
            spec: spec.template.spec.clone(),
            status: None,
        };
        match PodData::read(&pod) {
            Ok(mut pod) => {
                // A template is not a Pod: the API server's hostNetwork port defaulting
                // (`SetDefaults_Pod`) never reaches it, and upstream reads the template as stored.
                pod.host_ports = super::hostports::spec_host_ports(spec.template.spec.as_ref(), false);
                out.push(Daemon { name, pod })
            }
            Err(e) => errors.push((name, e.to_string())),
        }
    }
    (out, errors)
}

/// Daemon requirements to try: the strict requirements with each required term in turn (OR
/// semantics; upstream drops terms one by one), or the nodeSelector alone without terms.
pub(crate) fn daemon_requirement_options(d: &Daemon) -> Vec<Requirements> {
    let n = d.pod.required_terms.len().max(1);
    (0..n).map(|i| d.pod.strict_requirements(&Preferences { dropped_required: i, ..Default::default() })).collect()
}

/// One group of instance types sharing the same compatible daemons.
#[derive(Debug, Clone, Default)]
pub struct DaemonGroup {
    pub daemons: Vec<String>,
    /// Summed requests of the daemons (each includes `pods: 1`).
    pub overhead: ResourceList,
    pub host_ports: Vec<HostPort>,
}

/// Groups `types` (indices into `instance_types`) by the daemons compatible with the template and
/// each type. Returns the groups and, aligned with `types`, each type's group.
pub fn overhead_groups(
    daemons: &[Daemon],
    template_requirements: &Requirements,
    template_taints: &[Taint],
    instance_types: &[InstanceType],
    types: &[usize],
) -> (Vec<DaemonGroup>, Vec<usize>) {
    let mut sim = template_requirements.clone();
    sim.add(Requirement::in_values(labels::NODE_REGISTERED, &["true"]));
    sim.add(Requirement::in_values(labels::NODE_INITIALIZED, &["true"]));
    // Per daemon: tolerates the taints, and the requirement options compatible with the template.
    let candidates: Vec<(usize, Vec<Requirements>)> = daemons
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            let mut tolerations = d.pod.tolerations.clone();
            tolerations.push(taints::prefer_no_schedule_toleration());
            if taints::first_untolerated(template_taints, &tolerations).is_some() {
                return None;
            }
            let options: Vec<Requirements> = daemon_requirement_options(d)
                .into_iter()
                .filter(|r| sim.is_compatible(r, AllowUndefined::WellKnownLabels))
                .collect();
            (!options.is_empty()).then_some((i, options))
        })
        .collect();
    let mut groups: Vec<DaemonGroup> = Vec::new();
    let mut by_key: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
    let mut group_of = Vec::with_capacity(types.len());
    for &t in types {
        let it = &instance_types[t];
        let key: Vec<usize> = candidates
            .iter()
            .filter(|(_, options)| options.iter().any(|r| it.requirements.has_intersection(r)))
            .map(|(i, _)| *i)
            .collect();
        let g = *by_key.entry(key.clone()).or_insert_with(|| {
            let mut group = DaemonGroup::default();
            for &i in &key {
                group.daemons.push(daemons[i].name.clone());
                resources::add_into(&mut group.overhead, &daemons[i].pod.requests);
                group.host_ports.extend(daemons[i].pod.host_ports.iter().cloned());
            }
            groups.push(group);
            groups.len() - 1
        });
        group_of.push(g);
    }
    if groups.is_empty() {
        groups.push(DaemonGroup::default());
    }
    (groups, group_of)
}

/// Whether a daemon would run on an existing node (upstream `isDaemonPodCompatibleWithNode`): it
/// tolerates the node's effective taints (no implicit PreferNoSchedule toleration here) and its
/// strict requirements (first required term only; no term relaxation for existing nodes) are
/// compatible with the node's labels, strictly.
pub fn runs_on_node(d: &Daemon, node_taints: &[Taint], node_requirements: &Requirements) -> bool {
    taints::first_untolerated(node_taints, &d.pod.tolerations).is_none()
        && node_requirements.is_compatible(&d.pod.strict_requirements(&Preferences::default()), AllowUndefined::Nothing)
}

/// The element-wise minimum of the overheads (only resources present in all of them), upstream
/// `FinalizeScheduling`'s daemon overhead.
pub fn min_overhead<'a>(overheads: impl IntoIterator<Item = &'a ResourceList>) -> ResourceList {
    let mut iter = overheads.into_iter();
    let Some(first) = iter.next() else { return ResourceList::new() };
    let mut out = first.clone();
    for o in iter {
        out = out
            .into_iter()
            .filter_map(|(k, v)| o.get(&k).map(|w| (k, crate::quantity::Quantity::min(v, *w))))
            .collect();
    }
    out
}
