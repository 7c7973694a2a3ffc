//! The event monitor against the emulator: every row of its three tables (event status, internal
//! status, and the words of the Delivery log: `docs/lifecycles.md#event-status`,
//! `#internal-status`, `#delivery-log-words`), the roll-up pass and its prompt trigger, poll
//! deliveries, unknown methods, per-subscriber retry settings, the sixty-second lease, retention,
//! reconciliation across invocations, and the monitor's API (account-scoped).

use aws_sdk_dynamodb::types::AttributeValue;
use axum::http::{Method, StatusCode};
use local::receiver::{Receiver, Reply};
use local::testkit::api::OPERATOR_TOKEN;
use local::testkit::id;
use local::testkit::{sample, work, World};
use serde_json::{json, Value};
use shared::delivery::rollup::{reopen_event, ReopenOutcome, RollUpOutcome};
use shared::delivery::worker::internal::{InternalCall, InternalHandler, InternalRegistry};
use shared::delivery::worker::webhook::WebhookAdapter;
use shared::delivery::worker::{DeliveryWorker, WorkOutcome};
use shared::domain::change::Change;
use shared::domain::classify::AttemptClass;
use shared::domain::delivery_method::DeliveryMethod;
use shared::domain::event::{EventStatus, EventTrigger, InternalStatus, RETENTION};
use shared::domain::integration_delivery::{DeliveryStatus, TransmitStatus};
use shared::domain::retention::ttl_seconds;
use shared::domain::retry::RetryPolicy;
use shared::domain::target::{Incomplete, Target};
use shared::domain::time::{Timestamp, DAY, MINUTE, SECOND};
use shared::operations::event_monitor::{event_with_deliveries, list_events, EventQuery};
use shared::reconcile::{RunKind, SettleReport};
use shared::store::delivery::Delivery;
use shared::store::event::EventRecord;
use shared::store::keys;
use shared::store::subscription::Subscription;
use std::sync::Arc;
use std::time::Duration;

// ------------------------------------------------------------------------------------ helpers

async fn event(w: &World, c: &Change) -> EventRecord {
    w.pipeline
        .event(&c.account_id, &c.change_id)
        .await
        .expect("the event exists")
}

async fn delivery(w: &World, c: &Change, sub: &Subscription) -> Delivery {
    let item = w
        .pipeline
        .get(
            &keys::event_pk(&c.account_id, &c.change_id),
            &keys::delivery_sk(&sub.subscription_id),
        )
        .await
        .expect("the delivery exists");
    Delivery::from_item(item).unwrap()
}

async fn transmit(w: &World, c: &Change, sub: &Subscription) -> Option<TransmitStatus> {
    delivery(w, c, sub).await.transmit_status(w.pipeline.now())
}

async fn roll_up(w: &World, c: &Change) -> RollUpOutcome {
    w.pipeline
        .rollup
        .roll_up_event(&c.account_id, &c.change_id)
        .await
        .unwrap()
}

fn moved(from: EventStatus, to: EventStatus) -> RollUpOutcome {
    RollUpOutcome::Moved { from, to }
}

/// Asserts the event is final with its retention (`docs/lifecycles.md#event-status`): off the
/// roll-up index, `expires_at` (epoch seconds) thirty days after it became final, and no delivery
/// expiring before it.
async fn assert_final(w: &World, c: &Change, status: EventStatus, trigger: EventTrigger) {
    let e = event(w, c).await;
    assert_eq!(e.status(), status);
    assert_eq!(e.status_trigger, Some(trigger));
    assert!(
        !e.on_rollup_index(),
        "a final event leaves the roll-up index"
    );
    let finalized = e.finalized_at.expect("finalized_at");
    let ttl = ttl_seconds(status, finalized).unwrap();
    assert_eq!(e.expires_at, Some(ttl));
    assert_eq!(ttl, finalized.plus(RETENTION).seconds());
    let partition = shared::delivery::rollup::read_partition(
        &w.pipeline.stack.clients.dynamo,
        &w.pipeline.stack.config.delivery_table,
        &keys::event_pk(&c.account_id, &c.change_id),
    )
    .await
    .unwrap();
    // Deliveries never vanish before their event; a push delivery stamped its own expiry when it
    // ended, at most the margin later.
    let margin = shared::domain::event::DELIVERY_RETENTION_MARGIN.as_secs() as i64;
    for d in &partition.deliveries {
        let own = d
            .expires_at
            .expect("every delivery of a final event expires");
        assert!(
            own >= ttl && own <= ttl + margin,
            "delivery expiry {own} vs event {ttl}"
        );
    }
}

async fn assert_open(w: &World, c: &Change, status: EventStatus) {
    let e = event(w, c).await;
    assert_eq!(e.status(), status);
    // The roll-up walk finds every open event: on the roll-up index, or (a new event nothing
    // has rolled up yet) on its account's listing, which the walk reads and enrols it from.
    assert!(
        e.on_rollup_index() || (status == EventStatus::New && e.list_key.is_some()),
        "an open event stays where the roll-up walk finds it"
    );
    assert_eq!(e.expires_at, None, "new and partial events never expire");
}

// ----------------------------------------------------------------------- event status moves

#[tokio::test]
async fn new_to_skipped_when_no_active_subscriber_exists() {
    let w = World::new().await;
    // One account without subscriptions, one whose only subscription is paused.
    let lonely = w.account().await.account_id;
    let paused_account = w.account().await.account_id;
    let r = &w.receiver;
    let i = w.integration(&paused_account).await;
    let sub = w.subscribe(&i).paused().await;

    let a = w.change(&lonely).await;
    let b = w.change(&paused_account).await;
    w.pipeline.ingest_pending().await.unwrap();
    assert_open(&w, &a, EventStatus::New).await;
    assert_eq!(event(&w, &a).await.internal_status, InternalStatus::New);

    let pass = w.pipeline.roll_up_pass().await.unwrap();
    assert_eq!((pass.examined, pass.to_skipped), (2, 2));
    for c in [&a, &b] {
        assert_final(
            &w,
            c,
            EventStatus::Skipped,
            EventTrigger::NoSubscriberTookIt,
        )
        .await;
    }
    assert!(w
        .pipeline
        .delivery(&paused_account, &b.change_id, &sub.subscription_id)
        .await
        .is_none());
    assert_eq!(r.count(), 0);
    // Final events are not looked at again.
    assert_eq!(w.pipeline.roll_up_pass().await.unwrap().examined, 0);
}

#[tokio::test]
async fn new_to_skipped_when_no_active_subscriber_matches_the_event() {
    let w = World::new().await;
    let r = &w.receiver;
    let acct = w.account().await.account_id;
    let i = w.integration(&acct).await;
    // Wrong record type (no delivery at all) and a filter that rejects the change
    // (a skipped_filter delivery: it did not take the event).
    let _orders = w.subscribe(&i).record_types(&["order"]).await;
    let expensive = w
        .subscribe(&i)
        .filter(json!({"field": "record.price", "gt": 100}))
        .await;
    let c = w.change(&acct).await;
    // The whole pipeline: the prompt roll-up on the event's insert settles it.
    w.pipeline.pump().await.unwrap();
    let d = delivery(&w, &c, &expensive).await;
    assert_eq!(d.status, DeliveryStatus::SkippedFilter);
    assert_eq!(
        d.transmit_status(w.pipeline.now()),
        None,
        "never a delivery in the Delivery log's sense"
    );
    assert_final(
        &w,
        &c,
        EventStatus::Skipped,
        EventTrigger::NoSubscriberTookIt,
    )
    .await;
    assert_eq!(r.count(), 0);
}

