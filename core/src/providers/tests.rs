//! The AWS provider's decisions on EC2 answers written out by hand: selector queries, subnet
//! order, alias parameters, image choice, the CreateFleet request, the unavailable-offerings
//! cache, providerIDs and the EC2NodeClass conditions.

use std::collections::BTreeMap;

use super::*;
use crate::api::ec2nodeclass::{AmiSelectorTerm, SecurityGroupSelectorTerm, Subnet, SubnetSelectorTerm};
use crate::api::{EC2NodeClass, NodeClaim};
use crate::Catalogue;

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn selector_terms_become_ored_queries_of_anded_filters() {
    let subnets = [
        SubnetSelectorTerm { id: Some("subnet-1".into()), tags: BTreeMap::new() },
        SubnetSelectorTerm { id: None, tags: tags(&[("karpenter.sh/discovery", "c"), ("tier", "*")]) },
        SubnetSelectorTerm { id: Some("subnet-2".into()), tags: BTreeMap::new() },
    ];
    assert_eq!(
        subnet_queries(&subnets),
        vec![
            vec![Filter::new("subnet-id", &["subnet-1", "subnet-2"])],
            vec![Filter::new("tag:karpenter.sh/discovery", &["c"]), Filter::new("tag-key", &["tier"])],
        ]
    );
    let groups = [
        SecurityGroupSelectorTerm { id: None, name: Some("nodes".into()), tags: BTreeMap::new() },
        SecurityGroupSelectorTerm { id: Some("sg-1".into()), name: None, tags: BTreeMap::new() },
        SecurityGroupSelectorTerm { id: None, name: None, tags: tags(&[("k", "v")]) },
    ];
    assert_eq!(
        security_group_queries(&groups),
        vec![
            vec![Filter::new("group-id", &["sg-1"])],
            vec![Filter::new("group-name", &["nodes"])],
            vec![Filter::new("tag:k", &["v"])],
        ]
    );
    let amis = [
        AmiSelectorTerm { name: Some("my-ami-*".into()), ..Default::default() },
        AmiSelectorTerm { id: Some("ami-1".into()), ..Default::default() },
        AmiSelectorTerm { tags: tags(&[("team", "a")]), owner: Some("123456789012".into()), ..Default::default() },
    ];
    use amifamily::AmiQuery;
    assert_eq!(
        ami_queries(&amis),
        vec![
            AmiQuery::Images { filters: vec![Filter::new("image-id", &["ami-1"])], owners: vec![] },
            AmiQuery::Images {
                filters: vec![Filter::new("name", &["my-ami-*"])],
                owners: vec!["self".into(), "amazon".into()]
            },
            AmiQuery::Images { filters: vec![Filter::new("tag:team", &["a"])], owners: vec!["123456789012".into()] },
        ]
    );
}

#[test]
fn subnet_status_puts_the_freest_first_and_a_launch_takes_one_per_zone() {
    let s = |id: &str, zone: &str, ips| DiscoveredSubnet {
        id: id.into(),
        zone: zone.into(),
        zone_id: format!("id-{zone}"),
        available_ips: ips,
    };
    let status = subnet_status(&[
        s("subnet-b", "z1", 10),
        s("subnet-a", "z1", 10),
        s("subnet-c", "z1", 50),
        s("subnet-d", "z2", 1),
    ]);
    let ids: Vec<&str> = status.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["subnet-c", "subnet-a", "subnet-b", "subnet-d"]);
    let zonal = zonal_subnets(&status);
    assert_eq!(zonal["z1"].id, "subnet-c");
    assert_eq!(zonal["z2"].id, "subnet-d");
}

#[test]
fn aliases_resolve_to_eks_parameters_per_arch_and_variant() {
    let latest = alias_parameters("al2023@latest", "1.33").unwrap();
    let paths: Vec<&str> = latest.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths.len(), 5);
    assert!(
        paths.contains(&"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")
    );
    assert!(paths.contains(&"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/nvidia/recommended/image_id"));
    let pinned = alias_parameters("al2023@v20240807", "1.30").unwrap();
    assert_eq!(
        pinned[0].path,
        "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.30-v20240807/image_id"
    );
    assert_eq!(
        alias_parameters("bottlerocket@v1.20.0", "1.31").unwrap()[0].path,
        "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.20.0/image_id"
    );
    assert!(matches!(alias_parameters("al2@latest", "1.33"), Err(AliasError::Al2Retired { .. })));
    assert!(matches!(alias_parameters("windows2022@v1", "1.33"), Err(AliasError::PinnedWindows { .. })));
    assert!(matches!(alias_parameters("ubuntu@latest", "1.33"), Err(AliasError::UnknownFamily { .. })));
    assert!(matches!(alias_parameters("al2023", "1.33"), Err(AliasError::Malformed { .. })));
}

