//! The user data of each AMI family, as upstream writes it (`bootstrap/*.go` v1.14.1).

use std::collections::BTreeMap;

use super::*;
use crate::api::ec2nodeclass::KubeletConfiguration;

fn cluster() -> ClusterBootstrap {
    ClusterBootstrap {
        name: "prod".into(),
        endpoint: Some("https://E1.gr7.eu-west-1.eks.amazonaws.com".into()),
        // base64 of "pem\n"
        ca_bundle: Some("cGVtCg==".into()),
        cidr: Some("172.20.0.0/16".into()),
        kube_dns_ip: Some("172.20.0.10".into()),
    }
}

fn nodeclaim(extra: &str) -> NodeClaim {
    serde_yaml::from_str(&format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: general-x1
  labels: {{karpenter.sh/nodepool: general, team: web, node.kubernetes.io/instance-type: m5.large, topology.kubernetes.io/zone: eu-west-1a}}
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  requirements: []
{extra}"#
    ))
    .unwrap()
}

fn options<'a>(
    cluster: &'a ClusterBootstrap,
    family: AmiFamily,
    kubelet: Option<&KubeletConfiguration>,
    user_data: Option<&'a str>,
) -> Options<'a> {
    Options::for_launch(cluster, family, kubelet, &nodeclaim(""), "spot", 29, user_data, None)
}

const NODE_CONFIG: &str = r#"# Karpenter Generated NodeConfig
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata: {}
spec:
  cluster:
    apiServerEndpoint: https://E1.gr7.eu-west-1.eks.amazonaws.com
    certificateAuthority: cGVtCg==
    cidr: 172.20.0.0/16
    name: prod
  containerd: {}
  instance:
    localStorage: {}
  kubelet:
    config:
      clusterDNS:
      - 172.20.0.10
      maxPods: 29
      registerWithTaints:
      - effect: NoExecute
        key: karpenter.sh/unregistered
    flags:
    - --node-labels="karpenter.sh/capacity-type=spot,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=general,team=web"
"#;

#[test]
fn al2023_writes_a_node_config_with_the_cluster_the_kubelet_labels_and_taints() {
    let c = cluster();
    let text = options(&c, AmiFamily::AL2023, None, None).user_data(AmiFamily::AL2023).unwrap().unwrap();
    let expected = format!(
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: application/node.eks.aws\n\n{NODE_CONFIG}\n--//--\n"
    );
    assert_eq!(text, expected);
}

#[test]
fn al2023_puts_the_users_shell_script_yaml_or_archive_first() {
    let c = cluster();
    let parts = |user: &str| {
        let text = options(&c, AmiFamily::AL2023, None, Some(user)).user_data(AmiFamily::AL2023).unwrap().unwrap();
        mime::parse(&text).unwrap()
    };
    let shell = parts("#!/bin/bash\necho hi\n");
    assert_eq!(shell.len(), 2);
    assert_eq!(shell[0].content_type(), mime::CONTENT_TYPE_SHELL_SCRIPT);
    assert_eq!(shell[0].content, "#!/bin/bash\necho hi\n");
    assert_eq!(shell[1].content, NODE_CONFIG);

    let yaml = parts(
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 42\n",
    );
    assert_eq!(yaml[0].content_type(), mime::CONTENT_TYPE_NODE_CONFIG);

    // An archive without its closing delimiter, as Go's reader accepts it; the headers' case is
    // canonical and the line break before each delimiter is the delimiter's.
    let archive = "MIME-Version: 1.0\ncontent-type: multipart/mixed; boundary=BND\n\npreamble\n--BND\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n--BND\ncontent-type: text/x-shellscript\n\necho two\n--BND\n";
    let merged = parts(archive);
    let kinds: Vec<(&str, &str)> = merged.iter().map(|p| (p.content_type(), p.content.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (mime::CONTENT_TYPE_NODE_CONFIG, "kind: NodeConfig"),
            ("text/x-shellscript", "echo two"),
            (mime::CONTENT_TYPE_NODE_CONFIG, NODE_CONFIG),
        ]
    );
}

