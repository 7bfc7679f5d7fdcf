//! One key's allowed values (upstream `pkg/scheduling/requirement.go`, v1.14.1): a finite set or
//! its complement, optional integer bounds and `minValues`, with intersection and compatibility.

use super::*;

/// A label key prepared for repeated lookups ([`Requirements::get_interned`]).
#[derive(Debug, Clone)]
pub struct InternedKey(pub(super) Key);

impl InternedKey {
    pub fn new(key: &str) -> InternedKey {
        InternedKey(Key::new(key))
    }
}

/// The set of values a label key may take.
///
/// Representation (upstream's): `complement` says whether `values` lists the allowed values or the excluded ones;
/// `gte`/`lte` are inclusive integer bounds, and when present only integer values are allowed. Values are kept
/// sorted and unique. Equality is structural, like upstream's tests (`Gt 1 ∩ NotIn [1 2]` is `NotIn [2] >=2`).
///
/// The value list is reference-counted and well-known keys are `'static` (other keys reference-counted), so cloning
/// a requirement (and a [`Requirements`]) costs one or two reference-count increments, like upstream's pointer
/// copies; an intersection equal to one of its inputs shares that input's values instead of copying them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub(super) key: Key,
    pub(super) complement: bool,
    pub(super) values: Arc<[String]>,
    pub(super) gte: Option<i64>,
    pub(super) lte: Option<i64>,
    pub(super) min_values: Option<i64>,
}

/// The shared empty value list (no allocation per `Exists`/`DoesNotExist`).
pub(super) fn no_values() -> Arc<[String]> {
    static EMPTY: OnceLock<Arc<[String]>> = OnceLock::new();
    EMPTY.get_or_init(|| Arc::from(Vec::new())).clone()
}

pub(super) fn sorted_unique<S: AsRef<str>>(values: &[S]) -> Arc<[String]> {
    if values.is_empty() {
        return no_values();
    }
    // Already sorted and unique (one value, or the catalogue's lists): copy straight into the shared list.
    if values.windows(2).all(|w| w[0].as_ref() < w[1].as_ref()) {
        return values.iter().map(|v| v.as_ref().to_string()).collect();
    }
    let mut out: Vec<String> = values.iter().map(|v| v.as_ref().to_string()).collect();
    out.sort_unstable();
    out.dedup();
    Arc::from(out)
}

/// Go's `strconv.Atoi` on a 64-bit platform: optional sign, ASCII digits, no spaces or underscores.
pub(super) fn parse_int(value: &str) -> Option<i64> {
    value.parse::<i64>().ok()
}

pub(super) fn within_bounds(value: &str, gte: Option<i64>, lte: Option<i64>) -> bool {
    if gte.is_none() && lte.is_none() {
        return true;
    }
    match parse_int(value) {
        Some(n) => gte.is_none_or(|g| n >= g) && lte.is_none_or(|l| n <= l),
        None => false,
    }
}

pub(super) fn contains(sorted: &[String], value: &str) -> bool {
    sorted.binary_search_by(|probe| probe.as_str().cmp(value)).is_ok()
}

pub(super) fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

pub(super) fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Which elements a sorted merge keeps: those only in `a`, only in `b`, in both.
#[derive(Clone, Copy)]
pub(super) struct Keep {
    pub(super) a_only: bool,
    pub(super) b_only: bool,
    pub(super) both: bool,
}

/// Sorted-merge set operation on two sorted, unique lists, keeping only values within the bounds. Calls `emit`
/// with each kept value and which side(s) it came from (`0` = a only, `1` = b only, `2` = both), in order.
pub(super) fn merge_walk<'v>(
    a: &'v [String],
    b: &'v [String],
    keep: Keep,
    gte: Option<i64>,
    lte: Option<i64>,
    mut emit: impl FnMut(&'v String, u8),
) {
    use std::cmp::Ordering;
    let (mut i, mut j) = (0, 0);
    let mut push = |v: &'v String, side: u8| {
        if within_bounds(v, gte, lte) {
            emit(v, side);
        }
    };
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Ordering::Less => {
                if keep.a_only {
                    push(&a[i], 0);
                }
                i += 1;
            }
            Ordering::Greater => {
                if keep.b_only {
                    push(&b[j], 1);
                }
                j += 1;
            }
            Ordering::Equal => {
                if keep.both {
                    push(&a[i], 2);
                }
                i += 1;
                j += 1;
            }
        }
    }
    if keep.a_only {
        a[i..].iter().for_each(|v| push(v, 0));
    }
    if keep.b_only {
        b[j..].iter().for_each(|v| push(v, 1));
    }
}

