//! A rate limit per integration: at most `rate_limit_per_second` of its deliveries' attempts start
//! in one second (of the clock, from the second's start), across every container of the worker.
//! An integration without a limit is never counted.
//!
//! The integration's starts are handed out as slots of a [`Schedule`]: slot `k` of a run that
//! began in second `start` is in second `start + (k - 1) / limit`, so each second holds `limit`
//! slots and a backlog is spread over the seconds to come, each delivery told the second its
//! attempt starts in. A delivery whose slot is in a later second waits for it (not a failure, no
//! attempt number spent), as a new delayed message, so its receives toward the dead-letter queue
//! start again at none. A run whose slots are all in the past is idle: the next reservation
//! begins a new run in the current second ([`Schedule::next_step`]).

use crate::time::{Timestamp, SECOND};
use std::time::Duration;

/// The smallest accepted limit.
pub const MIN_PER_SECOND: u32 = 1;
/// The largest accepted limit (more than one worker invocation starts in a second anyway).
pub const MAX_PER_SECOND: u32 = 1000;
/// The shortest wait of a delivery over the limit; [`deferral`] adds up to a second of jitter, so
/// a limited integration's waiting deliveries come back spread over the next seconds.
pub const DEFERRAL: Duration = Duration::from_secs(1);

const SECOND_MS: i64 = SECOND.as_millis() as i64;

/// Why a limit is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be a whole number of deliveries per second from {MIN_PER_SECOND} to {MAX_PER_SECOND}, not {0}")]
pub struct LimitOutOfRange(pub u64);

/// Checks a requested limit.
pub fn check(per_second: u64) -> Result<u32, LimitOutOfRange> {
    u32::try_from(per_second)
        .ok()
        .filter(|n| (MIN_PER_SECOND..=MAX_PER_SECOND).contains(n))
        .ok_or(LimitOutOfRange(per_second))
}

/// The second `at` falls in, as seconds since the epoch: the window a start is counted in.
pub fn second_of(at: Timestamp) -> i64 {
    at.millis().div_euclid(SECOND_MS)
}

/// How long a delivery over the limit waits: [`DEFERRAL`], plus one more second when `jitter`
/// (a fair coin, drawn by the caller) says so; whole seconds, as a queue's delay is.
pub fn deferral(jitter: bool) -> Duration {
    DEFERRAL + if jitter { SECOND } else { Duration::ZERO }
}

/// When the second `second` (seconds since the epoch) begins: the earliest a slot in it starts.
pub fn second_start(second: i64) -> Timestamp {
    Timestamp(second * SECOND_MS)
}

/// An integration's schedule of slots as stored: the run of reservations that began in second
/// `start`, the slots taken in it (`taken`, numbered from one) and the limit they were spaced
/// by (`per_second`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub start: i64,
    pub taken: u64,
    pub per_second: u32,
}

/// What a reservation does next, given the schedule as last seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Take the run's next slot (one atomic add).
    Take,
    /// Begin a new run in second `start`, its first slot ours, on the condition that the
    /// schedule is still as `seen`.
    Restart { seen: Schedule, start: i64 },
}

impl Schedule {
    /// The second slot `k` (from one) of the run starts in.
    pub fn slot_second(&self, k: u64) -> i64 {
        let per_second = u64::from(self.per_second.max(1));
        self.start + (k.saturating_sub(1) / per_second) as i64
    }

    /// The second after the run's last taken slot's: the earliest a new run may begin without
    /// putting more than a second's slots in one second.
    pub fn end(&self) -> i64 {
        self.start + self.taken.div_ceil(u64::from(self.per_second.max(1))) as i64
    }

    /// The slot this schedule gave the reservation that took its last slot, when that slot is
    /// still to come at `now` under `limit`: its second. `None`: the slot was already past (the
    /// run was idle) or spaced by another limit; the run restarts.
    pub fn taken_slot(&self, now: Timestamp, limit: u32) -> Option<i64> {
        let second = self.slot_second(self.taken);
        (self.per_second == limit && second >= second_of(now)).then_some(second)
    }

