//! AWS SDK clients. The endpoint comes from the standard `AWS_ENDPOINT_URL` variable, so nothing
//! here (or anywhere in the functions) knows whether it talks to AWS or to the local emulator.

use aws_config::{BehaviorVersion, SdkConfig};
use std::time::Duration;

/// The SDK's settings for this workload (small DynamoDB and SQS requests and answers, a few per
/// delivery, from Lambda), each measured in instructions per request (docs/history.md, "The SDK's
/// configuration, setting by setting") and kept only where it helps and keeps what the fault matrix checks: the
/// standard retry policy's three tries of throttles and 5xx answers, and a stalled request
/// ending in a retried error instead of the invocation's timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SdkSettings {
    /// Stalled-stream protection: a body that moves no byte for its grace period (5 s) fails.
    pub stalled_stream_protection: bool,
    /// A timeout per attempt (retried as a transient error), beside the connect timeout.
    pub attempt_timeout: Option<Duration>,
    /// Signing with the clock corrected by the skew the answers' `Date` headers show.
    pub clock_skew_correction: bool,
    /// DynamoDB's account-ID-based endpoints (resolved from the identity's account, if any).
    pub account_id_endpoints: bool,
    /// The standard retry policy (three tries); off only to measure what it costs.
    pub retries: bool,
    /// The lazy identity cache; off only to measure what it saves.
    pub identity_cache: bool,
}

impl SdkSettings {
    /// As `BehaviorVersion::latest()` sets them.
    pub const SDK_DEFAULTS: SdkSettings = SdkSettings {
        stalled_stream_protection: true,
        attempt_timeout: None,
        clock_skew_correction: true,
        account_id_endpoints: true,
        retries: true,
        identity_cache: true,
    };

    /// What the functions run with (BENCHMARKS.md, "The SDK's configuration, setting by
    /// setting"): the defaults but two.
    ///
    /// - An attempt timeout instead of stalled-stream protection. The SDK's protection watches a
    ///   body's bytes; it stops watching the request once its body is handed to the connection
    ///   and starts on the answer's body only once its headers came, so it cannot see a service
    ///   that takes a request and never answers: this timeout does, and the attempt is retried
    ///   as a transient error on a fresh connection. Three attempts of 5 s and their backoff fit
    ///   in the functions' 20 s. It also costs each request 1.7 % fewer instructions.
    /// - No clock-skew correction: Lambda's clock is kept by AWS, and reading every answer's
    ///   `Date` header for a skew it will not find costs 1.1 % of a request.
    pub const SHIPPED: SdkSettings = SdkSettings {
        stalled_stream_protection: false,
        attempt_timeout: Some(Duration::from_secs(5)),
        clock_skew_correction: false,
        ..SdkSettings::SDK_DEFAULTS
    };
}

/// The functions' SDK configuration ([`SdkSettings::SHIPPED`]).
pub async fn sdk_config() -> SdkConfig {
    sdk_config_with(SdkSettings::SHIPPED).await
}

/// The SDK configuration with `settings` (the bench measures each).
pub async fn sdk_config_with(settings: SdkSettings) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if !settings.stalled_stream_protection {
        use aws_config::stalled_stream_protection::StalledStreamProtectionConfig;
        loader = loader.stalled_stream_protection(StalledStreamProtectionConfig::disabled());
    }
    if let Some(timeout) = settings.attempt_timeout {
        // Merged with the defaults: the connect timeout stays.
        let timeouts = aws_config::timeout::TimeoutConfig::builder()
            .operation_attempt_timeout(timeout)
            .build();
        loader = loader.timeout_config(timeouts);
    }
    if !settings.clock_skew_correction {
        loader = loader.disable_clock_skew_correction(true);
    }
    if !settings.account_id_endpoints {
        use aws_types::endpoint_config::AccountIdEndpointMode;
        loader = loader.account_id_endpoint_mode(AccountIdEndpointMode::Disabled);
    }
    if !settings.retries {
        loader = loader.retry_config(aws_config::retry::RetryConfig::disabled());
    }
    if !settings.identity_cache {
        loader = loader.identity_cache(aws_config::identity::IdentityCache::no_cache());
    }
    loader.load().await
}

/// The clients a function uses; cheap to clone (each wraps an `Arc`).
#[derive(Clone, Debug)]
pub struct Clients {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub ses: aws_sdk_sesv2::Client,
    /// Signing-secret envelopes: the API generates data keys, the worker decrypts them.
    pub kms: aws_sdk_kms::Client,
    /// The API's token-check key (read once per container).
    pub secrets: aws_sdk_secretsmanager::Client,
}

impl Clients {
    pub fn new(sdk: &SdkConfig) -> Self {
        Clients {
            dynamo: aws_sdk_dynamodb::Client::new(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
            ses: aws_sdk_sesv2::Client::new(sdk),
            kms: aws_sdk_kms::Client::new(sdk),
            secrets: aws_sdk_secretsmanager::Client::new(sdk),
        }
    }

    pub async fn from_env() -> Self {
        Self::new(&sdk_config().await)
    }
}

impl Clients {
    /// Clients with an interceptor on every request (the harness counts requests with one).
    pub fn with_interceptor<I>(sdk: &SdkConfig, interceptor: I) -> Self
    where
        I: aws_smithy_runtime_api::client::interceptors::Intercept + Clone + 'static,
    {
        Clients {
            dynamo: aws_sdk_dynamodb::Client::from_conf(
                aws_sdk_dynamodb::config::Builder::from(sdk)
                    .interceptor(interceptor.clone())
                    .build(),
            ),
            sqs: aws_sdk_sqs::Client::from_conf(
                aws_sdk_sqs::config::Builder::from(sdk)
                    .interceptor(interceptor.clone())
                    .build(),
            ),
            ses: aws_sdk_sesv2::Client::from_conf(
                aws_sdk_sesv2::config::Builder::from(sdk)
                    .interceptor(interceptor.clone())
                    .build(),
            ),
            kms: aws_sdk_kms::Client::from_conf(
                aws_sdk_kms::config::Builder::from(sdk)
                    .interceptor(interceptor.clone())
                    .build(),
            ),
            secrets: aws_sdk_secretsmanager::Client::from_conf(
                aws_sdk_secretsmanager::config::Builder::from(sdk)
                    .interceptor(interceptor)
                    .build(),
            ),
        }
    }
}

/// The `SecretString` of the Secrets Manager secret `arn` (`what` names it in the error: "the
/// console key", "the provider secrets"), by the functions that need one (once per container, or
/// on an interval: the console key).
pub async fn secret_string(
    secrets_manager: &aws_sdk_secretsmanager::Client,
    arn: &str,
    what: &str,
) -> Result<String, String> {
    let value = secrets_manager
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| {
            format!(
                "reading {what} {arn}: {}",
                aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
            )
        })?;
    value
        .secret_string()
        .map(str::to_owned)
        .ok_or_else(|| format!("{what} {arn} has no SecretString"))
}
