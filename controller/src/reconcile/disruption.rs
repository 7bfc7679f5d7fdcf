//! Disruption (upstream `disruption` and `disruption.queue`, `nodeclaim.expiration`), on the
//! conditions and marks [`super::nodeclaimdisruption`] and [`super::podevents`] write:
//!
//! - expiration: NodeClaims past `expireAfter` are deleted, regardless of budgets;
//! - the loop: every 10 s core's [`disruption::decide`] runs over the view; the verdicts that
//!   changed become `DisruptionBlocked` / `Unconsolidatable` events (one not written yet, within
//!   its dedupe timeout, dropped by a full queue or after a failed write, is offered again each
//!   pass); emptiness and consolidation
//!   commands wait 15 s and are validated again ([`orchestration::validate`]); a command taints its
//!   nodes `karpenter.sh/disrupted:NoSchedule`, sets their NodeClaims' `DisruptionReason`, creates
//!   its replacements, and deletes the nodes' NodeClaims once every replacement is initialized
//!   ([`orchestration::progress`]); termination drains them. A replacement that goes away, or a
//!   command older than 10 minutes, is abandoned and the taint comes off. Disrupted taints that
//!   belong to no command and no deletion (a restart) are removed first.
//!
//! Event texts are the simulation's ([`Reason`]), so the two read the same (the simulation logs
//! every change; an `Unconsolidatable` event is written at most once per node every 15 minutes).

use std::collections::{BTreeMap, BTreeSet};

use carpentry_core::api::NodeClaim;
use carpentry_core::disruption::orchestration::{self, Progress, Verdict};
use carpentry_core::disruption::{self, facts, Command};
use carpentry_core::events::Delivery;
use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::disruption as conditions;
use carpentry_core::pod::IgnoredValue;
use carpentry_core::simulation::Reason;
use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use tracing::{info, warn};

use super::act::{node_ref, nodeclaim_ref, pod_ref, EventTicket};
use super::Scheduling;
use crate::cloud::CloudProvider;

#[derive(Debug, Default)]
pub(super) struct State {
    /// When the next pass is due (epoch seconds).
    next_pass: i64,
    /// A command waiting for its validation, and when that is due.
    validating: Option<(Command, i64)>,
    executing: Vec<Executing>,
    /// The last verdict logged per node.
    logged: BTreeMap<String, String>,
    /// Verdict events queued and not yet known to be written, by node: one not written is
    /// offered again.
    unconfirmed: BTreeMap<String, EventTicket>,
    /// Node → until when a provisioning round nominated pods onto it (epoch seconds).
    pub(super) nominated: BTreeMap<String, i64>,
    /// Nodes whose NodeClaims a command or expiration deleted, with when: upstream marks them for
    /// deletion in its cluster state at once. Until the view shows the deletion, budgets count
    /// them as disrupting and their disrupted taint is no stale one.
    deleted: BTreeMap<String, i64>,
}

impl State {
    /// Verdict events that were queued and then not written (the write failed, leadership was
    /// lost first) are no longer logged, so that this pass offers them again.
    fn unlog_unwritten_verdicts(&mut self, act: &super::act::Act) {
        self.unconfirmed.retain(|node, ticket| match act.delivery(ticket) {
            Delivery::Pending => self.logged.contains_key(node),
            Delivery::Written => false,
            Delivery::Forgotten => {
                self.logged.remove(node);
                false
            }
        });
    }

    /// Records what became of a verdict's event: queued (`Some`), to be confirmed; else not
    /// logged, so that the next pass offers it again.
    fn offered(&mut self, node: String, queued: Option<EventTicket>) {
        match queued {
            Some(ticket) => {
                self.unconfirmed.insert(node, ticket);
            }
            None => {
                self.unconfirmed.remove(&node);
                self.logged.remove(&node);
            }
        }
    }
}

#[derive(Debug)]
struct Executing {
    command: Command,
    /// The replacement NodeClaims created, and whether each has been seen in the view.
    replacements: Vec<(String, bool)>,
    started: i64,
}

fn note(reason: &Reason) -> String {
    format!("{reason}")
}

fn explain(node: &str) -> String {
    format!("(kubectl karpenter explain node {node})")
}

