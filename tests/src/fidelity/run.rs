//! One comparison: a scenario file's text → both engines → the differences; and the shrinking of
//! a diverging scenario to a minimal file that still diverges the same way.

use std::time::Instant;

use anyhow::{anyhow, Result};
use carpentry_core::catalogue::Catalogue;
use carpentry_core::manifest;
use carpentry_core::scheduling;
use carpentry_core::state::{self, Input};
use serde_yaml::Value as Yaml;

use super::compare::{compare, same_up_to_ties, same_up_to_zone_choice, Difference, Outcome, PodClasses};

/// Upstream runs drawn when the first one differs from ours: upstream breaks some ties at random
/// (Go map order: spread ties, the affinity bootstrap domain), so one run is one sample. Drawing
/// stops at the first run that matches ours (or, once upstream has varied, matches it but for the
/// zone), so an agreeing scenario pays for few draws; only a divergence pays for all of them. The count bounds a flake: generated scenario 49 has three
/// upstream outcomes, drawn 36, 22 and 2 times in 60 runs, ours being the 22. With 8 draws all
/// landing on the 36 (0.6^8, 1.7% a CI run) the test saw no variation and failed; with 24 that
/// is 0.6^24, about 5 in a million.
const UPSTREAM_SAMPLES: usize = 24;
use super::export;
use super::oracle::Oracle;

/// The clock both engines read when the scenario sets no `startTime`.
pub const DEFAULT_NOW: &str = "2026-01-01T00:00:00Z";

/// Both engines' verdict on one scenario.
pub struct Comparison {
    /// Empty when the outcomes agree, exactly or up to ties between interchangeable pods.
    pub differences: Vec<Difference>,
    /// How they agree, when they do not agree exactly on the first upstream run.
    pub tie_break: Option<TieBreak>,
    /// Upstream's own runs differed from each other (it broke a tie at random), so a remaining
    /// difference may be a tie ours broke differently than any draw did.
    pub upstream_varies: bool,
    /// Pending pods both engines were given.
    pub pods: usize,
    pub ours_seconds: f64,
    pub upstream_seconds: f64,
}

/// Agreement that needed a tie to be recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TieBreak {
    /// Only which of two identical pods went where differs.
    IdenticalPods,
    /// Upstream's outcome varies between runs, and one of its runs matches ours.
    UpstreamSample,
    /// Upstream's outcome varies between runs (a random zone), and ours matches one of them in
    /// everything but the zone and what follows from it (instance types, prices).
    ZoneChoice,
}

/// The round's input, as `simulate` builds it, normalised for both engines.
pub fn input_of(yaml: &str) -> Result<(Input, String)> {
    let mut m = manifest::load(yaml).map_err(|e| anyhow!("{e}"))?;
    m.convert_legacy();
    let now = m.scenario.as_ref().and_then(|s| s.spec.start_time.clone()).unwrap_or_else(|| DEFAULT_NOW.to_string());
    let prepared = state::input_from_manifests(&m, Catalogue::embedded(), None)?;
    let mut input = prepared.input;
    export::normalise(&mut input);
    Ok((input, now))
}

pub fn compare_one(oracle: &mut Oracle, name: &str, yaml: &str) -> Result<Comparison> {
    let (input, now) = input_of(yaml)?;
    compare_input(oracle, name, &input, &now, UPSTREAM_SAMPLES)
}

/// Both engines on `input` (already normalised), drawing at most `samples` upstream runs.
pub fn compare_input(
    oracle: &mut Oracle,
    name: &str,
    input: &Input,
    now: &str,
    max_samples: usize,
) -> Result<Comparison> {
    let document = export::oracle_input(name, input, now, Some(&mut oracle.sent));
    let first = oracle.solve(&document)?;
    if let Some(e) = &first.error {
        return Err(anyhow!("upstream could not run {name}: {e}"));
    }
    let started = Instant::now();
    let results = scheduling::schedule(input);
    let ours_seconds = started.elapsed().as_secs_f64();
    let pods = input.pods.iter().filter(|p| p.spec.as_ref().is_none_or(|s| s.node_name.is_none())).count();
    let classes = PodClasses::of(input);
    let ours = Outcome::ours(input, &results);
    let theirs = Outcome::upstream(input, &first);
    let mut comparison = Comparison {
        differences: compare(&ours, &theirs),
        tie_break: None,
        upstream_varies: false,
        pods,
        ours_seconds,
        upstream_seconds: first.solve_seconds,
    };
    if comparison.differences.is_empty() {
        return Ok(comparison);
    }
    if same_up_to_ties(&ours, &theirs, &classes) {
        comparison.differences.clear();
        comparison.tie_break = Some(TieBreak::IdenticalPods);
        return Ok(comparison);
    }
    // Draw more upstream runs (the sets are cached: only the scenario is sent again).
    let mut samples = vec![theirs];
    for _ in 1..max_samples {
        let document = export::oracle_input(name, input, now, Some(&mut oracle.sent));
        let run = oracle.solve(&document)?;
        let sample = Outcome::upstream(input, &run);
        if compare(&ours, &sample).is_empty() || same_up_to_ties(&ours, &sample, &classes) {
            comparison.differences.clear();
            comparison.tie_break = Some(TieBreak::UpstreamSample);
            return Ok(comparison);
        }
        // Once upstream has varied and one of its runs matches ours but for the zone, more draws
        // cannot change the verdict (the check below): stop here, as for a match.
        let varies =
            !compare(&samples[0], &sample).is_empty() || samples.iter().any(|s| !compare(&samples[0], s).is_empty());
        let zone_choice = same_up_to_zone_choice(&ours, &sample, &classes)
            || samples.iter().any(|s| same_up_to_zone_choice(&ours, s, &classes));
        samples.push(sample);
        if varies && zone_choice {
            comparison.differences.clear();
            comparison.upstream_varies = true;
            comparison.tie_break = Some(TieBreak::ZoneChoice);
            return Ok(comparison);
        }
    }
    let upstream_varies = samples.iter().any(|s| !compare(&samples[0], s).is_empty());
    comparison.upstream_varies = upstream_varies;
    if upstream_varies && samples.iter().any(|s| same_up_to_zone_choice(&ours, s, &classes)) {
        comparison.differences.clear();
        comparison.tie_break = Some(TieBreak::ZoneChoice);
    }
    Ok(comparison)
}

