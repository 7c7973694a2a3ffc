//! Where each record of the delivery table's stream goes: new push work to **publish**, an event
//! to **roll up** promptly, or nowhere. This is the one statement of that rule: the dispatcher
//! acts on what [`route`] says, and the template's `FilterCriteria` for the dispatcher pass
//! exactly the records [`wanted`] keeps (the harness applies those patterns themselves, and a test
//! holds them against this module on every kind of delivery-table write).
//!
//! * **Publish**: a push delivery that has just entered `pending` (created, or restarted by an
//!   operator). Poll deliveries are never published: their adapter pulls them.
//! * **Roll up**: an event just inserted that no push delivery will trigger later (nobody took
//!   it, or only pull subscribers did), or a push delivery that just moved from `pending` or
//!   `retrying` to a terminal status (`delivered`, `failed`, `dead`), or failed for the first
//!   time (`pending → retrying`: a retry now waits, so the event becomes `partial`). When that
//!   delivery is the only one its change made and it settled its first attempt, the record
//!   carries the delivery, whose settling decides the event alone
//!   ([`RollUp::roll_up_settled`](crate::delivery::rollup::RollUp::roll_up_settled)).

use crate::domain::integration_delivery::DeliveryStatus;
use crate::store::delivery::{Delivery, DeliveryWork};
use crate::store::stream_image::{self, DeliveryImage, Image};
use aws_lambda_events::event::dynamodb::EventRecord;

/// What a delivery-stream record asks of the dispatcher.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// New push work: publish it to the delivery queue.
    Publish(DeliveryWork),
    /// Roll up the event of partition `event_pk`; `settled` is the change's only delivery and the
    /// status it left, where its settling decides the event alone.
    RollUp {
        event_pk: String,
        settled: Option<(Box<Delivery>, DeliveryStatus)>,
    },
    /// Nothing to do.
    Nowhere,
}

/// Where `record` goes.
pub fn route(record: &EventRecord) -> Route {
    let (new, old) = (&record.change.new_image, &record.change.old_image);
    let (new_image, old_image) = (Image::of(new), Image::of(old));
    if let Some(work) = new_work(&new_image, &old_image) {
        return Route::Publish(work);
    }
    match roll_up_trigger(&record.event_name, &new_image, &old_image) {
        Some(event_pk) => Route::RollUp {
            event_pk,
            settled: settled_sole_delivery(&new_image, &old_image).and_then(|previous| {
                Some((Box::new(stream_image::whole_delivery(new)?), previous))
            }),
        },
        None => Route::Nowhere,
    }
}

/// Whether the dispatcher acts on `record` at all (what the template's `FilterCriteria` pass).
pub fn wanted(record: &EventRecord) -> bool {
    let (new, old) = (
        Image::of(&record.change.new_image),
        Image::of(&record.change.old_image),
    );
    new_work(&new, &old).is_some() || roll_up_trigger(&record.event_name, &new, &old).is_some()
}

/// The event partition a record writes to, whatever its route (a later write to a partition in
/// one batch, such as an operator's restart of its delivery, means an earlier image no longer
/// tells the event's state alone).
pub fn event_pk(record: &EventRecord) -> Option<String> {
    Image::of(&record.change.new_image).event_pk()
}

/// A push delivery that has just entered `pending`: the work that names it.
fn new_work(new: &Image<'_>, old: &Image<'_>) -> Option<DeliveryWork> {
    let Image::Delivery(d) = new else { return None };
    let entered = d.status == Some(DeliveryStatus::Pending)
        && !d.poll
        && old.delivery_status() != Some(DeliveryStatus::Pending);
    if entered {
        d.work()
    } else {
        None
    }
}

/// The event partition a record asks to roll up promptly, if any.
fn roll_up_trigger(event_name: &str, new: &Image<'_>, old: &Image<'_>) -> Option<String> {
    match new {
        // An event is rolled up when it is written only if no push delivery will finish later
        // and trigger it: otherwise a first `new → partial` write would buy nothing.
        Image::Event {
            push_subscribers: Some(0),
            ..
        } if event_name == "INSERT" => new.event_pk(),
        Image::Delivery(DeliveryImage {
            status: Some(to),
            poll: false,
            ..
        }) => {
            let from = old.delivery_status()?;
            let first_failure = from == DeliveryStatus::Pending && *to == DeliveryStatus::Retrying;
            (from.is_open() && (to.is_terminal() || first_failure)).then(|| new.event_pk())?
        }
        _ => None,
    }
}