#[test]
fn one_image_wins_per_requirement_set() {
    let image = |id: &str, date: &str, deprecated, arch: &str| Image {
        id: id.into(),
        name: format!("name-{id}"),
        creation_date: date.into(),
        deprecated,
        architecture: arch.into(),
        requirements: None,
    };
    let amis = choose_amis(&[
        image("ami-old", "2024-01-01T00:00:00.000Z", false, "x86_64"),
        image("ami-new", "2024-06-01T00:00:00.000Z", false, "x86_64"),
        image("ami-newest-deprecated", "2024-09-01T00:00:00.000Z", true, "x86_64"),
        image("ami-arm", "2024-02-01T00:00:00.000Z", false, "arm64"),
    ]);
    let ids: Vec<&str> = amis.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["ami-new", "ami-arm"]);
    assert_eq!(amis[1].requirements[0].values.as_deref(), Some(&["arm64".to_string()][..]));
}

fn class(status_yaml: &str) -> EC2NodeClass {
    serde_yaml::from_str(&format!(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default, generation: 1, creationTimestamp: "2026-01-01T00:00:00Z"}}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: c}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: c}}}}]
  tags: {{team: a}}
{status_yaml}"#
    ))
    .unwrap()
}

fn resolved_class() -> EC2NodeClass {
    class(
        r#"status:
  subnets:
  - {id: subnet-a, zone: us-west-2a, zoneID: usw2-az2}
  - {id: subnet-b, zone: us-west-2b, zoneID: usw2-az1}
  securityGroups: [{id: sg-2, name: b}, {id: sg-1, name: a}]
  instanceProfile: KarpenterNodeInstanceProfile
  amis:
  - id: ami-x86
    name: al2023-x86
    requirements:
    - {key: kubernetes.io/arch, operator: In, values: [amd64]}
    - {key: karpenter.k8s.aws/instance-gpu-count, operator: DoesNotExist}
    - {key: karpenter.k8s.aws/instance-accelerator-count, operator: DoesNotExist}
"#,
    )
}

fn nodeclaim(types: &[&str], capacity_types: &[&str]) -> NodeClaim {
    serde_yaml::from_str(&format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {{name: default-abcde, labels: {{karpenter.sh/nodepool: default}}}}
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  resources: {{requests: {{cpu: "1"}}}}
  requirements:
  - {{key: node.kubernetes.io/instance-type, operator: In, values: {types:?}}}
  - {{key: karpenter.sh/capacity-type, operator: In, values: {capacity_types:?}}}
"#
    ))
    .unwrap()
}

/// The cluster the tests' nodes join.
fn cluster(name: &str) -> ClusterBootstrap {
    ClusterBootstrap {
        name: name.into(),
        endpoint: Some("https://ABCD.gr7.us-west-2.eks.amazonaws.com".into()),
        ca_bundle: Some("Y2EtYnVuZGxl".into()),
        cidr: Some("10.100.0.0/16".into()),
        kube_dns_ip: Some("10.100.0.10".into()),
    }
}

fn types_for(class: &EC2NodeClass) -> std::sync::Arc<Vec<crate::catalogue::InstanceType>> {
    let subnets: &[Subnet] = class.status.as_ref().map_or(&[], |s| s.subnets.as_slice());
    Catalogue::embedded().instance_types_in_subnets("us-west-2", &class.spec, subnets).unwrap()
}

