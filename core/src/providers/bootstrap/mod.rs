//! The user data a launch template carries: the node's bootstrap configuration (cluster name,
//! API server endpoint, CA bundle, service CIDR, kubelet settings, labels and taints) merged with
//! the EC2NodeClass's `spec.userData`, per AMI family (upstream karpenter-provider-aws v1.14.1
//! `pkg/providers/amifamily/bootstrap`, called from `amifamily/resolver.go`).
//!
//! | file | upstream |
//! |---|---|
//! | `mod.rs` | `bootstrap/bootstrap.go` (`Options`, kubelet flags), `amifamily/resolver.go` (labels, taints, max pods, cluster DNS) |
//! | `mime.rs` | `bootstrap/mime/mime.go`, the archive code of `bootstrap/eksbootstrap.go` |
//! | `nodeadm.rs` | `bootstrap/nodeadm.go` (AL2023: a nodeadm `NodeConfig`) |
//! | `eksbootstrap.rs` | `bootstrap/eksbootstrap.go` (AL2: `/etc/eks/bootstrap.sh`) |
//! | `windows.rs` | `bootstrap/windows.go` (`Start-EKSBootstrap.ps1`) |
//!
//! `Custom` passes `spec.userData` through unchanged, as upstream. Deterministic where upstream is
//! not (docs/divergences.md): upstream writes the `--system-reserved`, `--kube-reserved` and
//! eviction flags in Go's map order, which varies between runs; carpentry writes them sorted by key.
//!
//! Not done yet (docs/controller.md, "Not yet"): Bottlerocket's TOML settings; a Bottlerocket
//! NodeClass's `spec.userData` is passed through unchanged, so such a node gets no cluster
//! settings from carpentry.

pub mod eksbootstrap;
pub mod mime;
pub mod nodeadm;
pub mod windows;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use serde::Serialize;

use crate::api::ec2nodeclass::{AmiFamily, InstanceStorePolicy, KubeletConfiguration};
use crate::api::NodeClaim;

/// What the controller knows about the cluster its nodes join (upstream's operator: the endpoint
/// from `--cluster-endpoint` or EKS DescribeCluster, the CA bundle from `--cluster-ca-bundle` or
/// its own client configuration, the service CIDR from DescribeCluster, the `kube-dns` Service's
/// cluster IP).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterBootstrap {
    pub name: String,
    pub endpoint: Option<String>,
    /// Base64 of the PEM certificates.
    pub ca_bundle: Option<String>,
    /// The service CIDR (`kubernetesNetworkConfig.serviceIpv4Cidr`, else `serviceIpv6Cidr`).
    pub cidr: Option<String>,
    pub kube_dns_ip: Option<String>,
}

/// Why a launch template's user data cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum BootstrapError {
    /// The cluster's API server endpoint is not known.
    #[error("the cluster's API server endpoint is not known: set --cluster-endpoint (CLUSTER_ENDPOINT, chart settings.clusterEndpoint) or allow eks:DescribeCluster")]
    EndpointUnknown,
    /// AL2023's nodeadm needs the cluster's service CIDR (upstream: `resolving cluster CIDR`).
    #[error("the cluster's service CIDR is not known (nodeadm needs it for AL2023): allow eks:DescribeCluster on the cluster")]
    CidrUnknown,
    /// The CA bundle is not base64 (upstream: `decoding CABundle`).
    #[error("the cluster CA bundle is not base64: {why}")]
    CaBundle { why: String },
    /// `spec.userData` cannot be merged (a MIME archive that does not parse).
    #[error("spec.userData: {why}")]
    UserData { why: String },
}

impl BootstrapError {
    pub(crate) fn user_data(why: String) -> BootstrapError {
        BootstrapError::UserData { why }
    }
}

