//! The instance profile an EC2NodeClass's nodes run with (upstream karpenter-provider-aws v1.14.1
//! `pkg/controllers/nodeclass/instanceprofile.go`, `pkg/providers/instanceprofile/instanceprofile.go`,
//! `pkg/apis/v1/ec2nodeclass.go` `InstanceProfileName`, `LegacyInstanceProfileName`,
//! `InstanceProfileTags`), and which of the profiles Karpenter made are to be deleted: those under
//! a deleted NodeClass's path (`pkg/controllers/nodeclass/controller.go` `finalize`) and those
//! nothing uses any more (`pkg/controllers/nodeclass/garbagecollection/controller.go`).
//!
//! With `spec.instanceProfile` the profile is used as given. With `spec.role` Karpenter owns one:
//! it is kept while it holds that role, and another is made when the role changes, under the IAM
//! path `/karpenter/<region>/<cluster>/<nodeclass-uid>/`, tagged for the cluster, the NodeClass and
//! the region.
//!
//! Divergence (docs/divergences.md): upstream names a new profile `<cluster>_<hash of region,
//! NodeClass name and a random UUID>` and so needs a recreation cache and a delete-on-failure to
//! keep retries from making more; carpentry hashes the NodeClass's UID and role where upstream
//! hashes the UUID, so every retry and every replica reaches the same profile. A role given with
//! an IAM path (`path/name`) is compared by its name, as IAM reports it; upstream compares the
//! whole string and so makes a new profile on every pass for such a role.

use std::collections::{BTreeMap, BTreeSet};

use super::nodeclass::LookupError;
use crate::api::{EC2NodeClass, NodeClaim};
use crate::labels::{self, aws};

/// upstream `v1.AnnotationInstanceProfile`: on each NodeClaim, the profile it launched with.
pub const INSTANCE_PROFILE_ANNOTATION: &str = "karpenter.k8s.aws/instance-profile-name";

/// upstream `instanceprofile.garbagecollection` runs every 30 minutes.
pub const GARBAGE_COLLECTION_SECONDS: i64 = 30 * 60;
/// upstream `ProtectedProfilesTTL`: a profile a NodeClass just made or moved away from is not
/// collected for an hour.
pub const PROTECTED_SECONDS: u64 = 60 * 60;

/// 64-bit FNV-1, the hash `hashstructure` (FormatV2) takes of a string, which upstream's profile
/// names carry in decimal.
fn fnv1_64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        hash ^= u64::from(*b);
    }
    hash
}

/// The IAM path under which Karpenter makes every profile of the cluster.
pub fn cluster_path(region: &str, cluster: &str) -> String {
    format!("/karpenter/{region}/{cluster}/")
}

/// The IAM path of the profiles Karpenter makes for the NodeClass with `uid`.
pub fn nodeclass_path(region: &str, cluster: &str, uid: &str) -> String {
    format!("/karpenter/{region}/{cluster}/{uid}/")
}

/// The name upstream gave a NodeClass's profile before it added the UUID (still deleted with
/// the NodeClass, so that a cluster moved from an older Karpenter leaves none behind).
pub fn legacy_profile_name(cluster: &str, region: &str, class: &EC2NodeClass) -> String {
    let name = class.metadata.name.as_deref().unwrap_or_default();
    format!("{cluster}_{}", fnv1_64(format!("{region}{name}").as_bytes()))
}

/// The role's name as IAM's AddRoleToInstanceProfile takes it and GetInstanceProfile reports it:
/// without an IAM path.
pub fn role_name(role: &str) -> &str {
    role.rsplit('/').next().unwrap_or(role)
}

/// A profile Karpenter owns for a NodeClass's role: found by name or made with this path and
/// these tags, then holding exactly this role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedProfile {
    pub name: String,
    /// As AddRoleToInstanceProfile takes it (no path).
    pub role: String,
    pub path: String,
    pub tags: BTreeMap<String, String>,
}

/// Which profile the NodeClass's nodes get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfilePlan {
    /// `spec.instanceProfile`, used as given.
    Given(String),
    /// The profile in `status.instanceProfile` holds the role: kept as it is.
    Keep(String),
    /// The role has no profile yet (or changed): this one is ensured.
    Ensure(ManagedProfile),
}

impl ProfilePlan {
    /// The profile's name, for `status.instanceProfile`.
    pub fn name(&self) -> &str {
        match self {
            ProfilePlan::Given(name) | ProfilePlan::Keep(name) => name,
            ProfilePlan::Ensure(p) => &p.name,
        }
    }
}

