//! Reading what users write: multi-document YAML or JSON (also `List`s), any mix of Karpenter v1
//! objects, legacy Karpenter objects (converted on request, see [`crate::conversion`]) and the
//! Kubernetes objects the simulation uses.
//!
//! Every problem is reported with the document number, the object (kind/name), the field path and
//! the line and column it was written on. Problems are collected, not stopped at the first one.
//! Unknown fields are errors, as `kubectl apply` (strict field validation) makes them; unknown
//! kinds are skipped with a warning, never silently.

mod api_resources;
mod autoscaling;
mod eksctl;
mod live;
pub mod scenario;
mod snapshot;
pub(crate) mod workloads;
pub(crate) mod yaml;

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass, VolumeAttachment};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::api::clusterautoscaler::{self, NodeGroup};
use crate::api::ec2nodeclass::EC2NodeClass;
use crate::api::nodeclaim::NodeClaim;
use crate::api::nodepool::NodePool;
use crate::api::validation::Validate;
use crate::conversion::{self, ConversionNote, LegacyObject};
pub use api_resources::{api_documents, ListedResource, LISTED_RESOURCES};
pub use live::{load_from_api_server_skipping, HeldDecision, LiveLoad, LiveObject, Skipped, ViewGap};
pub use snapshot::{write_snapshot, SnapshotError, WrittenSnapshot};
pub use yaml::Position;

/// Where an object came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Origin {
    /// 1-based document number in the input.
    pub document: usize,
    /// The index inside a `List` document, if the object was a list item.
    pub item: Option<usize>,
    pub position: Position,
}

/// Kind and name of an object, as errors name it (`NodePool/default`, `Pod/apps/inflate-0`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct ObjectRef {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind, ns, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

/// What kind of problem a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ProblemKind {
    /// The text is not well-formed YAML/JSON.
    Syntax,
    /// The document has no usable `apiVersion`/`kind`.
    MissingTypeInfo,
    /// A field has the wrong type or an invalid value for its type (bad quantity, unknown enum value…).
    InvalidValue,
    /// A field the object's schema does not have.
    UnknownField,
    /// A validation rule of the API (pattern, CEL rule, runtime validation) fails.
    Validation,
    /// A kind carpentry does not use; the document is skipped.
    UnknownKind,
}

/// One located problem in the input. Errors and warnings share this shape.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    pub kind: ProblemKind,
    pub document: usize,
    pub object: Option<ObjectRef>,
    /// Field path inside the object (`spec.template.spec.requirements[0].operator`).
    pub field: Option<String>,
    pub position: Position,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.document)?;
        if let Some(object) = &self.object {
            write!(f, " ({object})")?;
        }
        if let Some(field) = &self.field {
            write!(f, ", field {field}")?;
        }
        write!(f, ", {}: {}", self.position, self.message)
    }
}

/// The input could not be loaded; every problem found is listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LoadError {
    pub problems: Vec<Problem>,
    pub warnings: Vec<Problem>,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        writeln!(f, "{n} problem{} in the input:", if n == 1 { "" } else { "s" })?;
        for p in &self.problems {
            writeln!(f, "  {p}")?;
        }
        Ok(())
    }
}

/// Everything read from the input, grouped by kind, in input order.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    pub nodepools: Vec<NodePool>,
    pub nodeclaims: Vec<NodeClaim>,
    pub nodeclasses: Vec<EC2NodeClass>,
    /// Legacy Karpenter objects (v1beta1, v1alpha5), not yet converted; see [`Manifests::convert_legacy`].
    pub legacy: Vec<(ObjectRef, LegacyObject)>,
    pub pods: Vec<Pod>,
    pub nodes: Vec<Node>,
    pub deployments: Vec<Deployment>,
    pub replicasets: Vec<ReplicaSet>,
    pub statefulsets: Vec<StatefulSet>,
    pub jobs: Vec<Job>,
    pub daemonsets: Vec<DaemonSet>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub pvs: Vec<PersistentVolume>,
    pub storageclasses: Vec<StorageClass>,
    pub csinodes: Vec<CSINode>,
    /// Which node each attached volume is on: node termination waits for those of drained pods
    /// to go before it deletes the instance.
    pub volumeattachments: Vec<VolumeAttachment>,
    pub priorityclasses: Vec<PriorityClass>,
    pub namespaces: Vec<Namespace>,
    /// `carpentry.dev/v1alpha1 NodeGroup`s: the Auto Scaling groups Cluster Autoscaler scales in
    /// the comparison.
    pub nodegroups: Vec<NodeGroup>,
    /// The EKS cluster the node groups belong to, where the input names it (an eksctl
    /// ClusterConfig's `metadata.name`, or the groups' cluster tags).
    pub cluster_name: Option<String>,
    /// The `carpentry.dev/v1alpha1 Scenario` document, if any (at most one).
    pub scenario: Option<scenario::Scenario>,
    /// The objects of each `apply` step of the Scenario, loaded (and located) like the rest, by
    /// step index.
    pub step_objects: BTreeMap<usize, Manifests>,
    /// `carpentry.dev/v1alpha1 Expectations` documents of the scenario corpus, untyped.
    pub expectations: Vec<Value>,
    /// Where each object was written.
    pub origins: BTreeMap<ObjectRef, Origin>,
    /// Skipped documents and other notes that did not stop loading.
    pub warnings: Vec<Problem>,
}

