//! Why a pod is not placed: the structured explanation of every outcome, built from the same
//! checks the round ran (our addition; upstream reports only the last attempt's error string).

use super::*;

/// Why the limits leave none of `options` (indices into the template's options): the limited
/// resource that excludes the most of them, with the smallest capacity among them, so the fix
/// names a limit that lets at least one of them launch.
pub(super) fn exceeds_limits(tpl: &Template, options: &[u32]) -> NodePoolFailure {
    let capacity = |o: u32, resource: &str| tpl.options[o as usize].capacity.get(resource);
    let mut best: Option<(usize, &str)> = None;
    for (resource, left) in &tpl.remaining {
        let excluded = options.iter().filter(|&&o| capacity(o, resource) > *left).count();
        if best.is_none_or(|(n, _)| excluded > n) {
            best = Some((excluded, resource));
        }
    }
    let resource = best.map_or("cpu", |(_, r)| r).to_string();
    let (smallest, smallest_type) = options
        .iter()
        .map(|&o| (capacity(o, &resource), tpl.instance_types[tpl.options[o as usize].it].name.as_str()))
        .min()
        .map_or((Quantity::ZERO, String::new()), |(q, name)| (q, name.to_string()));
    NodePoolFailure::ExceedsLimits {
        limit: tpl.limits.get(&resource).copied().unwrap_or(Quantity::ZERO),
        remaining: tpl.remaining.get(&resource).copied().unwrap_or(Quantity::ZERO),
        resource,
        smallest,
        smallest_type,
    }
}

/// Upstream `SatisfiesMinValues` over the given options (in order).
pub(super) fn min_values_shortfall(tpl: &Template, options: &[u32], requirements: &Requirements) -> Vec<MinValuesKey> {
    let types = options.iter().map(|&o| &tpl.instance_types[tpl.options[o as usize].it]);
    match crate::scheduling::nodeclaim_template::satisfies_min_values_of(types, requirements) {
        Ok(()) => Vec::new(),
        Err(s) => {
            s.keys.into_iter().map(|(key, (min_values, found))| MinValuesKey { key, min_values, found }).collect()
        }
    }
}

