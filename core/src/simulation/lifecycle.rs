//! Provisioning rounds and the NodeClaim lifecycle (upstream `provisioner.go`,
//! `nodeclaim/lifecycle/{launch,registration,initialization}.go`), with the AWS provider's
//! launch: CreateFleet tries the NodeClaim's offerings cheapest first; an offering EC2 has no
//! capacity for fails with an insufficient-capacity error, which Karpenter caches as unavailable
//! for 3 minutes (upstream `UnavailableOfferings`), and the instance launches in the next one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::nodeclaim::conditions;
use crate::catalogue::InstanceType;
use crate::disruption::DriftReason;
use crate::labels;
use crate::nodeclaim::lifecycle;
use crate::requirements::Requirements;
use crate::resources::ResourceList;
use crate::scheduling::cloudprovider::{self, Launch};
use crate::scheduling::PlannedNodeClaim;

use super::events::{Involved, OfferingRef, Reason};
use super::{BeforeStart, Machine, RoundSummary, SimTime, Simulation, Timer};

/// What CreateFleet is asked for: the NodeClaim's instance types (in its option order), its
/// requirements and requests.
#[derive(Debug, Clone, Default)]
pub(super) struct LaunchPlan {
    instance_types: Vec<InstanceType>,
    requirements: Requirements,
    requests: ResourceList,
    /// The round's choice (made with the offerings Karpenter knew to be unavailable).
    planned: Option<Launch>,
}

/// Deterministic names for what the API server and EC2 would name at random.
#[derive(Debug, Clone, Default)]
pub(super) struct Names {
    nodeclaims: u64,
    nodes: u64,
    instances: u64,
    pub pods: u64,
}

