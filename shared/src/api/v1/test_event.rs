//! `POST /v1/subscriptions/{subscription_id}/test-event` (account token): asks for one
//! synthetic, clearly marked event (type [`TEST_EVENT_TYPE`], a fresh `webhook-id`) to be sent to
//! the subscription's webhook endpoint, and answers `202` with the test event (`queued`) and a
//! `Location`: `GET /v1/subscriptions/{subscription_id}/test-events/{test_event_id}` shows it
//! until it is `sent`, then with what the endpoint did.
//!
//! The API cannot open signing secrets: the test event is recorded ([`crate::store::test_event`])
//! and queued on the delivery queue, and the delivery function sends it the way it sends a
//! delivery attempt — the subscription's current signing secret (and the previous one during a
//! rotation's grace), the Standard Webhooks signature, the same adapter (the SSRF guard, its
//! timeout, the response snippet cap) — and saves the outcome. It is no delivery: nothing is
//! written to the subscription's deliveries, its run of dead deliveries or its pause; the request
//! is recorded in the account's audit history (who, when, the test event's id).
//!
//! Refused (problem+json): another account's or an unknown subscription (`404`); a paused
//! subscription, an integration that is not a webhook (pull, built-in), one without accepted
//! event access, or an endpoint the SSRF guard refuses (`409`); past the account's
//! [`test_event_quota::PER_MINUTE`] test events in the current minute (`429`, `Retry-After`: the
//! seconds to the next minute), since each sends the platform's signed request to an endpoint
//! the account chose. Whatever the endpoint answers — a 2xx, an error status, a timeout — is the
//! sent test event's outcome.
//!
//! The web console's "Send test event" button calls [`send_test_event`] and [`test_event`] too.

use crate::api::auth::AccountAuth;
use crate::api::extract::{path_id, ApiPath};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::domain::ssrf::check_url;
use crate::domain::subscription::SubscriptionStatus;
use crate::domain::target::Target;
use crate::ids::{AccountId, IntegrationId, SubscriptionId};
use crate::store::account;
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::integration;
use crate::store::test_event::{self as stored, TestEvent, TestEventStatus};
use crate::store::test_event_quota;
use crate::store::write::{send_resolving_conflicts, Write, Written};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;

/// The `type` of a test event's payload (no record's event code has this form).
pub const TEST_EVENT_TYPE: &str = "rhythm.test";
/// The `reason` of a test event's audit entry.
const AUDIT_REASON: &str = "test event to the subscription's endpoint";

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
    let actor = format!("token {}", auth.token_id);
    let view = send_test_event(&state, &auth.account_id, &id, &actor).await?;
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
    test_event(&state, &auth.account_id, &subscription_id, &test_event_id)
        .await
        .map(Json)
}

/// The test event `test_event_id` of `account_id`'s subscription `subscription_id` (path text):
/// `404` for another account's, another subscription's or an unknown one.
pub async fn test_event(
    state: &ApiState,
    account_id: &AccountId,
    subscription_id: &str,
    test_event_id: &str,
) -> Result<TestEventView, ApiError> {
    let subscription_id: SubscriptionId = path_id(subscription_id, "subscription")?;
    let not_found = || ApiError::not_found("test event");
    if !is_test_event_id(test_event_id) {
        return Err(not_found());
    }
    let found = stored::get(state.dynamo(), state.table(), account_id, test_event_id)
        .await?
        .filter(|t| t.subscription_id == subscription_id)
        .ok_or_else(not_found)?;
    Ok(TestEventView::from(&found))
}

/// Whether `text` has the form of a test event id (`test_` and a lower-case ULID).
fn is_test_event_id(text: &str) -> bool {
    text.strip_prefix("test_").is_some_and(|rest| {
        rest.len() == 26
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    })
}

