//! What the playground remembers: the scenario text, the actions taken on it and when, and the
//! time reached. The simulation is deterministic, so replaying a recording rebuilds the same
//! state; that is how the page scrubs back in time, restores a reload and opens a share link.

use carpentry_core::manifest::scenario::Step;
use carpentry_wasm::session::LoadFailure;
use carpentry_wasm::Session;
use serde::{Deserialize, Serialize};

/// A scenario and what was done to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recording {
    /// The YAML the session was loaded from.
    pub yaml: String,
    /// Actions in the order they were taken (times never decrease).
    #[serde(default)]
    pub actions: Vec<Action>,
    /// The simulated time shown (ms since the start).
    #[serde(default)]
    pub now_ms: u64,
    /// The gallery example it started from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

/// One action taken at a simulated time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    pub at_ms: u64,
    #[serde(flatten)]
    pub what: ActionKind,
}

// A recording holds a few dozen actions at most: boxing the step would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ActionKind {
    /// A Scenario step's action (scale, delete, interrupt, unavailableOffering; its `at` is unused,
    /// the action's time is [`Action::at_ms`]).
    Act(#[serde(deserialize_with = "step_or_step_json")] Step),
    /// Objects applied (YAML or JSON text).
    Apply(String),
}

/// A step, or (as recordings saved before steps were typed hold it) the step as JSON text.
fn step_or_step_json<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Step, D::Error> {
    #[allow(clippy::large_enum_variant)]
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Saved {
        Step(Step),
        Json(String),
    }
    match Saved::deserialize(deserializer)? {
        Saved::Step(step) => Ok(step),
        Saved::Json(text) => {
            let mut value: serde_json::Value = serde_json::from_str(&text).map_err(serde::de::Error::custom)?;
            if let Some(map) = value.as_object_mut() {
                map.entry("at").or_insert_with(|| "0s".into());
            }
            serde_json::from_value(value).map_err(serde::de::Error::custom)
        }
    }
}

impl ActionKind {
    pub fn perform(&self, session: &mut Session) -> Result<(), String> {
        match self {
            ActionKind::Act(step) => session.act(step),
            ActionKind::Apply(text) => session.apply(text),
        }
    }

    /// The action as a Scenario step (JSON text) at `at`, for export; empty for YAML text, which
    /// the exporter keeps as a comment instead.
    pub fn as_step(&self, at: &str) -> String {
        match self {
            ActionKind::Act(step) => {
                let step = Step { at: at.to_string(), ..step.clone() };
                serde_json::to_string(&step).unwrap_or_default()
            }
            ActionKind::Apply(text) => {
                let objects: Vec<serde_json::Value> = match serde_json::from_str::<serde_json::Value>(text) {
                    Ok(serde_json::Value::Array(list)) => list,
                    Ok(one) => vec![one],
                    Err(_) => return String::new(),
                };
                serde_json::json!({ "at": at, "apply": objects }).to_string()
            }
        }
    }
}

impl Recording {
    pub fn new(yaml: String, example: Option<String>) -> Recording {
        Recording { yaml, actions: Vec::new(), now_ms: 0, example }
    }

    /// Loads the scenario and replays the actions up to `until_ms`.
    /// A failed action names no line of the scenario text.
    pub fn replay(&self, until_ms: u64) -> Result<Session, LoadFailure> {
        let mut session = Session::load(&self.yaml)?;
        for a in self.actions.iter().filter(|a| a.at_ms <= until_ms) {
            session.run_until(a.at_ms);
            a.what.perform(&mut session).map_err(|e| LoadFailure {
                message: format!("replaying the action at {} ms: {e}", a.at_ms),
                line: None,
            })?;
        }
        session.run_until(until_ms);
        Ok(session)
    }

    /// Records an action taken at `at_ms`. Actions after it belong to a future that scrubbing
    /// back has abandoned: they are dropped.
    pub fn record(&mut self, at_ms: u64, what: ActionKind) {
        self.actions.retain(|a| a.at_ms <= at_ms);
        self.actions.push(Action { at_ms, what });
    }

