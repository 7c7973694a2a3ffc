//! The notification table's stream (an event source of the notify function, filtered in the
//! template to the two kinds of record below):
//!
//! * a notice item in `requested` (written by the notices API or, in a transaction with a
//!   subscription's pause, by the delivery worker) → fan-out;
//! * a work row inserted (or replaced with a new dispatch id) → one message on the notification
//!   queue. A repeated record publishes again; the worker's claim makes duplicates harmless.
//!
//! Records are handled in order; the first one that fails is reported (with everything after it
//! left for the retry, as the event source mapping retries from the first failed record).

use super::notice_service::NoticeService;
use super::table::NotificationTable;
use super::NotifyError;
use crate::aws::Clients;
use crate::clock::Clock;
use crate::config::Config;
use crate::ids::NoticeId;
use crate::store::notice::{NOTICE_KIND, REQUESTED};
use crate::store::notification_work::{NotificationWork, WORK_KIND};
use aws_lambda_events::event::dynamodb::{Event as DynamoDbEvent, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use serde_dynamo::AttributeValue as StreamValue;
use std::sync::Arc;

pub struct NotificationStream {
    notices: NoticeService,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
}

/// What one record asks for.
enum Action {
    FanOut(NoticeId),
    Publish(NotificationWork),
    Nothing,
}

fn attr<'a>(image: &'a serde_dynamo::Item, name: &str) -> Option<&'a str> {
    match image.get(name) {
        Some(StreamValue::S(s)) => Some(s.as_str()),
        _ => None,
    }
}

fn action(record: &EventRecord) -> Action {
    let new = &record.change.new_image;
    let old = &record.change.old_image;
    let event = record.event_name.as_str();
    if event != "INSERT" && event != "MODIFY" {
        return Action::Nothing;
    }
    match attr(new, "kind") {
        Some(NOTICE_KIND) if attr(new, "status") == Some(REQUESTED) => match attr(new, "notice_id")
        {
            Some(id) => Action::FanOut(NoticeId::from_stored(id)),
            None => Action::Nothing,
        },
        Some(WORK_KIND) => {
            let dispatch = attr(new, "dispatch_id");
            if event == "MODIFY" && attr(old, "dispatch_id") == dispatch {
                return Action::Nothing;
            }
            match (attr(new, "notice_id"), attr(new, "delivery_key"), dispatch) {
                (Some(n), Some(k), Some(d)) => Action::Publish(NotificationWork {
                    notice_id: NoticeId::from_stored(n),
                    delivery_key: k.to_string(),
                    dispatch_id: d.to_string(),
                }),
                _ => Action::Nothing,
            }
        }
        _ => Action::Nothing,
    }
}

impl NotificationStream {
    pub fn new(clients: Clients, config: Config, clock: Arc<dyn Clock>) -> Self {
        NotificationStream {
            notices: NoticeService::new(NotificationTable::from_config(&clients, &config), clock),
            sqs: clients.sqs.clone(),
            queue_url: config.notification_queue_url.clone(),
        }
    }

    pub async fn handle(&self, event: DynamoDbEvent) -> DynamoDbEventResponse {
        let mut response = DynamoDbEventResponse::default();
        let mut pending: Vec<(String, NotificationWork)> = Vec::new();
        for record in &event.records {
            let sequence = crate::runtime::stream_record_id(record);
            match action(record) {
                Action::Nothing => {}
                Action::Publish(work) => {
                    pending.push((sequence, work));
                    if pending.len() == 10 {
                        if let Some(failed) = self.flush(&mut pending).await {
                            return fail(response, failed);
                        }
                    }
                }
                Action::FanOut(notice_id) => {
                    if let Some(failed) = self.flush(&mut pending).await {
                        return fail(response, failed);
                    }
                    match self.notices.fan_out(&notice_id).await {
                        Ok(report) => tracing::info!(
                            %notice_id,
                            created = report.created,
                            planned = report.planned,
                            not_fanned_out = report.not_fanned_out,
                            cancelled_replaced = report.cancelled_replaced,
                            "notice fan-out"
                        ),
                        Err(e) => {
                            tracing::error!(%notice_id, error = %e, "fan-out failed; the stream retries it");
                            return fail(response, sequence);
                        }
                    }
                }
            }
        }
        if let Some(failed) = self.flush(&mut pending).await {
            response = fail(response, failed);
        }
        response
    }

    /// Publishes the pending messages; the record id of the first one that failed.
    async fn flush(&self, pending: &mut Vec<(String, NotificationWork)>) -> Option<String> {
        if pending.is_empty() {
            return None;
        }
        let batch: Vec<(String, NotificationWork)> = std::mem::take(pending);
        match self.publish(&batch).await {
            Ok(failed) => failed.into_iter().min().map(|i| batch[i].0.clone()),
            Err(e) => {
                tracing::error!(error = %e, "publishing notification work failed; the stream retries it");
                Some(batch[0].0.clone())
            }
        }
    }

    /// Sends up to ten messages; the indexes that failed.
    async fn publish(
        &self,
        batch: &[(String, NotificationWork)],
    ) -> Result<Vec<usize>, NotifyError> {
        let mut entries = Vec::with_capacity(batch.len());
        for (i, (_, work)) in batch.iter().enumerate() {
            let body =
                serde_json::to_string(work).map_err(|e| NotifyError::Malformed(e.to_string()))?;
            entries.push(
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(body)
                    .build()
                    .map_err(NotifyError::queue)?,
            );
        }
        let out = self
            .sqs
            .send_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(NotifyError::queue)?;
        Ok(out
            .failed
            .iter()
            .filter_map(|f| f.id.parse::<usize>().ok())
            .collect())
    }
}

fn fail(mut response: DynamoDbEventResponse, record: String) -> DynamoDbEventResponse {
    response
        .batch_item_failures
        .push(crate::runtime::stream_failure(record));
    response
}