#[tokio::test]
async fn partial_to_skipped_when_the_pass_finds_no_subscriber_took_the_event() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    // An event some earlier pass left partial (e.g. before ingest's records said who took it).
    w.update(
        &keys::event_pk(&acct, &c.change_id),
        keys::EVENT_SK,
        "SET event_status = :p",
        &[(":p", AttributeValue::S("partial".into()))],
    )
    .await;
    assert_eq!(
        roll_up(&w, &c).await,
        moved(EventStatus::Partial, EventStatus::Skipped)
    );
    assert_final(
        &w,
        &c,
        EventStatus::Skipped,
        EventTrigger::NoSubscriberTookIt,
    )
    .await;
}

#[tokio::test]
async fn new_to_partial_while_a_push_delivery_waits_and_picked_up_again_every_pass() {
    let w = World::new().await;
    let r = &w.receiver;
    r.set_default(Reply::Status(503));
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.worker.process(&work(&c, &sub)).await.unwrap();
    assert_eq!(
        delivery(&w, &c, &sub).await.status,
        DeliveryStatus::Retrying
    );
    assert_eq!(transmit(&w, &c, &sub).await, Some(TransmitStatus::Pending));

    let first = w.pipeline.roll_up_pass().await.unwrap();
    assert_eq!((first.examined, first.to_partial), (1, 1));
    assert_open(&w, &c, EventStatus::Partial).await;
    assert_eq!(
        event(&w, &c).await.status_trigger,
        Some(EventTrigger::DeliveriesStillWaiting)
    );
    // partial → partial: looked at again on every pass until final.
    for _ in 0..2 {
        let again = w.pipeline.roll_up_pass().await.unwrap();
        assert_eq!((again.examined, again.unchanged, again.moved()), (1, 1, 0));
        assert_open(&w, &c, EventStatus::Partial).await;
    }
}

#[tokio::test]
async fn new_to_failed_when_nothing_waits_and_a_delivery_failed() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    // One subscriber is served, the other refuses permanently.
    let ok = w.subscribe(&w.integration(&acct).await).await;
    let other = Receiver::start().await;
    other.set_default(Reply::Status(410));
    let refused = w.subscribe(&w.integration(&acct).to(&other).await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.worker.process(&work(&c, &ok)).await.unwrap();
    w.pipeline
        .worker
        .process(&work(&c, &refused))
        .await
        .unwrap();
    assert_eq!(transmit(&w, &c, &ok).await, Some(TransmitStatus::Sent));
    assert_eq!(
        transmit(&w, &c, &refused).await,
        Some(TransmitStatus::Failed)
    );
    assert_eq!(
        roll_up(&w, &c).await,
        moved(EventStatus::New, EventStatus::Failed)
    );
    assert_final(
        &w,
        &c,
        EventStatus::Failed,
        EventTrigger::NothingWaitsSomeFailed,
    )
    .await;
}

#[tokio::test]
async fn partial_to_failed_when_the_last_retry_fails_promptly() {
    let w = World::new().await;
    let r = &w.receiver;
    r.set_default(Reply::Status(503));
    let acct = w.account().await.account_id;
    let sub = w
        .subscribe(&w.integration(&acct).await)
        .policy(RetryPolicy::Exponential {
            max_retries: 2,
            retry_delay_secs: 30,
        })
        .await;
    let c = w.change(&acct).await;
    // Ingest, dispatch (the event's insert rolls it up: partial), first attempt fails.
    w.pipeline.pump().await.unwrap();
    assert_open(&w, &c, EventStatus::Partial).await;
    // The second and last attempt fails: dead, and the prompt roll-up makes the event failed
    // without waiting for a pass.
    w.pipeline.advance(Duration::from_secs(30)).await.unwrap();
    assert_eq!(delivery(&w, &c, &sub).await.status, DeliveryStatus::Dead);
    assert_final(
        &w,
        &c,
        EventStatus::Failed,
        EventTrigger::NothingWaitsSomeFailed,
    )
    .await;
}

#[tokio::test]
async fn new_to_sent_when_nothing_waits_and_nothing_failed() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let a = w.subscribe(&w.integration(&acct).await).await;
    let b = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    for sub in [&a, &b] {
        w.pipeline.worker.process(&work(&c, sub)).await.unwrap();
    }
    let pass = w.pipeline.roll_up_pass().await.unwrap();
    assert_eq!((pass.examined, pass.to_sent), (1, 1));
    assert_final(
        &w,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
}

