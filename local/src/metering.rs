//! Counts AWS requests by service and operation with an SDK interceptor: measured, not estimated.
//! The demo's summary and the benchmarks read their figures from here.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Default)]
pub struct RequestMeter {
    counts: Arc<Mutex<BTreeMap<(String, String), u64>>>,
}

impl RequestMeter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests per (service, operation) since the last reset.
    pub fn snapshot(&self) -> BTreeMap<(String, String), u64> {
        self.counts.lock().unwrap().clone()
    }

    pub fn reset(&self) {
        self.counts.lock().unwrap().clear();
    }

    /// Requests to one service (e.g. `DynamoDB`, `SQS`), optionally only the named operations.
    pub fn total(&self, service: &str, operations: Option<&[&str]>) -> u64 {
        self.counts
            .lock()
            .unwrap()
            .iter()
            .filter(|((s, o), _)| {
                s.eq_ignore_ascii_case(service)
                    && operations.is_none_or(|ops| ops.contains(&o.as_str()))
            })
            .map(|(_, n)| n)
            .sum()
    }
}

impl Intercept for RequestMeter {
    fn name(&self) -> &'static str {
        "RequestMeter"
    }

    /// Once per attempt: SDK retries count as the requests they are.
    fn read_before_attempt(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(meta) = cfg.load::<Metadata>() {
            *self
                .counts
                .lock()
                .unwrap()
                .entry((meta.service().to_string(), meta.name().to_string()))
                .or_default() += 1;
        }
        Ok(())
    }
}

/// DynamoDB operations that write.
pub const DYNAMO_WRITES: &[&str] = &[
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "TransactWriteItems",
];
/// DynamoDB operations that read.
pub const DYNAMO_READS: &[&str] = &[
    "GetItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "TransactGetItems",
];
