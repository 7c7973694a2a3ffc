//! The items of the delivery table as Rust types (read and written with `serde_dynamo`). Key
//! attributes are derived from the ids by [`super::keys`] when an item is written.

use crate::domain::event::{DeliveryMethod, EventStatus, InternalStatus};
use crate::domain::retry::RetryPolicy;
use crate::domain::subscription::SubscriptionStatus;
use crate::domain::time::Timestamp;
use serde::{Deserialize, Serialize};

pub use super::delivery::{AttemptRecord, Delivery as DeliveryRecord, DeliveryWork};

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