#[test]
fn a_fleet_request_offers_types_times_zonal_subnets_cheapest_first_with_upstreams_tags() {
    let class = resolved_class();
    let types = types_for(&class);
    let nc = nodeclaim(&["m5.large", "c5.large", "m5.xlarge", "p3.2xlarge"], &["on-demand"]);
    let cluster = cluster("test-cluster");
    let ctx = LaunchContext { cluster: &cluster, class: &class };
    let request = fleet_request(&nc, &types, ctx, |_, _, _| false).unwrap();
    assert_eq!((request.capacity_type.as_str(), request.allocation_strategy.as_str()), ("on-demand", "lowest-price"));
    // One AMI, one max-pods group per distinct pod count: each template's overrides are its types
    // × the two zones with a subnet; the GPU type is left out (others are left).
    let all: Vec<&FleetOverride> = request.launch_templates.iter().flat_map(|lt| &lt.overrides).collect();
    let mut offered: Vec<(&str, &str, &str)> =
        all.iter().map(|o| (o.instance_type.as_str(), o.zone.as_str(), o.subnet_id.as_str())).collect();
    offered.sort();
    assert_eq!(
        offered,
        [
            ("c5.large", "us-west-2a", "subnet-a"),
            ("c5.large", "us-west-2b", "subnet-b"),
            ("m5.large", "us-west-2a", "subnet-a"),
            ("m5.large", "us-west-2b", "subnet-b"),
            ("m5.xlarge", "us-west-2a", "subnet-a"),
            ("m5.xlarge", "us-west-2b", "subnet-b"),
        ]
    );
    for o in &all {
        let it = types.iter().find(|t| t.name == o.instance_type).unwrap();
        let price =
            it.offerings.iter().find(|x| x.zone == o.zone && x.capacity_type.as_str() == "on-demand").unwrap().price;
        assert_eq!(o.priority, price, "{o:?}");
        assert_eq!(o.image_id, "ami-x86");
    }
    let lt = &request.launch_templates[0].template;
    assert!(lt.name.starts_with("karpenter.k8s.aws/"), "{}", lt.name);
    assert_eq!(lt.security_group_ids, ["sg-1", "sg-2"]);
    assert_eq!(lt.instance_profile, "KarpenterNodeInstanceProfile");
    assert_eq!(lt.tags.get("eks:eks-cluster-name").map(String::as_str), Some("test-cluster"));
    // The IAM policy's conditions match these on the template.
    assert_eq!(lt.tags.get("kubernetes.io/cluster/test-cluster").map(String::as_str), Some("owned"));
    assert_eq!(lt.tags.get("karpenter.sh/nodepool").map(String::as_str), Some("default"));
    assert_eq!(
        request.tags,
        tags(&[
            ("team", "a"),
            ("kubernetes.io/cluster/test-cluster", "owned"),
            ("karpenter.sh/nodepool", "default"),
            ("eks:eks-cluster-name", "test-cluster"),
            ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ])
    );
    // The same options name the same template; another security group another one.
    let again = fleet_request(&nc, &types, ctx, |_, _, _| false).unwrap();
    assert_eq!(again.launch_templates[0].template.name, lt.name);
    let mut other = class.clone();
    other.status.as_mut().unwrap().security_groups.pop();
    let changed =
        fleet_request(&nc, &types, LaunchContext { cluster: &cluster, class: &other }, |_, _, _| false).unwrap();
    assert_ne!(changed.launch_templates[0].template.name, lt.name);
    // The launch EC2 reports carries the override's price.
    let launched = request.launched("m5.large", "us-west-2b").unwrap();
    assert_eq!(launched.capacity_type, "on-demand");
}

