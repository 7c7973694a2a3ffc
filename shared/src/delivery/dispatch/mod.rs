//! The message work dispatcher (the dispatch step of the pipeline, between ingest and the delivery
//! worker): publishes push deliveries to the delivery queue.
//!
//! Two paths, and nothing is deleted when it is published:
//! * the **stream** path publishes a push delivery the moment it enters `pending` (created, or
//!   restarted by an operator), with no DynamoDB write at all, up to ten of an account's new
//!   deliveries in one message ([`publish::pack`]: a tenth of the queue's requests);
//! * the **sweep** (every minute) publishes what is due on the sparse, sharded `due` index —
//!   retries whose backoff ends within the next minute (as SQS delays), operator restarts and
//!   lost work — then moves `due_at` a grace period on, so the next sweep does not publish it
//!   again unless it is still unclaimed by then.
//!
//! New push work is not on the `due` index (an entry would bill two index writes per delivery).
//! A worker that dies leaves its messages undeleted, and the queue brings each back whole, every
//! delivery packed in it, after its visibility timeout, which is longer than the lease. Should a first dispatch be lost all the
//! same, the event monitor's roll-up of the still-open event finds the delivery after
//! [`FIRST_DISPATCH_GRACE`](crate::domain::integration_delivery::FIRST_DISPATCH_GRACE) and puts it on the index.
//!
//! A failed publish leaves `due_at` where it was, so the next pass retries it; a duplicate message
//! (or one returned whole after some of its deliveries were done) is harmless because a worker
//! must win a conditional claim on each delivery's attempt number before it runs that attempt.
//!
//! The stream path also triggers the event monitor's **prompt roll-up** ([`RollUp`]): when an
//! event is inserted, and when one of its push deliveries moves from `pending`/`retrying` to a
//! terminal status, the event is rolled up at once (so the event status,
//! `docs/lifecycles.md#event-status`, is current within seconds, not only at the next pass). A
//! roll-up that fails is reported for its record, so the stream delivers it again; the roll-up is
//! idempotent, and so is re-publishing.

use crate::aws::Clients;
use crate::clock::Clock;
use crate::config::Config;
use crate::delivery::rollup::RollUp;
use crate::delivery::route::{self, route, Route};
use crate::domain::integration_delivery::DeliveryStatus;
use crate::metrics::{self, EmfSink, Metric};
use crate::store::delivery::{Delivery, DeliveryWork};
use crate::store::StoreError;
use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use futures::stream::StreamExt;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod invocation;
pub mod publish;
mod sweep;

pub use invocation::Invocation;
pub(crate) use publish::pack_delayed;
pub use publish::{delay_until, publish};

/// How often the sweep runs (template.yaml's `Sweep` schedule, `rate(1 minute)`).
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// How far ahead the sweep publishes (as SQS delays): one sweep interval.
pub(crate) const SWEEP_HORIZON: Duration = SWEEP_EVERY;
/// After the sweep publishes a delivery, how long before it may publish it again if nobody claims it.
pub(crate) const REDISPATCH_GRACE: Duration = Duration::from_secs(5 * 60);
/// Items a sweep takes from one shard in one run; a larger backlog continues on the next run.
pub(crate) const SWEEP_LIMIT_PER_SHARD: i32 = 500;
/// Prompt roll-ups run at once by one stream batch.
pub(crate) const PROMPT_ROLLUP_CONCURRENCY: usize = 8;

/// The payload of the sweep schedule (template.yaml's `Input`): the only one that sweeps.
pub(crate) const SWEEP_PAYLOAD: &str = r#"{"sweep":"due"}"#;
/// The metric each scheduled sweep writes once (the dispatcher-silence alarm's).
pub(crate) const SWEEP_RUNS: &str = "DispatcherSweepRuns";

