//! Operator window replay (`docs/lifecycles.md#replay-job`; each restart is a row of
//! `docs/lifecycles.md#integration-delivery`): the rules, without I/O.
//!
//! * **The window** is `[from, to)` over the change's time (`occurred_at`): at most
//!   [`MAX_WINDOW`] (seven days) long, `to` after `from`, not in the future (beyond
//!   [`FUTURE_TOLERANCE`] of clock difference) and within retained history (`from` no earlier than
//!   [`RETENTION`] before now: terminal events and their deliveries expire after it).
//! * **What it restarts**: the subscription's *existing* delivery records whose change falls in
//!   the window: each takes its operator-restart row (`delivered`, `retrying`, `dead` and
//!   `failed` go back to `pending`; a replay is an operator's request to retry the window).
//!   `pending` ones are already waiting and are left alone; `skipped_filter` ones are never
//!   replayed (its "cannot happen" row). Changes skipped while the subscription was paused have no
//!   delivery record, so replay never invents them.
//! * **The job** is tracked ([`REPLAY_LIFECYCLE`]): `running` while chunks remain, `completed` when
//!   the whole retained history of the subscription has been walked. Its position (the last change
//!   walked) is saved after every chunk, and a delivery it restarted remembers the job, so a run
//!   cut short (a Lambda timeout) is resumed from the saved position without restarting any
//!   delivery twice.

use super::integration_delivery::{operator_restart, DeliveryMove, DeliveryStatus};
use super::lifecycle::{row, status_enum, term_enum, Actor, Lifecycle, TransitionError};
use super::time::{Timestamp, DAY};
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub use super::event::RETENTION;

/// The longest window an operator may replay.
pub const MAX_WINDOW: Duration = Duration::from_secs(7 * 86_400);
/// How far `to` may lie past the server's clock (the operator's clock may run slightly ahead).
pub const FUTURE_TOLERANCE: Duration = Duration::from_secs(60);

const _: () = assert!(MAX_WINDOW.as_secs() == 7 * DAY.as_secs());

/// A validated replay window, `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayWindow {
    pub from: Timestamp,
    pub to: Timestamp,
}

impl ReplayWindow {
    pub fn contains(&self, t: Timestamp) -> bool {
        self.from <= t && t < self.to
    }
    pub fn length(&self) -> Duration {
        self.to.since(self.from)
    }
}

/// Why a window is refused. `field` names the request field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("must be after `from` (the window is reversed or empty)")]
    Reversed,
    #[error("lies in the future; replay covers changes that already happened (now is {now})")]
    InFuture { now: Timestamp },
    #[error("makes a window of {hours} hours; at most seven days (168 hours) can be replayed")]
    TooLong { hours: u64 },
    #[error("is before retained history; the oldest replayable instant is {oldest}")]
    BeforeRetention { oldest: Timestamp },
}

impl WindowError {
    pub fn field(&self) -> &'static str {
        match self {
            WindowError::BeforeRetention { .. } => "from",
            _ => "to",
        }
    }
}

/// Validates a window at `now`, reporting every problem at once.
pub fn validate_window(
    from: Timestamp,
    to: Timestamp,
    now: Timestamp,
) -> Result<ReplayWindow, Vec<WindowError>> {
    let mut errors = Vec::new();
    if to <= from {
        errors.push(WindowError::Reversed);
    } else if to.since(from) > MAX_WINDOW {
        let hours = to.since(from).as_secs().div_ceil(3600);
        errors.push(WindowError::TooLong { hours });
    }
    if to > now.plus(FUTURE_TOLERANCE) {
        errors.push(WindowError::InFuture { now });
    }
    let oldest = now.minus(RETENTION);
    if from < oldest {
        errors.push(WindowError::BeforeRetention { oldest });
    }
    if errors.is_empty() {
        Ok(ReplayWindow { from, to })
    } else {
        Err(errors)
    }
}

/// What a replay does with one delivery record it walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayItem {
    /// Restart it: the move (trigger and `pending`) whose condition guards the write.
    Restart(DeliveryMove),
    /// This job already restarted it (a resumed run repeats a chunk): count it, write nothing.
    RestartedByThisJob,
    /// `pending`: it is waiting already.
    AlreadyPending,
    /// `skipped_filter`: never replayed; the "cannot happen" reason.
    NeverReplayed(&'static str),
    /// Its change is outside the window.
    OutsideWindow,
}

