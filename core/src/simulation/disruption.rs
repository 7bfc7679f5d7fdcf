//! The disruption controller in time (upstream `disruption/controller.go`, `validation.go`,
//! `orchestration/queue.go`, `nodeclaim/expiration`): a pass every
//! 10 s runs [`crate::disruption::decide`]; consolidation and emptiness commands wait 15 s and are
//! validated again; a command's replacements launch first and its nodes are terminated once they
//! are initialized (a replacement that fails abandons the command). Expiration deletes a NodeClaim
//! at `expireAfter` regardless.
//!
//! Blockers and passed-over nodes are logged when they change (`DisruptionBlocked`,
//! `Unconsolidatable`), not on every pass: a pass that decides the same thing is not a new
//! decision.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::api::nodepool::BudgetReason;
use crate::disruption::orchestration::{self, Progress, Verdict};
use crate::disruption::{self as rules, Command, NodeFacts, View};

use super::events::{Involved, Reason};
use super::{Duration, SimTime, Simulation, Timer};

/// upstream: the loop polls every 10 s when it has nothing to do.
pub const POLL: Duration = Duration::secs(orchestration::POLL_SECONDS as u64);
/// upstream `commandValidationDelay`.
pub const VALIDATION: Duration = Duration::secs(orchestration::VALIDATION_SECONDS as u64);
/// upstream: a nomination lasts max(2 × batch max, 10 s).
pub const NOMINATION: Duration = Duration::secs(orchestration::NOMINATION_SECONDS as u64);

/// A disruption carried out: a command the loop executed, or an expiration.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    pub at: SimTime,
    /// The budget reason (`Empty`, `Drifted`, `Underutilized`), or `Expired`.
    pub reason: String,
    /// `Emptiness`, `Drift`, `MultiNodeConsolidation`, `SingleNodeConsolidation`, `Expiration`.
    pub method: String,
    /// `delete` or `replace`.
    pub decision: String,
    pub nodes: Vec<String>,
    /// The replacements' cheapest instance types.
    pub replacements: Vec<String>,
    /// The replacement NodeClaims created.
    #[serde(rename = "replacementNodeClaims")]
    pub replacement_nodeclaims: Vec<String>,
    /// USD per hour saved: the nodes' price minus the replacements' (0 for expiration).
    pub savings_per_hour: f64,
    pub why: String,
}

#[derive(Debug, Default)]
pub(super) struct State {
    validating: Option<Command>,
    executing: Vec<Executing>,
    /// The last logged verdict per node.
    logged: BTreeMap<String, String>,
    /// Upstream `disruption/controller.go`'s memo: the state at the last pass that found nothing to do (not for budget
    /// reasons), and when; passes are skipped while it holds.
    memo: Option<Vec<u64>>,
}

#[derive(Debug, Clone)]
struct Executing {
    command: Command,
    replacements: Vec<String>,
}

impl Simulation {
    /// A pod bound to or left the node (upstream `lastPodEventTime`).
    pub(super) fn pod_event_on(&mut self, node: &str) {
        let now = self.now;
        for m in self.machines.values_mut().filter(|m| m.node.as_deref() == Some(node)) {
            m.last_pod_event = Some(now);
        }
    }

