//! The delivery item: one per subscription × change, in its event's partition. Its key *is* the
//! subscription-change idempotency key (a conditional put on it succeeds once), and it is its own
//! work item: a retry or an operator restart waits on the sparse `due` index, a dead or failed
//! one sits on its account's needs-attention listing, a pull delivery is on the keys-only
//! `by_subscription` index in change order (the cursor API reads it). A push delivery is not:
//! that entry would bill a write per delivery for the operator's history and replay only, which
//! read a push subscription's deliveries from its account's event listing by their keys
//! (subscription × change) instead.
//!
//! Its lifecycle is the integration delivery table (docs/lifecycles.md); every status write here
//! is conditional on the table's `from` states for its move.

use super::attrs::{due, listing, EXPIRES_AT};
use super::expr::{n, s, Expr};
use super::read::{self, Consistency};
use super::write::{built, put_new, Write, Written};
use super::{from_item, keys, to_item, Item, StoreError};
use crate::domain::change::Change;
use crate::domain::delivery_method::DeliveryMethod;
use crate::domain::event::delivery_expires_at;
use crate::domain::event::DeliveryFacts;
use crate::domain::integration_delivery::{
    lease_held, transmit_status, DeliveryMove, DeliveryStatus, TransmitStatus, DELIVERY_LIFECYCLE,
    FIRST_DISPATCH_GRACE,
};
use crate::domain::lifecycle::{Status, StatusCondition};
use crate::domain::retention::delivery_visible;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, DeliveryId, IntegrationId, ReplayJobId, SubscriptionId};
use aws_sdk_dynamodb::types::{AttributeValue, Update};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The `kind` of a delivery item.
pub const KIND: &str = "delivery";

/// One numbered attempt's outcome, kept on its delivery.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AttemptRecord {
    pub number: u32,
    pub at: Timestamp,
    /// `success`, `transient`, `permanent` or `configuration_loss`.
    pub class: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    pub duration_ms: u64,
    /// The start of the response body or the error, truncated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A delivery item, whole: the progress of one subscription × change, the marks operator
/// restarts and the pull cursor leave, and its index attributes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Delivery {
    pub delivery_id: DeliveryId,
    pub account_id: AccountId,
    pub change_id: ChangeId,
    pub subscription_id: SubscriptionId,
    pub integration_id: IntegrationId,
    pub method: DeliveryMethod,
    pub status: DeliveryStatus,
    /// Attempts made in the current progression (reset by an operator restart).
    #[serde(default)]
    pub attempts: u32,
    /// The only delivery its change made: its settling alone decides its event's prompt
    /// roll-up, which is then written without reading the event
    /// ([`crate::delivery::rollup::sole_roll_up`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sole: bool,
    /// The envelope delivered to the adapter (JSON text); absent for `skipped_filter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The change's time, for replay windows.
    pub occurred_at: Timestamp,
    /// Earliest time of the next attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_http_status: Option<u16>,
    #[serde(default)]
    pub attempt_log: Vec<AttemptRecord>,

    // Marks of operator restarts and the pull cursor.
    /// Operator restarts (retry or replay) of this delivery.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restarts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_by: Option<String>,
    /// The replay job that last restarted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_job: Option<ReplayJobId>,
    /// When it was last delivered (a push acknowledgement or a cursor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<Timestamp>,
    /// TTL, epoch **seconds** (set once the delivery or its event is final).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,

    // Index attributes.
    /// `due` index: the shard while a retry or a restart waits for the sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_shard: Option<String>,
    /// `due` index: when it is due (millis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at: Option<i64>,
    /// `listing` index: `ATTENTION#{account}` while dead or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_sort: Option<String>,
    /// `by_subscription` index (pull deliveries): the subscription and the change order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_sort: Option<String>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// The SQS message that asks the worker to attempt a delivery.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeliveryWork {
    pub account_id: AccountId,
    pub change_id: ChangeId,
    pub subscription_id: SubscriptionId,
}

/// The key of a delivery.
pub fn key(
    account_id: &AccountId,
    change_id: &ChangeId,
    subscription_id: &SubscriptionId,
) -> (String, String) {
    (
        keys::event_pk(account_id, change_id),
        keys::delivery_sk(subscription_id),
    )
}

pub use super::keys::attention_list_key;

impl Delivery {
    /// The delivery ingest records of a change for one subscription: `pending` with its projected
    /// `payload`, or `skipped_filter` (the change-time filter refused it) with none. `sole`: the
    /// only delivery the change makes.
    pub fn ingested(
        change: &Change,
        subscription_id: &SubscriptionId,
        integration_id: &IntegrationId,
        method: DeliveryMethod,
        payload: Option<String>,
        sole: bool,
        now: Timestamp,
    ) -> Self {
        let matched = payload.is_some();
        Delivery {
            delivery_id: keys::delivery_id(&change.change_id, subscription_id),
            account_id: change.account_id.clone(),
            change_id: change.change_id.clone(),
            subscription_id: subscription_id.clone(),
            integration_id: integration_id.clone(),
            method,
            status: if matched {
                DeliveryStatus::Pending
            } else {
                DeliveryStatus::SkippedFilter
            },
            attempts: 0,
            sole,
            payload,
            created_at: now,
            updated_at: now,
            occurred_at: change.occurred_at,
            not_before: matched.then_some(now),
            lease_until: None,
            lease_token: None,
            last_error: None,
            last_http_status: None,
            attempt_log: Vec::new(),
            restarts: 0,
            restarted_at: None,
            restarted_by: None,
            replay_job: None,
            delivered_at: None,
            expires_at: None,
            due_shard: None,
            due_at: None,
            list_key: None,
            list_sort: None,
            sub_key: None,
            sub_sort: None,
        }
    }

    pub fn key(&self) -> (String, String) {
        key(&self.account_id, &self.change_id, &self.subscription_id)
    }

    pub fn work(&self) -> DeliveryWork {
        DeliveryWork {
            account_id: self.account_id.clone(),
            change_id: self.change_id.clone(),
            subscription_id: self.subscription_id.clone(),
        }
    }

    /// Whether the delivery is on the dispatcher's `due` index.
    pub fn on_due_index(&self) -> bool {
        self.due_shard.is_some()
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        from_item(item)
    }

    /// The Delivery log's word for the delivery at `now` (`None`: `skipped_filter`, which the
    /// log does not count as a delivery).
    pub fn transmit_status(&self, now: Timestamp) -> Option<TransmitStatus> {
        transmit_status(self.status, lease_held(self.lease_until, now))
    }

    /// What the roll-up counts of this delivery; `None` when the subscriber did not take the
    /// event (`skipped_filter`).
    pub fn facts(&self, now: Timestamp) -> Option<DeliveryFacts> {
        self.transmit_status(now).map(|transmit| DeliveryFacts {
            method_is_poll: self.method.is_poll(),
            transmit,
        })
    }

    /// The read filter: a delivery past its expiry is treated as gone before TTL deletes it.
    pub fn visible(&self, now: Timestamp) -> bool {
        delivery_visible(self.expires_at, now)
    }

    /// A push delivery whose first dispatch went missing: still `pending` with no attempt made,
    /// no live lease, nothing scheduled on the `due` index, and ingested more than
    /// [`FIRST_DISPATCH_GRACE`] ago. New push work is published from the table's stream and
    /// reaches the worker within seconds; a delivery in this state lost its stream record or its
    /// message (or the message went to the dead-letter queue), and nothing else would ever
    /// publish it again.
    pub fn first_dispatch_lost(&self, now: Timestamp) -> bool {
        self.status == DeliveryStatus::Pending
            && !self.method.is_poll()
            && self.attempts == 0
            && !self.on_due_index()
            && !lease_held(self.lease_until, now)
            && self.created_at.plus(FIRST_DISPATCH_GRACE) <= now
    }
}

