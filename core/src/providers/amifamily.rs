//! AMIs (upstream `pkg/providers/amifamily/{ami,al2,al2023,bottlerocket,windows}.go`,
//! `pkg/controllers/nodeclass/ami.go`): an alias term resolves through SSM parameters of EKS's
//! optimized AMIs for the cluster's Kubernetes version, one per architecture and variant, each with
//! the requirements that say which instance types may run it; other terms become DescribeImages
//! queries. Of the images found, one wins per requirement set: not deprecated, then the newest,
//! then the larger name.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use serde::Serialize;

use super::selectors::{tag_filters, Filter};
use crate::api::ec2nodeclass::{Ami, AmiSelectorTerm};
use crate::labels::{self, aws};

/// An SSM parameter an alias resolves through, and the requirements of its image.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AliasParameter {
    pub path: String,
    pub requirements: Vec<NodeSelectorRequirement>,
}

/// Why an alias does not resolve to parameters (upstream condition `AMIsReady=False`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub enum AliasError {
    #[error("alias {alias:?} is not family@version")]
    Malformed { alias: String },
    #[error(
        "alias {alias:?}: unknown family {family:?} (al2, al2023, bottlerocket, windows2019, windows2022, windows2025)"
    )]
    UnknownFamily { alias: String, family: String },
    #[error("alias {alias:?}: Windows aliases take only @latest")]
    PinnedWindows { alias: String },
    #[error("alias {alias:?}: EKS publishes no AL2 AMIs for Kubernetes {kubernetes} (1.33 and later)")]
    Al2Retired { alias: String, kubernetes: String },
    #[error("alias {alias:?}: Windows Server 2025 AMIs need Kubernetes 1.35 or later (the cluster runs {kubernetes})")]
    Windows2025TooEarly { alias: String, kubernetes: String },
}

fn requirement(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_string(),
        operator: operator.to_string(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

/// `kubernetes.io/arch` of an EC2 architecture name.
fn arch_label(ec2_arch: &str) -> &str {
    match ec2_arch {
        "x86_64" => labels::ARCH_AMD64,
        "arm64" => labels::ARCH_ARM64,
        other => other,
    }
}

#[derive(Clone, Copy)]
enum Variant {
    Standard,
    Nvidia,
    Neuron,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Standard => "standard",
            Variant::Nvidia => "nvidia",
            Variant::Neuron => "neuron",
        }
    }

    /// upstream `amifamily/types.go` variant requirements.
    fn requirements(self, ec2_arch: &str) -> Vec<NodeSelectorRequirement> {
        let mut r = vec![requirement(labels::ARCH, "In", &[arch_label(ec2_arch)])];
        match self {
            Variant::Standard => {
                r.push(requirement(aws::INSTANCE_GPU_COUNT, "DoesNotExist", &[]));
                r.push(requirement(aws::INSTANCE_ACCELERATOR_COUNT, "DoesNotExist", &[]));
            }
            Variant::Nvidia => r.push(requirement(aws::INSTANCE_GPU_COUNT, "Exists", &[])),
            Variant::Neuron => r.push(requirement(aws::INSTANCE_ACCELERATOR_COUNT, "Exists", &[])),
        }
        r
    }
}

/// `major.minor` as a comparable pair.
fn minor_version(kubernetes: &str) -> (u32, u32) {
    let mut parts = kubernetes.split('.').map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The SSM parameters of `alias` (`al2023@latest`) on a cluster running Kubernetes `kubernetes`
/// (`1.33`). Parameters that do not exist are skipped by the caller; the alias fails only when
/// none resolves.
pub fn alias_parameters(alias: &str, kubernetes: &str) -> Result<Vec<AliasParameter>, AliasError> {
    let Some((family, version)) = alias.split_once('@').filter(|(f, v)| !f.is_empty() && !v.is_empty()) else {
        return Err(AliasError::Malformed { alias: alias.to_string() });
    };
    let family = family.to_ascii_lowercase();
    let latest = version == "latest";
    let k8s = kubernetes;
    let p = |path: String, requirements| AliasParameter { path, requirements };
    let out = match family.as_str() {
        "al2023" => {
            let mut out = Vec::new();
            for (arch, variants) in [
                ("x86_64", &[Variant::Standard, Variant::Nvidia, Variant::Neuron][..]),
                ("arm64", &[Variant::Standard, Variant::Nvidia][..]),
            ] {
                for v in variants {
                    let leaf = if latest {
                        "recommended".to_string()
                    } else {
                        format!("amazon-eks-node-al2023-{arch}-{}-{k8s}-{version}", v.name())
                    };
                    out.push(p(
                        format!(
                            "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{}/{leaf}/image_id",
                            v.name()
                        ),
                        v.requirements(arch),
                    ));
                }
            }
            out
        }
        "al2" => {
            if minor_version(k8s) >= (1, 33) {
                return Err(AliasError::Al2Retired { alias: alias.to_string(), kubernetes: k8s.to_string() });
            }
            let mut out = Vec::new();
            for (suffix, arch, variants) in [
                ("", "x86_64", &[Variant::Standard][..]),
                ("-arm64", "arm64", &[Variant::Standard][..]),
                ("-gpu", "x86_64", &[Variant::Nvidia, Variant::Neuron][..]),
            ] {
                let leaf =
                    if latest { "recommended".to_string() } else { format!("amazon-eks{suffix}-node-{k8s}-{version}") };
                for v in variants {
                    out.push(p(
                        format!("/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2{suffix}/{leaf}/image_id"),
                        v.requirements(arch),
                    ));
                }
            }
            out
        }
        "bottlerocket" => {
            let version = if latest { "latest" } else { version.strip_prefix('v').unwrap_or(version) };
            let mut out = Vec::new();
            for arch in ["x86_64", "arm64"] {
                out.push(p(
                    format!("/aws/service/bottlerocket/aws-k8s-{k8s}/{arch}/{version}/image_id"),
                    Variant::Standard.requirements(arch),
                ));
                out.push(p(
                    format!("/aws/service/bottlerocket/aws-k8s-{k8s}-nvidia/{arch}/{version}/image_id"),
                    Variant::Nvidia.requirements(arch),
                ));
            }
            out
        }
        "windows2019" | "windows2022" | "windows2025" => {
            if !latest {
                return Err(AliasError::PinnedWindows { alias: alias.to_string() });
            }
            let (year, build) = match family.as_str() {
                "windows2019" => ("2019", aws::WINDOWS_2019_BUILD),
                "windows2022" => ("2022", aws::WINDOWS_2022_BUILD),
                _ => ("2025", aws::WINDOWS_2025_BUILD),
            };
            if year == "2025" && minor_version(k8s) < (1, 35) {
                return Err(AliasError::Windows2025TooEarly { alias: alias.to_string(), kubernetes: k8s.to_string() });
            }
            vec![p(
                format!(
                    "/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"
                ),
                vec![
                    requirement(labels::ARCH, "In", &[labels::ARCH_AMD64]),
                    requirement(labels::OS, "In", &["windows"]),
                    requirement(aws::WINDOWS_BUILD, "In", &[build]),
                ],
            )]
        }
        _ => return Err(AliasError::UnknownFamily { alias: alias.to_string(), family }),
    };
    Ok(out)
}

/// What a non-alias term asks EC2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum AmiQuery {
    /// DescribeImages with these filters and owners (none: any owner).
    Images { filters: Vec<Filter>, owners: Vec<String> },
    /// An SSM parameter whose value is an AMI ID (`ssmParameter`).
    Parameter(String),
}

