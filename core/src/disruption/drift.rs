//! Drift detection (upstream `nodeclaim/disruption/drift.go`, `nodepool/hash`, the AWS provider's
//! `IsDrifted`): a NodeClaim is drifted when
//! 1. its NodePool's template changed (static drift: the `karpenter.sh/nodepool-hash` annotation
//!    stamped at creation differs from the NodePool's hash now; the hash covers the template's
//!    labels, annotations, taints, startup taints, nodeClassRef, terminationGracePeriod and
//!    expireAfter, not requirements, resources, disruption, limits or weight);
//! 2. its labels no longer satisfy the NodePool's requirements (requirements drift);
//! 3. its EC2NodeClass changed: the AMI selection (`amiSelectorTerms`, `amiFamily`; upstream
//!    compares the instance's image with the AMIs the class resolves to now) or the rest of the
//!    class (upstream's EC2NodeClass hash).
//!
//! Hashes are FNV-1a over canonical JSON: change detection, not upstream's hashstructure values.
//! They carry a hash version of their own ([`HASH_VERSION`]) in upstream's version annotations, so
//! that upstream's mechanism for a changed hashing scheme applies between the two: a NodeClaim
//! whose version differs is never static-drifted, and is re-stamped (`crate::nodepool::hash`)
//! rather than replaced, whichever of the two controllers stamped it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::api::ec2nodeclass::EC2NodeClassSpec;
use crate::api::nodeclaim::NodeClaim;
use crate::api::nodepool::NodePool;
use crate::requirements::{AllowUndefined, Requirements};

/// upstream `karpenter.sh/nodepool-hash`.
pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
/// upstream `karpenter.sh/nodepool-hash-version` (`v3` at v1.14.1 for upstream's hashstructure).
pub const NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
/// upstream `karpenter.k8s.aws/ec2nodeclass-hash`.
pub const NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
/// upstream `karpenter.k8s.aws/ec2nodeclass-hash-version` (`v5` at v1.14.1).
pub const NODECLASS_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// The version our hashes are stamped with: not upstream's, since the values are not.
pub const HASH_VERSION: &str = "carpentry-fnv1a-v1";
/// The AMI selection a NodeClaim launched with (stands in for its `status.imageID`).
pub const IMAGE_HASH: &str = "carpentry.dev/image-hash";

/// Why a NodeClaim is drifted (upstream's `Drifted` condition reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum DriftReason {
    NodePoolDrifted,
    RequirementsDrifted,
    AMIDrift,
    NodeClassDrift,
}

impl std::fmt::Display for DriftReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DriftReason::NodePoolDrifted => "the NodePool's template changed",
            DriftReason::RequirementsDrifted => "the node's labels no longer meet the NodePool's requirements",
            DriftReason::AMIDrift => "the EC2NodeClass selects a different AMI",
            DriftReason::NodeClassDrift => "the EC2NodeClass changed",
        })
    }
}

impl DriftReason {
    /// The reason of the `Drifted` condition (upstream's, for the AWS provider's the class-wide
    /// `NodeClassDrift`).
    pub fn condition_reason(self) -> &'static str {
        match self {
            DriftReason::NodePoolDrifted => "NodePoolDrifted",
            DriftReason::RequirementsDrifted => "RequirementsDrifted",
            DriftReason::AMIDrift => "AMIDrift",
            DriftReason::NodeClassDrift => "NodeClassDrift",
        }
    }

    /// A `Drifted` condition's reason read back; the AWS provider's other reasons (subnets,
    /// security groups, capacity reservations) are the EC2NodeClass changing under the node.
    pub fn of_condition_reason(reason: Option<&str>) -> DriftReason {
        match reason {
            Some("NodePoolDrifted") => DriftReason::NodePoolDrifted,
            Some("RequirementsDrifted") => DriftReason::RequirementsDrifted,
            Some("AMIDrift") => DriftReason::AMIDrift,
            _ => DriftReason::NodeClassDrift,
        }
    }
}

fn fnv(value: &impl Serialize) -> String {
    let text = serde_json::to_string(value).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The NodePool's static hash.
pub fn nodepool_hash(np: &NodePool) -> String {
    let t = &np.spec.template;
    let mut taints = t.spec.taints.clone();
    taints.sort_by(|a, b| (&a.key, &a.value, &a.effect).cmp(&(&b.key, &b.value, &b.effect)));
    let mut startup = t.spec.startup_taints.clone();
    startup.sort_by(|a, b| (&a.key, &a.value, &a.effect).cmp(&(&b.key, &b.value, &b.effect)));
    let canonical = serde_json::json!({
        "labels": t.metadata.labels,
        "annotations": t.metadata.annotations,
        "taints": taints,
        "startupTaints": startup,
        "nodeClassRef": t.spec.node_class_ref,
        "terminationGracePeriod": t.spec.termination_grace_period,
        "expireAfter": t.spec.expire_after,
    });
    fnv(&canonical)
}

/// The EC2NodeClass's hash without its AMI selection (and without the selectors upstream leaves
/// out of its hash: subnets, security groups, capacity reservations).
pub fn nodeclass_hash(spec: &EC2NodeClassSpec) -> String {
    let mut v = serde_json::to_value(spec).unwrap_or_default();
    if let Some(map) = v.as_object_mut() {
        for k in [
            "amiSelectorTerms",
            "amiFamily",
            "subnetSelectorTerms",
            "securityGroupSelectorTerms",
            "capacityReservationSelectorTerms",
        ] {
            map.remove(k);
        }
    }
    fnv(&v)
}

/// The AMI selection of an EC2NodeClass.
pub fn image_hash(spec: &EC2NodeClassSpec) -> String {
    fnv(&serde_json::json!({"terms": spec.ami_selector_terms, "family": spec.ami_family}))
}

/// The annotations a NodeClaim is stamped with at creation.
pub fn stamps(np: &NodePool, nodeclass: &EC2NodeClassSpec) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NODEPOOL_HASH.to_string(), nodepool_hash(np)),
        (NODEPOOL_HASH_VERSION.to_string(), HASH_VERSION.to_string()),
        (NODECLASS_HASH.to_string(), nodeclass_hash(nodeclass)),
        (NODECLASS_HASH_VERSION.to_string(), HASH_VERSION.to_string()),
        (IMAGE_HASH.to_string(), image_hash(nodeclass)),
    ])
}

