//! The `internal` adapter: built-in handlers in this code base, looked up by name. A handler's
//! success is recorded on the event (internal status `done`, with its result).

use super::adapters::AttemptResult;
use crate::domain::classify::AttemptClass;
use crate::ids::{AccountId, ChangeId, DeliveryId};
use crate::store::snapshot::{self, Snapshot};
use crate::store::write::{send, Written};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a built-in handler is given: the delivery's stable id and its projected payload.
pub struct InternalCall<'a> {
    pub account_id: &'a AccountId,
    pub delivery_id: &'a DeliveryId,
    pub payload: &'a Value,
}

#[async_trait]
pub trait InternalHandler: Send + Sync {
    fn name(&self) -> &'static str;
    /// Handles one delivery. Must be idempotent: the same delivery can arrive again after a lost
    /// acknowledgement. `Err` carries the classification (transient faults retry).
    async fn handle(&self, call: InternalCall<'_>) -> Result<Value, (AttemptClass, String)>;
}

/// The built-in handlers by name.
#[derive(Clone, Default)]
pub struct InternalRegistry {
    handlers: BTreeMap<&'static str, Arc<dyn InternalHandler>>,
}

impl InternalRegistry {
    /// Every built-in handler of this code base.
    pub(crate) fn builtin(dynamo: aws_sdk_dynamodb::Client, table: String) -> Self {
        let mut r = InternalRegistry::default();
        r.register(Arc::new(RecordSnapshot { dynamo, table }));
        r
    }

    pub fn register(&mut self, handler: Arc<dyn InternalHandler>) {
        self.handlers.insert(handler.name(), handler);
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.handlers.keys().copied().collect()
    }

    pub async fn deliver(&self, name: &str, call: InternalCall<'_>) -> AttemptResult {
        let Some(handler) = self.handlers.get(name) else {
            return AttemptResult::configuration_loss(format!(
                "no built-in handler named {name:?}"
            ));
        };
        match handler.handle(call).await {
            Ok(result) => AttemptResult {
                internal_result: Some(result),
                ..AttemptResult::new(AttemptClass::Success, None, None)
            },
            Err((class, message)) => AttemptResult::new(class, None, Some(message)),
        }
    }
}

/// `record_snapshot`: keeps the latest projected state of every record the subscription sees, so
/// the account can read "the record as of its last change" without the owning application. Writes
/// are ordered by the change's time: an older change arriving late never overwrites a newer one.
pub(crate) struct RecordSnapshot {
    dynamo: aws_sdk_dynamodb::Client,
    table: String,
}

pub(crate) const RECORD_SNAPSHOT: &str = "record_snapshot";

pub use crate::store::snapshot::snapshot_pk;

#[async_trait]
impl InternalHandler for RecordSnapshot {
    fn name(&self) -> &'static str {
        RECORD_SNAPSHOT
    }

    async fn handle(&self, call: InternalCall<'_>) -> Result<Value, (AttemptClass, String)> {
        let field = |k: &str| call.payload.get(k).and_then(Value::as_str);
        let (Some(record_type), Some(record_id), Some(change_id), Some(occurred)) = (
            field("record_type"),
            field("record_id"),
            field("change_id"),
            field("occurred_at"),
        ) else {
            return Err((
                AttemptClass::Permanent,
                "payload is not a change envelope".into(),
            ));
        };
        let occurred_ms = crate::domain::time::Timestamp::parse_rfc3339(occurred)
            .map(|t| t.millis())
            .ok_or((
                AttemptClass::Permanent,
                format!("occurred_at {occurred:?} is not RFC 3339"),
            ))?;
        let data = call
            .payload
            .get("data")
            .cloned()
            .unwrap_or(Value::Null)
            .to_string();
        // The payload is the change envelope ingest wrote from the stored change.
        let change_id = ChangeId::from_stored(change_id);
        let snapshot = Snapshot::of_change(
            call.account_id,
            record_type,
            record_id,
            &change_id,
            occurred_ms,
            data,
        );
        let written = match snapshot::save_unless_newer(&self.table, &snapshot) {
            Ok(w) => send(&self.dynamo, w).await,
            Err(e) => Err(e),
        };
        match written {
            Ok(Written::Applied(_)) => Ok(
                json!({"handler": RECORD_SNAPSHOT, "snapshot": "updated", "record_id": record_id}),
            ),
            Ok(_) => Ok(
                json!({"handler": RECORD_SNAPSHOT, "snapshot": "newer_already_stored", "record_id": record_id}),
            ),
            Err(e) => Err((AttemptClass::Transient { retry_after: None }, e.to_string())),
        }
    }
}
