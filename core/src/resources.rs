//! Resource lists and the arithmetic Karpenter does on them (upstream `pkg/utils/resources`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::quantity::{Quantity, QuantityError};

/// Resource name → quantity, ordered by name so that every rendering is deterministic.
pub type ResourceList = BTreeMap<String, Quantity>;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const PODS: &str = "pods";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// Adds `b` into `a`, key by key.
pub fn add_into(a: &mut ResourceList, b: &ResourceList) {
    for (name, q) in b {
        // A key already there is not cloned: this runs for every pod on every node.
        match a.get_mut(name) {
            Some(slot) => *slot += *q,
            None => {
                a.insert(name.clone(), Quantity::ZERO.with_format(q.format()) + *q);
            }
        }
    }
}

/// Takes `b` from `a`, key by key; keys only in `b` appear negated.
pub fn subtract_into(a: &mut ResourceList, b: &ResourceList) {
    for (name, q) in b {
        match a.get_mut(name) {
            Some(slot) => *slot -= *q,
            None => {
                a.insert(name.clone(), Quantity::ZERO.with_format(q.format()) - *q);
            }
        }
    }
}

/// `a + b`, key by key.
pub fn merge(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    add_into(&mut out, b);
    out
}

/// `a - b`, key by key; keys only in `b` appear negated.
pub fn subtract(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    subtract_into(&mut out, b);
    out
}

/// Key-wise maximum.
pub fn max_of(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (name, q) in b {
        out.entry(name.clone()).and_modify(|cur| *cur = Quantity::max(*cur, *q)).or_insert(*q);
    }
    out
}

/// upstream `resources.Fits`: every requested quantity is ≤ the available one, a resource missing
/// from `available` counts as zero, and any negative available quantity means nothing fits.
pub fn fits(requests: &ResourceList, available: &ResourceList) -> bool {
    if available.values().any(Quantity::is_negative) {
        return false;
    }
    requests.iter().all(|(name, q)| *q <= available.get(name).copied().unwrap_or(Quantity::ZERO))
}

/// A resource list laid out for the scheduler's inner loops: cpu, memory, pods and
/// ephemeral-storage in fixed slots (absent = 0), any other resource in a short sorted list.
/// [`fits`](Packed::fits) answers exactly what [`fits`] answers for the lists it was built from,
/// without a map lookup per resource.
#[derive(Debug, Clone, Default)]
pub struct Packed {
    common: [Quantity; 4],
    other: Vec<(String, Quantity)>,
    any_negative: bool,
}

const COMMON: [&str; 4] = [CPU, MEMORY, PODS, EPHEMERAL_STORAGE];

impl Packed {
    pub fn new(list: &ResourceList) -> Packed {
        let mut packed = Packed::default();
        for (name, q) in list {
            match COMMON.iter().position(|c| c == name) {
                Some(i) => packed.common[i] = *q,
                None => packed.other.push((name.clone(), *q)),
            }
            packed.any_negative |= q.is_negative();
        }
        packed
    }

    /// The quantity of `resource` (0 when absent).
    pub fn get(&self, resource: &str) -> Quantity {
        match COMMON.iter().position(|c| *c == resource) {
            Some(i) => self.common[i],
            None => self.other.iter().find(|(n, _)| n == resource).map_or(Quantity::ZERO, |(_, q)| *q),
        }
    }

    /// [`fits`]`(self, available)`.
    pub fn fits(&self, available: &Packed) -> bool {
        if available.any_negative {
            return false;
        }
        self.common.iter().zip(&available.common).all(|(want, have)| want <= have)
            && self.other.iter().all(|(name, want)| {
                *want <= available.other.iter().find(|(n, _)| n == name).map_or(Quantity::ZERO, |(_, q)| *q)
            })
    }
}

/// The first resource (by name) `requests` needs more of than `available` has.
pub fn first_exceeded<'a>(requests: &'a ResourceList, available: &ResourceList) -> Option<&'a str> {
    requests
        .iter()
        .find(|(name, q)| **q > available.get(*name).copied().unwrap_or(Quantity::ZERO))
        .map(|(name, _)| name.as_str())
}

