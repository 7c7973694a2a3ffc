//! The whole integration pipeline on the emulator, wired as the template wires it in AWS: the
//! changes stream into ingest, the delivery table's stream into the dispatcher, the delivery queue
//! into the worker; the dispatcher's sweep runs when the (manual) clock moves.

use crate::queues::QueueReport;
use crate::streams::StreamTap;
use crate::testkit::TestStack;
use anyhow::Result;
use shared::clock::{Clock, ManualClock};
use shared::dispatch::Dispatcher;
use shared::domain::change::Change;
use shared::domain::time::Timestamp;
use shared::ids::{AccountId, ChangeId, SubscriptionId};
use shared::ingest::Ingest;
use shared::monitor::{RollUp, RollUpReport};
use shared::notify::settle::reconcile_settler;
use shared::reconcile::{Budget, ReconcileReport, Reconciler, RunKind};
use shared::store::delivery::Delivery;
use shared::store::event::EventRecord;
use shared::store::keys;
use shared::store::subscription::Subscription;
use shared::store::{from_item, read, write, Item};
use shared::worker::DeliveryWorker;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

pub struct Pipeline {
    pub t: TestStack,
    pub clock: ManualClock,
    pub ingest: Ingest,
    pub dispatcher: Dispatcher,
    pub worker: DeliveryWorker,
    /// The event monitor's roll-up (the dispatcher's stream path also runs it promptly).
    pub rollup: RollUp,
    changes: Mutex<StreamTap>,
    deliveries: Mutex<StreamTap>,
    /// The wall time of every handler invocation, per function, as Lambda bills it.
    pub billed: Billed,
}

/// Handler invocations and their billed duration (each rounded up to the millisecond, as Lambda
/// bills it) per function: what the bench turns into dollars of Lambda duration.
#[derive(Debug, Default)]
pub struct Billed {
    pub ingest: BilledTime,
    pub dispatch: BilledTime,
    pub deliver: BilledTime,
}

impl Billed {
    pub fn reset(&self) {
        for f in [&self.ingest, &self.dispatch, &self.deliver] {
            *f.0.lock().expect("billed time") = (0, 0);
        }
    }
}

/// Invocations and billed milliseconds of one function.
#[derive(Debug, Default)]
pub struct BilledTime(std::sync::Mutex<(u64, u64)>);

impl BilledTime {
    /// Runs one invocation's future and bills its wall time.
    pub async fn time<F: std::future::Future>(&self, invocation: F) -> F::Output {
        let started = std::time::Instant::now();
        let out = invocation.await;
        let ms = started.elapsed().as_micros().div_ceil(1000) as u64;
        let mut t = self.0.lock().expect("billed time");
        *t = (t.0 + 1, t.1 + ms.max(1));
        out
    }
    /// (invocations, billed milliseconds) so far.
    pub fn get(&self) -> (u64, u64) {
        *self.0.lock().expect("billed time")
    }
}

/// What one `pump` moved.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PumpReport {
    pub changes: usize,
    pub change_failures: usize,
    /// Delivery-stream records the dispatcher acted on (new work, prompt roll-ups).
    pub dispatcher_records: usize,
    pub queue: QueueReport,
}

impl Pipeline {
    pub async fn new() -> Self {
        Self::with_stack(TestStack::new().await).await
    }