/// The status a change's only delivery left when its record settles the first attempt
/// ([`Delivery::sole`]): `pending`. No other image can decide its event alone.
fn settled_sole_delivery(new: &Image<'_>, old: &Image<'_>) -> Option<DeliveryStatus> {
    let Image::Delivery(DeliveryImage { sole: true, .. }) = new else {
        return None;
    };
    let previous = old.delivery_status()?;
    (previous == DeliveryStatus::Pending).then_some(previous)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use crate::store::keys;
    use serde_dynamo::AttributeValue as StreamValue;

    fn image(pairs: &[(&str, &str)]) -> serde_dynamo::Item {
        let map: std::collections::HashMap<String, StreamValue> = pairs
            .iter()
            .map(|(k, v)| {
                let value = match v.strip_prefix('#') {
                    Some(num) => StreamValue::N(num.to_string()),
                    None => StreamValue::S(v.to_string()),
                };
                (k.to_string(), value)
            })
            .collect();
        map.into()
    }

    fn record(event_name: &str, new: serde_dynamo::Item, old: serde_dynamo::Item) -> EventRecord {
        let mut r = EventRecord::default();
        r.event_name = event_name.to_string();
        r.change.new_image = new;
        r.change.old_image = old;
        r
    }

    const IDS: [(&str, &str); 3] = [
        ("account_id", "a"),
        ("change_id", "c"),
        ("subscription_id", "s"),
    ];

    fn delivery(status: &str, method: &str) -> serde_dynamo::Item {
        let mut pairs = IDS.to_vec();
        pairs.extend([("kind", "delivery"), ("status", status), ("method", method)]);
        image(&pairs)
    }

    fn rolls_up(event_name: &str, new: serde_dynamo::Item, old: serde_dynamo::Item) -> bool {
        matches!(route(&record(event_name, new, old)), Route::RollUp { .. })
    }

    #[test]
    fn prompt_roll_ups_fire_only_where_they_change_something() {
        let event = |push: &str| {
            let mut pairs = IDS.to_vec();
            pairs.extend([("kind", "event"), ("push_subscribers", push)]);
            image(&pairs)
        };
        let empty = image(&[]);
        // An event nobody pushes to is settled when written; one with push work waits for it.
        assert_eq!(
            route(&record("INSERT", event("#0"), empty.clone())),
            Route::RollUp {
                event_pk: keys::event_pk(&id("a"), &id("c")),
                settled: None
            }
        );
        assert!(!rolls_up("INSERT", event("#2"), empty));
        let moved = |from: &str, to: &str, method: &str| {
            rolls_up("MODIFY", delivery(to, method), delivery(from, method))
        };
        assert!(moved("pending", "delivered", "webhook"));
        assert!(moved("retrying", "dead", "webhook"));
        assert!(moved("pending", "failed", "internal"));
        assert!(
            moved("pending", "retrying", "webhook"),
            "the first failure makes it partial"
        );
        assert!(
            !moved("retrying", "retrying", "webhook"),
            "a further retry changes nothing"
        );
        assert!(
            !moved("pending", "pending", "webhook"),
            "a claim changes nothing"
        );
        assert!(
            !moved("pending", "delivered", "poll"),
            "poll deliveries are left out"
        );
    }

    #[test]
    fn a_push_delivery_entering_pending_is_published_and_a_poll_one_is_not() {
        let work = DeliveryWork {
            account_id: id("a"),
            change_id: id("c"),
            subscription_id: id("s"),
        };
        let created = record("INSERT", delivery("pending", "webhook"), image(&[]));
        assert_eq!(route(&created), Route::Publish(work.clone()));
        let restarted = record(
            "MODIFY",
            delivery("pending", "webhook"),
            delivery("dead", "webhook"),
        );
        assert_eq!(route(&restarted), Route::Publish(work));
        let claimed = record(
            "MODIFY",
            delivery("pending", "webhook"),
            delivery("pending", "webhook"),
        );
        assert_eq!(route(&claimed), Route::Nowhere);
        let pulled = record("INSERT", delivery("pending", "poll"), image(&[]));
        assert_eq!(route(&pulled), Route::Nowhere);
        assert!(wanted(&created) && !wanted(&claimed) && !wanted(&pulled));
    }
}
