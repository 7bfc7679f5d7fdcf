//! A set of requirements keyed by label (upstream `pkg/scheduling/requirements.go`, v1.14.1):
//! building from node selectors and affinity terms, adding (intersecting), compatibility with its
//! reasons, and the preferred-term helpers.

use super::requirement::*;
use super::*;

/// Which keys [`Requirements::compatible`] lets the incoming side use without the existing side defining them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AllowUndefined {
    /// Every key the incoming side constrains must be defined (existing-node checks).
    #[default]
    Nothing,
    /// Well-known labels may be undefined (upstream `AllowUndefinedWellKnownLabels`; NodeClaim and offering checks).
    WellKnownLabels,
}

/// One key on which two requirement sets have no value in common.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyConflict {
    pub key: String,
    /// The incoming side's requirement (e.g. the pod's).
    pub incoming: Requirement,
    /// The existing side's requirement (e.g. the NodeClaim's or node's).
    pub existing: Requirement,
}

impl fmt::Display for KeyConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key {}, {} not in {}", self.key, self.incoming, self.existing)
    }
}

/// Why two requirement sets are incompatible. `Display` uses upstream's wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IncompatibleReason {
    /// The incoming side constrains a key the existing side does not define (and the incoming operator is not
    /// `NotIn`/`DoesNotExist`, and the key is not allowed undefined): `label "K" does not have known values`, plus
    /// ` (typo of "X"?)` when a similar key is known.
    UndefinedLabel { key: String, incoming: Box<Requirement>, hint: Option<String> },
    /// Keys defined on both sides with no common value, sorted by key (upstream joins them with `"; "`):
    /// `key K, <incoming> not in <existing>`. Never empty.
    Conflicts(Vec<KeyConflict>),
}

impl IncompatibleReason {
    /// The first offending key.
    pub fn key(&self) -> &str {
        match self {
            IncompatibleReason::UndefinedLabel { key, .. } => key,
            IncompatibleReason::Conflicts(conflicts) => conflicts.first().map_or("", |c| c.key.as_str()),
        }
    }
}

impl fmt::Display for IncompatibleReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IncompatibleReason::UndefinedLabel { key, hint, .. } => {
                write!(f, "label {key:?} does not have known values")?;
                if let Some(hint) = hint {
                    write!(f, " (typo of {hint:?}?)")?;
                }
                Ok(())
            }
            IncompatibleReason::Conflicts(conflicts) => {
                for (i, c) in conflicts.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{c}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for IncompatibleReason {}

/// A set of requirements, one per key (upstream `Requirements`). Iteration is sorted by key.
///
/// Kept as a vector sorted by key, keys unique: sets are small (tens of keys), so lookups are binary searches,
/// comparisons are merge walks, and a clone is one allocation.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Requirements {
    pub(super) list: Vec<Requirement>,
}

/// Prints as a map from key to requirement.
impl fmt::Debug for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Map<'a>(&'a [Requirement]);
        impl fmt::Debug for Map<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_map().entries(self.0.iter().map(|r| (&r.key, r))).finish()
            }
        }
        f.debug_struct("Requirements").field("map", &Map(&self.list)).finish()
    }
}

pub(super) fn is_not_in_or_does_not_exist(op: Operator) -> bool {
    matches!(op, Operator::NotIn | Operator::DoesNotExist)
}

/// A shared key conflicts when the two requirements have no common value, unless both operators are
/// `NotIn`/`DoesNotExist` (upstream tolerates that non-overlap).
pub(super) fn conflicts(existing: &Requirement, incoming: &Requirement) -> bool {
    let tolerated =
        is_not_in_or_does_not_exist(incoming.operator()) && is_not_in_or_does_not_exist(existing.operator());
    !(tolerated || existing.intersects(incoming))
}

impl Requirements {
    /// No requirements.
    pub fn new() -> Self {
        Requirements::default()
    }

    /// No requirements, with room for `capacity` keys.
    pub fn with_capacity(capacity: usize) -> Self {
        Requirements { list: Vec::with_capacity(capacity) }
    }

