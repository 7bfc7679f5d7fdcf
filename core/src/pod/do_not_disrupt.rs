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

#[cfg(test)]
mod tests {
    use super::*;

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
