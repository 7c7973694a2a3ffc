//! The functions' SDK settings (`shared::aws::SdkSettings::SHIPPED`) against a service that takes
//! a request and then goes quiet: an attempt is abandoned after its timeout and retried on a fresh
//! connection, and the call fails well within a function's timeout instead of taking the whole
//! invocation with it. The SDK's own defaults (stalled-stream protection, no attempt timeout) are
//! shown still waiting where the shipped settings have given up: the reason they were changed.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::AttributeValue;
use local::template::Template;
use shared::aws::SdkSettings;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where the quiet service stops.
#[derive(Clone, Copy)]
enum Quiet {
    /// It reads the request and never answers (no status line, no headers).
    BeforeTheAnswer,
    /// It answers 200 with its headers and the first bytes of a body it never finishes.
    InTheAnswersBody,
}

/// A service on loopback that accepts every connection, reads the request and goes quiet as
/// `quiet` says, holding the connection open. Answers its URL and how many connections it took.
async fn quiet_service(quiet: Quiet) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut request = vec![0u8; 64 * 1024];
                let _ = socket.read(&mut request).await;
                if let Quiet::InTheAnswersBody = quiet {
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: 400\r\n\r\n{\"Item\":{";
                    let _ = socket.write_all(head.as_bytes()).await;
                }
                // Held open, silent, until the client gives up on it.
                let _ = socket.read(&mut request).await;
                tokio::time::sleep(Duration::from_secs(120)).await;
            });
        }
    });
    (url, connections)
}

/// A DynamoDB client with `settings`, pointed at `url`.
async fn dynamo_at(settings: SdkSettings, url: &str) -> aws_sdk_dynamodb::Client {
    let sdk = shared::aws::sdk_config_with(settings).await;
    aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&sdk)
            .endpoint_url(url)
            .build(),
    )
}

/// The functions' timeout, as template.yaml's `Globals` set it.
fn function_timeout() -> Duration {
    let text = std::fs::read_to_string(Template::project_path()).expect("template.yaml");
    let template: serde_yaml::Value = serde_yaml::from_str(&text).expect("template.yaml is YAML");
    let seconds = template["Globals"]["Function"]["Timeout"]
        .as_u64()
        .expect("a global function timeout");
    Duration::from_secs(seconds)
}

async fn a_call_to_a_quiet_service_is_tried_three_times_and_fails_within_the_functions_timeout(
    quiet: Quiet,
) {
    let attempt = SdkSettings::SHIPPED
        .attempt_timeout
        .expect("the functions time each attempt");
    let (url, connections) = quiet_service(quiet).await;
    let dynamo = dynamo_at(SdkSettings::SHIPPED, &url).await;
    let started = Instant::now();
    let answer = dynamo
        .get_item()
        .table_name("deliveries")
        .key("pk", AttributeValue::S("EVT#x".into()))
        .key("sk", AttributeValue::S("DLV#y".into()))
        .send()
        .await;
    let took = started.elapsed();
    assert!(
        matches!(answer, Err(SdkError::TimeoutError(_))),
        "the call ends in a timeout: {answer:?}"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        3,
        "each of the retry policy's three attempts went out on a connection of its own"
    );
    assert!(
        took >= attempt * 3,
        "each attempt waited its whole timeout: {took:?}"
    );
    assert!(
        took < function_timeout(),
        "the call gave up in {took:?}, inside the functions' {:?}",
        function_timeout()
    );
}

#[tokio::test]
async fn a_service_that_goes_quiet_before_its_answer_or_halfway_through_it_is_tried_three_times_and_the_call_fails_within_the_functions_timeout(
) {
    // Both at once: each waits out three attempt timeouts.
    tokio::join!(
        a_call_to_a_quiet_service_is_tried_three_times_and_fails_within_the_functions_timeout(
            Quiet::BeforeTheAnswer,
        ),
        a_call_to_a_quiet_service_is_tried_three_times_and_fails_within_the_functions_timeout(
            Quiet::InTheAnswersBody,
        ),
    );
}

#[tokio::test]
async fn under_the_sdks_own_defaults_a_service_that_never_answers_holds_the_call_past_the_shipped_settings_whole_retry(
) {
    let (url, connections) = quiet_service(Quiet::BeforeTheAnswer).await;
    let dynamo = dynamo_at(SdkSettings::SDK_DEFAULTS, &url).await;
    let attempt = SdkSettings::SHIPPED
        .attempt_timeout
        .expect("an attempt timeout");
    let call = dynamo
        .get_item()
        .table_name("deliveries")
        .key("pk", AttributeValue::S("EVT#x".into()))
        .key("sk", AttributeValue::S("DLV#y".into()))
        .send();
    // Longer than the shipped settings take to give up (three attempts), and still waiting: the
    // SDK's stalled-stream protection does not watch for an answer that never starts.
    let waited = tokio::time::timeout(attempt * 3 + Duration::from_secs(2), call).await;
    assert!(waited.is_err(), "the call was still waiting: {waited:?}");
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "on its first attempt"
    );
}