/// Why two inputs cannot be combined into one (see [`Manifests::merge`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("a second Scenario document; an input has at most one")]
    SecondScenario,
    #[error("{object} is also defined in an earlier file (document {}, {})", .first.document, .first.position)]
    Duplicate { object: ObjectRef, first: Origin },
}

impl Manifests {
    /// Appends another input (several `-f` files form one input). Like a single file, the
    /// combination may hold each object once and at most one Scenario.
    pub fn merge(&mut self, other: Manifests) -> Result<(), MergeError> {
        // The first input: nothing to combine (and a large snapshot's origins need no re-insert).
        if self.is_empty() {
            *self = other;
            return Ok(());
        }
        // Destructured exhaustively so that a new kind of object cannot be dropped silently.
        let Manifests {
            nodepools,
            nodeclaims,
            nodeclasses,
            legacy,
            pods,
            nodes,
            deployments,
            replicasets,
            statefulsets,
            jobs,
            daemonsets,
            pdbs,
            pvcs,
            pvs,
            storageclasses,
            csinodes,
            volumeattachments,
            priorityclasses,
            namespaces,
            nodegroups,
            cluster_name,
            scenario,
            step_objects,
            expectations,
            origins,
            warnings,
        } = other;
        if scenario.is_some() && self.scenario.is_some() {
            return Err(MergeError::SecondScenario);
        }
        if let Some((object, _)) = origins.iter().find(|(k, _)| self.origins.contains_key(*k)) {
            return Err(MergeError::Duplicate { object: object.clone(), first: self.origins[object].clone() });
        }
        self.scenario = self.scenario.take().or(scenario);
        // Only the file holding the Scenario has steps.
        self.step_objects.extend(step_objects);
        self.nodepools.extend(nodepools);
        self.nodeclaims.extend(nodeclaims);
        self.nodeclasses.extend(nodeclasses);
        self.legacy.extend(legacy);
        self.pods.extend(pods);
        self.nodes.extend(nodes);
        self.deployments.extend(deployments);
        self.replicasets.extend(replicasets);
        self.statefulsets.extend(statefulsets);
        self.jobs.extend(jobs);
        self.daemonsets.extend(daemonsets);
        self.pdbs.extend(pdbs);
        self.pvcs.extend(pvcs);
        self.pvs.extend(pvs);
        self.storageclasses.extend(storageclasses);
        self.csinodes.extend(csinodes);
        self.volumeattachments.extend(volumeattachments);
        self.priorityclasses.extend(priorityclasses);
        self.namespaces.extend(namespaces);
        self.nodegroups.extend(nodegroups);
        self.cluster_name = self.cluster_name.take().or(cluster_name);
        self.expectations.extend(expectations);
        self.origins.extend(origins);
        self.warnings.extend(warnings);
        Ok(())
    }

    /// Appends copies of `other`'s objects, their origins moved to `document` (a live read
    /// assembled from objects loaded one at a time, see [`LiveObject`]). Scenarios, steps,
    /// expectations and warnings are not a live read's and are not copied.
    fn extend_cloned(&mut self, other: &Manifests, document: usize) {
        // Destructured exhaustively so that a new kind of object cannot be dropped silently.
        let Manifests {
            nodepools,
            nodeclaims,
            nodeclasses,
            legacy,
            pods,
            nodes,
            deployments,
            replicasets,
            statefulsets,
            jobs,
            daemonsets,
            pdbs,
            pvcs,
            pvs,
            storageclasses,
            csinodes,
            volumeattachments,
            priorityclasses,
            namespaces,
            // Not a live cluster's: CA's groups are the scenario's.
            nodegroups: _,
            cluster_name: _,
            scenario: _,
            step_objects: _,
            expectations: _,
            origins,
            warnings: _,
        } = other;
        self.nodepools.extend_from_slice(nodepools);
        self.nodeclaims.extend_from_slice(nodeclaims);
        self.nodeclasses.extend_from_slice(nodeclasses);
        self.legacy.extend_from_slice(legacy);
        self.pods.extend_from_slice(pods);
        self.nodes.extend_from_slice(nodes);
        self.deployments.extend_from_slice(deployments);
        self.replicasets.extend_from_slice(replicasets);
        self.statefulsets.extend_from_slice(statefulsets);
        self.jobs.extend_from_slice(jobs);
        self.daemonsets.extend_from_slice(daemonsets);
        self.pdbs.extend_from_slice(pdbs);
        self.pvcs.extend_from_slice(pvcs);
        self.pvs.extend_from_slice(pvs);
        self.storageclasses.extend_from_slice(storageclasses);
        self.csinodes.extend_from_slice(csinodes);
        self.volumeattachments.extend_from_slice(volumeattachments);
        self.priorityclasses.extend_from_slice(priorityclasses);
        self.namespaces.extend_from_slice(namespaces);
        self.origins.extend(origins.iter().map(|(o, origin)| (o.clone(), Origin { document, ..origin.clone() })));
    }

