//! Well-known and restricted labels (upstream `pkg/apis/v1/labels.go`, as of v1.14.1, with the AWS provider's
//! additions from karpenter-provider-aws `pkg/apis/v1/labels.go` applied, exactly as importing the provider does
//! upstream).
//!
//! Upstream keeps these as mutable globals that provider packages extend in `init()`. Here the union is fixed at
//! compile time: core keys plus [`aws::WELL_KNOWN_LABELS`], restricted domains `karpenter.sh` plus the provider's
//! `karpenter.k8s.aws`, and the restricted key `kubernetes.io/hostname` (the v1.10+ rules, PR #2586; before v1.10
//! `kubernetes.io` and `k8s.io` were restricted too).

pub mod aws;
pub(crate) mod selector;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------------------------

/// `karpenter.sh/nodepool`: the NodePool that owns a node. Set by Karpenter; users may select on it but not set it.
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
/// Annotation on a NodeClaim whose NodePool's `minValues` were relaxed to plan it.
pub const NODECLAIM_MIN_VALUES_RELAXED: &str = "karpenter.sh/nodeclaim-min-values-relaxed";
/// `topology.kubernetes.io/zone`.
pub const TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
pub const TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
/// `node.kubernetes.io/instance-type`.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// `kubernetes.io/arch`.
pub const ARCH: &str = "kubernetes.io/arch";
/// `kubernetes.io/os`.
pub const OS: &str = "kubernetes.io/os";
/// `karpenter.sh/capacity-type` (`on-demand`, `spot`, `reserved`).
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// `node.kubernetes.io/windows-build`.
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// `kubernetes.io/hostname`: restricted (never well-known), Karpenter cannot know it before launch.
pub const HOSTNAME: &str = "kubernetes.io/hostname";

/// `karpenter.sh/do-not-disrupt`: on a pod, `"true"` or a duration, it blocks voluntary disruption
/// of the pod's node; on a node, `"true"` blocks the node's.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// `karpenter.sh/initialized` (set on the node once it is initialized).
pub const NODE_INITIALIZED: &str = "karpenter.sh/initialized";
/// `karpenter.sh/registered` (set on the node once it registered).
pub const NODE_REGISTERED: &str = "karpenter.sh/registered";
/// `karpenter.sh/do-not-sync-taints`.
pub const NODE_DO_NOT_SYNC_TAINTS: &str = "karpenter.sh/do-not-sync-taints";
/// upstream `v1.TerminationFinalizer`: on NodeClaims and their Nodes, so that Karpenter drains the
/// node and terminates the instance before either object goes.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// The annotation the PersistentVolume controller sets on a claim once it has bound it; without it
/// kube-scheduler (and so Karpenter) treats a claim with a `volumeName` as unbound.
pub const PV_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The annotations that mark the default StorageClass (GA and beta).
pub const DEFAULT_STORAGE_CLASS: [&str; 2] =
    ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"];
/// A pod's deletion cost (the ReplicaSet controller's), which disruption's eviction cost weighs.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Every annotation outside [`READ_ANNOTATION_DOMAINS`] that the engine reads.
pub const READ_ANNOTATIONS: [&str; 4] =
    [PV_BIND_COMPLETED, DEFAULT_STORAGE_CLASS[0], DEFAULT_STORAGE_CLASS[1], POD_DELETION_COST];
/// The DNS domains (and their subdomains) whose annotations the engine may read: Karpenter's, its AWS
/// provider's and carpentry's own.
pub const READ_ANNOTATION_DOMAINS: [&str; 3] = ["karpenter.sh", "karpenter.k8s.aws", "carpentry.dev"];

/// Whether the engine may read the annotation `key` (so a redacted copy of the cluster must keep it
/// to answer as the cluster does).
pub fn is_read_annotation(key: &str) -> bool {
    if READ_ANNOTATIONS.contains(&key) {
        return true;
    }
    let Some((domain, _)) = key.split_once('/') else { return false };
    READ_ANNOTATION_DOMAINS.iter().any(|d| domain == *d || domain.strip_suffix(d).is_some_and(|sub| sub.ends_with('.')))
}

