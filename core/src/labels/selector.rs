//! Kubernetes label selectors (`metav1.LabelSelectorAsSelector`): `matchLabels` and
//! `matchExpressions` (In, NotIn, Exists, DoesNotExist) ANDed. Upstream uses them for topology
//! groups, pod (anti-)affinity terms and PodDisruptionBudgets.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `selector` selects an object with `labels`. A selector with an unknown operator
/// selects nothing (upstream: an invalid selector becomes `labels.Nothing()`); an empty selector
/// selects everything.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    for (k, v) in selector.match_labels.iter().flatten() {
        if labels.get(k) != Some(v) {
            return false;
        }
    }
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or(&[]);
        let value = labels.get(&e.key);
        let ok = match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(yaml: &str) -> LabelSelector {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn selectors() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        assert!(matches(&selector("{}"), &labels));
        assert!(matches(&selector("{matchLabels: {app: web}}"), &labels));
        assert!(!matches(&selector("{matchLabels: {app: db}}"), &labels));
        assert!(matches(&selector("{matchExpressions: [{key: app, operator: In, values: [web, db]}]}"), &labels));
        assert!(!matches(&selector("{matchExpressions: [{key: app, operator: NotIn, values: [web]}]}"), &labels));
        assert!(matches(&selector("{matchExpressions: [{key: tier, operator: NotIn, values: [x]}]}"), &labels));
        assert!(matches(&selector("{matchExpressions: [{key: app, operator: Exists}]}"), &labels));
        assert!(!matches(&selector("{matchExpressions: [{key: app, operator: DoesNotExist}]}"), &labels));
        assert!(!matches(&selector("{matchExpressions: [{key: app, operator: Bogus}]}"), &labels));
    }
}