    /// Nothing at all: no object, Scenario, step, expectation or warning.
    pub fn is_empty(&self) -> bool {
        // Destructured exhaustively so that a new kind of object is not forgotten here.
        let Manifests {
            nodepools,
            nodeclaims,
            nodeclasses,
            legacy,
            pods,
            nodes,
            deployments,
            replicasets,
            statefulsets,
            jobs,
            daemonsets,
            pdbs,
            pvcs,
            pvs,
            storageclasses,
            csinodes,
            volumeattachments,
            priorityclasses,
            namespaces,
            nodegroups,
            cluster_name,
            scenario,
            step_objects,
            expectations,
            origins,
            warnings,
        } = self;
        nodepools.is_empty()
            && nodeclaims.is_empty()
            && nodeclasses.is_empty()
            && legacy.is_empty()
            && pods.is_empty()
            && nodes.is_empty()
            && deployments.is_empty()
            && replicasets.is_empty()
            && statefulsets.is_empty()
            && jobs.is_empty()
            && daemonsets.is_empty()
            && pdbs.is_empty()
            && pvcs.is_empty()
            && pvs.is_empty()
            && storageclasses.is_empty()
            && csinodes.is_empty()
            && volumeattachments.is_empty()
            && priorityclasses.is_empty()
            && namespaces.is_empty()
            && nodegroups.is_empty()
            && cluster_name.is_none()
            && scenario.is_none()
            && step_objects.is_empty()
            && expectations.is_empty()
            && origins.is_empty()
            && warnings.is_empty()
    }

    /// Converts the legacy objects to v1 and adds them to the v1 lists; returns the conversion
    /// notes (one per field whose meaning changed).
    pub fn convert_legacy(&mut self) -> Vec<ConversionNote> {
        if self.legacy.is_empty() {
            return Vec::new();
        }
        let legacy = std::mem::take(&mut self.legacy);
        let converted = conversion::convert(legacy.into_iter().map(|(_, o)| o).collect());
        self.nodepools.extend(converted.nodepools);
        self.nodeclasses.extend(converted.nodeclasses);
        converted.notes
    }

    /// Standalone pods followed by the pods of every Deployment, ReplicaSet, StatefulSet and Job,
    /// in input order (see `workloads`).
    pub fn all_pods(&self) -> Vec<Pod> {
        let mut pods = self.pods.clone();
        pods.extend(self.deployments.iter().flat_map(workloads::deployment_pods));
        pods.extend(self.replicasets.iter().flat_map(workloads::replicaset_pods));
        pods.extend(self.statefulsets.iter().flat_map(workloads::statefulset_pods));
        pods.extend(self.jobs.iter().flat_map(workloads::job_pods));
        pods
    }

    /// The NodeClass a NodePool refers to, if it was part of the input.
    pub fn nodeclass_for(&self, nodepool: &NodePool) -> Option<&EC2NodeClass> {
        self.nodeclass_named(&nodepool.spec.template.spec.node_class_ref.name)
    }

    /// The NodeClass a NodeClaim was made with (its own `spec.nodeClassRef`, upstream
    /// `resolveNodeClassFromNodeClaim`): a NodePool edited since points elsewhere, and what is
    /// launched for the NodeClaim must not follow it.
    pub fn nodeclass_of(&self, nodeclaim: &crate::api::NodeClaim) -> Option<&EC2NodeClass> {
        self.nodeclass_named(&nodeclaim.spec.node_class_ref.name)
    }

    fn nodeclass_named(&self, name: &str) -> Option<&EC2NodeClass> {
        self.nodeclasses.iter().find(|nc| nc.metadata.name.as_deref() == Some(name))
    }
}

/// Loads every document of `text`. Fails with every problem found if any document is invalid.
pub fn load(text: &str) -> Result<Manifests, LoadError> {
    load_with(text, false)
}

/// Loads objects as an API server returns them (a live read): a field of a Kubernetes kind that
/// Kubernetes 1.36 does not have (a newer server's) is a warning and is ignored, as kubectl
/// ignores it; Karpenter's kinds stay strict (carpentry reproduces v1.14.1), and so does
/// everything else.
pub fn load_from_api_server(text: &str) -> Result<Manifests, LoadError> {
    load_with(text, true)
}

