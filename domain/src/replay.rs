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
    /// A recovery's: its status is not one the recovery restarts (a delivered one, say).
    NotSelected,
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

/// What a job does: a replay resends everything in its window; a recovery restarts only the
/// deliveries in the statuses it names (dead and failed by default) whose change occurred since
/// its `since`. Both are the same job item, walker, chunking and resume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    #[default]
    Replay,
    Recovery,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Replay => "replay",
            JobKind::Recovery => "recovery",
        }
    }
}

impl std::fmt::Display for JobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How far back a recovery's `since` may lie (the replay window's bound).
pub const MAX_RECOVERY_AGE: Duration = MAX_WINDOW;
/// The statuses a recovery may restart: those an operator's or an administrator's retry accepts,
/// less `delivered` (a recovery restarts what did not arrive; a replay resends what did).
pub const RECOVERABLE: [DeliveryStatus; 3] = [
    DeliveryStatus::Dead,
    DeliveryStatus::Failed,
    DeliveryStatus::Retrying,
];
/// A recovery's statuses when the request names none.
pub const DEFAULT_RECOVERY_STATUSES: [DeliveryStatus; 2] =
    [DeliveryStatus::Dead, DeliveryStatus::Failed];

/// Jobs (replays and recoveries) that may run at once on one subscription when started through
/// the account's door (an account token or the console's administrator).
pub const RUNNING_JOBS_PER_SUBSCRIPTION: u32 = 1;
/// Jobs an account may start through its own door per UTC day.
pub const JOBS_PER_ACCOUNT_PER_DAY: u32 = 10;

/// Why a recovery request is refused. `field` names the request field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryError {
    #[error("is more than seven days back; a recovery reaches at most seven days (the oldest `since` now is {oldest})")]
    TooOld { oldest: Timestamp },
    #[error("lies in the future (now is {now})")]
    InFuture { now: Timestamp },
    #[error("must name at least one status")]
    NoStatus,
    #[error("`{0}` cannot be recovered; a recovery restarts dead, failed or retrying deliveries (a replay resends delivered ones)")]
    NotRecoverable(DeliveryStatus),
}

impl RecoveryError {
    pub fn field(&self) -> &'static str {
        match self {
            RecoveryError::TooOld { .. } | RecoveryError::InFuture { .. } => "since",
            RecoveryError::NoStatus | RecoveryError::NotRecoverable(_) => "statuses",
        }
    }
}

/// Validates a recovery's `since` and `statuses` at `now`, reporting every problem at once. The
/// window it walks is `[since, now + FUTURE_TOLERANCE)`: every change that occurred since `since`.
pub fn validate_recovery(
    since: Timestamp,
    statuses: &[DeliveryStatus],
    now: Timestamp,
) -> Result<ReplayWindow, Vec<RecoveryError>> {
    let mut errors = Vec::new();
    let oldest = now.minus(MAX_RECOVERY_AGE);
    if since < oldest {
        errors.push(RecoveryError::TooOld { oldest });
    } else if since > now.plus(FUTURE_TOLERANCE) {
        errors.push(RecoveryError::InFuture { now });
    }
    if statuses.is_empty() {
        errors.push(RecoveryError::NoStatus);
    }
    for s in statuses {
        if !RECOVERABLE.contains(s) {
            errors.push(RecoveryError::NotRecoverable(*s));
        }
    }
    if errors.is_empty() {
        Ok(ReplayWindow {
            from: since,
            to: now.plus(FUTURE_TOLERANCE),
        })
    } else {
        Err(errors)
    }
}

/// Decides one delivery for a recovery: as a replay would, but only deliveries in `statuses`
/// are restarted; the others in the window are [`ReplayItem::NotSelected`].
pub fn recovery_item(
    status: DeliveryStatus,
    occurred_at: Timestamp,
    window: &ReplayWindow,
    restarted_by_this_job: bool,
    statuses: &[DeliveryStatus],
) -> ReplayItem {
    if !window.contains(occurred_at) {
        return ReplayItem::OutsideWindow;
    }
    if restarted_by_this_job {
        return ReplayItem::RestartedByThisJob;
    }
    if !statuses.contains(&status) {
        return ReplayItem::NotSelected;
    }
    replay_item(status, occurred_at, window, false)
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
    use crate::integration_delivery::DeliveryTrigger;
    use crate::lifecycle::testing::assert_exhaustive;
    use crate::time::{HOUR, MINUTE, SECOND};

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
    fn a_recovery_reaches_seven_days_back_and_only_statuses_a_retry_takes_that_are_not_delivered() {
        let w = validate_recovery(NOW.minus(MAX_RECOVERY_AGE), &DEFAULT_RECOVERY_STATUSES, NOW)
            .unwrap();
        assert_eq!(
            (w.from, w.to),
            (NOW.minus(7 * DAY), NOW.plus(FUTURE_TOLERANCE))
        );
        let errors = validate_recovery(
            NOW.minus(7 * DAY + SECOND),
            &[DeliveryStatus::Delivered],
            NOW,
        )
        .unwrap_err();
        assert_eq!(
            errors,
            vec![
                RecoveryError::TooOld {
                    oldest: NOW.minus(7 * DAY)
                },
                RecoveryError::NotRecoverable(DeliveryStatus::Delivered)
            ]
        );
        assert_eq!(errors[0].field(), "since");
        assert_eq!(errors[1].field(), "statuses");
        assert_eq!(
            validate_recovery(NOW.plus(HOUR), &[], NOW).unwrap_err(),
            vec![
                RecoveryError::InFuture { now: NOW },
                RecoveryError::NoStatus
            ]
        );
        for s in [
            DeliveryStatus::Pending,
            DeliveryStatus::SkippedFilter,
            DeliveryStatus::Delivered,
        ] {
            assert!(validate_recovery(NOW, &[s], NOW).is_err(), "{s}");
        }
        assert!(validate_recovery(NOW, &RECOVERABLE, NOW).is_ok());
    }

    #[test]
    fn a_recovery_restarts_only_the_statuses_it_names() {
        let w = ReplayWindow {
            from: NOW.minus(DAY),
            to: NOW,
        };
        let inside = NOW.minus(HOUR);
        let statuses = DEFAULT_RECOVERY_STATUSES;
        assert_eq!(
            recovery_item(DeliveryStatus::Dead, inside, &w, false, &statuses),
            ReplayItem::Restart((
                DeliveryTrigger::RestartDeadDelivery,
                DeliveryStatus::Pending
            ))
        );
        assert!(matches!(
            recovery_item(DeliveryStatus::Failed, inside, &w, false, &statuses),
            ReplayItem::Restart(_)
        ));
        for s in [
            DeliveryStatus::Delivered,
            DeliveryStatus::Retrying,
            DeliveryStatus::Pending,
        ] {
            assert_eq!(
                recovery_item(s, inside, &w, false, &statuses),
                ReplayItem::NotSelected,
                "{s}"
            );
        }
        // Restarted by this job before (a resumed run), it is counted, not restarted again.
        assert_eq!(
            recovery_item(DeliveryStatus::Dead, inside, &w, true, &statuses),
            ReplayItem::RestartedByThisJob
        );
        assert_eq!(
            recovery_item(DeliveryStatus::Dead, NOW, &w, false, &statuses),
            ReplayItem::OutsideWindow
        );
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