#[test]
fn unavailable_offerings_leave_the_request_and_spot_wins_when_allowed() {
    let class = resolved_class();
    let types = types_for(&class);
    let nc = nodeclaim(&["m5.large"], &["on-demand", "spot"]);
    let cluster = cluster("c");
    let ctx = LaunchContext { cluster: &cluster, class: &class };
    let request = fleet_request(&nc, &types, ctx, |_, _, _| false).unwrap();
    assert_eq!(
        (request.capacity_type.as_str(), request.allocation_strategy.as_str()),
        ("spot", "price-capacity-optimized")
    );
    let mut cache = UnavailableOfferings::default();
    cache.mark("m5.large", "us-west-2a", "spot", 1000);
    let without = fleet_request(&nc, &types, ctx, |t, z, c| cache.is_unavailable(t, z, c, 1100)).unwrap();
    let zones: Vec<&str> = without.offerings().map(|(_, z)| z).collect();
    assert_eq!(zones, ["us-west-2b"]);
    // Both spot offerings gone: on-demand.
    cache.mark("m5.large", "us-west-2b", "spot", 1000);
    let od = fleet_request(&nc, &types, ctx, |t, z, c| cache.is_unavailable(t, z, c, 1100)).unwrap();
    assert_eq!(od.capacity_type, "on-demand");
    // The marks last three minutes.
    assert!(!cache.is_unavailable("m5.large", "us-west-2a", "spot", 1000 + UNAVAILABLE_OFFERING_TTL_SECONDS));
    assert!(is_insufficient_capacity("InsufficientInstanceCapacity") && !is_insufficient_capacity("InvalidParameter"));
    // Nothing left: no launch.
    let only_spot = nodeclaim(&["m5.large"], &["spot"]);
    assert!(fleet_request(&only_spot, &types, ctx, |t, z, c| cache.is_unavailable(t, z, c, 1100)).is_err());
}

/// What the scheduler is told is unavailable: the marks still current, and every offering of a
/// capacity type marked as a whole (MaxSpotInstanceCountExceeded).
#[test]
fn the_cache_lists_current_marks_and_expands_a_capacity_type_marked_whole() {
    let catalogue = Catalogue::embedded();
    let mut cache = UnavailableOfferings::default();
    cache.mark("m5.large", "us-west-2a", "on-demand", 1000);
    cache.mark("c5.large", "us-west-2b", "on-demand", 1000 - UNAVAILABLE_OFFERING_TTL_SECONDS);
    let listed = cache.listed(1100, catalogue, "us-west-2");
    let names: Vec<(&str, &str, &str)> =
        listed.iter().map(|u| (u.instance_type.as_str(), u.zone.as_str(), u.capacity_type.as_str())).collect();
    assert_eq!(names, [("m5.large", "us-west-2a", "on-demand")], "the expired mark is left out");

    cache.mark_capacity_type("spot", 1000);
    let listed = cache.listed(1100, catalogue, "us-west-2");
    let spot: Vec<_> = listed.iter().filter(|u| u.capacity_type == "spot").collect();
    let offered: usize = catalogue.infos().iter().map(|i| catalogue.offered_zones("us-west-2", &i.name).len()).sum();
    assert_eq!(spot.len(), offered, "every offered (type, zone) of spot");
    assert!(spot.iter().any(|u| u.instance_type == "m5.large" && u.zone == "us-west-2a"));
    assert_eq!(listed.iter().filter(|u| u.capacity_type == "on-demand").count(), 1);
    assert!(cache.listed(1000 + UNAVAILABLE_OFFERING_TTL_SECONDS, catalogue, "us-west-2").is_empty());
}

#[test]
fn provider_ids_round_trip() {
    let id = provider_id("us-west-2a", "i-0123");
    assert_eq!(id, "aws:///us-west-2a/i-0123");
    assert_eq!(parse_provider_id(&id), Some(("us-west-2a", "i-0123")));
    assert_eq!(parse_provider_id("kwok://node"), None);
}

/// Every lookup of a NodeClass answered: one subnet, security group, image and the profile.
fn found_everything() -> Resolved {
    Resolved {
        subnets: Ok(vec![DiscoveredSubnet {
            id: "subnet-a".into(),
            zone: "us-west-2a".into(),
            zone_id: "usw2-az2".into(),
            available_ips: 100,
        }]),
        security_groups: Ok(vec![DiscoveredSecurityGroup { id: "sg-1".into(), name: "nodes".into() }]),
        images: Ok(vec![Image {
            id: "ami-1".into(),
            name: "al2023".into(),
            creation_date: "2026-01-01T00:00:00.000Z".into(),
            deprecated: false,
            architecture: "x86_64".into(),
            requirements: None,
        }]),
        instance_profile: Ok("profile".into()),
    }
}

