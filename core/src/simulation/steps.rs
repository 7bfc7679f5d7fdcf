//! The Scenario's timed steps (docs/scenario.md): scale, apply, delete, interrupt and
//! unavailableOffering, each carried out at its `at` and logged as `StepApplied` or `StepFailed`.

use crate::manifest::scenario::{CapacityShortage, DeleteAction, Step};
use crate::manifest::Manifests;

use super::events::{Involved, OfferingRef, Reason, RemovalCause};
use super::{Duration, Simulation, Timer};

fn describe(step: &Step) -> String {
    if let Some(s) = &step.scale {
        return format!("scale {} {}/{} to {}", s.kind, s.namespace, s.name, s.replicas);
    }
    if let Some(a) = &step.apply {
        return match a.len() {
            0 => "apply edited objects".into(),
            n => format!("apply {n} object(s)"),
        };
    }
    if let Some(d) = &step.delete {
        return match &d.namespace {
            Some(ns) => format!("delete {} {ns}/{}", d.kind, d.name),
            None => format!("delete {} {}", d.kind, d.name),
        };
    }
    if let Some(i) = &step.interrupt {
        return format!("spot interruption of node {}", i.node);
    }
    if let Some(u) = &step.unavailable_offering {
        return format!("no {} capacity for {} in {}", u.capacity_type, u.instance_type, u.zone);
    }
    "nothing".into()
}

/// Why a step (a Scenario step, or an action taken now) could not be carried out. The simulation
/// logs it as a `StepFailed` event either way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// An `apply` step without objects.
    #[error("no objects to apply")]
    NoObjects,
    /// A step that names no action.
    #[error("the step has no action")]
    NoAction,
    /// The object the step names is not in the cluster (`name` is `namespace/name` for
    /// namespaced kinds).
    #[error("there is no {kind} {name}")]
    NoSuchObject { kind: String, name: String },
    /// The workload a `scale` step names is not in the cluster.
    #[error("{kind} {name} is not in the cluster")]
    NoSuchWorkload { kind: String, name: String },
    /// A `delete` step of a kind steps do not delete.
    #[error("{kind} cannot be deleted by a step")]
    NotDeletable { kind: String },
    /// An interruption notice for a node this simulation did not launch.
    #[error("node {node} is not a Karpenter node this simulation launched")]
    NotLaunched { node: String },
    /// An interruption notice for an on-demand or reserved node.
    #[error("node {node} is not a spot instance; EC2 sends interruption notices to spot instances only")]
    NotSpot { node: String },
}

impl Simulation {
    pub(super) fn run_step(&mut self, i: usize) {
        let Some(step) = self.objects.scenario.as_ref().and_then(|s| s.spec.steps.get(i)).cloned() else { return };
        let objects = self.step_objects.get(&i).cloned();
        let _ = self.carry_out(&step, objects, &format!("step {i}"));
    }

    /// Takes `step`'s action now (its `at` is ignored), as the playground's buttons do; `objects`
    /// are what an `apply` step applies (as loaded from YAML). Logged like a Scenario step; the
    /// controllers react before this returns.
    pub fn act(&mut self, step: &Step, objects: Option<Manifests>) -> Result<(), StepError> {
        let outcome = self.carry_out(step, objects, "action");
        self.settle();
        outcome
    }

    /// Applies `objects` now (an edited NodePool, EC2NodeClass, workload…), as an `apply` step.
    pub fn apply(&mut self, objects: Manifests) -> Result<(), StepError> {
        self.act(&Step { apply: Some(Vec::new()), ..Step::default() }, Some(objects))
    }

