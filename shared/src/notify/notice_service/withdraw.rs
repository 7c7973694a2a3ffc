//! Withdrawal of a notice (`requested | active → withdrawn`) and the cancellation of its queued
//! deliveries, their work rows deleted (`docs/lifecycles.md#notice`).

use super::errors::WithdrawError;
use super::{NoticeService, CANCEL_LIMIT, FAN_OUT_CONCURRENCY};
use crate::domain::notice::NoticeStatus;
use crate::domain::notification_delivery::{NotificationStatus as N, NotificationTrigger as NT};
use crate::ids::{AccountId, NoticeId};
use crate::notify::NotifyError;
use crate::store::notice::NoticeRecord;
use crate::store::notice_retention;
use crate::store::notification_delivery::Effects;
use futures::stream::{self, StreamExt, TryStreamExt};

impl NoticeService {
    /// Withdraws an account's notice and cancels its queued deliveries. Repeating it is harmless.
    pub async fn withdraw(
        &self,
        account_id: &AccountId,
        notice_id: &NoticeId,
    ) -> Result<(NoticeRecord, u32), WithdrawError> {
        let Some(notice) = self.notice_of(account_id, notice_id).await? else {
            return Err(WithdrawError::NotFound);
        };
        let now = self.clock.now();
        if notice.status == NoticeStatus::Superseded {
            return Err(WithdrawError::Superseded(
                notice.superseded_by.map(String::from).unwrap_or_default(),
            ));
        }
        if notice.status != NoticeStatus::Withdrawn {
            let moved = self
                .store
                .send(notice_retention::withdraw(
                    &self.store.table,
                    notice_id,
                    now,
                )?)
                .await?
                .applied();
            if !moved {
                // Replaced or withdrawn concurrently: report what it is now.
                let current = self
                    .notice_of(account_id, notice_id)
                    .await?
                    .ok_or(WithdrawError::NotFound)?;
                if current.status == NoticeStatus::Superseded {
                    return Err(WithdrawError::Superseded(
                        current.superseded_by.map(String::from).unwrap_or_default(),
                    ));
                }
            }
        }
        let cancelled = self
            .cancel_queued(notice_id, "withdrawn", CANCEL_LIMIT)
            .await?;
        let notice = self
            .notice_of(account_id, notice_id)
            .await?
            .ok_or(WithdrawError::NotFound)?;
        Ok((notice, cancelled))
    }

    /// Cancels up to `limit` queued deliveries of a notice (deleting their work). Deliveries that
    /// moved meanwhile (claimed by a consumer) are left to finish.
    pub(crate) async fn cancel_queued(
        &self,
        notice_id: &NoticeId,
        why: &str,
        limit: usize,
    ) -> Result<u32, NotifyError> {
        let now = self.clock.now();
        let queued = self
            .store
            .deliveries_in(notice_id, N::Queued, limit)
            .await?;
        let store = &self.store;
        let results: Vec<bool> = stream::iter(queued)
            .map(|d| async move {
                let mut next = d.clone();
                next.status = N::Cancelled;
                next.updated_at = now;
                next.not_before = None;
                next.push_history_detail("cancelled", "cancelled", now, Some(why.to_string()));
                Ok::<bool, NotifyError>(
                    store
                        .transition(&d, next, NT::Withdraw, Effects::delete_work())
                        .await?
                        .is_some(),
                )
            })
            .buffer_unordered(FAN_OUT_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(results.iter().filter(|c| **c).count() as u32)
    }
}
