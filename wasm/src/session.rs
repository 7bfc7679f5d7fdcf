//! The playground's session over the core simulation, in plain Rust so that it is tested natively;
//! `lib.rs` exposes it to JavaScript. Translation only: every decision is carpentry-core's.

use carpentry_core::manifest::scenario::Step;
use carpentry_core::manifest::{self, Manifests};
use carpentry_core::simulation::{SimTime, Simulation, Timings};
use serde::Serialize;

/// A loaded scenario running on the simulated clock.
pub struct Session {
    sim: Simulation,
    /// Notes on the input: legacy manifests converted, assumptions made.
    notes: Vec<String>,
}

/// What the page draws at a moment.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// Milliseconds since the start.
    pub now_ms: u64,
    /// The same, as Go prints durations (`1m2s`).
    pub time: SimTime,
    pub start: String,
    #[serde(flatten)]
    pub snapshot: carpentry_core::simulation::Snapshot,
    pub cost: carpentry_core::simulation::CostSummary,
    pub events: usize,
    pub notes: Vec<String>,
}

impl Session {
    /// Loads YAML text (any number of documents, legacy kinds converted with a note each).
    /// Errors name the document, object, field and line.
    pub fn load(yaml: &str) -> Result<Session, LoadFailure> {
        let mut m: Manifests = manifest::load(yaml).map_err(|e| LoadFailure {
            line: e.problems.iter().map(|p| p.position.line).find(|&l| l > 0),
            message: e.to_string(),
        })?;
        let mut notes: Vec<String> = m.convert_legacy().into_iter().map(|n| n.on_load()).collect();
        let sim = Simulation::new(&m, None, Timings::default())
            .map_err(|e| LoadFailure { message: carpentry_core::error_chain(&e), line: None })?;
        notes.extend(sim.notes().map(str::to_string));
        Ok(Session { sim, notes })
    }

    pub fn now_ms(&self) -> u64 {
        self.sim.now().millis()
    }

    /// Runs everything due up to `ms` after the start.
    pub fn run_until(&mut self, ms: u64) {
        self.sim.run_until(SimTime(ms));
    }

    /// Runs the next moment at which something happens; false when nothing is left to do.
    pub fn step(&mut self) -> bool {
        self.sim.step()
    }

    pub fn next_event_ms(&self) -> Option<u64> {
        self.sim.next_event_time().map(SimTime::millis)
    }

    pub fn state(&self) -> State {
        let mut notes = self.notes.clone();
        for n in self.sim.notes() {
            if !notes.iter().any(|x| x == n) {
                notes.push(n.to_string());
            }
        }
        State {
            now_ms: self.now_ms(),
            time: self.sim.now(),
            start: self.sim.clock().rfc3339(SimTime::ZERO),
            snapshot: self.sim.snapshot(),
            cost: self.sim.cost(),
            events: self.sim.events().len(),
            notes,
        }
    }

    /// The events from index `from` on (the page keeps what it has already drawn).
    pub fn events_since(&self, from: usize) -> &[carpentry_core::simulation::Event] {
        self.sim.events().get(from..).unwrap_or(&[])
    }

    pub fn disruptions(&self) -> &[carpentry_core::simulation::Disruption] {
        self.sim.disruptions()
    }

    pub fn explain_pod(&self, namespace: &str, name: &str) -> Result<carpentry_core::simulation::PodStanding, String> {
        self.sim.explain_pod(namespace, name).ok_or_else(|| format!("no pod {namespace}/{name}"))
    }

    pub fn explain_node(&self, name: &str) -> Result<carpentry_core::disruption::explain::NodeExplanation, String> {
        self.sim.explain_node(name).ok_or_else(|| format!("no node {name} managed by Karpenter"))
    }

    pub fn explain_nodepool(
        &self,
        name: &str,
    ) -> Result<carpentry_core::disruption::explain::NodePoolExplanation, String> {
        self.sim.explain_nodepool(name).ok_or_else(|| format!("no NodePool {name}"))
    }

    /// A Scenario step's action taken now (`scale`, `delete`, `interrupt`, `unavailableOffering`;
    /// `at` is ignored). Objects are applied with [`Session::apply`].
    pub fn act(&mut self, step: &Step) -> Result<(), String> {
        if step.apply.is_some() {
            return Err("action: use apply with YAML text to apply objects".into());
        }
        self.sim.act(step, None).map_err(|e| carpentry_core::error_chain(&e))
    }

