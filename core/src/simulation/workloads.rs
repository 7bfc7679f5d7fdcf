//! The workload controllers Karpenter lives with: the ReplicaSet controller (Deployments and
//! ReplicaSets keep their replica count: a deleted or evicted pod is replaced by a new pending
//! one), the StatefulSet controller (ordinals `<name>-<n>` are recreated under the same name, with
//! their claims), and the DaemonSet controller (a pod on every node it fits, from registration).
//! Job pods and standalone pods are not replaced.
//!
//! Names stay readable: a Deployment's pods are `<name>-0`, `<name>-1`, … and replacements take
//! the next number.

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::manifest::workloads as expand;
use crate::requirements::{AllowUndefined, Requirement, Requirements};
use crate::scheduling::pod::PodData;
use crate::scheduling::taints;

use super::events::{Involved, Reason, RemovalCause};
use super::Simulation;

/// A workload whose controller keeps its pods.
#[derive(Debug, Clone)]
pub(super) struct Workload {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
    /// A pod of the workload as its template makes it (renamed for each new pod).
    template: Pod,
    /// Deployments and ReplicaSets: the number the next pod takes.
    next_index: u64,
    /// StatefulSets: the first ordinal.
    ordinal_start: i32,
}

fn owner_of(p: &Pod) -> Option<(&str, &str)> {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.kind.as_str(), o.name.as_str()))
}

impl Workload {
    fn owns(&self, p: &Pod) -> bool {
        p.metadata.namespace.as_deref().unwrap_or("default") == self.namespace
            && owner_of(p) == Some((self.kind, self.name.as_str()))
    }
}

/// A workload and the replicas its controller keeps, as a viewer lists them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkloadView {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
}

impl Simulation {
    /// The Deployments, ReplicaSets and StatefulSets whose pods are kept, with their replicas now.
    pub fn workloads(&self) -> Vec<WorkloadView> {
        self.workloads
            .iter()
            .map(|w| WorkloadView {
                kind: w.kind,
                namespace: w.namespace.clone(),
                name: w.name.clone(),
                replicas: w.replicas,
            })
            .collect()
    }

    /// The workloads' replicas, as PodDisruptionBudgets read them.
    pub(super) fn pdb_scales(&self) -> crate::disruption::pdb::Scales {
        self.workloads
            .iter()
            .map(|w| ((w.namespace.clone(), w.kind.to_string(), w.name.clone()), i64::from(w.replicas)))
            .collect()
    }

    /// Takes over the input's workloads: their controllers create the pods (`<name>-0`, …) at
    /// the start; Job pods run as standalone pods.
    pub(super) fn adopt_workloads(&mut self) {
        self.workloads = workloads_of(&self.workload_objects);
        let jobs: Vec<Pod> = self.workload_objects.jobs.iter().flat_map(expand::job_pods).collect();
        let created = self.clock.time(self.now);
        for mut pod in jobs {
            let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            if self.pod_index(&ns, pod.metadata.name.as_deref().unwrap_or_default()).is_some() {
                continue;
            }
            pod.metadata.creation_timestamp = Some(created.clone());
            pod.metadata.uid = Some(self.names.uid());
            self.objects.pods.push(pod);
        }
        for pod in &mut self.objects.pods {
            if pod.metadata.creation_timestamp.is_none() {
                pod.metadata.creation_timestamp = Some(created.clone());
            }
            if pod.metadata.uid.is_none() {
                self.names.pods += 1;
                pod.metadata.uid = Some(format!("00000000-0000-4000-8000-{:012x}", self.names.pods));
            }
        }
        // Pods of the input that a workload owns count towards its replicas (a pasted cluster).
        for w in &mut self.workloads {
            w.next_index = self.objects.pods.iter().filter(|p| w.owns(p)).count() as u64;
        }
    }

