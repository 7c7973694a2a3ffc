//! The event monitor (seed 004) against the emulator: every row of its three tables (event status,
//! internal status, delivery transmit status), the roll-up pass and its prompt trigger, poll
//! deliveries, unknown methods, per-subscriber retry settings, the sixty-second lease, retention,
//! reconciliation across invocations, and the monitor's API (account-scoped).

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use local::fixtures::{catalog_change, Fixtures};
use local::pipeline::Pipeline;
use local::receiver::{Receiver, Reply};
use serde_json::{json, Value};
use shared::api::auth::{issue_token, TokenKind};
use shared::api::{router, ApiState, OperatorAuth};
use shared::domain::change::Change;
use shared::domain::classify::AttemptClass;
use shared::domain::event::{DeliveryMethod, EventStatus, EventTrigger, InternalStatus, RETENTION};
use shared::domain::integration_delivery::{DeliveryStatus, TransmitStatus};
use shared::domain::retry::RetryPolicy;
use shared::domain::subscription::SubscriptionStatus;
use shared::domain::time::{Timestamp, DAY, MINUTE, SECOND};
use shared::monitor::items::{DeliveryItem, EventItem};
use shared::monitor::query::{event_with_deliveries, list_events, EventQuery};
use shared::monitor::retention::ttl_seconds;
use shared::monitor::{reopen_event, ReopenOutcome, RollUpOutcome};
use shared::reconcile::{RunKind, SettleReport};
use shared::store::keys;
use shared::store::models::{DeliveryWork, Integration, Subscription};
use shared::worker::internal::{InternalCall, InternalHandler, InternalRegistry};
use shared::worker::webhook::WebhookAdapter;
use shared::worker::{DeliveryWorker, WorkOutcome};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

// ------------------------------------------------------------------------------------ helpers

fn fixtures(p: &Pipeline) -> Fixtures<'_> {
    Fixtures {
        clients: &p.t.clients,
        table: &p.t.config.delivery_table,
        now: p.now(),
    }
}

async fn account(p: &Pipeline) -> String {
    fixtures(p)
        .account(&["admin@example.com"])
        .await
        .unwrap()
        .account_id
}

async fn webhook(p: &Pipeline, r: &Receiver, account: &str) -> Integration {
    fixtures(p)
        .webhook(account, r.url("/hooks/rhythm"))
        .await
        .unwrap()
}

async fn integration(p: &Pipeline, account: &str, method: DeliveryMethod) -> Integration {
    let handler = (method == DeliveryMethod::Internal).then_some("record_snapshot");
    fixtures(p)
        .integration(account, method, None, handler)
        .await
        .unwrap()
}

async fn subscribe(
    p: &Pipeline,
    integration: &Integration,
    record_types: &[&str],
    filter: Option<Value>,
    policy: RetryPolicy,
) -> Subscription {
    fixtures(p)
        .subscription(integration, record_types, filter, &["sku", "price"], policy)
        .await
        .unwrap()
}

async fn catalog_subscription(p: &Pipeline, integration: &Integration) -> Subscription {
    subscribe(
        p,
        integration,
        &["catalog_item"],
        None,
        RetryPolicy::FixedSchedule,
    )
    .await
}

/// The owning application writes a catalog change.
async fn change(p: &Pipeline, account: &str) -> Change {
    let c = catalog_change(account, p.now(), 4.5);
    p.write_change(&c).await.unwrap();
    c
}

fn work(c: &Change, sub: &Subscription) -> DeliveryWork {
    DeliveryWork {
        account_id: c.account_id.clone(),
        change_id: c.change_id.clone(),
        subscription_id: sub.subscription_id.clone(),
    }
}

async fn event(p: &Pipeline, c: &Change) -> EventItem {
    p.event_item(&c.account_id, &c.change_id)
        .await
        .expect("the event exists")
}

async fn delivery(p: &Pipeline, c: &Change, sub: &Subscription) -> DeliveryItem {
    let item = p
        .get(
            &keys::event_pk(&c.account_id, &c.change_id),
            &keys::delivery_sk(&sub.subscription_id),
        )
        .await
        .expect("the delivery exists");
    DeliveryItem::from_item(item).unwrap()
}

async fn transmit(p: &Pipeline, c: &Change, sub: &Subscription) -> Option<TransmitStatus> {
    delivery(p, c, sub).await.transmit_status(p.now())
}

async fn roll_up(p: &Pipeline, c: &Change) -> RollUpOutcome {
    p.rollup
        .roll_up_event(&c.account_id, &c.change_id)
        .await
        .unwrap()
}

fn moved(from: EventStatus, to: EventStatus) -> RollUpOutcome {
    RollUpOutcome::Moved { from, to }
}

