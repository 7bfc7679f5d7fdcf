//! Prediction = reality: the simulation of a `/snapshot` beside what the live controller did.
//!
//! The simulation is core's (`carpentry_core::Simulation`, what `kubectl karpenter simulate
//! --until` runs) over the Scenario the controller exports, with the kwok provider's timings the
//! export carries. The test carries out on it what it does to the live cluster (the workloads it
//! applies, the node it deletes, the NodePool it edits), lets both settle, and compares, names
//! aside: the NodeClaims per NodePool with their instance types and zones, the pod partition
//! (which workloads' pods share a node), and the disruption decisions in order.

use std::collections::BTreeMap;

use anyhow::{anyhow, Context, Result};
use carpentry_core::manifest::scenario::{DeleteAction, ScaleAction, Step};
use carpentry_core::{SimTime, Simulation, Timings};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::{Api, Client};

/// What a cluster came to, names aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The NodePool's NodeClaims (not deleting): (instance type, zone), sorted.
    pub nodeclaims: Vec<(String, String)>,
    /// For each node, the workloads of its pods (a pod's `app` label, else its name), sorted; the
    /// lists sorted.
    pub partition: Vec<Vec<String>>,
}

/// A disruption carried out: (method, decision, how many nodes, the replacements' instance types).
pub type Decision = (String, String, usize, Vec<String>);

fn workload_of(p: &Pod) -> String {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app").cloned())
        .unwrap_or_else(|| p.metadata.name.clone().unwrap_or_default())
}

fn partition(groups: BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = groups
        .into_values()
        .map(|mut w| {
            w.sort();
            w
        })
        .collect();
    out.sort();
    out
}

pub struct Prediction {
    pub sim: Simulation,
    /// When the last action was taken (simulated).
    acted_at: SimTime,
}

impl Prediction {
    /// The simulation of a `/snapshot` body, its clock at the snapshot's start.
    pub fn new(snapshot: &str) -> Result<Prediction> {
        let manifests = carpentry_core::load(snapshot).map_err(|e| anyhow!("the snapshot does not load: {e}"))?;
        let timings = &manifests.scenario.as_ref().context("no Scenario in the snapshot")?.spec.timings;
        anyhow::ensure!(timings.registration.is_some(), "the snapshot carries no provider timings: {timings:?}");
        let sim = Simulation::new(&manifests, None, Timings::default()).context("the snapshot does not simulate")?;
        Ok(Prediction { sim, acted_at: SimTime::ZERO })
    }

    fn act(&mut self, step: Step, objects: Option<carpentry_core::Manifests>) -> Result<()> {
        self.acted_at = self.sim.now();
        self.sim.act(&step, objects).map_err(|e| anyhow!("the simulation cannot take the step: {e}"))
    }

    /// Applies objects as the test created them on the live cluster.
    pub fn apply(&mut self, objects: &[serde_json::Value]) -> Result<()> {
        let text = objects.iter().map(|o| serde_json::to_string(o).expect("JSON")).collect::<Vec<_>>().join("\n---\n");
        let m = carpentry_core::load(&text).map_err(|e| anyhow!("the applied objects do not load: {e}"))?;
        self.act(Step { apply: Some(Vec::new()), ..Step::default() }, Some(m))
    }

    pub fn scale(&mut self, kind: &str, namespace: &str, name: &str, replicas: i32) -> Result<()> {
        let scale = ScaleAction { kind: kind.into(), namespace: namespace.into(), name: name.into(), replicas };
        self.act(Step { scale: Some(scale), ..Step::default() }, None)
    }

    pub fn delete_node(&mut self, name: &str) -> Result<()> {
        let delete = DeleteAction { kind: "Node".into(), namespace: None, name: name.into() };
        self.act(Step { delete: Some(delete), ..Step::default() }, None)
    }

    /// Runs `seconds` of simulated time.
    pub fn settle(&mut self, seconds: u64) {
        let end = SimTime(self.sim.now().0 + seconds * 1000);
        self.sim.run_until(end);
    }

    /// The NodePool's nodes (Node names), sorted.
    pub fn nodes(&self, nodepool: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .sim
            .snapshot()
            .nodes
            .into_iter()
            .filter(|n| n.nodepool.as_deref() == Some(nodepool))
            .map(|n| n.name)
            .collect();
        out.sort();
        out
    }

