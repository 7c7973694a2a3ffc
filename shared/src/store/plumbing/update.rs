//! A partial update of an existing item: `SET` and `REMOVE` of named attributes, applied only
//! when the item exists, so attributes the system writes (a subscription's status, its dead
//! count) are never overwritten by an edit that does not name them. The API's edits of
//! integrations and subscriptions are built with it, and their deletes with [`delete_existing`].

use super::expr::{s, Expr};
use super::item::StoreError;
use super::write::{built, Write};
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Update};
use serde::Serialize;
use std::collections::HashMap;

/// The attributes an edit sets and removes.
#[derive(Debug, Default, Clone)]
pub struct Edit {
    sets: Vec<String>,
    removes: Vec<String>,
    /// Conditions beyond the item's existence (each `#a = :v`).
    conditions: Vec<String>,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Edit {
    pub fn new() -> Self {
        Self::default()
    }

    fn placeholder(&mut self, attribute: &str) -> String {
        let p = format!("#a{}", self.names.len());
        self.names.insert(p.clone(), attribute.to_owned());
        p
    }

    /// `#name = :value` placeholders for `attribute` and `value` (converted as `serde_dynamo`
    /// converts item fields).
    fn pair<T: Serialize>(
        &mut self,
        attribute: &str,
        value: &T,
    ) -> Result<(String, String), StoreError> {
        let v: AttributeValue =
            serde_dynamo::to_attribute_value(value).map_err(|e| StoreError::Shape {
                key: attribute.to_owned(),
                message: format!("converting {attribute} for storage: {e}"),
            })?;
        let name = self.placeholder(attribute);
        let value_placeholder = format!(":v{}", self.values.len());
        self.values.insert(value_placeholder.clone(), v);
        Ok((name, value_placeholder))
    }

    /// `SET attribute = value`, the value converted as `serde_dynamo` converts item fields.
    pub fn set<T: Serialize>(mut self, attribute: &str, value: &T) -> Result<Self, StoreError> {
        let (name, value) = self.pair(attribute, value)?;
        self.sets.push(format!("{name} = {value}"));
        Ok(self)
    }

    /// The edit applies only while `attribute` still equals `value` (what the edit was decided
    /// from).
    pub(crate) fn require_equal<T: Serialize>(
        mut self,
        attribute: &str,
        value: &T,
    ) -> Result<Self, StoreError> {
        let (name, value) = self.pair(attribute, value)?;
        self.conditions.push(format!("{name} = {value}"));
        Ok(self)
    }

    /// `REMOVE attribute`.
    pub fn remove(mut self, attribute: &str) -> Self {
        let name = self.placeholder(attribute);
        self.removes.push(name);
        self
    }

    fn expression(&self) -> String {
        let mut parts = Vec::new();
        if !self.sets.is_empty() {
            parts.push(format!("SET {}", self.sets.join(", ")));
        }
        if !self.removes.is_empty() {
            parts.push(format!("REMOVE {}", self.removes.join(", ")));
        }
        parts.join(" ")
    }

    /// The edit of item `pk`/`sk`, refused when the item does not exist; it answers with the
    /// item as it is after the edit.
    pub fn of_existing(self, table: &str, pk: &str, sk: &str) -> Result<Write, StoreError> {
        let expression = self.expression();
        let condition = std::iter::once("attribute_exists(pk)".to_owned())
            .chain(self.conditions)
            .collect::<Vec<_>>()
            .join(" AND ");
        Ok(Write::UpdateReturningNew(built(
            Update::builder()
                .table_name(table)
                .key("pk", s(pk))
                .key("sk", s(sk))
                .update_expression(expression)
                .condition_expression(condition)
                .set_expression_attribute_names(Some(self.names))
                .set_expression_attribute_values((!self.values.is_empty()).then_some(self.values))
                .build(),
        )?))
    }
}

/// An update of item `key` (`pk`, `sk`) by `expression`, only when `condition` holds: the shape
/// of every named write that sets attributes of one item.
pub(crate) fn conditional_update(
    table: &str,
    key: (String, String),
    expression: String,
    condition: String,
    e: &Expr,
) -> Result<Write, StoreError> {
    Ok(Write::Update(item_update(
        table,
        key,
        &expression,
        Some(condition),
        e,
    )?))
}

/// The update of item `key` (`pk`, `sk`) by `expression`, when `condition` (if any) holds.
pub(crate) fn item_update(
    table: &str,
    (pk, sk): (String, String),
    expression: &str,
    condition: Option<String>,
    e: &Expr,
) -> Result<Update, StoreError> {
    built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(expression)
            .set_condition_expression(condition)
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )
}