/// Asserts the event is final with the seed's retention: off the roll-up index, `expires_at` (epoch
/// seconds) thirty days after it became final, and no delivery expiring before it.
async fn assert_final(p: &Pipeline, c: &Change, status: EventStatus, trigger: EventTrigger) {
    let e = event(p, c).await;
    assert_eq!(e.status(), status);
    assert_eq!(e.status_trigger, Some(trigger));
    assert!(!e.on_rollup_index, "a final event leaves the roll-up index");
    let finalized = e.finalized_at.expect("finalized_at");
    let ttl = ttl_seconds(status, finalized).unwrap();
    assert_eq!(e.expires_at, Some(ttl));
    assert_eq!(ttl, finalized.plus(RETENTION).seconds());
    let partition = shared::monitor::rollup::read_partition(
        &p.t.clients.dynamo,
        &p.t.config.delivery_table,
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

async fn assert_open(p: &Pipeline, c: &Change, status: EventStatus) {
    let e = event(p, c).await;
    assert_eq!(e.status(), status);
    assert!(
        e.on_rollup_index,
        "an open event stays on the roll-up index"
    );
    assert_eq!(e.expires_at, None, "new and partial events never expire");
}

// ------------------------------------------------------------------ 004: event status moves

#[tokio::test]
async fn new_to_skipped_when_no_active_subscriber_exists() {
    let p = Pipeline::new().await;
    // One account without subscriptions, one whose only subscription is paused.
    let lonely = account(&p).await;
    let paused_account = account(&p).await;
    let r = Receiver::start().await;
    let i = webhook(&p, &r, &paused_account).await;
    let mut sub = catalog_subscription(&p, &i).await;
    sub.status = SubscriptionStatus::Paused;
    fixtures(&p).save_subscription(&sub).await.unwrap();

    let a = change(&p, &lonely).await;
    let b = change(&p, &paused_account).await;
    p.ingest_pending().await.unwrap();
    assert_open(&p, &a, EventStatus::New).await;
    assert_eq!(
        event(&p, &a).await.record.internal_status,
        InternalStatus::New
    );

    let pass = p.roll_up_pass().await.unwrap();
    assert_eq!((pass.examined, pass.to_skipped), (2, 2));
    for c in [&a, &b] {
        assert_final(
            &p,
            c,
            EventStatus::Skipped,
            EventTrigger::NoSubscriberTookIt,
        )
        .await;
    }
    assert!(p
        .delivery(&paused_account, &b.change_id, &sub.subscription_id)
        .await
        .is_none());
    assert_eq!(r.count(), 0);
    // Final events are not looked at again.
    assert_eq!(p.roll_up_pass().await.unwrap().examined, 0);
}

#[tokio::test]
async fn new_to_skipped_when_no_active_subscriber_matches_the_event() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    let acct = account(&p).await;
    let i = webhook(&p, &r, &acct).await;
    // Wrong record type (no delivery at all) and a filter that rejects the change
    // (a skipped_filter delivery: it did not take the event).
    let _orders = subscribe(&p, &i, &["order"], None, RetryPolicy::FixedSchedule).await;
    let expensive = subscribe(
        &p,
        &i,
        &["catalog_item"],
        Some(json!({"field": "record.price", "gt": 100})),
        RetryPolicy::FixedSchedule,
    )
    .await;
    let c = change(&p, &acct).await;
    // The whole pipeline: the prompt roll-up on the event's insert settles it.
    p.pump().await.unwrap();
    let d = delivery(&p, &c, &expensive).await;
    assert_eq!(d.record.status, DeliveryStatus::SkippedFilter);
    assert_eq!(
        d.transmit_status(p.now()),
        None,
        "never a delivery in 004's sense"
    );
    assert_final(
        &p,
        &c,
        EventStatus::Skipped,
        EventTrigger::NoSubscriberTookIt,
    )
    .await;
    assert_eq!(r.count(), 0);
}

#[tokio::test]
async fn partial_to_skipped_when_the_pass_finds_no_subscriber_took_the_event() {
    let p = Pipeline::new().await;
    let acct = account(&p).await;
    let c = change(&p, &acct).await;
    p.ingest_pending().await.unwrap();
    // An event some earlier pass left partial (e.g. before ingest's records said who took it).
    p.t.clients
        .dynamo
        .update_item()
        .table_name(&p.t.config.delivery_table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(keys::event_pk(&acct, &c.change_id)),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S(keys::EVENT_SK.into()),
        )
        .update_expression("SET event_status = :p")
        .expression_attribute_values(
            ":p",
            aws_sdk_dynamodb::types::AttributeValue::S("partial".into()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        roll_up(&p, &c).await,
        moved(EventStatus::Partial, EventStatus::Skipped)
    );
    assert_final(
        &p,
        &c,
        EventStatus::Skipped,
        EventTrigger::NoSubscriberTookIt,
    )
    .await;
}

#[tokio::test]
async fn new_to_partial_while_a_push_delivery_waits_and_picked_up_again_every_pass() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    r.set_default(Reply::Status(503));
    let acct = account(&p).await;
    let sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let c = change(&p, &acct).await;
    p.ingest_pending().await.unwrap();
    p.worker.process(&work(&c, &sub)).await.unwrap();
    assert_eq!(
        delivery(&p, &c, &sub).await.record.status,
        DeliveryStatus::Retrying
    );
    assert_eq!(transmit(&p, &c, &sub).await, Some(TransmitStatus::Pending));

    let first = p.roll_up_pass().await.unwrap();
    assert_eq!((first.examined, first.to_partial), (1, 1));
    assert_open(&p, &c, EventStatus::Partial).await;
    assert_eq!(
        event(&p, &c).await.status_trigger,
        Some(EventTrigger::DeliveriesStillWaiting)
    );
    // partial → partial: looked at again on every pass until final.
    for _ in 0..2 {
        let again = p.roll_up_pass().await.unwrap();
        assert_eq!((again.examined, again.unchanged, again.moved()), (1, 1, 0));
        assert_open(&p, &c, EventStatus::Partial).await;
    }
}

#[tokio::test]
async fn new_to_failed_when_nothing_waits_and_a_delivery_failed() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    let acct = account(&p).await;
    // One subscriber is served, the other refuses permanently.
    let ok = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let other = Receiver::start().await;
    other.set_default(Reply::Status(410));
    let refused = catalog_subscription(&p, &webhook(&p, &other, &acct).await).await;
    let c = change(&p, &acct).await;
    p.ingest_pending().await.unwrap();
    p.worker.process(&work(&c, &ok)).await.unwrap();
    p.worker.process(&work(&c, &refused)).await.unwrap();
    assert_eq!(transmit(&p, &c, &ok).await, Some(TransmitStatus::Sent));
    assert_eq!(
        transmit(&p, &c, &refused).await,
        Some(TransmitStatus::Failed)
    );
    assert_eq!(
        roll_up(&p, &c).await,
        moved(EventStatus::New, EventStatus::Failed)
    );
    assert_final(
        &p,
        &c,
        EventStatus::Failed,
        EventTrigger::NothingWaitsSomeFailed,
    )
    .await;
}

