//! The notification delivery item (`DLV#{key}` in its notice's partition): one notice ×
//! channel × recipient, with its status from the notification delivery lifecycle
//! (docs/lifecycles.md), and every write of it.
//!
//! A status write ([`transition`]) is one transaction:
//!
//! 1. a full put of the delivery, conditioned on the lifecycle's condition for `(trigger, to)`
//!    (`#status IN (:from)`, from [`NOTIFICATION_LIFECYCLE`]) **and** on the `version` read, so
//!    storage refuses an invalid move even when the caller's copy is wrong, and a concurrent
//!    writer (another consumer, a provider event, settling) is never overwritten;
//! 2. the notice's progress count ([`super::notice_progress::count`]) on the delivery's shard;
//! 3. the work row effect ([`super::notification_work`]: a fresh row for a requeue, its
//!    deletion when the delivery leaves the queue for good), and the provider reference
//!    ([`super::provider_ref`]) of a sent delivery;
//! 4. when the move opens a delivery that was at rest (an operator's requeue), the retention of
//!    its notice and the notice's other progress shards, pushed out from the move
//!    ([`super::notice_retention::reopened`]): the delivery's own expiry is removed meanwhile.
//!
//! Concurrent transactions on one progress shard can conflict: send these writes with
//! [`super::write::send_resolving_conflicts`]. A refused condition is a decision, not a fault:
//! the caller re-reads.
//!
//! A delivery's key is `{channel}-{recipient index}` (`email-0`, `console-2`): deterministic from
//! the notice, so a repeated fan-out creates nothing twice. Deliveries carry the `watch` index
//! attributes while settling may have to act on them (`sending`: claim + 15 min; `queued` with a
//! deadline: the deadline), and console deliveries the `inbox` index attributes
//! ([`super::console_inbox`]). A `failed` delivery carries the `trouble` index attributes
//! ([`super::failed_notices`]), set by the write that fails it and dropped by the requeue's.

use super::attrs::{watch, VERSION};
use super::expr::{n, s, Expr};
use super::notice::{notice_pk, partition_of};
use super::notification_work::{self, WorkRow};
use super::provider_ref::{self, ProviderRef};
use super::read::{self, Query};
use super::write::{built, Write};
use super::{from_item, keys, notice_progress, notice_retention, to_item, Item, StoreError};
use crate::domain::lifecycle::{Status, StatusCondition};
use crate::domain::notification_delivery::{
    FailureReason, HistoryEvent, NotificationStatus, NotificationTrigger, AMBIGUITY_TIMEOUT,
    NOTIFICATION_LIFECYCLE,
};
use crate::domain::retention::{
    notification_reopens, notification_ttl_seconds, notification_visible,
};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, NoticeId};
use aws_sdk_dynamodb::types::Put;
use serde::{Deserialize, Serialize};

/// The `kind` of a notification delivery item.
pub(crate) const DELIVERY_KIND: &str = "notification_delivery";
pub use super::keys::{
    notification_delivery_sk as delivery_sk, NOTIFICATION_DELIVERY_PREFIX as DELIVERY_PREFIX,
};

/// `{channel}-{recipient index}`.
pub fn delivery_key(channel: &str, recipient_index: usize) -> String {
    format!("{channel}-{recipient_index}")
}

