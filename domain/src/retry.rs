//! Retry policies: when a failed attempt is tried again, and when it is not.
//!
//! Three budgets live here, one per lifecycle that retries (`docs/lifecycles.md`):
//!
//! * **Integration delivery, fixed schedule** (`docs/lifecycles.md#integration-delivery`): six attempts; the waits after
//!   attempts one to five are 1 min, 5 min, 30 min, 2 h and 6 h; a sixth failed attempt is
//!   exhausted (the delivery becomes `dead`).
//! * **Per-subscriber exponential policy** (the event monitor's subscriber settings): a subscriber's *Max Retries* and
//!   *Retry Delay* settings. A delivery may be claimed only while it has made fewer attempts than
//!   Max Retries, so Max Retries counts every attempt. After a failure with attempts to spare, the
//!   wait is `Retry Delay · 2^n` seconds, where **n is the number of attempts made before the one
//!   that just failed** (`attempt_number - 1`): the first retry
//!   waits exactly Retry Delay, the second twice that, and so on. This reads "Retry Delay" as the
//!   base wait, which is what a person setting it expects. The wait is capped at
//!   [`EXPONENTIAL_MAX_WAIT`] (24 h), which also rules out overflow.
//! * **Notification delivery** (`docs/lifecycles.md#notification-delivery`): the queue receive count is the budget
//!   ([`MAX_RECEIVES`] = 8; the table keeps no attempt count). A retryable failure on a
//!   receive below eight requeues with a jittered exponential delay; on the eighth it fails with
//!   `attempts_exhausted` and the message goes back at once so SQS moves it to the dead-letter
//!   queue.
//!
//! A provider's Retry-After is honoured when it is *longer* than the computed wait, never when it
//! is shorter. It is first capped ([`RETRY_AFTER_CAP`] for integrations, the SQS visibility maximum
//! for notifications) so that a hostile or broken endpoint cannot park work indefinitely.

use serde::{Deserialize, Serialize};
use std::time::Duration;
use thiserror::Error;

use crate::time::DAY;

// ---------------------------------------------------------------------------------------------
// Integration delivery policies
// ---------------------------------------------------------------------------------------------

/// The waits after failed attempts 1, 2, 3, 4 and 5 of the fixed schedule.
pub const FIXED_SCHEDULE: [Duration; 5] = [
    Duration::from_secs(60),
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(6 * 3600),
];
/// Attempts of the fixed schedule; the sixth failure is exhausted.
pub const FIXED_MAX_ATTEMPTS: u32 = 6;

/// Longest wait the exponential policy ever schedules (and so the overflow guard).
pub const EXPONENTIAL_MAX_WAIT: Duration = DAY;
/// Largest accepted Max Retries setting.
pub const MAX_RETRIES_LIMIT: u32 = 20;
/// Largest accepted Retry Delay setting, in seconds (one day).
pub const MAX_RETRY_DELAY_SECS: u32 = 86_400;
/// A provider's Retry-After is honoured up to this long for integration deliveries.
pub const RETRY_AFTER_CAP: Duration = DAY;

/// How an integration subscription retries failed attempts. Stored with the subscription as
/// `{"kind":"fixed_schedule"}` or `{"kind":"exponential","max_retries":5,"retry_delay_secs":30}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RetryPolicy {
    /// Six attempts; waits of 1 min, 5 min, 30 min, 2 h, 6 h. The default.
    #[default]
    FixedSchedule,
    /// A subscriber's own settings (event monitor): `max_retries` attempts in total, waiting
    /// `retry_delay_secs × 2^(attempt_number - 1)` seconds (capped at 24 h) after a failure.
    Exponential {
        max_retries: u32,
        retry_delay_secs: u32,
    },
}

/// What to do after an attempt failed with a retryable (transient) failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryDecision {
    /// Schedule the next attempt this long after now.
    RetryAfter(Duration),
    /// The budget is spent: the delivery is terminal (`dead` / `failed`).
    Exhausted,
}