#[test]
fn user_data_that_cannot_be_merged_and_missing_cluster_facts_are_errors() {
    let c = cluster();
    let fails = |family, user: &str| options(&c, family, None, Some(user)).user_data(family).unwrap_err();
    let not_multipart = fails(AmiFamily::AL2023, "Content-Type: text/plain\n\necho\n");
    assert!(
        matches!(&not_multipart, BootstrapError::UserData { why } if why.contains("not multipart")),
        "{not_multipart}"
    );
    let open_part = fails(AmiFamily::AL2, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"x\"\n\n--x\nContent-Type: text/x-shellscript\n\necho unterminated\n");
    assert!(matches!(&open_part, BootstrapError::UserData { why } if why.contains("part 1")), "{open_part}");
    let no_headers_end = fails(AmiFamily::AL2023, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x");
    assert!(matches!(no_headers_end, BootstrapError::UserData { .. }));

    let mut no_cidr = cluster();
    no_cidr.cidr = None;
    assert_eq!(
        options(&no_cidr, AmiFamily::AL2023, None, None).user_data(AmiFamily::AL2023),
        Err(BootstrapError::CidrUnknown)
    );
    // AL2 does not need the CIDR.
    assert!(options(&no_cidr, AmiFamily::AL2, None, None).user_data(AmiFamily::AL2).is_ok());
    let mut no_endpoint = cluster();
    no_endpoint.endpoint = None;
    for family in [AmiFamily::AL2023, AmiFamily::AL2, AmiFamily::Windows2022] {
        assert_eq!(options(&no_endpoint, family, None, None).user_data(family), Err(BootstrapError::EndpointUnknown));
    }
    let mut bad_ca = cluster();
    bad_ca.ca_bundle = Some("not base64!".into());
    let e = options(&bad_ca, AmiFamily::AL2023, None, None).user_data(AmiFamily::AL2023).unwrap_err();
    assert!(matches!(e, BootstrapError::CaBundle { .. }), "{e}");
    // A bundle wrapped in lines (`base64 ca.crt`, a Helm block value) is the same bundle.
    let mut wrapped = cluster();
    wrapped.ca_bundle = Some("cGVt\nCg==\n".into());
    assert_eq!(
        options(&wrapped, AmiFamily::AL2023, None, None).user_data(AmiFamily::AL2023),
        options(&cluster(), AmiFamily::AL2023, None, None).user_data(AmiFamily::AL2023)
    );
}

fn kubelet() -> KubeletConfiguration {
    serde_yaml::from_str(
        r#"
maxPods: 58
systemReserved: {memory: 200Mi, cpu: 100m}
evictionHard: {nodefs.available: 10%, memory.available: 5%}
evictionSoftGracePeriod: {memory.available: 1m}
imageGCHighThresholdPercent: 85
cpuCFSQuota: false
"#,
    )
    .unwrap()
}

#[test]
fn al2_runs_bootstrap_sh_with_the_kubelet_settings_as_flags_sorted() {
    let c = cluster();
    let k = kubelet();
    let text = options(&c, AmiFamily::AL2, Some(&k), Some("#!/bin/bash\necho first"))
        .user_data(AmiFamily::AL2)
        .unwrap()
        .unwrap();
    let expected = r#"MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo first
--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash -xe
exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1
/etc/eks/bootstrap.sh 'prod' --apiserver-endpoint 'https://E1.gr7.eu-west-1.eks.amazonaws.com' --b64-cluster-ca 'cGVtCg==' \
--dns-cluster-ip '172.20.0.10' \
--use-max-pods false \
--kubelet-extra-args '--node-labels="karpenter.sh/capacity-type=spot,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=general,team=web" --register-with-taints="karpenter.sh/unregistered:NoExecute" --max-pods=58 --system-reserved="cpu=100m,memory=200Mi" --eviction-hard="memory.available<5%,nodefs.available<10%" --eviction-soft-grace-period="memory.available=1m0s" --image-gc-high-threshold=85 --cpu-cfs-quota=false'
--//--
"#;
    assert_eq!(text, expected);
}

#[test]
fn al2023_carries_the_kubelet_settings_in_its_config_and_raid0_as_local_storage() {
    let c = cluster();
    let k = kubelet();
    let mut o = options(&c, AmiFamily::AL2023, Some(&k), None);
    o.instance_store_policy = Some(InstanceStorePolicy::Raid0);
    let yaml = nodeadm::node_config_yaml(&o, "https://x").unwrap();
    let doc: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    let config = &doc["spec"]["kubelet"]["config"];
    assert_eq!(config["maxPods"], 58);
    assert_eq!(config["systemReserved"]["cpu"], "100m");
    assert_eq!(config["evictionSoftGracePeriod"]["memory.available"], "1m0s");
    assert_eq!(config["cpuCFSQuota"], false);
    assert_eq!(config["clusterDNS"][0], "172.20.0.10");
    assert_eq!(doc["spec"]["instance"]["localStorage"]["strategy"], "RAID0");
}

#[test]
fn windows_runs_start_eks_bootstrap_after_the_users_script() {
    let c = cluster();
    let text = options(&c, AmiFamily::Windows2022, None, Some("Write-Host hi"))
        .user_data(AmiFamily::Windows2022)
        .unwrap()
        .unwrap();
    let expected = "<powershell>\nWrite-Host hi\n[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n& $EKSBootstrapScriptFile -EKSClusterName 'prod' -APIServerEndpoint 'https://E1.gr7.eu-west-1.eks.amazonaws.com' -Base64ClusterCA 'cGVtCg==' -KubeletExtraArgs '--node-labels=\"karpenter.sh/capacity-type=spot,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=general,team=web\" --register-with-taints=\"karpenter.sh/unregistered:NoExecute\" --max-pods=29' -DNSClusterIP '172.20.0.10'\n</powershell>";
    assert_eq!(text, expected);
}

#[test]
fn custom_passes_the_user_data_through_and_gets_no_do_not_sync_label() {
    let c = cluster();
    let o = options(&c, AmiFamily::Custom, None, Some("anything at all"));
    assert_eq!(o.user_data(AmiFamily::Custom).unwrap().as_deref(), Some("anything at all"));
    assert!(!o.labels.contains_key(crate::labels::NODE_DO_NOT_SYNC_TAINTS));
    assert_eq!(options(&c, AmiFamily::Custom, None, None).user_data(AmiFamily::Custom), Ok(None));
}

#[test]
fn taints_and_startup_taints_are_registered_with_the_unregistered_taint_once() {
    let c = cluster();
    let nc = nodeclaim(
        "  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]\n  startupTaints: [{key: karpenter.sh/unregistered, effect: NoExecute}, {key: cni, effect: NoSchedule}]",
    );
    let o = Options::for_launch(&c, AmiFamily::AL2, None, &nc, "on-demand", 8, None, None);
    let taints: Vec<String> = o.taints.iter().map(taint_string).collect();
    assert_eq!(taints, ["dedicated=gpu:NoSchedule", "karpenter.sh/unregistered:NoExecute", "cni:NoSchedule"]);
    let labels: BTreeMap<&str, &str> = o.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(labels.get(crate::labels::CAPACITY_TYPE), Some(&"on-demand"));
    assert!(!labels.contains_key("node.kubernetes.io/instance-type"));
}

#[test]
fn a_kubelet_dns_and_max_pods_of_the_class_win() {
    let c = cluster();
    let k = KubeletConfiguration { cluster_dns: vec!["fd00::a".into()], max_pods: Some(7), ..Default::default() };
    let o = options(&c, AmiFamily::AL2, Some(&k), None);
    assert_eq!(o.kubelet.max_pods, Some(7));
    let text = o.user_data(AmiFamily::AL2).unwrap().unwrap();
    assert!(text.contains(" \\\n--ip-family ipv6 \\\n--dns-cluster-ip 'fd00::a'"), "{text}");
}