/// A notification delivery: one notice × channel × recipient, with its status
/// (`docs/lifecycles.md#notification-delivery`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NotificationDelivery {
    pub notice_id: NoticeId,
    /// `{channel}-{recipient index}`, unique within the notice.
    pub delivery_key: String,
    pub account_id: AccountId,
    pub channel: String,
    /// The recipient's identity.
    pub recipient: String,
    /// The recipient's address on the channel (email address, Slack webhook URL, inbox id);
    /// `None` when the recipient has none (the adapter reports it unavailable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    pub status: NotificationStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Optimistic concurrency: every write adds one and is conditional on the value read.
    #[serde(default)]
    pub version: u64,
    /// The notice's deadline, copied so that settling needs only the delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// A retry's backoff ends here; a message that arrives earlier is put back until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_at: Option<Timestamp>,
    /// The provider that accepted it (`ses`, `slack`, `console`) and its reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<FailureReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// The last retryable failure, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Provider bounce feedback (recorded; the status does not change, see the module docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounce: Option<BounceRecord>,
    /// Retained lifecycle and provider events, deduplicated by id, at most fifty.
    #[serde(default)]
    pub history: Vec<HistoryEvent>,
    /// Console deliveries keep their content: they are the console store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_shard: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbox_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbox_at: Option<Timestamp>,
    /// The `trouble` index attributes while the delivery is `failed` ([`Self::refresh_trouble`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trouble_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trouble_sort: Option<String>,
    /// TTL, epoch **seconds**: set when the delivery comes to rest (sent or final), removed by a
    /// requeue ([`crate::domain::retention::notification_ttl_seconds`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// Provider bounce feedback on a delivery.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BounceRecord {
    /// e.g. `Permanent`, `Transient`, `Undetermined`.
    pub bounce_type: String,
    pub at: Timestamp,
}

impl NotificationDelivery {
    /// A new delivery of a notice to `recipient` on `channel`, in `status`, with nothing else
    /// known yet (no address, no deadline, no history).
    pub fn new(
        notice_id: &NoticeId,
        delivery_key: &str,
        account_id: &AccountId,
        channel: &str,
        recipient: &str,
        status: NotificationStatus,
        now: Timestamp,
    ) -> Self {
        NotificationDelivery {
            notice_id: notice_id.clone(),
            delivery_key: delivery_key.to_string(),
            account_id: account_id.clone(),
            channel: channel.to_string(),
            recipient: recipient.to_string(),
            address: None,
            status,
            created_at: now,
            updated_at: now,
            version: 0,
            deadline: None,
            not_before: None,
            claim_token: None,
            claimed_at: None,
            provider: None,
            provider_ref: None,
            sent_at: None,
            delivered_at: None,
            failure_reason: None,
            failed_at: None,
            skip_reason: None,
            last_error: None,
            bounce: None,
            history: Vec::new(),
            subject: None,
            body: None,
            watch_shard: None,
            watch_at: None,
            inbox_key: None,
            inbox_at: None,
            trouble_key: None,
            trouble_sort: None,
            expires_at: None,
        }
    }

    /// When settling must look at this delivery again, if ever: a `sending` one when its claim
    /// becomes ambiguous, a `queued` one at its deadline.
    pub(crate) fn watch_until(&self) -> Option<Timestamp> {
        match self.status {
            NotificationStatus::Sending => self.claimed_at.map(|t| t.plus(AMBIGUITY_TIMEOUT)),
            NotificationStatus::Queued => self.deadline,
            _ => None,
        }
    }

    /// Sets (or clears) the `watch` index attributes from the state.
    pub(crate) fn refresh_watch(&mut self) {
        match self.watch_until() {
            Some(at) => {
                self.watch_shard = Some(keys::shard_of(&format!(
                    "{}/{}",
                    self.notice_id, self.delivery_key
                )));
                self.watch_at = Some(at);
            }
            None => {
                self.watch_shard = None;
                self.watch_at = None;
            }
        }
    }

    /// Sets (or clears) the `trouble` index attributes from the status: a `failed` delivery is on
    /// its account's list of deliveries that failed for good, by when it failed, until a requeue
    /// moves it on. They ride on the status write that fails it: no write of their own.
    pub(crate) fn refresh_trouble(&mut self) {
        if self.status == NotificationStatus::Failed {
            let at = self.failed_at.unwrap_or(self.updated_at);
            self.trouble_key = Some(keys::trouble_key(&self.account_id));
            self.trouble_sort = Some(keys::trouble_sort(at, &self.notice_id, &self.delivery_key));
        } else {
            self.trouble_key = None;
            self.trouble_sort = None;
        }
    }

