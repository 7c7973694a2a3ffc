//! Events and deliveries as the monitor reads them: the shared models plus the attributes the
//! monitor, the worker and retention add to the same items.

use super::attrs;
use super::retention::{delivery_visible, event_visible};
use crate::domain::event::{DeliveryFacts, EventStatus, EventTrigger};
use crate::domain::integration_delivery::{lease_held, transmit_status, TransmitStatus};
use crate::domain::time::Timestamp;
use crate::store::keys::{DELIVERY_PREFIX, EVENT_SK};
use crate::store::models::{DeliveryRecord, EventRecord};
use crate::store::{from_item, Item, StoreError};

fn number(item: &Item, name: &str) -> Option<i64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<i64>().ok())
}

fn text(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

/// The `sk` of a stored item.
pub fn sort_key(item: &Item) -> Option<&str> {
    item.get("sk")
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

/// An event item.
#[derive(Debug, Clone, PartialEq)]
pub struct EventItem {
    pub record: EventRecord,
    /// TTL, epoch seconds (final events only).
    pub expires_at: Option<i64>,
    pub finalized_at: Option<Timestamp>,
    pub status_changed_at: Option<Timestamp>,
    /// Incremented by every operator reopen; roll-up writes are conditional on it.
    pub reopens: Option<i64>,
    /// What a built-in subscriber stored when it handled the event (JSON text).
    pub internal_result: Option<String>,
    /// Whether the event is on the `rollup` index.
    pub on_rollup_index: bool,
    /// The trigger of the last status move (its table row explains it).
    pub status_trigger: Option<EventTrigger>,
}

impl EventItem {
    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        Ok(EventItem {
            expires_at: number(&item, attrs::EXPIRES_AT),
            finalized_at: number(&item, attrs::FINALIZED_AT).map(Timestamp),
            status_changed_at: number(&item, attrs::STATUS_CHANGED_AT).map(Timestamp),
            reopens: number(&item, attrs::REOPENS),
            internal_result: text(&item, "internal_result"),
            on_rollup_index: item.contains_key(attrs::ROLLUP_SHARD),
            status_trigger: text(&item, "status_trigger")
                .and_then(|t| serde_json::from_value(serde_json::Value::String(t)).ok()),
            record: from_item(item)?,
        })
    }

    pub fn status(&self) -> EventStatus {
        self.record.event_status
    }

    /// The read filter (see [`super::retention`]).
    pub fn visible(&self, now: Timestamp) -> bool {
        event_visible(self.status(), self.expires_at, now)
    }
}

/// A delivery item.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryItem {
    pub record: DeliveryRecord,
    /// TTL, epoch seconds (set when the event became final).
    pub expires_at: Option<i64>,
    pub delivered_at: Option<Timestamp>,
}

impl DeliveryItem {
    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        Ok(DeliveryItem {
            expires_at: number(&item, attrs::EXPIRES_AT),
            delivered_at: number(&item, "delivered_at").map(Timestamp),
            record: from_item(item)?,
        })
    }

    /// Seed 004's word for the delivery at `now` (`None`: `skipped_filter`, never a delivery in
    /// 004's sense).
    pub fn transmit_status(&self, now: Timestamp) -> Option<TransmitStatus> {
        transmit_status(self.record.status, lease_held(self.record.lease_until, now))
    }

    /// What the roll-up counts of this delivery; `None` when the subscriber did not take the
    /// event (`skipped_filter`).
    pub fn facts(&self, now: Timestamp) -> Option<DeliveryFacts> {
        self.transmit_status(now).map(|transmit| DeliveryFacts {
            method_is_poll: self.record.method.is_poll(),
            transmit,
        })
    }

    pub fn visible(&self, now: Timestamp) -> bool {
        delivery_visible(self.expires_at, now)
    }
}

/// One event partition: the event (if it exists) and its deliveries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventPartition {
    pub event: Option<EventItem>,
    pub deliveries: Vec<DeliveryItem>,
}

impl EventPartition {
    /// Sorts the items of one `EVT#…` partition into the event and its deliveries (other items
    /// are ignored).
    pub fn from_items(items: impl IntoIterator<Item = Item>) -> Result<Self, StoreError> {
        let mut p = EventPartition::default();
        for item in items {
            match sort_key(&item) {
                Some(EVENT_SK) => p.event = Some(EventItem::from_item(item)?),
                Some(sk) if sk.starts_with(DELIVERY_PREFIX) => {
                    p.deliveries.push(DeliveryItem::from_item(item)?)
                }
                _ => {}
            }
        }
        Ok(p)
    }
}
