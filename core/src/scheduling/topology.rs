//! Topology (upstream `topology.go`, `topologygroup.go`, `topologydomaingroup.go`,
//! `topologynodefilter.go`): pod topology spread, pod affinity and
//! anti-affinity, and the inverse anti-affinity of existing and batch pods.
//!
//! The scheduler consults [`Topology`] at the points upstream does:
//! - [`Topology::add_requirements`] last in `ExistingNode.CanAdd` / `NodeClaim.CanAdd`, after the
//!   pod's requirements are intersected (topology comes last because it can collapse a key to a
//!   single domain);
//! - [`Topology::record`] when a pod is committed to a node or NodeClaim.
//!
//! Groups are built once per round for every pod of the batch (upstream `NewTopology` +
//! `Update`), deduplicated by (type, key, namespaces, selector, maxSkew, minDomains, node filter),
//! and start with every domain of the universe at 0 plus the counts of existing pods. Which groups
//! a pod *owns* follows its relaxation state ([`Preferences`]) instead of being mutated.
//!
//! Where upstream iterates a Go map (ties between equally loaded spread domains, the domain a
//! self-affinity bootstraps), the smallest domain name wins (docs/divergences.md); a spread tie
//! falls back to the next equally loaded domain when the NodeClaim cannot launch in the first
//! ([`SpreadTie`]).
//!
//! Volume topology (`volumes`) never enters a pod's own requirements, so it never changes the
//! domains a spread counts over: it only narrows the node side (`add_requirements`' `node`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, Taint, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::labels;
use crate::requirements::{AllowUndefined, InternedKey, Requirement, Requirements};

use crate::labels::selector;

use super::explain::{Kind, TopologyConflict};
use super::pod::{PodData, Preferences};
use super::taints;

/// A topology spread that found several valid domains equally loaded and took the first by
/// name. Upstream takes one at random (Go map order) and, when the NodeClaim cannot launch there,
/// the pod fails this NodePool and draws again when the queue retries it; the scheduler instead
/// tries the `others` in name order before giving up, which is one of upstream's draws.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadTie {
    group: usize,
    /// The domain to take (set on the ties handed back through [`SpreadTie::alternatives`]).
    domain: String,
    others: Vec<String>,
}

impl SpreadTie {
    /// One choice per other tied domain, in name order.
    pub fn alternatives(&self) -> impl Iterator<Item = SpreadTie> + '_ {
        self.others.iter().map(|d| SpreadTie { group: self.group, domain: d.clone(), others: Vec::new() })
    }
}

/// A topology group of the round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupId {
    inverse: bool,
    index: usize,
}

/// Which group left no domain, with the domains it saw (rendered by [`Topology::conflict`]).
#[derive(Debug, Clone)]
pub struct TopologyFailure {
    index: usize,
    inverse: bool,
    pod_domains: Requirement,
    node_domains: Requirement,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Namespaces {
    All,
    Set(BTreeSet<String>),
}

impl Namespaces {
    fn contains(&self, ns: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Set(s) => s.contains(ns),
        }
    }
}

/// Upstream `TopologyNodeFilter`: which nodes a spread constraint counts.
#[derive(Debug, Clone)]
struct NodeFilter {
    /// nodeAffinityPolicy Honor: nodeSelector ∩ each required term (ORed); empty = any node.
    terms: Vec<Requirements>,
    /// nodeTaintsPolicy Honor: the pod's tolerations.
    tolerations: Option<Vec<Toleration>>,
}

impl NodeFilter {
    fn matches(&self, requirements: &Requirements, node_taints: &[Taint]) -> bool {
        // upstream: strict compatibility, without the allow-undefined set.
        let affinity = self.terms.is_empty()
            || self.terms.iter().any(|t| requirements.compatible(t, AllowUndefined::Nothing).is_ok());
        affinity && self.tolerations.as_ref().is_none_or(|t| taints::first_untolerated(node_taints, t).is_none())
    }

    fn tolerates(&self, source_taints: &[Taint]) -> bool {
        self.tolerations.as_ref().is_none_or(|t| taints::first_untolerated(source_taints, t).is_none())
    }
}

/// Upstream `TopologyGroup`.
#[derive(Debug, Clone)]
struct Group {
    kind: Kind,
    key: String,
    namespaces: Namespaces,
    selector: LabelSelector,
    max_skew: i64,
    min_domains: Option<i64>,
    filter: Option<NodeFilter>,
    /// Matching pods per domain; every known domain is present (0 when empty).
    counts: BTreeMap<String, i64>,
    /// Inverse groups: the pods owning the anti-affinity (for explanations; at most 5).
    owners: Vec<String>,
    /// `key Exists` (what a requirement set without the key allows), built once.
    exists: Requirement,
    /// The key, interned for repeated lookups.
    interned: InternedKey,
    /// Counting pods placed this round. A spread group that only a relaxed pod uses exists
    /// upstream only from that relaxation on (`Topology.Update` creates it, counted from the
    /// cluster's bound pods), so it counts nothing placed before (see [`Topology::activate`]).
    recording: bool,
}

