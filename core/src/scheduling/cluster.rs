//! The round's input built from loaded manifests (upstream: cluster state plus
//! `CloudProvider.GetInstanceTypes` per NodePool). No I/O: the catalogue is the embedded one.

use crate::api::ec2nodeclass::EC2NodeClassSpec;
use crate::catalogue::Catalogue;
use crate::manifest::scenario::DEFAULT_REGION;
use crate::manifest::Manifests;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use super::scheduler::{Input, NodePoolInput, Options};
use super::volumes;

/// [`Manifests::all_pods`], with each StatefulSet pod given the PersistentVolumeClaim volumes of
/// its `volumeClaimTemplates` (`<template>-<pod>`), as the StatefulSet controller creates them, so
/// that volume topology is not silently ignored; and the claims those controllers (and the
/// ephemeral volume controller, `<pod>-<volume>`) would have created, for the ones the input does
/// not hold.
fn pods(manifests: &Manifests) -> (Vec<Pod>, Vec<PersistentVolumeClaim>) {
    use crate::manifest::workloads;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Volume};
    let mut claims = Vec::new();
    let mut out = manifests.pods.clone();
    out.extend(manifests.deployments.iter().flat_map(workloads::deployment_pods));
    out.extend(manifests.replicasets.iter().flat_map(workloads::replicaset_pods));
    for sts in &manifests.statefulsets {
        let templates = sts.spec.as_ref().and_then(|s| s.volume_claim_templates.clone()).unwrap_or_default();
        for mut pod in workloads::statefulset_pods(sts) {
            let pod_name = pod.metadata.name.clone().unwrap_or_default();
            let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            if let Some(spec) = pod.spec.as_mut() {
                for t in &templates {
                    let name = t.metadata.name.clone().unwrap_or_default();
                    if let Some(template_spec) = &t.spec {
                        claims.push(volumes::claim_from_template(
                            &namespace,
                            format!("{name}-{pod_name}"),
                            template_spec,
                        ));
                    }
                    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
                        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                            claim_name: format!("{name}-{pod_name}"),
                            read_only: None,
                        }),
                        name,
                        ..Default::default()
                    });
                }
            }
            out.push(pod);
        }
    }
    out.extend(manifests.jobs.iter().flat_map(workloads::job_pods));
    claims.extend(out.iter().flat_map(volumes::ephemeral_claims));
    (out, claims)
}

/// The input's claims plus the `implied` ones it does not hold, with a note naming the latter.
fn claims(
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
) -> Result<Prepared, String> {
    let region = region
        .map(str::to_string)
        .or_else(|| manifests.scenario.as_ref().map(|s| s.spec.region.clone()))
        .unwrap_or_else(|| DEFAULT_REGION.to_string());
    if !catalogue.regions().any(|r| r == region) {
        return Err(format!(
            "unknown region {region:?}; the catalogue has {}",
            catalogue.regions().collect::<Vec<_>>().join(", ")
        ));
    }
    let mut notes = Vec::new();
    let mut nodepools = Vec::new();
    for np in &manifests.nodepools {
        let spec = match manifests.nodeclass_for(np) {
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
        let instance_types =
            catalogue.instance_types_shared(&region, &spec).map_err(|e| format!("NodePool {}: {e}", np.name()))?;
        nodepools.push(NodePoolInput { nodepool: np.clone(), instance_types });
    }
    let (pods, implied) = pods(manifests);
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
            ..Options::default()
        },
        pvcs,
        pvs: manifests.pvs.clone(),
        storage_classes: manifests.storageclasses.clone(),
        csinodes: manifests.csinodes.clone(),
    };
    Ok(Prepared { input, region, notes })
}
