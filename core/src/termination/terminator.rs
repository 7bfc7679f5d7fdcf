//! upstream `terminator.go` `Drain`: a node's pods are evicted in four tiers (non-critical pods,
//! non-critical DaemonSet pods, critical pods, critical DaemonSet pods), only the first tier that
//! has pods per pass, so that DaemonSets (logging, networking) outlive the workloads they serve.
//! Pods that tolerate `karpenter.sh/disrupted:NoSchedule`, mirror pods and finished pods are not
//! drained. A pod under an active `karpenter.sh/do-not-disrupt` waits, until the NodeClaim's
//! `terminationGracePeriod` has elapsed, when every remaining pod is deleted regardless.

use k8s_openapi::api::core::v1::{Pod, Taint, Toleration};
use serde::Serialize;

use crate::pod::do_not_disrupt::{pod_protection, Protection};
use crate::pod::PodRef;
use crate::scheduling::taints::{self, DISRUPTED};

/// `karpenter.sh/disrupted:NoSchedule`: no new pod lands on a node being disrupted or terminated.
pub fn disrupted_taint() -> Taint {
    Taint { key: DISRUPTED.into(), value: None, effect: "NoSchedule".into(), time_added: None }
}

/// The drain tiers, in eviction order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Tier {
    NonCritical,
    NonCriticalDaemonSet,
    Critical,
    CriticalDaemonSet,
}

impl Tier {
    fn of(pod: &Pod) -> Tier {
        let daemon = crate::pod::daemonset_owner(pod).is_some();
        match (critical(pod), daemon) {
            (false, false) => Tier::NonCritical,
            (false, true) => Tier::NonCriticalDaemonSet,
            (true, false) => Tier::Critical,
            (true, true) => Tier::CriticalDaemonSet,
        }
    }
}

/// What one drain pass does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DrainPass {
    /// The tier evicted in this pass.
    pub tier: Option<Tier>,
    /// Evict these now (a PodDisruptionBudget may still refuse some).
    pub evict: Vec<PodRef>,
    /// In the tier, held by `karpenter.sh/do-not-disrupt` until the grace period ends.
    pub held: Vec<PodRef>,
    /// The grace period has elapsed: delete these regardless of budgets and annotations.
    pub delete: Vec<PodRef>,
    /// Pods already terminating (evicted or deleted): the node waits for them.
    pub terminating: usize,
}

impl DrainPass {
    /// Nothing left on the node to drain or wait for: the instance can be terminated.
    pub fn drained(&self) -> bool {
        self.evict.is_empty() && self.held.is_empty() && self.delete.is_empty() && self.terminating == 0
    }
}

/// Upstream's critical pods: priorityClassName system-cluster-critical or system-node-critical.
fn critical(p: &Pod) -> bool {
    matches!(
        p.spec.as_ref().and_then(|s| s.priority_class_name.as_deref()),
        Some("system-cluster-critical" | "system-node-critical")
    )
}

pub(super) fn tolerates_disrupted(p: &Pod) -> bool {
    let tolerations: &[Toleration] = p.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or(&[]);
    let taint = disrupted_taint();
    tolerations.iter().any(|t| taints::tolerates(t, &taint))
}

pub(super) fn is_mirror(p: &Pod) -> bool {
    p.metadata.owner_references.iter().flatten().any(|o| o.kind == "Node" && o.api_version == "v1")
}

/// upstream's eviction queue (`terminator/eviction.go`, v1.14.1: `evictionQueueBaseDelay`,
/// `evictionQueueMaxDelay`): a pod whose eviction was refused (a PodDisruptionBudget's 429) is
/// tried again after 100 ms, doubling with each refusal, at most 10 s.
const EVICTION_BACKOFF_BASE_MILLIS: u64 = 100;
const EVICTION_BACKOFF_MAX_MILLIS: u64 = 10_000;

/// How long to wait before evicting a refused pod again, after a wait of `previous` (none: the
/// first refusal), in milliseconds.
pub fn eviction_backoff_millis(previous: Option<u64>) -> u64 {
    previous.map_or(EVICTION_BACKOFF_BASE_MILLIS, |p| p.saturating_mul(2).min(EVICTION_BACKOFF_MAX_MILLIS))
}