#[tokio::test]
async fn partial_to_sent_when_a_retry_succeeds_promptly() {
    let w = World::new().await;
    let r = &w.receiver;
    r.script([Reply::Status(503)]);
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    assert_open(&w, &c, EventStatus::Partial).await;
    w.pipeline.advance(MINUTE).await.unwrap();
    assert_eq!(
        delivery(&w, &c, &sub).await.status,
        DeliveryStatus::Delivered
    );
    assert_final(
        &w,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
}

#[tokio::test]
async fn a_roll_up_waits_for_ingest_to_record_every_delivery() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    // As if ingest had written the event but not yet its delivery.
    let pk = keys::event_pk(&acct, &c.change_id);
    w.pipeline
        .stack
        .clients
        .dynamo
        .delete_item()
        .table_name(&w.pipeline.stack.config.delivery_table)
        .key("pk", AttributeValue::S(pk))
        .key(
            "sk",
            AttributeValue::S(keys::delivery_sk(&sub.subscription_id)),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(roll_up(&w, &c).await, RollUpOutcome::Deferred);
    assert_open(&w, &c, EventStatus::New).await;
}

#[tokio::test]
async fn the_prompt_roll_up_settles_an_event_from_its_only_delivery_without_reading_and_reads_when_it_has_more(
) {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let only = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    assert!(delivery(&w, &c, &only).await.sole);
    w.pipeline.dispatch_pending().await.unwrap();
    w.pipeline.work_pending().await.unwrap();
    assert_eq!(
        delivery(&w, &c, &only).await.status,
        DeliveryStatus::Delivered
    );
    assert_open(&w, &c, EventStatus::New).await;
    // The dispatcher sees the delivery settle: one conditional write of the event, no read.
    w.pipeline.stack.meter.reset();
    assert_eq!(w.pipeline.dispatch_pending().await.unwrap(), 1);
    assert_eq!(w.dynamo_requests(), [("UpdateItem".to_string(), 1)]);
    assert_final(
        &w,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;

    // A change two subscriptions take: neither delivery decides the event alone, so the roll-up
    // reads the partition (once for the batch that holds both settlings) and then moves it.
    let other = w.account().await.account_id;
    let subs = [
        w.subscribe(&w.integration(&other).await).await,
        w.subscribe(&w.integration(&other).await).await,
    ];
    let two = w.change(&other).await;
    w.pipeline.ingest_pending().await.unwrap();
    for sub in &subs {
        assert!(!delivery(&w, &two, sub).await.sole);
    }
    w.pipeline.dispatch_pending().await.unwrap();
    w.pipeline.work_pending().await.unwrap();
    w.pipeline.stack.meter.reset();
    w.pipeline.dispatch_pending().await.unwrap();
    let requests = w.dynamo_requests();
    assert!(
        requests.contains(&("Query".to_string(), 1))
            && requests.contains(&("UpdateItem".to_string(), 1)),
        "one read of the partition per batch, then the move: {requests:?}"
    );
    assert_final(
        &w,
        &two,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
}

#[tokio::test]
async fn an_only_deliverys_settling_seen_after_an_operator_restart_leaves_its_event_to_the_restarted_attempt(
) {
    let w = World::new().await;
    w.receiver.set_default(Reply::Status(410));
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    w.pipeline.work_pending().await.unwrap();
    let dead = delivery(&w, &c, &sub).await;
    assert_eq!((dead.status, dead.sole), (DeliveryStatus::Dead, true));
    // An operator retries it before the dispatcher has seen it die: the delivery waits again and
    // the still-new event is fenced.
    w.receiver.set_default(Reply::Status(200));
    let path = format!(
        "/operator/accounts/{acct}/subscriptions/{}/deliveries/{}/retry",
        sub.subscription_id, c.change_id
    );
    let retried = w
        .api
        .post(
            &path,
            OPERATOR_TOKEN,
            json!({"reason": "the endpoint is back"}),
        )
        .await;
    assert_eq!(retried.ok()["event"], "already_open");
    assert_eq!(event(&w, &c).await.reopens, Some(1));
    // The image of its death alone no longer decides the event: the write it would make is
    // refused by the fence, and the roll-up that reads instead finds the delivery waiting.
    let outcome = w
        .pipeline
        .rollup
        .roll_up_settled(&dead, DeliveryStatus::Pending)
        .await
        .unwrap();
    assert!(
        !matches!(outcome, RollUpOutcome::Moved { to, .. } if to.is_final()),
        "{outcome:?}"
    );
    let open = event(&w, &c).await;
    assert!(!open.status().is_final(), "{:?}", open.status());
    // The dispatcher's batch holds the death and then the restart: the event stays open, and
    // the restarted attempt settles it.
    w.pipeline.dispatch_pending().await.unwrap();
    assert!(!event(&w, &c).await.status().is_final());
    w.pipeline.advance(MINUTE).await.unwrap();
    let delivered = delivery(&w, &c, &sub).await;
    assert_eq!(
        (delivered.status, delivered.restarts),
        (DeliveryStatus::Delivered, 1)
    );
    assert_final(
        &w,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
}

// --------------------------------------------------------------------------- poll deliveries

#[tokio::test]
async fn an_event_only_poll_subscribers_wait_for_becomes_sent_while_its_delivery_stays_pending() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).poll().await).await;
    let c = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(d.status, DeliveryStatus::Pending);
    assert_eq!(
        d.transmit_status(w.pipeline.now()),
        Some(TransmitStatus::Pending)
    );
    assert_final(
        &w,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
    // Nobody pushes a poll delivery: it is still pending after a day of sweeps.
    w.pipeline.advance(DAY).await.unwrap();
    assert_eq!(delivery(&w, &c, &sub).await.status, DeliveryStatus::Pending);
}

#[tokio::test]
async fn poll_deliveries_are_left_out_of_a_mixed_event() {
    let w = World::new().await;
    let r = &w.receiver;
    r.set_default(Reply::Status(400));
    let acct = w.account().await.account_id;
    let poll = w.subscribe(&w.integration(&acct).poll().await).await;
    let push = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    // The poll delivery does not count; the push one has not been tried yet: partial.
    assert_eq!(
        roll_up(&w, &c).await,
        moved(EventStatus::New, EventStatus::Partial)
    );
    w.pipeline.worker.process(&work(&c, &push)).await.unwrap();
    assert_eq!(
        roll_up(&w, &c).await,
        moved(EventStatus::Partial, EventStatus::Failed)
    );
    assert_eq!(transmit(&w, &c, &poll).await, Some(TransmitStatus::Pending));
}

// ----------------------------------------------------------------------------- internal status

#[tokio::test]
async fn internal_status_is_new_until_a_built_in_subscriber_handles_the_event_then_done() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).internal().await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    assert_eq!(event(&w, &c).await.internal_status, InternalStatus::New);
    w.pipeline.pump().await.unwrap();
    let e = event(&w, &c).await;
    assert_eq!(e.internal_status, InternalStatus::Done);
    assert!(
        e.internal_result.is_some(),
        "the handler's result is stored"
    );
    assert_eq!(transmit(&w, &c, &sub).await, Some(TransmitStatus::Sent));
    // Internal status plays no part in the event's status or its retention.
    assert_final(
        &w,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
}

/// A built-in handler that always fails with the given class.
struct Broken(AttemptClass);

// `InternalHandler` is an `async_trait`; this is the method that macro would write.
impl InternalHandler for Broken {
    fn name(&self) -> &'static str {
        "record_snapshot"
    }
    fn handle<'a, 'b, 'f>(
        &'a self,
        _call: InternalCall<'b>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Value, (AttemptClass, String)>> + Send + 'f>,
    >
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        let class = self.0;
        Box::pin(async move { Err((class, "snapshot store unavailable".to_string())) })
    }
}

fn worker_with(w: &World, handler: Broken) -> DeliveryWorker {
    let mut registry = InternalRegistry::default();
    registry.register(Arc::new(handler));
    w.worker_with(
        WebhookAdapter::new(
            shared::domain::ssrf::TargetPolicy::LOCAL_DEMO,
            Duration::from_secs(5),
        ),
        registry,
    )
}

#[tokio::test]
async fn a_failed_in_house_handling_leaves_internal_status_new() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).internal().await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    let flaky = worker_with(&w, Broken(AttemptClass::Transient { retry_after: None }));
    flaky.process(&work(&c, &sub)).await.unwrap();
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(d.status, DeliveryStatus::Retrying);
    assert_eq!(d.last_error.as_deref(), Some("snapshot store unavailable"));
    assert_eq!(event(&w, &c).await.internal_status, InternalStatus::New);
    assert_eq!(
        roll_up(&w, &c).await,
        moved(EventStatus::New, EventStatus::Partial)
    );

    w.pipeline.clock.advance(MINUTE);
    let broken = worker_with(&w, Broken(AttemptClass::Permanent));
    broken.process(&work(&c, &sub)).await.unwrap();
    assert_eq!(delivery(&w, &c, &sub).await.status, DeliveryStatus::Dead);
    assert_eq!(event(&w, &c).await.internal_status, InternalStatus::New);
    assert_eq!(
        roll_up(&w, &c).await,
        moved(EventStatus::Partial, EventStatus::Failed)
    );
}

// ----------------------------------------------------------------------- delivery status moves

#[tokio::test]
async fn a_new_delivery_row_is_pending() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(
        d.transmit_status(w.pipeline.now()),
        Some(TransmitStatus::Pending)
    );
    assert_eq!((d.attempts, d.last_error.as_deref()), (0, None));
}

