//! The event monitor's reads, always scoped to one account and always through the retention read
//! filter:
//!
//! * [`list_events`] — an account's events by creation time (newest first by default), optionally
//!   only some statuses and a `[from, to)` window, a page at a time behind an opaque cursor. Reads
//!   the `listing` index (`EVENTS#{account}`, sorted by `time_sort(created_at, change_id)`).
//! * [`event_with_deliveries`] — one event and its delivery log (one consistent query of the
//!   event's partition).
//! * [`attention_deliveries`] and [`paused_subscriptions`] — "needs attention": deliveries that are
//!   `dead` or `failed` (the worker puts them on `ATTENTION#{account}` of the `listing` index) and
//!   subscriptions the system paused.
//!
//! The views ([`EventSummary`], [`DeliveryLogEntry`]) show the Delivery log's words next to the
//! stored statuses: a delivery shows its stored `status` and its `transmit_status`
//! (`docs/lifecycles.md#delivery-log-words`).

use crate::domain::event::{EventStatus, EventTrigger, InternalStatus};
use crate::domain::integration_delivery::{DeliveryStatus, TransmitStatus};
use crate::domain::lifecycle::Term;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, DeliveryId, IntegrationId, SubscriptionId};
use crate::store;
use crate::store::attrs::listing;
use crate::store::delivery::AttemptRecord;
use crate::store::delivery::Delivery;
use crate::store::event::EventRecord;
use crate::store::event_partition::read_partition;
use crate::store::expr::{s, Expr};
use crate::store::keys;
use crate::store::subscription::Subscription;
use crate::store::{read, Item, StoreError};
use aws_sdk_dynamodb::types::AttributeValue;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Everything the event monitor's reads can fail with.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the cursor is not one this listing issued")]
    BadCursor,
}

/// The per-account listing index (template.yaml).
pub const LISTING_INDEX: &str = crate::store::attrs::listing::INDEX;
/// Index pages read for one listing page before it is returned short, with a cursor to go on.
pub const MAX_ROUNDS: usize = 10;
/// Items read per index page.
const FETCH: i32 = 100;

pub use crate::store::keys::{attention_list_key, events_list_key};

/// A position in one of an account's listings. Opaque to callers: base64url of its JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Which listing (`events`, `attention`): a cursor is refused by the others.
    #[serde(rename = "l")]
    list: String,
    #[serde(rename = "s")]
    list_sort: String,
    #[serde(rename = "p")]
    pk: String,
    #[serde(rename = "k")]
    sk: String,
}

impl Cursor {
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    /// Decodes a cursor of listing `list` for `account_id`; anything else is [`MonitorError::BadCursor`].
    pub fn decode(text: &str, list: &str, account_id: &AccountId) -> Result<Cursor, MonitorError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(text.trim())
            .map_err(|_| MonitorError::BadCursor)?;
        let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| MonitorError::BadCursor)?;
        let own_partition = keys::event_pk_prefix(account_id);
        if cursor.list != list || !cursor.pk.starts_with(&own_partition) {
            return Err(MonitorError::BadCursor);
        }
        Ok(cursor)
    }

    fn of_item(list: &str, item: &Item) -> Option<Cursor> {
        let get = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
        Some(Cursor {
            list: list.to_owned(),
            list_sort: get("list_sort")?,
            pk: get("pk")?,
            sk: get("sk")?,
        })
    }

    fn start_key(&self, list_key: &str) -> HashMap<String, AttributeValue> {
        HashMap::from([
            ("list_key".to_string(), s(list_key)),
            ("list_sort".to_string(), s(&self.list_sort)),
            ("pk".to_string(), s(&self.pk)),
            ("sk".to_string(), s(&self.sk)),
        ])
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass back to read on; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// What [`list_events`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventQuery {
    /// Only these statuses (empty: all).
    pub statuses: Vec<EventStatus>,
    /// Created at or after.
    pub from: Option<Timestamp>,
    /// Created before.
    pub to: Option<Timestamp>,
    /// Oldest first instead of newest first.
    pub oldest_first: bool,
    pub limit: u32,
    pub cursor: Option<String>,
    /// Only events of this event code (the console's filter; `None`: all).
    pub event_code: Option<String>,
    /// Only events of this internal status (the console's filter; `None`: all).
    pub internal_status: Option<InternalStatus>,
}

