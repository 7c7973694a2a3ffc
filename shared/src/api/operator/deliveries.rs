//! A subscription's deliveries, as operators read and retry them (the operator restarts of
//! `docs/lifecycles.md#integration-delivery`). Under `/operator/accounts/{account_id}/subscriptions/{subscription_id}`:
//!
//! * `GET …/deliveries` (`?status=dead,failed&from=&to=&record_id=&limit=&cursor=`) — deliveries
//!   by status, change time (`from` ≤ occurred_at < `to`, RFC 3339) and record id, newest change
//!   first.
//! * `GET …/deliveries/{change_id}` — one delivery, with its payload and attempts.
//! * `GET …/deliveries/{change_id}/attempts` — its attempt history, numbered by run (every retry
//!   begins a new run from attempt 1; earlier runs are kept).
//! * `POST …/deliveries/{change_id}/retry` `{reason}` — restarts it from its first attempt
//!   (`dead | failed | retrying | delivered → pending`), audited; `pending` and `skipped_filter`
//!   are `409` ([`crate::operations::recovery::retry`]).

use super::subscriptions::reason;
use crate::api::v1::{list_query, ListResponse};
use crate::domain::integration_delivery::{lease_held, transmit_status, DeliveryStatus};
use crate::domain::lifecycle::Status;
use crate::domain::time::Timestamp;
use crate::ids::{
    AccountId, AuditId, ChangeId, DeliveryId, IntegrationId, ReplayJobId, SubscriptionId,
};
use crate::operations::list_filters::DeliveryFilter;
use crate::operations::recovery::integration_history::{
    attempt_runs, list_deliveries, DeliveryQuery,
};
use crate::operations::recovery::retry::{retry_delivery, RetryRequest};
use crate::operations::resource_ids::{delivery_ids, subscription_ids};
use crate::store::delivery::Delivery;
use crate::web::auth::Operator;
use crate::web::extract::{ApiPath, ApiQuery, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

const BASE: &str = "/operator/accounts/{account_id}/subscriptions/{subscription_id}/deliveries";

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route(BASE, get(list))
        .route(&format!("{BASE}/{{change_id}}"), get(fetch))
        .route(&format!("{BASE}/{{change_id}}/attempts"), get(attempts))
        .route(&format!("{BASE}/{{change_id}}/retry"), post(retry))
}

/// A delivery as operators see it.
#[derive(Debug, Serialize)]
pub struct DeliveryView {
    pub id: DeliveryId,
    pub account_id: AccountId,
    pub subscription_id: SubscriptionId,
    pub integration_id: IntegrationId,
    pub change_id: ChangeId,
    pub method: String,
    pub status: DeliveryStatus,
    /// The Delivery log's word for the status (`pending`, `processing`, `sent`, `failed`;
    /// `docs/lifecycles.md#delivery-log-words`); absent for `skipped_filter`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transmit_status: Option<String>,
    /// Attempts of the current run.
    pub attempts: u32,
    /// Operator restarts (retries and replays).
    pub restarts: u32,
    pub occurred_at: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_http_status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarted_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay_job: Option<ReplayJobId>,
    /// The projected change (single-delivery reads only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// The attempt history (single-delivery reads only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_log: Option<Vec<AttemptView>>,
}

impl DeliveryView {
    pub fn new(d: &Delivery, now: Timestamp) -> Self {
        let r = d;
        let rfc = |t: Option<Timestamp>| t.map(|t| t.to_rfc3339());
        DeliveryView {
            id: r.delivery_id.clone(),
            account_id: r.account_id.clone(),
            subscription_id: r.subscription_id.clone(),
            integration_id: r.integration_id.clone(),
            change_id: r.change_id.clone(),
            method: r.method.as_str().to_owned(),
            status: r.status,
            transmit_status: transmit_status(r.status, lease_held(r.lease_until, now))
                .map(|t| t.as_str().to_owned()),
            attempts: r.attempts,
            restarts: d.restarts,
            occurred_at: r.occurred_at.to_rfc3339(),
            created_at: r.created_at.to_rfc3339(),
            updated_at: r.updated_at.to_rfc3339(),
            not_before: rfc(r.not_before),
            lease_until: rfc(r.lease_until),
            last_error: r.last_error.clone(),
            last_http_status: r.last_http_status,
            delivered_at: rfc(d.delivered_at),
            restarted_at: rfc(d.restarted_at),
            restarted_by: d.restarted_by.clone(),
            replay_job: d.replay_job.clone(),
            payload: None,
            attempt_log: None,
        }
    }

    /// With the payload and the attempt history.
    pub fn detailed(d: &Delivery, now: Timestamp) -> Self {
        let mut view = Self::new(d, now);
        view.payload = d
            .payload
            .as_deref()
            .map(|p| serde_json::from_str(p).unwrap_or_else(|_| Value::String(p.to_owned())));
        view.attempt_log = Some(attempt_views(d));
        view
    }
}

