//! The adapters' pull cursor on DynamoDB (the pull step of the pipeline: an adapter reads its
//! pending changes and moves its cursor past them; row `pending → delivered` "the pull cursor
//! passes it" in `docs/lifecycles.md#integration-delivery`).
//! The rules — what a cursor is, where a read starts, which writes are refused, what a write
//! covers — are in [`crate::domain::pull_cursor`]; this applies them.
//!
//! * **Read**: the subscription's `pending` deliveries in change order on `by_subscription`, from
//!   the planned lower bound, that were visible at the read's horizon, a page at a time.
//! * **Write**: first every `pending` delivery the cursor covers becomes `delivered`, each by its
//!   own conditional write (`status = pending` by `AdvancePullCursor`'s row, written and restarted
//!   by the horizon, no live worker lease), so a delivery someone else moved since the read is
//!   never overwritten; then the acknowledged position moves, conditional on the epoch the cursor
//!   was read in and on not moving backwards. A write cut short (a timeout) is simply repeated:
//!   covering is idempotent and the position has not moved yet.
//!
//! Only `poll` integrations' subscriptions are read this way; a push (webhook or internal)
//! subscription answers `409 Conflict`: its changes are delivered by the worker, and
//! acknowledging them through a cursor would mark deliveries delivered that no adapter received.

use super::{Ops, OpsError, WRITE_CONCURRENCY};
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::pull_cursor::{
    check_target, check_write, plan_read, CursorError, PullCursor, TargetFacts,
};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, IntegrationId, SubscriptionId};
use crate::store::delivery::{
    self, by_subscription_page, gather_by_subscription, Delivery, DeliveryWork, Filter, Gathered,
    SubscriptionRange, Upper,
};
use crate::store::subscription::{self, Subscription};
use futures::stream::{self, StreamExt};

/// Index pages one read or write evaluates at most per call of the loop.
const INDEX_PAGE: i32 = 100;
/// Index pages one read evaluates before it answers with what it has (and `has_more`).
const MAX_READ_ROUNDS: usize = 10;

impl From<CursorError> for OpsError {
    fn from(e: CursorError) -> Self {
        if e.is_conflict() {
            OpsError::Conflict(format!("cursor {e}"))
        } else {
            OpsError::invalid("cursor", e.to_string())
        }
    }
}

/// The subscription an adapter may pull: the integration's own, in its account, of a `poll`
/// integration. Another account's or another integration's subscription is "not found".
pub(crate) async fn pull_subscription(
    ops: &Ops<'_>,
    account_id: &AccountId,
    integration_id: &IntegrationId,
    subscription_id: &SubscriptionId,
) -> Result<Subscription, OpsError> {
    let sub = ops.subscription(account_id, subscription_id).await?;
    if &sub.integration_id != integration_id {
        return Err(OpsError::NotFound("subscription"));
    }
    let integration = ops
        .integration(account_id, integration_id)
        .await?
        .ok_or(OpsError::NotFound("subscription"))?;
    if !integration.delivery_method().is_poll() {
        return Err(OpsError::Conflict(format!(
            "this subscription's integration delivers by {} push, not pull: its changes are sent \
             by the delivery worker and are not read or acknowledged through a cursor",
            integration.delivery_method()
        )));
    }
    Ok(sub)
}

/// One pulled change.
#[derive(Debug, Clone)]
pub(crate) struct PulledChange {
    /// Acknowledges this change and everything before it.
    pub cursor: PullCursor,
    pub delivery: Delivery,
}

/// One page of a read.
#[derive(Debug, Clone)]
pub(crate) struct PullPage {
    pub changes: Vec<PulledChange>,
    /// Acknowledges the whole page; also the `cursor` to read the next page from.
    pub next_cursor: PullCursor,
    /// More changes may follow: read again from `next_cursor`.
    pub has_more: bool,
}

fn pending_filter(account_id: &AccountId, horizon: Option<Timestamp>) -> Filter {
    Filter {
        statuses: vec![DeliveryStatus::Pending],
        written_through: horizon,
        ..Filter::account(account_id)
    }
}

/// Storage facts about the change a cursor names.
async fn target_facts(
    ops: &Ops<'_>,
    sub: &Subscription,
    change_id: &ChangeId,
) -> Result<TargetFacts, OpsError> {
    let work = DeliveryWork {
        account_id: sub.account_id.clone(),
        change_id: change_id.clone(),
        subscription_id: sub.subscription_id.clone(),
    };
    let exists = delivery::exists(ops.dynamo, ops.table, &work).await?;
    let last = if exists {
        None
    } else {
        delivery::last_change(ops.dynamo, ops.table, &sub.subscription_id).await?
    };
    Ok(TargetFacts { exists, last })
}

