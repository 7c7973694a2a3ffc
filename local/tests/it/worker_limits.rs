//! What one receiver cannot do to the delivery worker: exhaust its memory with an endless
//! answer, hold a batch past the invocation's deadline, or hold other endpoints' deliveries
//! behind its timeouts.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use local::receiver::{Receiver, Reply};
use local::testkit::id;
use local::testkit::World;
use shared::delivery::dispatch::publish::works_in;
use shared::delivery::worker::adapters::DETAIL_LIMIT;
use shared::delivery::worker::internal::InternalRegistry;
use shared::delivery::worker::webhook::WebhookAdapter;
use shared::delivery::worker::{
    BATCH_CONCURRENCY, DEADLINE_MARGIN, ENDPOINT_DEFERRAL, HAND_BACK_DELAY,
    PER_SUBSCRIPTION_CONCURRENCY, SLOW_ATTEMPT_PERCENT,
};
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::ssrf::TargetPolicy;
use shared::store::delivery::{Delivery, DeliveryWork};
use shared::store::subscription::Subscription;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

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
            ids.push(w.change(&sub.account_id).await.change_id.to_string());
        }
        changes.push(ids);
    }
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    let queue = w.pipeline.stack.queue("DeliveryQueue");
    let expected = subscriptions.len() * per_subscription;
    // The dispatcher packs each account's new deliveries, up to ten to a message.
    let deliveries = |messages: &[aws_sdk_sqs::types::Message]| -> usize {
        messages
            .iter()
            .filter_map(|m| works_in(m.body.as_deref().unwrap_or_default()))
            .map(|works| works.len())
            .sum()
    };
    let mut messages = Vec::new();
    while deliveries(&messages) < expected {
        let got = queue.receive().await.unwrap();
        assert!(
            !got.is_empty(),
            "{} of {expected} deliveries",
            deliveries(&messages)
        );
        messages.extend(got);
    }
    assert_eq!(deliveries(&messages), expected);
    // These tests are about the worker's limits per delivery, which treat a packed message's
    // deliveries one by one: each comes here in a message of its own, so a test can name it.
    let messages: Vec<aws_sdk_sqs::types::Message> = messages
        .into_iter()
        .flat_map(|m| {
            let works = works_in(m.body.as_deref().unwrap_or_default()).expect("delivery work");
            let id = m.message_id.clone().unwrap_or_default();
            works
                .iter()
                .enumerate()
                .map(|(k, work)| {
                    let mut one = m.clone();
                    one.body = Some(serde_json::to_string(work).unwrap());
                    one.message_id = Some(format!("{id}-{k}"));
                    one
                })
                .collect::<Vec<_>>()
        })
        .collect();
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

    let response = w.pipeline.worker.handle(event).await;
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
                .pipeline
                .delivery(&sub.account_id, &id(change), &sub.subscription_id)
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
            .pipeline
            .delivery(&normal.account_id, &id(change), &normal.subscription_id)
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

/// The delivery a queue message asks for.
async fn delivery_of(w: &World, message: &SqsMessage) -> Delivery {
    let work: DeliveryWork = serde_json::from_str(message.body.as_deref().unwrap()).unwrap();
    w.pipeline
        .delivery(&work.account_id, &work.change_id, &work.subscription_id)
        .await
        .unwrap()
}