/// A consistent read of the delivery `work` names.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    work: &DeliveryWork,
) -> Result<Option<Delivery>, StoreError> {
    let (pk, sk) = key(&work.account_id, &work.change_id, &work.subscription_id);
    read::get(dynamo, table, &pk, &sk)
        .await?
        .map(from_item)
        .transpose()
}

/// The lease token a delivery holds now (a consistent read of that attribute alone).
pub async fn lease_token(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    d: &Delivery,
) -> Result<Option<String>, StoreError> {
    let (pk, sk) = d.key();
    Ok(read::get_with(
        dynamo,
        table,
        &pk,
        &sk,
        Consistency::Strong,
        Some("lease_token"),
    )
    .await?
    .and_then(|i| i.get("lease_token").and_then(|v| v.as_s().ok()).cloned()))
}

/// The item ingest writes for a new delivery: its keys, a pull delivery's place on the
/// subscription index and, for deliveries the worker never writes again, its retention.
pub fn new_item(d: &Delivery, now: Timestamp) -> Result<Item, StoreError> {
    let mut d = d.clone();
    // Only the cursor API needs a subscription's deliveries in change order from an index; a
    // push subscription's history and replay read its account's event listing and the
    // deliveries by key ([`SubscriptionRange::listing`]).
    if d.method.is_poll() {
        d.sub_key = Some(d.subscription_id.to_string());
        d.sub_sort = Some(keys::subscription_sort(&d.change_id));
    } else {
        d.sub_key = None;
        d.sub_sort = None;
    }
    // New push work is not put on the `due` index: the dispatcher publishes it from the table's
    // stream, and an index entry (written now, removed by the outcome) would bill two more
    // writes per delivery. Should the first dispatch go missing, the roll-up of the open event
    // finds the delivery after FIRST_DISPATCH_GRACE and schedules it there.
    if d.status == DeliveryStatus::SkippedFilter || d.method.is_poll() {
        // Filtered deliveries are final from birth, and the worker never writes pull deliveries:
        // both carry their retention now (the event's thirty days plus the margin), so the
        // roll-up need not write them again when their event becomes final. An unread pull
        // delivery of a final event goes with its event.
        d.expires_at = Some(delivery_expires_at(now).seconds());
    }
    let (pk, sk) = d.key();
    to_item(&d, &pk, &sk, KIND)
}

/// Creates a delivery unless one exists for its subscription × change (the idempotency key).
pub fn create(table: &str, d: &Delivery, now: Timestamp) -> Result<Write, StoreError> {
    put_new(table, new_item(d, now)?)
}

/// Claims the next numbered attempt (`attempts + 1`) of the delivery `work` names with a lease,
/// in one conditional write that reads nothing first: only an open push delivery, due by
/// `due_by`, that holds no live lease is claimed. It is sent as an update that answers with the
/// delivery either way ([`Claim::of`]): as claimed, or as it stood when the condition refused it,
/// which tells the worker why without a read.
///
/// The claim leaves the `due` index alone (moving `due_at` there would bill two index writes
/// per attempt). If the worker dies, its message is not deleted and comes back after the queue's
/// visibility timeout (longer than the lease); should that message be lost as well, a retry is
/// found by the sweep when its `due_at` passes and a first attempt by the roll-up of its open
/// event.
pub fn claim(
    table: &str,
    work: &DeliveryWork,
    token: &str,
    now: Timestamp,
    lease: Duration,
    due_by: Timestamp,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(&work.account_id, &work.change_id, &work.subscription_id);
    let open: Vec<&str> = DeliveryStatus::ALL
        .iter()
        .filter(|s| s.is_open())
        .map(|s| Status::as_str(*s))
        .collect();
    let mut e = Expr::new();
    let open = e.status(&StatusCondition::status_in(&open));
    let e = e
        .name("#method", "method")
        .value(":poll", s(DeliveryMethod::Poll.as_str()))
        .value(":due_by", n(due_by.millis()))
        .value(":now", n(now.millis()))
        .value(":lease", n(now.plus(lease).millis()))
        .value(":token", s(token))
        .value(":updated", n(now.millis()));
    Ok(Write::UpdateReturningNew(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(
                "SET lease_until = :lease, lease_token = :token, updated_at = :updated",
            )
            .condition_expression(format!(
                "{open} AND #method <> :poll \
                 AND (attribute_not_exists(not_before) OR not_before <= :due_by) \
                 AND (attribute_not_exists(lease_until) OR lease_until <= :now)"
            ))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// What a [`claim`] came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// The attempt is ours: the delivery as the claim left it.
    Claimed(Delivery),
    /// Not claimed: the delivery as it stood (`None`: there is no such delivery).
    Refused(Option<Delivery>),
}

impl Claim {
    /// The claim's answer.
    pub fn of(written: Written) -> Result<Claim, StoreError> {
        match written {
            Written::Applied(Some(item)) => Ok(Claim::Claimed(from_item(item)?)),
            Written::Refused(item) => Ok(Claim::Refused(item.map(from_item).transpose()?)),
            other => Err(StoreError::Dynamo(format!(
                "a claim answered {other:?}, neither the claimed delivery nor a refusal"
            ))),
        }
    }
}

/// The outcome of one attempt, decided by the worker.
#[derive(Debug, Clone)]
pub struct Outcome<'a> {
    /// The lifecycle move: trigger and new status.
    pub movement: DeliveryMove,
    /// For `retrying`: the wait before the next attempt.
    pub retry_in: Option<Duration>,
    pub attempt: &'a AttemptRecord,
}

/// Saves an attempt's outcome: the new status and attempt count, the history entry, the lease
/// released; conditional on the lifecycle's `from` states for the move and on still holding the
/// lease `token`. A retry goes onto the `due` index (the sweep publishes it); a terminal outcome
/// carries its retention; a dead or failed one goes onto the account's needs-attention listing.
pub fn save_outcome(
    table: &str,
    d: &Delivery,
    token: &str,
    outcome: &Outcome<'_>,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let (pk, sk) = d.key();
    let (trigger, to) = outcome.movement;
    let attempt = outcome.attempt;
    let condition = DELIVERY_LIFECYCLE.expect(d.status, trigger, to)?;
    let mut e = Expr::new();
    let status_condition = e.status(&condition);
    let entry = serde_dynamo::to_attribute_value::<_, AttributeValue>(attempt).map_err(|err| {
        StoreError::Shape {
            key: format!("{pk}/{sk}"),
            message: err.to_string(),
        }
    })?;
    e = e
        .name("#st", "status")
        .value(":to", s(to.to_string()))
        .value(":n", n(attempt.number))
        .value(":now", n(now.millis()))
        .value(":entry", AttributeValue::L(vec![entry]))
        .value(":empty", AttributeValue::L(vec![]))
        .value(":token", s(token));
    if to.is_terminal() {
        // Terminal outcomes carry their retention (epoch seconds, DynamoDB TTL).
        e = e.value(":expires", n(delivery_expires_at(now).seconds()));
    }
    let mut set = vec![
        "#st = :to".to_string(),
        "attempts = :n".into(),
        "updated_at = :now".into(),
        "attempt_log = list_append(if_not_exists(attempt_log, :empty), :entry)".into(),
    ];
    let mut remove = vec!["lease_until".to_string(), "lease_token".into()];
    match attempt.http_status {
        Some(code) => {
            e = e.value(":http", n(code));
            set.push("last_http_status = :http".into());
        }
        None => remove.push("last_http_status".into()),
    }
    match (&attempt.detail, to) {
        (_, DeliveryStatus::Delivered) | (None, _) => remove.push("last_error".into()),
        (Some(detail), _) => {
            e = e.value(":err", s(detail));
            set.push("last_error = :err".into());
        }
    }
    let off_due = [due::AT, due::SHARD, "not_before"].map(String::from);
    match to {
        DeliveryStatus::Retrying => {
            let next = now.plus(outcome.retry_in.unwrap_or_default());
            e = e
                .value(":next", n(next.millis()))
                .value(":shard", s(keys::shard_of(d.delivery_id.as_str())));
            set.push("not_before = :next".into());
            // Onto the `due` index (a first attempt is not on it): the sweep publishes it.
            set.push(format!("{} = :shard", due::SHARD));
            set.push(format!("{} = :next", due::AT));
        }
        DeliveryStatus::Delivered => {
            set.push("delivered_at = :now".into());
            set.push(format!("{EXPIRES_AT} = :expires"));
            remove.extend(off_due);
        }
        _ => {
            set.push(format!("{EXPIRES_AT} = :expires"));
            // Dead or failed: off the due index, onto the account's needs-attention listing.
            e = e
                .value(":attn", s(attention_list_key(&d.account_id)))
                .value(
                    ":attn_sort",
                    s(keys::time_sort(now, d.delivery_id.as_str())),
                );
            set.push(format!("{} = :attn", listing::KEY));
            set.push(format!("{} = :attn_sort", listing::SORT));
            remove.extend(off_due);
        }
    }
    let expression = format!("SET {} REMOVE {}", set.join(", "), remove.join(", "));
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(expression)
            .condition_expression(format!("({status_condition}) AND lease_token = :token"))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// Puts a push delivery whose first dispatch went missing ([`Delivery::first_dispatch_lost`])
/// on the `due` index, due now, for the dispatcher's next sweep to publish; conditional on it
/// still being in that state (a worker or an operator may have moved it since the read).
pub fn requeue_lost_dispatch(
    table: &str,
    d: &Delivery,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let (pk, sk) = d.key();
    let e = Expr::new()
        .name("#status", "status")
        .value(":pending", s(DeliveryStatus::Pending.to_string()))
        .value(":zero", n(0))
        .value(":now", n(now.millis()))
        .value(":shard", s(keys::shard_of(d.delivery_id.as_str())));
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(format!("SET {} = :shard, {} = :now", due::SHARD, due::AT))
            .condition_expression(format!(
                "#status = :pending AND attempts = :zero AND attribute_not_exists({}) \
                 AND (attribute_not_exists(lease_until) OR lease_until <= :now)",
                due::SHARD
            ))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// Sets (`Some`) or removes (`None`) a delivery's expiry (epoch seconds), if it still exists.
pub fn set_expiry(table: &str, d: &Delivery, ttl: Option<i64>) -> Result<Write, StoreError> {
    let (pk, sk) = d.key();
    let update = Update::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(sk))
        .condition_expression("attribute_exists(pk)");
    let update = match ttl {
        Some(ttl) => update
            .update_expression(format!("SET {EXPIRES_AT} = :ttl"))
            .expression_attribute_values(":ttl", n(ttl)),
        None => update.update_expression(format!("REMOVE {EXPIRES_AT}")),
    };
    Ok(Write::Update(built(update.build())?))
}

/// A delivery waiting on the `due` index: its work and when it is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub work: DeliveryWork,
    pub due_at: Timestamp,
}

/// The work a delivery's key names (`EVT#{account}#{change}` / `DLV#{subscription}`).
pub fn work_from_key(pk: &str, sk: &str) -> Option<DeliveryWork> {
    let (account_id, change_id) = keys::parse_event_pk(pk)?;
    let subscription_id = sk.strip_prefix(keys::DELIVERY_PREFIX)?;
    Some(DeliveryWork {
        account_id: AccountId::from_stored(account_id),
        change_id: ChangeId::from_stored(change_id),
        subscription_id: SubscriptionId::from_stored(subscription_id),
    })
}

/// The query of one shard of the `due` index: deliveries due by `horizon`, at most `limit`.
pub fn due_query(table: &str, shard: &str, horizon: Timestamp, limit: i32) -> read::Query {
    read::Query {
        table: table.into(),
        index: Some(due::INDEX.into()),
        key_condition: format!("{} = :shard AND {} <= :horizon", due::SHARD, due::AT),
        expr: Expr::new()
            .value(":shard", s(shard))
            .value(":horizon", n(horizon.millis())),
        limit: Some(limit),
        ..Default::default()
    }
}

/// One page of a `due` shard (the index holds the keys and `due_at`).
pub async fn due_by(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    shard: &str,
    horizon: Timestamp,
    limit: i32,
) -> Result<Vec<Due>, StoreError> {
    let page = read::query_page(dynamo, &due_query(table, shard, horizon, limit)).await?;
    Ok(page
        .items
        .iter()
        .filter_map(|item| {
            let text = |k: &str| item.get(k).and_then(|v| v.as_s().ok());
            let due_at = item
                .get(due::AT)
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<i64>().ok())
                .map(Timestamp)?;
            let work = work_from_key(text("pk")?, text("sk")?)?;
            Some(Due { work, due_at })
        })
        .collect())
}

