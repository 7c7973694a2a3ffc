//! The message work dispatcher (the dispatch step of the pipeline, between ingest and the delivery
//! worker): publishes push deliveries to the delivery queue.
//!
//! Two paths, and nothing is deleted when it is published:
//! * the **stream** path publishes a push delivery the moment it enters `pending` (created, or
//!   restarted by an operator), with no DynamoDB write at all;
//! * the **sweep** (every minute) publishes what is due on the sparse, sharded `due` index —
//!   retries whose backoff ends within the next minute (as SQS delays), operator restarts and
//!   lost work — then moves `due_at` a grace period on, so the next sweep does not publish it
//!   again unless it is still unclaimed by then.
//!
//! New push work is not on the `due` index (an entry would bill two index writes per delivery).
//! A worker that dies leaves its message undeleted, and the queue brings it back after its
//! visibility timeout, which is longer than the lease. Should a first dispatch be lost all the
//! same, the event monitor's roll-up of the still-open event finds the delivery after
//! [`FIRST_DISPATCH_GRACE`](crate::domain::integration_delivery::FIRST_DISPATCH_GRACE) and puts it on the index.
//!
//! A failed publish leaves `due_at` where it was, so the next pass retries it; a duplicate message
//! is harmless because a worker must win a conditional claim on an attempt number before it
//! runs that attempt.
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
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::lifecycle::Status;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, SubscriptionId};
use crate::metrics::{self, EmfSink, Metric};
use crate::monitor::RollUp;
use crate::store;
use crate::store::delivery::{Delivery, DeliveryWork};
use crate::store::keys::{self, SHARDS};
use crate::store::write::send;
use crate::store::StoreError;
use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use futures::stream::StreamExt;
use serde_dynamo::AttributeValue as StreamValue;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod invocation;
pub use invocation::Invocation;

/// How often the sweep runs (template.yaml's `Sweep` schedule, `rate(1 minute)`).
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// How far ahead the sweep publishes (as SQS delays): one sweep interval.
pub const SWEEP_HORIZON: Duration = SWEEP_EVERY;
/// After the sweep publishes a delivery, how long before it may publish it again if nobody claims it.
pub const REDISPATCH_GRACE: Duration = Duration::from_secs(5 * 60);
/// SQS's longest message delay.
pub const MAX_SQS_DELAY: Duration = Duration::from_secs(900);
/// Items a sweep takes from one shard in one run; a larger backlog continues on the next run.
pub const SWEEP_LIMIT_PER_SHARD: i32 = 500;
/// Prompt roll-ups run at once by one stream batch.
pub const PROMPT_ROLLUP_CONCURRENCY: usize = 8;

