//! `POST /v1/subscriptions/{subscription_id}/test-event` (account token): asks for one
//! synthetic, clearly marked event (type [`TEST_EVENT_TYPE`], a fresh `webhook-id`) to be sent to
//! the subscription's webhook endpoint, and answers `202` with the test event (`queued`) and a
//! `Location`: `GET /v1/subscriptions/{subscription_id}/test-events/{test_event_id}` shows it
//! until it is `sent`, then with what the endpoint did.
//!
//! The operation is [`crate::operations::account::test_events`] (what is refused and why): the
//! handlers and the web console's "Send test event" button call it; a refusal is `404`, `409`,
//! or `429` with `Retry-After` (the seconds to the next minute) past the account's test events
//! in the current minute. Whatever the endpoint answers — a 2xx, an error status, a timeout — is
//! the sent test event's outcome.

use crate::ids::{IntegrationId, SubscriptionId};
use crate::operations::account::test_events;
use crate::store::test_event::{TestEvent, TestEventStatus};
use crate::web::auth::AccountAuth;
use crate::web::extract::{path_id, ApiPath};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use std::sync::Arc;

pub use crate::operations::account::test_events::TEST_EVENT_TYPE;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route(
            "/v1/subscriptions/{subscription_id}/test-event",
            post(handler),
        )
        .route(
            "/v1/subscriptions/{subscription_id}/test-events/{test_event_id}",
            get(show),
        )
}

/// A test event: where it is and, once sent, what the endpoint did.
#[derive(Debug, Clone, Serialize)]
pub struct TestEventView {
    /// Its id, also the `webhook-id` it is sent as (fresh for every test event).
    pub test_event_id: String,
    pub subscription_id: SubscriptionId,
    pub integration_id: IntegrationId,
    /// The `webhook-id` it is sent as (the same as `test_event_id`).
    pub message_id: String,
    /// [`TEST_EVENT_TYPE`].
    pub event_type: &'static str,
    /// The endpoint it goes to.
    pub url: String,
    /// `queued`, `sending` or `sent`.
    pub status: &'static str,
    pub requested_at: String,
    /// When the delivery function sent it (`null` until then).
    pub sent_at: Option<String>,
    /// The endpoint answered 2xx.
    pub delivered: bool,
    /// How a delivery attempt with this outcome would count: `success`, `transient`,
    /// `permanent` or `configuration_loss`; `null` until sent.
    pub classification: Option<String>,
    /// The endpoint's HTTP status; `null` when none came (not sent yet, timeout, connection or
    /// TLS failure, a resolved address the SSRF guard refused).
    pub http_status: Option<u16>,
    /// From sending until the (capped) answer was read; `null` until sent.
    pub latency_ms: Option<u64>,
    /// The start of the answer's body, or the transport error (at most 512 bytes).
    pub response: Option<String>,
}

impl From<&TestEvent> for TestEventView {
    fn from(t: &TestEvent) -> Self {
        let outcome = t.outcome.as_ref();
        TestEventView {
            test_event_id: t.test_event_id.clone(),
            subscription_id: t.subscription_id.clone(),
            integration_id: t.integration_id.clone(),
            message_id: t.test_event_id.clone(),
            event_type: TEST_EVENT_TYPE,
            url: t.url.clone(),
            status: t.status.as_str(),
            requested_at: t.requested_at.to_rfc3339(),
            sent_at: t
                .sent_at
                .filter(|_| t.status != TestEventStatus::Queued)
                .map(|at| at.to_rfc3339()),
            delivered: outcome.is_some_and(|o| o.classification == "success"),
            classification: outcome.map(|o| o.classification.clone()),
            http_status: outcome.and_then(|o| o.http_status),
            latency_ms: outcome.map(|o| o.latency_ms),
            response: outcome.and_then(|o| o.response.clone()),
        }
    }
}

impl TestEventView {
    /// The test event's own address (`Location`).
    pub fn location(&self) -> String {
        format!(
            "/v1/subscriptions/{}/test-events/{}",
            self.subscription_id, self.test_event_id
        )
    }
}

async fn handler(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, ApiError> {
    let id = path_id(&id, "subscription")?;
    let actor = format!("token {}", auth.token_id);
    let ops = state.account_ops();
    let sent = test_events::send_test_event(&ops, &auth.account_id, &id, &actor).await?;
    let view = TestEventView::from(&sent);
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, view.location())],
        Json(view),
    ))
}

async fn show(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath((subscription_id, test_event_id)): ApiPath<(String, String)>,
) -> Result<Json<TestEventView>, ApiError> {
    let subscription_id = path_id(&subscription_id, "subscription")?;
    let ops = state.account_ops();
    let found =
        test_events::test_event(&ops, &auth.account_id, &subscription_id, &test_event_id).await?;
    Ok(Json(TestEventView::from(&found)))
}