/// A receiver that hangs past the attempt timeout on every request, and a deadline that leaves
/// time for at most two rounds of the batch's concurrent attempts (of three): the worker returns
/// before the deadline, every message it did not start is handed back — a copy sent again to
/// the queue and the message acknowledged, not failed — with its delivery unclaimed (no claim
/// write, no attempt number), every attempted one was claimed once; handling the whole batch
/// again attempts exactly the handed-back ones, so none counts twice.
#[tokio::test]
async fn a_batch_hands_back_unclaimed_what_cannot_finish_before_the_deadline() {
    const MESSAGES: usize = 3 * BATCH_CONCURRENCY;
    let w = World::new().await;
    let hanging = Receiver::start().await;
    hanging.set_default(Reply::Hang(Duration::from_secs(5)));
    // Three subscriptions, so that the batch's slots are not held back per subscription.
    let mut subs = Vec::new();
    for _ in 0..3 {
        subs.push(subscription_to(&w, &hanging).await);
    }
    let (event, _) = one_batch(&w, &subs.iter().collect::<Vec<_>>(), MESSAGES / 3).await;
    let timeout = Duration::from_secs(1);
    // Without the per-endpoint bound, which would defer what a timed-out endpoint has left
    // (tested below): here every message is attempted.
    let worker = w
        .worker_with(
            WebhookAdapter::new(TargetPolicy::LOCAL_DEMO, timeout),
            InternalRegistry::default(),
        )
        .without_endpoint_bound();
    // Room for at most two rounds of attempts to start (each needs timeout + margin before the
    // deadline), never for the third.
    let allowed = timeout * 2 + DEADLINE_MARGIN + timeout / 2;
    w.pipeline.stack.meter.reset();
    let started = Instant::now();
    let response = worker
        .handle_until(event.clone(), Some(started + allowed))
        .await;
    let took = started.elapsed();
    let updates = w
        .pipeline
        .stack
        .meter
        .total("DynamoDB", Some(&["UpdateItem"]));

    assert!(
        response.batch_item_failures.is_empty(),
        "a handed-back message is re-sent, not failed"
    );
    let mut handed_back = BTreeSet::new();
    let mut attempted = 0;
    for message in &event.records {
        let d = delivery_of(&w, message).await;
        if d.attempts == 0 {
            handed_back.insert(message.body.clone().unwrap());
            assert_eq!(d.status, DeliveryStatus::Pending);
            assert!(
                d.lease_token.is_none() && d.lease_until.is_none(),
                "a handed-back delivery was claimed"
            );
        } else {
            attempted += 1;
            assert_eq!(d.attempts, 1);
            assert_eq!(d.attempt_log.len(), 1);
            assert_eq!(d.attempt_log[0].class, "transient", "the attempt timed out");
            assert_eq!(d.status, DeliveryStatus::Retrying);
        }
    }
    println!(
        "deadline {allowed:?}, attempt timeout {timeout:?}: {MESSAGES} messages, {attempted} attempted, {} handed back unclaimed, returned after {took:?}",
        handed_back.len()
    );
    assert!(took < allowed, "the batch outran its deadline: {took:?}");
    assert_eq!(attempted + handed_back.len(), MESSAGES);
    assert!(attempted >= BATCH_CONCURRENCY, "the first round starts");
    assert!(!handed_back.is_empty(), "the third round does not");
    assert_eq!(hanging.count(), attempted, "one request per attempt");
    // One claim and one outcome per attempted message, nothing for the others.
    assert_eq!(updates, 2 * attempted as u64);
    // Their copies wait a moment on the queue, bodies unchanged.
    tokio::time::sleep(HAND_BACK_DELAY + Duration::from_millis(200)).await;
    let queue = w.pipeline.stack.queue("DeliveryQueue");
    let mut copies = BTreeSet::new();
    loop {
        let got = queue.receive().await.unwrap();
        if got.is_empty() {
            break;
        }
        copies.extend(got.into_iter().map(|m| m.body.unwrap()));
    }
    assert_eq!(copies, handed_back);

    // The queue returns the whole batch (a duplicate of every attempted message too): only the
    // handed-back ones are attempted now (the others are not yet due for their retry).
    let response = worker.handle(event.clone()).await;
    assert!(response.batch_item_failures.is_empty());
    for message in &event.records {
        let d = delivery_of(&w, message).await;
        assert_eq!(d.attempts, 1, "every delivery has exactly one attempt");
        assert_eq!(d.attempt_log.len(), 1);
    }
    assert_eq!(hanging.count(), MESSAGES);
}

