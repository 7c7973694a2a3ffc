//! Faults the emulator cannot make, injected at the SDK boundary: an HTTP client between the AWS
//! SDK and the emulator that answers chosen requests itself, as DynamoDB, SQS or SES would under
//! contention or load — a cancelled transaction (`TransactionConflict`), a throttle, an internal
//! error — or forwards them and then loses the response, or delays them.
//!
//! The SDK's own retry policy stays as configured for production: a throttle or a 500 answered
//! here is retried by the SDK exactly as one from AWS would be, so tests see what AWS clients
//! see. Harness only: the functions never link this module.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a matching request meets.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// DynamoDB cancels the transaction: another transaction holds one of its items. Nothing is
    /// written.
    TransactionConflict,
    /// DynamoDB (`ProvisionedThroughputExceededException`) or SQS/SES (`ThrottlingException`)
    /// refuses the load. Nothing is written; the SDK retries it.
    Throttle,
    /// The service fails with a 500. Nothing is written; the SDK retries it.
    InternalError,
    /// The request reaches the service and is applied, but its response never arrives: the
    /// caller sees a timeout (and the SDK may send it again).
    LostResponse,
    /// The request is held this long before it is sent.
    Latency(Duration),
}

/// Which requests a rule applies to.
#[derive(Debug, Clone, Default)]
pub struct Matcher {
    /// The operation, e.g. `TransactWriteItems`, `UpdateItem`, `SendMessageBatch`.
    pub operation: String,
    /// A text the request body must contain (a table or queue name, an attribute).
    pub body_contains: Option<String>,
}

#[derive(Debug)]
struct Rule {
    matcher: Matcher,
    fault: Fault,
    /// Matching requests still to meet the fault.
    remaining: u32,
}

/// The faults still to be injected, and what was injected. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Faults {
    rules: Arc<Mutex<Vec<Rule>>>,
    injected: Arc<Mutex<Vec<(String, Fault)>>>,
}

impl Faults {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next `times` requests of `operation` meet `fault`.
    pub fn inject(&self, operation: &str, fault: Fault, times: u32) {
        self.inject_matching(
            Matcher {
                operation: operation.into(),
                body_contains: None,
            },
            fault,
            times,
        );
    }

    /// The next `times` requests that `matcher` matches meet `fault`.
    pub fn inject_matching(&self, matcher: Matcher, fault: Fault, times: u32) {
        self.rules.lock().unwrap().push(Rule {
            matcher,
            fault,
            remaining: times,
        });
    }

    /// The faults injected so far: (operation, fault), in order.
    pub fn injected(&self) -> Vec<(String, Fault)> {
        self.injected.lock().unwrap().clone()
    }

    /// Drops every rule not yet used up.
    pub fn clear(&self) {
        self.rules.lock().unwrap().clear();
    }

    /// The fault the request meets, if any (and uses one of its rule's count).
    fn take(&self, operation: &str, body: &[u8]) -> Option<Fault> {
        let mut rules = self.rules.lock().unwrap();
        let rule = rules.iter_mut().find(|r| {
            r.remaining > 0
                && r.matcher.operation == operation
                && r.matcher.body_contains.as_ref().is_none_or(|text| {
                    body.windows(text.len().max(1))
                        .any(|w| w == text.as_bytes())
                })
        })?;
        rule.remaining -= 1;
        let fault = rule.fault.clone();
        rules.retain(|r| r.remaining > 0);
        self.injected
            .lock()
            .unwrap()
            .push((operation.to_string(), fault.clone()));
        Some(fault)
    }

    /// An HTTP client that injects these faults in front of `inner` (the SDK's own client).
    pub fn client(&self, inner: SharedHttpClient) -> SharedHttpClient {
        SharedHttpClient::new(FaultyClient {
            inner,
            faults: self.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultyClient {
    inner: SharedHttpClient,
    faults: Faults,
}

impl HttpClient for FaultyClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(FaultyConnector {
            inner: self.inner.http_connector(settings, components),
            faults: self.faults.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultyConnector {
    inner: SharedHttpConnector,
    faults: Faults,
}

/// The operation a request names: DynamoDB and SQS (JSON protocols) in `X-Amz-Target`
/// (`DynamoDB_20120810.UpdateItem`, `AmazonSQS.SendMessageBatch`); SES v2 (REST) by its path.
fn operation_of(request: &HttpRequest) -> String {
    if let Some(target) = request.headers().get("x-amz-target") {
        return target.rsplit('.').next().unwrap_or(target).to_string();
    }
    let uri = request.uri();
    if uri.contains("/v2/email/outbound-emails") {
        return "SendEmail".into();
    }
    uri.to_string()
}

/// A service's JSON error answer, as the AWS JSON protocols spell it.
fn error_response(status: u16, body: serde_json::Value) -> Response {
    let mut response = Response::new(
        StatusCode::try_from(status).expect("a valid status"),
        SdkBody::from(body.to_string()),
    );
    response
        .headers_mut()
        .insert("content-type", "application/x-amz-json-1.0");
    response
}

fn answer(fault: &Fault, operation: &str) -> Response {
    match fault {
        Fault::TransactionConflict => error_response(
            400,
            serde_json::json!({
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "message": "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict]",
                "CancellationReasons": [
                    {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
                    {"Code": "None"}
                ]
            }),
        ),
        Fault::Throttle
            if operation.ends_with("Item")
                || operation.contains("Items")
                || operation == "Query" =>
        {
            error_response(
                400,
                serde_json::json!({
                    "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                    "message": "The level of configured provisioned throughput for the table was exceeded."
                }),
            )
        }
        Fault::Throttle => error_response(
            400,
            serde_json::json!({"__type": "ThrottlingException", "message": "Rate exceeded"}),
        ),
        _ => error_response(
            500,
            serde_json::json!({
                "__type": "com.amazonaws.dynamodb.v20120810#InternalServerError",
                "message": "Internal server error"
            }),
        ),
    }
}

impl HttpConnector for FaultyConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let operation = operation_of(&request);
        let body = request.body().bytes().unwrap_or_default();
        let fault = self.faults.take(&operation, body);
        let inner = self.inner.clone();
        match fault {
            None => inner.call(request),
            Some(Fault::Latency(wait)) => HttpConnectorFuture::new(async move {
                tokio::time::sleep(wait).await;
                inner.call(request).await
            }),
            Some(Fault::LostResponse) => HttpConnectorFuture::new(async move {
                // Applied by the service; the answer is lost on the way back.
                let _ = inner.call(request).await;
                Err(ConnectorError::timeout(
                    "injected fault: the response was lost after the request was applied".into(),
                ))
            }),
            Some(fault) => {
                let response = answer(&fault, &operation);
                HttpConnectorFuture::ready(Ok(response))
            }
        }
    }
}
