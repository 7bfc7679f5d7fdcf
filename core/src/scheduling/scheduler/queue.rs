//! The queue (upstream `scheduling/queue.go` and `scheduler.go::Solve`/`trySchedule`/`add`,
//! v1.14.1): pods in order, each tried on existing nodes, this round's NodeClaims, then a new
//! NodeClaim per NodePool, relaxing preferences one step per failure.

use super::*;

impl Round<'_> {
    /// Upstream `Solve`: the queue with its retry semantics. Returns the pods left, with the
    /// relaxation state of their last attempt.
    pub(super) fn solve(&mut self) -> Vec<(usize, Preferences, Vec<Relaxation>)> {
        let mut order: Vec<usize> = (0..self.pods.len()).collect();
        // upstream queue order: cpu desc, memory desc, creation asc, uid asc (then input order).
        order.sort_by(|&a, &b| {
            let (p, q) = (&self.pods[a], &self.pods[b]);
            q.cpu_millis
                .cmp(&p.cpu_millis)
                .then_with(|| q.memory_bytes.cmp(&p.memory_bytes))
                .then_with(|| p.creation.cmp(&q.creation))
                .then_with(|| p.uid.cmp(&q.uid))
        });
        let mut queue: VecDeque<usize> = order.into();
        let mut last_len: Vec<Option<usize>> = vec![None; self.pods.len()];
        let mut last_state: Vec<Option<(Preferences, Vec<Relaxation>)>> = vec![None; self.pods.len()];
        while let Some(&p) = queue.front() {
            // A full cycle without progress: the head was pushed when the queue had this length.
            if last_len[p] == Some(queue.len()) {
                break;
            }
            queue.pop_front();
            match self.try_schedule(p) {
                Ok(relaxations) => {
                    last_state[p] = None;
                    if !relaxations.is_empty() {
                        self.relaxed.push((p, relaxations));
                    }
                }
                Err(state) => {
                    last_state[p] = Some(state);
                    queue.push_back(p);
                    last_len[p] = Some(queue.len());
                }
            }
        }
        queue
            .into_iter()
            .map(|p| {
                let (prefs, relaxations) = last_state[p].take().unwrap_or_default();
                (p, prefs, relaxations)
            })
            .collect()
    }

    /// Upstream `trySchedule`: add, relax one step on failure, retry until nothing relaxes.
    pub(super) fn try_schedule(&mut self, p: usize) -> Result<Vec<Relaxation>, (Preferences, Vec<Relaxation>)> {
        let mut prefs = Preferences::default();
        let mut relaxations = Vec::new();
        loop {
            match self.add(p, &prefs) {
                Ok(()) => return Ok(relaxations),
                // upstream: a reserved-offering error is never relaxed; the pod may fit once other
                // NodeClaims release reservations, or in the next round.
                Err(Unplaced::Deferred) => return Err((prefs, relaxations)),
                Err(Unplaced::Failed) => {}
            }
            match prefs.relax(&self.pods[p], self.tolerate_prefer_no_schedule) {
                Some(r) => {
                    self.topology.activate(p, &prefs);
                    relaxations.push(r);
                }
                None => return Err((prefs, relaxations)),
            }
        }
    }

    /// Upstream `Scheduler.add`: existing nodes, then this round's NodeClaims, then a new one.
    pub(super) fn add(&mut self, p: usize, prefs: &Preferences) -> Result<(), Unplaced> {
        let pod = &self.pods[p];
        let requirements = pod.requirements(prefs);
        let tolerations = pod.tolerations(prefs);
        // A cheap topology pre-check, computed once for the attempt: most nodes a topology pod
        // tries are rejected by topology, and this rejects them without building any set.
        let prepared = if self.topology.involves(p) {
            self.topology.prepare(p, pod, prefs, &pod.strict_requirements(prefs), &requirements)
        } else {
            None
        };
        let topology_may_admit = |node: &Requirements| prepared.as_ref().is_none_or(|t| t.may_admit(node));
        // Only whether a node admits the pod matters here, so the cheapest checks go first and
        // no rejection is built for a full node.
        if let Some(i) = self.nodes.iter().position(|n| {
            // upstream v1.14: a candidate's pod skips nodes inside their consolidateAfter window.
            !(pod.from_candidate && n.under_consolidate_after)
                && resources::fits(&pod.requests, &n.available)
                && topology_may_admit(&n.requirements)
                && n.can_add(pod, &requirements, &tolerations).is_ok()
                && self.node_topology(n, p, prefs, &requirements).is_ok()
        }) {
            let node = &mut self.nodes[i];
            node.available = resources::subtract(&node.available, &pod.requests);
            node.host_ports.extend(pod.host_ports.iter().cloned());
            node.volumes.add(&pod.volumes);
            node.placed.push(p);
            self.topology.record(p, &node.requirements, &node.taints);
            return Ok(());
        }
        // upstream: `sort.Slice(newNodeClaims, by pod count)` before every attempt on them. Go's
        // sort leaves a sorted slice as it is, so only an unsorted order needs the full algorithm.
        let counts = &self.claim_pod_counts;
        if !self.claim_order.is_sorted_by_key(|&c| counts[c]) {
            crate::scheduling::go_sort::sort_slice(&mut self.claim_order, |&a, &b| counts[a] < counts[b]);
        }
        let limits = self.topology.hostname_limits(p, pod, prefs);
        let every_claim_full = limits.iter().any(|(g, limit)| {
            *limit == 0 && self.claims_hosting.iter().any(|(h, n)| h == g && *n == self.claims.len())
        });
        let candidates = if every_claim_full { None } else { Some(self.claim_order.iter()) };
        let found = candidates.into_iter().flatten().find_map(|&c| {
            let claim = &self.claims[c];
            let full = limits
                .iter()
                .any(|(g, limit)| claim.host_counts.iter().find(|(h, _)| h == g).map_or(0, |(_, n)| *n) > *limit);
            if full {
                return None;
            }
            if !topology_may_admit(&claim.requirements) {
                return None;
            }
            self.claim_can_add(claim, p, prefs, &requirements, &tolerations).ok().map(|a| (c, a))
        });
        if let Some((c, addition)) = found {
            self.commit(c, p, addition);
            return Ok(());
        }
        for t in 0..self.templates.len() {
            let Ok(claim) = self.new_claim(t) else { continue };
            let attempt = self.claim_can_add(&claim, p, prefs, &requirements, &tolerations);
            // upstream: a reserved-offering error keeps every lower-weight NodePool from winning.
            if let Err(ClaimRejection::Reservations(_)) = attempt {
                return Err(Unplaced::Deferred);
            }
            if let Ok(addition) = attempt {
                self.claims.push(claim);
                let c = self.claims.len() - 1;
                self.claim_order.push(c);
                self.claim_pod_counts.push(0);
                self.commit(c, p, addition);
                // upstream: subtract the element-wise max capacity over the options, once, now
                // (only the limited resources matter).
                let (claims, tpl) = (&self.claims, &mut self.templates[t]);
                if !tpl.remaining.is_empty() {
                    for (resource, remaining) in tpl.remaining.iter_mut() {
                        let max = claims[c]
                            .options
                            .iter()
                            .map(|&o| tpl.options[o as usize].capacity.get(resource))
                            .max()
                            .unwrap_or(Quantity::ZERO);
                        *remaining -= max;
                    }
                    *tpl.within_limits.get_mut() = None;
                }
                return Ok(());
            }
        }
        Err(Unplaced::Failed)
    }

    pub(super) fn commit(&mut self, c: usize, p: usize, addition: Addition) {
        let pod = &self.pods[p];
        let claim = &mut self.claims[c];
        self.claim_pod_counts[c] += 1;
        claim.requirements = addition.requirements;
        claim.options = addition.options;
        claim.min_values_relaxed |= addition.relaxed_min_values;
        self.reservations.commit(&mut claim.reservations, addition.reservations);
        resources::add_into(&mut claim.requests, &pod.requests);
        claim.host_ports.extend(pod.host_ports.iter().cloned());
        claim.pods.push(p);
        let taints = &self.templates[claim.template].taints;
        for g in self.topology.record(p, &claim.requirements, taints) {
            match claim.host_counts.iter_mut().find(|(h, _)| *h == g) {
                Some((_, n)) => *n += 1,
                None => {
                    claim.host_counts.push((g, 1));
                    match self.claims_hosting.iter_mut().find(|(h, _)| *h == g) {
                        Some((_, n)) => *n += 1,
                        None => self.claims_hosting.push((g, 1)),
                    }
                }
            }
        }
    }
}