/// One attempt, with the run it belongs to.
#[derive(Debug, Serialize)]
pub struct AttemptView {
    pub run: u32,
    pub number: u32,
    pub at: String,
    /// `success`, `transient`, `permanent` or `configuration_loss`.
    pub class: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    pub duration_ms: u64,
    /// The start of the answer or the error, as kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The start of the receiver's answer (attempts that got one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_snippet: Option<String>,
    /// The classified error of an attempt with no answer (`timeout`, `connect`, `tls`,
    /// `transport`, `forbidden_target`, `signing_secret`, `configuration_loss`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub(crate) fn attempt_views(d: &Delivery) -> Vec<AttemptView> {
    attempt_runs(&d.attempt_log)
        .into_iter()
        .map(|a| AttemptView {
            run: a.run,
            number: a.attempt.number,
            at: a.attempt.at.to_rfc3339(),
            class: a.attempt.class.clone(),
            http_status: a.attempt.http_status,
            duration_ms: a.attempt.duration_ms,
            detail: a.attempt.detail.clone(),
            response_snippet: a.attempt.http_status.and(a.attempt.detail.clone()),
            error: a.attempt.error.clone(),
        })
        .collect()
}

/// The list's query parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListParams {
    pub status: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub record_id: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

/// Reads `?status=a,b`, `?from=`, `?to=`, `?record_id=` ([`DeliveryFilter`]) and `?limit=`;
/// every invalid one is named at once.
pub(crate) fn delivery_query(params: ListParams) -> Result<DeliveryQuery, ApiError> {
    let filter = DeliveryFilter {
        status: params.status,
        from: params.from,
        to: params.to,
        record_id: params.record_id,
        cursor: params.cursor,
    };
    list_query(params.limit, |limit| filter.query(limit))
}

async fn list(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath((account_id, subscription_id)): ApiPath<(String, String)>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ListResponse<DeliveryView>>, ApiError> {
    let (account_id, subscription_id) = subscription_ids(&account_id, &subscription_id)?;
    let query = delivery_query(params)?;
    let ops = state.ops();
    let (deliveries, next_cursor) =
        list_deliveries(&ops, &account_id, &subscription_id, &query).await?;
    let now = ops.now();
    Ok(Json(ListResponse {
        data: deliveries
            .iter()
            .map(|d| DeliveryView::new(d, now))
            .collect(),
        next_cursor,
    }))
}

async fn load(
    state: &ApiState,
    account_id: &str,
    subscription_id: &str,
    change_id: &str,
) -> Result<Delivery, ApiError> {
    let (account_id, subscription_id, change_id) =
        delivery_ids(account_id, subscription_id, change_id)?;
    let ops = state.ops();
    ops.subscription(&account_id, &subscription_id).await?;
    Ok(ops
        .delivery(&account_id, &subscription_id, &change_id)
        .await?)
}

async fn fetch(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath((account_id, subscription_id, change_id)): ApiPath<(String, String, String)>,
) -> Result<Json<DeliveryView>, ApiError> {
    let d = load(&state, &account_id, &subscription_id, &change_id).await?;
    Ok(Json(DeliveryView::detailed(&d, state.clock.now())))
}

#[derive(Debug, Serialize)]
pub(crate) struct AttemptsView {
    pub delivery_id: DeliveryId,
    pub status: DeliveryStatus,
    /// Attempts of the current run.
    pub attempts: u32,
    pub restarts: u32,
    pub data: Vec<AttemptView>,
}

async fn attempts(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath((account_id, subscription_id, change_id)): ApiPath<(String, String, String)>,
) -> Result<Json<AttemptsView>, ApiError> {
    let d = load(&state, &account_id, &subscription_id, &change_id).await?;
    Ok(Json(AttemptsView {
        delivery_id: d.delivery_id.clone(),
        status: d.status,
        attempts: d.attempts,
        restarts: d.restarts,
        data: attempt_views(&d),
    }))
}

#[derive(Debug, Serialize)]
pub struct RetriedView {
    pub delivery: DeliveryView,
    pub previous_status: DeliveryStatus,
    pub audit_id: AuditId,
    /// What the event monitor did with the change's event (push deliveries): `reopened`,
    /// `already_open`, `not_reopenable`, `missing` or `reopen_failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
}

pub async fn retry(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath((account_id, subscription_id, change_id)): ApiPath<(String, String, String)>,
    JsonBody(mut f): JsonBody,
) -> Result<Json<RetriedView>, ApiError> {
    let reason = reason(&mut f);
    f.finish()?;
    let reason = reason.ok_or_else(|| ApiError::internal("validated reason missing"))?;
    let (account_id, subscription_id, change_id) =
        delivery_ids(&account_id, &subscription_id, &change_id)?;
    let ops = state.ops();
    let outcome = retry_delivery(
        &ops,
        RetryRequest {
            account_id: &account_id,
            subscription_id: &subscription_id,
            change_id: &change_id,
            operator: &operator.id,
            reason: &reason,
        },
    )
    .await?;
    Ok(Json(RetriedView {
        delivery: DeliveryView::new(&outcome.delivery, ops.now()),
        previous_status: outcome.previous_status,
        audit_id: outcome.audit_id,
        event: outcome.event,
    }))
}