/// Queues a test event to the webhook endpoint of `account_id`'s subscription `subscription_id`
/// (path text), on behalf of `actor` (who, for the audit history).
pub async fn send_test_event(
    state: &ApiState,
    account_id: &AccountId,
    subscription_id: &str,
    actor: &str,
) -> Result<TestEventView, ApiError> {
    let subscription_id: SubscriptionId = path_id(subscription_id, "subscription")?;
    let sub = state
        .ops()
        .subscription(account_id, &subscription_id)
        .await?;
    if sub.status == SubscriptionStatus::Paused {
        return Err(ApiError::conflict(
            "the subscription is paused: it receives nothing, test events included, until an operator resumes it",
        ));
    }
    let found = integration::get(
        state.dynamo(),
        state.table(),
        account_id,
        &sub.integration_id,
    )
    .await?
    .ok_or_else(|| ApiError::conflict("the subscription's integration is gone"))?;
    let Target::Webhook { url, .. } = &found.target else {
        return Err(ApiError::conflict(format!(
            "test events go to webhook endpoints; this subscription's integration delivers by {}",
            found.delivery_method().as_str()
        )));
    };
    if !found.event_access_accepted {
        return Err(ApiError::conflict(
            "the integration has not accepted event access, so nothing is sent to it",
        ));
    }
    check_url(url, &state.target_policy()).map_err(|e| {
        ApiError::conflict(format!("the endpoint is refused by the SSRF guard: {e}"))
    })?;

    let now = state.clock.now();
    charge_test_event(state, account_id, now).await?;
    let test_event_id = format!("test_{}", ulid::Ulid::new().to_string().to_lowercase());
    let payload = json!({
        "type": TEST_EVENT_TYPE,
        "test": true,
        "message_id": test_event_id,
        "account_id": account_id,
        "subscription_id": subscription_id,
        "integration_id": found.integration_id,
        "sent_at": now.to_rfc3339(),
        "data": {"note": "A test event from Rhythm delivery: no record changed."},
    })
    .to_string();
    let event = TestEvent {
        test_event_id: test_event_id.clone(),
        account_id: account_id.clone(),
        subscription_id: subscription_id.clone(),
        integration_id: found.integration_id.clone(),
        url: url.clone(),
        payload,
        status: TestEventStatus::Queued,
        requested_at: now,
        requested_by: actor.to_string(),
        sent_at: None,
        outcome: None,
        expires_at: stored::expires_at(now),
    };
    state.create(stored::create(state.table(), &event)?).await?;
    queue(state, &event).await?;
    let entry = AuditRecord::new(
        AuditAction::SendTestEvent,
        account_id,
        &subscription_id,
        actor,
        AUDIT_REASON,
        now,
    )
    .detail("message_id", &test_event_id);
    // The event is on its way whatever becomes of its record: a lost audit write is logged, not
    // the caller's failure.
    let recorded = match audit::create(state.table(), &entry) {
        Ok(write) => state.create(write).await,
        Err(e) => Err(e.into()),
    };
    if let Err(e) = recorded {
        tracing::warn!(%account_id, %subscription_id, error = %e, "test event not audited");
    }
    tracing::info!(%account_id, %subscription_id, %test_event_id, "test event queued");
    Ok(TestEventView::from(&event))
}

/// Puts the message that asks the delivery function to send `event` on the delivery queue.
async fn queue(state: &ApiState, event: &TestEvent) -> Result<(), ApiError> {
    let message = crate::delivery::dispatch::publish::Outgoing {
        body: serde_json::to_string(&event.work())
            .map_err(|e| ApiError::internal(format!("test event message: {e}")))?,
        group: Some(event.account_id.to_string()),
        delay: std::time::Duration::ZERO,
    };
    let failed = crate::delivery::dispatch::publish::publish_messages(
        &state.clients.sqs,
        &state.config.delivery_queue_url,
        std::slice::from_ref(&message),
    )
    .await;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Unavailable {
            detail: "the test event could not be queued; try again".into(),
        })
    }
}

/// Counts the test event against its account's minute ([`test_event_quota`]), or refuses it
/// with `429` when the minute's are used up.
async fn charge_test_event(
    state: &ApiState,
    account_id: &AccountId,
    now: crate::domain::time::Timestamp,
) -> Result<(), ApiError> {
    let limit = test_event_quota::PER_MINUTE;
    let charge = test_event_quota::charge(state.table(), account_id, now, limit)?;
    // Nothing is sent for an account that is gone or being deleted.
    let live = account::live_check(state.table(), account_id)?;
    match send_resolving_conflicts(state.dynamo(), Write::all([charge, live])?).await? {
        Written::Applied(_) => Ok(()),
        Written::Refused(_)
            if !account::is_live(state.dynamo(), state.table(), account_id).await? =>
        {
            Err(crate::operations::OpsError::AccountGone.into())
        }
        Written::Refused(_) => {
            let wait = test_event_quota::until_next_minute(now)
                .as_secs_f64()
                .ceil() as u64;
            Err(ApiError::QuotaExceeded {
                detail: format!(
                    "an account may send {limit} test events a minute, and this minute's are \
                     used up; try again in {wait} s"
                ),
                retry_after_secs: wait,
            })
        }
        // Conflicts that outlasted their retries: nothing was counted or sent.
        Written::Conflict => Err(ApiError::Unavailable {
            detail: "the test event could not be counted; try again".into(),
        }),
    }
}
