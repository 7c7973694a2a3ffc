//! What an outcome does beyond its delivery, made once however its writes fail
//! (`docs/lifecycles.md#integration-delivery`, `#subscription`): a success ends its subscription's
//! run of dead deliveries and records a built-in handler's result on its event; the fiftieth dead
//! delivery in a row, or a 410 to a subscription that pauses on gone, pauses it with one notice.
//! Each write meets faults through all of the SDK's tries; the message then comes back (on the
//! virtual clock, after the queue's visibility timeout), its delivery is settled, and the effect
//! is made then, once. Also here: the claim's bounds, Max Retries as stored at the claim and the
//! lease's sixty seconds from the claim.

use crate::sim::{Sim, DELIVERY_VISIBILITY};
use aws_sdk_dynamodb::types::AttributeValue;
use local::faults::{Fault, Matcher};
use local::receiver::Reply;
use local::testkit::api::OPERATOR_TOKEN;
use local::testkit::{work, World};
use serde_json::json;
use shared::delivery::worker::{WorkOutcome, LEASE};
use shared::domain::change::Change;
use shared::domain::event::InternalStatus;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::retry::RetryPolicy;
use shared::domain::subscription::SubscriptionStatus;
use shared::domain::time::SECOND;
use shared::ids::AccountId;
use shared::store::delivery::Delivery;
use shared::store::keys;
use shared::store::notice::NOTICE_SK;
use shared::store::subscription::Subscription;
use std::time::Duration;

/// Tries the SDK makes of a request (its standard retry policy, as in production).
const SDK_TRIES: u32 = 3;

/// Every write of `operation` whose request contains `text` is throttled through all the SDK's
/// tries, once.
fn fail_writes(w: &World, operation: &str, text: &str) {
    let matcher = Matcher {
        operation: operation.into(),
        body_contains: Some(text.into()),
    };
    (w.pipeline.stack.faults).inject_matching(matcher, Fault::Throttle, SDK_TRIES);
}

async fn stored(w: &World, sub: &Subscription) -> Subscription {
    (w.pipeline)
        .subscription(&sub.account_id, &sub.subscription_id)
        .await
        .expect("the subscription")
}

async fn delivery(w: &World, c: &Change, sub: &Subscription) -> Delivery {
    (w.pipeline)
        .delivery(&c.account_id, &c.change_id, &sub.subscription_id)
        .await
        .expect("the delivery")
}

/// Whether the stored delivery item still keeps `attribute`.
async fn keeps(w: &World, c: &Change, sub: &Subscription, attribute: &str) -> bool {
    let pk = keys::event_pk(&c.account_id, &c.change_id);
    let sk = keys::delivery_sk(&sub.subscription_id);
    let item = w.pipeline.get(&pk, &sk).await.expect("the delivery item");
    item.contains_key(attribute)
}

/// The administrator notices requested (not their deliveries, which the sim goes on to make).
async fn notices(w: &World) -> usize {
    let items = w.notification_items().await;
    let notice = |i: &&std::collections::HashMap<String, AttributeValue>| {
        i.get("sk").and_then(|v| v.as_s().ok()).map(String::as_str) == Some(NOTICE_SK)
    };
    items.iter().filter(notice).count()
}

/// A webhook subscription of a new account to the world's receiver.
async fn subscribed(w: &World) -> (AccountId, Subscription) {
    let account = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&account).await).await;
    (account, sub)
}

/// `sub` with its run of dead deliveries set to `run`.
async fn with_dead_run(w: &World, sub: &Subscription, run: u32) {
    let mut s = stored(w, sub).await;
    s.consecutive_dead = run;
    w.save_subscription(&s).await;
}

