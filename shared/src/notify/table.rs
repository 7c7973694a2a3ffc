//! The notification pipeline's handle on its table: it reads through the item modules of the
//! notification table (`crate::store::{notice, notification_delivery, notification_work,
//! notice_progress, provider_ref}`) and sends their named writes, resolving transaction
//! conflicts (concurrent transactions on one progress shard), and tells an applied write from a
//! refused one. A refused condition is a decision, not a fault: the caller gets `None` (or
//! `false`) and re-reads.

use super::NotifyError;
use crate::aws::Clients;
use crate::config::Config;
use crate::domain::lifecycle::StatusCondition;
use crate::domain::notification_delivery::{NotificationStatus, NotificationTrigger};
use crate::ids::NoticeId;
use crate::store::notice::{self, NoticeRecord};
use crate::store::notice_progress::{self, Progress};
use crate::store::notification_delivery::{self as delivery, Effects, NotificationDelivery};
use crate::store::notification_work::{self, WorkRow};
use crate::store::provider_ref::{self, ProviderRef};
use crate::store::write::{self, Write, Written};
use crate::store::{read, Item, StoreError};

/// The notification table.
#[derive(Clone, Debug)]
pub struct NotificationTable {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub table: String,
}

impl NotificationTable {
    pub fn new(dynamo: aws_sdk_dynamodb::Client, table: impl Into<String>) -> Self {
        NotificationTable {
            dynamo,
            table: table.into(),
        }
    }

    pub fn from_config(clients: &Clients, config: &Config) -> Self {
        Self::new(clients.dynamo.clone(), &config.notification_table)
    }

    // ------------------------------------------------------------------------------- reads

    /// Any item of the table, by key.
    pub async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        read::get(&self.dynamo, &self.table, pk, sk).await
    }

    pub async fn notice(&self, notice_id: &NoticeId) -> Result<Option<NoticeRecord>, StoreError> {
        notice::get(&self.dynamo, &self.table, notice_id).await
    }

    pub async fn delivery(
        &self,
        notice_id: &NoticeId,
        delivery_key: &str,
    ) -> Result<Option<NotificationDelivery>, StoreError> {
        delivery::get(&self.dynamo, &self.table, notice_id, delivery_key).await
    }

    pub async fn work(
        &self,
        notice_id: &NoticeId,
        delivery_key: &str,
    ) -> Result<Option<WorkRow>, StoreError> {
        notification_work::get(&self.dynamo, &self.table, notice_id, delivery_key).await
    }

    pub async fn provider_ref(
        &self,
        provider: &str,
        reference: &str,
    ) -> Result<Option<ProviderRef>, StoreError> {
        provider_ref::get(&self.dynamo, &self.table, provider, reference).await
    }

    /// A notice's deliveries, in key order.
    pub async fn deliveries(
        &self,
        notice_id: &NoticeId,
    ) -> Result<Vec<NotificationDelivery>, StoreError> {
        delivery::of_notice(&self.dynamo, &self.table, notice_id).await
    }

    /// Up to `limit` of a notice's deliveries in `status`.
    pub(crate) async fn deliveries_in(
        &self,
        notice_id: &NoticeId,
        status: NotificationStatus,
        limit: usize,
    ) -> Result<Vec<NotificationDelivery>, StoreError> {
        delivery::of_notice_in(&self.dynamo, &self.table, notice_id, status, limit).await
    }

    /// A notice's work rows.
    pub async fn work_rows(&self, notice_id: &NoticeId) -> Result<Vec<WorkRow>, StoreError> {
        notification_work::of_notice(&self.dynamo, &self.table, notice_id).await
    }

    /// The progress summary: the sum of the notice's progress shards.
    pub async fn progress(&self, notice_id: &NoticeId) -> Result<Progress, StoreError> {
        notice_progress::summary(&self.dynamo, &self.table, notice_id).await
    }

    // ------------------------------------------------------------------------------ writes

    /// Sends a write, trying it again while concurrent transactions cancel it: applied or
    /// refused.
    pub async fn send(&self, w: Write) -> Result<Written, StoreError> {
        write::send_resolving_conflicts(&self.dynamo, w).await
    }

    /// Creates a delivery (once: a repeated fan-out finds it and writes nothing), its work row
    /// and its count. `false` when it already existed.
    pub(crate) async fn create_delivery(
        &self,
        d: &NotificationDelivery,
        work: Option<&WorkRow>,
    ) -> Result<bool, StoreError> {
        Ok(self
            .send(delivery::create(&self.table, d, work)?)
            .await?
            .applied())
    }

    /// Moves `current` to `next.status` by `trigger` ([`delivery::transition`]). The written
    /// delivery, or `None` when storage refused (the caller re-reads to learn why).
    pub async fn transition(
        &self,
        current: &NotificationDelivery,
        next: NotificationDelivery,
        trigger: NotificationTrigger,
        effects: Effects,
    ) -> Result<Option<NotificationDelivery>, NotifyError> {
        self.transition_on(current, next, trigger, effects, None)
            .await
    }

    /// [`Self::transition`] with a stricter condition than the table's own for `(trigger, to)`
    /// (operator requeue: [`crate::domain::notification_delivery::requeue_condition`]).
    pub async fn transition_on(
        &self,
        current: &NotificationDelivery,
        next: NotificationDelivery,
        trigger: NotificationTrigger,
        effects: Effects,
        stricter: Option<StatusCondition>,
    ) -> Result<Option<NotificationDelivery>, NotifyError> {
        let (w, next) =
            delivery::transition(&self.table, current, next, trigger, &effects, stricter)?;
        self.written(w, next).await
    }

    /// Sends a whole-item write of `next` and answers it as stored, or `None` when storage
    /// refused. A refusal can be this very write: applied, its answer lost, and the SDK's retry
    /// refused by the version the first try wrote; so can an error (applied, its answer lost,
    /// and no try after it). The delivery stored exactly as written (its version, claim token and
    /// history included) tells; an error whose write is not stored stands.
    async fn written(
        &self,
        w: Write,
        next: NotificationDelivery,
    ) -> Result<Option<NotificationDelivery>, NotifyError> {
        let failed = match self.send(w).await {
            Ok(written) if written.applied() => return Ok(Some(next)),
            Ok(_) => None,
            Err(e) => Some(e),
        };
        let stored = self.delivery(&next.notice_id, &next.delivery_key).await?;
        match (stored.as_ref() == Some(&next), failed) {
            (true, _) => Ok(Some(next)),
            (false, Some(e)) => Err(e.into()),
            (false, None) => Ok(None),
        }
    }

    /// Writes `next` without a status change ([`delivery::record`]); `None` when storage
    /// refused.
    pub async fn record(
        &self,
        current: &NotificationDelivery,
        next: NotificationDelivery,
    ) -> Result<Option<NotificationDelivery>, NotifyError> {
        let (w, next) = delivery::record(&self.table, current, next)?;
        self.written(w, next).await
    }
}
