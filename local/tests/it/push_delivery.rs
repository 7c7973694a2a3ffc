//! Integration change delivery (the pipeline from ingest through dispatch to the delivery worker
//! and the auto-pause; `docs/lifecycles.md#integration-delivery` and `#subscription`) against the
//! emulator and a real HTTP receiver on loopback. Test names say the behaviour each one checks.

use aws_sdk_dynamodb::types::AttributeValue;
use local::fixtures::test_secret;
use local::receiver::Reply;
use local::testkit::id;
use local::testkit::{work, World};
use serde_json::json;
use shared::delivery::worker::WorkOutcome;
use shared::domain::event::InternalStatus;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::retry::FIXED_SCHEDULE;
use shared::domain::signing::{verify, SigningSecret, DEFAULT_TOLERANCE};
use shared::domain::subscription::SubscriptionStatus;
use shared::domain::time::{MINUTE, SECOND};
use shared::store::integration::Integration;
use shared::store::subscription::Subscription;
use std::time::Duration;

/// An account with an administrator, a webhook to the world's receiver, and a catalog
/// subscription of it carrying `sku`, `name` and `price`.
async fn webhook_subscription(w: &World) -> (String, Integration, Subscription) {
    let account = w.account().await;
    let integration = w.integration(&account.account_id).await;
    let subscription = w
        .subscribe(&integration)
        .fields(&["sku", "name", "price"])
        .await;
    (account.account_id.into(), integration, subscription)
}

#[tokio::test]
async fn turns_a_change_event_into_a_queued_delivery_of_the_catalog_projection_never_the_row() {
    let w = World::new().await;
    let r = &w.receiver;
    let (account, _, sub) = webhook_subscription(&w).await;
    let change = w.change(&id(&account)).price(3.5).await;

    // Ingest alone: the delivery is recorded pending with the projection, before any push.
    let (records, failures) = w.pipeline.ingest_pending().await.unwrap();
    assert_eq!((records, failures), (1, 0));
    let d = w
        .pipeline
        .delivery(&id(&account), &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Pending);
    let payload: serde_json::Value = serde_json::from_str(d.payload.as_deref().unwrap()).unwrap();
    assert_eq!(
        payload["data"],
        json!({"sku": "SKU-1", "name": "Espresso cup", "price": 3.5})
    );
    assert_eq!(
        payload["changed_fields"],
        json!(["price"]),
        "hidden field names do not leak"
    );
    let event = w
        .pipeline
        .event(&id(&account), &change.change_id)
        .await
        .unwrap();
    assert_eq!(event.subscribers, 1);

    // Dispatch and delivery: the receiver gets exactly the projection, signed.
    w.pipeline.pump().await.unwrap();
    let got = r.received();
    assert_eq!(got.len(), 1);
    let body = String::from_utf8(got[0].body.clone()).unwrap();
    assert!(
        !body.contains("Secret Pottery"),
        "the row never leaves: {body}"
    );
    assert!(!body.contains("cost"), "the row never leaves: {body}");
    assert_eq!(got[0].json()["data"], payload["data"]);
    assert_eq!(got[0].header("webhook-id"), Some(d.delivery_id.as_str()));
    let secret = SigningSecret::parse(&test_secret()).unwrap();
    verify(
        &secret,
        got[0].header("webhook-id").unwrap(),
        got[0].header("webhook-timestamp").unwrap(),
        got[0].header("webhook-signature").unwrap(),
        &got[0].body,
        w.pipeline.now(),
        DEFAULT_TOLERANCE,
    )
    .expect("the Standard Webhooks signature verifies");

    let d = w
        .pipeline
        .delivery(&id(&account), &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered);
    assert_eq!(d.attempts, 1);
    assert_eq!(d.attempt_log.len(), 1);
    assert_eq!(d.attempt_log[0].http_status, Some(200));
    assert!(d.lease_until.is_none(), "lease released");
    let item = w
        .pipeline
        .get(
            &shared::store::keys::event_pk(&id(&account), &change.change_id),
            &shared::store::keys::delivery_sk(&sub.subscription_id),
        )
        .await
        .unwrap();
    assert!(
        !item.contains_key("due_at"),
        "delivered work leaves the due index"
    );
}

