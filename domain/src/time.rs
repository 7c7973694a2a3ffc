//! Instants as milliseconds since the Unix epoch. The core never reads a clock: callers pass `now`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// A point in time, milliseconds since the Unix epoch (UTC). Stored in DynamoDB as a number so that
/// range conditions (`due_at <= :now`) work on it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }
    pub const fn millis(self) -> i64 {
        self.0
    }
    pub const fn seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }
    pub fn plus(self, d: Duration) -> Self {
        Timestamp(
            self.0
                .saturating_add(d.as_millis().min(i64::MAX as u128) as i64),
        )
    }
    pub fn minus(self, d: Duration) -> Self {
        Timestamp(
            self.0
                .saturating_sub(d.as_millis().min(i64::MAX as u128) as i64),
        )
    }
    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0).max(0) as u64)
    }
    /// RFC 3339 rendering for people and APIs (UTC, millisecond precision).
    pub fn to_rfc3339(self) -> String {
        chrono::DateTime::<chrono::Utc>::from_timestamp_millis(self.0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_else(|| self.0.to_string())
    }
    /// Parses RFC 3339 (as APIs receive it).
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| Timestamp(t.timestamp_millis()))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

pub const SECOND: Duration = Duration::from_secs(1);
pub const MINUTE: Duration = Duration::from_secs(60);
pub const HOUR: Duration = Duration::from_secs(3600);
pub const DAY: Duration = Duration::from_secs(86_400);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_and_rendering() {
        let t = Timestamp::from_millis(1_700_000_000_000);
        assert_eq!(t.plus(MINUTE).millis(), 1_700_000_060_000);
        assert_eq!(t.plus(MINUTE).since(t), MINUTE);
        assert_eq!(t.since(t.plus(MINUTE)), Duration::ZERO);
        assert_eq!(t.to_rfc3339(), "2023-11-14T22:13:20.000Z");
        assert_eq!(Timestamp::parse_rfc3339("2023-11-14T22:13:20Z"), Some(t));
        assert_eq!(t.seconds(), 1_700_000_000);
    }
}
