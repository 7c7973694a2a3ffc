//! An account's own recovery of its subscriptions (account token): the operator's delivery,
//! resume and history routes, scoped to the caller's account and calling the same operations
//! ([`crate::operations::recovery`], [`crate::operations::endpoint_health`]). Under
//! `/v1/subscriptions/{subscription_id}`:
//!
//! * `GET …/deliveries` (`?status=dead,failed&from=&to=&record_id=&limit=&cursor=`) — the
//!   subscription's deliveries by status, change time (`from` ≤ occurred_at < `to`) and record
//!   id, newest change first.
//! * `GET …/deliveries/{change_id}` — one delivery, with its payload and attempts.
//! * `GET …/deliveries/{change_id}/attempts` — its attempts: time, HTTP status, duration, the
//!   answer's start and the classified error, numbered by run.
//! * `POST …/deliveries/{change_id}/retry` `{reason}` — restarts a `dead` or `failed` delivery
//!   from its first attempt (any other status is a `409`).
//! * `POST …/resume` `{reason}` — `paused → active`, dead count reset; changes skipped while it
//!   was paused stay skipped.
//! * `GET …/health` — the endpoint's health ([`crate::operations::endpoint_health`]).
//!
//! And `GET /v1/audit` (`?limit=&cursor=`): the account's audit history, newest first, the
//! account's own actions beside its operators'.
//!
//! (A module of its own beside `v1` and `operator`: it serves `/v1` paths with the operators'
//! views, which themselves use `v1`'s.) Another account's subscription or delivery is `404` and
//! nothing changes. Each action is
//! audited with the acting credential ([`AccountAuth::actor`]) and the reason, in the same
//! history as operators' actions.

use crate::api::operator::audit::AuditView;
use crate::api::operator::deliveries::{
    attempt_views, delivery_query, AttemptsView, DeliveryView, ListParams, RetriedView,
};
use crate::api::operator::subscriptions::{reason, OperatorSubscriptionView, ResumedView};
use crate::api::v1::ListResponse;
use crate::domain::pull_cursor::change_id as change_id_text;
use crate::ids::{ChangeId, SubscriptionId};
use crate::operations::endpoint_health::{endpoint_health, EndpointHealth};
use crate::operations::recovery::audit;
use crate::operations::recovery::integration_history::list_deliveries;
use crate::operations::recovery::resume::resume_subscription;
use crate::operations::recovery::retry::{
    retry_delivery_from, RetryRequest, ADMINISTRATOR_RETRIES,
};
use crate::store::audit::AuditScope;
use crate::store::delivery::Delivery;
use crate::web::auth::AccountAuth;
use crate::web::extract::{page_limit, path_id, ApiPath, ApiQuery, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use std::sync::Arc;

const SUBSCRIPTION: &str = "/v1/subscriptions/{subscription_id}";

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route(&format!("{SUBSCRIPTION}/deliveries"), get(list))
        .route(
            &format!("{SUBSCRIPTION}/deliveries/{{change_id}}"),
            get(fetch),
        )
        .route(
            &format!("{SUBSCRIPTION}/deliveries/{{change_id}}/attempts"),
            get(attempts),
        )
        .route(
            &format!("{SUBSCRIPTION}/deliveries/{{change_id}}/retry"),
            post(retry),
        )
        .route(&format!("{SUBSCRIPTION}/resume"), post(resume))
        .route(&format!("{SUBSCRIPTION}/health"), get(health))
        .route("/v1/audit", get(history))
}

fn subscription_path(text: &str) -> Result<SubscriptionId, ApiError> {
    path_id(text, "subscription")
}

/// The ids of a delivery's path; any that is not an id is the delivery not found.
fn delivery_path(
    subscription_id: &str,
    change_id: &str,
) -> Result<(SubscriptionId, ChangeId), ApiError> {
    let subscription_id = path_id(subscription_id, "subscription")?;
    let change_id = change_id_text(change_id).ok_or_else(|| ApiError::not_found("delivery"))?;
    Ok((subscription_id, change_id))
}