#[tokio::test]
async fn a_success_whose_end_of_the_dead_run_cannot_be_written_ends_it_once_when_its_message_comes_back(
) {
    let w = World::new().await;
    let mut sim = Sim::new(&w);
    let (account, sub) = subscribed(&w).await;
    w.receiver
        .script([Reply::Status(400), Reply::Status(400), Reply::Status(200)]);
    for price in [1.0, 2.0] {
        w.change(&account).price(price).await;
        sim.run_now().await;
    }
    assert_eq!(stored(&w, &sub).await.consecutive_dead, 2);

    // The write that ends the run meets throttles through all its tries, whatever its operation.
    fail_writes(&w, "UpdateItem", "consecutive_dead :minus");
    fail_writes(&w, "TransactWriteItems", "consecutive_dead :minus");
    let success = w.change(&account).price(3.0).await;
    sim.run_now().await;
    assert_eq!(
        delivery(&w, &success, &sub).await.status,
        DeliveryStatus::Delivered
    );
    assert_eq!(sim.deliveries.failed, 1, "its message comes back");
    assert_eq!(stored(&w, &sub).await.consecutive_dead, 2, "not ended yet");

    // Back after the visibility timeout: the claim finds it delivered and the run is ended.
    sim.until(2 * DELIVERY_VISIBILITY, || async {
        stored(&w, &sub).await.consecutive_dead == 0
    })
    .await;
    assert!(
        !keeps(&w, &success, &sub, "dead_run_seen").await,
        "nothing left to make"
    );
    assert_eq!(w.receiver.count(), 3, "no attempt again");

    // Once: a dead delivery after it stays counted when a copy of the success comes again.
    w.receiver.script([Reply::Status(400)]);
    w.change(&account).price(4.0).await;
    sim.run_now().await;
    assert_eq!(stored(&w, &sub).await.consecutive_dead, 1);
    assert_eq!(
        w.pipeline
            .worker
            .process(&work(&success, &sub))
            .await
            .unwrap(),
        WorkOutcome::Skipped("already settled")
    );
    assert_eq!(
        stored(&w, &sub).await.consecutive_dead,
        1,
        "the run is ended once"
    );
}

#[tokio::test]
async fn a_batchs_successes_to_one_subscription_read_its_dead_run_once_and_end_it_once() {
    let w = World::new().await;
    let mut sim = Sim::new(&w);
    let (account, sub) = subscribed(&w).await;
    with_dead_run(&w, &sub, 3).await;
    let requests = |operation: &str, text: &str| {
        (w.pipeline.stack.faults).count_matching(Matcher {
            operation: operation.into(),
            body_contains: Some(text.into()),
        })
    };
    let reads = requests("GetItem", sub.subscription_id.as_str());
    let ends = requests("TransactWriteItems", "consecutive_dead :minus");
    // Five changes, one message of five deliveries, one batch.
    for price in 1..=5 {
        w.change(&account).price(f64::from(price)).await;
    }
    sim.run_now().await;
    assert_eq!(w.receiver.count(), 5);
    assert_eq!(reads.get(), 1, "the run read once for the batch");
    assert_eq!(ends.get(), 1, "and ended by one of its successes");
    assert_eq!(stored(&w, &sub).await.consecutive_dead, 0);
}

#[tokio::test]
async fn a_built_in_handlers_success_whose_event_status_cannot_be_written_records_it_when_its_message_comes_back(
) {
    let w = World::new().await;
    let mut sim = Sim::new(&w);
    let account = w.account().admins(&[]).await.account_id;
    let sub = w.subscribe(&w.integration(&account).internal().await).await;
    fail_writes(&w, "UpdateItem", "internal_result = :result");
    let c = w.change(&account).price(5.0).await;
    sim.run_now().await;
    let d = delivery(&w, &c, &sub).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Delivered, 1));
    let event = || async { w.pipeline.event(&account, &c.change_id).await.unwrap() };
    assert_eq!(event().await.internal_status, InternalStatus::New);
    assert_eq!(sim.deliveries.failed, 1, "its message comes back");

    sim.until(2 * DELIVERY_VISIBILITY, || async {
        event().await.internal_status == InternalStatus::Done
    })
    .await;
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(d.attempts, 1, "the handler is not called again");
    assert_eq!(
        event().await.internal_result,
        d.internal_result,
        "the result the handler gave"
    );
}

/// A subscription's fiftieth dead delivery in a row, whose pause (with its notice) met throttles
/// through all the SDK's tries: the subscription still active at fifty, its message to come back.
async fn fiftieth_dead_with_its_pause_lost(
    w: &World,
    sim: &mut Sim<'_>,
) -> (AccountId, Subscription, Change) {
    let (account, sub) = subscribed(w).await;
    with_dead_run(w, &sub, 49).await;
    w.receiver.script([Reply::Status(400)]);
    fail_writes(w, "TransactWriteItems", "paused_at = :now");
    let c = w.change(&account).price(1.0).await;
    sim.run_now().await;
    assert_eq!(delivery(w, &c, &sub).await.status, DeliveryStatus::Dead);
    let s = stored(w, &sub).await;
    assert_eq!(
        (s.status, s.consecutive_dead),
        (SubscriptionStatus::Active, 50)
    );
    assert_eq!(notices(w).await, 0);
    (account, sub, c)
}