    fn carry_out(&mut self, step: &Step, objects: Option<Manifests>, source: &str) -> Result<(), StepError> {
        let action = describe(step);
        let outcome = if let Some(s) = &step.scale {
            self.scale(&s.kind, &s.namespace, &s.name, s.replicas).map(|from| {
                self.emit(Involved::workload(&s.kind, &s.namespace, &s.name), Reason::Scaled { from, to: s.replicas });
            })
        } else if step.apply.is_some() {
            match objects {
                Some(m) => {
                    self.apply_objects(m, source);
                    Ok(())
                }
                None => Err(StepError::NoObjects),
            }
        } else if let Some(d) = &step.delete {
            self.delete_object(d)
        } else if let Some(x) = &step.interrupt {
            self.interrupt(&x.node)
        } else if let Some(u) = &step.unavailable_offering {
            self.capacity_shortage(u);
            Ok(())
        } else {
            Err(StepError::NoAction)
        };
        match &outcome {
            Ok(()) => self.emit(Involved::scenario(), Reason::StepApplied { action }),
            Err(why) => self.emit(Involved::scenario(), Reason::StepFailed { action, why: why.to_string() }),
        }
        // Whatever changed, pending pods get another look (kube-scheduler re-queues them on
        // cluster events, which wakes the provisioner).
        if self.objects.pods.iter().any(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_none())) {
            self.batch.trigger(self.now.0);
        }
        outcome
    }

    fn capacity_shortage(&mut self, u: &CapacityShortage) {
        let until = u
            .duration
            .as_deref()
            .and_then(crate::manifest::scenario::parse_offset)
            .map(|ms| self.now.plus(Duration::millis(ms)));
        let offering = OfferingRef {
            instance_type: u.instance_type.clone(),
            zone: u.zone.clone(),
            capacity_type: u.capacity_type.clone(),
        };
        self.shortages.push((offering, until));
        if let Some(until) = until {
            let index = self.shortages.len() - 1;
            self.schedule_timer(until, Timer::ShortageEnds(index));
        }
    }

    pub(super) fn shortage_ends(&mut self, index: usize) {
        if let Some((o, _)) = self.shortages.get(index) {
            let action = format!("{} capacity for {} in {} is back", o.capacity_type, o.instance_type, o.zone);
            self.emit(Involved::scenario(), Reason::StepApplied { action });
        }
    }

    fn delete_object(&mut self, d: &DeleteAction) -> Result<(), StepError> {
        let ns = d.namespace.clone().unwrap_or_else(|| "default".into());
        match d.kind.as_str() {
            "Node" => self.delete_node(&d.name),
            "NodeClaim" => self.delete_nodeclaim(&d.name),
            "Pod" => {
                if self.pod_index(&ns, &d.name).is_none() {
                    return Err(StepError::NoSuchObject { kind: "Pod".into(), name: format!("{ns}/{}", d.name) });
                }
                self.remove_pod(&ns, &d.name, RemovalCause::Deleted);
                Ok(())
            }
            "Deployment" | "ReplicaSet" | "StatefulSet" => {
                // Deleting the workload: its controller's pods go with it (garbage collection).
                self.scale(&d.kind, &ns, &d.name, 0)?;
                self.reconcile_workloads();
                self.workloads.retain(|w| !(w.kind == d.kind && w.namespace == ns && w.name == d.name));
                let same = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
                    m.name.as_deref() == Some(&d.name) && m.namespace.as_deref().unwrap_or("default") == ns
                };
                self.workload_objects.deployments.retain(|x| !(d.kind == "Deployment" && same(&x.metadata)));
                self.workload_objects.replicasets.retain(|x| !(d.kind == "ReplicaSet" && same(&x.metadata)));
                self.workload_objects.statefulsets.retain(|x| !(d.kind == "StatefulSet" && same(&x.metadata)));
                Ok(())
            }
            "DaemonSet" => {
                let before = self.objects.daemonsets.len();
                self.objects.daemonsets.retain(|x| {
                    !(x.metadata.name.as_deref() == Some(&d.name)
                        && x.metadata.namespace.as_deref().unwrap_or("default") == ns)
                });
                if before == self.objects.daemonsets.len() {
                    return Err(StepError::NoSuchObject { kind: "DaemonSet".into(), name: format!("{ns}/{}", d.name) });
                }
                self.objects.pods.retain(|p| {
                    !(crate::pod::daemonset_owner(p) == Some(d.name.as_str())
                        && p.metadata.namespace.as_deref().unwrap_or("default") == ns)
                });
                self.kube_dirty = true;
                Ok(())
            }
            "NodePool" => {
                let before = self.objects.nodepools.len();
                self.objects.nodepools.retain(|np| np.name() != d.name);
                if before == self.objects.nodepools.len() {
                    return Err(StepError::NoSuchObject { kind: "NodePool".into(), name: d.name.clone() });
                }
                // upstream: a NodePool's NodeClaims are owned by it and deleted with it.
                let owned: Vec<String> =
                    self.machines.iter().filter(|(_, m)| m.nodepool == d.name).map(|(n, _)| n.clone()).collect();
                for nc in owned {
                    self.terminate(&nc, &format!("NodePool {} was deleted", d.name));
                }
                Ok(())
            }
            other => Err(StepError::NotDeletable { kind: other.to_string() }),
        }
    }

    /// An `apply` step: objects replace those of the same kind and name, or are added.
    fn apply_objects(&mut self, mut m: Manifests, source: &str) {
        self.config_epoch += 1;
        for note in m.convert_legacy() {
            self.notes.insert(format!("{source}: {note}"));
        }
        let Manifests {
            nodepools,
            nodeclasses,
            daemonsets,
            pdbs,
            pvcs,
            pvs,
            storageclasses,
            nodes,
            priorityclasses,
            ..
        } = m.clone();
        for np in nodepools {
            match self.objects.nodepools.iter_mut().find(|x| x.name() == np.name()) {
                Some(x) => *x = np,
                None => self.objects.nodepools.push(np),
            }
        }
        for nc in nodeclasses {
            match self.objects.nodeclasses.iter_mut().find(|x| x.name() == nc.name()) {
                Some(x) => *x = nc,
                None => self.objects.nodeclasses.push(nc),
            }
        }
        let key = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            (m.namespace.clone().unwrap_or_else(|| "default".into()), m.name.clone())
        };
        let mut new_daemonsets = false;
        for ds in daemonsets {
            match self.objects.daemonsets.iter_mut().find(|x| key(&x.metadata) == key(&ds.metadata)) {
                Some(x) => *x = ds,
                None => {
                    self.objects.daemonsets.push(ds);
                    new_daemonsets = true;
                }
            }
        }
        for p in pdbs {
            match self.objects.pdbs.iter_mut().find(|x| key(&x.metadata) == key(&p.metadata)) {
                Some(x) => *x = p,
                None => self.objects.pdbs.push(p),
            }
        }
        for c in pvcs {
            match self.objects.pvcs.iter_mut().find(|x| key(&x.metadata) == key(&c.metadata)) {
                Some(x) => *x = c,
                None => self.objects.pvcs.push(c),
            }
        }
        for v in pvs {
            match self.objects.pvs.iter_mut().find(|x| x.metadata.name == v.metadata.name) {
                Some(x) => *x = v,
                None => self.objects.pvs.push(v),
            }
        }
        for s in storageclasses {
            match self.objects.storageclasses.iter_mut().find(|x| x.metadata.name == s.metadata.name) {
                Some(x) => *x = s,
                None => self.objects.storageclasses.push(s),
            }
        }
        for pc in priorityclasses {
            match self.objects.priorityclasses.iter_mut().find(|x| x.metadata.name == pc.metadata.name) {
                Some(x) => *x = pc,
                None => self.objects.priorityclasses.push(pc),
            }
        }
        for n in nodes {
            match self.objects.nodes.iter_mut().find(|x| x.metadata.name == n.metadata.name) {
                Some(x) => *x = n,
                None => self.objects.nodes.push(n),
            }
        }
        self.apply_workloads(&m);
        if new_daemonsets {
            let names: Vec<String> = self.objects.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
            for n in names {
                self.place_daemon_pods(&n);
            }
        }
        self.kube_dirty = true;
    }
}
