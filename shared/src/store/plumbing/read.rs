//! Every read of the store meets the DynamoDB SDK here: a consistent read of one item, queries
//! of one partition or one index (a [`Query`] value, built by the item module that owns the
//! index), and [`items_in_order`] for the items behind a keys-only index page.

use super::expr::{s, Expr};
use super::item::{Item, StoreError};
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use std::collections::HashMap;

/// A consistent read of one item.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
    sk: &str,
) -> Result<Option<Item>, StoreError> {
    get_with(dynamo, table, pk, sk, Consistency::Strong, None).await
}

/// A consistent read of one item as `T`.
pub(crate) async fn get_as<T: serde::de::DeserializeOwned>(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    (pk, sk): (String, String),
) -> Result<Option<T>, StoreError> {
    get(dynamo, table, &pk, &sk)
        .await?
        .map(super::item::from_item)
        .transpose()
}

/// How fresh a read must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Consistency {
    /// Sees every write acknowledged before it (costs twice an eventual read).
    Strong,
    /// May miss writes of the last second (half the price).
    Eventual,
}

/// A read of one item, of only the `projection` attributes when given.
pub(crate) async fn get_with(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
    sk: &str,
    consistency: Consistency,
    projection: Option<&str>,
) -> Result<Option<Item>, StoreError> {
    Ok(dynamo
        .get_item()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(sk))
        .consistent_read(consistency == Consistency::Strong)
        .set_projection_expression(projection.map(str::to_string))
        .send()
        .await
        .map_err(StoreError::dynamo)?
        .item)
}

/// One query of a partition of the table or of an index.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub table: String,
    pub index: Option<String>,
    pub key_condition: String,
    pub filter: Option<String>,
    pub projection: Option<String>,
    pub expr: Expr,
    pub limit: Option<i32>,
    pub start: Option<Item>,
    /// Newest (highest sort key) first.
    pub backwards: bool,
    /// Index queries are always eventually consistent; table queries are consistent unless this
    /// is set.
    pub eventual: bool,
}

/// One page of a query.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub items: Vec<Item>,
    /// Where the next page starts (`None`: the query is done).
    pub next: Option<Item>,
}

/// One page of `q`.
pub(crate) async fn query_page(
    dynamo: &aws_sdk_dynamodb::Client,
    q: &Query,
) -> Result<Page, StoreError> {
    let out = dynamo
        .query()
        .table_name(&q.table)
        .set_index_name(q.index.clone())
        .key_condition_expression(&q.key_condition)
        .set_filter_expression(q.filter.clone())
        .set_projection_expression(q.projection.clone())
        .set_expression_attribute_names(q.expr.names_opt())
        .set_expression_attribute_values(q.expr.values_opt())
        .set_limit(q.limit)
        .set_exclusive_start_key(q.start.clone())
        .scan_index_forward(!q.backwards)
        .set_consistent_read((q.index.is_none() && !q.eventual).then_some(true))
        .send()
        .await
        .map_err(StoreError::dynamo)?;
    Ok(Page {
        items: out.items.unwrap_or_default(),
        next: out.last_evaluated_key.filter(|k| !k.is_empty()),
    })
}

/// Every item `q` finds, page after page (for partitions known to be small).
pub async fn query_all(
    dynamo: &aws_sdk_dynamodb::Client,
    q: &Query,
) -> Result<Vec<Item>, StoreError> {
    let mut q = q.clone();
    let mut items = Vec::new();
    loop {
        let page = query_page(dynamo, &q).await?;
        items.extend(page.items);
        match page.next {
            Some(next) => q.start = Some(next),
            None => return Ok(items),
        }
    }
}

/// Keys per `BatchGetItem` (DynamoDB's limit).
const BATCH: usize = 100;
/// Rounds of `BatchGetItem` for keys DynamoDB leaves unprocessed before giving up.
const ROUNDS: u32 = 5;

fn key_of(item: &Item) -> Option<(String, String)> {
    Some((
        item.get("pk")?.as_s().ok()?.clone(),
        item.get("sk")?.as_s().ok()?.clone(),
    ))
}

/// The table's items for index entries (anything carrying `pk` and `sk`), in the entries' order;
/// items gone since the index was read are left out. Eventually consistent, like the index read
/// before it: every write made from these items is conditional on the state it expects.
///
/// The `by_subscription` and `listing` indexes hold keys only (an index that held the attributes
/// claims, outcomes and roll-ups change would bill a second write for every one of them), so
/// their readers query the index for keys and fetch the items here.
pub(crate) async fn items_in_order(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    entries: &[Item],
) -> Result<Vec<Item>, StoreError> {
    let mut found: HashMap<(String, String), Item> = HashMap::new();
    for chunk in entries.chunks(BATCH) {
        let mut wanted: Vec<HashMap<String, AttributeValue>> = chunk
            .iter()
            .filter_map(key_of)
            .map(|(pk, sk)| HashMap::from([("pk".into(), s(pk)), ("sk".into(), s(sk))]))
            .collect();
        for round in 0..ROUNDS {
            if wanted.is_empty() {
                break;
            }
            if round > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(20 << round)).await;
            }
            let keys = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut wanted)))
                .build()
                .map_err(|e| StoreError::Dynamo(e.to_string()))?;
            let out = dynamo
                .batch_get_item()
                .request_items(table, keys)
                .send()
                .await
                .map_err(StoreError::dynamo)?;
            for item in out
                .responses
                .unwrap_or_default()
                .remove(table)
                .unwrap_or_default()
            {
                if let Some(k) = key_of(&item) {
                    found.insert(k, item);
                }
            }
            // DynamoDB may leave keys unprocessed under load: ask for those again.
            wanted = out
                .unprocessed_keys
                .unwrap_or_default()
                .remove(table)
                .map(|k| k.keys)
                .unwrap_or_default();
        }
        if !wanted.is_empty() {
            return Err(StoreError::Dynamo(format!(
                "BatchGetItem left {} keys unprocessed after {ROUNDS} rounds",
                wanted.len()
            )));
        }
    }
    Ok(entries
        .iter()
        .filter_map(|e| found.remove(&key_of(e)?))
        .collect())
}
