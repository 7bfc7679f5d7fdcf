//! Admission checks for NodePool, NodeClaim and EC2NodeClass.
//!
//! upstream: the openAPI schema and CEL rules of the CRDs (`pkg/apis/crds/*.yaml` in both repositories), plus the
//! runtime validation the `nodepool/validation` controller runs (`nodepool_validation.go`,
//! `nodeclaim_validation.go`). Each [`FieldError`] names the field (rooted at the object, dotted, with `[i]` list
//! indexes and `["key"]` map keys), a user-facing message, and the [`Rule`] that produced it. Where upstream reports
//! the same problem twice (a CEL rule and the runtime check), we report it once.

use std::fmt;

use crate::api::cron::CronSchedule;
use crate::api::duration::{Duration, NillableDuration};
use crate::requirements::{NodeSelectorRequirementWithMinValues, Operator};
use k8s_openapi::api::core::v1::Taint;

/// One problem with an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Where: `spec.template.spec.requirements[2].values`.
    pub path: String,
    /// What is wrong, for a human.
    pub message: String,
    /// Which upstream rule.
    pub rule: Rule,
}

impl FieldError {
    pub fn new(path: impl Into<String>, rule: Rule, message: impl Into<String>) -> FieldError {
        FieldError { path: path.into(), message: message.into(), rule }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for FieldError {}

/// Objects that can be checked the way the API server and Karpenter's runtime validation check them.
pub trait Validate {
    /// Every problem found; empty when the object would be admitted and pass runtime validation.
    fn validate(&self) -> Vec<FieldError>;
}

/// Checks that need the previous version of the object (immutability and transition rules).
pub trait ValidateUpdate {
    fn validate_update(&self, old: &Self) -> Vec<FieldError>;
}

/// The upstream rule or check behind a [`FieldError`]. Variants are grouped by object; the doc comment of each
/// names the upstream source (openAPI keyword, CEL rule, or runtime check).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    // ---- all objects --------------------------------------------------------------------------------------------
    /// `apiVersion`/`kind` do not name the type being validated.
    TypeMeta,
    /// `metadata.name` missing.
    MetadataName,

    // ---- NodePool / NodeClaim: template metadata ----------------------------------------------------------------
    /// openAPI `maxProperties: 100` on template labels.
    LabelsMaxProperties,
    /// Runtime `IsQualifiedName` on a template label key.
    LabelKeyQualifiedName,
    /// openAPI `maxLength: 63` + label-value pattern; runtime `IsValidLabelValue`.
    LabelValue,
    /// CEL: "label domain \"karpenter.sh\" is restricted" (keys other than capacity-type and nodepool).
    KarpenterDomainRestricted,
    /// CEL: "label \"karpenter.sh/nodepool\" is restricted" (NodePool labels and requirements).
    NodePoolLabelRestricted,
    /// CEL: "label \"kubernetes.io/hostname\" is restricted".
    HostnameLabelRestricted,
    /// Runtime `IsRestrictedLabel` (restricted domains such as `karpenter.k8s.aws`).
    RestrictedLabel,

    // ---- taints ------------------------------------------------------------------------------------------------
    /// openAPI `minLength: 1` + qualified-name pattern on the key.
    TaintKey,
    /// openAPI qualified-name pattern on the value.
    TaintValue,
    /// openAPI enum NoSchedule | PreferNoSchedule | NoExecute.
    TaintEffect,
    /// Runtime: a (key, effect) pair repeated across taints and startupTaints.
    TaintDuplicate,

    // ---- requirements ------------------------------------------------------------------------------------------
    /// openAPI `maxItems: 100`.
    RequirementsMaxItems,
    /// openAPI `maxLength: 316` + qualified-name pattern; runtime `IsQualifiedName`.
    RequirementKey,
    /// openAPI `maxLength: 63` + label-value pattern on each value.
    RequirementValue,
    /// CEL: "requirements with operator 'In' must have a value defined".
    RequirementInNeedsValue,
    /// CEL: "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value".
    RequirementNumericValue,
    /// CEL: "requirements with 'minValues' must have at least that many values specified in the 'values' field".
    RequirementMinValuesExceedValues,
    /// openAPI `minimum: 1`, `maximum: 50` on minValues.
    RequirementMinValuesRange,
    /// Runtime `validateWellKnownValues` (e.g. capacity-type values).
    WellKnownValues,

    // ---- nodeClassRef ------------------------------------------------------------------------------------------
    /// CEL "group may not be empty" + pattern `^[^/]*$`.
    NodeClassRefGroup,
    /// CEL "kind may not be empty".
    NodeClassRefKind,
    /// CEL "name may not be empty".
    NodeClassRefName,
    /// CEL "nodeClassRef.group is immutable".
    NodeClassRefGroupImmutable,
    /// CEL "nodeClassRef.kind is immutable".
    NodeClassRefKindImmutable,

    // ---- durations ---------------------------------------------------------------------------------------------
    /// Pattern `^([0-9]+(s|m|h))+$`.
    TerminationGracePeriodPattern,
    /// Pattern `^(([0-9]+(s|m|h))+|Never)$`.
    ExpireAfterPattern,
    /// Pattern `^(([0-9]+(s|m|h))+|Never)$`.
    ConsolidateAfterPattern,

    // ---- disruption budgets ------------------------------------------------------------------------------------
    /// openAPI `maxItems: 50`.
    BudgetsMaxItems,
    /// CEL "'schedule' must be set with 'duration'".
    BudgetScheduleWithDuration,
    /// Pattern `^((100|[0-9]{1,2})%|[0-9]+)$`.
    BudgetNodes,
    /// The CRD's schedule pattern (5 fields or an `@` macro).
    BudgetSchedulePattern,
    /// `cron.ParseStandard` rejects the schedule (upstream then fails closed: the budget allows 0 disruptions).
    BudgetScheduleCron,
    /// Pattern `^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`.
    BudgetDurationPattern,
    /// `listType=set` on reasons (no duplicates).
    BudgetReasonsUnique,

    // ---- NodePool spec -----------------------------------------------------------------------------------------
    /// openAPI `minimum: 1`, `maximum: 100`.
    WeightRange,
    /// openAPI `minimum: 0`.
    ReplicasMinimum,
    /// CEL "only 'limits.nodes' is supported on static NodePools".
    StaticLimits,
    /// CEL "'weight' is not supported on static NodePools".
    StaticWeight,
    /// CEL "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes".
    ReplicasTransition,

    // ---- NodeClaim ---------------------------------------------------------------------------------------------
    /// CEL `self == oldSelf` on the spec.
    NodeClaimSpecImmutable,

    // ---- EC2NodeClass ------------------------------------------------------------------------------------------
    /// CEL "must specify exactly one of ['role', 'instanceProfile']".
    RoleXorInstanceProfile,
    /// CEL "role cannot be empty".
    RoleEmpty,
    /// CEL "instanceProfile cannot be empty".
    InstanceProfileEmpty,
    /// Selector term lists: required/`minItems`/`size() != 0` and `maxItems: 30`.
    SelectorTermsCount,
    /// CEL "expected at least one, got none, [...]".
    SelectorTermEmpty,
    /// CEL "'id' is mutually exclusive, ..." / "'name' is mutually exclusive, ...".
    SelectorTermExclusive,
    /// Patterns of ids: `subnet-…`, `sg-…`, `ami-…`, `^cr-…$`, `^pg-…$`, ownerID `^[0-9]{12}$`.
    SelectorIdPattern,
    /// Selector tags: `maxProperties: 20` and CEL "empty tag keys or values aren't supported".
    SelectorTags,
    /// capacityReservationSelectorTerms `instanceMatchCriteria` enum open | targeted.
    InstanceMatchCriteria,
    /// placementGroupSelector: one of name and id, `name` non-empty.
    PlacementGroupSelector,
    /// AMI alias: CEL format `^[a-zA-Z0-9]+@.+$`, known family, `maxLength: 30`.
    AmiAlias,
    /// CEL "windows families may only specify version 'latest'".
    AmiAliasWindowsVersion,
    /// CEL "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms".
    AmiAliasSingleTerm,
    /// CEL "if set, amiFamily must be `'<family>'` or 'Custom' when using an `<family>` alias".
    AmiFamilyAliasMismatch,
    /// CEL "must specify amiFamily if amiSelectorTerms does not contain an alias".
    AmiFamilyRequired,
    /// CEL rules on `spec.tags` (empty key, restricted keys).
    Tags,
    /// Kubelet `maxPods`/`podsPerCore` `minimum: 0`.
    KubeletMinimum,
    /// Kubelet systemReserved/kubeReserved keys and non-negative values.
    KubeletReserved,
    /// Kubelet eviction maps: signal keys, value pattern, grace-period parsing.
    KubeletEviction,
    /// CEL "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod" (and the reverse).
    KubeletEvictionSoftPairs,
    /// imageGC thresholds: 0..100 and high > low.
    KubeletImageGc,
    /// blockDeviceMappings `maxItems: 50` and "must have only one blockDeviceMappings with rootVolume".
    BlockDeviceMappings,
    /// EBS: "snapshotID or volumeSize must be defined", volumeInitializationRate 100..300 with a snapshot.
    BlockDevice,
    /// volumeSize pattern (a whole number of Gi/G/Ti/T in range).
    VolumeSize,
    /// volumeType enum standard | io1 | io2 | gp2 | sc1 | st1 | gp3.
    VolumeType,
    /// metadataOptions enums.
    MetadataOptions,
    /// metadataOptions `httpPutResponseHopLimit` 1..64.
    MetadataHopLimit,
    /// `ipPrefixCount` `minimum: 0`.
    IpPrefixCount,
    /// networkInterfaces: `maxItems: 150`, index minimums, interfaceType enum, primary interface, duplicates.
    NetworkInterfaces,
    /// connectionTracking: at least one field; TCP 60..432000, UDP stream 60..180, UDP 30..60.
    ConnectionTracking,
    /// cpuOptions `nestedVirtualization` enum enabled | disabled.
    CpuOptions,

    // ---- carpentry.dev NodeGroup and the Scenario's clusterAutoscaler (cluster-autoscaler-1.36.1) ----------------
    /// The ASG API's size rules: 0 ≤ minSize ≤ desiredCapacity ≤ maxSize.
    NodeGroupSize,
    /// instanceTypes and zones: at least one each, none empty or repeated (CA's template takes the first).
    NodeGroupList,
    /// instanceTypes and zones the EC2 catalogue has (a typo would leave the group out of every scale-up).
    NodeGroupCatalogue,
    /// `node-template/resources/<name>` quantities: not negative.
    NodeGroupResources,
    /// A CA flag's value (`config/flags/flags.go`): a Go duration, a threshold in 0..1, a known expander chain.
    AutoscalerOption,
}

// ---------------------------------------------------------------------------------------------------------------
// Syntax helpers (k8s.io/apimachinery/pkg/util/validation)
// ---------------------------------------------------------------------------------------------------------------

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, without a length limit.
fn matches_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum(b[0])
        && is_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_alnum(c) || c == b'-' || c == b'_' || c == b'.')
}

