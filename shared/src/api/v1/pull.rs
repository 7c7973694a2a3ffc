//! The adapters' pull routes (integration token `rhy_intg_…`; the cursor rows of
//! `docs/lifecycles.md#integration-delivery`). A `poll`
//! integration's adapter reads its subscription's pending changes and acknowledges them with a
//! cursor (rules: [`crate::domain::pull_cursor`]; storage: [`crate::operations::pull`]):
//!
//! * `GET /v1/pull/subscriptions` (`?limit=&cursor=`) — the integration's own subscriptions.
//! * `GET /v1/pull/subscriptions/{id}/changes` (`?cursor=&limit=`) — a page of pending changes in
//!   change order: `data[]` (each with its own `cursor`), `next_cursor`, `has_more`. Without
//!   `cursor` the read starts at the acknowledged position; with one it continues from it.
//! * `GET /v1/pull/subscriptions/{id}/cursor` — the acknowledged position.
//! * `PUT /v1/pull/subscriptions/{id}/cursor` `{cursor}` — acknowledges: every pending delivery
//!   the cursor covers becomes `delivered`; unread ones stay `pending`.
//!
//! Cursors are opaque (the domain module documents their content). Refusals: a cursor that is
//! not one this API issued, or points past the subscription's last change → `422` (field
//! `cursor`); one that goes backwards, or was read before an operator restarted deliveries of the
//! subscription → `409`. A subscription of another account or of another integration is `404`,
//! exactly like one that does not exist; a push integration's subscription is `409` (its changes
//! are pushed by the worker, never pulled).

use super::subscriptions::SubscriptionView;
use super::ListResponse;
use crate::domain::pull_cursor::PullCursor;
use crate::ids::{ChangeId, DeliveryId, SubscriptionId};
use crate::operations::pull::{self, PullPage};
use crate::store::subscription::{self, Subscription};
use crate::web::auth::IntegrationAuth;
use crate::web::extract::{cursor_id, page_limit, path_id, ApiPath, ApiQuery, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/v1/pull/subscriptions", get(list))
        .route(
            "/v1/pull/subscriptions/{subscription_id}/changes",
            get(changes),
        )
        .route(
            "/v1/pull/subscriptions/{subscription_id}/cursor",
            get(fetch_cursor).put(write_cursor),
        )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    limit: Option<u32>,
    cursor: Option<String>,
}