impl Group {
    fn new(kind: Kind, key: &str, namespaces: Namespaces, selector: LabelSelector) -> Group {
        let key = labels::normalize_key(key).to_string();
        Group {
            kind,
            exists: Requirement::exists(&key),
            interned: InternedKey::new(&key),
            key,
            namespaces,
            selector,
            max_skew: 0,
            min_domains: None,
            filter: None,
            counts: BTreeMap::new(),
            owners: Vec::new(),
            recording: true,
        }
    }

    /// The group's requirement in `requirements`, or `key Exists` (upstream `Get`), cheaply.
    fn requirement_in(&self, requirements: &Requirements) -> Requirement {
        requirements.get_interned(&self.interned).cloned().unwrap_or_else(|| self.exists.clone())
    }

    fn selects(&self, namespace: &str, pod_labels: &BTreeMap<String, String>) -> bool {
        self.namespaces.contains(namespace) && selector::matches(&self.selector, pod_labels)
    }

    /// The domains a node requirement offers, with their counts. Hostnames of new NodeClaims
    /// are registered by upstream when the NodeClaim is built (`Register`), so an unknown
    /// hostname counts as an empty domain; other unknown values are not domains.
    fn view(&self, node: &Requirement) -> Vec<(String, i64)> {
        if !node.is_complement() {
            node.values()
                .filter_map(|v| match self.counts.get(v) {
                    Some(c) => Some((v.to_string(), *c)),
                    None if self.key == labels::HOSTNAME => Some((v.to_string(), 0)),
                    None => None,
                })
                .collect()
        } else {
            self.counts.iter().filter(|(d, _)| node.has(d)).map(|(d, c)| (d.clone(), *c)).collect()
        }
    }

    /// Upstream `nextDomainTopologySpread`: the valid domains with the fewest pods, smallest name
    /// first. Upstream takes the first of them in Go map order (at random); the caller takes the
    /// first and may fall back to the others ([`SpreadTie`]).
    fn next_spread(&self, self_selecting: bool, pod: &Requirement, node: &Requirement) -> Vec<String> {
        let min = if self.key == labels::HOSTNAME {
            // a new host can always be created.
            0
        } else {
            let mut min = i64::MAX;
            let mut eligible = 0i64;
            for (d, c) in &self.counts {
                if pod.has(d) {
                    eligible += 1;
                    min = min.min(*c);
                }
            }
            if self.min_domains.is_some_and(|m| eligible < m) {
                0
            } else {
                min
            }
        };
        let own = i64::from(self_selecting);
        let valid: Vec<(String, i64)> =
            self.view(node).into_iter().filter(|(_, c)| (c + own).saturating_sub(min) <= self.max_skew).collect();
        let Some(fewest) = valid.iter().map(|(_, c)| *c).min() else { return Vec::new() };
        // `view` lists domains by name (the node's values or the counts' keys, both sorted).
        let mut tied: Vec<String> = valid.into_iter().filter(|(_, c)| *c == fewest).map(|(d, _)| d).collect();
        tied.sort_unstable();
        tied
    }

    /// Upstream `nextDomainAffinity`, with the self-affinity bootstrap.
    fn next_affinity(&self, self_selecting: bool, pod: &Requirement, node: &Requirement) -> Vec<String> {
        let view = self.view(node);
        let options: Vec<String> = view.iter().filter(|(d, c)| *c > 0 && pod.has(d)).map(|(d, _)| d.clone()).collect();
        if !options.is_empty() || !self_selecting {
            return options;
        }
        let all_empty = self.counts.values().all(|c| *c == 0);
        let compatible_nonempty = self.counts.iter().any(|(d, c)| *c > 0 && pod.has(d));
        if !all_empty && compatible_nonempty {
            return Vec::new();
        }
        // Bootstrap one domain: the node's own first (so an in-flight NodeClaim keeps its
        // domain), else any the pod allows; the smallest name (upstream: map order).
        if let Some((d, _)) = view.iter().find(|(d, _)| pod.has(d)) {
            return vec![d.clone()];
        }
        self.counts.keys().find(|d| pod.has(d)).map(|d| vec![d.clone()]).unwrap_or_default()
    }

    /// Upstream `nextDomainAntiAffinity`: only empty domains.
    fn next_anti_affinity(&self, pod: &Requirement, node: &Requirement) -> Vec<String> {
        self.view(node).into_iter().filter(|(d, c)| *c == 0 && pod.has(d)).map(|(d, _)| d).collect()
    }

    fn record(&mut self, values: impl Iterator<Item = String>) {
        for v in values {
            *self.counts.entry(v).or_insert(0) += 1;
        }
    }

    fn conflict(&self, pod: &Requirement, node: &Requirement) -> TopologyConflict {
        TopologyConflict {
            kind: self.kind,
            key: self.key.clone(),
            max_skew: (self.kind == Kind::Spread).then_some(self.max_skew),
            counts: self
                .counts
                .iter()
                .filter(|(d, c)| **c > 0 || node.has(d))
                .take(25)
                .map(|(d, c)| (d.clone(), *c))
                .collect(),
            pod_domains: pod.to_string(),
            node_domains: node.to_string(),
            anti_affinity_of: self.owners.clone(),
        }
    }
}