/// The merge result as a shared list: if it equals `a` or `b` (the common case, e.g. `Exists ∩ X` or a subset),
/// that list is shared; otherwise a new one is built.
pub(super) fn merge(
    a: &Arc<[String]>,
    b: &Arc<[String]>,
    keep: Keep,
    gte: Option<i64>,
    lte: Option<i64>,
) -> Arc<[String]> {
    let mut counts = [0usize; 3];
    merge_walk(a, b, keep, gte, lte, |_, side| counts[side as usize] += 1);
    let [a_only, b_only, both] = counts;
    if a_only + b_only + both == 0 {
        return no_values();
    }
    if b_only == 0 && a_only + both == a.len() {
        return a.clone();
    }
    if a_only == 0 && b_only + both == b.len() {
        return b.clone();
    }
    let mut out = Vec::with_capacity(a_only + b_only + both);
    merge_walk(a, b, keep, gte, lte, |v, _| out.push(v.clone()));
    Arc::from(out)
}

impl Requirement {
    /// Builds a requirement (upstream `NewRequirement`). The key is normalised ([`labels::normalize_key`]).
    ///
    /// - `In v…` allows exactly the values (no values: nothing, i.e. `DoesNotExist`);
    /// - `NotIn v…` allows everything but the values; `Exists` everything; `DoesNotExist` nothing (values ignored
    ///   for `Exists`/`DoesNotExist`, as upstream);
    /// - `Gt n` is `Exists` with `gte = n+1` (`Gt i64::MAX` is `DoesNotExist`); `Lt n` is `Exists` with
    ///   `lte = n-1` (`Lt i64::MIN` is `DoesNotExist`; upstream's Go overflows there); `Gte`/`Lte` set the bound.
    ///   They need exactly one value that parses as an integer (upstream assumes prior validation; it also requires
    ///   the value to be non-negative, which is the validation layer's business, not the algebra's).
    pub fn new<S: AsRef<str>>(key: &str, op: Operator, values: &[S]) -> Result<Requirement, RequirementError> {
        let key = Key::new(labels::normalize_key(key));
        let base = |complement: bool, values: Arc<[String]>, key: Key| Requirement {
            key,
            complement,
            values,
            gte: None,
            lte: None,
            min_values: None,
        };
        let bound = || -> Result<i64, RequirementError> {
            match values {
                [single] => parse_int(single.as_ref()),
                _ => None,
            }
            .ok_or_else(|| RequirementError::NeedsOneInteger {
                key: key.to_string(),
                operator: op,
                values: values.iter().map(|v| v.as_ref().to_string()).collect(),
            })
        };
        Ok(match op {
            Operator::In => base(false, sorted_unique(values), key),
            Operator::NotIn => base(true, sorted_unique(values), key),
            Operator::Exists => base(true, no_values(), key),
            Operator::DoesNotExist => base(false, no_values(), key),
            Operator::Gt => match bound()?.checked_add(1) {
                Some(n) => Requirement { gte: Some(n), ..base(true, no_values(), key) },
                None => base(false, no_values(), key),
            },
            Operator::Lt => match bound()?.checked_sub(1) {
                Some(n) => Requirement { lte: Some(n), ..base(true, no_values(), key) },
                None => base(false, no_values(), key),
            },
            Operator::Gte => {
                let n = bound()?;
                Requirement { gte: Some(n), ..base(true, no_values(), key) }
            }
            Operator::Lte => {
                let n = bound()?;
                Requirement { lte: Some(n), ..base(true, no_values(), key) }
            }
        })
    }

    /// `key Exists` (infallible shorthand).
    pub fn exists(key: &str) -> Requirement {
        Requirement {
            key: Key::new(labels::normalize_key(key)),
            complement: true,
            values: no_values(),
            gte: None,
            lte: None,
            min_values: None,
        }
    }

    /// `key DoesNotExist` (infallible shorthand).
    pub fn does_not_exist(key: &str) -> Requirement {
        Requirement { complement: false, ..Requirement::exists(key) }
    }

    /// `key In [values]` (infallible shorthand).
    pub fn in_values<S: AsRef<str>>(key: &str, values: &[S]) -> Requirement {
        Requirement { complement: false, values: sorted_unique(values), ..Requirement::exists(key) }
    }

