//! Operator actions and the adapters' pull cursor on DynamoDB (seed 002 hops 6 and 7; seed 000's
//! cursor and operator transitions). The rules are in the pure core
//! ([`crate::domain::integration_delivery`], [`crate::domain::pull_cursor`],
//! [`crate::domain::replay`], [`crate::domain::subscription`]); this module reads the facts they
//! need, applies their decisions with conditional writes and records who did what, when and why.
//!
//! * [`retry`] — an operator restarts one delivery: `dead | failed | retrying | delivered →
//!   pending`, attempts and errors reset, the attempt history kept, dispatch nudged.
//! * [`replay`] — an operator replays a window (≤ 7 days) of a subscription's existing delivery
//!   records: a tracked job that walks the subscription's deliveries in chunks and saves its
//!   position after each, so a run cut short is resumed without restarting anything twice.
//! * [`resume`] — an operator resumes a paused subscription (dead count reset; changes skipped
//!   while paused stay skipped: they have no delivery record).
//! * [`pull`] — an adapter reads its subscription's pending changes and acknowledges them with a
//!   cursor.
//! * [`history`] — a subscription's deliveries by status and time, a delivery's attempts.
//! * [`audit`] — the audit history every operator action writes, in the same transaction as the
//!   action where the action is one write.
//!
//! # Restarting a delivery (retry and replay)
//!
//! One conditional update ([`restart`]) whose condition is `DELIVERY_LIFECYCLE.expect(from,
//! trigger, pending)` — the status read must still be the stored one, so a worker's or an
//! adapter's concurrent move is never overwritten. It sets `pending`, `attempts = 0`,
//! `not_before = now`, removes `last_error`/`last_http_status`, the needs-attention listing and
//! any retention expiry, and removes the worker's lease: a worker still running an attempt then
//! fails its outcome write (conditional on its lease token) and changes nothing. The attempt log
//! is kept; the next attempt is number 1 again ([`history::attempt_runs`] numbers the runs).
//! A push delivery also goes back on the sharded `due` index; the dispatcher's stream handler
//! publishes it as it enters `pending`, and the sweep publishes it again if that message is lost.
//! Finally the event monitor reopens the change's event ([`crate::monitor::reopen_event`]).
//!
//! A pull (`poll`) delivery restarted behind the subscription's acknowledged cursor would never be
//! read again, so the cursor first moves back to just before it and the subscription's pull epoch
//! increments, which makes every cursor read before the restart stale (see
//! [`crate::domain::pull_cursor`]).

pub mod audit;
pub mod history;
pub mod pull;
pub mod replay;
pub mod restart;
pub mod resume;
pub mod retry;

use crate::api::ApiError;
use crate::clock::Clock;
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::lifecycle::TransitionError;
use crate::domain::time::Timestamp;
use crate::store::expr::{s, Expr};
use crate::store::keys;
use crate::store::models::{DeliveryRecord, Integration, Subscription};
use crate::store::{from_item, Item, StoreError};
use aws_sdk_dynamodb::types::AttributeValue;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The index of a subscription's deliveries in change order.
pub const BY_SUBSCRIPTION: &str = "by_subscription";
/// Longest `reason` an operator gives.
pub const MAX_REASON_CHARS: usize = 1000;
/// Concurrent conditional writes of one request (cursor coverage, a replay chunk).
pub const WRITE_CONCURRENCY: usize = 16;

/// Why an operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// No such resource in the account (another account's is "not found" too).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The request conflicts with the resource's current state.
    #[error("{0}")]
    Conflict(String),
    /// A request value is not acceptable.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A decision the lifecycle table refuses where none should be (a bug).
    #[error("invalid move: {0}")]
    Transition(#[from] TransitionError),
}

impl OpsError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        OpsError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
    pub fn dynamo(e: impl std::fmt::Display + std::fmt::Debug) -> Self {
        OpsError::Store(StoreError::dynamo(e))
    }
}

impl From<OpsError> for ApiError {
    fn from(e: OpsError) -> Self {
        match e {
            OpsError::NotFound(what) => ApiError::not_found(what),
            OpsError::Conflict(detail) => ApiError::conflict(detail),
            OpsError::Invalid { field, message } => ApiError::field(field, message),
            OpsError::Store(e) => e.into(),
            OpsError::Transition(e) => ApiError::internal(e.to_string()),
        }
    }
}

/// What every operation works with: the delivery table and the injected clock.
#[derive(Clone, Copy)]
pub struct Ops<'a> {
    pub dynamo: &'a aws_sdk_dynamodb::Client,
    pub table: &'a str,
    pub clock: &'a dyn Clock,
}

impl<'a> Ops<'a> {
    pub fn new(dynamo: &'a aws_sdk_dynamodb::Client, table: &'a str, clock: &'a dyn Clock) -> Self {
        Ops {
            dynamo,
            table,
            clock,
        }
    }

