//! The items of the delivery table as Rust types (read and written with `serde_dynamo`). Key
//! attributes are derived from the ids by [`super::keys`] when an item is written.

use crate::domain::delivery_method::DeliveryMethod;
use crate::domain::event::{EventStatus, InternalStatus};
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::retry::RetryPolicy;
use crate::domain::subscription::SubscriptionStatus;
use crate::domain::time::Timestamp;
use serde::{Deserialize, Serialize};

/// A tenant of the owning application.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Account {
    pub account_id: String,
    pub name: String,
    /// Who hears about the account's paused subscriptions.
    #[serde(default)]
    pub admin_emails: Vec<String>,
    pub created_at: Timestamp,
}

/// An installed adapter of an account.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Integration {
    pub account_id: String,
    pub integration_id: String,
    pub name: String,
    pub method: DeliveryMethod,
    /// `webhook`: where changes are POSTed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// `webhook`: the Standard Webhooks signing secret (`whsec_…`). Never logged or returned
    /// after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// `internal`: the built-in handler's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<String>,
    /// Consent: the account accepted that this integration receives its events.
    pub event_access_accepted: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// What an integration wants delivered, filtered and projected.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Subscription {
    pub account_id: String,
    pub subscription_id: String,
    pub integration_id: String,
    pub record_types: Vec<String>,
    /// The change-time filter as the API received it (JSON); absent means every change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Fields of the record the deliveries carry (dotted paths).
    pub fields: Vec<String>,
    #[serde(default)]
    pub retry_policy: RetryPolicy,
    pub status: SubscriptionStatus,
    #[serde(default)]
    pub consecutive_dead: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One change as an event of the event monitor (seed 004).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EventRecord {
    pub account_id: String,
    pub change_id: String,
    pub record_type: String,
    pub record_id: String,
    pub event_code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warehouse: Option<String>,
    pub occurred_at: Timestamp,
    pub event_status: EventStatus,
    #[serde(default)]
    pub internal_status: InternalStatus,
    pub created_at: Timestamp,
    /// Subscriptions that took the change when it was ingested (a delivery each).
    #[serde(default)]
    pub subscribers: u32,
    /// Of those, the ones the worker pushes to (not `poll`). An event with none is rolled up as
    /// soon as it is written; the others are rolled up when their push deliveries finish.
    #[serde(default)]
    pub push_subscribers: u32,
}

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

/// The delivery progress object (seed 000): one per subscription × change. While a retry or an
/// operator restart waits it carries `due_shard`/`due_at`, which put it on the sparse `due` index
/// the dispatcher sweeps (new push work is published from the table's stream instead).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeliveryRecord {
    pub delivery_id: String,
    pub account_id: String,
    pub change_id: String,
    pub subscription_id: String,
    pub integration_id: String,
    pub method: DeliveryMethod,
    pub status: DeliveryStatus,
    /// Attempts made in the current progression (reset by an operator restart).
    #[serde(default)]
    pub attempts: u32,
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
}

/// The SQS message that asks the worker to attempt a delivery.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeliveryWork {
    pub account_id: String,
    pub change_id: String,
    pub subscription_id: String,
}
