//! True concurrency: two worker instances on their own tokio tasks handle the same queue messages
//! at the same time, their first requests held by injected latency so that both have asked before
//! either has written (the delivery worker's claims reach the table together; the notification
//! worker's reads all happen before either claims). Exactly one attempt per claim number reaches the receiver and the table; no notice is
//! sent twice.

use crate::sim::{slack_notice, Sim};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use local::faults::{Fault, Matcher};
use local::receiver::{Receiver, Reply};
use local::testkit::World;
use shared::delivery::dispatch::publish::works_in;
use shared::delivery::worker::DeliveryWorker;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::notification_delivery::NotificationStatus;
use shared::domain::retry::RetryPolicy;
use shared::notify::worker::NotificationWorker;
use std::sync::Arc;
use std::time::Duration;

const CHANGES: usize = 6;
/// Long enough that both tasks have asked before either writes.
const HOLD: Duration = Duration::from_millis(400);

/// Each of the next `requests` requests of `operation` (whose body contains `text`, if given)
/// meets `HOLD` of latency.
fn hold(w: &World, operation: &str, text: Option<&str>, requests: u32) {
    w.pipeline.stack.faults.inject_matching(
        Matcher {
            operation: operation.into(),
            body_contains: text.map(str::to_string),
        },
        Fault::Latency(HOLD),
        requests,
    );
}

/// Runs `handle` for the same batch on two tasks of their own at once (local tasks: the
/// notification worker's future is not `Send`; the test runtime has one thread either way).
async fn race<W, F, Fut>(workers: [Arc<W>; 2], event: SqsEvent, handle: F)
where
    W: 'static,
    F: Fn(Arc<W>, SqsEvent) -> Fut + Copy + 'static,
    Fut: std::future::Future<Output = SqsBatchResponse> + 'static,
{
    let tasks = tokio::task::LocalSet::new();
    tasks
        .run_until(async move {
            let running =
                workers.map(|worker| tokio::task::spawn_local(handle(worker, event.clone())));
            for task in running {
                task.await.expect("a worker task");
            }
        })
        .await;
}

#[tokio::test]
async fn two_delivery_workers_on_the_same_messages_make_each_numbered_attempt_once() {
    let w = World::new().await;
    let account = w.account().await;
    let hook = w.integration(&account.account_id).await;
    let sub = w.subscribe(&hook).policy(RetryPolicy::FixedSchedule).await;
    // Each delivery's first attempt fails (a retry is due a minute later), the second succeeds.
    w.receiver.script((0..CHANGES).map(|_| Reply::Status(503)));
    let mut changes = Vec::new();
    for i in 0..CHANGES {
        changes.push(w.change(&account.account_id).price(i as f64).await);
    }
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    let mut sim = Sim::new(&w);
    let workers = [0, 1].map(|_| {
        Arc::new(DeliveryWorker::new(
            w.pipeline.stack.clients.clone(),
            w.pipeline.stack.config.clone(),
            Arc::new(w.pipeline.clock.clone()),
        ))
    });
    for round in 1..=2u32 {
        let messages = sim.deliveries.receive().await;
        // The dispatcher packs the account's new deliveries in one message; the sweep publishes
        // each retry in one of its own: every delivery is on the queue once either way.
        let deliveries: usize = messages
            .iter()
            .filter_map(|m| works_in(m.body.as_deref().unwrap_or_default()))
            .map(|works| works.len())
            .sum();
        assert_eq!(deliveries, CHANGES, "round {round}: every delivery once");
        let event = sim.deliveries.event(&messages);
        // Both workers' claims of every delivery (held) reach the table together.
        hold(
            &w,
            "UpdateItem",
            Some("lease_until = :lease"),
            2 * CHANGES as u32,
        );
        race(
            workers.clone(),
            event,
            |worker: Arc<DeliveryWorker>, e| async move { worker.handle(e).await },
        )
        .await;
        w.pipeline.stack.faults.clear();
        sim.deliveries
            .settle(w.pipeline.now(), &messages, &Default::default())
            .await;
        for change in &changes {
            let d = w
                .pipeline
                .delivery(&account.account_id, &change.change_id, &sub.subscription_id)
                .await
                .unwrap();
            let numbers: Vec<u32> = d.attempt_log.iter().map(|a| a.number).collect();
            assert_eq!(
                numbers,
                (1..=round).collect::<Vec<_>>(),
                "round {round}: the table"
            );
            let received = w
                .receiver
                .received()
                .iter()
                .filter(|r| r.header("webhook-id") == Some(d.delivery_id.as_str()))
                .count();
            assert_eq!(received, round as usize, "round {round}: the receiver");
            let expected = if round == 1 {
                DeliveryStatus::Retrying
            } else {
                DeliveryStatus::Delivered
            };
            assert_eq!(d.status, expected);
        }
        // The retries fall due: the sweep publishes them.
        w.pipeline.clock.advance(Duration::from_secs(61));
        w.pipeline.dispatcher.sweep().await.unwrap();
    }
    assert_eq!(w.receiver.count(), 2 * CHANGES);
}

#[tokio::test]
async fn two_notification_workers_on_the_same_messages_send_each_notice_once() {
    let w = World::new().await;
    let slack = Receiver::start().await;
    slack.set_default(Reply::Status(200));
    let mut notices = Vec::new();
    for i in 0..CHANGES {
        let notice = slack_notice(
            &slack,
            &format!("ops-{i}"),
            &format!("Race {i}"),
            &["slack"],
        );
        let (n, _) = w
            .notify
            .notices
            .create(&w.notify.account, notice)
            .await
            .unwrap();
        notices.push(n.request.notice_id.clone());
    }
    let mut sim = Sim::new(&w);
    // The fan-out and the publishing of the work, without the queue's consumer.
    for _ in 0..3 {
        sim.run_notification_stream().await;
    }
    let messages = sim.notifications.receive().await;
    assert_eq!(messages.len(), CHANGES, "one message per delivery");
    let event = sim.notifications.event(&messages);
    let workers: [Arc<NotificationWorker>; 2] =
        [0, 1].map(|_| Arc::new(w.notify.worker_with(|a| a)));
    // Each worker reads the delivery, its work row and its notice (held), then claims.
    hold(&w, "GetItem", None, 2 * 3 * CHANGES as u32);
    race(
        workers,
        event,
        |worker: Arc<NotificationWorker>, e| async move { worker.handle(e).await },
    )
    .await;
    w.pipeline.stack.faults.clear();
    assert_eq!(slack.count(), CHANGES, "each notice sent once");
    for notice_id in &notices {
        let d = w.notify.delivery(notice_id, "slack-0").await;
        assert_eq!(d.status, NotificationStatus::Delivered);
        let claims = d.history.iter().filter(|h| h.kind == "claimed").count();
        assert_eq!(claims, 1, "{notice_id}: one claim");
    }
}