/// Settings a subscriber may not have.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RetryPolicyError {
    #[error("max_retries must be between 1 and {MAX_RETRIES_LIMIT}; got {0}")]
    MaxRetriesOutOfRange(u32),
    #[error("retry_delay_secs must be between 1 and {MAX_RETRY_DELAY_SECS}; got {0}")]
    RetryDelayOutOfRange(u32),
}

impl RetryPolicy {
    /// The total number of attempts this policy allows.
    pub fn max_attempts(&self) -> u32 {
        match *self {
            RetryPolicy::FixedSchedule => FIXED_MAX_ATTEMPTS,
            RetryPolicy::Exponential { max_retries, .. } => max_retries,
        }
    }

    /// Whether a delivery that has already made `attempts_made` attempts may be claimed for another
    /// (only while it has made fewer attempts than Max Retries).
    pub fn may_attempt(&self, attempts_made: u32) -> bool {
        attempts_made < self.max_attempts()
    }

    /// The decision after attempt `attempt_number` (1-based: the attempt that just failed) failed
    /// with a retryable failure. A `retry_after` from the provider wins when longer than the
    /// scheduled wait (capped at [`RETRY_AFTER_CAP`]); it never shortens it. Attempt number 0 is
    /// treated as 1.
    pub fn after_failed_attempt(
        &self,
        attempt_number: u32,
        retry_after: Option<Duration>,
    ) -> RetryDecision {
        let attempt_number = attempt_number.max(1);
        if attempt_number >= self.max_attempts() {
            return RetryDecision::Exhausted;
        }
        let scheduled = match *self {
            RetryPolicy::FixedSchedule => FIXED_SCHEDULE[(attempt_number - 1) as usize],
            RetryPolicy::Exponential {
                retry_delay_secs, ..
            } => exponential_wait(retry_delay_secs, attempt_number - 1),
        };
        RetryDecision::RetryAfter(longer_provider_delay(
            scheduled,
            retry_after,
            RETRY_AFTER_CAP,
        ))
    }

    /// Checks a subscriber's settings: `1 ≤ max_retries ≤ 20`, `1 ≤ retry_delay_secs ≤ 86 400`.
    pub fn validate(&self) -> Result<(), RetryPolicyError> {
        match *self {
            RetryPolicy::FixedSchedule => Ok(()),
            RetryPolicy::Exponential {
                max_retries,
                retry_delay_secs,
            } => {
                if !(1..=MAX_RETRIES_LIMIT).contains(&max_retries) {
                    return Err(RetryPolicyError::MaxRetriesOutOfRange(max_retries));
                }
                if !(1..=MAX_RETRY_DELAY_SECS).contains(&retry_delay_secs) {
                    return Err(RetryPolicyError::RetryDelayOutOfRange(retry_delay_secs));
                }
                Ok(())
            }
        }
    }
}

/// `retry_delay_secs × 2^n`, capped at [`EXPONENTIAL_MAX_WAIT`] without overflowing.
fn exponential_wait(retry_delay_secs: u32, n: u32) -> Duration {
    let cap = EXPONENTIAL_MAX_WAIT.as_secs();
    // u32::MAX × 2^31 < u64::MAX, so the shift itself cannot overflow; beyond 2^31 the cap rules.
    let secs = if n > 31 {
        cap
    } else {
        (u64::from(retry_delay_secs) << n).min(cap)
    };
    Duration::from_secs(secs)
}

/// The scheduled wait, or the provider's delay (capped at `cap`) when that is longer.
fn longer_provider_delay(
    scheduled: Duration,
    retry_after: Option<Duration>,
    cap: Duration,
) -> Duration {
    match retry_after {
        Some(ra) => scheduled.max(ra.min(cap)),
        None => scheduled,
    }
}

// ---------------------------------------------------------------------------------------------
// Notification delivery: the receive count is the budget
// ---------------------------------------------------------------------------------------------

