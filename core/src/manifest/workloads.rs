//! Workload objects expanded into the pods their controllers would create.
//!
//! Names are stable and readable (`inflate-0`, `inflate-1`, …) rather than the random suffixes the
//! real controllers use, so that explanations and tests can refer to them. Each pod keeps the
//! template's labels, annotations and spec, its workload's namespace, and an owner reference to
//! the workload (`controller: true`), which is how upstream recognises a pod's owner.
//!
//! The PersistentVolumeClaims the StatefulSet controller (`volumeClaimTemplates`) and the
//! ephemeral volume controller would create come with the pods (`pods`).

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::Manifests;

/// Pods of a Deployment: `spec.replicas` (default 1).
pub fn deployment_pods(d: &Deployment) -> Vec<Pod> {
    let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let template = d.spec.as_ref().map(|s| &s.template);
    pods_from_template(&d.metadata, "apps/v1", "Deployment", template, replicas)
}

/// Pods of a ReplicaSet: `spec.replicas` (default 1).
pub fn replicaset_pods(r: &ReplicaSet) -> Vec<Pod> {
    let replicas = r.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let template = r.spec.as_ref().and_then(|s| s.template.as_ref());
    pods_from_template(&r.metadata, "apps/v1", "ReplicaSet", template, replicas)
}

/// Pods of a StatefulSet: `spec.replicas` (default 1), named `<name>-<ordinal>` as upstream names
/// them; the ordinal start (`spec.ordinals.start`) is honoured.
pub fn statefulset_pods(s: &StatefulSet) -> Vec<Pod> {
    let replicas = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let start = s.spec.as_ref().and_then(|s| s.ordinals.as_ref()).and_then(|o| o.start).unwrap_or(0);
    let template = s.spec.as_ref().map(|s| &s.template);
    let mut pods = pods_from_template(&s.metadata, "apps/v1", "StatefulSet", template, replicas);
    for (i, pod) in pods.iter_mut().enumerate() {
        let name = format!("{}-{}", s.metadata.name.as_deref().unwrap_or("statefulset"), start as usize + i);
        // StatefulSet pods carry their hostname-like identity label (upstream: pod-name label).
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("statefulset.kubernetes.io/pod-name".into(), name.clone());
        pod.metadata.name = Some(name);
    }
    pods
}

/// Pods of a Job: as many as run at once, `min(parallelism, completions)` (parallelism defaults to
/// 1; completions unset means "parallelism"). Already completed or failed pods are not modelled.
pub fn job_pods(j: &Job) -> Vec<Pod> {
    let spec = j.spec.as_ref();
    let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
    let completions = spec.and_then(|s| s.completions).unwrap_or(parallelism);
    let running = parallelism.min(completions);
    let template = spec.map(|s| &s.template);
    pods_from_template(&j.metadata, "batch/v1", "Job", template, running)
}