/// A pod's spread group with `dropped` required node-affinity terms relaxed away: its node filter
/// is the nodeSelector with each remaining term (upstream `MakeTopologyNodeFilter` on the pod as
/// relaxation left it).
fn spread_group(p: &PodData, tsc: &TopologySpreadConstraint, dropped: usize) -> Group {
    let filter = NodeFilter {
        terms: if tsc.node_affinity_policy.as_deref() == Some("Ignore") {
            Vec::new()
        } else if p.required_terms.is_empty() {
            if p.node_selector.is_empty() {
                Vec::new()
            } else {
                vec![p.node_selector.clone()]
            }
        } else {
            p.required_terms
                .iter()
                .skip(dropped)
                .map(|t| {
                    let mut r = p.node_selector.clone();
                    r.add_all(t);
                    r
                })
                .collect()
        },
        tolerations: (tsc.node_taints_policy.as_deref() == Some("Honor")).then(|| p.tolerations.clone()),
    };
    Group {
        max_skew: i64::from(tsc.max_skew),
        min_domains: tsc.min_domains.map(i64::from),
        filter: Some(filter),
        ..Group::new(
            Kind::Spread,
            &tsc.topology_key,
            Namespaces::Set([p.pod_ref.namespace.clone()].into()),
            spread_selector(tsc, &p.labels),
        )
    }
}

/// The groups one batch pod takes part in.
#[derive(Debug, Clone, Default)]
struct PodGroups {
    /// Per topology spread constraint, in the order written.
    spreads: Vec<usize>,
    /// The same, per number of required node-affinity terms dropped (the spread's node filter is
    /// built from the terms left, upstream `TopologyNodeFilter`); level 0 is `spreads`.
    spreads_by_level: Vec<Vec<usize>>,
    affinity_required: Vec<usize>,
    /// Per preferred term, heaviest first (the order relaxation drops them).
    affinity_preferred: Vec<usize>,
    anti_required: Vec<usize>,
    anti_preferred: Vec<usize>,
    /// Inverse groups owned through the required anti-affinity terms.
    inverse_required: Vec<usize>,
    /// Groups whose selector (and namespaces) select the pod: where it is counted.
    selected_by: Vec<usize>,
    /// Inverse groups whose selector selects the pod: where it must stay out.
    inverse_selecting: Vec<usize>,
}

/// Where new NodeClaims can put domains: one NodePool's requirements, taints and the
/// requirements of its instance types (upstream `buildDomainGroups`).
pub struct DomainSource<'a> {
    pub requirements: &'a Requirements,
    pub taints: &'a [Taint],
    pub instance_types: Vec<&'a Requirements>,
}

/// An existing node (or in-flight NodeClaim) as topology sees it.
pub struct NodeInfo<'a> {
    pub name: &'a str,
    pub requirements: &'a Requirements,
    pub taints: &'a [Taint],
    /// An in-flight NodeClaim: upstream's `countDomains` takes no new domain from it.
    pub in_flight: bool,
}

/// The topology state of a round.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    groups: Vec<Group>,
    inverse: Vec<Group>,
    pods: Vec<PodGroups>,
}

/// The domain universe: key → domain → indices of the sources producing it.
type Universe = BTreeMap<String, BTreeMap<String, Vec<usize>>>;

fn term_namespaces(term: &PodAffinityTerm, own: &str) -> Namespaces {
    let listed: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
    match &term.namespace_selector {
        // An empty namespaceSelector selects every namespace.
        Some(s)
            if s.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && s.match_expressions.as_ref().is_none_or(|e| e.is_empty()) =>
        {
            Namespaces::All
        }
        // Namespaces are not part of the input: a selector is evaluated against the label every
        // namespace carries, kubernetes.io/metadata.name (docs/divergences.md).
        Some(s) => Namespaces::Set(listed).with_selector(s.clone()),
        None if listed.is_empty() => Namespaces::Set([own.to_string()].into()),
        None => Namespaces::Set(listed),
    }
}

impl Namespaces {
    fn with_selector(self, s: LabelSelector) -> Namespaces {
        // Without Namespace objects the namespaces a selector matches are those named by an
        // In/matchLabels on kubernetes.io/metadata.name.
        let Namespaces::Set(mut set) = self else { return self };
        const NAME: &str = "kubernetes.io/metadata.name";
        if let Some(v) = s.match_labels.as_ref().and_then(|m| m.get(NAME)) {
            set.insert(v.clone());
        }
        for e in s.match_expressions.iter().flatten() {
            if e.key == NAME && e.operator == "In" {
                set.extend(e.values.iter().flatten().cloned());
            }
        }
        Namespaces::Set(set)
    }
}

struct Builder<'a> {
    topology: Topology,
    index: HashMap<String, usize>,
    inverse_index: HashMap<String, usize>,
    universe: &'a Universe,
    sources: &'a [DomainSource<'a>],
    nodes: &'a [NodeInfo<'a>],
    bound: &'a [(&'a Pod, usize)],
}

