//! A snapshot: the state Karpenter looks at, redacted, as a Scenario file that
//! `kubectl karpenter … --from-file`, `simulate` and the playground load unchanged. Written by the
//! plugin's `snapshot` command and the controller's `/snapshot` endpoint alike.
//!
//! Multi-document YAML: a header comment, the Scenario (region, start time = when it was read),
//! then the objects kind by kind. What the engine does not read and may be sensitive is left out
//! (see [`redacted_header`]); what it reads is kept, so that the snapshot answers as the cluster does.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use super::Manifests;
use crate::labels::{is_read_annotation, READ_ANNOTATIONS, READ_ANNOTATION_DOMAINS};

/// Why a snapshot cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{0} legacy objects were not converted before the snapshot (a snapshot holds v1 objects only)")]
    LegacyObjects(usize),
    #[error("cannot serialise an object")]
    Serialize(#[source] serde_json::Error),
    #[error("cannot write YAML")]
    Yaml(#[source] serde_yaml::Error),
}

/// What the header says was redacted (keep in step with [`redact`]); the annotations kept are
/// core's list of those the engine reads.
fn redacted_header() -> String {
    let domains: Vec<String> = READ_ANNOTATION_DOMAINS.iter().map(|d| format!("{d}/")).collect();
    format!(
        "\
# Redacted: containers' (and init and ephemeral containers') env values and valueFrom (the names
#   are kept), envFrom, command and args; every annotation except those of {} (and their
#   subdomains) and the {} others the engine reads ({}); metadata.managedFields; nodes' status.images;
",
        domains.join(", "),
        READ_ANNOTATIONS.len(),
        READ_ANNOTATIONS.join(", "),
    )
}
const IMAGES_REDACTED: &str =
    "#   container image names and image IDs (replaced by `redacted`; --keep-images keeps them).\n";
const IMAGES_KEPT: &str = "#   (image names are kept: --keep-images).\n";
const KEPT: &str = "\
# Kept: names, namespaces, labels, ownerReferences, requests, selectors, affinities, tolerations,
#   node status (addresses included), NodePools and EC2NodeClasses whole (userData and tags too: they
#   decide drift). Secrets and ConfigMaps are never read.
";

/// A rendered snapshot.
pub struct WrittenSnapshot {
    pub text: String,
    /// Objects written, the Scenario not counted.
    pub count: usize,
    /// `2 NodePools, 1 EC2NodeClass, …`.
    pub summary: String,
}

/// The snapshot of `m`, read from `source` (`live`: a cluster, an API server's objects; else files).
/// `left_out`: the objects a live read could not load ([`super::load_from_api_server_skipping`]),
/// named in the header so that none goes missing unsaid.
pub fn write_snapshot(
    m: &Manifests,
    source: &str,
    live: bool,
    keep_images: bool,
    left_out: &[super::Skipped],
) -> Result<WrittenSnapshot, SnapshotError> {
    let mut groups: Vec<(&str, Vec<Value>)> = Vec::new();
    fn values<T: Serialize>(items: &[T]) -> Result<Vec<Value>, SnapshotError> {
        items.iter().map(|o| serde_json::to_value(o).map_err(SnapshotError::Serialize)).collect()
    }
    // The order of the objects: Karpenter's, then the nodes and what constrains them, then the
    // workloads and pods.
    groups.push(("NodePool", values(&m.nodepools)?));
    groups.push(("EC2NodeClass", values(&m.nodeclasses)?));
    groups.push(("NodeClaim", values(&m.nodeclaims)?));
    groups.push(("Node", values(&m.nodes)?));
    groups.push(("DaemonSet", values(&m.daemonsets)?));
    groups.push(("PodDisruptionBudget", values(&m.pdbs)?));
    groups.push(("StorageClass", values(&m.storageclasses)?));
    groups.push(("PersistentVolume", values(&m.pvs)?));
    groups.push(("PersistentVolumeClaim", values(&m.pvcs)?));
    groups.push(("CSINode", values(&m.csinodes)?));
    groups.push(("VolumeAttachment", values(&m.volumeattachments)?));
    groups.push(("PriorityClass", values(&m.priorityclasses)?));
    groups.push(("Namespace", values(&m.namespaces)?));
    groups.push(("Deployment", values(&m.deployments)?));
    groups.push(("ReplicaSet", values(&m.replicasets)?));
    groups.push(("StatefulSet", values(&m.statefulsets)?));
    groups.push(("Job", values(&m.jobs)?));
    groups.push(("Pod", values(&m.pods)?));
    groups.push(("Expectations", m.expectations.clone()));
    if !m.legacy.is_empty() {
        // Callers convert them first; a snapshot holds v1 objects only.
        return Err(SnapshotError::LegacyObjects(m.legacy.len()));
    }

    let mut scenario = match &m.scenario {
        Some(s) => serde_json::to_value(s).map_err(SnapshotError::Serialize)?,
        None => serde_json::json!({"apiVersion": "carpentry.dev/v1alpha1", "kind": "Scenario", "spec": {}}),
    };
    if let Some(steps) = scenario.pointer_mut("/spec/steps").and_then(Value::as_array_mut) {
        for step in steps {
            if let Some(objects) = step.get_mut("apply").and_then(Value::as_array_mut) {
                for o in objects {
                    redact(o, keep_images);
                }
            }
        }
    }

    let mut body = String::new();
    body.push_str(&yaml(&scenario)?);
    let mut count = 0;
    for (kind, items) in &mut groups {
        for item in items.iter_mut() {
            if *kind != "Expectations" {
                redact(item, keep_images);
            }
            body.push_str("---\n");
            body.push_str(&yaml(item)?);
            count += 1;
        }
    }
    let summary = groups
        .iter()
        .filter(|(_, items)| !items.is_empty())
        .map(|(kind, items)| format!("{} {}", items.len(), plural(kind, items.len())))
        .collect::<Vec<_>>()
        .join(", ");

    let spec = &scenario["spec"];
    let when = spec["startTime"].as_str();
    let mut header = String::new();
    header
        .push_str("# A carpentry snapshot (kubectl karpenter snapshot): the cluster state Karpenter looks at, as a\n");
    header
        .push_str("# scenario for `kubectl karpenter explain|whatif --from-file`, `simulate -f` and the playground.\n");
    if live {
        let _ = writeln!(header, "# Taken {} from {source}.", when.unwrap_or("at an unknown time"));
    } else {
        let _ = writeln!(
            header,
            "# Taken from {source}{}.",
            when.map(|w| format!(" (the state at {w})")).unwrap_or_default()
        );
    }
    let _ = writeln!(
        header,
        "# Region {}. {count} objects{}.",
        spec["region"].as_str().unwrap_or(super::scenario::DEFAULT_REGION),
        if summary.is_empty() { String::new() } else { format!(": {summary}") }
    );
    if !left_out.is_empty() {
        let n = left_out.len();
        let _ = writeln!(
            header,
            "# Left out: {n} object{} of the source that do{} not load:",
            if n == 1 { "" } else { "s" },
            if n == 1 { "es" } else { "" }
        );
        for s in left_out {
            let object = s.object.as_ref().map_or_else(|| format!("document {}", s.document), ToString::to_string);
            let _ = writeln!(header, "#   {object}: {}", s.summary().replace('\n', " "));
        }
    }
    header.push_str(&redacted_header());
    header.push_str(if keep_images { IMAGES_KEPT } else { IMAGES_REDACTED });
    header.push_str(KEPT);
    header.push_str("---\n");
    Ok(WrittenSnapshot { text: header + &body, count, summary })
}

fn plural(kind: &str, n: usize) -> String {
    match (kind, n) {
        (_, 1) | ("Expectations", _) => kind.to_string(),
        (k, _) if k.ends_with("Class") => format!("{k}es"),
        (k, _) => format!("{k}s"),
    }
}

fn yaml(value: &Value) -> Result<String, SnapshotError> {
    serde_yaml::to_string(value).map_err(SnapshotError::Yaml)
}

/// Redacts one object (any kind) in place.
fn redact(object: &mut Value, keep_images: bool) {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    redact_metadata(object.get_mut("metadata"));
    match kind.as_str() {
        "Pod" => {
            if let Some(spec) = object.get_mut("spec") {
                redact_pod_spec(spec, keep_images);
            }
            if !keep_images {
                if let Some(status) = object.get_mut("status") {
                    for list in ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"] {
                        for c in status.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                            for field in ["image", "imageID"] {
                                if let Some(v) = c.get_mut(field) {
                                    *v = Value::String("redacted".into());
                                }
                            }
                        }
                    }
                }
            }
        }
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" => {
            if let Some(template) = object.pointer_mut("/spec/template") {
                redact_metadata(template.get_mut("metadata"));
                if let Some(spec) = template.get_mut("spec") {
                    redact_pod_spec(spec, keep_images);
                }
            }
        }
        "Node" => {
            if let Some(Value::Object(status)) = object.get_mut("status") {
                status.remove("images");
            }
        }
        _ => {}
    }
}