fn load_with(text: &str, newer_kubernetes_fields_allowed: bool) -> Result<Manifests, LoadError> {
    let mut loader = Loader { newer_kubernetes_fields_allowed, ..Loader::default() };
    // Each document is loaded as soon as it is parsed, and its values and positions dropped.
    if let Err(e) = yaml::each_document(text, &mut |doc| loader.document(&doc)) {
        return Err(syntax_error(e));
    }
    if loader.problems.is_empty() {
        let mut manifests = loader.manifests;
        manifests.warnings = loader.warnings;
        Ok(manifests)
    } else {
        Err(LoadError { problems: loader.problems, warnings: loader.warnings })
    }
}

/// Text that is not YAML: one problem, and nothing loaded.
fn syntax_error(e: yaml::SyntaxError) -> LoadError {
    LoadError {
        problems: vec![Problem {
            kind: ProblemKind::Syntax,
            document: e.document.max(1),
            object: None,
            field: None,
            position: e.position,
            message: e.message,
        }],
        warnings: Vec::new(),
    }
}

#[derive(Default)]
struct Loader {
    manifests: Manifests,
    problems: Vec<Problem>,
    warnings: Vec<Problem>,
    /// See [`load_from_api_server`].
    newer_kubernetes_fields_allowed: bool,
    /// Documents left out whole (a live read's second pass, see [`load_from_api_server_skipping`]).
    skip: std::collections::BTreeSet<usize>,
    /// A live read's bookkeeping: NodePools that decode but fail validation are kept here (their
    /// status is still written) and documents of Pods bound to a node are noted.
    live: Option<live::Notes>,
}

/// The object being decoded: its document, list item, identity and path prefix.
struct Ctx<'a> {
    doc: &'a yaml::Document,
    item: Option<usize>,
    prefix: String,
    object: Option<ObjectRef>,
}

impl Ctx<'_> {
    fn problem(&self, kind: ProblemKind, field: Option<&str>, message: String) -> Problem {
        let full = match field {
            Some(f) if !f.is_empty() && f != "." => yaml::child_key(&self.prefix, f),
            _ => self.prefix.clone(),
        };
        Problem {
            kind,
            document: self.doc.index,
            object: self.object.clone(),
            field: field.filter(|f| !f.is_empty() && *f != ".").map(str::to_string),
            position: self.doc.locate(&full),
            message,
        }
    }
}

impl Loader {
    fn document(&mut self, doc: &yaml::Document) {
        if self.skip.contains(&doc.index) {
            return;
        }
        let ctx = Ctx { doc, item: None, prefix: String::new(), object: None };
        self.object(&doc.value, ctx);
    }

    /// Loads the objects of the Scenario's `apply` steps, each located at its place in the step.
    fn step_objects(&mut self, ctx: &Ctx<'_>) {
        let Some(scenario) = &self.manifests.scenario else { return };
        let mut loaded = BTreeMap::new();
        for (i, step) in scenario.spec.steps.iter().enumerate() {
            let Some(objects) = &step.apply else { continue };
            let mut sub = Loader::default();
            for (j, object) in objects.iter().enumerate() {
                let prefix = yaml::child_index(&yaml::child_key(&ctx.prefix, &format!("spec.steps[{i}].apply")), j);
                sub.object(object, Ctx { doc: ctx.doc, item: None, prefix, object: None });
            }
            if sub.manifests.scenario.is_some() {
                self.problems.push(ctx.problem(
                    ProblemKind::Validation,
                    Some(&format!("spec.steps[{i}].apply")),
                    "a step cannot apply a Scenario".into(),
                ));
            }
            self.problems.append(&mut sub.problems);
            self.warnings.append(&mut sub.warnings);
            loaded.insert(i, sub.manifests);
        }
        self.manifests.step_objects = loaded;
    }