impl Builder<'_> {
    /// `owner_tolerations`: for pod (anti-)affinity, the tolerations of the pod whose term made
    /// the group (see below); `None` for spread constraints, whose node filter decides.
    fn group(&mut self, mut g: Group, owner_tolerations: Option<&[Toleration]>) -> usize {
        let id = format!(
            "{:?}|{}|{:?}|{:?}|{}|{:?}|{:?}",
            g.kind, g.key, g.namespaces, g.selector, g.max_skew, g.min_domains, g.filter
        );
        if let Some(&i) = self.index.get(&id) {
            return i;
        }
        // Initial domains: the universe (with nodeTaintsPolicy Honor, only domains of NodePools
        // whose taints are tolerated), then existing nodes passing the filter, then the pods.
        // upstream: (anti-)affinity groups have no node filter, and the zero value of its taint
        // policy is not `Ignore`, so `ForEachDomain` honours taints for them: only domains of
        // NodePools whose taints the owning pod tolerates.
        for (domain, sources) in self.universe.get(&g.key).into_iter().flatten() {
            let seeded = match (&g.filter, owner_tolerations) {
                (Some(f), _) => sources.iter().any(|&s| f.tolerates(self.sources[s].taints)),
                (None, Some(t)) => {
                    sources.iter().any(|&s| taints::first_untolerated(self.sources[s].taints, t).is_none())
                }
                (None, None) => true,
            };
            if seeded {
                g.counts.insert(domain.clone(), 0);
            }
        }
        // upstream `countDomains`: domains of existing nodes, but not of in-flight NodeClaims.
        for n in self.nodes.iter().filter(|n| !n.in_flight) {
            if g.filter.as_ref().is_none_or(|f| f.matches(n.requirements, n.taints)) {
                if let Some(v) = single_value(n.requirements, &g.key) {
                    g.counts.entry(v).or_insert(0);
                }
            }
        }
        for (p, node) in self.bound {
            let n = &self.nodes[*node];
            let ns = p.metadata.namespace.as_deref().unwrap_or("default");
            let pod_labels = p.metadata.labels.clone().unwrap_or_default();
            if !g.selects(ns, &pod_labels) || g.filter.as_ref().is_some_and(|f| !f.matches(n.requirements, n.taints)) {
                continue;
            }
            if let Some(v) = single_value(n.requirements, &g.key) {
                *g.counts.entry(v).or_insert(0) += 1;
            }
        }
        self.topology.groups.push(g);
        self.index.insert(id, self.topology.groups.len() - 1);
        self.topology.groups.len() - 1
    }

    fn inverse_group(
        &mut self,
        term: &PodAffinityTerm,
        namespace: &str,
        owner: &str,
        owner_tolerations: &[Toleration],
    ) -> usize {
        let g = Group::new(
            Kind::AntiAffinity,
            &term.topology_key,
            term_namespaces(term, namespace),
            term.label_selector.clone().unwrap_or_else(select_nothing),
        );
        let id = format!("{}|{:?}|{:?}", g.key, g.namespaces, g.selector);
        let i = match self.inverse_index.get(&id) {
            Some(&i) => i,
            None => {
                let mut g = g;
                // As for affinity groups: NodePools whose taints the owner tolerates, and
                // existing nodes that are not in flight.
                for (domain, sources) in self.universe.get(&g.key).into_iter().flatten() {
                    if sources
                        .iter()
                        .any(|&s| taints::first_untolerated(self.sources[s].taints, owner_tolerations).is_none())
                    {
                        g.counts.insert(domain.clone(), 0);
                    }
                }
                for n in self.nodes.iter().filter(|n| !n.in_flight) {
                    if let Some(v) = single_value(n.requirements, &g.key) {
                        g.counts.entry(v).or_insert(0);
                    }
                }
                self.topology.inverse.push(g);
                self.inverse_index.insert(id, self.topology.inverse.len() - 1);
                self.topology.inverse.len() - 1
            }
        };
        let g = &mut self.topology.inverse[i];
        if g.owners.len() < 5 && !g.owners.iter().any(|o| o == owner) {
            g.owners.push(owner.to_string());
        }
        i
    }

    fn affinity_group(
        &mut self,
        kind: Kind,
        term: &PodAffinityTerm,
        namespace: &str,
        tolerations: &[Toleration],
    ) -> usize {
        self.group(
            Group::new(
                kind,
                &term.topology_key,
                term_namespaces(term, namespace),
                // upstream: a nil selector selects nothing.
                term.label_selector.clone().unwrap_or_else(select_nothing),
            ),
            Some(tolerations),
        )
    }
}

/// A selector no pod matches (upstream: nil or invalid selectors become `labels.Nothing()`).
fn select_nothing() -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "carpentry.dev/nothing".into(),
            operator: "Nothing".into(),
            values: None,
        }]),
        match_labels: None,
    }
}

fn single_value(requirements: &Requirements, key: &str) -> Option<String> {
    let r = requirements.get_ref(key)?;
    (!r.is_complement() && r.len() == 1).then(|| r.values().next().unwrap_or_default().to_string())
}

/// The spread constraint's selector with `matchLabelKeys` applied (upstream appends
/// `key In [value]` for each key present in the pod's labels; absent keys are ignored).
fn spread_selector(tsc: &TopologySpreadConstraint, pod_labels: &BTreeMap<String, String>) -> LabelSelector {
    let Some(mut s) = tsc.label_selector.clone() else { return select_nothing() };
    for key in tsc.match_label_keys.iter().flatten() {
        if let Some(v) = pod_labels.get(key) {
            s.match_expressions.get_or_insert_with(Vec::new).push(LabelSelectorRequirement {
                key: key.clone(),
                operator: "In".into(),
                values: Some(vec![v.clone()]),
            });
        }
    }
    s
}