struct Listing<'a> {
    list: &'static str,
    list_key: String,
    /// `list_sort` bounds: `[lower, upper)`.
    lower: Option<String>,
    upper: Option<String>,
    forward: bool,
    limit: u32,
    cursor: Option<Cursor>,
    /// Which of the listed items the page shows.
    keep: &'a (dyn Fn(&Item) -> bool + Sync),
}

/// Reads one page of a listing: index pages until `limit` items passed `keep`, the index is
/// exhausted, or [`MAX_ROUNDS`] pages were read (then the page comes back short, with a cursor).
/// The index holds keys only (a status change of a listed item would otherwise bill an index
/// write): each index page's items are read from the table (`store::read`) and filtered here.
async fn listing_page(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    l: Listing<'_>,
) -> Result<Page<Item>, StoreError> {
    let mut key_condition = format!("{} = :lk", listing::KEY);
    let mut e = Expr::new().value(":lk", s(&l.list_key));
    match (&l.lower, &l.upper) {
        (Some(lo), Some(hi)) => {
            key_condition.push_str(&format!(" AND {} BETWEEN :lo AND :hi", listing::SORT));
            e = e.value(":lo", s(lo)).value(":hi", s(hi));
        }
        (Some(lo), None) => {
            key_condition.push_str(&format!(" AND {} >= :lo", listing::SORT));
            e = e.value(":lo", s(lo));
        }
        (None, Some(hi)) => {
            key_condition.push_str(&format!(" AND {} < :hi", listing::SORT));
            e = e.value(":hi", s(hi));
        }
        (None, None) => {}
    }
    let mut q = read::Query {
        table: table.into(),
        index: Some(listing::INDEX.into()),
        key_condition,
        expr: e,
        limit: Some(FETCH),
        start: l.cursor.as_ref().map(|c| c.start_key(&l.list_key)),
        backwards: !l.forward,
        ..Default::default()
    };
    let limit = l.limit.max(1) as usize;
    let mut out: Vec<Item> = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let page = read::query_page(dynamo, &q).await?;
        for item in read::items_in_order(dynamo, table, &page.items).await? {
            // BETWEEN is inclusive; the upper bound is not (it never equals a stored key).
            let sort = item.get("list_sort").and_then(|v| v.as_s().ok());
            if l.upper.as_ref().is_some_and(|hi| sort >= Some(hi)) || !(l.keep)(&item) {
                continue;
            }
            out.push(item);
            if out.len() == limit {
                let next = out
                    .last()
                    .and_then(|i| Cursor::of_item(l.list, i))
                    .map(|c| c.encode());
                return Ok(Page {
                    items: out,
                    next_cursor: next,
                });
            }
        }
        match page.next {
            Some(k) => q.start = Some(k),
            None => {
                return Ok(Page {
                    items: out,
                    next_cursor: None,
                })
            }
        }
    }
    let next = q.start.and_then(|k| {
        let get = |name: &str| k.get(name).and_then(|v| v.as_s().ok()).cloned();
        Some(
            Cursor {
                list: l.list.to_owned(),
                list_sort: get("list_sort")?,
                pk: get("pk")?,
                sk: get("sk")?,
            }
            .encode(),
        )
    });
    Ok(Page {
        items: out,
        next_cursor: next,
    })
}

/// An account's events by creation time (see [`EventQuery`]); expired events are never listed.
pub async fn list_events(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    q: &EventQuery,
    now: Timestamp,
) -> Result<Page<EventRecord>, MonitorError> {
    let cursor = q
        .cursor
        .as_deref()
        .map(|c| Cursor::decode(c, "events", account_id))
        .transpose()?;
    let keep = move |item: &Item| {
        item.get("kind")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str)
            == Some("event")
            && EventRecord::from_item(item.clone()).is_ok_and(|e| {
                e.visible(now)
                    && (q.statuses.is_empty() || q.statuses.contains(&e.status()))
                    && q.event_code.as_ref().is_none_or(|c| *c == e.event_code)
                    && q.internal_status.is_none_or(|i| i == e.internal_status)
            })
    };
    let page = listing_page(
        dynamo,
        table,
        Listing {
            list: "events",
            list_key: events_list_key(account_id),
            lower: q.from.map(|t| keys::time_sort(t, "")),
            upper: q.to.map(|t| keys::time_sort(t, "")),
            forward: q.oldest_first,
            limit: q.limit,
            cursor,
            keep: &keep,
        },
    )
    .await?;
    Ok(Page {
        items: page
            .items
            .into_iter()
            .map(EventRecord::from_item)
            .collect::<Result<_, _>>()?,
        next_cursor: page.next_cursor,
    })
}

