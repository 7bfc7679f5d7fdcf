//! Simulation unit tests: timelines of provisioning, scaling, drains, PDBs, capacity shortages,
//! interruptions, drift and consolidation, and the explanations and records they leave.

use super::*;
use crate::disruption::explain;
use crate::manifest::load;

const NODEPOOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
";

fn deployment(name: &str, replicas: i32, cpu: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\", memory: 256Mi}}}}}}]
"
    )
}

fn scenario(steps: &str) -> String {
    format!("apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec:\n  startTime: \"2026-12-01T10:00:00Z\"\n  steps:\n{steps}")
}

fn sim(docs: &[&str]) -> Simulation {
    let text = docs.join("---\n");
    let m = load(&text).unwrap_or_else(|e| panic!("{e}"));
    Simulation::new(&m, None, Timings::default()).unwrap()
}

fn reasons(s: &Simulation, name: &str) -> Vec<SimTime> {
    s.events().iter().filter(|e| e.reason.name() == name).map(|e| e.at).collect()
}

fn running(s: &Simulation) -> usize {
    s.snapshot().running
}

#[test]
fn pending_pods_get_a_node_about_a_minute_later() {
    let mut s = sim(&[NODEPOOL, &deployment("inflate", 3, "1")]);
    assert_eq!(s.snapshot().pending.len(), 3, "pods start pending");
    s.run_until(SimTime::from_secs(120));
    let created = reasons(&s, "NodeClaimCreated");
    assert_eq!(created, [SimTime::from_secs(1)], "one round, 1 s after the pods went pending (batch idle)");
    assert_eq!(reasons(&s, "Launched"), [SimTime::from_secs(4)]);
    assert_eq!(reasons(&s, "Registered"), [SimTime::from_secs(44)]);
    assert_eq!(reasons(&s, "Initialized"), [SimTime::from_secs(56)]);
    assert_eq!(reasons(&s, "Scheduled"), vec![SimTime::from_secs(56); 3]);
    assert_eq!(reasons(&s, "Nominated").len(), 3);
    let snap = s.snapshot();
    assert_eq!(snap.running, 3);
    assert!(snap.pending.is_empty());
    assert_eq!(snap.nodes.len(), 1);
    let node = &snap.nodes[0];
    assert_eq!(node.name, "ip-10-0-1-1");
    assert_eq!(node.state, NodeState::Ready);
    assert!(node.price > 0.0 && !node.price_synthetic);
    assert!((snap.price_per_hour - node.price).abs() < 1e-12);
    // The instance costs from Launched (4 s) on.
    let cost = s.cost();
    let expected = node.price * (120.0 - 4.0) / 3600.0;
    assert!((cost.spent - expected).abs() < 1e-9, "{} vs {expected}", cost.spent);
}