async fn list(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(subscription_id): ApiPath<String>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ListResponse<DeliveryView>>, ApiError> {
    let subscription_id = subscription_path(&subscription_id)?;
    let query = delivery_query(params)?;
    let ops = state.ops();
    let (deliveries, next_cursor) =
        list_deliveries(&ops, &auth.account_id, &subscription_id, &query).await?;
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
    auth: &AccountAuth,
    subscription_id: &str,
    change_id: &str,
) -> Result<Delivery, ApiError> {
    let (subscription_id, change_id) = delivery_path(subscription_id, change_id)?;
    let ops = state.ops();
    ops.subscription(&auth.account_id, &subscription_id).await?;
    Ok(ops
        .delivery(&auth.account_id, &subscription_id, &change_id)
        .await?)
}

async fn fetch(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath((subscription_id, change_id)): ApiPath<(String, String)>,
) -> Result<Json<DeliveryView>, ApiError> {
    let d = load(&state, &auth, &subscription_id, &change_id).await?;
    Ok(Json(DeliveryView::detailed(&d, state.clock.now())))
}

async fn attempts(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath((subscription_id, change_id)): ApiPath<(String, String)>,
) -> Result<Json<AttemptsView>, ApiError> {
    let d = load(&state, &auth, &subscription_id, &change_id).await?;
    Ok(Json(AttemptsView {
        delivery_id: d.delivery_id.clone(),
        status: d.status,
        attempts: d.attempts,
        restarts: d.restarts,
        data: attempt_views(&d),
    }))
}

async fn retry(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath((subscription_id, change_id)): ApiPath<(String, String)>,
    JsonBody(mut f): JsonBody,
) -> Result<Json<RetriedView>, ApiError> {
    let reason = reason(&mut f);
    f.finish()?;
    let reason = reason.ok_or_else(|| ApiError::internal("validated reason missing"))?;
    let (subscription_id, change_id) = delivery_path(&subscription_id, &change_id)?;
    let ops = state.ops();
    let actor = auth.actor();
    let outcome = retry_delivery_from(
        &ops,
        RetryRequest {
            account_id: &auth.account_id,
            subscription_id: &subscription_id,
            change_id: &change_id,
            operator: &actor,
            reason: &reason,
        },
        Some(ADMINISTRATOR_RETRIES),
    )
    .await?;
    Ok(Json(RetriedView {
        delivery: DeliveryView::new(&outcome.delivery, ops.now()),
        previous_status: outcome.previous_status,
        audit_id: outcome.audit_id,
        event: outcome.event,
    }))
}

async fn resume(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(subscription_id): ApiPath<String>,
    JsonBody(mut f): JsonBody,
) -> Result<Json<ResumedView>, ApiError> {
    let reason = reason(&mut f);
    f.finish()?;
    let reason = reason.ok_or_else(|| ApiError::internal("validated reason missing"))?;
    let subscription_id = subscription_path(&subscription_id)?;
    let outcome = resume_subscription(
        &state.ops(),
        &auth.account_id,
        &subscription_id,
        &auth.actor(),
        &reason,
    )
    .await?;
    Ok(Json(ResumedView {
        subscription: OperatorSubscriptionView::from(&outcome.subscription),
        dead_count_before: outcome.dead_count_before,
        audit_id: outcome.audit_id,
    }))
}

async fn health(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(subscription_id): ApiPath<String>,
) -> Result<Json<EndpointHealth>, ApiError> {
    let subscription_id = subscription_path(&subscription_id)?;
    let ops = state.ops();
    Ok(Json(
        endpoint_health(&ops, &auth.account_id, &subscription_id, ops.now()).await?,
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditParams {
    limit: Option<u32>,
    cursor: Option<String>,
}

async fn history(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiQuery(params): ApiQuery<AuditParams>,
) -> Result<Json<ListResponse<AuditView>>, ApiError> {
    let limit = page_limit(params.limit)?;
    let (records, next_cursor) = audit::list(
        &state.ops(),
        AuditScope::Account(&auth.account_id),
        limit,
        params.cursor.as_deref(),
    )
    .await?;
    Ok(Json(ListResponse {
        data: records.iter().map(AuditView::from).collect(),
        next_cursor,
    }))
}