#[tokio::test]
async fn partial_to_failed_when_the_last_retry_fails_promptly() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    r.set_default(Reply::Status(503));
    let acct = account(&p).await;
    let sub = subscribe(
        &p,
        &webhook(&p, &r, &acct).await,
        &["catalog_item"],
        None,
        RetryPolicy::Exponential {
            max_retries: 2,
            retry_delay_secs: 30,
        },
    )
    .await;
    let c = change(&p, &acct).await;
    // Ingest, dispatch (the event's insert rolls it up: partial), first attempt fails.
    p.pump().await.unwrap();
    assert_open(&p, &c, EventStatus::Partial).await;
    // The second and last attempt fails: dead, and the prompt roll-up makes the event failed
    // without waiting for a pass.
    p.advance(Duration::from_secs(30)).await.unwrap();
    assert_eq!(
        delivery(&p, &c, &sub).await.record.status,
        DeliveryStatus::Dead
    );
    assert_final(
        &p,
        &c,
        EventStatus::Failed,
        EventTrigger::NothingWaitsSomeFailed,
    )
    .await;
}

#[tokio::test]
async fn new_to_sent_when_nothing_waits_and_nothing_failed() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    let acct = account(&p).await;
    let a = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let b = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let c = change(&p, &acct).await;
    p.ingest_pending().await.unwrap();
    for sub in [&a, &b] {
        p.worker.process(&work(&c, sub)).await.unwrap();
    }
    let pass = p.roll_up_pass().await.unwrap();
    assert_eq!((pass.examined, pass.to_sent), (1, 1));
    assert_final(
        &p,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
}

#[tokio::test]
async fn partial_to_sent_when_a_retry_succeeds_promptly() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    r.script([Reply::Status(503)]);
    let acct = account(&p).await;
    let sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let c = change(&p, &acct).await;
    p.pump().await.unwrap();
    assert_open(&p, &c, EventStatus::Partial).await;
    p.advance(MINUTE).await.unwrap();
    assert_eq!(
        delivery(&p, &c, &sub).await.record.status,
        DeliveryStatus::Delivered
    );
    assert_final(
        &p,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
}

#[tokio::test]
async fn a_roll_up_waits_for_ingest_to_record_every_delivery() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    let acct = account(&p).await;
    let sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let c = change(&p, &acct).await;
    p.ingest_pending().await.unwrap();
    // As if ingest had written the event but not yet its delivery.
    let pk = keys::event_pk(&acct, &c.change_id);
    p.t.clients
        .dynamo
        .delete_item()
        .table_name(&p.t.config.delivery_table)
        .key("pk", aws_sdk_dynamodb::types::AttributeValue::S(pk))
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S(keys::delivery_sk(&sub.subscription_id)),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(roll_up(&p, &c).await, RollUpOutcome::Deferred);
    assert_open(&p, &c, EventStatus::New).await;
}

// --------------------------------------------------------------------------- poll deliveries

#[tokio::test]
async fn an_event_only_poll_subscribers_wait_for_becomes_sent_while_its_delivery_stays_pending() {
    let p = Pipeline::new().await;
    let acct = account(&p).await;
    let sub = catalog_subscription(&p, &integration(&p, &acct, DeliveryMethod::Poll).await).await;
    let c = change(&p, &acct).await;
    p.pump().await.unwrap();
    let d = delivery(&p, &c, &sub).await;
    assert_eq!(d.record.status, DeliveryStatus::Pending);
    assert_eq!(d.transmit_status(p.now()), Some(TransmitStatus::Pending));
    assert_final(
        &p,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
    // Nobody pushes a poll delivery: it is still pending after a day of sweeps.
    p.advance(DAY).await.unwrap();
    assert_eq!(
        delivery(&p, &c, &sub).await.record.status,
        DeliveryStatus::Pending
    );
}

#[tokio::test]
async fn poll_deliveries_are_left_out_of_a_mixed_event() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    r.set_default(Reply::Status(400));
    let acct = account(&p).await;
    let poll = catalog_subscription(&p, &integration(&p, &acct, DeliveryMethod::Poll).await).await;
    let push = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let c = change(&p, &acct).await;
    p.ingest_pending().await.unwrap();
    // The poll delivery does not count; the push one has not been tried yet: partial.
    assert_eq!(
        roll_up(&p, &c).await,
        moved(EventStatus::New, EventStatus::Partial)
    );
    p.worker.process(&work(&c, &push)).await.unwrap();
    assert_eq!(
        roll_up(&p, &c).await,
        moved(EventStatus::Partial, EventStatus::Failed)
    );
    assert_eq!(transmit(&p, &c, &poll).await, Some(TransmitStatus::Pending));
}

// ------------------------------------------------------------------------ 004: internal status