/// Moves a published delivery's `due_at` on to `next`, unless the delivery moved since the sweep
/// read `seen` (an outcome or a restart wrote it).
pub fn postpone(table: &str, due: &Due, next: Timestamp) -> Result<Write, StoreError> {
    let w = &due.work;
    let (pk, sk) = key(&w.account_id, &w.change_id, &w.subscription_id);
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(format!("SET {} = :next", due::AT))
            .condition_expression(format!("{} = :seen", due::AT))
            .expression_attribute_values(":next", n(next.millis()))
            .expression_attribute_values(":seen", n(due.due_at.millis()))
            .build(),
    )?))
}

/// A webhook delivery of change `01C` to `sub1` of `acct`, for the crate's unit tests.
#[cfg(test)]
pub(crate) fn test_delivery(status: DeliveryStatus, attempts: u32) -> Delivery {
    Delivery {
        delivery_id: keys::delivery_id(&crate::ids::id("01C"), &crate::ids::id("sub1")),
        account_id: "acct".parse().unwrap(),
        change_id: "01C".parse().unwrap(),
        subscription_id: "sub1".parse().unwrap(),
        integration_id: "int1".parse().unwrap(),
        method: DeliveryMethod::Webhook,
        status,
        attempts,
        sole: false,
        payload: Some("{}".into()),
        created_at: Timestamp(1_000),
        updated_at: Timestamp(1_000),
        occurred_at: Timestamp(900),
        not_before: Some(Timestamp(1_000)),
        lease_until: None,
        lease_token: None,
        last_error: None,
        last_http_status: None,
        attempt_log: vec![],
        restarts: 0,
        restarted_at: None,
        restarted_by: None,
        replay_job: None,
        delivered_at: None,
        expires_at: None,
        due_shard: None,
        due_at: None,
        list_key: None,
        list_sort: None,
        sub_key: None,
        sub_sort: None,
    }
}

#[cfg(test)]
mod tests {
    use super::test_delivery as delivery;
    use super::*;
    use crate::domain::integration_delivery::{after_success, after_transient_failure};
    use crate::domain::time::SECOND;
    use crate::ids::id;
    use crate::store::attrs::by_subscription;

    #[test]
    fn keys_name_their_work() {
        let w = work_from_key(
            &keys::event_pk(&id("a1"), &id("c1")),
            &keys::delivery_sk(&id("s1")),
        )
        .unwrap();
        assert_eq!(
            w,
            DeliveryWork {
                account_id: "a1".parse().unwrap(),
                change_id: "c1".parse().unwrap(),
                subscription_id: "s1".parse().unwrap()
            }
        );
        assert!(work_from_key("ACCT#a", "DLV#s").is_none());
        assert!(work_from_key("EVT#a#c", "EVENT").is_none());
    }

