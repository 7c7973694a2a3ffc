//! The event item: one change as the event monitor shows it, in the partition it shares with its
//! deliveries (one query rolls it up). While it is `new` or `partial` it sits on the sharded
//! `rollup` index; every event is on its account's time listing.

use super::attrs::{listing, rollup};
use super::expr::{n, s, Expr};
use super::write::{built, Write};
use super::{keys, Item, StoreError};
use crate::domain::event::{EventStatus, InternalStatus, InternalTrigger, INTERNAL_LIFECYCLE};
use crate::domain::time::Timestamp;
use aws_sdk_dynamodb::types::Update;
use serde::{Deserialize, Serialize};

/// The `kind` of an event item.
pub const KIND: &str = "event";

/// One change as an event of the event monitor (seed 004).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EventRecord {
    pub account_id: String,
    pub change_id: String,
    pub record_type: String,
    pub record_id: String,
    pub event_code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warehouse: Option<String>,
    pub occurred_at: Timestamp,
    pub event_status: EventStatus,
    #[serde(default)]
    pub internal_status: InternalStatus,
    pub created_at: Timestamp,
    /// Subscriptions that took the change when it was ingested (a delivery each).
    #[serde(default)]
    pub subscribers: u32,
    /// Of those, the ones the worker pushes to (not `poll`). An event with none is rolled up as
    /// soon as it is written; the others are rolled up when their push deliveries finish.
    #[serde(default)]
    pub push_subscribers: u32,
}

/// The key of an event.
pub fn key(account_id: &str, change_id: &str) -> (String, String) {
    (
        keys::event_pk(account_id, change_id),
        keys::EVENT_SK.to_string(),
    )
}

impl EventRecord {
    pub fn key(&self) -> (String, String) {
        key(&self.account_id, &self.change_id)
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        super::from_item(item)
    }
}

/// Records what a built-in subscriber stored when it handled the event: `internal_status` moves
/// to `done` (conditional on the internal lifecycle's `from` states; an event written before the
/// internal status existed has none) together with the result.
pub fn record_internal_result(
    table: &str,
    account_id: &str,
    change_id: &str,
    result: &str,
) -> Result<Write, StoreError> {
    let condition = INTERNAL_LIFECYCLE
        .condition(InternalTrigger::RecordInternalResult, InternalStatus::Done)?;
    let mut e = Expr::new()
        .name("#internal", "internal_status")
        .value(":done", s(InternalStatus::Done.to_string()))
        .value(":result", s(result));
    let status_condition = e.status(&condition).replace("#status", "#internal");
    e.names.remove("#status");
    let (pk, sk) = key(account_id, change_id);
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("SET #internal = :done, internal_result = :result")
            .condition_expression(format!(
                "attribute_exists(pk) AND (attribute_not_exists(#internal) OR {status_condition})"
            ))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// The `listing` key of an account's events.
pub fn events_list_key(account_id: &str) -> String {
    format!("EVENTS#{account_id}")
}

/// The item ingest writes for a new event: open events sit on the `rollup` index until they are
/// final; every event is on its account's time listing.
pub fn new_item(event: &EventRecord) -> Result<Item, StoreError> {
    let (pk, sk) = event.key();
    let mut item = super::to_item(event, &pk, &sk, KIND)?;
    item.insert(rollup::SHARD.into(), s(keys::shard_of(&pk)));
    item.insert(rollup::AT.into(), n(event.created_at.millis()));
    item.insert(listing::KEY.into(), s(events_list_key(&event.account_id)));
    item.insert(
        listing::SORT.into(),
        s(keys::time_sort(event.created_at, &event.change_id)),
    );
    Ok(item)
}

/// Creates an event unless one exists for its change (the change's idempotency key).
pub fn create(table: &str, event: &EventRecord) -> Result<Write, StoreError> {
    super::delivery::put_new(table, new_item(event)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_internal_result_moves_the_internal_status_by_its_table() {
        let w = record_internal_result("t", "a", "c", "{\"ok\":true}").unwrap();
        let Write::Update(u) = w else {
            panic!("not an update")
        };
        assert_eq!(u.key()["pk"].as_s().unwrap(), "EVT#a#c");
        let names = u.expression_attribute_names().unwrap();
        assert_eq!(names["#internal"], "internal_status");
        assert!(!names.contains_key("#status"));
        assert!(u.condition_expression().unwrap().contains("#internal"));
    }
}