#[tokio::test]
async fn internal_status_is_new_until_a_built_in_subscriber_handles_the_event_then_done() {
    let p = Pipeline::new().await;
    let acct = account(&p).await;
    let sub =
        catalog_subscription(&p, &integration(&p, &acct, DeliveryMethod::Internal).await).await;
    let c = change(&p, &acct).await;
    p.ingest_pending().await.unwrap();
    assert_eq!(
        event(&p, &c).await.record.internal_status,
        InternalStatus::New
    );
    p.pump().await.unwrap();
    let e = event(&p, &c).await;
    assert_eq!(e.record.internal_status, InternalStatus::Done);
    assert!(
        e.internal_result.is_some(),
        "the handler's result is stored"
    );
    assert_eq!(transmit(&p, &c, &sub).await, Some(TransmitStatus::Sent));
    // Internal status plays no part in the event's status or its retention.
    assert_final(
        &p,
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

fn worker_with(p: &Pipeline, handler: Broken) -> DeliveryWorker {
    let mut registry = InternalRegistry::default();
    registry.register(Arc::new(handler));
    DeliveryWorker::with_adapters(
        p.t.clients.clone(),
        p.t.config.clone(),
        Arc::new(p.clock.clone()),
        WebhookAdapter::new(
            shared::domain::ssrf::TargetPolicy::LOCAL_DEMO,
            Duration::from_secs(5),
        ),
        registry,
    )
}

#[tokio::test]
async fn a_failed_in_house_handling_leaves_internal_status_new() {
    let p = Pipeline::new().await;
    let acct = account(&p).await;
    let sub =
        catalog_subscription(&p, &integration(&p, &acct, DeliveryMethod::Internal).await).await;
    let c = change(&p, &acct).await;
    p.ingest_pending().await.unwrap();
    let flaky = worker_with(&p, Broken(AttemptClass::Transient { retry_after: None }));
    flaky.process(&work(&c, &sub)).await.unwrap();
    let d = delivery(&p, &c, &sub).await;
    assert_eq!(d.record.status, DeliveryStatus::Retrying);
    assert_eq!(
        d.record.last_error.as_deref(),
        Some("snapshot store unavailable")
    );
    assert_eq!(
        event(&p, &c).await.record.internal_status,
        InternalStatus::New
    );
    assert_eq!(
        roll_up(&p, &c).await,
        moved(EventStatus::New, EventStatus::Partial)
    );

    p.clock.advance(MINUTE);
    let broken = worker_with(&p, Broken(AttemptClass::Permanent));
    broken.process(&work(&c, &sub)).await.unwrap();
    assert_eq!(
        delivery(&p, &c, &sub).await.record.status,
        DeliveryStatus::Dead
    );
    assert_eq!(
        event(&p, &c).await.record.internal_status,
        InternalStatus::New
    );
    assert_eq!(
        roll_up(&p, &c).await,
        moved(EventStatus::Partial, EventStatus::Failed)
    );
}

// ------------------------------------------------------------------ 004: delivery status moves

#[tokio::test]
async fn a_new_delivery_row_is_pending() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    let acct = account(&p).await;
    let sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let c = change(&p, &acct).await;
    p.ingest_pending().await.unwrap();
    let d = delivery(&p, &c, &sub).await;
    assert_eq!(d.transmit_status(p.now()), Some(TransmitStatus::Pending));
    assert_eq!(
        (d.record.attempts, d.record.last_error.as_deref()),
        (0, None)
    );
}

#[tokio::test]
async fn pending_to_processing_when_a_worker_claims_it_with_a_sixty_second_lease() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    // The adapter takes a moment: long enough to look at the delivery while it is processing.
    r.script([Reply::Hang(Duration::from_millis(1500))]);
    let acct = account(&p).await;
    let sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let c = change(&p, &acct).await;
    p.ingest_pending().await.unwrap();
    let observe = async {
        loop {
            let d = delivery(&p, &c, &sub).await;
            if d.record.lease_until.is_some() {
                // While processing the event waits: partial, not sent.
                let outcome = roll_up(&p, &c).await;
                return (d, outcome);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let job = work(&c, &sub);
    let (outcome, (seen, rolled)) = tokio::join!(p.worker.process(&job), observe);
    assert_eq!(
        seen.transmit_status(p.now()),
        Some(TransmitStatus::Processing)
    );
    assert_eq!(
        seen.record.lease_until,
        Some(p.now().plus(Duration::from_secs(60)))
    );
    assert_eq!(
        seen.record.attempts, 0,
        "attempts count when the attempt ends"
    );
    assert_eq!(rolled, moved(EventStatus::New, EventStatus::Partial));
    assert_eq!(
        outcome.unwrap(),
        WorkOutcome::Attempted {
            number: 1,
            status: DeliveryStatus::Delivered
        }
    );
    assert_eq!(transmit(&p, &c, &sub).await, Some(TransmitStatus::Sent));
}

#[tokio::test]
async fn processing_to_sent_counts_the_attempt_clears_the_last_error_and_stores_the_http_code() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    r.script([
        Reply::Full {
            status: 503,
            headers: vec![],
            body: "busy".into(),
        },
        Reply::Status(201),
    ]);
    let acct = account(&p).await;
    let sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let c = change(&p, &acct).await;
    p.pump().await.unwrap();
    let d = delivery(&p, &c, &sub).await;
    assert_eq!(
        (
            d.record.attempts,
            d.record.last_error.as_deref(),
            d.record.last_http_status
        ),
        (1, Some("busy"), Some(503))
    );
    p.advance(MINUTE).await.unwrap();
    let d = delivery(&p, &c, &sub).await;
    assert_eq!(d.transmit_status(p.now()), Some(TransmitStatus::Sent));
    assert_eq!(
        (
            d.record.attempts,
            d.record.last_error.as_deref(),
            d.record.last_http_status
        ),
        (2, None, Some(201))
    );
}

#[tokio::test]
async fn per_subscriber_retry_settings_wait_retry_delay_times_two_to_the_n_up_to_max_retries() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    r.set_default(Reply::Status(503));
    let acct = account(&p).await;
    let sub = subscribe(
        &p,
        &webhook(&p, &r, &acct).await,
        &["catalog_item"],
        None,
        RetryPolicy::Exponential {
            max_retries: 4,
            retry_delay_secs: 10,
        },
    )
    .await;
    let c = change(&p, &acct).await;
    p.pump().await.unwrap();
    // processing → pending after each failure while attempts < Max Retries, waiting 10 × 2^n.
    for (n, wait_secs) in [10u64, 20, 40].into_iter().enumerate() {
        let attempts = n as u32 + 1;
        let d = delivery(&p, &c, &sub).await;
        assert_eq!(d.record.attempts, attempts);
        assert_eq!(d.transmit_status(p.now()), Some(TransmitStatus::Pending));
        let wait = Duration::from_secs(wait_secs);
        assert_eq!(
            d.record.not_before,
            Some(d.record.attempt_log.last().unwrap().at.plus(wait))
        );
        // Not claimed before the wait has passed, even if a stray message arrives (beyond the
        // worker's two seconds of tolerance for early SQS delays) or the sweep runs.
        p.clock.advance(wait - 3 * SECOND);
        assert_eq!(
            p.worker.process(&work(&c, &sub)).await.unwrap(),
            WorkOutcome::Skipped("not yet due")
        );
        p.advance(2 * SECOND).await.unwrap();
        assert_eq!(r.count() as u32, attempts);
        p.advance(SECOND).await.unwrap();
        assert_eq!(r.count() as u32, attempts + 1);
    }
    // processing → failed: the fourth attempt reached Max Retries.
    let d = delivery(&p, &c, &sub).await;
    assert_eq!(d.record.attempts, 4);
    assert_eq!(d.record.status, DeliveryStatus::Dead);
    assert_eq!(d.transmit_status(p.now()), Some(TransmitStatus::Failed));
    p.advance(DAY).await.unwrap();
    assert_eq!(r.count(), 4, "a failed delivery is not tried again");
    assert_final(
        &p,
        &c,
        EventStatus::Failed,
        EventTrigger::NothingWaitsSomeFailed,
    )
    .await;
}

#[tokio::test]
async fn pending_to_failed_when_the_delivery_method_is_unknown() {
    let p = Pipeline::new().await;
    let acct = account(&p).await;
    let queue = integration(&p, &acct, DeliveryMethod::Unknown("queue".into())).await;
    let sub = catalog_subscription(&p, &queue).await;
    let c = change(&p, &acct).await;
    p.pump().await.unwrap();
    let d = delivery(&p, &c, &sub).await;
    assert_eq!(d.record.status, DeliveryStatus::Failed);
    assert_eq!(d.transmit_status(p.now()), Some(TransmitStatus::Failed));
    assert_eq!(
        d.record.last_error.as_deref(),
        Some("unknown delivery method queue")
    );
    assert_final(
        &p,
        &c,
        EventStatus::Failed,
        EventTrigger::NothingWaitsSomeFailed,
    )
    .await;
}

#[tokio::test]
async fn a_dead_workers_delivery_is_taken_again_after_its_sixty_second_lease() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    let acct = account(&p).await;
    let sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let c = change(&p, &acct).await;
    p.ingest_pending().await.unwrap();
    // A worker claims attempt 1 (as the worker's claim writes it) and dies.
    let lease_until = p.now().plus(Duration::from_secs(60));
    let n = |v: i64| aws_sdk_dynamodb::types::AttributeValue::N(v.to_string());
    p.t.clients
        .dynamo
        .update_item()
        .table_name(&p.t.config.delivery_table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(keys::event_pk(&acct, &c.change_id)),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S(keys::delivery_sk(&sub.subscription_id)),
        )
        .update_expression("SET lease_until = :l, lease_token = :t")
        .expression_attribute_values(":l", n(lease_until.millis()))
        .expression_attribute_values(
            ":t",
            aws_sdk_dynamodb::types::AttributeValue::S("dead-worker".into()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        transmit(&p, &c, &sub).await,
        Some(TransmitStatus::Processing)
    );
    p.pump().await.unwrap();
    assert_eq!(r.count(), 0, "nobody else takes a leased delivery");
    p.clock.advance(Duration::from_secs(59));
    assert_eq!(
        p.worker.process(&work(&c, &sub)).await.unwrap(),
        WorkOutcome::Skipped("leased by another worker")
    );
    // Nothing has finished yet, so nothing triggered a prompt roll-up; the pass moves it.
    assert_open(&p, &c, EventStatus::New).await;
    p.roll_up_pass().await.unwrap();
    assert_open(&p, &c, EventStatus::Partial).await;
    // The lease lapses: pending again in 004's words. The dead worker's own message, never
    // deleted, comes back after the queue's visibility timeout (120 s) and a new worker takes
    // attempt 1 over.
    p.clock.advance(SECOND);
    assert_eq!(transmit(&p, &c, &sub).await, Some(TransmitStatus::Pending));
    p.clock.advance(Duration::from_secs(60));
    assert!(matches!(
        p.worker.process(&work(&c, &sub)).await.unwrap(),
        WorkOutcome::Attempted { number: 1, .. }
    ));
    p.pump().await.unwrap();
    assert_eq!(r.count(), 1);
    let d = delivery(&p, &c, &sub).await;
    assert_eq!(
        (d.record.status, d.record.attempts),
        (DeliveryStatus::Delivered, 1)
    );
    assert_final(
        &p,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
}

// ----------------------------------------------------------------------- the pass and the walk

/// `n` events of an account without subscribers, ingested in chunks a second apart (so "oldest
/// first" is observable), without the prompt roll-up.
async fn backlog(p: &Pipeline, acct: &str, n: usize, chunk: usize) -> Vec<Vec<Change>> {
    let mut chunks = Vec::new();
    for start in (0..n).step_by(chunk) {
        let mut these = Vec::new();
        for _ in start..(start + chunk).min(n) {
            these.push(change(p, acct).await);
        }
        p.ingest_pending().await.unwrap();
        p.clock.advance(SECOND);
        chunks.push(these);
    }
    chunks
}

async fn statuses(p: &Pipeline, changes: &[Change]) -> Vec<EventStatus> {
    let mut out = Vec::new();
    for c in changes {
        out.push(event(p, c).await.status());
    }
    out
}

#[tokio::test]
async fn a_pass_takes_at_most_a_hundred_events_oldest_first_and_a_250_event_backlog_takes_three() {
    let p = Pipeline::new().await;
    let acct = account(&p).await;
    let chunks = backlog(&p, &acct, 250, 50).await;
    let expected_finals = [100, 200, 250];
    for (pass_no, finals) in expected_finals.into_iter().enumerate() {
        let pass = p.roll_up_pass().await.unwrap();
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
                statuses(&p, chunk).await.iter().all(|s| *s == want),
                "after pass {} chunk {i} should be {want}",
                pass_no + 1
            );
        }
    }
    assert_eq!(p.roll_up_pass().await.unwrap().examined, 0);
}