    fn object(&mut self, value: &Value, mut ctx: Ctx<'_>) {
        let Some(map) = value.as_object() else {
            let shape = match value {
                Value::Array(_) => "a list",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "a boolean",
                _ => "empty",
            };
            let p = ctx.problem(
                ProblemKind::MissingTypeInfo,
                None,
                format!("expected a Kubernetes object (a mapping with apiVersion and kind), found {shape}"),
            );
            self.problems.push(p);
            return;
        };
        if !map.contains_key("kind") && map.contains_key("AutoScalingGroups") {
            self.auto_scaling_groups(map, &ctx);
            return;
        }
        let api_version = map.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        let kind = map.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
        let metadata = map.get("metadata");
        let name = metadata.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("<unnamed>");
        let namespace = metadata.and_then(|m| m.get("namespace")).and_then(Value::as_str).map(str::to_string);
        ctx.object = Some(ObjectRef { kind: kind.clone(), namespace: namespace.clone(), name: name.to_string() });
        if kind.is_empty() || api_version.is_empty() {
            let missing = if kind.is_empty() { "kind" } else { "apiVersion" };
            let p = ctx.problem(ProblemKind::MissingTypeInfo, Some(missing), format!("the object has no {missing}"));
            self.problems.push(p);
            return;
        }
        if kind.ends_with("List") && map.contains_key("items") {
            let Some(items) = map.get("items").and_then(Value::as_array) else {
                let p = ctx.problem(ProblemKind::InvalidValue, Some("items"), "items must be a list".into());
                self.problems.push(p);
                return;
            };
            for (i, item) in items.iter().enumerate() {
                let prefix = yaml::child_index(&yaml::child_key(&ctx.prefix, "items"), i);
                self.object(item, Ctx { doc: ctx.doc, item: Some(i), prefix, object: None });
            }
            return;
        }
        // A Pod or VolumeAttachment on a node: left out, it holds back that node's termination.
        if let (Some(notes), "Pod" | "VolumeAttachment") = (&mut self.live, kind.as_str()) {
            let node = map.get("spec").and_then(|s| s.get("nodeName")).and_then(Value::as_str);
            if let Some(node) = node.filter(|n| !n.is_empty()) {
                notes.bound_pods.insert(ctx.doc.index, node.to_string());
            }
        }
        let reference = ctx.object.clone().expect("set above");
        let origin = Origin { document: ctx.doc.index, item: ctx.item, position: ctx.doc.locate(&ctx.prefix) };
        let group = api_version.split_once('/').map_or("", |(g, _)| g);
        let m = &mut self.manifests;
        let problems = &mut self.problems;
        let mut lenient = self.newer_kubernetes_fields_allowed.then_some(&mut self.warnings);
        let accepted = match (api_version.as_str(), kind.as_str()) {
            ("karpenter.sh/v1", "NodePool") => {
                let invalid = self.live.as_mut().map(|n| &mut n.invalid_nodepools);
                push_validated(value, &ctx, problems, &mut m.nodepools, invalid)
            }
            ("karpenter.sh/v1", "NodeClaim") => push_validated(value, &ctx, problems, &mut m.nodeclaims, None),
            ("karpenter.k8s.aws/v1", "EC2NodeClass") => push_validated(value, &ctx, problems, &mut m.nodeclasses, None),
            ("karpenter.sh/v1beta1", "NodePool") => {
                push_legacy(value, &ctx, problems, &mut m.legacy, LegacyObject::NodePoolV1Beta1)
            }
            ("karpenter.k8s.aws/v1beta1", "EC2NodeClass") => {
                push_legacy(value, &ctx, problems, &mut m.legacy, LegacyObject::EC2NodeClassV1Beta1)
            }
            ("karpenter.sh/v1alpha5", "Provisioner") => {
                push_legacy(value, &ctx, problems, &mut m.legacy, LegacyObject::ProvisionerV1Alpha5)
            }
            ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate") => {
                push_legacy(value, &ctx, problems, &mut m.legacy, LegacyObject::AWSNodeTemplateV1Alpha1)
            }
            ("v1", "Pod") => push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.pods),
            ("v1", "Node") => push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.nodes),
            ("v1", "Namespace") => push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.namespaces),
            ("v1", "PersistentVolumeClaim") => push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.pvcs),
            ("v1", "PersistentVolume") => push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.pvs),
            ("apps/v1", "Deployment") => push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.deployments),
            ("apps/v1", "ReplicaSet") => push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.replicasets),
            ("apps/v1", "StatefulSet") => {
                push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.statefulsets)
            }
            ("apps/v1", "DaemonSet") => push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.daemonsets),
            ("batch/v1", "Job") => push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.jobs),
            ("policy/v1", "PodDisruptionBudget") => {
                push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.pdbs)
            }
            ("storage.k8s.io/v1", "StorageClass") => {
                push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.storageclasses)
            }
            ("storage.k8s.io/v1", "CSINode") => {
                push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.csinodes)
            }
            ("storage.k8s.io/v1", "VolumeAttachment") => {
                push_plain(value, &ctx, problems, lenient.as_deref_mut(), &mut m.volumeattachments)
            }
            ("scheduling.k8s.io/v1", "PriorityClass") => {
                push_plain(value, &ctx, problems, lenient, &mut m.priorityclasses)
            }
            (clusterautoscaler::API_VERSION, clusterautoscaler::NODE_GROUP_KIND) => {
                push_node_group(value, &ctx, problems, &mut m.nodegroups)
            }
            (eksctl::API_VERSION_EKSCTL, eksctl::KIND) => {
                let read = eksctl::read(map, &ctx, problems, &mut self.warnings);
                self.push_read_groups(read);
                return;
            }
            (scenario::API_VERSION, scenario::KIND) => {
                let accepted = push_scenario(value, &ctx, problems, &mut m.scenario);
                if accepted {
                    self.step_objects(&ctx);
                }
                accepted
            }
            (scenario::API_VERSION, scenario::EXPECTATIONS_KIND) => {
                m.expectations.push(value.clone());
                true
            }
            _ => {
                let hint = match (group, kind.as_str()) {
                    ("karpenter.sh" | "karpenter.k8s.aws", _) => format!(
                        "{api_version} {kind} is not a Karpenter kind carpentry reads (v1 NodePool, NodeClaim and \
                         EC2NodeClass; v1beta1 NodePool and EC2NodeClass; v1alpha5 Provisioner; v1alpha1 \
                         AWSNodeTemplate); the document was skipped"
                    ),
                    _ => format!("{api_version} {kind} is not used by the simulation; the document was skipped"),
                };
                let w = ctx.problem(ProblemKind::UnknownKind, None, hint);
                self.warnings.push(w);
                return;
            }
        };
        if accepted {
            if let Some(previous) = self.manifests.origins.insert(reference.clone(), origin) {
                let p =
                    ctx.problem(ProblemKind::Validation, Some("metadata.name"), defined_twice(&reference, &previous));
                self.problems.push(p);
            }
        }
    }
}

