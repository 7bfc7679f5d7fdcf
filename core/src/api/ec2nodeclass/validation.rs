//! EC2NodeClass validation: the CRD's openAPI patterns and CEL rules
//! (`karpenter.k8s.aws_ec2nodeclasses.yaml`, v1.14.1) and the provider's runtime checks, each
//! failure a located [`FieldError`] with its [`Rule`].

use super::*;

pub(super) const ALIAS_FAMILIES: [&str; 6] =
    ["al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025"];
pub(super) const WINDOWS_ALIAS_FAMILIES: [&str; 3] = ["windows2019", "windows2022", "windows2025"];
pub(super) const RESERVED_KEYS: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];
pub(super) const EVICTION_SIGNALS: [&str; 6] = [
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];
pub(super) const VOLUME_TYPES: [&str; 7] = ["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"];

/// True if `s` contains `prefix` followed by at least one `[0-9a-z]` (an unanchored pattern such as
/// `subnet-[0-9a-z]+`).
pub(super) fn contains_id(s: &str, prefix: &str) -> bool {
    s.match_indices(prefix).any(|(i, _)| {
        s[i + prefix.len()..].bytes().next().is_some_and(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    })
}

/// True if `s` is `prefix` followed by one or more `[0-9a-z]` (an anchored pattern such as `^cr-[0-9a-z]+$`).
pub(super) fn is_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()))
}

pub(super) fn validate_selector_tags(tags: &BTreeMap<String, String>, path: &str, out: &mut Vec<FieldError>) {
    if tags.len() > 20 {
        out.push(FieldError::new(
            path,
            Rule::SelectorTags,
            format!("at most 20 tags are allowed, found {}", tags.len()),
        ));
    }
    if tags.iter().any(|(k, v)| k.is_empty() || v.is_empty()) {
        out.push(FieldError::new(path, Rule::SelectorTags, "empty tag keys or values aren't supported"));
    }
}

pub(super) fn terms_count(len: usize, path: &str, what: &str, required: bool, out: &mut Vec<FieldError>) {
    if required && len == 0 {
        out.push(FieldError::new(path, Rule::SelectorTermsCount, format!("{what} cannot be empty")));
    }
    if len > 30 {
        out.push(FieldError::new(
            path,
            Rule::SelectorTermsCount,
            format!("at most 30 {what} are allowed, found {len}"),
        ));
    }
}

/// `volumeSize`: the CRD pattern allows a whole number of Gi (1–59000), G (1–64000), Ti (1–58) or T (1–64). We check
/// the value (the loaded text is not kept): it must be a whole number of one of these units within its range.
pub(super) fn volume_size_ok(q: &Quantity) -> bool {
    let nanos = q.nanos();
    const NANO: i128 = 1_000_000_000;
    if nanos <= 0 || nanos % NANO != 0 {
        return false;
    }
    let bytes = nanos / NANO;
    let within = |unit: i128, max: i128| bytes % unit == 0 && bytes / unit <= max;
    within(1 << 30, 59_000) || within(1 << 40, 58) || within(1_000_000_000, 64_000) || within(1_000_000_000_000, 64)
}

