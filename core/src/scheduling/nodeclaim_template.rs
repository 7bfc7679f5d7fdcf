//! A NodePool as the scheduler sees it (upstream `nodeclaimtemplate.go::NewNodeClaimTemplate`) and
//! the instance-type prefilter of scheduler construction (upstream `NewScheduler`: an instance type
//! survives when it is compatible with the template and has a compatible available offering; then
//! minValues is checked over the survivors).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use crate::api::nodepool::NodePool;
use crate::catalogue::{InstanceType, Offering, OfferingCompatibility};
use crate::labels;
use crate::quantity::Quantity;
use crate::requirements::{AllowUndefined, IncompatibleReason, Operator, Requirement, RequirementError, Requirements};
use crate::resources::ResourceList;

/// The requirements and labels every NodeClaim of a NodePool starts from.
#[derive(Debug, Clone)]
pub struct NodeClaimTemplate {
    pub nodepool: String,
    /// NodePool requirements (with minValues) ∩ template labels ∩ the nodepool and nodeclass labels.
    pub requirements: Requirements,
    /// Template labels plus `karpenter.sh/nodepool` and the nodeclass label.
    pub labels: BTreeMap<String, String>,
    /// `spec.limits` of the NodePool (capacity-based; see [`Rejection::ExceedsLimits`]).
    pub limits: ResourceList,
}

impl NodeClaimTemplate {
    pub fn new(nodepool: &NodePool) -> Result<NodeClaimTemplate, RequirementError> {
        let name = nodepool.metadata.name.clone().unwrap_or_default();
        let template = &nodepool.spec.template;
        let mut labels: BTreeMap<String, String> = template.metadata.labels.clone();
        labels.insert(labels::NODEPOOL.to_string(), name.clone());
        // upstream: the nodeclass label key is `<group>/<lowercase kind>` (karpenter.k8s.aws/ec2nodeclass).
        let class_ref = &template.spec.node_class_ref;
        labels.insert(format!("{}/{}", class_ref.group, class_ref.kind.to_lowercase()), class_ref.name.clone());
        let mut requirements = Requirements::from_node_selector_requirements(&template.spec.requirements)?;
        requirements.add_all(&Requirements::from_labels(&labels));
        let limits = nodepool.spec.limits.0.clone();
        Ok(NodeClaimTemplate { nodepool: name, requirements, labels, limits })
    }