    /// `key NotIn [values]` (infallible shorthand).
    pub fn not_in<S: AsRef<str>>(key: &str, values: &[S]) -> Requirement {
        Requirement { values: sorted_unique(values), ..Requirement::exists(key) }
    }

    /// Sets `minValues` (upstream `NewRequirementWithFlexibility`).
    pub fn with_min_values(mut self, min: Option<i64>) -> Requirement {
        self.min_values = min;
        self
    }

    /// The (normalised) label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The derived operator, as upstream: a complement is `NotIn` if it excludes values, else `Exists`; a finite set
    /// is `In` if non-empty, else `DoesNotExist`. Bounded requirements therefore report `Exists` (or `NotIn`), and
    /// never `Gt`/`Lt`/`Gte`/`Lte`.
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => Operator::Exists,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    /// True if the value list is a list of exclusions (`NotIn`/`Exists`, possibly bounded).
    pub fn is_complement(&self) -> bool {
        self.complement
    }

    /// The listed values, sorted: the allowed values of an `In`, the excluded values of a `NotIn`.
    pub fn values(&self) -> impl Iterator<Item = &str> + '_ {
        self.values.iter().map(String::as_str)
    }

    /// The number of allowed values: the value count for `In`/`DoesNotExist`; for a complement, upstream's
    /// `MaxInt64 - excluded` ([`UNBOUNDED_LEN`] minus the number of exclusions; bounds are not counted).
    pub fn len(&self) -> usize {
        if self.complement {
            UNBOUNDED_LEN - self.values.len()
        } else {
            self.values.len()
        }
    }

    /// True if [`len`](Self::len) is 0: a finite set with no values (`DoesNotExist`).
    pub fn is_empty(&self) -> bool {
        !self.complement && self.values.is_empty()
    }

    /// True if the requirement allows `value`: membership (non-membership for a complement) and, when bounds exist,
    /// `value` parses as an integer within them. Non-integers never satisfy a bounded requirement.
    pub fn has(&self, value: &str) -> bool {
        contains(&self.values, value) != self.complement && within_bounds(value, self.gte, self.lte)
    }

    /// `minValues`, if set.
    pub fn min_values(&self) -> Option<i64> {
        self.min_values
    }

    /// The inclusive lower bound (`Gt n` gives `n+1`).
    pub fn gte(&self) -> Option<i64> {
        self.gte
    }

    /// The inclusive upper bound (`Lt n` gives `n-1`).
    pub fn lte(&self) -> Option<i64> {
        self.lte
    }

    /// The values allowed by both (upstream `Intersection`); the key is `self`'s.
    ///
    /// Complement iff both are; bounds are the tightest of the two, and if they cross the result is
    /// `DoesNotExist`; values are the union of exclusions (both complements), the set minus the exclusions (one
    /// complement) or the set intersection; values outside the bounds are dropped; a finite result drops its bounds;
    /// `minValues` is the larger of the two.
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let complement = self.complement && other.complement;
        let mut gte = max_opt(self.gte, other.gte);
        let mut lte = min_opt(self.lte, other.lte);
        let min_values = max_opt(self.min_values, other.min_values);
        if let (Some(g), Some(l)) = (gte, lte) {
            if g > l {
                return Requirement {
                    key: self.key.clone(),
                    complement: false,
                    values: no_values(),
                    gte: None,
                    lte: None,
                    min_values,
                };
            }
        }
        let keep = match (self.complement, other.complement) {
            // union of exclusions
            (true, true) => Keep { a_only: true, b_only: true, both: true },
            // other's values minus self's exclusions
            (true, false) => Keep { a_only: false, b_only: true, both: false },
            // self's values minus other's exclusions
            (false, true) => Keep { a_only: true, b_only: false, both: false },
            // set intersection
            (false, false) => Keep { a_only: false, b_only: false, both: true },
        };
        let values = merge(&self.values, &other.values, keep, gte, lte);
        if !complement {
            gte = None;
            lte = None;
        }
        Requirement { key: self.key.clone(), complement, values, gte, lte, min_values }
    }

    /// True if some value is allowed by both (upstream `HasIntersection`, without building the intersection).
    ///
    /// As upstream, two complements always intersect unless their bounds cross, even if the exclusions happen to
    /// cover the whole bounded range.
    pub fn intersects(&self, other: &Requirement) -> bool {
        let gte = max_opt(self.gte, other.gte);
        let lte = min_opt(self.lte, other.lte);
        if let (Some(g), Some(l)) = (gte, lte) {
            if g > l {
                return false;
            }
        }
        match (self.complement, other.complement) {
            (true, true) => true,
            (true, false) => other.values.iter().any(|v| !contains(&self.values, v) && within_bounds(v, gte, lte)),
            (false, true) => self.values.iter().any(|v| !contains(&other.values, v) && within_bounds(v, gte, lte)),
            (false, false) => {
                let (small, large) = if self.values.len() <= other.values.len() {
                    (&self.values, &other.values)
                } else {
                    (&other.values, &self.values)
                };
                small.iter().any(|v| contains(large, v) && within_bounds(v, gte, lte))
            }
        }
    }

    /// A value the requirement allows, chosen deterministically (replaces upstream's `Any()`, which picks a random
    /// member or a random integer):
    ///
    /// - `In`: the smallest value (byte-wise string order);
    /// - `NotIn`/`Exists` (possibly bounded): the smallest integer not excluded, counting up from the lower bound,
    ///   or from 0 when there is none (from the upper bound when that is negative); if the range above the start is
    ///   exhausted and there is no lower bound, the largest allowed integer below the start. The result always
    ///   satisfies [`has`](Self::has). `None` if no integer qualifies (exclusions cover a bounded range);
    /// - `DoesNotExist`: `None` (upstream returns `""`).
    pub fn any_value(&self) -> Option<String> {
        if !self.complement {
            return self.values.first().cloned();
        }
        let allowed = |n: i64| !contains(&self.values, &n.to_string());
        let start = match (self.gte, self.lte) {
            (Some(g), _) => g,
            (None, Some(l)) if l < 0 => l,
            _ => 0,
        };
        let mut n = start;
        loop {
            if self.lte.is_some_and(|l| n > l) {
                break;
            }
            if allowed(n) {
                return Some(n.to_string());
            }
            match n.checked_add(1) {
                Some(next) => n = next,
                None => break,
            }
        }
        if self.gte.is_none() {
            let mut n = start;
            while let Some(prev) = n.checked_sub(1) {
                n = prev;
                if allowed(n) {
                    return Some(n.to_string());
                }
            }
        }
        None
    }

    /// The requirement as NodeSelectorRequirementWithMinValues (upstream `NodeSelectorRequirement` /
    /// `BoundedNodeSelectorRequirements`): a bounded requirement becomes `Gte n` and/or `Lte n` (two entries when
    /// both bounds exist; like upstream, exclusions of a bounded complement are not serialised); otherwise the
    /// derived operator with the sorted values. `minValues` is carried on every entry.
    pub fn to_node_selector_requirements(&self) -> Vec<NodeSelectorRequirementWithMinValues> {
        let entry = |operator: Operator, values: Vec<String>| NodeSelectorRequirementWithMinValues {
            key: self.key.to_string(),
            operator,
            values,
            min_values: self.min_values,
        };
        match (self.gte, self.lte) {
            (Some(g), Some(l)) => {
                vec![entry(Operator::Gte, vec![g.to_string()]), entry(Operator::Lte, vec![l.to_string()])]
            }
            (Some(g), None) => vec![entry(Operator::Gte, vec![g.to_string()])],
            (None, Some(l)) => vec![entry(Operator::Lte, vec![l.to_string()])],
            (None, None) => {
                let op = self.operator();
                let values =
                    if matches!(op, Operator::In | Operator::NotIn) { self.values.to_vec() } else { Vec::new() };
                vec![entry(op, values)]
            }
        }
    }
}

/// Upstream `String()`: `key Op [v1 v2 …]` (only In/NotIn list values; at most 5, then `and N others`), then
/// ` >=n`, ` <=n` and ` minValues n` when set.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = self.operator();
        write!(f, "{} {}", self.key, op)?;
        if matches!(op, Operator::In | Operator::NotIn) {
            f.write_str(" [")?;
            for (i, v) in self.values.iter().take(5).enumerate() {
                if i > 0 {
                    f.write_str(" ")?;
                }
                f.write_str(v)?;
            }
            if self.values.len() > 5 {
                write!(f, " and {} others", self.values.len() - 5)?;
            }
            f.write_str("]")?;
        }
        if let Some(g) = self.gte {
            write!(f, " >={g}")?;
        }
        if let Some(l) = self.lte {
            write!(f, " <={l}")?;
        }
        if let Some(m) = self.min_values {
            write!(f, " minValues {m}")?;
        }
        Ok(())
    }
}
