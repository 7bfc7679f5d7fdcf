//! Subnets (upstream `pkg/providers/subnet/subnet.go`, `pkg/controllers/nodeclass/subnet.go`): the
//! status lists every subnet the selectors found, the one with the most free IPs first (then by
//! ID); a launch uses one subnet per zone, the freest.
//!
//! Divergence (docs/divergences.md): upstream also subtracts the IPs of launches in flight from a
//! subnet's count until EC2 reports them; here the count is what DescribeSubnets last said.

use crate::api::ec2nodeclass::Subnet;

/// A subnet as DescribeSubnets returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredSubnet {
    pub id: String,
    pub zone: String,
    pub zone_id: String,
    pub available_ips: i64,
}

/// `status.subnets`: distinct by ID, most available IPs first, then by ID.
pub fn subnet_status(found: &[DiscoveredSubnet]) -> Vec<Subnet> {
    let mut found: Vec<&DiscoveredSubnet> = found.iter().collect();
    found.sort_by(|a, b| b.available_ips.cmp(&a.available_ips).then_with(|| a.id.cmp(&b.id)));
    found.dedup_by(|a, b| a.id == b.id);
    found.iter().map(|s| Subnet { id: s.id.clone(), zone: s.zone.clone(), zone_id: s.zone_id.clone() }).collect()
}

/// One subnet per zone for a launch: the first of each zone in `status.subnets` order (the
/// freest), by zone name.
pub fn zonal_subnets(status: &[Subnet]) -> std::collections::BTreeMap<&str, &Subnet> {
    let mut zonal = std::collections::BTreeMap::new();
    for s in status {
        zonal.entry(s.zone.as_str()).or_insert(s);
    }
    zonal
}
