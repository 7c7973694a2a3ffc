//! The test world of the integration tests. [`TestStack`] is one provisioned stack per test: its
//! own tables and queues under a unique prefix, so tests run in parallel against one emulator
//! without seeing each other's data. [`World`] puts everything a test talks to on that stack: the
//! delivery pipeline, the notification pipeline, the API, a scripted receiver and fixture
//! builders.

pub mod api;
pub mod builders;
pub mod notifications;
pub mod through_api;

use crate::faults::Faults;
use crate::fixtures::Fixtures;
use crate::metering::RequestMeter;
use crate::pipeline::Pipeline;
use crate::provision::{provision, Stack};
use crate::queues::QueueTap;
use crate::receiver::Receiver;
use crate::streams::StreamTap;
use crate::template::Template;
use anyhow::Result;
use api::{ApiClient, OPERATOR, OPERATOR_TOKEN};
use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;
use builders::{AccountBuilder, ChangeBuilder, IntegrationBuilder, SubscriptionBuilder};
use notifications::Notifications;
use shared::api::auth::{issue_token, TokenKind};
use shared::api::{ApiState, OperatorAuth};
use shared::aws::Clients;
use shared::config::Config;
use shared::delivery::worker::internal::InternalRegistry;
use shared::delivery::worker::webhook::WebhookAdapter;
use shared::delivery::worker::DeliveryWorker;
use shared::domain::change::Change;
use shared::domain::delivery_method::DeliveryMethod;
use shared::domain::retry::RetryPolicy;
use shared::domain::subscription::SubscriptionStatus;
use shared::domain::time::Timestamp;
use shared::ids::{AccountId, SubscriptionId};
use shared::store::delivery::DeliveryWork;
use shared::store::integration::Integration;
use shared::store::subscription::Subscription;
use shared::store::{keys, write};
use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;

/// The SNS topic the tests' provider-event settings accept messages from.
pub const TEST_SNS_TOPIC: &str = "arn:aws:sns:us-east-1:000000000000:rhythm-notification-events";

/// The provider-event settings of every test process (installed once, before any handler reads
/// them from the environment): the test SNS topic, a Slack signing secret, and a certificate
/// fetcher that serves the local test certificate.
pub fn provider_event_settings() -> &'static shared::notify::confirm::ProviderEventSettings {
    use shared::notify::{confirm, sns};
    let secret = shared::domain::signing::SigningSecret::from_bytes(&[9u8; 32])
        .expect("a valid secret")
        .expose_whsec();
    confirm::install(confirm::ProviderEventSettings::from_values(
        Some(TEST_SNS_TOPIC),
        Some(&format!("slack={secret}")),
        Arc::new(sns::local::test_http()),
    ));
    confirm::settings()
}

pub struct TestStack {
    pub sdk: SdkConfig,
    pub stack: Stack,
    pub config: Config,
    /// The handlers' clients; every request they make is counted by `meter`.
    pub clients: Clients,
    pub meter: RequestMeter,
    /// Faults injected between the handlers' clients and the emulator (none unless a test asks).
    pub faults: Faults,
    /// The SDK sleep the handlers' clients use instead of real time, if any.
    sdk_sleep: Option<aws_smithy_async::rt::sleep::SharedAsyncSleep>,
}

/// Handler clients on `sdk`: every request counted by `meter`, passing through `faults`, on an
/// HTTP client (and so a connection pool) of their own.
fn handler_clients(
    sdk: &SdkConfig,
    faults: &Faults,
    meter: &RequestMeter,
    sleep: Option<&aws_smithy_async::rt::sleep::SharedAsyncSleep>,
) -> Clients {
    // The client the SDK would pick by itself (the configuration names none).
    let inner = match sdk.http_client() {
        Some(client) => client,
        None => {
            use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
            aws_smithy_http_client::Builder::new()
                .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
                .build_https()
        }
    };
    let mut faulty = sdk.to_builder().http_client(faults.client(inner));
    if let Some(sleep) = sleep {
        faulty = faulty.sleep_impl(sleep.clone());
    }
    Clients::with_interceptor(&faulty.build(), meter.clone())
}

