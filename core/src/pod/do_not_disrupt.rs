//! `karpenter.sh/do-not-disrupt` (upstream `pkg/utils/pod/scheduling.go::IsDisruptable`,
//! `pkg/utils/node`, v1.14.1): on a pod, `"true"` or a positive Go duration
//! measured from `status.startTime` (without a startTime the protection counts as active); an
//! invalid value is ignored. On a node, exactly `"true"`.

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::labels::DO_NOT_DISRUPT;

/// Whether a pod's protection is in force at `now` (seconds since the epoch), and until when
/// (`None`: indefinitely).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    None,
    Indefinite,
    Until(i64),
}

/// The pod's protection at `now` (seconds since the epoch).
pub fn pod_protection(pod: &Pod, now: i64) -> Protection {
    let Some(value) = pod.metadata.annotations.as_ref().and_then(|a| a.get(DO_NOT_DISRUPT)) else {
        return Protection::None;
    };
    if value == "true" {
        return Protection::Indefinite;
    }
    let Ok(nanos) = crate::api::duration::parse_go_duration(value) else { return Protection::None };
    if nanos <= 0 {
        return Protection::None;
    }
    let Some(start) = pod.status.as_ref().and_then(|s| s.start_time.as_ref()) else {
        return Protection::Indefinite;
    };
    let until = start.0.as_second() + nanos / 1_000_000_000;
    if now < until {
        Protection::Until(until)
    } else {
        Protection::None
    }
}

/// The node annotation: exactly `"true"`.
pub fn node_protected(node: &Node) -> bool {
    node.metadata.annotations.as_ref().and_then(|a| a.get(DO_NOT_DISRUPT)).is_some_and(|v| v == "true")
}

/// A `karpenter.sh/do-not-disrupt` value that protects nothing, by the look of it by mistake:
/// upstream ignores it without a word, so `"True"` or `"yes"` leaves the pod (or node) as
/// disruptable as no annotation. `"false"` is taken as meant, and so is a duration of zero or less.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IgnoredValue {
    /// On a pod: neither `"true"` nor a Go duration.
    Pod { value: String },
    /// On a node: not exactly `"true"`.
    Node { value: String },
}

impl IgnoredValue {
    /// The event reason.
    pub const REASON: &'static str = "InvalidAnnotation";
}

impl std::fmt::Display for IgnoredValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IgnoredValue::Pod { value } => write!(
                f,
                "{DO_NOT_DISRUPT}: {value:?} is neither \"true\" nor a duration (such as \"1h\"): it is ignored, \
                 and this pod does not keep its node from being disrupted"
            ),
            IgnoredValue::Node { value } => {
                write!(f, "{DO_NOT_DISRUPT}: {value:?} is not \"true\": it is ignored, and this node may be disrupted")
            }
        }
    }
}

/// The pod's annotation, if its value is ignored by mistake.
pub fn pod_value_ignored(pod: &Pod) -> Option<IgnoredValue> {
    let value = pod.metadata.annotations.as_ref()?.get(DO_NOT_DISRUPT)?;
    let meant = value == "true" || value == "false" || crate::api::duration::parse_go_duration(value).is_ok();
    (!meant).then(|| IgnoredValue::Pod { value: value.clone() })
}

/// The node's annotation, if its value is ignored by mistake.
pub fn node_value_ignored(node: &Node) -> Option<IgnoredValue> {
    let value = node.metadata.annotations.as_ref()?.get(DO_NOT_DISRUPT)?;
    (value != "true" && value != "false").then(|| IgnoredValue::Node { value: value.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_that_protects_nothing_by_mistake_is_named() {
        let ignored = |value: &str| pod_value_ignored(&pod(value, None));
        for meant in ["true", "false", "1h", "0s", "-5m"] {
            assert_eq!(ignored(meant), None, "{meant}");
        }
        assert_eq!(ignored("True"), Some(IgnoredValue::Pod { value: "True".into() }));
        assert_eq!(
            ignored("yes").unwrap().to_string(),
            "karpenter.sh/do-not-disrupt: \"yes\" is neither \"true\" nor a duration (such as \"1h\"): it is ignored, \
             and this pod does not keep its node from being disrupted"
        );
        let node = |value: &str| -> Node {
            serde_json::from_value(
                serde_json::json!({"metadata": {"name": "n", "annotations": {DO_NOT_DISRUPT: value}}}),
            )
            .unwrap()
        };
        assert_eq!(node_value_ignored(&node("true")), None);
        assert_eq!(node_value_ignored(&node("1h")), Some(IgnoredValue::Node { value: "1h".into() }));
    }

    fn pod(value: &str, start: Option<&str>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "annotations": {DO_NOT_DISRUPT: value}},
            "status": start.map(|s| serde_json::json!({"startTime": s})),
        }))
        .unwrap()
    }

    #[test]
    fn durations_run_from_the_start_time() {
        let t0 = crate::api::time::parse_time("2026-12-01T10:00:00Z").unwrap();
        assert_eq!(pod_protection(&pod("true", None), t0), Protection::Indefinite);
        let p = pod("5m", Some("2026-12-01T10:00:00Z"));
        assert_eq!(pod_protection(&p, t0 + 60), Protection::Until(t0 + 300));
        assert_eq!(pod_protection(&p, t0 + 300), Protection::None);
        assert_eq!(pod_protection(&pod("5m", None), t0), Protection::Indefinite);
        assert_eq!(pod_protection(&pod("soon", None), t0), Protection::None, "invalid values are ignored");
        assert_eq!(pod_protection(&pod("false", None), t0), Protection::None);
    }
}