    /// The YAML to export: the scenario text, and the actions as a Scenario document's steps when
    /// the text has no Scenario of its own (else as comments to merge by hand).
    pub fn export_yaml(&self) -> String {
        let mut out = self.yaml.trim_end().to_string();
        out.push('\n');
        if self.actions.is_empty() {
            return out;
        }
        let steps: Vec<String> = self
            .actions
            .iter()
            .map(|a| {
                let at = format!("{}s", a.at_ms as f64 / 1000.0);
                let step = a.what.as_step(&at);
                if step.is_empty() {
                    format!("{{\"at\": \"{at}\"}}  # apply: see the playground's edit")
                } else {
                    step
                }
            })
            .collect();
        let has_scenario = self.yaml.lines().any(|l| l.trim() == "kind: Scenario");
        out.push_str("---\n# Actions taken in the playground.\n");
        if has_scenario {
            out.push_str("# Merge these into the Scenario document's steps:\n");
            for s in steps {
                out.push_str(&format!("# - {s}\n"));
            }
        } else {
            out.push_str("apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec:\n  steps:\n");
            for s in steps {
                out.push_str(&format!("  - {s}\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use carpentry_core::manifest::scenario::ScaleAction;

    fn inflate() -> Recording {
        Recording::new(crate::examples::by_id("inflate").unwrap().yaml.to_string(), Some("inflate".into()))
    }

    fn scale(replicas: i32) -> ActionKind {
        let action =
            ScaleAction { kind: "Deployment".into(), namespace: "default".into(), name: "inflate".into(), replicas };
        ActionKind::Act(Step::scale("0s", action))
    }

    #[test]
    fn recordings_saved_with_steps_as_json_text_still_load() {
        let saved = r#"{"yaml": "", "actions": [{"atMs": 5000, "act": "{\"scale\": {\"kind\": \"Deployment\", \"name\": \"inflate\", \"replicas\": 3}}"}]}"#;
        let r: Recording = serde_json::from_str(saved).unwrap();
        assert_eq!(r.actions[0].what, scale(3));
        let typed = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Recording>(&typed).unwrap(), r, "and round-trip as typed steps");
        assert!(serde_json::from_str::<Recording>(r#"{"yaml": "", "actions": [{"atMs": 1, "act": "{"}]}"#).is_err());
    }

    #[test]
    fn replay_rebuilds_the_same_state() {
        let mut r = inflate();
        let mut live = r.replay(0).unwrap();
        live.run_until(5_000);
        scale(3).perform(&mut live).unwrap();
        r.record(5_000, scale(3));
        live.run_until(180_000);
        let replayed = r.replay(180_000).unwrap();
        let a = serde_json::to_string(&live.state()).unwrap();
        let b = serde_json::to_string(&replayed.state()).unwrap();
        assert_eq!(a, b);
        assert_eq!(replayed.state().snapshot.nodes.len(), 3);
        // Back before the action: nothing launched.
        assert!(r.replay(4_000).unwrap().state().snapshot.nodes.is_empty());
    }

    #[test]
    fn recording_after_scrubbing_back_drops_the_abandoned_future() {
        let mut r = inflate();
        r.record(5_000, scale(3));
        r.record(60_000, scale(1));
        r.record(30_000, scale(2));
        assert_eq!(r.actions.iter().map(|a| a.at_ms).collect::<Vec<_>>(), vec![5_000, 30_000]);
    }

    #[test]
    fn export_carries_the_actions_as_steps_that_load_and_replay() {
        let mut r = inflate();
        r.record(5_000, scale(3));
        let yaml = r.export_yaml();
        assert!(yaml.contains("kind: Scenario"), "{yaml}");
        let mut s = Session::load(&yaml).unwrap();
        s.run_until(180_000);
        assert_eq!(s.state().snapshot.nodes.len(), 3, "the exported step scales at 5 s");
    }
}
