//! Existing nodes and in-flight NodeClaims as the round sees them (upstream
//! `scheduling/existingnode.go`, v1.14.1): remaining capacity after bound pods and daemon overhead,
//! and whether a pod can be added (taints, requirements, resources, host ports, volumes, topology).

use super::*;

pub(super) fn existing_nodes(
    input: &Input,
    bound: &Bound<'_>,
    daemons: &[Daemon],
) -> (Vec<ExistingNode>, Usage, Vec<String>, Vec<String>) {
    let mut out = Vec::new();
    let mut deleting = Vec::new();
    let mut usage: Usage = BTreeMap::new();
    let mut notes = Vec::new();
    let mut claimed = vec![false; input.nodeclaims.len()];
    let mut by_node_name: HashMap<&str, usize> = HashMap::new();
    let mut by_provider: HashMap<&str, usize> = HashMap::new();
    for (i, s) in input.nodeclaims.iter().enumerate().filter_map(|(i, nc)| Some((i, nc.status.as_ref()?))) {
        if !s.node_name.is_empty() {
            by_node_name.entry(s.node_name.as_str()).or_insert(i);
        }
        if !s.provider_id.is_empty() {
            by_provider.entry(s.provider_id.as_str()).or_insert(i);
        }
    }
    let mut add_usage = |nodepool: Option<&String>, capacity: &ResourceList| {
        if let Some(np) = nodepool {
            let u = usage.entry(np.clone()).or_default();
            resources::add_into(u, capacity);
            resources::add_into(u, &BTreeMap::from([("nodes".to_string(), Quantity::from_units(1))]));
        }
    };
    for node in &input.nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.clone()).filter(|p| !p.is_empty());
        if provider_id.is_none() && node.metadata.labels.as_ref().is_some_and(|l| l.contains_key(labels::NODEPOOL)) {
            // upstream `Cluster.UpdateNode`: a node Karpenter owns is not tracked until it has a
            // providerID, so it is neither capacity nor a node whose pods are rescheduled.
            notes.push(format!(
                "Node {name} carries {} but has no spec.providerID: upstream's cluster state does not track \
                 it until it has one, so it is left out (neither capacity nor deleting)",
                labels::NODEPOOL
            ));
            continue;
        }
        // The first NodeClaim naming the node or its providerID (a lookup: one per node).
        let claim_index = [by_node_name.get(name.as_str()), provider_id.as_deref().and_then(|p| by_provider.get(p))]
            .into_iter()
            .flatten()
            .min()
            .copied();
        if let Some(i) = claim_index {
            claimed[i] = true;
        }
        let claim = claim_index.map(|i| &input.nodeclaims[i]);
        // upstream `MarkedForDeletion`: also a node the disruption queue has tainted (not for
        // kube-scheduler, which leaves the pods of a tainted node where they are).
        let disrupted = taints::is_disrupted(node) && !input.options.kube_scheduler;
        if node.metadata.deletion_timestamp.is_some() || claim.is_some_and(marked_for_deletion) || disrupted {
            // not active capacity; its reschedulable pods join the round.
            deleting.push(name);
            continue;
        }
        // upstream `StateNode`: a node is managed when a NodeClaim is paired with it (whatever its
        // labels say yet); until registration writes `karpenter.sh/registered`, it has its
        // NodeClaim's labels and taints (a provisioning round racing registration sees the
        // NodeClaim's NodePool labels, not a bare kubelet's).
        let managed = claim.is_some();
        let node_labels_now = node.metadata.labels.as_ref();
        let label_true = |key: &str| node_labels_now.and_then(|l| l.get(key)).map(String::as_str) == Some("true");
        let registered = !managed || label_true(labels::NODE_REGISTERED);
        let initialized = !managed || label_true(labels::NODE_INITIALIZED);
        let (node_labels, mut node_taints) = match claim {
            Some(c) if !registered => (c.metadata.labels.clone().unwrap_or_default(), c.spec.taints.clone()),
            _ => (
                node.metadata.labels.clone().unwrap_or_default(),
                node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default(),
            ),
        };
        let nodepool = node_labels.get(labels::NODEPOOL).cloned();
        if managed && !initialized {
            let startup = claim.map(|c| c.spec.startup_taints.as_slice()).unwrap_or(&[]);
            node_taints.retain(|t| {
                !taints::is_known_ephemeral(t) && !startup.iter().any(|s| s.key == t.key && s.effect == t.effect)
            });
        }
        let status = node.status.as_ref();
        let mut allocatable = k8s_resources(status.and_then(|s| s.allocatable.as_ref()));
        let mut capacity = k8s_resources(status.and_then(|s| s.capacity.as_ref()));
        if managed && !initialized {
            if let Some(cs) = claim.and_then(|c| c.status.as_ref()) {
                fill_zero(&mut allocatable, &cs.allocatable);
                fill_zero(&mut capacity, &cs.capacity);
            }
        }
        add_usage(nodepool.as_ref(), &capacity);
        let hostname = node_labels.get(labels::HOSTNAME).cloned().unwrap_or_else(|| name.clone());
        let requirements = node_labels_requirements(&node_labels, &hostname);
        out.push(make_existing(name, initialized, node_taints, requirements, allocatable, bound, daemons));
    }
    for (i, nc) in input.nodeclaims.iter().enumerate() {
        if claimed[i] {
            continue;
        }
        let name = nc.name().to_string();
        let Some(status) = nc.status.as_ref().filter(|s| !s.provider_id.is_empty() || !s.allocatable.is_empty()) else {
            notes.push(format!(
                "NodeClaim {name} is not launched yet (no providerID): upstream schedules nothing until it is; \
                 here it is left out"
            ));
            continue;
        };
        if marked_for_deletion(nc) {
            deleting.push(name);
            continue;
        }
        // In flight: launched, no Node yet; shape from the NodeClaim, startup taints ignored.
        let mut node_labels = nc.metadata.labels.clone().unwrap_or_default();
        let reqs = Requirements::from_node_selector_requirements(&nc.spec.requirements).unwrap_or_default();
        for (k, v) in reqs.labels() {
            node_labels.entry(k).or_insert(v);
        }
        add_usage(node_labels.get(labels::NODEPOOL), &status.capacity);
        let requirements = node_labels_requirements(&node_labels, &name);
        let node_taints = nc.spec.taints.iter().filter(|t| !taints::is_known_ephemeral(t)).cloned().collect();
        let mut node =
            make_existing(name, false, node_taints, requirements, status.allocatable.clone(), bound, daemons);
        node.in_flight = true;
        out.push(node);
    }
    // upstream: initialized first, then by name (stable).
    out.sort_by(|a, b| b.initialized.cmp(&a.initialized).then_with(|| a.name.cmp(&b.name)));
    (out, usage, notes, deleting)
}

