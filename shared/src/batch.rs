//! The partial-batch runner of the stream and queue handlers whose records are one piece of work
//! each (ingest's changes, the notification queue): each record is handled on its own (at most
//! `concurrency` at once, answers kept in record order), and only the records whose handling
//! failed are reported back, so Lambda retries those and nothing else. The dispatcher names its
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

/// Runs `handle` on every record of a stream batch, one at a time in order, and answers the
/// partial-batch response.
pub(crate) async fn run_stream<'a, F, Fut, T, E>(
    event: &'a DynamoDbEvent,
    what: &str,
    handle: F,
) -> DynamoDbEventResponse
where
    F: Fn(&'a StreamRecord) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Display,
{
    let failed = failures(&event.records, 1, what, handle).await;
    stream_response(failed.into_iter().filter_map(|(r, _)| r.failure_id()))
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
        let response = run_stream(&event, "test", |_| async { Err::<(), _>("down") }).await;
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

    #[tokio::test]
    async fn a_batch_that_all_succeeds_reports_nothing() {
        let mut event = SqsEvent::default();
        event.records = vec![message("a", "ok")];
        let response = run_sqs(&event, 4, "test", |_| async { Ok::<_, String>(()) }).await;
        assert!(response.batch_item_failures.is_empty());
    }
}
