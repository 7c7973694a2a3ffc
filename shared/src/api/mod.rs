//! The HTTP API: one axum [`Router`] served by the `api` Lambda behind API Gateway's HTTP API,
//! and by `local::api_server` on loopback for the demo and tests.
//!
//! One file per resource: [`v1`] for the routes of account, integration and publish tokens (and
//! those any token may call), [`operator`] for the operators' routes, [`self_service`] for an
//! account's own recovery routes and [`console_links`] for the routes that issue console login
//! links; each file's header names its routes and who may call them, and [`routes`] reads the
//! whole (method, path) table back from the router. Handlers read the request, call the named
//! operations ([`crate::operations`]) and show their answers as views; what they share with the
//! web console (the state, callers' identities and sessions, problems, extraction) is
//! [`crate::web`]'s.
//!
//! The web console (the `console` crate) is mounted beside these routes by the api function
//! ([`crate::web::app`]); nothing here imports it.
//!
//! Every route is documented in `openapi.yaml`; `local/tests/it/openapi.rs` compares the two.
//!
//! Adding a resource: write `api/v1/<resource>.rs` with `pub fn router() -> Router<Arc<ApiState>>`
//! whose handlers take an auth extractor ([`AccountAuth`], [`IntegrationAuth`] or [`Operator`])
//! first and return `Result<_, ApiError>`, then merge it in `v1::router()` (or
//! `operator::router()`). Scope every read and write by the caller's account id.

pub(crate) mod console_links;
pub mod operator;
pub mod routes;
pub(crate) mod self_service;
pub mod v1;

use crate::web::ApiState;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use std::sync::Arc;

/// The JSON API's routes, before the state and the layers every request passes ([`app`]).
pub fn routes() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/health", get(health))
        .merge(v1::router())
        .merge(operator::router())
        .merge(self_service::router())
        .merge(console_links::router())
}

/// The JSON API alone.
pub fn router(state: ApiState) -> Router {
    crate::web::app(state, routes())
}

async fn health() -> impl IntoResponse {
    (StatusCode::OK, Json(serde_json::json!({"status": "ok"})))
}