#[test]
fn nodeclass_status_rolls_lookups_into_ready_and_names_a_denied_action() {
    let c = class("");
    let found = found_everything();
    let status = nodeclass_status(&c, &found, "2026-01-02T00:00:00Z");
    let get = |s: &crate::api::ec2nodeclass::EC2NodeClassStatus, t: &str| {
        s.conditions.iter().find(|c| c.type_ == t).cloned().unwrap()
    };
    assert_eq!(get(&status, "Ready").status, "True");
    assert_eq!(status.subnets.len(), 1);
    assert_eq!(status.amis[0].id, "ami-1");
    let mut denied = found.clone();
    denied.subnets = Err(LookupError::Denied {
        action: "ec2:DescribeSubnets".into(),
        message: "You are not authorized to perform this operation.".into(),
    });
    denied.security_groups = Ok(vec![]);
    let mut later = c.clone();
    later.status = Some(status);
    let status = nodeclass_status(&later, &denied, "2026-01-03T00:00:00Z");
    let subnets = get(&status, "SubnetsReady");
    assert_eq!((subnets.status.as_str(), subnets.reason.as_deref()), ("False", Some("UnauthorizedOperation")));
    assert!(subnets.message.as_deref().unwrap().contains("ec2:DescribeSubnets"));
    assert_eq!(get(&status, "SecurityGroupsReady").reason.as_deref(), Some("SecurityGroupsNotFound"));
    assert_eq!(get(&status, "Ready").status, "False");
    // The subnets last found stay, as upstream leaves the status on an error.
    assert_eq!(status.subnets.len(), 1);
}

#[test]
fn a_lookup_without_an_answer_leaves_a_ready_nodeclass_ready() {
    let found = found_everything();
    assert!(!found.has_transient_failure());
    let mut c = class("");
    c.status = Some(nodeclass_status(&c, &found, "2026-01-02T00:00:00Z"));
    let before = c.status.clone().unwrap();
    assert!(nodeclass::is_ready(&c));
    let throttled = |action: &str| LookupError::Failed {
        action: action.into(),
        message: "Request limit exceeded. (RequestLimitExceeded, after 3 attempts)".into(),
    };
    let resolved = Resolved {
        subnets: Err(throttled("ec2:DescribeSubnets")),
        security_groups: Err(throttled("ec2:DescribeSecurityGroups")),
        images: Err(throttled("ec2:DescribeImages")),
        instance_profile: Err(throttled("iam:GetInstanceProfile")),
    };
    assert!(resolved.has_transient_failure());
    let status = nodeclass_status(&c, &resolved, "2026-01-05T00:00:00Z");
    assert_eq!(status, before, "throttling is no answer: nothing changes");
    let mut after = c.clone();
    after.status = Some(status);
    assert!(nodeclass::is_ready(&after));
}

fn entry(code: &str, message: &str, it: &str, zone: &str) -> FleetErrorEntry {
    FleetErrorEntry {
        code: code.into(),
        message: message.into(),
        instance_type: Some(it.into()),
        zone: Some(zone.into()),
    }
}

#[test]
fn a_fleet_is_out_of_capacity_only_when_every_error_is_about_capacity() {
    let ice = entry("InsufficientInstanceCapacity", "no c5.large capacity", "c5.large", "us-west-2a");
    let quota = entry("MaxSpotInstanceCountExceeded", "spot quota", "m5.large", "us-west-2b");
    let failure = fleet_failure(&[ice.clone(), quota.clone(), ice.clone()]);
    assert_eq!(
        failure,
        LaunchFailure::InsufficientCapacity {
            errors: "InsufficientInstanceCapacity: no c5.large capacity; MaxSpotInstanceCountExceeded: spot quota"
                .into()
        }
    );
    assert!(failure.deletes_nodeclaim());
    // A denied PassRole beside capacity errors is a create error, with upstream's reason.
    let denied =
        entry("UnauthorizedOperation", "You are not authorized to perform: iam:PassRole", "c5.large", "us-west-2b");
    let failure = fleet_failure(&[ice.clone(), denied]);
    let LaunchFailure::Create { reason, message, .. } = &failure else { panic!("{failure:?}") };
    assert_eq!(*reason, "Unauthorized");
    assert_eq!(message, "User is not authorized to perform this operation because no identity-based policy allows it");
    assert!(!failure.deletes_nodeclaim());
    assert!(failure.to_string().contains("UnauthorizedOperation: You are not authorized"), "{failure}");
    // Other codes each have upstream's reason; an unknown one is LaunchFailed.
    for (code, message, want) in [
        ("InvalidParameterValue", "sg-1 and subnet-1 belong to different networks", "SecurityGroupSubnetVPCMismatch"),
        ("InvalidParameterValue", "bad value", "LaunchFailed"),
        ("InvalidLaunchTemplateName.NotFoundException", "no template", "LaunchFailed"),
        ("InvalidAMIID.NotFound", "ami-1 does not exist", "AMINotFound"),
        ("RequestLimitExceeded", "slow down", "RequestLimitExceeded"),
        ("SomethingNew", "?", "LaunchFailed"),
    ] {
        let failure = fleet_failure(&[entry(code, message, "c5.large", "us-west-2a")]);
        assert!(matches!(failure, LaunchFailure::Create { reason, .. } if reason == want), "{code}: {failure:?}");
    }
    // The spot service-linked role counts as capacity (and names its own reason in a mixed set).
    let slr = entry("AuthFailure.ServiceLinkedRoleCreationNotPermitted", "no role", "c5.large", "us-west-2a");
    assert!(fleet_failure(&[slr.clone(), quota]).deletes_nodeclaim());
    assert!(matches!(
        fleet_failure(&[slr, entry("X", "y", "a", "b")]),
        LaunchFailure::Create { reason: "SpotSLRCreationFailed", .. }
    ));
    // No instance and no error: upstream's batcher says so, as a create error.
    let failure = fleet_failure(&[]);
    assert!(matches!(&failure, LaunchFailure::Create { reason: "LaunchFailed", .. }), "{failure:?}");
    assert!(failure.to_string().contains("too few instances returned"));
}