fn pods_from_template(
    owner: &ObjectMeta,
    api_version: &str,
    kind: &str,
    template: Option<&PodTemplateSpec>,
    replicas: i32,
) -> Vec<Pod> {
    let owner_name = owner.name.clone().unwrap_or_else(|| kind.to_lowercase());
    let namespace = owner.namespace.clone().unwrap_or_else(|| "default".to_string());
    let template_meta = template.and_then(|t| t.metadata.clone()).unwrap_or_default();
    let spec = template.and_then(|t| t.spec.clone());
    (0..replicas.max(0))
        .map(|i| Pod {
            metadata: ObjectMeta {
                name: Some(format!("{owner_name}-{i}")),
                namespace: Some(namespace.clone()),
                labels: template_meta.labels.clone(),
                annotations: template_meta.annotations.clone(),
                owner_references: Some(vec![OwnerReference {
                    api_version: api_version.to_string(),
                    kind: kind.to_string(),
                    name: owner_name.clone(),
                    uid: owner.uid.clone().unwrap_or_default(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                ..Default::default()
            },
            spec: spec.clone(),
            status: None,
        })
        .collect()
}

/// [`Manifests::all_pods`], with each StatefulSet pod given the PersistentVolumeClaim volumes of
/// its `volumeClaimTemplates` (`<template>-<pod>`), as the StatefulSet controller creates them, so
/// that volume topology is not silently ignored; and the claims those controllers (and the
/// ephemeral volume controller, `<pod>-<volume>`) would have created, for the ones the input does
/// not hold.
pub(crate) fn pods(manifests: &Manifests) -> (Vec<Pod>, Vec<PersistentVolumeClaim>) {
    let mut claims = Vec::new();
    let mut out = manifests.pods.clone();
    out.extend(manifests.deployments.iter().flat_map(deployment_pods));
    out.extend(manifests.replicasets.iter().flat_map(replicaset_pods));
    for sts in &manifests.statefulsets {
        for mut pod in statefulset_pods(sts) {
            claims.extend(attach_claim_templates(sts, &mut pod));
            out.push(pod);
        }
    }
    out.extend(manifests.jobs.iter().flat_map(job_pods));
    claims.extend(out.iter().flat_map(ephemeral_claims));
    (out, claims)
}

/// Gives a StatefulSet pod the PersistentVolumeClaim volumes of its `volumeClaimTemplates`
/// (`<template>-<pod>`), as the StatefulSet controller does, and returns those claims.
pub(crate) fn attach_claim_templates(
    sts: &k8s_openapi::api::apps::v1::StatefulSet,
    pod: &mut Pod,
) -> Vec<PersistentVolumeClaim> {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Volume};
    let templates = sts.spec.as_ref().and_then(|s| s.volume_claim_templates.clone()).unwrap_or_default();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let mut claims = Vec::new();
    if let Some(spec) = pod.spec.as_mut() {
        for t in &templates {
            let name = t.metadata.name.clone().unwrap_or_default();
            if let Some(template_spec) = &t.spec {
                claims.push(claim_from_template(&namespace, format!("{name}-{pod_name}"), template_spec));
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
    claims
}

/// The claim a controller creates from a template (a StatefulSet's `volumeClaimTemplates`,
/// named `<template>-<pod>`; a generic ephemeral volume's, named `<pod>-<volume>`): unbound, in
/// the pod's namespace, with the template's spec.
pub fn claim_from_template(namespace: &str, name: String, spec: &PersistentVolumeClaimSpec) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some(name), namespace: Some(namespace.to_string()), ..Default::default() },
        spec: Some(spec.clone()),
        status: None,
    }
}

/// The claims of a pod's generic ephemeral volumes, as the ephemeral volume controller creates
/// them when the pod is created.
pub fn ephemeral_claims(pod: &Pod) -> Vec<PersistentVolumeClaim> {
    let namespace = pod.metadata.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or("default");
    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
    volumes
        .iter()
        .filter_map(|v| {
            let template = v.ephemeral.as_ref()?.volume_claim_template.as_ref()?;
            Some(claim_from_template(namespace, format!("{pod_name}-{}", v.name), &template.spec))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(replicas: Option<i32>) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "inflate", "namespace": "apps"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "inflate"}},
                "template": {
                    "metadata": {"labels": {"app": "inflate"}},
                    "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}
                }
            }
        }))
        .unwrap()
    }

    #[test]
    fn deployment_expands_into_stable_names() {
        let pods = deployment_pods(&deployment(Some(3)));
        let names: Vec<_> = pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["inflate-0", "inflate-1", "inflate-2"]);
        assert!(pods.iter().all(|p| p.metadata.namespace.as_deref() == Some("apps")));
        assert_eq!(pods[0].metadata.labels.as_ref().unwrap()["app"], "inflate");
        assert_eq!(pods[0].metadata.owner_references.as_ref().unwrap()[0].kind, "Deployment");
        assert_eq!(deployment_pods(&deployment(None)).len(), 1, "replicas defaults to 1");
        assert!(deployment_pods(&deployment(Some(0))).is_empty());
    }

    #[test]
    fn job_runs_min_of_parallelism_and_completions() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
            "spec": {"parallelism": 5, "completions": 2, "template": {"spec": {"containers": [{"name": "c"}], "restartPolicy": "Never"}}}
        }))
        .unwrap();
        assert_eq!(job_pods(&job).len(), 2);
    }

    #[test]
    fn statefulset_honours_ordinal_start() {
        let sts: StatefulSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
            "spec": {"replicas": 2, "ordinals": {"start": 3}, "selector": {}, "serviceName": "db",
                     "template": {"spec": {"containers": [{"name": "c"}]}}}
        }))
        .unwrap();
        let names: Vec<_> = statefulset_pods(&sts).iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["db-3", "db-4"]);
    }
}
