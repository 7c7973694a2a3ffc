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
use crate::store::delivery::AttemptRecord;
use crate::store::delivery::Delivery;
use crate::store::event::EventRecord;
use crate::store::event_partition::read_partition;
use crate::store::keys;
use crate::store::listing::ListingError;
use crate::store::subscription::Subscription;
use crate::store::StoreError;
use serde::Serialize;

/// Everything the event monitor's reads can fail with.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the cursor is not one this listing issued")]
    BadCursor,
}

impl From<ListingError> for MonitorError {
    fn from(e: ListingError) -> Self {
        match e {
            ListingError::Store(e) => MonitorError::Store(e),
            ListingError::BadCursor => MonitorError::BadCursor,
        }
    }
}

pub use crate::store::delivery::attention_deliveries;
pub use crate::store::event::{list_events, EventQuery};
pub use crate::store::listing::Page;

pub use crate::store::keys::{attention_list_key, events_list_key};

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
