//! What every request handler shares: the clients, the configuration, the clock, the operator
//! authentication and the known built-in handler names; and the API's two ways of sending a
//! write (a refusal is a 409 or a 404).

use super::operator_auth::OperatorAuth;
use super::problem::ApiError;
use crate::aws::Clients;
use crate::clock::Clock;
use crate::config::Config;
use crate::operations::Ops;
use crate::store::write::{send, Write, Written};
use std::sync::Arc;

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
    /// Seals webhook signing secrets (one KMS data key per container).
    pub sealer: Arc<crate::data_keys::SecretSealer>,
    /// The delivery worker's webhook adapter under this deployment's target policy, for the
    /// policy (the API opens no signing secret and sends nothing: test events are sent by the
    /// delivery function, [`crate::operations::account::test_events`]).
    pub webhook: crate::delivery::worker::webhook::WebhookAdapter,
    /// Signs the web console's login links and sessions ([`crate::web::console_session`]); a random
    /// key of the process unless [`ApiState::with_console_keys`] sets the configured one.
    pub console_keys: Arc<crate::web::console_key::ConsoleKeys>,
    /// The token-check key every issued token carries a check of
    /// ([`crate::operations::account::token_format`]): read from the secret `Config::token_check_key_arn` names,
    /// once per container, unless [`ApiState::with_token_check_key`] sets one.
    pub token_check: Arc<crate::operations::account::token_format::TokenCheckKeys>,
    /// Each account's own request rate as last read, per container ([`crate::web::account_rate`]).
    pub account_rates: Arc<crate::web::own_rates::OwnRates>,
    /// Where the API's metrics go ([`crate::web::metrics`]): standard output unless
    /// [`ApiState::with_metrics`] says otherwise.
    pub metrics: Arc<dyn crate::metrics::EmfSink>,
    /// The event-type catalog as this container holds it: read again when its lease ends
    /// ([`crate::operations::catalog_lease`]); every reader of the catalog goes through it.
    pub catalog: Arc<crate::operations::catalog_lease::CatalogLease>,
}

impl ApiState {
    /// A state with the default internal handler names ([`DEFAULT_INTERNAL_HANDLERS`]).
    pub fn new(
        clients: Clients,
        config: Config,
        clock: Arc<dyn Clock>,
        operator_auth: OperatorAuth,
    ) -> Self {
        let policy = crate::domain::ssrf::TargetPolicy {
            allow_private: config.allow_private_targets,
            require_https: !config.allow_private_targets,
        };
        let token_check = Arc::new(
            crate::operations::account::token_format::TokenCheckKeys::from_secret(
                clients.secrets.clone(),
                config.token_check_key_arn.clone(),
            ),
        );
        ApiState {
            token_check,
            account_rates: Arc::default(),
            sealer: Arc::new(crate::data_keys::SecretSealer::new(
                clients.kms.clone(),
                config.signing_key_id.clone(),
            )),
            webhook: crate::delivery::worker::webhook::WebhookAdapter::new(
                policy,
                crate::delivery::worker::webhook::DEFAULT_TIMEOUT,
            ),
            clients,
            config,
            clock,
            operator_auth,
            internal_handlers: DEFAULT_INTERNAL_HANDLERS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            provider_events: None,
            console_keys: Arc::new(crate::web::console_key::ConsoleKeys::fixed(
                crate::web::console_session::ConsoleKey::random(),
            )),
            metrics: Arc::new(crate::metrics::StdoutLines),
            catalog: Arc::default(),
        }
    }

    /// Sends the API's metrics to `sink` (tests keep them).
    pub fn with_metrics(mut self, sink: Arc<dyn crate::metrics::EmfSink>) -> Self {
        self.metrics = sink;
        self
    }

    /// The token-check key (read from its secret on first use).
    pub async fn token_check_key(
        &self,
    ) -> Result<Arc<crate::operations::account::token_format::TokenCheckKey>, ApiError> {
        Ok(self.token_check.current().await?)
    }

    /// Signs console links and sessions with `keys` (the api function's, loaded at start and
    /// read again on their interval).
    pub fn with_console_keys(mut self, keys: crate::web::console_key::ConsoleKeys) -> Self {
        self.console_keys = Arc::new(keys);
        self
    }

    /// The console key to use at `now`.
    pub async fn console_key(
        &self,
        now: crate::domain::time::Timestamp,
    ) -> Arc<crate::web::console_session::ConsoleKey> {
        self.console_keys.current(now).await
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

    pub fn dynamo(&self) -> &aws_sdk_dynamodb::Client {
        &self.clients.dynamo
    }

    /// The delivery table.
    pub fn table(&self) -> &str {
        &self.config.delivery_table
    }

    /// An account's operations ([`crate::operations::account`]) with this process's clients,
    /// settings, sealer, token-check key and target policy.
    pub fn account_ops(&self) -> crate::operations::account::AccountOps<'_> {
        crate::operations::account::AccountOps {
            ops: self.ops(),
            sqs: &self.clients.sqs,
            config: &self.config,
            sealer: &self.sealer,
            token_check: &self.token_check,
            catalog: &self.catalog,
            target_policy: self.target_policy(),
            internal_handlers: &self.internal_handlers,
        }
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
            Written::Refused(_) | Written::Conflict => Err(ApiError::conflict(
                "the resource was created or changed concurrently; retry the request",
            )),
        }
    }

    /// Sends a write of an existing `what` (an edit or a delete, conditional on the item's
    /// existence): a refusal is a `404`. Answers with the item an edit returns.
    pub(crate) async fn change_existing(
        &self,
        write: Write,
        what: &str,
    ) -> Result<Option<crate::store::Item>, ApiError> {
        match send(self.dynamo(), write).await? {
            Written::Applied(item) => Ok(item),
            Written::Refused(_) | Written::Conflict => Err(ApiError::not_found(what)),
        }
    }

    /// The webhook target policy: the SSRF guard, relaxed only where private targets are allowed
    /// (the local demo and tests).
    pub(crate) fn target_policy(&self) -> crate::domain::ssrf::TargetPolicy {
        self.webhook.policy()
    }
}
