//! The roll-up's budgets and names: the listing read's overlap, the retries of a lost race, how
//! many events roll up at once, and the `rollup` index.

use std::time::Duration;

/// How far before the walk's mark each listing read starts again: an event written just before a
/// walk read its account's listing may not have been on that eventually consistent index yet
/// (its entry shows within a second or so).
pub const LISTING_OVERLAP: Duration = Duration::from_secs(60);

/// How often one roll-up re-reads and re-decides after losing a race before it leaves the event
/// to the next trigger or pass.
pub const ROLLUP_ATTEMPTS: usize = 3;
/// Events rolled up at once within a batch.
pub const ROLLUP_CONCURRENCY: usize = 16;

/// The name of the sparse index of open events (template.yaml).
pub const ROLLUP_INDEX: &str = "rollup";
