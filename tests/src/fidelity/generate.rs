//! A seeded generator of random scenarios that mix what users combine: several NodePools with
//! weights, requirements with every operator and minValues, taints and tolerations, limits,
//! DaemonSets, zonal and hostname topology spread, pod affinity and anti-affinity, preferred
//! terms, existing and in-flight nodes, unavailable offerings, over the real us-east-1 catalogue.
//! The output is a scenario file (YAML documents), so a divergence is reproduced by the file alone.

use carpentry_core::api::ec2nodeclass::EC2NodeClassSpec;
use carpentry_core::catalogue::{Catalogue, InstanceType};
use rand::{RngExt, SeedableRng};
use rand_xorshift::XorShiftRng;
use serde_json::{json, Value};

const REGION: &str = "us-east-1";
const ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"];
const CPUS: &[&str] = &["100m", "250m", "500m", "1", "1500m", "2", "3500m", "7"];
const MEMORIES: &[&str] = &["128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi", "30Gi"];
/// Types used for existing nodes and unavailable offerings (common, in every zone above).
const NODE_TYPES: &[&str] = &["m5.large", "m5.xlarge", "c5.2xlarge", "r5.large", "m6g.xlarge", "t3.medium"];
const TAINT_KEY: &str = "example.com/dedicated";
const TEAM_KEY: &str = "example.com/team";

/// One generated scenario: its name and the YAML text of its documents.
pub struct Generated {
    pub name: String,
    pub yaml: String,
}

struct Gen<'a> {
    rng: XorShiftRng,
    catalogue_types: &'a [InstanceType],
}

