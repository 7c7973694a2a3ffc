//! `POST /v1/subscriptions/{subscription_id}/test-event` (account token): sends one synthetic,
//! clearly marked event (type [`TEST_EVENT_TYPE`], a fresh `webhook-id`) to the subscription's
//! webhook endpoint now, and answers with what the endpoint did.
//!
//! It goes the way a delivery attempt goes: the subscription's current signing secret (and the
//! previous one during a rotation's grace), opened as the worker opens them, the Standard
//! Webhooks signature, and the worker's own adapter ([`WebhookAdapter::send_signed`]: the SSRF
//! guard, its timeout, the response snippet cap). It is no delivery: nothing is written to the
//! subscription's deliveries, its run of dead deliveries or its pause; the send is recorded in
//! the account's audit history (who, when, the outcome).
//!
//! Refused (problem+json): another account's or an unknown subscription (`404`); a paused
//! subscription, an integration that is not a webhook (pull, built-in), one without accepted
//! event access, or an endpoint the SSRF guard refuses (`409`); past the account's
//! [`test_event_quota::PER_MINUTE`] test events in the current minute (`429`, `Retry-After`: the
//! seconds to the next minute), since each holds an API invocation for as long as the endpoint
//! takes. Whatever the endpoint answers — a 2xx, an error status, a timeout — is the `200`
//! answer's outcome.
//!
//! The web console's "Send test event" button calls [`send_test_event`] too.
//!
//! [`WebhookAdapter::send_signed`]: crate::delivery::worker::webhook::WebhookAdapter::send_signed

use crate::api::auth::AccountAuth;
use crate::api::extract::{path_id, ApiPath};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::domain::classify::AttemptClass;
use crate::domain::ssrf::check_url;
use crate::domain::subscription::SubscriptionStatus;
use crate::domain::target::Target;
use crate::ids::{AccountId, IntegrationId, SubscriptionId};
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::integration;
use crate::store::test_event_quota;
use crate::store::write::{send_resolving_conflicts, Written};
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// The `type` of a test event's payload (no record's event code has this form).
pub const TEST_EVENT_TYPE: &str = "rhythm.test";
/// The `reason` of a test event's audit entry.
const AUDIT_REASON: &str = "test event to the subscription's endpoint";

pub fn router() -> Router<Arc<ApiState>> {
    Router::new().route(
        "/v1/subscriptions/{subscription_id}/test-event",
        post(handler),
    )
}

/// What the endpoint did with the test event.
#[derive(Debug, Clone, Serialize)]
pub struct TestEventView {
    pub subscription_id: SubscriptionId,
    pub integration_id: IntegrationId,
    /// The `webhook-id` it was sent as (fresh for every test event).
    pub message_id: String,
    /// [`TEST_EVENT_TYPE`].
    pub event_type: &'static str,
    /// The endpoint it went to.
    pub url: String,
    pub sent_at: String,
    /// The endpoint answered 2xx.
    pub delivered: bool,
    /// How a delivery attempt with this outcome would count: `success`, `transient`,
    /// `permanent` or `configuration_loss`.
    pub classification: &'static str,
    /// The endpoint's HTTP status; `null` when none came (timeout, connection or TLS failure, a
    /// resolved address the SSRF guard refused).
    pub http_status: Option<u16>,
    /// From sending until the (capped) answer was read.
    pub latency_ms: u64,
    /// The start of the answer's body, or the transport error (at most 512 bytes).
    pub response: Option<String>,
}

async fn handler(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<TestEventView>, ApiError> {
    let actor = format!("token {}", auth.token_id);
    send_test_event(&state, &auth.account_id, &id, &actor)
        .await
        .map(Json)
}

/// Sends a test event to the webhook endpoint of `account_id`'s subscription `subscription_id`
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
    let Target::Webhook { url, secret } = &found.target else {
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
    let message_id = format!("test_{}", ulid::Ulid::new().to_string().to_lowercase());
    let payload = json!({
        "type": TEST_EVENT_TYPE,
        "test": true,
        "message_id": message_id,
        "account_id": account_id,
        "subscription_id": subscription_id,
        "integration_id": found.integration_id,
        "sent_at": now.to_rfc3339(),
        "data": {"note": "A test event from Rhythm delivery: no record changed."},
    })
    .to_string();
    let started = Instant::now();
    let result = state
        .webhook
        .send_signed(
            &state.opener,
            (account_id, &found.integration_id),
            url,
            secret,
            &message_id,
            &payload,
            now,
        )
        .await;
    let view = TestEventView {
        subscription_id: subscription_id.clone(),
        integration_id: found.integration_id.clone(),
        message_id,
        event_type: TEST_EVENT_TYPE,
        url: url.clone(),
        sent_at: now.to_rfc3339(),
        delivered: result.class == AttemptClass::Success,
        classification: result.class.as_str(),
        http_status: result.http_status,
        latency_ms: started.elapsed().as_millis() as u64,
        response: result.detail,
    };
    let mut entry = AuditRecord::new(
        AuditAction::SendTestEvent,
        account_id,
        &subscription_id,
        actor,
        AUDIT_REASON,
        now,
    )
    .detail("message_id", &view.message_id)
    .detail("classification", view.classification)
    .detail("latency_ms", view.latency_ms);
    if let Some(code) = view.http_status {
        entry = entry.detail("http_status", code);
    }
    // The event is sent whatever becomes of its record: a lost audit write is logged, not the
    // caller's failure.
    let recorded = match audit::create(state.table(), &entry) {
        Ok(write) => state.create(write).await,
        Err(e) => Err(e.into()),
    };
    if let Err(e) = recorded {
        tracing::warn!(%account_id, %subscription_id, error = %e, "test event not audited");
    }
    tracing::info!(
        %account_id,
        %subscription_id,
        class = view.classification,
        http_status = ?view.http_status,
        "test event sent"
    );
    Ok(view)
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
    match send_resolving_conflicts(state.dynamo(), charge).await? {
        Written::Applied(_) => Ok(()),
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
