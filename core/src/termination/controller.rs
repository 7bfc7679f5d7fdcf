//! The NodeClaim conditions node termination writes (upstream `node/termination/controller.go`:
//! `awaitDrain`, `awaitVolumeDetachment`, `awaitInstanceTermination`): `Drained` is `Unknown`
//! (reason `Draining`) from the first drain pass and `True` once the pods are gone and it has been
//! draining for at least [`MIN_DRAIN_SECONDS`] (pods kube-scheduler bound before it saw the taint
//! are drained too); `VolumesDetached` is `Unknown` (`AwaitingVolumeDetachment`) while
//! [`pending_volume_attachments`] holds the instance, `True` once none does, and `False`
//! (`TerminationGracePeriodElapsed`) when the grace period ran out first; `InstanceTerminating` is
//! `True` once the instance's deletion has been asked for.

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;

use super::terminator::{drain, is_mirror, tolerates_disrupted, DrainPass};
use crate::api::nodeclaim::NodeClaim;
use crate::api::time::{format_time, parse_time};
use crate::api::Condition;
use crate::labels::TERMINATION_FINALIZER;
use crate::scheduling::taints::is_disrupted;
use crate::workqueue::RateLimiter;

/// upstream `MinDrainTime`.
pub const MIN_DRAIN_SECONDS: i64 = 5;
/// While the cloud says an instance is still terminating, its deletion is asked again this often
/// (upstream `awaitInstanceTermination` and the NodeClaim finalizer requeue after 5 s); the
/// Node's and the NodeClaim's finalizers stay until it answers that the instance is gone.
pub const INSTANCE_TERMINATION_RECHECK_SECONDS: i64 = 5;
/// upstream `node.termination`'s `MaxConcurrentReconciles` on one CPU (its `minReconciles`, which
/// `LinearScaleReconciles` raises with more: pkg/controllers/node/termination/controller.go,
/// v1.14.1 `Register`).
pub const MAX_CONCURRENT_RECONCILES: usize = 100;
/// `node.termination`'s wait after failed reconciles of one Node (its `Register`: 100 ms doubling
/// to 10 s; the queue-wide bucket is not modelled, see [`crate::workqueue`]).
pub const RATE_LIMITER: RateLimiter = RateLimiter { base_millis: 100, max_millis: 10_000 };
/// While a node drains, or its instance waits for volume attachments, or its taint is being
/// written, it is looked at again this often (upstream `awaitDrain` and `awaitVolumeDetachment`
/// requeue after a second).
pub const DRAIN_RECHECK_SECONDS: i64 = 1;
/// upstream `IsStuckTerminating`: a pod still terminating this long after its deletion timestamp
/// (which already includes its grace period) is not waited for.
const STUCK_TERMINATING_SECONDS: i64 = 60;
/// upstream `ConditionTypeDrained`.
pub const DRAINED: &str = "Drained";
/// upstream `ConditionTypeVolumesDetached`.
pub const VOLUMES_DETACHED: &str = "VolumesDetached";
/// upstream `ConditionTypeInstanceTerminating`.
pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";

/// Where the node's volumes are, once it is drained (upstream `awaitVolumeDetachment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Volumes {
    /// No volume attachment of a drained pod is left on the node.
    Detached,
    /// Some are: the instance waits (the attach-detach controller deletes them).
    Awaiting,
    /// Some are, but the NodeClaim's `terminationGracePeriod` has elapsed: the instance goes.
    GracePeriodElapsed,
}

impl Volumes {
    /// From what [`pending_volume_attachments`] found and whether the grace period has elapsed.
    pub fn of(pending: usize, grace_elapsed: bool) -> Volumes {
        match (pending, grace_elapsed) {
            (0, _) => Volumes::Detached,
            (_, false) => Volumes::Awaiting,
            (_, true) => Volumes::GracePeriodElapsed,
        }
    }

    /// Whether the instance must wait.
    pub fn hold_instance(self) -> bool {
        self == Volumes::Awaiting
    }
}

