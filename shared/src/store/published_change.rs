//! A change published through the API (for an owning application whose records are not in
//! DynamoDB), and the idempotency key a publisher may send with it.
//!
//! | item          | table   | key                                       |
//! |---------------|---------|-------------------------------------------|
//! | change        | changes | `account_id` / `change_id`                |
//! | publish key   | delivery| `PUBKEY#{account}#{sha256 of key}` / `KEY`|
//!
//! The change is written exactly as the owning application writes its own (the serialized
//! [`Change`]), into the same changes table, so the same stream and the same ingest run it: one
//! path, one set of guarantees. Beside it the item says who published it ([`PUBLISHED_BY`]: the
//! publish token, or the operator), which ingest does not read. The put is conditional on the change id: a repeated publish of the
//! same change is refused by storage and is a no-op, not a second event.
//!
//! A publish key maps a publisher's `Idempotency-Key` to the change id it was first given. It is
//! written before the change (a conditional put: the first one wins), so a repeat finds the id and
//! re-puts the change under it, which the change's own condition makes a no-op; a publish cut
//! short between the two writes is finished by its repeat. Keys expire after
//! [`PUBLISH_KEY_DAYS`] (the table's TTL).

use super::expr::s;
use super::keys::{publish_key_pk, PUBLISH_KEY_SK};
use super::read;
use super::write::{built, put_new, Write};
use super::{Item, StoreError};
use crate::domain::change::Change;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, TokenId};
use aws_sdk_dynamodb::types::Put;
use sha2::{Digest, Sha256};

/// The `kind` of a publish key item.
pub(crate) const KEY_KIND: &str = "publish_key";
/// How long an idempotency key is remembered.
pub(crate) const PUBLISH_KEY_DAYS: i64 = 1;

/// The attribute of a published change that says who published it ([`Publisher::as_stored`]);
/// ingest reads the change without it, so deliveries do not carry it.
pub(crate) const PUBLISHED_BY: &str = "published_by";

/// Who published a change through the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Publisher {
    /// A publish token (its id).
    Token(TokenId),
    /// An operator (their identity).
    Operator(String),
}

impl Publisher {
    /// `token {id}` or `operator {identity}`.
    pub(crate) fn as_stored(&self) -> String {
        match self {
            Publisher::Token(id) => format!("token {id}"),
            Publisher::Operator(who) => format!("operator {who}"),
        }
    }
}

/// The put of `change` into the changes table with its `publisher`, refused when a change with
/// its id exists.
pub fn put(
    changes_table: &str,
    change: &Change,
    publisher: &Publisher,
) -> Result<Write, StoreError> {
    let mut item: Item = serde_dynamo::to_item(change).map_err(|e| StoreError::Shape {
        key: format!("{}/{}", change.account_id, change.change_id),
        message: e.to_string(),
    })?;
    item.insert(PUBLISHED_BY.into(), s(publisher.as_stored()));
    Ok(Write::Put(built(
        Put::builder()
            .table_name(changes_table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(change_id)")
            .build(),
    )?))
}

/// The SHA-256 (hex) of a publisher's idempotency key.
pub(crate) fn key_hash(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn key(account_id: &AccountId, idempotency_key: &str) -> (String, String) {
    (
        publish_key_pk(account_id, &key_hash(idempotency_key)),
        PUBLISH_KEY_SK.to_string(),
    )
}

/// The first claim of `idempotency_key` for `change_id`; refused when the key was claimed.
pub(crate) fn claim_key(
    table: &str,
    account_id: &AccountId,
    idempotency_key: &str,
    change_id: &ChangeId,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id, idempotency_key);
    let expires = now.millis() / 1000 + PUBLISH_KEY_DAYS * 24 * 60 * 60;
    let item: Item = [
        ("pk".to_string(), s(pk)),
        ("sk".to_string(), s(sk)),
        ("kind".to_string(), s(KEY_KIND)),
        ("change_id".to_string(), s(change_id)),
        ("expires_at".to_string(), super::expr::n(expires)),
    ]
    .into_iter()
    .collect();
    put_new(table, item)
}

/// The change id a claimed key stands for (a consistent read).
pub async fn claimed(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    idempotency_key: &str,
) -> Result<Option<ChangeId>, StoreError> {
    let (pk, sk) = key(account_id, idempotency_key);
    Ok(read::get(dynamo, table, &pk, &sk).await?.and_then(|item| {
        item.get("change_id")
            .and_then(|v| v.as_s().ok())
            .map(ChangeId::from_stored)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    #[test]
    fn a_change_is_put_once_by_its_id_and_a_key_is_claimed_once() {
        let change = crate::domain::change::tests::sample_change();
        let publisher = Publisher::Token(id("01tok"));
        let Write::Put(p) = put("changes", &change, &publisher).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.table_name(), "changes");
        assert_eq!(
            p.condition_expression(),
            Some("attribute_not_exists(change_id)")
        );
        assert_eq!(p.item()[PUBLISHED_BY].as_s().unwrap(), "token 01tok");
        let back: Change = serde_dynamo::from_item(p.item().clone()).unwrap();
        assert_eq!(back, change);
        assert_eq!(
            Publisher::Operator("ops-1".into()).as_stored(),
            "operator ops-1"
        );
        let Write::Put(k) = claim_key("t", &id("a1"), "k 1", &id("01c"), Timestamp(1_000)).unwrap()
        else {
            panic!("not a put")
        };
        assert_eq!(
            k.item()["pk"].as_s().unwrap(),
            &format!("PUBKEY#a1#{}", key_hash("k 1"))
        );
        assert_eq!(k.item()["expires_at"].as_n().unwrap(), "86401");
        assert_eq!(k.condition_expression(), Some("attribute_not_exists(pk)"));
    }
}
