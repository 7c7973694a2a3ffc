//! Provider events about sent notifications ([`crate::notify::confirm`]). No bearer token: the
//! signature is the authentication.
//!
//! * `POST /v1/provider-events/ses` — SES events through SNS: the SNS message signature must
//!   verify (SignatureVersion 1 or 2, certificate from `sns.<region>.amazonaws.com`) and its
//!   topic must be the deployment's (`SES_EVENTS_TOPIC_ARN`); subscription confirmations are
//!   confirmed.
//! * `POST /v1/provider-events/{provider}` — the generic form, signed as Standard Webhooks
//!   (`webhook-id` is the event id) with the provider's secret (in AWS from the Secrets Manager
//!   secret `NOTIFICATION_PROVIDER_SECRETS_ARN` names, read once per container; locally
//!   `NOTIFICATION_PROVIDER_SECRETS`):
//!   `{"provider_ref", "type", "at"?, "detail"?, "bounce_type"?}`.
//!
//! Answers `200 {"outcome": "delivered" | "recorded" | "duplicate" | "unknown_reference" |
//! "ignored" | "subscription_confirmed"}`; a refused signature or foreign topic is `401`, an
//! unknown provider `404`, an unreadable body `400`; a confirmation for a delivery that is not
//! `sent` yet is `409` (the provider may send it again). On the SES route an event whose
//! delivery is not recorded yet (no delivery has its reference, or it is not `sent` yet: SES can
//! be faster than the worker's write) is `503` with `Retry-After`: SNS retries only server
//! errors, so this is what makes its delivery policy send the event again.

use crate::notify::confirm::{self, ConfirmOutcome, IntakeError, IntakeOutcome};
use crate::notify::table::NotificationTable;
use crate::web::extract::{path_id, ApiPath};
use crate::web::metrics::Deferred;
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Serialize;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/v1/provider-events/ses", post(ses))
        .route("/v1/provider-events/{provider}", post(signed))
}

#[derive(Debug, Serialize)]
pub(crate) struct IntakeView {
    pub outcome: &'static str,
}

/// Who sent the event: SNS retries only 5xx answers, a generic provider also 409.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sender {
    Sns,
    Signed,
}

/// The answer to an event: [`outcome_of`], the deliberate `503` marked [`Deferred`] (the API's
/// 5xx alarm leaves it out).
fn answer(result: Result<IntakeOutcome, IntakeError>, sender: Sender) -> Response {
    let deferred = matches!(
        result,
        Ok(IntakeOutcome::Applied(
            ConfirmOutcome::NotYetSent | ConfirmOutcome::UnknownReference
        ))
    ) && sender == Sender::Sns;
    let mut response = outcome_of(result, sender).into_response();
    if deferred {
        response.extensions_mut().insert(Deferred);
    }
    response
}

fn outcome_of(
    result: Result<IntakeOutcome, IntakeError>,
    sender: Sender,
) -> Result<Json<IntakeView>, ApiError> {
    match result {
        Ok(IntakeOutcome::Applied(
            outcome @ (ConfirmOutcome::NotYetSent | ConfirmOutcome::UnknownReference),
        )) if sender == Sender::Sns => {
            tracing::info!(
                outcome = outcome.as_str(),
                "SES event before its delivery is recorded; SNS retries it"
            );
            Err(ApiError::Unavailable {
                detail: format!(
                    "the delivery this event names is not recorded yet ({}); send it again later",
                    outcome.as_str()
                ),
            })
        }
        Ok(IntakeOutcome::SubscriptionConfirmed) => Ok(Json(IntakeView {
            outcome: "subscription_confirmed",
        })),
        Ok(IntakeOutcome::Ignored) => Ok(Json(IntakeView { outcome: "ignored" })),
        Ok(IntakeOutcome::Applied(ConfirmOutcome::NotYetSent)) => Err(ApiError::conflict(
            "the delivery is not sent yet; send the event again later",
        )),
        Ok(IntakeOutcome::Applied(outcome)) => Ok(Json(IntakeView {
            outcome: outcome.as_str(),
        })),
        Err(
            e @ (IntakeError::Signature(_)
            | IntakeError::ForeignTopic(_)
            | IntakeError::Webhook(_)
            | IntakeError::MissingHeader(_)),
        ) => {
            tracing::warn!(error = %e, "provider event refused");
            Err(ApiError::unauthorized(e.to_string()))
        }
        Err(IntakeError::UnknownProvider(_)) => Err(ApiError::not_found("provider")),
        Err(e @ (IntakeError::Malformed(_) | IntakeError::InvalidEvent(_))) => {
            Err(ApiError::malformed(e.to_string()))
        }
        Err(IntakeError::Fault(e)) => Err(super::notices::fault(e)),
    }
}

async fn body_of(state: &Arc<ApiState>, request: Request) -> Result<Bytes, ApiError> {
    Ok(Bytes::from_request(request, state).await?)
}

async fn ses(State(state): State<Arc<ApiState>>, request: Request) -> Response {
    let body = match body_of(&state, request).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let store = NotificationTable::from_config(&state.clients, &state.config);
    answer(
        confirm::intake_sns(
            &store,
            state.provider_event_settings(),
            &body,
            state.clock.now(),
        )
        .await,
        Sender::Sns,
    )
}

async fn signed(
    State(state): State<Arc<ApiState>>,
    ApiPath(provider): ApiPath<String>,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, ApiError> {
    let provider: String = path_id(&provider, "provider")?;
    let body = body_of(&state, request).await?;
    let store = NotificationTable::from_config(&state.clients, &state.config);
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    Ok(answer(
        confirm::intake_signed(
            &store,
            state.provider_event_settings(),
            &provider,
            header,
            &body,
            state.clock.now(),
        )
        .await,
        Sender::Signed,
    ))
}
