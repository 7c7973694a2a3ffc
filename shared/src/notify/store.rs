//! Every write of a notification delivery, and the reads the pipeline needs.
//!
//! A status write ([`NotifyStore::transition`]) is one DynamoDB transaction:
//!
//! 1. a full put of the delivery, conditioned on the lifecycle's condition for `(trigger, to)`
//!    (`#status IN (:from)`, from [`NOTIFICATION_LIFECYCLE`]) **and** on the `version` read, so
//!    storage refuses an invalid move even when the caller's copy is wrong, and a concurrent
//!    writer (another consumer, a provider event, settling) is never overwritten;
//! 2. the notice's progress counters: `ADD n_{to} 1, n_{from} -1` on the delivery's shard;
//! 3. the work row effect (a fresh row for a requeue, its deletion when the delivery leaves the
//!    queue for good), and the provider reference of a sent delivery.
//!
//! Concurrent transactions on one progress shard can conflict (`TransactionConflict`); those are
//! retried here with a short jittered backoff. A failed condition is a decision, not a fault: the
//! caller gets `None` and re-reads.

use super::model::*;
use super::NotifyError;
use crate::aws::Clients;
use crate::config::Config;
use crate::domain::lifecycle::{Status, StatusCondition};
use crate::domain::notice::{NoticeStatus, NoticeTrigger, NOTICE_LIFECYCLE};
use crate::domain::notification_delivery::{
    NotificationStatus, NotificationTrigger, NOTIFICATION_LIFECYCLE,
};
use crate::domain::time::Timestamp;
use crate::store::expr::{n, s, Expr};
use crate::store::notices::notice_pk;
use crate::store::{from_item, to_item, Item, StoreError};
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem, Update};
use std::time::Duration;

/// Tries of a transaction that keeps conflicting with concurrent ones.
const TXN_ATTEMPTS: u32 = 8;

/// What a status write does to the delivery's dispatch work.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum WorkEffect {
    /// Leave the work row as it is (a retry keeps its work; a claim does not touch it).
    #[default]
    Keep,
    /// Write a fresh work row (its insertion publishes a message).
    Put(WorkRow),
    /// Delete the work row: the delivery left the queue for good.
    Delete,
}

/// Side writes of a status write, in the same transaction.
#[derive(Debug, Clone, Default)]
pub struct Effects {
    pub work: WorkEffect,
    pub provider_ref: Option<ProviderRef>,
}

impl Effects {
    pub fn none() -> Self {
        Effects::default()
    }
    pub fn delete_work() -> Self {
        Effects {
            work: WorkEffect::Delete,
            provider_ref: None,
        }
    }
}

enum TxnFailure {
    Condition,
    Conflict,
    Fault(StoreError),
}

fn classify(
    err: SdkError<TransactWriteItemsError, aws_smithy_runtime_api::http::Response>,
) -> TxnFailure {
    if let SdkError::ServiceError(service) = &err {
        if let TransactWriteItemsError::TransactionCanceledException(cancelled) = service.err() {
            let codes: Vec<&str> = cancelled
                .cancellation_reasons()
                .iter()
                .filter_map(|r| r.code())
                .collect();
            if codes.contains(&"ConditionalCheckFailed") {
                return TxnFailure::Condition;
            }
            if codes.contains(&"TransactionConflict") {
                return TxnFailure::Conflict;
            }
            if codes.is_empty()
                && cancelled
                    .message()
                    .is_some_and(|m| m.contains("ConditionalCheckFailed"))
            {
                return TxnFailure::Condition;
            }
        }
        if matches!(
            service.err(),
            TransactWriteItemsError::TransactionInProgressException(_)
        ) {
            return TxnFailure::Conflict;
        }
    }
    TxnFailure::Fault(StoreError::dynamo(err))
}

fn built<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, StoreError> {
    r.map_err(|e| StoreError::Dynamo(format!("building a request: {e}")))
}

/// The notification table.
#[derive(Clone, Debug)]
pub struct NotifyStore {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub table: String,
}

impl NotifyStore {
    pub fn new(dynamo: aws_sdk_dynamodb::Client, table: impl Into<String>) -> Self {
        NotifyStore {
            dynamo,
            table: table.into(),
        }
    }

    pub fn from_config(clients: &Clients, config: &Config) -> Self {
        Self::new(clients.dynamo.clone(), &config.notification_table)
    }

    // ------------------------------------------------------------------------------- reads