fn redact_metadata(metadata: Option<&mut Value>) {
    let Some(Value::Object(meta)) = metadata else { return };
    meta.remove("managedFields");
    if let Some(Value::Object(annotations)) = meta.get_mut("annotations") {
        annotations.retain(|k, _| is_read_annotation(k));
        if annotations.is_empty() {
            meta.remove("annotations");
        }
    }
}

fn redact_pod_spec(spec: &mut Value, keep_images: bool) {
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else { continue };
        for c in containers {
            let Value::Object(c) = c else { continue };
            for field in ["envFrom", "command", "args"] {
                c.remove(field);
            }
            if let Some(Value::Array(env)) = c.get_mut("env") {
                for var in env {
                    if let Value::Object(var) = var {
                        var.retain(|k, _| k == "name");
                    }
                }
            }
            if !keep_images {
                if let Some(image) = c.get_mut("image") {
                    *image = Value::String("redacted".into());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pods_and_templates_are_redacted() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "managedFields": [{}], "annotations": {"a.io/x": "1", "karpenter.sh/do-not-disrupt": "true"}},
            "spec": {"containers": [{"name": "c", "image": "secret.io/app:1", "command": ["x"], "args": ["--pw=1"],
                "env": [{"name": "A", "value": "v"}, {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                "envFrom": [{"secretRef": {"name": "s"}}]}]},
            "status": {"containerStatuses": [{"name": "c", "image": "secret.io/app:1", "imageID": "sha"}]}
        });
        redact(&mut pod, false);
        assert_eq!(pod["metadata"], json!({"name": "p", "annotations": {"karpenter.sh/do-not-disrupt": "true"}}));
        assert_eq!(
            pod["spec"]["containers"][0],
            json!({"name": "c", "image": "redacted", "env": [{"name": "A"}, {"name": "B"}]})
        );
        assert_eq!(pod["status"]["containerStatuses"][0]["imageID"], "redacted");

        let mut ds = json!({"kind": "DaemonSet", "metadata": {"name": "d", "annotations": {"x.io/y": "z"}},
            "spec": {"template": {"metadata": {"annotations": {"b.io/c": "d"}}, "spec": {"initContainers": [{"name": "i", "image": "img"}]}}}});
        redact(&mut ds, true);
        assert!(ds["metadata"].get("annotations").is_none());
        assert!(ds["spec"]["template"]["metadata"].get("annotations").is_none());
        assert_eq!(ds["spec"]["template"]["spec"]["initContainers"][0]["image"], "img");
    }

    #[test]
    fn plurals() {
        assert_eq!(plural("NodePool", 2), "NodePools");
        assert_eq!(plural("EC2NodeClass", 2), "EC2NodeClasses");
        assert_eq!(plural("StorageClass", 1), "StorageClass");
    }
}
