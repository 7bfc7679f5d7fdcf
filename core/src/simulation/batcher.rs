//! The provisioner's batching window (upstream `provisioning/batcher.go`): the first pending pod
//! opens a window; every further trigger extends it while triggers keep coming within the idle
//! duration; the window closes `batch_idle` after the last trigger or `batch_max` after the
//! first, whichever is first. A round runs when it closes.

use super::{SimTime, Timings};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Batcher {
    /// (first trigger, last trigger) of the open window.
    window: Option<(SimTime, SimTime)>,
}

impl Batcher {
    pub fn trigger(&mut self, now: SimTime) {
        self.window = Some(match self.window {
            Some((first, _)) => (first, now),
            None => (now, now),
        });
    }

    /// When the open window closes.
    pub fn deadline(&self, t: &Timings) -> Option<SimTime> {
        self.window.map(|(first, last)| last.plus(t.batch_idle).min(first.plus(t.batch_max)))
    }

    pub fn close(&mut self) {
        self.window = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_and_max_durations_close_the_window() {
        let t = Timings::default();
        let mut b = Batcher::default();
        assert_eq!(b.deadline(&t), None);
        b.trigger(SimTime::from_secs(5));
        assert_eq!(b.deadline(&t), Some(SimTime::from_secs(6)), "1 s idle after a single trigger");
        b.trigger(SimTime(5_800));
        assert_eq!(b.deadline(&t), Some(SimTime(6_800)), "each trigger extends the idle window");
        for ms in (6_000..20_000).step_by(700) {
            b.trigger(SimTime(ms));
        }
        assert_eq!(b.deadline(&t), Some(SimTime::from_secs(15)), "at most 10 s after the first trigger");
        b.close();
        assert_eq!(b.deadline(&t), None);
    }
}