#[tokio::test]
async fn pending_to_processing_when_a_worker_claims_it_with_a_sixty_second_lease() {
    let w = World::new().await;
    let r = &w.receiver;
    // The adapter takes a moment: long enough to look at the delivery while it is processing.
    r.script([Reply::Hang(Duration::from_millis(1500))]);
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    let observe = async {
        loop {
            let d = delivery(&w, &c, &sub).await;
            if d.lease_until.is_some() {
                // While processing the event waits: partial, not sent.
                let outcome = roll_up(&w, &c).await;
                return (d, outcome);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let job = work(&c, &sub);
    let (outcome, (seen, rolled)) = tokio::join!(w.pipeline.worker.process(&job), observe);
    assert_eq!(
        seen.transmit_status(w.pipeline.now()),
        Some(TransmitStatus::Processing)
    );
    assert_eq!(
        seen.lease_until,
        Some(w.pipeline.now().plus(Duration::from_secs(60)))
    );
    assert_eq!(seen.attempts, 0, "attempts count when the attempt ends");
    assert_eq!(rolled, moved(EventStatus::New, EventStatus::Partial));
    assert_eq!(
        outcome.unwrap(),
        WorkOutcome::Attempted {
            number: 1,
            status: DeliveryStatus::Delivered
        }
    );
    assert_eq!(transmit(&w, &c, &sub).await, Some(TransmitStatus::Sent));
}

#[tokio::test]
async fn processing_to_sent_counts_the_attempt_clears_the_last_error_and_stores_the_http_code() {
    let w = World::new().await;
    let r = &w.receiver;
    r.script([
        Reply::Full {
            status: 503,
            headers: vec![],
            body: "busy".into(),
        },
        Reply::Status(201),
    ]);
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(
        (d.attempts, d.last_error.as_deref(), d.last_http_status),
        (1, Some("busy"), Some(503))
    );
    w.pipeline.advance(MINUTE).await.unwrap();
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(
        d.transmit_status(w.pipeline.now()),
        Some(TransmitStatus::Sent)
    );
    assert_eq!(
        (d.attempts, d.last_error.as_deref(), d.last_http_status),
        (2, None, Some(201))
    );
}

#[tokio::test]
async fn per_subscriber_retry_settings_wait_retry_delay_times_two_to_the_n_up_to_max_retries() {
    let w = World::new().await;
    let r = &w.receiver;
    r.set_default(Reply::Status(503));
    let acct = w.account().await.account_id;
    let sub = w
        .subscribe(&w.integration(&acct).await)
        .policy(RetryPolicy::Exponential {
            max_retries: 4,
            retry_delay_secs: 10,
        })
        .await;
    let c = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    // processing → pending after each failure while attempts < Max Retries, waiting 10 × 2^n.
    for (n, wait_secs) in [10u64, 20, 40].into_iter().enumerate() {
        let attempts = n as u32 + 1;
        let d = delivery(&w, &c, &sub).await;
        assert_eq!(d.attempts, attempts);
        assert_eq!(
            d.transmit_status(w.pipeline.now()),
            Some(TransmitStatus::Pending)
        );
        let wait = Duration::from_secs(wait_secs);
        assert_eq!(
            d.not_before,
            Some(d.attempt_log.last().unwrap().at.plus(wait))
        );
        // Not claimed before the wait has passed, even if a stray message arrives (beyond the
        // worker's two seconds of tolerance for early SQS delays) or the sweep runs.
        w.pipeline.clock.advance(wait - 3 * SECOND);
        assert_eq!(
            w.pipeline.worker.process(&work(&c, &sub)).await.unwrap(),
            WorkOutcome::Skipped("not yet due")
        );
        w.pipeline.advance(2 * SECOND).await.unwrap();
        assert_eq!(r.count() as u32, attempts);
        w.pipeline.advance(SECOND).await.unwrap();
        assert_eq!(r.count() as u32, attempts + 1);
    }
    // processing → failed: the fourth attempt reached Max Retries.
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(d.attempts, 4);
    assert_eq!(d.status, DeliveryStatus::Dead);
    assert_eq!(
        d.transmit_status(w.pipeline.now()),
        Some(TransmitStatus::Failed)
    );
    w.pipeline.advance(DAY).await.unwrap();
    assert_eq!(r.count(), 4, "no further attempt after the delivery failed");
    assert_final(
        &w,
        &c,
        EventStatus::Failed,
        EventTrigger::NothingWaitsSomeFailed,
    )
    .await;
}

#[tokio::test]
async fn pending_to_failed_when_the_delivery_method_is_unknown() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let queue = w
        .integration(&acct)
        .method(DeliveryMethod::Unknown("queue".into()))
        .await;
    let sub = w.subscribe(&queue).await;
    let c = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(d.status, DeliveryStatus::Failed);
    assert_eq!(
        d.transmit_status(w.pipeline.now()),
        Some(TransmitStatus::Failed)
    );
    assert_eq!(
        d.last_error.as_deref(),
        Some("unknown delivery method queue")
    );
    assert_final(
        &w,
        &c,
        EventStatus::Failed,
        EventTrigger::NothingWaitsSomeFailed,
    )
    .await;
}

#[tokio::test]
async fn pending_to_failed_when_a_stored_webhook_has_no_url() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let mut hook = w.integration(&acct).await;
    let Target::Webhook { secret, .. } = hook.target.clone() else {
        panic!("the default integration is a webhook")
    };
    hook.target = Target::Incomplete(Incomplete::Webhook {
        url: None,
        secret: Some(secret),
    });
    w.save_integration(&hook).await;
    let sub = w.subscribe(&hook).await;
    let c = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(d.status, DeliveryStatus::Failed);
    assert_eq!(
        d.last_error.as_deref(),
        Some("webhook URL or signing secret missing")
    );
    assert_eq!(w.receiver.count(), 0);
}

#[tokio::test]
async fn a_dead_workers_delivery_is_taken_again_after_its_sixty_second_lease() {
    let w = World::new().await;
    let r = &w.receiver;
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    // A worker claims attempt 1 (as the worker's claim writes it) and dies.
    w.lease(
        &c,
        &sub.subscription_id,
        w.pipeline.now().plus(Duration::from_secs(60)),
        "dead-worker",
    )
    .await;
    assert_eq!(
        transmit(&w, &c, &sub).await,
        Some(TransmitStatus::Processing)
    );
    w.pipeline.pump().await.unwrap();
    assert_eq!(r.count(), 0, "nobody else takes a leased delivery");
    w.pipeline.clock.advance(Duration::from_secs(59));
    assert_eq!(
        w.pipeline.worker.process(&work(&c, &sub)).await.unwrap(),
        WorkOutcome::Skipped("leased by another worker")
    );
    // Nothing has finished yet, so nothing triggered a prompt roll-up; the pass moves it.
    assert_open(&w, &c, EventStatus::New).await;
    w.pipeline.roll_up_pass().await.unwrap();
    assert_open(&w, &c, EventStatus::Partial).await;
    // The lease lapses: pending again in the Delivery log's words. The dead worker's own message,
    // never deleted, comes back after the queue's visibility timeout (120 s) and a new worker
    // takes attempt 1 over.
    w.pipeline.clock.advance(SECOND);
    assert_eq!(transmit(&w, &c, &sub).await, Some(TransmitStatus::Pending));
    w.pipeline.clock.advance(Duration::from_secs(60));
    assert!(matches!(
        w.pipeline.worker.process(&work(&c, &sub)).await.unwrap(),
        WorkOutcome::Attempted { number: 1, .. }
    ));
    w.pipeline.pump().await.unwrap();
    assert_eq!(r.count(), 1);
    let d = delivery(&w, &c, &sub).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Delivered, 1));
    assert_final(
        &w,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
}

// ----------------------------------------------------------------------- the pass and the walk

