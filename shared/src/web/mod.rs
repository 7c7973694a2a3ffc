//! What both HTTP doors share, the JSON API (`crate::api`) and the web console (the `console`
//! crate): the state every handler works with ([`state`]), callers' identities (tokens, operators:
//! [`auth`], [`operator_auth`], [`credentials`]) and console sessions ([`console_session`],
//! [`console_key`], [`console_signin`]), each account's request rate ([`account_rate`],
//! [`own_rates`]), problems ([`problem`]), extraction ([`extract`]), the request limits
//! ([`limits`]), the API's metrics ([`metrics`]), the Lambda's stage prefix ([`lambda`]), and
//! the app that serves a door's routes with the fallbacks, body limit, request log and metrics
//! every request passes ([`app`]). Both doors use these as a library; neither calls the other's
//! handlers.

pub mod account_rate;
pub mod auth;
pub mod console_key;
pub mod console_session;
pub mod console_signin;
pub mod credentials;
pub mod extract;
pub mod lambda;
pub mod limits;
pub mod metrics;
pub mod operator_auth;
pub mod own_rates;
pub mod problem;
pub mod state;

pub use auth::{AccountAuth, IntegrationAuth, Operator, OperatorAuth, Principal};
pub use problem::{ApiError, FieldError};
pub use state::{ApiState, DEFAULT_INTERNAL_HANDLERS};

use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use std::sync::Arc;
use std::time::Instant;

/// Largest request body accepted (filters and field lists are small).
pub use limits::MAX_BODY_BYTES;

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
