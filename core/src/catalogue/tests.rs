//! Catalogue unit tests: the embedded data and its provenance, allocatable and overhead against
//! upstream's worked examples, labels, offerings and prices, and errors.

use std::collections::BTreeMap;

use super::capacity::kube_reserved_cpu_millis;
use super::*;
use crate::api::ec2nodeclass::{
    AmiFamily, AmiSelectorTerm, BlockDevice, BlockDeviceMapping, ConnectionTracking, CpuOptions, EC2NodeClassSpec,
    InstanceStorePolicy, KubeletConfiguration, NetworkInterface,
};
use crate::requirements::Operator;

fn cat() -> &'static Catalogue {
    Catalogue::embedded()
}

fn q(s: &str) -> Quantity {
    Quantity::parse(s).unwrap()
}

fn spec_for(family: AmiFamily) -> EC2NodeClassSpec {
    let alias = match family {
        AmiFamily::AL2 => Some("al2@latest"),
        AmiFamily::AL2023 => Some("al2023@latest"),
        AmiFamily::Bottlerocket => Some("bottlerocket@latest"),
        AmiFamily::Windows2019 => Some("windows2019@latest"),
        AmiFamily::Windows2022 => Some("windows2022@latest"),
        AmiFamily::Windows2025 => Some("windows2025@latest"),
        AmiFamily::Custom => None,
    };
    let mut spec = EC2NodeClassSpec { ami_family: Some(family), ..EC2NodeClassSpec::default() };
    match alias {
        Some(alias) => {
            spec.ami_selector_terms = vec![AmiSelectorTerm { alias: Some(alias.into()), ..Default::default() }]
        }
        None => {
            spec.ami_selector_terms =
                vec![AmiSelectorTerm { id: Some("ami-0123456789abcdef0".into()), ..Default::default() }]
        }
    }
    assert_eq!(spec.resolved_ami_family(), family);
    spec
}

fn with_kubelet(mut spec: EC2NodeClassSpec, f: impl FnOnce(&mut KubeletConfiguration)) -> EC2NodeClassSpec {
    let mut k = spec.kubelet.take().unwrap_or_default();
    f(&mut k);
    spec.kubelet = Some(k);
    spec
}

fn get(spec: &EC2NodeClassSpec, name: &str) -> InstanceType {
    get_in("us-east-1", spec, name)
}

fn get_in(region: &str, spec: &EC2NodeClassSpec, name: &str) -> InstanceType {
    cat()
        .instance_types(region, spec)
        .unwrap()
        .into_iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} not offered in {region}"))
}

fn res(list: &ResourceList, key: &str) -> Quantity {
    list.get(key).copied().unwrap_or_else(|| panic!("no {key} in {list:?}"))
}

fn label(t: &InstanceType, key: &str) -> Option<String> {
    t.requirements.labels().get(key).cloned()
}

fn operator(t: &InstanceType, key: &str) -> Operator {
    t.requirements.get_ref(key).unwrap_or_else(|| panic!("{} has no {key}", t.name)).operator()
}

#[test]
fn embedded_catalogue_loads_with_provenance() {
    let c = cat();
    assert!(c.instance_type_count() > 1300, "{}", c.instance_type_count());
    assert_eq!(c.regions().count(), 30);
    assert!(c.regions().any(|r| r == "us-east-1"));
    let p = c.provenance();
    assert!(p.generator.contains("xtask catalog"));
    assert_eq!(p.generated_at.len(), 10);
    assert!(p.inputs.iter().any(|i| i.package == "moto" && i.version == "5.2.5" && i.registry == "PyPI"));
    let pricing = p.inputs.iter().find(|i| i.file.ends_with("zz_generated.pricing_aws.go")).unwrap();
    assert_eq!(pricing.package, "github.com/aws/karpenter-provider-aws");
    assert_eq!(pricing.version, "v1.14.1");
    assert_eq!(pricing.date, "2026-07-06");
    for i in &p.inputs {
        assert!(!i.date.is_empty() && !i.version.is_empty() && !i.file.is_empty(), "{i:?}");
    }
}

#[test]
fn data_file_schema_round_trips_byte_for_byte() {
    // The generator (`cargo xtask catalog`) serialises these same types; reading the embedded
    // file and writing it back must reproduce it exactly, skip rules and field order included.
    let file: CatalogueFile = serde_json::from_str(EMBEDDED_JSON).unwrap();
    let text = serde_json::to_string(&file).unwrap() + "\n";
    assert!(text == EMBEDDED_JSON, "re-serialised catalogue differs from core/data/ec2-catalogue.json");
}

#[test]
fn every_region_has_zones_and_names_them_by_zone_id_order() {
    let c = cat();
    for region in c.regions() {
        let zones = c.zones(region).unwrap();
        assert!(!zones.is_empty(), "{region}");
        for (i, z) in zones.iter().enumerate() {
            assert_eq!(z.name, zone_name(region, i));
            assert!(z.name.starts_with(region));
        }
        assert!(c.instance_types(region, &EC2NodeClassSpec::default()).unwrap().len() > 100, "{region}");
    }
    let use1: Vec<_> = c.zones("us-east-1").unwrap().iter().map(|z| (z.name.as_str(), z.id.as_str())).collect();
    assert_eq!(use1[0], ("us-east-1a", "use1-az1"));
    assert_eq!(use1[5], ("us-east-1f", "use1-az6"));
    let usw1: Vec<_> = c.zones("us-west-1").unwrap().iter().map(|z| (z.name.as_str(), z.id.as_str())).collect();
    assert_eq!(usw1, [("us-west-1a", "usw1-az1"), ("us-west-1b", "usw1-az3")]);
}

