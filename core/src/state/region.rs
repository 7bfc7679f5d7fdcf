//! Which region a decision runs in when the input does not say it plainly: a region given by the
//! caller (a flag), else the Scenario's, else the one the nodes carry in their
//! `topology.kubernetes.io/region` label (set by the cloud provider), else us-east-1.

use serde::Serialize;

use crate::labels;
use crate::manifest::scenario::DEFAULT_REGION;
use crate::manifest::Manifests;

/// Where a [`RegionChoice`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RegionSource {
    /// The caller gave it.
    Given,
    /// The input's Scenario document.
    Scenario,
    /// The nodes' `topology.kubernetes.io/region` label: the most common value (ties: the first
    /// by name).
    Nodes,
    /// None of the above: us-east-1.
    Default,
}

/// A region and how it was chosen (a caller tells the user when it is the default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegionChoice {
    pub region: String,
    pub source: RegionSource,
}

/// The region for `manifests`: `given`, else the Scenario's, else the nodes' label, else
/// us-east-1. Whether the region is in the catalogue is checked where it is used
/// ([`super::input_from_manifests`]).
pub fn choose_region(manifests: &Manifests, given: Option<&str>) -> RegionChoice {
    let choice = |region: String, source| RegionChoice { region, source };
    if let Some(region) = given {
        return choice(region.to_string(), RegionSource::Given);
    }
    if let Some(s) = &manifests.scenario {
        return choice(s.spec.region.clone(), RegionSource::Scenario);
    }
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for n in &manifests.nodes {
        if let Some(r) = n.metadata.labels.as_ref().and_then(|l| l.get(labels::TOPOLOGY_REGION)) {
            *counts.entry(r.as_str()).or_default() += 1;
        }
    }
    // Most nodes first; among equals the first by name (BTreeMap order; max_by keeps the last max).
    match counts.into_iter().rev().max_by_key(|(_, n)| *n) {
        Some((region, _)) => choice(region.to_string(), RegionSource::Nodes),
        None => choice(DEFAULT_REGION.to_string(), RegionSource::Default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, region: Option<&str>) -> String {
        let labels = region.map(|r| format!("labels: {{topology.kubernetes.io/region: {r}}}")).unwrap_or_default();
        format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, {labels}}}\n---\n")
    }

    #[test]
    fn given_then_scenario_then_nodes_then_the_default() {
        let nodes = [node("a", Some("eu-west-1")), node("b", Some("us-west-2")), node("c", Some("us-west-2"))].concat();
        let m = crate::manifest::load(&nodes).unwrap();
        assert_eq!(choose_region(&m, Some("ap-south-1")).source, RegionSource::Given);
        assert_eq!(choose_region(&m, None), RegionChoice { region: "us-west-2".into(), source: RegionSource::Nodes });
        let tie =
            crate::manifest::load(&[node("a", Some("us-west-2")), node("b", Some("eu-west-1"))].concat()).unwrap();
        assert_eq!(choose_region(&tie, None).region, "eu-west-1", "ties go to the first by name");
        let with_scenario =
            format!("{nodes}apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec: {{region: eu-west-1}}\n");
        let m = crate::manifest::load(&with_scenario).unwrap();
        assert_eq!(choose_region(&m, None).source, RegionSource::Scenario);
        let bare = crate::manifest::load(&node("a", None)).unwrap();
        assert_eq!(
            choose_region(&bare, None),
            RegionChoice { region: "us-east-1".into(), source: RegionSource::Default }
        );
    }
}