#[test]
fn pods_a_snapshot_shows_unschedulable_wake_the_provisioner_at_once() {
    // What a live snapshot looks like: kube-scheduler has already given up on the pod, so no
    // scheduling pass will newly mark it; the provisioner must still count it as its own.
    let pod = "apiVersion: v1
kind: Pod
metadata: {name: waiting, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: \"1\", memory: 256Mi}}}]
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: \"False\", reason: Unschedulable}]
";
    let mut s = sim(&[NODEPOOL, pod]);
    s.run_until(SimTime::from_secs(120));
    assert_eq!(reasons(&s, "NodeClaimCreated"), [SimTime::from_secs(1)], "a round after the batch idle window");
    assert_eq!(running(&s), 1);
}

#[test]
fn runs_are_deterministic() {
    let docs = [NODEPOOL, &deployment("a", 5, "1500m"), &deployment("b", 7, "300m")];
    let mut one = sim(&docs);
    let mut two = sim(&docs);
    one.run_until(SimTime::from_secs(600));
    two.run_until(SimTime::from_secs(600));
    assert_eq!(one.events(), two.events());
    assert_eq!(one.snapshot(), two.snapshot());
    assert_eq!(running(&one), 12);
}

#[test]
fn scaling_creates_and_deletes_pods() {
    let steps = "  - {at: 5m, scale: {kind: Deployment, namespace: default, name: inflate, replicas: 5}}\n  - {at: 10m, scale: {kind: Deployment, name: inflate, replicas: 1}}\n";
    let mut s = sim(&[NODEPOOL, &deployment("inflate", 2, "1"), &scenario(steps)]);
    s.run_until(SimTime::from_secs(299));
    assert_eq!(running(&s), 2);
    s.run_until(SimTime::from_secs(420));
    assert_eq!(running(&s), 5);
    let names: Vec<String> = s.snapshot().nodes.iter().flat_map(|n| n.pods.clone()).collect();
    assert!(names.contains(&"default/inflate-4".to_string()), "{names:?}");
    s.run_until(SimTime::from_secs(660));
    assert_eq!(running(&s), 1);
    let scaled: Vec<&Event> = s.events().iter().filter(|e| e.reason.name() == "Scaled").collect();
    assert_eq!(scaled.len(), 2);
    assert_eq!(scaled[1].message, "Scaled from 5 to 1 replicas");
    assert_eq!(s.events().iter().filter(|e| e.reason.name() == "SuccessfulDelete").count(), 4);
}

#[test]
fn a_deleted_node_is_drained_and_its_pods_provisioned_again() {
    let steps = "  - {at: 3m, delete: {kind: Node, name: ip-10-0-1-1}}\n";
    let mut s = sim(&[NODEPOOL, &deployment("web", 2, "1"), &scenario(steps)]);
    s.run_until(SimTime::from_secs(179));
    assert_eq!(running(&s), 2);
    s.run_until(SimTime::from_secs(181));
    let evicted = reasons(&s, "Evicted");
    assert_eq!(evicted, vec![SimTime::from_secs(180); 2]);
    // Replacements are pending and a new NodeClaim is on its way.
    let snap = s.snapshot();
    assert_eq!(snap.pending, ["default/web-2", "default/web-3"]);
    assert!(snap.nodes.iter().any(|n| n.state == NodeState::Terminating && n.name == "ip-10-0-1-1"));
    s.run_until(SimTime::from_secs(300));
    let snap = s.snapshot();
    assert_eq!(snap.running, 2);
    assert_eq!(snap.nodes.len(), 1, "{:?}", snap.nodes);
    assert_eq!(snap.nodes[0].name, "ip-10-0-1-2");
    // Evicted at 3m; the next pass finds the node drained (upstream: Drained after at least
    // MinDrainTime, 5 s), and the instance is gone 30 s later.
    assert_eq!(reasons(&s, "Terminated"), [SimTime::from_secs(215)]);
}

#[test]
fn a_pdb_holds_the_drain_until_replacements_run() {
    let pdb = |min: u32| {
        format!(
            "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web, namespace: default}}
spec:
  minAvailable: {min}
  selector: {{matchLabels: {{app: web}}}}
"
        )
    };
    let steps = "  - {at: 3m, delete: {kind: Node, name: ip-10-0-1-1}}\n";
    let mut s = sim(&[NODEPOOL, &deployment("web", 2, "1"), &pdb(1), &scenario(steps)]);
    s.run_until(SimTime::from_secs(600));
    let evicted = reasons(&s, "Evicted");
    assert_eq!(evicted.len(), 2);
    assert_eq!(evicted[0], SimTime::from_secs(180), "one disruption allowed");
    let blocked: Vec<&Event> = s.events().iter().filter(|e| e.reason.name() == "FailedDraining").collect();
    assert_eq!(blocked.len(), 1, "reported once");
    assert!(blocked[0].message.contains("default/web-1 violates PDB default/web"), "{}", blocked[0].message);
    // The second waits until the first one's replacement runs on the new node.
    let replacement_running =
        s.events().iter().find(|e| e.reason.name() == "Scheduled" && e.object.name == "web-2").map(|e| e.at).unwrap();
    assert!(evicted[1] >= replacement_running && evicted[1] > SimTime::from_secs(230), "{evicted:?}");
    assert_eq!(running(&s), 2);
    assert_eq!(s.snapshot().nodes.len(), 1);

    // minAvailable equal to the replicas blocks the drain for good, as in a real cluster.
    let mut stuck = sim(&[NODEPOOL, &deployment("web", 2, "1"), &pdb(2), &scenario(steps)]);
    stuck.run_until(SimTime::from_secs(1800));
    assert!(reasons(&stuck, "Evicted").is_empty());
    assert!(stuck.snapshot().nodes.iter().any(|n| n.state == NodeState::Terminating));
}

#[test]
fn a_capacity_shortage_falls_back_and_is_remembered() {
    // The cheapest on-demand type for one 1-CPU pod in this NodePool.
    let mut probe = sim(&[NODEPOOL, &deployment("web", 1, "1")]);
    probe.run_until(SimTime::from_secs(60));
    let first = probe.snapshot().nodes[0].clone();
    let (it, zone) = (first.instance_type.unwrap(), first.zone.unwrap());
    let steps = format!(
        "  - {{at: 0s, unavailableOffering: {{instanceType: {it}, zone: {zone}, capacityType: on-demand, duration: 10m}}}}\n"
    );
    let mut s = sim(&[NODEPOOL, &deployment("web", 1, "1"), &scenario(&steps)]);
    s.run_until(SimTime::from_secs(120));
    let ice: Vec<&Event> = s.events().iter().filter(|e| e.reason.name() == "InsufficientCapacityError").collect();
    assert_eq!(ice.len(), 1, "{:?}", s.events());
    assert!(ice[0].message.contains(&it) && ice[0].message.contains("until +3m4s"), "{}", ice[0].message);
    let node = &s.snapshot().nodes[0];
    assert_ne!((node.instance_type.as_deref(), node.zone.as_deref()), (Some(it.as_str()), Some(zone.as_str())));
    assert_eq!(running(&s), 1);
}

#[test]
fn a_spot_interruption_drains_and_reclaims() {
    let spot = NODEPOOL.replace("values: [on-demand]", "values: [spot]");
    let steps = "  - {at: 3m, interrupt: {node: ip-10-0-1-1}}\n  - {at: 4m, interrupt: {node: ip-10-0-1-9}}\n";
    let mut s = sim(&[&spot, &deployment("web", 2, "1"), &scenario(steps)]);
    s.run_until(SimTime::from_secs(600));
    let warned = reasons(&s, "SpotInterrupted");
    assert_eq!(warned, [SimTime::from_secs(180)]);
    assert_eq!(reasons(&s, "Evicted").len(), 2);
    // Drained long before EC2 takes it back: the NodeClaim is gone, nothing is reclaimed.
    assert!(reasons(&s, "InstanceReclaimed").is_empty());
    let failed: Vec<&Event> = s.events().iter().filter(|e| e.reason.name() == "StepFailed").collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0].message.contains("there is no Node ip-10-0-1-9"), "{}", failed[0].message);
    assert_eq!(running(&s), 2);
    let snap = s.snapshot();
    assert_eq!(snap.nodes.len(), 1);
    assert!(snap.nodes[0].price_synthetic, "spot prices say they are synthetic");
}

