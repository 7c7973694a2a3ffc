//! The event item: one change as the event monitor shows it, in the partition it shares with its
//! deliveries (one query rolls it up). While it is `new` or `partial` it sits on the sharded
//! `rollup` index; every event is on its account's time listing.

use super::{keys, Item, StoreError};
use crate::domain::event::{EventStatus, InternalStatus};
use crate::domain::time::Timestamp;
use serde::{Deserialize, Serialize};

/// The `kind` of an event item.
pub const KIND: &str = "event";

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

/// The key of an event.
pub fn key(account_id: &str, change_id: &str) -> (String, String) {
    (
        keys::event_pk(account_id, change_id),
        keys::EVENT_SK.to_string(),
    )
}

impl EventRecord {
    pub fn key(&self) -> (String, String) {
        key(&self.account_id, &self.change_id)
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        super::from_item(item)
    }
}
