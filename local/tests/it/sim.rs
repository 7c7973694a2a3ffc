//! Virtual time for the fault, concurrency and recovery suites: the world's handlers and
//! schedules stepped on its manual clock — the dispatcher's sweep every minute and the roll-up
//! reconcile run every ten, as template.yaml schedules them — and queues whose failed messages
//! come back after the queue's visibility timeout *on that clock* (the emulator's own timeout runs
//! in real seconds).

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;
use local::queues::QueueTap;
use local::receiver::Receiver;
use local::streams::StreamTap;
use local::testkit::World;
use shared::domain::time::Timestamp;
use shared::notify::notice_service::NewNotice;
use shared::reconcile::RunKind;
use shared::store::notice::{Contact, Recipient};
use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

/// The dispatcher's sweep schedule (template.yaml `Sweep`: `rate(1 minute)`; `recovery.rs`
/// holds the template to it).
pub use shared::delivery::dispatch::SWEEP_EVERY;
/// The roll-up reconcile run (template.yaml `RollUpWalk`: `rate(10 minutes)`).
pub const ROLLUP_EVERY: Duration = Duration::from_secs(600);
/// template.yaml `DeliveryQueue.VisibilityTimeout`.
pub const DELIVERY_VISIBILITY: Duration = Duration::from_secs(370);
/// template.yaml `NotificationQueue.VisibilityTimeout`.
pub const NOTIFICATION_VISIBILITY: Duration = Duration::from_secs(120);

/// A queue drained as its event source mapping drains it, with failed messages made visible again
/// once the virtual clock has passed their visibility timeout.
pub struct VirtualQueue {
    tap: QueueTap,
    client: aws_sdk_sqs::Client,
    visibility: Duration,
    /// Receipt handles of failed messages and when they come back.
    returning: Vec<(Timestamp, String)>,
    /// Messages handed to the handler, and how many of them it reported as failed.
    pub handled: usize,
    pub failed: usize,
}

impl VirtualQueue {
    pub fn new(w: &World, queue_logical_id: &str, visibility: Duration) -> Self {
        VirtualQueue {
            tap: w.pipeline.stack.queue(queue_logical_id),
            client: aws_sdk_sqs::Client::new(&w.pipeline.stack.sdk),
            visibility,
            returning: Vec::new(),
            handled: 0,
            failed: 0,
        }
    }

    /// The messages visible now, received (they stay in flight until handled by [`Self::run`]).
    pub async fn receive(&self) -> Vec<aws_sdk_sqs::types::Message> {
        self.tap.receive().await.expect("receive")
    }

    /// The Lambda event of `messages`.
    pub fn event(&self, messages: &[aws_sdk_sqs::types::Message]) -> SqsEvent {
        self.tap.event(messages).expect("an SQS event")
    }

    /// Brings back what is due at `now`, then hands batches to `handler` until none is visible.
    /// Returns the messages handled.
    pub async fn drain<F, Fut>(&mut self, now: Timestamp, mut handler: F) -> usize
    where
        F: FnMut(SqsEvent) -> Fut,
        Fut: Future<Output = SqsBatchResponse>,
    {
        let (due, later): (Vec<_>, Vec<_>) =
            self.returning.drain(..).partition(|(at, _)| *at <= now);
        self.returning = later;
        for (_, receipt) in due {
            // A handle that no longer works (the message was deleted meanwhile) is fine.
            let _ = self
                .client
                .change_message_visibility()
                .queue_url(&self.tap.queue_url)
                .receipt_handle(receipt)
                .visibility_timeout(0)
                .send()
                .await;
        }
        let mut handled = 0;
        for _ in 0..100 {
            let messages = self.receive().await;
            if messages.is_empty() {
                break;
            }
            handled += messages.len();
            let response = handler(self.event(&messages)).await;
            self.settle(now, &messages, &response).await;
        }
        self.handled += handled;
        handled
    }

    /// Deletes the messages `response` does not name and schedules the others' return.
    pub async fn settle(
        &mut self,
        now: Timestamp,
        messages: &[aws_sdk_sqs::types::Message],
        response: &SqsBatchResponse,
    ) {
        let failed: HashSet<&str> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        let mut deletions = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let receipt = m.receipt_handle.clone().unwrap_or_default();
            if failed.contains(m.message_id.as_deref().unwrap_or_default()) {
                self.failed += 1;
                self.returning.push((now.plus(self.visibility), receipt));
            } else {
                deletions.push(
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(receipt)
                        .build()
                        .expect("a deletion"),
                );
            }
        }
        if !deletions.is_empty() {
            self.client
                .delete_message_batch()
                .queue_url(&self.tap.queue_url)
                .set_entries(Some(deletions))
                .send()
                .await
                .expect("delete the handled messages");
        }
    }
}