#[tokio::test]
async fn a_pass_and_prompt_roll_ups_racing_move_each_event_exactly_once() {
    let p = Pipeline::new().await;
    let acct = account(&p).await;
    let poll = catalog_subscription(&p, &integration(&p, &acct, DeliveryMethod::Poll).await).await;
    let changes: Vec<Change> = backlog(&p, &acct, 40, 40).await.concat();
    let prompt = async {
        let mut outcomes = Vec::new();
        for c in changes.iter().rev() {
            outcomes.push(roll_up(&p, c).await);
        }
        outcomes
    };
    let (pass_a, pass_b, outcomes) = tokio::join!(p.roll_up_pass(), p.roll_up_pass(), prompt);
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
            &p,
            c,
            EventStatus::Sent,
            EventTrigger::NothingWaitsNoneFailed,
        )
        .await;
        assert_eq!(transmit(&p, c, &poll).await, Some(TransmitStatus::Pending));
    }
}

// -------------------------------------------------------------------------------- retention

#[tokio::test]
async fn terminal_events_expire_thirty_days_after_becoming_final_and_reads_hide_them_before_ttl() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    r.script([Reply::Status(200), Reply::Status(503)]);
    let acct = account(&p).await;
    let sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let sent = change(&p, &acct).await;
    p.pump().await.unwrap();
    let waiting = change(&p, &acct).await;
    p.pump().await.unwrap();
    assert_final(
        &p,
        &sent,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
    assert_open(&p, &waiting, EventStatus::Partial).await;
    assert_eq!(delivery(&p, &waiting, &sub).await.expires_at, None);

    let (dynamo, table) = (&p.t.clients.dynamo, p.t.config.delivery_table.as_str());
    let acct = acct.as_str();
    let visible = |now: Timestamp| {
        let q = EventQuery {
            limit: 50,
            ..EventQuery::default()
        };
        async move {
            let page = list_events(dynamo, table, acct, &q, now).await.unwrap();
            page.items
                .iter()
                .map(|e| e.record.change_id.clone())
                .collect::<Vec<_>>()
        }
    };
    let finalized = event(&p, &sent).await.finalized_at.unwrap();
    let just_before = finalized.plus(RETENTION).minus(SECOND);
    assert_eq!(visible(just_before).await.len(), 2);
    assert!(
        event_with_deliveries(dynamo, table, acct, &sent.change_id, just_before)
            .await
            .unwrap()
            .is_some()
    );
    // Thirty days on: TTL has not deleted anything yet (the emulator never does, AWS lags), but
    // every read treats the expired event as gone; the partial one never expires.
    let expired = finalized.plus(RETENTION).plus(SECOND);
    assert_eq!(visible(expired).await, vec![waiting.change_id.clone()]);
    assert!(
        event_with_deliveries(dynamo, table, acct, &sent.change_id, expired)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        p.event(acct, &sent.change_id).await.is_some(),
        "still stored"
    );
    assert!(event_with_deliveries(
        dynamo,
        table,
        acct,
        &waiting.change_id,
        expired.plus(RETENTION)
    )
    .await
    .unwrap()
    .is_some());
}

