//! "Needs attention" for the caller's account (account token):
//!
//! * `GET /v1/attention` (`?limit=&cursor=`) — the account's paused subscriptions (all of them,
//!   on every page) and its `dead` or `failed` deliveries, newest first, a page of at most `limit`
//!   (1–100, default 50) with an opaque `next_cursor`. Each delivery is a delivery-log line (its
//!   stored status, its `transmit_status` of `docs/lifecycles.md#delivery-log-words`, attempts,
//!   last error, HTTP code). Deliveries past
//!   their event's retention are not listed.

use super::events::monitor_error;
use super::subscriptions::SubscriptionView;
use crate::operations::event_monitor::{
    attention_deliveries, paused_subscriptions, DeliveryLogEntry,
};
use crate::web::auth::AccountAuth;
use crate::web::extract::{page_limit, ApiQuery};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new().route("/v1/attention", get(needs_attention))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    limit: Option<u32>,
    cursor: Option<String>,
}

/// What needs an operator's or the account's attention.
#[derive(Debug, Serialize)]
pub struct Attention {
    pub paused_subscriptions: Vec<SubscriptionView>,
    /// Dead and failed deliveries, newest first (this page).
    pub deliveries: Vec<DeliveryLogEntry>,
    pub next_cursor: Option<String>,
}

async fn needs_attention(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiQuery(params): ApiQuery<Params>,
) -> Result<Json<Attention>, ApiError> {
    let limit = page_limit(params.limit)?;
    let now = state.clock.now();
    let (dynamo, table) = (&state.clients.dynamo, &state.config.delivery_table);
    let paused = paused_subscriptions(dynamo, table, &auth.account_id)
        .await
        .map_err(monitor_error)?;
    let page = attention_deliveries(
        dynamo,
        table,
        &auth.account_id,
        limit,
        params.cursor.as_deref(),
        now,
    )
    .await
    .map_err(monitor_error)?;
    Ok(Json(Attention {
        paused_subscriptions: paused.iter().map(SubscriptionView::from).collect(),
        deliveries: page
            .items
            .iter()
            .map(|d| DeliveryLogEntry::new(d, now))
            .collect(),
        next_cursor: page.next_cursor,
    }))
}