    pub async fn with_stack(t: TestStack) -> Self {
        let clock = ManualClock::starting_now();
        let shared_clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let ingest = Ingest::new(t.clients.clone(), t.config.clone(), shared_clock.clone());
        let dispatcher = Dispatcher::new(t.clients.clone(), t.config.clone(), shared_clock.clone())
            .without_lookahead();
        let rollup = RollUp::new(
            t.clients.dynamo.clone(),
            t.config.delivery_table.clone(),
            shared_clock.clone(),
        );
        let worker = DeliveryWorker::new(t.clients.clone(), t.config.clone(), shared_clock);
        let changes = Mutex::new(t.stream("ChangesTable"));
        // The dispatcher's event source mapping filters with template.yaml's FilterCriteria.
        let deliveries = Mutex::new(t.mapped_stream("DeliveryTable", "DispatchFunction"));
        Pipeline {
            t,
            clock,
            ingest,
            dispatcher,
            worker,
            rollup,
            changes,
            deliveries,
            billed: Billed::default(),
        }
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The owning application writes a change into its changes table.
    pub async fn write_change(&self, change: &Change) -> Result<()> {
        let item: Item = serde_dynamo::to_item(change)?;
        self.write_raw_change(item).await
    }

    /// Writes a raw item into the changes table (for malformed-record tests).
    pub async fn write_raw_change(&self, item: Item) -> Result<()> {
        let put = write::put(&self.t.config.changes_table, item)?;
        write::send(&self.t.clients.dynamo, put).await?;
        Ok(())
    }

    /// Drains the changes stream into ingest.
    pub async fn ingest_pending(&self) -> Result<(usize, usize)> {
        let mut tap = self.changes.lock().await;
        let r = tap
            .drain(|event| self.billed.ingest.time(self.ingest.handle(event)))
            .await?;
        Ok((r.records, r.failures))
    }

    /// Drains the delivery table's stream into the dispatcher: only the records the template's
    /// `FilterCriteria` pass, in full batches of those, as the event source mapping hands them
    /// over. Returns how many records the dispatcher received.
    pub async fn dispatch_pending(&self) -> Result<usize> {
        Ok(self.dispatch_pending_with_failures().await?.0)
    }

    /// [`Self::dispatch_pending`], also answering how many records the dispatcher reported as
    /// failed (each hand-over counts again).
    pub async fn dispatch_pending_with_failures(&self) -> Result<(usize, usize)> {
        let mut tap = self.deliveries.lock().await;
        let r = tap
            .drain(|event| {
                self.billed
                    .dispatch
                    .time(self.dispatcher.handle_stream(event))
            })
            .await?;
        Ok((r.records, r.failures))
    }

    /// Drains the delivery queue into the worker.
    pub async fn work_pending(&self) -> Result<QueueReport> {
        let tap = self.t.queue("DeliveryQueue");
        tap.drain(
            |event| self.billed.deliver.time(self.worker.handle(event)),
            1000,
        )
        .await
    }

    /// Runs every stage until nothing moves.
    pub async fn pump(&self) -> Result<PumpReport> {
        let mut report = PumpReport::default();
        for _ in 0..20 {
            let (changes, failures) = self.ingest_pending().await?;
            let published = self.dispatch_pending().await?;
            let queue = self.work_pending().await?;
            report.changes += changes;
            report.change_failures += failures;
            report.dispatcher_records += published;
            report.queue.batches += queue.batches;
            report.queue.messages += queue.messages;
            report.queue.deleted += queue.deleted;
            report.queue.failures += queue.failures;
            if changes == 0 && queue.messages == 0 {
                break;
            }
        }
        Ok(report)
    }

    /// Moves the clock on, runs the dispatcher's sweep (as its schedule would) and pumps.
    pub async fn advance(&self, by: Duration) -> Result<PumpReport> {
        self.clock.advance(by);
        self.billed.dispatch.time(self.dispatcher.sweep()).await?;
        self.pump().await
    }

    /// One roll-up pass of the event monitor (`docs/lifecycles.md#event-status`).
    pub async fn roll_up_pass(&self) -> Result<RollUpReport> {
        Ok(self.rollup.pass().await?)
    }

    /// One reconciliation invocation as the reconcile function runs it (with the notification
    /// settling the function wires), bounded by `max_events` (and an hour), with a dispatcher that
    /// publishes only what is already due (the manual clock's minutes are not the queue's seconds).
    pub async fn reconcile(&self, kind: RunKind, max_events: usize) -> ReconcileReport {
        let clock: Arc<dyn Clock> = Arc::new(self.clock.clone());
        let dispatcher =
            Dispatcher::new(self.t.clients.clone(), self.t.config.clone(), clock.clone())
                .without_lookahead();
        let settler = reconcile_settler(&self.t.clients, &self.t.config, &clock);
        Reconciler::from_parts(self.rollup.clone(), dispatcher)
            .with_notification_settler(Arc::new(settler))
            .with_replays(
                self.t.clients.dynamo.clone(),
                self.t.config.delivery_table.clone(),
                clock.clone(),
            )
            .run(kind, Budget::within(Duration::from_secs(3600), max_events))
            .await
    }

    pub async fn delivery(
        &self,
        account_id: &AccountId,
        change_id: &ChangeId,
        subscription_id: &SubscriptionId,
    ) -> Option<Delivery> {
        self.get(
            &keys::event_pk(account_id, change_id),
            &keys::delivery_sk(subscription_id),
        )
        .await
        .map(|i| from_item(i).expect("a delivery item"))
    }

    pub async fn event(&self, account_id: &AccountId, change_id: &ChangeId) -> Option<EventRecord> {
        self.get(&keys::event_pk(account_id, change_id), keys::EVENT_SK)
            .await
            .map(|i| from_item(i).expect("an event item"))
    }

    pub async fn subscription(
        &self,
        account_id: &AccountId,
        subscription_id: &SubscriptionId,
    ) -> Option<Subscription> {
        self.get(
            &keys::account_pk(account_id),
            &keys::subscription_sk(subscription_id),
        )
        .await
        .map(|i| from_item(i).expect("a subscription item"))
    }

    /// A raw item of the delivery table.
    pub async fn get(&self, pk: &str, sk: &str) -> Option<Item> {
        read::get(
            &self.t.clients.dynamo,
            &self.t.config.delivery_table,
            pk,
            sk,
        )
        .await
        .expect("get_item")
    }
}