#[test]
fn worked_example_m5_large_al2023() {
    let t = get(&EC2NodeClassSpec::default(), "m5.large");
    assert_eq!(res(&t.capacity, "cpu"), q("2"));
    assert_eq!(res(&t.capacity, "memory"), q("7577Mi"));
    assert_eq!(res(&t.capacity, "pods"), q("29"));
    assert_eq!(res(&t.capacity, "ephemeral-storage"), q("20Gi"));
    assert_eq!(res(&t.overhead.kube_reserved, "cpu"), q("70m"));
    assert_eq!(res(&t.overhead.kube_reserved, "memory"), q("574Mi"));
    assert_eq!(res(&t.overhead.kube_reserved, "ephemeral-storage"), q("1Gi"));
    assert_eq!(res(&t.overhead.eviction_threshold, "memory"), q("100Mi"));
    assert_eq!(res(&t.overhead.eviction_threshold, "ephemeral-storage"), q("2Gi"));
    assert!(t.overhead.system_reserved.is_empty());
    let a = t.allocatable();
    assert_eq!(res(a, "cpu"), q("1930m"));
    assert_eq!(res(a, "memory"), q("6903Mi"));
    assert_eq!(res(a, "ephemeral-storage"), q("17Gi"));
    assert_eq!(res(a, "pods"), q("29"));
    assert_eq!(res(a, "memory").to_string(), "6903Mi");
    assert_eq!(res(a, "ephemeral-storage").to_string(), "17Gi");
    assert_eq!(res(&t.capacity, "vpc.amazonaws.com/pod-eni"), q("9"));
    assert_eq!(res(&t.capacity, "nvidia.com/gpu"), q("0"));
    assert!(!t.capacity.contains_key("vpc.amazonaws.com/PrivateIPv4Address"));
}

#[test]
fn eni_limited_pods_match_upstream_examples() {
    let spec = EC2NodeClassSpec::default();
    let types = cat().instance_types("us-east-1", &spec).unwrap();
    let pods = |name: &str| res(&types.iter().find(|t| t.name == name).unwrap().capacity, "pods");
    for (name, want) in [
        ("t3.micro", 4),
        ("t3.medium", 17),
        ("m5.large", 29),
        ("m5.xlarge", 58),
        ("c5.4xlarge", 234),
        ("m5.24xlarge", 737),
        ("p5.48xlarge", 100),
    ] {
        assert_eq!(pods(name), Quantity::from_units(want), "{name}");
    }
    assert_eq!(cat().info("m5.large").unwrap().eni_limited_pods(), 29);
}

#[test]
fn kube_reserved_cpu_tiers() {
    for (vcpu, millis) in [(1, 60), (2, 70), (4, 80), (8, 90), (16, 110), (96, 310)] {
        assert_eq!(kube_reserved_cpu_millis(vcpu * 1000), millis, "{vcpu} vCPU");
    }
    let t = get(&EC2NodeClassSpec::default(), "m5.24xlarge");
    assert_eq!(res(&t.overhead.kube_reserved, "cpu"), q("310m"));
}

#[test]
fn arm64_loses_64mi_before_the_vm_overhead() {
    let t = get(&EC2NodeClassSpec::default(), "c6g.large");
    // 4096 − 64 = 4032; ceil(4032 × 0.075) = 303.
    assert_eq!(res(&t.capacity, "memory"), q("3729Mi"));
    assert_eq!(label(&t, labels::ARCH).as_deref(), Some("arm64"));
    assert_eq!(label(&t, aws::INSTANCE_MEMORY).as_deref(), Some("4096"));
}

#[test]
fn max_pods_overrides_capacity_but_not_al2023_memory_overhead() {
    let spec = with_kubelet(EC2NodeClassSpec::default(), |k| k.max_pods = Some(20));
    let t = get(&spec, "m5.large");
    assert_eq!(res(&t.capacity, "pods"), q("20"));
    // AL2/AL2023/Custom reserve memory for the ENI-limited pod count (29), whatever maxPods says.
    assert_eq!(res(&t.overhead.kube_reserved, "memory"), q("574Mi"));

    let spec = with_kubelet(spec_for(AmiFamily::Bottlerocket), |k| k.max_pods = Some(20));
    let t = get(&spec, "m5.large");
    assert_eq!(res(&t.capacity, "pods"), q("20"));
    assert_eq!(res(&t.overhead.kube_reserved, "memory"), q("475Mi"));
}