/// Where a NodeClaim's termination has got to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// A drain pass ran and pods remain (or the minimum drain time has not passed).
    Draining,
    /// Drained; the volumes are as given.
    Drained(Volumes),
    /// The instance's deletion was asked for: after a drain (with the volumes as given), or
    /// for a NodeClaim without a Node (`None`: nothing was drained, and those conditions are left
    /// as they are, as upstream's NodeClaim finalizer does).
    InstanceTerminating(Option<Volumes>),
}

/// The volume attachments on `node` that hold its instance (upstream `pendingVolumeAttachments`
/// and `filterVolumeAttachments`): every attachment of a persistent volume on the node, except
/// those of volumes a pod that is not drained still uses (a pod that tolerates the disrupted
/// taint, a mirror pod, a pod stuck terminating), found through the pod's claims (ephemeral
/// volumes' claims are named `<pod>-<volume>`). `pods` and `claims` may hold the whole cluster's.
pub fn pending_volume_attachments<'a>(
    node: &str,
    attachments: &'a [VolumeAttachment],
    pods: &[Pod],
    claims: &[PersistentVolumeClaim],
    now: i64,
) -> Vec<&'a VolumeAttachment> {
    let on_node: Vec<&VolumeAttachment> = attachments.iter().filter(|a| a.spec.node_name == node).collect();
    if on_node.is_empty() {
        return on_node;
    }
    let not_drained = pods.iter().filter(|p| {
        p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
            && (tolerates_disrupted(p) || is_mirror(p) || stuck_terminating(p, now))
    });
    let mut kept_volumes: Vec<&str> = Vec::new();
    for p in not_drained {
        let namespace = p.metadata.namespace.as_deref().unwrap_or("default");
        let pod_name = p.metadata.name.as_deref().unwrap_or_default();
        for v in p.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let claim_name = match (&v.persistent_volume_claim, &v.ephemeral) {
                (Some(c), _) => c.claim_name.clone(),
                (None, Some(_)) => format!("{pod_name}-{}", v.name),
                (None, None) => continue,
            };
            let claim = claims.iter().find(|c| {
                c.metadata.name.as_deref() == Some(claim_name.as_str())
                    && c.metadata.namespace.as_deref().unwrap_or("default") == namespace
            });
            if let Some(c) = claim {
                kept_volumes.push(c.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or_default());
            }
        }
    }
    on_node
        .into_iter()
        .filter(|a| a.spec.source.persistent_volume_name.as_deref().is_some_and(|pv| !kept_volumes.contains(&pv)))
        .collect()
}

/// upstream `IsStuckTerminating`.
fn stuck_terminating(p: &Pod, now: i64) -> bool {
    p.metadata.deletion_timestamp.as_ref().is_some_and(|t| now - t.0.as_second() > STUCK_TERMINATING_SECONDS)
}

fn condition(nc: &NodeClaim, type_: &str) -> Option<Condition> {
    nc.status.as_ref().and_then(|s| crate::api::find_condition(&s.conditions, type_)).cloned()
}

/// Whether the NodeClaim's `Drained` condition is `True`.
pub fn is_drained(nc: &NodeClaim) -> bool {
    condition(nc, DRAINED).is_some_and(|c| c.is_true())
}

/// Whether the drain is done (upstream `awaitDrain`): the pods are gone (`pods_drained`) and
/// `Drained` has been `Unknown` for at least the minimum drain time (or is `True` already).
pub fn drain_done(nc: &NodeClaim, pods_drained: bool, now: i64) -> bool {
    let Some(c) = condition(nc, DRAINED) else { return false };
    if c.is_true() {
        return true;
    }
    let since = c.last_transition_time.as_deref().and_then(parse_time);
    pods_drained && since.is_some_and(|t| now - t >= MIN_DRAIN_SECONDS)
}

