//! The item ingest writes for a new delivery (`docs/lifecycles.md#integration-delivery`, the
//! ingest rows): its keys, a pull delivery's place on the subscription index and, for deliveries
//! the worker never writes again, its retention; created once per subscription × change.

use super::item::{Delivery, KIND};
use crate::domain::event::delivery_expires_at;
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::time::Timestamp;
use crate::store::keys;
use crate::store::write::{put_new, Write};
use crate::store::{to_item, Item, StoreError};

/// The item ingest writes for a new delivery: its keys, a pull delivery's place on the
/// subscription index and, for deliveries the worker never writes again, its retention.
pub fn new_item(d: &Delivery, now: Timestamp) -> Result<Item, StoreError> {
    let mut d = d.clone();
    // Only the cursor API needs a subscription's deliveries in change order from an index; a
    // push subscription's history and replay read its account's event listing and the
    // deliveries by key ([`SubscriptionRange::listing`]).
    if d.method.is_poll() {
        d.sub_key = Some(d.subscription_id.to_string());
        d.sub_sort = Some(keys::subscription_sort(&d.change_id));
    } else {
        d.sub_key = None;
        d.sub_sort = None;
    }
    // New push work is not put on the `due` index: the dispatcher publishes it from the table's
    // stream, and an index entry (written now, removed by the outcome) would bill two more
    // writes per delivery. Should the first dispatch go missing, the roll-up of the open event
    // finds the delivery after FIRST_DISPATCH_GRACE and schedules it there.
    if d.status == DeliveryStatus::SkippedFilter || d.method.is_poll() {
        // Filtered deliveries are final from birth, and the worker never writes pull deliveries:
        // both carry their retention now (the event's thirty days plus the margin), so the
        // roll-up need not write them again when their event becomes final. An unread pull
        // delivery of a final event goes with its event.
        d.expires_at = Some(delivery_expires_at(now).seconds());
    }
    let (pk, sk) = d.key();
    to_item(&d, &pk, &sk, KIND)
}

/// Creates a delivery unless one exists for its subscription × change (the idempotency key).
pub fn create(table: &str, d: &Delivery, now: Timestamp) -> Result<Write, StoreError> {
    put_new(table, new_item(d, now)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::delivery_method::DeliveryMethod;
    use crate::store::attrs::{by_subscription, due, EXPIRES_AT};
    use crate::store::delivery::item::test_delivery as delivery;
    use crate::store::delivery::item::test_listed_delivery;

    #[test]
    fn a_new_push_delivery_is_keyed_by_subscription_and_change_and_stays_off_every_index() {
        let item = new_item(&delivery(DeliveryStatus::Pending, 0), Timestamp(1_000)).unwrap();
        assert_eq!(item["pk"].as_s().unwrap(), "EVT#acct#01C");
        assert_eq!(item["sk"].as_s().unwrap(), "DLV#sub1");
        assert_eq!(item["kind"].as_s().unwrap(), KIND);
        assert!(!item.contains_key(by_subscription::KEY));
        assert!(!item.contains_key(by_subscription::SORT));
        assert!(!item.contains_key(due::SHARD));
        assert!(!item.contains_key(EXPIRES_AT));
        let round_trip = Delivery::from_item(item).unwrap();
        assert_eq!(round_trip.sub_sort, None);
    }

    #[test]
    fn a_delivery_keeps_its_changes_trace_normalized_and_stores_nothing_without_one() {
        let plain = delivery(DeliveryStatus::Pending, 0);
        let item = new_item(&plain, Timestamp(1_000)).unwrap();
        assert!(!item.contains_key("trace_id"));

        let mut change = crate::domain::change::tests::sample_change();
        change.trace_id = Some("Root=1-5759E988-BD862E3FE1BE46A994272793;Sampled=0".into());
        let ingested = |change: &crate::domain::change::Change| {
            Delivery::ingested(
                change,
                &plain.subscription_id,
                &plain.integration_id,
                DeliveryMethod::Webhook,
                Some("{}".into()),
                true,
                Timestamp(1_000),
            )
        };
        let item = new_item(&ingested(&change), Timestamp(1_000)).unwrap();
        assert_eq!(
            item["trace_id"].as_s().unwrap(),
            "5759e988bd862e3fe1be46a994272793"
        );
        assert_eq!(
            Delivery::from_item(item).unwrap().trace_id.as_deref(),
            Some("5759e988bd862e3fe1be46a994272793")
        );
        // A malformed trace is not kept: the attempts use the change id's.
        change.trace_id = Some("1-5759e988-nothex".into());
        let item = new_item(&ingested(&change), Timestamp(1_000)).unwrap();
        assert!(!item.contains_key("trace_id"));
    }

    #[test]
    fn a_new_pull_delivery_is_on_the_subscription_index_in_change_order() {
        let mut d = delivery(DeliveryStatus::Pending, 0);
        d.method = DeliveryMethod::Poll;
        let item = new_item(&d, Timestamp(1_000)).unwrap();
        assert_eq!(item[by_subscription::KEY].as_s().unwrap(), "sub1");
        assert_eq!(item[by_subscription::SORT].as_s().unwrap(), "01C");
    }

    #[test]
    fn a_filtered_delivery_carries_its_retention_from_birth() {
        let item = new_item(
            &delivery(DeliveryStatus::SkippedFilter, 0),
            Timestamp(1_000),
        )
        .unwrap();
        assert!(item.contains_key(EXPIRES_AT));
    }

    #[test]
    fn marks_default_when_absent() {
        let mut item = new_item(
            &test_listed_delivery(DeliveryStatus::Pending, DeliveryMethod::Webhook),
            Timestamp(1),
        )
        .unwrap();
        for mark in ["restarts", "restarted_at", "delivered_at", "replay_job"] {
            item.remove(mark);
        }
        let d = Delivery::from_item(item).unwrap();
        assert_eq!(d.restarts, 0);
        assert_eq!(d.delivered_at, None);
    }
}
