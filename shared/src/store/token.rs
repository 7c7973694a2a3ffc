//! Token items: an API or pull token's stored hash (`TOKEN#{token id}` / `TOKEN`, found in one
//! consistent read by the id a presented token carries), and its reference in the account's
//! token partition (`TOKENS#{account}` / `TOKEN#{token id}`), so an account's or an
//! integration's tokens can be listed and revoked together. The token partition is kept out of
//! the account's configuration partition, so loading a configuration never reads tokens.

use super::expr::{n, s};
use super::keys::{token_pk, TOKEN_SK};
use super::page::{self, PrefixPage};
use super::read;
use super::write::put_new;
use super::write::{built, Write};
use super::{to_item, Item, StoreError};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId, TokenId};
use aws_sdk_dynamodb::types::{Delete, Update};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The `kind` of token items and of their reference items.
pub const TOKEN_KIND: &str = "token";
pub const TOKEN_REF_KIND: &str = "token_ref";
use super::keys::TOKEN_REF_PREFIX;
pub use super::keys::{token_ref_pk, token_ref_sk};

/// What a token may be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    /// An account's token: the management API (`/v1/integrations`, `/v1/subscriptions`).
    Acct,
    /// An integration's token: the adapter's routes (pull cursor).
    Intg,
    /// A publish token: publishes changes for its account (`POST /v1/changes`), nothing else.
    Pub,
}

impl TokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Acct => "acct",
            TokenKind::Intg => "intg",
            TokenKind::Pub => "pub",
        }
    }
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "acct" => Some(TokenKind::Acct),
            "intg" => Some(TokenKind::Intg),
            "pub" => Some(TokenKind::Pub),
            _ => None,
        }
    }
}

impl fmt::Display for TokenKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The stored token (item `TOKEN#{token_id}` / `TOKEN`, kind `token`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TokenRecord {
    pub token_id: TokenId,
    pub token_kind: TokenKind,
    pub account_id: AccountId,
    /// `intg` tokens: the integration the token speaks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration_id: Option<IntegrationId>,
    /// Hex SHA-256 of the secret part.
    pub secret_sha256: String,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// When the token stops working, if it was issued with an expiry (not the TTL attribute:
    /// the item stays, so a presented expired token is told apart from nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<Timestamp>,
}

/// The reference item of a token in its account's token partition.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TokenRef {
    pub token_id: TokenId,
    pub token_kind: TokenKind,
    pub account_id: AccountId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration_id: Option<IntegrationId>,
    pub created_at: Timestamp,
}

impl TokenRecord {
    /// A new, live token whose secret hashes to `secret_sha256`.
    pub fn new(
        token_id: TokenId,
        token_kind: TokenKind,
        account_id: AccountId,
        integration_id: Option<IntegrationId>,
        secret_sha256: String,
        now: Timestamp,
    ) -> Self {
        TokenRecord {
            token_id,
            token_kind,
            account_id,
            integration_id,
            secret_sha256,
            created_at: now,
            revoked_at: None,
            expires: None,
        }
    }

    /// The same token, ending at `expires` (when given).
    pub fn expiring(self, expires: Option<Timestamp>) -> Self {
        TokenRecord { expires, ..self }
    }

    /// Whether the token works at `now`: not revoked, not expired.
    pub(crate) fn is_live(&self, now: Timestamp) -> bool {
        self.revoked_at.is_none() && self.expires.is_none_or(|e| e > now)
    }

    pub fn item(&self) -> Result<Item, StoreError> {
        to_item(self, &token_pk(&self.token_id), TOKEN_SK, TOKEN_KIND)
    }

    pub fn reference(&self) -> TokenRef {
        TokenRef {
            token_id: self.token_id.clone(),
            token_kind: self.token_kind,
            account_id: self.account_id.clone(),
            integration_id: self.integration_id.clone(),
            created_at: self.created_at,
        }
    }

    pub fn reference_item(&self) -> Result<Item, StoreError> {
        to_item(
            &self.reference(),
            &token_ref_pk(&self.account_id),
            &token_ref_sk(&self.token_id),
            TOKEN_REF_KIND,
        )
    }
}

/// A consistent read of a token by its id.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    token_id: &TokenId,
) -> Result<Option<TokenRecord>, StoreError> {
    read::get(dynamo, table, &token_pk(token_id), TOKEN_SK)
        .await?
        .map(super::from_item)
        .transpose()
}