/// Reads a page of pending changes from the acknowledged position or from `cursor`.
pub async fn read(
    ops: &Ops<'_>,
    sub: &Subscription,
    cursor: Option<&PullCursor>,
    limit: u32,
) -> Result<PullPage, OpsError> {
    let acknowledged = sub.acknowledged();
    let plan = plan_read(&acknowledged, cursor, ops.now())?;
    if let Some(change) = cursor.and_then(|c| c.change_id.as_ref()) {
        if plan.position.as_ref() == Some(change) && acknowledged.change_id.as_ref() != Some(change)
        {
            check_target(change, &target_facts(ops, sub, change).await?)?;
        }
    }
    let filter = pending_filter(&sub.account_id, Some(plan.horizon()));
    let range = SubscriptionRange {
        subscription_id: &sub.subscription_id,
        after: plan.lower.as_ref(),
        upper: None,
        forward: true,
        listing: None,
    };
    let limit = limit as usize;
    let Gathered {
        deliveries: mut found,
        evaluated_to,
        exhausted,
    } = gather_by_subscription(
        ops.dynamo,
        ops.table,
        &range,
        &filter,
        limit,
        INDEX_PAGE,
        MAX_READ_ROUNDS,
    )
    .await?;
    found.sort_by(|a, b| a.change_id.cmp(&b.change_id));
    let truncated = found.len() > limit;
    found.truncate(limit);
    let has_more = truncated || !exhausted;
    let last_shown = found.last().map(|d| d.change_id.clone());
    // A page cut at `limit` continues after its last change. A read that stopped early (rounds
    // used up) continues after what it evaluated: nothing there was pending and visible except
    // what it shows.
    let next_position = if truncated || exhausted {
        last_shown
    } else {
        evaluated_to.or(last_shown)
    };
    let changes = found
        .into_iter()
        .map(|d| PulledChange {
            cursor: plan.cursor_at(Some(&d.change_id)),
            delivery: d,
        })
        .collect();
    Ok(PullPage {
        changes,
        next_cursor: plan.cursor_at(next_position.as_ref()),
        has_more,
    })
}

/// What a cursor write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Acknowledgement {
    /// The acknowledged position before and after.
    pub previous: Option<ChangeId>,
    pub acknowledged: Option<ChangeId>,
    /// Pending deliveries the cursor covered, now `delivered`.
    pub delivered: u32,
    /// Pending deliveries in the cursor's range it did not cover: moved by someone else since
    /// the read (a worker's lease, another status), or not yet visible to the read.
    pub not_covered: u32,
}

/// Writes `cursor`: covers, then moves the acknowledged position (see the module docs).
pub async fn acknowledge(
    ops: &Ops<'_>,
    sub: &Subscription,
    cursor: &PullCursor,
) -> Result<Acknowledgement, OpsError> {
    let acknowledged = sub.acknowledged();
    let facts = match &cursor.change_id {
        Some(change) => Some(target_facts(ops, sub, change).await?),
        None => None,
    };
    let advance = check_write(&acknowledged, cursor, facts.as_ref(), ops.now())?;
    let (mut delivered, mut not_covered) = (0u32, 0u32);
    if let Some(upper) = &advance.to {
        let range = SubscriptionRange {
            subscription_id: &sub.subscription_id,
            after: advance.lower.as_ref(),
            upper: Some(Upper::Through(upper)),
            forward: true,
            listing: None,
        };
        let filter = pending_filter(&sub.account_id, None);
        let mut start = None;
        loop {
            let page = by_subscription_page(
                ops.dynamo,
                ops.table,
                &range,
                &filter,
                start.take(),
                INDEX_PAGE,
            )
            .await?;
            let results: Vec<Result<bool, OpsError>> = stream::iter(page.deliveries)
                .map(|d| cover(ops, d, advance.horizon, upper))
                .buffer_unordered(WRITE_CONCURRENCY)
                .collect()
                .await;
            for r in results {
                if r? {
                    delivered += 1;
                } else {
                    not_covered += 1;
                }
            }
            match page.next_start {
                Some(next) => start = Some(next),
                None => break,
            }
        }
    }
    move_position(ops, sub, cursor, advance.to.as_ref()).await?;
    tracing::info!(
        subscription_id = %sub.subscription_id,
        from = acknowledged.change_id.as_ref().map(|c| c.as_str()),
        to = advance.to.as_ref().map(|c| c.as_str()),
        delivered,
        not_covered,
        "pull cursor written"
    );
    Ok(Acknowledgement {
        previous: acknowledged.change_id,
        acknowledged: advance.to,
        delivered,
        not_covered,
    })
}

/// `pending → delivered` by `AdvancePullCursor` ("the pull cursor passes it",
/// `docs/lifecycles.md#integration-delivery`), only if the delivery is still the pending,
/// visible, unleased one the read saw. `Ok(false)` when it is not.
async fn cover(
    ops: &Ops<'_>,
    d: Delivery,
    horizon: Timestamp,
    cursor_change: &ChangeId,
) -> Result<bool, OpsError> {
    match delivery::cover_by_cursor(ops.table, &d, horizon, cursor_change, ops.now())? {
        Some(write) => ops.apply(write).await,
        None => Ok(false),
    }
}

/// Moves the acknowledged position to `to`, conditional on the cursor's epoch and on not moving
/// backwards.
async fn move_position(
    ops: &Ops<'_>,
    sub: &Subscription,
    cursor: &PullCursor,
    to: Option<&ChangeId>,
) -> Result<(), OpsError> {
    if let Some(to) = to {
        let write = subscription::move_pull_cursor(ops.table, sub, cursor.epoch, to, ops.now())?;
        if ops.apply(write).await? {
            return Ok(());
        }
    }
    // Either the empty position on a subscription that never acknowledged anything (nothing
    // moves, but the epoch must still be the cursor's), or a lost race: an operator restart
    // (new epoch) or another write that went further.
    let current = ops
        .subscription(&sub.account_id, &sub.subscription_id)
        .await?;
    if current.pull_epoch != cursor.epoch {
        return Err(CursorError::Stale {
            cursor_epoch: cursor.epoch,
            current_epoch: current.pull_epoch,
        }
        .into());
    }
    match to {
        None => Ok(()),
        Some(_) => Err(CursorError::Backwards {
            acknowledged: current.pull_cursor.map(String::from).unwrap_or_default(),
        }
        .into()),
    }
}
