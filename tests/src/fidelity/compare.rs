//! Compares one round of ours with upstream's on the same input, by equivalence classes rather
//! than names: the partition of pods into new NodeClaims (with each NodeClaim's NodePool, its
//! instance-type options and the price of its cheapest launchable offering), the pods planned
//! onto each existing node, and the set of pods left unscheduled.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use carpentry_core::catalogue::OfferingCompatibility;
use carpentry_core::requirements::{NodeSelectorRequirementWithMinValues, Requirements};
use carpentry_core::scheduling::Results;
use carpentry_core::state::Input;
use serde::Deserialize;

/// What the oracle prints for one scenario (tests/oracle/README.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OracleOutput {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub node_claims: Vec<OracleNodeClaim>,
    #[serde(default)]
    pub existing_nodes: Vec<OracleExisting>,
    #[serde(default)]
    pub unschedulable: Vec<OraclePodError>,
    #[serde(default)]
    pub ignored: Option<Vec<OraclePodError>>,
    #[serde(default)]
    pub solve_seconds: f64,
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OracleNodeClaim {
    pub node_pool: String,
    #[serde(default)]
    pub pods: Vec<String>,
    #[serde(default)]
    pub instance_type_options: Vec<String>,
    #[serde(default)]
    pub cheapest_instance_type: Option<String>,
    #[serde(default)]
    pub cheapest_price: Option<f64>,
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct OracleExisting {
    pub name: String,
    #[serde(default)]
    pub pods: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct OraclePodError {
    pub pod: String,
    #[serde(default)]
    pub reason: String,
}

/// One engine's round, reduced to what is compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// New NodeClaims keyed by their pod set (a pod is on at most one NodeClaim).
    pub nodeclaims: BTreeMap<BTreeSet<String>, ClaimSummary>,
    /// Existing node → pods planned onto it (nodes that got none are left out).
    pub existing: BTreeMap<String, BTreeSet<String>>,
    pub unschedulable: BTreeSet<String>,
}

/// Which pods are interchangeable: pods with the same namespace, labels and spec (replicas of one
/// workload, or identical standalone pods) share a class; which of two identical pods lands where
/// is a tie, not a decision.
#[derive(Debug, Clone, Default)]
pub struct PodClasses(BTreeMap<String, String>);

impl PodClasses {
    pub fn of(input: &Input) -> PodClasses {
        PodClasses(
            input
                .pods
                .iter()
                .map(|p| {
                    let key = carpentry_core::pod::PodRef::of(p).to_string();
                    let class = serde_json::to_string(&(&p.metadata.namespace, &p.metadata.labels, &p.spec))
                        .unwrap_or_else(|_| key.clone());
                    (key, class)
                })
                .collect(),
        )
    }

    fn composition<'a>(&self, pods: impl IntoIterator<Item = &'a String>) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for p in pods {
            *out.entry(self.0.get(p).cloned().unwrap_or_else(|| p.clone())).or_default() += 1;
        }
        out
    }
}

/// An outcome with pods replaced by their classes: NodeClaims as a sorted list of (composition,
/// NodePool, cheapest price in micro-dollars, options), existing nodes and unschedulable pods as
/// compositions.
type ClassClaim = (BTreeMap<String, usize>, String, Option<i64>, BTreeSet<String>);

/// NodeClaims, existing node → composition, unscheduled composition.
type ClassOutcome = (Vec<ClassClaim>, BTreeMap<String, BTreeMap<String, usize>>, BTreeMap<String, usize>);

fn up_to_ties(o: &Outcome, classes: &PodClasses) -> ClassOutcome {
    let mut claims: Vec<ClassClaim> = o
        .nodeclaims
        .iter()
        .map(|(pods, c)| {
            (
                classes.composition(pods),
                c.nodepool.clone(),
                c.cheapest.as_ref().map(|(_, p)| (p * 1e6).round() as i64),
                c.options.clone(),
            )
        })
        .collect();
    claims.sort();
    let existing = o.existing.iter().map(|(n, pods)| (n.clone(), classes.composition(pods))).collect();
    (claims, existing, classes.composition(&o.unschedulable))
}

/// The outcome without instance types, prices or zones: which pods (by class) share a NodeClaim
/// of which NodePool, which go to each existing node, and which stay unscheduled. Where upstream
/// picks a zone at random (the affinity bootstrap domain, spread ties), the types and prices
/// follow the zone; the packing and the pods left do not depend on which zone was drawn.
pub fn same_up_to_zone_choice(ours: &Outcome, upstream: &Outcome, classes: &PodClasses) -> bool {
    let coarse = |o: &Outcome| {
        let mut claims: Vec<_> =
            o.nodeclaims.iter().map(|(pods, c)| (classes.composition(pods), c.nodepool.clone())).collect();
        claims.sort();
        let existing: BTreeMap<_, _> =
            o.existing.iter().map(|(n, pods)| (n.clone(), classes.composition(pods))).collect();
        (claims, existing, classes.composition(&o.unschedulable))
    };
    coarse(ours) == coarse(upstream)
}