    /// [`Session::act`] on a step given as JSON (what JavaScript passes; `at` may be left out).
    pub fn act_json(&mut self, step_json: &str) -> Result<(), String> {
        let mut value: serde_json::Value = serde_json::from_str(step_json).map_err(|e| format!("action: {e}"))?;
        if let Some(map) = value.as_object_mut() {
            map.entry("at").or_insert_with(|| "0s".into());
        }
        let step: Step = serde_json::from_value(value).map_err(|e| format!("action: {e}"))?;
        self.act(&step)
    }

    /// Applies edited objects (YAML text) now.
    pub fn apply(&mut self, yaml: &str) -> Result<(), String> {
        let m = manifest::load(yaml).map_err(|e| e.to_string())?;
        self.sim.apply(m).map_err(|e| carpentry_core::error_chain(&e))
    }

    /// The instance types NodePool `name` may launch now, cheapest first.
    pub fn instance_types(&self, name: &str) -> Result<carpentry_core::scheduling::AllowedInstanceTypes, String> {
        self.explain_nodepool(name).map(|e| e.instance_types)
    }

    /// The scalable workloads (Deployments, ReplicaSets, StatefulSets) and their replicas now.
    pub fn workloads(&self) -> Vec<Workload> {
        self.sim.workloads()
    }

    /// NodePool names, in the order of the input.
    pub fn nodepools(&self) -> Vec<String> {
        self.sim.objects().nodepools.iter().map(|np| np.name().to_string()).collect()
    }

