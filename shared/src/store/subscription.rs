//! The subscription item: what an integration wants delivered, filtered and projected, with its
//! lifecycle status (docs/lifecycles.md) and the run of consecutive dead deliveries that pauses
//! it. It lives in its account's partition, beside the account and its integrations.

use super::{keys, Item, StoreError};
use crate::domain::retry::RetryPolicy;
use crate::domain::subscription::SubscriptionStatus;
use crate::domain::time::Timestamp;
use serde::{Deserialize, Serialize};

/// The `kind` of a subscription item.
pub const KIND: &str = "subscription";

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

/// The key of a subscription.
pub fn key(account_id: &str, subscription_id: &str) -> (String, String) {
    (
        keys::account_pk(account_id),
        keys::subscription_sk(subscription_id),
    )
}

impl Subscription {
    pub fn key(&self) -> (String, String) {
        key(&self.account_id, &self.subscription_id)
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        super::from_item(item)
    }
}