async fn list(
    auth: IntegrationAuth,
    State(state): State<Arc<ApiState>>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ListResponse<SubscriptionView>>, ApiError> {
    let limit = page_limit(params.limit)?;
    let after_id = cursor_id(params.cursor.as_deref())?;
    let (items, next) = subscription::list(
        state.dynamo(),
        state.table(),
        &auth.account_id,
        Some(&auth.integration_id),
        limit,
        after_id.as_ref(),
    )
    .await?;
    Ok(Json(ListResponse::new(
        items.iter().map(SubscriptionView::from).collect(),
        next,
    )))
}

async fn load(
    state: &ApiState,
    auth: &IntegrationAuth,
    id: &str,
) -> Result<Subscription, ApiError> {
    let id = path_id(id, "subscription")?;
    Ok(pull::pull_subscription(&state.ops(), &auth.account_id, &auth.integration_id, &id).await?)
}

fn parse_cursor(text: &str) -> Result<PullCursor, ApiError> {
    PullCursor::decode(text).map_err(|e| crate::operations::OpsError::from(e).into())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangesParams {
    limit: Option<u32>,
    cursor: Option<String>,
}

/// One pending change as the adapter reads it.
#[derive(Debug, Serialize)]
pub(crate) struct PulledChangeView {
    /// Write this cursor to acknowledge this change and every change before it.
    pub cursor: String,
    /// The stable delivery identifier (the same a webhook would carry as `webhook-id`).
    pub delivery_id: DeliveryId,
    pub change_id: ChangeId,
    pub occurred_at: String,
    /// The projected change (the subscription's fields only, never the row).
    pub payload: Value,
    /// An operator restarted this delivery: the adapter may have seen it before.
    pub redelivery: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct ChangesPage {
    pub subscription_id: SubscriptionId,
    /// The acknowledged position (a change id), `null` before the first acknowledgement.
    pub acknowledged_change_id: Option<ChangeId>,
    pub data: Vec<PulledChangeView>,
    /// Acknowledges the whole page; pass it as `?cursor=` to read the next page.
    pub next_cursor: String,
    pub has_more: bool,
}

impl ChangesPage {
    fn new(sub: &Subscription, page: PullPage) -> Self {
        ChangesPage {
            subscription_id: sub.subscription_id.clone(),
            acknowledged_change_id: sub.pull_cursor.clone(),
            data: page
                .changes
                .into_iter()
                .map(|c| {
                    let d = c.delivery;
                    PulledChangeView {
                        cursor: c.cursor.encode(),
                        delivery_id: d.delivery_id,
                        change_id: d.change_id,
                        occurred_at: d.occurred_at.to_rfc3339(),
                        payload: d
                            .payload
                            .as_deref()
                            .and_then(|p| serde_json::from_str(p).ok())
                            .unwrap_or(Value::Null),
                        redelivery: d.restarts > 0,
                    }
                })
                .collect(),
            next_cursor: page.next_cursor.encode(),
            has_more: page.has_more,
        }
    }
}

async fn changes(
    auth: IntegrationAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<ChangesParams>,
) -> Result<Json<ChangesPage>, ApiError> {
    let limit = page_limit(params.limit)?;
    let sub = load(&state, &auth, &id).await?;
    let cursor = params.cursor.as_deref().map(parse_cursor).transpose()?;
    let page = pull::read(&state.ops(), &sub, cursor.as_ref(), limit).await?;
    Ok(Json(ChangesPage::new(&sub, page)))
}

#[derive(Debug, Serialize)]
pub(crate) struct CursorView {
    pub subscription_id: SubscriptionId,
    /// The last change id acknowledged, `null` before the first acknowledgement.
    pub acknowledged_change_id: Option<ChangeId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acknowledged_at: Option<String>,
    /// Incremented when an operator restarts deliveries of the subscription; cursors read in an
    /// earlier epoch are refused.
    pub epoch: u32,
}

async fn fetch_cursor(
    auth: IntegrationAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<CursorView>, ApiError> {
    let sub = load(&state, &auth, &id).await?;
    Ok(Json(CursorView {
        subscription_id: sub.subscription_id.clone(),
        acknowledged_change_id: sub.pull_cursor.clone(),
        acknowledged_at: sub.pull_cursor_at.map(|t| t.to_rfc3339()),
        epoch: sub.pull_epoch,
    }))
}

#[derive(Debug, Serialize)]
pub(crate) struct AcknowledgementView {
    pub subscription_id: SubscriptionId,
    pub previous_change_id: Option<ChangeId>,
    pub acknowledged_change_id: Option<ChangeId>,
    /// Pending deliveries the cursor covered: now `delivered`.
    pub delivered: u32,
    /// Pending deliveries in the cursor's range it did not cover (moved by someone else since
    /// the read, or not yet visible to it): they stay pending and are read again.
    pub not_covered: u32,
}

async fn write_cursor(
    auth: IntegrationAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
    JsonBody(mut f): JsonBody,
) -> Result<Json<AcknowledgementView>, ApiError> {
    let cursor: Option<String> = f.required("cursor");
    f.finish()?;
    let sub = load(&state, &auth, &id).await?;
    let cursor = parse_cursor(cursor.as_deref().unwrap_or_default())?;
    let ack = pull::acknowledge(&state.ops(), &sub, &cursor).await?;
    Ok(Json(AcknowledgementView {
        subscription_id: sub.subscription_id.clone(),
        previous_change_id: ack.previous,
        acknowledged_change_id: ack.acknowledged,
        delivered: ack.delivered,
        not_covered: ack.not_covered,
    }))
}