/// `n` events of an account without subscribers, ingested in chunks a second apart (so "oldest
/// first" is observable), without the prompt roll-up.
async fn backlog(w: &World, acct: &str, n: usize, chunk: usize) -> Vec<Vec<Change>> {
    let mut chunks = Vec::new();
    for start in (0..n).step_by(chunk) {
        let mut these = Vec::new();
        for _ in start..(start + chunk).min(n) {
            these.push(w.change(&id(acct)).await);
        }
        w.pipeline.ingest_pending().await.unwrap();
        w.pipeline.clock.advance(SECOND);
        chunks.push(these);
    }
    chunks
}

async fn statuses(w: &World, changes: &[Change]) -> Vec<EventStatus> {
    let mut out = Vec::new();
    for c in changes {
        out.push(event(w, c).await.status());
    }
    out
}

#[tokio::test]
async fn a_pass_takes_at_most_a_hundred_events_oldest_first_and_a_250_event_backlog_takes_three() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let chunks = backlog(&w, acct.as_str(), 250, 50).await;
    let expected_finals = [100, 200, 250];
    for (pass_no, finals) in expected_finals.into_iter().enumerate() {
        let pass = w.pipeline.roll_up_pass().await.unwrap();
        let this_pass = if pass_no < 2 { 100 } else { 50 };
        assert_eq!((pass.examined, pass.to_skipped), (this_pass, this_pass));
        // Exactly the oldest `finals` events are final.
        for (i, chunk) in chunks.iter().enumerate() {
            let want = if (i + 1) * 50 <= finals {
                EventStatus::Skipped
            } else {
                EventStatus::New
            };
            assert!(
                statuses(&w, chunk).await.iter().all(|s| *s == want),
                "after pass {} chunk {i} should be {want}",
                pass_no + 1
            );
        }
    }
    assert_eq!(w.pipeline.roll_up_pass().await.unwrap().examined, 0);
}

#[tokio::test]
async fn a_pass_and_prompt_roll_ups_racing_move_each_event_exactly_once() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let poll = w.subscribe(&w.integration(&acct).poll().await).await;
    let changes: Vec<Change> = backlog(&w, acct.as_str(), 40, 40).await.concat();
    let prompt = async {
        let mut outcomes = Vec::new();
        for c in changes.iter().rev() {
            outcomes.push(roll_up(&w, c).await);
        }
        outcomes
    };
    let (pass_a, pass_b, outcomes) =
        tokio::join!(w.pipeline.roll_up_pass(), w.pipeline.roll_up_pass(), prompt);
    let prompt_moves = outcomes
        .iter()
        .filter(|o| matches!(o, RollUpOutcome::Moved { .. }))
        .count() as u32;
    let (a, b) = (pass_a.unwrap(), pass_b.unwrap());
    assert_eq!(
        a.moved() + b.moved() + prompt_moves,
        40,
        "one move per event"
    );
    assert_eq!(a.errors + b.errors, 0);
    for c in &changes {
        assert_final(
            &w,
            c,
            EventStatus::Sent,
            EventTrigger::NothingWaitsNoneFailed,
        )
        .await;
        assert_eq!(transmit(&w, c, &poll).await, Some(TransmitStatus::Pending));
    }
}

// -------------------------------------------------------------------------------- retention

#[tokio::test]
async fn terminal_events_expire_thirty_days_after_becoming_final_and_reads_hide_them_before_ttl() {
    let w = World::new().await;
    let r = &w.receiver;
    r.script([Reply::Status(200), Reply::Status(503)]);
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).await).await;
    let sent = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    let waiting = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    assert_final(
        &w,
        &sent,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
    assert_open(&w, &waiting, EventStatus::Partial).await;
    assert_eq!(delivery(&w, &waiting, &sub).await.expires_at, None);

    let (dynamo, table) = (
        &w.pipeline.stack.clients.dynamo,
        w.pipeline.stack.config.delivery_table.as_str(),
    );
    let acct = acct.as_str();
    let visible = |now: Timestamp| {
        let q = EventQuery {
            limit: 50,
            ..EventQuery::default()
        };
        async move {
            let page = list_events(dynamo, table, &id(acct), &q, now)
                .await
                .unwrap();
            page.items
                .iter()
                .map(|e| e.change_id.clone())
                .collect::<Vec<_>>()
        }
    };
    let finalized = event(&w, &sent).await.finalized_at.unwrap();
    let just_before = finalized.plus(RETENTION).minus(SECOND);
    assert_eq!(visible(just_before).await.len(), 2);
    assert!(
        event_with_deliveries(dynamo, table, &id(acct), &sent.change_id, just_before)
            .await
            .unwrap()
            .is_some()
    );
    // Thirty days on: TTL has not deleted anything yet (the emulator never does, AWS lags), but
    // every read treats the expired event as gone; the partial one never expires.
    let expired = finalized.plus(RETENTION).plus(SECOND);
    assert_eq!(visible(expired).await, vec![waiting.change_id.clone()]);
    assert!(
        event_with_deliveries(dynamo, table, &id(acct), &sent.change_id, expired)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        w.pipeline.event(&id(acct), &sent.change_id).await.is_some(),
        "still stored"
    );
    assert!(event_with_deliveries(
        dynamo,
        table,
        &id(acct),
        &waiting.change_id,
        expired.plus(RETENTION)
    )
    .await
    .unwrap()
    .is_some());
}