    fn facts(&self) -> Vec<NodeFacts> {
        let epoch = |t: SimTime| self.clock.epoch_seconds(t);
        let with_grace_period: std::collections::BTreeSet<&str> = self
            .objects
            .nodeclaims
            .iter()
            .filter(|nc| nc.spec.termination_grace_period.is_some())
            .map(|nc| nc.name())
            .collect();
        let expire_after: BTreeMap<&str, u64> = self
            .objects
            .nodeclaims
            .iter()
            .filter_map(|nc| Some((nc.name(), nc.spec.expire_after.as_seconds()?)))
            .collect();
        self.machines
            .iter()
            .filter_map(|(name, m)| {
                let node = m.node.clone()?;
                let quiet_since = m.quiet_since(&self.clock);
                Some(NodeFacts {
                    node,
                    nodeclaim: name.clone(),
                    nodepool: m.nodepool.clone(),
                    initialized: m.initialized.is_some(),
                    deleting: m.terminating.is_some() || m.disrupting,
                    nominated_until: m.nominated_until.map(epoch),
                    termination_grace_period: with_grace_period.contains(name.as_str()),
                    price: m.launch.as_ref().map_or(0.0, |l| l.price),
                    capacity_type: m.launch.as_ref().map(|l| l.capacity_type.clone()).unwrap_or_default(),
                    instance_type: m.launch.as_ref().map(|l| l.instance_type.clone()).unwrap_or_default(),
                    last_pod_event: quiet_since,
                    expires_at: expire_after.get(name.as_str()).map(|after| {
                        let created = m.before_start.and_then(|b| b.created).unwrap_or_else(|| epoch(m.created));
                        created + *after as i64
                    }),
                    drifted: m.drifted.map(|(r, t)| {
                        // Drifted before the start (the Drifted condition of an adopted NodeClaim).
                        let before = m.before_start.and_then(|b| b.drifted_since).filter(|_| t == SimTime::ZERO);
                        (r, before.unwrap_or_else(|| epoch(t)))
                    }),
                })
            })
            .collect()
    }

    /// Drift detection for launched NodeClaims (upstream re-checks every 5 minutes; here on every
    /// pass). A NodeClaim's stamps and labels do not change, so it is checked again only after an
    /// `apply` step changed the configuration.
    fn detect_drift(&mut self) {
        let epoch = self.config_epoch;
        let unchecked: BTreeMap<&str, &str> = self
            .machines
            .iter()
            .filter(|(_, m)| m.launched.is_some() && m.terminating.is_none() && m.drift_checked != Some(epoch))
            .map(|(name, m)| (name.as_str(), m.nodepool.as_str()))
            .collect();
        if unchecked.is_empty() {
            return;
        }
        let mut expected: BTreeMap<&str, Option<rules::drift::Expected>> = BTreeMap::new();
        let mut found = Vec::new();
        for nc in &self.objects.nodeclaims {
            let name = nc.name();
            let Some(pool) = unchecked.get(name) else { continue };
            let expect = expected.entry(pool).or_insert_with(|| {
                let np = self.objects.nodepools.iter().find(|np| np.name() == *pool)?;
                let class = self.objects.nodeclass_for(np).map(|c| c.spec.clone()).unwrap_or_default();
                Some(rules::drift::Expected::new(np, &class))
            });
            if let Some(expect) = expect {
                found.push((name.to_string(), expect.drifted(nc)));
            }
        }
        for (name, drift) in found {
            let Some(m) = self.machines.get_mut(&name) else { continue };
            m.drift_checked = Some(epoch);
            match (drift, m.drifted) {
                (Some(reason), None) => {
                    m.drifted = Some((reason, self.now));
                    self.emit(Involved::nodeclaim(&name), Reason::Drifted { why: reason.to_string() });
                }
                // Karpenter's own Drifted condition (before the start) stands: carpentry's hashes
                // cannot tell it wrong.
                (None, Some(_)) if m.before_start.is_some_and(|b| b.drifted_by_karpenter) => {}
                (None, Some(_)) => m.drifted = None,
                _ => {}
            }
        }
    }

    /// What the disruption loop would decide now (no side effects): the command, the methods'
    /// reasons for passing nodes over, and every node's blockers.
    pub fn plan_disruption(&self) -> rules::Pass {
        self.decide()
    }

    /// Why node `name` is or is not being disrupted, condition by condition, with what removing
    /// it would do now (`None`: not a node this simulation's Karpenter manages).
    pub fn explain_node(&self, name: &str) -> Option<rules::explain::NodeExplanation> {
        let view = self.view();
        let index = view.nodes.iter().position(|n| n.node == name)?;
        Some(rules::explain::explain_node(&view, index))
    }

    fn decide(&self) -> rules::Pass {
        rules::decide(&self.view())
    }