    /// The operations of an API request.
    pub fn of(state: &'a crate::api::ApiState) -> Self {
        Ops::new(
            &state.clients.dynamo,
            &state.config.delivery_table,
            state.clock.as_ref(),
        )
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// A consistent read of one item.
    pub async fn get_item(&self, pk: &str, sk: &str) -> Result<Option<Item>, OpsError> {
        Ok(self
            .dynamo
            .get_item()
            .table_name(self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(OpsError::dynamo)?
            .item)
    }

    /// The account's subscription, or "subscription not found".
    pub async fn subscription(
        &self,
        account_id: &str,
        subscription_id: &str,
    ) -> Result<StoredSubscription, OpsError> {
        let item = self
            .get_item(
                &keys::account_pk(account_id),
                &keys::subscription_sk(subscription_id),
            )
            .await?
            .ok_or(OpsError::NotFound("subscription"))?;
        Ok(StoredSubscription::from_item(item)?)
    }

    /// The account's integration, if it exists.
    pub async fn integration(
        &self,
        account_id: &str,
        integration_id: &str,
    ) -> Result<Option<Integration>, OpsError> {
        match self
            .get_item(
                &keys::account_pk(account_id),
                &keys::integration_sk(integration_id),
            )
            .await?
        {
            Some(item) => Ok(Some(from_item(item)?)),
            None => Ok(None),
        }
    }

    /// The delivery of `change_id` to `subscription_id` in the account, or "delivery not found".
    pub async fn delivery(
        &self,
        account_id: &str,
        subscription_id: &str,
        change_id: &str,
    ) -> Result<StoredDelivery, OpsError> {
        let item = self
            .get_item(
                &keys::event_pk(account_id, change_id),
                &keys::delivery_sk(subscription_id),
            )
            .await?
            .ok_or(OpsError::NotFound("delivery"))?;
        Ok(StoredDelivery::from_item(item)?)
    }

    /// One page of a subscription's deliveries on the `by_subscription` index. The index holds
    /// keys only (so that claims, outcomes and acknowledgements, which change other attributes,
    /// do not also write the index): with a filter, the page's items are read from the table and
    /// filtered here; without one, the page holds the index entries (keys and `sub_sort`).
    /// As with a DynamoDB filter, `limit` counts the entries evaluated, not the items kept.
    pub async fn query_index(
        &self,
        q: &IndexQuery<'_>,
        start: Option<HashMap<String, AttributeValue>>,
        limit: i32,
    ) -> Result<IndexPage, OpsError> {
        let mut e = Expr::new()
            .name("#sk_sub", "sub_key")
            .value(":sub", s(q.subscription_id));
        if q.after.is_some() || q.upper.is_some() {
            e = e.name("#sort", "sub_sort");
        }
        let mut key = "#sk_sub = :sub".to_string();
        match (&q.after, &q.upper) {
            (Some(lo), Some(Upper::Through(hi))) | (Some(lo), Some(Upper::Before(hi))) => {
                e = e.value(":lo", s(*lo)).value(":hi", s(*hi));
                key.push_str(" AND #sort BETWEEN :lo AND :hi");
            }
            (Some(lo), None) => {
                e = e.value(":lo", s(*lo));
                key.push_str(" AND #sort > :lo");
            }
            (None, Some(Upper::Through(hi))) => {
                e = e.value(":hi", s(*hi));
                key.push_str(" AND #sort <= :hi");
            }
            (None, Some(Upper::Before(hi))) => {
                e = e.value(":hi", s(*hi));
                key.push_str(" AND #sort < :hi");
            }
            (None, None) => {}
        }
        let out = self
            .dynamo
            .query()
            .table_name(self.table)
            .index_name(BY_SUBSCRIPTION)
            .key_condition_expression(key)
            .scan_index_forward(q.forward)
            .limit(limit)
            .set_exclusive_start_key(start)
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .send()
            .await
            .map_err(OpsError::dynamo)?;
        let entries: Vec<Item> = out
            .items
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|item| {
                let sort = item.get("sub_sort").and_then(|v| v.as_s().ok());
                // BETWEEN is inclusive at both ends; the bounds here are exclusive below and
                // exclusive above for `Before`.
                let below = q.after.is_some_and(|lo| sort.map(String::as_str) == Some(lo));
                let above = matches!(q.upper, Some(Upper::Before(hi)) if sort.map(String::as_str) == Some(hi));
                !(below || above)
            })
            .collect();
        let items = match &q.filter {
            None => entries,
            Some(filter) => crate::store::read::items_in_order(self.dynamo, self.table, &entries)
                .await?
                .into_iter()
                .filter(|item| filter.admits(item))
                .collect(),
        };
        let last_sort = out
            .last_evaluated_key
            .as_ref()
            .and_then(|k| k.get("sub_sort"))
            .and_then(|v| v.as_s().ok())
            .cloned();
        Ok(IndexPage {
            items,
            last_sort,
            next_start: out.last_evaluated_key,
        })
    }

    /// The subscription's last change id in change order (any status), if any.
    pub async fn last_change(&self, subscription_id: &str) -> Result<Option<String>, OpsError> {
        self.neighbour(subscription_id, None).await
    }

    /// The subscription's change immediately before `change_id` in change order, if any.
    pub async fn change_before(
        &self,
        subscription_id: &str,
        change_id: &str,
    ) -> Result<Option<String>, OpsError> {
        self.neighbour(subscription_id, Some(change_id)).await
    }

    async fn neighbour(
        &self,
        subscription_id: &str,
        before: Option<&str>,
    ) -> Result<Option<String>, OpsError> {
        let q = IndexQuery {
            subscription_id,
            after: None,
            upper: before.map(Upper::Before),
            forward: false,
            filter: None,
        };
        let page = self.query_index(&q, None, 1).await?;
        Ok(page
            .items
            .first()
            .and_then(|i| i.get("sub_sort"))
            .and_then(|v| v.as_s().ok())
            .cloned())
    }
}

/// The upper bound of an index query.
#[derive(Debug, Clone, Copy)]
pub enum Upper<'a> {
    /// `sub_sort <= bound`.
    Through(&'a str),
    /// `sub_sort < bound`.
    Before(&'a str),
}

/// A query of one subscription's deliveries on the `by_subscription` index.
#[derive(Debug, Clone)]
pub struct IndexQuery<'a> {
    pub subscription_id: &'a str,
    /// Exclusive lower bound of `sub_sort` (the change id).
    pub after: Option<&'a str>,
    pub upper: Option<Upper<'a>>,
    /// Change order (`true`) or newest first.
    pub forward: bool,
    pub filter: Option<Filter>,
}

/// Which of a subscription's deliveries an index query keeps (see [`Ops::query_index`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// The account the caller acts for: another account's item is never returned.
    pub account_id: String,
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
    pub fn account(account_id: &str) -> Self {
        Filter {
            account_id: account_id.to_string(),
            statuses: Vec::new(),
            occurred_from: None,
            occurred_before: None,
            written_through: None,
        }
    }