impl Loader {
    /// The groups of `aws autoscaling describe-auto-scaling-groups` output, as NodeGroups.
    fn auto_scaling_groups(&mut self, map: &serde_json::Map<String, Value>, ctx: &Ctx<'_>) {
        let read = autoscaling::read(map, ctx, &mut self.problems, &mut self.warnings);
        self.push_read_groups(read);
    }

    /// The groups another format held, and the cluster it named (the first named wins).
    fn push_read_groups(&mut self, read: ReadGroups<'_>) {
        self.manifests.cluster_name = self.manifests.cluster_name.take().or(read.cluster_name);
        for group in read.groups {
            self.push_read_group(group);
        }
    }

    /// A group read from another format: validated as a NodeGroup, each error located at the field
    /// it came from.
    fn push_read_group(&mut self, read: ReadGroup<'_>) {
        let ReadGroup { group, ctx, sources } = read;
        let mut errors = group.validate();
        if errors.is_empty() {
            errors = catalogue_errors(&group.spec, "spec");
        }
        if !errors.is_empty() {
            for e in errors {
                let field = sources.locate(&e.path);
                self.problems.push(ctx.problem(ProblemKind::Validation, Some(&field), e.message));
            }
            return;
        }
        let name = group.metadata.name.clone().unwrap_or_default();
        let reference = ObjectRef { kind: clusterautoscaler::NODE_GROUP_KIND.into(), namespace: None, name };
        let origin = Origin { document: ctx.doc.index, item: ctx.item, position: ctx.doc.locate(&ctx.prefix) };
        if let Some(previous) = self.manifests.origins.insert(reference.clone(), origin) {
            self.problems.push(ctx.problem(ProblemKind::Validation, None, defined_twice(&reference, &previous)));
            return;
        }
        self.manifests.nodegroups.push(group);
    }
}

/// The node groups one document of another format holds, and the EKS cluster it names (an eksctl
/// ClusterConfig's name; the groups' `eks:cluster-name`, `alpha.eksctl.io/cluster-name`,
/// `kubernetes.io/cluster/<name>` or `k8s.io/cluster-autoscaler/<name>` tags).
struct ReadGroups<'a> {
    groups: Vec<ReadGroup<'a>>,
    cluster_name: Option<String>,
}

/// The taint effects Kubernetes has, the only ones eksctl and CA's tags accept.
const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A node group read from another format (an Auto Scaling group, an eksctl node group), with
/// where each NodeGroup field came from.
struct ReadGroup<'a> {
    group: NodeGroup,
    ctx: Ctx<'a>,
    sources: FieldSources,
}

/// Where the fields of a NodeGroup read from another format were written: NodeGroup spec field →
/// (source path, what follows an index into it).
#[derive(Debug, Default)]
struct FieldSources(BTreeMap<&'static str, (String, &'static str)>);

impl FieldSources {
    fn add(&mut self, field: &'static str, source: impl Into<String>, item_suffix: &'static str) {
        self.0.insert(field, (source.into(), item_suffix));
    }

    /// The source path of a NodeGroup error path (`spec.instanceTypes[1]` →
    /// `MixedInstancesPolicy.LaunchTemplate.Overrides[1].InstanceType`); the group itself when the
    /// field has no source.
    fn locate(&self, path: &str) -> String {
        let rest = path.strip_prefix("spec.").unwrap_or(path);
        let end = rest.find(['[', '.']).unwrap_or(rest.len());
        let (field, tail) = rest.split_at(end);
        match self.0.get(field) {
            Some((source, suffix)) if tail.starts_with('[') => {
                let close = tail.find(']').map_or(tail.len(), |i| i + 1);
                format!("{source}{}{suffix}{}", &tail[..close], &tail[close..])
            }
            Some((source, _)) => format!("{source}{tail}"),
            None => String::new(),
        }
    }
}

/// The problem with a second definition of an object.
fn defined_twice(object: &ObjectRef, first: &Origin) -> String {
    format!("{object} is defined twice (first in document {}, {})", first.document, first.position)
}

