//! The `api` Lambda: the HTTP API (management, operator and the adapters' pull routes) and the
//! web console's pages, behind API Gateway's HTTP API. The routes live in `shared::api` and the
//! `console` crate; this only wires them up.

use shared::api;
use shared::notify::{confirm, sns};
use shared::web::{ApiState, OperatorAuth};
use std::sync::Arc;
use tower::ServiceExt;

#[global_allocator]
static ALLOC: shared::alloc::Allocator = shared::alloc::Allocator;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    let ctx = shared::runtime::Context::from_env().await?;
    // OPERATOR_TOKEN_SHA256 selects a static operator token; otherwise the gateway's JWT
    // authorizer identifies operators on /operator/*.
    let operator_auth = OperatorAuth::from_env()?;
    // Provider-event secrets: read once per container, from Secrets Manager when
    // NOTIFICATION_PROVIDER_SECRETS_ARN is set (AWS), else from NOTIFICATION_PROVIDER_SECRETS.
    let secrets_manager = aws_sdk_secretsmanager::Client::new(&shared::aws::sdk_config().await);
    let provider_events = confirm::ProviderEventSettings::load(
        &secrets_manager,
        |name| std::env::var(name).ok(),
        Arc::new(sns::HttpsSns::default()),
    )
    .await?;
    // The web console's signing key: from Secrets Manager (CONSOLE_SIGNING_KEY_ARN), read again
    // every few minutes so a rotation takes effect without a restart.
    let console_keys = shared::web::console_key::ConsoleKeys::load(
        &secrets_manager,
        |name| std::env::var(name).ok(),
        ctx.clock.now(),
    )
    .await?;
    let state = ApiState::new(ctx.clients, ctx.config, ctx.clock, operator_auth)
        .with_provider_events(Arc::new(provider_events))
        .with_console_keys(console_keys);
    // The token-check key (TOKEN_CHECK_KEY_ARN): read once per container, now, so a container
    // that cannot read it fails to start instead of refusing every token.
    state
        .token_check_key()
        .await
        .map_err(|e| format!("the token-check key: {e}"))?;
    // Routes are declared without the API Gateway stage prefix.
    // The JSON API and the web console's pages, side by side.
    let app = shared::web::app(state, api::routes().merge(console::router()))
        .map_request(shared::web::lambda::strip_stage::<lambda_http::Body>);
    lambda_http::run(app).await
}