#[test]
fn do_not_disrupt_pods_wait_for_the_termination_grace_period() {
    let np = NODEPOOL.replace("      requirements:", "      terminationGracePeriod: 5m\n      requirements:");
    let dep = deployment("batch", 1, "1").replace(
        "    metadata: {labels: {app: batch}}",
        "    metadata: {labels: {app: batch}, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}",
    );
    let steps = "  - {at: 2m, delete: {kind: Node, name: ip-10-0-1-1}}\n";
    let mut s = sim(&[&np, &dep, &scenario(steps)]);
    s.run_until(SimTime::from_secs(400));
    assert_eq!(reasons(&s, "FailedDraining").len(), 1, "reported once");
    assert!(reasons(&s, "Evicted").is_empty());
    assert!(reasons(&s, "Disrupted").is_empty(), "not before the grace period ends");
    s.run_until(SimTime::from_secs(500));
    assert_eq!(reasons(&s, "Disrupted"), [SimTime::from_secs(420)], "force-deleted at 2m + 5m");
    assert_eq!(reasons(&s, "Terminated"), [SimTime::from_secs(450)]);
}

#[test]
fn daemonsets_run_on_every_node_they_fit() {
    let ds = "apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
";
    let mut s = sim(&[NODEPOOL, &deployment("web", 2, "1"), ds]);
    s.run_until(SimTime::from_secs(120));
    let snap = s.snapshot();
    assert_eq!(snap.running, 3);
    assert!(snap.nodes[0].pods.contains(&"kube-system/agent-ip-10-0-1-1".to_string()), "{:?}", snap.nodes[0].pods);
}