/// Decodes `value` into `T`, reporting type errors and fields `T` does not have.
///
/// Our own API types reject unknown fields while deserializing (`deny_unknown_fields`);
/// k8s-openapi types accept and drop them. So for the latter (`roundtrip_check`), every non-null
/// field the type ignores is an unknown field: an error, or a warning pushed to `newer_fields`
/// when it is given (see [`load_from_api_server`]).
fn decode<T: DeserializeOwned + Serialize>(
    value: &Value,
    ctx: &Ctx<'_>,
    roundtrip_check: bool,
    newer_fields: Option<&mut Vec<Problem>>,
) -> Result<T, Vec<Problem>> {
    let mut unknown: Vec<String> = Vec::new();
    let decoded = if roundtrip_check {
        // Fields the type ignores, reported as they are skipped (null ones are as good as absent).
        let mut ignored = |path: serde_ignored::Path<'_>| {
            if let Some(p) = present_field(&path, value) {
                unknown.push(p);
            }
        };
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(value, &mut ignored))
    } else {
        serde_path_to_error::deserialize(value)
    };
    let object: T = match decoded {
        Ok(o) => o,
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            let kind =
                if inner.starts_with("unknown field") { ProblemKind::UnknownField } else { ProblemKind::InvalidValue };
            return Err(vec![ctx.problem(kind, Some(&path), inner)]);
        }
    };
    if unknown.is_empty() {
        Ok(object)
    } else if let Some(warnings) = newer_fields {
        warnings.extend(unknown.into_iter().map(|path| {
            ctx.problem(
                ProblemKind::UnknownField,
                Some(&path),
                "a field Kubernetes 1.36 does not have (a newer API server's); ignored".into(),
            )
        }));
        Ok(object)
    } else {
        Err(unknown
            .into_iter()
            .map(|path| {
                let field = path.rsplit('.').next().unwrap_or(&path).to_string();
                ctx.problem(ProblemKind::UnknownField, Some(&path), format!("unknown field `{field}`"))
            })
            .collect())
    }
}

/// The field path (`spec.containers[0].x`, as problems name fields) of an ignored field, unless
/// its value in `original` is null.
fn present_field(path: &serde_ignored::Path<'_>, original: &Value) -> Option<String> {
    fn walk<'p>(path: &'p serde_ignored::Path<'p>, out: &mut Vec<&'p serde_ignored::Path<'p>>) {
        match path {
            serde_ignored::Path::Root => {}
            serde_ignored::Path::Seq { parent, .. } | serde_ignored::Path::Map { parent, .. } => {
                walk(parent, out);
                out.push(path);
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => walk(parent, out),
        }
    }
    let mut segments = Vec::new();
    walk(path, &mut segments);
    let mut text = String::new();
    let mut at = original;
    for segment in segments {
        match segment {
            serde_ignored::Path::Seq { index, .. } => {
                push_index(&mut text, *index);
                at = at.get(*index)?;
            }
            serde_ignored::Path::Map { key, .. } => {
                push_key(&mut text, key);
                at = at.get(key.as_str())?;
            }
            _ => {}
        }
    }
    (!at.is_null()).then_some(text)
}

/// `path` + `.key` (as [`yaml::child_key`]).
fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

/// `path` + `[index]` (as [`yaml::child_index`]).
fn push_index(path: &mut String, index: usize) {
    use std::fmt::Write as _;
    let _ = write!(path, "[{index}]");
}

fn push_plain<T: DeserializeOwned + Serialize>(
    value: &Value,
    ctx: &Ctx<'_>,
    problems: &mut Vec<Problem>,
    newer_fields: Option<&mut Vec<Problem>>,
    into: &mut Vec<T>,
) -> bool {
    match decode::<T>(value, ctx, true, newer_fields) {
        Ok(o) => {
            let mut bad = Vec::new();
            check_quantities(value, &mut String::new(), false, &mut bad);
            if bad.is_empty() {
                into.push(o);
                return true;
            }
            problems.extend(
                bad.into_iter().map(|(path, e)| ctx.problem(ProblemKind::InvalidValue, Some(&path), e.to_string())),
            );
            false
        }
        Err(p) => {
            problems.extend(p);
            false
        }
    }
}

/// Maps of Kubernetes objects whose values are quantities (k8s-openapi keeps quantities as
/// unparsed strings, so they are checked here, where the field path is still known).
const QUANTITY_MAPS: [&str; 7] =
    ["requests", "limits", "overhead", "capacity", "allocatable", "allocatedResources", "hard"];