    fn attempt(number: u32, http: Option<u16>, detail: Option<&str>) -> AttemptRecord {
        AttemptRecord {
            number,
            at: Timestamp(2_000),
            class: "transient".into(),
            http_status: http,
            duration_ms: 12,
            detail: detail.map(str::to_string),
        }
    }

    fn update(w: Write) -> Update {
        match w {
            Write::Update(u) | Write::UpdateReturningNew(u) => u,
            other => panic!("not an update: {other:?}"),
        }
    }

    /// A new push delivery ingested at `created`.
    fn push_delivery(created: Timestamp) -> Delivery {
        let mut d = delivery(DeliveryStatus::Pending, 0);
        d.created_at = created;
        d.updated_at = created;
        d
    }

    #[test]
    fn a_first_dispatch_is_lost_only_when_nothing_else_can_bring_the_delivery_back() {
        let created = Timestamp(1_700_000_000_000);
        let due = created.plus(FIRST_DISPATCH_GRACE);
        let d = push_delivery(created);
        assert!(d.first_dispatch_lost(due));
        assert!(
            !d.first_dispatch_lost(due.minus(SECOND)),
            "within the grace"
        );

        let mut scheduled = push_delivery(created);
        scheduled.due_shard = Some("3".into());
        assert!(!scheduled.first_dispatch_lost(due), "the sweep has it");

        let mut leased = push_delivery(created);
        leased.lease_until = Some(due.plus(SECOND));
        assert!(!leased.first_dispatch_lost(due), "a worker holds it");
        leased.lease_until = Some(due);
        assert!(leased.first_dispatch_lost(due), "the lease lapsed");

        let mut attempted = push_delivery(created);
        attempted.attempts = 1;
        assert!(!attempted.first_dispatch_lost(due), "not a first dispatch");

        let mut pull = push_delivery(created);
        pull.method = DeliveryMethod::Poll;
        assert!(
            !pull.first_dispatch_lost(due),
            "pull deliveries wait for a cursor"
        );

        for status in [
            DeliveryStatus::Delivered,
            DeliveryStatus::Retrying,
            DeliveryStatus::Dead,
            DeliveryStatus::Failed,
            DeliveryStatus::SkippedFilter,
        ] {
            let mut moved = push_delivery(created);
            moved.status = status;
            assert!(!moved.first_dispatch_lost(due), "{status}");
        }
    }

    #[test]
    fn a_new_push_delivery_is_keyed_by_subscription_and_change_and_stays_off_every_index() {
        let item = new_item(&delivery(DeliveryStatus::Pending, 0), Timestamp(1_000)).unwrap();
        assert_eq!(item["pk"].as_s().unwrap(), "EVT#acct#01C");
        assert_eq!(item["sk"].as_s().unwrap(), "DLV#sub1");
        assert_eq!(item["kind"].as_s().unwrap(), KIND);
        assert!(!item.contains_key(by_subscription::KEY));
        assert!(!item.contains_key(by_subscription::SORT));
        assert!(!item.contains_key(due::SHARD));
        assert!(!item.contains_key(EXPIRES_AT));
        let round_trip = Delivery::from_item(item).unwrap();
        assert_eq!(round_trip.sub_sort, None);
    }

    #[test]
    fn a_new_pull_delivery_is_on_the_subscription_index_in_change_order() {
        let mut d = delivery(DeliveryStatus::Pending, 0);
        d.method = DeliveryMethod::Poll;
        let item = new_item(&d, Timestamp(1_000)).unwrap();
        assert_eq!(item[by_subscription::KEY].as_s().unwrap(), "sub1");
        assert_eq!(item[by_subscription::SORT].as_s().unwrap(), "01C");
    }

    #[test]
    fn a_filtered_delivery_carries_its_retention_from_birth() {
        let item = new_item(
            &delivery(DeliveryStatus::SkippedFilter, 0),
            Timestamp(1_000),
        )
        .unwrap();
        assert!(item.contains_key(EXPIRES_AT));
    }

    #[test]
    fn a_claim_needs_an_open_due_push_delivery_without_a_live_lease_and_answers_with_it() {
        let d = delivery(DeliveryStatus::Retrying, 2);
        let (now, due_by) = (Timestamp(5_000), Timestamp(7_000));
        let w = claim("t", &d.work(), "tok", now, Duration::from_secs(60), due_by).unwrap();
        assert!(matches!(w, Write::UpdateReturningNew(_)), "{w:?}");
        let u = update(w);
        let condition = u.condition_expression().unwrap();
        assert!(condition.starts_with("#status IN ("), "{condition}");
        assert!(condition.contains("#method <> :poll"), "{condition}");
        assert!(condition.contains("not_before <= :due_by"), "{condition}");
        assert!(condition.contains("lease_until <= :now"), "{condition}");
        let values = u.expression_attribute_values().unwrap();
        let mut open: Vec<&str> = values
            .iter()
            .filter(|(k, _)| k.starts_with(":status"))
            .map(|(_, v)| v.as_s().unwrap().as_str())
            .collect();
        open.sort();
        assert_eq!(open, ["pending", "retrying"]);
        assert_eq!(values[":due_by"].as_n().unwrap(), "7000");
        assert_eq!(values[":lease"].as_n().unwrap(), "65000");
        assert!(!u.update_expression().contains(due::AT));
        assert!(!u.update_expression().contains("attempts"));
    }

    #[test]
    fn a_retry_outcome_goes_onto_the_due_index_and_needs_the_lease() {
        let d = delivery(DeliveryStatus::Pending, 0);
        let a = attempt(1, Some(503), Some("unavailable"));
        let outcome = Outcome {
            movement: after_transient_failure(DeliveryStatus::Pending, true).unwrap(),
            retry_in: Some(Duration::from_secs(60)),
            attempt: &a,
        };
        let u = update(save_outcome("t", &d, "tok", &outcome, Timestamp(2_000)).unwrap());
        let expression = u.update_expression();
        assert!(expression.contains("due_shard = :shard"));
        assert!(expression.contains("due_at = :next"));
        assert!(expression.contains("last_error = :err"));
        assert!(u
            .condition_expression()
            .unwrap()
            .ends_with("lease_token = :token"));
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":next"].as_n().unwrap(), "62000");
        assert!(!values.contains_key(":expires"));
    }

    #[test]
    fn a_dead_outcome_leaves_the_due_index_for_the_attention_listing_with_its_retention() {
        let d = delivery(DeliveryStatus::Retrying, 4);
        let a = attempt(5, Some(500), Some("boom"));
        let outcome = Outcome {
            movement: after_transient_failure(DeliveryStatus::Retrying, false).unwrap(),
            retry_in: None,
            attempt: &a,
        };
        let u = update(save_outcome("t", &d, "tok", &outcome, Timestamp(2_000)).unwrap());
        let expression = u.update_expression();
        assert!(expression.contains("list_key = :attn"));
        assert!(expression.contains("REMOVE") && expression.contains("due_shard"));
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":attn"].as_s().unwrap(), "ATTENTION#acct");
        assert!(values.contains_key(":expires"));
    }

    #[test]
    fn a_delivery_key_names_its_work_and_nothing_else_does() {
        let (pk, sk) = key(&id("acct"), &id("01C"), &id("sub1"));
        let work = work_from_key(&pk, &sk).unwrap();
        assert_eq!(work.subscription_id.as_str(), "sub1");
        assert_eq!(work.change_id.as_str(), "01C");
        assert!(work_from_key(&pk, "EVENT").is_none());
        assert!(work_from_key("ACCT#a", &sk).is_none());
    }

    #[test]
    fn a_postponement_is_conditional_on_the_due_time_the_sweep_read() {
        let due = Due {
            work: delivery(DeliveryStatus::Retrying, 1).work(),
            due_at: Timestamp(5_000),
        };
        let u = update(postpone("t", &due, Timestamp(9_000)).unwrap());
        assert_eq!(u.condition_expression(), Some("due_at = :seen"));
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":seen"].as_n().unwrap(), "5000");
        assert_eq!(values[":next"].as_n().unwrap(), "9000");
    }

    #[test]
    fn an_outcome_the_lifecycle_forbids_is_not_built() {
        // The move of a pending delivery's success, applied to a delivered one.
        let d = delivery(DeliveryStatus::Delivered, 1);
        let a = attempt(2, Some(200), None);
        let outcome = Outcome {
            movement: after_success(DeliveryStatus::Pending).unwrap(),
            retry_in: Some(Duration::from_secs(1)),
            attempt: &a,
        };
        assert!(matches!(
            save_outcome("t", &d, "tok", &outcome, Timestamp(2_000)),
            Err(StoreError::Transition(_))
        ));
    }
}