impl Topology {
    /// Upstream `NewTopology`: the domain universe from the NodePools and their instance types
    /// and from existing nodes; one group per distinct constraint of the batch; counts from the
    /// existing bound pods (`bound`: pod and index into `nodes`; the batch is not among them);
    /// inverse anti-affinity from bound pods with required anti-affinity and from batch pods.
    pub fn new(
        sources: &[DomainSource<'_>],
        nodes: &[NodeInfo<'_>],
        bound: &[(&Pod, usize)],
        batch: &[PodData],
    ) -> Topology {
        let mut keys: BTreeSet<String> = BTreeSet::new();
        for p in batch {
            keys.extend(p.spreads.iter().map(|t| labels::normalize_key(&t.topology_key).to_string()));
            for t in p.pod_affinity_terms() {
                keys.insert(labels::normalize_key(&t.topology_key).to_string());
            }
        }
        let existing_anti: Vec<(&Pod, usize, Vec<PodAffinityTerm>)> = bound
            .iter()
            .filter_map(|(p, n)| {
                let terms = p
                    .spec
                    .as_ref()?
                    .affinity
                    .as_ref()?
                    .pod_anti_affinity
                    .as_ref()?
                    .required_during_scheduling_ignored_during_execution
                    .clone()
                    .filter(|t| !t.is_empty())?;
                Some((*p, *n, terms))
            })
            .collect();
        for (_, _, terms) in &existing_anti {
            keys.extend(terms.iter().map(|t| labels::normalize_key(&t.topology_key).to_string()));
        }
        if keys.is_empty() {
            return Topology { pods: vec![PodGroups::default(); batch.len()], ..Default::default() };
        }
        // upstream `buildDomainGroups`: NodePool requirements ∩ instance-type requirements,
        // plus the NodePool's own `In` values.
        let mut universe: Universe = BTreeMap::new();
        for (s, source) in sources.iter().enumerate() {
            for key in &keys {
                let np = source.requirements.get(key);
                let mut add = |r: &Requirement| {
                    if !r.is_complement() {
                        for v in r.values() {
                            let slot = universe.entry(key.clone()).or_default().entry(v.to_string()).or_default();
                            if slot.last() != Some(&s) {
                                slot.push(s);
                            }
                        }
                    }
                };
                for it in &source.instance_types {
                    if let Some(r) = it.get_ref(key) {
                        add(&np.intersection(r));
                    } else {
                        add(&np);
                    }
                }
                add(&np);
            }
        }
        let mut b = Builder {
            topology: Topology::default(),
            index: HashMap::new(),
            inverse_index: HashMap::new(),
            universe: &universe,
            sources,
            nodes,
            bound,
        };
        for (p, n, terms) in &existing_anti {
            let owner = crate::pod::PodRef::of(p);
            let i = {
                let ns = owner.namespace.clone();
                let name = owner.to_string();
                let tolerations = p.spec.as_ref().and_then(|s| s.tolerations.clone()).unwrap_or_default();
                terms.iter().map(|t| b.inverse_group(t, &ns, &name, &tolerations)).collect::<Vec<_>>()
            };
            for (g, t) in i.into_iter().zip(terms) {
                let key = labels::normalize_key(&t.topology_key);
                if let Some(v) = single_value(nodes[*n].requirements, key) {
                    b.topology.inverse[g].record(std::iter::once(v));
                }
            }
        }
        for p in batch {
            let ns = p.pod_ref.namespace.clone();
            let name = p.pod_ref.to_string();
            let mut pg = PodGroups::default();
            for tsc in &p.spreads {
                pg.spreads.push(b.group(spread_group(p, tsc, 0), None));
            }
            for t in &p.affinity_required {
                pg.affinity_required.push(b.affinity_group(Kind::Affinity, t, &ns, &p.tolerations));
            }
            for (_, t) in &p.affinity_preferred {
                pg.affinity_preferred.push(b.affinity_group(Kind::Affinity, t, &ns, &p.tolerations));
            }
            for t in &p.anti_required {
                pg.anti_required.push(b.affinity_group(Kind::AntiAffinity, t, &ns, &p.tolerations));
                pg.inverse_required.push(b.inverse_group(t, &ns, &name, &p.tolerations));
            }
            for (_, t) in &p.anti_preferred {
                // upstream does not track preferred anti-affinity inversely ("the pod we are
                // relaxing is not the pod with the anti-affinity term").
                pg.anti_preferred.push(b.affinity_group(Kind::AntiAffinity, t, &ns, &p.tolerations));
            }
            b.topology.pods.push(pg);
        }
        // Spread groups of relaxed pods (required node-affinity terms dropped): built now, seeded
        // like any group, but counting placements only once a pod relaxes into them.
        let base = b.topology.groups.len();
        for (i, p) in batch.iter().enumerate() {
            let levels = p.required_terms.len().max(1);
            let mut by_level = vec![b.topology.pods[i].spreads.clone()];
            for level in 1..levels {
                by_level.push(p.spreads.iter().map(|tsc| b.group(spread_group(p, tsc, level), None)).collect());
            }
            b.topology.pods[i].spreads_by_level = by_level;
        }
        for g in &mut b.topology.groups[base..] {
            g.recording = false;
        }
        let mut topology = b.topology;
        for (i, p) in batch.iter().enumerate() {
            let ns = p.pod_ref.namespace.as_str();
            topology.pods[i].selected_by =
                (0..topology.groups.len()).filter(|&g| topology.groups[g].selects(ns, &p.labels)).collect();
            topology.pods[i].inverse_selecting =
                (0..topology.inverse.len()).filter(|&g| topology.inverse[g].selects(ns, &p.labels)).collect();
        }
        topology
    }

    /// Upstream `Topology.Update` after a relaxation: the spread groups of the pod's new state
    /// exist from now on (and count what is placed from now on).
    pub fn activate(&mut self, p: usize, prefs: &Preferences) {
        let Some(pg) = self.pods.get(p) else { return };
        if let Some(level) = pg.spreads_by_level.get(prefs.dropped_required) {
            for &g in level {
                self.groups[g].recording = true;
            }
        }
    }

    /// Whether the pod takes part in any topology group (as owner or as selected pod).
    pub fn involves(&self, p: usize) -> bool {
        self.pods.get(p).is_some_and(|g| {
            !(g.spreads.is_empty()
                && g.affinity_required.is_empty()
                && g.affinity_preferred.is_empty()
                && g.anti_required.is_empty()
                && g.anti_preferred.is_empty()
                && g.inverse_selecting.is_empty())
        })
    }

    /// The groups batch pod `p` owns under its relaxation state, in evaluation order.
    fn owned(&self, p: usize, pod: &PodData, prefs: &Preferences) -> Vec<usize> {
        let g = &self.pods[p];
        let level = g.spreads_by_level.get(prefs.dropped_required).unwrap_or(&g.spreads);
        let mut out: Vec<usize> = prefs.active_spreads(pod.spreads.len()).into_iter().map(|i| level[i]).collect();
        out.extend(&g.affinity_required);
        out.extend(g.affinity_preferred.iter().skip(prefs.dropped_pod_affinity));
        out.extend(&g.anti_required);
        out.extend(g.anti_preferred.iter().skip(prefs.dropped_pod_anti_affinity));
        out
    }

    /// Upstream `Topology.AddRequirements`: for every group the pod owns and every inverse group
    /// that selects it, the domains it may take, as requirements on the topology keys (to be
    /// intersected with the node's). `strict` is the pod's strict requirements (the global
    /// minimum of a spread is taken over the domains they allow; preferred node affinity never
    /// narrows it); the node's domains are `node ∩ pod_requirements` for the key (the node's
    /// requirements with the pod's added, as upstream passes them).
    pub fn add_requirements(
        &self,
        p: usize,
        pod: &PodData,
        prefs: &Preferences,
        strict: &Requirements,
        node: (&Requirements, &Requirements),
    ) -> Result<Requirements, Box<TopologyFailure>> {
        self.add_requirements_choosing(p, pod, prefs, strict, node, None).map(|(out, _)| out)
    }

    /// [`add_requirements`](Self::add_requirements), with the spread ties it broke. `choice`
    /// takes one of the tied domains a previous call reported instead of the first.
    pub fn add_requirements_choosing(
        &self,
        p: usize,
        pod: &PodData,
        prefs: &Preferences,
        strict: &Requirements,
        (node, pod_requirements): (&Requirements, &Requirements),
        choice: Option<&SpreadTie>,
    ) -> Result<(Requirements, Option<SpreadTie>), Box<TopologyFailure>> {
        let mut out = Requirements::new();
        let mut tie = None;
        let Some(pg) = self.pods.get(p) else { return Ok((out, tie)) };
        let ns = pod.pod_ref.namespace.as_str();
        let owned = self.owned(p, pod, prefs);
        let groups = owned
            .iter()
            .map(|&g| (g, false, &self.groups[g]))
            .chain(pg.inverse_selecting.iter().map(|&g| (g, true, &self.inverse[g])));
        for (index, inverse, group) in groups {
            let pod_domains = group.requirement_in(strict);
            let node_domains = match pod_requirements.get_interned(&group.interned) {
                Some(r) => group.requirement_in(node).intersection(r),
                None => group.requirement_in(node),
            };
            let domains = match group.kind {
                Kind::Spread => {
                    let mut tied = group.next_spread(group.selects(ns, &pod.labels), &pod_domains, &node_domains);
                    match choice {
                        Some(c) if !inverse && c.group == index => {
                            tied.retain(|d| *d == c.domain);
                        }
                        _ => {
                            if tied.len() > 1 && tie.is_none() && choice.is_none() {
                                tie =
                                    Some(SpreadTie { group: index, domain: String::new(), others: tied.split_off(1) });
                            }
                            tied.truncate(1);
                        }
                    }
                    tied
                }
                Kind::Affinity => group.next_affinity(group.selects(ns, &pod.labels), &pod_domains, &node_domains),
                Kind::AntiAffinity => group.next_anti_affinity(&pod_domains, &node_domains),
            };
            // Built only when a failure is explained (this path is hot).
            let conflict = || {
                Box::new(TopologyFailure {
                    index,
                    inverse,
                    pod_domains: pod_domains.clone(),
                    node_domains: node_domains.clone(),
                })
            };
            if domains.is_empty() {
                return Err(conflict());
            }
            out.add(Requirement::in_values(&group.key, &domains));
            if out.get_ref(&group.key).is_some_and(Requirement::is_empty) {
                return Err(conflict());
            }
        }
        Ok((out, tie))
    }

    /// The node-independent part of [`add_requirements`](Self::add_requirements) for one placement
    /// attempt of batch pod `p` (counts only change when a pod is recorded, so this holds for
    /// every node tried in one attempt). `None` when the pod takes part in no group.
    pub fn prepare<'a>(
        &'a self,
        p: usize,
        pod: &PodData,
        prefs: &Preferences,
        strict: &Requirements,
        pod_requirements: &'a Requirements,
    ) -> Option<Prepared<'a>> {
        if !self.involves(p) {
            return None;
        }
        let pg = &self.pods[p];
        let ns = pod.pod_ref.namespace.as_str();
        let owned = self.owned(p, pod, prefs);
        let groups =
            owned.iter().map(|&g| &self.groups[g]).chain(pg.inverse_selecting.iter().map(|&g| &self.inverse[g]));
        let entries = groups
            .map(|group| {
                let pod_domains = group.requirement_in(strict);
                let self_selecting = group.selects(ns, &pod.labels);
                let mut entry = PreparedGroup {
                    group,
                    pod_requirement: pod_requirements.get_interned(&group.interned),
                    self_selecting,
                    min: 0,
                    all_empty: false,
                    compatible_nonempty: false,
                    any_pod_domain: false,
                    pod_domains,
                };
                match group.kind {
                    Kind::Spread if group.key != labels::HOSTNAME => {
                        let (mut min, mut eligible) = (i64::MAX, 0i64);
                        for (d, c) in &group.counts {
                            if entry.pod_domains.has(d) {
                                eligible += 1;
                                min = min.min(*c);
                            }
                        }
                        entry.min = if group.min_domains.is_some_and(|m| eligible < m) { 0 } else { min };
                    }
                    Kind::Affinity => {
                        entry.all_empty = group.counts.values().all(|c| *c == 0);
                        entry.compatible_nonempty =
                            group.counts.iter().any(|(d, c)| *c > 0 && entry.pod_domains.has(d));
                        entry.any_pod_domain = group.counts.keys().any(|d| entry.pod_domains.has(d));
                    }
                    _ => {}
                }
                entry
            })
            .collect();
        Some(Prepared { entries })
    }

