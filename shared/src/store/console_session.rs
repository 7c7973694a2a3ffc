//! Console sessions and used login links, the state a console request is checked against.
//!
//! | item            | pk                   | sk        | table    |
//! |-----------------|----------------------|-----------|----------|
//! | session         | `CSESSION#{session}` | `SESSION` | delivery |
//! | used login link | `CLINK#{link nonce}` | `USED`    | delivery |
//!
//! A session item says who the session is for, what it was opened with (an account token,
//! whose item every request reads again, or an operator's identity) and until when it lasts;
//! signing out deletes it. A used-link item is put, on the condition that none exists, in the
//! transaction that opens the session: a link opens one session at most. Both expire (TTL
//! `expires_at`) when they stop mattering; their kinds are none the delivery table's stream
//! filters pass.

use super::attrs::EXPIRES_AT;
use super::expr::{n, s};
use super::keys::{console_link_pk, console_session_pk, CONSOLE_LINK_SK, CONSOLE_SESSION_SK};
use super::read;
use super::write::{built, put_new, Write};
use super::{to_item, StoreError};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, TokenId};
use aws_sdk_dynamodb::types::Delete;
use serde::{Deserialize, Serialize};

/// The `kind` of a session item.
pub(crate) const SESSION_KIND: &str = "console_session";
/// The `kind` of a used-link item.
pub(crate) const LINK_KIND: &str = "console_link_used";

/// A stored console session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ConsoleSession {
    /// The random nonce the session's signed cookie carries.
    pub session_id: String,
    /// `operator` or `account`.
    pub audience: String,
    /// The operator's id, or who signed in to the account (a token, an operator's link).
    pub subject: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<AccountId>,
    /// The account token the session was opened with, if it was: the session lasts while the
    /// token is live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<TokenId>,
    pub created_at: Timestamp,
    pub expires: Timestamp,
}

impl ConsoleSession {
    /// A session of `audience` (`operator` or `account`) opened at `created_at`.
    pub fn new(
        session_id: String,
        audience: &str,
        subject: String,
        account_id: Option<AccountId>,
        token_id: Option<TokenId>,
        created_at: Timestamp,
        expires: Timestamp,
    ) -> Self {
        ConsoleSession {
            session_id,
            audience: audience.to_owned(),
            subject,
            account_id,
            token_id,
            created_at,
            expires,
        }
    }

    /// The item's key.
    pub fn key(session_id: &str) -> (String, String) {
        (
            console_session_pk(session_id),
            CONSOLE_SESSION_SK.to_string(),
        )
    }
}

/// Opens `session` (a new item), and with `link` (a login link's nonce and expiry) records the
/// link's use in the same transaction: refused when the link was used already.
pub fn open(
    table: &str,
    session: &ConsoleSession,
    link: Option<(&str, Timestamp)>,
    with: Option<Write>,
) -> Result<Write, StoreError> {
    let (pk, sk) = ConsoleSession::key(&session.session_id);
    let mut item = to_item(session, &pk, &sk, SESSION_KIND)?;
    item.insert(EXPIRES_AT.into(), n(ttl_seconds(session.expires)));
    let mut writes = vec![put_new(table, item)?];
    if let Some((nonce, expires)) = link {
        writes.push(put_new(table, used_link_item(nonce, expires))?);
    }
    writes.extend(with);
    Write::all(writes)
}

fn used_link_item(nonce: &str, expires: Timestamp) -> super::Item {
    [
        ("pk".to_string(), s(console_link_pk(nonce))),
        ("sk".to_string(), s(CONSOLE_LINK_SK)),
        ("kind".to_string(), s(LINK_KIND)),
        (EXPIRES_AT.to_string(), n(ttl_seconds(expires))),
    ]
    .into_iter()
    .collect()
}

/// DynamoDB removes an expired item within days, not at once: readers compare `expires`
/// themselves; the TTL only sweeps.
fn ttl_seconds(expires: Timestamp) -> i64 {
    expires.seconds() + 1
}

/// A consistent read of a session.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    session_id: &str,
) -> Result<Option<ConsoleSession>, StoreError> {
    read::get_as(dynamo, table, ConsoleSession::key(session_id)).await
}

/// Whether the login link of `nonce` has been used (a consistent read).
pub(crate) async fn link_used(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    nonce: &str,
) -> Result<bool, StoreError> {
    Ok(
        read::get(dynamo, table, &console_link_pk(nonce), CONSOLE_LINK_SK)
            .await?
            .is_some(),
    )
}

/// Ends a session (sign-out): deletes its item (unconditional: repeating it is harmless).
pub(crate) fn close(table: &str, session_id: &str) -> Result<Write, StoreError> {
    let (pk, sk) = ConsoleSession::key(session_id);
    Ok(Write::Delete(built(
        Delete::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .build(),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::TransactWriteItem;

    fn session() -> ConsoleSession {
        ConsoleSession {
            session_id: "n1".into(),
            audience: "account".into(),
            subject: "token t1".into(),
            account_id: Some("a1".parse().unwrap()),
            token_id: Some("01tok".parse().unwrap()),
            created_at: Timestamp(1_000),
            expires: Timestamp(3_600_000),
        }
    }

    #[test]
    fn a_session_opened_by_a_link_records_the_links_use_once_in_one_transaction() {
        let Write::All(items) =
            open("t", &session(), Some(("l1", Timestamp(900_000))), None).unwrap()
        else {
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
                puts[i].item()["expires_at"].as_n().unwrap().clone(),
            )
        };
        assert_eq!(
            key(0),
            ("CSESSION#n1".into(), "SESSION".into(), "3601".into())
        );
        assert_eq!(key(1), ("CLINK#l1".into(), "USED".into(), "901".into()));
    }

    #[test]
    fn closing_a_session_deletes_its_item() {
        let Write::Delete(d) = close("t", "n1").unwrap() else {
            panic!("not a delete")
        };
        assert_eq!(d.key()["pk"].as_s().unwrap(), "CSESSION#n1");
        assert_eq!(d.key()["sk"].as_s().unwrap(), "SESSION");
    }
}