/// Decides one delivery: its status, its change's time, and whether this job restarted it before.
pub fn replay_item(
    status: DeliveryStatus,
    occurred_at: Timestamp,
    window: &ReplayWindow,
    restarted_by_this_job: bool,
) -> ReplayItem {
    if !window.contains(occurred_at) {
        return ReplayItem::OutsideWindow;
    }
    if restarted_by_this_job {
        return ReplayItem::RestartedByThisJob;
    }
    match operator_restart(status) {
        Ok(movement) => ReplayItem::Restart(movement),
        Err(TransitionError::ForbiddenByRule { why, .. }) => ReplayItem::NeverReplayed(why),
        Err(_) => ReplayItem::AlreadyPending,
    }
}

status_enum! {
    /// The replay job's status.
    pub enum ReplayStatus {
        Running = "running" => "chunks remain; a run holds a short lease while it works, and the next reconcile run (or an operator) resumes a run that stopped",
        Completed = "completed" => "every retained delivery of the subscription was walked",
    }
}

term_enum! {
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ReplayTrigger {
        AdvanceChunk => "a chunk walked, more remain",
        FinishWindow => "the last chunk walked",
    }
}

term_enum! {
    /// What the shell does with a replay job move.
    pub enum ReplayEffect {
        SavePosition => "save the position and the counts",
        SaveCounts => "save the counts",
        ReleaseLease => "release the run's lease",
    }
}

use ReplayEffect as RE;
use ReplayStatus as RS;
use ReplayTrigger as RT;

/// The replay job's lifecycle (this project's own: replay only has to be bounded and resumable).
#[rustfmt::skip]
pub static REPLAY_LIFECYCLE: Lifecycle<ReplayStatus, ReplayTrigger, ReplayEffect> = Lifecycle {
    name: "Replay job",
    reference: "replay of a bounded window",
    summary: "An operator's window replay restarts the subscription's existing deliveries whose change falls in a window of at most seven days, within retained history. The job walks the deliveries in chunks and saves its position after each, and a delivery it restarted remembers the job, so a run cut short resumes without restarting anything twice.",
    initial: &[RS::Running],
    transitions: &[
        row(RS::Running, RT::AdvanceChunk, RS::Running,   "the run holds the job's lease and more deliveries remain", &[RE::SavePosition], &[Actor::ReplayRun]),
        row(RS::Running, RT::FinishWindow, RS::Completed, "the run holds the job's lease and walked the last delivery", &[RE::SaveCounts, RE::ReleaseLease], &[Actor::ReplayRun]),
    ],
    invalid: &[],
};

impl ReplayStatus {
    /// Whether a job in this status still has work: the table moves it on (a completed job is
    /// final, `docs/lifecycles.md#replay-job`).
    pub fn is_under_way(self) -> bool {
        !REPLAY_LIFECYCLE.is_absorbing(self)
    }
}