/// Beta aliases, normalised on requirement construction (upstream `NormalizedLabels`).
pub const FAILURE_DOMAIN_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// `failure-domain.beta.kubernetes.io/region`.
pub const FAILURE_DOMAIN_BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
/// `beta.kubernetes.io/arch`.
pub const BETA_ARCH: &str = "beta.kubernetes.io/arch";
/// `beta.kubernetes.io/os`.
pub const BETA_OS: &str = "beta.kubernetes.io/os";
/// `beta.kubernetes.io/instance-type`.
pub const BETA_INSTANCE_TYPE: &str = "beta.kubernetes.io/instance-type";
/// The EBS CSI driver's zone key, which the AWS provider's operator adds to `NormalizedLabels` at start-up
/// (karpenter-provider-aws `pkg/operator/operator.go`), so volume topology on it constrains the zone.
pub const EBS_CSI_ZONE: &str = "topology.ebs.csi.aws.com/zone";

// ---------------------------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------------------------

/// Capacity type `on-demand`.
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
/// Capacity type `spot`.
pub const CAPACITY_TYPE_SPOT: &str = "spot";
/// Capacity type `reserved`.
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";
/// All capacity types, sorted.
pub const CAPACITY_TYPES: &[&str] = &[CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT];

/// Architecture `amd64`.
pub const ARCH_AMD64: &str = "amd64";
/// Architecture `arm64`.
pub const ARCH_ARM64: &str = "arm64";

/// AWS `karpenter.k8s.aws/instance-tenancy`, whose known values the provider registers.
const AWS_INSTANCE_TENANCY: &str = "karpenter.k8s.aws/instance-tenancy";
/// AWS tenancy values (`ec2types.TenancyDedicated`, `TenancyDefault`), sorted.
const AWS_TENANCIES: &[&str] = &["dedicated", "default"];

// ---------------------------------------------------------------------------------------------------------------
// Sets
// ---------------------------------------------------------------------------------------------------------------

/// Core well-known labels in upstream's declaration order (also the order the typo hint tries them).
pub const CORE_WELL_KNOWN_LABELS: &[&str] =
    &[NODEPOOL, TOPOLOGY_ZONE, TOPOLOGY_REGION, INSTANCE_TYPE, ARCH, OS, CAPACITY_TYPE, WINDOWS_BUILD];

/// Restricted label domains: core's `karpenter.sh` plus the AWS provider's `karpenter.k8s.aws`. Sorted.
pub const RESTRICTED_LABEL_DOMAINS: &[&str] = &["karpenter.k8s.aws", "karpenter.sh"];

/// Restricted label keys (upstream `RestrictedLabels`).
pub const RESTRICTED_LABELS: &[&str] = &[HOSTNAME];

/// Requirement keys upstream adds to every NodeClaimTemplate only for DaemonSet scheduling simulation
/// (`schedulingSimulationKeys`); they never become NodeClaim labels or NodeClaim requirements.
pub const SCHEDULING_SIMULATION_KEYS: &[&str] = &[NODE_INITIALIZED, NODE_REGISTERED];

/// Alias → stable key (upstream `NormalizedLabels`: core's beta aliases plus the AWS operator's EBS CSI zone key).
pub const NORMALIZED_LABELS: &[(&str, &str)] = &[
    (FAILURE_DOMAIN_BETA_ZONE, TOPOLOGY_ZONE),
    (BETA_ARCH, ARCH),
    (BETA_OS, OS),
    (BETA_INSTANCE_TYPE, INSTANCE_TYPE),
    (FAILURE_DOMAIN_BETA_REGION, TOPOLOGY_REGION),
    (EBS_CSI_ZONE, TOPOLOGY_ZONE),
];

/// All well-known labels: core plus the AWS provider's (`karpenter.k8s.aws/*`, `topology.k8s.aws/zone-id`, ...).
/// These may be used by NodePools and pods to narrow the values a cloud provider offers, and they are the set that
/// `AllowUndefinedWellKnownLabels` tolerates when undefined.
pub fn well_known_labels() -> &'static BTreeSet<&'static str> {
    static SET: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| CORE_WELL_KNOWN_LABELS.iter().chain(aws::WELL_KNOWN_LABELS.iter()).copied().collect())
}

