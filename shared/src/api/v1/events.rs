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

use super::ListResponse;
use crate::api::auth::AccountAuth;
use crate::api::extract::{page_limit, ApiPath, ApiQuery};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::domain::change::MAX_ID_LEN;
use crate::domain::event::EventStatus;
use crate::domain::lifecycle::Status;
use crate::domain::pull_cursor::change_id;
use crate::domain::time::Timestamp;
use crate::operations::event_monitor::MonitorError;
use crate::operations::event_monitor::{
    event_with_deliveries, list_events, DeliveryLogEntry, EventQuery, EventSummary,
};
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
pub fn monitor_error(e: impl Into<MonitorError>) -> ApiError {
    match e.into() {
        MonitorError::BadCursor => ApiError::field("cursor", "is not a cursor of this list"),
        MonitorError::Store(e) => e.into(),
    }
}

/// The list's query parameters (the console reads its filters through them too).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
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

/// The query of a list request; every invalid parameter is named in one 422.
pub fn read_params(params: ListParams) -> Result<EventQuery, ApiError> {
    let mut errors = Vec::new();
    let mut statuses = Vec::new();
    if let Some(text) = &params.status {
        for word in text.split(',').map(str::trim) {
            match EventStatus::parse(word) {
                Some(s) if !statuses.contains(&s) => statuses.push(s),
                Some(_) => {}
                None => errors.push(crate::api::problem::FieldError::new(
                    "status",
                    format!(
                        "{word:?} is not an event status; expected new, partial, sent, failed or skipped"
                    ),
                )),
            }
        }
    }
    let mut time = |name: &str, value: &Option<String>| -> Option<Timestamp> {
        let text = value.as_deref()?;
        let t = Timestamp::parse_rfc3339(text);
        if t.is_none() {
            errors.push(crate::api::problem::FieldError::new(
                name,
                "must be an RFC 3339 time, e.g. 2024-05-01T00:00:00Z",
            ));
        }
        t
    };
    let from = time("from", &params.from);
    let to = time("to", &params.to);
    if let (Some(f), Some(t)) = (from, to) {
        if f > t {
            errors.push(crate::api::problem::FieldError::new(
                "to",
                "must not be before from",
            ));
        }
    }
    let oldest_first = match params.order.as_deref() {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(_) => {
            errors.push(crate::api::problem::FieldError::new(
                "order",
                "must be asc (oldest first) or desc (newest first)",
            ));
            false
        }
    };
    // A record type, record id or event code names what ingest accepted: non-empty, at most
    // `MAX_ID_LEN` characters (an empty parameter is no filter).
    let mut word = |name: &str, value: Option<String>| -> Option<String> {
        let v = value.filter(|v| !v.is_empty())?;
        if v.chars().count() > MAX_ID_LEN {
            errors.push(crate::api::problem::FieldError::new(
                name,
                format!("must be at most {MAX_ID_LEN} characters"),
            ));
        }
        Some(v)
    };
    let record_type = word("record_type", params.record_type);
    let record_id = word("record_id", params.record_id);
    let event_code = word("event_code", params.event_code);
    let limit = match page_limit(params.limit) {
        Ok(l) => l,
        Err(ApiError::Validation { errors: e }) => {
            errors.extend(e);
            0
        }
        Err(e) => return Err(e),
    };
    if !errors.is_empty() {
        return Err(ApiError::Validation { errors });
    }
    Ok(EventQuery {
        statuses,
        from,
        to,
        oldest_first,
        limit,
        cursor: params.cursor,
        record_type,
        record_id,
        event_code,
        ..EventQuery::default()
    })
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
pub struct EventDetail {
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

    fn params(status: Option<&str>, from: Option<&str>, to: Option<&str>) -> ListParams {
        ListParams {
            status: status.map(str::to_owned),
            from: from.map(str::to_owned),
            to: to.map(str::to_owned),
            ..ListParams::default()
        }
    }

    #[test]
    fn reads_statuses_times_and_names_every_bad_field() {
        let q = read_params(params(
            Some("sent, failed,sent"),
            Some("2024-05-01T00:00:00Z"),
            None,
        ))
        .unwrap();
        assert_eq!(q.statuses, vec![EventStatus::Sent, EventStatus::Failed]);
        assert!(q.from.is_some() && q.to.is_none());
        assert_eq!(q.limit, crate::api::extract::DEFAULT_PAGE);
        let Err(ApiError::Validation { errors }) = read_params(ListParams {
            order: Some("sideways".into()),
            limit: Some(1000),
            ..params(
                Some("done"),
                Some("yesterday"),
                Some("2024-01-01T00:00:00Z"),
            )
        }) else {
            panic!("expected a validation error")
        };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["status", "from", "order", "limit"]);
        let Err(ApiError::Validation { errors }) = read_params(params(
            None,
            Some("2024-05-02T00:00:00Z"),
            Some("2024-05-01T00:00:00Z"),
        )) else {
            panic!("expected a validation error")
        };
        assert_eq!(errors[0].field, "to");
    }
}
