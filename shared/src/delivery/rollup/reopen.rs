//! Reopening a final event after an operator restart of one of its deliveries (the operator rows
//! of `docs/lifecycles.md#event-status`).

use super::error::RollUpError;
use super::expiry::set_delivery_expiry;
use super::limits::ROLLUP_ATTEMPTS;
use crate::domain::event::EventStatus;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId};
use crate::store;
use crate::store::event_partition::read_partition;
use crate::store::keys;
use crate::store::write::send;
use crate::store::StoreError;
use serde::Serialize;

/// What [`reopen_event`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ReopenOutcome {
    /// `sent | failed → partial`, back on the roll-up index, retention expiry removed.
    Reopened {
        from: EventStatus,
    },
    /// The event was still `new` or `partial`: its reopen counter moved on, so any roll-up decided
    /// before the restart cannot land.
    AlreadyOpen {
        status: EventStatus,
    },
    /// `skipped` is never reopened: no subscriber took the event, so nothing can be retried.
    NotReopenable {
        status: EventStatus,
    },
    Missing,
}

/// Operator retry and window replay (the operator rows of `docs/lifecycles.md#event-status`, this
/// project's addition to the event status lifecycle): reopens a final event so the roll-up
/// settles it again. **Call it after the delivery restart is written**: a roll-up that read the
/// deliveries before the restart then fails on the reopen counter, and one that reads after it
/// sees the delivery waiting.
///
/// `sent | failed → partial` is written with the condition of [`EVENT_LIFECYCLE`]'s operator rows
/// (`EventTrigger::OperatorRestartReopens`); the event goes back on the `rollup` index and loses
/// its expiry, as do its deliveries. Safe to repeat.
pub async fn reopen_event(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    change_id: &ChangeId,
    now: Timestamp,
) -> Result<ReopenOutcome, RollUpError> {
    let pk = keys::event_pk(account_id, change_id);
    for _ in 0..ROLLUP_ATTEMPTS {
        let partition = read_partition(dynamo, table, &pk).await?;
        let Some(event) = partition.event else {
            return Ok(ReopenOutcome::Missing);
        };
        let status = event.status();
        let written = match status {
            EventStatus::Skipped => return Ok(ReopenOutcome::NotReopenable { status }),
            EventStatus::Sent | EventStatus::Failed => {
                let w = store::event::reopen(table, &event, now)?;
                send(dynamo, w).await?.applied()
            }
            EventStatus::New | EventStatus::Partial => {
                // Not a status move: a fence against roll-ups decided before the restart.
                let w = store::event::fence_open(table, &event)?;
                send(dynamo, w).await?.applied()
            }
        };
        if written {
            set_delivery_expiry(dynamo, table, &partition.deliveries, None).await?;
            tracing::info!(pk, from = %status, "event reopened by an operator restart");
            return Ok(match status {
                EventStatus::Sent | EventStatus::Failed => ReopenOutcome::Reopened { from: status },
                _ => ReopenOutcome::AlreadyOpen { status },
            });
        }
    }
    Err(RollUpError::Store(StoreError::Dynamo(format!(
        "reopening {pk}: the event kept changing under {ROLLUP_ATTEMPTS} attempts"
    ))))
}