    pub async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        Ok(self
            .dynamo
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(StoreError::dynamo)?
            .item)
    }

    pub async fn notice(&self, notice_id: &str) -> Result<Option<NoticeRecord>, StoreError> {
        let (pk, sk) = notice_key(notice_id);
        self.get(&pk, &sk).await?.map(from_item).transpose()
    }

    pub async fn delivery(
        &self,
        notice_id: &str,
        delivery_key: &str,
    ) -> Result<Option<NotificationDelivery>, StoreError> {
        self.get(&notice_pk(notice_id), &delivery_sk(delivery_key))
            .await?
            .map(from_item)
            .transpose()
    }

    pub async fn work(
        &self,
        notice_id: &str,
        delivery_key: &str,
    ) -> Result<Option<WorkRow>, StoreError> {
        self.get(&notice_pk(notice_id), &work_sk(delivery_key))
            .await?
            .map(from_item)
            .transpose()
    }

    pub async fn provider_ref(
        &self,
        provider: &str,
        reference: &str,
    ) -> Result<Option<ProviderRef>, StoreError> {
        self.get(&provider_ref_pk(provider, reference), PROVIDER_REF_SK)
            .await?
            .map(from_item)
            .transpose()
    }

    /// Every item of a notice's partition whose sort key starts with `prefix` (all of them for
    /// `""`), in key order; only those in `status` if given, at most `limit`.
    pub async fn query_prefix(
        &self,
        notice_id: &str,
        prefix: &str,
        status: Option<NotificationStatus>,
        limit: Option<usize>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let mut e = Expr::new().value(":pk", s(notice_pk(notice_id)));
            let key_condition = if prefix.is_empty() {
                "pk = :pk"
            } else {
                e = e.value(":prefix", s(prefix));
                "pk = :pk AND begins_with(sk, :prefix)"
            };
            let mut request = self
                .dynamo
                .query()
                .table_name(&self.table)
                .key_condition_expression(key_condition)
                .consistent_read(true)
                .set_exclusive_start_key(start.take());
            if let Some(status) = status {
                e = e
                    .name("#status", "status")
                    .value(":status", s(status.as_str()));
                request = request.filter_expression("#status = :status");
            }
            let page = request
                .set_expression_attribute_names(e.names_opt())
                .set_expression_attribute_values(e.values_opt())
                .send()
                .await
                .map_err(StoreError::dynamo)?;
            out.extend(page.items.unwrap_or_default());
            if limit.is_some_and(|l| out.len() >= l) {
                out.truncate(limit.unwrap_or(usize::MAX));
                return Ok(out);
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(out),
            }
        }
    }

    /// A notice's deliveries, in key order.
    pub async fn deliveries(
        &self,
        notice_id: &str,
    ) -> Result<Vec<NotificationDelivery>, StoreError> {
        self.query_prefix(notice_id, DELIVERY_PREFIX, None, None)
            .await?
            .into_iter()
            .map(from_item)
            .collect()
    }

    /// Up to `limit` of a notice's deliveries in `status`.
    pub async fn deliveries_in(
        &self,
        notice_id: &str,
        status: NotificationStatus,
        limit: usize,
    ) -> Result<Vec<NotificationDelivery>, StoreError> {
        self.query_prefix(notice_id, DELIVERY_PREFIX, Some(status), Some(limit))
            .await?
            .into_iter()
            .map(from_item)
            .collect()
    }

    /// A notice's work rows.
    pub async fn work_rows(&self, notice_id: &str) -> Result<Vec<WorkRow>, StoreError> {
        self.query_prefix(notice_id, WORK_PREFIX, None, None)
            .await?
            .into_iter()
            .map(from_item)
            .collect()
    }

    /// The progress summary: the sum of the notice's progress shards.
    pub async fn progress(&self, notice_id: &str) -> Result<Progress, StoreError> {
        let mut progress = Progress::empty();
        for item in self
            .query_prefix(notice_id, PROGRESS_PREFIX, None, None)
            .await?
        {
            for status in NotificationStatus::ALL {
                let count = item
                    .get(&progress_attribute(*status))
                    .and_then(|v| v.as_n().ok())
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(0);
                progress.add(status.as_str(), count);
            }
        }
        Ok(progress)
    }

    // ------------------------------------------------------------------------------ writes

    async fn run(&self, items: Vec<TransactWriteItem>) -> Result<bool, StoreError> {
        let mut attempt = 0;
        loop {
            let result = self
                .dynamo
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .send()
                .await;
            match result {
                Ok(_) => return Ok(true),
                Err(e) => match classify(e) {
                    TxnFailure::Condition => return Ok(false),
                    TxnFailure::Conflict if attempt + 1 < TXN_ATTEMPTS => {
                        attempt += 1;
                        let base = 10u64 << attempt.min(6);
                        let jitter = rand::random::<u64>() % base;
                        tokio::time::sleep(Duration::from_millis(base + jitter)).await;
                    }
                    TxnFailure::Conflict => {
                        return Err(StoreError::Dynamo(
                            "transaction kept conflicting with concurrent writes".into(),
                        ))
                    }
                    TxnFailure::Fault(e) => return Err(e),
                },
            }
        }
    }

    fn progress_update(
        &self,
        notice_id: &str,
        delivery_key: &str,
        from: Option<NotificationStatus>,
        to: NotificationStatus,
        now: Timestamp,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut e = Expr::new()
            .name("#to", &progress_attribute(to))
            .name("#kind", "kind")
            .name("#updated", "updated_at")
            .value(":one", n(1))
            .value(":kind", s(PROGRESS_KIND))
            .value(":now", n(now.millis()));
        let mut add = vec!["#to :one"];
        if let Some(from) = from {
            e = e
                .name("#from", &progress_attribute(from))
                .value(":minus_one", n(-1));
            add.push("#from :minus_one");
        }
        let update = built(
            Update::builder()
                .table_name(&self.table)
                .key("pk", s(notice_pk(notice_id)))
                .key("sk", s(progress_sk(delivery_key)))
                .update_expression(format!(
                    "ADD {} SET #kind = :kind, #updated = :now",
                    add.join(", ")
                ))
                .set_expression_attribute_names(e.names_opt())
                .set_expression_attribute_values(e.values_opt())
                .build(),
        )?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    fn work_item(
        &self,
        effect: &WorkEffect,
        notice_id: &str,
        key: &str,
    ) -> Result<Option<TransactWriteItem>, StoreError> {
        Ok(match effect {
            WorkEffect::Keep => None,
            WorkEffect::Put(work) => {
                let item = to_item(work, &notice_pk(notice_id), &work_sk(key), WORK_KIND)?;
                Some(
                    TransactWriteItem::builder()
                        .put(built(
                            Put::builder()
                                .table_name(&self.table)
                                .set_item(Some(item))
                                .build(),
                        )?)
                        .build(),
                )
            }
            WorkEffect::Delete => Some(
                TransactWriteItem::builder()
                    .delete(built(
                        Delete::builder()
                            .table_name(&self.table)
                            .key("pk", s(notice_pk(notice_id)))
                            .key("sk", s(work_sk(key)))
                            .build(),
                    )?)
                    .build(),
            ),
        })
    }

    /// Creates a delivery (once: a repeated fan-out finds it and writes nothing), its work row
    /// and its count. `false` when it already existed.
    pub async fn create_delivery(
        &self,
        delivery: &NotificationDelivery,
        work: Option<&WorkRow>,
    ) -> Result<bool, StoreError> {
        let mut d = delivery.clone();
        d.refresh_watch();
        let item = to_item(
            &d,
            &notice_pk(&d.notice_id),
            &delivery_sk(&d.delivery_key),
            DELIVERY_KIND,
        )?;
        let mut items = vec![TransactWriteItem::builder()
            .put(built(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(item))
                    .condition_expression("attribute_not_exists(pk)")
                    .build(),
            )?)
            .build()];
        items.push(self.progress_update(
            &d.notice_id,
            &d.delivery_key,
            None,
            d.status,
            d.created_at,
        )?);
        if let Some(work) = work {
            items.extend(self.work_item(
                &WorkEffect::Put(work.clone()),
                &d.notice_id,
                &d.delivery_key,
            )?);
        }
        self.run(items).await
    }

    /// Moves `current` to `next.status` by `trigger`, writing `next` whole. Storage refuses the
    /// write unless the stored status is the table's source for `(trigger, next.status)` and the
    /// stored version is `current.version`. Returns the written delivery, or `None` when storage
    /// refused (the caller re-reads to learn why).
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
    /// (operator requeue: [`crate::domain::notification_delivery::requeue_condition`]). The
    /// condition must admit only the table's source for the move.
    pub async fn transition_on(
        &self,
        current: &NotificationDelivery,
        mut next: NotificationDelivery,
        trigger: NotificationTrigger,
        effects: Effects,
        stricter: Option<StatusCondition>,
    ) -> Result<Option<NotificationDelivery>, NotifyError> {
        let to = next.status;
        let table_condition = NOTIFICATION_LIFECYCLE.condition(trigger, to)?;
        let condition = match stricter {
            Some(c) if c.allowed() == table_condition.allowed() => c,
            Some(c) => {
                return Err(StoreError::Dynamo(format!(
                    "condition {c} does not admit exactly the table's sources {table_condition}"
                ))
                .into())
            }
            None => table_condition,
        };
        // Every (trigger, to) of seed 001 has exactly one source, so the counter to decrement is
        // the one the condition admits, whatever the caller believed.
        let sources = NOTIFICATION_LIFECYCLE.sources(trigger, to);
        let from = match sources.as_slice() {
            [only] => *only,
            _ => current.status,
        };
        next.version = current.version + 1;
        next.refresh_watch();
        let item = to_item(
            &next,
            &notice_pk(&next.notice_id),
            &delivery_sk(&next.delivery_key),
            DELIVERY_KIND,
        )?;
        let mut e = Expr::new()
            .name("#version", "version")
            .value(":version", n(current.version));
        let status_condition = e.status(&condition);
        let put = built(
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression(format!("({status_condition}) AND #version = :version"))
                .set_expression_attribute_names(e.names_opt())
                .set_expression_attribute_values(e.values_opt())
                .build(),
        )?;
        let mut items = vec![TransactWriteItem::builder().put(put).build()];
        items.push(self.progress_update(
            &next.notice_id,
            &next.delivery_key,
            Some(from),
            to,
            next.updated_at,
        )?);
        items.extend(self.work_item(&effects.work, &next.notice_id, &next.delivery_key)?);
        if let Some(reference) = &effects.provider_ref {
            let item = to_item(
                reference,
                &provider_ref_pk(&reference.provider, &reference.provider_ref),
                PROVIDER_REF_SK,
                PROVIDER_REF_KIND,
            )?;
            items.push(
                TransactWriteItem::builder()
                    .put(built(
                        Put::builder()
                            .table_name(&self.table)
                            .set_item(Some(item))
                            .build(),
                    )?)
                    .build(),
            );
        }
        Ok(self.run(items).await?.then_some(next))
    }

    /// Writes `next` without a status change (history, bounce, watch repair): conditional on the
    /// version read and on the status staying what it is.
    pub async fn record(
        &self,
        current: &NotificationDelivery,
        mut next: NotificationDelivery,
    ) -> Result<Option<NotificationDelivery>, NotifyError> {
        if next.status != current.status {
            return Err(StoreError::Dynamo(format!(
                "a record write cannot change the status ({} → {}); use a transition",
                current.status, next.status
            ))
            .into());
        }
        next.version = current.version + 1;
        next.refresh_watch();
        let item = to_item(
            &next,
            &notice_pk(&next.notice_id),
            &delivery_sk(&next.delivery_key),
            DELIVERY_KIND,
        )?;
        let result = self
            .dynamo
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("#version = :version AND #status = :status")
            .expression_attribute_names("#version", "version")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":version", n(current.version))
            .expression_attribute_values(":status", s(current.status.as_str()))
            .send()
            .await;
        match result {
            Ok(_) => Ok(Some(next)),
            Err(e) if crate::store::expr::is_condition_failure(&e) => Ok(None),
            Err(e) => Err(StoreError::dynamo(e).into()),
        }
    }

    /// Moves a notice by its own lifecycle, setting `sets` (`(attribute, value)` pairs) too.
    /// `false` when the notice is not in a source state (or is gone).
    pub async fn notice_transition(
        &self,
        notice_id: &str,
        trigger: NoticeTrigger,
        to: NoticeStatus,
        sets: &[(&str, aws_sdk_dynamodb::types::AttributeValue)],
    ) -> Result<bool, NotifyError> {
        let condition = NOTICE_LIFECYCLE.condition(trigger, to)?;
        let mut e = Expr::new().value(":to", s(to.as_str()));
        let status_condition = e.status(&condition);
        let mut set = vec!["#status = :to".to_string()];
        for (i, (attribute, value)) in sets.iter().enumerate() {
            e = e
                .name(&format!("#a{i}"), attribute)
                .value(&format!(":v{i}"), value.clone());
            set.push(format!("#a{i} = :v{i}"));
        }
        let (pk, sk) = notice_key(notice_id);
        let result = self
            .dynamo
            .update_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(format!("SET {}", set.join(", ")))
            .condition_expression(format!("attribute_exists(pk) AND ({status_condition})"))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err) if crate::store::expr::is_condition_failure(&err) => Ok(false),
            Err(err) => Err(StoreError::dynamo(err).into()),
        }
    }
}