#[tokio::test]
async fn an_operator_restart_reopens_a_final_event_onto_the_roll_up_index() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    let acct = account(&p).await;
    let _sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let c = change(&p, &acct).await;
    p.pump().await.unwrap();
    assert_final(
        &p,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;
    let (dynamo, table) = (&p.t.clients.dynamo, p.t.config.delivery_table.as_str());
    let outcome = reopen_event(dynamo, table, &acct, &c.change_id, p.now())
        .await
        .unwrap();
    assert_eq!(
        outcome,
        ReopenOutcome::Reopened {
            from: EventStatus::Sent
        }
    );
    let e = event(&p, &c).await;
    assert_open(&p, &c, EventStatus::Partial).await;
    assert_eq!(e.status_trigger, Some(EventTrigger::OperatorRestartReopens));
    assert_eq!((e.reopens, e.finalized_at), (Some(1), None));
    let partition = shared::monitor::rollup::read_partition(
        dynamo,
        table,
        &keys::event_pk(&acct, &c.change_id),
    )
    .await
    .unwrap();
    assert!(partition.deliveries.iter().all(|d| d.expires_at.is_none()));
    // Open already: only the fence moves, so a roll-up decided before the restart cannot land.
    assert_eq!(
        reopen_event(dynamo, table, &acct, &c.change_id, p.now())
            .await
            .unwrap(),
        ReopenOutcome::AlreadyOpen {
            status: EventStatus::Partial
        }
    );
    assert_eq!(event(&p, &c).await.reopens, Some(2));
    // The next pass settles it again.
    assert_eq!(p.roll_up_pass().await.unwrap().to_sent, 1);
    assert_final(
        &p,
        &c,
        EventStatus::Sent,
        EventTrigger::NothingWaitsNoneFailed,
    )
    .await;

    // skipped is never reopened.
    let nobody = account(&p).await;
    let s = change(&p, &nobody).await;
    p.pump().await.unwrap();
    assert_eq!(
        reopen_event(dynamo, table, &nobody, &s.change_id, p.now())
            .await
            .unwrap(),
        ReopenOutcome::NotReopenable {
            status: EventStatus::Skipped
        }
    );
    assert_eq!(
        reopen_event(dynamo, table, &nobody, "01NOSUCHCHANGE", p.now())
            .await
            .unwrap(),
        ReopenOutcome::Missing
    );
}

