//! The event monitor (`docs/lifecycles.md#event-status`) for the caller's account (account token):
//!
//! * `GET /v1/events` (`?status=&from=&to=&order=&record_type=&record_id=&event_code=&limit=&cursor=`)
//!   — the account's events by creation time, newest first (`order=asc` for oldest first);
//!   `status` is one or more of `new, partial, sent, failed, skipped` (comma-separated); `from`
//!   (inclusive) and `to` (exclusive) are RFC 3339 times; `record_type`, `record_id` and
//!   `event_code` keep only the events of that record type, record or code (the console's
//!   Event monitor filters by code the same way). Pages of at most `limit` (1–100, default 50) with an opaque
//!   `next_cursor`.
//! * `GET /v1/events/{event_id}` — one event (the change id) with its delivery log: each
//!   delivery's stored status, its `transmit_status` (`docs/lifecycles.md#delivery-log-words`), attempts, last
//!   error, HTTP code and attempt history.
//!
//! Another account's event is `404`, as is an event past its retention (TTL deletion lags; the
//! read filter does not). `event_status` and `internal_status` are written only by the system:
//! there is no route that sets them (other methods on these paths are `405`).

use super::{list_query, ListResponse};
use crate::domain::pull_cursor::change_id;
use crate::operations::event_monitor::MonitorError;
use crate::operations::event_monitor::{
    event_with_deliveries, list_events, DeliveryLogEntry, EventQuery, EventSummary,
};
use crate::operations::list_filters::EventFilter;
use crate::operations::OpsError;
use crate::web::auth::AccountAuth;
use crate::web::extract::{ApiPath, ApiQuery};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/v1/events", get(list))
        .route("/v1/events/{event_id}", get(fetch))
}

/// A monitor failure as an API error: a foreign or mangled cursor is the caller's mistake.
pub(crate) fn monitor_error(e: impl Into<MonitorError>) -> ApiError {
    OpsError::from(e.into()).into()
}

/// The list's query parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListParams {
    pub status: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub order: Option<String>,
    pub record_type: Option<String>,
    pub record_id: Option<String>,
    pub event_code: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

/// The query of a list request ([`EventFilter`]); every invalid parameter is named in one 422.
pub(crate) fn read_params(params: ListParams) -> Result<EventQuery, ApiError> {
    let filter = EventFilter {
        status: params.status,
        from: params.from,
        to: params.to,
        order: params.order,
        record_type: params.record_type,
        record_id: params.record_id,
        event_code: params.event_code,
        cursor: params.cursor,
    };
    list_query(params.limit, |limit| filter.query(limit))
}

async fn list(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ListResponse<EventSummary>>, ApiError> {
    let query = read_params(params)?;
    let page = list_events(
        &state.clients.dynamo,
        &state.config.delivery_table,
        &auth.account_id,
        &query,
        state.clock.now(),
    )
    .await
    .map_err(monitor_error)?;
    Ok(Json(ListResponse {
        data: page.items.iter().map(EventSummary::from).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// An event with its delivery log.
#[derive(Debug, Serialize)]
pub(crate) struct EventDetail {
    #[serde(flatten)]
    pub event: EventSummary,
    pub deliveries: Vec<DeliveryLogEntry>,
}

async fn fetch(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<EventDetail>, ApiError> {
    // An event's id is its change id: the owning application's, under `Change::validate`'s rules.
    let id = change_id(&id).ok_or_else(|| ApiError::not_found("event"))?;
    let now = state.clock.now();
    let (event, deliveries) = event_with_deliveries(
        &state.clients.dynamo,
        &state.config.delivery_table,
        &auth.account_id,
        &id,
        now,
    )
    .await
    .map_err(monitor_error)?
    .ok_or_else(|| ApiError::not_found("event"))?;
    Ok(Json(EventDetail {
        event: EventSummary::from(&event),
        deliveries: deliveries
            .iter()
            .map(|d| DeliveryLogEntry::new(d, now))
            .collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::EventStatus;

    #[test]
    fn a_list_request_names_every_bad_parameter_with_its_limit_last() {
        let q = read_params(ListParams {
            status: Some("sent".into()),
            ..ListParams::default()
        })
        .unwrap();
        assert_eq!(q.statuses, vec![EventStatus::Sent]);
        assert_eq!(q.limit, crate::web::extract::DEFAULT_PAGE);
        let Err(ApiError::Validation { errors }) = read_params(ListParams {
            status: Some("done".into()),
            from: Some("yesterday".into()),
            to: Some("2024-01-01T00:00:00Z".into()),
            order: Some("sideways".into()),
            limit: Some(1000),
            ..ListParams::default()
        }) else {
            panic!("expected a validation error")
        };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["status", "from", "order", "limit"]);
        let Err(ApiError::Validation { errors }) = read_params(ListParams {
            limit: Some(0),
            ..ListParams::default()
        }) else {
            panic!("expected a validation error")
        };
        assert_eq!(errors[0].field, "limit");
    }
}