    /// Brings every workload to its replica count; true if a pod was created or deleted.
    pub(super) fn reconcile_workloads(&mut self) -> bool {
        // Counting every workload's pods is the cost of a settle; nothing to do unless a pod went
        // away or a workload's replicas changed since the last count.
        if !std::mem::take(&mut self.workloads_dirty) {
            return false;
        }
        let mut changed = false;
        for w in self.workloads.clone() {
            let owned: Vec<usize> = (0..self.objects.pods.len()).filter(|&i| w.owns(&self.objects.pods[i])).collect();
            let have = owned.len() as i32;
            if have < w.replicas {
                for _ in have..w.replicas {
                    self.create_workload_pod(&w);
                }
                changed = true;
            } else if have > w.replicas {
                let doomed = self.scale_down_victims(&w, &owned, (have - w.replicas) as usize);
                for (ns, name) in doomed {
                    self.remove_pod(&ns, &name, RemovalCause::Deleted);
                    self.emit(
                        Involved::workload(w.kind, &w.namespace, &w.name),
                        Reason::SuccessfulDelete { pod: name },
                    );
                }
                changed = true;
            }
        }
        changed
    }

    /// Which pods a scale-down deletes (the ReplicaSet controller's order: unscheduled pods
    /// first, then the newest; a StatefulSet removes its highest ordinals).
    fn scale_down_victims(&self, w: &Workload, owned: &[usize], n: usize) -> Vec<(String, String)> {
        let mut ranked: Vec<(bool, i64, String)> = owned
            .iter()
            .map(|&i| {
                let p = &self.objects.pods[i];
                let name = p.metadata.name.clone().unwrap_or_default();
                let number = name.rsplit('-').next().and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
                let bound = p.spec.as_ref().is_some_and(|s| s.node_name.is_some());
                (w.kind == "StatefulSet" || bound, -number, name)
            })
            .collect();
        ranked.sort();
        ranked.into_iter().take(n).map(|(_, _, name)| (w.namespace.clone(), name)).collect()
    }