/// An eviction threshold: empty, a percentage `\d{1,2}(\.\d{1,2})?%` or `100(\.0{1,2})?%`, or a quantity.
pub(super) fn eviction_value_ok(v: &str) -> bool {
    if v.is_empty() {
        return true;
    }
    if let Some(p) = v.strip_suffix('%') {
        let (int, frac) = p.split_once('.').unwrap_or((p, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        let frac_ok = !p.contains('.') || ((1..=2).contains(&frac.len()) && digits(frac));
        if int == "100" {
            return frac_ok && frac.bytes().all(|b| b == b'0');
        }
        return (1..=2).contains(&int.len()) && digits(int) && frac_ok;
    }
    Quantity::parse(v).is_ok()
}

impl Validate for EC2NodeClass {
    fn validate(&self) -> Vec<FieldError> {
        let mut out = Vec::new();
        crate::api::validate_type_meta(&self.api_version, &self.kind, &self.metadata, AWS_API_VERSION, KIND, &mut out);
        self.spec.validate_into("spec", &mut out);
        out
    }
}

impl EC2NodeClass {
    /// This EC2NodeClass with its AMI selection replaced by the one term `alias: <alias>` (e.g.
    /// `al2023@v20250101`) and its status cleared: the edit that rolls out an AMI. The edited object
    /// is validated as the API server would (the alias's format, its family against `amiFamily`).
    pub fn with_ami_alias(&self, alias: &str) -> Result<EC2NodeClass, Vec<FieldError>> {
        let mut edited = self.clone();
        edited.status = None;
        edited.spec.ami_selector_terms =
            vec![AmiSelectorTerm { alias: Some(alias.trim().to_string()), ..AmiSelectorTerm::default() }];
        let errors = edited.validate();
        if errors.is_empty() {
            Ok(edited)
        } else {
            Err(errors)
        }
    }
}

impl EC2NodeClassSpec {
    /// Checks the spec; `path` is where it sits (`spec`).
    pub fn validate_into(&self, path: &str, out: &mut Vec<FieldError>) {
        self.validate_identity(path, out);
        self.validate_subnets(path, out);
        self.validate_security_groups(path, out);
        self.validate_amis(path, out);
        self.validate_capacity_reservations(path, out);
        self.validate_placement_group(path, out);
        self.validate_tags(path, out);
        if let Some(kubelet) = &self.kubelet {
            kubelet.validate_into(&format!("{path}.kubelet"), out);
        }
        self.validate_block_devices(path, out);
        self.validate_metadata_options(path, out);
        if let Some(n) = self.ip_prefix_count {
            if n < 0 {
                out.push(FieldError::new(
                    format!("{path}.ipPrefixCount"),
                    Rule::IpPrefixCount,
                    format!("ipPrefixCount must be 0 or more, got {n}"),
                ));
            }
        }
        self.validate_network_interfaces(path, out);
        self.validate_connection_tracking(path, out);
        if let Some(nv) = self.cpu_options.as_ref().and_then(|c| c.nested_virtualization.as_deref()) {
            if nv != "enabled" && nv != "disabled" {
                out.push(FieldError::new(
                    format!("{path}.cpuOptions.nestedVirtualization"),
                    Rule::CpuOptions,
                    format!("nestedVirtualization must be \"enabled\" or \"disabled\", got {nv:?}"),
                ));
            }
        }
    }

    pub(super) fn validate_identity(&self, path: &str, out: &mut Vec<FieldError>) {
        if self.role.is_some() == self.instance_profile.is_some() {
            out.push(FieldError::new(
                path,
                Rule::RoleXorInstanceProfile,
                "must specify exactly one of ['role', 'instanceProfile']",
            ));
        }
        if self.role.as_deref() == Some("") {
            out.push(FieldError::new(format!("{path}.role"), Rule::RoleEmpty, "role cannot be empty"));
        }
        if self.instance_profile.as_deref() == Some("") {
            out.push(FieldError::new(
                format!("{path}.instanceProfile"),
                Rule::InstanceProfileEmpty,
                "instanceProfile cannot be empty",
            ));
        }
    }

    pub(super) fn validate_subnets(&self, path: &str, out: &mut Vec<FieldError>) {
        let p = format!("{path}.subnetSelectorTerms");
        let terms = &self.subnet_selector_terms;
        terms_count(terms.len(), &p, "subnetSelectorTerms", true, out);
        for (i, t) in terms.iter().enumerate() {
            let tp = idx(&p, i);
            if t.tags.is_empty() && t.id.is_none() {
                out.push(FieldError::new(
                    &tp,
                    Rule::SelectorTermEmpty,
                    "expected at least one, got none, ['tags', 'id']",
                ));
            }
            validate_selector_tags(&t.tags, &format!("{tp}.tags"), out);
            if let Some(id) = &t.id {
                if !contains_id(id, "subnet-") {
                    out.push(FieldError::new(
                        format!("{tp}.id"),
                        Rule::SelectorIdPattern,
                        format!("subnet id {id:?} must look like \"subnet-0123abcd\""),
                    ));
                }
            }
        }
        // Upstream's rule is `!self.all(...)`: it fires only when every term combines id and tags.
        if !terms.is_empty() && terms.iter().all(|t| t.id.is_some() && !t.tags.is_empty()) {
            out.push(FieldError::new(
                &p,
                Rule::SelectorTermExclusive,
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",
            ));
        }
    }

    pub(super) fn validate_security_groups(&self, path: &str, out: &mut Vec<FieldError>) {
        let p = format!("{path}.securityGroupSelectorTerms");
        let terms = &self.security_group_selector_terms;
        terms_count(terms.len(), &p, "securityGroupSelectorTerms", true, out);
        for (i, t) in terms.iter().enumerate() {
            let tp = idx(&p, i);
            if t.tags.is_empty() && t.id.is_none() && t.name.is_none() {
                out.push(FieldError::new(
                    &tp,
                    Rule::SelectorTermEmpty,
                    "expected at least one, got none, ['tags', 'id', 'name']",
                ));
            }
            validate_selector_tags(&t.tags, &format!("{tp}.tags"), out);
            if let Some(id) = &t.id {
                if !contains_id(id, "sg-") {
                    out.push(FieldError::new(
                        format!("{tp}.id"),
                        Rule::SelectorIdPattern,
                        format!("security group id {id:?} must look like \"sg-0123abcd\""),
                    ));
                }
            }
        }
        if terms.is_empty() {
            return;
        }
        // Upstream's rules are `!self.all(...)`: they fire only when every term breaks them.
        if terms.iter().all(|t| t.id.is_some() && (!t.tags.is_empty() || t.name.is_some())) {
            out.push(FieldError::new(
                &p,
                Rule::SelectorTermExclusive,
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group \
                 selector term",
            ));
        }
        if terms.iter().all(|t| t.name.is_some() && (!t.tags.is_empty() || t.id.is_some())) {
            out.push(FieldError::new(
                &p,
                Rule::SelectorTermExclusive,
                "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group \
                 selector term",
            ));
        }
    }

    pub(super) fn validate_amis(&self, path: &str, out: &mut Vec<FieldError>) {
        let p = format!("{path}.amiSelectorTerms");
        let terms = &self.ami_selector_terms;
        terms_count(terms.len(), &p, "amiSelectorTerms", true, out);
        let has_alias = terms.iter().any(|t| t.alias.is_some());
        for (i, t) in terms.iter().enumerate() {
            let tp = idx(&p, i);
            if t.tags.is_empty() && t.id.is_none() && t.name.is_none() && t.alias.is_none() && t.ssm_parameter.is_none()
            {
                out.push(FieldError::new(
                    &tp,
                    Rule::SelectorTermEmpty,
                    "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
                ));
            }
            validate_selector_tags(&t.tags, &format!("{tp}.tags"), out);
            if t.id.is_some() && (t.alias.is_some() || !t.tags.is_empty() || t.name.is_some() || t.owner.is_some()) {
                out.push(FieldError::new(
                    &tp,
                    Rule::SelectorTermExclusive,
                    "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
                ));
            }
            if t.alias.is_some() && (t.id.is_some() || !t.tags.is_empty() || t.name.is_some() || t.owner.is_some()) {
                out.push(FieldError::new(
                    &tp,
                    Rule::SelectorTermExclusive,
                    "'alias' is mutually exclusive, cannot be set with a combination of other fields in \
                     amiSelectorTerms",
                ));
            }
            if let Some(id) = &t.id {
                if !contains_id(id, "ami-") {
                    out.push(FieldError::new(
                        format!("{tp}.id"),
                        Rule::SelectorIdPattern,
                        format!("AMI id {id:?} must look like \"ami-0123abcd\""),
                    ));
                }
            }
            if let Some(alias) = &t.alias {
                validate_alias(alias, &format!("{tp}.alias"), out);
            }
        }
        if has_alias && terms.len() != 1 {
            out.push(FieldError::new(
                &p,
                Rule::AmiAliasSingleTerm,
                "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
            ));
        }
        match self.ami_family {
            Some(family) => {
                for (i, t) in terms.iter().enumerate() {
                    let Some(alias_family) = t.alias.as_deref().map(|a| a.split('@').next().unwrap_or("")) else {
                        continue;
                    };
                    let Some(expected) = AmiFamily::from_alias_family(alias_family) else {
                        continue;
                    };
                    if family != AmiFamily::Custom && family != expected {
                        out.push(FieldError::new(
                            format!("{path}.amiFamily"),
                            Rule::AmiFamilyAliasMismatch,
                            format!(
                                "if set, amiFamily must be '{expected}' or 'Custom' when using an {expected} alias \
                                 (amiFamily is {family}, {}[{i}].alias is {:?})",
                                p,
                                t.alias.as_deref().unwrap_or("")
                            ),
                        ));
                    }
                }
            }
            None if !has_alias && !terms.is_empty() => out.push(FieldError::new(
                format!("{path}.amiFamily"),
                Rule::AmiFamilyRequired,
                "must specify amiFamily if amiSelectorTerms does not contain an alias",
            )),
            None => {}
        }
    }

    pub(super) fn validate_capacity_reservations(&self, path: &str, out: &mut Vec<FieldError>) {
        let p = format!("{path}.capacityReservationSelectorTerms");
        let terms = &self.capacity_reservation_selector_terms;
        terms_count(terms.len(), &p, "capacityReservationSelectorTerms", false, out);
        for (i, t) in terms.iter().enumerate() {
            let tp = idx(&p, i);
            if t.tags.is_empty() && t.id.is_none() && t.instance_match_criteria.is_none() {
                out.push(FieldError::new(
                    &tp,
                    Rule::SelectorTermEmpty,
                    "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
                ));
            }
            validate_selector_tags(&t.tags, &format!("{tp}.tags"), out);
            if let Some(id) = &t.id {
                if !is_id(id, "cr-") {
                    out.push(FieldError::new(
                        format!("{tp}.id"),
                        Rule::SelectorIdPattern,
                        format!("capacity reservation id {id:?} must look like \"cr-0123abcd\""),
                    ));
                }
            }
            if let Some(owner) = &t.owner_id {
                if owner.len() != 12 || !owner.bytes().all(|b| b.is_ascii_digit()) {
                    out.push(FieldError::new(
                        format!("{tp}.ownerID"),
                        Rule::SelectorIdPattern,
                        format!("ownerID {owner:?} must be a 12-digit AWS account id"),
                    ));
                }
            }
            if let Some(c) = &t.instance_match_criteria {
                if c != "open" && c != "targeted" {
                    out.push(FieldError::new(
                        format!("{tp}.instanceMatchCriteria"),
                        Rule::InstanceMatchCriteria,
                        format!("instanceMatchCriteria must be \"open\" or \"targeted\", got {c:?}"),
                    ));
                }
            }
        }
        if !terms.is_empty()
            && terms.iter().all(|t| {
                t.id.is_some() && (!t.tags.is_empty() || t.owner_id.is_some() || t.instance_match_criteria.is_some())
            })
        {
            out.push(FieldError::new(
                &p,
                Rule::SelectorTermExclusive,
                "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector \
                 term",
            ));
        }
    }

    pub(super) fn validate_placement_group(&self, path: &str, out: &mut Vec<FieldError>) {
        let Some(pg) = &self.placement_group_selector else {
            return;
        };
        let p = format!("{path}.placementGroupSelector");
        match (&pg.name, &pg.id) {
            (None, None) => out.push(FieldError::new(
                &p,
                Rule::PlacementGroupSelector,
                "expected at least one, got none, ['name', 'id']",
            )),
            (Some(_), Some(_)) => {
                out.push(FieldError::new(&p, Rule::PlacementGroupSelector, "'name' and 'id' are mutually exclusive"))
            }
            _ => {}
        }
        if pg.name.as_deref() == Some("") {
            out.push(FieldError::new(format!("{p}.name"), Rule::PlacementGroupSelector, "name may not be empty"));
        }
        if let Some(id) = &pg.id {
            if !is_id(id, "pg-") {
                out.push(FieldError::new(
                    format!("{p}.id"),
                    Rule::SelectorIdPattern,
                    format!("placement group id {id:?} must look like \"pg-0123abcd\""),
                ));
            }
        }
    }

    pub(super) fn validate_tags(&self, path: &str, out: &mut Vec<FieldError>) {
        let p = format!("{path}.tags");
        for k in self.tags.keys() {
            let message = if k.is_empty() {
                "empty tag keys aren't supported".to_string()
            } else if k == "eks:eks-cluster-name" {
                "tag contains a restricted tag matching eks:eks-cluster-name".to_string()
            } else if k.starts_with("kubernetes.io/cluster") {
                "tag contains a restricted tag matching kubernetes.io/cluster/".to_string()
            } else if ["karpenter.sh/nodepool", "karpenter.sh/nodeclaim", "karpenter.k8s.aws/ec2nodeclass"]
                .contains(&k.as_str())
            {
                format!("tag contains a restricted tag matching {k}")
            } else {
                continue;
            };
            out.push(FieldError::new(key(&p, k), Rule::Tags, format!("{message} (Karpenter sets this tag itself)")));
        }
    }

    pub(super) fn validate_block_devices(&self, path: &str, out: &mut Vec<FieldError>) {
        let p = format!("{path}.blockDeviceMappings");
        let bdms = &self.block_device_mappings;
        if bdms.len() > 50 {
            out.push(FieldError::new(
                &p,
                Rule::BlockDeviceMappings,
                format!("at most 50 blockDeviceMappings are allowed, found {}", bdms.len()),
            ));
        }
        if bdms.iter().filter(|b| b.root_volume).count() > 1 {
            out.push(FieldError::new(
                &p,
                Rule::BlockDeviceMappings,
                "must have only one blockDeviceMappings with rootVolume",
            ));
        }
        for (i, bdm) in bdms.iter().enumerate() {
            let Some(ebs) = &bdm.ebs else {
                continue;
            };
            let ep = format!("{}.ebs", idx(&p, i));
            if ebs.snapshot_id.is_none() && ebs.volume_size.is_none() {
                out.push(FieldError::new(&ep, Rule::BlockDevice, "snapshotID or volumeSize must be defined"));
            }
            if let Some(rate) = ebs.volume_initialization_rate {
                if ebs.snapshot_id.as_deref().is_none_or(str::is_empty) {
                    out.push(FieldError::new(
                        &ep,
                        Rule::BlockDevice,
                        "snapshotID must be set when volumeInitializationRate is set",
                    ));
                }
                if !(100..=300).contains(&rate) {
                    out.push(FieldError::new(
                        format!("{ep}.volumeInitializationRate"),
                        Rule::BlockDevice,
                        format!("volumeInitializationRate must be between 100 and 300 MiB/s, got {rate}"),
                    ));
                }
            }
            if let Some(size) = &ebs.volume_size {
                if !volume_size_ok(size) {
                    out.push(FieldError::new(
                        format!("{ep}.volumeSize"),
                        Rule::VolumeSize,
                        format!(
                            "volumeSize {size} must be a whole number of Gi (1-59000), G (1-64000), Ti (1-58) or T \
                             (1-64)"
                        ),
                    ));
                }
            }
            if let Some(vt) = &ebs.volume_type {
                if !VOLUME_TYPES.contains(&vt.as_str()) {
                    out.push(FieldError::new(
                        format!("{ep}.volumeType"),
                        Rule::VolumeType,
                        format!("volumeType {vt:?} is not one of standard, io1, io2, gp2, sc1, st1, gp3"),
                    ));
                }
            }
        }
    }

    pub(super) fn validate_metadata_options(&self, path: &str, out: &mut Vec<FieldError>) {
        let Some(mo) = &self.metadata_options else {
            return;
        };
        let p = format!("{path}.metadataOptions");
        let mut one_of = |field: &str, value: &Option<String>, allowed: [&str; 2]| {
            if let Some(v) = value {
                if !allowed.contains(&v.as_str()) {
                    out.push(FieldError::new(
                        format!("{p}.{field}"),
                        Rule::MetadataOptions,
                        format!("{field} must be {:?} or {:?}, got {v:?}", allowed[0], allowed[1]),
                    ));
                }
            }
        };
        one_of("httpEndpoint", &mo.http_endpoint, ["enabled", "disabled"]);
        one_of("httpProtocolIPv6", &mo.http_protocol_ipv6, ["enabled", "disabled"]);
        one_of("httpTokens", &mo.http_tokens, ["required", "optional"]);
        if let Some(hops) = mo.http_put_response_hop_limit {
            if !(1..=64).contains(&hops) {
                out.push(FieldError::new(
                    format!("{p}.httpPutResponseHopLimit"),
                    Rule::MetadataHopLimit,
                    format!("httpPutResponseHopLimit must be between 1 and 64, got {hops}"),
                ));
            }
        }
    }

    pub(super) fn validate_network_interfaces(&self, path: &str, out: &mut Vec<FieldError>) {
        let p = format!("{path}.networkInterfaces");
        let nics = &self.network_interfaces;
        if nics.is_empty() {
            return;
        }
        if nics.len() > 150 {
            out.push(FieldError::new(
                &p,
                Rule::NetworkInterfaces,
                format!("at most 150 networkInterfaces are allowed, found {}", nics.len()),
            ));
        }
        for (i, nic) in nics.iter().enumerate() {
            let np = idx(&p, i);
            if nic.network_card_index < 0 {
                out.push(FieldError::new(
                    format!("{np}.networkCardIndex"),
                    Rule::NetworkInterfaces,
                    format!("networkCardIndex must be 0 or more, got {}", nic.network_card_index),
                ));
            }
            if nic.device_index < 0 {
                out.push(FieldError::new(
                    format!("{np}.deviceIndex"),
                    Rule::NetworkInterfaces,
                    format!("deviceIndex must be 0 or more, got {}", nic.device_index),
                ));
            }
            if nic.interface_type != "interface" && nic.interface_type != "efa-only" {
                out.push(FieldError::new(
                    format!("{np}.interfaceType"),
                    Rule::NetworkInterfaces,
                    format!("interfaceType must be \"interface\" or \"efa-only\", got {:?}", nic.interface_type),
                ));
            }
        }
        if !nics.iter().any(|n| n.device_index == 0 && n.network_card_index == 0 && n.interface_type == "interface") {
            out.push(FieldError::new(
                &p,
                Rule::NetworkInterfaces,
                "networkInterfaces must include a primary interface with interfaceType='interface'",
            ));
        }
        let bad = nics.iter().any(|x| {
            nics.iter()
                .filter(|y| x.network_card_index == y.network_card_index && x.device_index == y.device_index)
                .count()
                != 1
                || (x.interface_type == "efa-only"
                    && nics
                        .iter()
                        .filter(|y| x.network_card_index == y.network_card_index && y.interface_type == "efa-only")
                        .count()
                        != 1)
        });
        if bad {
            out.push(FieldError::new(
                &p,
                Rule::NetworkInterfaces,
                "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most \
                 one efa device per network card",
            ));
        }
    }

    pub(super) fn validate_connection_tracking(&self, path: &str, out: &mut Vec<FieldError>) {
        let Some(ct) = &self.connection_tracking else {
            return;
        };
        let p = format!("{path}.connectionTracking");
        if ct.tcp_established_timeout.is_none() && ct.udp_stream_timeout.is_none() && ct.udp_timeout.is_none() {
            out.push(FieldError::new(
                &p,
                Rule::ConnectionTracking,
                "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
            ));
        }
        for (field, value, min, max) in [
            ("tcpEstablishedTimeout", ct.tcp_established_timeout, 60, 432_000),
            ("udpStreamTimeout", ct.udp_stream_timeout, 60, 180),
            ("udpTimeout", ct.udp_timeout, 30, 60),
        ] {
            if let Some(v) = value {
                if !(min..=max).contains(&v) {
                    out.push(FieldError::new(
                        format!("{p}.{field}"),
                        Rule::ConnectionTracking,
                        format!("{field} must be between {min} and {max} seconds, got {v}"),
                    ));
                }
            }
        }
    }
}

pub(super) fn validate_alias(alias: &str, path: &str, out: &mut Vec<FieldError>) {
    if alias.len() > 30 {
        out.push(FieldError::new(
            path,
            Rule::AmiAlias,
            format!("alias {alias:?} must be no more than 30 characters (is {})", alias.len()),
        ));
    }
    let well_formed = alias.split_once('@').is_some_and(|(family, version)| {
        !family.is_empty() && family.bytes().all(|b| b.is_ascii_alphanumeric()) && !version.is_empty()
    });
    if !well_formed {
        out.push(FieldError::new(
            path,
            Rule::AmiAlias,
            format!("'alias' is improperly formatted, must match the format 'family@version' (got {alias:?})"),
        ));
    }
    let mut parts = alias.split('@');
    let family = parts.next().unwrap_or("");
    let version = parts.next();
    if !ALIAS_FAMILIES.contains(&family) {
        out.push(FieldError::new(
            path,
            Rule::AmiAlias,
            format!(
                "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', \
                 'windows2019', 'windows2022', 'windows2025' (got {family:?})"
            ),
        ));
    }
    if WINDOWS_ALIAS_FAMILIES.contains(&family) && version != Some("latest") {
        out.push(FieldError::new(
            path,
            Rule::AmiAliasWindowsVersion,
            format!("windows families may only specify version 'latest' (got {alias:?})"),
        ));
    }
}

impl KubeletConfiguration {
    /// Checks the kubelet block; `path` is where it sits (`spec.kubelet`).
    pub fn validate_into(&self, path: &str, out: &mut Vec<FieldError>) {
        for (field, value) in [("maxPods", self.max_pods), ("podsPerCore", self.pods_per_core)] {
            if let Some(v) = value.filter(|v| *v < 0) {
                out.push(FieldError::new(
                    format!("{path}.{field}"),
                    Rule::KubeletMinimum,
                    format!("{field} must be 0 or more, got {v}"),
                ));
            }
        }
        for (field, map) in [("systemReserved", &self.system_reserved), ("kubeReserved", &self.kube_reserved)] {
            for (k, q) in map {
                let p = key(&format!("{path}.{field}"), k);
                if !RESERVED_KEYS.contains(&k.as_str()) {
                    out.push(FieldError::new(
                        &p,
                        Rule::KubeletReserved,
                        format!("valid keys for {field} are ['cpu','memory','ephemeral-storage','pid'], got {k:?}"),
                    ));
                }
                if q.is_negative() {
                    out.push(FieldError::new(
                        &p,
                        Rule::KubeletReserved,
                        format!("{field} value cannot be a negative resource quantity (got {q})"),
                    ));
                }
            }
        }
        let signals = "['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available',\
                       'imagefs.inodesFree','pid.available']";
        for (field, map) in [("evictionHard", &self.eviction_hard), ("evictionSoft", &self.eviction_soft)] {
            for (k, v) in map {
                let p = key(&format!("{path}.{field}"), k);
                if !EVICTION_SIGNALS.contains(&k.as_str()) {
                    out.push(FieldError::new(
                        &p,
                        Rule::KubeletEviction,
                        format!("valid keys for {field} are {signals}, got {k:?}"),
                    ));
                }
                if !eviction_value_ok(v) {
                    out.push(FieldError::new(
                        &p,
                        Rule::KubeletEviction,
                        format!("{field} value {v:?} must be a quantity (\"500Mi\") or a percentage (\"10%\")"),
                    ));
                }
            }
        }
        for (k, v) in &self.eviction_soft_grace_period {
            let p = key(&format!("{path}.evictionSoftGracePeriod"), k);
            if !EVICTION_SIGNALS.contains(&k.as_str()) {
                out.push(FieldError::new(
                    &p,
                    Rule::KubeletEviction,
                    format!("valid keys for evictionSoftGracePeriod are {signals}, got {k:?}"),
                ));
            }
            if let Err(e) = crate::api::duration::parse_go_duration(v) {
                out.push(FieldError::new(&p, Rule::KubeletEviction, e.to_string()));
            }
        }
        for k in self.eviction_soft.keys().filter(|k| !self.eviction_soft_grace_period.contains_key(*k)) {
            out.push(FieldError::new(
                key(&format!("{path}.evictionSoft"), k),
                Rule::KubeletEvictionSoftPairs,
                format!("evictionSoft key {k:?} does not have a matching evictionSoftGracePeriod"),
            ));
        }
        for k in self.eviction_soft_grace_period.keys().filter(|k| !self.eviction_soft.contains_key(*k)) {
            out.push(FieldError::new(
                key(&format!("{path}.evictionSoftGracePeriod"), k),
                Rule::KubeletEvictionSoftPairs,
                format!("evictionSoftGracePeriod key {k:?} does not have a matching evictionSoft"),
            ));
        }
        for (field, value) in [
            ("imageGCHighThresholdPercent", self.image_gc_high_threshold_percent),
            ("imageGCLowThresholdPercent", self.image_gc_low_threshold_percent),
        ] {
            if let Some(v) = value.filter(|v| !(0..=100).contains(v)) {
                out.push(FieldError::new(
                    format!("{path}.{field}"),
                    Rule::KubeletImageGc,
                    format!("{field} must be between 0 and 100, got {v}"),
                ));
            }
        }
        if let (Some(high), Some(low)) = (self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent) {
            if high <= low {
                out.push(FieldError::new(
                    path,
                    Rule::KubeletImageGc,
                    format!(
                        "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent (high {high}, \
                         low {low})"
                    ),
                ));
            }
        }
    }
}