#[tokio::test]
async fn an_operator_restart_reopens_a_final_event_onto_the_roll_up_index() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let _sub = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    assert_final(
        &w,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
    let (dynamo, table) = (
        &w.pipeline.stack.clients.dynamo,
        w.pipeline.stack.config.delivery_table.as_str(),
    );
    let outcome = reopen_event(dynamo, table, &acct, &c.change_id, w.pipeline.now())
        .await
        .unwrap();
    assert_eq!(
        outcome,
        ReopenOutcome::Reopened {
            from: EventStatus::Sent
        }
    );
    let e = event(&w, &c).await;
    assert_open(&w, &c, EventStatus::Partial).await;
    assert_eq!(e.status_trigger, Some(EventTrigger::OperatorRestartReopens));
    assert_eq!((e.reopens, e.finalized_at), (Some(1), None));
    let partition = shared::delivery::rollup::read_partition(
        dynamo,
        table,
        &keys::event_pk(&acct, &c.change_id),
    )
    .await
    .unwrap();
    assert!(partition.deliveries.iter().all(|d| d.expires_at.is_none()));
    // Open already: only the fence moves, so a roll-up decided before the restart cannot land.
    assert_eq!(
        reopen_event(dynamo, table, &acct, &c.change_id, w.pipeline.now())
            .await
            .unwrap(),
        ReopenOutcome::AlreadyOpen {
            status: EventStatus::Partial
        }
    );
    assert_eq!(event(&w, &c).await.reopens, Some(2));
    // The next pass settles it again.
    assert_eq!(w.pipeline.roll_up_pass().await.unwrap().to_sent, 1);
    assert_final(
        &w,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;

    // skipped is never reopened.
    let nobody = w.account().await.account_id;
    let s = w.change(&nobody).await;
    w.pipeline.pump().await.unwrap();
    assert_eq!(
        reopen_event(dynamo, table, &nobody, &s.change_id, w.pipeline.now())
            .await
            .unwrap(),
        ReopenOutcome::NotReopenable {
            status: EventStatus::Skipped
        }
    );
    assert_eq!(
        reopen_event(
            dynamo,
            table,
            &nobody,
            &id("01JDX00000000000000000N0NE"),
            w.pipeline.now()
        )
        .await
        .unwrap(),
        ReopenOutcome::Missing
    );
}

// --------------------------------------------------------------------------- reconciliation

#[tokio::test]
async fn the_roll_up_walk_enrols_open_events_from_the_account_listings_and_reads_each_window_once()
{
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let other = w.account().await.account_id;
    w.subscribe(&w.integration(&acct).await).await;
    // Ingested, never dispatched: nothing rolls it up promptly, and it is not on the index.
    let open = w.change(&acct).await;
    w.pipeline.ingest_pending().await.unwrap();
    assert!(!event(&w, &open).await.on_rollup_index());
    let (dynamo, table) = (
        &w.pipeline.stack.clients.dynamo,
        w.pipeline.stack.config.delivery_table.as_str(),
    );
    assert_eq!(
        shared::store::walk_mark::get(dynamo, table).await.unwrap(),
        None
    );

    w.pipeline.clock.advance(2 * MINUTE);
    let first = w.pipeline.rollup.enrol_open(None).await.unwrap();
    assert!(first.complete);
    assert_eq!(
        (first.accounts, first.listed, first.enrolled),
        (2, 1, 1),
        "both accounts read, the open event enrolled"
    );
    assert!(event(&w, &open).await.on_rollup_index());
    let mark = w.pipeline.now();
    assert_eq!(
        shared::store::walk_mark::get(dynamo, table).await.unwrap(),
        Some(mark)
    );

    // An event written as the walk read (its listing entry may show late) is in the next
    // walk's window; the one before the overlap is not read again.
    let newer = w.change(&other).await;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.clock.advance(Duration::from_secs(30));
    let second = w.pipeline.rollup.enrol_open(None).await.unwrap();
    assert_eq!(
        (second.listed, second.enrolled),
        (1, 1),
        "only the new event, open too (nobody subscribed, and nothing rolled it up yet)"
    );
    assert!(event(&w, &newer).await.on_rollup_index());
    // Within the overlap it is read again, not enrolled twice; past it, nothing is read.
    w.pipeline.clock.advance(10 * MINUTE);
    let third = w.pipeline.rollup.enrol_open(None).await.unwrap();
    assert_eq!((third.listed, third.enrolled), (1, 0));
    w.pipeline.clock.advance(10 * MINUTE);
    let fourth = w.pipeline.rollup.enrol_open(None).await.unwrap();
    assert_eq!((fourth.accounts, fourth.listed), (2, 0));
    // The regular pass settles it from the index; the first stays open (its delivery waits).
    let pass = w.pipeline.roll_up_pass().await.unwrap();
    assert_eq!((pass.to_skipped, pass.to_partial), (1, 1));
    assert_open(&w, &open, EventStatus::Partial).await;
}

#[tokio::test]
async fn an_account_made_before_the_accounts_listing_is_listed_by_its_first_ingest_so_the_walk_reads_its_events(
) {
    use shared::store::attrs::listing;
    let w = World::new().await;
    let acct = w.account().await.account_id;
    w.subscribe(&w.integration(&acct).await).await;
    let (dynamo, table) = (
        &w.pipeline.stack.clients.dynamo,
        w.pipeline.stack.config.delivery_table.as_str(),
    );
    let (pk, sk) = shared::store::account::key(&acct);
    // As an account created before the listing existed was stored: without its listing entry.
    w.unlist_account(&acct).await;
    let listed = || async {
        shared::store::read::get(dynamo, table, &pk, &sk)
            .await
            .unwrap()
            .unwrap()
            .get(listing::SORT)
            .and_then(|v| v.as_s().ok().cloned())
    };
    assert_eq!(listed().await, None);
    assert_eq!(
        w.pipeline.rollup.enrol_open(None).await.unwrap().accounts,
        0
    );

    // Its next change: ingest lists it (one update) before writing the event.
    let open = w.change(&acct).await;
    w.pipeline.stack.meter.reset();
    w.pipeline.ingest_pending().await.unwrap();
    let updates = w
        .dynamo_requests()
        .into_iter()
        .find(|(op, _)| op == "UpdateItem");
    assert_eq!(updates, Some(("UpdateItem".to_string(), 1)));
    assert_eq!(listed().await.as_deref(), Some(acct.as_str()));
    // A listed account costs ingest no update.
    let second = w.change(&acct).await;
    w.pipeline.stack.meter.reset();
    w.pipeline.ingest_pending().await.unwrap();
    assert!(!w.dynamo_requests().iter().any(|(op, _)| op == "UpdateItem"));

    // The walk now reads its listing and enrols both open events.
    w.pipeline.clock.advance(2 * MINUTE);
    let walk = w.pipeline.rollup.enrol_open(None).await.unwrap();
    assert_eq!((walk.accounts, walk.listed, walk.enrolled), (1, 2, 2));
    assert!(event(&w, &open).await.on_rollup_index());
    assert!(event(&w, &second).await.on_rollup_index());
}

#[tokio::test]
async fn reconciliation_finishes_a_large_backlog_across_invocations_without_redoing_or_skipping() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let poll = w.subscribe(&w.integration(&acct).poll().await).await;
    let changes: Vec<Change> = backlog(&w, acct.as_str(), 250, 50).await.concat();
    let mut runs = Vec::new();
    loop {
        let report = w.pipeline.reconcile(RunKind::Nightly, 100).await;
        assert!(report.ok(), "{report:?}");
        // The notification settling ran too (nothing to settle in this stack).
        let SettleReport::Settled { counts } = &report.notifications else {
            panic!("notification settling is wired: {:?}", report.notifications)
        };
        assert_eq!(counts.get("examined"), Some(&0));
        let more = report.more;
        runs.push(report);
        if !more {
            break;
        }
        assert!(runs.len() < 5, "the backlog must shrink");
    }
    let examined: Vec<u32> = runs.iter().map(|r| r.rollup.examined).collect();
    let sent: Vec<u32> = runs.iter().map(|r| r.rollup.to_sent).collect();
    assert_eq!(examined, [100, 100, 50], "nothing looked at twice");
    assert_eq!(sent, [100, 100, 50], "nothing skipped");
    for c in &changes {
        assert_eq!(event(&w, c).await.status(), EventStatus::Sent);
        assert_eq!(transmit(&w, c, &poll).await, Some(TransmitStatus::Pending));
    }
    let after = w.pipeline.reconcile(RunKind::Rollup, 100).await;
    assert_eq!((after.rollup.examined, after.more), (0, false));
}

