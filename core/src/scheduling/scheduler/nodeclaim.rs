//! The round's new NodeClaims (upstream `scheduling/nodeclaim.go`, v1.14.1): creating one from a
//! template, adding a pod (narrowing its instance types and offerings), and finalising it
//! (daemon overhead, price order, truncation with the minValues re-check, the simulated launch).

use super::*;

/// The requirements (NodePool's and pod's) that narrow the instance types: those on keys the
/// types define, other than `Exists` (at most 4, rendered; `key In [a b c d e and 3 others]`).
pub(super) fn narrowing_requirements(tpl: &Template, merged: &Requirements) -> Vec<String> {
    let Some(sample) = tpl.options.first().map(|o| &tpl.instance_types[o.it]) else { return Vec::new() };
    merged
        .iter()
        .filter(|r| r.key() != labels::HOSTNAME && r.operator() != Operator::Exists && sample.requirements.has(r.key()))
        .take(4)
        .map(ToString::to_string)
        .collect()
}

/// How explanations name the NodeClaim planned at `index` in this round ("default #3").
pub(super) fn planned_name(nodepool: &str, index: usize) -> String {
    format!("{nodepool} #{}", index + 1)
}

/// Whether an instance type that met the requirements before `changed` narrowed them still
/// meets them and has a compatible available offering:
/// the type's requirements are checked on the changed keys only, and its offerings only when a
/// changed key is one of theirs (zone, capacity type…).
pub(super) fn type_still_matches(
    it: &InstanceType,
    changed: &Requirements,
    merged: &OfferingCompatibility<'_>,
) -> bool {
    if !it.requirements.has_intersection(changed) {
        return false;
    }
    let offering_keys_changed = it.offerings.first().is_some_and(|o| changed.keys().any(|k| o.requirements.has(k)));
    !offering_keys_changed || it.offerings.iter().any(|o| o.available && merged.test(&o.requirements))
}

pub(super) fn within_limits(capacity: &resources::Packed, remaining: &ResourceList) -> bool {
    remaining.iter().all(|(r, left)| capacity.get(r) <= *left)
}

