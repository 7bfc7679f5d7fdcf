//! Browser adapter: exposes carpentry-core through wasm-bindgen. It translates and renders; the
//! Karpenter rules stay in carpentry-core.

use wasm_bindgen::prelude::*;

pub mod session;

pub use session::Session;

fn to_js<T: serde::Serialize + ?Sized>(value: &T) -> Result<JsValue, JsValue> {
    value.serialize(&serde_wasm_bindgen::Serializer::json_compatible()).map_err(|e| JsValue::from_str(&e.to_string()))
}

fn err(message: String) -> JsValue {
    JsValue::from_str(&message)
}

/// The playground's handle on a running scenario (JavaScript class `Playground`).
#[wasm_bindgen]
pub struct Playground(Session);

#[wasm_bindgen]
impl Playground {
    /// Loads YAML text; a bad document is an error naming the document, object, field and line.
    #[wasm_bindgen(constructor)]
    pub fn new(yaml: &str) -> Result<Playground, JsValue> {
        Session::load(yaml).map(Playground).map_err(|e| err(e.message))
    }

    /// Milliseconds since the start.
    #[wasm_bindgen(js_name = nowMs)]
    pub fn now_ms(&self) -> f64 {
        self.0.now_ms() as f64
    }

    /// Runs everything due up to `ms` after the start.
    #[wasm_bindgen(js_name = runUntil)]
    pub fn run_until(&mut self, ms: f64) {
        self.0.run_until(ms.max(0.0) as u64);
    }

    /// Runs the next moment at which something happens; false when nothing is left to do.
    pub fn step(&mut self) -> bool {
        self.0.step()
    }

    #[wasm_bindgen(js_name = nextEventMs)]
    pub fn next_event_ms(&self) -> Option<f64> {
        self.0.next_event_ms().map(|t| t as f64)
    }

    /// Nodes, pending pods, $/hour, cost so far, notes.
    pub fn state(&self) -> Result<JsValue, JsValue> {
        to_js(&self.0.state())
    }

    /// The events from index `from` on.
    #[wasm_bindgen(js_name = eventsSince)]
    pub fn events_since(&self, from: usize) -> Result<JsValue, JsValue> {
        to_js(self.0.events_since(from))
    }

    pub fn disruptions(&self) -> Result<JsValue, JsValue> {
        to_js(self.0.disruptions())
    }

    #[wasm_bindgen(js_name = explainPod)]
    pub fn explain_pod(&self, namespace: &str, name: &str) -> Result<JsValue, JsValue> {
        to_js(&self.0.explain_pod(namespace, name).map_err(err)?)
    }

    #[wasm_bindgen(js_name = explainNode)]
    pub fn explain_node(&self, name: &str) -> Result<JsValue, JsValue> {
        to_js(&self.0.explain_node(name).map_err(err)?)
    }

    #[wasm_bindgen(js_name = explainNodePool)]
    pub fn explain_nodepool(&self, name: &str) -> Result<JsValue, JsValue> {
        to_js(&self.0.explain_nodepool(name).map_err(err)?)
    }

    /// The instance types NodePool `name` may launch now: count, left out, the cheapest with prices.
    #[wasm_bindgen(js_name = instanceTypes)]
    pub fn instance_types(&self, name: &str) -> Result<JsValue, JsValue> {
        to_js(&self.0.instance_types(name).map_err(err)?)
    }

    /// The workloads whose replicas can be scaled, with their replicas now.
    pub fn workloads(&self) -> Result<JsValue, JsValue> {
        to_js(&self.0.workloads())
    }

    /// A Scenario step's action (JSON) taken now: scale, delete, interrupt, unavailableOffering.
    pub fn act(&mut self, step_json: &str) -> Result<(), JsValue> {
        self.0.act_json(step_json).map_err(err)
    }

    /// Applies edited objects (YAML text) now.
    pub fn apply(&mut self, yaml: &str) -> Result<(), JsValue> {
        self.0.apply(yaml).map_err(err)
    }
}

/// A JSON summary of the embedded EC2 catalogue (types, regions, zones, provenance), which the
/// placeholder playground page renders.
#[wasm_bindgen]
pub fn catalogue_summary() -> String {
    summary_json()
}

fn summary_json() -> String {
    let catalogue = carpentry_core::catalogue::Catalogue::embedded();
    let regions: Vec<serde_json::Value> = catalogue
        .regions()
        .map(|name| {
            let zones: Vec<&str> = catalogue.zones(name).unwrap_or_default().iter().map(|z| z.name.as_str()).collect();
            let offered =
                catalogue.infos().iter().filter(|it| !catalogue.offered_zones(name, &it.name).is_empty()).count();
            serde_json::json!({ "name": name, "zones": zones, "instanceTypes": offered })
        })
        .collect();
    serde_json::json!({
        "instanceTypes": catalogue.instance_type_count(),
        "provenance": catalogue
            .provenance()
            .inputs
            .iter()
            .map(|i| format!("{} {} ({})", i.package, i.version, i.registry))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
            .join(", "),
        "regions": regions,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn summary_lists_every_region_with_zones() {
        let summary: serde_json::Value = serde_json::from_str(&super::summary_json()).unwrap();
        let regions = summary["regions"].as_array().unwrap();
        assert_eq!(regions.len(), 30);
        assert!(regions.iter().all(|r| !r["zones"].as_array().unwrap().is_empty()));
        assert!(summary["instanceTypes"].as_u64().unwrap() > 1000);
    }
}