impl TestStack {
    /// Provisions the template for one test. Panics with instructions when the emulator is not
    /// running: an integration test never skips itself.
    pub async fn new() -> Self {
        Self::try_new()
            .await
            .unwrap_or_else(|e| panic!("cannot set up the local AWS stack: {e:#}"))
    }

    pub async fn try_new() -> Result<Self> {
        Self::try_new_with_sdk_sleep(None).await
    }

    /// As [`TestStack::try_new`], the handlers' SDK clients sleeping through `sleep` (e.g.
    /// [`crate::faults::CompressedSleep`]) instead of real time.
    pub async fn try_new_with_sdk_sleep(
        sleep: Option<aws_smithy_async::rt::sleep::SharedAsyncSleep>,
    ) -> Result<Self> {
        // The process-wide provider settings are the tests' own, whichever test runs first.
        provider_event_settings();
        // Handler logs go to the test's captured output (shown for failing tests).
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
            )
            .try_init();
        let sdk = crate::emulator::sdk_config().await?;
        let template = Template::load_project()?;
        let prefix = format!("t{}", ulid::Ulid::new().to_string().to_lowercase());
        // Tests reach receivers on loopback, which the SSRF guard refuses in AWS.
        let overrides = BTreeMap::from([("AllowPrivateTargets".to_string(), "true".to_string())]);
        let stack = provision(&template, &sdk, &prefix, &overrides).await?;
        let config = stack.config()?;
        let meter = RequestMeter::new();
        let faults = Faults::new();
        let clients = handler_clients(&sdk, &faults, &meter, sleep.as_ref());
        Ok(TestStack {
            sdk,
            stack,
            config,
            clients,
            meter,
            faults,
            sdk_sleep: sleep,
        })
    }

    /// Another set of handler clients like [`Self::clients`] (counted by the same meter, through
    /// the same faults) with a connection pool of their own: what one function's container holds
    /// (the pipeline's per-function CPU accounting runs each function on its own runtime).
    pub fn function_clients(&self) -> Clients {
        handler_clients(
            &self.sdk,
            &self.faults,
            &self.meter,
            self.sdk_sleep.as_ref(),
        )
    }

    pub fn stream(&self, table_logical_id: &str) -> StreamTap {
        let arn = self
            .stack
            .table(table_logical_id)
            .stream_arn
            .clone()
            .unwrap_or_else(|| panic!("{table_logical_id} has no stream in template.yaml"));
        StreamTap::new(&self.sdk, &arn)
    }

    /// The stream of `table_logical_id` as `function`'s event source mapping hands it over: with
    /// the `FilterCriteria` patterns template.yaml gives that function.
    pub fn mapped_stream(&self, table_logical_id: &str, function: &str) -> StreamTap {
        static TEMPLATE: std::sync::OnceLock<Template> = std::sync::OnceLock::new();
        let template = TEMPLATE.get_or_init(|| Template::load_project().expect("template.yaml"));
        let mut tap = self.stream(table_logical_id);
        tap.patterns = Some(
            template
                .stream_filter(function)
                .unwrap_or_else(|| panic!("{function} has no filtered stream event"))
                .to_vec(),
        );
        tap
    }

    pub fn queue(&self, queue_logical_id: &str) -> QueueTap {
        let q = self.stack.queue(queue_logical_id);
        QueueTap::new(&self.sdk, &q.url, &q.arn)
    }
}

