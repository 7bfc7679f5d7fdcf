//! Taints and tolerations as the scheduler uses them (upstream `pkg/scheduling/taints.go` and the
//! Kubernetes `Toleration.ToleratesTaint` rule it relies on).

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Taint effect names.
pub const NO_SCHEDULE: &str = "NoSchedule";
pub const PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
pub const NO_EXECUTE: &str = "NoExecute";

/// Taints that a node carries only while it starts (upstream `KnownEphemeralTaints`): ignored on
/// uninitialized managed nodes, together with the NodeClaim's startupTaints and any taint whose
/// key starts with [`EPHEMERAL_TAINT_PREFIX`].
pub const KNOWN_EPHEMERAL_TAINTS: &[(&str, Option<&str>, &str)] = &[
    ("node.kubernetes.io/not-ready", None, NO_SCHEDULE),
    ("node.kubernetes.io/unreachable", None, NO_SCHEDULE),
    ("node.cloudprovider.kubernetes.io/uninitialized", Some("true"), NO_SCHEDULE),
    (UNREGISTERED, None, NO_EXECUTE),
];

/// upstream `v1.UnregisteredNoExecuteTaint`'s key: a node joins with it (NoExecute), and Karpenter
/// removes it when it registers the node with its NodeClaim.
pub const UNREGISTERED: &str = "karpenter.sh/unregistered";

/// upstream `v1.DisruptedNoScheduleTaint`'s key: the disruption queue taints a node with it when
/// it starts a command and marks the node for deletion at the same time, so a node carrying it is
/// being disrupted (its pods are provisioned for elsewhere).
pub const DISRUPTED: &str = "karpenter.sh/disrupted";

/// Whether the node carries `karpenter.sh/disrupted:NoSchedule`.
pub fn is_disrupted(node: &k8s_openapi::api::core::v1::Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == DISRUPTED && t.effect == NO_SCHEDULE))
}

/// Node readiness-gate taints (`readiness.k8s.io/*`), ephemeral like the list above.
pub const EPHEMERAL_TAINT_PREFIX: &str = "readiness.k8s.io/";

/// Whether `taint` is one upstream treats as ephemeral on a node that is not initialized yet.
pub fn is_known_ephemeral(taint: &Taint) -> bool {
    taint.key.starts_with(EPHEMERAL_TAINT_PREFIX)
        || KNOWN_EPHEMERAL_TAINTS.iter().any(|(key, value, effect)| {
            taint.key == *key
                && taint.effect == *effect
                && value.is_none_or(|v| taint.value.as_deref().unwrap_or("") == v)
        })
}

/// Kubernetes `Toleration.ToleratesTaint`: the effect matches (an empty toleration effect matches
/// all), the key matches (an empty key with `Exists` matches every key), and the operator is
/// `Exists`, or `Equal` (the default) with the same value.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => {
            !key.is_empty() && toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// The first taint (in the order given) no toleration tolerates (upstream `Taints.ToleratesPod`
/// checks every taint, PreferNoSchedule included). `None` when all are tolerated.
pub fn first_untolerated<'a>(
    taints: impl IntoIterator<Item = &'a Taint>,
    tolerations: &[Toleration],
) -> Option<&'a Taint> {
    taints.into_iter().find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// The toleration the last relaxation step adds when some NodePool has a PreferNoSchedule taint
/// (upstream `preferences.go::toleratePreferNoScheduleTaints`), also implicitly given to daemon
/// pods when their overhead is computed.
pub fn prefer_no_schedule_toleration() -> Toleration {
    Toleration { operator: Some("Exists".into()), effect: Some(PREFER_NO_SCHEDULE.into()), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint { key: key.into(), value: value.map(Into::into), effect: effect.into(), time_added: None }
    }

    fn toleration(key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>) -> Toleration {
        Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_matching() {
        let t = taint("dedicated", Some("critical"), NO_SCHEDULE);
        assert!(tolerates(&toleration(Some("dedicated"), None, Some("critical"), None), &t));
        assert!(tolerates(&toleration(Some("dedicated"), Some("Equal"), Some("critical"), Some(NO_SCHEDULE)), &t));
        assert!(!tolerates(&toleration(Some("dedicated"), None, Some("other"), None), &t));
        assert!(!tolerates(&toleration(Some("dedicated"), None, Some("critical"), Some(NO_EXECUTE)), &t));
        assert!(tolerates(&toleration(Some("dedicated"), Some("Exists"), None, None), &t));
        assert!(tolerates(&toleration(None, Some("Exists"), None, None), &t));
        assert!(!tolerates(&toleration(None, Some("Equal"), None, None), &t));
        let p = taint("x", None, PREFER_NO_SCHEDULE);
        assert!(tolerates(&prefer_no_schedule_toleration(), &p));
        assert!(!tolerates(&prefer_no_schedule_toleration(), &t));
        assert_eq!(first_untolerated([&t, &p], &[]).map(|t| t.key.as_str()), Some("dedicated"));
    }

    #[test]
    fn ephemeral_taints() {
        assert!(is_known_ephemeral(&taint("node.kubernetes.io/not-ready", None, NO_SCHEDULE)));
        assert!(is_known_ephemeral(&taint("readiness.k8s.io/net", None, NO_EXECUTE)));
        assert!(is_known_ephemeral(&taint(
            "node.cloudprovider.kubernetes.io/uninitialized",
            Some("true"),
            NO_SCHEDULE
        )));
        assert!(!is_known_ephemeral(&taint("node.cloudprovider.kubernetes.io/uninitialized", Some("x"), NO_SCHEDULE)));
        assert!(!is_known_ephemeral(&taint("node.kubernetes.io/not-ready", None, NO_EXECUTE)));
    }
}