impl Round<'_> {
    /// The explanation of a pod's last attempt, evaluated against the final state (the last
    /// cycle placed nothing, so the state is the one the attempt saw).
    pub(super) fn explain(&self, p: usize, prefs: &Preferences) -> PodExplanation {
        let pod = &self.pods[p];
        let requirements = pod.requirements(prefs);
        let tolerations = pod.tolerations(prefs);
        let mut e = PodExplanation::empty();
        e.existing_nodes = explain::group_rejections(
            self.nodes
                .iter()
                .filter_map(|n| {
                    self.node_can_add(n, p, prefs, &requirements, &tolerations).err().map(|r| (n.name.clone(), r))
                })
                .collect(),
        );
        let mut planned = explain::RejectionGroups::default();
        // Most planned NodeClaims reject a topology pod on topology; the pre-check names the
        // group without building sets (only without volume alternatives, which change the node).
        let prepared = if self.topology.involves(p) && pod.volumes.alternatives.is_empty() {
            self.topology.prepare(p, pod, prefs, &pod.strict_requirements(prefs), &requirements)
        } else {
            None
        };
        for (i, claim) in self.claims.iter().enumerate() {
            let name = planned_name(&self.templates[claim.template].name, i);
            if let Some((kind, key)) = prepared.as_ref().and_then(|t| t.failing_group(&claim.requirements)) {
                // The checks claim_can_add makes before topology, in its order.
                let tpl = &self.templates[claim.template];
                let tolerated = tpl.taints.iter().all(|t| tolerations.iter().any(|tol| taints::tolerates(tol, t)));
                if tolerated && claim.requirements.is_compatible(&requirements, AllowUndefined::WellKnownLabels) {
                    // The shortcut must agree with the full check (verified in debug builds: the
                    // test suite and the scenario corpus).
                    debug_assert!(
                        matches!(self.claim_can_add(claim, p, prefs, &requirements, &tolerations),
                            Err(ClaimRejection::Topology(f)) if self.topology.failure_group(&f) == (kind, key)),
                        "topology pre-check disagrees for {} on {name}",
                        pod.pod_ref
                    );
                    if planned.add_topology(&name, kind, key) {
                        continue;
                    }
                }
            }
            let rejection = match self.claim_can_add(claim, p, prefs, &requirements, &tolerations) {
                Ok(_) => continue,
                Err(ClaimRejection::Topology(f)) => {
                    // Building a conflict walks the group's domains (thousands of hosts in large
                    // rounds) and a group keeps only its first: count the rest without one.
                    let (kind, key) = self.topology.failure_group(&f);
                    if planned.add_topology(&name, kind, key) {
                        continue;
                    }
                    NodeRejection::Topology(Box::new(self.topology.conflict(&f)))
                }
                Err(ClaimRejection::Taint(t)) => {
                    NodeRejection::Taint { taint: TaintRef::of(&self.templates[claim.template].taints[t]) }
                }
                Err(ClaimRejection::Requirements(r)) => {
                    NodeRejection::Requirements(RequirementConflict::from_reason(&r))
                }
                Err(ClaimRejection::Volume(r)) => {
                    NodeRejection::VolumeTopology(Box::new(self.pods[p].volumes.conflict(&r)))
                }
                Err(ClaimRejection::InstanceTypes { remaining }) => NodeRejection::InstanceTypes { remaining },
                Err(ClaimRejection::MinValues(keys)) => {
                    NodeRejection::MinValues { keys: keys.into_iter().map(|k| k.key).collect() }
                }
                Err(ClaimRejection::Reservations(c)) => NodeRejection::Reservations(self.describe_reservations(&c)),
            };
            planned.add(name, rejection);
        }
        e.planned_nodeclaims = planned.finish();
        if self.templates.is_empty() {
            e.no_nodepools = true;
        }
        // Per NodePool, the constraints of the pod itself come first (with every instance type, as
        // if no limit applied), then the limits: a limit is only the reason when lifting it would
        // let the pod schedule. (Upstream checks limits first and reports only the last error.)
        for t in 0..self.templates.len() {
            if let Err(failure) = self.nodepool_verdict(t, p, prefs, &requirements, &tolerations) {
                e.nodepools.push(NodePoolVerdict::new(&self.templates[t].name, *failure));
            }
        }
        e
    }

    /// NodePool `t`'s answer for the pod on a fresh NodeClaim: the NodeClaim (within the limits)
    /// that takes it, or the first constraint it fails.
    pub(super) fn nodepool_verdict(
        &self,
        t: usize,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
        tolerations: &[k8s_openapi::api::core::v1::Toleration],
    ) -> Result<Claim, Box<NodePoolFailure>> {
        let unlimited = self.fresh_claim(t, (0..self.templates[t].options.len() as u32).collect());
        match self.claim_can_add(&unlimited, p, prefs, requirements, tolerations) {
            Err(rejection) => Err(Box::new(self.pool_failure(t, &unlimited, (p, prefs), requirements, rejection))),
            // The pod fits some instance types; if the limits leave none of those, the limit
            // is the reason, measured on the types that fit the pod.
            Ok(fitting) => match self.new_claim(t) {
                Err(limits) => Err(match *limits {
                    NodePoolFailure::ExceedsLimits { .. } => {
                        Box::new(exceeds_limits(&self.templates[t], &fitting.options))
                    }
                    _ => limits,
                }),
                Ok(claim) => match self.claim_can_add(&claim, p, prefs, requirements, tolerations) {
                    Ok(_) => Ok(claim),
                    Err(ClaimRejection::InstanceTypes { .. }) => {
                        Err(Box::new(exceeds_limits(&self.templates[t], &fitting.options)))
                    }
                    Err(rejection) => Err(Box::new(self.pool_failure(t, &claim, (p, prefs), requirements, rejection))),
                },
            },
        }
    }

    /// The pod on its own, before the round places anything: each existing node's answer
    /// (grouped by reason) and each NodePool's, passing ones with their instance-type funnel.
    pub(super) fn evaluate(&self, p: usize) -> explain::PodEvaluation {
        let prefs = Preferences::default();
        let pod = &self.pods[p];
        let requirements = pod.requirements(&prefs);
        let tolerations = pod.tolerations(&prefs);
        let mut fitting = Vec::new();
        let mut rejections = Vec::new();
        for n in &self.nodes {
            match self.node_can_add(n, p, &prefs, &requirements, &tolerations) {
                Ok(_) => fitting.push(n.name.clone()),
                Err(r) => rejections.push((n.name.clone(), r)),
            }
        }
        let nodepools = (0..self.templates.len())
            .map(|t| {
                let name = self.templates[t].name.clone();
                match self.nodepool_verdict(t, p, &prefs, &requirements, &tolerations) {
                    Ok(claim) => explain::NodePoolCheck {
                        nodepool: name,
                        passes: true,
                        failure: None,
                        fix: None,
                        funnel: Some(self.funnel(&claim, pod, &requirements)),
                    },
                    Err(failure) => {
                        let verdict = NodePoolVerdict::new(&name, *failure);
                        explain::NodePoolCheck {
                            nodepool: name,
                            passes: false,
                            failure: Some(verdict.failure),
                            fix: verdict.fix,
                            funnel: None,
                        }
                    }
                }
            })
            .collect();
        explain::PodEvaluation {
            existing_nodes_fitting: fitting,
            existing_nodes: explain::group_rejections(rejections),
            nodepools,
        }
    }

    pub(super) fn pool_failure(
        &self,
        t: usize,
        claim: &Claim,
        (p, prefs): (usize, &Preferences),
        requirements: &Requirements,
        rejection: ClaimRejection,
    ) -> NodePoolFailure {
        let pod = &self.pods[p];
        match rejection {
            ClaimRejection::Taint(i) => NodePoolFailure::Taint { taint: TaintRef::of(&self.templates[t].taints[i]) },
            ClaimRejection::Requirements(r) => NodePoolFailure::Requirements(RequirementConflict::from_reason(&r)),
            ClaimRejection::Volume(r) => NodePoolFailure::VolumeTopology(Box::new(pod.volumes.conflict(&r))),
            ClaimRejection::Topology(f) => NodePoolFailure::Topology(Box::new(self.topology.conflict(&f))),
            ClaimRejection::InstanceTypes { .. } => {
                // The domains topology chose narrow the instance types too (a spread may pick a
                // zone none of them is offered in), and so does the volume topology alternative
                // the NodeClaim was evaluated with.
                let mut narrowed = requirements.clone();
                let mut node_requirements = std::borrow::Cow::Borrowed(&claim.requirements);
                let mut volume_domains = Vec::new();
                if !pod.volumes.alternatives.is_empty() {
                    let mut base = claim.requirements.clone();
                    base.add_all(requirements);
                    if let Some(alternative) = pod.volumes.first_compatible(&base, AllowUndefined::WellKnownLabels) {
                        volume_domains = alternative.iter().map(ToString::to_string).collect();
                        narrowed.add_all(alternative);
                        base.add_all(alternative);
                        node_requirements = std::borrow::Cow::Owned(base);
                    }
                }
                let mut topology = Vec::new();
                if self.topology.involves(p) {
                    let node = (node_requirements.as_ref(), requirements);
                    if let Ok(domains) =
                        self.topology.add_requirements(p, pod, prefs, &pod.strict_requirements(prefs), node)
                    {
                        topology = domains.iter().map(ToString::to_string).collect();
                        narrowed.add_all(&domains);
                    }
                }
                let mut f = self.funnel(claim, pod, &narrowed);
                f.topology = topology;
                f.volumes = volume_domains;
                NodePoolFailure::InstanceTypes(Box::new(f))
            }
            ClaimRejection::MinValues(keys) => NodePoolFailure::MinValues { keys },
            ClaimRejection::Reservations(c) => NodePoolFailure::Reservations(self.describe_reservations(&c)),
        }
    }

    pub(super) fn describe_reservations(&self, conflict: &reservations::Conflict) -> explain::ReservationConflict {
        self.reservations.describe(conflict, self.claims.iter().map(|c| &c.reservations))
    }

    /// The deferral of a pod whose last attempt ended in a reserved-offering error, re-evaluated
    /// against the final state (the state that attempt saw): the first NodePool, in weight order,
    /// that decided the attempt.
    pub(super) fn deferral(&self, p: usize, prefs: &Preferences) -> Option<Deferred> {
        if self.reservations.is_empty() {
            return None;
        }
        let pod = &self.pods[p];
        let (requirements, tolerations) = (pod.requirements(prefs), pod.tolerations(prefs));
        let mut found = None;
        for t in 0..self.templates.len() {
            let Ok(claim) = self.new_claim(t) else { continue };
            match self.claim_can_add(&claim, p, prefs, &requirements, &tolerations) {
                Err(ClaimRejection::Reservations(c)) => {
                    found = Some(Deferred {
                        pod: pod.pod_ref.clone(),
                        nodepool: self.templates[t].name.clone(),
                        conflict: self.describe_reservations(&c),
                    });
                    break;
                }
                Ok(_) => break,
                Err(_) => {}
            }
        }
        found
    }

    /// The instance-type funnel of a fresh NodeClaim of `claim.template` for the pod.
    pub(super) fn funnel(&self, claim: &Claim, pod: &PodData, requirements: &Requirements) -> Funnel {
        let tpl = &self.templates[claim.template];
        let mut merged = claim.requirements.clone();
        merged.add_all(requirements);
        let mut overheads: Vec<&ResourceList> =
            claim.options.iter().map(|&o| &tpl.groups[tpl.options[o as usize].group].overhead).collect();
        overheads.dedup();
        let min = daemons::min_overhead(overheads.iter().copied());
        let max = overheads.iter().fold(ResourceList::new(), |m, o| resources::max_of(&m, o));
        let requests = resources::merge(&pod.requests, &min);
        let mut f = Funnel {
            allowed: claim.options.len(),
            requirements: 0,
            resources: 0,
            offerings: 0,
            daemon_overhead_max: (max != min).then(|| resources::merge(&pod.requests, &max)),
            requests,
            requirement_conflict: None,
            shortfall: None,
            host_port: None,
            cheapest: Vec::new(),
            cheapest_lost: Vec::new(),
            topology: Vec::new(),
            volumes: Vec::new(),
            narrowed_by: narrowing_requirements(tpl, &merged),
        };
        let base_offerings = OfferingCompatibility::new(&tpl.base.requirements);
        let merged_offerings = OfferingCompatibility::new(&merged);
        let lose = |f: &mut Funnel, it: &InstanceType, stage: &'static str, detail: Option<String>| {
            if f.cheapest_lost.len() < 3 {
                let price = base_offerings.cheapest(it);
                f.cheapest_lost.push(TypeLoss { instance_type: it.name.clone(), price, stage, detail });
            }
        };
        let mut conflicts: BTreeMap<String, (usize, RequirementConflict)> = BTreeMap::new();
        let mut largest: BTreeMap<String, (Quantity, String)> = BTreeMap::new();
        let mut first_short: Option<(String, Quantity)> = None;
        for &o in &claim.options {
            let option = &tpl.options[o as usize];
            let it = &tpl.instance_types[option.it];
            if let Err(r) = it.requirements.intersects(&merged) {
                let c = RequirementConflict::from_reason(&r);
                lose(&mut f, it, "requirements", Some(c.key.clone()));
                conflicts.entry(c.key.clone()).or_insert((0, c)).0 += 1;
                continue;
            }
            f.requirements += 1;
            let group = &tpl.groups[option.group];
            if let Some((w, _)) = hostports::first_conflict(&pod.host_ports, &group.host_ports) {
                lose(&mut f, it, "hostPort", Some(w.to_string()));
                f.host_port.get_or_insert_with(|| w.to_string());
                continue;
            }
            let total = resources::merge(&pod.requests, &group.overhead);
            let allocatable = it.allocatable();
            for (k, v) in allocatable {
                let slot = largest.entry(k.clone()).or_insert((*v, it.name.clone()));
                if *v > slot.0 {
                    *slot = (*v, it.name.clone());
                }
            }
            if !resources::fits(&total, allocatable) {
                let exceeded = resources::exceeded(&total, allocatable);
                lose(&mut f, it, "resources", Some(exceeded.join(", ")));
                if first_short.is_none() {
                    if let Some(r) = exceeded.first() {
                        first_short = Some((r.to_string(), total[*r]));
                    }
                }
                continue;
            }
            f.resources += 1;
            let price = merged_offerings.cheapest(it);
            if !price.is_finite() {
                lose(&mut f, it, "offerings", None);
            }
            if price.is_finite() {
                f.offerings += 1;
                if f.cheapest.len() < 3 {
                    f.cheapest.push((it.name.clone(), price));
                }
            }
        }
        if f.requirements == 0 {
            f.requirement_conflict = conflicts.into_values().max_by_key(|(n, _)| *n).map(|(_, c)| c);
        }
        if f.resources == 0 && f.requirements > 0 {
            // The resource that does not fit: prefer one no type can hold at all.
            let pick = f
                .requests
                .iter()
                .find(|(k, v)| largest.get(*k).is_none_or(|(l, _)| **v > *l))
                .map(|(k, v)| (k.clone(), *v))
                .or(first_short);
            if let Some((resource, needs)) = pick {
                let (largest_q, largest_type) =
                    largest.get(&resource).cloned().unwrap_or((Quantity::ZERO, String::new()));
                f.shortfall = Some(Shortfall { resource, needs, largest: largest_q, largest_type });
            }
        }
        f
    }
}
