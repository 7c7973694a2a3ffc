//! The delivery function's side of a test event ([`crate::store::test_event`]): the API records
//! it and queues a message; here it is claimed, signed with the subscription's signing secrets
//! (the only function that may open them) and sent, with the endpoint's headers, authentication
//! and a `traceparent` of its own, through the same adapter as a delivery
//! attempt, and its outcome saved for the API to show. No delivery is touched.

use super::adapters::AttemptResult;
use super::webhook::Message;
use super::{DeliveryWorker, WorkOutcome, WorkerError};
use crate::domain::target::Target;
use crate::domain::trace_context::TraceParent;
use crate::store::integration;
use crate::store::test_event::{self, TestEventOutcome, TestEventRef};
use crate::store::write::{send, Written};
use crate::store::StoreError;
use std::time::Instant;

impl DeliveryWorker {
    /// Claims the test event `work` names, sends it and saves what the endpoint did. A test event
    /// claimed already (a redelivered message) or gone is skipped: it is sent at most once.
    pub(super) async fn send_test_event(
        &self,
        work: &TestEventRef,
    ) -> Result<WorkOutcome, WorkerError> {
        let table = &self.config.delivery_table;
        let dynamo = &self.clients.dynamo;
        let now = self.clock.now();
        let event = match send(dynamo, test_event::claim(table, work, now)?).await? {
            Written::Applied(Some(item)) => test_event::of(item)?,
            Written::Applied(None) => {
                return Err(
                    StoreError::Dynamo("a claimed test event came back empty".into()).into(),
                )
            }
            _ => return Ok(WorkOutcome::Skipped("test event already sent or gone")),
        };
        // Read now, not from the configuration cache: the endpoint is the one configured when
        // the event is sent.
        let found =
            integration::get(dynamo, table, &event.account_id, &event.integration_id).await?;
        let started = Instant::now();
        let result = match &found {
            None => AttemptResult::configuration_loss("the integration is gone"),
            Some(i) if !i.event_access_accepted => {
                AttemptResult::configuration_loss("event access is not accepted")
            }
            Some(i) => match &i.target {
                Target::Webhook { url, secret } => {
                    // A test event is a trace of its own, of one attempt.
                    let id = event.test_event_id.as_str();
                    let trace = TraceParent::of_attempt(id, None, id, 1).header_value();
                    let message = Message {
                        id,
                        payload: &event.payload,
                        traceparent: &trace,
                    };
                    self.webhook
                        .send_signed(
                            &self.opener,
                            (&i.account_id, &i.integration_id),
                            url,
                            secret,
                            &i.endpoint,
                            message,
                            self.clock.now(),
                        )
                        .await
                }
                _ => AttemptResult::configuration_loss(
                    "the integration no longer delivers by webhook",
                ),
            },
        };
        let outcome = TestEventOutcome {
            classification: result.class.as_str().to_string(),
            http_status: result.http_status,
            latency_ms: started.elapsed().as_millis() as u64,
            response: result.detail,
        };
        send(dynamo, test_event::save_outcome(table, work, &outcome)?).await?;
        tracing::info!(
            account_id = %event.account_id,
            subscription_id = %event.subscription_id,
            test_event_id = %event.test_event_id,
            class = %outcome.classification,
            http_status = outcome.http_status,
            "test event sent"
        );
        Ok(WorkOutcome::TestEventSent)
    }
}