/// Why an invocation of the dispatch function failed.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("refused payload: {0}")]
    Payload(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SweepReport {
    pub published: u32,
    pub failed: u32,
}

pub struct Dispatcher {
    clients: Clients,
    config: Config,
    clock: Arc<dyn Clock>,
    horizon: Duration,
    rollup: RollUp,
}

/// An event a stream batch rolls up: the record a failure is reported at (its first), and the
/// push delivery the batch's last record of the event shows settling its first attempt, when it
/// is the event's only delivery (decided from it alone, [`RollUp::roll_up_settled`]).
struct RollUpWork {
    record: String,
    settled: Option<(Box<Delivery>, DeliveryStatus)>,
}

/// Work parsed from a stream record, with the record's identifier for failure reporting.
struct StreamWork {
    record: String,
    work: DeliveryWork,
}

impl Dispatcher {
    pub fn new(clients: Clients, config: Config, clock: Arc<dyn Clock>) -> Self {
        let rollup = RollUp::new(
            clients.dynamo.clone(),
            config.delivery_table.clone(),
            clock.clone(),
        );
        Dispatcher {
            clients,
            config,
            clock,
            horizon: SWEEP_HORIZON,
            rollup,
        }
    }

    /// Publishes only what is already due (no SQS delays). For a manual clock, whose minutes are
    /// not the queue's real seconds.
    pub fn without_lookahead(mut self) -> Self {
        self.horizon = Duration::ZERO;
        self
    }

    /// Stream path: publish deliveries that just entered `pending` for a push method, and roll up
    /// the events that were inserted or whose push delivery just became terminal
    /// ([`route`](crate::delivery::route) says which).
    pub async fn handle_stream(&self, event: DynamoDbEvent) -> DynamoDbEventResponse {
        // Each event once per batch, reported (on failure) at its first record.
        let mut rollups: BTreeMap<String, RollUpWork> = BTreeMap::new();
        let mut work: Vec<StreamWork> = Vec::new();
        for r in &event.records {
            match route(r) {
                Route::RollUp { event_pk, settled } => {
                    let entry = rollups.entry(event_pk).or_insert_with(|| RollUpWork {
                        record: crate::runtime::stream_record_id(r),
                        settled: None,
                    });
                    entry.settled = settled;
                    continue;
                }
                Route::Publish(w) => work.push(StreamWork {
                    record: crate::runtime::stream_record_id(r),
                    work: w,
                }),
                Route::Nowhere => {}
            }
            // A later write in the batch to an event's partition (an operator restart of the
            // delivery): the earlier image no longer tells the event's state alone.
            if let Some(entry) = route::event_pk(r).and_then(|pk| rollups.get_mut(&pk)) {
                entry.settled = None;
            }
        }
        let mut failed: Vec<String> = Vec::new();
        // Each account's new work packed into messages of up to `PACKED`, ten messages a request.
        let works: Vec<DeliveryWork> = work.iter().map(|w| w.work.clone()).collect();
        let messages = publish::pack(&works);
        for chunk in messages.chunks(10) {
            let outgoing: Vec<publish::Outgoing> = chunk.iter().map(|(m, _)| m.clone()).collect();
            let unsent = publish::publish_messages(
                &self.clients.sqs,
                &self.config.delivery_queue_url,
                &outgoing,
            )
            .await;
            for i in unsent.into_iter().flat_map(|m| chunk[m].1.iter().copied()) {
                let StreamWork { record, work } = &work[i];
                tracing::warn!(
                    account_id = %work.account_id,
                    change_id = %work.change_id,
                    subscription_id = %work.subscription_id,
                    %record,
                    "publish failed; the stream retries it"
                );
                failed.push(record.clone());
            }
        }
        let failed_rollups: Vec<String> = futures::stream::iter(rollups)
            .map(|(pk, work)| async move {
                let rolled = match &work.settled {
                    Some((delivery, previous)) => {
                        self.rollup.roll_up_settled(delivery, *previous).await
                    }
                    None => self.rollup.roll_up_pk(&pk).await,
                };
                match rolled {
                    Ok(_) => None,
                    Err(e) => {
                        let record = work.record;
                        tracing::warn!(%pk, %record, error = %e, "prompt roll-up failed; the stream retries it");
                        Some(record)
                    }
                }
            })
            .buffer_unordered(PROMPT_ROLLUP_CONCURRENCY)
            .filter_map(|failed| async move { failed })
            .collect()
            .await;
        failed.extend(failed_rollups);
        crate::batch::stream_response(failed)
    }

    /// One invocation of the dispatch function: a delivery-stream batch (`{"Records": [...]}`) or
    /// the sweep schedule's exact payload ([`SWEEP_PAYLOAD`]); anything else is refused, so a
    /// stray invocation neither sweeps nor looks like the schedule to the silence alarm. A
    /// scheduled sweep writes one `DispatcherSweepRuns` EMF document to `sink` (also when it
    /// published nothing): the dispatcher-silence alarm watches it.
    pub async fn handle_payload(
        &self,
        payload: serde_json::Value,
        sink: &dyn EmfSink,
    ) -> Result<serde_json::Value, DispatchError> {
        let invocation =
            serde_json::from_value(payload).map_err(|e| DispatchError::Payload(e.to_string()))?;
        self.handle_invocation(invocation, sink).await
    }

    /// [`Self::handle_payload`] of a payload parsed as the function's runtime parses it (once,
    /// the stream's records straight into their types).
    pub async fn handle_invocation(
        &self,
        invocation: Invocation,
        sink: &dyn EmfSink,
    ) -> Result<serde_json::Value, DispatchError> {
        let payload = match invocation {
            Invocation::Stream(records) => {
                let response = self.handle_stream(records).await;
                return serde_json::to_value(response)
                    .map_err(|e| DispatchError::Payload(e.to_string()));
            }
            Invocation::Other(payload) => payload,
        };
        if serde_json::from_str::<serde_json::Value>(SWEEP_PAYLOAD).ok() != Some(payload.clone()) {
            return Err(DispatchError::Payload(format!(
                "the dispatcher takes a delivery-stream batch or its schedule's payload \
                 {SWEEP_PAYLOAD}; got {}",
                truncate(&payload.to_string(), 200)
            )));
        }
        let result = self.sweep().await;
        let mut props = serde_json::Map::new();
        if let Ok(r) = &result {
            props.insert("published".into(), r.published.into());
            props.insert("failed".into(), r.failed.into());
        }
        sink.emit(&metrics::document(
            &self.config.metrics_namespace,
            &self.config.stage,
            self.clock.now(),
            &[Metric::count(SWEEP_RUNS, 1)],
            props,
        ));
        let report = result?;
        Ok(serde_json::json!({ "published": report.published, "failed": report.failed }))
    }

    /// Sends up to ten deliveries' work in one request, one to a message (the sweep's). Returns
    /// the indexes that were not accepted.
    async fn publish(&self, entries: &[(DeliveryWork, Duration)]) -> Vec<usize> {
        publish(&self.clients.sqs, &self.config.delivery_queue_url, entries).await
    }
}
