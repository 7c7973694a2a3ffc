//! Operator requeue (`docs/lifecycles.md#notification-delivery`, row `failed → queued`): only a
//! delivery that failed because its receives ran out qualifies, and the requeue writes fresh
//! dispatch work that the next dispatcher run picks up.
//!
//! The delivery goes back to `queued` with a fresh work row (a new dispatch id, whose insertion
//! publishes a new message; the old message, if it is ever redriven from the dead-letter queue, is
//! stale and dropped) and nothing else changes: no other delivery, not its recipient, content,
//! provider fields or history, which gains only the `requeued` event. The failure reason is
//! cleared because it describes a failure the delivery is no longer in (the history keeps it).
//!
//! A delivery past its expiry is gone (not found). The requeue takes the delivery's expiry off
//! and, in the same transaction, pushes out its notice's and the notice's progress shards'
//! (`store::notice_retention::reopened`), so they stay readable while it is open again. Before
//! it, the notice's supersede pointer, if it still names the notice, is kept as long
//! (`store::supersede_pointer::retain`): a later notice with the key then still replaces this one
//! and cancels the requeued delivery. (That write is not in the transaction: its condition may
//! well be false, and must not refuse the requeue.)
//!
//! The write is a conditional update of its own (not the claim's): storage accepts it only while
//! the delivery is still `failed` *and* still `attempts_exhausted`
//! ([`requeue_condition`]). An ambiguous failure is refused with the reason: the provider may
//! already have sent it, and sending again could deliver twice.

use super::table::NotificationTable;
use super::NotifyError;
use crate::domain::notification_delivery::{
    requeue_allowed, requeue_condition, NotificationStatus as N, NotificationTrigger as NT,
    RequeueRefused,
};
use crate::domain::time::Timestamp;
use crate::ids::NoticeId;
use crate::store::notification_delivery::{Effects, NotificationDelivery, WorkEffect};
use crate::store::notification_work::WorkRow;
use crate::store::supersede_pointer;

#[derive(Debug, thiserror::Error)]
pub enum RequeueError {
    #[error("delivery not found")]
    NotFound,
    #[error(transparent)]
    Refused(#[from] RequeueRefused),
    #[error("the delivery changed while it was being requeued; read it again")]
    Changed,
    #[error(transparent)]
    Fault(#[from] NotifyError),
}

impl From<crate::store::StoreError> for RequeueError {
    fn from(e: crate::store::StoreError) -> Self {
        RequeueError::Fault(e.into())
    }
}

/// Requeues an exhausted delivery (see the module docs). Returns the queued delivery and its
/// fresh work row.
pub async fn requeue(
    store: &NotificationTable,
    notice_id: &NoticeId,
    delivery_key: &str,
    operator: &str,
    reason: &str,
    now: Timestamp,
) -> Result<(NotificationDelivery, WorkRow), RequeueError> {
    let current = store
        .delivery(notice_id, delivery_key)
        .await?
        .filter(|d| d.visible(now))
        .ok_or(RequeueError::NotFound)?;
    requeue_allowed(current.status, current.failure_reason.as_ref())?;
    if let Some(notice) = store.notice(notice_id).await? {
        if let Some(key) = &notice.request.supersede_key {
            let account = &notice.request.account_id;
            let keep = supersede_pointer::retain(&store.table, account, key, notice_id, now)?;
            // Refused: a later notice holds the key, or the pointer is kept as long already.
            store.send(keep).await?;
        }
    }
    let work = WorkRow::fresh(notice_id, delivery_key, now);
    let mut next = current.clone();
    next.status = N::Queued;
    let failure = next.failure_reason.take();
    next.failed_at = None;
    next.not_before = None;
    next.updated_at = now;
    next.push_history_detail(
        format!("requeued:{}", work.dispatch_id),
        "requeued",
        now,
        Some(format!(
            "by {operator} after {}: {reason}",
            failure.map(|r| r.to_string()).unwrap_or_default()
        )),
    );
    let written = store
        .transition_on(
            &current,
            next,
            NT::OperatorRequeue,
            Effects {
                work: WorkEffect::Put(work.clone()),
                provider_ref: None,
            },
            Some(requeue_condition()),
        )
        .await?;
    match written {
        Some(d) => {
            tracing::info!(%notice_id, delivery_key, operator, dispatch_id = %work.dispatch_id, "exhausted notification delivery requeued");
            Ok((d, work))
        }
        None => Err(RequeueError::Changed),
    }
}