/// Receives of a notification message; a retryable failure on the eighth is exhausted. Defined
/// once, with the lifecycle's other numbers, in [`crate::notification_delivery`].
pub use crate::notification_delivery::MAX_RECEIVES;
/// The delay after the first failed receive.
pub const NOTIFICATION_BASE_DELAY: Duration = Duration::from_secs(30);
/// The cap on the un-jittered delay.
pub const NOTIFICATION_MAX_DELAY: Duration = Duration::from_secs(30 * 60);
/// ± this fraction of jitter.
pub const NOTIFICATION_JITTER: f64 = 0.2;
/// SQS refuses a visibility timeout above twelve hours.
pub const SQS_MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600);

/// A source of uniform randomness in `[0, 1)`, injected so that the core stays deterministic in
/// tests. The shell passes [`RandJitter`] around `rand::thread_rng()`.
pub trait JitterSource {
    /// A uniform sample in `[0, 1)`.
    fn unit(&mut self) -> f64;
}

/// A deterministic splitmix64 generator for tests and the local harness.
#[derive(Clone, Debug)]
pub struct SeededJitter {
    state: u64,
}

impl SeededJitter {
    pub fn new(seed: u64) -> Self {
        SeededJitter { state: seed }
    }
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl JitterSource for SeededJitter {
    fn unit(&mut self) -> f64 {
        // The top 53 bits give every representable double in [0, 1) at uniform spacing.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Always the same sample (clamped into `[0, 1)`); `FixedJitter(0.5)` is the middle of the
/// jitter's range (the un-jittered delay, below a cap).
#[derive(Clone, Copy, Debug)]
pub struct FixedJitter(pub f64);

impl JitterSource for FixedJitter {
    fn unit(&mut self) -> f64 {
        self.0
    }
}

/// Adapts any `rand` generator (e.g. `RandJitter(rand::thread_rng())`).
#[derive(Debug)]
pub struct RandJitter<R: rand::Rng>(pub R);

impl<R: rand::Rng> JitterSource for RandJitter<R> {
    fn unit(&mut self) -> f64 {
        self.0.gen::<f64>()
    }
}

/// How long a notification message stays invisible after receive `receive_count` (1-based: the
/// receive that just failed) failed retryably.
///
/// * base = 30 s × 2^(receive_count − 1), capped at 30 min;
/// * jitter draws the delay uniformly from `[0.8 × base, min(1.2 × base, 30 min))`: twenty
///   percent either way below the cap, and only downwards where the upper end would pass it. So
///   the delay never exceeds 30 min, and messages at the cap still spread out over 24 to 30 min
///   (clamping a jittered delay to the cap would pile half of them onto exactly 30 min);
/// * a provider Retry-After longer than that wins;
/// * the result is rounded up to whole seconds (SQS timeouts are whole seconds) and clamped to
///   the SQS maximum visibility timeout of 12 h.
pub fn notification_visibility_delay(
    receive_count: u32,
    retry_after: Option<Duration>,
    jitter: &mut impl JitterSource,
) -> Duration {
    let exponent = receive_count.max(1) - 1;
    let cap_ms = NOTIFICATION_MAX_DELAY.as_millis() as u64;
    let base_ms = if exponent >= 32 {
        cap_ms
    } else {
        ((NOTIFICATION_BASE_DELAY.as_millis() as u64) << exponent).min(cap_ms)
    };
    let u = jitter.unit();
    let u = if u.is_finite() {
        u.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let low = base_ms as f64 * (1.0 - NOTIFICATION_JITTER);
    let high = (base_ms as f64 * (1.0 + NOTIFICATION_JITTER)).min(cap_ms as f64);
    // Whole milliseconds first (so float noise such as 36 000.000 000 000 004 ms cannot add a
    // second), then whole seconds rounded up; never past the cap.
    let jittered_ms = ((low + (high - low) * u).round() as u64).min(cap_ms);
    let jittered_secs = jittered_ms.div_ceil(1000);
    let jittered = Duration::from_secs(jittered_secs);
    let delay = match retry_after {
        Some(ra) => jittered.max(ceil_secs(ra)),
        None => jittered,
    };
    delay.min(SQS_MAX_VISIBILITY)
}

fn ceil_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// What a notification consumer does with its message after a failed send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotificationRetryDecision {
    /// Return the message to the queue (change its visibility to
    /// [`notification_visibility_delay`]); the delivery goes `sending → queued`.
    Requeue,
    /// The last receive failed: mark the delivery `failed` (`attempts_exhausted`) and give the
    /// message back at once (visibility 0) so SQS moves it to the dead-letter queue.
    ExhaustAndDeadLetter,
    /// The adapter refused permanently: mark the delivery `failed` and delete the message.
    FailPermanently,
}

/// The decision after receive `receive_count` (1-based, SQS `ApproximateReceiveCount`) failed.
pub fn notification_receive_decision(
    receive_count: u32,
    retryable: bool,
) -> NotificationRetryDecision {
    if !retryable {
        NotificationRetryDecision::FailPermanently
    } else if receive_count < MAX_RECEIVES {
        NotificationRetryDecision::Requeue
    } else {
        NotificationRetryDecision::ExhaustAndDeadLetter
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{HOUR, MINUTE, SECOND};
    use proptest::prelude::*;

    fn exp(max_retries: u32, retry_delay_secs: u32) -> RetryPolicy {
        RetryPolicy::Exponential {
            max_retries,
            retry_delay_secs,
        }
    }

    #[test]
    fn fixed_schedule_is_six_attempts_with_its_waits() {
        let p = RetryPolicy::default();
        assert_eq!(p, RetryPolicy::FixedSchedule);
        assert_eq!(p.max_attempts(), 6);
        let expected = [MINUTE, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 6 * HOUR];
        for (i, wait) in expected.iter().enumerate() {
            assert_eq!(
                p.after_failed_attempt(i as u32 + 1, None),
                RetryDecision::RetryAfter(*wait),
                "after attempt {}",
                i + 1
            );
        }
        assert_eq!(p.after_failed_attempt(6, None), RetryDecision::Exhausted);
        assert_eq!(p.after_failed_attempt(7, None), RetryDecision::Exhausted);
        assert_eq!(
            p.after_failed_attempt(0, None),
            RetryDecision::RetryAfter(MINUTE)
        );
        assert!(p.may_attempt(5));
        assert!(!p.may_attempt(6));
        assert_eq!(p.validate(), Ok(()));
    }

    #[test]
    fn retry_after_wins_only_when_longer_and_is_capped() {
        let p = RetryPolicy::FixedSchedule;
        assert_eq!(
            p.after_failed_attempt(1, Some(90 * SECOND)),
            RetryDecision::RetryAfter(90 * SECOND)
        );
        assert_eq!(
            p.after_failed_attempt(2, Some(90 * SECOND)),
            RetryDecision::RetryAfter(5 * MINUTE)
        );
        assert_eq!(
            p.after_failed_attempt(1, Some(30 * DAY)),
            RetryDecision::RetryAfter(RETRY_AFTER_CAP)
        );
        // Retry-After never revives an exhausted budget.
        assert_eq!(
            p.after_failed_attempt(6, Some(SECOND)),
            RetryDecision::Exhausted
        );
        let e = exp(3, 10);
        assert_eq!(
            e.after_failed_attempt(1, Some(MINUTE)),
            RetryDecision::RetryAfter(MINUTE)
        );
        assert_eq!(
            e.after_failed_attempt(2, Some(SECOND)),
            RetryDecision::RetryAfter(20 * SECOND)
        );
    }

    #[test]
    fn exponential_waits_delay_times_two_to_the_attempts_before() {
        let p = exp(5, 30);
        assert_eq!(p.max_attempts(), 5);
        assert_eq!(
            p.after_failed_attempt(1, None),
            RetryDecision::RetryAfter(30 * SECOND)
        );
        assert_eq!(
            p.after_failed_attempt(2, None),
            RetryDecision::RetryAfter(60 * SECOND)
        );
        assert_eq!(
            p.after_failed_attempt(3, None),
            RetryDecision::RetryAfter(120 * SECOND)
        );
        assert_eq!(
            p.after_failed_attempt(4, None),
            RetryDecision::RetryAfter(240 * SECOND)
        );
        // The fifth failure uses up Max Retries = 5: the delivery fails.
        assert_eq!(p.after_failed_attempt(5, None), RetryDecision::Exhausted);
        assert!(p.may_attempt(4));
        assert!(!p.may_attempt(5));
        // Max Retries 1: the only attempt is the last one.
        assert_eq!(
            exp(1, 30).after_failed_attempt(1, None),
            RetryDecision::Exhausted
        );
    }

    #[test]
    fn exponential_wait_is_capped_at_a_day_without_overflow() {
        let p = exp(20, MAX_RETRY_DELAY_SECS);
        assert_eq!(
            p.after_failed_attempt(1, None),
            RetryDecision::RetryAfter(DAY)
        );
        assert_eq!(
            p.after_failed_attempt(19, None),
            RetryDecision::RetryAfter(DAY)
        );
        let p = exp(u32::MAX, u32::MAX);
        assert_eq!(
            p.after_failed_attempt(u32::MAX - 1, None),
            RetryDecision::RetryAfter(EXPONENTIAL_MAX_WAIT)
        );
        assert_eq!(exponential_wait(1, 16), Duration::from_secs(65_536));
        assert_eq!(exponential_wait(1, 17), DAY);
        assert_eq!(exponential_wait(u32::MAX, 31), DAY);
        assert_eq!(exponential_wait(u32::MAX, 32), DAY);
    }

    #[test]
    fn exponential_settings_are_validated() {
        assert_eq!(exp(1, 1).validate(), Ok(()));
        assert_eq!(
            exp(MAX_RETRIES_LIMIT, MAX_RETRY_DELAY_SECS).validate(),
            Ok(())
        );
        assert_eq!(
            exp(0, 30).validate(),
            Err(RetryPolicyError::MaxRetriesOutOfRange(0))
        );
        assert_eq!(
            exp(21, 30).validate(),
            Err(RetryPolicyError::MaxRetriesOutOfRange(21))
        );
        assert_eq!(
            exp(3, 0).validate(),
            Err(RetryPolicyError::RetryDelayOutOfRange(0))
        );
        assert_eq!(
            exp(3, 86_401).validate(),
            Err(RetryPolicyError::RetryDelayOutOfRange(86_401))
        );
        assert_eq!(
            exp(0, 30).validate().unwrap_err().to_string(),
            "max_retries must be between 1 and 20; got 0"
        );
        // An unvalidated zero-attempt policy is exhausted at once rather than panicking.
        assert_eq!(
            exp(0, 0).after_failed_attempt(1, None),
            RetryDecision::Exhausted
        );
    }

    #[test]
    fn policies_serialize_with_a_kind_tag() {
        assert_eq!(
            serde_json::to_value(RetryPolicy::FixedSchedule).unwrap(),
            serde_json::json!({"kind": "fixed_schedule"})
        );
        let e = exp(5, 30);
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"kind": "exponential", "max_retries": 5, "retry_delay_secs": 30})
        );
        assert_eq!(serde_json::from_value::<RetryPolicy>(v).unwrap(), e);
    }

    #[test]
    fn notification_budget_is_eight_receives() {
        use NotificationRetryDecision::*;
        for rc in 1..=7 {
            assert_eq!(
                notification_receive_decision(rc, true),
                Requeue,
                "receive {rc}"
            );
        }
        assert_eq!(notification_receive_decision(8, true), ExhaustAndDeadLetter);
        assert_eq!(notification_receive_decision(9, true), ExhaustAndDeadLetter);
        for rc in [1, 7, 8] {
            assert_eq!(notification_receive_decision(rc, false), FailPermanently);
        }
    }

    #[test]
    fn notification_delay_doubles_from_thirty_seconds_to_the_thirty_minute_cap() {
        // The middle of the jitter's range: the base itself below the cap, 27 min at it (the
        // middle of 24 to 30 minutes).
        let mut none = FixedJitter(0.5);
        let expected = [30, 60, 120, 240, 480, 960, 1620, 1620, 1620];
        for (i, secs) in expected.iter().enumerate() {
            assert_eq!(
                notification_visibility_delay(i as u32 + 1, None, &mut none),
                Duration::from_secs(*secs),
                "receive {}",
                i + 1
            );
        }
        assert_eq!(
            notification_visibility_delay(u32::MAX, None, &mut none),
            27 * MINUTE
        );
        assert_eq!(
            notification_visibility_delay(0, None, &mut none),
            30 * SECOND
        );
    }

    #[test]
    fn notification_jitter_is_twenty_percent_either_way() {
        assert_eq!(
            notification_visibility_delay(1, None, &mut FixedJitter(0.0)),
            24 * SECOND
        );
        assert_eq!(
            notification_visibility_delay(1, None, &mut FixedJitter(0.999_999_9)),
            36 * SECOND
        );
        assert_eq!(
            notification_visibility_delay(7, None, &mut FixedJitter(0.0)),
            24 * MINUTE
        );
        // At the cap the jitter only goes down: 24 to 30 minutes, never 36.
        assert_eq!(
            notification_visibility_delay(7, None, &mut FixedJitter(0.999_999_9)),
            30 * MINUTE
        );
        assert_eq!(
            notification_visibility_delay(7, None, &mut FixedJitter(0.5)),
            27 * MINUTE
        );
        // Receive 6 (16 min): twenty percent down, and up only as far as the cap.
        assert_eq!(
            notification_visibility_delay(6, None, &mut FixedJitter(0.0)),
            Duration::from_secs(768)
        );
        assert_eq!(
            notification_visibility_delay(6, None, &mut FixedJitter(0.999_999_9)),
            Duration::from_secs(1152)
        );
        // Out-of-range samples from a faulty source are clamped, NaN means no jitter.
        assert_eq!(
            notification_visibility_delay(1, None, &mut FixedJitter(7.0)),
            36 * SECOND
        );
        assert_eq!(
            notification_visibility_delay(1, None, &mut FixedJitter(-1.0)),
            24 * SECOND
        );
        assert_eq!(
            notification_visibility_delay(1, None, &mut FixedJitter(f64::NAN)),
            30 * SECOND
        );
    }

    #[test]
    fn notification_delay_respects_a_longer_provider_delay_up_to_twelve_hours() {
        let mut j = FixedJitter(0.5);
        assert_eq!(
            notification_visibility_delay(1, Some(10 * MINUTE), &mut j),
            10 * MINUTE
        );
        assert_eq!(
            notification_visibility_delay(3, Some(5 * SECOND), &mut j),
            120 * SECOND
        );
        assert_eq!(
            notification_visibility_delay(1, Some(Duration::from_millis(45_200)), &mut j),
            46 * SECOND
        );
        assert_eq!(
            notification_visibility_delay(1, Some(2 * DAY), &mut j),
            12 * HOUR
        );
    }

    #[test]
    fn no_jittered_notification_delay_passes_the_thirty_minute_cap() {
        // Many receives, many seeded draws each: every delay stays within twenty percent below
        // its capped base and never above the cap; at the cap the draws still spread out.
        let mut at_cap = Vec::new();
        for seed in 0..64u64 {
            let mut jitter = SeededJitter::new(seed);
            for receive in 1..=40u32 {
                for _ in 0..50 {
                    let d = notification_visibility_delay(receive, None, &mut jitter);
                    let base = (30u64 << (receive - 1).min(20)).min(1800);
                    assert!(d <= NOTIFICATION_MAX_DELAY, "receive {receive}: {d:?}");
                    assert!(d.as_secs() * 10 >= base * 8, "receive {receive}: {d:?}");
                    assert!(d.as_secs() * 10 <= base * 12, "receive {receive}: {d:?}");
                    if receive >= 7 {
                        at_cap.push(d.as_secs());
                    }
                }
            }
        }
        let (low, high) = (at_cap.iter().min().unwrap(), at_cap.iter().max().unwrap());
        assert!(*low < 25 * 60 && *high > 29 * 60, "{low}..{high}");
        let exactly_at_cap = at_cap.iter().filter(|&&s| s == 1800).count();
        assert!(
            exactly_at_cap * 100 < at_cap.len(),
            "{exactly_at_cap} piled on the cap"
        );
    }

    #[test]
    fn seeded_jitter_is_deterministic_and_in_range() {
        let mut a = SeededJitter::new(42);
        let mut b = SeededJitter::new(42);
        let xs: Vec<f64> = (0..1000).map(|_| a.unit()).collect();
        let ys: Vec<f64> = (0..1000).map(|_| b.unit()).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((0.45..0.55).contains(&mean), "mean {mean}");
        let mut r = RandJitter(rand::thread_rng());
        assert!((0.0..1.0).contains(&r.unit()));
    }

    proptest! {
        #[test]
        fn jittered_delay_stays_within_twenty_percent_of_the_capped_base(
            receive in 1u32..=64, seed in any::<u64>()
        ) {
            let d = notification_visibility_delay(receive, None, &mut SeededJitter::new(seed));
            let exponent = (receive - 1).min(20);
            let base = (30u64 << exponent).min(1800) as f64;
            let secs = d.as_secs() as f64;
            prop_assert!(secs >= 0.8 * base && secs <= 1.2 * base, "{secs} vs base {base}");
            prop_assert!(d <= NOTIFICATION_MAX_DELAY);
            prop_assert!(d >= 24 * SECOND);
        }

        #[test]
        fn only_a_provider_delay_goes_beyond_thirty_minutes(
            receive in 1u32..=64, seed in any::<u64>(), ra_secs in 0u64..200_000
        ) {
            let ra = Duration::from_secs(ra_secs);
            let d = notification_visibility_delay(receive, Some(ra), &mut SeededJitter::new(seed));
            prop_assert!(d <= SQS_MAX_VISIBILITY);
            prop_assert!(d >= ra.min(SQS_MAX_VISIBILITY));
            if d > NOTIFICATION_MAX_DELAY {
                prop_assert_eq!(d, ra.min(SQS_MAX_VISIBILITY));
            }
        }

        #[test]
        fn exponential_waits_never_shrink(
            max_retries in 1u32..=MAX_RETRIES_LIMIT, delay in 1u32..=MAX_RETRY_DELAY_SECS
        ) {
            let p = exp(max_retries, delay);
            let mut last = Duration::ZERO;
            for attempt in 1..max_retries {
                match p.after_failed_attempt(attempt, None) {
                    RetryDecision::RetryAfter(w) => {
                        prop_assert!(w >= last, "attempt {attempt}: {w:?} < {last:?}");
                        prop_assert!(w <= EXPONENTIAL_MAX_WAIT);
                        prop_assert!(w >= Duration::from_secs(delay.into()));
                        last = w;
                    }
                    RetryDecision::Exhausted => prop_assert!(false, "exhausted early at {attempt}"),
                }
            }
            prop_assert_eq!(p.after_failed_attempt(max_retries, None), RetryDecision::Exhausted);
        }

        #[test]
        fn a_provider_delay_never_shortens_the_schedule(attempt in 1u32..6, ra_secs in 0u64..100_000) {
            let p = RetryPolicy::FixedSchedule;
            let plain = p.after_failed_attempt(attempt, None);
            let with = p.after_failed_attempt(attempt, Some(Duration::from_secs(ra_secs)));
            match (plain, with) {
                (RetryDecision::RetryAfter(a), RetryDecision::RetryAfter(b)) => {
                    prop_assert!(b >= a);
                    prop_assert!(b == a || b == Duration::from_secs(ra_secs).min(RETRY_AFTER_CAP));
                }
                other => prop_assert!(false, "{other:?}"),
            }
        }
    }
}