/// The NodeClaim's conditions as they become at `stage`, or `None` when nothing changes. Earlier
/// stages' conditions are set too (a restart may skip a pass).
pub fn conditions(nc: &NodeClaim, stage: Stage, now: i64) -> Option<Vec<Condition>> {
    let at = format_time(now);
    let before = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let mut list = before.clone();
    let set = |list: &mut Vec<Condition>, type_: &str, status: &str, reason: &str| {
        let keep_time = list.iter().find(|c| c.type_ == type_).filter(|c| c.status == status);
        let time = keep_time.and_then(|c| c.last_transition_time.clone()).unwrap_or_else(|| at.clone());
        let message = (status != "True").then(|| reason.to_string());
        let new = Condition {
            last_transition_time: Some(time),
            message,
            observed_generation: nc.metadata.generation,
            reason: Some(reason.to_string()),
            status: status.to_string(),
            type_: type_.to_string(),
        };
        match list.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => *c = new,
            None => list.push(new),
        }
    };
    let drained = |list: &mut Vec<Condition>, volumes: Volumes| {
        set(list, DRAINED, "True", DRAINED);
        match volumes {
            Volumes::Detached => set(list, VOLUMES_DETACHED, "True", VOLUMES_DETACHED),
            Volumes::Awaiting => set(list, VOLUMES_DETACHED, "Unknown", "AwaitingVolumeDetachment"),
            Volumes::GracePeriodElapsed => set(list, VOLUMES_DETACHED, "False", "TerminationGracePeriodElapsed"),
        }
    };
    match stage {
        Stage::Draining => {
            if !list.iter().any(|c| c.type_ == DRAINED) {
                set(&mut list, DRAINED, "Unknown", "Draining");
            }
        }
        Stage::Drained(volumes) => drained(&mut list, volumes),
        Stage::InstanceTerminating(volumes) => {
            if let Some(volumes) = volumes {
                drained(&mut list, volumes);
            }
            set(&mut list, INSTANCE_TERMINATING, "True", INSTANCE_TERMINATING);
        }
    }
    (list != before).then_some(list)
}

/// What node termination does with a deleting Node on one view: upstream `finalize`'s steps in
/// its order, each taken once the one before is done.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePlan {
    /// Its NodeClaim is not being deleted yet: it is deleted first (deleting either ends both).
    pub delete_nodeclaim: bool,
    /// The node is not `Ready`: the cloud is asked whether its instance still exists, and if it
    /// does not the finalizer comes off without a drain (upstream `finalize`: a kubelet that
    /// still reports Ready still runs, whatever the cloud says; one that does not, on an
    /// instance gone, has no pods left to drain).
    pub instance_may_be_gone: bool,
    /// The node does not carry `karpenter.sh/disrupted:NoSchedule` yet: it is tainted first,
    /// then drained (the drain is not done before a view shows the taint).
    pub taint: bool,
    /// The NodeClaim's `terminationGracePeriod` has run out since its deletion: the drain deletes
    /// what is left, and volume attachments no longer hold the instance.
    pub grace_elapsed: bool,
    /// This drain pass.
    pub drain: DrainPass,
    /// The drain is done (upstream `awaitDrain`): the node is tainted, nothing is left to drain
    /// or wait for, and, with a NodeClaim, `Drained` has been `Unknown` for
    /// [`MIN_DRAIN_SECONDS`] (or is `True`).
    pub drained: bool,
    /// The volume attachments that hold the instance (by name), once drained
    /// ([`pending_volume_attachments`]).
    pub pending_attachments: Vec<String>,
}

impl NodePlan {
    /// Where the volumes are once drained.
    pub fn volumes(&self) -> Volumes {
        Volumes::of(self.pending_attachments.len(), self.grace_elapsed)
    }
}

