//! Conversion of legacy Karpenter objects to v1: v1beta1 NodePool and EC2NodeClass, v1alpha5 Provisioner and
//! v1alpha1 AWSNodeTemplate.
//!
//! upstream: the v1beta1→v1 conversion webhooks of v1.0.0 (removed in v1.1), the v1alpha5→v1beta1 helpers of
//! v0.32, and the v1beta1 and v1 migration guides. Where upstream's helper changed behaviour silently (a Provisioner
//! with neither TTL nor consolidation became a consolidating NodePool), we keep the old behaviour and say so.
//!
//! Every converted field whose meaning changes, and every choice the converter makes for the user, produces a
//! [`ConversionNote`]; fields copied unchanged produce none. Cross-object moves happen here: a NodePool's or
//! Provisioner's kubelet block moves into the EC2NodeClass it uses when that object is converted in the same batch
//! (cloning the EC2NodeClass when NodePools sharing it disagree), otherwise a note says which EC2NodeClass needs
//! which kubelet settings. Choices (also in docs/api.md):
//! - Provisioners get v1's default budget (`nodes: 10%`), with a note on how to lift it.
//! - An inline `spec.provider` block becomes an EC2NodeClass named after the Provisioner (suffixed when taken).
//! - Server-managed metadata (uid, resourceVersion, generation, creationTimestamp, managedFields, finalizers, the
//!   `kubectl.kubernetes.io/last-applied-configuration` annotation and Karpenter's hash annotations) is dropped.
//! - When a legacy object and a v1beta1 object of the same kind share a name, the older one is renamed with a
//!   `-v1alpha5` / `-v1alpha1` suffix.

pub(crate) mod v1alpha5;
pub(crate) mod v1beta1;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::api::ec2nodeclass::{self as v1nc, AmiFamily, EC2NodeClass, KubeletConfiguration};
use crate::api::nodeclaim::NodeClassReference;
use crate::api::nodepool::NodePool;

/// A legacy object to convert. Serialises as the object itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum LegacyObject {
    NodePoolV1Beta1(v1beta1::NodePool),
    EC2NodeClassV1Beta1(v1beta1::EC2NodeClass),
    ProvisionerV1Alpha5(v1alpha5::Provisioner),
    AWSNodeTemplateV1Alpha1(v1alpha5::AWSNodeTemplate),
}

/// Why a document could not be read as a legacy object.
#[derive(Debug, thiserror::Error)]
pub enum LegacyError {
    #[error("{api_version} {kind} is not a legacy Karpenter object")]
    NotLegacy { api_version: String, kind: String },
    #[error("invalid {kind}: {source}")]
    Invalid { kind: String, source: serde_json::Error },
}

impl LegacyObject {
    /// True if `apiVersion`/`kind` name a type this module converts.
    pub fn is_legacy(api_version: &str, kind: &str) -> bool {
        matches!(
            (api_version, kind),
            ("karpenter.sh/v1beta1", "NodePool")
                | ("karpenter.k8s.aws/v1beta1", "EC2NodeClass")
                | ("karpenter.sh/v1alpha5", "Provisioner")
                | ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate")
        )
    }