/// DNS-1123 subdomain syntax, without a length limit.
fn matches_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
                && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
                && b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        })
}

/// Problems with `value` as a label value (upstream `IsValidLabelValue`); empty when valid. The empty value is valid.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(format!("must be no more than 63 characters (is {})", value.len()));
    }
    if !value.is_empty() && !matches_name_part(value) {
        errs.push(
            "a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', \
             and must start and end with an alphanumeric character"
                .to_string(),
        );
    }
    errs
}

/// Problems with `key` as a qualified name (upstream `IsQualifiedName`); empty when valid.
pub fn qualified_name_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => {
            if name.contains('/') {
                errs.push(
                    "a qualified name must consist of an optional DNS subdomain prefix and '/', then a name"
                        .to_string(),
                );
                return errs;
            }
            (Some(prefix), name)
        }
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            errs.push("prefix part must be non-empty".to_string());
        } else {
            if prefix.len() > 253 {
                errs.push("prefix part must be no more than 253 characters".to_string());
            }
            if !matches_dns1123_subdomain(prefix) {
                errs.push(
                    "prefix part must be a lowercase DNS subdomain: alphanumeric characters, '-' or '.', starting \
                     and ending with an alphanumeric character (e.g. 'example.com')"
                        .to_string(),
                );
            }
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else {
        if name.len() > 63 {
            errs.push("name part must be no more than 63 characters".to_string());
        }
        if !matches_name_part(name) {
            errs.push(
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
                 alphanumeric character (e.g. 'MyName', 'my.name' or '123-abc')"
                    .to_string(),
            );
        }
    }
    errs
}

