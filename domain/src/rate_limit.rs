//! A rate limit per integration: at most `rate_limit_per_second` of its deliveries' attempts start
//! in one second (of the clock, from the second's start), across every container of the worker.
//! A delivery over the limit waits: it is not claimed (no attempt number spent), not a failure,
//! and waits as a new delayed message, so its receives toward the dead-letter queue start again at
//! none. An integration without a limit is never counted.

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
}