    fn create_workload_pod(&mut self, w: &Workload) {
        let name = if w.kind == "StatefulSet" {
            // The lowest missing ordinal.
            let taken: std::collections::BTreeSet<String> =
                self.objects.pods.iter().filter(|p| w.owns(p)).filter_map(|p| p.metadata.name.clone()).collect();
            let mut ordinal = w.ordinal_start;
            while taken.contains(&format!("{}-{ordinal}", w.name)) {
                ordinal += 1;
            }
            format!("{}-{ordinal}", w.name)
        } else {
            let Some(slot) =
                self.workloads.iter_mut().find(|x| x.kind == w.kind && x.name == w.name && x.namespace == w.namespace)
            else {
                return;
            };
            let mut name = format!("{}-{}", w.name, slot.next_index);
            slot.next_index += 1;
            while self.pod_index(&w.namespace, &name).is_some() {
                let slot = self
                    .workloads
                    .iter_mut()
                    .find(|x| x.kind == w.kind && x.name == w.name && x.namespace == w.namespace)
                    .expect("found above");
                name = format!("{}-{}", w.name, slot.next_index);
                slot.next_index += 1;
            }
            name
        };
        let mut pod = w.template.clone();
        pod.metadata.name = Some(name.clone());
        pod.metadata.creation_timestamp = Some(self.clock.time(self.now));
        pod.metadata.uid = Some(self.names.uid());
        pod.status = None;
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = None;
            // StatefulSet claims are re-attached below for the new name.
            if w.kind == "StatefulSet" {
                spec.volumes = spec
                    .volumes
                    .take()
                    .map(|v| v.into_iter().filter(|v| v.persistent_volume_claim.is_none()).collect());
            }
        }
        if w.kind == "StatefulSet" {
            pod.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert("statefulset.kubernetes.io/pod-name".into(), name.clone());
            if let Some(sts) = self.workload_objects.statefulsets.iter().find(|s| {
                s.metadata.name.as_deref() == Some(&w.name)
                    && s.metadata.namespace.as_deref().unwrap_or("default") == w.namespace
            }) {
                let sts = sts.clone();
                for claim in crate::manifest::workloads::attach_claim_templates(&sts, &mut pod) {
                    let exists = self.objects.pvcs.iter().any(|c| {
                        c.metadata.name == claim.metadata.name && c.metadata.namespace == claim.metadata.namespace
                    });
                    if !exists {
                        self.objects.pvcs.push(claim);
                    }
                }
            }
        }
        self.objects.pods.push(pod);
        self.kube_dirty = true;
        self.emit(Involved::workload(w.kind, &w.namespace, &w.name), Reason::SuccessfulCreate { pod: name });
    }

    /// Removes a pod from the cluster (its node's capacity is free at once).
    pub(super) fn remove_pod(&mut self, namespace: &str, name: &str, cause: RemovalCause) {
        let Some(i) = self.pod_index(namespace, name) else { return };
        let pod = self.objects.pods.remove(i);
        self.workloads_dirty = true;
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            // upstream `podevents` skips a DaemonSet's pods.
            if crate::pod::daemonset_owner(&pod).is_none() {
                self.pod_event_on(&node);
            }
            if cause != RemovalCause::Deleted || crate::pod::daemonset_owner(&pod).is_none() {
                self.emit(Involved::pod(namespace, name), Reason::PodRemoved { node, cause });
            }
        }
        self.kube_dirty = true;
    }

    /// Sets a workload's replicas (a `scale` step).
    pub(super) fn scale(
        &mut self,
        kind: &str,
        namespace: &str,
        name: &str,
        replicas: i32,
    ) -> Result<i32, super::StepError> {
        let Some(w) = self.workloads.iter_mut().find(|w| w.kind == kind && w.namespace == namespace && w.name == name)
        else {
            return Err(super::StepError::NoSuchWorkload {
                kind: kind.to_string(),
                name: format!("{namespace}/{name}"),
            });
        };
        let from = w.replicas;
        w.replicas = replicas;
        self.workloads_dirty = true;
        Ok(from)
    }

    /// Adds or updates the workloads and pods of an `apply` step. An updated workload takes the
    /// new replicas and template; pods already running stay (rollouts are not modelled).
    pub(super) fn apply_workloads(&mut self, m: &crate::manifest::Manifests) {
        self.workloads_dirty = true;
        for w in workloads_of(m) {
            match self.workloads.iter_mut().find(|x| x.kind == w.kind && x.name == w.name && x.namespace == w.namespace)
            {
                Some(existing) => {
                    existing.replicas = w.replicas;
                    existing.template = w.template;
                }
                None => self.workloads.push(w),
            }
        }
        let created = self.clock.time(self.now);
        let pods: Vec<Pod> = m.pods.iter().cloned().chain(m.jobs.iter().flat_map(expand::job_pods)).collect();
        for mut pod in pods {
            let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let name = pod.metadata.name.clone().unwrap_or_default();
            if let Some(i) = self.pod_index(&ns, &name) {
                self.objects.pods.remove(i);
            }
            pod.metadata.creation_timestamp = Some(created.clone());
            pod.metadata.uid = Some(self.names.uid());
            self.objects.pods.push(pod);
            self.kube_dirty = true;
        }
        for d in &m.deployments {
            upsert(&mut self.workload_objects.deployments, d.clone(), |x| (&x.metadata.namespace, &x.metadata.name));
        }
        for r in &m.replicasets {
            upsert(&mut self.workload_objects.replicasets, r.clone(), |x| (&x.metadata.namespace, &x.metadata.name));
        }
        for s in &m.statefulsets {
            upsert(&mut self.workload_objects.statefulsets, s.clone(), |x| (&x.metadata.namespace, &x.metadata.name));
        }
        for j in &m.jobs {
            upsert(&mut self.workload_objects.jobs, j.clone(), |x| (&x.metadata.namespace, &x.metadata.name));
        }
        self.kube_dirty = true;
    }

    /// The DaemonSet controller: a pod of every DaemonSet that fits the node, bound to it.
    pub(super) fn place_daemon_pods(&mut self, node_name: &str) {
        let Some(node) = self.objects.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(node_name)).cloned()
        else {
            return;
        };
        let node_labels = node.metadata.labels.clone().unwrap_or_default();
        let mut node_reqs = Requirements::from_labels(&node_labels);
        if !node_reqs.has(crate::labels::HOSTNAME) {
            node_reqs.add(Requirement::in_values(crate::labels::HOSTNAME, &[node_name]));
        }
        // The DaemonSet controller tolerates the node lifecycle taints (not-ready, unreachable…).
        let node_taints: Vec<_> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !taints::is_known_ephemeral(t) && t.effect != taints::PREFER_NO_SCHEDULE)
            .collect();
        let created = self.clock.time(self.now);
        for ds in self.objects.daemonsets.clone() {
            let namespace = ds.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let ds_name = ds.metadata.name.clone().unwrap_or_default();
            let Some(spec) = &ds.spec else { continue };
            let template = &spec.template;
            let pod_name = format!("{ds_name}-{node_name}");
            let pod = Pod {
                metadata: ObjectMeta {
                    name: Some(pod_name.clone()),
                    namespace: Some(namespace.clone()),
                    labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                    annotations: template.metadata.as_ref().and_then(|m| m.annotations.clone()),
                    owner_references: Some(vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "DaemonSet".into(),
                        name: ds_name.clone(),
                        uid: ds.metadata.uid.clone().unwrap_or_default(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]),
                    creation_timestamp: Some(created.clone()),
                    uid: Some(self.names.uid()),
                    ..Default::default()
                },
                spec: template.spec.clone().map(|mut s| {
                    s.node_name = Some(node_name.to_string());
                    s
                }),
                status: Some(PodStatus {
                    phase: Some("Running".into()),
                    start_time: Some(created.clone()),
                    conditions: Some(vec![PodCondition {
                        type_: "PodScheduled".into(),
                        status: "True".into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            };
            let Ok(data) = PodData::read(&pod) else { continue };
            if taints::first_untolerated(node_taints.iter(), &data.tolerations).is_some() {
                continue;
            }
            if node_reqs.compatible(&data.node_selector, AllowUndefined::Nothing).is_err() {
                continue;
            }
            let fits_a_term = data.required_terms.is_empty()
                || data.required_terms.iter().any(|t| node_reqs.compatible(t, AllowUndefined::Nothing).is_ok());
            if !fits_a_term || self.pod_index(&namespace, &pod_name).is_some() {
                continue;
            }
            self.objects.pods.push(pod);
            self.emit(
                Involved::workload("DaemonSet", &namespace, &ds_name),
                Reason::SuccessfulCreate { pod: pod_name },
            );
        }
    }
}

/// The workloads of `m` whose controllers keep replicas.
fn workloads_of(m: &crate::manifest::Manifests) -> Vec<Workload> {
    let mut out = Vec::new();
    for d in &m.deployments {
        let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let mut one = d.clone();
        one.spec.get_or_insert_with(Default::default).replicas = Some(1);
        if let Some(template) = expand::deployment_pods(&one).pop() {
            out.push(workload("Deployment", &d.metadata, template, replicas, 0));
        }
    }
    for r in &m.replicasets {
        let replicas = r.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let mut one = r.clone();
        one.spec.get_or_insert_with(Default::default).replicas = Some(1);
        if let Some(template) = expand::replicaset_pods(&one).pop() {
            out.push(workload("ReplicaSet", &r.metadata, template, replicas, 0));
        }
    }
    for s in &m.statefulsets {
        let replicas = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let start = s.spec.as_ref().and_then(|s| s.ordinals.as_ref()).and_then(|o| o.start).unwrap_or(0);
        let mut one = s.clone();
        one.spec.get_or_insert_with(Default::default).replicas = Some(1);
        if let Some(template) = expand::statefulset_pods(&one).pop() {
            out.push(workload("StatefulSet", &s.metadata, template, replicas, start));
        }
    }
    out
}

fn workload(kind: &'static str, meta: &ObjectMeta, mut template: Pod, replicas: i32, ordinal_start: i32) -> Workload {
    template.metadata.name = None;
    Workload {
        kind,
        namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
        name: meta.name.clone().unwrap_or_default(),
        replicas,
        template,
        next_index: 0,
        ordinal_start,
    }
}

fn upsert<T, F>(list: &mut Vec<T>, item: T, key: F)
where
    F: Fn(&T) -> (&Option<String>, &Option<String>),
{
    let k = {
        let (ns, name) = key(&item);
        (ns.clone().unwrap_or_else(|| "default".into()), name.clone())
    };
    match list.iter().position(|x| {
        let (ns, name) = key(x);
        (ns.clone().unwrap_or_else(|| "default".into()), name.clone()) == k
    }) {
        Some(i) => list[i] = item,
        None => list.push(item),
    }
}