    /// Reads a decoded document (JSON or YAML value) as the legacy type its `apiVersion` and `kind` name.
    pub fn from_value(value: serde_json::Value) -> Result<LegacyObject, LegacyError> {
        let field = |f: &str| value.get(f).and_then(|v| v.as_str()).unwrap_or("").to_string();
        let (api_version, kind) = (field("apiVersion"), field("kind"));
        let invalid = |source| LegacyError::Invalid { kind: kind.clone(), source };
        match (api_version.as_str(), kind.as_str()) {
            ("karpenter.sh/v1beta1", "NodePool") => {
                serde_json::from_value(value).map(LegacyObject::NodePoolV1Beta1).map_err(invalid)
            }
            ("karpenter.k8s.aws/v1beta1", "EC2NodeClass") => {
                serde_json::from_value(value).map(LegacyObject::EC2NodeClassV1Beta1).map_err(invalid)
            }
            ("karpenter.sh/v1alpha5", "Provisioner") => {
                serde_json::from_value(value).map(LegacyObject::ProvisionerV1Alpha5).map_err(invalid)
            }
            ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate") => {
                serde_json::from_value(value).map(LegacyObject::AWSNodeTemplateV1Alpha1).map_err(invalid)
            }
            _ => Err(LegacyError::NotLegacy { api_version, kind }),
        }
    }

    /// `Kind/name`, as notes name objects.
    pub fn display_name(&self) -> String {
        match self {
            LegacyObject::NodePoolV1Beta1(o) => object_name("NodePool", &o.metadata),
            LegacyObject::EC2NodeClassV1Beta1(o) => object_name("EC2NodeClass", &o.metadata),
            LegacyObject::ProvisionerV1Alpha5(o) => object_name("Provisioner", &o.metadata),
            LegacyObject::AWSNodeTemplateV1Alpha1(o) => object_name("AWSNodeTemplate", &o.metadata),
        }
    }
}

/// Something the user should know about a converted field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversionNote {
    /// The legacy object: `Provisioner/default`.
    pub object: String,
    /// The legacy field path: `spec.ttlSecondsAfterEmpty`.
    pub field: String,
    pub message: String,
}

impl ConversionNote {
    /// The note for a legacy object converted while loading, as the commands and the playground
    /// list it: `converted Provisioner/default: spec.ttlSecondsAfterEmpty: …`.
    pub fn on_load(&self) -> String {
        format!("converted {}: {}: {}", self.object, self.field, self.message)
    }
}

impl fmt::Display for ConversionNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.object, self.field, self.message)
    }
}

/// The result of [`convert`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Converted {
    pub nodepools: Vec<NodePool>,
    pub nodeclasses: Vec<EC2NodeClass>,
    pub notes: Vec<ConversionNote>,
}