#[test]
fn pods_per_core_caps_pods_except_on_bottlerocket() {
    let spec = with_kubelet(EC2NodeClassSpec::default(), |k| k.pods_per_core = Some(4));
    assert_eq!(res(&get(&spec, "m5.large").capacity, "pods"), q("8"));
    let spec = with_kubelet(EC2NodeClassSpec::default(), |k| k.pods_per_core = Some(100));
    assert_eq!(res(&get(&spec, "m5.large").capacity, "pods"), q("29"));
    let spec = with_kubelet(spec_for(AmiFamily::Bottlerocket), |k| k.pods_per_core = Some(4));
    assert_eq!(res(&get(&spec, "m5.large").capacity, "pods"), q("29"));
    let spec = with_kubelet(spec_for(AmiFamily::AL2), |k| {
        k.pods_per_core = Some(4);
        k.max_pods = Some(6);
    });
    assert_eq!(res(&get(&spec, "m5.large").capacity, "pods"), q("6"));
}

#[test]
fn kube_and_system_reserved_overrides() {
    let spec = with_kubelet(EC2NodeClassSpec::default(), |k| {
        k.kube_reserved = BTreeMap::from([("cpu".to_string(), q("200m"))]);
        k.system_reserved = BTreeMap::from([("memory".to_string(), q("100Mi")), ("pid".to_string(), q("1k"))]);
    });
    let t = get(&spec, "m5.large");
    assert_eq!(res(&t.overhead.kube_reserved, "cpu"), q("200m"));
    assert_eq!(res(&t.overhead.kube_reserved, "memory"), q("574Mi"));
    let a = t.allocatable();
    assert_eq!(res(a, "cpu"), q("1800m"));
    assert_eq!(res(a, "memory"), q("6803Mi"));
    assert!(!a.contains_key("pid"), "keys only in the overhead are not allocatable");
}

#[test]
fn eviction_hard_overrides_including_percentages() {
    let spec = with_kubelet(EC2NodeClassSpec::default(), |k| {
        k.eviction_hard = BTreeMap::from([
            ("memory.available".to_string(), "10%".to_string()),
            ("nodefs.available".to_string(), "15%".to_string()),
        ]);
    });
    let t = get(&spec, "m5.large");
    // 7577Mi = 7945060352 bytes; 10% rounded up.
    assert_eq!(res(&t.overhead.eviction_threshold, "memory"), Quantity::from_units(794_506_036));
    assert_eq!(res(&t.overhead.eviction_threshold, "ephemeral-storage"), Quantity::from_units(3_221_225_472));
    let a = t.allocatable();
    assert_eq!(res(a, "memory"), Quantity::from_units(7_945_060_352 - 574 * 1024 * 1024 - 794_506_036));
    assert_eq!(res(a, "ephemeral-storage"), q("16Gi"));

    let spec = with_kubelet(EC2NodeClassSpec::default(), |k| {
        k.eviction_hard = BTreeMap::from([
            ("memory.available".to_string(), "500Mi".to_string()),
            ("nodefs.available".to_string(), "100%".to_string()),
        ]);
        // evictionSoft never affects allocatable.
        k.eviction_soft = BTreeMap::from([("memory.available".to_string(), "1Gi".to_string())]);
    });
    let t = get(&spec, "m5.large");
    assert_eq!(res(&t.overhead.eviction_threshold, "memory"), q("500Mi"));
    assert_eq!(res(&t.overhead.eviction_threshold, "ephemeral-storage"), q("0"));
    assert_eq!(res(t.allocatable(), "memory"), q("6503Mi"));

    let bad = with_kubelet(EC2NodeClassSpec::default(), |k| {
        k.eviction_hard = BTreeMap::from([("memory.available".to_string(), "lots".to_string())]);
    });
    assert!(matches!(cat().instance_types("us-east-1", &bad), Err(CatalogueError::InvalidKubelet { .. })));
}

#[test]
fn ephemeral_storage_from_block_devices_and_raid0() {
    let mut spec = EC2NodeClassSpec {
        block_device_mappings: vec![
            BlockDeviceMapping {
                device_name: Some("/dev/xvda".into()),
                root_volume: false,
                ebs: Some(BlockDevice { volume_size: Some(q("50Gi")), ..Default::default() }),
            },
            BlockDeviceMapping {
                device_name: Some("/dev/xvdc".into()),
                root_volume: true,
                ebs: Some(BlockDevice { volume_size: Some(q("100Gi")), ..Default::default() }),
            },
        ],
        ..Default::default()
    };
    let t = get(&spec, "m5.large");
    assert_eq!(res(&t.capacity, "ephemeral-storage"), q("100Gi"));
    assert_eq!(res(&t.overhead.eviction_threshold, "ephemeral-storage"), Quantity::from_units(10_737_418_240));
    spec.block_device_mappings[1].root_volume = false;
    assert_eq!(res(&get(&spec, "m5.large").capacity, "ephemeral-storage"), q("50Gi"));

    spec.instance_store_policy = Some(InstanceStorePolicy::Raid0);
    assert_eq!(res(&get(&spec, "m5d.large").capacity, "ephemeral-storage"), q("75G"));
    assert_eq!(res(&get(&spec, "m5.large").capacity, "ephemeral-storage"), q("50Gi"));

    assert_eq!(res(&get(&spec_for(AmiFamily::Bottlerocket), "m5.large").capacity, "ephemeral-storage"), q("20Gi"));
    assert_eq!(res(&get(&spec_for(AmiFamily::Windows2022), "m5.large").capacity, "ephemeral-storage"), q("50Gi"));
    assert_eq!(res(&get(&spec_for(AmiFamily::Custom), "m5.large").capacity, "ephemeral-storage"), q("20Gi"));
}