/// The domain CEL's `find("^([^/]+)")` extracts: the text before the first `/`, or the whole key.
fn cel_domain(key: &str) -> &str {
    key.split_once('/').map_or(key, |(domain, _)| domain)
}

/// Appends a list index to a path.
pub(crate) fn idx(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// Appends a map key to a path.
pub(crate) fn key(path: &str, k: &str) -> String {
    format!("{path}[{k:?}]")
}

// ---------------------------------------------------------------------------------------------------------------
// Shared checks
// ---------------------------------------------------------------------------------------------------------------

/// Where a label key appears; the CEL rules on NodePools also forbid `karpenter.sh/nodepool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyContext {
    NodePool,
    NodeClaim,
}

/// The three CEL key rules shared by template labels and requirement keys. Returns the errors; `path` names the
/// key.
fn cel_key_rules(k: &str, path: &str, context: KeyContext, out: &mut Vec<FieldError>) -> bool {
    let before = out.len();
    if k != crate::labels::CAPACITY_TYPE && k != crate::labels::NODEPOOL && cel_domain(k).ends_with("karpenter.sh") {
        out.push(FieldError::new(
            path,
            Rule::KarpenterDomainRestricted,
            format!(
                "label domain \"karpenter.sh\" is restricted: {k:?} may not be used (only {} is allowed{})",
                crate::labels::CAPACITY_TYPE,
                if context == KeyContext::NodeClaim {
                    format!(" and {}", crate::labels::NODEPOOL)
                } else {
                    String::new()
                }
            ),
        ));
    }
    if context == KeyContext::NodePool && k == crate::labels::NODEPOOL {
        out.push(FieldError::new(
            path,
            Rule::NodePoolLabelRestricted,
            "label \"karpenter.sh/nodepool\" is restricted: Karpenter sets it to the NodePool's name",
        ));
    }
    if k == crate::labels::HOSTNAME {
        out.push(FieldError::new(
            path,
            Rule::HostnameLabelRestricted,
            "label \"kubernetes.io/hostname\" is restricted: a node's hostname is not known before it launches",
        ));
    }
    out.len() > before
}