impl Round<'_> {
    /// A fresh NodeClaim of template `t`, with the limits applied (upstream `addToNewNodeClaim`).
    pub(super) fn new_claim(&self, t: usize) -> Result<Claim, Box<NodePoolFailure>> {
        let tpl = &self.templates[t];
        if let Some(nodes) = tpl.remaining.get("nodes") {
            if nodes.is_zero() {
                return Err(Box::new(NodePoolFailure::NodeLimitsExhausted {
                    limit: tpl.limits.get("nodes").copied().unwrap_or(Quantity::ZERO),
                }));
            }
        }
        let options: Vec<u32> = tpl
            .within_limits
            .borrow_mut()
            .get_or_insert_with(|| {
                (0..tpl.options.len() as u32)
                    .filter(|&o| within_limits(&tpl.options[o as usize].capacity, &tpl.remaining))
                    .collect()
            })
            .clone();
        if options.is_empty() {
            let all: Vec<u32> = (0..tpl.options.len() as u32).collect();
            return Err(Box::new(exceeds_limits(tpl, &all)));
        }
        Ok(self.fresh_claim(t, options))
    }

    /// A NodeClaim of template `t` with the given options and a new placeholder hostname.
    pub(super) fn fresh_claim(&self, t: usize, options: Vec<u32>) -> Claim {
        let tpl = &self.templates[t];
        // The hostname stands for the node the NodeClaim will become; it is named as
        // explanations name planned NodeClaims, so topology counts read "default #3=1". A claim
        // that is built but not kept leaves no trace (nothing was recorded on it), so the next one
        // may reuse the name.
        let mut requirements = tpl.base.requirements.clone();
        requirements.add(Requirement::in_values(labels::HOSTNAME, &[planned_name(&tpl.name, self.claims.len())]));
        Claim {
            template: t,
            requirements,
            options,
            pods: Vec::new(),
            requests: ResourceList::new(),
            host_ports: Vec::new(),
            min_values_relaxed: false,
            host_counts: Vec::new(),
            reservations: reservations::Held::new(),
        }
    }

    /// Upstream `NodeClaim.CanAdd`: [`claim_can_add_with`](Self::claim_can_add_with) with each
    /// volume topology alternative in turn (or none), the first that passes wins.
    pub(super) fn claim_can_add(
        &self,
        claim: &Claim,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
        tolerations: &[k8s_openapi::api::core::v1::Toleration],
    ) -> Result<Addition, ClaimRejection> {
        volumes::try_alternatives(
            &self.pods[p].volumes,
            || self.claim_can_add_with(claim, p, prefs, requirements, tolerations, None),
            |alternative| self.claim_can_add_with(claim, p, prefs, requirements, tolerations, Some(alternative)),
            |e| matches!(e, ClaimRejection::Volume(_)),
        )
    }

    /// Upstream `NodeClaim.CanAdd` with one volume alternative: taints, requirements (well-known
    /// keys may be undefined), the volume alternative, topology, instance-type narrowing,
    /// minValues.
    pub(super) fn claim_can_add_with(
        &self,
        claim: &Claim,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
        tolerations: &[k8s_openapi::api::core::v1::Toleration],
        volume: Option<&Requirements>,
    ) -> Result<Addition, ClaimRejection> {
        let pod = &self.pods[p];
        let tpl = &self.templates[claim.template];
        if let Some(i) = tpl.taints.iter().position(|t| !tolerations.iter().any(|tol| taints::tolerates(tol, t))) {
            return Err(ClaimRejection::Taint(i));
        }
        claim
            .requirements
            .compatible(requirements, AllowUndefined::WellKnownLabels)
            .map_err(ClaimRejection::Requirements)?;
        // upstream: the volume alternative joins the NodeClaim's requirements only (checked
        // against the NodeClaim's and the pod's), never the pod's, so topology counts and domains
        // keep using the pod's own affinity.
        let with_volume;
        let node_requirements = match volume {
            None => &claim.requirements,
            Some(alternative) => {
                let mut with = claim.requirements.clone();
                with.add_all(requirements);
                with.compatible(alternative, AllowUndefined::WellKnownLabels).map_err(ClaimRejection::Volume)?;
                with.add_all(alternative);
                with_volume = with;
                &with_volume
            }
        };
        // Topology last (it can collapse a key to one domain); evaluated on the node's domains
        // with the pod's requirements added, before the merged set is built.
        if !self.topology.involves(p) {
            return self.narrow(claim, p, node_requirements, requirements, None);
        }
        let strict = pod.strict_requirements(prefs);
        let node = (node_requirements, requirements);
        let (domains, tie) = self
            .topology
            .add_requirements_choosing(p, pod, prefs, &strict, node, None)
            .map_err(ClaimRejection::Topology)?;
        let first = self.narrow(claim, p, node_requirements, requirements, Some(&domains));
        let Some(tie) = tie.filter(|_| first.is_err()) else { return first };
        // A spread tie: upstream drew one of the equally loaded domains at random; when the
        // NodeClaim cannot launch in the first by name, take the next one it can (one of
        // upstream's draws) rather than failing the pod every time (docs/divergences.md).
        for choice in tie.alternatives() {
            let Ok((domains, _)) = self.topology.add_requirements_choosing(p, pod, prefs, &strict, node, Some(&choice))
            else {
                continue;
            };
            if let Ok(addition) = self.narrow(claim, p, node_requirements, requirements, Some(&domains)) {
                return Ok(addition);
            }
        }
        first
    }

    /// The rest of `NodeClaim.CanAdd` once topology chose its domains: instance-type narrowing,
    /// minValues and reservations.
    pub(super) fn narrow(
        &self,
        claim: &Claim,
        p: usize,
        node_requirements: &Requirements,
        requirements: &Requirements,
        domains: Option<&Requirements>,
    ) -> Result<Addition, ClaimRejection> {
        let pod = &self.pods[p];
        let tpl = &self.templates[claim.template];
        let mut merged = node_requirements.clone();
        merged.add_all(requirements);
        if let Some(domains) = domains {
            merged.compatible(domains, AllowUndefined::WellKnownLabels).map_err(ClaimRejection::Requirements)?;
            merged.add_all(domains);
        }
        // The options already meet the claim's requirements; only the keys the pod (or topology)
        // narrowed need checking again (the result is the same as re-checking every key).
        let changed: Requirements =
            merged.iter().filter(|r| claim.requirements.get_ref(r.key()) != Some(*r)).cloned().collect();
        let mut base = claim.requests.clone();
        resources::add_into(&mut base, &pod.requests);
        let merged_offerings = OfferingCompatibility::new(&merged);
        let mut group_totals: Vec<Option<Option<resources::Packed>>> = vec![None; tpl.groups.len()];
        let mut kept = Vec::with_capacity(claim.options.len());
        for &o in &claim.options {
            let option = &tpl.options[o as usize];
            let total = group_totals[option.group].get_or_insert_with(|| {
                let group = &tpl.groups[option.group];
                if hostports::first_conflict(&pod.host_ports, &group.host_ports).is_some()
                    || hostports::first_conflict(&pod.host_ports, &claim.host_ports).is_some()
                {
                    return None;
                }
                Some(resources::Packed::new(&resources::merge(&base, &group.overhead)))
            });
            let Some(total) = total else { continue };
            if !total.fits(&option.packed) {
                continue;
            }
            if !changed.is_empty() && !type_still_matches(&tpl.instance_types[option.it], &changed, &merged_offerings) {
                continue;
            }
            kept.push(o);
        }
        if kept.is_empty() {
            return Err(ClaimRejection::InstanceTypes { remaining: claim.options.len() });
        }
        let mut relaxed = false;
        if merged.has_min_values() {
            let shortfall = min_values_shortfall(tpl, &kept, &merged);
            if !shortfall.is_empty() {
                // upstream: BestEffort relaxes minValues only when a pod opens a new NodeClaim;
                // adding to a NodeClaim planned earlier in the round always checks it strictly
                // (`CanAdd(…, relaxMinValues=false)` for in-flight NodeClaims). A claim without
                // pods is a fresh one.
                let relax =
                    claim.pods.is_empty() && self.input.options.min_values_policy == MinValuesPolicy::BestEffort;
                match relax {
                    false => return Err(ClaimRejection::MinValues(shortfall)),
                    true => {
                        for k in &shortfall {
                            if let Some(r) = merged.remove(&k.key) {
                                merged.add(r.with_min_values(Some(k.found as i64)));
                            }
                        }
                        relaxed = true;
                    }
                }
            }
        }
        let reservations = self
            .reservations
            .to_reserve(claim.template, &claim.reservations, &kept, &merged)
            .map_err(ClaimRejection::Reservations)?;
        Ok(Addition { requirements: merged, options: kept, relaxed_min_values: relaxed, reservations })
    }

    /// Builds the results: finalises the NodeClaims and explains the pods left.
    pub(super) fn finish(mut self, failed: Vec<(usize, Preferences, Vec<Relaxation>)>, results: &mut Results) {
        // Explanations first: they name the NodeClaims planned this round that rejected the pod.
        let mut explained: Vec<(usize, PodExplanation)> = Vec::new();
        for (p, prefs, relaxations) in failed {
            if let Some(deferred) = self.deferral(p, &prefs) {
                results.deferred.push(deferred);
                continue;
            }
            let mut explanation = self.explain(p, &prefs);
            explanation.relaxations = relaxations;
            explained.push((p, explanation));
        }
        let mut truncated_out: Vec<(usize, NodePoolVerdict)> = Vec::new();
        let mut reservations_left = self.reservations.launch_capacity();
        for claim in std::mem::take(&mut self.claims) {
            match self.finalize(&claim, &mut reservations_left) {
                Ok(nc) => results.nodeclaims.push(nc),
                Err(verdict) => truncated_out.extend(claim.pods.iter().map(|&p| (p, (*verdict).clone()))),
            }
        }
        for node in &self.nodes {
            if !node.placed.is_empty() {
                results.existing_nodes.push(ExistingPlacement {
                    name: node.name.clone(),
                    pods: node.placed.iter().map(|&p| self.pods[p].pod_ref.clone()).collect(),
                });
            }
        }
        for (p, relaxations) in std::mem::take(&mut self.relaxed) {
            results.relaxed.push(RelaxedPod { pod: self.pods[p].pod_ref.clone(), relaxations });
        }
        for (p, explanation) in explained {
            results.unschedulable.push(Unschedulable { pod: self.pods[p].pod_ref.clone(), explanation });
        }
        for (p, verdict) in truncated_out {
            let mut explanation = PodExplanation::empty();
            explanation.nodepools.push(verdict);
            results.unschedulable.push(Unschedulable { pod: self.pods[p].pod_ref.clone(), explanation });
        }
    }

    /// Upstream `FinalizeScheduling`, `TruncateInstanceTypes` and `ToNodeClaim`, then the launch.
    pub(super) fn finalize(
        &self,
        claim: &Claim,
        reservations_left: &mut BTreeMap<String, i64>,
    ) -> Result<PlannedNodeClaim, Box<NodePoolVerdict>> {
        let tpl = &self.templates[claim.template];
        let mut requirements = claim.requirements.clone();
        requirements.remove(labels::HOSTNAME);
        self.reservations.finalize_requirements(&claim.reservations, &mut requirements);
        // Daemon overhead: the minimum over the groups that still have an instance type.
        let mut live_groups: Vec<usize> = claim.options.iter().map(|&o| tpl.options[o as usize].group).collect();
        live_groups.sort_unstable();
        live_groups.dedup();
        let overhead = daemons::min_overhead(live_groups.iter().map(|&g| &tpl.groups[g].overhead));
        let requests = resources::merge(&claim.requests, &overhead);
        let compatible = OfferingCompatibility::new(&requirements);
        // Price order (cheapest compatible available offering, then name), then truncation.
        let mut options: Vec<(f64, u32)> = claim
            .options
            .iter()
            .map(|&o| (compatible.cheapest(&tpl.instance_types[tpl.options[o as usize].it]), o))
            .collect();
        options.sort_by(|a, b| {
            a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal).then_with(|| {
                let name = |o: u32| &tpl.instance_types[tpl.options[o as usize].it].name;
                name(a.1).cmp(name(b.1))
            })
        });
        options.truncate(self.input.options.max_instance_types);
        let kept: Vec<u32> = options.iter().map(|(_, o)| *o).collect();
        if requirements.has_min_values() && self.input.options.min_values_policy == MinValuesPolicy::Strict {
            let shortfall = min_values_shortfall(tpl, &kept, &requirements);
            if !shortfall.is_empty() {
                let failure = NodePoolFailure::MinValuesAfterTruncation { keys: shortfall };
                return Err(Box::new(NodePoolVerdict::new(&tpl.name, failure)));
            }
        }
        let types: Vec<&InstanceType> = kept.iter().map(|&o| &tpl.instance_types[tpl.options[o as usize].it]).collect();
        let names: Vec<String> = types.iter().map(|it| it.name.clone()).collect();
        // The requirement lists the same types by name: ordered by the template's name ranks, so
        // no strings are compared.
        let mut by_name = kept.clone();
        by_name.sort_unstable_by_key(|&o| tpl.options[o as usize].name_rank);
        let sorted_names: Vec<String> =
            by_name.iter().map(|&o| tpl.instance_types[tpl.options[o as usize].it].name.clone()).collect();
        let it_min = requirements.get_ref(labels::INSTANCE_TYPE).and_then(Requirement::min_values);
        let mut offered = [false; 3];
        for o in types.iter().flat_map(|it| it.offerings.iter()) {
            let slot = &mut offered[o.capacity_type as usize];
            if !*slot && o.available && compatible.test(&o.requirements) {
                *slot = true;
            }
        }
        let capacity_types: Vec<&str> = [CapacityType::OnDemand, CapacityType::Reserved, CapacityType::Spot]
            .into_iter()
            .filter(|ct| offered[*ct as usize])
            .map(CapacityType::as_str)
            .collect();
        // The instance-type requirement is kept apart until the output: nothing below reads it
        // (offerings and custom labels do not involve the key), and its values move into it.
        let mut final_reqs = requirements.clone();
        final_reqs.remove(labels::INSTANCE_TYPE);
        let ct = final_reqs.remove(labels::CAPACITY_TYPE);
        let mut ct_req = Requirement::in_values(labels::CAPACITY_TYPE, &capacity_types);
        if let Some(min) = ct.as_ref().and_then(Requirement::min_values) {
            ct_req = ct_req.with_min_values(Some(min));
        }
        final_reqs.add(ct_req);
        let mut node_labels = tpl.base.labels.clone();
        node_labels.extend(final_reqs.resolve_custom_labels());
        let launch = cloudprovider::launch(
            &final_reqs,
            &requests,
            kept.iter().map(|&o| {
                let option = &tpl.options[o as usize];
                (&tpl.instance_types[option.it], &option.packed)
            }),
            reservations_left,
        );
        Ok(PlannedNodeClaim {
            nodepool: tpl.name.clone(),
            pods: claim.pods.iter().map(|&p| self.pods[p].pod_ref.clone()).collect(),
            instance_type_options: names,
            requirements: {
                let mut out = final_reqs.to_node_selector_requirements();
                let at = out.partition_point(|r| r.key.as_str() < labels::INSTANCE_TYPE);
                out.insert(
                    at,
                    NodeSelectorRequirementWithMinValues {
                        key: labels::INSTANCE_TYPE.to_string(),
                        operator: crate::requirements::Operator::In,
                        values: sorted_names,
                        min_values: it_min,
                    },
                );
                out
            },
            labels: node_labels,
            taints: tpl.taints.iter().map(TaintRef::of).collect(),
            startup_taints: tpl.startup_taints.iter().map(TaintRef::of).collect(),
            requests,
            launch,
            min_values_relaxed: claim.min_values_relaxed,
        })
    }
}
