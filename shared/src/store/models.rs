//! The items of the delivery table as Rust types (read and written with `serde_dynamo`). Key
//! attributes are derived from the ids by [`super::keys`] when an item is written.

use crate::domain::delivery_method::DeliveryMethod;
use crate::domain::time::Timestamp;
use serde::{Deserialize, Serialize};

pub use super::delivery::{AttemptRecord, Delivery as DeliveryRecord, DeliveryWork};
pub use super::event::EventRecord;
pub use super::subscription::Subscription;

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
