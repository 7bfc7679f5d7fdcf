//! AL2023: a nodeadm `NodeConfig` (upstream `bootstrap/nodeadm.go`, the `node.eks.aws/v1alpha1`
//! API of `amazon-eks-ami/nodeadm`). The user's `spec.userData` (a MIME archive, a `NodeConfig`
//! YAML document or a shell script) comes first, Karpenter's `NodeConfig` last, so that nodeadm
//! merges Karpenter's settings over the user's.
//!
//! The YAML is written with sorted keys, as upstream's (Go marshals through JSON maps); quoting
//! can differ from Go's YAML writer, the document's meaning cannot.

use base64::Engine as _;
use serde_yaml::{Mapping, Value};

use super::mime::{self, Part, CONTENT_TYPE_NODE_CONFIG, CONTENT_TYPE_SHELL_SCRIPT};
use super::{go_durations, BootstrapError, Options};
use crate::api::ec2nodeclass::InstanceStorePolicy;

/// The MIME archive: the user's parts, then Karpenter's `NodeConfig`.
pub fn script(o: &Options<'_>, endpoint: &str) -> Result<String, BootstrapError> {
    let node_config = node_config_yaml(o, endpoint)?;
    let mut parts = custom_parts(o.custom_user_data)?;
    parts.push(Part::typed(CONTENT_TYPE_NODE_CONFIG, &node_config));
    Ok(mime::serialize(&parts))
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    let mut sorted = entries;
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut m = Mapping::new();
    for (k, v) in sorted {
        m.insert(Value::String(k.to_string()), v);
    }
    Value::Mapping(m)
}

/// JSON → YAML with every mapping's keys sorted.
fn sorted(v: serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => serde_yaml::to_value(n).unwrap_or(Value::Null),
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Array(a) => Value::Sequence(a.into_iter().map(sorted).collect()),
        serde_json::Value::Object(o) => {
            let mut entries: Vec<(String, serde_json::Value)> = o.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut m = Mapping::new();
            for (k, v) in entries {
                m.insert(Value::String(k), sorted(v));
            }
            Value::Mapping(m)
        }
    }
}

/// Karpenter's `NodeConfig`, after the comment line upstream writes.
pub fn node_config_yaml(o: &Options<'_>, endpoint: &str) -> Result<String, BootstrapError> {
    let cidr = o.cluster.cidr.as_deref().filter(|c| !c.is_empty()).ok_or(BootstrapError::CidrUnknown)?;
    let mut cluster = vec![
        ("name", Value::String(o.cluster.name.clone())),
        ("apiServerEndpoint", Value::String(endpoint.to_string())),
        ("cidr", Value::String(cidr.to_string())),
    ];
    if let Some(ca) = o.cluster.ca_bundle.as_deref().filter(|c| !c.is_empty()) {
        let engine = base64::engine::general_purpose::STANDARD;
        // Go's decoder skips line breaks: a bundle from `base64 ca.crt` (wrapped at 76) or a Helm
        // block value with its trailing newline is taken there, so here too.
        let ca: String = ca.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        let bytes = engine.decode(ca).map_err(|e| BootstrapError::CaBundle { why: e.to_string() })?;
        // nodeadm's field is bytes, which JSON (and so upstream's YAML) writes as base64.
        cluster.push(("certificateAuthority", Value::String(engine.encode(bytes))));
    }
    let local_storage = match o.instance_store_policy {
        Some(InstanceStorePolicy::Raid0) => map(vec![("strategy", Value::String("RAID0".into()))]),
        None => Value::Mapping(Mapping::new()),
    };
    let mut kubelet_config = o.kubelet.clone();
    kubelet_config.eviction_soft_grace_period = go_durations(&kubelet_config.eviction_soft_grace_period);
    let mut config = serde_json::to_value(&kubelet_config).unwrap_or_default();
    if let serde_json::Value::Object(m) = &mut config {
        m.insert("registerWithTaints".into(), serde_json::to_value(&o.taints).unwrap_or_default());
    }
    let mut kubelet = vec![("config", sorted(config))];
    if let Some(arg) = o.node_label_arg() {
        kubelet.push(("flags", Value::Sequence(vec![Value::String(arg)])));
    }
    let doc = map(vec![
        ("apiVersion", Value::String("node.eks.aws/v1alpha1".into())),
        ("kind", Value::String("NodeConfig".into())),
        ("metadata", Value::Mapping(Mapping::new())),
        (
            "spec",
            map(vec![
                ("cluster", map(cluster)),
                ("containerd", Value::Mapping(Mapping::new())),
                ("instance", map(vec![("localStorage", local_storage)])),
                ("kubelet", map(kubelet)),
            ]),
        ),
    ]);
    let yaml = serde_yaml::to_string(&doc).unwrap_or_default();
    Ok(format!("# Karpenter Generated NodeConfig\n{yaml}"))
}

/// upstream `parseUserData`: a MIME archive's parts (their content types kept), else one part
/// typed as a `NodeConfig` when the text is a YAML mapping, else as a shell script.
fn custom_parts(user_data: Option<&str>) -> Result<Vec<Part>, BootstrapError> {
    let Some(text) = user_data.filter(|t| !t.is_empty()) else {
        return Ok(Vec::new());
    };
    if mime::is_mime(text) {
        return Ok(mime::parse(text)?.into_iter().map(|p| Part::typed(p.content_type(), &p.content)).collect());
    }
    let is_mapping = matches!(serde_yaml::from_str::<Value>(text), Ok(Value::Mapping(_) | Value::Null));
    let content_type = if is_mapping { CONTENT_TYPE_NODE_CONFIG } else { CONTENT_TYPE_SHELL_SCRIPT };
    Ok(vec![Part::typed(content_type, text)])
}