    /// A clone with room for `additional` more keys (no reallocation when they are added).
    pub(crate) fn clone_with_room(&self, additional: usize) -> Requirements {
        let mut list = Vec::with_capacity(self.list.len() + additional);
        list.extend_from_slice(&self.list);
        Requirements { list }
    }

    /// The position of `key`, or where it would be inserted.
    pub(super) fn find(&self, key: &str) -> Result<usize, usize> {
        self.list.binary_search_by(|r| (*r.key).cmp(key))
    }

    /// [`find`](Self::find) for an insertion: requirements are usually added in key order, so the end is checked
    /// first.
    pub(super) fn find_for_insert(&self, key: &str) -> Result<usize, usize> {
        match self.list.last() {
            None => Err(0),
            Some(last) if &*last.key < key => Err(self.list.len()),
            Some(_) => self.find(key),
        }
    }

    /// Adds `r`, intersecting it with any requirement already present for its key (upstream `Add`).
    pub fn add(&mut self, r: Requirement) {
        match self.find_for_insert(&r.key) {
            Ok(i) => self.list[i] = r.intersection(&self.list[i]),
            Err(i) => self.list.insert(i, r),
        }
    }

    /// Adds every requirement of `other`.
    pub fn add_all(&mut self, other: &Requirements) {
        for r in &other.list {
            match self.find_for_insert(&r.key) {
                Ok(i) => self.list[i] = r.intersection(&self.list[i]),
                Err(i) => self.list.insert(i, r.clone()),
            }
        }
    }

    /// The requirement for `key`, or `key Exists` when absent (upstream `Get`). Clones; see [`get_ref`].
    ///
    /// [`get_ref`]: Self::get_ref
    pub fn get(&self, key: &str) -> Requirement {
        self.get_ref(key).cloned().unwrap_or_else(|| Requirement::exists(key))
    }

    /// The requirement for `key`, if defined.
    pub fn get_ref(&self, key: &str) -> Option<&Requirement> {
        self.find(key).ok().map(|i| &self.list[i])
    }

    /// The requirement for `key`: a well-known key is found by identity, another by binary search.
    pub(super) fn lookup(&self, key: &Key) -> Option<&Requirement> {
        match key {
            Key::Static(wanted) => {
                self.list.iter().find(|r| matches!(&r.key, Key::Static(k) if std::ptr::eq(*k, *wanted)))
            }
            Key::Shared(wanted) => self.get_ref(wanted),
        }
    }

    /// [`get_ref`](Self::get_ref) with a key interned once for many lookups: a well-known key is
    /// found by identity, without comparing strings.
    pub fn get_interned(&self, key: &InternedKey) -> Option<&Requirement> {
        self.lookup(&key.0)
    }

    /// True if `key` is defined.
    pub fn has(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Removes and returns the requirement for `key`.
    pub fn remove(&mut self, key: &str) -> Option<Requirement> {
        self.find(key).ok().map(|i| self.list.remove(i))
    }

    /// The defined keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.list.iter().map(|r| &*r.key)
    }

    /// The requirements, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = &Requirement> + '_ {
        self.list.iter()
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True if no key is defined.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// True if any requirement carries `minValues`.
    pub fn has_min_values(&self) -> bool {
        self.list.iter().any(|r| r.min_values.is_some())
    }

    /// Every key defined on both sides must have a common value (upstream `Intersects`); keys defined on one side
    /// only are ignored. A non-overlap is tolerated when both sides' operators are `NotIn` or `DoesNotExist`.
    /// `self` is the existing side, `other` the incoming one. All conflicting keys are reported, sorted.
    pub fn intersects(&self, other: &Requirements) -> Result<(), IncompatibleReason> {
        let mut conflicts = Vec::new();
        self.for_each_conflict(other, |key, existing, incoming| {
            conflicts.push(KeyConflict {
                key: key.to_string(),
                incoming: incoming.clone(),
                existing: existing.clone(),
            });
            true
        });
        if conflicts.is_empty() {
            Ok(())
        } else {
            Err(IncompatibleReason::Conflicts(conflicts))
        }
    }