/// Converts a batch of legacy objects to v1. Objects keep their input order; EC2NodeClasses created by the
/// converter follow the one they derive from (or, for inline providers, come last).
pub fn convert(objects: Vec<LegacyObject>) -> Converted {
    let mut notes = Notes::default();

    // 1. NodeClasses. v1beta1 names win over v1alpha1 names.
    let beta_class_names: BTreeSet<String> = objects
        .iter()
        .filter_map(|o| match o {
            LegacyObject::EC2NodeClassV1Beta1(nc) => nc.metadata.name.clone(),
            _ => None,
        })
        .collect();
    let beta_pool_names: BTreeSet<String> = objects
        .iter()
        .filter_map(|o| match o {
            LegacyObject::NodePoolV1Beta1(np) => np.metadata.name.clone(),
            _ => None,
        })
        .collect();
    let mut nodeclasses: Vec<EC2NodeClass> = Vec::new();
    // AWSNodeTemplate name → the converted EC2NodeClass's name.
    let mut template_names: BTreeMap<String, String> = BTreeMap::new();
    for object in &objects {
        match object {
            LegacyObject::EC2NodeClassV1Beta1(nc) => nodeclasses.push(v1beta1::convert_nodeclass(nc, &mut notes)),
            LegacyObject::AWSNodeTemplateV1Alpha1(t) => {
                let mut nc = v1alpha5::convert_awsnodetemplate(t, &mut notes);
                let name = nc.name().to_string();
                let mut new_name = name.clone();
                if beta_class_names.contains(&name) {
                    new_name = format!("{name}-v1alpha1");
                    nc.metadata.name = Some(new_name.clone());
                    notes.add(
                        &object.display_name(),
                        "metadata.name",
                        format!(
                            "a v1beta1 EC2NodeClass named {name:?} is also being converted; this one was renamed \
                             {new_name:?}"
                        ),
                    );
                }
                template_names.insert(name, new_name);
                nodeclasses.push(nc);
            }
            _ => {}
        }
    }

    // 2. NodePools.
    let mut pending: Vec<PendingNodePool> = Vec::new();
    let mut synthesized: Vec<EC2NodeClass> = Vec::new();
    for object in &objects {
        match object {
            LegacyObject::NodePoolV1Beta1(np) => pending.push(v1beta1::convert_nodepool(np, &mut notes)),
            LegacyObject::ProvisionerV1Alpha5(p) => {
                let v1alpha5::PendingProvisioner { pending: mut np, source } =
                    v1alpha5::convert_provisioner(p, &mut notes);
                let object = np.object.clone();
                let name = np.nodepool.name().to_string();
                if beta_pool_names.contains(&name) {
                    let new_name = format!("{name}-v1alpha5");
                    np.nodepool.metadata.name = Some(new_name.clone());
                    notes.add(
                        &object,
                        "metadata.name",
                        format!(
                            "a v1beta1 NodePool named {name:?} is also being converted; this one was renamed \
                             {new_name:?}"
                        ),
                    );
                }
                let reference = &mut np.nodepool.spec.template.spec.node_class_ref;
                match source {
                    v1alpha5::ProviderSource::Ref { kind, group: _, name: target } if kind == "AWSNodeTemplate" => {
                        let converted = template_names.get(&target);
                        let new_name = converted.cloned().unwrap_or_else(|| target.clone());
                        *reference = NodeClassReference { name: new_name.clone(), ..NodeClassReference::default() };
                        notes.add(
                            &object,
                            "spec.providerRef",
                            if converted.is_some() {
                                format!(
                                    "AWSNodeTemplate/{target} became EC2NodeClass/{new_name} in this conversion; \
                                     nodeClassRef points at it"
                                )
                            } else {
                                format!(
                                    "nodeClassRef points at EC2NodeClass/{new_name}; AWSNodeTemplate/{target} was not \
                                     part of this conversion, so convert it to an EC2NodeClass of that name as well"
                                )
                            },
                        );
                    }
                    v1alpha5::ProviderSource::Ref { kind, group, name: target } => {
                        *reference = NodeClassReference { group, kind, name: target };
                    }
                    v1alpha5::ProviderSource::Inline(spec) => {
                        let taken: BTreeSet<String> =
                            nodeclasses.iter().chain(&synthesized).map(|nc| nc.name().to_string()).collect();
                        let class_name = unique_name(&name, &taken);
                        let metadata = ObjectMeta { name: Some(class_name.clone()), ..ObjectMeta::default() };
                        let nc =
                            v1alpha5::convert_template_spec(&spec, metadata, &object, "spec.provider.", &mut notes);
                        *reference = NodeClassReference { name: class_name.clone(), ..NodeClassReference::default() };
                        notes.add(
                            &object,
                            "spec.provider",
                            format!(
                                "the inline provider block has no v1 equivalent; EC2NodeClass/{class_name} was created \
                                 from it and the NodePool refers to it. Review it: v1 also needs role or \
                                 instanceProfile and selector terms"
                            ),
                        );
                        synthesized.push(nc);
                    }
                    v1alpha5::ProviderSource::InlineUnparsable(error) => {
                        *reference = NodeClassReference { name: name.clone(), ..NodeClassReference::default() };
                        notes.add(
                            &object,
                            "spec.provider",
                            format!(
                                "the inline provider block has no v1 equivalent and could not be read ({error}); \
                                 create an EC2NodeClass named {name:?} by hand (nodeClassRef points at it)"
                            ),
                        );
                    }
                    v1alpha5::ProviderSource::None => {
                        notes.add(
                            &object,
                            "spec.providerRef",
                            "neither provider nor providerRef is set; nodeClassRef points at EC2NodeClass/default, \
                             which must exist"
                                .to_string(),
                        );
                    }
                }
                pending.push(np);
            }
            _ => {}
        }
    }
    nodeclasses.extend(synthesized);

    // 3. Kubelet moves.
    let (nodepools, nodeclasses) = move_kubelets(pending, nodeclasses, &mut notes);
    Converted { nodepools, nodeclasses, notes: notes.notes }
}