    /// Filters `instance_types` the way scheduler construction does, keeping the reason for every
    /// instance type left out. Survivors are ordered by their cheapest compatible available
    /// offering, then by name (upstream sorts by price only, unstably; see docs/divergences.md).
    pub fn prefilter<'a>(&self, instance_types: &'a [InstanceType]) -> Prefilter<'a> {
        self.filter(instance_types, true)
    }

    /// [`prefilter`](Self::prefilter) without the reasons (`rejected` stays empty): what the
    /// scheduler needs every round, without building a conflict report per instance type left out.
    pub fn prefilter_survivors<'a>(&self, instance_types: &'a [InstanceType]) -> Prefilter<'a> {
        self.filter(instance_types, false)
    }

    fn filter<'a>(&self, instance_types: &'a [InstanceType], with_reasons: bool) -> Prefilter<'a> {
        let mut options = Vec::new();
        let mut rejected = Vec::new();
        // Offerings share one requirement set per zone and capacity type: test each set once.
        let compatibility = OfferingCompatibility::new(&self.requirements);
        for it in instance_types {
            match self.option(it, &compatibility, with_reasons) {
                Ok(option) => options.push(option),
                Err(Some(reason)) => rejected.push((it, reason)),
                Err(None) => {}
            }
        }
        options.sort_by(|a, b| {
            a.cheapest
                .partial_cmp(&b.cheapest)
                .unwrap_or(Ordering::Equal)
                .then_with(|| a.instance_type.name.cmp(&b.instance_type.name))
        });
        let min_values = satisfies_min_values(&options, &self.requirements);
        Prefilter { options, rejected, min_values }
    }

    /// The instance type as an option, or why not (`None` when reasons are not wanted).
    fn option<'a>(
        &self,
        it: &'a InstanceType,
        compatibility: &OfferingCompatibility<'_>,
        with_reasons: bool,
    ) -> Result<InstanceTypeOption<'a>, Option<Rejection>> {
        // upstream `compatible()`: instance types are checked on shared keys only (Intersects).
        if !it.requirements.has_intersection(&self.requirements) {
            return Err(with_reasons
                .then(|| it.requirements.intersects(&self.requirements).err().map(Rejection::Requirements))
                .flatten());
        }
        let mut offerings: Vec<&Offering> = Vec::new();
        let mut unavailable = 0usize;
        let mut incompatible = 0usize;
        for offering in &it.offerings {
            if !offering.available {
                unavailable += 1;
            } else if compatibility.test(&offering.requirements) {
                offerings.push(offering);
            } else {
                incompatible += 1;
            }
        }
        if offerings.is_empty() {
            if !with_reasons {
                return Err(None);
            }
            let first_incompatible = (incompatible > 0)
                .then(|| {
                    it.offerings.iter().filter(|o| o.available).find_map(|o| {
                        self.requirements.compatible(&o.requirements, AllowUndefined::WellKnownLabels).err()
                    })
                })
                .flatten();
            return Err(Some(Rejection::NoCompatibleOffering { unavailable, incompatible: first_incompatible }));
        }
        for (resource, limit) in &self.limits {
            let capacity = it.capacity.get(resource).copied().unwrap_or(Quantity::ZERO);
            if capacity > *limit {
                return Err(with_reasons.then(|| Rejection::ExceedsLimits {
                    resource: resource.clone(),
                    capacity,
                    limit: *limit,
                }));
            }
        }
        offerings
            .sort_by(|a, b| a.price.partial_cmp(&b.price).unwrap_or(Ordering::Equal).then_with(|| a.zone.cmp(&b.zone)));
        let cheapest = offerings[0].price;
        Ok(InstanceTypeOption { instance_type: it, offerings, cheapest })
    }
}

/// How many instance types a NodePool may launch and the cheapest of them, as a NodePool
/// explanation shows it ("which types does this NodePool allow, at what price?").
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedInstanceTypes {
    /// Instance types that survive the prefilter (upstream's scheduler-construction filter).
    pub count: usize,
    /// Instance types left out (requirements, no available offering, larger than a limit).
    pub rejected: usize,
    /// The cheapest survivors, cheapest first (at most `ALLOWED_TYPES_SHOWN`).
    pub cheapest: Vec<AllowedInstanceType>,
    /// The minValues shortfall, if the survivors cannot meet it (upstream launches nothing then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_values_shortfall: Option<String>,
}

/// One allowed instance type with its cheapest compatible available offering.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedInstanceType {
    pub name: String,
    pub cpu: String,
    pub memory: String,
    pub capacity_type: String,
    pub zone: String,
    /// USD per hour.
    pub price: f64,
    /// Spot prices are synthetic (no registry ships real ones).
    pub price_synthetic: bool,
    /// Zones with a compatible available offering.
    pub zones: usize,
}

/// How many allowed instance types an explanation lists.
pub const ALLOWED_TYPES_SHOWN: usize = 25;

impl Prefilter<'_> {
    /// The summary a NodePool explanation carries.
    pub fn allowed(&self) -> AllowedInstanceTypes {
        let cheapest = self
            .options
            .iter()
            .take(ALLOWED_TYPES_SHOWN)
            .map(|o| {
                let it = o.instance_type;
                let get = |r: &str| it.capacity.get(r).map(|q| q.to_string()).unwrap_or_default();
                let best = o.offerings[0];
                let zones: BTreeSet<&str> = o.offerings.iter().map(|x| x.zone.as_str()).collect();
                AllowedInstanceType {
                    name: it.name.clone(),
                    cpu: get("cpu"),
                    memory: get("memory"),
                    capacity_type: best.capacity_type.to_string(),
                    zone: best.zone.clone(),
                    price: best.price,
                    price_synthetic: matches!(best.price_source, crate::catalogue::PriceSource::SyntheticSpot),
                    zones: zones.len(),
                }
            })
            .collect();
        AllowedInstanceTypes {
            count: self.options.len(),
            rejected: self.rejected.len(),
            cheapest,
            min_values_shortfall: self.min_values.as_ref().err().map(|s| s.to_string()),
        }
    }
}

