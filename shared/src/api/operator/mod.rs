//! `/operator/*`: routes for the platform's operators (identity from [`crate::api::Operator`]).

pub mod accounts;

use super::ApiState;
use axum::Router;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new().merge(accounts::router())
}
