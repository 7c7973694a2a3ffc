//! One provisioned stack per test: its own tables and queues under a unique prefix, so tests run in
//! parallel against one emulator without seeing each other's data.

use crate::faults::Faults;
use crate::metering::RequestMeter;
use crate::provision::{provision, Stack};
use crate::queues::QueueTap;
use crate::streams::StreamTap;
use crate::template::Template;
use anyhow::Result;
use aws_config::SdkConfig;
use shared::aws::Clients;
use shared::config::Config;
use std::collections::BTreeMap;

pub struct TestStack {
    pub sdk: SdkConfig,
    pub stack: Stack,
    pub config: Config,
    /// The handlers' clients; every request they make is counted by `meter`.
    pub clients: Clients,
    pub meter: RequestMeter,
    /// Faults injected between the handlers' clients and the emulator (none unless a test asks).
    pub faults: Faults,
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
        let faulty = sdk.to_builder().http_client(faults.client(inner)).build();
        let clients = Clients::with_interceptor(&faulty, meter.clone());
        Ok(TestStack {
            sdk,
            stack,
            config,
            clients,
            meter,
            faults,
        })
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

    pub fn queue(&self, queue_logical_id: &str) -> QueueTap {
        let q = self.stack.queue(queue_logical_id);
        QueueTap::new(&self.sdk, &q.url, &q.arn)
    }
}