/// upstream `bootstrap.Options`: what one launch template's user data says.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Options<'a> {
    pub cluster: &'a ClusterBootstrap,
    /// The NodeClass's kubelet settings, `maxPods` and `clusterDNS` filled in.
    pub kubelet: KubeletConfiguration,
    pub taints: Vec<Taint>,
    pub labels: BTreeMap<String, String>,
    pub custom_user_data: Option<&'a str>,
    pub instance_store_policy: Option<InstanceStorePolicy>,
}

impl<'a> Options<'a> {
    /// upstream `resolveLaunchTemplates` + `CreateAMIOptions`: for `nodeclaim` launched as
    /// `capacity_type` with a class of `family`, whose kubelet settings are `kubelet`, on types of
    /// `max_pods` pods: the kubelet's `maxPods` (the class's, else the types'), `clusterDNS` (the
    /// class's, else kube-dns), the NodeClaim's taints and startup taints with the unregistered
    /// taint added when missing, and its labels with the capacity type and (but for `Custom`)
    /// `karpenter.sh/do-not-sync-taints`, less those the NodeRestriction admission forbids a
    /// kubelet to set.
    #[allow(clippy::too_many_arguments)]
    pub fn for_launch(
        cluster: &'a ClusterBootstrap,
        family: AmiFamily,
        kubelet: Option<&KubeletConfiguration>,
        nodeclaim: &NodeClaim,
        capacity_type: &str,
        max_pods: i64,
        custom_user_data: Option<&'a str>,
        instance_store_policy: Option<InstanceStorePolicy>,
    ) -> Options<'a> {
        let mut kubelet = kubelet.cloned().unwrap_or_default();
        if kubelet.max_pods.is_none() {
            kubelet.max_pods = Some(i32::try_from(max_pods).unwrap_or(i32::MAX));
        }
        if kubelet.cluster_dns.is_empty() {
            if let Some(ip) = &cluster.kube_dns_ip {
                kubelet.cluster_dns = vec![ip.clone()];
            }
        }
        let mut taints: Vec<Taint> =
            nodeclaim.spec.taints.iter().chain(nodeclaim.spec.startup_taints.iter()).cloned().collect();
        let unregistered = crate::scheduling::taints::UNREGISTERED;
        if !taints.iter().any(|t| t.key == unregistered && t.effect == "NoExecute") {
            taints.push(Taint {
                key: unregistered.to_string(),
                effect: "NoExecute".into(),
                value: None,
                time_added: None,
            });
        }
        let mut labels: BTreeMap<String, String> = nodeclaim.metadata.labels.clone().unwrap_or_default();
        labels.insert(crate::labels::CAPACITY_TYPE.into(), capacity_type.into());
        if family != AmiFamily::Custom {
            labels.insert(crate::labels::NODE_DO_NOT_SYNC_TAINTS.into(), "true".into());
        }
        labels.retain(|k, _| !is_restricted_label(k));
        Options { cluster, kubelet, taints, labels, custom_user_data, instance_store_policy }
    }

    /// The user data for `family`, as text (the launch template carries it base64-encoded);
    /// `None` when there is none (`Custom` without `spec.userData`).
    pub fn user_data(&self, family: AmiFamily) -> Result<Option<String>, BootstrapError> {
        let endpoint =
            || self.cluster.endpoint.as_deref().filter(|e| !e.is_empty()).ok_or(BootstrapError::EndpointUnknown);
        match family {
            AmiFamily::AL2023 => nodeadm::script(self, endpoint()?).map(Some),
            AmiFamily::AL2 => eksbootstrap::script(self, endpoint()?).map(Some),
            AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
                Ok(Some(windows::script(self, endpoint()?)))
            }
            AmiFamily::Bottlerocket | AmiFamily::Custom => Ok(self.custom_user_data.map(str::to_string)),
        }
    }

    /// upstream `kubeletExtraArgs`: `--node-labels`, `--register-with-taints` and the kubelet
    /// settings as flags (AL2 and Windows).
    pub(crate) fn kubelet_extra_args(&self) -> Vec<String> {
        let mut args: Vec<String> = Vec::new();
        args.extend(self.node_label_arg());
        args.push(self.node_taint_arg());
        let k = &self.kubelet;
        if let Some(n) = k.max_pods {
            args.push(format!("--max-pods={n}"));
        }
        if let Some(n) = k.pods_per_core {
            args.push(format!("--pods-per-core={n}"));
        }
        let quantities = |m: &BTreeMap<String, crate::quantity::Quantity>| -> BTreeMap<String, String> {
            m.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()
        };
        args.extend(join_parameter_args("--system-reserved", &quantities(&k.system_reserved), "="));
        args.extend(join_parameter_args("--kube-reserved", &quantities(&k.kube_reserved), "="));
        args.extend(join_parameter_args("--eviction-hard", &k.eviction_hard, "<"));
        args.extend(join_parameter_args("--eviction-soft", &k.eviction_soft, "<"));
        args.extend(join_parameter_args(
            "--eviction-soft-grace-period",
            &go_durations(&k.eviction_soft_grace_period),
            "=",
        ));
        if let Some(n) = k.eviction_max_pod_grace_period {
            args.push(format!("--eviction-max-pod-grace-period={n}"));
        }
        if let Some(n) = k.image_gc_high_threshold_percent {
            args.push(format!("--image-gc-high-threshold={n}"));
        }
        if let Some(n) = k.image_gc_low_threshold_percent {
            args.push(format!("--image-gc-low-threshold={n}"));
        }
        if let Some(b) = k.cpu_cfs_quota {
            args.push(format!("--cpu-cfs-quota={b}"));
        }
        args
    }

    /// `--register-with-taints="k=v:Effect,…"` (always written, empty or not).
    fn node_taint_arg(&self) -> String {
        let taints: Vec<String> = self.taints.iter().map(taint_string).collect();
        format!("--register-with-taints={}", go_quote(&taints.join(",")))
    }

    /// `--node-labels="k=v,…"` sorted by key, or nothing without labels.
    pub(crate) fn node_label_arg(&self) -> Option<String> {
        if self.labels.is_empty() {
            return None;
        }
        let labels: Vec<String> = self.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Some(format!("--node-labels={}", go_quote(&labels.join(","))))
    }
}

