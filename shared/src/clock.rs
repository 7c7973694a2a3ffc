//! The injected clock. Production reads the system time; the harness uses a manual clock so a
//! six-hour backoff is a method call, not six hours.

use crate::domain::time::Timestamp;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp(chrono::Utc::now().timestamp_millis())
    }
}

/// A clock that moves only when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn at(t: Timestamp) -> Self {
        ManualClock(Arc::new(AtomicI64::new(t.millis())))
    }
    /// Starts at the current system time, so items' TTLs and SQS timestamps stay plausible.
    pub fn starting_now() -> Self {
        Self::at(SystemClock.now())
    }
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }
    pub fn set(&self, t: Timestamp) {
        self.0.store(t.millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told_and_clones_share_it() {
        let c = ManualClock::at(Timestamp(1_000));
        let d = c.clone();
        assert_eq!(c.now(), Timestamp(1_000));
        d.advance(Duration::from_secs(6 * 3600));
        assert_eq!(c.now(), Timestamp(1_000 + 6 * 3600 * 1000));
    }
}
