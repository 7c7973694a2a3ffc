//! `bench --sdk-cost N`: the CPU of the AWS SDK's requests alone, without the pipeline around
//! them. A thread of its own with a current-thread runtime (as a Lambda container runs an
//! invocation) makes N rounds of the three request shapes of the delivery path, one after the
//! other, to a table of its own on the emulator: a conditional `PutItem` (an ingest put), a
//! conditional `UpdateItem` answering `ALL_NEW` (the claim, the outcome) and a `GetItem` (the dead
//! count's read), with the functions' own client configuration (`shared::aws`).
//!
//! The thread's CPU clock per request is printed, and it is as noisy as the pipeline's. What is
//! not noisy is the number of instructions: run it under `valgrind --tool=cachegrind
//! --cache-sim=no` for two values of N, and (Ir(N₂) − Ir(N₁)) / (3 × (N₂ − N₁)) is the
//! instructions per request, set-up excluded, the same from one run to the next. That compares
//! builds (optimisation levels, SDK settings) where a wall-clock or CPU-clock figure cannot.
//! `--sdk NAME` picks the SDK settings of one binary's run ([`settings_named`]).

use anyhow::{Context, Result};
use aws_sdk_dynamodb::types::AttributeValue::{N, S};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ReturnValue, ScalarAttributeType,
};
use local::pipeline::thread_cpu_time as cpu_time;
use shared::aws::SdkSettings;
use std::time::Duration;

const TABLE: &str = "bench-sdk-cost";

/// The SDK settings `bench --sdk NAME` runs with (every client of the process, the pipeline's
/// too): the SDK's defaults, each setting changed alone from them, and the shipped ones.
pub fn settings_named(name: &str) -> Option<SdkSettings> {
    let d = SdkSettings::SDK_DEFAULTS;
    let timeout = Some(Duration::from_secs(5));
    Some(match name {
        "defaults" => d,
        "shipped" => SdkSettings::SHIPPED,
        "no-stalled-stream-protection" => SdkSettings {
            stalled_stream_protection: false,
            ..d
        },
        "attempt-timeout" => SdkSettings {
            attempt_timeout: timeout,
            ..d
        },
        "attempt-timeout-instead-of-stalled-stream-protection" => SdkSettings {
            stalled_stream_protection: false,
            attempt_timeout: timeout,
            ..d
        },
        "no-clock-skew-correction" => SdkSettings {
            clock_skew_correction: false,
            ..d
        },
        "no-account-id-endpoints" => SdkSettings {
            account_id_endpoints: false,
            ..d
        },
        "no-retries" => SdkSettings {
            retries: false,
            ..d
        },
        "no-identity-cache" => SdkSettings {
            identity_cache: false,
            ..d
        },
        _ => return None,
    })
}

/// `bench --endpoint-rules N`: N resolutions of a DynamoDB endpoint by the SDK's rules, as in AWS
/// (a region, no endpoint override, a table name) and as on the emulator (its URL as the
/// override): under cachegrind, what resolving the endpoint costs a request, which the emulator's
/// override hides.
pub async fn endpoint_rules(rounds: usize, aws: bool) -> Result<()> {
    use aws_sdk_dynamodb::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
    let resolver = DefaultResolver::new();
    let mut params = Params::builder()
        .region("us-east-1")
        .use_fips(false)
        .use_dual_stack(false)
        .account_id_endpoint_mode("preferred")
        .resource_arn("rhythm-prod-delivery");
    if !aws {
        params = params.endpoint("http://127.0.0.1:4566");
    }
    let params = params.build()?;
    let mut url = String::new();
    for _ in 0..rounds {
        let endpoint = resolver
            .resolve_endpoint(&params)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        url.clear();
        url.push_str(endpoint.url());
    }
    println!("endpoint rules: {rounds} resolutions of {url}");
    Ok(())
}

pub fn run(rounds: usize) -> Result<()> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(rounds_of_requests(rounds))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the SDK-cost thread panicked"))?
}

async fn rounds_of_requests(rounds: usize) -> Result<()> {
    let dynamo = shared::aws::Clients::new(&local::emulator::sdk_config().await?).dynamo;
    let _ = dynamo.delete_table().table_name(TABLE).send().await;
    dynamo
        .create_table()
        .table_name(TABLE)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute("pk")?)
        .attribute_definitions(attribute("sk")?)
        .key_schema(key("pk", KeyType::Hash)?)
        .key_schema(key("sk", KeyType::Range)?)
        .send()
        .await
        .context("creating the SDK-cost table")?;
    let payload = "x".repeat(600);
    let started = cpu_time();
    for i in 0..rounds {
        let pk = shared::store::keys::event_pk(
            &"acct".parse().unwrap(),
            // A change id is a ULID: one of the same length every round.
            &ulid::Ulid::from_parts(1, i as u128)
                .to_string()
                .parse()
                .unwrap(),
        );
        dynamo
            .put_item()
            .table_name(TABLE)
            .item("pk", S(pk.clone()))
            .item("sk", S("DLV#sub".into()))
            .item("status", S("pending".into()))
            .item("payload", S(payload.clone()))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await?;
        dynamo
            .update_item()
            .table_name(TABLE)
            .key("pk", S(pk.clone()))
            .key("sk", S("DLV#sub".into()))
            .update_expression("SET lease_until = :lease, lease_token = :token")
            .condition_expression(
                "#status = :pending AND (attribute_not_exists(lease_until) OR lease_until <= :now)",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":pending", S("pending".into()))
            .expression_attribute_values(":now", N(i.to_string()))
            .expression_attribute_values(":lease", N((i + 60_000).to_string()))
            .expression_attribute_values(":token", S(format!("token-{i}")))
            .return_values(ReturnValue::AllNew)
            .send()
            .await?;
        dynamo
            .get_item()
            .table_name(TABLE)
            .key("pk", S(pk))
            .key("sk", S("DLV#sub".into()))
            .projection_expression("lease_token")
            .send()
            .await?;
    }
    let cpu = cpu_time().saturating_sub(started);
    let requests = 3 * rounds.max(1);
    println!(
        "sdk cost: {rounds} rounds, {requests} requests, {:.1} µs of thread CPU per request ({:?})",
        cpu.as_secs_f64() * 1e6 / requests as f64,
        local::emulator::sdk_settings()
    );
    dynamo.delete_table().table_name(TABLE).send().await?;
    Ok(())
}

fn attribute(name: &str) -> Result<AttributeDefinition> {
    Ok(AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()?)
}

fn key(name: &str, kind: KeyType) -> Result<KeySchemaElement> {
    Ok(KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()?)
}