/// Upstream `StateNode.MarkedForDeletion` as far as objects show it: a deletion timestamp or the
/// `InstanceTerminating` condition.
pub(super) fn marked_for_deletion(nc: &NodeClaim) -> bool {
    nc.metadata.deletion_timestamp.is_some()
        || nc.status.as_ref().is_some_and(|s| {
            crate::api::find_condition(&s.conditions, crate::api::nodeclaim::conditions::INSTANCE_TERMINATING)
                .is_some_and(|c| c.is_true())
        })
}

pub(super) fn fill_zero(target: &mut ResourceList, from: &ResourceList) {
    for (k, v) in from {
        let slot = target.entry(k.clone()).or_insert(Quantity::ZERO);
        if slot.is_zero() {
            *slot = *v;
        }
    }
}

pub(super) fn make_existing(
    name: String,
    initialized: bool,
    node_taints: Vec<Taint>,
    requirements: Requirements,
    allocatable: ResourceList,
    bound: &Bound<'_>,
    daemons: &[Daemon],
) -> ExistingNode {
    let pods = bound.pods.get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
    let requests_of = bound.requests.get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
    let mut used = ResourceList::new();
    let mut host_ports = Vec::new();
    let mut daemon_running = ResourceList::new();
    for (p, requests) in pods.iter().zip(requests_of) {
        resources::add_into(&mut used, requests);
        if crate::pod::daemonset_owner(p).is_some() {
            resources::add_into(&mut daemon_running, requests);
        }
        host_ports.extend(hostports::pod_host_ports(p));
    }
    // Remaining daemon overhead: compatible daemons minus the daemon pods already there, ≥ 0.
    let mut daemon_overhead = ResourceList::new();
    for d in daemons {
        if daemons::runs_on_node(d, &node_taints, &requirements) {
            resources::add_into(&mut daemon_overhead, &d.pod.requests);
        }
    }
    for (k, v) in daemon_overhead.iter_mut() {
        *v = Quantity::max(*v - daemon_running.get(k).copied().unwrap_or(Quantity::ZERO), Quantity::ZERO);
    }
    let available = resources::subtract(&resources::subtract(&allocatable, &used), &daemon_overhead);
    ExistingNode {
        in_flight: false,
        under_consolidate_after: false,
        name,
        initialized,
        taints: node_taints,
        requirements,
        available,
        host_ports,
        placed: Vec::new(),
        volumes: NodeVolumes::default(),
    }
}

