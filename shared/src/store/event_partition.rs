//! One event partition as the monitor reads it: the event and its deliveries (the item types are
//! the store's own, [`EventRecord`] and [`Delivery`]).

use crate::store::delivery::Delivery;
use crate::store::event::{self, EventRecord};
use crate::store::keys::{DELIVERY_PREFIX, EVENT_SK};
use crate::store::{Item, StoreError};

/// The `sk` of a stored item.
pub(crate) fn sort_key(item: &Item) -> Option<&str> {
    item.get("sk")
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

/// One event partition: the event (if it exists) and its deliveries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventPartition {
    pub event: Option<EventRecord>,
    pub deliveries: Vec<Delivery>,
}

impl EventPartition {
    /// Sorts the items of one `EVT#…` partition into the event and its deliveries (other items
    /// are ignored).
    pub(crate) fn from_items(items: impl IntoIterator<Item = Item>) -> Result<Self, StoreError> {
        let mut p = EventPartition::default();
        for item in items {
            match sort_key(&item) {
                Some(EVENT_SK) => p.event = Some(EventRecord::from_item(item)?),
                Some(sk) if sk.starts_with(DELIVERY_PREFIX) => {
                    p.deliveries.push(Delivery::from_item(item)?)
                }
                _ => {}
            }
        }
        Ok(p)
    }
}

/// Reads one event partition (consistent): the event and its deliveries.
pub async fn read_partition(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
) -> Result<EventPartition, StoreError> {
    EventPartition::from_items(event::partition_items(dynamo, table, pk).await?)
}
