//! The scenario corpus: every `tests/scenarios/*.yaml` is loaded like `kubectl karpenter simulate`
//! loads its files, one provisioning round is run, and the `carpentry.dev/v1alpha1 Expectations`
//! document(s) in the same file are checked. Expectations are invariants (counts, partitions,
//! capacity types, which NodePool a pod lands on), not generated names. The round is also run
//! twice and must give the same result. Expectations with `at` run the file over simulated time to
//! that moment instead and check its `timeline` (docs/simulation.md). See docs/scenario.md.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use carpentry_core::catalogue::Catalogue;
use carpentry_core::manifest;
use carpentry_core::scheduling::{self, Results};
use carpentry_core::state;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expectations {
    #[serde(rename = "apiVersion")]
    _api_version: String,
    #[serde(rename = "kind")]
    _kind: String,
    #[serde(default, rename = "metadata")]
    _metadata: Option<serde_json::Value>,
    spec: Expect,
}

/// Every field is optional; each one present is checked.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Expect {
    /// Number of new NodeClaims.
    node_claims: Option<usize>,
    /// Number of unschedulable pods.
    unschedulable: Option<usize>,
    /// Exactly these pods are unschedulable (`namespace/name`).
    unschedulable_pods: Option<BTreeSet<String>>,
    /// Exactly these pods are ignored.
    ignored_pods: Option<BTreeSet<String>>,
    /// Exactly these pods are deferred to a later round (reserved capacity held this round).
    deferred_pods: Option<BTreeSet<String>>,
    /// Pod → text its deferral line must contain.
    deferral_contains: Option<BTreeMap<String, String>>,
    /// Pod → the capacity reservation its NodeClaim launches into (`none` for no reservation).
    reservation_of: Option<BTreeMap<String, String>>,
    /// NodeClaims per NodePool (NodePools not listed: none).
    node_claims_per_node_pool: Option<BTreeMap<String, usize>>,
    /// The multiset of pod counts per NodeClaim, sorted ascending.
    pods_per_node_claim: Option<Vec<usize>>,
    /// The set of launched capacity types.
    capacity_types: Option<BTreeSet<String>>,
    /// The set of launched instance types (only where no price tie is possible).
    instance_types: Option<BTreeSet<String>>,
    /// Pod → NodePool of the NodeClaim it is planned on.
    node_pool_of: Option<BTreeMap<String, String>>,
    /// Pod → zone of the instance launched for its NodeClaim.
    zone_of: Option<BTreeMap<String, String>>,
    /// Pod → the architecture its NodeClaim is pinned to (`kubernetes.io/arch` requirement).
    arch_of: Option<BTreeMap<String, String>>,
    /// Existing node → the pods planned onto it (exact set; nodes not listed get none).
    existing_nodes: Option<BTreeMap<String, BTreeSet<String>>>,
    /// Groups of pods that must share a NodeClaim.
    together: Option<Vec<Vec<String>>>,
    /// Pod → text its one-line reason must contain.
    reason_contains: Option<BTreeMap<String, String>>,
    /// Zone → pods planned on new NodeClaims launched there (exact; zones not listed get none).
    pods_per_zone: Option<BTreeMap<String, usize>>,
    /// The multiset of pod counts per zone of new NodeClaims (when which zone gets which count
    /// is a tie-break).
    zone_counts: Option<Vec<usize>>,
    /// Groups of pods that must each be on a different NodeClaim (or existing node).
    apart: Option<Vec<Vec<String>>>,
    /// Exactly these placed pods had preferences relaxed.
    relaxed_pods: Option<BTreeSet<String>>,
    /// Spread invariants over the zones of new NodeClaims.
    zone_skew: Option<Vec<ZoneSkew>>,
    /// Checked on every NodeClaim.
    every_node_claim: Option<EveryNodeClaim>,
    /// Run the simulation over time up to this duration (`10m`) and check `timeline` then.
    at: Option<String>,
    timeline: Option<TimelineExpect>,
}