    pub fn admits(&self, item: &Item) -> bool {
        let text = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).map(String::as_str);
        let millis = |k: &str| {
            item.get(k)
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<i64>().ok())
        };
        let status_ok = self.statuses.is_empty()
            || text("status").is_some_and(|st| self.statuses.iter().any(|w| w.to_string() == st));
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

/// One page of an index query.
#[derive(Debug, Clone)]
pub struct IndexPage {
    pub items: Vec<Item>,
    /// The `sub_sort` of the last item evaluated, when the query has more to read.
    pub last_sort: Option<String>,
    /// Where the next page starts (`None`: the query is done).
    pub next_start: Option<HashMap<String, AttributeValue>>,
}

/// Attributes that operator restarts and the pull cursor add to a delivery item, beside its
/// [`DeliveryRecord`] fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeliveryMarks {
    /// Operator restarts (retry or replay) of this delivery.
    #[serde(default)]
    pub restarts: u32,
    #[serde(default)]
    pub restarted_at: Option<Timestamp>,
    #[serde(default)]
    pub restarted_by: Option<String>,
    /// The replay job that last restarted it.
    #[serde(default)]
    pub replay_job: Option<String>,
    /// When it was last delivered (a push acknowledgement or a cursor).
    #[serde(default)]
    pub delivered_at: Option<Timestamp>,
}

/// A delivery item read whole: the record and the marks.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredDelivery {
    pub record: DeliveryRecord,
    pub marks: DeliveryMarks,
}

impl StoredDelivery {
    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        let marks: DeliveryMarks = from_item(item.clone())?;
        Ok(StoredDelivery {
            record: from_item(item)?,
            marks,
        })
    }

    pub fn status(&self) -> DeliveryStatus {
        self.record.status
    }
}

/// Attributes the pull cursor and operator resumes add to a subscription item.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionMarks {
    /// The acknowledged position: the last change id the adapter's cursor covered.
    #[serde(default)]
    pub pull_cursor: Option<String>,
    #[serde(default)]
    pub pull_cursor_at: Option<Timestamp>,
    /// Incremented by every operator restart of a pull delivery (see `domain::pull_cursor`).
    #[serde(default)]
    pub pull_epoch: u32,
    #[serde(default)]
    pub pull_rewound_at: Option<Timestamp>,
    #[serde(default)]
    pub resumed_at: Option<Timestamp>,
    #[serde(default)]
    pub resumed_by: Option<String>,
}