impl Gen<'_> {
    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn pick<'b, T>(&mut self, items: &'b [T]) -> &'b T {
        &items[self.rng.random_range(0..items.len())]
    }

    fn between(&mut self, lo: usize, hi: usize) -> usize {
        self.rng.random_range(lo..=hi)
    }

    fn subset(&mut self, items: &[&str], min: usize) -> Vec<String> {
        loop {
            let out: Vec<String> = items.iter().filter(|_| self.rng.random_bool(0.5)).map(|s| s.to_string()).collect();
            if out.len() >= min {
                return out;
            }
        }
    }

    /// One NodePool requirement, drawn over every operator.
    fn nodepool_requirement(&mut self) -> Value {
        match self.between(0, 11) {
            0 => {
                json!({"key": "karpenter.sh/capacity-type", "operator": "In", "values": self.subset(&["spot", "on-demand"], 1)})
            }
            1 => {
                json!({"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": self.subset(&["c", "m", "r", "t"], 1)})
            }
            2 => json!({"key": "karpenter.k8s.aws/instance-category", "operator": "NotIn", "values": ["t", "x", "z"]}),
            3 => {
                let mut r = json!({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": self.subset(&["m5", "c5", "r5", "m6i", "c6i", "m6g", "c6g", "t3"], 1)});
                if self.chance(0.3) && r["values"].as_array().is_some_and(|v| v.len() >= 2) {
                    r["minValues"] = json!(2);
                }
                r
            }
            4 => {
                json!({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": [self.pick(&["5", "9", "17", "33", "65"]).to_string()]})
            }
            5 => {
                json!({"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": [self.pick(&["2", "4", "5"]).to_string()]})
            }
            6 => json!({"key": "kubernetes.io/arch", "operator": "In", "values": self.subset(&["amd64", "arm64"], 1)}),
            7 => json!({"key": "topology.kubernetes.io/zone", "operator": "In", "values": self.subset(ZONES, 1)}),
            8 => {
                json!({"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": [self.pick(ZONES).to_string()]})
            }
            9 => json!({"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}),
            10 => {
                json!({"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": self.between(2, 5)})
            }
            _ => {
                json!({"key": "karpenter.k8s.aws/instance-memory", "operator": "Gt", "values": [self.pick(&["2048", "4096", "8192"]).to_string()]})
            }
        }
    }

    fn nodepool(&mut self, i: usize, custom_label: bool, tainted: bool) -> Value {
        let mut reqs: Vec<Value> = Vec::new();
        let mut keys = std::collections::BTreeSet::new();
        for _ in 0..self.between(0, 4) {
            let r = self.nodepool_requirement();
            // One requirement per key keeps the NodePool valid (upstream rejects none, but two
            // In terms on one key rarely reflect a real manifest).
            if keys.insert(r["key"].as_str().unwrap_or_default().to_string()) {
                reqs.push(r);
            }
        }
        if custom_label {
            reqs.push(json!({"key": TEAM_KEY, "operator": "In", "values": ["a"]}));
        }
        let mut spec = json!({
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": reqs,
            }},
        });
        if tainted {
            spec["template"]["spec"]["taints"] = json!([{"key": TAINT_KEY, "value": "batch", "effect": "NoSchedule"}]);
        }
        if self.chance(0.5) {
            spec["weight"] = json!(self.pick(&[1, 10, 10, 50, 100]));
        }
        if self.chance(0.25) {
            spec["limits"] = json!({"cpu": self.pick(&["8", "16", "40", "100"]).to_string()});
        }
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": format!("np-{i}")}, "spec": spec})
    }

    fn requests(&mut self) -> Value {
        json!({"requests": {"cpu": self.pick(CPUS).to_string(), "memory": self.pick(MEMORIES).to_string()}})
    }

    fn node_term(&mut self) -> Value {
        match self.between(0, 4) {
            0 => json!({"key": "topology.kubernetes.io/zone", "operator": "In", "values": self.subset(ZONES, 1)}),
            1 => {
                json!({"key": "karpenter.k8s.aws/instance-family", "operator": "NotIn", "values": self.subset(&["m5", "c5", "t3", "r5"], 1)})
            }
            2 => {
                json!({"key": "karpenter.sh/capacity-type", "operator": "In", "values": [self.pick(&["spot", "on-demand"]).to_string()]})
            }
            3 => {
                json!({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": [self.pick(&["1", "3", "7"]).to_string()]})
            }
            _ => {
                json!({"key": "kubernetes.io/arch", "operator": "In", "values": [self.pick(&["amd64", "arm64"]).to_string()]})
            }
        }
    }

    /// A pod template's spec for workload `app`, with the constraints users combine.
    fn pod_spec(&mut self, app: &str, team_pools: bool, taint_pools: bool) -> Value {
        let mut spec = json!({"containers": [{"name": "c", "image": "x", "resources": self.requests()}]});
        let selector = json!({"matchLabels": {"app": app}});
        if self.chance(0.2) {
            let mut ns = serde_json::Map::new();
            match self.between(0, 2) {
                0 => ns.insert("kubernetes.io/arch".into(), json!(self.pick(&["amd64", "arm64"]))),
                1 => ns.insert("karpenter.sh/capacity-type".into(), json!(self.pick(&["spot", "on-demand"]))),
                _ => ns.insert("topology.kubernetes.io/zone".into(), json!(self.pick(ZONES))),
            };
            if team_pools && self.chance(0.5) {
                ns.insert(TEAM_KEY.into(), json!("a"));
            }
            spec["nodeSelector"] = Value::Object(ns);
        }
        let mut affinity = serde_json::Map::new();
        let mut node_affinity = serde_json::Map::new();
        if self.chance(0.2) {
            let terms: Vec<Value> =
                (0..self.between(1, 2)).map(|_| json!({"matchExpressions": [self.node_term()]})).collect();
            node_affinity
                .insert("requiredDuringSchedulingIgnoredDuringExecution".into(), json!({"nodeSelectorTerms": terms}));
        }
        if self.chance(0.15) {
            let prefs: Vec<Value> = (0..self.between(1, 2))
                .map(
                    |_| json!({"weight": self.between(1, 100), "preference": {"matchExpressions": [self.node_term()]}}),
                )
                .collect();
            node_affinity.insert("preferredDuringSchedulingIgnoredDuringExecution".into(), Value::Array(prefs));
        }
        if !node_affinity.is_empty() {
            affinity.insert("nodeAffinity".into(), Value::Object(node_affinity));
        }
        match self.between(0, 9) {
            0 => {
                affinity.insert(
                    "podAffinity".into(),
                    json!({"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": selector}]}),
                );
            }
            1 => {
                affinity.insert(
                    "podAntiAffinity".into(),
                    json!({"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}]}),
                );
            }
            2 => {
                affinity.insert("podAntiAffinity".into(), json!({"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 50, "podAffinityTerm": {"topologyKey": self.pick(&["kubernetes.io/hostname", "topology.kubernetes.io/zone"]).to_string(), "labelSelector": selector}}]}));
            }
            3 => {
                affinity.insert("podAffinity".into(), json!({"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}}]}));
            }
            _ => {}
        }
        if !affinity.is_empty() {
            spec["affinity"] = Value::Object(affinity);
        }
        if self.chance(0.3) {
            let mut tsc = Vec::new();
            if self.chance(0.7) {
                tsc.push(json!({"maxSkew": self.between(1, 2), "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": if self.chance(0.8) { "DoNotSchedule" } else { "ScheduleAnyway" }, "labelSelector": selector}));
            }
            if tsc.is_empty() || self.chance(0.3) {
                tsc.push(json!({"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": if self.chance(0.8) { "DoNotSchedule" } else { "ScheduleAnyway" }, "labelSelector": selector}));
            }
            spec["topologySpreadConstraints"] = Value::Array(tsc);
        }
        if taint_pools && self.chance(0.4) {
            spec["tolerations"] = json!([{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]);
        }
        spec
    }

    fn existing_node(&mut self, i: usize, nodepool: &str, in_flight: bool, docs: &mut Vec<Value>) -> String {
        let type_name = *self.pick(NODE_TYPES);
        let zone = *self.pick(ZONES);
        let capacity_type = *self.pick(&["spot", "on-demand"]);
        let it = self.catalogue_types.iter().find(|t| t.name == type_name).expect("node types are in the catalogue");
        let arch = it.requirements.get("kubernetes.io/arch").any_value().unwrap_or_else(|| "amd64".into());
        let quantities = |list: &carpentry_core::resources::ResourceList| -> Value {
            Value::Object(
                list.iter()
                    .filter(|(k, _)| ["cpu", "memory", "pods", "ephemeral-storage"].contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), json!(v.to_string())))
                    .collect(),
            )
        };
        let capacity = quantities(&it.capacity);
        let allocatable = quantities(it.allocatable());
        let name = format!("ip-10-0-{i}-1.ec2.internal");
        let claim = format!("{nodepool}-x{i:04}");
        let labels = json!({
            "karpenter.sh/nodepool": nodepool,
            "node.kubernetes.io/instance-type": type_name,
            "topology.kubernetes.io/zone": zone,
            "karpenter.sh/capacity-type": capacity_type,
            "kubernetes.io/arch": arch,
            "kubernetes.io/os": "linux",
        });
        let provider_id = format!("aws:///{zone}/i-0{i:016x}");
        let mut status = json!({"providerID": provider_id, "capacity": capacity, "allocatable": allocatable});
        if !in_flight {
            status["nodeName"] = json!(name);
            status["conditions"] = json!([
                {"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Registered", "status": "True", "reason": "Registered", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Initialized", "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            ]);
        }
        let mut nc_labels = labels.clone();
        if !in_flight {
            nc_labels["karpenter.sh/registered"] = json!("true");
            nc_labels["karpenter.sh/initialized"] = json!("true");
        }
        docs.push(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": claim, "labels": nc_labels},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": [nodepool]}],
            },
            "status": status,
        }));
        if in_flight {
            return claim;
        }
        let mut node_labels = labels;
        node_labels["kubernetes.io/hostname"] = json!(name);
        node_labels["karpenter.sh/registered"] = json!("true");
        node_labels["karpenter.sh/initialized"] = json!("true");
        docs.push(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": node_labels},
            "spec": {"providerID": provider_id},
            "status": {"capacity": capacity, "allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }));
        name
    }
}

/// Scenario `seed` of the stream (a pure function of the seed).
pub fn scenario(seed: u64) -> Generated {
    let catalogue_types = Catalogue::embedded()
        .instance_types_shared(REGION, &EC2NodeClassSpec::default())
        .expect("us-east-1 is in the catalogue");
    let mut g = Gen { rng: XorShiftRng::seed_from_u64(seed), catalogue_types: &catalogue_types };
    let name = format!("random-{seed}");
    let mut docs: Vec<Value> = Vec::new();

    let mut scenario_spec = json!({"region": REGION});
    if g.chance(0.25) {
        let unavailable: Vec<Value> = (0..g.between(1, 6))
            .map(|_| {
                json!({"instanceType": g.pick(NODE_TYPES).to_string(), "zone": g.pick(ZONES).to_string(),
                            "capacityType": g.pick(&["spot", "on-demand"]).to_string()})
            })
            .collect();
        scenario_spec["unavailableOfferings"] = Value::Array(unavailable);
    }
    docs.push(json!({"apiVersion": "carpentry.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": name}, "spec": scenario_spec}));

    let pools = g.between(1, 3);
    let team_pool = g.chance(0.25).then(|| g.between(0, pools - 1));
    let taint_pool = g.chance(0.3).then(|| g.between(0, pools - 1));
    for i in 0..pools {
        let np = g.nodepool(i, team_pool == Some(i), taint_pool == Some(i));
        docs.push(np);
    }

    let mut nodes = Vec::new();
    for i in 0..g.between(0, 3).saturating_sub(1) {
        let in_flight = g.chance(0.3);
        let pool = format!("np-{}", g.between(0, pools - 1));
        nodes.push((g.existing_node(i, &pool, in_flight, &mut docs), in_flight));
    }

    for d in 0..g.between(0, 2).saturating_sub(1) {
        let mut spec = json!({"containers": [{"name": "agent", "image": "x", "resources": {"requests": {
            "cpu": g.pick(&["50m", "100m", "200m"]).to_string(), "memory": g.pick(&["64Mi", "128Mi", "256Mi"]).to_string()}}}]});
        if g.chance(0.4) {
            spec["tolerations"] = json!([{"operator": "Exists"}]);
        }
        if g.chance(0.2) {
            spec["nodeSelector"] = json!({"kubernetes.io/arch": "amd64"});
        }
        docs.push(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": format!("ds-{d}"), "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"ds": format!("ds-{d}")}},
                     "template": {"metadata": {"labels": {"ds": format!("ds-{d}")}}, "spec": spec}},
        }));
    }

    // Pods already running on the existing (registered) nodes: they count for topology and take room.
    for (i, (node, in_flight)) in nodes.iter().enumerate() {
        if *in_flight || g.chance(0.3) {
            continue;
        }
        let app = format!("app-{}", g.between(0, 3));
        docs.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("running-{i}"), "namespace": "default", "labels": {"app": app}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]},
        }));
    }

    for w in 0..g.between(1, 4) {
        let app = format!("app-{w}");
        let spec = g.pod_spec(&app, team_pool.is_some(), taint_pool.is_some());
        docs.push(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": app, "namespace": "default"},
            "spec": {"replicas": g.between(1, 12), "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}}, "spec": spec}},
        }));
    }

    let mut yaml = format!("# Generated by the fidelity harness (seed {seed}).\n");
    for (i, d) in docs.iter().enumerate() {
        if i > 0 {
            yaml.push_str("---\n");
        }
        yaml.push_str(&serde_yaml::to_string(d).expect("JSON values serialise as YAML"));
    }
    Generated { name, yaml }
}
