//! Counts AWS requests by service and operation with an SDK interceptor: measured, not estimated.
//! The demo's summary and the benchmarks read their figures from here.
//!
//! With [`RequestMeter::count_capacity`] on, the interceptor also asks DynamoDB for the capacity
//! every request consumes (`ReturnConsumedCapacity = INDEXES`, set on the request before it is
//! serialised) and adds up what the responses report, table and global secondary indexes apart,
//! plus the conditional writes DynamoDB refused (which consume capacity but report none). Against
//! AWS these are the billed units; the local emulator computes them by AWS's rules
//! (`scripts/capacity.py`).
//!
//! With [`RequestMeter::count_partitions`] on, it also counts the items each write request puts,
//! updates or deletes per partition key: of the table, and of every global secondary index whose
//! partition-key attribute the write sets (read from the request: a put's item, an update's
//! `SET` assignments). Those counts are what `docs/scale.md` turns into writes per second per
//! partition.

use aws_sdk_dynamodb::operation as ddb;
use aws_sdk_dynamodb::types::{AttributeValue, ConsumedCapacity, ReturnConsumedCapacity};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    AfterDeserializationInterceptorContextRef, BeforeSerializationInterceptorContextMut,
    BeforeTransmitInterceptorContextRef, Error as OperationError,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// DynamoDB capacity consumed by one operation, summed over its requests.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Units {
    pub read: f64,
    pub write: f64,
    /// The part of `read + write` spent on global secondary indexes.
    pub indexes: f64,
    /// Writes refused by their condition (or a cancelled transaction): each costs at least one
    /// write unit in DynamoDB, which the response does not report.
    pub refused: u64,
}

#[derive(Debug, Clone, Default)]
pub struct RequestMeter {
    counts: Arc<Mutex<BTreeMap<(String, String), u64>>>,
    units: Arc<Mutex<BTreeMap<String, Units>>>,
    capacity: Arc<AtomicBool>,
    /// Partition-key attributes whose writes are counted (empty: none are).
    partition_keys: Arc<Mutex<Vec<String>>>,
    /// (table name, partition-key attribute) → value → items written.
    partitions: Arc<Mutex<PartitionWrites>>,
}