/// A converted NodePool whose kubelet block still has to move to its EC2NodeClass.
pub(crate) struct PendingNodePool {
    /// The legacy object, for notes.
    pub object: String,
    pub nodepool: NodePool,
    pub kubelet: Option<KubeletConfiguration>,
    /// Where the kubelet block was in the legacy object.
    pub kubelet_field: &'static str,
}

fn targets(r: &NodeClassReference, nc: &EC2NodeClass) -> bool {
    r.group == crate::api::AWS_GROUP && r.kind == v1nc::KIND && r.name == nc.name()
}

fn kubelet_json(k: &KubeletConfiguration) -> String {
    serde_json::to_string(k).unwrap_or_default()
}

fn move_kubelets(
    pending: Vec<PendingNodePool>,
    nodeclasses: Vec<EC2NodeClass>,
    notes: &mut Notes,
) -> (Vec<NodePool>, Vec<EC2NodeClass>) {
    let mut pending = pending;
    let mut taken: BTreeSet<String> = nodeclasses.iter().map(|nc| nc.name().to_string()).collect();
    let mut out_classes = Vec::new();
    let mut handled = vec![false; pending.len()];
    for mut nc in nodeclasses {
        let users: Vec<usize> = (0..pending.len())
            .filter(|&i| !handled[i] && targets(&pending[i].nodepool.spec.template.spec.node_class_ref, &nc))
            .collect();
        if users.is_empty() {
            out_classes.push(nc);
            continue;
        }
        // Distinct kubelet configurations, in order of first use.
        let mut groups: Vec<(Option<KubeletConfiguration>, Vec<usize>)> = Vec::new();
        for &i in &users {
            handled[i] = true;
            match groups.iter_mut().find(|(k, _)| *k == pending[i].kubelet) {
                Some((_, members)) => members.push(i),
                None => groups.push((pending[i].kubelet.clone(), vec![i])),
            }
        }
        let original_name = nc.name().to_string();
        let first_pool = pending[groups[0].1[0]].nodepool.name().to_string();
        let mut clones = Vec::new();
        for (g, (kubelet, members)) in groups.into_iter().enumerate() {
            let class_name = if g == 0 {
                original_name.clone()
            } else {
                let base = format!("{original_name}-{}", pending[members[0]].nodepool.name());
                let name = unique_name(&base, &taken);
                taken.insert(name.clone());
                name
            };
            if g > 0 {
                let mut clone = nc.clone();
                clone.metadata.name = Some(class_name.clone());
                clone.spec.kubelet = kubelet.clone();
                clones.push(clone);
            } else {
                nc.spec.kubelet = kubelet.clone();
            }
            for i in members {
                let p = &mut pending[i];
                p.nodepool.spec.template.spec.node_class_ref.name = class_name.clone();
                let message = match (&kubelet, g) {
                    (Some(k), 0) => format!(
                        "moved to EC2NodeClass/{class_name} spec.kubelet (v1 configures the kubelet on the \
                         NodeClass): {}",
                        kubelet_json(k)
                    ),
                    (Some(k), _) => format!(
                        "NodePools sharing EC2NodeClass/{original_name} have different kubelet settings, so \
                         EC2NodeClass/{class_name} was created as a copy with this kubelet block and the NodePool \
                         points at it: {}",
                        kubelet_json(k)
                    ),
                    (None, _) => format!(
                        "no kubelet block here, but EC2NodeClass/{original_name} received the kubelet settings of \
                         NodePool {first_pool:?}; EC2NodeClass/{class_name} was created as a copy without them and \
                         the NodePool points at it"
                    ),
                };
                if kubelet.is_some() || g > 0 {
                    let field = if kubelet.is_some() { p.kubelet_field } else { "spec" };
                    notes.add(&p.object, field, message);
                }
            }
        }
        out_classes.push(nc);
        out_classes.extend(clones);
    }
    for (i, p) in pending.iter().enumerate() {
        if handled[i] {
            continue;
        }
        if let Some(k) = &p.kubelet {
            let r = &p.nodepool.spec.template.spec.node_class_ref;
            notes.add(
                &p.object,
                p.kubelet_field,
                format!(
                    "v1 configures the kubelet on the NodeClass, and {}/{} is not part of this conversion: add \
                     spec.kubelet {} to it ({}). If other NodePools share it with different settings, give this one \
                     its own EC2NodeClass",
                    r.kind,
                    r.name,
                    kubelet_json(k),
                    k.set_fields().join(", ")
                ),
            );
        }
    }
    (pending.into_iter().map(|p| p.nodepool).collect(), out_classes)
}

