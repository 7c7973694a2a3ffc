//! `/v1/*`: the management API (account tokens) and routes any token may call.

pub mod attention;
pub(crate) mod changes;
pub mod endpoint_settings;
pub(crate) mod event_types;
pub(crate) mod events;
pub mod integrations;
pub(crate) mod jobs;
pub mod notices;
pub(crate) mod provider_events;
pub(crate) mod pull;
pub mod subscriptions;
pub mod test_event;
pub(crate) mod whoami;

use super::ApiState;
use crate::domain::input::FieldErrors;
use crate::web::extract::page_limit;
use crate::web::problem::ApiError;
use axum::Router;
use serde::Serialize;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .merge(integrations::router())
        .merge(notices::router())
        .merge(provider_events::router())
        .merge(subscriptions::router())
        .merge(test_event::router())
        .merge(whoami::router())
        .merge(pull::router())
        .merge(events::router())
        .merge(attention::router())
        .merge(jobs::router())
        .merge(event_types::router())
        .merge(changes::router())
}

/// A page of a list route: `data`, and `next_cursor` to pass as `?cursor=` for the next page
/// (`null` on the last page).
#[derive(Debug, Serialize)]
pub(crate) struct ListResponse<T> {
    pub data: Vec<T>,
    pub next_cursor: Option<String>,
}

impl<T> ListResponse<T> {
    /// A page whose next page continues at `next_position` (encoded as an opaque cursor).
    /// The position is an id (of the listed kind) or a store position: anything with a text form.
    pub fn new(data: Vec<T>, next_position: Option<impl Into<String>>) -> Self {
        ListResponse {
            data,
            next_cursor: next_position
                .map(Into::into)
                .as_deref()
                .map(crate::store::cursor::encode),
        }
    }
}

/// A list's query read from its filter (`read`, given the page size) and its `?limit=`: every
/// refusal of both in one 422, the limit's last.
pub(crate) fn list_query<Q>(
    limit: Option<u32>,
    read: impl FnOnce(u32) -> Result<Q, FieldErrors>,
) -> Result<Q, ApiError> {
    let limit = page_limit(limit);
    let mut errors = match read(*limit.as_ref().unwrap_or(&0)) {
        Ok(query) if limit.is_ok() => return Ok(query),
        Ok(_) => Vec::new(),
        Err(refused) => refused.into_vec(),
    };
    match limit {
        Err(ApiError::Validation { errors: e }) => errors.extend(e),
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    Err(ApiError::Validation { errors })
}