    /// The cluster as disruption reads it now.
    fn view(&self) -> View<'_> {
        let mut view = View::new(
            &self.objects,
            self.catalogue,
            &self.region,
            self.clock.epoch_seconds(self.now),
            self.facts(),
            self.known_unavailable(),
        );
        view.spot_to_spot =
            self.objects.scenario.as_ref().is_some_and(|s| s.spec.feature_gates.spot_to_spot_consolidation);
        view.scales = self.pdb_scales();
        view
    }

    /// What a pass depends on besides the cluster's changes: which nodes are quiet long enough,
    /// nominated, drifted; the budgets; pods under a do-not-disrupt duration.
    fn fingerprint(&self) -> Vec<u64> {
        let now = self.clock.epoch_seconds(self.now);
        let mut out = vec![self.changes];
        let after: BTreeMap<&str, Option<u64>> = self
            .objects
            .nodepools
            .iter()
            .map(|np| (np.name(), np.spec.disruption.consolidate_after.as_seconds()))
            .collect();
        // The same quantities `facts` gives the rules, without building them: this runs on every
        // pass, and most passes end here.
        for m in self.machines.values().filter(|m| m.node.is_some()) {
            let quiet_since = m.quiet_since(&self.clock);
            let quiet = after
                .get(m.nodepool.as_str())
                .copied()
                .flatten()
                .is_some_and(|a| quiet_since.is_some_and(|t| now >= t + a as i64));
            let nominated = m.nominated_until.is_some_and(|u| u > self.now);
            out.push(quiet as u64 | (nominated as u64) << 1 | (m.drifted.is_some() as u64) << 2);
        }
        for np in &self.objects.nodepools {
            for reason in [BudgetReason::Empty, BudgetReason::Drifted, BudgetReason::Underutilized] {
                out.push(rules::budgets::allowance(np, reason, 1000, 0, now).allowed as u64);
            }
        }
        let protected = self
            .objects
            .pods
            .iter()
            .filter(|p| {
                crate::pod::do_not_disrupt::pod_protection(p, now) != crate::pod::do_not_disrupt::Protection::None
            })
            .count();
        out.push(protected as u64);
        // Replacements may launch again when an unavailable offering's cache entry lapses.
        out.push(self.known_unavailable().len() as u64);
        out
    }

    /// One pass of the loop.
    pub(super) fn disruption_pass(&mut self) {
        self.detect_drift();
        let fingerprint = self.fingerprint();
        if let Some(memo) = &self.disruption.memo {
            // upstream also re-runs a remembered no-op after 5 minutes; the fingerprint holds
            // every input of a pass that time alone changes, so that re-run would decide the same.
            if *memo == fingerprint {
                self.schedule_timer(self.now.plus(POLL), Timer::Disruption);
                return;
            }
        }
        let pass = self.decide();
        self.log_verdicts(&pass);
        // upstream does not remember a no-op that a budget held back, since the budget may allow
        // more later; the fingerprint includes every budget's allowance, so such a no-op is
        // remembered here too and a change of budget runs the next pass.
        self.disruption.memo = match &pass.command {
            None => Some(self.fingerprint()),
            Some(_) => None,
        };
        match pass.command {
            Some(cmd) if cmd.method.validates() => {
                self.emit_planned(&cmd);
                self.disruption.validating = Some(cmd);
                // upstream: the loop waits for the validation.
                self.schedule_timer(self.now.plus(VALIDATION), Timer::Validate);
            }
            Some(cmd) => {
                self.emit_planned(&cmd);
                self.execute(cmd);
                self.schedule_timer(self.now.plus(POLL), Timer::Disruption);
            }
            None => self.schedule_timer(self.now.plus(POLL), Timer::Disruption),
        }
    }

    fn emit_planned(&mut self, cmd: &Command) {
        let replacements =
            cmd.replacements.iter().map(|r| r.instance_type_options.first().cloned().unwrap_or_default()).collect();
        let reason = Reason::DisruptionPlanned {
            method: format!("{:?}", cmd.method),
            decision: cmd.decision().into(),
            nodes: cmd.candidates.clone(),
            replacements,
            savings_per_hour: cmd.savings_per_hour,
            why: cmd.why.clone(),
        };
        let first = cmd.candidates.first().cloned().unwrap_or_default();
        self.emit(Involved::node(&first), reason);
    }

    fn log_verdicts(&mut self, pass: &rules::Pass) {
        for (node, verdict) in orchestration::news(pass, &mut self.disruption.logged) {
            let reason = match verdict {
                Verdict::Blocked { blockers } => {
                    Reason::DisruptionBlocked { blockers: blockers.iter().map(ToString::to_string).collect() }
                }
                Verdict::Unconsolidatable { method, why } => {
                    Reason::Unconsolidatable { method: format!("{method:?}"), why }
                }
            };
            self.emit(Involved::node(&node), reason);
        }
    }

    /// The 15 s validation (upstream `validation.go`): emptiness keeps the nodes still empty,
    /// consolidation must be chosen again.
    pub(super) fn validate_command(&mut self) {
        let Some(cmd) = self.disruption.validating.take() else { return };
        self.detect_drift();
        match orchestration::validate(&cmd, &self.view()) {
            Ok(again) => {
                self.execute(again);
                self.schedule_timer(self.now, Timer::Disruption);
            }
            Err(rejection) => {
                self.emit(
                    Involved::node(cmd.candidates.first().map(String::as_str).unwrap_or_default()),
                    Reason::DisruptionRejected {
                        method: format!("{:?}", cmd.method),
                        nodes: cmd.candidates.clone(),
                        why: rejection.to_string(),
                    },
                );
                self.schedule_timer(self.now.plus(POLL), Timer::Disruption);
            }
        }
    }

    fn machine_of(&self, node: &str) -> Option<String> {
        self.machines.iter().find(|(_, m)| m.node.as_deref() == Some(node)).map(|(n, _)| n.clone())
    }

    /// upstream `queue.StartCommand`: replacements first; the nodes go when they are initialized.
    fn execute(&mut self, cmd: Command) {
        if cmd.replacements.is_empty() {
            self.record_disruption(&cmd, Vec::new());
            for node in &cmd.candidates {
                self.emit(
                    Involved::node(node),
                    Reason::Disrupting { method: cmd.reason.as_str().into(), decision: "Delete".into() },
                );
                if let Some(nc) = self.machine_of(node) {
                    self.terminate(&nc, &format!("disruption: {} ({})", cmd.reason.as_str(), cmd.why));
                }
            }
            return;
        }
        let mut replacements = Vec::new();
        for planned in &cmd.replacements {
            match self.create_planned(planned) {
                Some(name) => replacements.push(name),
                None => {
                    self.emit(
                        Involved::node(cmd.candidates.first().map(String::as_str).unwrap_or_default()),
                        Reason::DisruptionFailed {
                            nodes: cmd.candidates.clone(),
                            why: format!("NodePool {} not found", planned.nodepool),
                        },
                    );
                    return;
                }
            }
        }
        self.record_disruption(&cmd, replacements.clone());
        for node in &cmd.candidates {
            self.taint_disrupted(node);
            if let Some(nc) = self.machine_of(node) {
                if let Some(m) = self.machines.get_mut(&nc) {
                    m.disrupting = true;
                }
            }
            self.emit(
                Involved::node(node),
                Reason::Disrupting { method: cmd.reason.as_str().into(), decision: "Replace".into() },
            );
        }
        self.disruption.executing.push(Executing { command: cmd, replacements });
    }

    fn record_disruption(&mut self, cmd: &Command, replacement_nodeclaims: Vec<String>) {
        self.disruptions.push(Disruption {
            at: self.now,
            reason: cmd.reason.as_str().into(),
            method: format!("{:?}", cmd.method),
            decision: cmd.decision().into(),
            nodes: cmd.candidates.clone(),
            replacements: cmd
                .replacements
                .iter()
                .map(|r| r.instance_type_options.first().cloned().unwrap_or_default())
                .collect(),
            replacement_nodeclaims,
            savings_per_hour: cmd.savings_per_hour,
            why: cmd.why.clone(),
        });
    }

    /// Every disruption carried out so far, in order.
    pub fn disruptions(&self) -> &[Disruption] {
        &self.disruptions
    }

    /// NodePool `name`'s usage against its limits and what its budgets allow, now and over the
    /// next 7 days (`None`: no such NodePool).
    pub fn explain_nodepool(&self, name: &str) -> Option<rules::explain::NodePoolExplanation> {
        rules::explain::explain_nodepool(&self.view(), name)
    }

    /// Commands waiting for replacements: go on once all are initialized, give up if one is gone.
    pub(super) fn progress_commands(&mut self) {
        let executing = std::mem::take(&mut self.disruption.executing);
        for e in executing {
            let progress = orchestration::progress(
                e.replacements.iter().map(|r| self.machines.get(r).map(|m| m.initialized.is_some())),
            );
            if progress == Progress::Abandoned {
                for node in &e.command.candidates {
                    self.untaint_disrupted(node);
                    if let Some(nc) = self.machine_of(node) {
                        if let Some(m) = self.machines.get_mut(&nc) {
                            m.disrupting = false;
                        }
                    }
                }
                self.emit(
                    Involved::node(e.command.candidates.first().map(String::as_str).unwrap_or_default()),
                    Reason::DisruptionFailed {
                        nodes: e.command.candidates.clone(),
                        why: "a replacement NodeClaim was deleted before it was ready".into(),
                    },
                );
            } else if progress == Progress::Ready {
                for node in &e.command.candidates {
                    if let Some(nc) = self.machine_of(node) {
                        self.terminate(&nc, &format!("disruption: {} ({})", e.command.reason.as_str(), e.command.why));
                    }
                }
            } else {
                self.disruption.executing.push(e);
            }
        }
    }

    fn taint_disrupted(&mut self, node: &str) {
        if let Some(n) = self.objects.nodes.iter_mut().find(|n| n.metadata.name.as_deref() == Some(node)) {
            let taints = n.spec.get_or_insert_with(Default::default).taints.get_or_insert_with(Vec::new);
            taints.retain(|t| t.key != crate::scheduling::taints::DISRUPTED);
            taints.push(crate::termination::disrupted_taint());
            // upstream's provisioning NodeController: a tainted node triggers a round (its pods
            // are nominated onto the replacements).
            self.trigger_for_disrupted();
        }
    }

    fn untaint_disrupted(&mut self, node: &str) {
        if let Some(taints) = self
            .objects
            .nodes
            .iter_mut()
            .find(|n| n.metadata.name.as_deref() == Some(node))
            .and_then(|n| n.spec.as_mut())
            .and_then(|s| s.taints.as_mut())
        {
            taints.retain(|t| t.key != crate::scheduling::taints::DISRUPTED);
        }
    }

    /// expireAfter elapsed (upstream `nodeclaim/expiration`): deleted, forcefully.
    pub(super) fn expire(&mut self, name: &str) {
        let Some(m) = self.machines.get(name) else { return };
        if m.terminating.is_some() {
            return;
        }
        let after = self
            .objects
            .nodeclaims
            .iter()
            .find(|nc| nc.name() == name)
            .map(|nc| nc.spec.expire_after.as_str().to_string())
            .unwrap_or_default();
        self.emit(Involved::nodeclaim(name), Reason::Expired { after: after.clone() });
        let node = self.machines.get(name).and_then(|m| m.node.clone()).unwrap_or_else(|| name.to_string());
        self.disruptions.push(Disruption {
            at: self.now,
            reason: "Expired".into(),
            method: "Expiration".into(),
            decision: "delete".into(),
            nodes: vec![node],
            replacements: Vec::new(),
            replacement_nodeclaims: Vec::new(),
            savings_per_hour: 0.0,
            why: format!("expireAfter {after} elapsed"),
        });
        self.terminate(name, "expired");
    }
}
