//! Events and deliveries as the monitor reads them: the shared models plus the attributes the
//! monitor, the worker and retention add to the same items.

use super::attrs;
use super::retention::{delivery_visible, event_visible};
use crate::domain::event::{DeliveryFacts, EventStatus, EventTrigger};
use crate::domain::integration_delivery::{
    lease_held, transmit_status, DeliveryStatus, TransmitStatus,
};
use crate::domain::time::Timestamp;
use crate::ingest::FIRST_DISPATCH_GRACE;
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
    /// Whether the delivery is on the dispatcher's `due` index (a retry, an operator restart, or
    /// lost work put back there).
    pub on_due_index: bool,
}

impl DeliveryItem {
    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        Ok(DeliveryItem {
            expires_at: number(&item, attrs::EXPIRES_AT),
            on_due_index: item.contains_key("due_shard"),
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

    /// A push delivery whose first dispatch went missing: still `pending` with no attempt made,
    /// no live lease, nothing scheduled on the `due` index, and ingested more than
    /// [`FIRST_DISPATCH_GRACE`] ago. New push work is published from the table's stream and
    /// reaches the worker within seconds; a delivery in this state lost its stream record or its
    /// message (or the message went to the dead-letter queue), and nothing else would ever
    /// publish it again.
    pub fn first_dispatch_lost(&self, now: Timestamp) -> bool {
        let d = &self.record;
        d.status == DeliveryStatus::Pending
            && !d.method.is_poll()
            && d.attempts == 0
            && !self.on_due_index
            && !lease_held(d.lease_until, now)
            && d.created_at.plus(FIRST_DISPATCH_GRACE) <= now
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::delivery_method::DeliveryMethod;
    use crate::domain::time::SECOND;

    fn push_delivery(created: Timestamp) -> DeliveryItem {
        let record = DeliveryRecord {
            delivery_id: "dlv_1".into(),
            account_id: "acc_1".into(),
            change_id: "chg_1".into(),
            subscription_id: "sub_1".into(),
            integration_id: "int_1".into(),
            method: DeliveryMethod::Webhook,
            status: DeliveryStatus::Pending,
            attempts: 0,
            payload: Some("{}".into()),
            created_at: created,
            updated_at: created,
            occurred_at: created,
            not_before: Some(created),
            lease_until: None,
            lease_token: None,
            last_error: None,
            last_http_status: None,
            attempt_log: Vec::new(),
            restarts: 0,
            restarted_at: None,
            restarted_by: None,
            replay_job: None,
            delivered_at: None,
            expires_at: None,
            due_shard: None,
            due_at: None,
            list_key: None,
            list_sort: None,
            sub_key: None,
            sub_sort: None,
        };
        DeliveryItem {
            record,
            expires_at: None,
            delivered_at: None,
            on_due_index: false,
        }
    }

    #[test]
    fn a_first_dispatch_is_lost_only_when_nothing_else_can_bring_the_delivery_back() {
        let created = Timestamp(1_700_000_000_000);
        let due = created.plus(FIRST_DISPATCH_GRACE);
        let d = push_delivery(created);
        assert!(d.first_dispatch_lost(due));
        assert!(
            !d.first_dispatch_lost(due.minus(SECOND)),
            "within the grace"
        );

        let mut scheduled = push_delivery(created);
        scheduled.on_due_index = true;
        assert!(!scheduled.first_dispatch_lost(due), "the sweep has it");

        let mut leased = push_delivery(created);
        leased.record.lease_until = Some(due.plus(SECOND));
        assert!(!leased.first_dispatch_lost(due), "a worker holds it");
        leased.record.lease_until = Some(due);
        assert!(leased.first_dispatch_lost(due), "the lease lapsed");

        let mut attempted = push_delivery(created);
        attempted.record.attempts = 1;
        assert!(!attempted.first_dispatch_lost(due), "not a first dispatch");

        let mut pull = push_delivery(created);
        pull.record.method = DeliveryMethod::Poll;
        assert!(
            !pull.first_dispatch_lost(due),
            "pull deliveries wait for a cursor"
        );

        for status in [
            DeliveryStatus::Delivered,
            DeliveryStatus::Retrying,
            DeliveryStatus::Dead,
            DeliveryStatus::Failed,
            DeliveryStatus::SkippedFilter,
        ] {
            let mut moved = push_delivery(created);
            moved.record.status = status;
            assert!(!moved.first_dispatch_lost(due), "{status}");
        }
    }
}