/// A subscription item read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSubscription {
    pub subscription: Subscription,
    pub marks: SubscriptionMarks,
}

impl StoredSubscription {
    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        let marks: SubscriptionMarks = from_item(item.clone())?;
        Ok(StoredSubscription {
            subscription: from_item(item)?,
            marks,
        })
    }

    pub fn id(&self) -> &str {
        &self.subscription.subscription_id
    }

    pub fn acknowledged(&self) -> crate::domain::pull_cursor::Acknowledged {
        crate::domain::pull_cursor::Acknowledged {
            epoch: self.marks.pull_epoch,
            change_id: self.marks.pull_cursor.clone(),
        }
    }
}

/// List cursors of the operator routes are opaque: base64url of the position.
pub fn encode_list_cursor(position: &str) -> String {
    URL_SAFE_NO_PAD.encode(position.as_bytes())
}

/// The position of a list cursor, or `None` when it is not one this API issued.
pub fn decode_list_cursor(cursor: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor.trim()).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    (!text.is_empty() && text.len() <= 600 && !text.chars().any(char::is_control)).then_some(text)
}

/// Builds an update from its parts (for single writes and transactions alike).
pub(crate) fn build_update(
    table: &str,
    pk: &str,
    sk: &str,
    expression: String,
    condition: String,
    e: &Expr,
) -> Result<aws_sdk_dynamodb::types::Update, OpsError> {
    aws_sdk_dynamodb::types::Update::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(sk))
        .update_expression(expression)
        .condition_expression(condition)
        .set_expression_attribute_names(e.names_opt())
        .set_expression_attribute_values(e.values_opt())
        .build()
        .map_err(|err| OpsError::Store(StoreError::Dynamo(err.to_string())))
}

/// Sends one update; `Ok(false)` when its condition failed.
pub(crate) async fn send_update(
    ops: &Ops<'_>,
    u: aws_sdk_dynamodb::types::Update,
) -> Result<bool, OpsError> {
    let result = ops
        .dynamo
        .update_item()
        .table_name(u.table_name())
        .set_key(Some(u.key().clone()))
        .update_expression(u.update_expression())
        .set_condition_expression(u.condition_expression().map(str::to_string))
        .set_expression_attribute_names(u.expression_attribute_names().cloned())
        .set_expression_attribute_values(u.expression_attribute_values().cloned())
        .send()
        .await;
    match result {
        Ok(_) => Ok(true),
        Err(e) if crate::store::expr::is_condition_failure(&e) => Ok(false),
        Err(e) => Err(OpsError::dynamo(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_cursors_round_trip_and_refuse_nonsense() {
        let c = encode_list_cursor("000001700000000#01abc");
        assert!(!c.contains('#'));
        assert_eq!(
            decode_list_cursor(&c).as_deref(),
            Some("000001700000000#01abc")
        );
        assert_eq!(decode_list_cursor("!!"), None);
        assert_eq!(decode_list_cursor(""), None);
    }

    #[test]
    fn marks_default_when_absent() {
        let item: Item = HashMap::from([("pk".to_string(), s("x"))]);
        let marks: DeliveryMarks = from_item(item.clone()).unwrap();
        assert_eq!(marks, DeliveryMarks::default());
        let marks: SubscriptionMarks = from_item(item).unwrap();
        assert_eq!(marks.pull_epoch, 0);
    }

    fn delivery(status: &str, occurred: i64, created: i64, restarted: Option<i64>) -> Item {
        let num = |v: i64| AttributeValue::N(v.to_string());
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
        let item = delivery("pending", 100, 200, None);
        assert!(Filter::account("acc_1").admits(&item));
        assert!(
            !Filter::account("acc_2").admits(&item),
            "another account's item"
        );
        let statuses = |st: Vec<DeliveryStatus>| Filter {
            statuses: st,
            ..Filter::account("acc_1")
        };
        assert!(statuses(vec![DeliveryStatus::Dead, DeliveryStatus::Pending]).admits(&item));
        assert!(!statuses(vec![DeliveryStatus::Delivered]).admits(&item));
        let window = |from, before| Filter {
            occurred_from: from,
            occurred_before: before,
            ..Filter::account("acc_1")
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
            ..Filter::account("acc_1")
        };
        assert!(horizon(200).admits(&item));
        assert!(!horizon(199).admits(&item), "created after the horizon");
        let restarted = delivery("pending", 100, 200, Some(300));
        assert!(horizon(300).admits(&restarted));
        assert!(
            !horizon(299).admits(&restarted),
            "restarted after the horizon"
        );
        let mut no_account = item.clone();
        no_account.remove("account_id");
        assert!(!Filter::account("acc_1").admits(&no_account));
    }
}
