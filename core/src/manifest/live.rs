//! A live read that goes on without what does not load. A controller reading the API server must
//! not stop deciding for the whole cluster because one object fails carpentry's checks (a NodePool
//! the CRD's schema admits but Karpenter's runtime validation refuses, a field carpentry's types
//! lack): the object is left out, said so, and what its absence means for the decisions is
//! classified ([`ViewGap`]), so that the controller waits only where a decision would be made on
//! a view missing something it depends on. Upstream has no counterpart for reading (its typed
//! clients decode whatever the CRD admits); for NodePools it matches upstream's
//! `nodepool/validation` controller, which marks the NodePool `ValidationSucceeded=False` and so
//! keeps the provisioner from using it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::{defined_twice, yaml, LoadError, Loader, Manifests, ObjectRef, Problem, ProblemKind};
use crate::api::nodepool::NodePool;

/// What a live read's [`Loader`] notes beside the objects.
#[derive(Default)]
pub(super) struct Notes {
    pub(super) invalid_nodepools: Vec<NodePool>,
    /// Documents of Pods and VolumeAttachments with `spec.nodeName` set, and the node.
    pub(super) bound_pods: BTreeMap<usize, String>,
}

/// What a left-out object takes from the view, from least to most: the order is the decisions'
/// dependence on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum ViewGap {
    /// Only the object itself is not decided on: a pending Pod is not provisioned for, a NodePool
    /// is not provisioned from, an EC2NodeClass's NodePools are not Ready, a workload's own
    /// object is not shown.
    Object,
    /// What runs on the nodes is incomplete (a Pod bound to a node, a PodDisruptionBudget, a
    /// DaemonSet, volumes and their classes, CSINodes): disruption, which decides which pods a node
    /// can shed, waits.
    Workloads,
    /// The nodes themselves are incomplete (a Node, a NodeClaim): every decision that counts
    /// capacity or matches instances to NodeClaims waits, as upstream's `Cluster.Synced` makes
    /// provisioning and disruption wait for a view that covers every Node and NodeClaim.
    Capacity,
}

/// One object left out of a live read, with every problem it has.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// 1-based document number in the read.
    pub document: usize,
    /// `None` for a document without usable type information.
    pub object: Option<ObjectRef>,
    pub gap: ViewGap,
    /// The node a left-out Pod is bound to (or a left-out VolumeAttachment is on): that node's
    /// pods or volumes are not all known, so nothing may drain and terminate it.
    pub node: Option<String>,
    pub problems: Vec<Problem>,
}

impl Skipped {
    /// What leaving this object out holds back, in words (for an event or a log line): the
    /// rendering of [`LiveLoad::holding_back`]'s rule for this object.
    pub fn held_back(&self) -> String {
        let kind = self.object.as_ref().map_or("", |o| o.kind.as_str());
        match (self.gap, kind) {
            (ViewGap::Capacity, _) => "nothing is provisioned, disrupted or garbage-collected until it loads".into(),
            (ViewGap::Workloads, _) => match &self.node {
                Some(node) => format!("disruption waits until it loads, and node {node} is not drained"),
                None => "disruption waits until it loads".into(),
            },
            (ViewGap::Object, "Pod") => "no node is provisioned for it".into(),
            (ViewGap::Object, "NodePool") => {
                "no node is provisioned from it (status condition ValidationSucceeded says why)".into()
            }
            (ViewGap::Object, "EC2NodeClass") => "its NodePools are not Ready".into(),
            (ViewGap::Object, _) => "it is left out of every decision".into(),
        }
    }