impl<P: CloudProvider> Scheduling<P> {
    /// A `karpenter.sh/do-not-disrupt` value that protects nothing by mistake, on a managed node
    /// or a pod bound to one, is said in a Warning event on it (core's rule; the events dedupe
    /// writes it once per 2 minutes while it stays, a repeat counted into its series).
    async fn ignored_protections(&self, m: &Manifests) {
        let managed: BTreeMap<&str, &Node> = m
            .nodes
            .iter()
            .filter(|n| n.metadata.labels.as_ref().is_some_and(|l| l.contains_key(carpentry_core::labels::NODEPOOL)))
            .filter_map(|n| Some((n.metadata.name.as_deref()?, n)))
            .collect();
        for node in managed.values() {
            if let Some(ignored) = carpentry_core::pod::node_value_ignored(node) {
                self.act.event(&node_ref(node), true, IgnoredValue::REASON, ignored.to_string(), "Disrupt");
            }
        }
        for pod in &m.pods {
            let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
            if !bound.is_some_and(|n| managed.contains_key(n)) {
                continue;
            }
            if let Some(ignored) = carpentry_core::pod::pod_value_ignored(pod) {
                self.act.event(&pod_ref(pod), true, IgnoredValue::REASON, ignored.to_string(), "Disrupt");
            }
        }
    }

    /// Everything disruption does in one reconciler pass.
    pub(super) async fn disruption(&mut self, m: &Manifests, now: i64) {
        self.disruption.nominated.retain(|_, until| *until > now);
        self.expire(m, now).await;
        self.progress_commands(m, now).await;
        self.remove_stale_taints(m, now).await;
        // upstream: the loop waits for cluster state to be synced, every NodeClaim launched (a
        // pass on a view missing capacity could disrupt what a launch is about to need).
        if !self.synced(m) {
            tracing::debug!("disruption waits for the view to be synced");
            return;
        }
        if let Some((_, due)) = &self.disruption.validating {
            if now >= *due {
                let (cmd, _) = self.disruption.validating.take().expect("checked above");
                self.validate(m, cmd, now).await;
            }
            return;
        }
        if now < self.disruption.next_pass {
            return;
        }
        self.disruption.next_pass = now + orchestration::POLL_SECONDS;
        self.ignored_protections(m).await;
        let pass = disruption::decide(&self.disruption_view(m, now));
        let nodes: BTreeMap<&str, &Node> =
            m.nodes.iter().filter_map(|n| Some((n.metadata.name.as_deref()?, n))).collect();
        self.disruption.logged.retain(|node, _| nodes.contains_key(node.as_str()));
        self.disruption.unlog_unwritten_verdicts(&self.common.act);
        for (node, verdict) in orchestration::news(&pass, &mut self.disruption.logged) {
            let Some(n) = nodes.get(node.as_str()) else { continue };
            let (name, reason) = match verdict {
                Verdict::Blocked { blockers } => (
                    "DisruptionBlocked",
                    Reason::DisruptionBlocked { blockers: blockers.iter().map(ToString::to_string).collect() },
                ),
                Verdict::Unconsolidatable { method, why } => {
                    ("Unconsolidatable", Reason::Unconsolidatable { method: format!("{method:?}"), why })
                }
            };
            let text = format!("{} {}", note(&reason), explain(&node));
            // One not queued (an `Unconsolidatable` within its 15 minutes, a full queue) or not
            // written is offered again by the next pass, so that the node's last event becomes
            // its current verdict once it can be written, as upstream's publishing every pass does.
            let queued = self.act.event(&node_ref(n), false, name, text, "Disrupt");
            self.disruption.offered(node, queued);
        }
        let Some(cmd) = pass.command else { return };
        self.planned(m, &cmd).await;
        if cmd.method.validates() {
            self.disruption.validating = Some((cmd, now + orchestration::VALIDATION_SECONDS));
        } else {
            self.execute(m, cmd, now).await;
            // upstream: after a command the loop runs again at once.
            self.disruption.next_pass = now;
        }
    }

    fn disruption_view<'a>(&'a self, m: &'a Manifests, now: i64) -> disruption::View<'a> {
        let marked: BTreeSet<String> = self.disruption.deleted.keys().cloned().collect();
        let nodes = facts::of_objects(m, &self.catalogue, &self.region, &self.disruption.nominated, &marked);
        let unavailable = self.cloud.unavailable_offerings(&self.catalogue, &self.region);
        disruption::View::new(m, &self.catalogue, &self.region, now, nodes, unavailable)
    }

