//! The event type item: one record type of the catalog, with the JSON Schema of its projected
//! payload, an example, a description and a version.
//!
//! | item       | pk            | sk             | table    |
//! |------------|---------------|----------------|----------|
//! | event type | `EVENT_TYPES` | `TYPE#{type}`  | delivery |
//!
//! The catalog belongs to the deployment, not to an account: one partition holds every type, so
//! one query reads the whole catalog (a catalog is tens of types, not thousands). Only the API
//! reads it (listing the catalog, checking a subscription or a published change); ingest, dispatch
//! and the worker never do, so the delivery path costs what it cost before there was a catalog.
//! The schema and the example are kept as JSON text: stored exactly as given, numbers included.

use super::expr::{n, s, Expr};
use super::keys::{event_type_sk, EVENT_TYPES_PK, EVENT_TYPE_PREFIX};
use super::read::{self, Query};
use super::write::{built, Write};
use super::{from_item, to_item, Item, StoreError};
use crate::domain::time::Timestamp;
use aws_sdk_dynamodb::types::Put;
use serde::{Deserialize, Serialize};

/// The `kind` of an event type item.
pub const KIND: &str = "event_type";

/// One record type of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventType {
    pub record_type: String,
    /// Bumped on each change (or set by the operator to a higher number).
    pub version: u32,
    pub description: String,
    /// The JSON Schema of the projected payload's `data`, as JSON text.
    pub schema: String,
    /// An example of that payload, as JSON text.
    pub example: String,
    pub updated_at: Timestamp,
    /// The operator who made this version.
    pub updated_by: String,
}

impl EventType {
    /// The schema as JSON (a stored schema was checked when it was written).
    pub fn schema_json(&self) -> serde_json::Value {
        serde_json::from_str(&self.schema).unwrap_or(serde_json::Value::Null)
    }
    pub fn example_json(&self) -> serde_json::Value {
        serde_json::from_str(&self.example).unwrap_or(serde_json::Value::Null)
    }
}

pub fn key(record_type: &str) -> (String, String) {
    (EVENT_TYPES_PK.to_string(), event_type_sk(record_type))
}

fn item(t: &EventType) -> Result<Item, StoreError> {
    let (pk, sk) = key(&t.record_type);
    to_item(t, &pk, &sk, KIND)
}

/// Writes `t` as the type's next version: on the condition that the stored version is still
/// `previous` (`None`: the type is new), so two operators editing at once cannot overwrite each
/// other unseen.
pub fn save(table: &str, t: &EventType, previous: Option<u32>) -> Result<Write, StoreError> {
    let mut e = Expr::new();
    let condition = match previous {
        None => "attribute_not_exists(pk)".to_string(),
        Some(v) => {
            e = e.name("#version", "version").value(":previous", n(v));
            "#version = :previous".to_string()
        }
    };
    Ok(Write::Put(built(
        Put::builder()
            .table_name(table)
            .set_item(Some(item(t)?))
            .condition_expression(condition)
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// One type (a consistent read).
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    record_type: &str,
) -> Result<Option<EventType>, StoreError> {
    read::get_as(dynamo, table, key(record_type)).await
}

/// The whole catalog, in type name order: what one query of its partition reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    pub types: Vec<EventType>,
}

impl Catalog {
    /// Whether `record_type` is a type of the catalog.
    pub fn knows(&self, record_type: &str) -> bool {
        self.find(record_type).is_some()
    }

    /// The type named `record_type`.
    pub fn find(&self, record_type: &str) -> Option<&EventType> {
        self.types.iter().find(|t| t.record_type == record_type)
    }

    /// Each type's schema, by name.
    pub fn schemas(&self) -> std::collections::BTreeMap<String, serde_json::Value> {
        self.types
            .iter()
            .map(|t| (t.record_type.clone(), t.schema_json()))
            .collect()
    }

    /// The catalog with `t` as its type's stored version (added in name order when new).
    pub fn with(mut self, t: EventType) -> Self {
        match self
            .types
            .binary_search_by(|have| have.record_type.as_str().cmp(&t.record_type))
        {
            Ok(i) => self.types[i] = t,
            Err(i) => self.types.insert(i, t),
        }
        self
    }
}

/// The query of the whole catalog, in type name order.
pub(crate) fn catalog_query(table: &str) -> Query {
    Query {
        table: table.to_owned(),
        key_condition: "pk = :pk AND begins_with(sk, :p)".into(),
        expr: Expr::new()
            .value(":pk", s(EVENT_TYPES_PK))
            .value(":p", s(EVENT_TYPE_PREFIX)),
        ..Query::default()
    }
}

/// Every type of the catalog, in name order (a consistent query of its partition: the API reads
/// it once per container and lease, [`crate::operations::catalog_lease`]).
pub async fn all(dynamo: &aws_sdk_dynamodb::Client, table: &str) -> Result<Catalog, StoreError> {
    let types = read::query_all(dynamo, &catalog_query(table))
        .await?
        .into_iter()
        .map(from_item)
        .collect::<Result<Vec<EventType>, _>>()?;
    Ok(Catalog { types })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order() -> EventType {
        EventType {
            record_type: "order".into(),
            version: 2,
            description: "An order".into(),
            schema: r#"{"type":"object","properties":{"total":{"type":"number"}}}"#.into(),
            example: r#"{"total":1.50}"#.into(),
            updated_at: Timestamp(5),
            updated_by: "ops".into(),
        }
    }

    #[test]
    fn a_type_is_one_item_of_the_catalog_partition_written_on_its_previous_version() {
        let Write::Put(p) = save("t", &order(), Some(1)).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.item()["pk"].as_s().unwrap(), "EVENT_TYPES");
        assert_eq!(p.item()["sk"].as_s().unwrap(), "TYPE#order");
        assert_eq!(p.item()["kind"].as_s().unwrap(), KIND);
        assert_eq!(p.item()["example"].as_s().unwrap(), r#"{"total":1.50}"#);
        assert_eq!(p.condition_expression(), Some("#version = :previous"));
        assert_eq!(p.expression_attribute_values().unwrap()[":previous"], n(1));
        let Write::Put(new) = save("t", &order(), None).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(new.condition_expression(), Some("attribute_not_exists(pk)"));
        let q = catalog_query("t");
        assert_eq!(q.expr.values[":pk"], s("EVENT_TYPES"));
        assert!(q.index.is_none());
    }

    #[test]
    fn a_saved_type_takes_its_place_in_the_catalog_in_name_order() {
        let named = |name: &str, version| EventType {
            record_type: name.into(),
            version,
            ..order()
        };
        let catalog = Catalog::default()
            .with(named("order", 1))
            .with(named("invoice", 1))
            .with(named("payment", 1))
            .with(named("order", 3));
        let names: Vec<_> = catalog
            .types
            .iter()
            .map(|t| t.record_type.as_str())
            .collect();
        assert_eq!(names, ["invoice", "order", "payment"]);
        assert_eq!(catalog.find("order").map(|t| t.version), Some(3));
        assert!(catalog.knows("payment") && !catalog.knows("refund"));
        assert_eq!(catalog.schemas().len(), 3);
    }
}