#[tokio::test]
async fn reconciliation_republishes_overdue_dispatch_work_and_reports_it() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let sub = w.subscribe(&w.integration(&acct).await).await;
    let c = w.change(&acct).await;
    // Ingested, but its dispatch message was lost (the stream path never ran).
    w.pipeline.ingest_pending().await.unwrap();
    // Within the grace the roll-up leaves it alone: the stream path may still publish it.
    w.pipeline
        .clock
        .advance(shared::domain::integration_delivery::FIRST_DISPATCH_GRACE - SECOND);
    let report = w.pipeline.reconcile(RunKind::Nightly, 1000).await;
    assert_eq!((report.rollup.requeued, report.dispatch.published), (0, 0));
    w.pipeline.clock.advance(SECOND);
    let report = w.pipeline.reconcile(RunKind::Nightly, 1000).await;
    assert!(report.dispatch.ran);
    // The roll-up walk found the lost first dispatch and the sweep after it published it.
    assert_eq!(report.rollup.requeued, 1);
    assert_eq!(report.dispatch.published, 1);
    // The runs rolled the waiting event up: partial.
    assert_eq!(report.rollup.to_partial + report.rollup.unchanged, 1);
    w.pipeline.work_pending().await.unwrap();
    assert_eq!(
        delivery(&w, &c, &sub).await.status,
        DeliveryStatus::Delivered
    );
    // The roll-up-only run leaves dispatch alone and finishes the event.
    let report = w.pipeline.reconcile(RunKind::Rollup, 1000).await;
    assert!(!report.dispatch.ran);
    assert_eq!(report.notifications, SettleReport::NotRun);
    assert_eq!(report.rollup.to_sent, 1);
    let doc = shared::reconcile::emf_document(&report, "Ns", "test", w.pipeline.now());
    assert_eq!(doc["ReconcileRollUpToSent"], 1);
    assert_eq!(doc["ReconcileLostDispatchRequeued"], 0);
}