#[tokio::test]
async fn retries_a_classified_failure_with_the_backoff_and_records_the_delivery_dead_after_six_attempts(
) {
    let w = World::new().await;
    let r = &w.receiver;
    r.set_default(Reply::Status(503));
    let (account, _, sub) = webhook_subscription(&w).await;
    let change = w.change(&id(&account)).price(1.0).await;
    w.pipeline.pump().await.unwrap();
    assert_eq!(r.count(), 1);

    let mut expected_attempts = 1;
    for wait in FIXED_SCHEDULE {
        let d = w
            .pipeline
            .delivery(&id(&account), &change.change_id, &sub.subscription_id)
            .await
            .unwrap();
        assert_eq!(d.status, DeliveryStatus::Retrying);
        assert_eq!(d.attempts, expected_attempts);
        let last = d.attempt_log.last().unwrap();
        assert_eq!(
            d.not_before,
            Some(last.at.plus(wait)),
            "attempt {expected_attempts} waits {wait:?}"
        );
        // Just before the wait ends nothing happens, even when the sweep runs.
        w.pipeline.advance(wait - SECOND).await.unwrap();
        assert_eq!(
            r.count() as u32,
            expected_attempts,
            "no attempt before the backoff ends"
        );
        w.pipeline.advance(SECOND).await.unwrap();
        expected_attempts += 1;
        assert_eq!(r.count() as u32, expected_attempts);
    }
    let d = w
        .pipeline
        .delivery(&id(&account), &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Dead);
    assert_eq!(d.attempts, 6);
    assert_eq!(d.attempt_log.len(), 6);
    assert!(d
        .attempt_log
        .iter()
        .all(|a| a.class == "transient" && a.http_status == Some(503)));
    // Nothing further: a day later there is no seventh attempt.
    w.pipeline
        .advance(Duration::from_secs(86_400))
        .await
        .unwrap();
    assert_eq!(r.count(), 6);
    let s = w
        .pipeline
        .subscription(&id(&account), &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(s.consecutive_dead, 1);
}

#[tokio::test]
async fn honours_a_longer_retry_after_and_recovers_on_a_later_attempt() {
    let w = World::new().await;
    let r = &w.receiver;
    r.script([Reply::Full {
        status: 429,
        headers: vec![("retry-after".into(), "600".into())],
        body: "slow down".into(),
    }]);
    let (account, _, sub) = webhook_subscription(&w).await;
    let change = w.change(&id(&account)).price(1.0).await;
    w.pipeline.pump().await.unwrap();
    let d = w
        .pipeline
        .delivery(&id(&account), &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Retrying);
    assert_eq!(d.last_error.as_deref(), Some("slow down"));
    // 600 s asked for beats the scheduled one minute.
    assert_eq!(
        d.not_before,
        Some(d.attempt_log[0].at.plus(Duration::from_secs(600)))
    );
    w.pipeline.advance(MINUTE).await.unwrap();
    assert_eq!(r.count(), 1);
    w.pipeline.advance(Duration::from_secs(540)).await.unwrap();
    assert_eq!(r.count(), 2);
    let d = w
        .pipeline
        .delivery(&id(&account), &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered);
    assert!(d.last_error.is_none());
}

#[tokio::test]
async fn a_permanent_refusal_is_dead_at_once_and_configuration_loss_is_failed() {
    let w = World::new().await;
    let r = &w.receiver;
    r.set_default(Reply::Status(410));
    let (account, integration, sub) = webhook_subscription(&w).await;
    let first = w.change(&id(&account)).price(1.0).await;
    w.pipeline.pump().await.unwrap();
    let d = w
        .pipeline
        .delivery(&id(&account), &first.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Dead);
    assert_eq!(d.attempts, 1);
    assert_eq!(d.attempt_log[0].class, "permanent");

    // Consent withdrawn: the next change fails without calling the adapter.
    let mut withdrawn = integration.clone();
    withdrawn.event_access_accepted = false;
    w.save_integration(&withdrawn).await;
    w.pipeline.worker.forget_config(&id(&account));
    let second = w.change(&id(&account)).price(2.0).await;
    w.pipeline.pump().await.unwrap();
    assert_eq!(r.count(), 1, "no call without consent");
    let d = w
        .pipeline
        .delivery(&id(&account), &second.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Failed);
    assert_eq!(
        d.last_error.as_deref(),
        Some("event access is not accepted")
    );
}

#[tokio::test]
async fn pauses_a_subscription_after_fifty_dead_deliveries_in_a_row_and_tells_its_administrators_once(
) {
    let w = World::new().await;
    let r = &w.receiver;
    r.set_default(Reply::Status(400));
    let (account, _, sub) = webhook_subscription(&w).await;
    // A success first, then fifty-two permanent failures.
    r.script([Reply::Status(200)]);
    w.change(&id(&account)).price(0.5).await;
    w.pipeline.pump().await.unwrap();
    let mut changes = Vec::new();
    for i in 0..50 {
        let c = w.change(&id(&account)).price(i as f64).await;
        changes.push(c);
    }
    w.pipeline.pump().await.unwrap();
    let s = w
        .pipeline
        .subscription(&id(&account), &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(s.consecutive_dead, 50);
    assert_eq!(s.status, SubscriptionStatus::Paused);
    assert!(s.paused_at.is_some());

    // Exactly one notice, addressed to the account's administrators.
    let notices = w.notification_items().await;
    assert_eq!(notices.len(), 1, "one administrator notice");
    let notice = &notices[0];
    assert_eq!(
        notice["reason"],
        AttributeValue::S("subscription_paused".into())
    );
    assert_eq!(
        notice["recipients"],
        AttributeValue::L(vec![AttributeValue::S("admin@example.com".into())])
    );

    // Redelivering every message counts nothing twice.
    for c in &changes {
        w.pipeline.worker.process(&work(c, &sub)).await.unwrap();
    }
    assert_eq!(
        w.pipeline
            .subscription(&id(&account), &sub.subscription_id)
            .await
            .unwrap()
            .consecutive_dead,
        50
    );

    // While paused, new changes are skipped: no delivery record, nothing sent.
    let calls = r.count();
    let skipped = w.change(&id(&account)).price(99.0).await;
    w.pipeline.pump().await.unwrap();
    assert!(w
        .pipeline
        .delivery(&id(&account), &skipped.change_id, &sub.subscription_id)
        .await
        .is_none());
    assert_eq!(r.count(), calls);
}

#[tokio::test]
async fn a_success_resets_the_consecutive_dead_count() {
    let w = World::new().await;
    let r = &w.receiver;
    let (account, _, sub) = webhook_subscription(&w).await;
    r.script([Reply::Status(400), Reply::Status(400), Reply::Status(200)]);
    for i in 0..2 {
        w.pipeline
            .write_change(&w.change(&id(&account)).price(i as f64).build())
            .await
            .unwrap();
        w.pipeline.pump().await.unwrap();
    }
    assert_eq!(
        w.pipeline
            .subscription(&id(&account), &sub.subscription_id)
            .await
            .unwrap()
            .consecutive_dead,
        2
    );
    w.pipeline
        .write_change(&w.change(&id(&account)).price(9.0).build())
        .await
        .unwrap();
    w.pipeline.pump().await.unwrap();
    assert_eq!(
        w.pipeline
            .subscription(&id(&account), &sub.subscription_id)
            .await
            .unwrap()
            .consecutive_dead,
        0
    );
}

#[tokio::test]
async fn duplicate_stream_records_and_duplicate_messages_deliver_once() {
    let w = World::new().await;
    let r = &w.receiver;
    let (account, _, sub) = webhook_subscription(&w).await;
    let change = w.change(&id(&account)).price(1.0).build();
    // The owning application writes the same change twice (the stream carries both).
    w.pipeline.write_change(&change).await.unwrap();
    w.pipeline.write_change(&change).await.unwrap();
    w.pipeline.ingest_pending().await.unwrap();
    // The same stream record handled again (a retried batch).
    let configs = Default::default();
    let again = w
        .pipeline
        .ingest
        .ingest_change(&change, &configs)
        .await
        .unwrap();
    assert_eq!(again.pending, 1);
    assert_eq!(
        again.already_recorded, 2,
        "event and delivery already existed"
    );

    // Three copies of the work message.
    let job = work(&change, &sub);
    for _ in 0..3 {
        w.pipeline
            .stack
            .clients
            .sqs
            .send_message()
            .queue_url(&w.pipeline.stack.config.delivery_queue_url)
            .message_body(serde_json::to_string(&job).unwrap())
            .send()
            .await
            .unwrap();
    }
    w.pipeline.pump().await.unwrap();
    assert_eq!(r.count(), 1, "one adapter call");
    let d = w
        .pipeline
        .delivery(&id(&account), &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered);
    assert_eq!(d.attempt_log.len(), 1);
}

#[tokio::test]
async fn a_worker_that_dies_after_its_claim_is_taken_over_when_the_lease_lapses() {
    let w = World::new().await;
    let r = &w.receiver;
    let (account, _, sub) = webhook_subscription(&w).await;
    let change = w.change(&id(&account)).price(1.0).await;
    w.pipeline.ingest_pending().await.unwrap();
    // A worker claims attempt 1 and dies: its lease is written, nothing else (a claim does not
    // touch the `due` index).
    w.lease(
        &change,
        &sub.subscription_id,
        w.pipeline.now().plus(Duration::from_secs(60)),
        "dead-worker",
    )
    .await;
    // A copy of its message arrives while the lease holds: nobody else may call the adapter.
    w.pipeline.pump().await.unwrap();
    assert_eq!(r.count(), 0, "the live lease keeps other workers out");
    // In AWS the dead worker's own message returns after the queue's visibility timeout (120 s,
    // past the lease). Here that message is lost too: nothing publishes the delivery until its
    // first-dispatch grace has passed; then the roll-up of its open event puts it on the `due`
    // index and the sweep publishes it, and attempt 1 is taken over.
    w.pipeline.advance(Duration::from_secs(61)).await.unwrap();
    assert_eq!(r.count(), 0, "not lost yet: the queue may still bring it");
    w.pipeline
        .clock
        .advance(shared::domain::integration_delivery::FIRST_DISPATCH_GRACE);
    assert_eq!(w.pipeline.roll_up_pass().await.unwrap().requeued, 1);
    assert_eq!(
        w.pipeline.roll_up_pass().await.unwrap().requeued,
        0,
        "scheduled once"
    );
    w.pipeline.advance(Duration::from_secs(1)).await.unwrap();
    assert_eq!(r.count(), 1);
    let d = w
        .pipeline
        .delivery(&id(&account), &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered);
    assert_eq!(d.attempts, 1);
}

#[tokio::test]
async fn the_worker_claims_without_reading_first_and_a_refused_claim_says_why_from_the_delivery_it_answers_with(
) {
    let w = World::new().await;
    let r = &w.receiver;
    let (account, _, sub) = webhook_subscription(&w).await;
    let change = w.change(&id(&account)).price(2.5).await;
    w.pipeline.ingest_pending().await.unwrap();
    let job = work(&change, &sub);
    let lease = w.pipeline.now().plus(Duration::from_secs(60));
    w.lease(&change, &sub.subscription_id, lease, "another-worker")
        .await;

    // Another worker's live lease: the claim is refused and is the only request to the
    // delivery. The account's configuration is read once per container, before the claim: the
    // claim's condition carries the subscription's Max Retries.
    w.pipeline.stack.meter.reset();
    let outcome = w.pipeline.worker.process(&job).await.unwrap();
    assert_eq!(outcome, WorkOutcome::Skipped("leased by another worker"));
    assert_eq!(
        w.dynamo_requests(),
        [("Query".to_string(), 1), ("UpdateItem".to_string(), 1)]
    );
    assert_eq!(r.count(), 0);

    // The lease lapses: claim, outcome and the dead count's read; the claim's answer carried the
    // delivery, so nothing read it first.
    w.pipeline.clock.advance(Duration::from_secs(61));
    w.pipeline.worker.forget_config(&id(&account));
    w.pipeline.stack.meter.reset();
    let outcome = w.pipeline.worker.process(&job).await.unwrap();
    assert_eq!(
        outcome,
        WorkOutcome::Attempted {
            number: 1,
            status: DeliveryStatus::Delivered
        }
    );
    let requests = w.dynamo_requests();
    assert!(
        requests.contains(&("UpdateItem".to_string(), 2))
            && requests.contains(&("GetItem".to_string(), 1)),
        "claim and outcome, the dead count's read: {requests:?}"
    );
    assert_eq!(r.count(), 1);
    assert_eq!(
        r.received()[0].json()["data"]["price"],
        json!(2.5),
        "the payload came with the claim"
    );

    // A copy of the message after the success, and a message for a delivery that does not
    // exist: each is refused by the claim alone, which says why.
    w.pipeline.stack.meter.reset();
    let outcome = w.pipeline.worker.process(&job).await.unwrap();
    assert_eq!(outcome, WorkOutcome::Skipped("already settled"));
    let mut missing = job.clone();
    missing.change_id = id("01JDX00000000000000000N0NE");
    let outcome = w.pipeline.worker.process(&missing).await.unwrap();
    assert_eq!(outcome, WorkOutcome::Skipped("no such delivery"));
    assert_eq!(w.dynamo_requests(), [("UpdateItem".to_string(), 2)]);
    assert_eq!(r.count(), 1);
    let d = w
        .pipeline
        .delivery(&id(&account), &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Delivered, 1));
}

#[tokio::test]
async fn a_lost_acknowledgement_is_retried_with_the_same_delivery_id() {
    let w = World::new().await;
    let r = &w.receiver;
    // The receiver applies the change but the answer never arrives in time.
    r.script([Reply::Hang(Duration::from_secs(30))]);
    let account = w.account().admins(&[]).await;
    let integration = w
        .integration(&account.account_id)
        .url(r.url("/hooks"))
        .await;
    let sub = w
        .subscribe(&integration)
        .record_types(&["*"])
        .fields(&["sku"])
        .await;
    let worker = w.worker_with(
        shared::delivery::worker::webhook::WebhookAdapter::new(
            shared::domain::ssrf::TargetPolicy::LOCAL_DEMO,
            Duration::from_millis(300),
        ),
        shared::delivery::worker::internal::InternalRegistry::default(),
    );
    let change = w.change(&account.account_id).price(1.0).await;
    w.pipeline.ingest_pending().await.unwrap();
    let job = work(&change, &sub);
    worker.process(&job).await.unwrap();
    let d = w
        .pipeline
        .delivery(&account.account_id, &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Retrying);
    assert_eq!(d.attempt_log[0].class, "transient");
    w.pipeline.clock.advance(MINUTE);
    worker.process(&job).await.unwrap();
    let got = r.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"));
    assert_eq!(got[0].body, got[1].body);
    let d = w
        .pipeline
        .delivery(&account.account_id, &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered);
    assert_eq!(d.attempts, 2);
}

#[tokio::test]
async fn a_filter_change_does_not_resurrect_a_skipped_filter_record() {
    let w = World::new().await;
    let r = &w.receiver;
    let account = w.account().admins(&[]).await;
    let integration = w
        .integration(&account.account_id)
        .url(r.url("/hooks"))
        .await;
    let mut sub = w
        .subscribe(&integration)
        .filter(json!({"field": "record.price", "gt": 10}))
        .await;
    let cheap = w.change(&account.account_id).price(3.0).await;
    w.pipeline.pump().await.unwrap();
    let d = w
        .pipeline
        .delivery(&account.account_id, &cheap.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::SkippedFilter);
    assert!(
        d.payload.is_none(),
        "nothing projected for a filtered change"
    );
    assert_eq!(r.count(), 0);

    // The filter is widened and the same change arrives again: still skipped_filter, no delivery.
    sub.filter = None;
    w.save_subscription(&sub).await;
    let configs = Default::default();
    w.pipeline
        .ingest
        .ingest_change(&cheap, &configs)
        .await
        .unwrap();
    w.pipeline.pump().await.unwrap();
    let d = w
        .pipeline
        .delivery(&account.account_id, &cheap.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::SkippedFilter);
    assert_eq!(r.count(), 0);
    // And storage refuses the move itself.
    let refused =
        shared::domain::integration_delivery::operator_restart(DeliveryStatus::SkippedFilter);
    assert!(refused.is_err());
}

#[tokio::test]
async fn a_malformed_stream_record_fails_alone_and_the_rest_of_the_batch_is_ingested() {
    let w = World::new().await;
    let (account, _, sub) = webhook_subscription(&w).await;
    let before = w.change(&id(&account)).price(1.0).await;
    // A change without its event code.
    let mut bad: shared::store::Item =
        serde_dynamo::to_item(w.change(&id(&account)).price(2.0).build()).unwrap();
    bad.remove("event_code");
    w.pipeline.write_raw_change(bad).await.unwrap();
    let after = w.change(&id(&account)).price(3.0).await;
    let (_, failures) = w.pipeline.ingest_pending().await.unwrap();
    assert!(failures >= 1, "the malformed record is reported");
    // The record after the bad one is processed too (each retry re-reads from the failure on).
    assert!(w
        .pipeline
        .delivery(&id(&account), &before.change_id, &sub.subscription_id)
        .await
        .is_some());
    assert!(w
        .pipeline
        .delivery(&id(&account), &after.change_id, &sub.subscription_id)
        .await
        .is_some());
}

#[tokio::test]
async fn an_internal_subscriber_stores_its_result_and_marks_the_event_done() {
    let w = World::new().await;
    let account = w.account().admins(&[]).await;
    let integration = w.integration(&account.account_id).internal().await;
    let sub = w.subscribe(&integration).await;
    let newer = w
        .change(&account.account_id)
        .at(w.pipeline.now().plus(MINUTE))
        .price(8.0)
        .build();
    let older = w.change(&account.account_id).price(5.0).build();
    w.pipeline.write_change(&newer).await.unwrap();
    w.pipeline.write_change(&older).await.unwrap();
    w.pipeline.pump().await.unwrap();
    for c in [&newer, &older] {
        let d = w
            .pipeline
            .delivery(&account.account_id, &c.change_id, &sub.subscription_id)
            .await
            .unwrap();
        assert_eq!(d.status, DeliveryStatus::Delivered);
        let e = w
            .pipeline
            .event(&account.account_id, &c.change_id)
            .await
            .unwrap();
        assert_eq!(e.internal_status, InternalStatus::Done);
    }
    // The late, older change did not overwrite the newer snapshot.
    let snap = w
        .pipeline
        .get(
            &shared::delivery::worker::internal::snapshot_pk(&account.account_id, "catalog_item"),
            "SKU-1",
        )
        .await
        .unwrap();
    assert_eq!(
        snap["change_id"],
        AttributeValue::S(newer.change_id.to_string())
    );
    assert!(
        matches!(&snap["data"], AttributeValue::S(d) if d.contains("8.0") || d.contains("\"price\":8"))
    );
}

#[tokio::test]
async fn the_ssrf_guard_refuses_private_targets_in_production() {
    let w = World::new().await;
    let r = &w.receiver;
    let (account, _, sub) = webhook_subscription(&w).await;
    let mut production = w.pipeline.stack.config.clone();
    production.allow_private_targets = false;
    let worker = shared::delivery::worker::DeliveryWorker::new(
        w.pipeline.stack.clients.clone(),
        production,
        std::sync::Arc::new(w.pipeline.clock.clone()),
    );
    let change = w.change(&id(&account)).price(1.0).await;
    w.pipeline.ingest_pending().await.unwrap();
    worker.process(&work(&change, &sub)).await.unwrap();
    assert_eq!(r.count(), 0, "nothing reaches a loopback target");
    let d = w
        .pipeline
        .delivery(&id(&account), &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Dead);
    let why = d.last_error.unwrap();
    assert!(why.contains("https") || why.contains("127.0.0.1"), "{why}");
}