#[test]
fn a_nodepool_edit_applies_to_new_nodes_and_drifts_the_old() {
    let edited = NODEPOOL.replace("values: [m5, c5]", "values: [r5]");
    let indented: String = edited.lines().map(|l| format!("      {l}\n")).collect();
    let steps = format!(
        "  - at: 5m\n    apply:\n    - {}\n  - {{at: 5m, scale: {{kind: Deployment, name: web, replicas: 4}}}}\n",
        indented.trim_start()
    );
    let mut s = sim(&[NODEPOOL, &deployment("web", 2, "1"), &scenario(&steps)]);
    let families = |s: &Simulation| -> Vec<String> {
        s.snapshot()
            .nodes
            .iter()
            .filter_map(|n| n.instance_type.clone())
            .map(|t| t.split('.').next().unwrap().to_string())
            .collect()
    };
    s.run_until(SimTime::from_secs(301));
    let first = families(&s);
    assert_eq!(first.len(), 1);
    assert_ne!(first[0], "r5");
    // The new pods get an r5 node; the old node no longer meets the requirements: it drifts,
    // and is replaced once the budget lets it.
    s.run_until(SimTime::from_secs(1200));
    let drifted: Vec<&Event> = s.events().iter().filter(|e| e.reason.name() == "Drifted").collect();
    assert_eq!(drifted.len(), 1, "{drifted:?}");
    assert!(drifted[0].message.contains("no longer meet the NodePool's requirements"), "{}", drifted[0].message);
    assert!(families(&s).iter().all(|f| f == "r5"), "{:?}", families(&s));
    assert_eq!(running(&s), 4);
}

