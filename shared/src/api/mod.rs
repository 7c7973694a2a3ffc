//! The HTTP API: one axum [`Router`] served by the `api` Lambda behind API Gateway's HTTP API,
//! and by `local::api_server` on loopback for the demo and tests.
//!
//! Layout (one file per resource):
//!
//! ```text
//! api/mod.rs                   ApiState, router(), /health, fallbacks, request log
//! api/problem.rs               ApiError → RFC 7807 application/problem+json
//! api/auth.rs                  tokens, AccountAuth / IntegrationAuth / Operator extractors
//! api/extract.rs               JsonBody + Fields, ApiPath, ApiQuery (problem+json rejections)
//! api/lambda.rs                API Gateway stage prefix handling for the Lambda
//! api/v1/integrations.rs       /v1/integrations…      (account token)
//! api/v1/subscriptions.rs      /v1/subscriptions…     (account token)
//! api/v1/whoami.rs             /v1/whoami             (any token)
//! api/operator/accounts.rs     /operator/accounts…    (operator identity)
//! api/v1/pull.rs               /v1/pull/subscriptions…                  (integration token)
//! api/operator/subscriptions.rs /operator/accounts/{a}/subscriptions/{s}[/resume]
//! api/operator/deliveries.rs   /operator/accounts/{a}/subscriptions/{s}/deliveries…  (history, retry)
//! api/operator/replays.rs      …/subscriptions/{s}/replays, /operator/accounts/{a}/replays…
//! api/operator/history.rs      /operator/accounts/{a}[/subscriptions/{s}]/audit
//! api/routes.rs                the router's (method, path) table, read back from the router
//! ```
//!
//! Every route is documented in `openapi.yaml`; `local/tests/it/openapi.rs` compares the two.
//!
//! Adding a resource: write `api/v1/<resource>.rs` with `pub fn router() -> Router<Arc<ApiState>>`
//! whose handlers take an auth extractor ([`AccountAuth`], [`IntegrationAuth`] or [`Operator`])
//! first and return `Result<_, ApiError>`, then merge it in `v1::router()` (or
//! `operator::router()`). Scope every read and write by the caller's account id.

pub mod auth;
pub mod extract;
pub mod lambda;
pub mod operator;
pub mod problem;
pub mod routes;
pub mod v1;

pub use auth::{AccountAuth, IntegrationAuth, Operator, OperatorAuth, Principal};
pub use problem::{ApiError, FieldError};

use crate::aws::Clients;
use crate::clock::Clock;
use crate::config::Config;
use crate::operations::Ops;
use crate::store::write::{send, Write, Written};
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use std::sync::Arc;
use std::time::Instant;

/// Largest request body accepted (filters and field lists are small).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Built-in handler names an `internal` integration may name when none are configured.
pub const DEFAULT_INTERNAL_HANDLERS: &[&str] = &["record_snapshot"];

/// Everything a request handler needs. The router shares it behind an `Arc`.
#[derive(Clone)]
pub struct ApiState {
    pub clients: Clients,
    pub config: Config,
    pub clock: Arc<dyn Clock>,
    pub operator_auth: OperatorAuth,
    /// Names `internal` integrations may use (the built-in handler registry's names).
    pub internal_handlers: Arc<[String]>,
    /// How provider events are authenticated; `None`: this process's
    /// [`crate::notify::confirm::settings`].
    pub provider_events: Option<Arc<crate::notify::confirm::ProviderEventSettings>>,
}

impl ApiState {
    /// A state with the default internal handler names ([`DEFAULT_INTERNAL_HANDLERS`]).
    pub fn new(
        clients: Clients,
        config: Config,
        clock: Arc<dyn Clock>,
        operator_auth: OperatorAuth,
    ) -> Self {
        ApiState {
            clients,
            config,
            clock,
            operator_auth,
            internal_handlers: DEFAULT_INTERNAL_HANDLERS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            provider_events: None,
        }
    }

    /// Authenticates provider events with `settings` (the api function's, loaded at start).
    pub fn with_provider_events(
        mut self,
        settings: Arc<crate::notify::confirm::ProviderEventSettings>,
    ) -> Self {
        self.provider_events = Some(settings);
        self
    }

    /// The provider-event settings requests are checked against.
    pub fn provider_event_settings(&self) -> &crate::notify::confirm::ProviderEventSettings {
        match &self.provider_events {
            Some(settings) => settings,
            None => crate::notify::confirm::settings(),
        }
    }

    /// Replaces the known internal handler names (e.g. with the registry's `names()`).
    pub fn with_internal_handlers<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.internal_handlers = names.into_iter().map(Into::into).collect();
        self
    }

    pub fn set_known_internal_handlers<I, S>(&mut self, names: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.internal_handlers = names.into_iter().map(Into::into).collect();
    }

    pub fn is_known_internal_handler(&self, name: &str) -> bool {
        self.internal_handlers.iter().any(|h| h == name)
    }

    pub fn dynamo(&self) -> &aws_sdk_dynamodb::Client {
        &self.clients.dynamo
    }

    /// The delivery table.
    pub fn table(&self) -> &str {
        &self.config.delivery_table
    }

    /// The operator actions and the pull cursor, on this request's table and clock.
    pub fn ops(&self) -> Ops<'_> {
        Ops::new(self.dynamo(), self.table(), self.clock.as_ref())
    }

    /// Sends a write that creates items (and whatever goes with them). A refused condition or a
    /// concurrent transaction is a `409`: the caller retries the request.
    pub async fn create(&self, write: Write) -> Result<(), ApiError> {
        match send(self.dynamo(), write).await? {
            Written::Applied(_) => Ok(()),
            Written::Refused | Written::Conflict => Err(ApiError::conflict(
                "the resource was created or changed concurrently; retry the request",
            )),
        }
    }

    /// Sends a write of an existing `what` (an edit or a delete, conditional on the item's
    /// existence): a refusal is a `404`. Answers with the item an edit returns.
    pub async fn change_existing(
        &self,
        write: Write,
        what: &str,
    ) -> Result<Option<crate::store::Item>, ApiError> {
        match send(self.dynamo(), write).await? {
            Written::Applied(item) => Ok(item),
            Written::Refused | Written::Conflict => Err(ApiError::not_found(what)),
        }
    }

    /// The webhook target policy: the SSRF guard, relaxed only where private targets are allowed
    /// (the local demo and tests).
    pub fn target_policy(&self) -> crate::domain::ssrf::TargetPolicy {
        crate::domain::ssrf::TargetPolicy {
            allow_private: self.config.allow_private_targets,
            require_https: !self.config.allow_private_targets,
        }
    }
}

/// The whole API.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/health", get(health))
        .merge(v1::router())
        .merge(operator::router())
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(log_request))
        .with_state(Arc::new(state))
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
