//! Preparing a round (upstream `provisioner.go::NewScheduler`, `scheduler.go::NewScheduler`,
//! v1.14.1): which NodePools take part, each one's template with its prefiltered instance types and
//! remaining limits, and what each NodePool already uses.

use super::*;

/// Upstream `Provisioner.NewScheduler`'s NodePool filter.
pub(super) fn eligibility(np: &NodePool) -> Result<(), SkipReason> {
    if np.is_static() {
        return Err(SkipReason::Static);
    }
    if np.metadata.deletion_timestamp.is_some() {
        return Err(SkipReason::BeingDeleted);
    }
    let r = &np.spec.template.spec.node_class_ref;
    if r.group != crate::api::AWS_GROUP || r.kind != "EC2NodeClass" {
        return Err(SkipReason::ForeignNodeClass { group: r.group.clone(), kind: r.kind.clone() });
    }
    if let Some(status) = &np.status {
        if let Some(c) = crate::api::find_condition(&status.conditions, "Ready") {
            if !c.is_true() {
                return Err(SkipReason::NotReady { message: c.message.clone() });
            }
        }
    }
    Ok(())
}

/// The unavailable-offerings input marks offerings unavailable (upstream's ICE cache).
pub(super) fn marked_unavailable(
    instance_types: &Arc<Vec<InstanceType>>,
    unavailable: &BTreeMap<&str, Vec<&UnavailableOffering>>,
) -> Arc<Vec<InstanceType>> {
    let mut instance_types = instance_types.clone();
    if instance_types.iter().any(|it| unavailable.contains_key(it.name.as_str())) {
        let types = Arc::make_mut(&mut instance_types);
        for it in types.iter_mut() {
            if let Some(list) = unavailable.get(it.name.as_str()) {
                for o in &mut it.offerings {
                    if list.iter().any(|u| u.zone == o.zone && u.capacity_type == o.capacity_type.as_str()) {
                        o.available = false;
                    }
                }
            }
        }
    }
    instance_types
}

/// The unavailable offerings by instance type.
pub(super) fn unavailable_by_type(input: &Input) -> BTreeMap<&str, Vec<&UnavailableOffering>> {
    input.unavailable_offerings.iter().fold(BTreeMap::new(), |mut m, u| {
        m.entry(u.instance_type.as_str()).or_default().push(u);
        m
    })
}

pub(super) fn build_template(
    np: &NodePoolInput,
    unavailable: &BTreeMap<&str, Vec<&UnavailableOffering>>,
    daemons: &[Daemon],
    policy: MinValuesPolicy,
) -> Result<Template, SkipReason> {
    let base = NodeClaimTemplate::new(&np.nodepool).map_err(SkipReason::Requirements)?;
    let instance_types = marked_unavailable(&np.instance_types, unavailable);
    // Prefilter without limits: limits are applied per new NodeClaim against what remains.
    let mut unlimited = base.clone();
    unlimited.limits.clear();
    let prefilter = unlimited.prefilter_survivors(&instance_types);
    if prefilter.options.is_empty() {
        return Err(SkipReason::NoInstanceTypes);
    }
    if let (Err(shortfall), MinValuesPolicy::Strict) = (&prefilter.min_values, policy) {
        return Err(SkipReason::MinValues(shortfall.clone()));
    }
    let index: HashMap<&str, usize> = instance_types.iter().enumerate().map(|(i, it)| (it.name.as_str(), i)).collect();
    let types: Vec<usize> = prefilter.options.iter().map(|o| index[o.instance_type.name.as_str()]).collect();
    drop(prefilter);
    let spec = &np.nodepool.spec.template.spec;
    let (groups, group_of) =
        daemons::overhead_groups(daemons, &base.requirements, &spec.taints, &instance_types, &types);
    let mut options: Vec<TypeOption> = types
        .iter()
        .zip(group_of)
        .map(|(&it, group)| {
            let (packed, capacity) = instance_types[it].packed().clone();
            TypeOption { it, packed, capacity, group, name_rank: 0 }
        })
        .collect();
    let mut by_name: Vec<usize> = (0..options.len()).collect();
    by_name.sort_by(|&a, &b| instance_types[options[a].it].name.cmp(&instance_types[options[b].it].name));
    for (rank, o) in by_name.into_iter().enumerate() {
        options[o].name_rank = rank as u32;
    }
    Ok(Template {
        name: base.nodepool.clone(),
        remaining: base.limits.clone(),
        within_limits: Default::default(),
        limits: base.limits.clone(),
        taints: spec.taints.clone(),
        startup_taints: spec.startup_taints.clone(),
        base,
        instance_types,
        options,
        groups,
    })
}

pub(super) fn node_labels_requirements(labels_map: &BTreeMap<String, String>, hostname: &str) -> Requirements {
    let mut reqs = Requirements::from_labels(labels_map);
    if !reqs.has(labels::HOSTNAME) {
        reqs.add(Requirement::in_values(labels::HOSTNAME, &[hostname]));
    }
    reqs
}

pub(super) fn k8s_resources(
    map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> ResourceList {
    map.map(|m| resources::from_k8s(m).unwrap_or_default()).unwrap_or_default()
}

/// What each NodePool's nodes and launched NodeClaims hold, as its `limits` count it: their
/// capacity, and `nodes` = 1 each; deleting ones do not count (upstream: the provisioner's view).
pub fn nodepool_usage(input: &Input) -> BTreeMap<String, ResourceList> {
    existing_nodes(input, &Bound::default(), &[]).1
}
