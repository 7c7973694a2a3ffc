//! The warning of a skipped notification delivery (the `sending → skipped` row,
//! `docs/lifecycles.md#notification-delivery`), limited per process: the first skip a process
//! meets is warned about, then at most one in each [`SKIP_WARNING_INTERVAL`], so a burst of
//! skips (a channel switched off for many recipients) cannot flood the logs.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one "skipped" warning per this interval per process.
pub(crate) const SKIP_WARNING_INTERVAL: Duration = Duration::from_secs(60);

/// When this process last warned about a skip.
#[derive(Default)]
pub(crate) struct SkipWarnings {
    last: Mutex<Option<Instant>>,
}

impl SkipWarnings {
    /// Whether a skip met at `now` is warned about (and, if so, the interval starts again).
    pub(crate) fn due(&self, now: Instant) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let due = last.is_none_or(|t| now.saturating_duration_since(t) >= SKIP_WARNING_INTERVAL);
        if due {
            *last = Some(now);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_skip_is_warned_about_then_one_a_minute_however_many_come() {
        let warnings = SkipWarnings::default();
        let start = Instant::now();
        let warned: Vec<u64> = (0..300u64)
            .filter(|s| warnings.due(start + Duration::from_secs(*s) / 2))
            .collect();
        // A skip every half second for 150 s: warned at 0, 60 and 120 s only.
        assert_eq!(warned, [0, 120, 240]);
    }

    #[test]
    fn each_process_has_its_own_limit() {
        let (one, other) = (SkipWarnings::default(), SkipWarnings::default());
        let now = Instant::now();
        assert!(one.due(now));
        assert!(!one.due(now + Duration::from_secs(59)));
        assert!(
            other.due(now + Duration::from_secs(59)),
            "its own first skip"
        );
        assert!(one.due(now + SKIP_WARNING_INTERVAL));
    }
}