/// The plan for `class`'s profile in `cluster` and `region`. `status_role` is the role that IAM
/// says the profile in `status.instanceProfile` holds (`None` when the status names none, IAM does
/// not know it, or it holds no role).
pub fn profile_plan(
    class: &EC2NodeClass,
    cluster: &str,
    region: &str,
    status_role: Option<&str>,
) -> Result<ProfilePlan, LookupError> {
    let spec = &class.spec;
    if let Some(given) = &spec.instance_profile {
        return Ok(ProfilePlan::Given(given.clone()));
    }
    let Some(role) = spec.role.as_deref() else {
        return Err(LookupError::Unsupported("neither spec.role nor spec.instanceProfile is set".into()));
    };
    let current = class.status.as_ref().map(|s| s.instance_profile.as_str()).filter(|n| !n.is_empty());
    if let (Some(current), Some(held)) = (current, status_role) {
        if held == role_name(role) {
            return Ok(ProfilePlan::Keep(current.to_string()));
        }
    }
    let uid = class.metadata.uid.as_deref().unwrap_or_default();
    let name = class.metadata.name.as_deref().unwrap_or_default();
    Ok(ProfilePlan::Ensure(ManagedProfile {
        name: format!("{cluster}_{}", fnv1_64(format!("{region}{name}{uid}{role}").as_bytes())),
        role: role_name(role).to_string(),
        path: nodeclass_path(region, cluster, uid),
        tags: profile_tags(class, cluster, region),
    }))
}

/// upstream `InstanceProfileTags`: the NodeClass's tags under the ones Karpenter owns.
pub fn profile_tags(class: &EC2NodeClass, cluster: &str, region: &str) -> BTreeMap<String, String> {
    let mut tags = class.spec.tags.clone();
    tags.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    tags.insert(aws::EKS_CLUSTER_NAME_TAG.into(), cluster.into());
    tags.insert(aws::EC2_NODE_CLASS.into(), class.metadata.name.clone().unwrap_or_default());
    tags.insert(labels::TOPOLOGY_REGION.into(), region.into());
    tags
}

/// An instance profile as IAM lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingProfile {
    pub name: String,
    pub path: String,
}

/// The profiles to delete with a deleted NodeClass: those under its path, and its legacy name.
/// `profiles` may be every profile of the account (IAM's ListInstanceProfiles is asked for the
/// path prefix; an endpoint that ignores it is filtered here).
pub fn nodeclass_profiles(
    profiles: &[ExistingProfile],
    cluster: &str,
    region: &str,
    class: &EC2NodeClass,
) -> BTreeSet<String> {
    let path = nodeclass_path(region, cluster, class.metadata.uid.as_deref().unwrap_or_default());
    let mut out: BTreeSet<String> =
        profiles.iter().filter(|p| p.path.starts_with(&path)).map(|p| p.name.clone()).collect();
    out.insert(legacy_profile_name(cluster, region, class));
    out
}