/// One drain pass over `node` at `now` (epoch seconds); `grace_elapsed` once the NodeClaim's
/// `terminationGracePeriod` has run out. `pods` may hold every pod of the cluster.
pub fn drain(node: &str, pods: &[Pod], now: i64, grace_elapsed: bool) -> DrainPass {
    // upstream `IsWaitingEviction`: what the node still waits for.
    let waiting = pods.iter().filter(|p| {
        p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
            && crate::pod::is_active(p)
            && !tolerates_disrupted(p)
            && !is_mirror(p)
    });
    let mut pass = DrainPass::default();
    let mut evictable = Vec::new();
    for p in waiting {
        // upstream `IsEvictable` also wants the pod not terminating already.
        if p.metadata.deletion_timestamp.is_some() {
            pass.terminating += 1;
        } else {
            evictable.push(p);
        }
    }
    if grace_elapsed {
        pass.delete = evictable.iter().map(|p| PodRef::of(p)).collect();
        return pass;
    }
    let Some(tier) = evictable.iter().map(|p| Tier::of(p)).min() else { return pass };
    pass.tier = Some(tier);
    for p in evictable.into_iter().filter(|p| Tier::of(p) == tier) {
        match pod_protection(p, now) {
            Protection::None => pass.evict.push(PodRef::of(p)),
            _ => pass.held.push(PodRef::of(p)),
        }
    }
    pass
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_eviction_backs_off_from_100_ms_doubling_to_10_s() {
        let mut waits = vec![eviction_backoff_millis(None)];
        for _ in 0..8 {
            waits.push(eviction_backoff_millis(waits.last().copied()));
        }
        assert_eq!(waits, [100, 200, 400, 800, 1_600, 3_200, 6_400, 10_000, 10_000]);
    }

    fn pod(name: &str, node: &str, extra: serde_json::Value) -> Pod {
        let mut v = serde_json::json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": "Running"},
        });
        json_patch(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    fn json_patch(target: &mut serde_json::Value, patch: serde_json::Value) {
        match (target, patch) {
            (serde_json::Value::Object(t), serde_json::Value::Object(p)) => {
                for (k, v) in p {
                    json_patch(t.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (t, p) => *t = p,
        }
    }

    fn names(list: &[PodRef]) -> Vec<&str> {
        list.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn tiers_drain_workloads_before_daemonsets_and_critical_pods() {
        let ds = serde_json::json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "logs", "uid": "u"}]}});
        let critical = serde_json::json!({"spec": {"priorityClassName": "system-node-critical"}});
        let mut pods = vec![
            pod("logs-1", "n1", ds.clone()),
            pod("dns", "n1", critical),
            pod("web", "n1", serde_json::json!({})),
            pod("elsewhere", "n2", serde_json::json!({})),
        ];
        let pass = drain("n1", &pods, 0, false);
        assert_eq!((pass.tier, names(&pass.evict)), (Some(Tier::NonCritical), vec!["web"]));
        pods.retain(|p| p.metadata.name.as_deref() != Some("web"));
        let pass = drain("n1", &pods, 0, false);
        assert_eq!((pass.tier, names(&pass.evict)), (Some(Tier::NonCriticalDaemonSet), vec!["logs-1"]));
        pods.retain(|p| p.metadata.name.as_deref() != Some("logs-1"));
        assert_eq!(drain("n1", &pods, 0, false).tier, Some(Tier::Critical));
        pods.retain(|p| p.metadata.name.as_deref() != Some("dns"));
        assert!(drain("n1", &pods, 0, false).drained());
    }

    #[test]
    fn do_not_disrupt_holds_until_the_grace_period_and_terminating_pods_are_waited_for() {
        let held = serde_json::json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}});
        let terminating = serde_json::json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}});
        let tolerant =
            serde_json::json!({"spec": {"tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]}});
        let pods = vec![
            pod("batch", "n1", held),
            pod("going", "n1", terminating),
            pod("tolerant", "n1", tolerant),
            pod("done", "n1", serde_json::json!({"status": {"phase": "Succeeded"}})),
        ];
        let pass = drain("n1", &pods, 0, false);
        assert_eq!((names(&pass.evict), names(&pass.held), pass.terminating), (vec![], vec!["batch"], 1));
        assert!(!pass.drained());
        let pass = drain("n1", &pods, 0, true);
        assert_eq!(names(&pass.delete), vec!["batch"]);
        assert!(!pass.drained(), "the terminating pod is still waited for");
    }
}