    /// The kind and key of the group behind a failure.
    pub fn failure_group(&self, f: &TopologyFailure) -> (Kind, &str) {
        let group = if f.inverse { &self.inverse[f.index] } else { &self.groups[f.index] };
        (group.kind, &group.key)
    }

    /// The explanation of a failure returned by [`add_requirements`](Self::add_requirements).
    pub fn conflict(&self, f: &TopologyFailure) -> TopologyConflict {
        let group = if f.inverse { &self.inverse[f.index] } else { &self.groups[f.index] };
        let mut c = group.conflict(&f.pod_domains, &f.node_domains);
        if !f.inverse {
            c.anti_affinity_of.clear();
        }
        c
    }

    /// Upstream `Topology.Record`: counts the pod in every group that selects it (spread and
    /// affinity: only a single-valued domain; anti-affinity: every possible value), and records
    /// where the owner of an inverse anti-affinity could be (every possible value).
    ///
    /// Returns the hostname-keyed groups the pod was counted in on a single host (see
    /// [`hostname_limits`](Self::hostname_limits)).
    pub fn record(&mut self, p: usize, node_requirements: &Requirements, node_taints: &[Taint]) -> Vec<GroupId> {
        let mut hostname_groups = Vec::new();
        let Some(pg) = self.pods.get(p) else { return hostname_groups };
        let values = |key: &str| -> Vec<String> {
            match node_requirements.get_ref(key) {
                Some(r) if !r.is_complement() => r.values().map(str::to_string).collect(),
                _ => Vec::new(),
            }
        };
        for &g in &pg.selected_by {
            let group = &mut self.groups[g];
            if !group.recording || group.filter.as_ref().is_some_and(|f| !f.matches(node_requirements, node_taints)) {
                continue;
            }
            let v = values(&group.key);
            if group.key == labels::HOSTNAME && v.len() == 1 {
                hostname_groups.push(GroupId { inverse: false, index: g });
            }
            if group.kind == Kind::AntiAffinity || v.len() == 1 {
                group.record(v.into_iter());
            }
        }
        let owned = pg.inverse_required.clone();
        for g in owned {
            let v = values(&self.inverse[g].key);
            if self.inverse[g].key == labels::HOSTNAME && v.len() == 1 {
                hostname_groups.push(GroupId { inverse: true, index: g });
            }
            self.inverse[g].record(v.into_iter());
        }
        hostname_groups
    }