/// `base`, or `base-2`, `base-3`, … if taken.
fn unique_name(base: &str, taken: &BTreeSet<String>) -> String {
    if !taken.contains(base) {
        return base.to_string();
    }
    (2..).map(|n| format!("{base}-{n}")).find(|n| !taken.contains(n)).expect("some suffix is free")
}

/// Collects notes.
#[derive(Debug, Default)]
pub(crate) struct Notes {
    pub notes: Vec<ConversionNote>,
}

impl Notes {
    pub fn add(&mut self, object: &str, field: &str, message: String) {
        self.notes.push(ConversionNote { object: object.to_string(), field: field.to_string(), message });
    }
}

/// `Kind/name`.
pub(crate) fn object_name(kind: &str, metadata: &ObjectMeta) -> String {
    format!("{kind}/{}", metadata.name.as_deref().unwrap_or(""))
}

/// Annotations the API server or Karpenter maintain, dropped from converted objects.
const MANAGED_ANNOTATIONS: [&str; 7] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    "karpenter.sh/provisioner-hash",
    "karpenter.sh/nodepool-hash",
    "karpenter.sh/nodepool-hash-version",
    "karpenter.k8s.aws/nodetemplate-hash",
    "karpenter.k8s.aws/ec2nodeclass-hash",
    "karpenter.k8s.aws/ec2nodeclass-hash-version",
];