    pub fn shape(&self, nodepool: &str, namespace: &str) -> Shape {
        let snapshot = self.sim.snapshot();
        let mut nodeclaims: Vec<(String, String)> = snapshot
            .nodes
            .iter()
            .filter(|n| n.nodepool.as_deref() == Some(nodepool))
            .filter(|n| n.terminating.is_none())
            .map(|n| (n.instance_type.clone().unwrap_or_default(), n.zone.clone().unwrap_or_default()))
            .collect();
        nodeclaims.sort();
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for p in &self.sim.objects().pods {
            let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else { continue };
            if p.metadata.namespace.as_deref() == Some(namespace) && p.metadata.deletion_timestamp.is_none() {
                groups.entry(node).or_default().push(workload_of(p));
            }
        }
        Shape { nodeclaims, partition: partition(groups) }
    }

    pub fn decisions(&self) -> Vec<Decision> {
        self.sim
            .disruptions()
            .iter()
            .map(|d| (d.method.clone(), d.decision.to_lowercase(), d.nodes.len(), d.replacements.clone()))
            .collect()
    }

    /// Seconds from the last action until every pod of `namespace` scheduled after it was bound.
    pub fn seconds_to_bound(&self, namespace: &str) -> Option<f64> {
        let last = self
            .sim
            .events()
            .iter()
            .filter(|e| e.at >= self.acted_at && e.object.namespace.as_deref() == Some(namespace))
            .filter(|e| matches!(e.reason, carpentry_core::simulation::Reason::Scheduled { .. }))
            .map(|e| e.at.0)
            .max()?;
        Some((last - self.acted_at.0) as f64 / 1000.0)
    }
}

/// The live cluster's [`Shape`] for `nodepool` and the pods of `namespace`.
pub async fn live_shape(client: &Client, nodepool: &str, namespace: &str) -> Result<Shape> {
    let gvk = GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim");
    let nodeclaims: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "nodeclaims"));
    let mut shape: Vec<(String, String)> = nodeclaims
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|nc| nc.metadata.deletion_timestamp.is_none())
        .filter_map(|nc| {
            let labels = nc.metadata.labels?;
            (labels.get("karpenter.sh/nodepool").map(String::as_str) == Some(nodepool)).then(|| {
                let get = |k: &str| labels.get(k).cloned().unwrap_or_default();
                (get("node.kubernetes.io/instance-type"), get("topology.kubernetes.io/zone"))
            })
        })
        .collect();
    shape.sort();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in pods.list(&Default::default()).await?.items {
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else { continue };
        if p.metadata.deletion_timestamp.is_none() {
            groups.entry(node).or_default().push(workload_of(&p));
        }
    }
    Ok(Shape { nodeclaims: shape, partition: partition(groups) })
}

/// `decisions` with each run of consecutive deletions of one method and no replacements counted as
/// one. Emptiness deletes the nodes empty at its pass; when live pods finish terminating in
/// different seconds, the nodes left empty after a command was planned go in the next command
/// (upstream's EmptinessValidator keeps the planned ones), while the simulation, whose pods all
/// stop in the same instant, deletes them in one. Which nodes go, and why, is the same.
pub fn merged_deletions(decisions: &[Decision]) -> Vec<Decision> {
    let mut merged: Vec<Decision> = Vec::with_capacity(decisions.len());
    for d in decisions {
        match merged.last_mut() {
            Some(last)
                if d.1 == "delete" && last.1 == "delete" && last.0 == d.0 && last.3.is_empty() && d.3.is_empty() =>
            {
                last.2 += d.2;
            }
            _ => merged.push(d.clone()),
        }
    }
    merged
}

/// The disruptions the live controller carried out, in order, from its JSON log (`Disrupting`
/// decisions).
pub fn live_decisions(log: &str) -> Vec<Decision> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|v| v["fields"]["reason"] == "Disrupting" && v["fields"]["dry_run"] == false)
        .filter_map(|v| serde_json::from_str::<serde_json::Value>(v["fields"]["decision"].as_str()?).ok())
        .map(|d| {
            let text = |k: &str| d[k].as_str().unwrap_or_default().to_string();
            let replacements =
                d["replacements"].as_array().into_iter().flatten().filter_map(|r| r.as_str()).map(String::from);
            (
                text("method"),
                text("decision").to_lowercase(),
                d["nodes"].as_array().map_or(0, Vec::len),
                replacements.collect(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delete(method: &str, nodes: usize) -> Decision {
        (method.into(), "delete".into(), nodes, vec![])
    }

    #[test]
    fn consecutive_deletions_of_one_method_merge_and_others_do_not() {
        let replace = ("Underutilized".to_string(), "replace".to_string(), 1, vec!["c5.large".to_string()]);
        let decisions = vec![
            delete("Empty", 2),
            delete("Empty", 1),
            replace.clone(),
            delete("Underutilized", 1),
            delete("Empty", 1),
        ];
        assert_eq!(
            merged_deletions(&decisions),
            vec![delete("Empty", 3), replace, delete("Underutilized", 1), delete("Empty", 1)]
        );
    }
}
