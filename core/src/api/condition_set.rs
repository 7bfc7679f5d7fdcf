//! A status condition list with a root condition and its dependents (upstream
//! `awslabs/operatorpkg` `status/condition_set.go`, the version karpenter v1.14.1 pins): missing
//! dependents start `Unknown`, every write stamps the object's generation, a transition time moves
//! only when the status changes, and the root (`Ready`) is recomputed after each write — `True`
//! when every dependent is `True` at the current generation, `False` when one is `False` at it,
//! `Unknown` otherwise. Conditions are ordered by transition time with the root last, as upstream
//! sorts them for `kubectl`.

use super::Condition;

/// upstream `status.ConditionReady`.
pub const READY: &str = "Ready";

/// The dependent conditions `after` has `False` that `before` did not have `False` with the same
/// message: what the controller says in a Warning event on the object as well, where
/// `kubectl describe` shows it (carpentry; upstream publishes no event for a condition). `Ready`,
/// the roll-up of the others, is left out: its message only repeats theirs. A condition already
/// `False` when the controller starts is not said again.
pub fn turned_false<'a>(before: &'a [Condition], after: &'a [Condition]) -> impl Iterator<Item = &'a Condition> + 'a {
    after.iter().filter(move |c| {
        c.type_ != READY
            && c.status == "False"
            && !before.iter().any(|b| b.type_ == c.type_ && b.status == c.status && b.message == c.message)
    })
}

/// The conditions of one object being edited.
pub struct ConditionSet<'a> {
    list: &'a mut Vec<Condition>,
    dependents: &'a [&'a str],
    generation: Option<i64>,
    /// The object's creation time: a dependent first set "transitioned" then.
    created: &'a str,
    now: &'a str,
}