fn documents(yaml: &str) -> Result<Vec<Yaml>> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(yaml)
        .map(|d| Yaml::deserialize(d).map_err(|e| anyhow!("{e}")))
        .filter(|d| !matches!(d, Ok(Yaml::Null)))
        .collect()
}

fn render(docs: &[Yaml]) -> String {
    let mut out = String::new();
    for (i, d) in docs.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&serde_yaml::to_string(d).unwrap_or_default());
    }
    out
}

fn kind(doc: &Yaml) -> &str {
    doc.get("kind").and_then(Yaml::as_str).unwrap_or("")
}

/// Smaller variants of `docs`, most aggressive first: a document left out, a workload's replicas
/// halved or decremented, a NodePool requirement, taint or limit left out, a pod-template
/// constraint left out.
fn candidates(docs: &[Yaml]) -> Vec<Vec<Yaml>> {
    let mut out = Vec::new();
    let nodepools = docs.iter().filter(|d| kind(d) == "NodePool").count();
    for i in 0..docs.len() {
        let k = kind(&docs[i]);
        if k == "Scenario" || (k == "NodePool" && nodepools == 1) {
            continue;
        }
        let mut v = docs.to_vec();
        v.remove(i);
        out.push(v);
    }
    for i in 0..docs.len() {
        let doc = &docs[i];
        if let Some(replicas) = doc.get("spec").and_then(|s| s.get("replicas")).and_then(Yaml::as_u64) {
            for smaller in [replicas / 2, replicas.saturating_sub(1)] {
                if smaller >= 1 && smaller < replicas {
                    let mut v = docs.to_vec();
                    v[i]["spec"]["replicas"] = Yaml::from(smaller);
                    out.push(v);
                }
            }
        }
        if kind(doc) == "NodePool" {
            let spec = &doc["spec"]["template"]["spec"];
            if let Some(reqs) = spec.get("requirements").and_then(Yaml::as_sequence) {
                for j in 0..reqs.len() {
                    let mut v = docs.to_vec();
                    if let Some(seq) = v[i]["spec"]["template"]["spec"]["requirements"].as_sequence_mut() {
                        seq.remove(j);
                    }
                    out.push(v);
                }
            }
            for field in ["taints", "weight", "limits"] {
                let has = if field == "taints" { spec.get(field).is_some() } else { doc["spec"].get(field).is_some() };
                if has {
                    let mut v = docs.to_vec();
                    let target =
                        if field == "taints" { &mut v[i]["spec"]["template"]["spec"] } else { &mut v[i]["spec"] };
                    if let Some(map) = target.as_mapping_mut() {
                        map.remove(field);
                    }
                    out.push(v);
                }
            }
        }
        if let Some(tpl) = doc.get("spec").and_then(|s| s.get("template")).and_then(|t| t.get("spec")) {
            if kind(doc) != "NodePool" {
                for field in ["affinity", "topologySpreadConstraints", "nodeSelector", "tolerations"] {
                    if tpl.get(field).is_some() {
                        let mut v = docs.to_vec();
                        if let Some(map) = v[i]["spec"]["template"]["spec"].as_mapping_mut() {
                            map.remove(field);
                        }
                        out.push(v);
                    }
                }
            }
        }
    }
    out
}

/// The smallest variant of `yaml` found (greedy, at most `budget` oracle calls) that still shows
/// a difference of the kind `kind`.
pub fn shrink(oracle: &mut Oracle, name: &str, yaml: &str, kind: &str, budget: usize) -> String {
    let Ok(mut docs) = documents(yaml) else { return yaml.to_string() };
    // Expectations describe the original, not the shrunk file.
    docs.retain(|d| self::kind(d) != "Expectations");
    let mut calls = 0;
    'outer: loop {
        for candidate in candidates(&docs) {
            if calls >= budget {
                break 'outer;
            }
            calls += 1;
            let text = render(&candidate);
            let still = compare_one(oracle, name, &text)
                .map(|c| c.differences.iter().any(|d| d.kind() == kind))
                .unwrap_or(false);
            if still {
                docs = candidate;
                continue 'outer;
            }
        }
        break;
    }
    render(&docs)
}
