//! The record snapshot item: the latest version of one record of the owning application, as the
//! built-in `record_snapshot` handler keeps it (one item per account × record type × record id).

use super::expr::{n, s, Expr};
use super::write::{built, Write};
use super::StoreError;
use crate::ids::{AccountId, ChangeId};
use aws_sdk_dynamodb::types::Put;

/// The `kind` of a snapshot item.
pub const KIND: &str = "snapshot";

pub use super::keys::snapshot_pk;

/// One record's version: the change it came from and its data (JSON text).
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot<'a> {
    pub account_id: &'a AccountId,
    pub record_type: &'a str,
    pub record_id: &'a str,
    pub change_id: &'a ChangeId,
    /// When the change occurred (millis).
    pub occurred_ms: i64,
    pub data: String,
}

impl<'a> Snapshot<'a> {
    /// The version of record `record_id` (of `record_type`) that change `change_id`, which occurred
    /// at `occurred_ms`, left: its `data`.
    pub(crate) fn of_change(
        account_id: &'a AccountId,
        record_type: &'a str,
        record_id: &'a str,
        change_id: &'a ChangeId,
        occurred_ms: i64,
        data: String,
    ) -> Self {
        Snapshot {
            account_id,
            record_type,
            record_id,
            change_id,
            occurred_ms,
            data,
        }
    }
}

/// Saves a snapshot unless a newer one is stored: newer by the change's time, ties broken by the
/// change id, so changes applied out of order (retries, replays) never move a record back.
pub(crate) fn save_unless_newer(table: &str, snap: &Snapshot<'_>) -> Result<Write, StoreError> {
    let e = Expr::new()
        .value(":t", n(snap.occurred_ms))
        .value(":c", s(snap.change_id));
    Ok(Write::Put(built(
        Put::builder()
            .table_name(table)
            .item("pk", s(snapshot_pk(snap.account_id, snap.record_type)))
            .item("sk", s(snap.record_id))
            .item("kind", s(KIND))
            .item("change_id", s(snap.change_id))
            .item("occurred_at", n(snap.occurred_ms))
            .item("data", s(&snap.data))
            .condition_expression(
                "attribute_not_exists(pk) OR occurred_at < :t OR (occurred_at = :t AND change_id <= :c)",
            )
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    #[test]
    fn a_snapshot_never_replaces_a_newer_one() {
        let snap = Snapshot {
            account_id: &id("a"),
            record_type: "catalog_item",
            record_id: "r1",
            change_id: &id("01C"),
            occurred_ms: 42,
            data: "{}".into(),
        };
        let Write::Put(p) = save_unless_newer("t", &snap).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.item()["pk"].as_s().unwrap(), "SNAP#a#catalog_item");
        assert!(p
            .condition_expression()
            .unwrap()
            .contains("occurred_at < :t"));
        let values = p.expression_attribute_values().unwrap();
        assert_eq!(values[":t"].as_n().unwrap(), "42");
        assert_eq!(values[":c"].as_s().unwrap(), "01C");
    }
}