/// Whether the outcomes differ only in which interchangeable pod went where.
pub fn same_up_to_ties(ours: &Outcome, upstream: &Outcome, classes: &PodClasses) -> bool {
    up_to_ties(ours, classes) == up_to_ties(upstream, classes)
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClaimSummary {
    pub nodepool: String,
    pub options: BTreeSet<String>,
    pub cheapest: Option<(String, f64)>,
    /// Each option's cheapest launchable offering under the NodeClaim's requirements: the price
    /// upstream orders and truncates options by.
    pub option_prices: BTreeMap<String, f64>,
}

impl Outcome {
    /// Ours. Pods deferred for reserved capacity count as not scheduled this round, as upstream
    /// reports them among its pod errors.
    pub fn ours(input: &Input, r: &Results) -> Outcome {
        let nodeclaims = r
            .nodeclaims
            .iter()
            .map(|nc| {
                let pods = nc.pods.iter().map(ToString::to_string).collect();
                (pods, summary(input, &nc.nodepool, &nc.instance_type_options, &nc.requirements))
            })
            .collect();
        let existing = r
            .existing_nodes
            .iter()
            .filter(|n| !n.pods.is_empty())
            .map(|n| (n.name.clone(), n.pods.iter().map(ToString::to_string).collect()))
            .collect();
        let unschedulable = r
            .unschedulable
            .iter()
            .map(|u| u.pod.to_string())
            .chain(r.deferred.iter().map(|d| d.pod.to_string()))
            .collect();
        Outcome { nodeclaims, existing, unschedulable }
    }

    /// Upstream's, priced from the same input (its cheapest type as it reported it).
    pub fn upstream(input: &Input, o: &OracleOutput) -> Outcome {
        let nodeclaims = o
            .node_claims
            .iter()
            .map(|nc| {
                let mut s = summary(input, &nc.node_pool, &nc.instance_type_options, &nc.requirements);
                s.cheapest = nc.cheapest_instance_type.clone().zip(nc.cheapest_price);
                (nc.pods.iter().cloned().collect(), s)
            })
            .collect();
        let existing = o
            .existing_nodes
            .iter()
            .filter(|n| !n.pods.is_empty())
            .map(|n| (n.name.clone(), n.pods.iter().cloned().collect()))
            .collect();
        let unschedulable = o.unschedulable.iter().map(|u| u.pod.clone()).collect();
        Outcome { nodeclaims, existing, unschedulable }
    }
}

/// A NodeClaim's NodePool, options and their prices, and its cheapest launchable option: the
/// cheapest available offering compatible with its requirements (what the cloud provider pays).
fn summary(
    input: &Input,
    nodepool: &str,
    options: &[String],
    requirements: &[NodeSelectorRequirementWithMinValues],
) -> ClaimSummary {
    let mut out = ClaimSummary {
        nodepool: nodepool.to_string(),
        options: options.iter().cloned().collect(),
        cheapest: None,
        option_prices: BTreeMap::new(),
    };
    let Some(np) = input.nodepools.iter().find(|n| n.nodepool.metadata.name.as_deref() == Some(nodepool)) else {
        return out;
    };
    let Ok(reqs) = Requirements::from_node_selector_requirements(requirements) else { return out };
    let compat = OfferingCompatibility::new(&reqs);
    for it in np.instance_types.iter().filter(|it| out.options.contains(&it.name)) {
        let price = it
            .offerings
            .iter()
            .filter(|o| o.available && compat.test(&o.requirements))
            .filter(|o| !super::export::is_unavailable(&input.unavailable_offerings, it, o))
            .map(|o| o.price)
            .fold(f64::INFINITY, f64::min);
        out.option_prices.insert(it.name.clone(), price);
    }
    out.cheapest = out
        .option_prices
        .iter()
        .filter(|(_, p)| p.is_finite())
        .min_by(|a, b| a.1.total_cmp(b.1).then_with(|| a.0.cmp(b.0)))
        .map(|(n, p)| (n.clone(), *p));
    out
}

/// Whether two option sets differ only by a tie at the truncation boundary: upstream orders
/// options by price with an unstable sort before keeping the first 600, so among types priced
/// like the most expensive kept one, which are kept is not decided.
fn boundary_tie(a: &ClaimSummary, b: &ClaimSummary) -> bool {
    let top = |c: &ClaimSummary| {
        c.option_prices.values().copied().filter(|p| p.is_finite()).fold(f64::NEG_INFINITY, f64::max)
    };
    let (ta, tb) = (top(a), top(b));
    a.options.len() == b.options.len()
        && same_price(ta, tb)
        && a.options.difference(&b.options).all(|t| a.option_prices.get(t).is_some_and(|p| same_price(*p, ta)))
        && b.options.difference(&a.options).all(|t| b.option_prices.get(t).is_some_and(|p| same_price(*p, tb)))
}

/// Prices equal up to float noise (JSON round trip).
fn same_price(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// One difference between the engines.
#[derive(Debug, Clone, PartialEq)]
pub enum Difference {
    Unschedulable { ours_only: BTreeSet<String>, upstream_only: BTreeSet<String> },
    Existing { node: String, ours: BTreeSet<String>, upstream: BTreeSet<String> },
    Partition { ours_only: Vec<BTreeSet<String>>, upstream_only: Vec<BTreeSet<String>> },
    NodePool { pods: BTreeSet<String>, ours: String, upstream: String },
    Cheapest { pods: BTreeSet<String>, ours: Option<(String, f64)>, upstream: Option<(String, f64)> },
    Options { pods: BTreeSet<String>, ours_only: BTreeSet<String>, upstream_only: BTreeSet<String> },
}

impl Difference {
    /// A short class name (for grouping divergences).
    pub fn kind(&self) -> &'static str {
        match self {
            Difference::Unschedulable { .. } => "unschedulable",
            Difference::Existing { .. } => "existing-node",
            Difference::Partition { .. } => "partition",
            Difference::NodePool { .. } => "nodepool",
            Difference::Cheapest { .. } => "cheapest-type",
            Difference::Options { .. } => "options",
        }
    }
}

fn short(set: &BTreeSet<String>, limit: usize) -> String {
    let mut s = set.iter().take(limit).cloned().collect::<Vec<_>>().join(", ");
    if set.len() > limit {
        let _ = write!(s, ", … ({} in all)", set.len());
    }
    format!("[{s}]")
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::Unschedulable { ours_only, upstream_only } => {
                write!(f, "unschedulable: only ours {}, only upstream {}", short(ours_only, 8), short(upstream_only, 8))
            }
            Difference::Existing { node, ours, upstream } => {
                write!(f, "existing node {node}: ours {}, upstream {}", short(ours, 8), short(upstream, 8))
            }
            Difference::Partition { ours_only, upstream_only } => {
                write!(f, "partition: NodeClaims only ours ")?;
                for p in ours_only.iter().take(4) {
                    write!(f, "{} ", short(p, 4))?;
                }
                write!(f, "({} in all); only upstream ", ours_only.len())?;
                for p in upstream_only.iter().take(4) {
                    write!(f, "{} ", short(p, 4))?;
                }
                write!(f, "({} in all)", upstream_only.len())
            }
            Difference::NodePool { pods, ours, upstream } => {
                write!(f, "NodeClaim {}: NodePool ours {ours}, upstream {upstream}", short(pods, 4))
            }
            Difference::Cheapest { pods, ours, upstream } => {
                write!(f, "NodeClaim {}: cheapest type ours {ours:?}, upstream {upstream:?}", short(pods, 4))
            }
            Difference::Options { pods, ours_only, upstream_only } => write!(
                f,
                "NodeClaim {}: instance-type options only ours {}, only upstream {}",
                short(pods, 4),
                short(ours_only, 6),
                short(upstream_only, 6)
            ),
        }
    }
}