/// An instance type that survives the prefilter, with the offerings a NodeClaim could launch.
#[derive(Debug, Clone)]
pub struct InstanceTypeOption<'a> {
    pub instance_type: &'a InstanceType,
    /// Available offerings compatible with the template, cheapest first.
    pub offerings: Vec<&'a Offering>,
    pub cheapest: f64,
}

/// Why an instance type cannot serve a NodePool.
#[derive(Debug, Clone)]
pub enum Rejection {
    /// Its labels contradict the NodePool's requirements.
    Requirements(IncompatibleReason),
    /// No offering is both available and compatible (zone, capacity type…).
    NoCompatibleOffering { unavailable: usize, incompatible: Option<IncompatibleReason> },
    /// Its capacity of a limited resource is above the NodePool's limit (upstream compares capacity,
    /// not allocatable).
    ExceedsLimits { resource: String, capacity: Quantity, limit: Quantity },
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::Requirements(reason) => write!(f, "incompatible requirements: {reason}"),
            Rejection::NoCompatibleOffering { unavailable, incompatible: Some(reason) } => {
                write!(f, "no compatible available offering ({unavailable} unavailable; others: {reason})")
            }
            Rejection::NoCompatibleOffering { unavailable, incompatible: None } => {
                write!(f, "no available offering ({unavailable} unavailable)")
            }
            Rejection::ExceedsLimits { resource, capacity, limit } => {
                write!(f, "capacity {resource}={capacity} exceeds the NodePool limit {limit}")
            }
        }
    }
}

/// The result of the prefilter.
#[derive(Debug, Clone)]
pub struct Prefilter<'a> {
    pub options: Vec<InstanceTypeOption<'a>>,
    pub rejected: Vec<(&'a InstanceType, Rejection)>,
    /// upstream `SatisfiesMinValues` over the survivors in price order.
    pub min_values: Result<(), MinValuesShortfall>,
}

/// Keys whose minValues the instance-type options cannot reach, with the distinct values found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinValuesShortfall {
    pub keys: BTreeMap<String, (i64, usize)>,
}

impl std::fmt::Display for MinValuesShortfall {
    /// upstream wording: "minValues requirement is not met for label(s) (label(s)=[…])".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.keys.keys().map(String::as_str).collect();
        write!(f, "minValues requirement is not met for label(s) (label(s)=[{}])", keys.join(" "))?;
        for (key, (wanted, found)) in &self.keys {
            write!(f, "; {key} needs {wanted} distinct values, the options offer {found}")?;
        }
        Ok(())
    }
}

/// upstream `InstanceTypes.SatisfiesMinValues`: for each key carrying minValues, the union of the
/// options' values for that key (as the instance types state them) must reach minValues.
pub fn satisfies_min_values(
    options: &[InstanceTypeOption<'_>],
    requirements: &Requirements,
) -> Result<(), MinValuesShortfall> {
    satisfies_min_values_of(options.iter().map(|o| o.instance_type), requirements)
}

/// [`satisfies_min_values`] over any sequence of instance types.
pub fn satisfies_min_values_of<'a>(
    types: impl Iterator<Item = &'a InstanceType> + Clone,
    requirements: &Requirements,
) -> Result<(), MinValuesShortfall> {
    let mut keys = BTreeMap::new();
    for requirement in requirements.iter() {
        let Some(min) = requirement.min_values() else { continue };
        let mut values: BTreeSet<String> = BTreeSet::new();
        for it in types.clone() {
            let it_req: Requirement = it.requirements.get(requirement.key());
            if it_req.operator() == Operator::In {
                values.extend(it_req.values().map(str::to_string));
            }
        }
        if (values.len() as i64) < min {
            keys.insert(requirement.key().to_string(), (min, values.len()));
        }
    }
    if keys.is_empty() {
        Ok(())
    } else {
        Err(MinValuesShortfall { keys })
    }
}