    /// Sets (or removes) the retention from the status: the events' thirty days from this
    /// status write once the delivery is at rest.
    pub(crate) fn refresh_retention(&mut self) {
        self.expires_at = notification_ttl_seconds(self.status, self.updated_at);
    }

    /// The read filter: a delivery (a console entry too) past its expiry is gone, whatever TTL
    /// has deleted yet.
    pub fn visible(&self, now: Timestamp) -> bool {
        notification_visible(self.expires_at, now)
    }

    /// Appends a history event (deduplicated by id, capped at fifty). `false` for a duplicate.
    pub(crate) fn push_history(
        &mut self,
        id: impl Into<String>,
        kind: &str,
        at: Timestamp,
    ) -> bool {
        self.push_history_detail(id, kind, at, None)
    }

    pub(crate) fn push_history_detail(
        &mut self,
        id: impl Into<String>,
        kind: &str,
        at: Timestamp,
        detail: Option<String>,
    ) -> bool {
        crate::domain::notification_delivery::append_history(
            &mut self.history,
            HistoryEvent {
                id: id.into(),
                kind: kind.to_string(),
                at,
                detail,
            },
        )
    }

    pub fn has_event(&self, id: &str) -> bool {
        self.history.iter().any(|h| h.id == id)
    }
}

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
    pub(crate) fn delete_work() -> Self {
        Effects {
            work: WorkEffect::Delete,
            provider_ref: None,
        }
    }
}

// ------------------------------------------------------------------------------------- reads

/// A consistent read of a delivery.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notice_id: &NoticeId,
    delivery_key: &str,
) -> Result<Option<NotificationDelivery>, StoreError> {
    at(
        dynamo,
        table,
        &notice_pk(notice_id),
        &delivery_sk(delivery_key),
    )
    .await
}

/// A consistent read of the delivery with this key (an index entry's `pk` and `sk`).
pub async fn at(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
    sk: &str,
) -> Result<Option<NotificationDelivery>, StoreError> {
    read::get(dynamo, table, pk, sk)
        .await?
        .map(from_item)
        .transpose()
}

/// A notice's deliveries, in key order.
pub(crate) async fn of_notice(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notice_id: &NoticeId,
) -> Result<Vec<NotificationDelivery>, StoreError> {
    partition_of(dynamo, table, notice_id, DELIVERY_PREFIX, None, None).await
}

/// Up to `limit` of a notice's deliveries in `status`.
pub(crate) async fn of_notice_in(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notice_id: &NoticeId,
    status: NotificationStatus,
    limit: usize,
) -> Result<Vec<NotificationDelivery>, StoreError> {
    partition_of(
        dynamo,
        table,
        notice_id,
        DELIVERY_PREFIX,
        Some(status),
        Some(limit),
    )
    .await
}

/// One page of a `watch` index shard: the entries (keys and index attributes) due at `now`,
/// oldest first.
pub(crate) fn watched_query(
    table: &str,
    shard: &str,
    now: Timestamp,
    limit: i32,
    start: Option<Item>,
) -> Query {
    Query {
        table: table.to_string(),
        index: Some(watch::INDEX.to_string()),
        key_condition: format!("{} = :shard AND {} <= :now", watch::SHARD, watch::AT),
        expr: Expr::new()
            .value(":shard", s(shard))
            .value(":now", n(now.millis())),
        limit: Some(limit),
        start,
        ..Query::default()
    }
}

// ------------------------------------------------------------------------------------ writes

fn item_of(d: &NotificationDelivery) -> Result<Item, StoreError> {
    to_item(
        d,
        &notice_pk(&d.notice_id),
        &delivery_sk(&d.delivery_key),
        DELIVERY_KIND,
    )
}