/// The state and event log of a run over time (docs/simulation.md), at the Expectations' `at`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TimelineExpect {
    /// Nodes (or NodeClaims without a node yet).
    nodes: Option<usize>,
    running: Option<usize>,
    pending: Option<usize>,
    /// Event kind → number of events of that kind (kinds not listed are not checked).
    events: Option<BTreeMap<String, usize>>,
    /// Event kind → when the first one happened (a Go duration).
    first_at: Option<BTreeMap<String, String>>,
    /// Node state → number of nodes in it.
    node_states: Option<BTreeMap<String, usize>>,
    /// The set of capacity types of the nodes.
    capacity_types: Option<BTreeSet<String>>,
    /// Texts that some event message must contain.
    messages: Option<Vec<String>>,
    /// USD per hour now lies in [min, max].
    per_hour_between: Option<(f64, f64)>,
    /// The set of instance types of the nodes.
    instance_types: Option<BTreeSet<String>>,
    /// Zone → pods running on nodes there (exact; zones not listed have none).
    running_per_zone: Option<BTreeMap<String, usize>>,
    /// Exactly these disruptions were carried out, in order.
    disruptions: Option<Vec<DisruptionExpect>>,
}

/// One disruption carried out (`Simulation::disruptions`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DisruptionExpect {
    /// Empty, Drifted, Underutilized, Expired.
    reason: String,
    /// delete or replace.
    decision: String,
    /// How many nodes the command took.
    nodes: usize,
    /// The replacements' cheapest instance types (not checked when absent).
    replacements: Option<Vec<String>>,
}

/// The pods whose name starts with `prefix`, counted per zone over `zones` (zones without any
/// count as 0), differ by at most `max_skew`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ZoneSkew {
    prefix: String,
    zones: Vec<String>,
    max_skew: usize,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EveryNodeClaim {
    instance_type_options_at_most: Option<usize>,
    instance_type_options_at_least: Option<usize>,
    /// Labels every NodeClaim carries.
    labels: Option<BTreeMap<String, String>>,
    /// Allowed launched instance types (a superset).
    instance_type_in: Option<BTreeSet<String>>,
    /// Every instance-type option starts with one of these prefixes.
    options_prefixed: Option<Vec<String>>,
    /// Every launched instance has this architecture label among its labels-or-requirements.
    arch: Option<String>,
}

fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

fn run(path: &Path) -> Result<(), Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| vec![e.to_string()])?;
    let mut m = manifest::load(&text).map_err(|e| vec![e.to_string()])?;
    m.convert_legacy();
    if m.expectations.is_empty() {
        return Err(vec!["no Expectations document".into()]);
    }
    let prepared = state::input_from_manifests(&m, Catalogue::embedded(), None)
        .map_err(|e| vec![carpentry_core::error_chain(&e)])?;
    let results = scheduling::schedule(&prepared.input);
    let mut errors = Vec::new();
    if results != scheduling::schedule(&prepared.input) {
        errors.push("two runs on the same input differ".into());
    }
    for e in &m.expectations {
        match serde_json::from_value::<Expectations>(e.clone()) {
            Ok(x) => match &x.spec.at {
                Some(at) => check_timeline(&m, at, x.spec.timeline.as_ref(), &mut errors),
                None => check(&x.spec, &results, &mut errors),
            },
            Err(err) => errors.push(format!("bad Expectations document: {err}")),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        errors.push(format!("results: {}", serde_json::to_string_pretty(&summary(&results)).unwrap()));
        Err(errors)
    }
}

