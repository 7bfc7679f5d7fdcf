//! The provisioner's batching window (upstream `provisioning/batcher.go`): the first trigger (a pod
//! went pending, a node is being deleted) opens a window; every further trigger extends it; the
//! window closes `idle` after the last trigger or `max` after the first, whichever comes first,
//! and a round runs then. Times are milliseconds on the caller's clock (simulated or real).

/// upstream `--batch-idle-duration` (1 s).
pub const BATCH_IDLE_MILLIS: u64 = 1_000;
/// upstream `--batch-max-duration` (10 s).
pub const BATCH_MAX_MILLIS: u64 = 10_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Batcher {
    /// (first trigger, last trigger) of the open window.
    window: Option<(u64, u64)>,
}

impl Batcher {
    /// A trigger at `now`: opens the window or extends it.
    pub fn trigger(&mut self, now: u64) {
        self.window = Some(match self.window {
            Some((first, _)) => (first, now),
            None => (now, now),
        });
    }

    /// When the open window closes, with these idle and maximum durations.
    pub fn deadline(&self, idle: u64, max: u64) -> Option<u64> {
        self.window.map(|(first, last)| last.saturating_add(idle).min(first.saturating_add(max)))
    }

    /// The round ran: the next trigger opens a new window.
    pub fn close(&mut self) {
        self.window = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_and_max_durations_close_the_window() {
        let (idle, max) = (BATCH_IDLE_MILLIS, BATCH_MAX_MILLIS);
        let mut b = Batcher::default();
        assert_eq!(b.deadline(idle, max), None);
        b.trigger(5_000);
        assert_eq!(b.deadline(idle, max), Some(6_000), "1 s idle after a single trigger");
        b.trigger(5_800);
        assert_eq!(b.deadline(idle, max), Some(6_800), "each trigger extends the idle window");
        for ms in (6_000..20_000).step_by(700) {
            b.trigger(ms);
        }
        assert_eq!(b.deadline(idle, max), Some(15_000), "at most 10 s after the first trigger");
        b.close();
        assert_eq!(b.deadline(idle, max), None);
    }
}