/// Items written per partition: (table name, partition-key attribute) → key value → count.
pub type PartitionWrites = BTreeMap<(String, String), BTreeMap<String, u64>>;

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
        self.units.lock().unwrap().clear();
        self.partitions.lock().unwrap().clear();
    }

    /// Counts, from now on, the items every write request writes per value of these
    /// partition-key attributes (a table's and its indexes'; none: stop counting).
    pub fn count_partitions(&self, key_attributes: &[&str]) {
        *self.partition_keys.lock().unwrap() =
            key_attributes.iter().map(|a| a.to_string()).collect();
    }

    /// Items written per partition since the last reset (with `count_partitions` on).
    pub fn partition_writes(&self) -> PartitionWrites {
        self.partitions.lock().unwrap().clone()
    }

    /// Counts one item written to `table` with these attribute values (a put's item, an update's
    /// key and assigned values).
    fn add_partition_write<'a>(
        &self,
        table: Option<&str>,
        values: impl IntoIterator<Item = (&'a str, &'a AttributeValue)>,
    ) {
        let keys = self.partition_keys.lock().unwrap();
        let mut partitions = self.partitions.lock().unwrap();
        for (attribute, value) in values {
            if !keys.iter().any(|k| k == attribute) {
                continue;
            }
            let value = match value {
                AttributeValue::S(v) | AttributeValue::N(v) => v.clone(),
                other => format!("{other:?}"),
            };
            let table = table.unwrap_or_default().to_string();
            *partitions
                .entry((table, attribute.to_string()))
                .or_default()
                .entry(value)
                .or_default() += 1;
        }
    }

    /// Counts the items one DynamoDB write request writes, per partition key.
    fn count_partition_writes(
        &self,
        input: &aws_smithy_runtime_api::client::interceptors::context::Input,
    ) {
        if self.partition_keys.lock().unwrap().is_empty() {
            return;
        }
        let empty = Default::default();
        if let Some(i) = input.downcast_ref::<ddb::put_item::PutItemInput>() {
            self.add_partition_write(i.table_name(), item(i.item().unwrap_or(&empty)));
        } else if let Some(i) = input.downcast_ref::<ddb::update_item::UpdateItemInput>() {
            let mut values = item(i.key().unwrap_or(&empty));
            values.extend(assigned(
                i.update_expression(),
                i.expression_attribute_names(),
                i.expression_attribute_values(),
            ));
            self.add_partition_write(i.table_name(), values);
        } else if let Some(i) = input.downcast_ref::<ddb::delete_item::DeleteItemInput>() {
            self.add_partition_write(i.table_name(), item(i.key().unwrap_or(&empty)));
        } else if let Some(i) =
            input.downcast_ref::<ddb::transact_write_items::TransactWriteItemsInput>()
        {
            for t in i.transact_items() {
                if let Some(p) = t.put() {
                    self.add_partition_write(Some(p.table_name()), item(p.item()));
                }
                if let Some(u) = t.update() {
                    let mut values = item(u.key());
                    values.extend(assigned(
                        Some(u.update_expression()),
                        u.expression_attribute_names(),
                        u.expression_attribute_values(),
                    ));
                    self.add_partition_write(Some(u.table_name()), values);
                }
                if let Some(d) = t.delete() {
                    self.add_partition_write(Some(d.table_name()), item(d.key()));
                }
            }
        } else if let Some(i) = input.downcast_ref::<ddb::batch_write_item::BatchWriteItemInput>() {
            for (table, requests) in i.request_items().into_iter().flatten() {
                for r in requests {
                    if let Some(p) = r.put_request() {
                        self.add_partition_write(Some(table), item(p.item()));
                    }
                    if let Some(d) = r.delete_request() {
                        self.add_partition_write(Some(table), item(d.key()));
                    }
                }
            }
        }
    }

    /// Asks DynamoDB for consumed capacity on every request from now on (see the module notes).
    pub fn count_capacity(&self, on: bool) {
        self.capacity.store(on, Ordering::Relaxed);
    }

    /// DynamoDB capacity per operation since the last reset (with `count_capacity` on).
    pub fn units(&self) -> BTreeMap<String, Units> {
        self.units.lock().unwrap().clone()
    }

    fn add_units(&self, operation: &str, consumed: &[ConsumedCapacity], refused: bool) {
        let mut units = self.units.lock().unwrap();
        let entry = units.entry(operation.to_string()).or_default();
        for c in consumed {
            entry.read += c.read_capacity_units.unwrap_or_default();
            entry.write += c.write_capacity_units.unwrap_or_default();
            entry.indexes += c
                .global_secondary_indexes
                .iter()
                .flatten()
                .map(|(_, i)| i.capacity_units.unwrap_or_default())
                .sum::<f64>();
        }
        entry.refused += u64::from(refused);
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

/// An item's (or key's) attributes with their values.
fn item(m: &std::collections::HashMap<String, AttributeValue>) -> Vec<(&str, &AttributeValue)> {
    m.iter().map(|(k, v)| (k.as_str(), v)).collect()
}

/// The attributes an update expression's `SET` clause assigns a placeholder value to
/// (`#name = :value` or `name = :value`), with the values: how an update moves an item onto an
/// index partition. Other assignments (`if_not_exists(...)`, arithmetic) are left out.
fn assigned<'a>(
    expression: Option<&'a str>,
    names: Option<&'a std::collections::HashMap<String, String>>,
    values: Option<&'a std::collections::HashMap<String, AttributeValue>>,
) -> Vec<(&'a str, &'a AttributeValue)> {
    let Some(expression) = expression else {
        return Vec::new();
    };
    // Up to the next clause (REMOVE, ADD, DELETE) after SET.
    let set = expression
        .split_once("SET ")
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    let set = ["REMOVE ", "ADD ", "DELETE "]
        .iter()
        .filter_map(|c| set.find(c))
        .min()
        .map_or(set, |end| &set[..end]);
    set.split(',')
        .filter_map(|assignment| {
            let (name, value) = assignment.split_once('=')?;
            let (name, value) = (name.trim(), value.trim());
            let name = match name.strip_prefix('#') {
                Some(_) => names?.get(name)?.as_str(),
                None => name,
            };
            Some((name, values?.get(value)?))
        })
        .collect()
}

