//! Faults the emulator cannot make, injected at the SDK boundary (`local::faults`): the handlers
//! meet what AWS answers under contention and load, with the SDK's own retry policy in place.

use local::faults::{Fault, Matcher};
use local::fixtures::catalog_change;
use local::pipeline::Pipeline;
use local::receiver::{Receiver, Reply};
use local::testkit::id;
use shared::delivery::worker::WorkOutcome;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::retry::RetryPolicy;
use shared::store::delivery::DeliveryWork;
use shared::store::subscription::Subscription;
use std::time::Duration;

async fn webhook_subscription(p: &Pipeline, r: &Receiver) -> (String, Subscription) {
    let f = p.fixtures();
    let account = f.account(&["admin@example.com"]).await.unwrap();
    let integration = f
        .webhook(&account.account_id, r.url("/hooks/rhythm"))
        .await
        .unwrap();
    let subscription = f
        .subscription(
            &integration,
            &["catalog_item"],
            None,
            &["sku", "name", "price"],
            RetryPolicy::FixedSchedule,
        )
        .await
        .unwrap();
    (account.account_id.into(), subscription)
}

#[tokio::test]
async fn a_dead_outcome_whose_transaction_meets_a_conflict_still_counts_toward_auto_pause() {
    let (p, r) = (Pipeline::new().await, Receiver::start().await);
    let (account, sub) = webhook_subscription(&p, &r).await;
    // A 400 is permanent: the first attempt is dead, and its outcome and the subscription's dead
    // count are one transaction. The first try of it is cancelled by a concurrent transaction.
    r.set_default(Reply::Status(400));
    p.stack
        .faults
        .inject("TransactWriteItems", Fault::TransactionConflict, 1);
    let change = catalog_change(&id(&account), p.now(), 1.0);
    p.write_change(&change).await.unwrap();
    p.pump().await.unwrap();

    assert_eq!(
        p.stack.faults.injected(),
        [("TransactWriteItems".to_string(), Fault::TransactionConflict)]
    );
    let d = p
        .delivery(&id(&account), &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Dead);
    assert_eq!(d.attempts, 1);
    assert_eq!(r.count(), 1, "the conflict must not cause a second attempt");
    let s = p
        .subscription(&id(&account), &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(s.consecutive_dead, 1, "the dead delivery is counted once");
}

#[tokio::test]
async fn a_success_ends_only_the_dead_run_it_saw_when_a_dead_outcome_lands_in_between() {
    let (p, r) = (Pipeline::new().await, Receiver::start().await);
    let (account, sub) = webhook_subscription(&p, &r).await;
    r.set_default(Reply::Status(400));
    for i in 0..3 {
        p.write_change(&catalog_change(&id(&account), p.now(), i as f64))
            .await
            .unwrap();
        p.pump().await.unwrap();
    }
    assert_eq!(
        p.subscription(&id(&account), &sub.subscription_id)
            .await
            .unwrap()
            .consecutive_dead,
        3
    );
    // Two deliveries ingested, not yet worked: the first will succeed, the second die.
    let success = catalog_change(&id(&account), p.now(), 10.0);
    let dead = catalog_change(&id(&account), p.now(), 11.0);
    p.write_change(&success).await.unwrap();
    p.write_change(&dead).await.unwrap();
    p.ingest_pending().await.unwrap();
    r.script([Reply::Status(200), Reply::Status(400)]);
    // The success reads the run (3) and then ends it; that write (a transaction with the run kept
    // on the delivery) is held by the fault layer, and only once it is held does the other
    // worker's dead delivery start (its count is another transaction, not held), so the dead
    // outcome lands between the read and the write.
    p.stack.faults.inject_matching(
        Matcher {
            operation: "TransactWriteItems".into(),
            body_contains: Some("consecutive_dead :minus".into()),
        },
        Fault::Latency(Duration::from_secs(3)),
        1,
    );
    let work = |c: &shared::domain::change::Change| DeliveryWork {
        account_id: account.as_str().parse().unwrap(),
        change_id: c.change_id.as_str().parse().unwrap(),
        subscription_id: sub.subscription_id.clone(),
    };
    let (success_work, dead_work) = (work(&success), work(&dead));
    let faults = p.stack.faults.clone();
    let (first, second) = tokio::join!(p.worker.process(&success_work), async {
        let waiting = std::time::Instant::now();
        while faults.injected().is_empty() {
            assert!(
                waiting.elapsed() < Duration::from_secs(30),
                "the success never ended its dead run"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        p.worker.process(&dead_work).await
    });
    assert!(matches!(
        first.unwrap(),
        WorkOutcome::Attempted {
            status: DeliveryStatus::Delivered,
            ..
        }
    ));
    assert!(matches!(
        second.unwrap(),
        WorkOutcome::Attempted {
            status: DeliveryStatus::Dead,
            ..
        }
    ));
    assert_eq!(p.stack.faults.injected().len(), 1);
    // The success ended the run of three it saw; the dead outcome after it still counts.
    let s = p
        .subscription(&id(&account), &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(s.consecutive_dead, 1);
}

#[tokio::test]
async fn a_throttled_claim_is_retried_by_the_sdk_and_the_delivery_is_made_once() {
    let (p, r) = (Pipeline::new().await, Receiver::start().await);
    let (account, sub) = webhook_subscription(&p, &r).await;
    // Two throttles: within the SDK's three tries, as in production.
    p.stack.faults.inject_matching(
        Matcher {
            operation: "UpdateItem".into(),
            body_contains: Some("lease_token".into()),
        },
        Fault::Throttle,
        2,
    );
    let change = catalog_change(&id(&account), p.now(), 1.0);
    p.write_change(&change).await.unwrap();
    p.pump().await.unwrap();
    assert_eq!(p.stack.faults.injected().len(), 2);
    let d = p
        .delivery(&id(&account), &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered);
    assert_eq!(r.count(), 1);
}

#[tokio::test]
async fn a_kms_decrypt_that_keeps_failing_fails_the_attempt_of_that_delivery_only_and_its_retry_delivers(
) {
    for fault in [Fault::Throttle, Fault::InternalError] {
        let (p, r) = (Pipeline::new().await, Receiver::start().await);
        let (account, sub) = webhook_subscription(&p, &r).await;
        // Three: every one of the SDK's tries of the first Decrypt of the signing secret's data
        // key; the next Decrypt (the other delivery's, or the retry's) gets through.
        p.stack.faults.inject("Decrypt", fault.clone(), 3);
        let changes = [1.0, 2.0].map(|price| catalog_change(&id(&account), p.now(), price));
        for change in &changes {
            p.write_change(change).await.unwrap();
        }
        let report = p.pump().await.unwrap();
        assert_eq!(p.stack.faults.injected().len(), 3, "{fault:?}");
        // The failed unwrap is the delivery's attempt (transient, on the retry schedule), not a
        // message handed back to the queue.
        assert_eq!(report.queue.failures, 0, "{fault:?}");
        let mut deliveries = Vec::new();
        for change in &changes {
            deliveries.push(
                p.delivery(&id(&account), &change.change_id, &sub.subscription_id)
                    .await
                    .unwrap(),
            );
        }
        let (failed, delivered): (Vec<_>, Vec<_>) = deliveries
            .iter()
            .partition(|d| d.status != DeliveryStatus::Delivered);
        assert_eq!((failed.len(), delivered.len()), (1, 1), "{fault:?}");
        let failed = failed[0];
        assert_eq!(failed.status, DeliveryStatus::Retrying, "{fault:?}");
        assert_eq!(failed.attempts, 1);
        let attempt = &failed.attempt_log[0];
        assert_eq!(attempt.class, "transient");
        assert_eq!(attempt.http_status, None);
        assert!(
            attempt
                .detail
                .as_deref()
                .is_some_and(|d| d.contains("signing secret")),
            "{:?}",
            attempt.detail
        );
        assert_eq!(r.count(), 1, "only the other delivery reached the endpoint");

        // Its retry comes on the schedule (a minute) and delivers it, once.
        p.advance(Duration::from_secs(30)).await.unwrap();
        assert_eq!(r.count(), 1, "not before the schedule");
        p.advance(Duration::from_secs(31)).await.unwrap();
        let again = p
            .delivery(&id(&account), &failed.change_id, &sub.subscription_id)
            .await
            .unwrap();
        assert_eq!(again.status, DeliveryStatus::Delivered, "{fault:?}");
        assert_eq!(again.attempts, 2);
        assert_eq!(r.count(), 2);
        assert_eq!(p.stack.faults.injected().len(), 3, "no further fault");
    }
}
