//! Connection to the local AWS emulator (moto server) started by `scripts/emulator.sh`.

use anyhow::{bail, Result};
use aws_config::SdkConfig;
use std::time::Duration;

const HOW_TO_START: &str = "start it with `make emulator-start && source .local/emulator.env` \
(or run everything with `make test`)";

/// The emulator endpoint from `AWS_ENDPOINT_URL`, checked to answer on loopback. Integration tests
/// call this first: a missing emulator is a failure with instructions, never a silent skip.
pub async fn endpoint() -> Result<String> {
    let Ok(url) = std::env::var("AWS_ENDPOINT_URL") else {
        bail!("AWS_ENDPOINT_URL is not set, so there is no emulator to talk to: {HOW_TO_START}");
    };
    let parsed = url::Url::parse(&url)?;
    let host = parsed.host_str().unwrap_or_default();
    if !matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "::1") {
        bail!(
            "AWS_ENDPOINT_URL={url} is not a loopback address; tests only talk to a local emulator"
        );
    }
    let port = parsed.port_or_known_default().unwrap_or(80);
    let addr = format!("{host}:{port}");
    match tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect(&addr),
    )
    .await
    {
        Ok(Ok(_)) => Ok(url),
        _ => bail!("the emulator at {url} does not answer: {HOW_TO_START}"),
    }
}

/// How long an attempt may take on the emulator, where the settings time attempts at all.
/// The emulator answers one request at a time, so on a loaded test machine a request can wait
/// behind a queue of others for longer than the shipped 5 s, which DynamoDB never makes a
/// request wait; timed out, an applied write would be retried and refused by itself, a fault the
/// tests inject on purpose where they mean to. Everything else about the settings is as shipped
/// (a timeout's length costs a request no instruction more or less), and the shipped timeout is
/// held to its 5 s against services that go quiet (`sdk_settings` in the integration tests).
pub const EMULATOR_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);

/// SDK configuration aimed at the emulator, with its static local credentials.
pub async fn sdk_config() -> Result<SdkConfig> {
    endpoint().await?;
    let mut settings = sdk_settings();
    if settings.attempt_timeout.is_some() {
        settings.attempt_timeout = Some(EMULATOR_ATTEMPT_TIMEOUT);
    }
    Ok(shared::aws::sdk_config_with(settings).await)
}

static SDK_SETTINGS: std::sync::OnceLock<shared::aws::SdkSettings> = std::sync::OnceLock::new();

/// The SDK settings of every client this process makes on the emulator: the functions' own
/// ([`shared::aws::SdkSettings::SHIPPED`]) unless [`use_sdk_settings`] chose others.
pub fn sdk_settings() -> shared::aws::SdkSettings {
    SDK_SETTINGS
        .get()
        .copied()
        .unwrap_or(shared::aws::SdkSettings::SHIPPED)
}

/// Makes every client of this process use `settings` (the bench, to measure them); once, before
/// the first client. Returns whether they are the ones in use.
pub fn use_sdk_settings(settings: shared::aws::SdkSettings) -> bool {
    SDK_SETTINGS.get_or_init(|| settings) == &settings
}