/// One batch whose first fourteen messages go to an endpoint hanging past the attempt timeout and
/// the next twenty to a well-behaved one: the hanging endpoint holds at most
/// PER_SUBSCRIPTION_CONCURRENCY of the batch's slots at once, so every well-behaved delivery is
/// attempted before the first hanging attempt has even timed out. (The timeout is long enough
/// for twenty deliveries' store calls on a loaded machine: the emulator serialises requests.)
#[tokio::test]
async fn a_hanging_endpoint_holds_only_its_share_of_a_batchs_slots() {
    let w = World::new().await;
    let hanging = Receiver::start().await;
    hanging.set_default(Reply::Hang(Duration::from_secs(30)));
    let slow = subscription_to(&w, &hanging).await;
    let fine = subscription_to(&w, &w.receiver).await;
    let hanging_messages = PER_SUBSCRIPTION_CONCURRENCY + 4;
    let (slow_batch, _) = one_batch(&w, &[&slow], hanging_messages).await;
    let (fine_batch, _) = one_batch(&w, &[&fine], 20).await;
    let mut event = slow_batch;
    event.records.extend(fine_batch.records);
    let timeout = Duration::from_secs(8);
    // Without the per-endpoint bound, which would defer what a timed-out endpoint has left
    // (tested below): here every message is attempted.
    let worker = w
        .worker_with(
            WebhookAdapter::new(TargetPolicy::LOCAL_DEMO, timeout),
            InternalRegistry::default(),
        )
        .without_endpoint_bound();
    let started = Instant::now();
    let response = worker.handle(event).await;
    assert!(response.batch_item_failures.is_empty());

    let first_timeout = started + timeout;
    let before = |r: &Receiver| {
        r.received_with_times()
            .iter()
            .filter(|(at, _)| *at < first_timeout)
            .count()
    };
    let (hanging_early, fine_early) = (before(&hanging), before(&w.receiver));
    println!(
        "before the first timeout ({timeout:?}): {hanging_early} hanging attempts in flight, {fine_early} of 20 well-behaved deliveries made"
    );
    assert_eq!(hanging_early, PER_SUBSCRIPTION_CONCURRENCY);
    assert_eq!(
        fine_early, 20,
        "the well-behaved endpoint waited for the hanging one"
    );
    assert_eq!(
        hanging.count(),
        hanging_messages,
        "the hanging endpoint's messages are all attempted"
    );
}