#[test]
fn windows_families() {
    let spec = spec_for(AmiFamily::Windows2022);
    let t = get(&spec, "m5.large");
    assert_eq!(label(&t, labels::OS).as_deref(), Some("windows"));
    assert_eq!(label(&t, labels::WINDOWS_BUILD).as_deref(), Some("10.0.20348"));
    assert_eq!(res(&t.capacity, "pods"), q("110"));
    assert_eq!(res(&t.capacity, "vpc.amazonaws.com/PrivateIPv4Address"), q("9"));
    // Windows reserves memory for the pods capacity (110).
    assert_eq!(res(&t.overhead.kube_reserved, "memory"), Quantity::from_mebibytes(11 * 110 + 255));
    let arm = get(&spec, "c6g.large");
    assert_eq!(operator(&arm, labels::OS), Operator::DoesNotExist);
    assert!(!arm.capacity.contains_key("vpc.amazonaws.com/PrivateIPv4Address"));
    let linux = get(&EC2NodeClassSpec::default(), "m5.large");
    assert_eq!(label(&linux, labels::OS).as_deref(), Some("linux"));
    assert_eq!(operator(&linux, labels::WINDOWS_BUILD), Operator::DoesNotExist);
}

#[test]
fn labels_of_m7i_flex_large() {
    let t = get(&EC2NodeClassSpec::default(), "m7i-flex.large");
    let l = t.requirements.labels();
    let want = [
        (labels::INSTANCE_TYPE, "m7i-flex.large"),
        (labels::ARCH, "amd64"),
        (labels::OS, "linux"),
        (labels::TOPOLOGY_REGION, "us-east-1"),
        (aws::INSTANCE_CATEGORY, "m"),
        (aws::INSTANCE_GENERATION, "7"),
        (aws::INSTANCE_FAMILY, "m7i-flex"),
        (aws::INSTANCE_SIZE, "large"),
        (aws::INSTANCE_CAPABILITY_FLEX, "true"),
        (aws::INSTANCE_CPU, "2"),
        (aws::INSTANCE_CPU_MANUFACTURER, "intel"),
        (aws::INSTANCE_MEMORY, "8192"),
        (aws::INSTANCE_HYPERVISOR, "nitro"),
        (aws::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED, "true"),
        (aws::INSTANCE_NETWORK_BANDWIDTH, "390"),
        (aws::INSTANCE_EBS_BANDWIDTH, "10000"),
        (aws::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, "3200"),
    ];
    for (k, v) in want {
        assert_eq!(l.get(k).map(String::as_str), Some(v), "{k}");
    }
    for k in
        [aws::INSTANCE_GPU_NAME, aws::INSTANCE_ACCELERATOR_NAME, aws::INSTANCE_LOCAL_NVME, aws::CAPACITY_RESERVATION_ID]
    {
        assert_eq!(operator(&t, k), Operator::DoesNotExist, "{k}");
    }
    let tenancy: Vec<_> = t.requirements.get_ref(aws::INSTANCE_TENANCY).unwrap().values().collect();
    assert_eq!(tenancy, ["dedicated", "default"]);
    let ct: Vec<_> = t.requirements.get_ref(labels::CAPACITY_TYPE).unwrap().values().collect();
    assert_eq!(ct, ["on-demand", "spot"]);
    assert_eq!(
        label(&get(&EC2NodeClassSpec::default(), "m5.large"), aws::INSTANCE_CAPABILITY_FLEX).as_deref(),
        Some("false")
    );
}

#[test]
fn gpu_and_accelerator_labels_and_resources() {
    let p5 = get(&EC2NodeClassSpec::default(), "p5.48xlarge");
    assert_eq!(label(&p5, aws::INSTANCE_GPU_NAME).as_deref(), Some("h100"));
    assert_eq!(label(&p5, aws::INSTANCE_GPU_MANUFACTURER).as_deref(), Some("nvidia"));
    assert_eq!(label(&p5, aws::INSTANCE_GPU_COUNT).as_deref(), Some("8"));
    assert_eq!(label(&p5, aws::INSTANCE_GPU_MEMORY).as_deref(), Some("81920"));
    assert_eq!(label(&p5, aws::INSTANCE_LOCAL_NVME).as_deref(), Some("30400"));
    assert_eq!(res(&p5.capacity, "nvidia.com/gpu"), q("8"));
    assert_eq!(res(&p5.capacity, "vpc.amazonaws.com/efa"), q("32"));

    let inf2 = get(&EC2NodeClassSpec::default(), "inf2.xlarge");
    assert_eq!(label(&inf2, aws::INSTANCE_ACCELERATOR_NAME).as_deref(), Some("inferentia2"));
    assert_eq!(label(&inf2, aws::INSTANCE_ACCELERATOR_MANUFACTURER).as_deref(), Some("aws"));
    assert_eq!(label(&inf2, aws::INSTANCE_ACCELERATOR_COUNT).as_deref(), Some("1"));
    assert_eq!(res(&inf2.capacity, "aws.amazon.com/neuron"), q("1"));
    assert_eq!(res(&inf2.capacity, "aws.amazon.com/neuroncore"), q("2"));
    assert_eq!(operator(&inf2, aws::INSTANCE_GPU_COUNT), Operator::DoesNotExist);

    let g5 = get(&EC2NodeClassSpec::default(), "g5.xlarge");
    assert_eq!(label(&g5, aws::INSTANCE_GPU_NAME).as_deref(), Some("a10g"));
    assert_eq!(res(&g5.capacity, "nvidia.com/gpu"), q("1"));
}