impl<'a> ConditionSet<'a> {
    /// upstream `NewReadyConditions(dependents...).For(object)`: the root and any dependent not
    /// yet present are set `Unknown`.
    pub fn new(
        list: &'a mut Vec<Condition>,
        dependents: &'a [&'a str],
        generation: Option<i64>,
        created: &'a str,
        now: &'a str,
    ) -> Self {
        let mut set = ConditionSet { list, dependents, generation, created, now };
        for t in std::iter::once(READY).chain(dependents.iter().copied()) {
            if !set.list.iter().any(|c| c.type_ == t) {
                set.set_unknown(t);
            }
        }
        set
    }

    /// `SetTrue`: reason = the type, no message.
    pub fn set_true(&mut self, type_: &str) {
        self.set(type_, "True", type_, "");
    }

    /// `SetFalse` with a reason and message.
    pub fn set_false(&mut self, type_: &str, reason: &str, message: &str) {
        self.set(type_, "False", reason, message);
    }

    /// `SetUnknown`: upstream's `AwaitingReconciliation`.
    pub fn set_unknown(&mut self, type_: &str) {
        self.set(type_, "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation");
    }

    /// The condition of `type_`, if set.
    pub fn get(&self, type_: &str) -> Option<&Condition> {
        self.list.iter().find(|c| c.type_ == type_)
    }

    fn set(&mut self, type_: &str, status: &str, reason: &str, message: &str) {
        let mut condition = Condition {
            last_transition_time: Some(self.now.to_string()),
            // Always written: NodePool's and EC2NodeClass's CRDs require it (operatorpkg writes
            // it even when empty).
            message: Some(message.to_string()),
            observed_generation: self.generation,
            reason: Some(reason.to_string()),
            status: status.to_string(),
            type_: type_.to_string(),
        };
        match self.list.iter().position(|c| c.type_ == type_) {
            Some(i) => {
                if self.list[i].status == status {
                    condition.last_transition_time = self.list[i].last_transition_time.clone();
                }
                if self.list[i] == condition {
                    return;
                }
                self.list.remove(i);
            }
            None if self.dependents.contains(&type_) => {
                condition.last_transition_time = Some(self.created.to_string());
            }
            None => {}
        }
        self.list.push(condition);
        // Stable: equal times keep their order; the root goes last.
        self.list.sort_by(|a, b| {
            (a.type_ == READY, a.last_transition_time.as_deref().unwrap_or(""))
                .cmp(&(b.type_ == READY, b.last_transition_time.as_deref().unwrap_or("")))
        });
        if type_ != READY {
            self.recompute_root();
        }
    }

    fn recompute_root(&mut self) {
        let mut unhealthy: Vec<&Condition> = self
            .list
            .iter()
            .filter(|c| self.dependents.contains(&c.type_.as_str()))
            .filter(|c| !c.is_true() || c.observed_generation != self.generation)
            .collect();
        if unhealthy.is_empty() {
            self.set_true(READY);
            return;
        }
        // Newest first, as upstream lists them.
        unhealthy.sort_by(|a, b| b.last_transition_time.cmp(&a.last_transition_time));
        let failed = unhealthy.iter().any(|c| c.status == "False" && c.observed_generation == self.generation);
        let message = unhealthy.iter().map(|c| format!("{}={}", c.type_, c.status)).collect::<Vec<_>>().join(", ");
        if failed {
            self.set(READY, "False", "UnhealthyDependents", &message);
        } else {
            self.set(READY, "Unknown", "ReconcilingDependents", &message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dependent_that_turns_false_or_says_something_new_is_said_once() {
        let condition = |type_: &str, status: &str, message: &str| Condition {
            type_: type_.into(),
            status: status.into(),
            message: Some(message.into()),
            ..Condition::default()
        };
        let before = vec![condition("SubnetsReady", "False", "none match"), condition("AMIsReady", "True", "")];
        let after = vec![
            condition("SubnetsReady", "False", "none match"),
            condition("AMIsReady", "False", "no image"),
            condition("SecurityGroupsReady", "False", "denied"),
            condition(READY, "False", "AMIsReady=False"),
        ];
        let said: Vec<&str> = turned_false(&before, &after).map(|c| c.type_.as_str()).collect();
        assert_eq!(said, ["AMIsReady", "SecurityGroupsReady"]);
        let reworded = vec![condition("SubnetsReady", "False", "still none")];
        assert_eq!(turned_false(&before, &reworded).count(), 1);
        assert_eq!(turned_false(&after, &after).count(), 0);
    }

    const DEPENDENTS: &[&str] = &["ValidationSucceeded", "NodeClassReady"];

    #[test]
    fn the_root_follows_its_dependents() {
        let mut list = Vec::new();
        let mut set = ConditionSet::new(&mut list, DEPENDENTS, Some(1), "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z");
        assert_eq!(set.get(READY).map(|c| c.status.as_str()), Some("Unknown"));
        set.set_true("ValidationSucceeded");
        assert_eq!(set.get(READY).unwrap().reason.as_deref(), Some("ReconcilingDependents"));
        assert_eq!(set.get(READY).unwrap().message.as_deref(), Some("NodeClassReady=Unknown"));
        set.set_false("NodeClassReady", "NodeClassNotFound", "NodeClass not found on cluster");
        let ready = set.get(READY).unwrap().clone();
        assert_eq!((ready.status.as_str(), ready.reason.as_deref()), ("False", Some("UnhealthyDependents")));
        set.set_true("NodeClassReady");
        assert!(set.get(READY).unwrap().is_true());
        assert_eq!(list.last().unwrap().type_, READY, "the root is listed last");
        assert!(list.iter().all(|c| c.observed_generation == Some(1)));
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let mut list = Vec::new();
        ConditionSet::new(&mut list, DEPENDENTS, Some(1), "t0", "t1").set_true("ValidationSucceeded");
        let before = list.clone();
        ConditionSet::new(&mut list, DEPENDENTS, Some(1), "t0", "t2").set_true("ValidationSucceeded");
        assert_eq!(list, before, "the same status again changes nothing");
        ConditionSet::new(&mut list, DEPENDENTS, Some(1), "t0", "t3").set_false("ValidationSucceeded", "Bad", "x");
        let c = list.iter().find(|c| c.type_ == "ValidationSucceeded").unwrap();
        assert_eq!(c.last_transition_time.as_deref(), Some("t3"));
    }
}