// --------------------------------------------------------------------------- reconciliation

#[tokio::test]
async fn reconciliation_finishes_a_large_backlog_across_invocations_without_redoing_or_skipping() {
    let p = Pipeline::new().await;
    let acct = account(&p).await;
    let poll = catalog_subscription(&p, &integration(&p, &acct, DeliveryMethod::Poll).await).await;
    let changes: Vec<Change> = backlog(&p, &acct, 250, 50).await.concat();
    let mut runs = Vec::new();
    loop {
        let report = p.reconcile(RunKind::Nightly, 100).await;
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
        assert_eq!(event(&p, c).await.status(), EventStatus::Sent);
        assert_eq!(transmit(&p, c, &poll).await, Some(TransmitStatus::Pending));
    }
    let after = p.reconcile(RunKind::Rollup, 100).await;
    assert_eq!((after.rollup.examined, after.more), (0, false));
}

#[tokio::test]
async fn reconciliation_republishes_overdue_dispatch_work_and_reports_it() {
    let p = Pipeline::new().await;
    let r = Receiver::start().await;
    let acct = account(&p).await;
    let sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let c = change(&p, &acct).await;
    // Ingested, but its dispatch message was lost (the stream path never ran).
    p.ingest_pending().await.unwrap();
    // Within the grace the roll-up leaves it alone: the stream path may still publish it.
    p.clock
        .advance(shared::ingest::FIRST_DISPATCH_GRACE - SECOND);
    let report = p.reconcile(RunKind::Nightly, 1000).await;
    assert_eq!((report.rollup.requeued, report.dispatch.published), (0, 0));
    p.clock.advance(SECOND);
    let report = p.reconcile(RunKind::Nightly, 1000).await;
    assert!(report.dispatch.ran);
    // The roll-up walk found the lost first dispatch and the sweep after it published it.
    assert_eq!(report.rollup.requeued, 1);
    assert_eq!(report.dispatch.published, 1);
    // The runs rolled the waiting event up: partial.
    assert_eq!(report.rollup.to_partial + report.rollup.unchanged, 1);
    p.work_pending().await.unwrap();
    assert_eq!(
        delivery(&p, &c, &sub).await.record.status,
        DeliveryStatus::Delivered
    );
    // The roll-up-only run leaves dispatch alone and finishes the event.
    let report = p.reconcile(RunKind::Rollup, 1000).await;
    assert!(!report.dispatch.ran);
    assert_eq!(report.notifications, SettleReport::NotRun);
    assert_eq!(report.rollup.to_sent, 1);
    let doc = shared::reconcile::emf_document(&report, "test", p.now());
    assert_eq!(doc["ReconcileRollUpToSent"], 1);
    assert_eq!(doc["ReconcileLostDispatchRequeued"], 0);
}

// ------------------------------------------------------------------------------ the monitor API

const OPERATOR_TOKEN: &str = "monitor-operator-token";

struct Api {
    app: Router,
}

struct ApiReply {
    status: StatusCode,
    json: Value,
    content_type: String,
}

impl ApiReply {
    #[track_caller]
    fn ok(&self) -> &Value {
        assert_eq!(self.status, StatusCode::OK, "{}", self.json);
        &self.json
    }