    /// A fast pre-check for hosts (an optimisation, not an upstream step): for each hostname
    /// group where the pod needs a host's count to stay within a bound, the group and the bound
    /// (spread: maxSkew − 1 when the pod selects itself, the hostname minimum being 0;
    /// anti-affinity and inverse anti-affinity: 0). A host whose count in such a group exceeds
    /// the bound is rejected by [`add_requirements`](Self::add_requirements) as well.
    pub fn hostname_limits(&self, p: usize, pod: &PodData, prefs: &Preferences) -> Vec<(GroupId, i64)> {
        let mut out = Vec::new();
        let Some(pg) = self.pods.get(p) else { return out };
        let ns = pod.pod_ref.namespace.as_str();
        for g in self.owned(p, pod, prefs) {
            let group = &self.groups[g];
            if group.key != labels::HOSTNAME {
                continue;
            }
            let id = GroupId { inverse: false, index: g };
            match group.kind {
                Kind::Spread => out.push((id, group.max_skew - i64::from(group.selects(ns, &pod.labels)))),
                Kind::AntiAffinity => out.push((id, 0)),
                Kind::Affinity => {}
            }
        }
        for &g in &pg.inverse_selecting {
            if self.inverse[g].key == labels::HOSTNAME {
                out.push((GroupId { inverse: true, index: g }, 0));
            }
        }
        out
    }
}