/// Stores a token with its reference (two puts, each refused if its key is taken; for a
/// transaction, alone or with the item the token is issued with).
pub fn create(table: &str, record: &TokenRecord) -> Result<Write, StoreError> {
    Write::all([
        put_new(table, record.item()?)?,
        put_new(table, record.reference_item()?)?,
    ])
}

/// Marks the token revoked (it then fails verification); refused when it is gone or was revoked
/// already.
pub(crate) fn revoke(table: &str, token_id: &TokenId, now: Timestamp) -> Result<Write, StoreError> {
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(token_pk(token_id)))
            .key("sk", s(TOKEN_SK))
            .update_expression("SET revoked_at = :now")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(revoked_at)")
            .expression_attribute_values(":now", n(now.millis()))
            .build(),
    )?))
}

/// Drops a token's reference from its account's token partition (unconditional: repeating it
/// is harmless).
pub(crate) fn drop_reference(
    table: &str,
    account_id: &AccountId,
    token_id: &TokenId,
) -> Result<Write, StoreError> {
    Ok(Write::Delete(built(
        Delete::builder()
            .table_name(table)
            .key("pk", s(token_ref_pk(account_id)))
            .key("sk", s(token_ref_sk(token_id)))
            .build(),
    )?))
}

/// Token references read per page when an account's tokens are walked.
pub(crate) const REFERENCE_PAGE: u32 = 100;

/// One page of the account's token references, and the token id to continue after.
pub(crate) async fn references(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    after_id: Option<&TokenId>,
) -> Result<(Vec<TokenRef>, Option<TokenId>), StoreError> {
    let pk = token_ref_pk(account_id);
    let (refs, next) = page::read(
        dynamo,
        &PrefixPage {
            table,
            pk: &pk,
            prefix: TOKEN_REF_PREFIX,
            limit: REFERENCE_PAGE,
            after_id: after_id.map(TokenId::as_str),
            filter: None,
        },
    )
    .await?;
    Ok((refs, next.map(TokenId::from_stored)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use aws_sdk_dynamodb::types::TransactWriteItem;

    fn record() -> TokenRecord {
        TokenRecord {
            token_id: "01tok".parse().unwrap(),
            token_kind: TokenKind::Intg,
            account_id: "a1".parse().unwrap(),
            integration_id: Some("i1".parse().unwrap()),
            secret_sha256: "ab".repeat(32),
            created_at: Timestamp(9),
            revoked_at: None,
            expires: None,
        }
    }

    #[test]
    fn a_token_is_stored_with_its_reference_in_one_transaction_of_new_items() {
        let Write::All(items) = create("t", &record()).unwrap() else {
            panic!("not a transaction")
        };
        let puts: Vec<_> = items.iter().filter_map(TransactWriteItem::put).collect();
        assert_eq!(puts.len(), 2);
        assert!(puts
            .iter()
            .all(|p| p.condition_expression() == Some("attribute_not_exists(pk)")));
        let key = |i: usize| {
            (
                puts[i].item()["pk"].as_s().unwrap().clone(),
                puts[i].item()["sk"].as_s().unwrap().clone(),
                puts[i].item()["kind"].as_s().unwrap().clone(),
            )
        };
        assert_eq!(
            key(0),
            ("TOKEN#01tok".into(), "TOKEN".into(), "token".into())
        );
        assert_eq!(
            key(1),
            ("TOKENS#a1".into(), "TOKEN#01tok".into(), "token_ref".into())
        );
        assert!(
            !puts[1].item().contains_key("secret_sha256"),
            "references carry no hash"
        );
    }

    #[test]
    fn a_revocation_marks_a_live_token_once_and_drops_its_reference() {
        let Write::Update(u) = revoke("t", &id("01tok"), Timestamp(42)).unwrap() else {
            panic!("not an update")
        };
        assert_eq!(u.key()["pk"].as_s().unwrap(), "TOKEN#01tok");
        assert_eq!(u.update_expression(), "SET revoked_at = :now");
        assert_eq!(
            u.condition_expression(),
            Some("attribute_exists(pk) AND attribute_not_exists(revoked_at)")
        );
        assert_eq!(u.expression_attribute_values().unwrap()[":now"], n(42));
        let Write::Delete(d) = drop_reference("t", &id("a1"), &id("01tok")).unwrap() else {
            panic!("not a delete")
        };
        assert_eq!(d.key()["pk"].as_s().unwrap(), "TOKENS#a1");
        assert_eq!(d.key()["sk"].as_s().unwrap(), "TOKEN#01tok");
        assert!(d.condition_expression().is_none());
    }
}
