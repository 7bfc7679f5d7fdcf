//! Nothing a user writes is dropped on a read-modify-write: for each CRD the controller ships
//! (`controller/deploy/chart/crds/`, upstream's own), this test builds an object that sets **every**
//! property path of the schema, reads it into core's serde type (which denies unknown fields, so
//! a path the type lacks fails here by name), writes it back, and checks that every value it set
//! comes back unchanged.
//!
//! Values are made from the schema alone: the first `enum` value, RFC 3339 for `date-time`, and
//! for a string with a `pattern` the first of a list of sample values that the pattern accepts
//! (checked with a regular expression, so a changed pattern fails loudly rather than feeding the
//! type a value the API server would refuse).

use std::collections::BTreeMap;
use std::path::PathBuf;

use carpentry_core::api::{EC2NodeClass, NodeClaim, NodePool};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

/// Sample strings for patterned fields, most specific first.
const PATTERN_SAMPLES: &[&str] = &[
    "Ready",
    "example.com/key",
    "1h30m",
    "10m",
    "10%",
    "@daily",
    "20Gi",
    "1",
    "ami-0abc123",
    "cr-0abc123",
    "pg-0abc123",
    "sg-0abc123",
    "subnet-0abc123",
    "123456789012",
    "a",
];

/// Map keys: a label-like key (labels, annotations, tags, resource names all accept it).
const MAP_KEY: &str = "example.com/key";

fn crd_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/chart/crds")
}

/// The storage version's `openAPIV3Schema` of one committed CRD file.
fn schema(file: &str) -> Value {
    let path = crd_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let crd: Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let versions = crd["spec"]["versions"].as_array().expect("spec.versions");
    let storage = versions.iter().find(|v| v["storage"] == json!(true)).expect("a storage version");
    storage["schema"]["openAPIV3Schema"].clone()
}

/// A value for `node` at `path` that sets every property below it.
fn generate(node: &Value, path: &str) -> Value {
    if let Some(properties) = node["properties"].as_object() {
        let mut object = Map::new();
        for (name, child) in properties {
            object.insert(name.clone(), generate(child, &format!("{path}.{name}")));
        }
        return Value::Object(object);
    }
    if let Some(values) = node["additionalProperties"].as_object() {
        let values = Value::Object(values.clone());
        return json!({ MAP_KEY: generate(&values, &format!("{path}[{MAP_KEY}]")) });
    }
    if node["x-kubernetes-int-or-string"] == json!(true) {
        return json!("1");
    }
    if let Some(first) = node["enum"].as_array().and_then(|values| values.first()) {
        return first.clone();
    }
    match node["type"].as_str() {
        Some("array") => json!([generate(&node["items"], &format!("{path}[0]"))]),
        Some("boolean") => json!(true),
        Some("integer") | Some("number") => json!(1),
        Some("string") if node["format"] == json!("date-time") => json!("2026-01-02T03:04:05Z"),
        Some("string") => match node["pattern"].as_str() {
            Some(pattern) => json!(sample_for(pattern, path)),
            None => json!("x"),
        },
        Some("object") if path.is_empty() || path == ".metadata" => json!({}),
        other => panic!("{path}: a schema node of type {other:?} this test cannot fill: {node}"),
    }
}

/// The first sample the pattern accepts (Go's RE2 patterns are a subset of the regex crate's).
fn sample_for(pattern: &str, path: &str) -> &'static str {
    let re = regex::Regex::new(pattern).unwrap_or_else(|e| panic!("{path}: pattern {pattern:?}: {e}"));
    PATTERN_SAMPLES
        .iter()
        .find(|sample| re.find(sample).is_some_and(|m| m.start() == 0 && m.end() == sample.len()))
        .unwrap_or_else(|| panic!("{path}: no sample value matches the pattern {pattern:?}; add one"))
}

/// Every leaf of `value` as (JSON path, value).
fn leaves(value: &Value, path: String, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                leaves(v, format!("{path}.{k}"), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                leaves(v, format!("{path}[{i}]"), out);
            }
        }
        other => {
            out.insert(path, other.clone());
        }
    }
}

fn leaf_count(value: &Value) -> usize {
    let mut all = BTreeMap::new();
    leaves(value, String::new(), &mut all);
    all.len()
}

/// The leaves of `sent` that `written` does not hold with the same value (values `written` adds,
/// such as defaults, are fine).
fn lost_values(sent: &Value, written: &Value) -> Vec<String> {
    let (mut sent_leaves, mut got) = (BTreeMap::new(), BTreeMap::new());
    leaves(sent, String::new(), &mut sent_leaves);
    leaves(written, String::new(), &mut got);
    sent_leaves
        .iter()
        .filter(|(path, value)| got.get(*path) != Some(value))
        .map(|(path, value)| {
            let back = got.get(path).map_or_else(|| "nothing".to_string(), Value::to_string);
            format!("{path}: sent {value}, got back {back}")
        })
        .collect()
}

/// Builds the full object for `file`, reads it as `T`, writes it back and compares.
fn round_trip<T: DeserializeOwned + Serialize>(file: &str, api_version: &str, kind: &str) -> usize {
    let mut object = generate(&schema(file), "");
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    object["metadata"] = json!({
        "name": "every-field",
        "uid": "00000000-0000-0000-0000-000000000001",
        "resourceVersion": "42",
        "generation": 3,
        "labels": { MAP_KEY: "a" },
        "annotations": { MAP_KEY: "x" },
        "finalizers": ["karpenter.sh/termination"],
    });
    let typed: T = serde_path_to_error::deserialize(&object).unwrap_or_else(|e| {
        panic!("{file}: core's {kind} type cannot read a field of the schema: {} at {}", e.inner(), e.path())
    });
    let written = serde_json::to_value(&typed).expect("serialize");
    let lost = lost_values(&object, &written);
    let count = leaf_count(&object);
    assert!(
        lost.is_empty(),
        "{file}: {} of {count} values did not survive a read-write through {kind}:\n{}",
        lost.len(),
        lost.join("\n")
    );
    count
}

#[test]
fn nodepool_carries_every_schema_path() {
    let paths = round_trip::<NodePool>("karpenter.sh_nodepools.yaml", "karpenter.sh/v1", "NodePool");
    assert!(paths > 30, "only {paths} paths: is the schema walk reaching everything?");
}

#[test]
fn nodeclaim_carries_every_schema_path() {
    let paths = round_trip::<NodeClaim>("karpenter.sh_nodeclaims.yaml", "karpenter.sh/v1", "NodeClaim");
    assert!(paths > 30, "only {paths} paths: is the schema walk reaching everything?");
}

#[test]
fn ec2nodeclass_carries_every_schema_path() {
    let paths =
        round_trip::<EC2NodeClass>("karpenter.k8s.aws_ec2nodeclasses.yaml", "karpenter.k8s.aws/v1", "EC2NodeClass");
    assert!(paths > 80, "only {paths} paths: is the schema walk reaching everything?");
}

/// The comparison itself can fail: a type that drops or rewrites a value is caught.
#[test]
fn a_dropped_or_changed_value_is_reported() {
    let sent = json!({ "kept": "a", "dropped": "b", "list": [{ "changed": "10m" }] });
    let written = json!({ "kept": "a", "list": [{ "changed": "600s" }], "defaulted": 1 });
    assert_eq!(
        lost_values(&sent, &written),
        [".dropped: sent \"b\", got back nothing", ".list[0].changed: sent \"10m\", got back \"600s\""]
    );
}