/// A sample payload of the repository's `events/` (what `sam local invoke` would send).
pub fn sample(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../events")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Tests' shorthand for a typed id of fixture text: `id("s1")` (panics when it is not an id).
pub fn id<T: std::str::FromStr>(text: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    text.parse()
        .unwrap_or_else(|e| panic!("{text:?} is not a fixture id: {e:?}"))
}

/// The delivery queue's message for a change and a subscription (as the dispatcher publishes it).
pub fn work(change: &Change, subscription: &Subscription) -> DeliveryWork {
    DeliveryWork {
        account_id: change.account_id.clone(),
        change_id: change.change_id.clone(),
        subscription_id: subscription.subscription_id.clone(),
    }
}

/// Everything one integration test talks to, on its own [`TestStack`]: the delivery pipeline
/// (which it dereferences to: `w.pump()`, `w.clock`, `w.t`, …), the notification pipeline on the
/// same clock, the API on the same clock, a receiver on loopback, and fixture builders.
pub struct World {
    pipeline: Pipeline,
    pub notify: Notifications,
    /// The API as the `api` function serves it, accepting [`OPERATOR_TOKEN`].
    pub api: ApiClient,
    /// The default target of webhook integrations.
    pub receiver: Receiver,
}

impl Deref for World {
    type Target = Pipeline;
    fn deref(&self) -> &Pipeline {
        &self.pipeline
    }
}

impl World {
    /// Provisions a stack and wires the world on it. Panics with instructions when the emulator
    /// is not running: an integration test never skips itself.
    pub async fn new() -> Self {
        let pipeline = Pipeline::new().await;
        let notify = Notifications::new(&pipeline.t, &pipeline.clock).await;
        let receiver = Receiver::start().await;
        let api = ApiClient::new(api_state(&pipeline, pipeline.t.config.clone()));
        World {
            pipeline,
            notify,
            api,
            receiver,
        }
    }

    /// The API's state: this stack, the world's clock, [`OPERATOR_TOKEN`] for [`OPERATOR`], and
    /// loopback targets allowed (the receivers are on loopback).
    pub fn api_state(&self) -> ApiState {
        api_state(&self.pipeline, self.t.config.clone())
    }

    /// The API with the production SSRF policy: no private targets, HTTPS only.
    pub fn production_api(&self) -> ApiClient {
        let mut config = self.t.config.clone();
        config.allow_private_targets = false;
        ApiClient::new(api_state(&self.pipeline, config))
    }

    /// The API as it runs in AWS behind the HTTP API's JWT authorizer: operators are the `sub`
    /// of the request context's JWT, which must carry `scope` (see [`ApiClient::gateway_event`]).
    pub fn gateway_api(&self, scope: &str) -> ApiClient {
        let mut state = self.api_state();
        state.operator_auth = OperatorAuth::GatewayJwt {
            scope: scope.into(),
        };
        ApiClient::new(state)
    }

    /// The DynamoDB requests the stack's meter counted since its last reset, per operation.
    pub fn dynamo_requests(&self) -> Vec<(String, u64)> {
        self.t
            .meter
            .snapshot()
            .into_iter()
            .filter(|((service, _), _)| service == "DynamoDB")
            .map(|((_, operation), n)| (operation, n))
            .collect()
    }

    /// Takes `account_id` off the `ACCOUNTS` listing: the account as one created before the
    /// listing existed was stored.
    pub async fn unlist_account(&self, account_id: &AccountId) {
        use shared::store::attrs::listing;
        let (pk, sk) = shared::store::account::key(account_id);
        let unlist = shared::store::update::Edit::new()
            .remove(listing::KEY)
            .remove(listing::SORT)
            .of_existing(&self.t.config.delivery_table, &pk, &sk)
            .expect("an edit of the account");
        let written = shared::store::write::send(&self.t.clients.dynamo, unlist)
            .await
            .expect("the account's edit is sent");
        assert!(written.applied(), "{account_id} exists");
    }

    /// The plain fixture writer (as the demo and the benchmarks use it), at the world's now.
    pub fn fixtures(&self) -> Fixtures<'_> {
        Fixtures {
            clients: &self.t.clients,
            table: &self.t.config.delivery_table,
            signing_key_id: &self.t.config.signing_key_id,
            now: self.now(),
        }
    }

    /// An account (see [`AccountBuilder`] for its defaults).
    pub fn account(&self) -> AccountBuilder<'_> {
        AccountBuilder {
            world: self,
            id: None,
            name: "Test account".into(),
            admins: vec!["admin@example.com".into()],
        }
    }

    /// An integration of `account_id` (see [`IntegrationBuilder`]).
    pub fn integration(&self, account_id: &AccountId) -> IntegrationBuilder<'_> {
        IntegrationBuilder {
            world: self,
            account_id: account_id.to_owned(),
            id: None,
            name: None,
            method: DeliveryMethod::Webhook,
            webhook_url: Some(self.receiver.url(builders::HOOK_PATH)),
            handler: None,
        }
    }

    /// A subscription of `integration` (see [`SubscriptionBuilder`]).
    pub fn subscribe(&self, integration: &Integration) -> SubscriptionBuilder<'_> {
        SubscriptionBuilder {
            world: self,
            account_id: integration.account_id.clone(),
            integration_id: integration.integration_id.clone(),
            id: None,
            record_types: vec!["catalog_item".into()],
            filter: None,
            fields: vec!["sku".into(), "price".into()],
            policy: RetryPolicy::FixedSchedule,
            status: SubscriptionStatus::Active,
        }
    }

    /// A change of `account_id` the owning application writes (see [`ChangeBuilder`]).
    pub fn change(&self, account_id: &AccountId) -> ChangeBuilder<'_> {
        ChangeBuilder {
            world: self,
            account_id: account_id.to_owned(),
            at: None,
            price: 4.5,
        }
    }

    /// Writes an integration as it is now (e.g. with its consent withdrawn).
    pub async fn save_integration(&self, integration: &Integration) {
        self.fixtures()
            .save_integration(integration)
            .await
            .expect("write the integration");
    }

    /// Writes a subscription as it is now (e.g. with a wider filter).
    pub async fn save_subscription(&self, subscription: &Subscription) {
        self.fixtures()
            .save_subscription(subscription)
            .await
            .expect("write the subscription");
    }

    /// A delivery worker with other adapters (a short timeout, a failing built-in handler), on
    /// the same tables and clock.
    pub fn worker_with(
        &self,
        webhook: WebhookAdapter,
        internal: InternalRegistry,
    ) -> DeliveryWorker {
        DeliveryWorker::with_adapters(
            self.t.clients.clone(),
            self.t.config.clone(),
            Arc::new(self.clock.clone()),
            webhook,
            internal,
        )
    }

    /// An account token for `account_id`, stored as the API stores tokens.
    pub async fn account_token(&self, account_id: &AccountId) -> String {
        let (plaintext, record) = issue_token(TokenKind::Acct, account_id, None, self.now());
        for item in [record.item().unwrap(), record.reference_item().unwrap()] {
            let put = write::put(&self.t.config.delivery_table, item).unwrap();
            write::send(&self.t.clients.dynamo, put)
                .await
                .expect("write the token");
        }
        plaintext.expose().to_owned()
    }

    /// Writes a worker's lease on a delivery as its claim writes it, and nothing else: a worker
    /// that claimed and died (or holds the delivery right now).
    pub async fn lease(
        &self,
        change: &Change,
        subscription_id: &SubscriptionId,
        until: Timestamp,
        token: &str,
    ) {
        self.update(
            &keys::event_pk(&change.account_id, &change.change_id),
            &keys::delivery_sk(subscription_id),
            "SET lease_until = :l, lease_token = :t",
            &[
                (":l", AttributeValue::N(until.millis().to_string())),
                (":t", AttributeValue::S(token.into())),
            ],
        )
        .await;
    }

    /// A raw update of an item of the delivery table, standing in for a write of another
    /// component (a worker that died after its claim, a paused subscription, …). `#s` names
    /// `status` and `#p` names `position`.
    pub async fn update(
        &self,
        pk: &str,
        sk: &str,
        expression: &str,
        values: &[(&str, AttributeValue)],
    ) {
        let mut update = aws_sdk_dynamodb::types::Update::builder()
            .table_name(&self.t.config.delivery_table)
            .key("pk", AttributeValue::S(pk.into()))
            .key("sk", AttributeValue::S(sk.into()))
            .update_expression(expression);
        for (placeholder, value) in values {
            update = update.expression_attribute_values(*placeholder, value.clone());
        }
        for (placeholder, name) in [("#s", "status"), ("#p", "position")] {
            if expression.contains(placeholder) {
                update = update.expression_attribute_names(placeholder, name);
            }
        }
        let update = write::Write::Update(update.build().expect("a complete update"));
        write::send(&self.t.clients.dynamo, update)
            .await
            .expect("update the item");
    }
}

fn api_state(pipeline: &Pipeline, config: Config) -> ApiState {
    ApiState::new(
        pipeline.t.clients.clone(),
        config,
        Arc::new(pipeline.clock.clone()),
        OperatorAuth::static_token(OPERATOR_TOKEN, OPERATOR),
    )
}