    /// [`intersects`](Self::intersects) without building the reason (no allocation).
    pub fn has_intersection(&self, other: &Requirements) -> bool {
        // A few incoming keys against a large set (a NodeClaim's narrowed keys against an
        // instance type's): look each up instead of walking the whole set.
        if other.list.len() * 8 <= self.list.len() {
            return other
                .list
                .iter()
                .all(|incoming| self.lookup(&incoming.key).is_none_or(|existing| !conflicts(existing, incoming)));
        }
        let mut ok = true;
        self.for_each_conflict(other, |_, _, _| {
            ok = false;
            false
        });
        ok
    }

    /// Calls `f(key, existing, incoming)` for each conflicting shared key in key order while `f` returns true.
    /// Walks both sorted maps together (a merge join), so no lookups and no allocation.
    pub(super) fn for_each_conflict<'a>(
        &'a self,
        other: &'a Requirements,
        mut f: impl FnMut(&'a str, &'a Requirement, &'a Requirement) -> bool,
    ) {
        use std::cmp::Ordering;
        let mut mine = self.list.iter();
        let mut theirs = other.list.iter();
        let (mut a, mut b) = (mine.next(), theirs.next());
        while let (Some(existing), Some(incoming)) = (a, b) {
            match existing.key.cmp(&incoming.key) {
                Ordering::Less => a = mine.next(),
                Ordering::Greater => b = theirs.next(),
                Ordering::Equal => {
                    if conflicts(existing, incoming) && !f(&existing.key, existing, incoming) {
                        return;
                    }
                    a = mine.next();
                    b = theirs.next();
                }
            }
        }
    }