// ---- operator actions and the pull cursor
//
// The writes of operator restarts (retry, replay) and of the pull cursor's cover, and the reads
// of a subscription's deliveries: on the `by_subscription` index (pull reads; a pull
// subscription's history and replay walks), or through its account's event listing (a push
// subscription's history and replay walks). In a module of their own so that their imports
// never meet the ones above.

pub use self::operator_actions::*;

mod operator_actions {
    use super::{key, Delivery};
    use crate::domain::integration_delivery::{
        DeliveryMove, DeliveryStatus, DeliveryTrigger, DELIVERY_LIFECYCLE,
    };
    use crate::domain::time::Timestamp;
    use crate::ids::{AccountId, ChangeId, ReplayJobId, SubscriptionId};
    use crate::store::attrs::{by_subscription, due, listing, EXPIRES_AT, STATUS};
    use crate::store::event::events_list_key;
    use crate::store::expr::{n, s, Expr};
    use crate::store::read::{self, Consistency, Query};
    use crate::store::update::conditional_update;
    use crate::store::write::Write;
    use crate::store::{keys, Item, StoreError};
    use std::time::Duration;

    fn update(
        table: &str,
        d: &Delivery,
        expression: String,
        condition: String,
        e: &Expr,
    ) -> Result<Write, StoreError> {
        let delivery_key = key(&d.account_id, &d.change_id, &d.subscription_id);
        conditional_update(table, delivery_key, expression, condition, e)
    }

