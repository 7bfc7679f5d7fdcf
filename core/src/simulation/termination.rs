//! Node termination (upstream `node/termination`, `terminator/{terminator,eviction}.go`)
//! and spot interruption (the AWS provider's interruption controller).
//!
//! Deleting a NodeClaim taints its node `karpenter.sh/disrupted:NoSchedule` and drains it in
//! upstream's four tiers (non-critical, non-critical DaemonSet, critical, critical DaemonSet; only
//! the first non-empty tier is evicted per pass). Evictions honour PodDisruptionBudgets; pods with
//! an active `karpenter.sh/do-not-disrupt` are not evicted; at the NodeClaim's
//! `terminationGracePeriod` every remaining pod is deleted regardless. Once drained the instance
//! is terminated and the Node and NodeClaim go. Pods that tolerate the disrupted taint are not
//! drained. A spot interruption notice deletes the NodeClaim at once, marks its offering
//! unavailable, and EC2 reclaims the instance two minutes later whatever is left on it.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Pod, Taint, Toleration};

use crate::disruption::pdb;
use crate::pod::do_not_disrupt;
use crate::scheduling::taints;

use super::events::{Involved, OfferingRef, Reason, RemovalCause};
use super::{SimTime, Simulation, Timer};

/// The taint a node being terminated carries.
pub const DISRUPTED_TAINT_KEY: &str = crate::scheduling::taints::DISRUPTED;

#[derive(Debug, Clone)]
pub(super) struct Termination {
    pub why: String,
    /// `terminationGracePeriod` elapsed: remaining pods are deleted.
    pub deadline: Option<SimTime>,
    /// Pods already reported as blocked (one event per pod and blocker).
    reported: BTreeSet<(String, String)>,
}

fn disrupted_taint() -> Taint {
    Taint { key: DISRUPTED_TAINT_KEY.into(), value: None, effect: "NoSchedule".into(), time_added: None }
}

/// Upstream's critical pods: priorityClassName system-cluster-critical or system-node-critical.
fn critical(p: &Pod) -> bool {
    matches!(
        p.spec.as_ref().and_then(|s| s.priority_class_name.as_deref()),
        Some("system-cluster-critical" | "system-node-critical")
    )
}

fn tolerates_disrupted(p: &Pod) -> bool {
    let tolerations: &[Toleration] = p.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or(&[]);
    tolerations.iter().any(|t| taints::tolerates(t, &disrupted_taint()))
}

fn is_mirror(p: &Pod) -> bool {
    p.metadata.owner_references.iter().flatten().any(|o| o.kind == "Node" && o.api_version == "v1")
}

impl Simulation {
    fn machine_of_node(&self, node: &str) -> Option<String> {
        self.machines.iter().find(|(_, m)| m.node.as_deref() == Some(node)).map(|(n, _)| n.clone())
    }

    /// Starts deleting NodeClaim `name` (the termination finalizers' flow).
    pub(super) fn terminate(&mut self, name: &str, why: &str) {
        let Some(m) = self.machines.get(name) else { return };
        if m.terminating.is_some() {
            return;
        }
        let node = m.node.clone();
        let grace = self
            .objects
            .nodeclaims
            .iter()
            .find(|nc| nc.name() == name)
            .and_then(|nc| nc.spec.termination_grace_period.as_ref())
            .map(|d| d.as_seconds());
        let deadline = grace.map(|s| self.now.plus(super::Duration::secs(s)));
        let stamp = self.clock.time(self.now);
        if let Some(nc) = self.objects.nodeclaims.iter_mut().find(|nc| nc.name() == name) {
            nc.metadata.deletion_timestamp = Some(stamp.clone());
        }
        if let Some(m) = self.machines.get_mut(name) {
            m.terminating = Some(Termination { why: why.to_string(), deadline, reported: BTreeSet::new() });
        }
        let target = match &node {
            Some(n) => Involved::node(n),
            None => Involved::nodeclaim(name),
        };
        self.emit(target, Reason::Terminating { why: why.to_string() });
        let nc = name.to_string();
        self.cancel_timers(|t| matches!(t, Timer::Launch(n) | Timer::Register(n) | Timer::Initialize(n) if *n == nc));
        match node {
            Some(node) => {
                if let Some(n) = self.objects.nodes.iter_mut().find(|n| n.metadata.name.as_deref() == Some(&node)) {
                    n.metadata.deletion_timestamp = Some(stamp);
                    let taints = n.spec.get_or_insert_with(Default::default).taints.get_or_insert_with(Vec::new);
                    taints.retain(|t| t.key != DISRUPTED_TAINT_KEY);
                    taints.push(disrupted_taint());
                }
                // upstream's provisioning NodeController: a tainted node triggers a round, which
                // provisions for its pods before they are evicted.
                self.trigger_for_disrupted();
                self.schedule_timer(self.now, Timer::Drain(name.to_string()));
            }
            None => {
                let gone = if self.machines.get(name).is_some_and(|m| m.launched.is_some()) {
                    self.now.plus(self.timings.instance_termination)
                } else {
                    self.now
                };
                self.schedule_timer(gone, Timer::InstanceGone(name.to_string()));
            }
        }
        // upstream: the provisioner reschedules the pods of deleting nodes ahead of the drain.
        self.batch.trigger(self.now.0);
    }