    /// EC2NodeClasses with their AMI selection, as the drift form shows them.
    pub fn nodeclasses(&self) -> Vec<NodeClassSummary> {
        self.sim
            .objects()
            .nodeclasses
            .iter()
            .map(|nc| NodeClassSummary {
                name: nc.metadata.name.clone().unwrap_or_default(),
                ami: nc
                    .spec
                    .ami_selector_terms
                    .iter()
                    .map(|t| serde_json::to_string(t).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
            .collect()
    }

    /// The EC2NodeClass `name` with its AMI selection replaced by `alias` (e.g. `al2023@v20250101`),
    /// as JSON text for [`Session::apply`]: the edit a user makes to roll out an AMI.
    pub fn pin_ami(&self, name: &str, alias: &str) -> Result<String, String> {
        let nc = self
            .sim
            .objects()
            .nodeclasses
            .iter()
            .find(|nc| nc.metadata.name.as_deref() == Some(name))
            .ok_or_else(|| format!("no EC2NodeClass {name}"))?;
        let edited = nc.with_ami_alias(alias).map_err(|errors| {
            let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
            format!("EC2NodeClass {name}: {}", errors.join("; "))
        })?;
        serde_json::to_string(&edited).map_err(|e| e.to_string())
    }

    /// NodePool `name`'s disruption budgets as JSON text (what the budget editor starts from).
    pub fn budgets(&self, name: &str) -> Result<String, String> {
        let np = self.nodepool(name)?;
        serde_json::to_string(&np.spec.disruption.budgets).map_err(|e| e.to_string())
    }

    /// NodePool `name` with its budgets replaced by `budgets_json` (a JSON list), as JSON text for
    /// [`Session::apply`]. Malformed budgets are errors here; invalid ones are the core's to reject.
    pub fn with_budgets(&self, name: &str, budgets_json: &str) -> Result<String, String> {
        let mut np = self.nodepool(name)?.clone();
        np.status = None;
        np.spec.disruption.budgets = serde_json::from_str(budgets_json).map_err(|e| format!("budgets: {e}"))?;
        serde_json::to_string(&np).map_err(|e| e.to_string())
    }

    fn nodepool(&self, name: &str) -> Result<&carpentry_core::api::nodepool::NodePool, String> {
        self.sim.objects().nodepools.iter().find(|np| np.name() == name).ok_or_else(|| format!("no NodePool {name}"))
    }

    /// Pending pod (`namespace/name`, from a [`State`] the caller already has) → its latest
    /// scheduling event, the one-line reason a viewer shows beside it (Karpenter's
    /// `FailedScheduling` or `Nominated`).
    pub fn pending_reasons(&self, pending: &[String]) -> std::collections::BTreeMap<String, String> {
        self.sim.latest_scheduling_events(pending)
    }
}

/// Why a scenario does not load: the message (naming the document, object, field and line), and the
/// first line of the text it names, for an editor to mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadFailure {
    pub message: String,
    pub line: Option<usize>,
}

impl std::fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A workload the playground can scale.
pub use carpentry_core::simulation::WorkloadView as Workload;

/// An EC2NodeClass and its AMI selector terms (JSON, one per term).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeClassSummary {
    pub name: String,
    pub ami: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use carpentry_core::manifest::scenario::ScaleAction;

    fn scale(name: &str, replicas: i32) -> ScaleAction {
        ScaleAction { kind: "Deployment".into(), namespace: "default".into(), name: name.into(), replicas }
    }

    const INFLATE: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-cpu, operator: In, values: [\"2\"]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      containers: [{name: c, image: pause, resources: {requests: {cpu: \"1\"}}}]
";

    #[test]
    fn the_inflate_example_scales_and_explains() {
        let mut s = Session::load(INFLATE).unwrap();
        s.act(&Step::scale("0s", scale("inflate", 3))).unwrap();
        assert_eq!(s.state().snapshot.pending.len(), 3);
        s.run_until(120_000);
        let state = s.state();
        assert_eq!(state.snapshot.nodes.len(), 3, "one 2-vCPU node per 1-CPU pod");
        assert!(state.snapshot.nodes.iter().all(|n| n.price > 0.0 && n.instance_type.is_some()));
        assert_eq!(state.time.to_string(), "+2m0s");
        let json = serde_json::to_value(&state).unwrap();
        assert_eq!(json["nowMs"], 120_000);
        assert!(json["pricePerHour"].as_f64().unwrap() > 0.0);
        // Events are read incrementally.
        let all = s.events_since(0).len();
        assert_eq!(s.events_since(all).len(), 0);
        assert!(s.events_since(all + 10).is_empty());
        // Explanations.
        assert!(matches!(
            s.explain_pod("default", "inflate-0").unwrap(),
            carpentry_core::simulation::PodStanding::Running { .. }
        ));
        let node = &state.snapshot.nodes[0].name;
        assert!(!s.explain_node(node).unwrap().checks.is_empty());
        assert_eq!(s.explain_nodepool("default").unwrap().nodepool, "default");
        let types = s.instance_types("default").unwrap();
        assert!(types.count > 5 && types.cheapest.iter().all(|t| t.cpu == "2" && t.capacity_type == "on-demand"));
        assert!(types.cheapest.windows(2).all(|w| w[0].price <= w[1].price), "cheapest first");
        assert_eq!(s.workloads()[0].replicas, 3);
        let pinned = s.pin_ami("default", "al2023@v20260101").unwrap_err();
        assert!(pinned.contains("no EC2NodeClass"), "{pinned}");
        let budgets = s.with_budgets("default", r#"[{"nodes": "0"}]"#).unwrap();
        s.apply(&budgets).unwrap();
        assert!(s.budgets("default").unwrap().contains(r#""nodes":"0""#));
        assert!(s.with_budgets("default", "[{").unwrap_err().starts_with("budgets:"));
        assert!(s.explain_pod("default", "nope").is_err());
    }

    #[test]
    fn bad_input_and_bad_actions_are_errors_not_panics() {
        let err = Session::load("kind: NodePool\napiVersion: karpenter.sh/v1\nspec: {template: 3}\n").err().unwrap();
        assert!(err.message.contains("document 1"), "{err}");
        assert_eq!(err.line, Some(3), "{err}");
        let mut s = Session::load(INFLATE).unwrap();
        assert!(s.act_json("{").unwrap_err().starts_with("action:"));
        assert!(s.act_json(r#"{"scale": {"kind": "Deployment", "name": "nope", "replicas": 1}}"#).is_err());
        assert!(s.act_json(r#"{"launch": {}}"#).unwrap_err().contains("unknown field"));
        assert!(s.apply("kind: [").is_err());
        // An edit applied now: the NodePool template gains a label, and launched nodes drift.
        s.act(&Step::scale("0s", scale("inflate", 1))).unwrap();
        s.run_until(120_000);
        let edited = INFLATE.replace(
            "  template:\n    spec:\n      nodeClassRef",
            "  template:\n    metadata: {labels: {team: a}}\n    spec:\n      nodeClassRef",
        );
        s.apply(&edited).unwrap();
        s.run_until(130_000);
        assert!(s.events_since(0).iter().any(|e| e.reason.name() == "Drifted"));
    }
}