    /// One operator restart of a delivery (retry or replay).
    #[derive(Debug, Clone, Copy)]
    pub struct Restart<'a> {
        /// The delivery as read.
        pub delivery: &'a Delivery,
        /// From [`crate::domain::integration_delivery::operator_restart`] on the status read.
        pub movement: DeliveryMove,
        pub operator: &'a str,
        /// The replay job restarting it: the write is then refused if that job already did.
        pub replay_job: Option<&'a ReplayJobId>,
    }

    /// Restarts a delivery from its first attempt: `pending`, `attempts = 0`, `not_before =
    /// now`, one more restart with who and when; the last error, the worker's lease (a worker
    /// still attempting it then fails its outcome write), the needs-attention listing, the
    /// delivered time and any retention removed; the attempt log kept. Conditional on the
    /// lifecycle's `from` states for the move (the status read), and for a replay on not having
    /// been restarted by the same job. A push delivery goes back on the `due` index, due after
    /// `grace` (the stream publishes it as it enters pending; the sweep publishes it again if
    /// that message is lost); a pull delivery waits for the adapter's cursor, off the index.
    pub fn restart(
        table: &str,
        r: &Restart<'_>,
        grace: Duration,
        now: Timestamp,
    ) -> Result<Write, StoreError> {
        let d = r.delivery;
        let (trigger, to) = r.movement;
        let condition = DELIVERY_LIFECYCLE.expect(d.status, trigger, to)?;
        let mut e = Expr::new()
            .value(":to", s(to.to_string()))
            .value(":zero", n(0))
            .value(":one", n(1))
            .value(":now", n(now.millis()))
            .value(":operator", s(r.operator));
        let status_condition = e.status(&condition);
        let mut set = vec![
            "#status = :to".to_string(),
            "attempts = :zero".into(),
            "updated_at = :now".into(),
            "not_before = :now".into(),
            "restarted_at = :now".into(),
            "restarted_by = :operator".into(),
            "restarts = if_not_exists(restarts, :zero) + :one".into(),
        ];
        let mut remove = vec![
            "lease_until".to_string(),
            "lease_token".into(),
            "last_error".into(),
            "last_http_status".into(),
            listing::KEY.into(),
            listing::SORT.into(),
            "delivered_at".into(),
            EXPIRES_AT.into(),
        ];
        if d.method.is_poll() {
            remove.extend([due::SHARD.to_string(), due::AT.into()]);
        } else {
            e = e
                .value(":shard", s(keys::shard_of(d.delivery_id.as_str())))
                .value(":due", n(now.plus(grace).millis()));
            set.push(format!("{} = :shard", due::SHARD));
            set.push(format!("{} = :due", due::AT));
        }
        let mut condition_text = format!("({status_condition})");
        if let Some(job) = r.replay_job {
            e = e.value(":job", s(job));
            set.push("replay_job = :job".into());
            condition_text
                .push_str(" AND (attribute_not_exists(replay_job) OR replay_job <> :job)");
        }
        update(
            table,
            d,
            format!("SET {} REMOVE {}", set.join(", "), remove.join(", ")),
            condition_text,
            &e,
        )
    }

    /// `pending → delivered` by `AdvancePullCursor` for a cursor at `cursor_change` ("the pull
    /// cursor passes it", `docs/lifecycles.md#integration-delivery`), only while the delivery is
    /// the pending, unleased one the read saw, written and restarted no later than the read's
    /// `horizon`. `None` when the lifecycle has no such move from the status read
    /// (the cursor then does not cover it).
    pub fn cover_by_cursor(
        table: &str,
        d: &Delivery,
        horizon: Timestamp,
        cursor_change: &ChangeId,
        now: Timestamp,
    ) -> Result<Option<Write>, StoreError> {
        let Ok(condition) = DELIVERY_LIFECYCLE.expect(
            d.status,
            DeliveryTrigger::AdvancePullCursor,
            DeliveryStatus::Delivered,
        ) else {
            return Ok(None);
        };
        let mut e = Expr::new()
            .value(":delivered", s(DeliveryStatus::Delivered.to_string()))
            .value(":now", n(now.millis()))
            .value(":horizon", n(horizon.millis()))
            .value(":cursor", s(cursor_change));
        let status_condition = e.status(&condition);
        update(
            table,
            d,
            format!(
                "SET #status = :delivered, delivered_at = :now, updated_at = :now, \
                 delivered_by_cursor = :cursor REMOVE {}, {}, not_before",
                due::AT,
                due::SHARD
            ),
            format!(
                "({status_condition}) AND created_at <= :horizon \
                 AND (attribute_not_exists(restarted_at) OR restarted_at <= :horizon) \
                 AND (attribute_not_exists(lease_until) OR lease_until <= :now)"
            ),
            &e,
        )
        .map(Some)
    }

    /// The upper bound of a `by_subscription` read.
    #[derive(Debug, Clone, Copy)]
    pub enum Upper<'a> {
        /// `sub_sort <= bound`.
        Through(&'a ChangeId),
        /// `sub_sort < bound`.
        Before(&'a ChangeId),
    }

    impl<'a> Upper<'a> {
        /// The bound's change and whether it is inclusive.
        fn bound(self) -> (&'a ChangeId, bool) {
            match self {
                Upper::Through(c) => (c, true),
                Upper::Before(c) => (c, false),
            }
        }
    }

    /// A range of one subscription's deliveries: on the `by_subscription` index in change order,
    /// or (`listing`) through its account's event listing in the order changes were ingested.
    #[derive(Debug, Clone)]
    pub struct SubscriptionRange<'a> {
        pub subscription_id: &'a SubscriptionId,
        /// Exclusive lower bound of `sub_sort` (the change id).
        pub after: Option<&'a ChangeId>,
        pub upper: Option<Upper<'a>>,
        /// Change order (`true`) or newest first.
        pub forward: bool,
        /// `Some(account)`: a push subscription, whose deliveries are not on `by_subscription`.
        /// The range is read from the account's event listing (keys only) and each change's
        /// delivery to the subscription fetched by its key, the bounds placed at their changes'
        /// listing positions. `None`: the `by_subscription` index (pull subscriptions).
        pub listing: Option<&'a AccountId>,
    }

    /// The sort-key bounds of a range on one of `index`'s partitions (`partition`, its names and
    /// values in `e`).
    struct IndexRange<'q> {
        index: &'q str,
        partition: &'q str,
        e: Expr,
        sort_attr: &'q str,
        /// Exclusive lower bound.
        lo: Option<&'q str>,
        /// Upper bound, `true`: inclusive.
        hi: Option<(&'q str, bool)>,
    }

    /// The query of a page of `r`, in `range`'s direction: the key condition `partition` plus
    /// the bounds, after `lo`, up to `hi`. With both bounds it is `BETWEEN`, inclusive at both
    /// ends (DynamoDB has no exclusive BETWEEN): the reader drops the bound entries
    /// ([`excluded`]).
    fn sort_range(
        table: &str,
        r: IndexRange<'_>,
        range: &SubscriptionRange<'_>,
        start: Option<Item>,
        limit: i32,
    ) -> Query {
        let IndexRange {
            index,
            partition,
            mut e,
            sort_attr,
            lo,
            hi,
        } = r;
        let mut key = partition.to_string();
        if lo.is_some() || hi.is_some() {
            e = e.name("#sort", sort_attr);
        }
        match (lo, hi) {
            (Some(l), Some((h, _))) => {
                e = e.value(":lo", s(l)).value(":hi", s(h));
                key.push_str(" AND #sort BETWEEN :lo AND :hi");
            }
            (Some(l), None) => {
                e = e.value(":lo", s(l));
                key.push_str(" AND #sort > :lo");
            }
            (None, Some((h, inclusive))) => {
                e = e.value(":hi", s(h));
                key.push_str(if inclusive {
                    " AND #sort <= :hi"
                } else {
                    " AND #sort < :hi"
                });
            }
            (None, None) => {}
        }
        Query {
            table: table.to_owned(),
            index: Some(index.to_owned()),
            key_condition: key,
            expr: e,
            limit: Some(limit),
            start,
            backwards: !range.forward,
            ..Query::default()
        }
    }

    /// The index query of a page of `range`. BETWEEN is inclusive at both ends: the entries at
    /// an exclusive bound are dropped from the page ([`excluded`]).
    pub fn range_query(
        table: &str,
        range: &SubscriptionRange<'_>,
        start: Option<Item>,
        limit: i32,
    ) -> Query {
        let e = Expr::new()
            .name("#sk_sub", by_subscription::KEY)
            .value(":sub", s(range.subscription_id));
        let r = IndexRange {
            index: by_subscription::INDEX,
            partition: "#sk_sub = :sub",
            e,
            sort_attr: by_subscription::SORT,
            lo: range.after.map(ChangeId::as_str),
            hi: range.upper.map(|u| {
                let (c, inclusive) = u.bound();
                (c.as_str(), inclusive)
            }),
        };
        sort_range(table, r, range, start, limit)
    }

    /// The change of an entry: its `sub_sort`, or the change of an event listing position
    /// (`{millis}#{change}`, a listing page's last evaluated key).
    fn sort_of(item: &Item) -> Option<&str> {
        let text = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).map(String::as_str);
        text(by_subscription::SORT).or_else(|| {
            text(listing::SORT)
                .and_then(|p| p.split_once('#'))
                .map(|(_, c)| c)
        })
    }

    /// The listing position of `change`'s event (`None`: the event is gone).
    async fn listing_position(
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        account_id: &AccountId,
        change: &ChangeId,
    ) -> Result<Option<String>, StoreError> {
        let (pk, sk) = crate::store::event::key(account_id, change);
        let item = read::get_with(
            dynamo,
            table,
            &pk,
            &sk,
            Consistency::Eventual,
            Some(listing::SORT),
        )
        .await?;
        Ok(item.and_then(|i| i.get(listing::SORT)?.as_s().ok().cloned()))
    }

    /// One page of a push subscription's range read through the account's event listing: the
    /// keys of the subscription's delivery of each change listed (with the change as their
    /// `sub_sort`), and where the listing stopped. The bounds are their changes' listing
    /// positions, with the key conditions of [`range_query`] (BETWEEN, inclusive, only when both
    /// are given; [`excluded`] drops the bound entries). A bound whose event is gone bounds by
    /// change id instead (the listing read from its end in that direction).
    async fn listing_entries(
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        account_id: &AccountId,
        range: &SubscriptionRange<'_>,
        start: Option<Item>,
        limit: i32,
    ) -> Result<(Vec<Item>, Option<Item>), StoreError> {
        let lo = match range.after {
            Some(c) => listing_position(dynamo, table, account_id, c).await?,
            None => None,
        };
        let (hi_change, hi_inclusive) = match range.upper.map(Upper::bound) {
            Some((c, inclusive)) => (Some(c), inclusive),
            None => (None, false),
        };
        let hi = match hi_change {
            Some(c) => listing_position(dynamo, table, account_id, c).await?,
            None => None,
        };
        let e = Expr::new()
            .name("#lk", listing::KEY)
            .value(":lk", s(events_list_key(account_id)));
        let r = IndexRange {
            index: listing::INDEX,
            partition: "#lk = :lk",
            e,
            sort_attr: listing::SORT,
            lo: lo.as_deref(),
            hi: hi.as_deref().map(|h| (h, hi_inclusive)),
        };
        let page = read::query_page(dynamo, &sort_range(table, r, range, start, limit)).await?;
        let after_lo = |c: &str| match (range.after, &lo) {
            (Some(after), None) => c > after.as_str(),
            _ => true,
        };
        let below_hi = |c: &str| match (hi_change, &hi) {
            (Some(bound), None) if hi_inclusive => c <= bound.as_str(),
            (Some(bound), None) => c < bound.as_str(),
            _ => true,
        };
        let sk = s(keys::delivery_sk(range.subscription_id));
        let entries = page
            .items
            .iter()
            .filter_map(|entry| {
                let pk = entry.get("pk")?.clone();
                let change = sort_of(entry)?;
                (after_lo(change) && below_hi(change)).then(|| {
                    Item::from([
                        ("pk".to_string(), pk),
                        ("sk".to_string(), sk.clone()),
                        (by_subscription::SORT.to_string(), s(change)),
                    ])
                })
            })
            .collect();
        Ok((entries, page.next))
    }

    /// Whether an index entry sits on one of `range`'s exclusive bounds.
    pub fn excluded(range: &SubscriptionRange<'_>, entry: &Item) -> bool {
        let sort = sort_of(entry);
        let below = range.after.is_some_and(|lo| sort == Some(lo.as_str()));
        let above = matches!(range.upper, Some(Upper::Before(hi)) if sort == Some(hi.as_str()));
        below || above
    }

    /// One page of index entries of `range`, and where DynamoDB stopped.
    async fn entries(
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        range: &SubscriptionRange<'_>,
        start: Option<Item>,
        limit: i32,
    ) -> Result<(Vec<Item>, Option<Item>), StoreError> {
        let (items, next) = match range.listing {
            Some(account_id) => {
                listing_entries(dynamo, table, account_id, range, start, limit).await?
            }
            None => {
                let page =
                    read::query_page(dynamo, &range_query(table, range, start, limit)).await?;
                (page.items, page.next)
            }
        };
        let entries = items
            .into_iter()
            .filter(|entry| !excluded(range, entry))
            .collect();
        Ok((entries, next))
    }

    /// Which of a subscription's deliveries a page keeps.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Filter {
        /// The account the caller acts for: another account's item is never returned.
        pub account_id: AccountId,
        /// Any of these statuses (empty: any status).
        pub statuses: Vec<DeliveryStatus>,
        /// `occurred_at` at or after this.
        pub occurred_from: Option<Timestamp>,
        /// `occurred_at` before this.
        pub occurred_before: Option<Timestamp>,
        /// Created, and restarted if it ever was, no later than this.
        pub written_through: Option<Timestamp>,
    }

    impl Filter {
        pub fn account(account_id: &AccountId) -> Self {
            Filter {
                account_id: account_id.clone(),
                statuses: Vec::new(),
                occurred_from: None,
                occurred_before: None,
                written_through: None,
            }
        }

        /// Whether the stored item is kept (read as stored: before it is parsed).
        pub fn admits(&self, item: &Item) -> bool {
            let text = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).map(String::as_str);
            let millis = |k: &str| {
                item.get(k)
                    .and_then(|v| v.as_n().ok())
                    .and_then(|v| v.parse::<i64>().ok())
            };
            let status_ok = self.statuses.is_empty()
                || text(STATUS).is_some_and(|st| self.statuses.iter().any(|w| w.to_string() == st));
            let occurred = millis("occurred_at");
            let from_ok = self
                .occurred_from
                .is_none_or(|f| occurred.is_some_and(|o| o >= f.millis()));
            let before_ok = self
                .occurred_before
                .is_none_or(|b| occurred.is_some_and(|o| o < b.millis()));
            let written_ok = self.written_through.is_none_or(|h| {
                millis("created_at").is_some_and(|c| c <= h.millis())
                    && millis("restarted_at").is_none_or(|r| r <= h.millis())
            });
            text("account_id") == Some(self.account_id.as_str())
                && status_ok
                && from_ok
                && before_ok
                && written_ok
        }
    }

    /// One page of a subscription's deliveries.
    #[derive(Debug, Clone)]
    pub struct DeliveryPage {
        /// The deliveries the filter kept, in index order.
        pub deliveries: Vec<Delivery>,
        /// The `sub_sort` of the last entry evaluated, when the range has more to read.
        pub last_sort: Option<ChangeId>,
        /// Where the next page starts (`None`: the range is done).
        pub next_start: Option<Item>,
    }

    /// One page of `range`'s deliveries that `filter` keeps. The index holds keys only (so that
    /// claims, outcomes and acknowledgements, which change other attributes, do not also write
    /// the index): the page's items are read from the table and filtered here. As with a
    /// DynamoDB filter, `limit` counts the entries evaluated, not the deliveries kept.
    pub async fn by_subscription_page(
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        range: &SubscriptionRange<'_>,
        filter: &Filter,
        start: Option<Item>,
        limit: i32,
    ) -> Result<DeliveryPage, StoreError> {
        let (entries, next) = entries(dynamo, table, range, start, limit).await?;
        let deliveries = read::items_in_order(dynamo, table, &entries)
            .await?
            .into_iter()
            .filter(|item| filter.admits(item))
            .map(Delivery::from_item)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DeliveryPage {
            deliveries,
            last_sort: next.as_ref().and_then(sort_of).map(ChangeId::from_stored),
            next_start: next,
        })
    }

    /// What pages of a range gathered.
    #[derive(Debug, Clone, Default)]
    pub struct Gathered {
        /// The deliveries kept, in index order (possibly more than wanted).
        pub deliveries: Vec<Delivery>,
        /// The `sub_sort` of the last entry evaluated, when the range has more to read.
        pub evaluated_to: Option<ChangeId>,
        /// The range has nothing more to read.
        pub exhausted: bool,
    }

    /// Reads pages of `page` entries of `range` until `wanted` deliveries passed `filter`, the
    /// range is exhausted, or `rounds` pages were read.
    pub async fn gather_by_subscription(
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        range: &SubscriptionRange<'_>,
        filter: &Filter,
        wanted: usize,
        page: i32,
        rounds: usize,
    ) -> Result<Gathered, StoreError> {
        let mut gathered = Gathered::default();
        let mut start = None;
        for _ in 0..rounds {
            let read =
                by_subscription_page(dynamo, table, range, filter, start.take(), page).await?;
            gathered.deliveries.extend(read.deliveries);
            gathered.evaluated_to = read.last_sort;
            match read.next_start {
                Some(next) if gathered.deliveries.len() < wanted => start = Some(next),
                Some(_) => break,
                None => {
                    gathered.exhausted = true;
                    break;
                }
            }
        }
        Ok(gathered)
    }

    /// Whether the delivery `work` names exists (a consistent read; the item is not parsed).
    pub async fn exists(
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        work: &super::DeliveryWork,
    ) -> Result<bool, StoreError> {
        let (pk, sk) = key(&work.account_id, &work.change_id, &work.subscription_id);
        Ok(read::get(dynamo, table, &pk, &sk).await?.is_some())
    }

    /// The subscription's last change id in change order (any status), if any.
    pub async fn last_change(
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        subscription_id: &SubscriptionId,
    ) -> Result<Option<ChangeId>, StoreError> {
        neighbour(dynamo, table, subscription_id, None).await
    }

    /// The subscription's change immediately before `change_id` in change order, if any.
    pub async fn change_before(
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        subscription_id: &SubscriptionId,
        change_id: &ChangeId,
    ) -> Result<Option<ChangeId>, StoreError> {
        neighbour(dynamo, table, subscription_id, Some(change_id)).await
    }

    async fn neighbour(
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        subscription_id: &SubscriptionId,
        before: Option<&ChangeId>,
    ) -> Result<Option<ChangeId>, StoreError> {
        let range = SubscriptionRange {
            subscription_id,
            after: None,
            upper: before.map(Upper::Before),
            forward: false,
            listing: None,
        };
        let (entries, _) = entries(dynamo, table, &range, None, 1).await?;
        Ok(entries.first().and_then(sort_of).map(ChangeId::from_stored))
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::domain::delivery_method::DeliveryMethod;
        use crate::domain::integration_delivery::operator_restart;
        use crate::ids::id;
        use std::collections::HashMap;

        /// A failed-looking delivery on the attention and subscription listings, with an expiry.
        fn delivery(status: DeliveryStatus, method: DeliveryMethod) -> Delivery {
            Delivery {
                method,
                not_before: None,
                last_error: Some("boom".into()),
                last_http_status: Some(500),
                expires_at: Some(99),
                list_key: Some("ATTENTION#acct".into()),
                list_sort: Some("x".into()),
                sub_key: Some("sub1".into()),
                sub_sort: Some("01C".into()),
                ..crate::store::delivery::test_delivery(status, 3)
            }
        }

        use crate::store::update::expect_update as updated;
        use aws_sdk_dynamodb::types::Update;

        fn restart_of(d: &Delivery, job: Option<&ReplayJobId>) -> Update {
            let r = Restart {
                delivery: d,
                movement: operator_restart(d.status).unwrap(),
                operator: "ops",
                replay_job: job,
            };
            updated(restart("t", &r, Duration::from_secs(300), Timestamp(10_000)).unwrap())
        }

        #[test]
        fn a_restart_of_a_push_delivery_resets_it_and_puts_it_back_on_the_due_index() {
            let d = delivery(DeliveryStatus::Dead, DeliveryMethod::Webhook);
            let u = restart_of(&d, None);
            let expression = u.update_expression();
            assert!(expression.contains("attempts = :zero"));
            assert!(expression.contains("restarts = if_not_exists(restarts, :zero) + :one"));
            assert!(expression.contains("due_shard = :shard, due_at = :due"));
            assert!(expression.ends_with(
                "REMOVE lease_until, lease_token, last_error, last_http_status, list_key, \
                 list_sort, delivered_at, expires_at"
            ));
            assert!(!expression.contains("attempt_log"), "the history is kept");
            let v = u.expression_attribute_values().unwrap();
            assert_eq!(v[":due"], n(310_000));
            assert_eq!(v[":to"], s("pending"));
            assert_eq!(v[":operator"], s("ops"));
            assert!(
                v.values().any(|x| x == &s("dead")),
                "the status read is the condition"
            );
            assert!(!u.condition_expression().unwrap().contains("replay_job"));
        }

        #[test]
        fn a_restart_of_a_pull_delivery_leaves_the_due_index_and_a_replay_restarts_once() {
            let d = delivery(DeliveryStatus::Delivered, DeliveryMethod::Poll);
            let u = restart_of(&d, Some(&id("job1")));
            let expression = u.update_expression();
            assert!(expression.ends_with("expires_at, due_shard, due_at"));
            assert!(expression.contains("replay_job = :job"));
            assert!(u
                .condition_expression()
                .unwrap()
                .ends_with("AND (attribute_not_exists(replay_job) OR replay_job <> :job)"));
            assert_eq!(u.expression_attribute_values().unwrap()[":job"], s("job1"));
            assert_eq!(u.key()["sk"].as_s().unwrap(), "DLV#sub1");
        }

        #[test]
        fn a_cursor_covers_only_a_pending_unleased_delivery_visible_at_its_horizon() {
            let d = delivery(DeliveryStatus::Pending, DeliveryMethod::Poll);
            let u = updated(
                cover_by_cursor("t", &d, Timestamp(5_000), &id("01D"), Timestamp(6_000))
                    .unwrap()
                    .unwrap(),
            );
            assert!(u
                .update_expression()
                .starts_with("SET #status = :delivered"));
            assert!(u
                .update_expression()
                .ends_with("REMOVE due_at, due_shard, not_before"));
            let condition = u.condition_expression().unwrap();
            assert!(condition.contains("created_at <= :horizon"));
            assert!(condition.contains("restarted_at <= :horizon"));
            assert!(condition.ends_with("lease_until <= :now)"));
            let v = u.expression_attribute_values().unwrap();
            assert_eq!(v[":horizon"], n(5_000));
            assert_eq!(v[":cursor"], s("01D"));
            let dead = delivery(DeliveryStatus::Dead, DeliveryMethod::Poll);
            assert!(
                cover_by_cursor("t", &dead, Timestamp(5_000), &id("01D"), Timestamp(6_000))
                    .unwrap()
                    .is_none()
            );
        }

        #[test]
        fn a_range_query_names_its_bounds_on_the_index() {
            let (sub, lo, hi): (SubscriptionId, ChangeId, ChangeId) =
                (id("sub1"), id("01A"), id("01F"));
            let range = |after, upper, forward| SubscriptionRange {
                subscription_id: &sub,
                after,
                upper,
                forward,
                listing: None,
            };
            let q = range_query(
                "t",
                &range(Some(&lo), Some(Upper::Before(&hi)), true),
                None,
                10,
            );
            assert_eq!(q.index.as_deref(), Some(by_subscription::INDEX));
            assert_eq!(
                q.key_condition,
                "#sk_sub = :sub AND #sort BETWEEN :lo AND :hi"
            );
            assert_eq!(q.expr.names["#sort"], by_subscription::SORT);
            assert!(!q.backwards);
            assert_eq!(q.limit, Some(10));
            let q = range_query("t", &range(None, Some(Upper::Through(&hi)), false), None, 1);
            assert_eq!(q.key_condition, "#sk_sub = :sub AND #sort <= :hi");
            assert!(q.backwards);
            let q = range_query("t", &range(Some(&lo), None, true), None, 1);
            assert_eq!(q.key_condition, "#sk_sub = :sub AND #sort > :lo");
            let q = range_query("t", &range(None, None, true), None, 1);
            assert_eq!(q.key_condition, "#sk_sub = :sub");
            assert!(!q.expr.names.contains_key("#sort"));
            // A listing page's last evaluated key names its change by its listing position.
            let listed = Item::from([(
                listing::SORT.to_string(),
                s(keys::time_sort(Timestamp(7), "01B")),
            )]);
            assert_eq!(sort_of(&listed), Some("01B"));
            let entry = |sort: &str| Item::from([(by_subscription::SORT.to_string(), s(sort))]);
            let r = range(Some(&lo), Some(Upper::Before(&hi)), true);
            assert!(excluded(&r, &entry("01A")) && excluded(&r, &entry("01F")));
            assert!(!excluded(&r, &entry("01C")));
            let through = range(None, Some(Upper::Through(&hi)), true);
            assert!(!excluded(&through, &entry("01F")), "Through is inclusive");
        }

        fn stored(status: &str, occurred: i64, created: i64, restarted: Option<i64>) -> Item {
            let num = |v: i64| n(v);
            let mut item: Item = HashMap::from([
                ("account_id".to_string(), s("acc_1")),
                ("status".to_string(), s(status)),
                ("occurred_at".to_string(), num(occurred)),
                ("created_at".to_string(), num(created)),
            ]);
            if let Some(r) = restarted {
                item.insert("restarted_at".into(), num(r));
            }
            item
        }

        #[test]
        fn a_filter_keeps_only_its_account_statuses_window_and_horizon() {
            let item = stored("pending", 100, 200, None);
            assert!(Filter::account(&id("acc_1")).admits(&item));
            assert!(
                !Filter::account(&id("acc_2")).admits(&item),
                "another account's item"
            );
            let statuses = |st: Vec<DeliveryStatus>| Filter {
                statuses: st,
                ..Filter::account(&id("acc_1"))
            };
            assert!(statuses(vec![DeliveryStatus::Dead, DeliveryStatus::Pending]).admits(&item));
            assert!(!statuses(vec![DeliveryStatus::Delivered]).admits(&item));
            let window = |from, before| Filter {
                occurred_from: from,
                occurred_before: before,
                ..Filter::account(&id("acc_1"))
            };
            assert!(window(Some(Timestamp(100)), Some(Timestamp(101))).admits(&item));
            assert!(
                !window(Some(Timestamp(101)), None).admits(&item),
                "before the window"
            );
            assert!(
                !window(None, Some(Timestamp(100))).admits(&item),
                "the end is exclusive"
            );
            let horizon = |h| Filter {
                written_through: Some(Timestamp(h)),
                ..Filter::account(&id("acc_1"))
            };
            assert!(horizon(200).admits(&item));
            assert!(!horizon(199).admits(&item), "created after the horizon");
            let restarted = stored("pending", 100, 200, Some(300));
            assert!(horizon(300).admits(&restarted));
            assert!(
                !horizon(299).admits(&restarted),
                "restarted after the horizon"
            );
            let mut no_account = item.clone();
            no_account.remove("account_id");
            assert!(!Filter::account(&id("acc_1")).admits(&no_account));
        }

        #[test]
        fn marks_default_when_absent() {
            let mut item = crate::store::delivery::new_item(
                &delivery(DeliveryStatus::Pending, DeliveryMethod::Webhook),
                Timestamp(1),
            )
            .unwrap();
            for mark in ["restarts", "restarted_at", "delivered_at", "replay_job"] {
                item.remove(mark);
            }
            let d = Delivery::from_item(item).unwrap();
            assert_eq!(d.restarts, 0);
            assert_eq!(d.delivered_at, None);
        }
    }
}
