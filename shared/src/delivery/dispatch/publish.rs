//! Publishing push work: up to ten delivery messages to the delivery queue in one request, each
//! visible after its delay. Nothing is written to the table when a delivery is published.

use crate::domain::time::Timestamp;
use crate::store::delivery::DeliveryWork;
use crate::store::StoreError;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use std::time::Duration;

/// SQS's longest message delay.
pub const MAX_SQS_DELAY: Duration = Duration::from_secs(900);

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
    let messages: Vec<Outgoing> = entries
        .iter()
        .map(|(work, delay)| Outgoing {
            body: serde_json::to_string(work).unwrap_or_default(),
            group: Some(work.account_id.to_string()),
            delay: *delay,
        })
        .collect();
    publish_messages(sqs, queue_url, &messages).await
}

/// A message for the delivery queue as it is sent: its body, its fair-queue group (its
/// account) and its delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub body: String,
    pub group: Option<String>,
    pub delay: Duration,
}

/// Sends up to ten messages to the queue in one request ([`publish`] for delivery work; test
/// events and messages the worker re-sends go as they are). Returns the indexes that were not
/// accepted.
pub async fn publish_messages(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    messages: &[Outgoing],
) -> Vec<usize> {
    if messages.is_empty() {
        return Vec::new();
    }
    let batch: Vec<SendMessageBatchRequestEntry> = messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(&m.body)
                .delay_seconds(m.delay.as_secs() as i32)
                .set_message_group_id(m.group.clone())
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
            (0..messages.len()).collect()
        }
    }
}

/// The SQS delay that makes a message visible at `due_at`: whole seconds rounded up (never early),
/// at most SQS's fifteen minutes.
pub fn delay_until(due_at: Timestamp, now: Timestamp) -> Duration {
    let ms = due_at.since(now).as_millis() as u64;
    Duration::from_secs(ms.div_ceil(1000)).min(MAX_SQS_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
