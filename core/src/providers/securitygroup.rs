//! Security groups (upstream `pkg/controllers/nodeclass/securitygroup.go`): the status lists every
//! group the selectors found, by ID.

use crate::api::ec2nodeclass::SecurityGroup;

/// A security group as DescribeSecurityGroups returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredSecurityGroup {
    pub id: String,
    pub name: String,
}

/// `status.securityGroups`: distinct, sorted by ID.
pub fn security_group_status(found: &[DiscoveredSecurityGroup]) -> Vec<SecurityGroup> {
    let mut out: Vec<SecurityGroup> =
        found.iter().map(|g| SecurityGroup { id: g.id.clone(), name: g.name.clone() }).collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out.dedup_by(|a, b| a.id == b.id);
    out
}
