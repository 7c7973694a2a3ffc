//! The HTTP API: one axum [`Router`] served by the `api` Lambda behind API Gateway's HTTP API,
//! and by `local::api_server` on loopback for the demo and tests.
//!
//! One file per resource: [`v1`] for the routes of account, integration and publish tokens (and
//! those any token may call), [`operator`] for the operators' routes; each file's header names its
//! routes and who may call them, and [`routes`] reads the whole (method, path) table back from the
//! router. Beside them: the state every handler shares ([`state`]), the problem mapping
//! ([`problem`]), extraction ([`extract`]), token and operator authentication ([`auth`],
//! [`operator_auth`], [`credentials`]), an account's own recovery routes
//! ([`self_service`]), each account's request rate ([`account_rate`], [`own_rates`]), the API's
//! request limits ([`limits`]),
//! the console's links, sessions and sign-in ([`console_links`],
//! [`console_session`], [`console_key`], [`console_signin`]), the API's metrics ([`metrics`]) and
//! the Lambda's stage prefix ([`lambda`]).
//!
//! The web console (the `console` crate) is mounted beside these routes by the api function
//! ([`app`]); nothing here imports it.
//!
//! Every route is documented in `openapi.yaml`; `local/tests/it/openapi.rs` compares the two.
//!
//! Adding a resource: write `api/v1/<resource>.rs` with `pub fn router() -> Router<Arc<ApiState>>`
//! whose handlers take an auth extractor ([`AccountAuth`], [`IntegrationAuth`] or [`Operator`])
//! first and return `Result<_, ApiError>`, then merge it in `v1::router()` (or
//! `operator::router()`). Scope every read and write by the caller's account id.

pub mod account_rate;
pub mod auth;
pub mod console_key;
pub mod console_links;
pub mod console_session;
pub mod console_signin;
pub mod credentials;
pub mod extract;
pub mod lambda;
pub mod limits;
pub mod metrics;
pub mod operator;
pub mod operator_auth;
pub mod own_rates;
pub mod problem;
pub mod routes;
pub mod self_service;
pub mod state;
pub mod v1;

pub use auth::{AccountAuth, IntegrationAuth, Operator, OperatorAuth, Principal};
pub use problem::{ApiError, FieldError};
pub use state::{ApiState, DEFAULT_INTERNAL_HANDLERS};

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use std::sync::Arc;
use std::time::Instant;

/// Largest request body accepted (filters and field lists are small).
pub use limits::MAX_BODY_BYTES;

/// The JSON API's routes, before the state and the layers every request passes ([`app`]).
pub fn routes() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/health", get(health))
        .merge(v1::router())
        .merge(operator::router())
        .merge(self_service::router())
        .merge(console_links::router())
}

/// The app serving `routes` (the JSON API's, and whatever the caller mounts beside them, such as
/// the web console's pages) with the API's fallbacks, body limit, request log and metrics.
pub fn app(state: ApiState, routes: Router<Arc<ApiState>>) -> Router {
    let state = Arc::new(state);
    routes
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(log_request))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::count,
        ))
        .with_state(state)
}

/// The JSON API alone.
pub fn router(state: ApiState) -> Router {
    app(state, routes())
}

async fn health() -> impl IntoResponse {
    (StatusCode::OK, Json(serde_json::json!({"status": "ok"})))
}

async fn no_route() -> ApiError {
    ApiError::NotFound {
        detail: "no route matches this path".into(),
    }
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed {
        detail: "this route does not accept that method".into(),
    }
}

/// One log line per request: method, route path (ids only, no query string, no headers), status
/// and duration. Tokens and secrets are never in it.
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let ms = started.elapsed().as_millis() as u64;
    if status >= 500 {
        tracing::error!(%method, %path, status, ms, "api request");
    } else {
        tracing::info!(%method, %path, status, ms, "api request");
    }
    response
}
