//! kube-scheduler, modelled: it binds pending pods to Ready nodes they fit and marks the others
//! `PodScheduled=False` with reason `Unschedulable`, which is what makes them Karpenter's
//! (upstream `IsProvisionable`).
//!
//! The fit is decided by the scheduler's existing-node check (resources, taints, node affinity,
//! host ports, volumes, topology spread, pod affinity) over initialized, schedulable nodes, in its
//! order (initialized, then by name): first fit rather than kube-scheduler's scoring, which
//! spreads pods by least allocation (docs/divergences.md). A pod nominated onto a NodeClaim binds
//! when that node is Ready because the other nodes were full when it was nominated.

use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

use crate::labels;

use super::events::{Involved, Reason};
use super::Simulation;

/// Karpenter's nodes take pods once initialized; others (Cluster Autoscaler's groups' nodes too,
/// even labelled with a NodePool so that the pods selecting it land alike) once they are there
/// (their not-ready taint keeps pods off until Ready).
fn is_initialized(node: &k8s_openapi::api::core::v1::Node, ca: Option<&super::cluster_autoscaler::Driver>) -> bool {
    let labels = node.metadata.labels.as_ref();
    let managed = labels.is_some_and(|l| l.contains_key(labels::NODEPOOL))
        && !ca.is_some_and(|ca| ca.owns(node.metadata.name.as_deref().unwrap_or_default()));
    !managed || labels.and_then(|l| l.get(labels::NODE_INITIALIZED)).map(String::as_str) == Some("true")
}

impl Simulation {
    /// One scheduling pass; returns how many pods were newly marked Unschedulable.
    pub(super) fn kube_schedule(&mut self) -> usize {
        let pending: Vec<usize> = (0..self.objects.pods.len())
            .filter(|&i| {
                let p = &self.objects.pods[i];
                p.spec.as_ref().is_some_and(|s| s.node_name.is_none()) && p.metadata.deletion_timestamp.is_none()
            })
            .collect();
        if pending.is_empty() {
            return 0;
        }
        let ca = self.ca.as_ref();
        let any_ready = self.objects.nodes.iter().any(|n| {
            is_initialized(n, ca)
                && n.metadata.deletion_timestamp.is_none()
                && !n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
        });
        if !any_ready {
            return self.mark_unschedulable(pending);
        }
        let mut view = self.objects.clone();
        view.nodepools.clear();
        view.nodes.retain(|n| {
            is_initialized(n, ca)
                && n.metadata.deletion_timestamp.is_none()
                && !n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
        });
        let ready: std::collections::BTreeSet<String> =
            view.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
        // Only the NodeClaims of Ready nodes: the others are not nodes kube-scheduler can use.
        view.nodeclaims.retain(|nc| nc.status.as_ref().is_some_and(|s| ready.contains(&s.node_name)));
        // Every pending pod is a candidate here, whatever kube-scheduler said before.
        for &i in &pending {
            if let Some(status) = view.pods[i].status.as_mut() {
                status.conditions = None;
            }
        }
        let placements = if ready.is_empty() {
            Vec::new()
        } else {
            match crate::state::input_from_manifests(&view, self.catalogue, Some(&self.region)) {
                Ok(mut prepared) => {
                    prepared.input.options.kube_scheduler = true;
                    crate::scheduling::schedule(&prepared.input).existing_nodes
                }
                Err(e) => {
                    self.notes.insert(format!("kube-scheduler could not run at {}: {e}", self.now));
                    Vec::new()
                }
            }
        };
        let start = self.clock.time(self.now);
        let index: std::collections::HashMap<(&str, &str), usize> = pending
            .iter()
            .map(|&i| {
                let m = &self.objects.pods[i].metadata;
                ((m.namespace.as_deref().unwrap_or("default"), m.name.as_deref().unwrap_or_default()), i)
            })
            .collect();
        let bindings: Vec<(usize, &str)> = placements
            .iter()
            .flat_map(|placement| {
                let index = &index;
                placement.pods.iter().filter_map(move |pod| {
                    Some((*index.get(&(pod.namespace.as_str(), pod.name.as_str()))?, placement.name.as_str()))
                })
            })
            .collect();
        for (i, node) in bindings {
            let p = &mut self.objects.pods[i];
            if let Some(spec) = p.spec.as_mut() {
                spec.node_name = Some(node.to_string());
            }
            p.status = Some(PodStatus {
                phase: Some("Running".into()),
                start_time: Some(start.clone()),
                conditions: Some(vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            let namespace = p.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let name = p.metadata.name.clone().unwrap_or_default();
            self.emit(Involved::pod(&namespace, &name), Reason::Scheduled { node: node.to_string() });
            self.pod_event_on(node);
        }
        self.mark_unschedulable(pending)
    }

    /// Marks the pods still pending `PodScheduled=False/Unschedulable`; returns how many were not
    /// marked before.
    fn mark_unschedulable(&mut self, pending: Vec<usize>) -> usize {
        let mut newly = 0;
        for i in pending {
            let p = &mut self.objects.pods[i];
            if p.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
                continue;
            }
            let status = p.status.get_or_insert_with(Default::default);
            status.phase = Some("Pending".into());
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            let marked = conditions.iter().any(|c| {
                c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
            });
            if !marked {
                conditions.retain(|c| c.type_ != "PodScheduled");
                conditions.push(PodCondition {
                    type_: "PodScheduled".into(),
                    status: "False".into(),
                    reason: Some("Unschedulable".into()),
                    ..Default::default()
                });
                newly += 1;
            }
        }
        newly
    }
}