/// A graceful eviction never takes a PDB below its desired healthy count: in the order the
/// instant's `events` happened, evictions so far ≤ the room before (`headroom_before`, one per PDB,
/// each named after the app its pods are named after) + pods bound so far.
pub(super) fn evictions_within_pdbs(s: &Simulation, events: &[Event], headroom_before: &[i64]) -> Result<(), String> {
    for (pdb, before) in s.objects().pdbs.iter().zip(headroom_before) {
        let app = pdb.metadata.name.clone().unwrap_or_default();
        let (mut evicted, mut bound) = (0i64, 0i64);
        for e in events.iter().filter(|e| e.object.name.rsplit_once('-').is_some_and(|(o, _)| o == app)) {
            match e.reason.name() {
                "Scheduled" => bound += 1,
                "Evicted" => {
                    evicted += 1;
                    if evicted > before + bound {
                        return Err(format!(
                            "{app}: {evicted} evicted at {} with room for {before} and {bound} bound",
                            s.now()
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

mod properties {
    use super::*;
    use crate::resources;
    use proptest::prelude::*;

    /// A random cluster: a NodePool with a random disruption budget, deployments (some under
    /// do-not-disrupt, some under a PDB), scale steps and node deletions.
    fn input() -> impl Strategy<Value = String> {
        // (replicas, CPU in tenths, do-not-disrupt, a PDB's maxUnavailable)
        let deployments = prop::collection::vec((0i32..12, 1u32..20, any::<bool>(), prop::option::of(0u32..2)), 1..4);
        let steps = prop::collection::vec((1u64..40, 0usize..4, 0i32..15, any::<bool>(), 1u32..4), 0..5);
        let budget = prop::sample::select(vec!["10%", "1", "2", "50%", "100%", "0"]);
        (deployments, steps, budget).prop_map(|(deps, steps, budget)| {
            let np = NODEPOOL
                .replace("      requirements:", "      terminationGracePeriod: 10m\n      requirements:")
                .replace("spec:\n  template:", &format!("spec:\n  disruption:\n    budgets: [{{nodes: \"{budget}\"}}]\n  template:"));
            let mut docs = vec![np];
            for (i, (replicas, cpu_tenths, protected, budget)) in deps.iter().enumerate() {
                let mut d = deployment(&format!("app{i}"), *replicas, &format!("{}m", cpu_tenths * 100));
                if *protected {
                    d = d.replace(
                        &format!("    metadata: {{labels: {{app: app{i}}}}}"),
                        &format!("    metadata: {{labels: {{app: app{i}}}, annotations: {{karpenter.sh/do-not-disrupt: \"true\"}}}}"),
                    );
                }
                docs.push(d);
                if let Some(max_unavailable) = budget {
                    docs.push(format!(
                        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: app{i}, namespace: default}}\nspec:\n  maxUnavailable: {max_unavailable}\n  selector: {{matchLabels: {{app: app{i}}}}}\n"
                    ));
                }
            }
            let mut text = String::new();
            for (minute, target, replicas, delete, node) in steps {
                let target = target % deps.len();
                if delete {
                    text.push_str(&format!("  - {{at: {minute}m, delete: {{kind: Node, name: ip-10-0-1-{node}}}}}\n"));
                } else {
                    text.push_str(&format!(
                        "  - {{at: {minute}m, scale: {{kind: Deployment, name: app{target}, replicas: {replicas}}}}}\n"
                    ));
                }
            }
            if !text.is_empty() {
                docs.push(scenario(&text));
            }
            docs.join("---\n")
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn runs_keep_the_invariants(text in input()) {
            let m = load(&text).unwrap();
            let end = SimTime::from_secs(3600);
            let run = || {
                let mut s = Simulation::new(&m, None, Timings::default()).unwrap();
                s.run_until(end);
                s
            };
            // Step by step: what each instant did must respect budgets and PDBs.
            let mut s = Simulation::new(&m, None, Timings::default()).unwrap();
            while s.next_event_time().is_some_and(|t| t <= end) {
                let seen = s.events().len();
                let headroom_before: Vec<i64> =
                    s.objects().pdbs.iter().map(|pdb| crate::disruption::pdb::headroom(pdb, &s.objects().pods, &s.pdb_scales())).collect();
                s.step();
                let new = &s.events()[seen..];
                // A scale step or a deletion at the same instant changes what is expected.
                if new.iter().any(|e| e.reason.name() == "StepApplied") {
                    continue;
                }
                let within = evictions_within_pdbs(&s, new, &headroom_before);
                prop_assert!(within.is_ok(), "{}", within.unwrap_err());
                // A disruption command never takes more nodes than the budget allows.
                for e in new.iter().filter(|e| e.reason.name() == "Disrupting") {
                    let Reason::Disrupting { method, .. } = &e.reason else { unreachable!() };
                    let reason = match method.as_str() {
                        "Empty" => crate::api::nodepool::BudgetReason::Empty,
                        "Drifted" => crate::api::nodepool::BudgetReason::Drifted,
                        _ => crate::api::nodepool::BudgetReason::Underutilized,
                    };
                    let with_node = || s.machines.values().filter(|m| m.node.is_some());
                    let counted = with_node().filter(|m| m.initialized.is_some()).count() as i64;
                    let deleting = with_node().filter(|m| m.terminating.is_some() || m.disrupting).count() as i64;
                    let np = &s.objects().nodepools[0];
                    let limit = crate::disruption::budgets::allowance(np, reason, counted, 0, s.clock().epoch_seconds(s.now()));
                    prop_assert!(
                        deleting <= limit.allowed,
                        "{deleting} of {counted} nodes disrupting at {}, the budget allows {}",
                        s.now(),
                        limit.allowed
                    );
                }
            }
            s.run_until(end);
            // Deterministic.
            let again = run();
            prop_assert_eq!(s.events(), again.events());
            // No node holds more than its allocatable.
            for node in &s.objects().nodes {
                let name = node.metadata.name.clone().unwrap();
                let alloc = resources::from_k8s(node.status.as_ref().unwrap().allocatable.as_ref().unwrap()).unwrap();
                let mut used = resources::ResourceList::new();
                for p in s.objects().pods.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&name)) {
                    resources::add_into(&mut used, &resources::pod_requests(p).unwrap());
                }
                for (k, v) in &used {
                    prop_assert!(*v <= alloc.get(k).copied().unwrap_or_default(), "{name}: {k} {v} > allocatable");
                }
            }
            // No pod under do-not-disrupt is evicted (only force-deleted at the grace period).
            let protected: std::collections::BTreeSet<String> = text
                .split("---\n")
                .filter(|d| d.contains("do-not-disrupt"))
                .filter_map(|d| d.lines().find(|l| l.starts_with("metadata: {name: ")).map(|l| l[17..].split(',').next().unwrap().to_string()))
                .collect();
            for e in s.events().iter().filter(|e| e.reason.name() == "Evicted") {
                let owner = e.object.name.rsplit_once('-').map(|(o, _)| o.to_string()).unwrap_or_default();
                prop_assert!(!protected.contains(&owner), "{} evicted despite do-not-disrupt", e.object);
            }
            // Force deletion only at the grace period: 10 minutes after the node began terminating.
            for e in s.events().iter().filter(|e| e.reason.name() == "Disrupted") {
                let Reason::PodRemoved { node, .. } = &e.reason else { unreachable!() };
                let began = s.events().iter().find(|t| t.reason.name() == "Terminating" && t.object.name == *node).map(|t| t.at).unwrap();
                prop_assert_eq!(e.at, began.plus(Duration::mins(10)));
            }
            // Every pod still pending has a reason: nothing fits, or its node is on its way.
            let snap = s.snapshot();
            prop_assert!(snap.running + snap.pending.len() == s.objects().pods.len());
        }
    }
}

/// Eight 1-CPU pods and one under `karpenter.sh/do-not-disrupt: "true"` on one node; at 5m seven
/// of the eight go, leaving the node underutilized.
fn underutilized_with_a_protected_pod() -> Simulation {
    let np = NODEPOOL.replace("values: [m5, c5]", "values: [m5, c5, r5]");
    let protected = deployment("keep", 1, "1").replace(
        "    metadata: {labels: {app: keep}}",
        "    metadata: {labels: {app: keep}, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}",
    );
    sim(&[&np, &deployment("inflate", 8, "1"), &protected, &scenario(SCALE_TO_ONE)])
}

const SCALE_TO_ONE: &str = "  - {at: 5m, scale: {kind: Deployment, name: inflate, replicas: 1}}\n";

#[test]
fn disruption_blockers_and_spot_to_spot_are_explained() {
    // A pod under do-not-disrupt keeps an underutilized node; the log says which pod.
    let mut s = underutilized_with_a_protected_pod();
    s.run_until(SimTime::from_secs(900));
    assert!(reasons(&s, "Disrupting").is_empty());
    let blocked: Vec<&Event> = s.events().iter().filter(|e| e.reason.name() == "DisruptionBlocked").collect();
    assert!(
        blocked
            .iter()
            .any(|e| e.message.contains("pod \"default/keep-0\" has \"karpenter.sh/do-not-disrupt\" annotation")),
        "{blocked:?}"
    );

    // A spot node is not replaced by a cheaper spot node: SpotToSpotConsolidation is off.
    let spot = NODEPOOL.replace("values: [on-demand]", "values: [spot]");
    let mut s = sim(&[&spot, &deployment("inflate", 8, "1"), &scenario(SCALE_TO_ONE)]);
    s.run_until(SimTime::from_secs(900));
    assert!(reasons(&s, "Disrupting").is_empty());
    assert!(
        s.events().iter().any(|e| e
            .message
            .contains("SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node")),
        "{:?}",
        s.events().iter().filter(|e| e.reason.name() == "Unconsolidatable").collect::<Vec<_>>()
    );
}

#[test]
fn a_node_explains_why_it_stays_and_what_removing_it_would_do() {
    let mut s = underutilized_with_a_protected_pod();
    s.run_until(SimTime::from_secs(600));
    assert!(s.explain_node("no-such-node").is_none());
    let e = s.explain_node("ip-10-0-1-1").expect("a Karpenter node");
    let failed: Vec<&explain::Check> = e.checks.iter().filter(|c| !c.passed).collect();
    assert!(!e.disruptable);
    assert_eq!(failed.len(), 1, "{:#?}", e.checks);
    assert_eq!(failed[0].condition, "no pod has karpenter.sh/do-not-disrupt");
    assert_eq!(failed[0].detail, "default/keep-0 (indefinitely)");
    // Removing it anyway: the protected pod would not move; the other needs a new, smaller node.
    let r = e.removal.clone().expect("a removal simulation");
    assert!(r.unschedulable.is_empty() && r.moves.is_empty(), "{r:?}");
    assert_eq!(r.not_moved, ["default/keep-0"]);
    assert_eq!(r.new_nodeclaims.len(), 1);
    assert_eq!(r.new_nodeclaims[0].pods, ["default/inflate-0"]);
    assert!(r.savings_per_hour > 0.0, "{r:?}");
    let text = serde_json::to_string(&e).unwrap();
    assert!(text.contains("\"savingsPerHour\""), "{text}");
}

#[test]
fn a_nodepool_explains_its_usage_against_limits_and_its_budgets() {
    // Only c5.2xlarge (8 vCPU), at most 8 CPUs in all; 50% of the nodes at once, no drift.
    let np = NODEPOOL
        .replace(
            "spec:\n  template:",
            "spec:\n  limits: {cpu: \"8\"}\n  disruption:\n    budgets: [{nodes: \"50%\"}, {nodes: \"0\", reasons: [Drifted]}]\n  template:",
        )
        .replace("{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5]}", "{key: node.kubernetes.io/instance-type, operator: In, values: [c5.2xlarge]}");
    // 9 × 1 CPU: one node reaches the limit; the pods that do not fit on it stay pending.
    let mut s = sim(&[&np, &deployment("inflate", 9, "1")]);
    s.run_until(SimTime::from_secs(300));
    assert!(s.explain_nodepool("nope").is_none());
    let e = s.explain_nodepool("default").expect("the NodePool");
    assert_eq!((e.nodes, e.disrupting), (1, 0));
    let cpu = e.usage.iter().find(|u| u.resource == "cpu").expect("cpu is limited");
    assert_eq!((cpu.used.as_str(), cpu.limit.as_deref(), cpu.at_limit), ("8", Some("8"), true));
    let allowed: Vec<(String, i64)> = e.allowed.iter().map(|a| (a.reason.as_str().to_string(), a.allowed)).collect();
    assert_eq!(allowed, [("Empty".into(), 1), ("Drifted".into(), 0), ("Underutilized".into(), 1)]);
    assert_eq!(e.timeline.len(), 1, "no scheduled budget: one stretch");
    assert_eq!((e.timeline[0].drifted, e.timeline[0].empty), (Some(0), Some(1)));
    let text = explain::render_nodepool(&e);
    assert!(text.contains("cpu: 8 of 8 (at its limit"), "{text}");
    assert!(!s.snapshot().pending.is_empty(), "the limit holds pods back");
}

#[test]
fn expirations_and_executed_commands_are_disruption_records() {
    let np = NODEPOOL.replace("      requirements:", "      expireAfter: 10m\n      requirements:");
    let mut s = sim(&[&np, &deployment("inflate", 2, "1")]);
    s.run_until(SimTime::from_secs(15 * 60));
    let d = s.disruptions();
    assert!(!d.is_empty(), "{:?}", s.events());
    assert_eq!(
        (d[0].reason.as_str(), d[0].method.as_str(), d[0].decision.as_str()),
        ("Expired", "Expiration", "delete")
    );
    assert_eq!(d[0].nodes, ["ip-10-0-1-1"]);
    assert!(d[0].at >= SimTime::from_secs(600), "{:?}", d[0].at);
    let json = serde_json::to_value(&d[0]).unwrap();
    assert_eq!(json["replacementNodeClaims"], serde_json::json!([]));
}

#[test]
fn a_cheaper_replacement_must_still_meet_min_values() {
    // Three families at launch (the 2xlarge sizes); once the pods shrink to 3 CPUs only c5 and m5
    // are cheaper, fewer than the 3 families minValues asks for: no replacement (upstream
    // `RemoveInstanceTypeOptionsByPriceAndMinValues`).
    let np = NODEPOOL.replace(
        "      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5]}",
        "      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5, r5], minValues: 3}\n      - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.xlarge, m5.xlarge, c5.2xlarge, m5.2xlarge, r5.2xlarge]}",
    );
    let steps = "  - {at: 5m, scale: {kind: Deployment, name: inflate, replicas: 3}}\n";
    let mut s = sim(&[&np, &deployment("inflate", 7, "1"), &scenario(steps)]);
    s.run_until(SimTime::from_secs(900));
    assert_eq!(s.snapshot().nodes[0].instance_type.as_deref(), Some("c5.2xlarge"));
    assert!(s.disruptions().is_empty(), "{:?}", s.disruptions());
    let why = s
        .events()
        .iter()
        .filter(|e| e.reason.name() == "Unconsolidatable")
        .map(|e| e.message.clone())
        .collect::<Vec<_>>();
    assert!(
        why.iter().any(|m| m.contains(
            "Filtering by price: minValues requirement is not met for label(s) (label(s)=[karpenter.k8s.aws/instance-family])"
        )),
        "{why:?}"
    );
}

#[test]
fn a_pod_says_where_it_stands() {
    // Five 1-CPU pods, at most 4 CPUs in the NodePool: one c5.xlarge holds three, the rest wait.
    let np = NODEPOOL
        .replace("spec:\n  template:", "spec:\n  limits: {cpu: \"4\"}\n  template:")
        .replace("values: [m5, c5]", "values: [c5]");
    let mut s = sim(&[&np, &deployment("inflate", 5, "1")]);
    assert!(s.explain_pod("default", "nope").is_none());
    // Nominated to the in-flight NodeClaim before it is Ready.
    s.run_until(SimTime::from_secs(10));
    let nominated = s.explain_pod("default", "inflate-0").unwrap();
    assert!(matches!(&nominated, PodStanding::WouldBind { target } if target.starts_with("default-")), "{nominated:?}");
    s.run_until(SimTime::from_secs(300));
    let running = s.explain_pod("default", "inflate-0").unwrap();
    assert!(matches!(&running, PodStanding::Running { node } if node == "ip-10-0-1-1"), "{running:?}");
    let pending = &s.snapshot().pending;
    assert!(!pending.is_empty(), "the limit holds some back");
    let (ns, name) = pending[0].split_once('/').unwrap();
    let held = s.explain_pod(ns, name).unwrap();
    let PodStanding::Unschedulable { headline, .. } = &held else { panic!("{held:?}") };
    assert!(headline.contains("limits"), "{headline}");
    assert!(held.to_string().contains(name), "{held}");
    let json = serde_json::to_value(&held).unwrap();
    assert_eq!(json["state"], "unschedulable");
}

#[test]
fn actions_taken_now_are_steps_without_a_time() {
    use crate::manifest::scenario::{ScaleAction, Step};
    let mut s = sim(&[NODEPOOL, &deployment("inflate", 1, "1")]);
    s.run_until(SimTime::from_secs(120));
    let scale = Step {
        scale: Some(ScaleAction {
            kind: "Deployment".into(),
            namespace: "default".into(),
            name: "inflate".into(),
            replicas: 3,
        }),
        ..Step::default()
    };
    s.act(&scale, None).unwrap();
    assert_eq!(s.snapshot().pending.len(), 2, "the controller created two pods at once");
    assert!(s.events().iter().any(|e| e.message == "scale Deployment default/inflate to 3"));
    // A failing action is an error and a StepFailed event.
    let missing =
        Step { scale: Some(ScaleAction { name: "nope".into(), ..scale.scale.clone().unwrap() }), ..Step::default() };
    assert!(s.act(&missing, None).is_err());
    assert_eq!(reasons(&s, "StepFailed").len(), 1);
    // An edited NodePool: its template label is static drift.
    let edited =
        NODEPOOL.replace("  template:\n    spec:", "  template:\n    metadata: {labels: {team: a}}\n    spec:");
    s.apply(load(&edited).unwrap()).unwrap();
    s.run_until(SimTime::from_secs(200));
    assert!(s.events().iter().any(|e| e.message == "apply edited objects"));
    assert!(!reasons(&s, "Drifted").is_empty(), "{:?}", s.events().iter().map(ToString::to_string).collect::<Vec<_>>());
}