/// Creates a delivery (once: a repeated fan-out finds it and writes nothing), its work row and
/// its count, in one transaction.
pub fn create(
    table: &str,
    delivery: &NotificationDelivery,
    work: Option<&WorkRow>,
) -> Result<Write, StoreError> {
    let mut d = delivery.clone();
    d.refresh_watch();
    d.refresh_trouble();
    d.refresh_retention();
    let put = Write::Put(built(
        Put::builder()
            .table_name(table)
            .set_item(Some(item_of(&d)?))
            .condition_expression("attribute_not_exists(pk)")
            .build(),
    )?);
    let count = notice_progress::count(
        table,
        &d.notice_id,
        &d.delivery_key,
        None,
        d.status,
        d.created_at,
    )?;
    let work = work.map(|w| notification_work::put(table, w)).transpose()?;
    Write::all([put, count].into_iter().chain(work))
}

/// Moves `current` to `next.status` by `trigger`, writing `next` whole with the next version:
/// the write (see the module notes) and the delivery as it is once applied. Storage refuses the
/// write unless the stored status is the table's source for `(trigger, next.status)` and the
/// stored version is `current.version`.
///
/// `stricter`: a condition stricter than the table's own for the move (operator requeue:
/// [`crate::domain::notification_delivery::requeue_condition`]); it must admit exactly the
/// table's sources.
pub fn transition(
    table: &str,
    current: &NotificationDelivery,
    mut next: NotificationDelivery,
    trigger: NotificationTrigger,
    effects: &Effects,
    stricter: Option<StatusCondition>,
) -> Result<(Write, NotificationDelivery), StoreError> {
    let to = next.status;
    let condition = move_condition(trigger, to, stricter)?;
    // Every (trigger, to) of the notification lifecycle has exactly one source, so the counter
    // to decrement is the one the condition admits, whatever the caller believed.
    let sources = NOTIFICATION_LIFECYCLE.sources(trigger, to);
    let from = match sources.as_slice() {
        [only] => *only,
        _ => current.status,
    };
    next.version = current.version + 1;
    next.refresh_watch();
    next.refresh_trouble();
    next.refresh_retention();
    let mut e = Expr::new()
        .name("#version", VERSION)
        .value(":version", n(current.version));
    let status_condition = e.status(&condition);
    let put = Write::Put(built(
        Put::builder()
            .table_name(table)
            .set_item(Some(item_of(&next)?))
            .condition_expression(format!("({status_condition}) AND #version = :version"))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?);
    let count = notice_progress::count(
        table,
        &next.notice_id,
        &next.delivery_key,
        Some(from),
        to,
        next.updated_at,
    )?;
    let effects = effect_writes(table, &next, effects, from)?;
    let write = Write::all([put, count].into_iter().chain(effects))?;
    Ok((write, next))
}

/// The condition of a move: the lifecycle table's for `trigger` to `to`, or `stricter` when it
/// admits exactly the table's sources (refused otherwise).
fn move_condition(
    trigger: NotificationTrigger,
    to: NotificationStatus,
    stricter: Option<StatusCondition>,
) -> Result<StatusCondition, StoreError> {
    let table_condition = NOTIFICATION_LIFECYCLE.condition(trigger, to)?;
    match stricter {
        Some(c) if c.allowed() == table_condition.allowed() => Ok(c),
        Some(c) => Err(StoreError::Dynamo(format!(
            "condition {c} does not admit exactly the table's sources {table_condition}"
        ))),
        None => Ok(table_condition),
    }
}

/// The writes a move brings along for the delivery `next` (moved from `from`): its work row put or
/// deleted, its provider reference, and its notice's retention when the move reopens it.
fn effect_writes(
    table: &str,
    next: &NotificationDelivery,
    effects: &Effects,
    from: NotificationStatus,
) -> Result<Vec<Write>, StoreError> {
    let to = next.status;
    let work = match &effects.work {
        WorkEffect::Keep => None,
        WorkEffect::Put(row) => Some(notification_work::put(table, row)?),
        WorkEffect::Delete => Some(notification_work::delete(
            table,
            &next.notice_id,
            &next.delivery_key,
        )?),
    };
    let reference = effects
        .provider_ref
        .as_ref()
        .map(|r| provider_ref::put(table, r, next.expires_at))
        .transpose()?;
    let kept = if notification_reopens(from, to) {
        notice_retention::reopened(
            table,
            &next.notice_id,
            &notice_progress::progress_sk(&next.delivery_key),
            next.updated_at,
        )?
    } else {
        Vec::new()
    };
    Ok(work.into_iter().chain(reference).chain(kept).collect())
}

/// Writes `next` without a status change (history, bounce, watch repair), with the next
/// version: conditional on the version read and on the status staying what it is. The write
/// and the delivery as it is once applied.
pub fn record(
    table: &str,
    current: &NotificationDelivery,
    mut next: NotificationDelivery,
) -> Result<(Write, NotificationDelivery), StoreError> {
    if next.status != current.status {
        return Err(StoreError::Dynamo(format!(
            "a record write cannot change the status ({} → {}); use a transition",
            current.status, next.status
        )));
    }
    next.version = current.version + 1;
    next.refresh_watch();
    next.refresh_trouble();
    let e = Expr::new()
        .name("#version", VERSION)
        .name("#status", "status")
        .value(":version", n(current.version))
        .value(":status", s(current.status.as_str()));
    let put = Write::Put(built(
        Put::builder()
            .table_name(table)
            .set_item(Some(item_of(&next)?))
            .condition_expression("#version = :version AND #status = :status")
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?);
    Ok((put, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::notification_delivery::requeue_condition;
    use crate::ids::id;
    use aws_sdk_dynamodb::types::TransactWriteItem;
    use NotificationStatus as N;
    use NotificationTrigger as NT;

    fn delivery(status: N) -> NotificationDelivery {
        NotificationDelivery::new(
            &id("n"),
            "email-0",
            &id("a"),
            "email",
            "r",
            status,
            Timestamp(0),
        )
    }

    fn items(w: Write) -> Vec<TransactWriteItem> {
        match w {
            Write::All(items) => items,
            other => panic!("not a transaction: {other:?}"),
        }
    }

    fn sort_keys(items: &[TransactWriteItem]) -> Vec<String> {
        items
            .iter()
            .map(|i| {
                let key = if let Some(p) = i.put() {
                    p.item()
                } else if let Some(u) = i.update() {
                    u.key()
                } else {
                    i.delete().unwrap().key()
                };
                format!(
                    "{}/{}",
                    key["pk"].as_s().unwrap(),
                    key["sk"].as_s().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn the_watch_follows_the_state() {
        let mut d = delivery(N::Queued);
        d.refresh_watch();
        assert_eq!(
            d.watch_at, None,
            "queued without a deadline: nothing to settle"
        );
        d.deadline = Some(Timestamp(1_000));
        d.refresh_watch();
        assert_eq!(d.watch_at, Some(Timestamp(1_000)));
        assert!(d.watch_shard.is_some());
        d.status = N::Sending;
        d.claimed_at = Some(Timestamp(2_000));
        d.refresh_watch();
        assert_eq!(d.watch_at, Some(Timestamp(2_000).plus(AMBIGUITY_TIMEOUT)));
        d.status = N::Sent;
        d.refresh_watch();
        assert_eq!((d.watch_at, d.watch_shard), (None, None));
    }

    #[test]
    fn a_new_delivery_is_written_once_with_its_count_and_its_work() {
        let mut d = delivery(N::Queued);
        d.deadline = Some(Timestamp(9_000));
        let work = WorkRow::fresh(&id("n"), "email-0", Timestamp(0));
        let all = items(create("t", &d, Some(&work)).unwrap());
        assert_eq!(
            sort_keys(&all),
            [
                "NOTICE#n/DLV#email-0",
                "NOTICE#n/PROGRESS#2",
                "NOTICE#n/WORK#email-0"
            ]
        );
        let put = all[0].put().unwrap();
        assert_eq!(put.condition_expression(), Some("attribute_not_exists(pk)"));
        assert_eq!(put.item()["kind"].as_s().unwrap(), DELIVERY_KIND);
        // The watch is set from the state before the first write.
        assert_eq!(put.item()["watch_at"].as_n().unwrap(), "9000");
        let count = all[1].update().unwrap();
        assert_eq!(
            count.update_expression(),
            "ADD #to :one SET #kind = :kind, #updated = :now, #expires = :expires"
        );
        assert_eq!(
            count.expression_attribute_names().unwrap()["#to"],
            "n_queued"
        );
    }

    #[test]
    fn a_console_delivery_has_no_work_and_its_retention_from_birth() {
        let d = delivery(N::Delivered);
        let all = items(create("t", &d, None).unwrap());
        assert_eq!(
            sort_keys(&all),
            ["NOTICE#n/DLV#email-0", "NOTICE#n/PROGRESS#2"]
        );
        let ttl = Timestamp(0).plus(crate::domain::event::RETENTION).seconds();
        assert_eq!(
            all[0].put().unwrap().item()[super::super::attrs::EXPIRES_AT]
                .as_n()
                .unwrap(),
            &ttl.to_string()
        );
    }

    #[test]
    fn a_delivery_at_rest_carries_its_retention_and_its_reference_too_until_a_requeue() {
        let sending = NotificationDelivery {
            claimed_at: Some(Timestamp(100)),
            ..delivery(N::Sending)
        };
        let sent = NotificationDelivery {
            status: N::Sent,
            updated_at: Timestamp(5_000),
            ..sending.clone()
        };
        let effects = Effects {
            provider_ref: Some(ProviderRef {
                provider: "ses".into(),
                provider_ref: "m-1".into(),
                notice_id: id("n"),
                delivery_key: "email-0".into(),
            }),
            ..Effects::none()
        };
        let (w, written) =
            transition("t", &sending, sent, NT::AdapterAccepts, &effects, None).unwrap();
        let ttl = Timestamp(5_000)
            .plus(crate::domain::event::RETENTION)
            .seconds();
        assert_eq!(written.expires_at, Some(ttl));
        let all = items(w);
        let reference = all
            .iter()
            .filter_map(|i| i.put())
            .find(|p| p.item()["kind"].as_s().unwrap() == "provider_ref");
        assert_eq!(
            reference.unwrap().item()[super::super::attrs::EXPIRES_AT]
                .as_n()
                .unwrap(),
            &ttl.to_string()
        );
        // An exhausted failure rests too; the operator's requeue takes the expiry off.
        let mut failed = NotificationDelivery {
            failure_reason: Some(FailureReason::AttemptsExhausted),
            ..delivery(N::Failed)
        };
        failed.refresh_retention();
        assert!(failed.expires_at.is_some());
        let queued = NotificationDelivery {
            status: N::Queued,
            ..failed.clone()
        };
        let (_, requeued) = transition(
            "t",
            &failed,
            queued,
            NT::OperatorRequeue,
            &Effects::none(),
            None,
        )
        .unwrap();
        assert_eq!(requeued.expires_at, None);
    }

    #[test]
    fn a_move_is_conditional_on_the_lifecycle_source_and_the_version_read() {
        let mut current = delivery(N::Queued);
        current.version = 3;
        let mut next = current.clone();
        next.status = N::Sending;
        next.claimed_at = Some(Timestamp(100));
        let (write, written) =
            transition("t", &current, next, NT::Claim, &Effects::none(), None).unwrap();
        assert_eq!(written.version, 4);
        assert_eq!(
            written.watch_at,
            Some(Timestamp(100).plus(AMBIGUITY_TIMEOUT))
        );
        let all = items(write);
        assert_eq!(
            sort_keys(&all),
            ["NOTICE#n/DLV#email-0", "NOTICE#n/PROGRESS#2"]
        );
        let put = all[0].put().unwrap();
        assert_eq!(
            put.condition_expression(),
            Some("(#status IN (:status_from_0)) AND #version = :version")
        );
        let names = put.expression_attribute_names().unwrap();
        assert_eq!(
            (names["#status"].as_str(), names["#version"].as_str()),
            ("status", "version")
        );
        let values = put.expression_attribute_values().unwrap();
        assert_eq!(values[":status_from_0"].as_s().unwrap(), "queued");
        assert_eq!(values[":version"].as_n().unwrap(), "3");
        assert_eq!(put.item()["version"].as_n().unwrap(), "4");
        assert_eq!(put.item()["status"].as_s().unwrap(), "sending");
        let count = all[1]
            .update()
            .unwrap()
            .expression_attribute_names()
            .unwrap()
            .clone();
        assert_eq!(
            (count["#to"].as_str(), count["#from"].as_str()),
            ("n_sending", "n_queued")
        );
    }

    #[test]
    fn the_count_leaves_the_tables_source_whatever_the_caller_read() {
        // The caller believes the delivery is `sending`; the only source of `claim → sending`
        // is `queued`, which is what storage admits and what the count leaves.
        let current = delivery(N::Sending);
        let mut next = current.clone();
        next.status = N::Sending;
        let (write, _) =
            transition("t", &current, next, NT::Claim, &Effects::none(), None).unwrap();
        let all = items(write);
        let names = all[1]
            .update()
            .unwrap()
            .expression_attribute_names()
            .unwrap();
        assert_eq!(names["#from"], "n_queued");
    }

    #[test]
    fn a_sent_delivery_leaves_the_queue_and_saves_its_provider_reference() {
        let mut current = delivery(N::Sending);
        current.claimed_at = Some(Timestamp(5));
        let mut next = current.clone();
        next.status = N::Sent;
        let effects = Effects {
            work: WorkEffect::Delete,
            provider_ref: Some(ProviderRef {
                provider: "ses".into(),
                provider_ref: "m-1".into(),
                notice_id: "n".parse().unwrap(),
                delivery_key: "email-0".into(),
            }),
        };
        let (write, written) =
            transition("t", &current, next, NT::AdapterAccepts, &effects, None).unwrap();
        assert_eq!((written.watch_at, written.watch_shard), (None, None));
        let all = items(write);
        assert_eq!(
            sort_keys(&all),
            [
                "NOTICE#n/DLV#email-0",
                "NOTICE#n/PROGRESS#2",
                "NOTICE#n/WORK#email-0",
                "PROVREF#ses#m-1/REF"
            ]
        );
        assert!(all[2].delete().is_some());
        assert!(all[3].put().unwrap().condition_expression().is_none());
    }

    #[test]
    fn the_write_that_fails_a_delivery_puts_it_on_its_accounts_trouble_index_and_a_requeue_takes_it_off(
    ) {
        let current = delivery(N::Sending);
        let mut failed = current.clone();
        failed.status = N::Failed;
        failed.failure_reason = Some(FailureReason::AttemptsExhausted);
        failed.failed_at = Some(Timestamp(7));
        let (write, failed) = transition(
            "t",
            &current,
            failed,
            NT::FailSending,
            &Effects::delete_work(),
            None,
        )
        .unwrap();
        let all = items(write);
        let item = all[0].put().unwrap().item();
        assert_eq!(item["trouble_key"].as_s().unwrap(), "TROUBLE#a");
        assert_eq!(
            item["trouble_sort"].as_s().unwrap(),
            "000000000000007#n/email-0"
        );
        let mut next = failed.clone();
        next.status = N::Queued;
        next.failure_reason = None;
        next.failed_at = None;
        let (write, requeued) = transition(
            "t",
            &failed,
            next,
            NT::OperatorRequeue,
            &Effects::none(),
            Some(requeue_condition()),
        )
        .unwrap();
        let item = items(write)[0].put().unwrap().item().clone();
        assert!(!item.contains_key("trouble_key") && !item.contains_key("trouble_sort"));
        assert_eq!((requeued.trouble_key, requeued.trouble_sort), (None, None));
    }

    #[test]
    fn a_requeue_writes_fresh_work_under_the_stricter_condition() {
        let mut current = delivery(N::Failed);
        current.failure_reason = Some(FailureReason::AttemptsExhausted);
        let mut next = current.clone();
        next.status = N::Queued;
        next.failure_reason = None;
        let work = WorkRow::fresh(&id("n"), "email-0", Timestamp(1));
        let effects = Effects {
            work: WorkEffect::Put(work.clone()),
            provider_ref: None,
        };
        let (write, _) = transition(
            "t",
            &current,
            next,
            NT::OperatorRequeue,
            &effects,
            Some(requeue_condition()),
        )
        .unwrap();
        let all = items(write);
        let put = all[0].put().unwrap();
        assert_eq!(
            put.condition_expression(),
            Some("((#status IN (:status_from_0)) AND #failure_reason = :failure_reason_eq) AND #version = :version")
        );
        assert_eq!(
            put.expression_attribute_values().unwrap()[":failure_reason_eq"]
                .as_s()
                .unwrap(),
            "attempts_exhausted"
        );
        let row = all[2].put().unwrap();
        assert_eq!(row.item()["dispatch_id"].as_s().unwrap(), &work.dispatch_id);
        // The requeue keeps the notice and its other shards (its own shard: the count above).
        let kept = sort_keys(&all[3..]);
        assert_eq!(kept.len(), 8);
        assert_eq!(kept[0], "NOTICE#n/NOTICE");
        assert!(kept[1..]
            .iter()
            .all(|k| k.starts_with("NOTICE#n/PROGRESS#") && k != "NOTICE#n/PROGRESS#2"));
    }

    #[test]
    fn a_condition_that_admits_other_sources_than_the_table_is_not_built() {
        let current = delivery(N::Queued);
        let mut next = current.clone();
        next.status = N::Sending;
        let wider = StatusCondition::status_in(&["queued", "failed"]);
        assert!(matches!(
            transition(
                "t",
                &current,
                next,
                NT::Claim,
                &Effects::none(),
                Some(wider)
            ),
            Err(StoreError::Dynamo(_))
        ));
    }

    #[test]
    fn a_move_the_lifecycle_does_not_have_is_not_built() {
        let current = delivery(N::Delivered);
        let mut next = current.clone();
        next.status = N::Queued;
        assert!(matches!(
            transition("t", &current, next, NT::Claim, &Effects::none(), None),
            Err(StoreError::Transition(_))
        ));
    }

    #[test]
    fn a_record_keeps_the_status_and_needs_the_version_read() {
        let mut current = delivery(N::Sent);
        current.version = 7;
        let mut next = current.clone();
        next.bounce = Some(BounceRecord {
            bounce_type: "Permanent".into(),
            at: Timestamp(3),
        });
        let (write, written) = record("t", &current, next).unwrap();
        assert_eq!(written.version, 8);
        let Write::Put(put) = write else {
            panic!("not a single put")
        };
        assert_eq!(
            put.condition_expression(),
            Some("#version = :version AND #status = :status")
        );
        let values = put.expression_attribute_values().unwrap();
        assert_eq!(values[":version"].as_n().unwrap(), "7");
        assert_eq!(values[":status"].as_s().unwrap(), "sent");
        assert_eq!(put.item()["sk"].as_s().unwrap(), "DLV#email-0");

        let mut moved = current.clone();
        moved.status = N::Delivered;
        assert!(record("t", &current, moved).is_err());
    }

    #[test]
    fn settling_reads_one_watch_shard_up_to_now() {
        let q = watched_query("t", "3", Timestamp(50), 100, None);
        assert_eq!(q.index.as_deref(), Some("watch"));
        assert_eq!(q.key_condition, "watch_shard = :shard AND watch_at <= :now");
        assert_eq!(q.expr.values[":shard"].as_s().unwrap(), "3");
        assert_eq!(q.expr.values[":now"].as_n().unwrap(), "50");
        assert_eq!(q.limit, Some(100));
        assert!(!q.backwards);
    }
}
