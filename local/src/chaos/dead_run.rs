//! What a subscription's stored run of dead deliveries and its pause may be at the end of a wave,
//! from its deliveries' ends in the order their last requests reached the endpoint.
//!
//! Deliveries of one subscription in flight together have no order of their own: a success ends
//! the deaths saved before the run was read for it (once a batch, after the batch's first
//! success's answer; at its claim on a retry), and a death saved after that counts after it,
//! whatever order their requests reached the endpoint in. The run the endpoint's order gives is therefore exact only where no
//! death was in flight beside the last success: one saved at or after that success's claim, on
//! the wave's virtual clock, which stands still while the queue is drained and moves only when
//! every invocation has returned. Anywhere else the run may be off by what a worker has in
//! flight at once.

use shared::delivery::worker::BATCH_CONCURRENCY;
use shared::domain::subscription::MAX_CONSECUTIVE_DEAD;
use shared::domain::time::Timestamp;

/// One ended delivery of the subscription.
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    /// Its last request's place in the endpoint's log.
    pub arrival: usize,
    pub dead: bool,
    /// When its outcome was saved (the delivery's last update).
    pub saved: Timestamp,
    /// When its last attempt was claimed.
    pub claimed: Timestamp,
}

/// The run and the pause the endpoint's order gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Expected {
    /// Deaths after the last success (all of them when none was delivered).
    pub run: u32,
    /// The longest run of deaths the subscription met.
    pub longest: u32,
    pub never_delivered: bool,
    /// Deaths ahead of the last success that were in flight beside it: saved at or after its
    /// claim, so they may count after it.
    pub beside_last_success: u32,
}

/// What a worker has in flight at once: how far a run may be off where deliveries overlapped.
const MARGIN: u32 = BATCH_CONCURRENCY as u32;

impl Expected {
    pub fn of(mut ended: Vec<Ended>) -> Self {
        ended.sort_by_key(|e| e.arrival);
        let (mut run, mut longest) = (0u32, 0u32);
        for e in &ended {
            run = if e.dead { run + 1 } else { 0 };
            longest = longest.max(run);
        }
        let last_success = ended.iter().rposition(|e| !e.dead);
        let beside_last_success = last_success.map_or(0, |at| {
            let claimed = ended[at].claimed;
            let beside = ended[..at].iter().filter(|e| e.dead && e.saved >= claimed);
            beside.count() as u32
        });
        Self {
            run,
            longest,
            never_delivered: last_success.is_none(),
            beside_last_success,
        }
    }

    /// Whether a stored run of `counted` agrees: exactly the deaths after the last success, or
    /// up to the deaths in flight beside it more; within [`MARGIN`] when deaths followed it.
    pub fn agrees_with(&self, counted: u32) -> bool {
        if self.never_delivered {
            return counted == self.run;
        }
        if self.run == 0 {
            return counted <= self.beside_last_success.min(MARGIN);
        }
        counted.abs_diff(self.run) <= MARGIN
    }

    /// Whether the pause can be judged: the longest run is clear of the threshold by more than
    /// the margin on either side, or nothing was ever delivered. `Some(should_pause)` then.
    pub fn pause(&self) -> Option<bool> {
        let judged = self.longest + MARGIN < MAX_CONSECUTIVE_DEAD
            || self.longest >= MAX_CONSECUTIVE_DEAD + MARGIN
            || self.never_delivered;
        judged.then_some(self.longest >= MAX_CONSECUTIVE_DEAD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(T0 + ms)
    }

    /// A delivery whose last request arrived `arrival`-th, claimed at `claimed` and saved at
    /// `saved` ms after T0.
    fn ended(arrival: usize, dead: bool, claimed: i64, saved: i64) -> Ended {
        Ended {
            arrival,
            dead,
            saved: at(saved),
            claimed: at(claimed),
        }
    }

    #[test]
    fn a_death_saved_before_the_last_success_was_claimed_must_be_ended_by_it() {
        // The death was saved a second before the success was claimed (an earlier drain).
        let e = Expected::of(vec![ended(0, true, 0, 0), ended(1, false, 1_000, 1_000)]);
        assert_eq!(e.run, 0);
        assert_eq!(e.beside_last_success, 0);
        assert!(e.agrees_with(0));
        assert!(!e.agrees_with(1));
    }

    #[test]
    fn a_death_in_flight_beside_the_last_success_may_count_on_either_side_of_it() {
        // Its request reached the endpoint first, but its outcome was saved in the drain the
        // success was claimed in: the success may have read the run before it was saved.
        let e = Expected::of(vec![
            ended(1, false, 1_000, 1_000),
            ended(0, true, 1_000, 1_000),
        ]);
        assert_eq!((e.run, e.beside_last_success), (0, 1));
        assert!(e.agrees_with(0));
        assert!(e.agrees_with(1));
        assert!(!e.agrees_with(2), "only the one death in flight may count");
    }

    #[test]
    fn after_the_last_success_the_run_is_its_deaths_within_what_a_worker_has_in_flight() {
        let mut ends = vec![ended(0, false, 0, 0)];
        ends.extend((1..=3).map(|i| ended(i, true, 1_000, 1_000)));
        let e = Expected::of(ends);
        assert_eq!(e.run, 3);
        assert!(e.agrees_with(3));
        assert!(e.agrees_with(3 + MARGIN));
        assert!(!e.agrees_with(3 + MARGIN + 1));
    }

    #[test]
    fn a_subscription_never_delivered_counts_every_death_exactly() {
        let e = Expected::of((0..4).map(|i| ended(i, true, 0, 0)).collect());
        assert!(e.never_delivered);
        assert!(e.agrees_with(4));
        assert!(!e.agrees_with(3));
        assert_eq!(e.pause(), Some(false));
    }

    #[test]
    fn the_pause_is_judged_only_clear_of_the_threshold_by_the_margin() {
        let run_of = |n: usize| {
            let mut ends = vec![ended(0, false, 0, 0)];
            ends.extend((1..=n).map(|i| ended(i, true, 0, 0)));
            ends.push(ended(n + 1, false, 0, 0));
            Expected::of(ends)
        };
        let threshold = MAX_CONSECUTIVE_DEAD as usize;
        assert_eq!(run_of(3).pause(), Some(false));
        assert_eq!(run_of(threshold).pause(), None);
        assert_eq!(run_of(threshold + MARGIN as usize).pause(), Some(true));
    }
}
