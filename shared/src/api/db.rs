//! The API's storage operations on the delivery table: conditional creates, reads, partial
//! updates conditional on existence, deletes, and paged queries of one partition. Failed
//! conditions are decisions (404 / 409), everything else is an internal error.

use super::problem::ApiError;
use crate::store::expr::{is_condition_failure, s};
use crate::store::{from_item, Item, StoreError};
use aws_sdk_dynamodb::types::{AttributeValue, Put, ReturnValue, TransactWriteItem};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;

/// A consistent read of one item.
pub async fn get<T: DeserializeOwned>(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
    sk: &str,
) -> Result<Option<T>, ApiError> {
    let out = dynamo
        .get_item()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(sk))
        .consistent_read(true)
        .send()
        .await
        .map_err(StoreError::dynamo)?;
    match out.item {
        Some(item) => Ok(Some(from_item(item)?)),
        None => Ok(None),
    }
}

/// A put that succeeds only when no item has the key yet.
pub fn put_new(table: &str, item: Item) -> Result<TransactWriteItem, ApiError> {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(pk)")
        .build()
        .map_err(|e| ApiError::internal(format!("building a put: {e}")))?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// Writes all of `items` or none of them. A failed condition is a conflict.
pub async fn write_all(
    dynamo: &aws_sdk_dynamodb::Client,
    items: Vec<TransactWriteItem>,
) -> Result<(), ApiError> {
    match dynamo
        .transact_write_items()
        .set_transact_items(Some(items))
        .send()
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_condition_failure(&e) => Err(ApiError::conflict(
            "the resource was created or changed concurrently; retry the request",
        )),
        Err(e) => Err(StoreError::dynamo(e).into()),
    }
}

/// Deletes an existing item; `false` when there was none.
pub async fn delete_existing(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
    sk: &str,
) -> Result<bool, ApiError> {
    match dynamo
        .delete_item()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(sk))
        .condition_expression("attribute_exists(pk)")
        .send()
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_condition_failure(&e) => Ok(false),
        Err(e) => Err(StoreError::dynamo(e).into()),
    }
}

/// A partial update: `SET` and `REMOVE` of named attributes, applied only when the item exists,
/// so attributes the system writes (a subscription's status, its dead count) are never
/// overwritten by an API edit.
#[derive(Debug, Default)]
pub struct Update {
    sets: Vec<String>,
    removes: Vec<String>,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Update {
    pub fn new() -> Self {
        Self::default()
    }

    fn placeholder(&mut self, attribute: &str) -> String {
        let p = format!("#a{}", self.names.len());
        self.names.insert(p.clone(), attribute.to_owned());
        p
    }

    /// `SET attribute = value`, the value converted as `serde_dynamo` converts item fields.
    pub fn set<T: Serialize>(mut self, attribute: &str, value: &T) -> Result<Self, ApiError> {
        let v: AttributeValue = serde_dynamo::to_attribute_value(value)
            .map_err(|e| ApiError::internal(format!("converting {attribute} for storage: {e}")))?;
        let name = self.placeholder(attribute);
        let value_placeholder = format!(":v{}", self.values.len());
        self.values.insert(value_placeholder.clone(), v);
        self.sets.push(format!("{name} = {value_placeholder}"));
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

    /// Applies the update to an existing item and returns the item as it is now; `None` when the
    /// item does not exist.
    pub async fn apply<T: DeserializeOwned>(
        self,
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        pk: &str,
        sk: &str,
    ) -> Result<Option<T>, ApiError> {
        let result = dynamo
            .update_item()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(self.expression())
            .condition_expression("attribute_exists(pk)")
            .set_expression_attribute_names(Some(self.names))
            .set_expression_attribute_values((!self.values.is_empty()).then_some(self.values))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(out) => match out.attributes {
                Some(item) => Ok(Some(from_item(item)?)),
                None => Err(ApiError::internal("an update returned no attributes")),
            },
            Err(e) if is_condition_failure(&e) => Ok(None),
            Err(e) => Err(StoreError::dynamo(e).into()),
        }
    }
}

/// One page of the items of partition `pk` whose sort key starts with `prefix`, in sort-key order.
/// The cursor is the id after the prefix of the last item read; a filter (expression, names,
/// values) narrows the page, which may then come back short with a cursor to continue.
pub struct PageQuery<'a> {
    pub table: &'a str,
    pub pk: &'a str,
    pub prefix: &'a str,
    pub limit: u32,
    pub after_id: Option<String>,
    pub filter: Option<(String, HashMap<String, AttributeValue>)>,
}

pub async fn query_page<T: DeserializeOwned>(
    dynamo: &aws_sdk_dynamodb::Client,
    q: PageQuery<'_>,
) -> Result<(Vec<T>, Option<String>), ApiError> {
    let mut values = HashMap::from([
        (":pk".to_string(), s(q.pk)),
        (":p".to_string(), s(q.prefix)),
    ]);
    let mut request = dynamo
        .query()
        .table_name(q.table)
        .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
        .consistent_read(true)
        .limit(q.limit as i32);
    if let Some((expression, filter_values)) = q.filter {
        values.extend(filter_values);
        request = request.filter_expression(expression);
    }
    if let Some(after) = &q.after_id {
        request = request.set_exclusive_start_key(Some(HashMap::from([
            ("pk".to_string(), s(q.pk)),
            ("sk".to_string(), s(format!("{}{after}", q.prefix))),
        ])));
    }
    let out = request
        .set_expression_attribute_values(Some(values))
        .send()
        .await
        .map_err(StoreError::dynamo)?;
    let items = out
        .items
        .unwrap_or_default()
        .into_iter()
        .map(from_item)
        .collect::<Result<Vec<T>, _>>()?;
    let next = out
        .last_evaluated_key
        .and_then(|k| k.get("sk").and_then(|v| v.as_s().ok()).cloned())
        .and_then(|sk| sk.strip_prefix(q.prefix).map(str::to_owned));
    Ok((items, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_expressions_use_placeholders_for_every_name() {
        let u = Update::new()
            .set("name", &"x")
            .unwrap()
            .set("status", &3)
            .unwrap()
            .remove("filter");
        assert_eq!(u.expression(), "SET #a0 = :v0, #a1 = :v1 REMOVE #a2");
        assert_eq!(u.names["#a1"], "status");
        assert_eq!(u.values[":v0"], AttributeValue::S("x".into()));
    }
}