#[test]
fn offerings_prices_and_availability() {
    let t = get(&EC2NodeClassSpec::default(), "m5.large");
    let od = cat().info("m5.large").unwrap().on_demand_price.unwrap();
    assert_eq!(od, 0.096);
    let zones: Vec<String> = cat().offered_zones("us-east-1", "m5.large").iter().map(|z| z.name.clone()).collect();
    let zone_req: Vec<_> = t.requirements.get_ref(labels::TOPOLOGY_ZONE).unwrap().values().map(String::from).collect();
    assert_eq!(zone_req, zones);
    // One offering per zone of the region and capacity type; available where the type is offered.
    assert_eq!(t.offerings.len(), 2 * cat().zones("us-east-1").unwrap().len());
    for o in &t.offerings {
        assert_eq!(o.available, zones.contains(&o.zone), "{o:?}");
        assert!(o.requirements.get_ref(labels::CAPACITY_TYPE).unwrap().has(o.capacity_type.as_str()));
        assert!(o.requirements.get_ref(aws::TOPOLOGY_ZONE_ID).unwrap().has(&o.zone_id));
        match o.capacity_type {
            CapacityType::OnDemand => {
                assert_eq!(o.price, od);
                assert!(matches!(&o.price_source, PriceSource::Published(p)
                    if p.package == "github.com/aws/karpenter-provider-aws" && p.version == "v1.14.1" && p.date == "2026-07-06"));
            }
            CapacityType::Spot => {
                assert!(o.price >= 0.30 * od && o.price < 0.50 * od, "{o:?}");
                assert!(o.price_source.is_synthetic());
            }
            CapacityType::Reserved => unreachable!(),
        }
    }
    // Deterministic, and varying by zone.
    let again = get(&EC2NodeClassSpec::default(), "m5.large");
    let spot = |t: &InstanceType| {
        t.offerings.iter().filter(|o| o.capacity_type == CapacityType::Spot).map(|o| o.price).collect::<Vec<_>>()
    };
    assert_eq!(spot(&t), spot(&again));
    let distinct: std::collections::BTreeSet<u64> = spot(&t).iter().map(|p| p.to_bits()).collect();
    assert!(distinct.len() > 1);
    // The same prices apply in every region (upstream falls back to us-east-1's table).
    let eu = get_in("eu-west-1", &EC2NodeClassSpec::default(), "m5.large");
    assert!(eu.offerings.iter().filter(|o| o.capacity_type == CapacityType::OnDemand).all(|o| o.price == od));
}

#[test]
fn every_spot_price_is_in_band() {
    for t in cat().instance_types("us-east-1", &EC2NodeClassSpec::default()).unwrap() {
        let od = cat().info(&t.name).unwrap().on_demand_price;
        for o in t.offerings.iter().filter(|o| o.capacity_type == CapacityType::Spot) {
            match od {
                Some(od) => assert!(o.price >= 0.30 * od && o.price <= 0.50 * od, "{} {o:?}", t.name),
                None => assert!(!o.available),
            }
        }
    }
}

#[test]
fn unpriced_and_incompatible_types_have_no_available_offering() {
    let unpriced = cat().infos().iter().find(|i| i.on_demand_price.is_none()).unwrap();
    let region = cat().regions().find(|r| !cat().offered_zones(r, &unpriced.name).is_empty()).unwrap();
    let t = get_in(region, &EC2NodeClassSpec::default(), &unpriced.name);
    assert!(t.offerings.iter().all(|o| !o.available && o.price_source == PriceSource::Unpriced));

    let a1 = get(&EC2NodeClassSpec::default(), "a1.large");
    assert_eq!(a1.available_offerings().count(), 0, "AL2023 does not support a1");
    let a1 = get(&spec_for(AmiFamily::AL2), "a1.large");
    assert!(a1.available_offerings().count() > 0);
}

#[test]
fn errors() {
    let err = cat().instance_types("mars-north-1", &EC2NodeClassSpec::default()).unwrap_err();
    assert!(matches!(err, CatalogueError::UnknownRegion { .. }));
    assert!(err.to_string().contains("us-east-1"));
    assert!(matches!(Catalogue::from_json("{"), Err(CatalogueError::Parse(_))));
    let text = EMBEDDED_JSON.replacen("\"schema\":1", "\"schema\":99", 1);
    assert!(matches!(Catalogue::from_json(&text), Err(CatalogueError::Schema { found: 99, .. })));
    let neg = with_kubelet(EC2NodeClassSpec::default(), |k| k.max_pods = Some(-1));
    assert!(matches!(cat().instance_types("us-east-1", &neg), Err(CatalogueError::InvalidKubelet { .. })));
}

#[test]
fn instance_types_are_sorted_and_consistent() {
    let types = cat().instance_types("us-east-1", &EC2NodeClassSpec::default()).unwrap();
    assert!(types.windows(2).all(|w| w[0].name < w[1].name));
    for t in &types {
        assert_eq!(label(t, labels::INSTANCE_TYPE).as_deref(), Some(t.name.as_str()));
        let a = t.allocatable();
        assert!(!res(a, "cpu").is_negative(), "{}", t.name);
        assert!(!t.offerings.is_empty());
    }
}

