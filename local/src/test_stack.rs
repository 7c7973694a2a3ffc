//! One provisioned stack per test: its own tables, queues and keys under a unique prefix, so tests
//! run in parallel against one emulator without seeing each other's data, with the handlers'
//! clients on it (counted, and passing through injectable faults).

use crate::faults::{CompressedSleep, Faults};
use crate::metering::RequestMeter;
use crate::provision::{provision, Stack};
use crate::queues::QueueTap;
use crate::streams::StreamTap;
use crate::template::Template;
use anyhow::{Context, Result};
use aws_config::SdkConfig;
use shared::aws::Clients;
use shared::config::Config;
use std::collections::BTreeMap;
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
    sdk_sleep: Option<CompressedSleep>,
}

/// The secret `{prefix}/token-check-key` on the emulator, with a value as the template's
/// `TokenCheckKey` generates one (64 letters and digits): its ARN.
pub async fn create_token_check_key(sdk: &SdkConfig, prefix: &str) -> Result<String> {
    use rand::distributions::{Alphanumeric, DistString};
    let name = format!("{prefix}/token-check-key");
    let key = Alphanumeric.sample_string(&mut rand::thread_rng(), 64);
    aws_sdk_secretsmanager::Client::new(sdk)
        .create_secret()
        .name(&name)
        .secret_string(key)
        .send()
        .await
        .with_context(|| format!("creating the secret {name}"))?
        .arn
        .ok_or_else(|| anyhow::anyhow!("no ARN for the secret {name}"))
}

/// Handler clients on `sdk`: every request counted by `meter`, passing through `faults`, on an
/// HTTP client (and so a connection pool) of their own.
fn handler_clients(
    sdk: &SdkConfig,
    faults: &Faults,
    meter: &RequestMeter,
    sleep: Option<CompressedSleep>,
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
        faulty = faulty.sleep_impl(aws_smithy_async::rt::sleep::SharedAsyncSleep::new(sleep));
        // The SDK times an attempt with the same sleep, so a compressed sleep would shorten the
        // attempt timeout too: it is lengthened by the same factor, and an attempt still times
        // out after the configured wall-clock time.
        if let Some(timeouts) = sdk.timeout_config() {
            if let Some(attempt) = timeouts.operation_attempt_timeout() {
                let longer = timeouts
                    .to_builder()
                    .operation_attempt_timeout(attempt * sleep.0.max(1))
                    .build();
                faulty = faulty.timeout_config(longer);
            }
        }
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

    /// As [`TestStack::try_new`], the handlers' SDK clients sleeping through `sleep` (their retry
    /// backoff compressed) instead of real time.
    pub async fn try_new_with_sdk_sleep(sleep: Option<CompressedSleep>) -> Result<Self> {
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
        let mut config = stack.config()?;
        // The api function's token-check key, generated in the emulator's Secrets Manager as the
        // template has Secrets Manager generate it; the API reads it by its ARN.
        config.token_check_key_arn = Some(create_token_check_key(&sdk, &prefix).await?);
        // The catalog every local stack starts with, written outside the meter and the faults
        // (it is setup, not what a test measures).
        crate::fixtures::seed_catalog(
            &Clients::new(&sdk),
            &config.delivery_table,
            shared::clock::Clock::now(&shared::clock::SystemClock),
        )
        .await?;
        let meter = RequestMeter::new();
        let faults = Faults::new();
        let clients = handler_clients(&sdk, &faults, &meter, sleep);
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
        handler_clients(&self.sdk, &self.faults, &self.meter, self.sdk_sleep)
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