#[tokio::test]
async fn the_fiftieth_dead_delivery_whose_pause_cannot_be_written_pauses_the_subscription_once_when_its_message_comes_back(
) {
    let w = World::new().await;
    let mut sim = Sim::new(&w);
    let (_, sub, c) = fiftieth_dead_with_its_pause_lost(&w, &mut sim).await;

    sim.until(2 * DELIVERY_VISIBILITY, || async {
        stored(&w, &sub).await.status == SubscriptionStatus::Paused
    })
    .await;
    assert_eq!(notices(&w).await, 1, "one notice");
    assert_eq!(
        w.pipeline.worker.process(&work(&c, &sub)).await.unwrap(),
        WorkOutcome::Skipped("already settled")
    );
    assert_eq!(
        notices(&w).await,
        1,
        "a copy that comes again asks for none"
    );
}

#[tokio::test]
async fn a_success_after_a_fiftieth_dead_delivery_whose_pause_was_lost_pauses_the_subscription_before_ending_the_run(
) {
    let w = World::new().await;
    let mut sim = Sim::new(&w);
    let (account, sub, dead) = fiftieth_dead_with_its_pause_lost(&w, &mut sim).await;

    // A success comes before the dead delivery's message does.
    let success = w.change(&account).price(2.0).await;
    sim.run_now().await;
    assert_eq!(
        delivery(&w, &success, &sub).await.status,
        DeliveryStatus::Delivered
    );
    let s = stored(&w, &sub).await;
    assert_eq!(s.status, SubscriptionStatus::Paused, "the pause was due");
    assert_eq!(notices(&w).await, 1);

    // The dead delivery's message comes back: nothing more.
    let returned = sim.deliveries.handled + 1;
    let back = w.pipeline.now().plus(DELIVERY_VISIBILITY);
    sim.until(2 * DELIVERY_VISIBILITY, || async {
        w.pipeline.now() > back
    })
    .await;
    assert!(sim.deliveries.handled >= returned, "its message came back");
    assert_eq!(delivery(&w, &dead, &sub).await.status, DeliveryStatus::Dead);
    assert_eq!(stored(&w, &sub).await.status, SubscriptionStatus::Paused);
    assert_eq!(notices(&w).await, 1, "one notice");
}

#[tokio::test]
async fn a_410_whose_pause_cannot_be_written_pauses_the_subscription_when_its_message_comes_back_and_not_again_after_a_resume(
) {
    let w = World::new().await;
    let mut sim = Sim::new(&w);
    let (account, sub) = subscribed(&w).await;
    let mut gone = stored(&w, &sub).await;
    gone.pause_on_gone = true;
    w.save_subscription(&gone).await;
    w.receiver.script([Reply::Status(410)]);
    fail_writes(&w, "TransactWriteItems", "paused_at = :now");
    let c = w.change(&account).price(1.0).await;
    sim.run_now().await;
    assert_eq!(delivery(&w, &c, &sub).await.status, DeliveryStatus::Dead);
    assert_eq!(stored(&w, &sub).await.status, SubscriptionStatus::Active);

    sim.until(2 * DELIVERY_VISIBILITY, || async {
        stored(&w, &sub).await.status == SubscriptionStatus::Paused
    })
    .await;
    assert_eq!(notices(&w).await, 1);

    // An operator resumes it; a copy of the 410's delivery that comes again pauses nothing.
    let resumed = w
        .api
        .post(
            &format!(
                "/operator/accounts/{account}/subscriptions/{}/resume",
                sub.subscription_id
            ),
            OPERATOR_TOKEN,
            json!({"reason": "the endpoint is back"}),
        )
        .await;
    resumed.ok();
    assert_eq!(stored(&w, &sub).await.status, SubscriptionStatus::Active);
    assert_eq!(
        w.pipeline.worker.process(&work(&c, &sub)).await.unwrap(),
        WorkOutcome::Skipped("already settled")
    );
    assert_eq!(stored(&w, &sub).await.status, SubscriptionStatus::Active);
    assert_eq!(notices(&w).await, 1, "one notice");
}

