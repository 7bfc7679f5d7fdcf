//! The gallery: scenarios that load in one click. Each is a YAML file in web/examples/, tested
//! below to do what its description says.

pub struct Example {
    pub id: &'static str,
    pub title: &'static str,
    pub summary: &'static str,
    pub yaml: &'static str,
}

pub const EXAMPLES: &[Example] = &[
    Example {
        id: "inflate",
        title: "inflate 0 → 3",
        summary: "1-CPU pods on 2-vCPU types: scale to 3 and get one node per pod",
        yaml: include_str!("../examples/inflate.yaml"),
    },
    Example {
        id: "resident-batch-spot",
        title: "resident + batch-spot",
        summary: "on-demand services, a tainted spot NodePool, no disruption weekdays 09–17 UTC",
        yaml: include_str!("../examples/resident-batch-spot.yaml"),
    },
    Example {
        id: "ci-runners",
        title: "multi-arch CI runners",
        summary: "amd64 and arm64 runners, WhenEmpty with consolidateAfter 30m",
        yaml: include_str!("../examples/ci-runners.yaml"),
    },
    Example {
        id: "critical-static-group",
        title: "critical static node group",
        summary: "pods pinned to a tainted managed node group; one does not fit",
        yaml: include_str!("../examples/critical-static-group.yaml"),
    },
    Example {
        id: "v1alpha5-provisioner",
        title: "v1alpha5 Provisioner",
        summary: "a legacy Provisioner converted on load, with a note per changed field",
        yaml: include_str!("../examples/v1alpha5-provisioner.yaml"),
    },
    Example {
        id: "drift-ami-pin",
        title: "drift after an AMI pin",
        summary: "the AMI pin moves at 10m; nodes are replaced one at a time",
        yaml: include_str!("../examples/drift-ami-pin.yaml"),
    },
    Example {
        id: "thousand-pods",
        title: "1,000 pods",
        summary: "ten Deployments on on-demand and spot NodePools, for search and filters",
        yaml: include_str!("../examples/thousand-pods.yaml"),
    },
];

pub fn by_id(id: &str) -> Option<&'static Example> {
    EXAMPLES.iter().find(|e| e.id == id)
}

#[cfg(test)]
mod tests {
    use carpentry_core::manifest::scenario::{ScaleAction, Step};
    use carpentry_wasm::Session;

    use super::*;

    fn scale_inflate(replicas: i32) -> Step {
        Step::scale(
            "0s",
            ScaleAction { kind: "Deployment".into(), namespace: "default".into(), name: "inflate".into(), replicas },
        )
    }

    fn run(id: &str, until_ms: u64) -> Session {
        let mut s = Session::load(by_id(id).unwrap().yaml).unwrap_or_else(|e| panic!("{id}: {e}"));
        s.run_until(until_ms);
        s
    }

    fn count(s: &Session, kind: &str) -> usize {
        s.events_since(0).iter().filter(|e| e.reason.name() == kind).count()
    }

    #[test]
    fn inflate_scaled_to_three_gets_three_two_vcpu_nodes() {
        let mut s = run("inflate", 10_000);
        assert!(s.state().snapshot.nodes.is_empty());
        s.act(&scale_inflate(3)).unwrap();
        s.run_until(180_000);
        let state = s.state();
        assert_eq!(state.snapshot.nodes.len(), 3);
        assert_eq!(state.snapshot.running, 3);
        for n in &state.snapshot.nodes {
            assert_eq!(n.allocatable.cpu, 1.93, "{n:?}");
            assert_eq!(n.requested.cpu, 1.0);
        }
    }

    #[test]
    fn resident_batch_spot_holds_underused_spot_nodes_until_17_00() {
        let s = run("resident-batch-spot", 8 * 3_600_000);
        let nodes = s.state().snapshot.nodes;
        let spot = nodes.iter().filter(|n| n.capacity_type.as_deref() == Some("spot")).count();
        assert!(spot >= 2, "{nodes:?}");
        assert_eq!(count(&s, "Disrupting"), 0, "no disruption during the weekday window");
        let later = run("resident-batch-spot", 9 * 3_600_000);
        assert!(count(&later, "Disrupting") > 0, "consolidation after 17:00");
        let np = later.explain_nodepool("batch-spot").unwrap();
        assert!(np.instance_types.count > 10);
        assert!(np.instance_types.cheapest.iter().all(|t| t.capacity_type == "spot" && t.price_synthetic));
    }

    #[test]
    fn ci_runners_wait_thirty_minutes_empty() {
        let arch_of = |s: &Session| -> Vec<String> {
            let mut a: Vec<String> = s
                .state()
                .snapshot
                .nodes
                .iter()
                .map(|n| n.instance_type.clone().unwrap_or_default().split('.').next().unwrap_or("").to_string())
                .collect();
            a.sort();
            a.dedup();
            a
        };
        let s = run("ci-runners", 39 * 60_000);
        assert_eq!(count(&s, "Disrupting"), 0, "the arm64 nodes, empty since 10m, stay until 40m");
        assert!(arch_of(&s).iter().any(|f| f.ends_with('g')), "graviton (arm64) nodes still there: {:?}", arch_of(&s));
        let s = run("ci-runners", 45 * 60_000);
        assert!(count(&s, "Disrupting") >= 1);
        assert!(!arch_of(&s).is_empty() && arch_of(&s).iter().all(|f| !f.ends_with('g')), "{:?}", arch_of(&s));
        let s = run("ci-runners", 60 * 60_000);
        assert!(s.state().snapshot.nodes.is_empty(), "the amd64 nodes went at 55m");
    }

    #[test]
    fn critical_pod_explains_the_missing_label() {
        let s = run("critical-static-group", 120_000);
        let pending = s.state().snapshot.pending;
        assert_eq!(pending, vec!["kube-system/critical-2".to_string()]);
        let standing = s.explain_pod("kube-system", "critical-2").unwrap().to_string();
        assert!(standing.contains("node-group"), "{standing}");
    }

    #[test]
    fn v1alpha5_provisioner_is_converted_with_notes() {
        let s = run("v1alpha5-provisioner", 120_000);
        let state = s.state();
        assert!(state.notes.iter().any(|n| n.starts_with("converted ")), "{:?}", state.notes);
        assert_eq!(state.snapshot.running, 2);
    }

    #[test]
    fn drift_replaces_one_node_at_a_time() {
        let s = run("drift-ami-pin", 12 * 60_000);
        assert_eq!(count(&s, "Drifted"), 4);
        let later = run("drift-ami-pin", 60 * 60_000);
        assert_eq!(count(&later, "Terminated"), 4, "all four old nodes replaced");
        assert_eq!(later.state().snapshot.running, 4);
    }

    #[test]
    fn pinning_the_ami_by_hand_drifts_the_nodes() {
        let mut s = run("inflate", 0);
        s.act(&scale_inflate(2)).unwrap();
        s.run_until(180_000);
        assert!(s.pin_ami("default", "latest").unwrap_err().contains("family@version"));
        let edited = s.pin_ami("default", "al2023@v20261201").unwrap();
        s.apply(&edited).unwrap();
        s.run_until(200_000);
        assert_eq!(count(&s, "Drifted"), 2);
        assert!(s.nodeclasses()[0].ami.contains("al2023@v20261201"));
    }

    #[test]
    fn thousand_pods_all_land() {
        let s = run("thousand-pods", 180_000);
        let state = s.state();
        assert_eq!(state.snapshot.running, 1000);
        assert!(state.snapshot.pending.is_empty());
    }
}