/// The queries of non-alias terms: every `id` in one `image-id` query; each other term its own,
/// `name` with owners `self` and `amazon` unless `owner` names one.
pub fn ami_queries(terms: &[AmiSelectorTerm]) -> Vec<AmiQuery> {
    let ids: Vec<&str> = terms.iter().filter_map(|t| t.id.as_deref()).collect();
    let mut out = Vec::new();
    if !ids.is_empty() {
        out.push(AmiQuery::Images { filters: vec![Filter::new("image-id", &ids)], owners: Vec::new() });
    }
    for t in terms.iter().filter(|t| t.id.is_none() && t.alias.is_none()) {
        if let Some(p) = &t.ssm_parameter {
            out.push(AmiQuery::Parameter(p.clone()));
            continue;
        }
        let mut filters = tag_filters(&t.tags);
        if let Some(name) = &t.name {
            filters.push(Filter::new("name", &[name]));
        }
        let owners = match (&t.owner, &t.name) {
            (Some(o), _) => vec![o.clone()],
            (None, Some(_)) => vec!["self".to_string(), "amazon".to_string()],
            (None, None) => Vec::new(),
        };
        out.push(AmiQuery::Images { filters, owners });
    }
    out
}

/// An image DescribeImages returned, with the requirements of the alias parameter it came from
/// (`None`: its architecture decides).
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    pub id: String,
    pub name: String,
    /// RFC 3339, as EC2 writes it.
    pub creation_date: String,
    pub deprecated: bool,
    /// `x86_64`, `arm64`.
    pub architecture: String,
    pub requirements: Option<Vec<NodeSelectorRequirement>>,
}

/// `status.amis`: per distinct requirement set, the image that wins (not deprecated, newest,
/// larger name), newest first.
pub fn choose_amis(images: &[Image]) -> Vec<Ami> {
    let mut best: BTreeMap<String, (&Image, Vec<NodeSelectorRequirement>)> = BTreeMap::new();
    let better = |a: &Image, b: &Image| {
        (!a.deprecated, a.creation_date.as_str(), a.name.as_str())
            > (!b.deprecated, b.creation_date.as_str(), b.name.as_str())
    };
    for image in images {
        let requirements = image
            .requirements
            .clone()
            .unwrap_or_else(|| vec![requirement(labels::ARCH, "In", &[arch_label(&image.architecture)])]);
        let key = serde_json::to_string(&requirements).unwrap_or_default();
        match best.get(&key) {
            Some((b, _)) if !better(image, b) => {}
            _ => {
                best.insert(key, (image, requirements));
            }
        }
    }
    let mut winners: Vec<(&Image, Vec<NodeSelectorRequirement>)> = best.into_values().collect();
    winners.sort_by(|(a, ar), (b, br)| {
        (b.creation_date.as_str(), b.name.as_str(), a.id.as_str(), serde_json::to_string(ar).unwrap_or_default()).cmp(
            &(a.creation_date.as_str(), a.name.as_str(), b.id.as_str(), serde_json::to_string(br).unwrap_or_default()),
        )
    });
    winners
        .into_iter()
        .map(|(i, requirements)| Ami { deprecated: i.deprecated, id: i.id.clone(), name: i.name.clone(), requirements })
        .collect()
}