    /// One drain pass (upstream `Terminator.Drain`).
    pub(super) fn drain(&mut self, name: &str) {
        let Some(m) = self.machines.get(name) else { return };
        let (Some(node), Some(term)) = (m.node.clone(), m.terminating.clone()) else { return };
        let drainable: Vec<usize> = (0..self.objects.pods.len())
            .filter(|&i| {
                let p = &self.objects.pods[i];
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
                    && crate::pod::is_active(p)
                    && !tolerates_disrupted(p)
                    && !is_mirror(p)
            })
            .collect();
        if drainable.is_empty() {
            self.schedule_timer(
                self.now.plus(self.timings.instance_termination),
                Timer::InstanceGone(name.to_string()),
            );
            return;
        }
        let key = |p: &Pod| {
            (
                p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
                p.metadata.name.clone().unwrap_or_default(),
            )
        };
        if term.deadline.is_some_and(|d| self.now >= d) {
            let doomed: Vec<(String, String)> = drainable.iter().map(|&i| key(&self.objects.pods[i])).collect();
            for (ns, pod) in doomed {
                self.remove_pod(&ns, &pod, RemovalCause::ForceDeleted);
            }
            self.schedule_timer(
                self.now.plus(self.timings.instance_termination),
                Timer::InstanceGone(name.to_string()),
            );
            return;
        }
        let tier = |p: &Pod| {
            let ds = crate::pod::daemonset_owner(p).is_some();
            match (critical(p), ds) {
                (false, false) => 0,
                (false, true) => 1,
                (true, false) => 2,
                (true, true) => 3,
            }
        };
        let first = drainable.iter().map(|&i| tier(&self.objects.pods[i])).min().unwrap_or(0);
        let batch: Vec<(String, String)> = drainable
            .iter()
            .filter(|&&i| tier(&self.objects.pods[i]) == first)
            .map(|&i| key(&self.objects.pods[i]))
            .collect();
        let now_epoch = self.clock.epoch_seconds(self.now);
        let mut reported = term.reported.clone();
        let scales = self.pdb_scales();
        for (ns, pod_name) in batch {
            let Some(i) = self.pod_index(&ns, &pod_name) else { continue };
            let pod = &self.objects.pods[i];
            if do_not_disrupt::pod_protection(pod, now_epoch) != do_not_disrupt::Protection::None {
                if reported.insert((pod_name.clone(), crate::labels::DO_NOT_DISRUPT.to_string())) {
                    self.emit(
                        Involved::node(&node),
                        Reason::DrainBlockedByDoNotDisrupt { pod: format!("{ns}/{pod_name}") },
                    );
                }
                continue;
            }
            if let Some(blocker) = pdb::blocking(pod, &self.objects.pdbs, &self.objects.pods, &scales) {
                let blocker = pdb::name(blocker);
                if reported.insert((pod_name.clone(), blocker.clone())) {
                    self.emit(
                        Involved::node(&node),
                        Reason::FailedDraining { pod: format!("{ns}/{pod_name}"), pdb: blocker },
                    );
                }
                continue;
            }
            self.remove_pod(&ns, &pod_name, RemovalCause::Evicted);
        }
        if let Some(t) = self.machines.get_mut(name).and_then(|m| m.terminating.as_mut()) {
            t.reported = reported;
        }
        // The next pass: sooner if the deadline comes first.
        let mut next = self.now.plus(self.timings.drain_retry);
        if let Some(d) = term.deadline.filter(|d| *d > self.now) {
            next = next.min(d);
        }
        self.schedule_timer(next, Timer::Drain(name.to_string()));
    }

    /// The instance is gone: the Node and NodeClaim go with it; pods still there are lost.
    pub(super) fn instance_gone(&mut self, name: &str) {
        let Some(m) = self.machines.remove(name) else { return };
        let nc = name.to_string();
        self.cancel_timers(|t| matches!(t, Timer::Drain(n) | Timer::Reclaim(n) | Timer::InstanceGone(n) if *n == nc));
        let mut lost = 0;
        if let Some(node) = &m.node {
            lost = self.remove_node_pods(node);
            self.objects.nodes.retain(|n| n.metadata.name.as_deref() != Some(node));
            self.objects.csinodes.retain(|c| c.metadata.name.as_deref() != Some(node));
        }
        self.objects.nodeclaims.retain(|c| c.name() != name);
        self.emit(
            Involved::nodeclaim(name),
            Reason::Terminated { node: m.node.clone().unwrap_or_else(|| name.to_string()) },
        );
        if lost > 0 {
            self.batch.trigger(self.now.0);
        }
        self.kube_dirty = true;
    }

