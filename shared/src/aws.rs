//! AWS SDK clients. The endpoint comes from the standard `AWS_ENDPOINT_URL` variable, so nothing
//! here (or anywhere in the functions) knows whether it talks to AWS or to the local emulator.

use aws_config::{BehaviorVersion, SdkConfig};

pub async fn sdk_config() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest()).load().await
}

/// The clients a function uses; cheap to clone (each wraps an `Arc`).
#[derive(Clone, Debug)]
pub struct Clients {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub ses: aws_sdk_sesv2::Client,
    /// Signing-secret envelopes: the API generates data keys, the worker decrypts them.
    pub kms: aws_sdk_kms::Client,
}

impl Clients {
    pub fn new(sdk: &SdkConfig) -> Self {
        Clients {
            dynamo: aws_sdk_dynamodb::Client::new(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
            ses: aws_sdk_sesv2::Client::new(sdk),
            kms: aws_sdk_kms::Client::new(sdk),
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