/// The resources of `requests` that do not fit into `available`, for explanations.
pub fn exceeded<'a>(requests: &'a ResourceList, available: &ResourceList) -> Vec<&'a str> {
    requests
        .iter()
        .filter(|(name, q)| **q > available.get(*name).copied().unwrap_or(Quantity::ZERO))
        .map(|(name, _)| name.as_str())
        .collect()
}

/// Parses a k8s-openapi resource map exactly; errors name the offending resource.
pub fn from_k8s(
    map: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Result<ResourceList, (String, QuantityError)> {
    map.iter().map(|(k, v)| Quantity::try_from(v).map(|q| (k.clone(), q)).map_err(|e| (k.clone(), e))).collect()
}

/// A container's effective requests: its requests, with limits standing in for requests it does
/// not set (the API server defaults requests to limits when a pod is created; manifests read
/// offline have not been through it).
fn container_requests(c: &Container) -> Result<ResourceList, (String, QuantityError)> {
    let Some(resources) = &c.resources else { return Ok(ResourceList::new()) };
    let mut out = resources.limits.as_ref().map(from_k8s).transpose()?.unwrap_or_default();
    if let Some(requests) = &resources.requests {
        out.extend(from_k8s(requests)?);
    }
    Ok(out)
}

/// The requests a pod needs from a node, exactly as upstream computes them (Karpenter uses the
/// Kubernetes resource helper `PodRequests`, then adds `pods: 1`):
/// - regular containers and restartable init containers ("sidecars") are summed;
/// - each ordinary init container needs its own requests plus the sidecars started before it;
///   the pod needs the maximum of that and the running sum;
/// - pod-level `spec.resources.requests` replace the aggregate for the resources they name;
/// - `spec.overhead` is added;
/// - while an in-place resize is in progress, a container's `status.containerStatuses[].allocatedResources`
///   count when larger than its spec;
/// - `pods: 1`.
pub fn pod_requests(pod: &Pod) -> Result<ResourceList, (String, QuantityError)> {
    let mut total = ResourceList::new();
    let Some(spec) = &pod.spec else {
        total.insert(PODS.to_string(), Quantity::from_units(1));
        return Ok(total);
    };
    let allocated: BTreeMap<&str, ResourceList> = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|cs| Some((cs.name.as_str(), cs.allocated_resources.as_ref()?)))
        .map(|(name, r)| from_k8s(r).map(|r| (name, r)))
        .collect::<Result<_, _>>()?;
    for c in &spec.containers {
        let mut req = container_requests(c)?;
        if let Some(a) = allocated.get(c.name.as_str()) {
            req = max_of(&req, a);
        }
        add_into(&mut total, &req);
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in spec.init_containers.iter().flatten() {
        let req = container_requests(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            add_into(&mut sidecars, &req);
            add_into(&mut total, &req);
            init_max = max_of(&init_max, &sidecars);
        } else {
            init_max = max_of(&init_max, &merge(&req, &sidecars));
        }
    }
    total = max_of(&total, &init_max);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        total.extend(from_k8s(pod_level)?);
    }
    if let Some(overhead) = &spec.overhead {
        add_into(&mut total, &from_k8s(overhead)?);
    }
    total.insert(PODS.to_string(), Quantity::from_units(1));
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rl(pairs: &[(&str, &str)]) -> ResourceList {
        pairs.iter().map(|(k, v)| (k.to_string(), Quantity::parse(v).unwrap())).collect()
    }

    #[test]
    fn fits_treats_missing_as_zero_and_negative_as_nothing() {
        assert!(fits(&rl(&[("cpu", "1")]), &rl(&[("cpu", "2")])));
        assert!(!fits(&rl(&[("nvidia.com/gpu", "1")]), &rl(&[("cpu", "2")])));
        assert!(!fits(&rl(&[("cpu", "1")]), &rl(&[("cpu", "2"), ("memory", "-1")])));
        assert!(fits(&rl(&[]), &rl(&[("cpu", "0")])));
        assert_eq!(
            exceeded(&rl(&[("cpu", "3"), ("memory", "1Gi")]), &rl(&[("cpu", "2"), ("memory", "2Gi")])),
            vec!["cpu"]
        );
    }

    proptest::proptest! {
        /// The packed layout answers exactly what the map comparison answers.
        #[test]
        fn packed_fits_agrees_with_fits(
            requests in proptest::collection::btree_map(
                proptest::sample::select(vec!["cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu", "example.com/x"]),
                -2i64..6, 0..6),
            available in proptest::collection::btree_map(
                proptest::sample::select(vec!["cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu", "example.com/x"]),
                -1i64..6, 0..6),
        ) {
            let to_list = |m: &BTreeMap<&str, i64>| -> ResourceList {
                m.iter().map(|(k, v)| (k.to_string(), Quantity::from_units(*v))).collect()
            };
            let (r, a) = (to_list(&requests), to_list(&available));
            proptest::prop_assert_eq!(Packed::new(&r).fits(&Packed::new(&a)), fits(&r, &a));
        }
    }

    #[test]
    fn arithmetic_is_keywise() {
        let a = rl(&[("cpu", "1"), ("memory", "1Gi")]);
        let b = rl(&[("cpu", "500m"), ("pods", "1")]);
        assert_eq!(merge(&a, &b), rl(&[("cpu", "1500m"), ("memory", "1Gi"), ("pods", "1")]));
        assert_eq!(subtract(&a, &b), rl(&[("cpu", "500m"), ("memory", "1Gi"), ("pods", "-1")]));
        assert_eq!(max_of(&a, &b), rl(&[("cpu", "1"), ("memory", "1Gi"), ("pods", "1")]));
    }

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}),
        )
        .unwrap()
    }

    fn container(name: &str, cpu: &str, memory: &str) -> serde_json::Value {
        serde_json::json!({"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}})
    }

    #[test]
    fn pod_requests_sum_containers_and_add_one_pod() {
        let p = pod(serde_json::json!({"containers": [container("a", "1", "1Gi"), container("b", "500m", "512Mi")]}));
        assert_eq!(pod_requests(&p).unwrap(), rl(&[("cpu", "1500m"), ("memory", "1536Mi"), ("pods", "1")]));
    }

    #[test]
    fn pod_requests_take_init_maximum_and_sidecars() {
        let mut sidecar = container("side", "200m", "100Mi");
        sidecar["restartPolicy"] = "Always".into();
        let p = pod(serde_json::json!({
            "initContainers": [container("init-big", "3", "10Mi"), sidecar, container("init-late", "2900m", "10Mi")],
            "containers": [container("main", "1", "1Gi")],
            "overhead": {"cpu": "100m"}
        }));
        // running: 1 + 0.2 = 1.2; init-big: 3; init-late: 2.9 + 0.2 sidecar = 3.1 → 3.1 + overhead 0.1.
        let r = pod_requests(&p).unwrap();
        assert_eq!(r["cpu"], Quantity::parse("3200m").unwrap());
        assert_eq!(r["memory"], Quantity::parse("1124Mi").unwrap());
        assert_eq!(r["pods"], Quantity::from_units(1));
    }

    #[test]
    fn limits_stand_in_for_missing_requests_and_pod_level_resources_win() {
        let p = pod(serde_json::json!({
            "containers": [{"name": "a", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}}}],
            "resources": {"requests": {"memory": "3Gi"}}
        }));
        assert_eq!(
            pod_requests(&p).unwrap(),
            rl(&[("cpu", "1"), ("nvidia.com/gpu", "1"), ("memory", "3Gi"), ("pods", "1")])
        );
    }

    #[test]
    fn bad_quantities_name_the_resource() {
        let p = pod(serde_json::json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}));
        assert_eq!(pod_requests(&p).unwrap_err().0, "cpu");
    }
}
