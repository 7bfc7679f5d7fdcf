//! What a NodePool that sits out a round because of its own spec is told (upstream
//! `provisioner.go::NewScheduler` logs "skipping, no resolved instance types found" and
//! `scheduler.go::NewScheduler` "skipping, nodepool requirements filtered out all instance types",
//! v1.14.1). A log line is the last place an operator looks, so carpentry also says it in a
//! Warning event on the NodePool (through the events dedupe: written once per 2 minutes while it
//! holds, each repeat counted into the event's series), naming which of
//! the NodePool's constraints leave out how many instance types. A skip the NodePool's conditions
//! already say (not Ready) or that its owner chose (static, being deleted, another provider's
//! NodeClass) gets none.

use std::fmt::Write;

use super::*;
use crate::scheduling::nodeclaim_template::Rejection;

/// A Warning event for the NodePool: the reason and the message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkipNotice {
    pub reason: &'static str,
    pub message: String,
}

/// How many causes a notice names (the ones that leave out the most instance types).
const CAUSES_SHOWN: usize = 3;

impl SkippedNodePool {
    /// The event for this skip, if its cause is the NodePool's spec. `input` is the round's.
    pub fn notice(&self, input: &Input) -> Option<SkipNotice> {
        let reason = match &self.why {
            SkipReason::Static
            | SkipReason::BeingDeleted
            | SkipReason::ForeignNodeClass { .. }
            | SkipReason::NotReady { .. } => return None,
            SkipReason::Requirements(_) => "InvalidRequirements",
            SkipReason::NoInstanceTypes => "NoCompatibleInstanceTypes",
            SkipReason::MinValues(_) => "MinValuesUnsatisfiable",
        };
        let mut message = self.why.to_string();
        if matches!(self.why, SkipReason::NoInstanceTypes) {
            if let Some(np) = input.nodepools.iter().find(|n| n.nodepool.name() == self.nodepool) {
                let _ = write!(message, ": {}", left_out(np, input));
            }
        }
        Some(SkipNotice { reason, message })
    }
}

/// Which of the NodePool's constraints leave out how many of its NodeClass's instance types, the
/// largest share first (the prefilter the round ran, with its reasons kept).
fn left_out(np: &NodePoolInput, input: &Input) -> String {
    let total = np.instance_types.len();
    if total == 0 {
        return "its NodeClass has no instance type in this region".into();
    }
    let Ok(mut template) = NodeClaimTemplate::new(&np.nodepool) else { return String::new() };
    // As the round's prefilter: limits are checked per NodeClaim, not here.
    template.limits.clear();
    let types = marked_unavailable(&np.instance_types, &unavailable_by_type(input));
    let prefilter = template.prefilter(&types);
    let mut by_cause: BTreeMap<String, usize> = BTreeMap::new();
    for (_, rejection) in &prefilter.rejected {
        *by_cause.entry(cause(&template, rejection)).or_default() += 1;
    }
    let mut causes: Vec<(String, usize)> = by_cause.into_iter().collect();
    causes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut text = format!("of its NodeClass's {total} instance types, ");
    for (i, (cause, count)) in causes.iter().take(CAUSES_SHOWN).enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        let _ = write!(text, "{count} left out by {cause}");
    }
    if causes.len() > CAUSES_SHOWN {
        let rest: usize = causes[CAUSES_SHOWN..].iter().map(|(_, n)| n).sum();
        let _ = write!(text, ", {rest} by other causes");
    }
    text
}

/// One rejection's cause, as the NodePool's author wrote it.
fn cause(template: &NodeClaimTemplate, rejection: &Rejection) -> String {
    let requirement = |key: &str| match template.requirements.get_ref(key) {
        Some(r) => format!("the requirement {r}"),
        None => format!("the requirement on {key}"),
    };
    match rejection {
        Rejection::Requirements(reason) => requirement(reason.key()),
        Rejection::NoCompatibleOffering { incompatible: Some(reason), .. } => {
            format!("{} (no offering in the zones or capacity types it allows)", requirement(reason.key()))
        }
        Rejection::NoCompatibleOffering { unavailable, incompatible: None } if *unavailable > 0 => {
            "insufficient capacity (every offering recently failed to launch)".into()
        }
        Rejection::NoCompatibleOffering { .. } => "having no offering".into(),
        Rejection::ExceedsLimits { resource, limit, .. } => format!("limits.{resource} ({limit})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Catalogue;

    fn input(requirements: serde_json::Value) -> Input {
        let nodepool: NodePool = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "impossible"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": requirements,
            }}},
        }))
        .unwrap();
        let instance_types = Catalogue::embedded().instance_types_shared("us-east-1", &Default::default()).unwrap();
        Input { nodepools: vec![NodePoolInput { nodepool, instance_types }], ..Input::default() }
    }

    #[test]
    fn a_nodepool_no_instance_type_satisfies_is_told_which_requirement_leaves_them_out() {
        let input = input(serde_json::json!([
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["no-such-type"]},
        ]));
        let results = crate::scheduling::schedule(&input);
        let skipped = results.skipped_nodepools.iter().find(|s| s.nodepool == "impossible").expect("skipped");
        let notice = skipped.notice(&input).expect("a notice");
        let total = input.nodepools[0].instance_types.len();
        assert_eq!(notice.reason, "NoCompatibleInstanceTypes");
        assert_eq!(
            notice.message,
            format!(
                "NodePool requirements filtered out all compatible available instance types: of its NodeClass's \
                 {total} instance types, {total} left out by the requirement node.kubernetes.io/instance-type In [no-such-type]"
            )
        );
    }

    #[test]
    fn skips_the_conditions_or_the_owner_explain_get_no_notice() {
        let input = input(serde_json::json!([]));
        for why in [SkipReason::Static, SkipReason::BeingDeleted, SkipReason::NotReady { message: None }] {
            assert_eq!(SkippedNodePool { nodepool: "impossible".into(), why }.notice(&input), None);
        }
    }
}
