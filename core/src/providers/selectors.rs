//! Selector terms → EC2 `Describe*` filter sets (upstream `subnet.go` / `securitygroup.go` /
//! `ami.go` `getFilterSets`). Terms are ORed, so each makes its own query; fields in a term are
//! ANDed filters. A tag value `*` means "the key exists" (`tag-key`); any other is `tag:<key>`.
//! IDs of several terms go in one query, as upstream batches them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::api::ec2nodeclass::{SecurityGroupSelectorTerm, SubnetSelectorTerm};

/// One EC2 filter: `Name` and its `Values` (ORed).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Filter {
    pub name: String,
    pub values: Vec<String>,
}

impl Filter {
    pub fn new(name: &str, values: &[&str]) -> Filter {
        Filter { name: name.to_string(), values: values.iter().map(|v| v.to_string()).collect() }
    }
}

/// The filters of a term's `tags`.
pub(crate) fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| if v == "*" { Filter::new("tag-key", &[k]) } else { Filter::new(&format!("tag:{k}"), &[v]) })
        .collect()
}

/// One query per tag term, and one `subnet-id` query for all ID terms.
pub fn subnet_queries(terms: &[SubnetSelectorTerm]) -> Vec<Vec<Filter>> {
    let ids: Vec<&str> = terms.iter().filter_map(|t| t.id.as_deref()).collect();
    let mut queries: Vec<Vec<Filter>> = Vec::new();
    if !ids.is_empty() {
        queries.push(vec![Filter::new("subnet-id", &ids)]);
    }
    queries.extend(terms.iter().filter(|t| t.id.is_none() && !t.tags.is_empty()).map(|t| tag_filters(&t.tags)));
    queries
}

/// One `group-id` query for all ID terms, one `group-name` query for all name terms, and one query
/// per tag term.
pub fn security_group_queries(terms: &[SecurityGroupSelectorTerm]) -> Vec<Vec<Filter>> {
    let ids: Vec<&str> = terms.iter().filter_map(|t| t.id.as_deref()).collect();
    let names: Vec<&str> = terms.iter().filter(|t| t.id.is_none()).filter_map(|t| t.name.as_deref()).collect();
    let mut queries: Vec<Vec<Filter>> = Vec::new();
    if !ids.is_empty() {
        queries.push(vec![Filter::new("group-id", &ids)]);
    }
    if !names.is_empty() {
        queries.push(vec![Filter::new("group-name", &names)]);
    }
    queries.extend(
        terms.iter().filter(|t| t.id.is_none() && t.name.is_none() && !t.tags.is_empty()).map(|t| tag_filters(&t.tags)),
    );
    queries
}