#[test]
fn shared_results_are_memoised_per_region_and_settings() {
    let c = Catalogue::from_json(EMBEDDED_JSON).unwrap();
    let spec = EC2NodeClassSpec::default();
    let a = c.instance_types_shared("us-east-1", &spec).unwrap();
    let b = c.instance_types_shared("us-east-1", &spec.clone()).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    let other = with_kubelet(spec.clone(), |k| k.max_pods = Some(10));
    let d = c.instance_types_shared("us-east-1", &other).unwrap();
    assert!(!Arc::ptr_eq(&a, &d));
    assert!(!Arc::ptr_eq(&a, &c.instance_types_shared("us-west-2", &spec).unwrap()));
    assert_eq!(a.len(), c.instance_types("us-east-1", &spec).unwrap().len());
    assert!(Arc::ptr_eq(&a, &c.instance_types_shared("us-east-1", &spec).unwrap()));
}

#[test]
fn nodeclass_compatibility_checks() {
    let available = |spec: &EC2NodeClassSpec, name: &str| get(spec, name).available_offerings().count() > 0;
    let nested = EC2NodeClassSpec {
        cpu_options: Some(CpuOptions { nested_virtualization: Some("enabled".into()) }),
        ..Default::default()
    };
    assert!(cat().info("m7i-flex.large").unwrap().nested_virtualization);
    assert!(available(&nested, "m7i-flex.large"));
    assert!(!available(&nested, "m5.large"));

    let conntrack = EC2NodeClassSpec {
        connection_tracking: Some(ConnectionTracking { tcp_established_timeout: Some(60), ..Default::default() }),
        ..Default::default()
    };
    assert!(available(&conntrack, "m5.large"));
    assert!(!available(&conntrack, "m5.metal"), "bare metal has no Nitro hypervisor label");

    // Two efa-only interfaces on card 0 alongside the primary: EFA capacity counts them, pods lose 2 ENIs.
    let ni = |card: i32, device: i32, kind: &str| NetworkInterface {
        network_card_index: card,
        device_index: device,
        interface_type: kind.into(),
    };
    let efa = EC2NodeClassSpec {
        network_interfaces: vec![ni(0, 0, "interface"), ni(0, 1, "efa-only"), ni(1, 0, "efa-only")],
        ..Default::default()
    };
    let p5 = get(&efa, "p5.48xlarge");
    assert!(p5.available_offerings().count() > 0);
    assert_eq!(res(&p5.capacity, "vpc.amazonaws.com/efa"), q("2"));
    // Card 0 has 2 ENIs, one is efa-only: 1 × (50 − 1) + 2.
    assert_eq!(res(&p5.capacity, "pods"), q("51"));
    assert_eq!(res(&p5.overhead.kube_reserved, "memory"), Quantity::from_mebibytes(11 * 51 + 255));
    assert!(!available(&efa, "m5.large"), "no second network card, no EFA");
}

#[test]
fn base_requirements_leave_out_exactly_the_dynamic_keys() {
    let c = cat();
    let spec = spec_for(AmiFamily::Windows2022);
    let built: BTreeMap<String, InstanceType> =
        c.instance_types("us-west-2", &spec).unwrap().into_iter().map(|t| (t.name.clone(), t)).collect();
    for (info, base) in c.infos().iter().zip(c.base_requirements()) {
        for key in type_requirements::DYNAMIC_KEYS {
            assert!(!base.has(key), "{} base has {key}", info.name);
        }
        if let Some(t) = built.get(&info.name) {
            assert_eq!(t.requirements.len(), base.len() + type_requirements::DYNAMIC_KEYS.len(), "{}", info.name);
            for r in base {
                assert_eq!(t.requirements.get_ref(r.key()), Some(r), "{}", info.name);
            }
        }
    }
    // The per-query parts: windows on amd64, no os value on arm64, the region and zone lists.
    let m5 = &built["m5.large"];
    assert_eq!(label(m5, labels::OS).as_deref(), Some("windows"));
    assert_eq!(label(m5, labels::WINDOWS_BUILD).as_deref(), Some(aws::WINDOWS_2022_BUILD));
    assert_eq!(label(m5, labels::TOPOLOGY_REGION).as_deref(), Some("us-west-2"));
    assert_eq!(operator(&built["m6g.large"], labels::OS), Operator::DoesNotExist);
}

#[test]
fn offerings_share_requirements_per_zone_and_capacity_type() {
    let types = cat().instance_types("us-east-1", &EC2NodeClassSpec::default()).unwrap();
    let zones = cat().zones("us-east-1").unwrap();
    let mut seen: Vec<&Arc<Requirements>> = Vec::new();
    for t in &types {
        for o in &t.offerings {
            let want: Requirements =
                offering_requirements(o.capacity_type, &Zone { name: o.zone.clone(), id: o.zone_id.clone() });
            assert_eq!(*o.requirements, want);
            if !seen.iter().any(|s| Arc::ptr_eq(s, &o.requirements)) {
                seen.push(&o.requirements);
            }
        }
    }
    assert_eq!(seen.len(), zones.len() * OFFERED_CAPACITY_TYPES.len());
}

