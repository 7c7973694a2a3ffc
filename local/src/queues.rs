//! Drains an SQS queue into a handler the way the Lambda event source mapping does: receives up to
//! the batch size, hands the batch over as an `SqsEvent`, deletes the messages the handler did not
//! report in `batchItemFailures` and leaves the failed ones to come back after their visibility
//! timeout (or at once, when the test asks for it).

use anyhow::{Context, Result};
use aws_config::SdkConfig;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::future::Future;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QueueReport {
    pub batches: usize,
    pub messages: usize,
    pub deleted: usize,
    /// Messages a handler reported as failed (each receive counts again).
    pub failures: usize,
}

pub struct QueueTap {
    client: aws_sdk_sqs::Client,
    pub queue_url: String,
    queue_arn: String,
    region: String,
    pub batch_size: i32,
    /// Make failed messages visible again at once instead of after their visibility timeout, so a
    /// test can drive retries without waiting. Leave off where the handler sets the visibility
    /// itself (the notification backoff).
    pub redeliver_failures_now: bool,
}

impl QueueTap {
    pub fn new(sdk: &SdkConfig, queue_url: &str, queue_arn: &str) -> Self {
        QueueTap {
            client: aws_sdk_sqs::Client::new(sdk),
            queue_url: queue_url.to_string(),
            queue_arn: queue_arn.to_string(),
            region: sdk
                .region()
                .map(|r| r.to_string())
                .unwrap_or_else(|| "us-east-1".into()),
            batch_size: 10,
            redeliver_failures_now: false,
        }
    }

    /// Receives one batch (no long polling). Empty when nothing is visible.
    pub async fn receive(&self) -> Result<Vec<Message>> {
        Ok(self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(self.batch_size)
            .wait_time_seconds(0)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .context("receiving from the queue")?
            .messages
            .unwrap_or_default())
    }

    /// One receive → handler → delete cycle. Returns how many messages were handed over.
    pub async fn drain_once<F, Fut>(
        &self,
        handler: &mut F,
        report: &mut QueueReport,
    ) -> Result<usize>
    where
        F: FnMut(SqsEvent) -> Fut,
        Fut: Future<Output = SqsBatchResponse>,
    {
        let messages = self.receive().await?;
        if messages.is_empty() {
            return Ok(0);
        }
        report.batches += 1;
        report.messages += messages.len();
        let event = self.event(&messages)?;
        let response = handler(event).await;
        let failed: HashSet<String> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect();
        report.failures += failed.len();
        let mut deletions = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let id = m.message_id.clone().unwrap_or_default();
            let receipt = m.receipt_handle.clone().unwrap_or_default();
            if failed.contains(&id) {
                if self.redeliver_failures_now {
                    self.client
                        .change_message_visibility()
                        .queue_url(&self.queue_url)
                        .receipt_handle(receipt)
                        .visibility_timeout(0)
                        .send()
                        .await?;
                }
            } else {
                deletions.push(
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(receipt)
                        .build()?,
                );
            }
        }
        if !deletions.is_empty() {
            report.deleted += deletions.len();
            self.client
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(deletions))
                .send()
                .await?;
        }
        Ok(messages.len())
    }

    /// Receives and handles batches until the queue has nothing visible, or `max_batches` batches.
    pub async fn drain<F, Fut>(&self, mut handler: F, max_batches: usize) -> Result<QueueReport>
    where
        F: FnMut(SqsEvent) -> Fut,
        Fut: Future<Output = SqsBatchResponse>,
    {
        let mut report = QueueReport::default();
        for _ in 0..max_batches {
            if self.drain_once(&mut handler, &mut report).await? == 0 {
                break;
            }
        }
        Ok(report)
    }

    /// Number of messages visible plus in flight, as SQS approximates it.
    pub async fn depth(&self) -> Result<(u64, u64)> {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let attrs = self
            .client
            .get_queue_attributes()
            .queue_url(&self.queue_url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await?
            .attributes
            .unwrap_or_default();
        let n = |k: A| attrs.get(&k).and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok((
            n(A::ApproximateNumberOfMessages),
            n(A::ApproximateNumberOfMessagesNotVisible),
        ))
    }

    /// The Lambda event for `messages` (as the event source mapping hands them over).
    pub fn event(&self, messages: &[Message]) -> Result<SqsEvent> {
        let records: Vec<Value> = messages
            .iter()
            .map(|m| {
                let attributes: Map<String, Value> = m
                    .attributes
                    .as_ref()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| (k.as_str().to_string(), Value::String(v.clone())))
                            .collect()
                    })
                    .unwrap_or_default();
                json!({
                    "messageId": m.message_id,
                    "receiptHandle": m.receipt_handle,
                    "body": m.body,
                    "md5OfBody": m.md5_of_body,
                    "attributes": attributes,
                    "messageAttributes": {},
                    "eventSource": "aws:sqs",
                    "eventSourceARN": self.queue_arn,
                    "awsRegion": self.region,
                })
            })
            .collect();
        serde_json::from_value(json!({ "Records": records })).context("building the SQS event")
    }
}