/// Kubernetes' `generateName` alphabet (no vowels, no confusable digits).
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn mix(mut x: u64) -> u64 {
    // splitmix64: spreads consecutive counters over the suffix space.
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Names {
    /// `<nodepool>-<5 characters>`, as `generateName` does.
    pub fn nodeclaim(&mut self, nodepool: &str) -> String {
        self.nodeclaims += 1;
        let mut h = mix(self.nodeclaims);
        let suffix: String = (0..5)
            .map(|_| {
                let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
                h /= ALPHABET.len() as u64;
                c
            })
            .collect();
        format!("{nodepool}-{suffix}")
    }

    /// `ip-10-0-<a>-<b>`: the first node is `ip-10-0-1-1`.
    pub fn node(&mut self) -> String {
        self.nodes += 1;
        let k = self.nodes - 1;
        format!("ip-10-0-{}-{}", 1 + k / 254, 1 + k % 254)
    }

    /// `aws:///<zone>/i-<17 hex digits>`.
    pub fn provider_id(&mut self, zone: &str) -> String {
        self.instances += 1;
        format!("aws:///{zone}/i-0{:016x}", mix(self.instances + 1_000_003))
    }

    pub fn uid(&mut self) -> String {
        self.pods += 1;
        format!("00000000-0000-4000-8000-{:012x}", self.pods)
    }
}

fn offering_of(l: &Launch) -> OfferingRef {
    OfferingRef { instance_type: l.instance_type.clone(), zone: l.zone.clone(), capacity_type: l.capacity_type.clone() }
}

pub(super) fn k8s_resources(list: &ResourceList) -> BTreeMap<String, K8sQuantity> {
    list.iter().map(|(k, v)| (k.clone(), K8sQuantity(v.to_string()))).collect()
}

/// The taint a Node carries until its kubelet reports Ready.
pub(super) fn not_ready_taint() -> Taint {
    Taint { key: "node.kubernetes.io/not-ready".into(), value: None, effect: "NoSchedule".into(), time_added: None }
}

impl Simulation {
    /// Whether a round would have pods to place: a pending pod, or a pod bound to a node that is
    /// deleting or tainted `karpenter.sh/disrupted`.
    fn round_has_pods(&self) -> bool {
        let deleting: std::collections::BTreeSet<&str> = self
            .objects
            .nodes
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some() || crate::scheduling::taints::is_disrupted(n))
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        self.objects.pods.iter().any(|p| match p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            None => true,
            Some(node) => deleting.contains(node),
        })
    }

    /// One provisioning round (upstream `Provisioner.Schedule` + `CreateNodeClaims`).
    pub(super) fn provision(&mut self) {
        // upstream: a round without pending pods or pods on deleting nodes schedules nothing.
        if !self.round_has_pods() {
            return;
        }
        let prepared = match crate::state::input_from_manifests(&self.objects, self.catalogue, Some(&self.region)) {
            Ok(p) => p,
            Err(e) => {
                self.notes.insert(format!("a provisioning round at {} could not run: {e}", self.now));
                return;
            }
        };
        self.notes.extend(prepared.notes);
        let mut input = prepared.input;
        input.unavailable_offerings = self.known_unavailable();
        input.options.now = Some(self.clock.epoch_seconds(self.now));
        let results = crate::scheduling::schedule(&input);
        for note in &results.notes {
            self.notes.insert(note.clone());
        }
        let mut summary = RoundSummary {
            at: self.now,
            pending_pods: results.nodeclaims.iter().map(|c| c.pods.len()).sum::<usize>()
                + results.existing_nodes.iter().map(|e| e.pods.len()).sum::<usize>()
                + results.unschedulable.len()
                + results.deferred.len(),
            nodeclaims_created: Vec::new(),
            nominated: 0,
            unschedulable: results.unschedulable.len(),
        };
        let nominated_until = self.now.plus(super::disruption::NOMINATION);
        for placement in &results.existing_nodes {
            for m in self
                .machines
                .iter_mut()
                .filter(|(n, m)| **n == placement.name || m.node.as_deref() == Some(&placement.name))
            {
                m.1.nominated_until = Some(nominated_until);
            }
            let target = match self.objects.nodes.iter().any(|n| n.metadata.name.as_deref() == Some(&placement.name)) {
                true => Involved::node(&placement.name),
                false => Involved::nodeclaim(&placement.name),
            };
            for pod in &placement.pods {
                summary.nominated += 1;
                self.emit(Involved::pod(&pod.namespace, &pod.name), Reason::Nominated { target: target.clone() });
            }
        }
        for planned in &results.nodeclaims {
            let Some(np_input) = input.nodepools.iter().find(|n| n.nodepool.name() == planned.nodepool) else {
                continue;
            };
            let name = self.create_nodeclaim(planned, &np_input.nodepool, &np_input.instance_types);
            for pod in &planned.pods {
                summary.nominated += 1;
                self.emit(
                    Involved::pod(&pod.namespace, &pod.name),
                    Reason::Nominated { target: Involved::nodeclaim(&name) },
                );
            }
            summary.nodeclaims_created.push(name);
        }
        for u in &results.unschedulable {
            self.emit(
                Involved::pod(&u.pod.namespace, &u.pod.name),
                Reason::FailedScheduling { headline: u.explanation.headline() },
            );
        }
        self.rounds.push(summary);
    }

    /// Creates the NodeClaim a round planned (upstream `NodeClaim.ToNodeClaim` + create), and
    /// asks CreateFleet for it.
    fn create_nodeclaim(
        &mut self,
        planned: &PlannedNodeClaim,
        nodepool: &crate::api::nodepool::NodePool,
        instance_types: &Arc<Vec<InstanceType>>,
    ) -> String {
        let name = self.names.nodeclaim(&planned.nodepool);
        let nodeclass = self.objects.nodeclass_for(nodepool).map(|c| c.spec.clone()).unwrap_or_default();
        let mut nc = crate::provisioning::nodeclaim_for(planned, nodepool, &nodeclass);
        // What the API server fills in for `generateName`.
        nc.metadata.generate_name = None;
        nc.metadata.name = Some(name.clone());
        nc.metadata.creation_timestamp = Some(self.clock.time(self.now));
        nc.metadata.uid = Some(format!("nodeclaim-{name}"));
        let by_name: BTreeMap<&str, &InstanceType> = instance_types.iter().map(|it| (it.name.as_str(), it)).collect();
        let plan = LaunchPlan {
            instance_types: planned
                .instance_type_options
                .iter()
                .filter_map(|n| by_name.get(n.as_str()).map(|it| (*it).clone()))
                .collect(),
            requirements: Requirements::from_node_selector_requirements(&planned.requirements).unwrap_or_default(),
            requests: planned.requests.clone(),
            planned: planned.launch.clone(),
        };
        self.emit(
            Involved::nodeclaim(&name),
            Reason::NodeClaimCreated {
                nodepool: planned.nodepool.clone(),
                pods: planned.pods.len(),
                instance_types: planned.instance_type_options.len(),
                cheapest: planned.instance_type_options.first().cloned(),
            },
        );
        self.objects.nodeclaims.push(nc);
        self.machines.insert(
            name.clone(),
            Machine {
                nodepool: planned.nodepool.clone(),
                created: self.now,
                launch: None,
                launched: None,
                node: None,
                initialized: None,
                terminating: None,
                reclaim_at: None,
                plan,
                last_pod_event: None,
                nominated_until: None,
                drifted: None,
                disrupting: false,
                drift_checked: None,
                before_start: None,
            },
        );
        self.schedule_timer(self.now.plus(self.timings.launch), Timer::Launch(name.clone()));
        self.schedule_timer(self.now.plus(super::LAUNCH_TIMEOUT), Timer::LaunchTimeout(name.clone()));
        if let Some(after) = nodepool.spec.template.spec.expire_after.as_seconds() {
            self.schedule_timer(self.now.plus(super::Duration::secs(after)), Timer::Expire(name.clone()));
        }
        name
    }

    /// Creates a NodeClaim a disruption command planned (a replacement).
    pub(super) fn create_planned(&mut self, planned: &PlannedNodeClaim) -> Option<String> {
        let np = self.objects.nodepools.iter().find(|np| np.name() == planned.nodepool)?.clone();
        let class = self.objects.nodeclass_for(&np);
        let subnets = class.and_then(|c| c.status.as_ref()).map_or(&[][..], |s| s.subnets.as_slice());
        let spec = class.map(|c| c.spec.clone()).unwrap_or_default();
        let types = self.catalogue.instance_types_in_subnets(&self.region, &spec, subnets).ok()?;
        Some(self.create_nodeclaim(planned, &np, &types))
    }

    fn short_of_capacity(&self, o: &OfferingRef) -> bool {
        self.shortages.iter().any(|(s, until)| s == o && until.is_none_or(|u| u > self.now))
    }

    /// CreateFleet's choice among the plan's offerings, none of `excluded`.
    fn choose_launch(&self, plan: &LaunchPlan, excluded: &BTreeSet<OfferingRef>) -> Option<Launch> {
        let types: Vec<InstanceType> = plan
            .instance_types
            .iter()
            .map(|it| {
                let mut it = it.clone();
                for o in &mut it.offerings {
                    let key = OfferingRef {
                        instance_type: it.name.clone(),
                        zone: o.zone.clone(),
                        capacity_type: o.capacity_type.as_str().to_string(),
                    };
                    if excluded.contains(&key) {
                        o.available = false;
                    }
                }
                it
            })
            .collect();
        cloudprovider::launch_among(&plan.requirements, &plan.requests, &types)
    }

    /// CreateFleet answers (upstream `launch.go`): the instance, or insufficient capacity.
    pub(super) fn launch(&mut self, name: &str) {
        let Some(m) = self.machines.get(name) else { return };
        if m.terminating.is_some() {
            return;
        }
        let plan = m.plan.clone();
        let mut excluded: BTreeSet<OfferingRef> = BTreeSet::new();
        let mut candidate = plan.planned.clone().or_else(|| self.choose_launch(&plan, &excluded));
        let mut tried = 0;
        while let Some(l) = candidate.clone() {
            let offering = offering_of(&l);
            if !self.short_of_capacity(&offering) {
                break;
            }
            tried += 1;
            let until = self.now.plus(self.timings.unavailable_offering_ttl);
            self.ice_cache.insert(offering.clone(), until);
            self.emit(
                Involved::nodeclaim(name),
                Reason::InsufficientCapacityError { offering: offering.clone(), until },
            );
            excluded.insert(offering);
            candidate = self.choose_launch(&plan, &excluded);
        }
        let Some(launch) = candidate else {
            // upstream: an InsufficientCapacityError deletes the NodeClaim; its pods are
            // provisioned again.
            self.emit(Involved::nodeclaim(name), Reason::LaunchFailed { tried: tried.max(1) });
            self.machines.remove(name);
            self.objects.nodeclaims.retain(|nc| nc.name() != name);
            self.batch.trigger(self.now.0);
            return;
        };
        let provider_id = self.names.provider_id(&launch.zone);
        let it = plan.instance_types.iter().find(|it| it.name == launch.instance_type);
        let instance = lifecycle::Instance::of_launch(&launch, it, provider_id);
        let at = self.clock.rfc3339(self.now);
        if let Some(nc) = self.objects.nodeclaims.iter_mut().find(|nc| nc.name() == name) {
            *nc = lifecycle::launched(nc, &instance, &at);
        }
        self.emit(
            Involved::nodeclaim(name),
            Reason::Launched {
                offering: offering_of(&launch),
                price: launch.price,
                price_synthetic: launch.price_synthetic,
            },
        );
        if let Some(m) = self.machines.get_mut(name) {
            m.launch = Some(launch);
            m.launched = Some(self.now);
        }
        self.schedule_timer(self.now.plus(self.timings.registration), Timer::Register(name.to_string()));
        self.schedule_timer(self.now.plus(super::REGISTRATION_TIMEOUT), Timer::RegistrationTimeout(name.to_string()));
    }

    /// upstream `liveness.go` ([`lifecycle::liveness`]): a NodeClaim that has not launched, or not
    /// registered, in time is deleted; its pods are provisioned again.
    pub(super) fn liveness(&mut self, name: &str) {
        let Some(m) = self.machines.get(name) else { return };
        if m.terminating.is_some() {
            return;
        }
        let Some(nc) = self.objects.nodeclaims.iter().find(|nc| nc.name() == name) else { return };
        let lifecycle::Liveness::TimedOut(timeout) = lifecycle::liveness(nc, self.clock.epoch_seconds(self.now)) else {
            return;
        };
        let after = super::Duration::secs(timeout.after_seconds().unsigned_abs());
        let condition = timeout.condition();
        self.emit(
            Involved::nodeclaim(name),
            Reason::LivenessTimeout { condition: condition.into(), after: after.to_string() },
        );
        self.terminate(name, &format!("not {condition} after {after} (liveness)"));
    }

    /// The Node joins: the kubelet registers it as the instance's bootstrap configures it (the
    /// NodeClaim's labels, taints and startup taints, `karpenter.sh/unregistered:NoExecute`, not
    /// Ready yet), and Karpenter registers it with its NodeClaim ([`lifecycle::register`]).
    /// DaemonSet pods follow.
    pub(super) fn register(&mut self, name: &str) {
        let Some(m) = self.machines.get(name) else { return };
        if m.terminating.is_some() || m.node.is_some() {
            return;
        }
        let Some(nc) = self.objects.nodeclaims.iter().find(|nc| nc.name() == name).cloned() else { return };
        let status = nc.status.clone().unwrap_or_default();
        let node_name = self.names.node();
        let mut node_labels = nc.metadata.labels.clone().unwrap_or_default();
        node_labels.insert(labels::HOSTNAME.into(), node_name.clone());
        node_labels.insert(labels::TOPOLOGY_REGION.into(), self.region.clone());
        let mut taints = nc.spec.taints.clone();
        taints.extend(nc.spec.startup_taints.iter().cloned());
        taints.push(lifecycle::unregistered_taint());
        taints.push(not_ready_taint());
        let joined = Node {
            metadata: ObjectMeta {
                name: Some(node_name.clone()),
                labels: Some(node_labels),
                creation_timestamp: Some(self.clock.time(self.now)),
                uid: Some(format!("node-{node_name}")),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(status.provider_id.clone()),
                taints: Some(taints),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(k8s_resources(&status.capacity)),
                allocatable: Some(k8s_resources(&status.allocatable)),
                ..Default::default()
            }),
        };
        let registration = lifecycle::register(&nc, &joined, &self.clock.rfc3339(self.now));
        self.objects.nodes.push(registration.node);
        if let Some(slot) = self.objects.nodeclaims.iter_mut().find(|nc| nc.name() == name) {
            *slot = registration.nodeclaim;
        }
        if let Some(m) = self.machines.get_mut(name) {
            m.node = Some(node_name.clone());
        }
        self.emit(Involved::nodeclaim(name), Reason::Registered { node: node_name.clone() });
        self.place_daemon_pods(&node_name);
        self.schedule_timer(self.now.plus(self.timings.initialization), Timer::Initialize(name.to_string()));
    }

    /// The kubelet reports Ready, the node's daemons remove its startup taints, and Karpenter
    /// initializes it ([`lifecycle::initialize`]): `karpenter.sh/initialized=true`; kube-scheduler
    /// binds the pods waiting for it.
    pub(super) fn initialize(&mut self, name: &str) {
        let Some(m) = self.machines.get(name) else { return };
        if m.terminating.is_some() {
            return;
        }
        let Some(node_name) = m.node.clone() else { return };
        let Some(nc) = self.objects.nodeclaims.iter().find(|nc| nc.name() == name) else { return };
        let Some(slot) = self.objects.nodes.iter().position(|n| n.metadata.name.as_deref() == Some(&node_name)) else {
            return;
        };
        let mut node = self.objects.nodes[slot].clone();
        if let Some(taints) = node.spec.as_mut().and_then(|s| s.taints.as_mut()) {
            taints.retain(|t| {
                !crate::scheduling::taints::is_known_ephemeral(t)
                    && !nc.spec.startup_taints.iter().any(|s| s.key == t.key && s.effect == t.effect)
            });
        }
        let at = self.clock.rfc3339(self.now);
        node.status.get_or_insert_with(Default::default).conditions = Some(vec![NodeCondition {
            last_heartbeat_time: None,
            last_transition_time: Some(self.clock.time(self.now)),
            message: Some("kubelet is posting ready status".into()),
            reason: Some("KubeletReady".into()),
            status: "True".into(),
            type_: "Ready".into(),
        }]);
        let (nc, node) = match lifecycle::initialize(nc, &node, &at) {
            Ok(done) => done,
            Err(why) => {
                self.notes.insert(format!("NodeClaim {name} did not initialize: {why}"));
                return;
            }
        };
        self.objects.nodes[slot] = node;
        if let Some(slot) = self.objects.nodeclaims.iter_mut().find(|c| c.name() == name) {
            *slot = nc;
        }
        if let Some(m) = self.machines.get_mut(name) {
            m.initialized = Some(self.now);
        }
        self.emit(Involved::nodeclaim(name), Reason::Initialized { node: node_name });
        self.kube_dirty = true;
    }

    /// NodeClaims of the input: launched ones without a Node register after the registration
    /// latency; those with a Node are running capacity.
    pub(super) fn adopt_existing_capacity(&mut self) {
        let claims = self.objects.nodeclaims.clone();
        let start = self.clock.start_epoch;
        let epoch_of =
            |text: &Option<String>| text.as_deref().and_then(crate::api::time::parse_time).map(|t| t.min(start));
        for (index, nc) in claims.iter().enumerate() {
            let name = nc.name().to_string();
            let status = nc.status.clone().unwrap_or_default();
            let labels = nc.metadata.labels.clone().unwrap_or_default();
            let node = self
                .objects
                .nodes
                .iter()
                .find(|n| {
                    (!status.node_name.is_empty() && n.metadata.name.as_deref() == Some(&status.node_name))
                        || (!status.provider_id.is_empty()
                            && n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(&status.provider_id))
                })
                .and_then(|n| n.metadata.name.clone());
            if status.provider_id.is_empty() && status.allocatable.is_empty() {
                // Not launched: upstream would launch it; we leave it to the rounds (noted by them).
                continue;
            }
            let launch = crate::scheduling::cloudprovider::launch_from_labels(self.catalogue, &self.region, &labels);
            let initialized = node.is_some();
            let condition = |kind: &str| status.conditions.iter().find(|c| c.type_ == kind && c.status == "True");
            let drifted = condition(conditions::DRIFTED)
                .map(|c| (DriftReason::of_condition_reason(c.reason.as_deref()), epoch_of(&c.last_transition_time)));
            let before_start = BeforeStart {
                created: nc.metadata.creation_timestamp.as_ref().map(|t| t.0.as_second().min(start)),
                initialized: condition(conditions::INITIALIZED).and_then(|c| epoch_of(&c.last_transition_time)),
                last_pod_event: epoch_of(&status.last_pod_event_time),
                drifted_since: drifted.and_then(|(_, since)| since),
                drifted_by_karpenter: drifted.is_some(),
            };
            // The drift stamps become this simulation's own hashes of the NodePool and
            // EC2NodeClass as they are now: later edits (apply steps, `whatif`) drift it by
            // comparison with them; drift before the start is the Drifted condition above.
            let pool = labels.get(labels::NODEPOOL).cloned().unwrap_or_default();
            if let Some(np) = self.objects.nodepools.iter().find(|np| np.name() == pool) {
                let class = self.objects.nodeclass_for(np).map(|c| c.spec.clone()).unwrap_or_default();
                let stamps = crate::disruption::drift::stamps(np, &class);
                if let Some(nc) = self.objects.nodeclaims.get_mut(index) {
                    nc.metadata.annotations.get_or_insert_with(Default::default).extend(stamps);
                }
            }
            // upstream: a NodeClaim expires expireAfter after its creation, whenever that was.
            if let Some(after) = nc.spec.expire_after.as_seconds() {
                let created = before_start.created.unwrap_or(start);
                let due = (created + after as i64 - start).max(0) as u64;
                self.schedule_timer(SimTime::from_secs(due), Timer::Expire(name.clone()));
            }
            self.machines.insert(
                name.clone(),
                Machine {
                    nodepool: pool,
                    created: SimTime::ZERO,
                    launch,
                    launched: Some(SimTime::ZERO),
                    node: node.clone(),
                    initialized: initialized.then_some(SimTime::ZERO),
                    terminating: None,
                    reclaim_at: None,
                    plan: LaunchPlan::default(),
                    last_pod_event: None,
                    nominated_until: None,
                    drifted: drifted.map(|(reason, _)| (reason, SimTime::ZERO)),
                    disrupting: false,
                    drift_checked: None,
                    before_start: Some(before_start),
                },
            );
            if node.is_none() {
                self.schedule_timer(SimTime::ZERO.plus(self.timings.registration), Timer::Register(name));
            }
        }
    }
}