#[test]
fn subnets_rename_zones_by_id_and_leave_zones_without_one_unavailable() {
    use crate::api::ec2nodeclass::Subnet;
    let spec = spec_for(AmiFamily::AL2023);
    // An account whose us-west-2a is usw2-az2 (names are per account; IDs are not), with subnets
    // in two zones only.
    let subnets = [
        Subnet { id: "subnet-1".into(), zone: "us-west-2a".into(), zone_id: "usw2-az2".into() },
        Subnet { id: "subnet-2".into(), zone: "us-west-2b".into(), zone_id: "usw2-az1".into() },
    ];
    let types = cat().instance_types_in_subnets("us-west-2", &spec, &subnets).unwrap();
    let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
    let available: std::collections::BTreeSet<(&str, &str)> =
        m5.available_offerings().map(|o| (o.zone.as_str(), o.zone_id.as_str())).collect();
    assert_eq!(available, [("us-west-2a", "usw2-az2"), ("us-west-2b", "usw2-az1")].into());
    // The zones of no subnet are listed, unavailable, under the catalogue's names.
    assert!(m5.offerings.iter().any(|o| o.zone_id == "usw2-az3" && !o.available));
    let zones = m5.requirements.get(labels::TOPOLOGY_ZONE);
    assert_eq!(zones.values().collect::<Vec<_>>().len(), 2, "{zones:?}");
    assert!(zones.has("us-west-2a") && zones.has("us-west-2b"));
    // An offering's requirements carry the account's name with the zone's ID.
    let o = m5.offerings.iter().find(|o| o.zone_id == "usw2-az2").unwrap();
    assert!(o.requirements.get(labels::TOPOLOGY_ZONE).has("us-west-2a"));
    // No subnets: the catalogue's zones and names, as before.
    let plain = cat().instance_types_shared("us-west-2", &spec).unwrap();
    let plain_m5 = plain.iter().find(|t| t.name == "m5.large").unwrap();
    assert!(plain_m5.available_offerings().any(|o| o.zone_id == "usw2-az1" && o.zone == "us-west-2a"));
    assert!(plain_m5.available_offerings().count() > available.len() * 2);
}

// ---------------------------------------------------------------------------------------------
// The live catalogue (what EC2 answers).

/// m5.large as `DescribeInstanceTypes` answers it (the fields carpentry reads, and one it does not).
const M5_LARGE_DESCRIBED: &str = r#"{
    "InstanceType": "m5.large", "CurrentGeneration": true,
    "SupportedUsageClasses": ["on-demand", "spot"], "SupportedVirtualizationTypes": ["hvm"],
    "BareMetal": false, "Hypervisor": "nitro",
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "SustainedClockSpeedInGhz": 3.1, "Manufacturer": "Intel"},
    "VCpuInfo": {"DefaultVCpus": 2, "DefaultCores": 1},
    "MemoryInfo": {"SizeInMiB": 8192},
    "EbsInfo": {"EbsOptimizedSupport": "default", "EncryptionSupport": "supported",
                "EbsOptimizedInfo": {"MaximumBandwidthInMbps": 4750}, "NvmeSupport": "required"},
    "NetworkInfo": {"NetworkPerformance": "Up to 10 Gigabit", "MaximumNetworkInterfaces": 3,
                    "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 3}],
                    "DefaultNetworkCardIndex": 0, "Ipv4AddressesPerInterface": 10, "EnaSupport": "required",
                    "EncryptionInTransitSupported": false},
    "NitroEnclavesSupport": "unsupported"
}"#;

fn described(json: &str) -> DescribedInstanceType {
    serde_json::from_str(json).unwrap()
}

fn live_subnets() -> Vec<Subnet> {
    [("subnet-a", "us-west-2a", "usw2-az2"), ("subnet-b", "us-west-2b", "usw2-az1")]
        .into_iter()
        .map(|(id, zone, zone_id)| Subnet { id: id.into(), zone: zone.into(), zone_id: zone_id.into() })
        .collect()
}

#[test]
fn a_described_type_reads_as_the_embedded_catalogue_has_it() {
    let m5 = described(M5_LARGE_DESCRIBED);
    let embedded = cat().info("m5.large").unwrap();
    let info = m5.info(&KarpenterTables::of(embedded)).unwrap().unwrap();
    assert_eq!(&info, embedded);
    // Without the tables EC2 does not answer, they are absent.
    let bare = m5.info(&KarpenterTables::default()).unwrap().unwrap();
    assert_eq!((bare.network_bandwidth_mbps, bare.branch_enis, bare.on_demand_price), (None, None, None));
    // Upstream's filter: hvm, x86_64 or arm64.
    let mut paravirtual = m5.clone();
    paravirtual.virtualization_types = vec!["paravirtual".into()];
    assert_eq!(paravirtual.info(&KarpenterTables::default()), Ok(None));
    let mut broken = m5.clone();
    broken.vcpu.default_vcpus = None;
    let e = broken.info(&KarpenterTables::default()).unwrap_err();
    assert_eq!(e.to_string(), "instance type m5.large: missing or bad VCpuInfo.DefaultVCpus");
}

