//! The kinds of request the functions make, told apart at the SDK boundary (`local::faults` sees
//! every request's operation and body): a DynamoDB request by its table, the kinds of its keys
//! and items and its expressions; an SQS request by its queue. [`signature`] names a request's
//! kind; [`record`] has a stack's fault layer record the kinds its handlers make. The fault matrix holds every kind a scenario
//! makes to a row that faults it, and the chaos run's fault waves meet every kind of [`KINDS`].

use crate::faults::Matcher;
use serde_json::{Map, Value};

/// The function whose request a kind is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Function {
    Ingest,
    Dispatch,
    Sweep,
    Worker,
    RollUp,
    Notify,
    Reconcile,
    Api,
}

/// One kind of request, as a fault meets it: its operation and a text only its bodies carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestKind {
    pub name: &'static str,
    pub function: Function,
    pub operation: &'static str,
    pub marker: &'static str,
}

impl RequestKind {
    /// The requests of this kind.
    pub fn matcher(&self) -> Matcher {
        Matcher::operation(self.operation).on(self.marker)
    }

    /// Whether the request is a transaction (only those meet a `TransactionConflict`).
    pub fn transactional(&self) -> bool {
        self.operation == "TransactWriteItems"
    }

    /// Whether the request writes (a read's fault leaves nothing half written).
    pub fn writes(&self) -> bool {
        crate::metering::DYNAMO_WRITES.contains(&self.operation)
            || self.operation.starts_with("SendMessage")
            || self.operation == "SendEmail"
    }

    /// Whether a request's `operation` and `body` are of this kind.
    pub fn covers(&self, operation: &str, body: &[u8]) -> bool {
        self.matcher().matches(operation, body)
    }
}

/// Records, from now on, the kinds of request that pass `faults` (see [`crate::faults::KindLog`]).
pub fn record(faults: &crate::faults::Faults) {
    faults.kinds.start(signature);
}

/// The kind a request of `operation` with `body` is: the operation, then for DynamoDB the table
/// (without the stack's prefix), the kinds of the keys (`pk=EVT#`, an id as `*`), a put's item
/// kind and the expressions; for a transaction each of its parts; for SQS the queue.
pub fn signature(operation: &str, body: &[u8]) -> String {
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(body) else {
        return operation.to_string();
    };
    if let Some(items) = body.get("TransactItems").and_then(Value::as_array) {
        let parts: Vec<String> = items
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|part| part.iter().map(|(op, p)| dynamo_part(op, p)))
            .fold(Vec::new(), |mut parts, p| {
                // A part repeated for several items (one per channel) is one part of the kind.
                if !parts.contains(&p) {
                    parts.push(p);
                }
                parts
            });
        return format!("{operation} [{}]", parts.join(" ; "));
    }
    if let Some(tables) = body.get("RequestItems").and_then(Value::as_object) {
        let mut parts: Vec<String> = tables
            .iter()
            .flat_map(|(table, v)| batch_parts(table, v))
            .collect();
        parts.sort();
        parts.dedup();
        return format!("{operation} [{}]", parts.join(" ; "));
    }
    if body.contains_key("TableName") {
        return dynamo_part(operation, &Value::Object(body));
    }
    if let Some(url) = body.get("QueueUrl").and_then(Value::as_str) {
        return format!(
            "{operation} {}",
            unprefixed(url.rsplit('/').next().unwrap_or(url))
        );
    }
    operation.to_string()
}

/// One DynamoDB request (or one part of a transaction: `Put`, `Update`, `Delete`,
/// `ConditionCheck`).
fn dynamo_part(operation: &str, p: &Value) -> String {
    let text = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut s = format!("{operation} {}", unprefixed(text("TableName")));
    if let Some(key) = p.get("Key").and_then(Value::as_object) {
        s += &format!(" key[{}]", shapes(key, &["pk", "sk"]));
    }
    if let Some(item) = p.get("Item").and_then(Value::as_object) {
        s += &format!(" item[{}]", shapes(item, &["kind", "pk", "sk"]));
    }
    if operation == "Query" {
        // Whose partition a query reads: its key condition's values, by kind.
        if let Some(values) = p
            .get("ExpressionAttributeValues")
            .and_then(Value::as_object)
        {
            let names: Vec<&str> = values.keys().map(String::as_str).collect();
            s += &format!(" values[{}]", shapes(values, &names));
        }
    }
    for (label, k) in [
        ("index", "IndexName"),
        ("key", "KeyConditionExpression"),
        ("set", "UpdateExpression"),
        ("if", "ConditionExpression"),
        ("filter", "FilterExpression"),
    ] {
        if !text(k).is_empty() {
            s += &format!(" {label}({})", text(k));
        }
    }
    s
}

