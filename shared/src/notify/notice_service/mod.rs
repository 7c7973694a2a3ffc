//! Notices: creation (idempotent by key), fan-out to deliveries, withdrawal, replacement and the
//! progress summary.
//!
//! * **Create** writes the notice in `requested`. Its id is derived from the account and the
//!   caller's idempotency key, so a repeated request finds the first one (and a different request
//!   under the same key is refused).
//! * **Fan-out** (from the table's stream, so the delivery worker's auto-pause notice and API
//!   notices take one path) resolves replacement first, then writes one delivery per recipient ×
//!   channel, each once: console deliveries begin `delivered` (the console store), the others
//!   `queued` with a work row whose insertion publishes the message. Then `requested → active`.
//! * **Replacement**: per account and supersede key, a pointer names the current notice; a later
//!   notice (by creation time, then id) takes it over and the earlier one becomes `superseded`,
//!   its queued deliveries `cancelled`. A notice that arrives after a later one is superseded at
//!   once and never fanned out.
//! * **Withdrawal**: `requested | active → withdrawn`, queued deliveries `cancelled` (their work
//!   rows deleted). Deliveries already `sending` finish; ones the cancellation does not reach are
//!   cancelled by the worker's claim guard.

//!
//! In modules by use: [`request`] (the notice as received, its bounds and validation, its id),
//! [`create`], [`fan_out`], [`replacement`], [`withdraw`] (with the cancellation of queued
//! deliveries) and [`errors`]; this module holds the service and its reads.

pub mod create;
pub mod errors;
pub(crate) mod fan_out;
pub(crate) mod replacement;
pub mod request;
pub(crate) mod withdraw;

use super::table::NotificationTable;
use crate::clock::Clock;
use crate::ids::{AccountId, NoticeId};
use crate::store::notice::NoticeRecord;
use crate::store::notice_progress::Progress;
use crate::store::notification_delivery::NotificationDelivery;
use crate::store::StoreError;
pub use errors::{CreateError, WithdrawError};
pub use request::{
    notice_id_for, validate, NewNotice, MAX_BODY_CHARS, MAX_KEY_CHARS, MAX_RECIPIENTS,
    MAX_SUBJECT_CHARS,
};
use std::sync::Arc;

/// Deliveries written concurrently by one fan-out.
pub(crate) const FAN_OUT_CONCURRENCY: usize = 16;
/// Queued deliveries one withdrawal or replacement cancels synchronously; the worker's claim guard
/// cancels the rest as their messages arrive.
pub(crate) const CANCEL_LIMIT: usize = 1000;

pub struct NoticeService {
    store: NotificationTable,
    clock: Arc<dyn Clock>,
}

impl NoticeService {
    pub fn new(store: NotificationTable, clock: Arc<dyn Clock>) -> Self {
        NoticeService { store, clock }
    }

    pub fn store(&self) -> &NotificationTable {
        &self.store
    }

    /// The notice, unless it is past its expiry (then its whole partition is gone to readers).
    pub async fn notice(&self, notice_id: &NoticeId) -> Result<Option<NoticeRecord>, StoreError> {
        let now = self.clock.now();
        Ok(self
            .store
            .notice(notice_id)
            .await?
            .filter(|n| n.visible(now)))
    }

    /// The notice, if it belongs to `account_id` (and is not past its expiry).
    pub async fn notice_of(
        &self,
        account_id: &AccountId,
        notice_id: &NoticeId,
    ) -> Result<Option<NoticeRecord>, StoreError> {
        Ok(self
            .notice(notice_id)
            .await?
            .filter(|n| &n.request.account_id == account_id))
    }

    /// A notice's deliveries that are not past their expiry, in key order.
    pub async fn deliveries(
        &self,
        notice_id: &NoticeId,
    ) -> Result<Vec<NotificationDelivery>, StoreError> {
        let now = self.clock.now();
        let all = self.store.deliveries(notice_id).await?;
        Ok(all.into_iter().filter(|d| d.visible(now)).collect())
    }

    /// The progress summary (counts by state).
    pub async fn summary(&self, notice_id: &NoticeId) -> Result<Progress, StoreError> {
        self.store.progress(notice_id).await
    }
}
