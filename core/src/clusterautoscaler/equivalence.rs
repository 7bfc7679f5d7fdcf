//! Pending pods grouped by what makes them schedule alike (upstream
//! `core/scaleup/equivalence/groups.go` at cluster-autoscaler-1.36.1): pods of one controller
//! (by its UID) with equal labels and an equal spec form one group, whose first pod stands for
//! all in fit checks and whose pods the estimator packs together. A pod without a controller, or
//! a DaemonSet's, is a group of its own; so is every pod of a controller that already has 10
//! groups (`maxEquivalenceGroupsByController`). Specs are compared as upstream's
//! `PodSpecSemanticallyEqual` compares them: without `hostname` (a StatefulSet's pods differ in
//! it) and without projected volumes and their mounts (each pod's `kube-api-access-<random>`).
//!
//! Upstream returns the groups as a Go map (no order); here they come in the order of their first
//! pod in the input.

use k8s_openapi::api::core::v1::{Pod, PodSpec};

/// upstream `maxEquivalenceGroupsByController`.
pub const MAX_GROUPS_PER_CONTROLLER: usize = 10;

/// `pods` in equivalence groups, each in input order.
pub fn groups<'a>(pods: &[&'a Pod]) -> Vec<Vec<&'a Pod>> {
    let mut out: Vec<Vec<&'a Pod>> = Vec::new();
    // Each group's first pod's spec without its hostname, made once (not once a comparison).
    let mut representatives: Vec<PodSpec> = Vec::new();
    // Per controller UID: the groups it has (indices into `out`).
    let mut by_controller: Vec<(&str, Vec<usize>)> = Vec::new();
    for &pod in pods {
        let controller = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .filter(|o| o.kind != "DaemonSet");
        let spec = without_hostname(pod);
        let Some(controller) = controller else {
            out.push(vec![pod]);
            representatives.push(spec);
            continue;
        };
        let uid = controller.uid.as_str();
        let position = match by_controller.iter().position(|(u, _)| *u == uid) {
            Some(p) => p,
            None => {
                by_controller.push((uid, Vec::new()));
                by_controller.len() - 1
            }
        };
        let groups = &mut by_controller[position].1;
        let alike = |g: usize| out[g][0].metadata.labels == pod.metadata.labels && representatives[g] == spec;
        if let Some(&g) = groups.iter().find(|&&g| alike(g)) {
            out[g].push(pod);
        } else {
            if groups.len() < MAX_GROUPS_PER_CONTROLLER {
                groups.push(out.len());
            }
            out.push(vec![pod]);
            representatives.push(spec);
        }
    }
    out
}

/// The pod's spec as groups compare it: `hostname`, projected volumes and their mounts aside.
fn without_hostname(pod: &Pod) -> PodSpec {
    let mut spec = pod.spec.clone().unwrap_or_default();
    spec.hostname = None;
    let projected: Vec<String> =
        spec.volumes.iter().flatten().filter(|v| v.projected.is_some()).map(|v| v.name.clone()).collect();
    if !projected.is_empty() {
        if let Some(volumes) = spec.volumes.as_mut() {
            volumes.retain(|v| v.projected.is_none());
        }
        let containers = spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten());
        for container in containers {
            if let Some(mounts) = container.volume_mounts.as_mut() {
                mounts.retain(|m| !projected.contains(&m.name));
            }
        }
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owner: Option<(&str, &str)>, labels: serde_json::Value, cpu: &str) -> Pod {
        let owners = owner.map_or(
            json!([]),
            |(kind, uid)| json!([{"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": uid, "controller": true}]),
        );
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": labels, "ownerReferences": owners},
            "spec": {"hostname": name, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        }))
        .unwrap()
    }

    #[test]
    fn each_pods_service_account_token_volume_does_not_split_a_group() {
        let with_token = |name: &str, token: &str| {
            let mut p = pod(name, Some(("ReplicaSet", "rs")), json!({"app": "web"}), "1");
            let spec = p.spec.as_mut().unwrap();
            spec.volumes =
                Some(vec![serde_json::from_value(json!({"name": token, "projected": {"sources": []}})).unwrap()]);
            spec.containers[0].volume_mounts =
                Some(vec![serde_json::from_value(json!({"name": token, "mountPath": "/var/run/secrets"})).unwrap()]);
            p
        };
        let pods = [with_token("a", "kube-api-access-x1"), with_token("b", "kube-api-access-y2")];
        let refs: Vec<&Pod> = pods.iter().collect();
        assert_eq!(names(&groups(&refs)), [vec!["a", "b"]]);
    }

    fn names(groups: &[Vec<&Pod>]) -> Vec<Vec<String>> {
        groups.iter().map(|g| g.iter().map(|p| p.metadata.name.clone().unwrap()).collect()).collect()
    }

    #[test]
    fn pods_of_one_controller_alike_are_one_group_and_the_rest_stand_alone() {
        let app = json!({"app": "web"});
        let pods = [
            pod("web-0", Some(("ReplicaSet", "rs-1")), app.clone(), "1"),
            pod("lonely", None, app.clone(), "1"),
            pod("web-1", Some(("ReplicaSet", "rs-1")), app.clone(), "1"),
            pod("bigger", Some(("ReplicaSet", "rs-1")), app.clone(), "2"),
            pod("other-rs", Some(("ReplicaSet", "rs-2")), app.clone(), "1"),
            pod("relabelled", Some(("ReplicaSet", "rs-1")), json!({"app": "web", "v": "2"}), "1"),
            pod("ds-a", Some(("DaemonSet", "ds-1")), app.clone(), "1"),
            pod("ds-b", Some(("DaemonSet", "ds-1")), app.clone(), "1"),
            pod("web-2", Some(("ReplicaSet", "rs-1")), app, "1"),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        assert_eq!(
            names(&groups(&refs)),
            [
                vec!["web-0", "web-1", "web-2"],
                vec!["lonely"],
                vec!["bigger"],
                vec!["other-rs"],
                vec!["relabelled"],
                vec!["ds-a"],
                vec!["ds-b"],
            ]
        );
    }

    #[test]
    fn a_controller_has_at_most_ten_groups_the_rest_alone() {
        // As upstream's TestEquivalenceGroupSizeLimiting: 12 pods, labels l0..l10 with the last two
        // alike, all of one controller: the eleventh and twelfth are not grouped.
        let pods: Vec<Pod> = (0..12)
            .map(|i| pod(&format!("p{i}"), Some(("ReplicaSet", "rs")), json!({"l": format!("l{}", i.min(10))}), "1"))
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let grouped = groups(&refs);
        assert_eq!(grouped.len(), 12);
        assert!(grouped.iter().all(|g| g.len() == 1));
    }
}