fn batch_parts(table: &str, v: &Value) -> Vec<String> {
    let table = unprefixed(table);
    if let Some(requests) = v.as_array() {
        return requests
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|r| r.iter())
            .map(|(op, r)| {
                let item = r.get("Item").or_else(|| r.get("Key"));
                let fields = item
                    .and_then(Value::as_object)
                    .map_or(String::new(), |i| shapes(i, &["kind", "pk", "sk"]));
                format!("{op} {table} [{fields}]")
            })
            .collect();
    }
    let keys = v.get("Keys").and_then(Value::as_array);
    keys.into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .map(|k| format!("Get {table} key[{}]", shapes(k, &["pk", "sk"])))
        .collect()
}

/// The named attributes of an item or key, each by its kind: a key's text up to its first `#`
/// (`EVT#`), a constant (`ACCOUNT`, `delivery`) as it is, anything else as `*`.
fn shapes(item: &Map<String, Value>, names: &[&str]) -> String {
    names
        .iter()
        .filter_map(|name| {
            let value = item.get(*name)?;
            let text = value
                .get("S")
                .and_then(Value::as_str)
                .map_or("*".to_string(), shape);
            Some(format!("{name}={text}"))
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn shape(text: &str) -> String {
    if let Some((head, _)) = text.split_once('#') {
        // A key's kind (`EVT#`); a time position (`000…#id`) is a value like any other.
        return match head.bytes().any(|b| b.is_ascii_digit()) {
            true => "*".to_string(),
            false => format!("{head}#"),
        };
    }
    let constant = text.len() <= 24
        && text
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_lowercase());
    if constant {
        text.to_string()
    } else {
        "*".to_string()
    }
}

/// A table's or queue's name without the stack's prefix (`t01h…-DeliveryTable`).
fn unprefixed(name: &str) -> &str {
    name.split_once('-').map_or(name, |(_, rest)| rest)
}

const fn kind(
    name: &'static str,
    function: Function,
    operation: &'static str,
    marker: &'static str,
) -> RequestKind {
    RequestKind {
        name,
        function,
        operation,
        marker,
    }
}

use Function::*;

/// Every kind of request the functions make, with the text only its bodies carry. Reads and
/// writes of every function; the fault matrix has a row for each, the chaos run a fault plan.
pub const KINDS: &[RequestKind] = &[
    // Stream ingest: the event and its delivery records, the account's listing.
    kind("ingest.event", Ingest, "PutItem", r#"{"S":"event"}"#),
    kind("ingest.delivery", Ingest, "PutItem", r#""S":"delivery""#),
    kind("ingest.listing", Ingest, "UpdateItem", r#""S":"ACCOUNTS""#),
    // An account's configuration (ingest, worker), read as one partition.
    kind("config.read", Worker, "Query", r#"":pk":{"S":"ACCT#"#),
    // The dispatcher's publish (stream and sweep) and the sweep's due reads and moves.
    kind(
        "dispatch.publish",
        Dispatch,
        "SendMessageBatch",
        "change_id",
    ),
    kind("sweep.due", Sweep, "Query", r#""IndexName":"due""#),
    kind("sweep.move", Sweep, "UpdateItem", "due_at = :seen"),
    // The delivery worker: the signing key, the claim, the outcome, the dead outcome with its
    // count, the subscription's reads, the effects after an outcome.
    kind("worker.decrypt", Worker, "Decrypt", "CiphertextBlob"),
    kind("worker.claim", Worker, "UpdateItem", "lease_until = :lease"),
    kind("worker.outcome", Worker, "UpdateItem", "attempt_log"),
    kind(
        "worker.dead",
        Worker,
        "TransactWriteItems",
        "consecutive_dead :one",
    ),
    kind("worker.subscription", Worker, "GetItem", r#""S":"SUB#"#),
    // A kept run dropped from its delivery once it has ended (or was found ended).
    kind(
        "worker.forget_seen_run",
        Worker,
        "UpdateItem",
        "REMOVE dead_run_seen",
    ),
    // The end of a dead run, with the run the success saw kept on its delivery until then.
    kind(
        "worker.end_dead_run",
        Worker,
        "TransactWriteItems",
        "consecutive_dead :minus",
    ),
    kind(
        "worker.internal_result",
        Worker,
        "UpdateItem",
        "internal_result = :result",
    ),
    kind("worker.snapshot", Worker, "PutItem", r#"{"S":"snapshot"}"#),
    kind(
        "worker.pause",
        Worker,
        "TransactWriteItems",
        "paused_at = :now",
    ),
    // The roll-up walk: the listings it walks, the events and their partitions, the roll-up
    // writes and the delivery records' expiry, its mark.
    kind("rollup.accounts", RollUp, "Query", r#"{"S":"ACCOUNTS"}"#),
    kind("rollup.events", RollUp, "Query", r#"{"S":"EVENTS#"#),
    kind("rollup.replays", RollUp, "Query", "REPLAYS_RUNNING#"),
    kind("rollup.index", RollUp, "Query", r#""IndexName":"rollup""#),
    kind("rollup.partition", RollUp, "Query", r#"":pk":{"S":"EVT#"#),
    kind(
        "rollup.event_batch",
        RollUp,
        "BatchGetItem",
        r#"{"S":"EVENT"}"#,
    ),
    kind("rollup.final", RollUp, "UpdateItem", "finalized_at = :now"),
    kind(
        "rollup.open",
        RollUp,
        "UpdateItem",
        "rollup_shard = if_not_exists",
    ),
    kind(
        "rollup.expiry",
        RollUp,
        "UpdateItem",
        "SET expires_at = :ttl",
    ),
    kind("rollup.keep", RollUp, "UpdateItem", "REMOVE expires_at"),
    kind("rollup.mark_read", RollUp, "GetItem", "ROLLUP_WALK"),
    kind("rollup.mark", RollUp, "UpdateItem", "#through = :through"),
    // The reconcile runs: a lost first dispatch put back on the due index; the nightly settling's
    // read of notifications to watch.
    kind(
        "reconcile.requeue",
        Reconcile,
        "UpdateItem",
        "attribute_not_exists(due_shard)",
    ),
    kind(
        "reconcile.watch",
        Reconcile,
        "Query",
        r#""IndexName":"watch""#,
    ),
    // Notifications: the notice, its fan-out, the worker's reads, claim, send and status.
    kind("notify.notice", Notify, "PutItem", r#"{"S":"notice"}"#),
    kind(
        "notify.fan_out",
        Notify,
        "TransactWriteItems",
        "notification_work",
    ),
    kind(
        "notify.fan_out_inbox",
        Notify,
        "TransactWriteItems",
        "inbox_key",
    ),
    kind(
        "notify.publish",
        Notify,
        "SendMessageBatch",
        "NotificationQueue",
    ),
    kind("notify.read_notice", Notify, "GetItem", r#"{"S":"NOTICE"}"#),
    kind("notify.read_delivery", Notify, "GetItem", r#"{"S":"DLV#"#),
    kind("notify.read_work", Notify, "GetItem", r#"{"S":"WORK#"#),
    // The claim moves the delivery to `sending` (a sent delivery's history names its claim too).
    kind(
        "notify.claim",
        Notify,
        "TransactWriteItems",
        r#""status":{"S":"sending"}"#,
    ),
    kind("notify.sent", Notify, "TransactWriteItems", "PROVREF#"),
    kind("notify.status", Notify, "TransactWriteItems", "#a0 = :v0"),
    kind("notify.email", Notify, "SendEmail", "Destination"),
    // The operator's retry route (the restart and its audit entry).
    kind("api.retry", Api, "TransactWriteItems", "retry_delivery"),
];

/// The kind named `name` (a row of the fault matrix names its kind).
pub fn named(name: &str) -> &'static RequestKind {
    KINDS
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no request kind {name}"))
}
