//! Cost over simulated time: the $/hour of the instances running at every moment, per NodePool
//! and for the cluster, and the dollars spent so far. An instance costs from CreateFleet's answer
//! (Launched) until it is gone. Spot prices carry their "synthetic" label (core/data/PROVENANCE.md).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalogue::Catalogue;

use super::SimTime;

/// The rate from `at` until the next point.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CostPoint {
    pub at: SimTime,
    /// USD per hour, all instances.
    pub per_hour: f64,
    /// USD per hour by NodePool (`""`: nodes no NodePool owns).
    #[serde(rename = "byNodePool")]
    pub by_nodepool: BTreeMap<String, f64>,
}

/// The cost of a run so far.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CostSummary {
    pub at: SimTime,
    /// USD per hour now.
    pub per_hour: f64,
    /// USD per month at the current rate (730 hours, as AWS prices a month).
    pub per_month: f64,
    /// USD spent since the start.
    #[serde(rename = "total")]
    pub spent: f64,
    /// USD spent since the start, by NodePool.
    #[serde(rename = "totalByNodePool")]
    pub spent_by_nodepool: BTreeMap<String, f64>,
    /// Every change of rate.
    pub timeline: Vec<CostPoint>,
}

/// Hours in AWS's pricing month.
pub const HOURS_PER_MONTH: f64 = 730.0;

#[derive(Debug, Clone, Default)]
pub(super) struct Ledger {
    rate: BTreeMap<String, f64>,
    spent: BTreeMap<String, f64>,
    timeline: Vec<CostPoint>,
}

impl Ledger {
    /// Accrues the current rate over `[from, to)`.
    pub fn advance(&mut self, from: SimTime, to: SimTime) {
        let hours = to.since(from).0 as f64 / 3_600_000.0;
        for (np, rate) in &self.rate {
            *self.spent.entry(np.clone()).or_default() += rate * hours;
        }
    }

    /// The rate from `now` on; a point is recorded when it changes.
    pub fn set_rate(&mut self, now: SimTime, rate: BTreeMap<String, f64>) {
        if rate == self.rate && !self.timeline.is_empty() {
            return;
        }
        let per_hour = 0.0 + rate.values().sum::<f64>();
        match self.timeline.last_mut() {
            Some(last) if last.at == now => {
                last.per_hour = per_hour;
                last.by_nodepool = rate.clone();
            }
            _ => self.timeline.push(CostPoint { at: now, per_hour, by_nodepool: rate.clone() }),
        }
        self.rate = rate;
    }

    pub fn summary(&self, now: SimTime) -> CostSummary {
        let per_hour: f64 = 0.0 + self.rate.values().sum::<f64>();
        CostSummary {
            at: now,
            per_hour,
            per_month: per_hour * HOURS_PER_MONTH,
            spent: 0.0 + self.spent.values().sum::<f64>(),
            spent_by_nodepool: self.spent.clone(),
            timeline: self.timeline.clone(),
        }
    }
}

/// The price of a node from its labels (instance type, zone, capacity type) in the catalogue:
/// (USD per hour, synthetic). `None` when the labels do not name a catalogue offering.
pub fn node_price(catalogue: &Catalogue, region: &str, node_labels: &BTreeMap<String, String>) -> Option<(f64, bool)> {
    crate::scheduling::cloudprovider::launch_from_labels(catalogue, region, node_labels)
        .map(|l| (l.price, l.price_synthetic))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels;

    #[test]
    fn spending_integrates_the_rate() {
        let mut l = Ledger::default();
        l.set_rate(SimTime::ZERO, BTreeMap::from([("a".to_string(), 1.0)]));
        l.advance(SimTime::ZERO, SimTime::from_secs(1800));
        l.set_rate(SimTime::from_secs(1800), BTreeMap::from([("a".to_string(), 1.0), ("b".to_string(), 2.0)]));
        l.advance(SimTime::from_secs(1800), SimTime::from_secs(3600));
        let s = l.summary(SimTime::from_secs(3600));
        assert!((s.spent - 2.0).abs() < 1e-9, "{}", s.spent);
        assert!((s.spent_by_nodepool["b"] - 1.0).abs() < 1e-9);
        assert_eq!(s.per_hour, 3.0);
        assert_eq!(s.timeline.len(), 2);
        assert!((s.per_month - 3.0 * 730.0).abs() < 1e-9);
    }

    #[test]
    fn node_prices_come_from_the_catalogue() {
        let labels = BTreeMap::from([
            (labels::INSTANCE_TYPE.to_string(), "m5.large".to_string()),
            (labels::TOPOLOGY_ZONE.to_string(), "us-east-1a".to_string()),
            (labels::CAPACITY_TYPE.to_string(), "spot".to_string()),
        ]);
        let (price, synthetic) = node_price(Catalogue::embedded(), "us-east-1", &labels).unwrap();
        assert!(price > 0.0 && synthetic);
        let mut od = labels.clone();
        od.insert(labels::CAPACITY_TYPE.to_string(), "on-demand".to_string());
        let (od_price, synthetic) = node_price(Catalogue::embedded(), "us-east-1", &od).unwrap();
        assert!(!synthetic && od_price > price, "{od_price} vs {price}");
        assert!(node_price(Catalogue::embedded(), "us-east-1", &BTreeMap::new()).is_none());
    }
}