/// upstream `node.termination`'s `finalize` on `node` as one view shows it: `None` when the node
/// is not being deleted or no longer carries `karpenter.sh/termination` (nothing to do).
/// `nodeclaim` is its NodeClaim (by providerID); `pods`, `attachments` and `claims` may hold the
/// whole cluster's.
pub fn node_plan(
    node: &Node,
    nodeclaim: Option<&NodeClaim>,
    pods: &[Pod],
    attachments: &[VolumeAttachment],
    claims: &[PersistentVolumeClaim],
    now: i64,
) -> Option<NodePlan> {
    let ours = node.metadata.finalizers.iter().flatten().any(|f| f == TERMINATION_FINALIZER);
    if node.metadata.deletion_timestamp.is_none() || !ours {
        return None;
    }
    let name = node.metadata.name.as_deref().unwrap_or_default();
    // The grace period counts from the NodeClaim's deletion (upstream: its
    // `karpenter.sh/nodeclaim-termination-timestamp`).
    let grace_elapsed = nodeclaim.is_some_and(|nc| {
        let deleted = nc.metadata.deletion_timestamp.as_ref().map(|t| t.0.as_second());
        let grace = nc.spec.termination_grace_period.as_ref().map(|d| d.as_seconds());
        matches!((deleted, grace), (Some(d), Some(g)) if now >= d + g as i64)
    });
    let delete_nodeclaim = nodeclaim.is_some_and(|nc| nc.metadata.deletion_timestamp.is_none());
    let taint = !is_disrupted(node);
    // upstream taints and drains in one reconcile: the pods already there are evicted at once,
    // those bound before the scheduler sees the taint are caught by MinDrainTime.
    let drain = drain(name, pods, now, grace_elapsed);
    let drained = !taint && nodeclaim.map_or(drain.drained(), |nc| drain_done(nc, drain.drained(), now));
    let instance_may_be_gone = !crate::nodeclaim::garbagecollection::node_ready(node);
    let mut plan = NodePlan {
        delete_nodeclaim,
        instance_may_be_gone,
        taint,
        grace_elapsed,
        drain,
        drained,
        pending_attachments: Vec::new(),
    };
    if plan.drained {
        plan.pending_attachments = pending_volume_attachments(name, attachments, pods, claims, now)
            .iter()
            .filter_map(|a| a.metadata.name.clone())
            .collect();
    }
    Some(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drained_after_the_minimum_drain_time_then_instance_terminating() {
        let mut nc = NodeClaim::new("a", Default::default());
        let t0 = 1_800_000_000;
        assert!(!drain_done(&nc, true, t0), "no drain pass yet");
        let list = conditions(&nc, Stage::Draining, t0).expect("Draining");
        nc.status.get_or_insert_with(Default::default).conditions = list;
        assert_eq!(conditions(&nc, Stage::Draining, t0 + 1), None, "the first pass's time is kept");
        assert!(!drain_done(&nc, true, t0 + 4), "not before MinDrainTime");
        assert!(!drain_done(&nc, false, t0 + 9), "not while pods remain");
        assert!(drain_done(&nc, true, t0 + 5));
        assert!(!is_drained(&nc));
        let list = conditions(&nc, Stage::InstanceTerminating(Some(Volumes::Detached)), t0 + 5).unwrap();
        let status = |t: &str| list.iter().find(|c| c.type_ == t).map(|c| c.status.clone());
        assert_eq!(status(DRAINED).as_deref(), Some("True"));
        assert_eq!(status(VOLUMES_DETACHED).as_deref(), Some("True"));
        assert_eq!(status(INSTANCE_TERMINATING).as_deref(), Some("True"));
        nc.status.get_or_insert_with(Default::default).conditions = list;
        assert!(is_drained(&nc));
    }

    fn attachment(name: &str, node: &str, pv: Option<&str>) -> VolumeAttachment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": {"persistentVolumeName": pv}},
        }))
        .unwrap()
    }

    fn pod_with_claim(name: &str, node: &str, claim: &str, extra: serde_json::Value) -> Pod {
        let mut v = serde_json::json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]},
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k].as_object_mut().unwrap().extend(x.as_object().unwrap().clone());
        }
        serde_json::from_value(v).unwrap()
    }

    fn claim(name: &str, volume: &str) -> PersistentVolumeClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default"}, "spec": {"volumeName": volume},
        }))
        .unwrap()
    }

    #[test]
    fn attachments_of_pods_that_are_not_drained_do_not_hold_the_instance() {
        let now = 1_800_000_000;
        let attachments = [
            attachment("va-drained", "n1", Some("pv-drained")),
            attachment("va-tolerating", "n1", Some("pv-tolerating")),
            attachment("va-stuck", "n1", Some("pv-stuck")),
            attachment("va-inline", "n1", None),
            attachment("va-elsewhere", "n2", Some("pv-elsewhere")),
        ];
        let tolerating =
            serde_json::json!({"spec": {"tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]}});
        let stuck = serde_json::json!({"metadata": {"deletionTimestamp": format_time(now - 61)}});
        let pods = [
            pod_with_claim("tolerating", "n1", "c-tolerating", tolerating),
            pod_with_claim("stuck", "n1", "c-stuck", stuck),
        ];
        let claims = [claim("c-tolerating", "pv-tolerating"), claim("c-stuck", "pv-stuck")];
        let names = |now: i64| -> Vec<String> {
            pending_volume_attachments("n1", &attachments, &pods, &claims, now)
                .iter()
                .map(|a| a.metadata.name.clone().unwrap())
                .collect()
        };
        // The drained pod's volume holds the instance; the tolerating and stuck pods' do not, nor
        // does an attachment without a persistent volume, nor another node's.
        assert_eq!(names(now), ["va-drained"]);
        // Not yet stuck a minute after its deletion timestamp: its volume is waited for too.
        assert_eq!(names(now - 2), ["va-drained", "va-stuck"]);
        assert!(pending_volume_attachments("n3", &attachments, &pods, &claims, now).is_empty());
    }

    #[test]
    fn volumes_detached_follows_the_attachments_and_the_grace_period() {
        let t0 = 1_800_000_000;
        let mut nc = NodeClaim::new("a", Default::default());
        let status = |nc: &NodeClaim, t: &str| condition(nc, t).map(|c| (c.status, c.reason.unwrap_or_default()));
        assert_eq!(Volumes::of(1, false), Volumes::Awaiting);
        assert!(Volumes::of(1, false).hold_instance());
        assert_eq!(Volumes::of(0, false), Volumes::Detached);
        assert_eq!(Volumes::of(2, true), Volumes::GracePeriodElapsed);
        nc.status.get_or_insert_with(Default::default).conditions =
            conditions(&nc, Stage::Drained(Volumes::Awaiting), t0).unwrap();
        assert_eq!(status(&nc, VOLUMES_DETACHED), Some(("Unknown".into(), "AwaitingVolumeDetachment".into())));
        assert_eq!(conditions(&nc, Stage::Drained(Volumes::Awaiting), t0 + 1), None, "unchanged while waiting");
        nc.status.get_or_insert_with(Default::default).conditions =
            conditions(&nc, Stage::InstanceTerminating(Some(Volumes::GracePeriodElapsed)), t0 + 2).unwrap();
        assert_eq!(status(&nc, VOLUMES_DETACHED), Some(("False".into(), "TerminationGracePeriodElapsed".into())));
        assert_eq!(status(&nc, INSTANCE_TERMINATING), Some(("True".into(), INSTANCE_TERMINATING.into())));
        // A NodeClaim without a Node: only InstanceTerminating is written.
        let bare = NodeClaim::new("b", Default::default());
        let list = conditions(&bare, Stage::InstanceTerminating(None), t0).unwrap();
        assert_eq!(list.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(), [INSTANCE_TERMINATING]);
    }

    fn deleting_node(name: &str, tainted: bool) -> Node {
        let taints = if tainted {
            serde_json::json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
        } else {
            serde_json::json!([])
        };
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "finalizers": ["karpenter.sh/termination"],
                "deletionTimestamp": "2027-01-15T08:00:00Z"},
            "spec": {"providerID": "aws:///us-west-2a/i-1", "taints": taints},
        }))
        .unwrap()
    }

    #[test]
    fn a_deleting_node_is_tainted_then_drained_then_waits_for_its_volumes_until_the_grace_period() {
        let now = 1_800_000_000;
        let mut nc: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "nc"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [], "terminationGracePeriod": "60s"},
        }))
        .unwrap();
        let plan = |node: &Node, nc: &NodeClaim, pods: &[Pod], attachments: &[VolumeAttachment], now: i64| {
            node_plan(node, Some(nc), pods, attachments, &[], now)
        };

        // Not ours, or not being deleted: nothing.
        let mut alive = deleting_node("n1", false);
        alive.metadata.deletion_timestamp = None;
        assert_eq!(plan(&alive, &nc, &[], &[], now), None);
        let mut foreign = deleting_node("n1", false);
        foreign.metadata.finalizers = Some(vec!["example.com/other".into()]);
        assert_eq!(plan(&foreign, &nc, &[], &[], now), None);

        // Untainted: its NodeClaim deleted, the taint written and the pod evicted; not drained
        // before a view shows the taint, even with nothing left on it.
        let pod = pod_with_claim("web", "n1", "c-web", serde_json::json!({}));
        let first = plan(&deleting_node("n1", false), &nc, std::slice::from_ref(&pod), &[], now).unwrap();
        assert!(first.delete_nodeclaim && first.taint);
        assert_eq!(first.drain.evict.len(), 1);
        let untainted = node_plan(&deleting_node("n1", false), None, &[], &[], &[], now).unwrap();
        assert!(untainted.drain.drained() && !untainted.drained);
        // No Ready condition (as one whose kubelet stopped): the cloud is asked about its instance.
        assert!(first.instance_may_be_gone);
        let mut ready = deleting_node("n1", false);
        ready.status = Some(
            serde_json::from_value(serde_json::json!({"conditions": [{"type": "Ready", "status": "True"}]})).unwrap(),
        );
        assert!(!plan(&ready, &nc, &[], &[], now).unwrap().instance_may_be_gone);
        ready.status = Some(
            serde_json::from_value(serde_json::json!({"conditions": [{"type": "Ready", "status": "Unknown"}]}))
                .unwrap(),
        );
        assert!(plan(&ready, &nc, &[], &[], now).unwrap().instance_may_be_gone);
        // Without a NodeClaim, drained as soon as nothing is left (no MinDrainTime to count from).
        let alone = node_plan(&deleting_node("n1", true), None, &[], &[], &[], now).unwrap();
        assert!(alone.drained && !alone.delete_nodeclaim && !alone.grace_elapsed);

        // Tainted, its NodeClaim being deleted: the pod evicted, not drained.
        nc.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(now).unwrap(),
        ));
        let node = deleting_node("n1", true);
        let draining = plan(&node, &nc, std::slice::from_ref(&pod), &[], now).unwrap();
        assert!(!draining.delete_nodeclaim && !draining.taint && !draining.drained);
        assert_eq!(draining.drain.evict.len(), 1);

        // The pod gone: drained only once `Drained` has been Unknown for MinDrainTime.
        let attachments = [attachment("va-web", "n1", Some("pv-web"))];
        assert!(!plan(&node, &nc, &[], &attachments, now).unwrap().drained, "no drain pass written yet");
        nc.status.get_or_insert_with(Default::default).conditions = conditions(&nc, Stage::Draining, now).unwrap();
        assert!(!plan(&node, &nc, &[], &attachments, now + 4).unwrap().drained);
        let drained = plan(&node, &nc, &[], &attachments, now + 5).unwrap();
        assert!(drained.drained);
        assert_eq!(drained.pending_attachments, ["va-web"]);
        assert_eq!(drained.volumes(), Volumes::Awaiting);

        // The grace period (60 s from the NodeClaim's deletion) over: what is left is deleted,
        // and the volumes hold it no longer.
        let stays = plan(&node, &nc, std::slice::from_ref(&pod), &attachments, now + 60).unwrap();
        assert_eq!((stays.drain.delete.len(), stays.drained), (1, false));
        assert!(!plan(&node, &nc, &[], &attachments, now + 59).unwrap().grace_elapsed);
        let late = plan(&node, &nc, &[], &attachments, now + 60).unwrap();
        assert!(late.grace_elapsed);
        assert_eq!(late.volumes(), Volumes::GracePeriodElapsed);
        assert!(!late.volumes().hold_instance());
        assert_eq!(plan(&node, &nc, &[], &[], now + 5).unwrap().volumes(), Volumes::Detached);
    }
}
