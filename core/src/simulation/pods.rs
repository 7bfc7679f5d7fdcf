//! "Why is this pod pending?" at a moment of the simulation: where the pod is, and for a pending
//! pod what a provisioning round now would do with it — the scheduler's own answer
//! ([`crate::scheduling::schedule`] over the cluster as it is, with the unavailable offerings
//! Karpenter knows of), not a separate rule.

use serde::Serialize;

use crate::scheduling::explain::Unschedulable;

use super::Simulation;

/// Where a pod stands now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum PodStanding {
    /// Bound to a node.
    Running { node: String },
    /// Pending; a round now would place it on this existing node or in-flight NodeClaim (it binds
    /// when that node is Ready and has room).
    #[serde(rename_all = "camelCase")]
    WouldBind { target: String },
    /// Pending; a round now would launch a NodeClaim for it.
    #[serde(rename_all = "camelCase")]
    WouldLaunch { nodepool: String, instance_type: Option<String>, price: Option<f64>, options: usize },
    /// Pending and no NodePool can take it: the failing constraints, NodePool by NodePool.
    Unschedulable { headline: String, explanation: Box<Unschedulable> },
    /// Waiting for reserved capacity (a later round).
    Deferred { headline: String },
    /// Karpenter leaves it alone (not rejected by kube-scheduler, a DaemonSet pod, invalid).
    Ignored { reason: String },
}

impl std::fmt::Display for PodStanding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PodStanding::Running { node } => write!(f, "running on {node}"),
            PodStanding::WouldBind { target } => {
                write!(f, "pending; a provisioning round now places it on {target}, where it binds once that node is Ready")
            }
            PodStanding::WouldLaunch { nodepool, instance_type, price, options } => write!(
                f,
                "pending; a provisioning round now launches a NodeClaim of NodePool {nodepool} for it ({} option(s), cheapest {}{})",
                options,
                instance_type.as_deref().unwrap_or("none launchable"),
                price.map(|p| format!(" at ${p:.4}/hour")).unwrap_or_default()
            ),
            PodStanding::Unschedulable { explanation, .. } => {
                f.write_str(&crate::scheduling::explain::render_unschedulable(explanation))
            }
            PodStanding::Deferred { headline } => write!(f, "pending; deferred to a later round: {headline}"),
            PodStanding::Ignored { reason } => write!(f, "pending; Karpenter ignores it: {reason}"),
        }
    }
}

impl Simulation {
    /// Where pod `namespace/name` stands now (`None`: no such pod).
    pub fn explain_pod(&self, namespace: &str, name: &str) -> Option<PodStanding> {
        let pod = &self.objects.pods[self.pod_index(namespace, name)?];
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            return Some(PodStanding::Running { node });
        }
        let prepared =
            match crate::scheduling::cluster::input_from_manifests(&self.objects, self.catalogue, Some(&self.region)) {
                Ok(p) => p,
                Err(e) => return Some(PodStanding::Ignored { reason: format!("no round can run: {e}") }),
            };
        let mut input = prepared.input;
        input.unavailable_offerings = self.known_unavailable();
        input.options.now = Some(self.clock.epoch_seconds(self.now));
        let results = crate::scheduling::schedule(&input);
        let is_it = |p: &crate::scheduling::pod::PodRef| p.namespace == namespace && p.name == name;
        if let Some(u) = results.unschedulable.iter().find(|u| is_it(&u.pod)) {
            return Some(PodStanding::Unschedulable {
                headline: u.explanation.headline(),
                explanation: Box::new(u.clone()),
            });
        }
        if let Some(d) = results.deferred.iter().find(|d| is_it(&d.pod)) {
            return Some(PodStanding::Deferred { headline: d.headline() });
        }
        if let Some(i) = results.ignored.iter().find(|i| is_it(&i.pod)) {
            return Some(PodStanding::Ignored { reason: i.reason.to_string() });
        }
        if let Some(e) = results.existing_nodes.iter().find(|e| e.pods.iter().any(is_it)) {
            return Some(PodStanding::WouldBind { target: e.name.clone() });
        }
        if let Some(c) = results.nodeclaims.iter().find(|c| c.pods.iter().any(is_it)) {
            return Some(PodStanding::WouldLaunch {
                nodepool: c.nodepool.clone(),
                instance_type: c.launch.as_ref().map(|l| l.instance_type.clone()),
                price: c.launch.as_ref().map(|l| l.price),
                options: c.instance_type_options.len(),
            });
        }
        Some(PodStanding::Ignored { reason: "the round did not consider it".into() })
    }
}