/// Every difference between two outcomes (empty: they agree).
pub fn compare(ours: &Outcome, upstream: &Outcome) -> Vec<Difference> {
    let mut out = Vec::new();
    if ours.unschedulable != upstream.unschedulable {
        out.push(Difference::Unschedulable {
            ours_only: ours.unschedulable.difference(&upstream.unschedulable).cloned().collect(),
            upstream_only: upstream.unschedulable.difference(&ours.unschedulable).cloned().collect(),
        });
    }
    let nodes: BTreeSet<&String> = ours.existing.keys().chain(upstream.existing.keys()).collect();
    for node in nodes {
        let (a, b) = (
            ours.existing.get(node).cloned().unwrap_or_default(),
            upstream.existing.get(node).cloned().unwrap_or_default(),
        );
        if a != b {
            out.push(Difference::Existing { node: node.clone(), ours: a, upstream: b });
        }
    }
    let ours_only: Vec<_> = ours.nodeclaims.keys().filter(|k| !upstream.nodeclaims.contains_key(*k)).cloned().collect();
    let upstream_only: Vec<_> =
        upstream.nodeclaims.keys().filter(|k| !ours.nodeclaims.contains_key(*k)).cloned().collect();
    if !ours_only.is_empty() || !upstream_only.is_empty() {
        out.push(Difference::Partition { ours_only, upstream_only });
    }
    for (pods, a) in &ours.nodeclaims {
        let Some(b) = upstream.nodeclaims.get(pods) else { continue };
        if a.nodepool != b.nodepool {
            out.push(Difference::NodePool {
                pods: pods.clone(),
                ours: a.nodepool.clone(),
                upstream: b.nodepool.clone(),
            });
            continue;
        }
        let cheapest_agrees = match (&a.cheapest, &b.cheapest) {
            (None, None) => true,
            // Equal prices are a tie: either type is what the rules allow.
            (Some((_, x)), Some((_, y))) => same_price(*x, *y),
            _ => false,
        };
        if !cheapest_agrees {
            out.push(Difference::Cheapest {
                pods: pods.clone(),
                ours: a.cheapest.clone(),
                upstream: b.cheapest.clone(),
            });
        }
        if a.options != b.options && !boundary_tie(a, b) {
            out.push(Difference::Options {
                pods: pods.clone(),
                ours_only: a.options.difference(&b.options).cloned().collect(),
                upstream_only: b.options.difference(&a.options).cloned().collect(),
            });
        }
    }
    out
}
