//! Which scale-up option CA takes (upstream `expander/*` at cluster-autoscaler-1.36.1; the chain in
//! `expander/factory/chain.go`): the `--expander` names run in order as filters, each keeping the
//! best options and all their ties, until one option is left; a pick among what is left always
//! ends the chain. Upstream picks uniformly at random (`rand.Int31n`); carpentry takes the first
//! in node-group name order (a deterministic choice, docs/divergences.md).
//!
//! - `least-waste` (the default): the smallest `(cpu·n − Σpod cpu)/(cpu·n) + (memory·n − Σpod
//!   memory)/(memory·n)`, over the template's **capacity**;
//! - `most-pods`: the most pods placed;
//! - `least-nodes`: the fewest new nodes;
//! - `random`: the pick itself.
//!
//! `priority` reads a ConfigMap of group-name regular expressions a scenario cannot give yet: every
//! option passes it, as upstream's passes all without a valid ConfigMap. `price` and
//! `grpc` are refused when the scenario loads ([`crate::api::clusterautoscaler`]).

/// One group's scale-up: what the estimator placed there.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleUpOption {
    pub group: String,
    pub node_count: usize,
    pub pod_count: usize,
    /// The placed pods' summed requests: CPU in cores, memory in bytes.
    pub pod_cpu: f64,
    pub pod_memory: f64,
    /// The template's capacity: CPU in cores, memory in bytes.
    pub node_cpu: f64,
    pub node_memory: f64,
}

impl ScaleUpOption {
    /// upstream `leastwaste` `wastedScore`.
    pub fn waste(&self) -> f64 {
        let n = self.node_count as f64;
        let (cpu, memory) = (self.node_cpu * n, self.node_memory * n);
        let part = |total: f64, used: f64| if total > 0.0 { (total - used) / total } else { 0.0 };
        part(cpu, self.pod_cpu) + part(memory, self.pod_memory)
    }
}

/// Why an expander kept the options it kept, for explanations.
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    pub chosen: ScaleUpOption,
    /// Each expander run, with the groups it kept.
    pub steps: Vec<(String, Vec<String>)>,
}

/// Runs `chain` over `options` (their order is node-group order); `None` when there is none.
pub fn choose(chain: &[String], mut options: Vec<ScaleUpOption>) -> Option<Expansion> {
    options.retain(|o| o.node_count > 0);
    options.sort_by(|a, b| a.group.cmp(&b.group));
    let mut steps = Vec::new();
    for expander in chain {
        if options.len() <= 1 {
            break;
        }
        options = match expander.as_str() {
            "least-waste" => keep_best(options, |o| -o.waste()),
            "most-pods" => keep_best(options, |o| o.pod_count as f64),
            "least-nodes" => keep_best(options, |o| -(o.node_count as f64)),
            // No priority ConfigMap in a scenario yet: every option passes, as upstream's does
            // without a valid one.
            "priority" => options,
            // `random` always leaves one; unknown names are refused when the scenario loads.
            _ => options.into_iter().take(1).collect(),
        };
        steps.push((expander.clone(), options.iter().map(|o| o.group.clone()).collect()));
    }
    let chosen = options.into_iter().next()?;
    Some(Expansion { chosen, steps })
}

/// The options with the highest `score`, ties all kept (upstream compares scores exactly).
fn keep_best(options: Vec<ScaleUpOption>, score: impl Fn(&ScaleUpOption) -> f64) -> Vec<ScaleUpOption> {
    let best = options.iter().map(&score).fold(f64::NEG_INFINITY, f64::max);
    options.into_iter().filter(|o| score(o) == best).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

    fn option(
        group: &str,
        nodes: usize,
        pods: usize,
        pod_cpu: f64,
        node_cpu: f64,
        node_memory_gib: f64,
    ) -> ScaleUpOption {
        ScaleUpOption {
            group: group.into(),
            node_count: nodes,
            pod_count: pods,
            pod_cpu,
            pod_memory: pods as f64 * GIB,
            node_cpu,
            node_memory: node_memory_gib * GIB,
        }
    }

    fn chain(names: &str) -> Vec<String> {
        names.split(',').map(String::from).collect()
    }

    #[test]
    fn least_waste_adds_the_cpu_and_memory_fractions_left_unused() {
        // 4 pods of 1 CPU / 1 GiB: two 2-vCPU 8 GiB nodes waste 0 + 0.75; one 8-vCPU 16 GiB node
        // wastes 0.5 + 0.75.
        let small = option("c-small", 2, 4, 4.0, 2.0, 8.0);
        let large = option("a-large", 1, 4, 4.0, 8.0, 16.0);
        assert!((small.waste() - 0.75).abs() < 1e-9 && (large.waste() - 1.25).abs() < 1e-9);
        let e = choose(&chain("least-waste"), vec![large.clone(), small.clone()]).unwrap();
        assert_eq!(e.chosen.group, "c-small");
        assert_eq!(e.steps, [("least-waste".to_string(), vec!["c-small".to_string()])]);
    }

    #[test]
    fn a_chain_filters_in_order_and_keeps_ties_for_the_next() {
        let a = option("a", 1, 2, 2.0, 4.0, 16.0);
        let b = option("b", 2, 2, 2.0, 2.0, 8.0);
        let c = option("c", 1, 1, 1.0, 2.0, 8.0);
        // most-pods keeps a and b (2 pods each); least-nodes then keeps a.
        let e = choose(&chain("most-pods,least-nodes"), vec![c.clone(), b.clone(), a.clone()]).unwrap();
        assert_eq!(e.chosen.group, "a");
        assert_eq!(e.steps[0].1, ["a", "b"]);
        // random, carpentry's pick: the first group by name.
        assert_eq!(choose(&chain("random"), vec![c.clone(), b.clone()]).unwrap().chosen.group, "b");
        // A tie left at the end of the chain: the first by name too.
        assert_eq!(choose(&chain("most-pods"), vec![b.clone(), a.clone()]).unwrap().chosen.group, "a");
        // priority without its ConfigMap passes every option on.
        let e = choose(&chain("priority,least-nodes"), vec![b.clone(), a.clone()]).unwrap();
        assert_eq!((e.chosen.group.as_str(), e.steps[0].1.len()), ("a", 2));
        // One option: no expander runs; none: no scale-up.
        assert_eq!(choose(&chain("least-waste"), vec![c.clone()]).unwrap().steps, []);
        assert_eq!(choose(&chain("least-waste"), vec![option("empty", 0, 0, 0.0, 2.0, 8.0)]), None);
    }
}