/// A subscription retrying a failing endpoint every ten seconds, its delivery after two attempts.
async fn retrying_twice(w: &World, max_retries: u32) -> (Change, Subscription) {
    w.receiver.set_default(Reply::Status(503));
    let (account, sub) = subscribed(w).await;
    let mut s = stored(w, &sub).await;
    s.retry_policy = RetryPolicy::Exponential {
        max_retries,
        retry_delay_secs: 10,
    };
    w.save_subscription(&s).await;
    let c = w.change(&account).await;
    w.pipeline.pump().await.unwrap();
    w.pipeline.advance(10 * SECOND).await.unwrap();
    let d = delivery(w, &c, &sub).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Retrying, 2));
    (c, s)
}

async fn set_max_retries(w: &World, sub: &Subscription, max_retries: u32) {
    let mut s = stored(w, sub).await;
    s.retry_policy = RetryPolicy::Exponential {
        max_retries,
        retry_delay_secs: 10,
    };
    w.save_subscription(&s).await;
}

#[tokio::test]
async fn max_retries_lowered_binds_at_the_next_claim_though_the_worker_keeps_its_configuration() {
    let w = World::new().await;
    let (c, sub) = retrying_twice(&w, 5).await;
    // Lowered to the two attempts made; the worker's cached configuration still says five.
    set_max_retries(&w, &sub, 2).await;
    w.pipeline.advance(20 * SECOND).await.unwrap();

    assert_eq!(
        w.receiver.count(),
        2,
        "no attempt beyond the stored Max Retries"
    );
    let d = delivery(&w, &c, &sub).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Dead, 2));
    assert_eq!(
        d.last_error.as_deref(),
        Some("attempts reached Max Retries (2); no further attempt")
    );
    assert!(d.lease_token.is_none(), "the claim's lease is released");
    assert_eq!(stored(&w, &sub).await.consecutive_dead, 1);
}

#[tokio::test]
async fn max_retries_raised_binds_at_the_next_claim_though_the_worker_keeps_the_lower_one() {
    let w = World::new().await;
    let (c, sub) = retrying_twice(&w, 5).await;
    // The worker caches a bound of two (another delivery's claim loads it), then it is raised.
    set_max_retries(&w, &sub, 2).await;
    w.pipeline.worker.forget_config(&sub.account_id);
    let other = w.change(&sub.account_id).price(7.0).await;
    w.pipeline.pump().await.unwrap();
    assert_eq!(delivery(&w, &other, &sub).await.attempts, 1);
    set_max_retries(&w, &sub, 5).await;
    w.pipeline.advance(20 * SECOND).await.unwrap();

    let d = delivery(&w, &c, &sub).await;
    assert_eq!(
        (d.status, d.attempts),
        (DeliveryStatus::Retrying, 3),
        "the third attempt ran"
    );
}

#[tokio::test]
async fn the_lease_runs_sixty_seconds_from_the_claim_when_the_configuration_is_slow_to_load() {
    let w = World::new().await;
    let (account, sub) = subscribed(&w).await;
    // The change is published but not yet worked: the worker has no configuration cached.
    let c = w.change(&account).await;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    w.receiver
        .set_default(Reply::Hang(Duration::from_millis(600)));
    let slow = Matcher {
        operation: "Query".into(),
        body_contains: Some(account.to_string()),
    };
    (w.pipeline.stack.faults).inject_matching(slow, Fault::Latency(Duration::from_millis(400)), 1);

    let claimed_by = w.pipeline.now().plus(Duration::from_secs(30));
    let attempt = async { w.pipeline.worker.process(&work(&c, &sub)).await.unwrap() };
    let meanwhile = async {
        // While the configuration loads, thirty seconds pass on the worker's clock.
        tokio::time::sleep(Duration::from_millis(150)).await;
        w.pipeline.clock.advance(Duration::from_secs(30));
        // During the attempt, the lease is read as stored.
        tokio::time::sleep(Duration::from_millis(550)).await;
        delivery(&w, &c, &sub).await.lease_until
    };
    let (_, lease) = tokio::join!(attempt, meanwhile);
    assert_eq!(
        lease,
        Some(claimed_by.plus(LEASE)),
        "sixty seconds from the claim"
    );
    assert_eq!(delivery(&w, &c, &sub).await.attempt_log[0].at, claimed_by);
}