/// What a NodePool and its EC2NodeClass expect of their NodeClaims now: computed once and checked
/// against every NodeClaim (the hashes are the expensive part).
pub struct Expected {
    nodepool_hash: String,
    requirements: Option<Requirements>,
    image_hash: String,
    nodeclass_hash: String,
}

impl Expected {
    pub fn new(np: &NodePool, nodeclass: &EC2NodeClassSpec) -> Expected {
        Expected {
            nodepool_hash: nodepool_hash(np),
            requirements: Requirements::from_node_selector_requirements(&np.spec.template.spec.requirements).ok(),
            image_hash: image_hash(nodeclass),
            nodeclass_hash: nodeclass_hash(nodeclass),
        }
    }

    /// Whether (and why) a launched NodeClaim is drifted, checked in upstream's order. A hash is
    /// compared only when the NodeClaim's hash version is ours (upstream `areStaticFieldsDrifted`
    /// compares only equal versions).
    pub fn drifted(&self, nc: &NodeClaim) -> Option<DriftReason> {
        let stamp = |key: &str| nc.metadata.annotations.as_ref().and_then(|a| a.get(key));
        let ours = |version: &str| stamp(version).is_some_and(|v| v == HASH_VERSION);
        if ours(NODEPOOL_HASH_VERSION) && stamp(NODEPOOL_HASH).is_some_and(|h| *h != self.nodepool_hash) {
            return Some(DriftReason::NodePoolDrifted);
        }
        if let Some(pool) = &self.requirements {
            let none = BTreeMap::new();
            if Requirements::from_labels(nc.metadata.labels.as_ref().unwrap_or(&none))
                .compatible(pool, AllowUndefined::Nothing)
                .is_err()
            {
                return Some(DriftReason::RequirementsDrifted);
            }
        }
        if stamp(IMAGE_HASH).is_some_and(|h| *h != self.image_hash) {
            return Some(DriftReason::AMIDrift);
        }
        if ours(NODECLASS_HASH_VERSION) && stamp(NODECLASS_HASH).is_some_and(|h| *h != self.nodeclass_hash) {
            return Some(DriftReason::NodeClassDrift);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drifted(nc: &NodeClaim, np: &NodePool, nodeclass: &EC2NodeClassSpec) -> Option<DriftReason> {
        Expected::new(np, nodeclass).drifted(nc)
    }

    fn load(text: &str) -> crate::manifest::Manifests {
        crate::manifest::load(text).unwrap()
    }

    const NP: &str = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]\n";

    #[test]
    fn what_drifts_and_what_does_not() {
        let np = load(NP).nodepools.remove(0);
        let class = EC2NodeClassSpec::default();
        let mut nc = crate::api::nodeclaim::NodeClaim::new("nc", Default::default());
        nc.metadata.annotations = Some(stamps(&np, &class));
        nc.metadata.labels =
            Some(BTreeMap::from([("karpenter.sh/capacity-type".to_string(), "on-demand".to_string())]));
        assert_eq!(drifted(&nc, &np, &class), None);
        // Requirements, limits, weight and disruption are not part of the template hash…
        let mut edited = np.clone();
        edited.spec.weight = Some(50);
        assert_eq!(drifted(&nc, &edited, &class), None);
        // …but a requirement the node no longer meets is requirements drift,
        let spot = load(&NP.replace("values: [on-demand]", "values: [spot]")).nodepools.remove(0);
        assert_eq!(drifted(&nc, &spot, &class), Some(DriftReason::RequirementsDrifted));
        // a template label is static drift,
        let mut labelled = np.clone();
        labelled.spec.template.metadata.labels.insert("team".into(), "a".into());
        assert_eq!(drifted(&nc, &labelled, &class), Some(DriftReason::NodePoolDrifted));
        // and a new AMI pin is AMI drift.
        let mut pinned = class.clone();
        pinned.ami_selector_terms[0].alias = Some("al2023@v20260101".into());
        assert_eq!(drifted(&nc, &np, &pinned), Some(DriftReason::AMIDrift));
        let mut other = class.clone();
        other.user_data = Some("#!/bin/bash".into());
        assert_eq!(drifted(&nc, &np, &other), Some(DriftReason::NodeClassDrift));
        // Hashes of another version (upstream's hashstructure, `v3` and `v5`) are never compared.
        let annotations = nc.metadata.annotations.get_or_insert_with(Default::default);
        annotations.insert(NODEPOOL_HASH_VERSION.into(), "v3".into());
        annotations.insert(NODECLASS_HASH_VERSION.into(), "v5".into());
        assert_eq!(drifted(&nc, &labelled, &class), None);
        assert_eq!(drifted(&nc, &np, &other), None);
    }
}
