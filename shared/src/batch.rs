//! The partial-batch runner of the stream and queue handlers whose records are one piece of work
//! each (ingest's changes, the notification queue): each record is handled on its own (at most
//! `concurrency` at once, answers kept in record order; a stream's records of one item one after
//! another, [`run_stream`]), and only the records whose handling failed are reported back, so
//! Lambda retries those and nothing else. The dispatcher names its
//! failed stream records with [`stream_response`]; the delivery worker answers for its messages
//! itself, since one message carries up to ten deliveries and fails when any of them does.
//!
//! A queue record is named by its message id; a stream record by its sequence number, or (a
//! record that lacks one, which the event source never sends but a hand-made event might) by its
//! event id ([`crate::runtime::stream_record_id`]), so every failure names something an operator
//! can find.

use aws_lambda_events::event::dynamodb::{Event as DynamoDbEvent, EventRecord as StreamRecord};
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use futures::StreamExt;
use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;

/// A record of a batch, and how a failure names it.
pub(crate) trait BatchRecord {
    /// The identifier Lambda's partial-batch response expects.
    fn failure_id(&self) -> Option<String>;
}

impl BatchRecord for SqsMessage {
    fn failure_id(&self) -> Option<String> {
        self.message_id.clone()
    }
}

impl BatchRecord for StreamRecord {
    fn failure_id(&self) -> Option<String> {
        Some(crate::runtime::stream_record_id(self))
    }
}

/// Handles every record (at most `concurrency` at once) and returns the failed ones with their
/// errors, in record order. Each failure is logged with `what` and the record's identifier.
pub async fn failures<'a, R, F, Fut, T, E>(
    records: &'a [R],
    concurrency: usize,
    what: &str,
    handle: F,
) -> Vec<(&'a R, E)>
where
    R: BatchRecord,
    F: Fn(&'a R) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Display,
{
    let results: Vec<_> = futures::stream::iter(records)
        .map(|r| {
            let answer = handle(r);
            async move { (r, answer.await) }
        })
        .buffered(concurrency.max(1))
        .collect()
        .await;
    results
        .into_iter()
        .filter_map(|(record, result)| match result {
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(record = record.failure_id().as_deref(), error = %e, "{what} not done; reported for retry");
                Some((record, e))
            }
        })
        .collect()
}

/// The queue's partial-batch response naming `failed`.
pub(crate) fn sqs_response<'a>(
    failed: impl IntoIterator<Item = &'a SqsMessage>,
) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for message in failed {
        let mut f = BatchItemFailure::default();
        f.item_identifier = message.failure_id().unwrap_or_default();
        response.batch_item_failures.push(f);
    }
    response
}

/// The stream's partial-batch response naming the records `failed` (by identifier).
pub(crate) fn stream_response(failed: impl IntoIterator<Item = String>) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    response.batch_item_failures = failed
        .into_iter()
        .map(crate::runtime::stream_failure)
        .collect();
    response
}