fn check_quantities(
    value: &Value,
    path: &mut String,
    in_quantity_map: bool,
    bad: &mut Vec<(String, crate::quantity::QuantityError)>,
) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let len = path.len();
                if in_quantity_map {
                    let parsed = match v {
                        Value::String(s) => crate::quantity::Quantity::parse(s),
                        Value::Number(n) => crate::quantity::Quantity::parse(&n.to_string()),
                        other => crate::quantity::Quantity::parse(&other.to_string()),
                    };
                    if let Err(e) = parsed {
                        push_key(path, key);
                        bad.push((path.clone(), e));
                    }
                } else if key != "metadata" {
                    push_key(path, key);
                    check_quantities(v, path, QUANTITY_MAPS.contains(&key.as_str()), bad);
                }
                path.truncate(len);
            }
        }
        Value::Array(items) if !in_quantity_map => {
            for (i, v) in items.iter().enumerate() {
                let len = path.len();
                push_index(path, i);
                check_quantities(v, path, false, bad);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// Decodes and validates a Karpenter object into `into`; one that decodes but fails validation
/// goes to `invalid` when it is given.
fn push_validated<T: DeserializeOwned + Serialize + Validate>(
    value: &Value,
    ctx: &Ctx<'_>,
    problems: &mut Vec<Problem>,
    into: &mut Vec<T>,
    invalid: Option<&mut Vec<T>>,
) -> bool {
    match decode::<T>(value, ctx, false, None) {
        Ok(o) => {
            let errors = o.validate();
            if errors.is_empty() {
                into.push(o);
                return true;
            }
            problems.extend(errors.into_iter().map(|e| ctx.problem(ProblemKind::Validation, Some(&e.path), e.message)));
            if let Some(invalid) = invalid {
                invalid.push(o);
            }
            false
        }
        Err(p) => {
            problems.extend(p);
            false
        }
    }
}

/// A NodeGroup: validated as written, and its instance types and zones looked up in the embedded
/// catalogue (a typo would otherwise leave the group out of every scale-up, silently).
fn push_node_group(value: &Value, ctx: &Ctx<'_>, problems: &mut Vec<Problem>, into: &mut Vec<NodeGroup>) -> bool {
    let mut group_problems = Vec::new();
    let mut accepted: Vec<NodeGroup> = Vec::new();
    if !push_validated(value, ctx, &mut group_problems, &mut accepted, None) {
        problems.extend(group_problems);
        return false;
    }
    let Some(group) = accepted.pop() else { return false };
    let errors = catalogue_errors(&group.spec, "spec");
    if !errors.is_empty() {
        problems.extend(errors.into_iter().map(|e| ctx.problem(ProblemKind::Validation, Some(&e.path), e.message)));
        return false;
    }
    into.push(group);
    true
}

fn catalogue_errors(spec: &crate::api::clusterautoscaler::NodeGroupSpec, path: &str) -> Vec<crate::api::FieldError> {
    use crate::api::{FieldError, Rule};
    let mut out = Vec::new();
    let catalogue = crate::catalogue::Catalogue::embedded();
    for (i, name) in spec.instance_types.iter().enumerate() {
        if catalogue.info(name).is_none() {
            out.push(FieldError::new(
                format!("{path}.instanceTypes[{i}]"),
                Rule::NodeGroupCatalogue,
                format!("{name:?} is not an EC2 instance type in the catalogue"),
            ));
        }
    }
    for (i, zone) in spec.zones.iter().enumerate() {
        let known =
            catalogue.regions().any(|r| catalogue.zones(r).is_some_and(|zs| zs.iter().any(|z| z.name == *zone)));
        if !known {
            out.push(FieldError::new(
                format!("{path}.zones[{i}]"),
                Rule::NodeGroupCatalogue,
                format!("{zone:?} is not a zone of any region in the catalogue"),
            ));
        }
    }
    out
}

fn push_scenario(
    value: &Value,
    ctx: &Ctx<'_>,
    problems: &mut Vec<Problem>,
    into: &mut Option<scenario::Scenario>,
) -> bool {
    match decode::<scenario::Scenario>(value, ctx, false, None) {
        Ok(s) => {
            let errors = s.validate();
            if !errors.is_empty() {
                problems
                    .extend(errors.into_iter().map(|(path, m)| ctx.problem(ProblemKind::Validation, Some(&path), m)));
                return false;
            }
            if into.is_some() {
                problems.push(ctx.problem(
                    ProblemKind::Validation,
                    None,
                    "a second Scenario document; an input has at most one".into(),
                ));
                return false;
            }
            *into = Some(s);
            true
        }
        Err(p) => {
            problems.extend(p);
            false
        }
    }
}

fn push_legacy<T: DeserializeOwned + Serialize>(
    value: &Value,
    ctx: &Ctx<'_>,
    problems: &mut Vec<Problem>,
    into: &mut Vec<(ObjectRef, LegacyObject)>,
    wrap: fn(T) -> LegacyObject,
) -> bool {
    match decode::<T>(value, ctx, false, None) {
        Ok(o) => {
            into.push((ctx.object.clone().expect("set before decoding"), wrap(o)));
            true
        }
        Err(p) => {
            problems.extend(p);
            false
        }
    }
}

#[cfg(test)]
mod tests;
