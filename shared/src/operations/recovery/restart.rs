//! What goes with the write that restarts a delivery (operator retry and window replay,
//! [`crate::store::delivery::restart`]): the pull cursor's rewind that precedes it for pull
//! deliveries, and the event monitor's reopen that follows it for push deliveries. See the
//! module docs of [`super`].

use crate::domain::integration_delivery::FIRST_DISPATCH_GRACE;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, SubscriptionId};
use crate::operations::{Ops, OpsError};
use crate::store::delivery::{self, Delivery, Restart};
use crate::store::subscription;
use crate::store::write::Write;

/// Tries of a rewind that keeps meeting concurrent cursor writes.
const REWIND_TRIES: usize = 8;

/// The restart as a write, due (push) after the grace ingest gives a new delivery.
pub(crate) fn restart_write(
    ops: &Ops<'_>,
    r: &Restart<'_>,
    now: Timestamp,
) -> Result<Write, OpsError> {
    Ok(delivery::restart(ops.table, r, FIRST_DISPATCH_GRACE, now)?)
}

/// Writes one restart on its own (replay). `Ok(false)` when the delivery moved since it was read
/// (or this job already restarted it).
pub(crate) async fn restart_one(ops: &Ops<'_>, r: &Restart<'_>) -> Result<bool, OpsError> {
    ops.apply(restart_write(ops, r, ops.now())?).await
}

/// After a push delivery's restart: its event, if final, is reopened so the roll-up settles it
/// again (`sent | failed → partial`, the operator rows of `docs/lifecycles.md#event-status`). Pull
/// deliveries are left out of the roll-up, so their events are not touched. Returns what the
/// monitor did, for the response; a failure is logged and reported, never undoes the restart
/// (the event is rolled up again when the delivery settles).
pub async fn reopen_event(ops: &Ops<'_>, d: &Delivery) -> Option<String> {
    if d.method.is_poll() {
        return None;
    }
    match crate::delivery::rollup::reopen_event(
        ops.dynamo,
        ops.table,
        &d.account_id,
        &d.change_id,
        ops.now(),
    )
    .await
    {
        Ok(outcome) => Some(
            match outcome {
                crate::delivery::rollup::ReopenOutcome::Reopened { .. } => "reopened",
                crate::delivery::rollup::ReopenOutcome::AlreadyOpen { .. } => "already_open",
                crate::delivery::rollup::ReopenOutcome::NotReopenable { .. } => "not_reopenable",
                crate::delivery::rollup::ReopenOutcome::Missing => "missing",
            }
            .to_owned(),
        ),
        Err(e) => {
            tracing::error!(
                delivery_id = %d.delivery_id,
                error = %e,
                "delivery restarted but its event could not be reopened; it is rolled up when the delivery settles"
            );
            Some("reopen_failed".to_owned())
        }
    }
}

/// Before restarting pull deliveries whose earliest change is `earliest`: moves the
/// subscription's acknowledged cursor back to just before `earliest` (if it is at or past it) and
/// increments the pull epoch, so that cursors read before the restart are refused as stale and the
/// adapter's next read shows the restarted deliveries. Returns the new epoch.
pub(crate) async fn rewind_pull_cursor(
    ops: &Ops<'_>,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    earliest: &ChangeId,
) -> Result<u32, OpsError> {
    let before = delivery::change_before(ops.dynamo, ops.table, subscription_id, earliest).await?;
    for _ in 0..REWIND_TRIES {
        let sub = ops.subscription(account_id, subscription_id).await?;
        let rewind = subscription::rewind_pull_cursor(
            ops.table,
            &sub,
            earliest,
            before.as_ref(),
            ops.now(),
        )?;
        if ops.apply(rewind).await? {
            let epoch = sub.pull_epoch.saturating_add(1);
            tracing::info!(
                %subscription_id,
                from = sub.pull_cursor.as_ref().map(|c| c.as_str()),
                to = before.as_ref().map(|c| c.as_str()),
                epoch,
                "pull cursor rewound for an operator restart"
            );
            return Ok(epoch);
        }
    }
    Err(OpsError::Conflict(
        "the subscription's pull cursor kept moving while it was being rewound; retry the request"
            .into(),
    ))
}