#[test]
fn the_call_failing_is_a_create_error_with_its_context() {
    let failure = fleet_call_failure("UnauthorizedOperation", "not allowed: ec2:CreateFleet");
    assert_eq!(failure.to_string(), "creating fleet request, UnauthorizedOperation: not allowed: ec2:CreateFleet");
    let LaunchFailure::Create { reason, message, .. } = &failure else { panic!() };
    assert_eq!((*reason, message.as_str()), ("Unauthorized",
        "Error creating fleet request: User is not authorized to perform this operation because no identity-based policy allows it"));
    let failure = fleet_call_failure("InvalidLaunchTemplateName.NotFoundException", "gone");
    assert!(failure.to_string().starts_with("launch templates not found when creating fleet request, "));
    assert!(fleet::is_launch_template_not_found("InvalidLaunchTemplateName.NotFoundException"));
}

#[test]
fn capacity_errors_mark_offerings_and_the_spot_role_marks_all_spot() {
    let errors = [
        entry("InsufficientInstanceCapacity", "a", "c5.large", "us-west-2a"),
        entry("InsufficientInstanceCapacity", "b", "c5.large", "us-west-2a"),
        entry("UnauthorizedOperation", "c", "m5.large", "us-west-2a"),
        entry("MaxSpotInstanceCountExceeded", "d", "m5.large", "us-west-2b"),
        FleetErrorEntry {
            code: "InsufficientInstanceCapacity".into(),
            message: "no override".into(),
            instance_type: None,
            zone: None,
        },
        entry("AuthFailure.ServiceLinkedRoleCreationNotPermitted", "e", "c5.large", "us-west-2b"),
    ];
    let offering = |it: &str, zone: &str| UnavailableMark::Offering {
        instance_type: it.into(),
        zone: zone.into(),
        capacity_type: "spot".into(),
    };
    assert_eq!(
        unavailable_marks(&errors, "spot"),
        [
            offering("c5.large", "us-west-2a"),
            offering("m5.large", "us-west-2b"),
            UnavailableMark::CapacityType("spot".into())
        ]
    );
    let mut cache = UnavailableOfferings::default();
    for mark in unavailable_marks(&errors, "spot") {
        mark.apply(&mut cache, 100);
    }
    assert!(cache.is_unavailable("c5.large", "us-west-2a", "spot", 101));
    assert!(cache.is_unavailable("r5.large", "us-west-2c", "spot", 101), "every spot offering");
    assert!(!cache.is_unavailable("r5.large", "us-west-2c", "on-demand", 101));
    assert!(!cache.is_unavailable("r5.large", "us-west-2c", "spot", 100 + UNAVAILABLE_OFFERING_TTL_SECONDS));
}