/// After a chunk of a running job: whether the job is finished. The move is the trigger's row.
pub fn after_chunk(more_remain: bool) -> (ReplayTrigger, ReplayStatus) {
    let trigger = if more_remain {
        RT::AdvanceChunk
    } else {
        RT::FinishWindow
    };
    let row = REPLAY_LIFECYCLE
        .on(RS::Running, trigger)
        .unwrap_or_else(|e| unreachable!("a running job has a row for every trigger: {e}"));
    row.movement()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::integration_delivery::DeliveryTrigger;
    use crate::domain::lifecycle::testing::assert_exhaustive;
    use crate::domain::time::{HOUR, MINUTE, SECOND};

    #[test]
    fn a_running_job_is_under_way_and_a_completed_one_is_not() {
        assert!(ReplayStatus::Running.is_under_way());
        assert!(!ReplayStatus::Completed.is_under_way());
    }

    const NOW: Timestamp = Timestamp(1_700_000_000_000);

    #[test]
    fn a_seven_day_window_is_accepted_and_an_eight_day_one_refused() {
        let w = validate_window(NOW.minus(MAX_WINDOW), NOW, NOW).unwrap();
        assert_eq!(w.length(), MAX_WINDOW);
        let errors = validate_window(NOW.minus(8 * DAY), NOW, NOW).unwrap_err();
        assert_eq!(errors, vec![WindowError::TooLong { hours: 192 }]);
        assert_eq!(errors[0].field(), "to");
        let errors = validate_window(NOW.minus(MAX_WINDOW + SECOND), NOW, NOW).unwrap_err();
        assert_eq!(errors, vec![WindowError::TooLong { hours: 169 }]);
    }

    #[test]
    fn reversed_future_and_unretained_windows_are_refused() {
        assert_eq!(
            validate_window(NOW, NOW.minus(HOUR), NOW).unwrap_err(),
            vec![WindowError::Reversed]
        );
        assert_eq!(
            validate_window(NOW, NOW, NOW).unwrap_err(),
            vec![WindowError::Reversed]
        );
        assert_eq!(
            validate_window(NOW.minus(HOUR), NOW.plus(HOUR), NOW).unwrap_err(),
            vec![WindowError::InFuture { now: NOW }]
        );
        // A little clock difference is tolerated.
        assert!(validate_window(NOW.minus(HOUR), NOW.plus(MINUTE), NOW).is_ok());
        let old = NOW.minus(RETENTION + DAY);
        let errors = validate_window(old, old.plus(DAY), NOW).unwrap_err();
        assert_eq!(
            errors,
            vec![WindowError::BeforeRetention {
                oldest: NOW.minus(RETENTION)
            }]
        );
        assert_eq!(errors[0].field(), "from");
        // Everything wrong at once is reported at once.
        assert_eq!(
            validate_window(old, NOW.plus(DAY), NOW).unwrap_err().len(),
            3
        );
    }

    #[test]
    fn replay_restarts_existing_records_in_the_window_only() {
        let w = ReplayWindow {
            from: NOW.minus(DAY),
            to: NOW,
        };
        let inside = NOW.minus(HOUR);
        assert_eq!(
            replay_item(DeliveryStatus::Delivered, inside, &w, false),
            ReplayItem::Restart((
                DeliveryTrigger::RestartEligibleDeliveryWork,
                DeliveryStatus::Pending
            ))
        );
        assert_eq!(
            replay_item(DeliveryStatus::Dead, inside, &w, false),
            ReplayItem::Restart((
                DeliveryTrigger::RestartDeadDelivery,
                DeliveryStatus::Pending
            ))
        );
        assert_eq!(
            replay_item(DeliveryStatus::Failed, inside, &w, false),
            ReplayItem::Restart((
                DeliveryTrigger::RestartFailedDelivery,
                DeliveryStatus::Pending
            ))
        );
        assert_eq!(
            replay_item(DeliveryStatus::Pending, inside, &w, false),
            ReplayItem::AlreadyPending
        );
        assert!(matches!(
            replay_item(DeliveryStatus::SkippedFilter, inside, &w, false),
            ReplayItem::NeverReplayed(why) if why.contains("filtered out")
        ));
        assert_eq!(
            replay_item(DeliveryStatus::Pending, inside, &w, true),
            ReplayItem::RestartedByThisJob
        );
        // [from, to): `to` itself is outside.
        assert_eq!(
            replay_item(DeliveryStatus::Delivered, NOW, &w, false),
            ReplayItem::OutsideWindow
        );
        assert!(w.contains(w.from));
    }

    #[test]
    fn the_job_lifecycle() {
        assert_exhaustive(
            &REPLAY_LIFECYCLE,
            &[
                (
                    ReplayStatus::Running,
                    ReplayTrigger::AdvanceChunk,
                    ReplayStatus::Running,
                ),
                (
                    ReplayStatus::Running,
                    ReplayTrigger::FinishWindow,
                    ReplayStatus::Completed,
                ),
            ],
            &[],
        );
        assert!(REPLAY_LIFECYCLE.is_absorbing(ReplayStatus::Completed));
        assert_eq!(
            after_chunk(true),
            (ReplayTrigger::AdvanceChunk, ReplayStatus::Running)
        );
        assert_eq!(
            after_chunk(false),
            (ReplayTrigger::FinishWindow, ReplayStatus::Completed)
        );
    }
}
