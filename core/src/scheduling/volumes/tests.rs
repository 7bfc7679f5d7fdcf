//! Volume topology, validation and limits: the module's parts, then whole rounds on the fake
//! instance types (zones test-zone-1/2/3; after upstream's volume topology tests in `provisioning/scheduling`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use serde::de::DeserializeOwned;

use super::*;
use crate::manifest::workloads::ephemeral_claims;
use crate::quantity::Quantity;
use crate::scheduling::explain::{NodePoolFailure, NodeRejection};
use crate::scheduling::fake;
use crate::scheduling::scheduler::{schedule, Results};
use crate::state::{Input, NodePoolInput};

fn yaml<T: DeserializeOwned>(text: &str) -> T {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn pod(name: &str, cpu: &str, extra_spec: &str) -> Pod {
    yaml(&format!(
        "metadata: {{name: {name}, namespace: default}}\nspec:\n  containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]\n{extra_spec}"
    ))
}

/// A pod mounting the given claims.
fn pod_with_claims(name: &str, cpu: &str, claims: &[&str], extra_spec: &str) -> Pod {
    let volumes: Vec<String> =
        claims.iter().map(|c| format!("  - {{name: {c}, persistentVolumeClaim: {{claimName: {c}}}}}")).collect();
    pod(name, cpu, &format!("  volumes:\n{}\n{extra_spec}", volumes.join("\n")))
}

fn unbound_claim(name: &str, class: &str) -> PersistentVolumeClaim {
    yaml(&format!("metadata: {{name: {name}, namespace: default}}\nspec: {{storageClassName: {class}}}"))
}

fn bound_claim(name: &str, volume: &str) -> PersistentVolumeClaim {
    yaml(&format!(
        "metadata: {{name: {name}, namespace: default, annotations: {{pv.kubernetes.io/bind-completed: \"yes\"}}}}\nspec: {{volumeName: {volume}}}\nstatus: {{phase: Bound}}"
    ))
}

/// A CSI volume of `driver` whose node affinity has one term per entry of `zone_terms`.
fn zonal_volume(name: &str, driver: &str, zone_terms: &[&str]) -> PersistentVolume {
    let terms: Vec<String> = zone_terms
        .iter()
        .map(|z| {
            format!("      - matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [{z}]}}]")
        })
        .collect();
    yaml(&format!(
        "metadata: {{name: {name}}}\nspec:\n  csi: {{driver: {driver}, volumeHandle: {name}}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n{}",
        terms.join("\n")
    ))
}

fn class(name: &str, provisioner: &str, zones: &[&str]) -> StorageClass {
    let topology = if zones.is_empty() {
        String::new()
    } else {
        format!(
            "allowedTopologies:\n- matchLabelExpressions: [{{key: topology.kubernetes.io/zone, values: [{}]}}]\n",
            zones.join(", ")
        )
    };
    yaml(&format!(
        "metadata: {{name: {name}}}\nprovisioner: {provisioner}\nvolumeBindingMode: WaitForFirstConsumer\n{topology}"
    ))
}

fn csinode(node: &str, driver: &str, count: i32) -> CSINode {
    yaml(&format!(
        "metadata: {{name: {node}}}\nspec:\n  drivers:\n  - {{name: {driver}, nodeID: {node}, allocatable: {{count: {count}}}}}"
    ))
}

fn node(name: &str, zone: &str) -> Node {
    yaml(&format!(
        "metadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}, kubernetes.io/arch: amd64, kubernetes.io/os: linux}}\nstatus:\n  allocatable: {{cpu: \"64\", memory: 256Gi, pods: \"200\"}}\n  capacity: {{cpu: \"64\", memory: 256Gi, pods: \"200\"}}"
    ))
}

fn input(pods: Vec<Pod>) -> Input {
    let np = yaml(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []",
    );
    let its = Arc::new(vec![
        fake::instance_type("small", 2, Quantity::from_gibibytes(4), 10, "amd64"),
        fake::instance_type("large", 16, Quantity::from_gibibytes(64), 110, "amd64"),
    ]);
    Input { nodepools: vec![NodePoolInput { nodepool: np, instance_types: its }], pods, ..Default::default() }
}

fn zone_of(r: &Results, pod: &str) -> Option<String> {
    let nc = r.nodeclaims.iter().find(|n| n.pods.iter().any(|p| p.name == pod))?;
    nc.launch.as_ref().map(|l| l.zone.clone())
}

fn ignored_reason(r: &Results, pod: &str) -> String {
    r.ignored.iter().find(|i| i.pod.name == pod).map(|i| i.reason.to_string()).unwrap_or_default()
}

#[test]
fn in_tree_provisioners_translate_to_csi_drivers() {
    assert_eq!(csi_driver_name("kubernetes.io/aws-ebs"), "ebs.csi.aws.com");
    assert_eq!(csi_driver_name("kubernetes.io/gce-pd"), "pd.csi.storage.gke.io");
    assert_eq!(csi_driver_name("ebs.csi.aws.com"), "ebs.csi.aws.com");
    assert_eq!(csi_driver_name("efs.csi.aws.com"), "efs.csi.aws.com");
}

fn zone(z: &str) -> Requirements {
    let mut r = Requirements::new();
    r.add(Requirement::in_values(labels::TOPOLOGY_ZONE, &[z]));
    r
}

#[test]
fn cross_product_prunes_incompatible_combinations() {
    let merged = cross(&[zone("a"), zone("b")], &[zone("b"), zone("c")]);
    assert_eq!(merged, vec![zone("b")]);
}

#[test]
fn cross_product_keeps_everything_when_nothing_is_compatible() {
    let merged = cross(&[zone("a")], &[zone("b"), zone("c")]);
    assert_eq!(merged.len(), 2);
    assert!(merged.iter().all(|r| r.get_ref(labels::TOPOLOGY_ZONE).is_some_and(Requirement::is_empty)));
}

#[test]
fn local_volume_hostname_terms_become_unconstrained() {
    let local: PersistentVolume = yaml(
        "metadata: {name: local-1}\nspec:\n  local: {path: /mnt/disk}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [old-node]}]\n      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [old-node]}, {key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}]",
    );
    assert_eq!(volume_terms(&local).unwrap(), vec![Requirements::new(), zone("test-zone-2")]);
    // A network volume keeps its hostname affinity.
    let mut network = local.clone();
    let spec = network.spec.as_mut().unwrap();
    spec.local = None;
    spec.csi = Some(yaml("{driver: ebs.csi.aws.com, volumeHandle: vol-1}"));
    let terms = volume_terms(&network).unwrap();
    assert!(terms[0].has(labels::HOSTNAME), "{terms:?}");
}

#[test]
fn a_missing_claim_ignores_the_pod_and_says_which() {
    let mut i = input(vec![pod_with_claims("db", "1", &["data"], ""), pod("plain", "1", "")]);
    i.storage_classes = vec![class("gp3", "ebs.csi.aws.com", &[])];
    let r = schedule(&i);
    assert_eq!(r.nodeclaims.len(), 1);
    assert_eq!(ignored_reason(&r, "db"), "ignored: PersistentVolumeClaim default/data (volume data) not found");
}

#[test]
fn claim_validation_follows_upstream() {
    let run = |claim: PersistentVolumeClaim, classes: Vec<StorageClass>, pvs: Vec<PersistentVolume>| {
        let mut i = input(vec![pod_with_claims("db", "1", &["data"], "")]);
        i.pvcs = vec![claim];
        i.storage_classes = classes;
        i.pvs = pvs;
        ignored_reason(&schedule(&i), "db")
    };
    // Unbound without any class, and no default class.
    let no_class: PersistentVolumeClaim = yaml("metadata: {name: data, namespace: default}\nspec: {}");
    assert!(run(no_class.clone(), vec![], vec![]).contains("no storage class"));
    // The default class is applied as admission would; Immediate binding (the default) rejects.
    let mut default_class = class("standard", "ebs.csi.aws.com", &[]);
    default_class.metadata.annotations =
        Some([("storageclass.kubernetes.io/is-default-class".to_string(), "true".to_string())].into());
    let mut immediate = default_class.clone();
    immediate.volume_binding_mode = None;
    assert!(run(no_class.clone(), vec![immediate], vec![]).contains("Immediate (the default when unset)"));
    assert_eq!(run(no_class, vec![default_class], vec![]), "");
    assert!(run(unbound_claim("data", "missing"), vec![], vec![]).contains("StorageClass missing is not found"));
    // Bound: the volume must exist and the bind must be completed.
    assert!(run(bound_claim("data", "pv-1"), vec![], vec![]).contains("PersistentVolume pv-1, which is not found"));
    let mut not_completed = bound_claim("data", "pv-1");
    not_completed.metadata.annotations = None;
    let pv = zonal_volume("pv-1", "ebs.csi.aws.com", &["test-zone-1"]);
    assert!(run(not_completed, vec![], vec![pv.clone()]).contains("pv.kubernetes.io/bind-completed"));
    assert_eq!(run(bound_claim("data", "pv-1"), vec![], vec![pv]), "");
}

#[test]
fn bound_volume_zone_decides_the_nodeclaim_zone() {
    let mut i = input(vec![pod_with_claims("db", "1", &["data"], "")]);
    i.pvcs = vec![bound_claim("data", "pv-1")];
    i.pvs = vec![zonal_volume("pv-1", "ebs.csi.aws.com", &["test-zone-3"])];
    let r = schedule(&i);
    assert_eq!(zone_of(&r, "db").as_deref(), Some("test-zone-3"), "{r:#?}");
    // The NodeClaim carries the volume's zone; the pod's own requirements do not.
    let zone_req = r.nodeclaims[0].requirements.iter().find(|q| q.key == labels::TOPOLOGY_ZONE).unwrap();
    assert_eq!(zone_req.values, vec!["test-zone-3".to_string()]);
}

#[test]
fn storage_class_allowed_topologies_constrain_unbound_claims() {
    let mut i = input(vec![pod_with_claims(
        "db",
        "1",
        &["data"],
        "  nodeSelector: {}\n  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-3]}]}]}}}",
    )]);
    i.pvcs = vec![unbound_claim("data", "zonal")];
    i.storage_classes = vec![class("zonal", "ebs.csi.aws.com", &["test-zone-2", "test-zone-3"])];
    let r = schedule(&i);
    assert_eq!(zone_of(&r, "db").as_deref(), Some("test-zone-3"), "{r:#?}");
}

#[test]
fn volume_zone_is_not_relaxed_away() {
    // upstream "should not relax an added volume topology zone node-selector away": the first
    // required term cannot be met and is relaxed; the volume zone stays.
    let mut i = input(vec![pod_with_claims(
        "db",
        "1",
        &["data"],
        "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: example.com/label, operator: In, values: [unsupported]}]}, {matchExpressions: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]}]}}}",
    )]);
    i.pvcs = vec![bound_claim("data", "pv-1")];
    i.pvs = vec![zonal_volume("pv-1", "ebs.csi.aws.com", &["test-zone-3"])];
    let r = schedule(&i);
    assert_eq!(zone_of(&r, "db").as_deref(), Some("test-zone-3"), "{r:#?}");
    assert_eq!(r.relaxed.len(), 1);
}

#[test]
fn pv_alternatives_let_anti_affine_pods_use_different_zones() {
    let anti = "  affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: db}}}]}}";
    let mut a = pod_with_claims("db-0", "1", &["data-0"], anti);
    let mut b = pod_with_claims("db-1", "1", &["data-1"], anti);
    for p in [&mut a, &mut b] {
        p.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
    }
    let mut i = input(vec![a, b]);
    i.pvcs = vec![bound_claim("data-0", "pv-0"), bound_claim("data-1", "pv-1")];
    i.pvs = vec![
        zonal_volume("pv-0", "ebs.csi.aws.com", &["test-zone-1", "test-zone-2"]),
        zonal_volume("pv-1", "ebs.csi.aws.com", &["test-zone-1", "test-zone-2"]),
    ];
    let r = schedule(&i);
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    let zones = [zone_of(&r, "db-0").unwrap(), zone_of(&r, "db-1").unwrap()];
    assert_ne!(zones[0], zones[1]);
    assert!(zones.iter().all(|z| z == "test-zone-1" || z == "test-zone-2"), "{zones:?}");
}

#[test]
fn spread_counts_over_the_pods_own_domains_not_the_volume_zone() {
    // Three plain pods spread 1/1/1; the zonal-volume pods can only go to test-zone-1. The
    // spread's minimum is taken over all three zones (the pod's own affinity), so the first
    // volume pod makes test-zone-1 hold 2 and the second would make the skew 2.
    let spread = "  topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]";
    let mut pods = Vec::new();
    for i in 0..3 {
        pods.push(pod(&format!("web-{i}"), "2", spread));
    }
    pods.push(pod_with_claims("web-v0", "1", &["v0"], spread));
    pods.push(pod_with_claims("web-v1", "1", &["v1"], spread));
    for p in &mut pods {
        p.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    }
    let mut i = input(pods);
    i.pvcs = vec![unbound_claim("v0", "zone-1"), unbound_claim("v1", "zone-1")];
    i.storage_classes = vec![class("zone-1", "ebs.csi.aws.com", &["test-zone-1"])];
    let r = schedule(&i);
    let unschedulable: Vec<&str> = r.unschedulable.iter().map(|u| u.pod.name.as_str()).collect();
    assert_eq!(unschedulable.len(), 1, "{r:#?}");
    assert!(unschedulable[0].starts_with("web-v"));
    let placed = if unschedulable[0] == "web-v0" { "web-v1" } else { "web-v0" };
    assert_eq!(zone_of(&r, placed).as_deref(), Some("test-zone-1"));
    let headline = r.unschedulable[0].explanation.headline();
    assert!(headline.contains("topology spread"), "{headline}");
}

#[test]
fn nodepool_zones_that_miss_the_volume_zone_are_explained() {
    let mut i = input(vec![pod_with_claims("db", "1", &["data"], "")]);
    let np = &mut i.nodepools[0].nodepool;
    np.spec.template.spec.requirements =
        vec![yaml("{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-2]}")];
    i.pvcs = vec![bound_claim("data", "pv-1")];
    i.pvs = vec![zonal_volume("pv-1", "ebs.csi.aws.com", &["test-zone-3"])];
    let r = schedule(&i);
    let e = &r.unschedulable[0].explanation;
    assert!(matches!(e.nodepools[0].failure, NodePoolFailure::VolumeTopology(_)), "{e:#?}");
    assert_eq!(
        e.headline(),
        "NodePool default: volume data (PVC default/data, PV pv-1) requires topology.kubernetes.io/zone In \
         [test-zone-3]; the NodePool allows topology.kubernetes.io/zone In [test-zone-1 test-zone-2]"
    );
}

#[test]
fn csinode_limits_send_the_rest_to_a_new_nodeclaim() {
    // upstream "should launch multiple nodes if required due to volume limits": limit 10, six
    // pods with two claims each: five fit on the node, the sixth needs a new NodeClaim.
    let mut pods = Vec::new();
    let mut claims = Vec::new();
    for i in 0..6 {
        let (a, b) = (format!("a-{i}"), format!("b-{i}"));
        pods.push(pod_with_claims(&format!("p-{i}"), "100m", &[&a, &b], ""));
        claims.push(unbound_claim(&a, "ebs"));
        claims.push(unbound_claim(&b, "ebs"));
    }
    let mut i = input(pods);
    i.nodes = vec![node("node-a", "test-zone-1")];
    i.pvcs = claims;
    i.storage_classes = vec![class("ebs", "kubernetes.io/aws-ebs", &["test-zone-1"])];
    i.csinodes = vec![csinode("node-a", "ebs.csi.aws.com", 10)];
    let r = schedule(&i);
    assert_eq!(r.existing_nodes.len(), 1);
    assert_eq!(r.existing_nodes[0].pods.len(), 5, "{r:#?}");
    assert_eq!(r.nodeclaims.len(), 1);
    assert_eq!(r.nodeclaims[0].pods.len(), 1);
    assert_eq!(r.nodeclaims[0].launch.as_ref().unwrap().zone, "test-zone-1");
}

#[test]
fn shared_claims_count_once_and_bound_pods_count_too() {
    // The node already holds pod "old" with claim "a-0"; limit 2. Pods sharing "a-0" and one new
    // claim fit; a third distinct claim does not.
    let mut old = pod_with_claims("old", "100m", &["a-0"], "");
    old.spec.as_mut().unwrap().node_name = Some("node-a".into());
    let mut i = input(vec![
        old,
        pod_with_claims("p-1", "100m", &["a-0", "a-1"], ""),
        pod_with_claims("p-2", "100m", &["a-1"], ""),
        pod_with_claims("p-3", "100m", &["a-2"], ""),
    ]);
    i.nodes = vec![node("node-a", "test-zone-1")];
    i.pvcs = (0..3).map(|n| unbound_claim(&format!("a-{n}"), "ebs")).collect();
    i.storage_classes = vec![class("ebs", "ebs.csi.aws.com", &[])];
    i.csinodes = vec![csinode("node-a", "ebs.csi.aws.com", 2)];
    let r = schedule(&i);
    let on_node: Vec<&str> = r.existing_nodes[0].pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(on_node, vec!["p-1", "p-2"], "{r:#?}");
    assert_eq!(r.nodeclaims.len(), 1);
    assert_eq!(r.nodeclaims[0].pods[0].name, "p-3");
}

#[test]
fn a_node_at_its_limit_is_explained() {
    let mut i = input(vec![pod_with_claims("p", "100m", &["a", "b"], "")]);
    // No NodePool: only the existing node's reason is left.
    i.nodepools.clear();
    let mut old = pod_with_claims("old", "100m", &["c"], "");
    old.spec.as_mut().unwrap().node_name = Some("node-a".into());
    i.pods.push(old);
    i.nodes = vec![node("node-a", "test-zone-1")];
    i.pvcs = ["a", "b", "c"].iter().map(|n| unbound_claim(n, "ebs")).collect();
    i.storage_classes = vec![class("ebs", "ebs.csi.aws.com", &[])];
    i.csinodes = vec![csinode("node-a", "ebs.csi.aws.com", 2)];
    let r = schedule(&i);
    let groups = &r.unschedulable[0].explanation.existing_nodes;
    assert!(matches!(groups[0].rejection, NodeRejection::VolumeLimit(_)), "{groups:#?}");
    assert_eq!(groups[0].rejection.to_string(), "volume limit: ebs.csi.aws.com 1/2 attached, pod needs 2 more");
}

#[test]
fn existing_node_in_another_zone_is_explained() {
    let mut i = input(vec![pod_with_claims("db", "1", &["data"], "")]);
    i.nodepools.clear();
    i.nodes = vec![node("node-a", "test-zone-1")];
    i.pvcs = vec![bound_claim("data", "pv-1")];
    i.pvs = vec![zonal_volume("pv-1", "ebs.csi.aws.com", &["test-zone-2"])];
    let r = schedule(&i);
    let groups = &r.unschedulable[0].explanation.existing_nodes;
    assert_eq!(
        groups[0].rejection.to_string(),
        "volume data (PVC default/data, PV pv-1) requires topology.kubernetes.io/zone In [test-zone-2]; the node \
         has topology.kubernetes.io/zone In [test-zone-1]"
    );
}

#[test]
fn new_nodeclaims_are_never_volume_limited() {
    // 30 claims on one pod: no NodeClaim has a CSINode, so nothing limits it.
    let names: Vec<String> = (0..30).map(|n| format!("c-{n}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut i = input(vec![pod_with_claims("p", "100m", &refs, "")]);
    i.pvcs = names.iter().map(|n| unbound_claim(n, "ebs")).collect();
    i.storage_classes = vec![class("ebs", "ebs.csi.aws.com", &[])];
    let r = schedule(&i);
    assert_eq!(r.nodeclaims.len(), 1, "{r:#?}");
}

#[test]
fn non_csi_volumes_are_not_counted() {
    let nfs: PersistentVolume = yaml("metadata: {name: nfs-1}\nspec: {nfs: {server: fake.server, path: /some/path}}");
    let ebs: PersistentVolume = yaml("metadata: {name: ebs-1}\nspec: {awsElasticBlockStore: {volumeID: vol-1}}");
    let claims = [bound_claim("nfs", "nfs-1"), bound_claim("ebs", "ebs-1")];
    let pvs = [nfs, ebs];
    let storage = Storage::new(&claims, &pvs, &[], &[]);
    assert_eq!(storage.driver(&claims[0]), Ok(None));
    assert_eq!(storage.driver(&claims[1]), Ok(Some(EBS_CSI_DRIVER)));
}

#[test]
fn ephemeral_volumes_use_the_pod_named_claim() {
    let p = pod(
        "cache",
        "1",
        "  volumes:\n  - name: scratch\n    ephemeral: {volumeClaimTemplate: {spec: {storageClassName: zonal, accessModes: [ReadWriteOnce]}}}",
    );
    let claims = ephemeral_claims(&p);
    assert_eq!(claims[0].metadata.name.as_deref(), Some("cache-scratch"));
    let mut i = input(vec![p]);
    i.pvcs = claims;
    i.storage_classes = vec![class("zonal", "ebs.csi.aws.com", &["test-zone-2"])];
    let r = schedule(&i);
    assert_eq!(zone_of(&r, "cache").as_deref(), Some("test-zone-2"), "{r:#?}");
}

#[test]
fn network_volume_hostname_affinity_is_kept_and_explained() {
    // upstream "should not ignore hostname affinity when using non-local path volumes".
    let mut pv = zonal_volume("pv-1", "ebs.csi.aws.com", &[]);
    pv.spec.as_mut().unwrap().node_affinity =
        Some(yaml("required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [gone]}]}]}"));
    let mut i = input(vec![pod_with_claims("db", "1", &["data"], "")]);
    i.pvcs = vec![bound_claim("data", "pv-1")];
    i.pvs = vec![pv];
    let r = schedule(&i);
    assert_eq!(r.unschedulable.len(), 1, "{r:#?}");
    assert_eq!(
        r.unschedulable[0].explanation.headline(),
        "NodePool default: volume data (PVC default/data, PV pv-1) requires kubernetes.io/hostname In [gone]; a new \
         node cannot have an existing node's hostname"
    );
}

#[test]
fn json_shapes_are_tagged() {
    let mut i = input(vec![pod_with_claims("db", "1", &["data"], "")]);
    i.pvcs = vec![unbound_claim("data", "missing")];
    let r = schedule(&i);
    assert_eq!(
        serde_json::to_value(&r.ignored[0].reason).unwrap(),
        serde_json::json!({"reason": "volume", "volume": "data", "claim": "default/data",
            "problem": {"kind": "storageClassNotFound", "storageClass": "missing"}})
    );
    let limit = NodeRejection::VolumeLimit(VolumeLimit { driver: "d".into(), attached: 2, limit: 2, needs: 1 });
    assert_eq!(
        serde_json::to_value(&limit).unwrap(),
        serde_json::json!({"reason": "volumeLimit", "driver": "d", "attached": 2, "limit": 2, "needs": 1})
    );
}

#[test]
fn a_node_already_over_its_limit_takes_no_pod_at_all() {
    // upstream `ExceedsLimits` checks the union of the node's claims and the pod's, so a node
    // whose pods already exceed its CSINode count refuses even a pod without volumes.
    let mut pods = vec![pod("plain", "100m", "")];
    for n in 0..2 {
        let mut old = pod_with_claims(&format!("old-{n}"), "100m", &[&format!("c-{n}")], "");
        old.spec.as_mut().unwrap().node_name = Some("node-a".into());
        pods.push(old);
    }
    let mut i = input(pods);
    i.nodes = vec![node("node-a", "test-zone-1")];
    i.pvcs = (0..2).map(|n| unbound_claim(&format!("c-{n}"), "ebs")).collect();
    i.storage_classes = vec![class("ebs", "ebs.csi.aws.com", &[])];
    i.csinodes = vec![csinode("node-a", "ebs.csi.aws.com", 1)];
    let r = schedule(&i);
    assert!(r.existing_nodes.is_empty(), "{r:#?}");
    assert_eq!(r.nodeclaims.len(), 1);
    i.nodepools.clear();
    let r = schedule(&i);
    let rejection = &r.unschedulable[0].explanation.existing_nodes[0].rejection;
    assert_eq!(rejection.to_string(), "volume limit: ebs.csi.aws.com 2/1 attached, already over the limit");
}