/// A write DynamoDB refused because a condition failed (a transaction: was cancelled).
fn refused_write(error: &OperationError) -> bool {
    if let Some(e) = error.downcast_ref::<ddb::put_item::PutItemError>() {
        return e.is_conditional_check_failed_exception();
    }
    if let Some(e) = error.downcast_ref::<ddb::update_item::UpdateItemError>() {
        return e.is_conditional_check_failed_exception();
    }
    if let Some(e) = error.downcast_ref::<ddb::delete_item::DeleteItemError>() {
        return e.is_conditional_check_failed_exception();
    }
    if let Some(e) = error.downcast_ref::<ddb::transact_write_items::TransactWriteItemsError>() {
        return e.is_transaction_canceled_exception();
    }
    false
}

/// Sets `return_consumed_capacity` on whichever DynamoDB input this is.
macro_rules! ask_for_capacity {
    ($input:expr, $($op:ident::$ty:ident),+ $(,)?) => {{
        $(if let Some(i) = $input.downcast_mut::<ddb::$op::$ty>() {
            i.return_consumed_capacity = Some(ReturnConsumedCapacity::Indexes);
        })+
    }};
}

/// The consumed capacity a DynamoDB output reports (one table, or one entry per table).
macro_rules! reported_capacity {
    ($output:expr; one: $($one:ident::$one_ty:ident),+; many: $($many:ident::$many_ty:ident),+) => {{
        let mut found: Option<Vec<ConsumedCapacity>> = None;
        $(if let Some(o) = $output.downcast_ref::<ddb::$one::$one_ty>() {
            found = Some(o.consumed_capacity.iter().cloned().collect());
        })+
        $(if let Some(o) = $output.downcast_ref::<ddb::$many::$many_ty>() {
            found = Some(o.consumed_capacity.clone().unwrap_or_default());
        })+
        found
    }};
}

impl Intercept for RequestMeter {
    fn name(&self) -> &'static str {
        "RequestMeter"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.count_partition_writes(context.input());
        if self.capacity.load(Ordering::Relaxed) {
            ask_for_capacity!(
                context.input_mut(),
                put_item::PutItemInput,
                update_item::UpdateItemInput,
                delete_item::DeleteItemInput,
                get_item::GetItemInput,
                query::QueryInput,
                scan::ScanInput,
                batch_get_item::BatchGetItemInput,
                batch_write_item::BatchWriteItemInput,
                transact_write_items::TransactWriteItemsInput,
                transact_get_items::TransactGetItemsInput,
            );
        }
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if !self.capacity.load(Ordering::Relaxed) {
            return Ok(());
        }
        let Some(meta) = cfg.load::<Metadata>() else {
            return Ok(());
        };
        match context.output_or_error() {
            Ok(output) => {
                let consumed = reported_capacity!(output;
                    one: put_item::PutItemOutput, update_item::UpdateItemOutput,
                        delete_item::DeleteItemOutput, get_item::GetItemOutput,
                        query::QueryOutput, scan::ScanOutput;
                    many: batch_get_item::BatchGetItemOutput,
                        batch_write_item::BatchWriteItemOutput,
                        transact_write_items::TransactWriteItemsOutput,
                        transact_get_items::TransactGetItemsOutput);
                if let Some(consumed) = consumed {
                    self.add_units(meta.name(), &consumed, false);
                }
            }
            Err(error) => {
                if error.as_operation_error().is_some_and(refused_write) {
                    self.add_units(meta.name(), &[], true);
                }
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_assigns_the_placeholder_values_of_its_set_clause() {
        let s = |v: &str| AttributeValue::S(v.to_string());
        let names = std::collections::HashMap::from([("#d".to_string(), "due_shard".to_string())]);
        let values = std::collections::HashMap::from([
            (":d".to_string(), s("7")),
            (":l".to_string(), s("ACCT#a")),
            (":one".to_string(), AttributeValue::N("1".into())),
        ]);
        let got = assigned(
            Some("SET #d = :d, list_key = :l, n = if_not_exists(n, :one) REMOVE due_at"),
            Some(&names),
            Some(&values),
        );
        assert_eq!(
            got,
            vec![("due_shard", &s("7")), ("list_key", &s("ACCT#a"))]
        );
        assert!(assigned(Some("REMOVE due_shard"), Some(&names), Some(&values)).is_empty());
    }
}