/// Runs `handle` on every message of a queue batch and answers the partial-batch response.
pub(crate) async fn run_sqs<'a, F, Fut, T, E>(
    event: &'a SqsEvent,
    concurrency: usize,
    what: &str,
    handle: F,
) -> SqsBatchResponse
where
    F: Fn(&'a SqsMessage) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Display,
{
    let failed = failures(&event.records, concurrency, what, handle).await;
    sqs_response(failed.into_iter().map(|(m, _)| m))
}

/// Runs `handle` on every record of a stream batch and answers the partial-batch response. The
/// records of one item (the same `keys`) are handled one after another in stream order, different
/// items side by side, at most `concurrency` items at once. A failed record is reported with every
/// later record of its item, which are not handled (so its item's changes keep their order when
/// the stream hands them over again); no other record is reported.
pub(crate) async fn run_stream<'a, F, Fut, T, E>(
    event: &'a DynamoDbEvent,
    concurrency: usize,
    what: &str,
    handle: F,
) -> DynamoDbEventResponse
where
    F: Fn(&'a StreamRecord) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Display,
{
    let handle = &handle;
    let failed: Vec<Vec<usize>> = futures::stream::iter(by_item(&event.records))
        .map(|positions| async move {
            let mut failed = Vec::new();
            for at in positions {
                let record = &event.records[at];
                let id = record.failure_id();
                if !failed.is_empty() {
                    tracing::warn!(record = id.as_deref(), "{what} not done: an earlier change of its item failed; reported for retry");
                    failed.push(at);
                } else if let Err(e) = handle(record).await {
                    tracing::warn!(record = id.as_deref(), error = %e, "{what} not done; reported for retry");
                    failed.push(at);
                }
            }
            failed
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut failed: Vec<usize> = failed.into_iter().flatten().collect();
    failed.sort_unstable();
    stream_response(
        failed
            .into_iter()
            .filter_map(|at| event.records[at].failure_id()),
    )
}

/// The positions of `records` grouped by the item each changes (its stream keys), each group in
/// stream order, the groups in the order their items first appear.
fn by_item(records: &[StreamRecord]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of: HashMap<String, usize> = HashMap::new();
    for (at, record) in records.iter().enumerate() {
        let mut keys: Vec<String> = record
            .change
            .keys
            .iter()
            .map(|(name, value)| format!("{name}={value:?}"))
            .collect();
        keys.sort_unstable();
        let group = *group_of.entry(keys.join("\u{1f}")).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[group].push(at);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, body: &str) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.message_id = Some(id.into());
        m.body = Some(body.into());
        m
    }

    #[tokio::test]
    async fn only_the_messages_that_failed_are_reported_in_order() {
        let mut event = SqsEvent::default();
        event.records = vec![message("a", "ok"), message("b", "bad"), message("c", "bad")];
        let response = run_sqs(&event, 2, "test", |m| async move {
            match m.body.as_deref() {
                Some("ok") => Ok(()),
                _ => Err("malformed"),
            }
        })
        .await;
        let ids: Vec<_> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(ids, ["b", "c"]);
    }

    #[tokio::test]
    async fn a_stream_record_without_a_sequence_number_is_named_by_its_event_id() {
        let mut with = StreamRecord::default();
        with.change.sequence_number = Some("100".into());
        let mut without = StreamRecord::default();
        without.event_id = "evt-7".into();
        let mut event = DynamoDbEvent::default();
        event.records = vec![with, without];
        let response = run_stream(&event, 4, "test", |_| async { Err::<(), _>("down") }).await;
        let ids: Vec<_> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect();
        assert_eq!(
            ids,
            [Some("100".to_string()), Some("event:evt-7".to_string())]
        );
    }

    /// A stream record changing the item `item`, numbered `sequence`.
    fn change_of(item: &str, sequence: &str) -> StreamRecord {
        let mut r = StreamRecord::default();
        r.change.sequence_number = Some(sequence.into());
        r.change.keys = serde_dynamo::Item::from(HashMap::from([(
            "pk".to_string(),
            serde_dynamo::AttributeValue::S(item.into()),
        )]));
        r
    }

    #[tokio::test]
    async fn a_stream_batchs_items_run_side_by_side_each_items_changes_in_order_and_a_failure_holds_back_only_its_items_later_ones(
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Mutex;
        let mut event = DynamoDbEvent::default();
        event.records = [
            ("a", "1"),
            ("a", "2"),
            ("b", "3"),
            ("a", "4"),
            ("b", "5"),
            ("c", "6"),
        ]
        .iter()
        .map(|(item, seq)| change_of(item, seq))
        .collect();
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let handled: Mutex<Vec<(String, String)>> = Mutex::default();
        let item_of = |r: &StreamRecord| format!("{:?}", r.change.keys.get("pk"));
        let response = run_stream(&event, 4, "test", |r| {
            let (running, most, handled) = (&running, &most, &handled);
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let seq = r.change.sequence_number.clone().unwrap_or_default();
                // Another change of the same item would find its own still running.
                let busy = handled
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|(item, s)| *item == item_of(r) && s.starts_with("running"));
                assert!(!busy, "two changes of one item at once");
                handled
                    .lock()
                    .unwrap()
                    .push((item_of(r), format!("running {seq}")));
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                for entry in handled.lock().unwrap().iter_mut() {
                    if entry.1 == format!("running {seq}") {
                        entry.1 = seq.clone();
                    }
                }
                running.fetch_sub(1, Ordering::SeqCst);
                match seq.as_str() {
                    "2" => Err("down"),
                    _ => Ok(()),
                }
            }
        })
        .await;
        let ids: Vec<_> = response
            .batch_item_failures
            .iter()
            .filter_map(|f| f.item_identifier.clone())
            .collect();
        assert_eq!(ids, ["2", "4"], "the failure and its item's later change");
        let handled = handled.into_inner().unwrap();
        let of = |item: &str| -> Vec<String> {
            let key = format!(
                "{:?}",
                Some(serde_dynamo::AttributeValue::S(item.into())).as_ref()
            );
            handled
                .iter()
                .filter(|(i, _)| *i == key)
                .map(|(_, s)| s.clone())
                .collect()
        };
        assert_eq!(of("a"), ["1", "2"], "4 waits for 2, which failed");
        assert_eq!(of("b"), ["3", "5"]);
        assert_eq!(of("c"), ["6"]);
        assert_eq!(
            most.load(Ordering::SeqCst),
            3,
            "the three items side by side"
        );
    }

    #[tokio::test]
    async fn a_batch_that_all_succeeds_reports_nothing() {
        let mut event = SqsEvent::default();
        event.records = vec![message("a", "ok")];
        let response = run_sqs(&event, 4, "test", |_| async { Ok::<_, String>(()) }).await;
        assert!(response.batch_item_failures.is_empty());
    }
}