    /// What a reservation at `now` under `limit` does, the schedule last seen as `seen`: take the
    /// next slot while the run is current (its next slot not past, spaced by this limit) or not
    /// seen yet (a take creates a run where there is none, and answers with the schedule), else
    /// restart it in the current second, or after its last slot when that is later (a changed
    /// limit never puts more than one second's slots in a second).
    pub fn next_step(seen: Option<&Schedule>, now: Timestamp, limit: u32) -> Step {
        let now_second = second_of(now);
        match seen {
            Some(s) if s.per_second != limit || s.slot_second(s.taken + 1) < now_second => {
                Step::Restart {
                    seen: *s,
                    start: s.end().max(now_second),
                }
            }
            _ => Step::Take,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_whole_numbers_from_one_to_a_thousand() {
        assert_eq!(check(1), Ok(1));
        assert_eq!(check(1000), Ok(1000));
        assert_eq!(check(0), Err(LimitOutOfRange(0)));
        assert_eq!(check(1001), Err(LimitOutOfRange(1001)));
        assert_eq!(check(u64::MAX), Err(LimitOutOfRange(u64::MAX)));
    }

    #[test]
    fn a_window_is_a_second_from_its_start_and_the_wait_is_one_or_two_seconds() {
        assert_eq!(second_of(Timestamp(1_999)), 1);
        assert_eq!(second_of(Timestamp(2_000)), 2);
        assert_eq!(second_of(Timestamp(-1)), -1);
        assert_eq!(deferral(false), Duration::from_secs(1));
        assert_eq!(deferral(true), Duration::from_secs(2));
    }

    fn run(start: i64, taken: u64, per_second: u32) -> Schedule {
        Schedule {
            start,
            taken,
            per_second,
        }
    }

    #[test]
    fn a_runs_slots_fill_each_second_to_the_limit_then_the_next() {
        let s = run(100, 0, 5);
        let seconds: Vec<i64> = (1..=11).map(|k| s.slot_second(k)).collect();
        assert_eq!(
            seconds,
            [100, 100, 100, 100, 100, 101, 101, 101, 101, 101, 102]
        );
        assert_eq!(run(100, 10, 5).end(), 102);
        assert_eq!(run(100, 11, 5).end(), 103);
        assert_eq!(run(100, 1, 5).end(), 101);
        assert_eq!(second_start(101), Timestamp(101_000));
    }

    #[test]
    fn a_backlog_of_ten_thousand_at_five_a_second_takes_two_thousand_seconds() {
        let s = run(1_000, 10_000, 5);
        assert_eq!(s.slot_second(10_000) - s.start, 1_999);
        assert_eq!(s.end() - s.start, 2_000);
        // Its last slot, reserved at the start, is two thousand seconds away and still to come.
        assert_eq!(s.taken_slot(Timestamp(1_000_500), 5), Some(2_999));
    }

    #[test]
    fn a_slot_already_past_or_spaced_by_another_limit_is_no_slot() {
        let now = Timestamp(200_250);
        assert_eq!(run(200, 3, 5).taken_slot(now, 5), Some(200));
        assert_eq!(run(200, 6, 5).taken_slot(now, 5), Some(201));
        assert_eq!(run(190, 3, 5).taken_slot(now, 5), None, "idle: past");
        assert_eq!(run(200, 3, 4).taken_slot(now, 5), None, "another limit");
    }

    #[test]
    fn a_current_run_is_taken_from_and_an_idle_or_changed_one_restarts() {
        let now = Timestamp(200_250);
        let busy = run(150, 300, 5);
        assert_eq!(Schedule::next_step(Some(&busy), now, 5), Step::Take);
        // The next slot is in the current second: still taken from.
        let filling = run(199, 7, 5);
        assert_eq!(Schedule::next_step(Some(&filling), now, 5), Step::Take);
        let idle = run(150, 10, 5);
        assert_eq!(
            Schedule::next_step(Some(&idle), now, 5),
            Step::Restart {
                seen: idle,
                start: 200
            }
        );
        assert_eq!(
            Schedule::next_step(None, now, 5),
            Step::Take,
            "not seen yet"
        );
        // A limit changed mid-backlog: the new run begins after the old one's last slot.
        let changed = Schedule::next_step(Some(&busy), now, 10);
        assert_eq!(
            changed,
            Step::Restart {
                seen: busy,
                start: 210
            }
        );
    }
}
