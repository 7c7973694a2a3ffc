//! What one receiver cannot do to the delivery worker: exhaust its memory with an endless
//! answer, or hold a batch past the invocation's deadline.

use aws_lambda_events::event::sqs::SqsEvent;
use local::receiver::{Receiver, Reply};
use local::testkit::World;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::store::models::Subscription;
use shared::worker::adapters::DETAIL_LIMIT;
use std::time::Duration;

/// An account with a webhook integration to `receiver` and a catalog subscription of it.
async fn subscription_to(w: &World, receiver: &Receiver) -> Subscription {
    let account = w.account().await;
    let integration = w.integration(&account.account_id).to(receiver).await;
    w.subscribe(&integration).await
}

/// `per_subscription` changes of each subscription's account, ingested and dispatched, and the
/// delivery queue's messages for them received as one event (as the event source mapping hands
/// a batch over). With the changes' ids, per subscription.
async fn one_batch(
    w: &World,
    subscriptions: &[&Subscription],
    per_subscription: usize,
) -> (SqsEvent, Vec<Vec<String>>) {
    let mut changes = Vec::new();
    for sub in subscriptions {
        let mut ids = Vec::new();
        for _ in 0..per_subscription {
            ids.push(w.change(&sub.account_id).await.change_id);
        }
        changes.push(ids);
    }
    w.ingest_pending().await.unwrap();
    w.dispatch_pending().await.unwrap();
    let queue = w.t.queue("DeliveryQueue");
    let expected = subscriptions.len() * per_subscription;
    let mut messages = Vec::new();
    while messages.len() < expected {
        let got = queue.receive().await.unwrap();
        assert!(!got.is_empty(), "{} of {expected} messages", messages.len());
        messages.extend(got);
    }
    assert_eq!(messages.len(), expected);
    (queue.event(&messages).unwrap(), changes)
}

/// Two receivers that answer at once (200 and 500) and then stream 100 MiB slowly, in one batch
/// with deliveries to a well-behaved one: each hostile attempt is classified by its status with
/// at most the cap of its body stored, the hostile receivers' connections are closed long before
/// their 100 MiB, and the rest of the batch is delivered.
#[tokio::test]
async fn a_receiver_streaming_100_mib_gets_its_attempt_classified_with_at_most_the_cap_stored() {
    let w = World::new().await;
    let hostile_ok = Receiver::start().await;
    hostile_ok.set_default(Reply::hostile_stream(200));
    let hostile_err = Receiver::start().await;
    hostile_err.set_default(Reply::hostile_stream(500));
    let normal = subscription_to(&w, &w.receiver).await;
    let ok = subscription_to(&w, &hostile_ok).await;
    let err = subscription_to(&w, &hostile_err).await;
    let (event, changes) = one_batch(&w, &[&normal, &ok, &err], 4).await;

    let response = w.worker.handle(event).await;
    assert!(response.batch_item_failures.is_empty());

    let cap = DETAIL_LIMIT + '…'.len_utf8();
    for (sub, changes, status, class, settled) in [
        (&ok, &changes[1], 200, "success", DeliveryStatus::Delivered),
        (
            &err,
            &changes[2],
            500,
            "transient",
            DeliveryStatus::Retrying,
        ),
    ] {
        for change in changes {
            let d = w
                .delivery(&sub.account_id, change, &sub.subscription_id)
                .await
                .unwrap();
            assert_eq!(d.status, settled);
            assert_eq!(d.attempt_log.len(), 1);
            let attempt = &d.attempt_log[0];
            assert_eq!(
                (attempt.class.as_str(), attempt.http_status),
                (class, Some(status))
            );
            let detail = attempt.detail.as_deref().unwrap_or_default();
            assert_eq!(detail.len(), cap, "the body's start, cut at the cap");
            assert!(detail.starts_with("xxxx") && detail.ends_with('…'));
        }
    }
    for change in &changes[0] {
        let d = w
            .delivery(&normal.account_id, change, &normal.subscription_id)
            .await
            .unwrap();
        assert_eq!(d.status, DeliveryStatus::Delivered);
    }
    assert_eq!(w.receiver.count(), 4);

    // The hostile receivers stopped: their connections were closed, not read to the end.
    let hundred_mib = 100 << 20;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for receiver in [&hostile_ok, &hostile_err] {
        let streamed = receiver.streamed_bytes();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(receiver.streamed_bytes(), streamed, "the stream goes on");
        assert!(
            streamed < hundred_mib / 4,
            "{streamed} bytes were streamed before the worker closed the connection"
        );
        assert_eq!(receiver.count(), 4);
    }
}