/// One group of a [`Prepared`] attempt, with what its domain choice needs besides the node.
struct PreparedGroup<'t> {
    group: &'t Group,
    /// The pod's requirement for the group's key (the same for every node tried).
    pod_requirement: Option<&'t Requirement>,
    pod_domains: Requirement,
    self_selecting: bool,
    /// Spread: the global minimum the skew is measured against (0 for hostname, as a new host
    /// can always be created, and when fewer than minDomains domains are eligible).
    min: i64,
    /// Affinity bootstrap inputs (see [`Group::next_affinity`]).
    all_empty: bool,
    compatible_nonempty: bool,
    any_pod_domain: bool,
}

/// The node-independent part of one pod's topology check (see [`Topology::prepare`]).
pub struct Prepared<'t> {
    entries: Vec<PreparedGroup<'t>>,
}

impl Prepared<'_> {
    /// Whether every group leaves the pod at least one domain on a node with `node`
    /// requirements, given the pod requirements the attempt was prepared with: the check of
    /// [`Topology::add_requirements`] without building any set. A necessary condition for it to
    /// succeed (it also intersects the domains of groups sharing a key), so a node this rejects
    /// is one it rejects too; placement uses it to skip nodes cheaply (not an upstream step).
    /// (Every existing node and planned NodeClaim has a single hostname, so narrowing a node
    /// — by a volume alternative — never adds hostname domains this check did not see.)
    pub fn may_admit(&self, node: &Requirements) -> bool {
        self.first_without_domain(node).is_none()
    }

    /// The kind and key of the group [`Topology::add_requirements`] fails on for the node, when
    /// that can be told without building sets: the first group that leaves no domain, provided
    /// no two groups before it share a key (the only other way to fail is intersecting the
    /// domains of groups of one key). `None` when every group leaves a domain or it cannot be
    /// told.
    pub fn failing_group(&self, node: &Requirements) -> Option<(Kind, &str)> {
        let k = self.first_without_domain(node)?;
        let before = &self.entries[..k];
        let distinct = before.iter().enumerate().all(|(i, e)| before[..i].iter().all(|f| f.group.key != e.group.key));
        distinct.then(|| (self.entries[k].group.kind, self.entries[k].group.key.as_str()))
    }

    fn first_without_domain(&self, node: &Requirements) -> Option<usize> {
        self.entries.iter().position(|e| !Self::leaves_a_domain(e, node))
    }

    fn leaves_a_domain(e: &PreparedGroup<'_>, node: &Requirements) -> bool {
        let group = e.group;
        let view = View { group, node: node.get_interned(&group.interned), pod: e.pod_requirement };
        match group.kind {
            Kind::Spread => {
                let own = i64::from(e.self_selecting);
                view.any(|_, c| (c + own).saturating_sub(e.min) <= group.max_skew)
            }
            Kind::Affinity => {
                if view.any(|d, c| c > 0 && e.pod_domains.has(d)) {
                    return true;
                }
                if !e.self_selecting || (!e.all_empty && e.compatible_nonempty) {
                    return false;
                }
                view.any(|d, _| e.pod_domains.has(d)) || e.any_pod_domain
            }
            Kind::AntiAffinity => view.any(|d, c| c == 0 && e.pod_domains.has(d)),
        }
    }
}

/// [`Group::view`] over `node ∩ pod` for the group's key, without building the intersection.
struct View<'a> {
    group: &'a Group,
    node: Option<&'a Requirement>,
    pod: Option<&'a Requirement>,
}

impl View<'_> {
    fn allows(&self, d: &str) -> bool {
        self.node.is_none_or(|r| r.has(d)) && self.pod.is_none_or(|r| r.has(d))
    }

    /// Whether some domain of the view, with its count, satisfies `f`.
    fn any(&self, mut f: impl FnMut(&str, i64) -> bool) -> bool {
        let finite = [self.node, self.pod].into_iter().flatten().find(|r| !r.is_complement());
        match finite {
            Some(r) => r.values().any(|v| {
                self.allows(v)
                    && match self.group.counts.get(v) {
                        Some(c) => f(v, *c),
                        None => self.group.key == labels::HOSTNAME && f(v, 0),
                    }
            }),
            None => self.group.counts.iter().any(|(d, c)| self.allows(d) && f(d, *c)),
        }
    }
}