    /// Asserts a problem+json of `status`; returns the fields its `errors` name.
    #[track_caller]
    fn problem(&self, status: StatusCode) -> Vec<String> {
        assert_eq!(self.status, status, "{}", self.json);
        assert_eq!(self.content_type, "application/problem+json");
        assert!(self.json["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("https://rhythm-delivery.dev/problems/")));
        self.json["errors"]
            .as_array()
            .map(|es| {
                es.iter()
                    .map(|e| e["field"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Api {
    fn new(p: &Pipeline) -> Self {
        let state = ApiState::new(
            p.t.clients.clone(),
            p.t.config.clone(),
            Arc::new(p.clock.clone()),
            OperatorAuth::static_token(OPERATOR_TOKEN, "ops@example.com"),
        );
        Api { app: router(state) }
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> ApiReply {
        let mut b = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            b = b.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = match body {
            Some(v) => b
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(v.to_string()))
                .unwrap(),
            None => b.body(Body::empty()).unwrap(),
        };
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
            .await
            .unwrap();
        ApiReply {
            status,
            json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            content_type,
        }
    }

    async fn get(&self, path: &str, token: &str) -> ApiReply {
        self.call(Method::GET, path, Some(token), None).await
    }
}

/// An account token for `account`, stored as the API stores tokens.
async fn account_token(p: &Pipeline, account: &str) -> String {
    let (plaintext, record) = issue_token(TokenKind::Acct, account, None, p.now());
    for item in [record.item().unwrap(), record.reference_item().unwrap()] {
        p.t.clients
            .dynamo
            .put_item()
            .table_name(&p.t.config.delivery_table)
            .set_item(Some(item))
            .send()
            .await
            .unwrap();
    }
    plaintext.expose().to_owned()
}

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
    let p = Pipeline::new().await;
    let api = Api::new(&p);
    let r = Receiver::start().await;
    // Three changes are delivered, then the receiver refuses two for good.
    r.script([Reply::Status(200), Reply::Status(200), Reply::Status(200)]);
    r.set_default(Reply::Status(410));
    let acct = account(&p).await;
    let _sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let token = account_token(&p, &acct).await;
    let mut changes = Vec::new();
    let mut times = Vec::new();
    for _ in 0..5 {
        times.push(p.now());
        changes.push(change(&p, &acct).await);
        p.pump().await.unwrap();
        p.clock.advance(MINUTE);
    }
    let all: Vec<String> = changes.iter().rev().map(|c| c.change_id.clone()).collect();

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
        "After this pass nothing waits and at least one delivery is failed."
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
        [changes[1].change_id.clone(), changes[2].change_id.clone()]
    );

    // Bad input is named, field by field.
    let bad = api
        .get("/v1/events?status=done&from=yesterday&limit=500", &token)
        .await;
    assert_eq!(
        bad.problem(StatusCode::UNPROCESSABLE_ENTITY),
        ["status", "from", "limit"]
    );
    let bad = api.get("/v1/events?cursor=not-a-cursor", &token).await;
    assert_eq!(bad.problem(StatusCode::UNPROCESSABLE_ENTITY), ["cursor"]);
    let unknown = api.get("/v1/events?event_status=sent", &token).await;
    unknown.problem(StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_api_shows_an_event_with_its_delivery_log_and_no_route_sets_a_status() {
    let p = Pipeline::new().await;
    let api = Api::new(&p);
    let ok = Receiver::start().await;
    let gone = Receiver::start().await;
    gone.set_default(Reply::Full {
        status: 410,
        headers: vec![],
        body: "no such hook".into(),
    });
    let acct = account(&p).await;
    let served = catalog_subscription(&p, &webhook(&p, &ok, &acct).await).await;
    let refused = catalog_subscription(&p, &webhook(&p, &gone, &acct).await).await;
    let filtered = subscribe(
        &p,
        &webhook(&p, &ok, &acct).await,
        &["catalog_item"],
        Some(json!({"field": "record.price", "gt": 100})),
        RetryPolicy::FixedSchedule,
    )
    .await;
    let token = account_token(&p, &acct).await;
    let c = change(&p, &acct).await;
    p.pump().await.unwrap();

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
    assert_eq!(event(&p, &c).await.status(), EventStatus::Failed);
    api.get("/v1/events/no%23such", &token)
        .await
        .problem(StatusCode::NOT_FOUND);
    api.get("/v1/events/01NOSUCHEVENT", &token)
        .await
        .problem(StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_api_shows_what_needs_attention_paused_subscriptions_and_dead_or_failed_deliveries() {
    let p = Pipeline::new().await;
    let api = Api::new(&p);
    let r = Receiver::start().await;
    r.script([Reply::Status(200), Reply::Status(400)]);
    let acct = account(&p).await;
    let token = account_token(&p, &acct).await;
    let sub = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    let queue = catalog_subscription(
        &p,
        &integration(&p, &acct, DeliveryMethod::Unknown("queue".into())).await,
    )
    .await;
    let mut paused = catalog_subscription(&p, &webhook(&p, &r, &acct).await).await;
    paused.status = SubscriptionStatus::Paused;
    fixtures(&p).save_subscription(&paused).await.unwrap();
    // First change: delivered and failed (unknown method); second: dead (400) and failed.
    let first = change(&p, &acct).await;
    p.pump().await.unwrap();
    p.clock.advance(MINUTE);
    let second = change(&p, &acct).await;
    p.pump().await.unwrap();
    assert_eq!(
        delivery(&p, &second, &sub).await.record.status,
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
            second.change_id.clone(),
            sub.subscription_id.clone(),
            "dead".to_owned(),
        ),
        (
            second.change_id.clone(),
            queue.subscription_id.clone(),
            "failed".to_owned(),
        ),
        (
            first.change_id.clone(),
            queue.subscription_id.clone(),
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
    let p = Pipeline::new().await;
    let api = Api::new(&p);
    let r = Receiver::start().await;
    r.set_default(Reply::Status(400));
    let mine = account(&p).await;
    let theirs = account(&p).await;
    let _sub = catalog_subscription(&p, &webhook(&p, &r, &mine).await).await;
    let mine_token = account_token(&p, &mine).await;
    let their_token = account_token(&p, &theirs).await;
    let c = change(&p, &mine).await;
    p.pump().await.unwrap();
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
    // A cursor of one account is refused by another's listing.
    let _second = change(&p, &mine).await;
    p.pump().await.unwrap();
    let page = api.get("/v1/events?limit=1", &mine_token).await;
    let cursor = page.ok()["next_cursor"].as_str().unwrap().to_owned();
    api.get(&format!("/v1/events?cursor={cursor}"), &their_token)
        .await
        .problem(StatusCode::UNPROCESSABLE_ENTITY);
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
    let p = Pipeline::new().await;
    let api = Api::new(&p);
    let acct = account(&p).await;
    let token = account_token(&p, &acct).await;
    let changes: Vec<Change> = backlog(&p, &acct, 5, 5).await.concat();
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
        assert_eq!(event(&p, c).await.status(), EventStatus::Skipped);
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
    assert_eq!(
        bad.problem(StatusCode::UNPROCESSABLE_ENTITY),
        ["run", "max_events", "dry"]
    );
}

// ------------------------------------------------------------------- the function's payloads

fn sample(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../events")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn the_reconcile_schedules_payloads_select_their_runs() {
    use shared::reconcile::ReconcileRequest;
    let template = std::fs::read_to_string(local::template::Template::project_path()).unwrap();
    let p = Pipeline::new().await;
    let acct = account(&p).await;
    let _ = backlog(&p, &acct, 2, 2).await;
    for (file, kind) in [
        ("reconcile-nightly.json", RunKind::Nightly),
        ("reconcile-rollup.json", RunKind::Rollup),
    ] {
        let payload = sample(file);
        assert!(
            template.contains(&format!("Input: '{payload}'")),
            "{file} is what template.yaml's schedule sends"
        );
        let request = ReconcileRequest::from_payload(&payload);
        assert_eq!(request.run, kind);
        let report = p.reconcile(request.run, 1000).await;
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