/// One of the account's events with its deliveries (in subscription order); `None` when there is
/// no such event in the account or it has expired.
pub async fn event_with_deliveries(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    change_id: &ChangeId,
    now: Timestamp,
) -> Result<Option<(EventRecord, Vec<Delivery>)>, MonitorError> {
    let partition = read_partition(dynamo, table, &keys::event_pk(account_id, change_id)).await?;
    match partition.event {
        Some(event) if &event.account_id == account_id && event.visible(now) => {
            let deliveries = partition
                .deliveries
                .into_iter()
                .filter(|d| d.visible(now))
                .collect();
            Ok(Some((event, deliveries)))
        }
        _ => Ok(None),
    }
}

/// The account's `dead` and `failed` deliveries, newest first.
pub async fn attention_deliveries(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    limit: u32,
    cursor: Option<&str>,
    now: Timestamp,
) -> Result<Page<Delivery>, MonitorError> {
    let cursor = cursor
        .map(|c| Cursor::decode(c, "attention", account_id))
        .transpose()?;
    let keep = move |item: &Item| {
        item.get("kind")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str)
            == Some("delivery")
            && Delivery::from_item(item.clone()).is_ok_and(|d| {
                d.visible(now) && matches!(d.status, DeliveryStatus::Dead | DeliveryStatus::Failed)
            })
    };
    let page = listing_page(
        dynamo,
        table,
        Listing {
            list: "attention",
            list_key: attention_list_key(account_id),
            lower: None,
            upper: None,
            forward: false,
            limit,
            cursor,
            keep: &keep,
        },
    )
    .await?;
    Ok(Page {
        items: page
            .items
            .into_iter()
            .map(Delivery::from_item)
            .collect::<Result<_, _>>()?,
        next_cursor: page.next_cursor,
    })
}

/// The account's paused subscriptions (one partition query; an account has few subscriptions).
pub async fn paused_subscriptions(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
) -> Result<Vec<Subscription>, MonitorError> {
    Ok(store::subscription::paused(dynamo, table, account_id).await?)
}

/// An event as the monitor shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EventSummary {
    /// The change id.
    pub id: ChangeId,
    pub account_id: AccountId,
    pub record_type: String,
    pub record_id: String,
    pub event_code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warehouse: Option<String>,
    pub event_status: EventStatus,
    /// The trigger of the last move, as worded in `docs/lifecycles.md#event-status` (`null`
    /// while `new`).
    pub status_reason: Option<&'static str>,
    pub internal_status: InternalStatus,
    /// Subscribers that took the event at ingest.
    pub subscribers: u32,
    pub occurred_at: String,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_changed_at: Option<String>,
    /// When it became final (sent, failed, skipped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalized_at: Option<String>,
    /// When retention deletes it (final events only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

impl EventSummary {
    pub fn new(e: &EventRecord, status_trigger: Option<EventTrigger>) -> Self {
        let r = e;
        EventSummary {
            id: r.change_id.clone(),
            account_id: r.account_id.clone(),
            record_type: r.record_type.clone(),
            record_id: r.record_id.clone(),
            event_code: r.event_code.clone(),
            warehouse: r.warehouse.clone(),
            event_status: r.event_status,
            status_reason: status_trigger.map(Term::text),
            internal_status: r.internal_status,
            subscribers: r.subscribers,
            occurred_at: r.occurred_at.to_rfc3339(),
            created_at: r.created_at.to_rfc3339(),
            status_changed_at: e.status_changed_at.map(Timestamp::to_rfc3339),
            finalized_at: e.finalized_at.map(Timestamp::to_rfc3339),
            expires_at: e
                .expires_at
                .map(|secs| crate::domain::retention::ttl_instant(secs).to_rfc3339()),
        }
    }
}