/// The user-owned part of a legacy object's metadata.
pub(crate) fn clean_metadata(m: &ObjectMeta) -> ObjectMeta {
    let annotations = m.annotations.as_ref().map(|a| {
        a.iter()
            .filter(|(k, _)| !MANAGED_ANNOTATIONS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>()
    });
    ObjectMeta {
        annotations: annotations.filter(|a| !a.is_empty()),
        generate_name: m.generate_name.clone(),
        labels: m.labels.clone().filter(|l| !l.is_empty()),
        name: m.name.clone(),
        namespace: m.namespace.clone(),
        owner_references: m.owner_references.clone(),
        ..ObjectMeta::default()
    }
}

/// What sets the legacy node class versions (v1beta1 EC2NodeClass, v1alpha1 AWSNodeTemplate and inline provider)
/// apart where [`convert_family_and_metadata_options`] converts them alike.
pub(crate) struct NodeClassVersion {
    /// `v1beta1` or `v1alpha1`, as notes name it.
    pub name: &'static str,
    /// The name of the AMI selector field: `amiSelectorTerms` or `amiSelector`.
    pub ami_selector: &'static str,
    /// metadataOptions defaults `(httpEndpoint, httpProtocolIPv6, httpPutResponseHopLimit, httpTokens)` when the
    /// block is absent.
    pub metadata_when_absent: (&'static str, &'static str, i64, &'static str),
    /// The same for fields missing from a partial block.
    pub metadata_when_partial: (&'static str, &'static str, i64, &'static str),
}

/// Converts what every legacy node class version has and converts alike, once the rest of `v1` (its AMI terms
/// included) is filled in: `amiFamily` ([`convert_ami_family`]) and `metadataOptions`
/// ([`convert_metadata_options`]). `prefix` is the path of the legacy spec (`spec.`, `spec.provider.`).
pub(crate) fn convert_family_and_metadata_options(
    v1: &mut v1nc::EC2NodeClassSpec,
    family: Option<&str>,
    metadata_options: Option<&v1beta1::MetadataOptions>,
    version: &NodeClassVersion,
    prefix: &str,
    object: &str,
    notes: &mut Notes,
) {
    let has_terms = !v1.ami_selector_terms.is_empty();
    let family_field = format!("{prefix}amiFamily");
    let terms_field = format!("{prefix}{}", version.ami_selector);
    convert_ami_family(family, has_terms, &family_field, &terms_field, object, v1, notes);
    let metadata_field = format!("{prefix}metadataOptions");
    v1.metadata_options = Some(convert_metadata_options(metadata_options, version, &metadata_field, object, notes));
}

/// Makes every metadata option explicit with its legacy effective value; notes each one whose legacy default
/// differs from v1's default.
fn convert_metadata_options(
    legacy: Option<&v1beta1::MetadataOptions>,
    version: &NodeClassVersion,
    field: &str,
    object: &str,
    notes: &mut Notes,
) -> v1nc::MetadataOptions {
    let v1_defaults = v1nc::MetadataOptions::default();
    let fallback = if legacy.is_some() { version.metadata_when_partial } else { version.metadata_when_absent };
    let given = legacy.cloned().unwrap_or_default();
    let mut pick = |name: &str, given: Option<String>, legacy_default: &str, v1_default: Option<String>| {
        given.unwrap_or_else(|| {
            if v1_default.as_deref() != Some(legacy_default) {
                notes.add(
                    object,
                    &if legacy.is_some() { format!("{field}.{name}") } else { field.to_string() },
                    format!(
                        "{name} was not set, so {} used {legacy_default}; v1 defaults to {}. It is set to \
                         {legacy_default} to keep the old behaviour{}",
                        version.name,
                        v1_default.as_deref().unwrap_or(""),
                        metadata_hint(name)
                    ),
                );
            }
            legacy_default.to_string()
        })
    };
    let http_endpoint = pick("httpEndpoint", given.http_endpoint, fallback.0, v1_defaults.http_endpoint);
    let http_protocol_ipv6 =
        pick("httpProtocolIPv6", given.http_protocol_ipv6, fallback.1, v1_defaults.http_protocol_ipv6);
    let hop_text = pick(
        "httpPutResponseHopLimit",
        given.http_put_response_hop_limit.map(|h| h.to_string()),
        &fallback.2.to_string(),
        v1_defaults.http_put_response_hop_limit.map(|h| h.to_string()),
    );
    let http_tokens = pick("httpTokens", given.http_tokens, fallback.3, v1_defaults.http_tokens);
    v1nc::MetadataOptions {
        http_endpoint: Some(http_endpoint),
        http_protocol_ipv6: Some(http_protocol_ipv6),
        http_put_response_hop_limit: Some(hop_text.parse().unwrap_or(1)),
        http_tokens: Some(http_tokens),
    }
}

fn metadata_hint(name: &str) -> &'static str {
    match name {
        "httpPutResponseHopLimit" => {
            "; v1's default of 1 keeps pods without host networking away from IMDS, as EKS best practices \
             recommend, so use 1 unless pods need IMDS"
        }
        "httpTokens" => "; set it to required to allow only IMDSv2",
        _ => "",
    }
}

/// The legacy `amiFamily` (and whether AMI terms were given) → v1 `amiFamily`/`amiSelectorTerms`, as upstream's
/// v1 conversion and migration guide do: a managed family without terms becomes an `@latest` alias; Ubuntu becomes
/// AL2; anything else becomes Custom.
fn convert_ami_family(
    family: Option<&str>,
    has_terms: bool,
    family_field: &str,
    terms_field: &str,
    object: &str,
    v1: &mut v1nc::EC2NodeClassSpec,
    notes: &mut Notes,
) {
    match family.and_then(v1beta1::parse_family) {
        Some(AmiFamily::Custom) => {
            v1.ami_family = Some(AmiFamily::Custom);
            if !has_terms {
                notes.add(
                    object,
                    terms_field,
                    "amiFamily Custom needs AMI selector terms, and none were given; add amiSelectorTerms".to_string(),
                );
            }
            notes.add(
                object,
                family_field,
                "with amiFamily Custom, v1 expects the user data to register the node with the taint \
                 karpenter.sh/unregistered:NoExecute (Karpenter removes it once the node is registered)"
                    .to_string(),
            );
        }
        Some(f) => {
            if has_terms {
                v1.ami_family = Some(f);
            } else {
                let alias = format!("{}@latest", f.alias_family().unwrap_or(""));
                v1.ami_family = None;
                v1.ami_selector_terms =
                    vec![v1nc::AmiSelectorTerm { alias: Some(alias.clone()), ..Default::default() }];
                let advice = match f {
                    AmiFamily::AL2 => {
                        "; pin a version (for example al2@v20240807) for production. AL2 aliases are rejected on \
                         Kubernetes 1.33 and later"
                    }
                    AmiFamily::AL2023 => "; pin a version (for example al2023@v20240807) for production",
                    AmiFamily::Bottlerocket => "; pin a version (for example bottlerocket@v1.20.0) for production",
                    _ => " (Windows aliases only accept @latest)",
                };
                notes.add(
                    object,
                    family_field,
                    format!(
                        "amiFamily {f} without AMI selector terms became amiSelectorTerms [{{alias: {alias}}}], which \
                         like before follows the latest EKS-optimized AMI and drifts nodes when it changes{advice}"
                    ),
                );
            }
        }
        None if family == Some("Ubuntu") => {
            v1.ami_family = Some(AmiFamily::AL2);
            let mut what = "amiFamily Ubuntu is not a v1 family; AL2 (same user data format) is used".to_string();
            if v1.block_device_mappings.is_empty() {
                v1.block_device_mappings = vec![v1nc::BlockDeviceMapping {
                    device_name: Some("/dev/sda1".to_string()),
                    ebs: Some(v1nc::BlockDevice {
                        encrypted: Some(true),
                        volume_size: Some(crate::quantity::Quantity::from_gibibytes(20)),
                        volume_type: Some("gp3".to_string()),
                        ..Default::default()
                    }),
                    root_volume: true,
                }];
                what.push_str(", with Ubuntu's default block device (/dev/sda1, 20Gi gp3, encrypted) made explicit");
            }
            if !has_terms {
                v1.ami_selector_terms =
                    vec![v1nc::AmiSelectorTerm { id: Some("ami-placeholder".to_string()), ..Default::default() }];
                what.push_str(
                    ". Ubuntu AMIs are no longer discovered automatically: replace the placeholder term \
                     {id: ami-placeholder} with your Ubuntu AMI",
                );
            }
            what.push_str(". If AL2 user data stops working for your AMI, switch to amiFamily Custom");
            notes.add(object, family_field, what);
        }
        None => {
            v1.ami_family = Some(AmiFamily::Custom);
            notes.add(
                object,
                family_field,
                format!(
                    "amiFamily {} is not a v1 family; Custom is used, so Karpenter passes user data through \
                     untouched and the AMI must register the node with the taint karpenter.sh/unregistered:NoExecute",
                    family.map_or("(unset)".to_string(), |f| format!("{f:?}"))
                ),
            );
            if !has_terms {
                notes.add(object, terms_field, "no AMI selector terms; v1 requires amiSelectorTerms".to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests;