/// The payload of the sweep schedule (template.yaml's `Input`): the only one that sweeps.
pub const SWEEP_PAYLOAD: &str = r#"{"sweep":"due"}"#;
/// The metric each scheduled sweep writes once (the dispatcher-silence alarm's).
pub const SWEEP_RUNS: &str = "DispatcherSweepRuns";

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
    settled: Option<(Delivery, DeliveryStatus)>,
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
    /// the events that were inserted or whose push delivery just became terminal.
    pub async fn handle_stream(&self, event: DynamoDbEvent) -> DynamoDbEventResponse {
        // Each event once per batch, reported (on failure) at its first record.
        let mut rollups: BTreeMap<String, RollUpWork> = BTreeMap::new();
        for r in &event.records {
            let (new, old) = (&r.change.new_image, &r.change.old_image);
            match rollup_trigger(&r.event_name, new, old) {
                Some(pk) => {
                    let work = rollups.entry(pk).or_insert_with(|| RollUpWork {
                        record: crate::runtime::stream_record_id(r),
                        settled: None,
                    });
                    work.settled = settled_sole_delivery(new, old);
                }
                // A later write in the batch to an event's partition (an operator restart of the
                // delivery): the earlier image no longer tells the event's state alone.
                None => {
                    if let Some(work) = event_pk(new).and_then(|pk| rollups.get_mut(&pk)) {
                        work.settled = None;
                    }
                }
            }
        }
        let work: Vec<StreamWork> = event
            .records
            .iter()
            .filter_map(|r| {
                let new = &r.change.new_image;
                if !entered_pending(new, &r.change.old_image) {
                    return None;
                }
                let work = DeliveryWork {
                    account_id: AccountId::from_stored(attr(new, "account_id")?),
                    change_id: ChangeId::from_stored(attr(new, "change_id")?),
                    subscription_id: SubscriptionId::from_stored(attr(new, "subscription_id")?),
                };
                Some(StreamWork {
                    record: crate::runtime::stream_record_id(r),
                    work,
                })
            })
            .collect();
        let mut failed: Vec<String> = Vec::new();
        for chunk in work.chunks(10) {
            let entries: Vec<(DeliveryWork, Duration)> = chunk
                .iter()
                .map(|w| (w.work.clone(), Duration::ZERO))
                .collect();
            for i in self.publish(&entries).await {
                tracing::warn!(delivery = ?chunk[i].work, record = %chunk[i].record, "publish failed; the stream retries it");
                failed.push(chunk[i].record.clone());
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

    /// Sweep path: publish what is due within the horizon on every shard of the `due` index.
    pub async fn sweep(&self) -> Result<SweepReport, StoreError> {
        let mut report = SweepReport::default();
        let mut first_error = None;
        for shard in 0..SHARDS {
            // A storage error in one shard does not hold back the other shards' due work for
            // a minute: each is swept, and the run fails at the end with the first error.
            if let Err(e) = self.sweep_shard(&shard.to_string(), &mut report).await {
                tracing::warn!(shard, error = %e, "dispatch sweep: a shard failed");
                first_error.get_or_insert(e);
            }
        }
        if report.published + report.failed > 0 {
            tracing::info!(
                published = report.published,
                failed = report.failed,
                "dispatch sweep"
            );
        }
        first_error.map_or(Ok(report), Err)
    }

    async fn sweep_shard(&self, shard: &str, report: &mut SweepReport) -> Result<(), StoreError> {
        let now = self.clock.now();
        let horizon = now.plus(self.horizon);
        let due = store::delivery::due_by(
            &self.clients.dynamo,
            &self.config.delivery_table,
            shard,
            horizon,
            SWEEP_LIMIT_PER_SHARD,
        )
        .await?;
        let mut first_error = None;
        for chunk in due.chunks(10) {
            let entries: Vec<(DeliveryWork, Duration)> = chunk
                .iter()
                .map(|d| (d.work.clone(), delay_until(d.due_at, now)))
                .collect();
            let failed = self.publish(&entries).await;
            for (i, d) in chunk.iter().enumerate() {
                if failed.contains(&i) {
                    report.failed += 1;
                    continue;
                }
                report.published += 1;
                let next = d.due_at.max(now).plus(REDISPATCH_GRACE);
                // Refused: the delivery moved since the sweep read it; nothing to postpone.
                // Failed: it stays due, and the next run publishes it again (a second message
                // the claim makes harmless), so the rest of the shard goes on.
                let w = store::delivery::postpone(&self.config.delivery_table, d, next)?;
                if let Err(e) = send(&self.clients.dynamo, w).await {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Sends up to ten messages in one request. Returns the indexes that were not accepted.
    async fn publish(&self, entries: &[(DeliveryWork, Duration)]) -> Vec<usize> {
        publish(&self.clients.sqs, &self.config.delivery_queue_url, entries).await
    }
}

/// Sends up to ten delivery messages to the delivery queue in one request, each visible after its
/// delay. Returns the indexes that were not accepted.
///
/// Every message carries its account as `MessageGroupId`: on a standard queue that makes it an
/// SQS fair queue, where a backlog of one group (a noisy account) does not raise the dwell time
/// of the others' messages (docs/scale.md, "Fairness between tenants"). Ordering and
/// exactly-once stay a FIFO queue's; a standard queue keeps its throughput and delays.
pub async fn publish(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    entries: &[(DeliveryWork, Duration)],
) -> Vec<usize> {
    if entries.is_empty() {
        return Vec::new();
    }
    let batch: Vec<SendMessageBatchRequestEntry> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, (work, delay))| {
            SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(serde_json::to_string(work).ok()?)
                .delay_seconds(delay.as_secs() as i32)
                .message_group_id(work.account_id.to_string())
                .build()
                .ok()
        })
        .collect();
    match sqs
        .send_message_batch()
        .queue_url(queue_url)
        .set_entries(Some(batch))
        .send()
        .await
    {
        Ok(out) => out
            .failed
            .iter()
            .filter_map(|f| f.id.parse().ok())
            .collect(),
        Err(e) => {
            tracing::warn!(error = %StoreError::dynamo(e), "SendMessageBatch failed");
            (0..entries.len()).collect()
        }
    }
}

/// The SQS delay that makes a message visible at `due_at`: whole seconds rounded up (never early),
/// at most SQS's fifteen minutes.
pub fn delay_until(due_at: Timestamp, now: Timestamp) -> Duration {
    let ms = due_at.since(now).as_millis() as u64;
    Duration::from_secs(ms.div_ceil(1000)).min(MAX_SQS_DELAY)
}

fn attr<'a>(image: &'a serde_dynamo::Item, name: &str) -> Option<&'a str> {
    match image.get(name) {
        Some(StreamValue::S(v)) => Some(v.as_str()),
        _ => None,
    }
}

/// A push delivery that has just entered `pending` (created, or restarted by an operator): new work.
fn entered_pending(new: &serde_dynamo::Item, old: &serde_dynamo::Item) -> bool {
    attr(new, "kind") == Some("delivery")
        && attr(new, "status") == Some("pending")
        && attr(new, "method") != Some("poll")
        && attr(old, "status") != Some("pending")
}

/// Whether the dispatcher acts on a stream record at all: new work or a prompt roll-up. The
/// template's `FilterCriteria` pass exactly these records, so in AWS no other record invokes it
/// (the harness applies those patterns themselves, and a test holds them against this function
/// on every kind of delivery-table write).
pub fn wanted(record: &aws_lambda_events::event::dynamodb::EventRecord) -> bool {
    let (new, old) = (&record.change.new_image, &record.change.old_image);
    entered_pending(new, old) || rollup_trigger(&record.event_name, new, old).is_some()
}

/// The delivery of a record that settles the first attempt of its change's only delivery
/// ([`Delivery::sole`]), and the status it left (`pending`). Only such an image is parsed whole:
/// no other can decide its event alone.
fn settled_sole_delivery(
    new: &serde_dynamo::Item,
    old: &serde_dynamo::Item,
) -> Option<(Delivery, DeliveryStatus)> {
    let sole = matches!(new.get("sole"), Some(StreamValue::Bool(true)));
    if !sole || attr(new, "kind") != Some("delivery") {
        return None;
    }
    let previous = DeliveryStatus::parse(attr(old, "status")?)?;
    if previous != DeliveryStatus::Pending {
        return None;
    }
    let delivery: Delivery = serde_dynamo::from_item(new.clone()).ok()?;
    Some((delivery, previous))
}

/// The event partition of an event or delivery image.
fn event_pk(image: &serde_dynamo::Item) -> Option<String> {
    Some(keys::event_pk(
        &AccountId::from_stored(attr(image, "account_id")?),
        &ChangeId::from_stored(attr(image, "change_id")?),
    ))
}

fn number(image: &serde_dynamo::Item, name: &str) -> Option<u64> {
    match image.get(name) {
        Some(StreamValue::N(v)) => v.parse().ok(),
        _ => None,
    }
}

/// The event partition a stream record asks the monitor to roll up promptly, if any: an event
/// just inserted that no push delivery will trigger later, or a push delivery that just moved
/// from `pending`/`retrying` to a terminal status (`delivered`, `failed`, `dead`) or failed for the
/// first time (`pending → retrying`). The template's `FilterCriteria` for the dispatcher
/// passes exactly these records (besides new pending work); poll deliveries never count.
pub fn rollup_trigger(
    event_name: &str,
    new: &serde_dynamo::Item,
    old: &serde_dynamo::Item,
) -> Option<String> {
    match attr(new, "kind")? {
        // An event is rolled up when it is written only if no push delivery will finish later
        // and trigger it (nobody took it, or only pull subscribers did): otherwise a first
        // `new → partial` write would buy nothing.
        "event" if event_name == "INSERT" && number(new, "push_subscribers") == Some(0) => {
            event_pk(new)
        }
        "delivery" => {
            let to = DeliveryStatus::parse(attr(new, "status")?)?;
            let from = DeliveryStatus::parse(attr(old, "status")?)?;
            let push = attr(new, "method") != Some("poll");
            // Terminal, or the first failure (a retry now waits: the event becomes partial).
            let first_failure = from == DeliveryStatus::Pending && to == DeliveryStatus::Retrying;
            (push && from.is_open() && (to.is_terminal() || first_failure))
                .then(|| event_pk(new))?
        }
        _ => None,
    }
}

/// The work a delivery's keys name: `EVT#{account}#{change}` / `DLV#{subscription}`.
pub fn work_from_keys(pk: &str, sk: &str) -> Option<DeliveryWork> {
    store::delivery::work_from_key(pk, sk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    #[test]
    fn delays_round_up_and_stop_at_fifteen_minutes() {
        let now = Timestamp(10_000);
        assert_eq!(delay_until(Timestamp(10_000), now), Duration::ZERO);
        assert_eq!(delay_until(Timestamp(5_000), now), Duration::ZERO);
        assert_eq!(delay_until(Timestamp(10_001), now), Duration::from_secs(1));
        assert_eq!(delay_until(Timestamp(70_000), now), Duration::from_secs(60));
        assert_eq!(
            delay_until(Timestamp(10_000 + 3_600_000), now),
            MAX_SQS_DELAY
        );
    }

    fn image(pairs: &[(&str, &str)]) -> serde_dynamo::Item {
        let map: std::collections::HashMap<String, StreamValue> = pairs
            .iter()
            .map(|(k, v)| {
                let value = match v.strip_prefix('#') {
                    Some(num) => StreamValue::N(num.to_string()),
                    None => StreamValue::S(v.to_string()),
                };
                (k.to_string(), value)
            })
            .collect();
        map.into()
    }

    #[test]
    fn prompt_roll_ups_fire_only_where_they_change_something() {
        let ids = [("account_id", "a"), ("change_id", "c")];
        let event = |push: &str| {
            let mut pairs = ids.to_vec();
            pairs.extend([("kind", "event"), ("push_subscribers", push)]);
            image(&pairs)
        };
        let empty = image(&[]);
        // An event nobody pushes to is settled when written; one with push work waits for it.
        assert_eq!(
            rollup_trigger("INSERT", &event("#0"), &empty),
            Some(keys::event_pk(&id("a"), &id("c")))
        );
        assert_eq!(rollup_trigger("INSERT", &event("#2"), &empty), None);
        let delivery = |status: &str, method: &str| {
            let mut pairs = ids.to_vec();
            pairs.extend([("kind", "delivery"), ("status", status), ("method", method)]);
            image(&pairs)
        };
        let moved = |from: &str, to: &str, method: &str| {
            rollup_trigger("MODIFY", &delivery(to, method), &delivery(from, method)).is_some()
        };
        assert!(moved("pending", "delivered", "webhook"));
        assert!(moved("retrying", "dead", "webhook"));
        assert!(moved("pending", "failed", "internal"));
        assert!(
            moved("pending", "retrying", "webhook"),
            "the first failure makes it partial"
        );
        assert!(
            !moved("retrying", "retrying", "webhook"),
            "a further retry changes nothing"
        );
        assert!(
            !moved("pending", "pending", "webhook"),
            "a claim changes nothing"
        );
        assert!(
            !moved("pending", "delivered", "poll"),
            "poll deliveries are left out"
        );
    }

    #[test]
    fn keys_name_their_work() {
        let w = work_from_keys(
            &keys::event_pk(&id("a1"), &id("c1")),
            &keys::delivery_sk(&id("s1")),
        )
        .unwrap();
        assert_eq!(
            w,
            DeliveryWork {
                account_id: "a1".parse().unwrap(),
                change_id: "c1".parse().unwrap(),
                subscription_id: "s1".parse().unwrap()
            }
        );
        assert!(work_from_keys("ACCT#a", "DLV#s").is_none());
        assert!(work_from_keys("EVT#a#c", "EVENT").is_none());
    }
}