/// The well-known labels in the deterministic order the typo hint tries them: core keys in upstream's declaration
/// order, then every other well-known key sorted. (Upstream iterates a Go set, so its choice among several
/// matching keys is random; this order makes `"zone"` hint `topology.kubernetes.io/zone`, not
/// `topology.k8s.aws/zone-id`.)
pub fn well_known_labels_hint_order() -> &'static [&'static str] {
    static ORDER: OnceLock<Vec<&'static str>> = OnceLock::new();
    ORDER.get_or_init(|| {
        let mut order: Vec<&'static str> = CORE_WELL_KNOWN_LABELS.to_vec();
        order.extend(well_known_labels().iter().filter(|k| !CORE_WELL_KNOWN_LABELS.contains(k)));
        order
    })
}

/// `key` as a `'static` string if it is one of the keys carpentry names (well-known, restricted,
/// scheduling-simulation and alias keys, `karpenter.sh/do-not-sync-taints`), so requirements can hold it without
/// allocating or reference counting; `None` for any other key.
pub(crate) fn static_key(key: &str) -> Option<&'static str> {
    static SET: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| {
        let mut set = well_known_labels().clone();
        set.extend(RESTRICTED_LABELS);
        set.extend(SCHEDULING_SIMULATION_KEYS);
        set.extend(NORMALIZED_LABELS.iter().flat_map(|(alias, stable)| [*alias, *stable]));
        set.insert(NODE_DO_NOT_SYNC_TAINTS);
        set
    })
    .get(key)
    .copied()
}

/// True if `key` is a well-known label.
pub fn is_well_known(key: &str) -> bool {
    well_known_labels().contains(key)
}

/// The known values of a well-known key, sorted, if upstream registers any (`WellKnownValuesForRequirements`):
/// `karpenter.sh/capacity-type` and, from the AWS provider, `karpenter.k8s.aws/instance-tenancy`.
pub fn well_known_values(key: &str) -> Option<&'static [&'static str]> {
    match key {
        CAPACITY_TYPE => Some(CAPACITY_TYPES),
        AWS_INSTANCE_TENANCY => Some(AWS_TENANCIES),
        _ => None,
    }
}

/// Maps an alias ([`NORMALIZED_LABELS`]) to its stable key; any other key is returned unchanged.
pub fn normalize_key(key: &str) -> &str {
    NORMALIZED_LABELS.iter().find(|(alias, _)| *alias == key).map_or(key, |(_, stable)| stable)
}

/// The domain (prefix) of a label key: the text before the first `/`, or `""` when there is none.
pub fn label_domain(key: &str) -> &str {
    key.split_once('/').map_or("", |(domain, _)| domain)
}

/// The name part of a key: the text after the first `/`, or the whole key when there is none.
fn label_suffix(key: &str) -> &str {
    key.split_once('/').map_or(key, |(_, name)| name)
}

/// Upstream's hint for a key that has no known values: the first candidate that contains `key`, or that ends with
/// the name part of `key` (the text after the first `/`). Candidates are tried in the order given, so callers pass
/// [`well_known_labels_hint_order`] (when undefined well-known labels are allowed) and then the keys already defined.
/// The result is the suggested key; the message renders it as ` (typo of "X"?)`.
pub fn typo_hint<'a, I>(key: &str, known_keys: I) -> Option<String>
where
    I: IntoIterator<Item = &'a str>,
{
    let suffix = label_suffix(key);
    known_keys.into_iter().find(|known| known.contains(key) || known.ends_with(suffix)).map(str::to_string)
}

// ---------------------------------------------------------------------------------------------------------------
// Restricted labels
// ---------------------------------------------------------------------------------------------------------------

/// Where a label key is being used; the rules differ slightly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabelUse {
    /// `NodePool.spec.template.metadata.labels`.
    NodePoolTemplateLabel,
    /// `NodePool.spec.template.spec.requirements[].key`.
    NodePoolRequirement,
    /// A pod's `nodeSelector` key or required node-affinity expression key.
    PodRequirement,
}

impl fmt::Display for LabelUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LabelUse::NodePoolTemplateLabel => "nodepool template labels",
            LabelUse::NodePoolRequirement => "nodepool requirements",
            LabelUse::PodRequirement => "pod requirements",
        })
    }
}