/// upstream `instanceprofile.garbagecollection`: the cluster's profiles that no EC2NodeClass's
/// status names, no NodeClaim launched with, and `protected` does not hold (a profile a NodeClass
/// moved away from or just made, for an hour, since the view may not show its users yet).
pub fn orphaned_profiles<'p>(
    profiles: &'p [ExistingProfile],
    cluster: &str,
    region: &str,
    nodeclasses: &[EC2NodeClass],
    nodeclaims: &[NodeClaim],
    protected: impl Fn(&str) -> bool,
) -> Vec<&'p str> {
    let prefix = cluster_path(region, cluster);
    let current: BTreeSet<&str> = nodeclasses
        .iter()
        .filter_map(|c| c.status.as_ref().map(|s| s.instance_profile.as_str()))
        .filter(|n| !n.is_empty())
        .collect();
    let active: BTreeSet<&str> = nodeclaims
        .iter()
        .filter_map(|nc| nc.metadata.annotations.as_ref()?.get(INSTANCE_PROFILE_ANNOTATION).map(String::as_str))
        .collect();
    profiles
        .iter()
        .filter(|p| p.path.starts_with(&prefix))
        .map(|p| p.name.as_str())
        .filter(|n| !current.contains(n) && !active.contains(n) && !protected(n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ec2nodeclass::EC2NodeClassStatus;

    fn class(role: Option<&str>, given: Option<&str>, status: &str) -> EC2NodeClass {
        let mut c = EC2NodeClass::new("default", Default::default());
        c.metadata.uid = Some("3f1c".into());
        c.spec.role = role.map(str::to_string);
        c.spec.instance_profile = given.map(str::to_string);
        c.spec.tags.insert("team".into(), "a".into());
        c.status = Some(EC2NodeClassStatus { instance_profile: status.into(), ..Default::default() });
        c
    }

    /// Go's `hash/fnv` New64 gives these (the test's values were printed by it).
    #[test]
    fn the_legacy_name_is_hashstructures_hash_of_region_and_name() {
        assert_eq!(fnv1_64(b"us-west-2default"), 4067990795380418201);
        assert_eq!(fnv1_64(b"eu-central-1my-class"), 17998045524495313348);
        assert_eq!(legacy_profile_name("prod", "us-west-2", &class(None, None, "")), "prod_4067990795380418201");
    }

    #[test]
    fn a_given_profile_is_used_as_it_is() {
        let plan = profile_plan(&class(None, Some("MyProfile"), "old"), "prod", "us-west-2", None).unwrap();
        assert_eq!(plan, ProfilePlan::Given("MyProfile".into()));
    }

    #[test]
    fn a_role_gets_a_profile_under_the_nodeclass_path_with_upstreams_tags() {
        let plan = profile_plan(&class(Some("KarpenterNodeRole-prod"), None, ""), "prod", "us-west-2", None).unwrap();
        let ProfilePlan::Ensure(p) = plan else { panic!("{plan:?}") };
        assert!(p.name.starts_with("prod_") && p.name[5..].parse::<u64>().is_ok(), "{}", p.name);
        assert_eq!(p.role, "KarpenterNodeRole-prod");
        assert_eq!(p.path, "/karpenter/us-west-2/prod/3f1c/");
        let tags: Vec<(&str, &str)> = p.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            tags,
            [
                ("eks:eks-cluster-name", "prod"),
                ("karpenter.k8s.aws/ec2nodeclass", "default"),
                ("kubernetes.io/cluster/prod", "owned"),
                ("team", "a"),
                ("topology.kubernetes.io/region", "us-west-2"),
            ]
        );
        // The same on a retry, another for another role.
        let again = profile_plan(&class(Some("KarpenterNodeRole-prod"), None, ""), "prod", "us-west-2", None).unwrap();
        assert_eq!(again.name(), p.name);
        let other = profile_plan(&class(Some("OtherRole"), None, ""), "prod", "us-west-2", None).unwrap();
        assert_ne!(other.name(), p.name);
    }

    #[test]
    fn the_status_profile_is_kept_while_it_holds_the_role() {
        // A profile upstream made (another name scheme) is kept too.
        let c = class(Some("iam/path/NodeRole"), None, "prod_123");
        assert_eq!(profile_plan(&c, "prod", "r", Some("NodeRole")).unwrap(), ProfilePlan::Keep("prod_123".into()));
        // The role changed, or IAM does not know the profile: a new one.
        assert!(matches!(profile_plan(&c, "prod", "r", Some("OldRole")).unwrap(), ProfilePlan::Ensure(_)));
        let ProfilePlan::Ensure(p) = profile_plan(&c, "prod", "r", None).unwrap() else { panic!() };
        assert_eq!(p.role, "NodeRole");
    }

    #[test]
    fn neither_role_nor_profile_is_an_error() {
        let e = profile_plan(&class(None, None, ""), "prod", "r", None).unwrap_err();
        assert!(e.to_string().contains("spec.role"), "{e}");
    }

    fn profile(name: &str, path: &str) -> ExistingProfile {
        ExistingProfile { name: name.into(), path: path.into() }
    }

    #[test]
    fn a_deleted_nodeclass_takes_the_profiles_under_its_path_and_its_legacy_name() {
        let profiles = [
            profile("mine", "/karpenter/r/prod/3f1c/"),
            profile("another-class", "/karpenter/r/prod/9a9a/"),
            profile("users", "/"),
        ];
        let names = nodeclass_profiles(&profiles, "prod", "r", &class(Some("role"), None, "mine"));
        let legacy = legacy_profile_name("prod", "r", &class(None, None, ""));
        assert_eq!(names, BTreeSet::from(["mine".to_string(), legacy]));
    }

    #[test]
    fn a_profile_is_collected_only_when_nothing_uses_it() {
        let profiles = [
            profile("current", "/karpenter/r/prod/3f1c/"),
            profile("launched-with", "/karpenter/r/prod/3f1c/"),
            profile("just-replaced", "/karpenter/r/prod/3f1c/"),
            profile("orphan", "/karpenter/r/prod/0000/"),
            profile("other-cluster", "/karpenter/r/staging/3f1c/"),
            profile("users", "/"),
        ];
        let mut nc = NodeClaim::new("a", Default::default());
        nc.metadata.annotations = Some([(INSTANCE_PROFILE_ANNOTATION.to_string(), "launched-with".to_string())].into());
        let orphans = orphaned_profiles(&profiles, "prod", "r", &[class(Some("x"), None, "current")], &[nc], |n| {
            n == "just-replaced"
        });
        assert_eq!(orphans, ["orphan"]);
    }
}