/// Kubernetes' `Taint.ToString()`: `key=value:Effect`, `key:Effect`, `key=value` or `key`.
fn taint_string(t: &Taint) -> String {
    let mut s = t.key.clone();
    if let Some(v) = t.value.as_deref().filter(|v| !v.is_empty()) {
        s.push('=');
        s.push_str(v);
    }
    if !t.effect.is_empty() {
        s.push(':');
        s.push_str(&t.effect);
    }
    s
}

/// `name="k<sep>v,…"` (keys sorted), or nothing for an empty map.
fn join_parameter_args(name: &str, map: &BTreeMap<String, String>, separator: &str) -> Option<String> {
    if map.is_empty() {
        return None;
    }
    let joined: Vec<String> = map.iter().map(|(k, v)| format!("{k}{separator}{v}")).collect();
    Some(format!("{name}={}", go_quote(&joined.join(","))))
}

/// Go durations written as Go's `Duration.String()` does (`1m` → `1m0s`); a value that does not
/// parse (validation reports it) is kept as written.
pub(crate) fn go_durations(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    map.iter()
        .map(|(k, v)| {
            let text = crate::api::duration::parse_go_duration(v)
                .map_or_else(|_| v.clone(), crate::api::duration::format_go_duration);
            (k.clone(), text)
        })
        .collect()
}

/// Go's `%q` of a string: double-quoted, with `"`, `\` and control characters escaped.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// upstream `isRestrictedLabel`: labels in `kubernetes.io` or `k8s.io` (or a subdomain), which
/// the NodeRestriction admission does not let a kubelet set.
fn is_restricted_label(key: &str) -> bool {
    let domain = crate::labels::label_domain(key);
    ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|restricted| domain == *restricted || domain.ends_with(&format!(".{restricted}")))
}

#[cfg(test)]
mod tests;
