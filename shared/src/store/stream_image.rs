//! The delivery table's stream images, typed: what the dispatcher routes a record on (the item's
//! kind, its event partition, a delivery's status and method, whether it is its change's only
//! delivery), read from the few attributes that tell it without parsing the whole item. The whole
//! delivery is parsed only where its settling decides its event alone ([`whole_delivery`]).

use super::attrs::{KIND, STATUS};
use super::delivery::{Delivery, DeliveryWork};
use super::keys;
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::lifecycle::Status;
use crate::ids::{AccountId, ChangeId, SubscriptionId};
use serde_dynamo::{AttributeValue as StreamValue, Item as StreamItem};

/// One image of a delivery-table stream record (new or old), as far as routing needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Image<'a> {
    /// An event item: its keys and how many push subscribers took it.
    Event {
        account_id: Option<&'a str>,
        change_id: Option<&'a str>,
        push_subscribers: Option<u64>,
    },
    /// A delivery item.
    Delivery(DeliveryImage<'a>),
    /// Any other item, or no image (the old image of an insert).
    Other {
        account_id: Option<&'a str>,
        change_id: Option<&'a str>,
    },
}

/// The routing attributes of a delivery image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeliveryImage<'a> {
    pub account_id: Option<&'a str>,
    pub change_id: Option<&'a str>,
    pub subscription_id: Option<&'a str>,
    /// `None` when absent or not a status of the lifecycle.
    pub status: Option<DeliveryStatus>,
    /// Pulled through the cursor (`method = poll`), not pushed.
    pub poll: bool,
    /// The only delivery its change made ([`Delivery::sole`]).
    pub sole: bool,
}

impl<'a> Image<'a> {
    pub fn of(item: &'a StreamItem) -> Self {
        let account_id = text(item, "account_id");
        let change_id = text(item, "change_id");
        match text(item, KIND) {
            Some("event") => Image::Event {
                account_id,
                change_id,
                push_subscribers: number(item, "push_subscribers"),
            },
            Some("delivery") => Image::Delivery(DeliveryImage {
                account_id,
                change_id,
                subscription_id: text(item, "subscription_id"),
                status: text(item, STATUS).and_then(DeliveryStatus::parse),
                poll: text(item, "method") == Some("poll"),
                sole: matches!(item.get("sole"), Some(StreamValue::Bool(true))),
            }),
            _ => Image::Other {
                account_id,
                change_id,
            },
        }
    }

    /// A delivery's status; `None` for any other item.
    pub fn delivery_status(&self) -> Option<DeliveryStatus> {
        match self {
            Image::Delivery(d) => d.status,
            _ => None,
        }
    }

    /// The event partition (`EVT#…`) the item belongs to, when it names one.
    pub fn event_pk(&self) -> Option<String> {
        let (account, change) = match self {
            Image::Event {
                account_id,
                change_id,
                ..
            }
            | Image::Other {
                account_id,
                change_id,
            } => (account_id, change_id),
            Image::Delivery(d) => (&d.account_id, &d.change_id),
        };
        Some(keys::event_pk(
            &AccountId::from_stored((*account)?),
            &ChangeId::from_stored((*change)?),
        ))
    }
}

impl DeliveryImage<'_> {
    /// The work that names this delivery (what a delivery queue message carries for it).
    pub fn work(&self) -> Option<DeliveryWork> {
        Some(DeliveryWork {
            account_id: AccountId::from_stored(self.account_id?),
            change_id: ChangeId::from_stored(self.change_id?),
            subscription_id: SubscriptionId::from_stored(self.subscription_id?),
        })
    }
}

/// The whole delivery an image holds.
pub(crate) fn whole_delivery(item: &StreamItem) -> Option<Delivery> {
    serde_dynamo::from_item(item.clone()).ok()
}

fn text<'a>(item: &'a StreamItem, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(StreamValue::S(v)) => Some(v.as_str()),
        _ => None,
    }
}

fn number(item: &StreamItem, name: &str) -> Option<u64> {
    match item.get(name) {
        Some(StreamValue::N(v)) => v.parse().ok(),
        _ => None,
    }
}
