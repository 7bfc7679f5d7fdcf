//! An EC2NodeClass's finalizer (upstream karpenter-provider-aws v1.14.1
//! `pkg/controllers/nodeclass/controller.go` `Reconcile` and `finalize`, `events.go`): every
//! EC2NodeClass carries `karpenter.k8s.aws/termination`; a deleted one stays while any NodeClaim
//! uses it (an event says which, every 10 minutes), then its instance profiles and launch
//! templates are deleted and the finalizer removed.

use crate::api::{EC2NodeClass, NodeClaim};
use crate::labels::aws;

/// upstream `v1.TerminationFinalizer` of the AWS provider.
pub const TERMINATION_FINALIZER: &str = "karpenter.k8s.aws/termination";
/// upstream requeues a NodeClass waiting on its NodeClaims every 10 minutes, firing its event again.
pub const WAITING_EVENT_INTERVAL_SECONDS: u64 = 600;
/// upstream `WaitingOnNodeClaimTerminationEvent`'s reason.
pub const WAITING_REASON: &str = "WaitingOnNodeClaimTermination";

/// What the finalizer asks for now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeClassTermination {
    /// A live NodeClass without the finalizer: add it.
    AddFinalizer,
    /// Deleted while these NodeClaims use it: wait for them.
    WaitForNodeClaims(Vec<String>),
    /// Deleted and unused: delete its instance profiles and launch templates, then the finalizer.
    CleanUp,
    /// Nothing to do.
    Nothing,
}

fn has_finalizer(class: &EC2NodeClass) -> bool {
    class.metadata.finalizers.as_ref().is_some_and(|f| f.iter().any(|f| f == TERMINATION_FINALIZER))
}

/// Whether `nodeclaim` was made from `class` (upstream `nodeclaimutils.ForNodeClass`: its
/// `spec.nodeClassRef` names it).
pub fn uses(nodeclaim: &NodeClaim, class: &EC2NodeClass) -> bool {
    let r = &nodeclaim.spec.node_class_ref;
    r.group == aws::GROUP && r.kind == "EC2NodeClass" && Some(r.name.as_str()) == class.metadata.name.as_deref()
}

/// The finalizer's step for `class` among `nodeclaims`.
pub fn termination(class: &EC2NodeClass, nodeclaims: &[NodeClaim]) -> NodeClassTermination {
    if class.metadata.deletion_timestamp.is_none() {
        return if has_finalizer(class) { NodeClassTermination::Nothing } else { NodeClassTermination::AddFinalizer };
    }
    if !has_finalizer(class) {
        return NodeClassTermination::Nothing;
    }
    let using: Vec<String> = nodeclaims.iter().filter(|nc| uses(nc, class)).map(|nc| nc.name().to_string()).collect();
    if using.is_empty() {
        NodeClassTermination::CleanUp
    } else {
        NodeClassTermination::WaitForNodeClaims(using)
    }
}

/// upstream `WaitingOnNodeClaimTerminationEvent`'s message (`utils.PrettySlice` of 5).
pub fn waiting_message(nodeclaims: &[String]) -> String {
    let mut out = String::from("Waiting on NodeClaim termination for ");
    for (i, name) in nodeclaims.iter().enumerate() {
        if i >= 5 {
            out.push_str(&format!(" and {} other(s)", nodeclaims.len() - i));
            break;
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(name);
    }
    out
}

/// The finalizers `class` keeps once this one is removed.
pub fn without_finalizer(class: &EC2NodeClass) -> Vec<String> {
    class.metadata.finalizers.iter().flatten().filter(|f| *f != TERMINATION_FINALIZER).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(deleted: bool, finalizer: bool) -> EC2NodeClass {
        let mut c = EC2NodeClass::new("default", Default::default());
        if deleted {
            c.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
        }
        if finalizer {
            c.metadata.finalizers = Some(vec!["other".into(), TERMINATION_FINALIZER.into()]);
        }
        c
    }

    fn claim(name: &str, class: &str) -> NodeClaim {
        let mut nc = NodeClaim::new(name, Default::default());
        nc.spec.node_class_ref.group = aws::GROUP.into();
        nc.spec.node_class_ref.kind = "EC2NodeClass".into();
        nc.spec.node_class_ref.name = class.into();
        nc
    }

    #[test]
    fn the_finalizer_is_added_then_holds_the_class_while_nodeclaims_use_it() {
        let claims = [claim("a", "default"), claim("b", "other"), claim("c", "default")];
        assert_eq!(termination(&class(false, false), &claims), NodeClassTermination::AddFinalizer);
        assert_eq!(termination(&class(false, true), &claims), NodeClassTermination::Nothing);
        assert_eq!(
            termination(&class(true, true), &claims),
            NodeClassTermination::WaitForNodeClaims(vec!["a".into(), "c".into()])
        );
        assert_eq!(termination(&class(true, true), &claims[1..2]), NodeClassTermination::CleanUp);
        assert_eq!(termination(&class(true, false), &[]), NodeClassTermination::Nothing);
        assert_eq!(without_finalizer(&class(true, true)), ["other"]);
    }

    #[test]
    fn the_waiting_event_names_five_and_counts_the_rest() {
        let names: Vec<String> = (1..=7).map(|i| format!("nc-{i}")).collect();
        assert_eq!(
            waiting_message(&names),
            "Waiting on NodeClaim termination for nc-1, nc-2, nc-3, nc-4, nc-5 and 2 other(s)"
        );
        assert_eq!(waiting_message(&names[..1]), "Waiting on NodeClaim termination for nc-1");
    }
}
