//! The event-type catalog as tenants read it (any token: account, integration or publish):
//!
//! * `GET /v1/event-types` → `{data: [event type…]}`, every record type in name order.
//! * `GET /v1/event-types/{type}` → one type, or 404.
//!
//! An event type is `{type, version, description, schema, example, updated_at}`: `schema` is the
//! JSON Schema of the record fields a subscription may project (the `data` of a delivered
//! payload), `example` a payload that fits it. Operators write the catalog
//! ([`crate::api::operator::event_types`]). [`catalog`] is the one read both doors (this API and
//! the console's catalog page) make, from the container's copy held for a short lease
//! ([`crate::operations::catalog_lease`]); every subscription write passes the catalog's
//! [`crate::domain::event_type::refusals`] ([`crate::operations::account::subscriptions`]), and a published change [`Catalog::knows`].

use crate::domain::event_type::is_type_name;
use crate::store::event_type::EventType;
use crate::web::auth::Principal;
use crate::web::extract::ApiPath;
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/v1/event-types", get(list))
        .route("/v1/event-types/{record_type}", get(fetch))
}

/// An event type as the API shows it.
#[derive(Debug, Serialize)]
pub(crate) struct EventTypeView {
    #[serde(rename = "type")]
    pub record_type: String,
    pub version: u32,
    pub description: String,
    pub schema: Value,
    pub example: Value,
    pub updated_at: String,
}

impl From<&EventType> for EventTypeView {
    fn from(t: &EventType) -> Self {
        EventTypeView {
            record_type: t.record_type.clone(),
            version: t.version,
            description: t.description.clone(),
            schema: t.schema_json(),
            example: t.example_json(),
            updated_at: t.updated_at.to_rfc3339(),
        }
    }
}

pub use crate::store::event_type::Catalog;

/// The catalog (the API's and the console's one read of it): the container's, read again when
/// its lease ends ([`crate::operations::catalog_lease`]), not a read of the store per request.
pub async fn catalog(state: &ApiState) -> Result<Arc<Catalog>, ApiError> {
    Ok(state
        .catalog
        .catalog(state.dynamo(), state.table(), state.clock.now())
        .await?)
}

async fn list(
    _caller: Principal,
    State(state): State<Arc<ApiState>>,
) -> Result<Json<Value>, ApiError> {
    let catalog = catalog(&state).await?;
    let data: Vec<EventTypeView> = catalog.types.iter().map(EventTypeView::from).collect();
    Ok(Json(serde_json::json!({ "data": data })))
}

/// One type by name (from the container's catalog); 404 for a name that is not in the catalog
/// (or cannot be one).
pub async fn one(state: &ApiState, record_type: &str) -> Result<EventType, ApiError> {
    if !is_type_name(record_type) {
        return Err(ApiError::not_found("event type"));
    }
    catalog(state)
        .await?
        .find(record_type)
        .cloned()
        .ok_or_else(|| ApiError::not_found("event type"))
}

async fn fetch(
    _caller: Principal,
    State(state): State<Arc<ApiState>>,
    ApiPath(record_type): ApiPath<String>,
) -> Result<Json<EventTypeView>, ApiError> {
    let t = one(&state, &record_type).await?;
    Ok(Json(EventTypeView::from(&t)))
}
