//! Reading the table's items behind a keys-only index page.
//!
//! The `by_subscription` and `listing` indexes hold keys only: an index that held the attributes
//! claims, outcomes and roll-ups change would bill a second write for every one of them. Readers
//! query the index for keys and fetch the items with `BatchGetItem`.

use super::expr::s;
use super::{Item, StoreError};
use aws_sdk_dynamodb::types::KeysAndAttributes;
use std::collections::HashMap;

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
pub async fn items_in_order(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    entries: &[Item],
) -> Result<Vec<Item>, StoreError> {
    let mut found: HashMap<(String, String), Item> = HashMap::new();
    for chunk in entries.chunks(BATCH) {
        let mut wanted: Vec<Item> = chunk
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