/// Both pipelines of a world, stepped on its clock.
pub struct Sim<'w> {
    pub w: &'w World,
    pub deliveries: VirtualQueue,
    pub notifications: VirtualQueue,
    /// The notification table's stream (the world's own tap is not used: it refuses failures).
    notices: StreamTap,
    started: Timestamp,
    /// Stream records the handlers reported as failed.
    pub stream_failures: usize,
    /// Reconcile reports that had faults.
    pub reconcile_errors: usize,
}

impl<'w> Sim<'w> {
    pub fn new(w: &'w World) -> Self {
        Sim {
            w,
            deliveries: VirtualQueue::new(w, "DeliveryQueue", DELIVERY_VISIBILITY),
            notifications: VirtualQueue::new(w, "NotificationQueue", NOTIFICATION_VISIBILITY),
            notices: w.pipeline.stack.stream("NotificationTable"),
            started: w.pipeline.now(),
            stream_failures: 0,
            reconcile_errors: 0,
        }
    }

    /// Virtual time since the simulation started.
    pub fn elapsed(&self) -> Duration {
        self.w.pipeline.now().since(self.started)
    }

    /// The notification table's stream into its handler (fan-out, publishing work), once.
    pub async fn run_notification_stream(&mut self) -> local::streams::DrainReport {
        let w = self.w;
        self.notices
            .drain(|e| w.notify.stream.handle(e))
            .await
            .expect("the notification stream")
    }

    /// Every handler, at the current virtual time, until nothing moves.
    pub async fn run_now(&mut self) {
        let w = self.w;
        for _ in 0..20 {
            let (changes, change_failures) = w.pipeline.ingest_pending().await.expect("ingest");
            let (published, dispatch_failures) = w
                .pipeline
                .dispatch_pending_with_failures()
                .await
                .expect("dispatch");
            let now = w.pipeline.now();
            let worked = self
                .deliveries
                .drain(now, |e| w.pipeline.worker.handle(e))
                .await;
            let fanned = self.run_notification_stream().await;
            let sent = self
                .notifications
                .drain(now, |e| w.notify.worker.handle(e))
                .await;
            self.stream_failures += change_failures + dispatch_failures + fanned.failures;
            if changes + published + worked + fanned.records + sent == 0 {
                break;
            }
        }
    }

    /// One sweep interval on: the sweep, the roll-up run when its ten minutes are up, then every
    /// handler.
    pub async fn tick(&mut self) {
        let w = self.w;
        w.pipeline.clock.advance(SWEEP_EVERY);
        if w.pipeline.dispatcher.sweep().await.is_err() {
            // A failed sweep is retried by the next one, as the schedule's next run would.
            self.reconcile_errors += 1;
        }
        let minutes = self.elapsed().as_secs() / 60;
        if minutes % (ROLLUP_EVERY.as_secs() / 60) == 0 {
            let report = w.pipeline.reconcile(RunKind::Rollup, 10_000).await;
            self.reconcile_errors += usize::from(!report.ok());
        }
        self.run_now().await;
    }

    /// Runs now, then ticks until `whole` holds; the virtual time it took. Panics after `limit`.
    pub async fn until<F, Fut>(&mut self, limit: Duration, mut whole: F) -> Duration
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        self.run_now().await;
        while !whole().await {
            assert!(
                self.elapsed() <= limit,
                "not whole again after {:?} of virtual time",
                self.elapsed()
            );
            self.tick().await;
        }
        self.elapsed()
    }
}

/// A notice to one contact `id` whose Slack webhook is `slack`, on `channels`.
pub fn slack_notice(slack: &Receiver, id: &str, subject: &str, channels: &[&str]) -> NewNotice {
    NewNotice {
        recipients: vec![Recipient::Contact(Contact {
            id: id.into(),
            email: None,
            slack_webhook_url: Some(slack.url("/services/T/B/x")),
        })],
        channels: channels.iter().map(|c| c.to_string()).collect(),
        subject: subject.into(),
        body: format!("{subject}: body"),
        deadline: None,
        supersede_key: None,
        idempotency_key: ulid::Ulid::new().to_string(),
        reason: None,
    }
}
