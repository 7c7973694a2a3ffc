//! `/v1/*`: the management API (account tokens) and routes any token may call.

pub mod attention;
pub mod changes;
pub mod endpoint_settings;
pub mod event_types;
pub mod events;
pub mod integrations;
pub mod jobs;
pub mod notices;
pub mod provider_events;
pub mod pull;
pub mod subscriptions;
pub mod test_event;
pub mod whoami;

use super::ApiState;
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
pub struct ListResponse<T> {
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
