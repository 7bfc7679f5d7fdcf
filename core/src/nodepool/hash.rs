//! upstream `nodepool/hash`: the NodePool carries its template hash and the hash version
//! (`karpenter.sh/nodepool-hash`, `-hash-version`). When its version is not ours (upstream's
//! Karpenter stamped it, or an older scheme), each of its NodeClaims of another version is
//! re-stamped with our version and — unless it has a `Drifted` condition, whose truth cannot be
//! judged across schemes — with the NodePool's hash now. So moving a cluster between upstream
//! Karpenter and this controller drifts nothing by itself.

use std::collections::BTreeMap;

use crate::api::nodeclaim::conditions;
use crate::api::{NodeClaim, NodePool};
use crate::disruption::drift::{nodepool_hash, HASH_VERSION, NODEPOOL_HASH, NODEPOOL_HASH_VERSION};

/// The annotations to merge into an object.
pub type Annotations = BTreeMap<String, String>;

/// The hash annotations the NodePool should carry, when it does not carry them yet.
pub fn nodepool_annotations(nodepool: &NodePool) -> Option<Annotations> {
    let want = Annotations::from([
        (NODEPOOL_HASH.to_string(), nodepool_hash(nodepool)),
        (NODEPOOL_HASH_VERSION.to_string(), HASH_VERSION.to_string()),
    ]);
    let have = nodepool.metadata.annotations.as_ref();
    let carries = want.iter().all(|(k, v)| have.and_then(|a| a.get(k)) == Some(v));
    (!carries).then_some(want)
}

/// The NodeClaims of `nodepool` to re-stamp (name, annotations to merge), while the NodePool's
/// own version is not ours.
pub fn restamps<'a>(nodepool: &NodePool, nodeclaims: &'a [NodeClaim]) -> Vec<(&'a str, Annotations)> {
    let version_of =
        |m: &Option<BTreeMap<String, String>>| m.as_ref().and_then(|a| a.get(NODEPOOL_HASH_VERSION)).cloned();
    if version_of(&nodepool.metadata.annotations).as_deref() == Some(HASH_VERSION) {
        return Vec::new();
    }
    let hash = nodepool_hash(nodepool);
    nodeclaims
        .iter()
        .filter(|nc| {
            nc.metadata.labels.as_ref().and_then(|l| l.get(crate::labels::NODEPOOL)).map(String::as_str)
                == Some(nodepool.name())
        })
        .filter(|nc| version_of(&nc.metadata.annotations).as_deref() != Some(HASH_VERSION))
        .map(|nc| {
            let mut stamp = Annotations::from([(NODEPOOL_HASH_VERSION.to_string(), HASH_VERSION.to_string())]);
            let has_drifted = nc
                .status
                .as_ref()
                .is_some_and(|s| crate::api::find_condition(&s.conditions, conditions::DRIFTED).is_some());
            if !has_drifted {
                stamp.insert(NODEPOOL_HASH.to_string(), hash.clone());
            }
            (nc.name(), stamp)
        })
        .collect()
}