    /// The first key of `other` (in key order) that `self` does not define and that is not tolerated. A merge
    /// walk over both sorted lists.
    pub(super) fn first_undefined<'a>(
        &self,
        other: &'a Requirements,
        allow_undefined: AllowUndefined,
    ) -> Option<&'a Requirement> {
        let mut mine = self.list.iter().peekable();
        other.list.iter().find(|incoming| {
            let key = &incoming.key;
            while mine.next_if(|r| r.key < *key).is_some() {}
            // Cheapest test first; the three exemptions are independent.
            !(mine.next_if(|r| r.key == *key).is_some()
                || is_not_in_or_does_not_exist(incoming.operator())
                || (allow_undefined == AllowUndefined::WellKnownLabels && labels::is_well_known(key)))
        })
    }

    /// Whether `other` (the incoming side, e.g. a pod) can be met by `self` (upstream `Compatible`):
    ///
    /// 1. every key of `other` must be defined by `self`, unless its operator is `NotIn`/`DoesNotExist` or it is
    ///    allowed undefined; the first failing key (in key order) is reported with a typo hint, tried against the
    ///    well-known labels (only when they are allowed undefined, as upstream) and then against `self`'s keys;
    /// 2. then [`intersects`](Self::intersects).
    pub fn compatible(&self, other: &Requirements, allow_undefined: AllowUndefined) -> Result<(), IncompatibleReason> {
        if self.is_compatible(other, allow_undefined) {
            return Ok(());
        }
        if let Some(incoming) = self.first_undefined(other, allow_undefined) {
            let key: &str = &incoming.key;
            let hint = match allow_undefined {
                AllowUndefined::WellKnownLabels => {
                    labels::typo_hint(key, labels::well_known_labels_hint_order().iter().copied())
                }
                AllowUndefined::Nothing => None,
            }
            .or_else(|| labels::typo_hint(key, self.keys()));
            return Err(IncompatibleReason::UndefinedLabel {
                key: key.to_string(),
                incoming: Box::new(incoming.clone()),
                hint,
            });
        }
        self.intersects(other)
    }

    /// [`compatible`](Self::compatible) without building the reason: one merge walk over both sorted maps, no
    /// allocation.
    pub fn is_compatible(&self, other: &Requirements, allow_undefined: AllowUndefined) -> bool {
        let mut mine = self.list.iter().peekable();
        for incoming in &other.list {
            let key = &incoming.key;
            while mine.next_if(|r| r.key < *key).is_some() {}
            match mine.next_if(|r| r.key == *key) {
                Some(existing) => {
                    if conflicts(existing, incoming) {
                        return false;
                    }
                }
                None => {
                    let exempt = is_not_in_or_does_not_exist(incoming.operator())
                        || (allow_undefined == AllowUndefined::WellKnownLabels && labels::is_well_known(key));
                    if !exempt {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// The labels these requirements pin down: every `In` requirement with exactly one value, except
    /// `kubernetes.io/hostname` (restricted) and the scheduling-simulation keys `karpenter.sh/registered` and
    /// `karpenter.sh/initialized`. (Upstream v1.14.1 has no `Requirements.Labels()` any more; see
    /// [`resolve_custom_labels`](Self::resolve_custom_labels) for what NodeClaim creation adds.)
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.list
            .iter()
            .filter(|r| {
                let key: &str = &r.key;
                !r.complement
                    && r.values.len() == 1
                    && !labels::RESTRICTED_LABELS.contains(&key)
                    && !labels::SCHEDULING_SIMULATION_KEYS.contains(&key)
            })
            .map(|r| (r.key.to_string(), r.values[0].clone()))
            .collect()
    }

    /// Upstream v1.14.1 `NodeClaimTemplate.resolveCustomLabelsFromRequirements`: for every key that is not
    /// well-known, not restricted (`kubernetes.io/hostname`) and not a scheduling-simulation key, a concrete value
    /// from [`Requirement::any_value`] (deterministic here; random upstream). `DoesNotExist` keys get none.
    pub fn resolve_custom_labels(&self) -> BTreeMap<String, String> {
        self.list
            .iter()
            .filter(|r| {
                let key: &str = &r.key;
                !labels::is_well_known(key)
                    && !labels::RESTRICTED_LABELS.contains(&key)
                    && !labels::SCHEDULING_SIMULATION_KEYS.contains(&key)
            })
            .filter_map(|r| r.any_value().map(|v| (r.key.to_string(), v)))
            .collect()
    }

    /// All requirements as NodeSelectorRequirementWithMinValues, sorted by key (a requirement with both bounds
    /// gives two entries).
    pub fn to_node_selector_requirements(&self) -> Vec<NodeSelectorRequirementWithMinValues> {
        self.list.iter().flat_map(Requirement::to_node_selector_requirements).collect()
    }

    /// Upstream `NewNodeSelectorRequirementsWithMinValues`.
    pub fn from_node_selector_requirements(
        items: &[NodeSelectorRequirementWithMinValues],
    ) -> Result<Requirements, RequirementError> {
        let mut out = Requirements::new();
        for item in items {
            out.add(Requirement::new(&item.key, item.operator, &item.values)?.with_min_values(item.min_values));
        }
        Ok(out)
    }

    /// Upstream `NewLabelRequirements`: `key In [value]` for every label.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Requirements {
        let mut out = Requirements::new();
        for (key, value) in labels {
            out.add(Requirement::in_values(key, &[value]));
        }
        out
    }

    /// Upstream `NewNodeSelectorRequirements` (core/v1 expressions; the operator is parsed from its string).
    pub fn from_k8s_node_selector_requirements(
        items: &[core::NodeSelectorRequirement],
    ) -> Result<Requirements, RequirementError> {
        let mut out = Requirements::new();
        out.add_k8s_expressions(items)?;
        Ok(out)
    }

    pub(super) fn add_k8s_expressions(
        &mut self,
        items: &[core::NodeSelectorRequirement],
    ) -> Result<(), RequirementError> {
        for item in items {
            let op = Operator::parse(&item.operator).ok_or_else(|| RequirementError::UnknownOperator {
                key: item.key.clone(),
                operator: item.operator.clone(),
            })?;
            let values: &[String] = item.values.as_deref().unwrap_or(&[]);
            self.add(Requirement::new(&item.key, op, values)?);
        }
        Ok(())
    }

    /// Upstream `NewPodRequirements`: the pod's nodeSelector (as `In`), the heaviest preferred node-affinity term
    /// (treated as required), and the first required node-selector term (terms are ORed; relaxation reaches the
    /// others). Among preferred terms of equal weight the first in the pod's list wins (upstream sorts with an
    /// unstable sort, so its choice among ties is unspecified). `matchFields` are ignored, as upstream.
    pub fn from_pod(pod: &core::Pod) -> Result<Requirements, RequirementError> {
        Requirements::pod_requirements(pod, true)
    }

    /// Upstream `NewStrictPodRequirements`: [`from_pod`](Self::from_pod) without the preferred term (used for
    /// topology domain selection and DaemonSet matching).
    pub fn from_pod_strict(pod: &core::Pod) -> Result<Requirements, RequirementError> {
        Requirements::pod_requirements(pod, false)
    }

    pub(super) fn pod_requirements(pod: &core::Pod, with_preferred: bool) -> Result<Requirements, RequirementError> {
        let mut out = Requirements::new();
        let Some(spec) = pod.spec.as_ref() else {
            return Ok(out);
        };
        if let Some(selector) = &spec.node_selector {
            out = Requirements::from_labels(selector);
        }
        let Some(affinity) = spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref()) else {
            return Ok(out);
        };
        if with_preferred {
            if let Some(heaviest) =
                heaviest_preferred_term(affinity.preferred_during_scheduling_ignored_during_execution.as_deref())
            {
                let term = Requirements::from_k8s_node_selector_requirements(
                    heaviest.preference.match_expressions.as_deref().unwrap_or(&[]),
                )?;
                out.add_all(&term);
            }
        }
        if let Some(first) = affinity
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .and_then(|s| s.node_selector_terms.first())
        {
            let term =
                Requirements::from_k8s_node_selector_requirements(first.match_expressions.as_deref().unwrap_or(&[]))?;
            out.add_all(&term);
        }
        Ok(out)
    }
}

/// The heaviest preferred term; the first one among equal weights.
pub fn heaviest_preferred_term(
    terms: Option<&[core::PreferredSchedulingTerm]>,
) -> Option<&core::PreferredSchedulingTerm> {
    let terms = terms?;
    let mut best: Option<&core::PreferredSchedulingTerm> = None;
    for term in terms {
        if best.is_none_or(|b| term.weight > b.weight) {
            best = Some(term);
        }
    }
    best
}

/// Upstream `Requirements.String()`: each requirement's string except restricted keys (`kubernetes.io/hostname`),
/// sorted, joined with `", "`.
impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self
            .list
            .iter()
            .filter(|r| !labels::RESTRICTED_LABELS.contains(&&*r.key))
            .map(Requirement::to_string)
            .collect();
        parts.sort_unstable();
        f.write_str(&parts.join(", "))
    }
}

impl FromIterator<Requirement> for Requirements {
    /// As [`add`](Requirements::add) of each in turn (requirements for the same key are intersected in order).
    fn from_iter<T: IntoIterator<Item = Requirement>>(iter: T) -> Self {
        let mut list: Vec<Requirement> = iter.into_iter().collect();
        if list.windows(2).all(|w| w[0].key < w[1].key) {
            return Requirements { list };
        }
        // Stable, so requirements for one key stay in the order given.
        list.sort_by(|a, b| a.key.cmp(&b.key));
        let mut out = Requirements::with_capacity(list.len());
        for r in list {
            match out.list.last_mut() {
                Some(last) if last.key == r.key => *last = r.intersection(last),
                _ => out.list.push(r),
            }
        }
        out
    }
}

impl Extend<Requirement> for Requirements {
    fn extend<T: IntoIterator<Item = Requirement>>(&mut self, iter: T) {
        for r in iter {
            self.add(r);
        }
    }
}

impl<'a> IntoIterator for &'a Requirements {
    type Item = &'a Requirement;
    type IntoIter = std::slice::Iter<'a, Requirement>;
    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}