#[test]
fn a_live_catalogue_computes_as_offline_and_says_what_priced_each_offering() {
    let mut new_type = described(M5_LARGE_DESCRIBED);
    new_type.instance_type = "zz9.large".into();
    let types = [described(M5_LARGE_DESCRIBED), new_type];
    let offerings: Vec<(String, String)> =
        [("m5.large", "usw2-az1"), ("m5.large", "usw2-az2"), ("zz9.large", "usw2-az2")]
            .into_iter()
            .map(|(t, z)| (t.to_string(), z.to_string()))
            .collect();
    let on_demand = LivePrices::on_demand([("m5.large".to_string(), 0.2)].into(), "2026-12-04T10:00:00Z");
    let spot = LivePrices::spot(
        &[SpotRecord {
            instance_type: "m5.large".into(),
            zone: "us-west-2a".into(),
            price: "0.031".into(),
            has_timestamp: true,
        }],
        "2026-12-04T10:00:01Z",
    )
    .unwrap();
    let live = cat()
        .live(LiveAnswers {
            region: "us-west-2",
            types: &types,
            offerings: &offerings,
            on_demand: Some(Arc::new(on_demand)),
            spot: Some(Arc::new(spot)),
            fetched_at: "2026-12-04T10:00:00Z",
        })
        .unwrap();
    assert_eq!(live.regions().collect::<Vec<_>>(), ["us-west-2"]);
    let spec = EC2NodeClassSpec::default();
    let subnets = live_subnets();
    let listed = live.instance_types_in_subnets("us-west-2", &spec, &subnets).unwrap();
    let offline = cat().instance_types_in_subnets("us-west-2", &spec, &subnets).unwrap();
    let m5 = listed.iter().find(|t| t.name == "m5.large").unwrap();
    let m5_offline = offline.iter().find(|t| t.name == "m5.large").unwrap();
    assert_eq!(m5.capacity, m5_offline.capacity);
    assert_eq!(m5.allocatable(), m5_offline.allocatable());
    assert_eq!(m5.requirements, m5_offline.requirements);
    let offering = |it: &InstanceType, zone: &str, ct: CapacityType| {
        it.offerings.iter().find(|o| o.zone == zone && o.capacity_type == ct).cloned().unwrap()
    };
    let od = offering(m5, "us-west-2a", CapacityType::OnDemand);
    assert!(od.available && od.price == 0.2 && matches!(od.price_source, PriceSource::PricingApi(_)));
    assert_eq!(od.price_source.describe(), "the Pricing API (GetProducts at 2026-12-04T10:00:00Z)");
    let spot_a = offering(m5, "us-west-2a", CapacityType::Spot);
    assert!(spot_a.available && spot_a.price == 0.031);
    assert_eq!(spot_a.price_source.describe(), "EC2 spot prices (DescribeSpotPriceHistory at 2026-12-04T10:00:01Z)");
    // Spot data exists but not for this zone: no price, so unavailable (upstream `SpotPrice`).
    let spot_b = offering(m5, "us-west-2b", CapacityType::Spot);
    assert!(!spot_b.available && spot_b.price_source == PriceSource::Unpriced);
    // A type the embedded catalogue does not know: no table price, and the API priced none.
    let zz9 = listed.iter().find(|t| t.name == "zz9.large").unwrap();
    assert!(zz9.offerings.iter().all(|o| !o.available), "{:?}", zz9.offerings);
    assert!(offering(zz9, "us-west-2a", CapacityType::OnDemand).price_source == PriceSource::Unpriced);

    // Without API prices: the table prices on-demand, spot is synthetic, as offline.
    let table = cat()
        .live(LiveAnswers {
            region: "us-west-2",
            types: &types,
            offerings: &offerings,
            on_demand: None,
            spot: None,
            fetched_at: "2026-12-04T10:00:00Z",
        })
        .unwrap();
    let listed = table.instance_types_in_subnets("us-west-2", &spec, &subnets).unwrap();
    let m5 = listed.iter().find(|t| t.name == "m5.large").unwrap();
    let od = offering(m5, "us-west-2a", CapacityType::OnDemand);
    assert_eq!(od.price, 0.096);
    assert!(od.price_source.describe().starts_with("the on-demand table of github.com/aws/karpenter-provider-aws"));
    let spot_a = offering(m5, "us-west-2a", CapacityType::Spot);
    assert_eq!(spot_a.price, offering(m5_offline, "us-west-2a", CapacityType::Spot).price);
    assert!(spot_a.price_source.is_synthetic());
}

#[test]
fn a_live_catalogue_without_zones_or_types_is_an_error() {
    let types = [described(M5_LARGE_DESCRIBED)];
    let answers = |offerings: &'static [(String, String)]| LiveAnswers {
        region: "us-west-2",
        types: &[],
        offerings,
        on_demand: None,
        spot: None,
        fetched_at: "t",
    };
    assert!(matches!(cat().live(answers(&[])), Err(CatalogueError::Invalid(_))));
    let no_zones = cat().live(LiveAnswers {
        region: "us-west-2",
        types: &types,
        offerings: &[],
        on_demand: None,
        spot: None,
        fetched_at: "t",
    });
    assert!(matches!(no_zones, Err(CatalogueError::Invalid(m)) if m.contains("listed 0 zones")));
}