impl Round<'_> {
    /// Upstream `ExistingNode.CanAdd`: the node checks, then topology (the domains must be ones
    /// the node carries as labels: existing-node compatibility is strict).
    pub(super) fn node_can_add(
        &self,
        node: &ExistingNode,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
        tolerations: &[k8s_openapi::api::core::v1::Toleration],
    ) -> Result<(), NodeRejection> {
        node.can_add(&self.pods[p], requirements, tolerations)?;
        self.node_topology(node, p, prefs, requirements).map_err(|e| match *e {
            NodeFitFailure::Topology(f) => NodeRejection::Topology(Box::new(self.topology.conflict(&f))),
            NodeFitFailure::Requirements(r) => NodeRejection::Requirements(RequirementConflict::from_reason(&r)),
            NodeFitFailure::Volume(r) => NodeRejection::VolumeTopology(Box::new(self.pods[p].volumes.conflict(&r))),
        })
    }

    /// The volume topology and topology part of [`node_can_add`](Self::node_can_add), without
    /// building the explanation (the placement path only needs yes or no). Upstream
    /// `tryVolumeAlternative`: each volume alternative is checked strictly against the node's and
    /// the pod's requirements, then topology runs with it; the first that passes wins.
    pub(super) fn node_topology(
        &self,
        node: &ExistingNode,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
    ) -> Result<(), Box<NodeFitFailure>> {
        let mut base: Option<Requirements> = None;
        volumes::try_alternatives(
            &self.pods[p].volumes,
            || self.node_domains(&node.requirements, p, prefs, requirements),
            |alternative| {
                let base = base.get_or_insert_with(|| {
                    let mut b = node.requirements.clone();
                    b.add_all(requirements);
                    b
                });
                base.compatible(alternative, AllowUndefined::Nothing)
                    .map_err(|r| Box::new(NodeFitFailure::Volume(r)))?;
                let mut with_volume = base.clone();
                with_volume.add_all(alternative);
                self.node_domains(&with_volume, p, prefs, requirements)
            },
            |e| matches!(**e, NodeFitFailure::Volume(_)),
        )
    }

    /// Topology on an existing node whose requirements are `node_requirements`.
    pub(super) fn node_domains(
        &self,
        node_requirements: &Requirements,
        p: usize,
        prefs: &Preferences,
        requirements: &Requirements,
    ) -> Result<(), Box<NodeFitFailure>> {
        if !self.topology.involves(p) {
            return Ok(());
        }
        let pod = &self.pods[p];
        let domains = self
            .topology
            .add_requirements(p, pod, prefs, &pod.strict_requirements(prefs), (node_requirements, requirements))
            .map_err(|f| Box::new(NodeFitFailure::Topology(*f)))?;
        node_requirements
            .compatible(&domains, AllowUndefined::Nothing)
            .map_err(|e| Box::new(NodeFitFailure::Requirements(e)))
    }
}