/// Messages on the delivery queue waiting out an SQS delay, as SQS approximates it.
async fn delayed_on_queue(w: &World) -> u64 {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let attrs = w
        .pipeline
        .stack
        .clients
        .sqs
        .get_queue_attributes()
        .queue_url(&w.pipeline.stack.queue("DeliveryQueue").queue_url)
        .attribute_names(A::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap_or_default();
    attrs
        .get(&A::ApproximateNumberOfMessagesDelayed)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// One batch of thirty messages to an endpoint hanging past the attempt timeout, then ten of
/// another account to a well-behaved endpoint; each message carries its account as
/// `MessageGroupId` (the fair queue's tenant). The batch's hanging attempts time out together
/// after one timeout, and the rest of the hanging endpoint's messages are deferred then: the
/// invocation returns after one timeout (plus the store calls) instead of one per ten hanging
/// messages, the other account's deliveries are all made before the first timeout, and every
/// deferred delivery is unclaimed (no attempt number spent), its message acknowledged and a
/// delayed copy waiting on the queue. Handled again with the bound off (the old behaviour), the
/// same kind of batch holds the invocation for three timeouts.
#[tokio::test]
async fn a_hanging_endpoint_costs_a_batch_one_timeout_and_its_other_messages_wait_unclaimed() {
    let w = World::new().await;
    let hanging = Receiver::start().await;
    hanging.set_default(Reply::Hang(Duration::from_secs(60)));
    let slow = subscription_to(&w, &hanging).await;
    let fine = subscription_to(&w, &w.receiver).await;
    assert_ne!(slow.account_id, fine.account_id);
    let hanging_messages = 3 * PER_SUBSCRIPTION_CONCURRENCY;
    let (slow_batch, _) = one_batch(&w, &[&slow], hanging_messages).await;
    let (fine_batch, _) = one_batch(&w, &[&fine], 10).await;
    let mut event = slow_batch;
    event.records.extend(fine_batch.records);
    for m in &event.records {
        let work: DeliveryWork = serde_json::from_str(m.body.as_deref().unwrap()).unwrap();
        assert_eq!(
            m.attributes.get("MessageGroupId"),
            Some(&work.account_id.to_string()),
            "a delivery message's fair-queue group is its account"
        );
    }
    let timeout = Duration::from_secs(4);
    let adapter = || WebhookAdapter::new(TargetPolicy::LOCAL_DEMO, timeout);
    let worker = w.worker_with(adapter(), InternalRegistry::default());
    let started = Instant::now();
    let response = worker.handle(event.clone()).await;
    let took = started.elapsed();
    assert!(response.batch_item_failures.is_empty());

    let fine_early = w
        .receiver
        .received_with_times()
        .iter()
        .filter(|(at, _)| *at < started + timeout)
        .count();
    println!(
        "bounded: {hanging_messages} hanging + 10 well-behaved messages, timeout {timeout:?}: returned after {took:?}, {fine_early} of 10 well-behaved deliveries before the first timeout, {} hanging attempts",
        hanging.count()
    );
    assert_eq!(fine_early, 10, "the well-behaved endpoint waited");
    assert!(
        took < timeout * 2,
        "a hanging endpoint held the batch for more than one timeout: {took:?}"
    );
    assert_eq!(hanging.count(), PER_SUBSCRIPTION_CONCURRENCY);
    let mut attempted = 0;
    for message in &event.records[..hanging_messages] {
        let d = delivery_of(&w, message).await;
        if d.attempts == 1 {
            attempted += 1;
            assert_eq!(d.status, DeliveryStatus::Retrying);
            assert_eq!(d.attempt_log[0].class, "transient", "the attempt timed out");
        } else {
            assert_eq!(d.attempts, 0);
            assert_eq!(d.status, DeliveryStatus::Pending);
            assert!(
                d.lease_token.is_none() && d.lease_until.is_none(),
                "a deferred delivery was claimed"
            );
        }
    }
    assert_eq!(attempted, PER_SUBSCRIPTION_CONCURRENCY);
    let deferred = (hanging_messages - attempted) as u64;
    assert_eq!(
        delayed_on_queue(&w).await,
        deferred,
        "a delayed copy of each deferred message waits {ENDPOINT_DEFERRAL:?} on the queue"
    );
    assert!(w
        .pipeline
        .stack
        .queue("DeliveryQueue")
        .receive()
        .await
        .unwrap()
        .is_empty());

    // The old behaviour on a batch of the same shape: every hanging message is attempted, ten at
    // a time, and the invocation lasts a timeout per ten.
    let (again, _) = one_batch(&w, &[&slow], hanging_messages).await;
    let unbounded = w
        .worker_with(adapter(), InternalRegistry::default())
        .without_endpoint_bound();
    let started = Instant::now();
    unbounded.handle(again).await;
    let took_unbounded = started.elapsed();
    println!(
        "unbounded: the same {hanging_messages} hanging messages held the batch {took_unbounded:?}"
    );
    assert!(took_unbounded >= timeout * 3, "{took_unbounded:?}");
}

/// An endpoint that answers — 200, so every attempt succeeds — just under the attempt timeout
/// costs a batch as much as one that never answers, so it is deferred the same way: one round of
/// its messages is attempted, the rest wait on the queue unclaimed, and the batch returns after
/// about one timeout instead of one per ten of its messages.
///
/// The gap this closes: the worker counted an attempt as its endpoint's timeout only when it had
/// run for the whole timeout (`elapsed >= timeout`), so an endpoint answering a little before
/// it was never deferred and held a batch (and the invocation's deadline) for a near-timeout
/// per round of its messages.
#[tokio::test]
async fn an_endpoint_answering_just_under_the_timeout_is_deferred_like_one_that_times_out() {
    let w = World::new().await;
    let slow = Receiver::start().await;
    let timeout = Duration::from_secs(4);
    // 95 % of the timeout: above SLOW_ATTEMPT_PERCENT, below the timeout.
    let answer_after = timeout * 95 / 100;
    assert!(answer_after * 100 >= timeout * SLOW_ATTEMPT_PERCENT && answer_after < timeout);
    slow.set_default(Reply::Hang(answer_after));
    let sub = subscription_to(&w, &slow).await;
    let messages = 3 * PER_SUBSCRIPTION_CONCURRENCY;
    let (event, _) = one_batch(&w, &[&sub], messages).await;
    let worker = w.worker_with(
        WebhookAdapter::new(TargetPolicy::LOCAL_DEMO, timeout),
        InternalRegistry::default(),
    );
    let started = Instant::now();
    let response = worker.handle(event.clone()).await;
    let took = started.elapsed();
    assert!(response.batch_item_failures.is_empty());
    println!(
        "an endpoint answering after {answer_after:?} (timeout {timeout:?}): {} of {messages} attempted, returned after {took:?}",
        slow.count()
    );
    assert_eq!(slow.count(), PER_SUBSCRIPTION_CONCURRENCY, "one round only");
    assert!(
        took < timeout * 2,
        "held for more than one timeout: {took:?}"
    );
    let mut delivered = 0;
    for message in &event.records {
        let d = delivery_of(&w, message).await;
        if d.attempts == 1 {
            delivered += 1;
            assert_eq!(d.status, DeliveryStatus::Delivered);
        } else {
            assert_eq!(d.attempts, 0);
            assert!(d.lease_token.is_none(), "a deferred delivery was claimed");
        }
    }
    assert_eq!(delivered, PER_SUBSCRIPTION_CONCURRENCY);
    assert_eq!(
        delayed_on_queue(&w).await,
        (messages - delivered) as u64,
        "a delayed copy of each deferred message"
    );
}

/// A message handed back for lack of time, again and again — more times than the delivery
/// queue's maxReceiveCount — is still delivered when time allows, and never reaches the
/// dead-letter queue: each hand-back sends a fresh copy (its receives start again) and
/// acknowledges the message it came from. The queue is driven as the event source mapping
/// drives it (failed messages visible again at once, the others deleted).
#[tokio::test]
async fn a_message_handed_back_more_times_than_max_receive_count_is_still_delivered_and_never_dead_lettered(
) {
    let w = World::new().await;
    let sub = subscription_to(&w, &w.receiver).await;
    let template = local::template::Template::load_project().unwrap();
    let spec = template
        .queues
        .iter()
        .find(|q| q.logical_id == "DeliveryQueue")
        .unwrap();
    let (dead_letters, max_receives) = spec.redrive.clone().expect("a redrive policy");
    assert_eq!(dead_letters, "DeliveryDeadLetterQueue");
    let max_receives = max_receives as usize;
    w.change(&sub.account_id).await;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    let mut queue = w.pipeline.stack.queue("DeliveryQueue");
    queue.redeliver_failures_now = true;
    let worker = w.worker_with(
        WebhookAdapter::new(TargetPolicy::LOCAL_DEMO, Duration::from_secs(1)),
        InternalRegistry::default(),
    );
    let mut report = local::queues::QueueReport::default();
    let mut handed_back = 0;
    for _ in 0..100 {
        if handed_back == max_receives + 2 {
            break;
        }
        // No time left: the deadline is now.
        let mut out_of_time = |event| worker.handle_until(event, Some(Instant::now()));
        if queue
            .drain_once(&mut out_of_time, &mut report)
            .await
            .unwrap()
            == 0
        {
            // The copy waits out its short delay (or the message is gone).
            tokio::time::sleep(Duration::from_millis(250)).await;
            continue;
        }
        handed_back += 1;
    }
    assert_eq!(report.failures, 0, "nothing was failed back to the queue");
    assert_eq!(
        handed_back,
        max_receives + 2,
        "the message stopped coming back"
    );
    assert_eq!(w.receiver.count(), 0, "nothing was attempted");
    // Time at last: the copy is delivered.
    tokio::time::sleep(HAND_BACK_DELAY + Duration::from_millis(200)).await;
    let mut with_time = |event| worker.handle(event);
    assert_eq!(
        queue.drain_once(&mut with_time, &mut report).await.unwrap(),
        1
    );
    assert_eq!(w.receiver.count(), 1);
    let dlq = w.pipeline.stack.queue("DeliveryDeadLetterQueue");
    assert_eq!(
        dlq.depth().await.unwrap(),
        (0, 0),
        "nothing was dead-lettered"
    );
    println!(
        "handed back {handed_back} times (maxReceiveCount {max_receives}), then delivered; dead-letter queue empty"
    );
}

/// The plain delivery's requests are the worker's hot path, untouched by what the same queue
/// and worker now also carry (test events, hand-back copies): one batch of ten deliveries to a
/// well-behaved endpoint costs two writes per delivery (claim, outcome), one read of the dead
/// run for the batch (its first success reads it for all), the account's configuration query, the
/// signing key's one `Decrypt`, and no queue request at all.
#[tokio::test]
async fn a_plain_batch_makes_only_the_hot_paths_requests_and_no_queue_request() {
    let w = World::new().await;
    let sub = subscription_to(&w, &w.receiver).await;
    let (event, _) = one_batch(&w, &[&sub], 10).await;
    w.pipeline.stack.meter.reset();
    let response = w.pipeline.worker.handle(event).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(w.receiver.count(), 10);
    let seen = w.pipeline.stack.meter.snapshot();
    println!("one batch of ten plain deliveries: {seen:?}");
    let count = |service: &str, op: &str| {
        seen.get(&(service.to_string(), op.to_string()))
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(count("DynamoDB", "UpdateItem"), 20);
    assert_eq!(
        count("DynamoDB", "GetItem"),
        1,
        "the dead run, read once a batch"
    );
    // The account's configuration: once per container, or once per message that started before
    // the first load was cached (the cache does not make concurrent loads wait for one).
    assert!((1..=10).contains(&count("DynamoDB", "Query")), "{seen:?}");
    // The data key of the integration's signing secret, once per container.
    assert_eq!(count("KMS", "Decrypt"), 1);
    assert!(
        !seen.keys().any(|(service, _)| service == "SQS"),
        "a plain batch sent to the queue: {seen:?}"
    );
    let kinds: Vec<&(String, String)> = seen.keys().collect();
    assert_eq!(kinds.len(), 4, "{seen:?}");
}