/// Which restriction a key broke.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RestrictedLabelRule {
    /// The key's domain is, or is a subdomain of, a restricted domain (`karpenter.sh`, `karpenter.k8s.aws`) and the
    /// key is not well-known.
    RestrictedDomain { domain: &'static str },
    /// The key is in [`RESTRICTED_LABELS`] (`kubernetes.io/hostname`).
    RestrictedKey,
    /// `karpenter.sh/nodepool` may not be set by a NodePool (label or requirement): Karpenter sets it.
    NodePoolKey,
}

/// A label key that may not be used where it was used.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RestrictedLabelError {
    /// The offending key, as checked (after beta-alias normalisation where upstream normalises).
    pub key: String,
    pub rule: RestrictedLabelRule,
    /// Where the key was used; `None` for the context-free [`is_restricted_label`].
    pub used_in: Option<LabelUse>,
}

impl fmt::Display for RestrictedLabelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rule {
            // Upstream `IsRestrictedLabel` wording; Go prints the sorted lists as `[a b c]`.
            RestrictedLabelRule::RestrictedDomain { .. } | RestrictedLabelRule::RestrictedKey => {
                write!(
                    f,
                    "using label {} is not allowed as it might interfere with the internal provisioning logic; \
                     specify a well known label: [",
                    self.key
                )?;
                write_space_separated(f, well_known_labels().iter().copied())?;
                f.write_str("], or a custom label that does not use a restricted domain: [")?;
                write_space_separated(f, RESTRICTED_LABEL_DOMAINS.iter().copied())?;
                f.write_str("]")
            }
            // The CEL rule's wording, which is what the API server returns first.
            RestrictedLabelRule::NodePoolKey => write!(f, "label {:?} is restricted", self.key),
        }
    }
}

impl std::error::Error for RestrictedLabelError {}

fn write_space_separated<'a>(f: &mut fmt::Formatter<'_>, items: impl Iterator<Item = &'a str>) -> fmt::Result {
    for (i, item) in items.enumerate() {
        if i > 0 {
            f.write_str(" ")?;
        }
        f.write_str(item)?;
    }
    Ok(())
}

/// Upstream `IsRestrictedLabel`: well-known keys are allowed; otherwise a key whose domain equals, or ends with
/// `.` + a restricted domain is rejected, and `kubernetes.io/hostname` is rejected. Everything else, including
/// `kubernetes.io` / `k8s.io` keys such as `node-role.kubernetes.io/x` (allowed since v1.10), passes.
pub fn is_restricted_label(key: &str) -> Result<(), RestrictedLabelError> {
    if is_well_known(key) {
        return Ok(());
    }
    let domain = label_domain(key);
    for restricted in RESTRICTED_LABEL_DOMAINS {
        let subdomain = domain.len() > restricted.len()
            && domain.ends_with(restricted)
            && domain.as_bytes()[domain.len() - restricted.len() - 1] == b'.';
        if domain == *restricted || subdomain {
            return Err(RestrictedLabelError {
                key: key.to_string(),
                rule: RestrictedLabelRule::RestrictedDomain { domain: restricted },
                used_in: None,
            });
        }
    }
    if RESTRICTED_LABELS.contains(&key) {
        return Err(RestrictedLabelError {
            key: key.to_string(),
            rule: RestrictedLabelRule::RestrictedKey,
            used_in: None,
        });
    }
    Ok(())
}

/// True if the key is restricted (see [`is_restricted_label`]).
pub fn is_restricted(key: &str) -> bool {
    is_restricted_label(key).is_err()
}

/// NodePool template labels (upstream `NodeClaimTemplate.validateLabels`): not `karpenter.sh/nodepool`, and not a
/// restricted label. So `karpenter.sh/capacity-type` is the only `karpenter.sh` key a template may set, and
/// `kubernetes.io/hostname` is rejected. The key is checked as written (no alias normalisation).
pub fn check_nodepool_template_label(key: &str) -> Result<(), RestrictedLabelError> {
    check_in(key, LabelUse::NodePoolTemplateLabel)
}

/// NodePool requirement keys (upstream `validateRequirementsNodePoolKeyDoesNotExist` plus `ValidateRequirement`):
/// not `karpenter.sh/nodepool`, and (after alias normalisation) not a restricted label.
pub fn check_nodepool_requirement_key(key: &str) -> Result<(), RestrictedLabelError> {
    check_in(key, LabelUse::NodePoolRequirement)
}