    /// upstream `nodeclaim.expiration`.
    async fn expire(&mut self, m: &Manifests, now: i64) {
        let created = |name: &str| {
            m.nodeclaims
                .iter()
                .find(|nc| nc.name() == name)
                .and_then(|nc| nc.metadata.creation_timestamp.as_ref())
                .map(|t| t.0.as_second())
        };
        for name in disruption::expired(m, created, now) {
            let Some(nc) = m.nodeclaims.iter().find(|nc| nc.name() == name) else { continue };
            let reason = Reason::Expired { after: nc.spec.expire_after.as_str().to_string() };
            self.act.decided("Expired", &json!({"nodeclaim": name, "expireAfter": nc.spec.expire_after.as_str()}));
            self.act.event(&nodeclaim_ref(nc), false, "Expired", note(&reason), "Delete");
            if self.act.delete_nodeclaim(&name).await {
                self.act.metrics.nodeclaim_disrupted(nc, "Expired");
                // This pass's budgets count it as disrupting (the view is from before the delete).
                if let Some(node) = facts::node_of(m, nc).and_then(|n| n.metadata.name.clone()) {
                    self.disruption.deleted.insert(node, now);
                }
            }
        }
    }

    async fn remove_stale_taints(&mut self, m: &Manifests, now: i64) {
        let pending: BTreeSet<String> = self
            .disruption
            .deleted
            .iter()
            .filter(|(node, at)| {
                let deletion_seen =
                    self.nodeclaim_of_node(m, node).is_none_or(|nc| nc.metadata.deletion_timestamp.is_some());
                !deletion_seen && now - **at < orchestration::AWAIT_OWN_WRITE_SECONDS
            })
            .map(|(node, _)| node.clone())
            .collect();
        self.disruption.deleted.retain(|node, _| pending.contains(node));
        let queued: BTreeSet<String> = self
            .disruption
            .executing
            .iter()
            .flat_map(|e| e.command.candidates.iter().cloned())
            .chain(self.disruption.deleted.keys().cloned())
            .collect();
        for name in orchestration::stale_disrupted(m, &queued) {
            let Some(node) = m.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(name)) else { continue };
            self.act.decided("DisruptedTaintRemoved", &json!({"node": name}));
            self.untaint(node).await;
        }
    }

    /// The command as a pass chose it (before validation, if it needs one).
    async fn planned(&mut self, m: &Manifests, cmd: &Command) {
        let reason = Reason::DisruptionPlanned {
            method: format!("{:?}", cmd.method),
            decision: cmd.decision().into(),
            nodes: cmd.candidates.clone(),
            replacements: cmd
                .replacements
                .iter()
                .map(|r| r.instance_type_options.first().cloned().unwrap_or_default())
                .collect(),
            savings_per_hour: cmd.savings_per_hour,
            why: cmd.why.clone(),
        };
        self.act.decided("DisruptionPlanned", &json!(cmd));
        if let Some(node) = self.node_named(m, cmd.candidates.first()) {
            let text = format!("{} {}", note(&reason), explain(cmd.candidates.first().map_or("", String::as_str)));
            self.act.event(&node_ref(node), false, "DisruptionPlanned", text, "Disrupt");
        }
    }

    fn node_named<'a>(&self, m: &'a Manifests, name: Option<&String>) -> Option<&'a Node> {
        let name = name?;
        m.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(name.as_str()))
    }

    fn nodeclaim_of_node<'a>(&self, m: &'a Manifests, node: &str) -> Option<&'a NodeClaim> {
        m.nodeclaims.iter().find(|nc| facts::node_of(m, nc).and_then(|n| n.metadata.name.as_deref()) == Some(node))
    }

    /// upstream `validation.go`.
    async fn validate(&mut self, m: &Manifests, cmd: Command, now: i64) {
        match orchestration::validate(&cmd, &self.disruption_view(m, now)) {
            Ok(again) => {
                self.execute(m, again, now).await;
                self.disruption.next_pass = now;
            }
            Err(rejection) => {
                self.act.decided("DisruptionRejected", &json!({"command": cmd, "rejection": rejection}));
                let reason = Reason::DisruptionRejected {
                    method: format!("{:?}", cmd.method),
                    nodes: cmd.candidates.clone(),
                    why: rejection.to_string(),
                };
                if let Some(node) = self.node_named(m, cmd.candidates.first()) {
                    self.act.event(&node_ref(node), true, "DisruptionRejected", note(&reason), "Disrupt");
                }
                self.disruption.next_pass = now + orchestration::POLL_SECONDS;
            }
        }
    }

    /// upstream `queue.go::StartCommand`: taint, `DisruptionReason`, replacements first; a command
    /// without replacements deletes its NodeClaims at once.
    async fn execute(&mut self, m: &Manifests, cmd: Command, now: i64) {
        let at = carpentry_core::api::time::format_time(now);
        let budget_reason = cmd.reason.as_str();
        for node_name in &cmd.candidates {
            let Some(node) = self.node_named(m, Some(node_name)) else { continue };
            if !carpentry_core::termination::is_disrupted(node) {
                let mut list = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
                list.push(carpentry_core::termination::disrupted_taint());
                let patch =
                    json!({"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": list}});
                if !self.act.patch_node(node_name, patch).await && !cmd.replacements.is_empty() && !self.act.dry_run {
                    warn!(node = %node_name, "cannot taint a candidate; the command is dropped");
                    return;
                }
            }
            if let Some(nc) = self.nodeclaim_of_node(m, node_name) {
                if let Some(list) = conditions::disruption_reason(nc, Some(budget_reason), &at) {
                    self.act.patch_nodeclaim_status(nc, json!({"conditions": list})).await;
                }
            }
        }
        let decision = if cmd.replacements.is_empty() { "Delete" } else { "Replace" };
        let replacement_types: Vec<&str> =
            cmd.replacements.iter().map(|r| r.instance_type_options.first().map_or("", String::as_str)).collect();
        self.act.decided(
            "Disrupting",
            &json!({"method": cmd.method, "reason": budget_reason, "decision": decision, "nodes": cmd.candidates,
                "replacements": replacement_types, "savingsPerHour": cmd.savings_per_hour, "why": cmd.why}),
        );
        self.act.metrics.disruption_decision(cmd.method, budget_reason, !cmd.replacements.is_empty());
        if cmd.replacements.is_empty() {
            self.delete_candidates(m, &cmd, now).await;
            return;
        }
        let mut replacements = Vec::new();
        for planned in &cmd.replacements {
            let Some(np) = m.nodepools.iter().find(|np| np.name() == planned.nodepool) else {
                warn!(nodepool = %planned.nodepool, "a replacement's NodePool is gone; the command is dropped");
                self.abandon(m, &cmd, format!("NodePool {} not found", planned.nodepool)).await;
                return;
            };
            let class = m.nodeclass_for(np).map(|c| c.spec.clone()).unwrap_or_default();
            let nc = carpentry_core::provisioning::nodeclaim_for(planned, np, &class);
            match self.act.create_nodeclaim(&nc).await {
                Ok(Some(name)) => {
                    self.created(name.clone());
                    self.act.metrics.nodeclaim_created(&nc, &budget_reason.to_lowercase());
                    replacements.push((name, false))
                }
                Ok(None) => {}
                Err(e) => {
                    warn!(error = %format!("{e:#}"), "cannot create a replacement; the command is dropped");
                    self.abandon(m, &cmd, format!("creating a replacement failed: {e:#}")).await;
                    return;
                }
            }
        }
        for node_name in &cmd.candidates {
            if let Some(node) = self.node_named(m, Some(node_name)) {
                let reason = Reason::Disrupting { method: budget_reason.into(), decision: decision.into() };
                let text = format!("Launching replacements first: {reason} {}", explain(node_name));
                self.act.event(&node_ref(node), false, "DisruptionLaunching", text, "Disrupt");
            }
        }
        if self.act.dry_run {
            return; // nothing was written: there is nothing to wait for
        }
        self.disruption.executing.push(Executing { command: cmd, replacements, started: now });
    }

    async fn delete_candidates(&mut self, m: &Manifests, cmd: &Command, now: i64) {
        let decision = if cmd.replacements.is_empty() { "Delete" } else { "Replace" };
        for node_name in &cmd.candidates {
            let Some(nc) = self.nodeclaim_of_node(m, node_name) else { continue };
            if let Some(node) = self.node_named(m, Some(node_name)) {
                let reason = Reason::Disrupting { method: cmd.reason.as_str().into(), decision: decision.into() };
                self.act.event(&node_ref(node), false, "DisruptionTerminating", note(&reason), "Disrupt");
            }
            info!(node = %node_name, nodeclaim = %nc.name(), method = ?cmd.method, "disrupting");
            if self.act.delete_nodeclaim(nc.name()).await {
                self.act.metrics.nodeclaim_disrupted(nc, cmd.reason.as_str());
            }
            self.disruption.deleted.insert(node_name.clone(), now);
        }
    }

    /// A command that cannot finish: the candidates' taint and `DisruptionReason` come off.
    async fn abandon(&mut self, m: &Manifests, cmd: &Command, why: String) {
        self.act.decided("DisruptionFailed", &json!({"nodes": cmd.candidates, "why": why}));
        let at = crate::clock::now_rfc3339();
        for node_name in &cmd.candidates {
            if let Some(node) = self.node_named(m, Some(node_name)) {
                self.untaint(node).await;
                let reason = Reason::DisruptionFailed { nodes: cmd.candidates.clone(), why: why.clone() };
                self.act.event(&node_ref(node), true, "DisruptionFailed", note(&reason), "Disrupt");
            }
            if let Some(nc) = self.nodeclaim_of_node(m, node_name) {
                if let Some(list) = conditions::disruption_reason(nc, None, &at) {
                    self.act.patch_nodeclaim_status(nc, json!({"conditions": list})).await;
                }
            }
        }
    }

    async fn untaint(&mut self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let list: Vec<_> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key != carpentry_core::termination::disrupted_taint().key)
            .collect();
        let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": list}});
        self.act.patch_node(&name, patch).await;
    }

    /// upstream `queue.go`'s reconciler: delete the candidates once every replacement is
    /// initialized; give up when one is gone or the command times out.
    async fn progress_commands(&mut self, m: &Manifests, now: i64) {
        let executing = std::mem::take(&mut self.disruption.executing);
        let timeout = orchestration::command_timeout_seconds(executing.len());
        for mut e in executing {
            let states: Vec<Option<bool>> = e
                .replacements
                .iter_mut()
                .map(|(name, seen)| match m.nodeclaims.iter().find(|nc| nc.name() == name.as_str()) {
                    Some(nc) => {
                        *seen = true;
                        Some(
                            carpentry_core::nodeclaim::lifecycle::phase(nc)
                                == carpentry_core::nodeclaim::lifecycle::Phase::Initialized,
                        )
                    }
                    // Created, not in the view yet.
                    None if !*seen && now - e.started < orchestration::AWAIT_OWN_WRITE_SECONDS => Some(false),
                    None => None,
                })
                .collect();
            match orchestration::progress(states) {
                Progress::Ready => self.delete_candidates(m, &e.command, now).await,
                Progress::Abandoned => {
                    self.abandon(m, &e.command, "a replacement NodeClaim was deleted before it was ready".into()).await
                }
                Progress::Waiting if now - e.started >= timeout => {
                    let why = format!("the replacements were not initialized within {timeout} s");
                    self.abandon(m, &e.command, why).await
                }
                Progress::Waiting => self.disruption.executing.push(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeApi;

    fn blocked_event(act: &super::super::act::Act, node: &str) -> Option<EventTicket> {
        let mut n = Node::default();
        n.metadata.name = Some(node.into());
        act.event(&node_ref(&n), false, "DisruptionBlocked", format!("{node} holds a do-not-disrupt pod"), "Disrupt")
    }

    /// A verdict whose event is queued but not written is offered again by the next pass; one
    /// written, or still on its way, is not.
    #[tokio::test]
    async fn a_verdict_whose_event_is_not_written_is_offered_again() {
        let api = FakeApi::default();
        let leader = crate::leader::Leader::unelected().status();
        let metrics = crate::metrics::Metrics::default();
        let act = super::super::act::Act::new(api.client(), false, "test".into(), metrics, leader);
        let mut state = State::default();
        for node in ["written", "failed", "suppressed"] {
            state.logged.insert(node.into(), "blocked".into());
        }
        state.offered("written".into(), blocked_event(&act, "written"));
        act.events_written().await;
        api.fail("/events", 500);
        state.offered("failed".into(), blocked_event(&act, "failed"));
        // The same event again while the first is written: suppressed, so not logged.
        state.offered("suppressed".into(), blocked_event(&act, "written"));
        state.unlog_unwritten_verdicts(&act);
        assert_eq!(state.logged.keys().collect::<Vec<_>>(), ["failed", "written"], "still on its way");
        act.events_written().await;
        state.unlog_unwritten_verdicts(&act);
        assert_eq!(state.logged.keys().collect::<Vec<_>>(), ["written"]);
        assert!(state.unconfirmed.is_empty(), "each known to be written or not");
        assert_eq!(api.events().len(), 2, "the first written, the second tried once");
    }
}