    /// Removes every pod bound to `node`; returns how many were not DaemonSet pods.
    fn remove_node_pods(&mut self, node: &str) -> usize {
        let on: Vec<(String, String, bool)> = self
            .objects
            .pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .map(|p| {
                (
                    p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
                    p.metadata.name.clone().unwrap_or_default(),
                    crate::pod::daemonset_owner(p).is_some(),
                )
            })
            .collect();
        let mut lost = 0;
        for (ns, pod, daemon) in on {
            if daemon {
                if let Some(i) = self.pod_index(&ns, &pod) {
                    self.objects.pods.remove(i);
                }
            } else {
                lost += 1;
                self.remove_pod(&ns, &pod, RemovalCause::NodeLost);
            }
        }
        lost
    }

    /// A `delete` step on a Node: Karpenter's finalizer drains a node it manages; any other node
    /// simply goes, with its pods.
    pub(super) fn delete_node(&mut self, node: &str) -> Result<(), super::StepError> {
        if let Some(nc) = self.machine_of_node(node) {
            self.terminate(&nc, &format!("node {node} was deleted"));
            return Ok(());
        }
        if !self.objects.nodes.iter().any(|n| n.metadata.name.as_deref() == Some(node)) {
            return Err(super::StepError::NoSuchObject { kind: "Node".into(), name: node.to_string() });
        }
        let lost = self.remove_node_pods(node);
        self.objects.nodes.retain(|n| n.metadata.name.as_deref() != Some(node));
        self.emit(Involved::node(node), Reason::Terminated { node: node.to_string() });
        if lost > 0 {
            self.batch.trigger(self.now.0);
        }
        self.kube_dirty = true;
        Ok(())
    }

    /// A `delete` step on a NodeClaim.
    pub(super) fn delete_nodeclaim(&mut self, name: &str) -> Result<(), super::StepError> {
        if !self.machines.contains_key(name) {
            return Err(super::StepError::NoSuchObject { kind: "NodeClaim".into(), name: name.to_string() });
        }
        self.terminate(name, &format!("NodeClaim {name} was deleted"));
        Ok(())
    }

    /// A spot interruption notice for `node` (the interruption controller): the offering is
    /// marked unavailable, the NodeClaim deleted, and EC2 reclaims the instance in 2 minutes.
    pub(super) fn interrupt(&mut self, node: &str) -> Result<(), super::StepError> {
        let Some(name) = self.machine_of_node(node) else {
            return Err(match self.objects.nodes.iter().any(|n| n.metadata.name.as_deref() == Some(node)) {
                true => super::StepError::NotLaunched { node: node.to_string() },
                false => super::StepError::NoSuchObject { kind: "Node".into(), name: node.to_string() },
            });
        };
        let launch = self.machines.get(&name).and_then(|m| m.launch.clone());
        let Some(launch) = launch.filter(|l| l.capacity_type == crate::labels::CAPACITY_TYPE_SPOT) else {
            return Err(super::StepError::NotSpot { node: node.to_string() });
        };
        let reclaim = self.now.plus(self.timings.spot_interruption_notice);
        let offering =
            OfferingRef { instance_type: launch.instance_type, zone: launch.zone, capacity_type: launch.capacity_type };
        // upstream: a spot interruption marks the offering unavailable, like an ICE.
        self.ice_cache.insert(offering, self.now.plus(self.timings.unavailable_offering_ttl));
        self.emit(Involved::node(node), Reason::SpotInterrupted { node: node.to_string(), reclaimed_at: reclaim });
        if let Some(m) = self.machines.get_mut(&name) {
            m.reclaim_at = Some(reclaim);
        }
        self.terminate(&name, "spot interruption");
        self.schedule_timer(reclaim, Timer::Reclaim(name));
        Ok(())
    }

    /// EC2 takes the spot instance back.
    pub(super) fn reclaim(&mut self, name: &str) {
        let Some(m) = self.machines.get(name) else { return };
        let node = m.node.clone().unwrap_or_else(|| name.to_string());
        let pods_lost = m
            .node
            .as_deref()
            .map(|n| {
                self.objects
                    .pods
                    .iter()
                    .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(n))
                    .filter(|p| crate::pod::daemonset_owner(p).is_none())
                    .count()
            })
            .unwrap_or(0);
        self.emit(Involved::node(&node), Reason::InstanceReclaimed { node: node.clone(), pods_lost });
        self.instance_gone(name);
    }
}