/// The single-item update a write is (tests of the builders that make one).
#[cfg(test)]
pub fn expect_update(w: Write) -> Update {
    match w {
        Write::Update(u) => u,
        other => panic!("not an update: {other:?}"),
    }
}

/// A delete of item `pk`/`sk`, whether or not it exists.
pub fn delete_any(table: &str, pk: &str, sk: &str) -> Result<Write, StoreError> {
    Ok(Write::Delete(built(
        Delete::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .build(),
    )?))
}

/// A delete of item `pk`/`sk`, refused when there is no such item.
pub fn delete_existing(table: &str, pk: &str, sk: &str) -> Result<Write, StoreError> {
    Ok(Write::Delete(built(
        Delete::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .condition_expression("attribute_exists(pk)")
            .build(),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_expressions_use_placeholders_for_every_name() {
        let u = Edit::new()
            .set("name", &"x")
            .unwrap()
            .set("status", &3)
            .unwrap()
            .remove("filter");
        assert_eq!(u.expression(), "SET #a0 = :v0, #a1 = :v1 REMOVE #a2");
        assert_eq!(u.names["#a1"], "status");
        assert_eq!(u.values[":v0"], AttributeValue::S("x".into()));
    }

    #[test]
    fn an_edit_applies_only_to_an_existing_item_and_returns_it() {
        let w = Edit::new()
            .set("name", &"x")
            .unwrap()
            .of_existing("t", "ACCT#a", "INTEG#i")
            .unwrap();
        let Write::UpdateReturningNew(u) = w else {
            panic!("not an update returning the item: {w:?}")
        };
        assert_eq!(u.condition_expression(), Some("attribute_exists(pk)"));
        assert_eq!(u.key()["pk"].as_s().unwrap(), "ACCT#a");
        assert_eq!(u.key()["sk"].as_s().unwrap(), "INTEG#i");
        assert_eq!(u.update_expression(), "SET #a0 = :v0");
        assert_eq!(u.expression_attribute_names().unwrap()["#a0"], "name");
    }

    #[test]
    fn an_edit_can_require_an_attribute_to_be_what_it_was_decided_from() {
        let Write::UpdateReturningNew(u) = Edit::new()
            .remove("auth")
            .require_equal("webhook_url", &"https://a.test/h")
            .unwrap()
            .of_existing("t", "p", "s")
            .unwrap()
        else {
            panic!("not an update")
        };
        assert_eq!(
            u.condition_expression(),
            Some("attribute_exists(pk) AND #a1 = :v0")
        );
        assert_eq!(
            u.expression_attribute_names().unwrap()["#a1"],
            "webhook_url"
        );
        assert_eq!(
            u.expression_attribute_values().unwrap()[":v0"],
            AttributeValue::S("https://a.test/h".into())
        );
    }

    #[test]
    fn an_edit_that_only_removes_has_no_values() {
        let Write::UpdateReturningNew(u) = Edit::new()
            .remove("filter")
            .of_existing("t", "p", "s")
            .unwrap()
        else {
            panic!("not an update")
        };
        assert_eq!(u.update_expression(), "REMOVE #a0");
        assert!(u.expression_attribute_values().is_none());
    }
}
