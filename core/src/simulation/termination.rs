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

use crate::disruption::pdb;
use crate::termination::disrupted_taint;

use super::events::{Involved, OfferingRef, Reason, RemovalCause};
use super::{SimTime, Simulation, Timer};

#[derive(Debug, Clone)]
pub(super) struct Termination {
    pub why: String,
    /// `terminationGracePeriod` elapsed: remaining pods are deleted.
    pub deadline: Option<SimTime>,
    /// Pods already reported as blocked (one event per pod and blocker).
    reported: BTreeSet<(String, String)>,
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
                    taints.retain(|t| t.key != crate::scheduling::taints::DISRUPTED);
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

    /// One drain pass: core's decision ([`crate::termination::drain`]) carried out. The Eviction
    /// API's stand-in refuses a pod a PodDisruptionBudget protects; the others go at once. The
    /// simulated attach-detach controller detaches an evicted pod's volumes at once too, so no
    /// VolumeAttachment holds the instance here (the live controller waits for them:
    /// [`crate::termination::controller::pending_volume_attachments`]).
    pub(super) fn drain(&mut self, name: &str) {
        let Some(m) = self.machines.get(name) else { return };
        let (Some(node), Some(term)) = (m.node.clone(), m.terminating.clone()) else { return };
        let now_epoch = self.clock.epoch_seconds(self.now);
        let grace_elapsed = term.deadline.is_some_and(|d| self.now >= d);
        let pass = crate::termination::drain(&node, &self.objects.pods, now_epoch, grace_elapsed);
        if pass.drained() || !pass.delete.is_empty() {
            for pod in &pass.delete {
                self.remove_pod(&pod.namespace, &pod.name, RemovalCause::ForceDeleted);
            }
            self.schedule_timer(
                self.now.plus(self.timings.instance_termination),
                Timer::InstanceGone(name.to_string()),
            );
            return;
        }
        let mut reported = term.reported.clone();
        for pod in &pass.held {
            if reported.insert((pod.name.clone(), crate::labels::DO_NOT_DISRUPT.to_string())) {
                self.emit(Involved::node(&node), Reason::DrainBlockedByDoNotDisrupt { pod: pod.to_string() });
            }
        }
        let scales = self.pdb_scales();
        for pod_ref in &pass.evict {
            let Some(i) = self.pod_index(&pod_ref.namespace, &pod_ref.name) else { continue };
            let pod = &self.objects.pods[i];
            if let Some(blocker) = pdb::blocking(pod, &self.objects.pdbs, &self.objects.pods, &scales) {
                let blocker = pdb::name(blocker);
                if reported.insert((pod_ref.name.clone(), blocker.clone())) {
                    self.emit(Involved::node(&node), Reason::FailedDraining { pod: pod_ref.to_string(), pdb: blocker });
                }
                continue;
            }
            self.remove_pod(&pod_ref.namespace, &pod_ref.name, RemovalCause::Evicted);
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
            self.objects.volumeattachments.retain(|a| a.spec.node_name != *node);
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
    pub(super) fn remove_node_pods(&mut self, node: &str) -> usize {
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