impl From<&EventRecord> for EventSummary {
    fn from(e: &EventRecord) -> Self {
        EventSummary::new(e, e.status_trigger)
    }
}

/// One line of the delivery log (the monitor's columns, with the stored delivery status beside
/// them).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeliveryLogEntry {
    pub delivery_id: DeliveryId,
    pub change_id: ChangeId,
    pub subscription_id: SubscriptionId,
    pub integration_id: IntegrationId,
    /// The subscriber's delivery method (`webhook`, `internal`, `poll`, or an unknown value).
    pub method: String,
    /// The stored status (`docs/lifecycles.md#integration-delivery`).
    pub status: DeliveryStatus,
    /// The Delivery log's word (`pending`, `processing`, `sent`, `failed`;
    /// `docs/lifecycles.md#delivery-log-words`); `null` for `skipped_filter`.
    pub transmit_status: Option<TransmitStatus>,
    pub attempts: u32,
    pub last_error: Option<String>,
    /// The HTTP code of the last webhook answer.
    pub http_code: Option<u16>,
    /// When the next try may run (waiting deliveries only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<String>,
    pub attempt_log: Vec<AttemptView>,
}

/// One attempt of a delivery's history.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AttemptView {
    pub number: u32,
    pub at: String,
    pub class: String,
    pub http_code: Option<u16>,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl From<&AttemptRecord> for AttemptView {
    fn from(a: &AttemptRecord) -> Self {
        AttemptView {
            number: a.number,
            at: a.at.to_rfc3339(),
            class: a.class.clone(),
            http_code: a.http_status,
            duration_ms: a.duration_ms,
            detail: a.detail.clone(),
        }
    }
}

impl DeliveryLogEntry {
    pub fn new(d: &Delivery, now: Timestamp) -> Self {
        let r = d;
        DeliveryLogEntry {
            delivery_id: r.delivery_id.clone(),
            change_id: r.change_id.clone(),
            subscription_id: r.subscription_id.clone(),
            integration_id: r.integration_id.clone(),
            method: r.method.as_str().to_owned(),
            status: r.status,
            transmit_status: d.transmit_status(now),
            attempts: r.attempts,
            last_error: r.last_error.clone(),
            http_code: r.last_http_status,
            next_attempt_at: r
                .status
                .is_open()
                .then_some(r.not_before)
                .flatten()
                .map(Timestamp::to_rfc3339),
            created_at: r.created_at.to_rfc3339(),
            updated_at: r.updated_at.to_rfc3339(),
            delivered_at: d.delivered_at.map(Timestamp::to_rfc3339),
            attempt_log: r.attempt_log.iter().map(AttemptView::from).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    #[test]
    fn cursors_round_trip_and_stay_in_their_account_and_listing() {
        let c = Cursor {
            list: "events".into(),
            list_sort: keys::time_sort(Timestamp(5), "c1"),
            pk: keys::event_pk(&id("a1"), &id("c1")),
            sk: keys::EVENT_SK.into(),
        };
        let text = c.encode();
        assert_eq!(Cursor::decode(&text, "events", &id("a1")).unwrap(), c);
        assert!(matches!(
            Cursor::decode(&text, "events", &id("a2")),
            Err(MonitorError::BadCursor)
        ));
        assert!(matches!(
            Cursor::decode(&text, "attention", &id("a1")),
            Err(MonitorError::BadCursor)
        ));
        for bad in ["", "!!!", "e30", &URL_SAFE_NO_PAD.encode("[1]")] {
            assert!(Cursor::decode(bad, "events", &id("a1")).is_err(), "{bad}");
        }
        // `a1` must not reach into `a10`'s partitions either.
        let other = Cursor {
            pk: keys::event_pk(&id("a10"), &id("c1")),
            ..c
        };
        assert!(Cursor::decode(&other.encode(), "events", &id("a1")).is_err());
    }
}