/// Pod requirement keys (nodeSelector and required node-affinity expressions; upstream `ValidateRequirement` from
/// the provisioner's pod validation): after alias normalisation, not a restricted label. Pods may therefore use
/// `karpenter.sh/nodepool` and `karpenter.sh/capacity-type` but no other `karpenter.sh/*` key, and not the hostname.
/// Preferred terms are not validated upstream.
pub fn check_pod_requirement_key(key: &str) -> Result<(), RestrictedLabelError> {
    check_in(key, LabelUse::PodRequirement)
}

/// The rule for `key` used in `used_in`.
pub fn check_in(key: &str, used_in: LabelUse) -> Result<(), RestrictedLabelError> {
    let checked = match used_in {
        LabelUse::NodePoolTemplateLabel => key,
        LabelUse::NodePoolRequirement | LabelUse::PodRequirement => normalize_key(key),
    };
    if checked == NODEPOOL && used_in != LabelUse::PodRequirement {
        return Err(RestrictedLabelError {
            key: checked.to_string(),
            rule: RestrictedLabelRule::NodePoolKey,
            used_in: Some(used_in),
        });
    }
    is_restricted_label(checked).map_err(|e| RestrictedLabelError { used_in: Some(used_in), ..e })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_read_by_domain_and_by_use() {
        for kept in [
            "karpenter.sh/do-not-disrupt",
            "karpenter.k8s.aws/ec2nodeclass-hash",
            "compatibility.karpenter.sh/v1beta1-nodeclass-reference",
            "carpentry.dev/note",
            "pv.kubernetes.io/bind-completed",
            "controller.kubernetes.io/pod-deletion-cost",
        ] {
            assert!(is_read_annotation(kept), "{kept}");
        }
        for dropped in [
            "kubectl.kubernetes.io/last-applied-configuration",
            "notkarpenter.sh/x",
            "karpenter.sh.evil.com/x",
            "example.com/karpenter.sh",
            "karpenter.sh",
        ] {
            assert!(!is_read_annotation(dropped), "{dropped}");
        }
    }

    #[test]
    fn well_known_set_contains_core_and_aws() {
        let set = well_known_labels();
        for key in CORE_WELL_KNOWN_LABELS {
            assert!(set.contains(key), "{key}");
        }
        assert!(!set.contains(HOSTNAME));
        assert!(set.contains("karpenter.k8s.aws/instance-family"));
        assert!(set.contains("karpenter.k8s.aws/instance-cpu"));
        assert!(set.contains("karpenter.k8s.aws/capacity-reservation-id"));
        assert!(set.contains("topology.k8s.aws/zone-id"));
        assert!(!set.contains("karpenter.k8s.aws/ec2nodeclass"));
        assert!(!set.contains(NODE_INITIALIZED));
        // Every AWS key is in a known domain.
        for key in aws::WELL_KNOWN_LABELS {
            let domain = label_domain(key);
            assert!(
                ["karpenter.k8s.aws", "topology.k8s.aws", "node.kubernetes.io"].contains(&domain),
                "unexpected AWS well-known key {key}"
            );
        }
    }

    #[test]
    fn hint_order_starts_with_core_and_has_no_duplicates() {
        let order = well_known_labels_hint_order();
        assert_eq!(&order[..CORE_WELL_KNOWN_LABELS.len()], CORE_WELL_KNOWN_LABELS);
        assert_eq!(order.len(), well_known_labels().len());
        let unique: BTreeSet<_> = order.iter().collect();
        assert_eq!(unique.len(), order.len());
    }

    #[test]
    fn normalizes_beta_aliases() {
        let cases = [
            ("failure-domain.beta.kubernetes.io/zone", TOPOLOGY_ZONE),
            ("failure-domain.beta.kubernetes.io/region", TOPOLOGY_REGION),
            ("beta.kubernetes.io/arch", ARCH),
            ("beta.kubernetes.io/os", OS),
            ("beta.kubernetes.io/instance-type", INSTANCE_TYPE),
            ("topology.ebs.csi.aws.com/zone", TOPOLOGY_ZONE),
            (TOPOLOGY_ZONE, TOPOLOGY_ZONE),
            ("example.com/team", "example.com/team"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(normalize_key(input), want, "{input}");
        }
    }

    #[test]
    fn label_domains() {
        assert_eq!(label_domain("karpenter.sh/nodepool"), "karpenter.sh");
        assert_eq!(label_domain("a/b/c"), "a");
        assert_eq!(label_domain("plain"), "");
        assert_eq!(label_domain("/x"), "");
    }

    #[test]
    fn restricted_label_truth_table() {
        // (key, restricted?)
        let cases = [
            // well-known keys are always allowed, even inside restricted domains
            (NODEPOOL, false),
            (CAPACITY_TYPE, false),
            (TOPOLOGY_ZONE, false),
            (INSTANCE_TYPE, false),
            (WINDOWS_BUILD, false),
            ("karpenter.k8s.aws/instance-family", false),
            ("karpenter.k8s.aws/instance-tenancy", false),
            ("topology.k8s.aws/zone-id", false),
            // restricted domains
            ("karpenter.sh/custom", true),
            (NODE_INITIALIZED, true),
            (NODE_REGISTERED, true),
            ("sub.karpenter.sh/custom", true),
            ("karpenter.k8s.aws/ec2nodeclass", true),
            ("karpenter.k8s.aws/anything", true),
            ("x.karpenter.k8s.aws/anything", true),
            // only exact domain or `.`-subdomain: a domain that merely ends with the text is allowed
            ("notkarpenter.sh/custom", false),
            ("karpenter.sh.example.com/custom", false),
            // restricted key
            (HOSTNAME, true),
            // allowed since v1.10
            ("node-role.kubernetes.io/worker", false),
            ("kubernetes.io/custom", false),
            ("k8s.io/custom", false),
            ("node.kubernetes.io/custom", false),
            ("kops.k8s.io/instancegroup", false),
            // custom keys and keys without a domain
            ("example.com/team", false),
            ("team", false),
            ("karpenter.sh", false),
            ("", false),
            // the beta aliases are not normalised by the context-free check
            ("beta.kubernetes.io/arch", false),
        ];
        for (key, restricted) in cases {
            assert_eq!(is_restricted_label(key).is_err(), restricted, "{key}");
        }
    }

    #[test]
    fn restricted_label_rules_and_message() {
        let err = is_restricted_label("karpenter.sh/custom").unwrap_err();
        assert_eq!(err.rule, RestrictedLabelRule::RestrictedDomain { domain: "karpenter.sh" });
        let msg = err.to_string();
        assert!(msg.starts_with(
            "using label karpenter.sh/custom is not allowed as it might interfere with the internal provisioning \
             logic; specify a well known label: [karpenter.k8s.aws/"
        ));
        assert!(msg.ends_with(
            "topology.kubernetes.io/region topology.kubernetes.io/zone], or a custom label that does not use a \
             restricted domain: [karpenter.k8s.aws karpenter.sh]"
        ));
        let err = is_restricted_label("x.karpenter.k8s.aws/y").unwrap_err();
        assert_eq!(err.rule, RestrictedLabelRule::RestrictedDomain { domain: "karpenter.k8s.aws" });
        assert_eq!(is_restricted_label(HOSTNAME).unwrap_err().rule, RestrictedLabelRule::RestrictedKey);
    }

    #[test]
    fn per_use_rules() {
        use LabelUse::*;
        // (key, use, expected rule or None when allowed)
        let cases: &[(&str, LabelUse, Option<RestrictedLabelRule>)] = &[
            (NODEPOOL, NodePoolTemplateLabel, Some(RestrictedLabelRule::NodePoolKey)),
            (NODEPOOL, NodePoolRequirement, Some(RestrictedLabelRule::NodePoolKey)),
            (NODEPOOL, PodRequirement, None),
            (CAPACITY_TYPE, NodePoolTemplateLabel, None),
            (CAPACITY_TYPE, NodePoolRequirement, None),
            (CAPACITY_TYPE, PodRequirement, None),
            (HOSTNAME, NodePoolTemplateLabel, Some(RestrictedLabelRule::RestrictedKey)),
            (HOSTNAME, NodePoolRequirement, Some(RestrictedLabelRule::RestrictedKey)),
            (HOSTNAME, PodRequirement, Some(RestrictedLabelRule::RestrictedKey)),
            (
                "karpenter.sh/foo",
                NodePoolTemplateLabel,
                Some(RestrictedLabelRule::RestrictedDomain { domain: "karpenter.sh" }),
            ),
            (
                "karpenter.sh/foo",
                NodePoolRequirement,
                Some(RestrictedLabelRule::RestrictedDomain { domain: "karpenter.sh" }),
            ),
            (
                "karpenter.sh/foo",
                PodRequirement,
                Some(RestrictedLabelRule::RestrictedDomain { domain: "karpenter.sh" }),
            ),
            (
                "karpenter.k8s.aws/ec2nodeclass",
                NodePoolTemplateLabel,
                Some(RestrictedLabelRule::RestrictedDomain { domain: "karpenter.k8s.aws" }),
            ),
            ("karpenter.k8s.aws/instance-family", PodRequirement, None),
            ("node-role.kubernetes.io/worker", NodePoolTemplateLabel, None),
            ("example.com/team", PodRequirement, None),
            (TOPOLOGY_ZONE, NodePoolTemplateLabel, None),
            // aliases are normalised for requirements, so the alias of a well-known key is allowed
            ("beta.kubernetes.io/arch", NodePoolRequirement, None),
            ("failure-domain.beta.kubernetes.io/zone", PodRequirement, None),
        ];
        for (key, used_in, want) in cases {
            let got = check_in(key, *used_in);
            assert_eq!(got.as_ref().err().map(|e| e.rule.clone()), *want, "{key} in {used_in}");
            if let Err(e) = got {
                assert_eq!(e.used_in, Some(*used_in));
            }
        }
        assert_eq!(
            check_nodepool_template_label(NODEPOOL).unwrap_err().to_string(),
            r#"label "karpenter.sh/nodepool" is restricted"#
        );
        assert!(check_nodepool_requirement_key("karpenter.sh/registered").is_err());
        assert!(check_pod_requirement_key(NODEPOOL).is_ok());
    }

    #[test]
    fn well_known_value_sets() {
        assert_eq!(well_known_values(CAPACITY_TYPE), Some(&["on-demand", "reserved", "spot"][..]));
        assert_eq!(well_known_values("karpenter.k8s.aws/instance-tenancy"), Some(&["dedicated", "default"][..]));
        assert_eq!(well_known_values(TOPOLOGY_ZONE), None);
    }

    #[test]
    fn typo_hints_from_upstream_tests() {
        // Truncations and typos of well-known keys (upstream requirements_test.go "Error Messages").
        let cases = [
            ("zone", Some(TOPOLOGY_ZONE)),
            ("region", Some(TOPOLOGY_REGION)),
            ("nodepool", Some(NODEPOOL)),
            ("instance-type", Some(INSTANCE_TYPE)),
            ("arch", Some(ARCH)),
            ("capacity-type", Some(CAPACITY_TYPE)),
            ("topology.kubernetesio/zone", Some(TOPOLOGY_ZONE)),
            ("node.io/zone", Some(TOPOLOGY_ZONE)),
            ("topology.kubernetes.io/regio", Some(TOPOLOGY_REGION)),
            ("node.kubernetes.io/region", Some(TOPOLOGY_REGION)),
            ("karpenter/nodepool", Some(NODEPOOL)),
            ("os", Some(OS)),
            ("deployment", None),
            // AWS keys are tried after the core keys
            ("instance-family", Some("karpenter.k8s.aws/instance-family")),
            ("zone-id", Some("topology.k8s.aws/zone-id")),
        ];
        for (key, want) in cases {
            assert_eq!(typo_hint(key, well_known_labels_hint_order().iter().copied()).as_deref(), want, "{key}");
        }
        // Against custom keys, in the order given.
        assert_eq!(typo_hint("team", ["example.com/team", "other/team"]).as_deref(), Some("example.com/team"));
        assert_eq!(typo_hint("exmple.com/team", ["example.com/team"]).as_deref(), Some("example.com/team"));
        assert_eq!(typo_hint("x", std::iter::empty()), None);
    }
}