/// Template labels (NodePool `spec.template.metadata.labels`).
pub(crate) fn validate_template_labels(
    labels: &std::collections::BTreeMap<String, String>,
    path: &str,
    out: &mut Vec<FieldError>,
) {
    if labels.len() > 100 {
        out.push(FieldError::new(
            path,
            Rule::LabelsMaxProperties,
            format!("at most 100 labels are allowed, found {}", labels.len()),
        ));
    }
    for (k, v) in labels {
        let p = key(path, k);
        for e in qualified_name_errors(k) {
            out.push(FieldError::new(&p, Rule::LabelKeyQualifiedName, format!("invalid label key {k:?}: {e}")));
        }
        for e in label_value_errors(v) {
            out.push(FieldError::new(&p, Rule::LabelValue, format!("invalid label value {v:?}: {e}")));
        }
        if !cel_key_rules(k, &p, KeyContext::NodePool, out) {
            if let Err(e) = crate::labels::check_nodepool_template_label(k) {
                out.push(FieldError::new(&p, Rule::RestrictedLabel, format!("invalid label key {k:?}: {e}")));
            }
        }
    }
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// taints and startupTaints; duplicates of (key, effect) across both lists are reported only when `runtime`.
pub(crate) fn validate_taints(
    taints: &[Taint],
    startup_taints: &[Taint],
    spec_path: &str,
    runtime: bool,
    out: &mut Vec<FieldError>,
) {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (field, list) in [("taints", taints), ("startupTaints", startup_taints)] {
        for (i, taint) in list.iter().enumerate() {
            let p = idx(&format!("{spec_path}.{field}"), i);
            if taint.key.is_empty() {
                out.push(FieldError::new(format!("{p}.key"), Rule::TaintKey, "taint key may not be empty"));
            } else {
                for e in qualified_name_errors(&taint.key) {
                    out.push(FieldError::new(
                        format!("{p}.key"),
                        Rule::TaintKey,
                        format!("invalid taint key {:?}: {e}", taint.key),
                    ));
                }
            }
            if let Some(value) = taint.value.as_deref().filter(|v| !v.is_empty()) {
                for e in qualified_name_errors(value) {
                    out.push(FieldError::new(
                        format!("{p}.value"),
                        Rule::TaintValue,
                        format!("invalid taint value {value:?}: {e}"),
                    ));
                }
            }
            if !TAINT_EFFECTS.contains(&taint.effect.as_str()) {
                out.push(FieldError::new(
                    format!("{p}.effect"),
                    Rule::TaintEffect,
                    format!("taint effect {:?} is not one of NoSchedule, PreferNoSchedule, NoExecute", taint.effect),
                ));
            }
            if runtime {
                let pair = (taint.key.as_str(), taint.effect.as_str());
                if seen.contains(&pair) {
                    out.push(FieldError::new(
                        &p,
                        Rule::TaintDuplicate,
                        format!(
                            "duplicate taint key/effect pair {}={} (taints and startupTaints together may list each \
                             key and effect once)",
                            taint.key, taint.effect
                        ),
                    ));
                } else {
                    seen.push(pair);
                }
            }
        }
    }
}

/// True if `v` parses as a CEL `int(...)` ≥ 0 (decimal, optional sign).
fn is_non_negative_int(v: &str) -> bool {
    let digits = v.strip_prefix('+').unwrap_or(v);
    if let Some(neg) = v.strip_prefix('-') {
        // "-0" is 0.
        return !neg.is_empty() && neg.bytes().all(|b| b == b'0');
    }
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && digits.parse::<i64>().is_ok()
}

/// Requirements of a NodePool template or a NodeClaim. `runtime` adds the NodePool runtime checks (restricted
/// labels beyond the CEL rules, well-known values).
pub(crate) fn validate_requirements(
    requirements: &[NodeSelectorRequirementWithMinValues],
    path: &str,
    context: KeyContext,
    out: &mut Vec<FieldError>,
) {
    if requirements.len() > 100 {
        out.push(FieldError::new(
            path,
            Rule::RequirementsMaxItems,
            format!("at most 100 requirements are allowed, found {}", requirements.len()),
        ));
    }
    for (i, r) in requirements.iter().enumerate() {
        let p = idx(path, i);
        let key_path = format!("{p}.key");
        let k = r.key.as_str();
        if k.len() > 316 {
            out.push(FieldError::new(
                &key_path,
                Rule::RequirementKey,
                format!("requirement key must be no more than 316 characters (is {})", k.len()),
            ));
        }
        for e in qualified_name_errors(k) {
            out.push(FieldError::new(
                &key_path,
                Rule::RequirementKey,
                format!("key {k:?} is not a qualified name: {e}"),
            ));
        }
        let cel_flagged = cel_key_rules(k, &key_path, context, out);
        if context == KeyContext::NodePool && !cel_flagged {
            if let Err(e) = crate::labels::check_nodepool_requirement_key(k) {
                out.push(FieldError::new(&key_path, Rule::RestrictedLabel, e.to_string()));
            }
        }
        for (j, v) in r.values.iter().enumerate() {
            for e in label_value_errors(v) {
                out.push(FieldError::new(
                    idx(&format!("{p}.values"), j),
                    Rule::RequirementValue,
                    format!("invalid value {v:?} for key {k}: {e}"),
                ));
            }
        }
        match r.operator {
            Operator::In if r.values.is_empty() => out.push(FieldError::new(
                format!("{p}.values"),
                Rule::RequirementInNeedsValue,
                format!("requirements with operator 'In' must have a value defined (key {k})"),
            )),
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte
                if r.values.len() != 1 || !is_non_negative_int(&r.values[0]) =>
            {
                out.push(FieldError::new(
                    format!("{p}.values"),
                    Rule::RequirementNumericValue,
                    format!(
                        "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value \
                         (key {k}, operator {}, values {:?})",
                        r.operator.as_str(),
                        r.values
                    ),
                ))
            }
            _ => {}
        }
        if let Some(min) = r.min_values {
            if !(1..=50).contains(&min) {
                out.push(FieldError::new(
                    format!("{p}.minValues"),
                    Rule::RequirementMinValuesRange,
                    format!("minValues must be between 1 and 50, got {min}"),
                ));
            }
            if r.operator == Operator::In && (r.values.len() as i64) < min {
                out.push(FieldError::new(
                    format!("{p}.minValues"),
                    Rule::RequirementMinValuesExceedValues,
                    format!(
                        "requirements with 'minValues' must have at least that many values specified in the 'values' \
                         field (key {k}: minValues {min}, {} values)",
                        r.values.len()
                    ),
                ));
            }
        }
        if context == KeyContext::NodePool {
            validate_well_known_values(r, &p, out);
        }
    }
}

/// upstream `validateWellKnownValues`: for `In` on a key with known values, at least one value (and at least
/// `minValues` values) must be known. Mixed valid and invalid values pass (upstream logs them).
fn validate_well_known_values(r: &NodeSelectorRequirementWithMinValues, path: &str, out: &mut Vec<FieldError>) {
    if r.operator != Operator::In {
        return;
    }
    let key = crate::labels::normalize_key(&r.key);
    let Some(known) = crate::labels::well_known_values(key) else {
        return;
    };
    let valid = r.values.iter().filter(|v| known.contains(&v.as_str())).count();
    if valid == 0 {
        out.push(FieldError::new(
            format!("{path}.values"),
            Rule::WellKnownValues,
            format!("no valid values found in {:?} for {key}, expected one of: {known:?}", r.values),
        ));
    } else if let Some(min) = r.min_values {
        if (valid as i64) < min {
            out.push(FieldError::new(
                format!("{path}.values"),
                Rule::WellKnownValues,
                format!(
                    "not enough valid values found in {:?} for {key}, expected at least {min} valid values from: \
                     {known:?}, got: {valid}",
                    r.values
                ),
            ));
        }
    }
}

pub(crate) fn validate_expire_after(d: &NillableDuration, path: &str, out: &mut Vec<FieldError>) {
    if !d.matches_crd_pattern() {
        out.push(FieldError::new(
            path,
            Rule::ExpireAfterPattern,
            format!(
                "expireAfter {:?} must be whole hours, minutes and seconds (for example \"720h\" or \"1h30m\") or \
                 \"Never\"",
                d.as_str()
            ),
        ));
    }
}

pub(crate) fn validate_termination_grace_period(d: &Duration, path: &str, out: &mut Vec<FieldError>) {
    if !d.matches_hms_pattern() {
        out.push(FieldError::new(
            path,
            Rule::TerminationGracePeriodPattern,
            format!(
                "terminationGracePeriod {:?} must be whole hours, minutes and seconds (for example \"48h\" or \
                 \"1h30m\")",
                d.as_str()
            ),
        ));
    }
}

/// The CRD's schedule pattern: `^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`.
/// The first alternative is anchored only at the start and the second only at the end, as upstream's regex is.
pub(crate) fn matches_schedule_pattern(s: &str) -> bool {
    const MACROS: [&str; 7] = ["annually", "yearly", "monthly", "weekly", "daily", "midnight", "hourly"];
    if let Some(rest) = s.strip_prefix('@') {
        if MACROS.iter().any(|m| rest.starts_with(m)) {
            return true;
        }
    }
    // `(.+)\s(.+)\s(.+)\s(.+)\s(.+)$`: in the last line, four whitespace characters, each with at least one
    // character before it and after it. Picking the earliest possible separators is optimal.
    let line = s.rsplit('\n').next().unwrap_or("");
    let chars: Vec<char> = line.chars().collect();
    let mut picked = 0;
    let mut next_allowed = 1;
    for (i, c) in chars.iter().enumerate() {
        if picked < 4 && i >= next_allowed && c.is_whitespace() && i + 1 < chars.len() {
            picked += 1;
            next_allowed = i + 2;
        }
    }
    picked == 4
}

pub(crate) fn validate_schedule(schedule: &str, path: &str, out: &mut Vec<FieldError>) {
    if !matches_schedule_pattern(schedule) {
        out.push(FieldError::new(
            path,
            Rule::BudgetSchedulePattern,
            format!(
                "schedule {schedule:?} must be a cron expression with five fields (for example \"0 9 * * mon-fri\") \
                 or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"
            ),
        ));
        return;
    }
    if let Err(e) = CronSchedule::parse(schedule) {
        out.push(FieldError::new(
            path,
            Rule::BudgetScheduleCron,
            format!("{e}; Karpenter would treat this budget as allowing no disruptions"),
        ));
    }
}

/// Budget `nodes`: `^((100|[0-9]{1,2})%|[0-9]+)$`.
pub(crate) fn matches_budget_nodes(s: &str) -> bool {
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    match s.strip_suffix('%') {
        Some(p) => p == "100" || (digits(p) && p.len() <= 2),
        None => digits(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in ["a", "example.com/a", "kubernetes.io/arch", "A_b.c-d", "karpenter.k8s.aws/instance-cpu"] {
            assert!(qualified_name_errors(ok).is_empty(), "{ok}: {:?}", qualified_name_errors(ok));
        }
        for bad in ["", "/a", "a/", "a/b/c", "-a", "a-", "Example.com/a", "exa_mple.com/a", &"a".repeat(64)] {
            assert!(!qualified_name_errors(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "a-b_c.d", &"a".repeat(63)] {
            assert!(label_value_errors(ok).is_empty(), "{ok}");
        }
        for bad in ["-a", "a b", "a/", &"a".repeat(64)] {
            assert!(!label_value_errors(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn budget_nodes_and_schedule_patterns() {
        for ok in ["0", "10", "100", "1000", "0%", "10%", "99%", "100%"] {
            assert!(matches_budget_nodes(ok), "{ok}");
        }
        for bad in ["", "%", "101%", "1000%", "-1", "10 %", "ten"] {
            assert!(!matches_budget_nodes(bad), "{bad}");
        }
        for ok in ["@daily", "@hourly", "0 9 * * mon-fri", "* * * * *"] {
            assert!(matches_schedule_pattern(ok), "{ok}");
        }
        for bad in ["", "@every 5m", "* * * *", "daily"] {
            assert!(!matches_schedule_pattern(bad), "{bad}");
        }
    }

    #[test]
    fn field_error_display() {
        let e = FieldError::new("spec.weight", Rule::WeightRange, "weight must be between 1 and 100, got 0");
        assert_eq!(e.to_string(), "spec.weight: weight must be between 1 and 100, got 0");
    }
}