    /// The problems as one line: `field: message; field: message`.
    pub fn summary(&self) -> String {
        self.problems
            .iter()
            .map(|p| match &p.field {
                Some(f) => format!("{f}: {}", p.message),
                None => p.message.clone(),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// A live read: what loads, and what was left out.
#[derive(Debug, Default)]
pub struct LiveLoad {
    pub manifests: Manifests,
    /// The objects left out, in document order.
    pub skipped: Vec<Skipped>,
    /// NodePools that decode but fail validation. They are among `skipped` and not in
    /// `manifests` (nothing is provisioned from them), but their status is still theirs to
    /// write: `ValidationSucceeded=False` with the problems (see [`crate::nodepool::status`]).
    pub invalid_nodepools: Vec<NodePool>,
}

/// A decision that a partial view can hold back, named after the controllers that make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldDecision<'a> {
    /// Every decision that counts capacity or matches instances to NodeClaims: provisioning,
    /// the NodeClaim lifecycle, NodePool status and garbage collection.
    Any,
    /// Disruption: which pods a node can shed.
    Disruption,
    /// Termination's drain of this node.
    Drain(&'a str),
}

impl LiveLoad {
    /// The largest gap the skipped objects leave (`None` when nothing was skipped).
    pub fn gap(&self) -> Option<ViewGap> {
        self.skipped.iter().map(|s| s.gap).max()
    }

    /// The first skipped object that leaves a gap of at least `gap`: the one to name when a
    /// decision waits.
    pub fn first_at_least(&self, gap: ViewGap) -> Option<&Skipped> {
        self.skipped.iter().find(|s| s.gap >= gap)
    }

    /// The first left-out Pod bound to `node` (or VolumeAttachment on it), if any.
    pub fn skipped_on(&self, node: &str) -> Option<&Skipped> {
        self.skipped.iter().find(|s| s.node.as_deref() == Some(node))
    }

    /// The left-out object that holds `decision` back (the first, to name), if any. A Node or
    /// NodeClaim holds back everything, as upstream's `Cluster.Synced` does
    /// (pkg/controllers/state/cluster.go, v1.14.1); so do the gaps below it for disruption, and
    /// a Pod bound to a node for that node's drain (it would go unevicted).
    pub fn holding_back(&self, decision: HeldDecision<'_>) -> Option<&Skipped> {
        self.first_at_least(ViewGap::Capacity).or_else(|| match decision {
            HeldDecision::Any => None,
            HeldDecision::Disruption => self.first_at_least(ViewGap::Workloads),
            HeldDecision::Drain(node) => self.skipped_on(node),
        })
    }
}

fn gap_of(object: Option<&ObjectRef>, bound_pod: bool) -> ViewGap {
    match object.map(|o| o.kind.as_str()) {
        Some("Node" | "NodeClaim") => ViewGap::Capacity,
        Some("Pod") if bound_pod => ViewGap::Workloads,
        Some(
            "PodDisruptionBudget"
            | "DaemonSet"
            | "PersistentVolumeClaim"
            | "PersistentVolume"
            | "StorageClass"
            | "CSINode"
            | "VolumeAttachment",
        ) => ViewGap::Workloads,
        _ => ViewGap::Object,
    }
}

/// Loads objects as an API server returns them ([`super::load_from_api_server`]), leaving out
/// each document that has a problem instead of failing the whole read. Only text that is not
/// YAML at all fails.
///
/// Each document should hold one object (as [`super::api_documents`] writes them): a document is
/// the unit left out. A problem that only shows once others are gone (an object defined twice)
/// is found by reading again without the documents already left out, until a read is clean.
pub fn load_from_api_server_skipping(text: &str) -> Result<LiveLoad, LoadError> {
    let mut skip = BTreeSet::new();
    let mut problems_by_document: BTreeMap<usize, Vec<Problem>> = BTreeMap::new();
    let mut invalid_nodepools = Vec::new();
    let mut bound_pods = BTreeMap::new();
    loop {
        let mut loader = Loader {
            newer_kubernetes_fields_allowed: true,
            skip: skip.clone(),
            live: Some(Notes::default()),
            ..Loader::default()
        };
        if let Err(e) = yaml::each_document(text, &mut |doc| loader.document(&doc)) {
            return Err(super::syntax_error(e));
        }
        let notes = loader.live.take().unwrap_or_default();
        bound_pods.extend(notes.bound_pods);
        if loader.problems.is_empty() {
            let mut manifests = loader.manifests;
            manifests.warnings = loader.warnings;
            let skipped = problems_by_document
                .into_iter()
                .map(|(document, problems)| {
                    let object = problems.iter().find_map(|p| p.object.clone());
                    let node = bound_pods.get(&document).cloned();
                    let gap = gap_of(object.as_ref(), node.is_some());
                    Skipped { document, object, gap, node, problems }
                })
                .collect();
            return Ok(LiveLoad { manifests, skipped, invalid_nodepools });
        }
        invalid_nodepools.extend(notes.invalid_nodepools);
        let before = skip.len();
        for p in loader.problems {
            skip.insert(p.document);
            problems_by_document.entry(p.document).or_default().push(p);
        }
        if skip.len() == before {
            // Cannot happen (a skipped document raises no problem); never loop on it.
            let problems = problems_by_document.into_values().flatten().collect();
            return Err(LoadError { problems, warnings: loader.warnings });
        }
    }
}

/// One object of a live read, loaded on its own: a reader that keeps its objects (the
/// controller's view) loads an object again only when it changes, and assembles the read from
/// what it kept ([`LiveLoad::from_objects`]) instead of writing every object out and reading it
/// back on every decision.
///
/// It is loaded as [`load_from_api_server_skipping`] loads one document, from the value the API
/// server returned (with its `apiVersion` and `kind`; [`super::ListedResource::prepare`]): an object
/// of a kind the API server serves (a Scenario or an Expectations document is not a live read's).
/// There is no text, so problems name the field but not a line: every position is the object's
/// start (line 1, column 1), in messages too (an object defined twice).
#[derive(Debug, Clone)]
pub struct LiveObject {
    /// The object, when it loads (a kind carpentry does not read leaves this empty and a warning).
    loaded: Manifests,
    problems: Vec<Problem>,
    warnings: Vec<Problem>,
    /// A NodePool that decodes but fails validation (see [`LiveLoad::invalid_nodepools`]).
    invalid_nodepools: Vec<NodePool>,
    /// The node a Pod or VolumeAttachment is on.
    node: Option<String>,
}

impl LiveObject {
    pub fn load(value: Value) -> LiveObject {
        let start = yaml::Position { line: 1, column: 1 };
        let doc = yaml::Document { index: 1, start, value, positions: HashMap::new() };
        let mut loader =
            Loader { newer_kubernetes_fields_allowed: true, live: Some(Notes::default()), ..Loader::default() };
        loader.document(&doc);
        let notes = loader.live.take().unwrap_or_default();
        LiveObject {
            loaded: loader.manifests,
            problems: loader.problems,
            warnings: loader.warnings,
            invalid_nodepools: notes.invalid_nodepools,
            node: notes.bound_pods.into_values().next(),
        }
    }

    /// The object loads (it is not left out of a read).
    pub fn loads(&self) -> bool {
        self.problems.is_empty()
    }
}

/// `problems` moved to `document`.
fn renumbered(problems: &[Problem], document: usize) -> Vec<Problem> {
    problems.iter().map(|p| Problem { document, ..p.clone() }).collect()
}

impl LiveLoad {
    /// The read of `objects`, in order: what [`load_from_api_server_skipping`] returns for a text
    /// holding them one per document (the n-th object is document n), but for the lines
    /// problems are on.
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a LiveObject>) -> LiveLoad {
        let mut read = LiveLoad::default();
        for (i, object) in objects.into_iter().enumerate() {
            let document = i + 1;
            let mut problems = renumbered(&object.problems, document);
            if problems.is_empty() {
                // As a read of one text: the second definition of an object is left out.
                let twice = object.loaded.origins.keys().find_map(|o| Some((o, read.manifests.origins.get(o)?)));
                if let Some((o, first)) = twice {
                    problems.push(Problem {
                        kind: ProblemKind::Validation,
                        document,
                        object: Some(o.clone()),
                        field: Some("metadata.name".into()),
                        position: yaml::Position { line: 1, column: 1 },
                        message: defined_twice(o, first),
                    });
                }
            }
            if problems.is_empty() {
                read.manifests.extend_cloned(&object.loaded, document);
                read.manifests.warnings.extend(renumbered(&object.warnings, document));
                continue;
            }
            read.invalid_nodepools.extend_from_slice(&object.invalid_nodepools);
            let reference = problems.iter().find_map(|p| p.object.clone());
            let node = object.node.clone();
            let gap = gap_of(reference.as_ref(), node.is_some());
            read.skipped.push(Skipped { document, object: reference, gap, node, problems });
        }
        read
    }
}