fn summary(r: &Results) -> serde_json::Value {
    serde_json::json!({
        "nodeClaims": r.nodeclaims.iter().map(|n| serde_json::json!({
            "nodePool": n.nodepool,
            "launch": n.launch,
            "options": n.instance_type_options.len(),
            "pods": n.pods.iter().map(ToString::to_string).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "existingNodes": r.existing_nodes,
        "unschedulable": r.unschedulable.iter().map(|u| format!("{}: {}", u.pod, u.explanation.headline())).collect::<Vec<_>>(),
        "deferred": r.deferred.iter().map(|d| format!("{}: {}", d.pod, d.headline())).collect::<Vec<_>>(),
        "ignored": r.ignored.iter().map(|i| format!("{}: {}", i.pod, i.reason)).collect::<Vec<_>>(),
        "skipped": r.skipped_nodepools,
        "notes": r.notes,
    })
}

fn differ(errors: &mut Vec<String>, what: &str, got: String, want: String) {
    if got != want {
        errors.push(format!("{what}: expected {want}, got {got}"));
    }
}

fn check(x: &Expect, r: &Results, errors: &mut Vec<String>) {
    let mut eq = |what: &str, got: String, want: String| {
        if got != want {
            errors.push(format!("{what}: expected {want}, got {got}"));
        }
    };
    if let Some(n) = x.node_claims {
        eq("nodeClaims", r.nodeclaims.len().to_string(), n.to_string());
    }
    if let Some(n) = x.unschedulable {
        eq("unschedulable", r.unschedulable.len().to_string(), n.to_string());
    }
    if let Some(want) = &x.unschedulable_pods {
        let got: BTreeSet<String> = r.unschedulable.iter().map(|u| u.pod.to_string()).collect();
        eq("unschedulablePods", format!("{got:?}"), format!("{want:?}"));
    }
    if let Some(want) = &x.ignored_pods {
        let got: BTreeSet<String> = r.ignored.iter().map(|u| u.pod.to_string()).collect();
        eq("ignoredPods", format!("{got:?}"), format!("{want:?}"));
    }
    if let Some(want) = &x.deferred_pods {
        let got: BTreeSet<String> = r.deferred.iter().map(|d| d.pod.to_string()).collect();
        eq("deferredPods", format!("{got:?}"), format!("{want:?}"));
    }
    for (pod, text) in x.deferral_contains.iter().flatten() {
        match r.deferred.iter().find(|d| d.pod.to_string() == *pod) {
            Some(d) if d.headline().contains(text.as_str()) => {}
            Some(d) => eq(&format!("deferral of {pod}"), d.headline(), format!("a line containing {text:?}")),
            None => eq(&format!("deferral of {pod}"), "not deferred".into(), "deferred".into()),
        }
    }
    if let Some(want) = &x.node_claims_per_node_pool {
        let mut got: BTreeMap<String, usize> = BTreeMap::new();
        for n in &r.nodeclaims {
            *got.entry(n.nodepool.clone()).or_default() += 1;
        }
        eq("nodeClaimsPerNodePool", format!("{got:?}"), format!("{want:?}"));
    }
    if let Some(want) = &x.pods_per_node_claim {
        let mut got: Vec<usize> = r.nodeclaims.iter().map(|n| n.pods.len()).collect();
        got.sort_unstable();
        let mut want = want.clone();
        want.sort_unstable();
        eq("podsPerNodeClaim", format!("{got:?}"), format!("{want:?}"));
    }
    if let Some(want) = &x.capacity_types {
        let got: BTreeSet<String> =
            r.nodeclaims.iter().filter_map(|n| n.launch.as_ref()).map(|l| l.capacity_type.clone()).collect();
        eq("capacityTypes", format!("{got:?}"), format!("{want:?}"));
    }
    if let Some(want) = &x.instance_types {
        let got: BTreeSet<String> =
            r.nodeclaims.iter().filter_map(|n| n.launch.as_ref()).map(|l| l.instance_type.clone()).collect();
        eq("instanceTypes", format!("{got:?}"), format!("{want:?}"));
    }
    let nodeclaim_of = |pod: &str| r.nodeclaims.iter().position(|n| n.pods.iter().any(|p| p.to_string() == pod));
    if let Some(want) = &x.node_pool_of {
        for (pod, np) in want {
            let got = nodeclaim_of(pod).map(|i| r.nodeclaims[i].nodepool.clone()).unwrap_or_else(|| "<none>".into());
            eq(&format!("nodePoolOf[{pod}]"), got, np.clone());
        }
    }
    if let Some(want) = &x.reservation_of {
        for (pod, id) in want {
            let got = match nodeclaim_of(pod).map(|i| r.nodeclaims[i].launch.as_ref()) {
                None => "<not on a new NodeClaim>".to_string(),
                Some(l) => l.and_then(|l| l.reservation_id.clone()).unwrap_or_else(|| "none".into()),
            };
            eq(&format!("reservationOf[{pod}]"), got, id.clone());
        }
    }
    if let Some(want) = &x.zone_of {
        for (pod, zone) in want {
            let got = nodeclaim_of(pod)
                .and_then(|i| r.nodeclaims[i].launch.as_ref())
                .map_or_else(|| "<none>".to_string(), |l| l.zone.clone());
            eq(&format!("zoneOf[{pod}]"), got, zone.clone());
        }
    }
    if let Some(want) = &x.arch_of {
        for (pod, arch) in want {
            let got = nodeclaim_of(pod)
                .and_then(|i| r.nodeclaims[i].requirements.iter().find(|q| q.key == "kubernetes.io/arch"))
                .map_or_else(|| "<none>".to_string(), |q| q.values.join(","));
            eq(&format!("archOf[{pod}]"), got, arch.clone());
        }
    }
    if let Some(want) = &x.existing_nodes {
        let got: BTreeMap<String, BTreeSet<String>> = r
            .existing_nodes
            .iter()
            .map(|n| (n.name.clone(), n.pods.iter().map(ToString::to_string).collect()))
            .collect();
        eq("existingNodes", format!("{got:?}"), format!("{want:?}"));
    }
    for group in x.together.iter().flatten() {
        let claims: BTreeSet<Option<usize>> = group.iter().map(|p| nodeclaim_of(p)).collect();
        if claims.len() != 1 || claims.contains(&None) {
            errors.push(format!("together {group:?}: on NodeClaims {claims:?}"));
        }
    }
    for (pod, text) in x.reason_contains.iter().flatten() {
        match r.unschedulable.iter().find(|u| u.pod.to_string() == *pod) {
            Some(u) if u.explanation.headline().contains(text.as_str()) => {}
            Some(u) => {
                errors.push(format!("reason of {pod}: {:?} does not contain {text:?}", u.explanation.headline()))
            }
            None => errors.push(format!("reason of {pod}: the pod is not unschedulable")),
        }
    }
    let zone_of_claim = |n: &scheduling::PlannedNodeClaim| n.launch.as_ref().map(|l| l.zone.clone());
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for n in &r.nodeclaims {
        *per_zone.entry(zone_of_claim(n).unwrap_or_else(|| "<none>".into())).or_default() += n.pods.len();
    }
    if let Some(want) = &x.pods_per_zone {
        differ(errors, "podsPerZone", format!("{per_zone:?}"), format!("{want:?}"));
    }
    if let Some(want) = &x.zone_counts {
        let mut got: Vec<usize> = per_zone.values().copied().collect();
        got.sort_unstable();
        let mut want = want.clone();
        want.sort_unstable();
        differ(errors, "zoneCounts", format!("{got:?}"), format!("{want:?}"));
    }
    for group in x.apart.iter().flatten() {
        let host = |pod: &str| {
            nodeclaim_of(pod).map(|i| format!("nodeclaim {i}")).or_else(|| {
                r.existing_nodes.iter().find(|n| n.pods.iter().any(|p| p.to_string() == pod)).map(|n| n.name.clone())
            })
        };
        let hosts: Vec<Option<String>> = group.iter().map(|p| host(p)).collect();
        let distinct: BTreeSet<&Option<String>> = hosts.iter().collect();
        if distinct.len() != hosts.len() || hosts.contains(&None) {
            errors.push(format!("apart {group:?}: on {hosts:?}"));
        }
    }
    if let Some(want) = &x.relaxed_pods {
        let got: BTreeSet<String> = r.relaxed.iter().map(|p| p.pod.to_string()).collect();
        differ(errors, "relaxedPods", format!("{got:?}"), format!("{want:?}"));
    }
    for skew in x.zone_skew.iter().flatten() {
        let mut counts: BTreeMap<&str, usize> = skew.zones.iter().map(|z| (z.as_str(), 0)).collect();
        for n in &r.nodeclaims {
            let Some(zone) = zone_of_claim(n) else { continue };
            let k = n.pods.iter().filter(|p| p.name.starts_with(skew.prefix.as_str())).count();
            match counts.get_mut(zone.as_str()) {
                Some(c) => *c += k,
                None if k > 0 => errors.push(format!("zoneSkew {}: pods in unexpected zone {zone}", skew.prefix)),
                None => {}
            }
        }
        let (min, max) = (counts.values().min().copied().unwrap_or(0), counts.values().max().copied().unwrap_or(0));
        if max - min > skew.max_skew {
            errors.push(format!("zoneSkew {}: {counts:?} exceeds maxSkew {}", skew.prefix, skew.max_skew));
        }
    }
    if let Some(every) = &x.every_node_claim {
        for (i, n) in r.nodeclaims.iter().enumerate() {
            let options = n.instance_type_options.len();
            if every.instance_type_options_at_most.is_some_and(|m| options > m) {
                errors.push(format!("NodeClaim {i}: {options} options"));
            }
            if every.instance_type_options_at_least.is_some_and(|m| options < m) {
                errors.push(format!("NodeClaim {i}: only {options} options"));
            }
            for (k, v) in every.labels.iter().flatten() {
                if n.labels.get(k) != Some(v) {
                    errors.push(format!("NodeClaim {i}: label {k}={:?}, expected {v}", n.labels.get(k)));
                }
            }
            if let (Some(allowed), Some(l)) = (&every.instance_type_in, &n.launch) {
                if !allowed.contains(&l.instance_type) {
                    errors.push(format!("NodeClaim {i}: launched {}", l.instance_type));
                }
            }
            if let Some(prefixes) = &every.options_prefixed {
                if let Some(o) =
                    n.instance_type_options.iter().find(|o| !prefixes.iter().any(|p| o.starts_with(p.as_str())))
                {
                    errors.push(format!("NodeClaim {i}: option {o} has none of the prefixes {prefixes:?}"));
                }
            }
            if let Some(arch) = &every.arch {
                let ok = n.requirements.iter().any(|r| r.key == "kubernetes.io/arch" && r.values == [arch.clone()]);
                if !ok {
                    errors.push(format!("NodeClaim {i}: architecture is not pinned to {arch}"));
                }
            }
        }
    }
}

/// Runs the file over time to `at` (twice: the runs must agree) and checks the timeline.
fn check_timeline(m: &manifest::Manifests, at: &str, x: Option<&TimelineExpect>, errors: &mut Vec<String>) {
    use carpentry_core::simulation::{SimTime, Simulation, Timings};
    let Some(end) = manifest::scenario::parse_offset(at) else {
        errors.push(format!("at: {at:?} is not a duration"));
        return;
    };
    let run = || -> Result<Simulation, String> {
        let mut sim = Simulation::new(m, None, Timings::default()).map_err(|e| e.to_string())?;
        sim.run_until(SimTime(end));
        Ok(sim)
    };
    let (sim, again) = match (run(), run()) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            errors.push(format!("the simulation did not start: {e}"));
            return;
        }
    };
    if sim.events() != again.events() {
        errors.push("two runs over time differ".into());
    }
    let Some(x) = x else { return };
    let snap = sim.snapshot();
    let before = errors.len();
    let count = |what: &str, got: usize, want: Option<usize>, errors: &mut Vec<String>| {
        if let Some(want) = want {
            if got != want {
                errors.push(format!("at {at}: {what}: expected {want}, got {got}"));
            }
        }
    };
    count("nodes", snap.nodes.len(), x.nodes, errors);
    count("running", snap.running, x.running, errors);
    count("pending", snap.pending.len(), x.pending, errors);
    for (kind, want) in x.events.iter().flatten() {
        let got = sim.events().iter().filter(|e| e.reason.name() == kind).count();
        count(&format!("{kind} events"), got, Some(*want), errors);
    }
    for (kind, want) in x.first_at.iter().flatten() {
        let got = sim.events().iter().find(|e| e.reason.name() == kind).map(|e| e.at);
        let want_at = manifest::scenario::parse_offset(want).map(SimTime);
        if got != want_at || want_at.is_none() {
            errors.push(format!("at {at}: first {kind}: expected {want}, got {:?}", got.map(|t| t.to_string())));
        }
    }
    if let Some(want) = &x.node_states {
        let mut got: BTreeMap<String, usize> = BTreeMap::new();
        for n in &snap.nodes {
            *got.entry(format!("{:?}", n.state)).or_default() += 1;
        }
        if &got != want {
            errors.push(format!("at {at}: nodeStates: expected {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = &x.capacity_types {
        let got: BTreeSet<String> = snap.nodes.iter().filter_map(|n| n.capacity_type.clone()).collect();
        if &got != want {
            errors.push(format!("at {at}: capacityTypes: expected {want:?}, got {got:?}"));
        }
    }
    for text in x.messages.iter().flatten() {
        if !sim.events().iter().any(|e| e.message.contains(text.as_str())) {
            errors.push(format!("at {at}: no event message contains {text:?}"));
        }
    }
    if let Some((lo, hi)) = x.per_hour_between {
        if !(lo..=hi).contains(&snap.price_per_hour) {
            errors.push(format!("at {at}: $/hour {} not in [{lo}, {hi}]", snap.price_per_hour));
        }
    }
    if let Some(want) = &x.instance_types {
        let got: BTreeSet<String> = snap.nodes.iter().filter_map(|n| n.instance_type.clone()).collect();
        if &got != want {
            errors.push(format!("at {at}: instanceTypes: expected {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = &x.running_per_zone {
        let mut got: BTreeMap<String, usize> = BTreeMap::new();
        for n in snap.nodes.iter().filter(|n| !n.pods.is_empty()) {
            *got.entry(n.zone.clone().unwrap_or_default()).or_default() += n.pods.len();
        }
        if &got != want {
            errors.push(format!("at {at}: runningPerZone: expected {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = &x.disruptions {
        let got = sim.disruptions();
        let same = got.len() == want.len()
            && got.iter().zip(want).all(|(g, w)| {
                g.reason == w.reason
                    && g.decision == w.decision
                    && g.nodes.len() == w.nodes
                    && w.replacements.as_ref().is_none_or(|r| *r == g.replacements)
            });
        if !same {
            let shown: Vec<String> = got
                .iter()
                .map(|d| format!("{} {} {} {:?} {:?}", d.at, d.reason, d.decision, d.nodes, d.replacements))
                .collect();
            errors.push(format!("at {at}: disruptions: expected {want:?}, got {shown:?}"));
        }
    }
    if errors.len() > before {
        let log: Vec<String> = sim.events().iter().map(ToString::to_string).collect();
        errors.push(format!("event log:\n{}", log.join("\n")));
    }
}

#[test]
fn scenarios() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(scenario_dir())
        .expect("tests/scenarios")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 8, "the corpus has {} scenarios", paths.len());
    let mut failures = Vec::new();
    for path in &paths {
        if let Err(errors) = run(path) {
            failures.push(format!("{}:\n  {}", path.display(), errors.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "{} of {} scenarios failed:\n{}", failures.len(), paths.len(), failures.join("\n"));
}

/// The expectation checker itself must be able to fail.
#[test]
fn a_wrong_expectation_fails() {
    let path = scenario_dir().join("inflate-2vcpu.yaml");
    let text = std::fs::read_to_string(path).unwrap().replace("nodeClaims: 3", "nodeClaims: 2");
    let dir = std::env::temp_dir().join(format!("carpentry-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("wrong.yaml");
    std::fs::write(&file, text).unwrap();
    let errors = run(&file).expect_err("a wrong count must fail");
    assert!(errors[0].contains("nodeClaims: expected 2, got 3"), "{errors:?}");
    // And over time.
    let timed = std::fs::read_to_string(scenario_dir().join("time-inflate-scale-up.yaml"))
        .unwrap()
        .replace("running: 3, pending: 0", "running: 2, pending: 0")
        .replace("Launched: 34s", "Launched: 33s");
    std::fs::write(&file, timed).unwrap();
    let errors = run(&file).expect_err("a wrong timeline must fail");
    assert!(errors.iter().any(|e| e.contains("at 2m: running: expected 2, got 3")), "{errors:?}");
    assert!(errors.iter().any(|e| e.contains("first Launched: expected 33s, got Some(\"+34s\")")), "{errors:?}");
    std::fs::remove_dir_all(dir).ok();
}