// ------------------------------------------------------------------------------ the monitor API

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_api_lists_events_by_status_and_time_a_page_at_a_time() {
    let w = World::new().await;
    let api = &w.api;
    let r = &w.receiver;
    // Three changes are delivered, then the receiver refuses two for good.
    r.script([Reply::Status(200), Reply::Status(200), Reply::Status(200)]);
    r.set_default(Reply::Status(410));
    let acct = w.account().await.account_id;
    let _sub = w.subscribe(&w.integration(&acct).await).await;
    let token = w.account_token(&acct).await;
    let mut changes = Vec::new();
    let mut times = Vec::new();
    for _ in 0..5 {
        times.push(w.pipeline.now());
        changes.push(w.change(&acct).await);
        w.pipeline.pump().await.unwrap();
        w.pipeline.clock.advance(MINUTE);
    }
    let all: Vec<String> = changes
        .iter()
        .rev()
        .map(|c| c.change_id.to_string())
        .collect();

    // Newest first, two at a time, through the opaque cursor.
    let mut seen = Vec::new();
    let mut path = "/v1/events?limit=2".to_string();
    loop {
        let page = api.get(&path, &token).await;
        let page = page.ok();
        seen.extend(ids(page));
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/events?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, all);

    let failed = api.get("/v1/events?status=failed", &token).await;
    assert_eq!(ids(failed.ok()), all[..2]);
    let first = &failed.ok()["data"][0];
    assert_eq!(first["event_status"], "failed");
    assert_eq!(first["internal_status"], "new");
    assert_eq!(
        first["status_reason"],
        "No counted delivery waits any more, and one or more of them failed."
    );
    assert!(first["expires_at"].is_string());
    let both = api
        .get("/v1/events?status=sent,failed&order=asc", &token)
        .await;
    assert_eq!(
        ids(both.ok()),
        all.iter().rev().cloned().collect::<Vec<_>>()
    );
    // [from, to): the second and third change.
    let window = api
        .get(
            &format!(
                "/v1/events?order=asc&from={}&to={}",
                times[1].to_rfc3339(),
                times[3].to_rfc3339()
            ),
            &token,
        )
        .await;
    assert_eq!(
        ids(window.ok()),
        [
            changes[1].change_id.to_string(),
            changes[2].change_id.to_string()
        ]
    );

    // Bad input is named, field by field.
    let bad = api
        .get("/v1/events?status=done&from=yesterday&limit=500", &token)
        .await;
    assert_eq!(bad.fields(), ["status", "from", "limit"]);
    let bad = api.get("/v1/events?cursor=not-a-cursor", &token).await;
    assert_eq!(bad.fields(), ["cursor"]);
    let unknown = api.get("/v1/events?event_status=sent", &token).await;
    unknown.problem(StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_api_shows_an_event_with_its_delivery_log_and_no_route_sets_a_status() {
    let w = World::new().await;
    let api = &w.api;
    let gone = Receiver::start().await;
    gone.set_default(Reply::Full {
        status: 410,
        headers: vec![],
        body: "no such hook".into(),
    });
    let acct = w.account().await.account_id;
    let served = w.subscribe(&w.integration(&acct).await).await;
    let refused = w.subscribe(&w.integration(&acct).to(&gone).await).await;
    let filtered = w
        .subscribe(&w.integration(&acct).await)
        .filter(json!({"field": "record.price", "gt": 100}))
        .await;
    let token = w.account_token(&acct).await;
    let c = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();

    let path = format!("/v1/events/{}", c.change_id);
    let reply = api.get(&path, &token).await;
    let body = reply.ok();
    assert_eq!(body["id"], c.change_id.as_str());
    assert_eq!(body["event_status"], "failed");
    assert_eq!(body["subscribers"], 2);
    let log: Vec<&Value> = body["deliveries"].as_array().unwrap().iter().collect();
    let line = |sub: &Subscription| {
        *log.iter()
            .find(|d| d["subscription_id"] == sub.subscription_id.as_str())
            .unwrap()
    };
    let s = line(&served);
    assert_eq!(
        (&s["status"], &s["transmit_status"]),
        (&json!("delivered"), &json!("sent"))
    );
    assert_eq!(
        (&s["attempts"], &s["http_code"], &s["last_error"]),
        (&json!(1), &json!(200), &Value::Null)
    );
    let f = line(&refused);
    assert_eq!(
        (&f["status"], &f["transmit_status"]),
        (&json!("dead"), &json!("failed"))
    );
    assert_eq!((&f["attempts"], &f["http_code"]), (&json!(1), &json!(410)));
    assert_eq!(f["last_error"], "no such hook");
    assert_eq!(f["attempt_log"][0]["class"], "permanent");
    let k = line(&filtered);
    assert_eq!(
        (&k["status"], &k["transmit_status"]),
        (&json!("skipped_filter"), &Value::Null)
    );

    // event_status and internal_status are the system's: no route writes them.
    for method in [Method::PATCH, Method::PUT, Method::POST, Method::DELETE] {
        let r = api
            .call(
                method.clone(),
                &path,
                Some(&token),
                Some(json!({"event_status": "sent", "internal_status": "done"})),
            )
            .await;
        r.problem(StatusCode::METHOD_NOT_ALLOWED);
    }
    api.call(
        Method::POST,
        "/v1/events",
        Some(&token),
        Some(json!({"event_status": "sent"})),
    )
    .await
    .problem(StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(event(&w, &c).await.status(), EventStatus::Failed);
    api.get("/v1/events/no%23such", &token)
        .await
        .problem(StatusCode::NOT_FOUND);
    api.get("/v1/events/01NOSUCHEVENT", &token)
        .await
        .problem(StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_api_shows_what_needs_attention_paused_subscriptions_and_dead_or_failed_deliveries() {
    let w = World::new().await;
    let api = &w.api;
    let r = &w.receiver;
    r.script([Reply::Status(200), Reply::Status(400)]);
    let acct = w.account().await.account_id;
    let token = w.account_token(&acct).await;
    let sub = w.subscribe(&w.integration(&acct).await).await;
    let queue = w
        .subscribe(
            &w.integration(&acct)
                .method(DeliveryMethod::Unknown("queue".into()))
                .await,
        )
        .await;
    let paused = w.subscribe(&w.integration(&acct).await).paused().await;
    // First change: delivered and failed (unknown method); second: dead (400) and failed.
    let first = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    w.pipeline.clock.advance(MINUTE);
    let second = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    assert_eq!(
        delivery(&w, &second, &sub).await.status,
        DeliveryStatus::Dead
    );

    let page = api.get("/v1/attention?limit=2", &token).await;
    let body = page.ok().clone();
    let paused_ids: Vec<&str> = body["paused_subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(paused_ids, [paused.subscription_id.as_str()]);
    let mut lines: Vec<Value> = body["deliveries"].as_array().unwrap().clone();
    assert_eq!(lines.len(), 2);
    let cursor = body["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_owned();
    let next = api
        .get(&format!("/v1/attention?limit=2&cursor={cursor}"), &token)
        .await;
    lines.extend(next.ok()["deliveries"].as_array().unwrap().iter().cloned());
    let got: Vec<(String, String, String)> = lines
        .iter()
        .map(|d| {
            (
                d["change_id"].as_str().unwrap().to_owned(),
                d["subscription_id"].as_str().unwrap().to_owned(),
                d["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut expected = vec![
        (
            second.change_id.to_string(),
            sub.subscription_id.to_string(),
            "dead".to_owned(),
        ),
        (
            second.change_id.to_string(),
            queue.subscription_id.to_string(),
            "failed".to_owned(),
        ),
        (
            first.change_id.to_string(),
            queue.subscription_id.to_string(),
            "failed".to_owned(),
        ),
    ];
    // Newest first; the two of the second change were written in either order.
    let (mut head, tail) = (got[..2].to_vec(), got[2..].to_vec());
    head.sort();
    let mut want_head = expected[..2].to_vec();
    want_head.sort();
    assert_eq!(head, want_head);
    assert_eq!(tail, expected.split_off(2));
    assert!(lines.iter().all(|d| d["transmit_status"] == "failed"));
    assert!(lines
        .iter()
        .any(|d| d["last_error"] == "unknown delivery method queue"));
}

#[tokio::test]
async fn every_monitor_route_is_scoped_to_its_account() {
    let w = World::new().await;
    let api = &w.api;
    let r = &w.receiver;
    r.set_default(Reply::Status(400));
    let mine = w.account().await.account_id;
    let theirs = w.account().await.account_id;
    let _sub = w.subscribe(&w.integration(&mine).await).await;
    let mine_token = w.account_token(&mine).await;
    let their_token = w.account_token(&theirs).await;
    let c = w.change(&mine).await;
    w.pipeline.pump().await.unwrap();
    let path = format!("/v1/events/{}", c.change_id);
    api.get(&path, &mine_token).await.ok();
    // Another account's event is not found; its lists are empty.
    api.get(&path, &their_token)
        .await
        .problem(StatusCode::NOT_FOUND);
    assert!(ids(api.get("/v1/events", &their_token).await.ok()).is_empty());
    let attention = api.get("/v1/attention", &their_token).await;
    assert_eq!(attention.ok()["deliveries"], json!([]));
    assert_eq!(
        api.get("/v1/attention", &mine_token).await.ok()["deliveries"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // A cursor names a position only: another account's listing continues from it in its own
    // events (none), never in the first account's.
    let _second = w.change(&mine).await;
    w.pipeline.pump().await.unwrap();
    let page = api.get("/v1/events?limit=1", &mine_token).await;
    let cursor = page.ok()["next_cursor"].as_str().unwrap().to_owned();
    assert_eq!(
        ids(api
            .get(&format!("/v1/events?cursor={cursor}"), &mine_token)
            .await
            .ok())
        .len(),
        1
    );
    assert!(ids(api
        .get(&format!("/v1/events?cursor={cursor}"), &their_token)
        .await
        .ok())
    .is_empty());
    // No token, an operator token, or an integration's token: 401.
    for path in ["/v1/events", "/v1/attention", path.as_str()] {
        api.call(Method::GET, path, None, None)
            .await
            .problem(StatusCode::UNAUTHORIZED);
        api.get(path, OPERATOR_TOKEN)
            .await
            .problem(StatusCode::UNAUTHORIZED);
    }
}

#[tokio::test]
async fn an_operator_runs_reconciliation_on_demand() {
    let w = World::new().await;
    let api = &w.api;
    let acct = w.account().await.account_id;
    let token = w.account_token(&acct).await;
    let changes: Vec<Change> = backlog(&w, acct.as_str(), 5, 5).await.concat();
    let reply = api
        .call(
            Method::POST,
            "/operator/reconcile",
            Some(OPERATOR_TOKEN),
            Some(json!({"run": "rollup", "max_events": 3})),
        )
        .await;
    let report = reply.ok();
    assert_eq!(report["run"], "rollup");
    assert_eq!(
        (&report["rollup"]["to_skipped"], &report["more"]),
        (&json!(3), &json!(true))
    );
    let reply = api
        .call(
            Method::POST,
            "/operator/reconcile",
            Some(OPERATOR_TOKEN),
            None,
        )
        .await;
    let report = reply.ok();
    assert_eq!(report["run"], "nightly");
    assert_eq!(
        (&report["rollup"]["to_skipped"], &report["more"]),
        (&json!(2), &json!(false))
    );
    assert_eq!(report["dispatch"]["ran"], true);
    assert_eq!(report["notifications"]["status"], "settled");
    assert_eq!(report["errors"], json!([]));
    for c in &changes {
        assert_eq!(event(&w, c).await.status(), EventStatus::Skipped);
    }
    api.call(Method::POST, "/operator/reconcile", Some(&token), None)
        .await
        .problem(StatusCode::UNAUTHORIZED);
    let bad = api
        .call(
            Method::POST,
            "/operator/reconcile",
            Some(OPERATOR_TOKEN),
            Some(json!({"run": "sideways", "max_events": 0, "dry": true})),
        )
        .await;
    assert_eq!(bad.fields(), ["run", "max_events", "dry"]);
}

// ------------------------------------------------------------------- the function's payloads

#[tokio::test]
async fn the_reconcile_schedules_payloads_select_their_runs() {
    use shared::reconcile::ReconcileRequest;
    let template = std::fs::read_to_string(local::template::Template::project_path()).unwrap();
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let _ = backlog(&w, acct.as_str(), 2, 2).await;
    for (file, kind) in [
        ("reconcile-nightly.json", RunKind::Nightly),
        ("reconcile-rollup.json", RunKind::Rollup),
    ] {
        let payload: Value = serde_json::from_str(&sample(file)).unwrap();
        assert!(
            template.contains(&format!("Input: '{payload}'")),
            "{file} is what template.yaml's schedule sends"
        );
        let request = ReconcileRequest::from_payload(&payload).unwrap();
        assert_eq!(request.run, kind);
        let report = w.pipeline.reconcile(request.run, 1000).await;
        assert!(report.ok(), "{report:?}");
        assert_eq!(report.dispatch.ran, kind == RunKind::Nightly);
    }
    // The dispatcher's stream filter passes the prompt roll-up's triggers.
    assert!(template.contains(
        r#"- Pattern: '{"eventName":["INSERT"],"dynamodb":{"NewImage":{"kind":{"S":["event"]},"push_subscribers":{"N":["0"]}}}}'"#
    ));
    assert!(template.contains(r#""OldImage":{"status":{"S":["pending","retrying"]}}"#));
    assert!(template.contains(
        r#""status":{"S":["retrying"]},"method":{"S":[{"anything-but":["poll"]}]}},"OldImage":{"status":{"S":["pending"]}}"#
    ));
}
