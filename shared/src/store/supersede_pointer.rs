//! The supersede pointer (`SUPERSEDE#{account}#{key}`): per account and supersede key, the
//! notice that is current. A later notice takes the pointer over, conditionally on the notice it
//! saw there, so that of two racing notices exactly one wins each step.
//!
//! Retention: a pointer expires with the notice it made current at its fan-out
//! ([`crate::domain::retention::notice_ttl_seconds`] of the claim): it is needed while that
//! notice's deliveries may still be queued (a replacement cancels those) and to refuse an earlier
//! notice that arrives late, both far inside it. A pointer past its expiry reads as none and may
//! be claimed again. An operator's requeue of one of its notice's deliveries keeps it as long as
//! the notice ([`retain`]), so that a requeued delivery is still cancelled by a replacement.

use super::attrs::EXPIRES_AT;
use super::expr::{n, s, Expr};
use super::read;
use super::update::conditional_update;
use super::write::{built, Write};
use super::{from_item, to_item, StoreError};
use crate::domain::retention::{notice_ttl_seconds, notification_visible};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, NoticeId};
use aws_sdk_dynamodb::types::Put;
use serde::{Deserialize, Serialize};

/// The `kind` of a supersede pointer.
pub(crate) const SUPERSEDE_KIND: &str = "notice_supersede";
pub(crate) const SUPERSEDE_SK: &str = "CURRENT";

pub use super::keys::supersede_pk;

/// The current notice of a supersede key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SupersedePointer {
    pub notice_id: NoticeId,
    pub created_at: Timestamp,
    /// TTL, epoch **seconds**.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

impl SupersedePointer {
    /// The pointer naming `notice_id` as its key's current notice, written at `now`: it expires
    /// with a notice written then.
    pub(crate) fn to_notice(notice_id: NoticeId, created_at: Timestamp, now: Timestamp) -> Self {
        SupersedePointer {
            notice_id,
            created_at,
            expires_at: Some(crate::domain::retention::notice_ttl_seconds(now)),
        }
    }
}

/// A consistent read of the pointer of an account's supersede key; none once past its expiry.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    key: &str,
    now: Timestamp,
) -> Result<Option<SupersedePointer>, StoreError> {
    let pointer: Option<SupersedePointer> =
        read::get(dynamo, table, &supersede_pk(account_id, key), SUPERSEDE_SK)
            .await?
            .map(from_item)
            .transpose()?;
    Ok(pointer.filter(|p| notification_visible(p.expires_at, now)))
}

/// Points a key nobody holds yet (or whose pointer expired by `now`) at `current`.
pub fn claim(
    table: &str,
    account_id: &AccountId,
    key: &str,
    current: &SupersedePointer,
    now: Timestamp,
) -> Result<Write, StoreError> {
    pointer_put(
        table,
        account_id,
        key,
        current,
        "attribute_not_exists(pk) OR #expires <= :now",
        Expr::new()
            .name("#expires", EXPIRES_AT)
            .value(":now", n(now.seconds())),
    )
}

/// Points a key at `current` if it still points at `seen`.
pub(crate) fn take_over(
    table: &str,
    account_id: &AccountId,
    key: &str,
    current: &SupersedePointer,
    seen: &NoticeId,
) -> Result<Write, StoreError> {
    pointer_put(
        table,
        account_id,
        key,
        current,
        "notice_id = :seen",
        Expr::new().value(":seen", s(seen)),
    )
}

/// Keeps the pointer of an account's supersede key until [`notice_ttl_seconds`] of `at`, if it
/// still names `notice_id` and would expire before then (refused otherwise: it names a later
/// notice, or it is kept as long already). A requeue of one of the notice's deliveries at `at`
/// makes it; else the pointer could expire, and a later notice with the key claim it without
/// replacing this one, while the requeued delivery is still queued.
pub fn retain(
    table: &str,
    account_id: &AccountId,
    key: &str,
    notice_id: &NoticeId,
    at: Timestamp,
) -> Result<Write, StoreError> {
    let e = Expr::new()
        .name("#expires", EXPIRES_AT)
        .value(":expires", n(notice_ttl_seconds(at)))
        .value(":notice", s(notice_id));
    conditional_update(
        table,
        (supersede_pk(account_id, key), SUPERSEDE_SK.to_string()),
        "SET #expires = :expires".into(),
        "notice_id = :notice AND #expires < :expires".into(),
        &e,
    )
}

fn pointer_put(
    table: &str,
    account_id: &AccountId,
    key: &str,
    current: &SupersedePointer,
    condition: &str,
    e: Expr,
) -> Result<Write, StoreError> {
    let item = to_item(
        current,
        &supersede_pk(account_id, key),
        SUPERSEDE_SK,
        SUPERSEDE_KIND,
    )?;
    Ok(Write::Put(built(
        Put::builder()
            .table_name(table)
            .set_item(Some(item))
            .condition_expression(condition)
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    fn pointer() -> SupersedePointer {
        SupersedePointer {
            notice_id: "n2".parse().unwrap(),
            created_at: Timestamp(8),
            expires_at: Some(1_800_000_000),
        }
    }

    fn put(w: Write) -> Put {
        match w {
            Write::Put(p) => p,
            other => panic!("not a put: {other:?}"),
        }
    }

    #[test]
    fn a_free_key_is_claimed_only_if_nobody_holds_it() {
        let p = put(claim("t", &id("acct"), "weekly", &pointer(), Timestamp(5_999)).unwrap());
        assert_eq!(
            p.condition_expression(),
            Some("attribute_not_exists(pk) OR #expires <= :now")
        );
        assert_eq!(
            p.expression_attribute_names().unwrap()["#expires"],
            EXPIRES_AT
        );
        // Epoch seconds, as TTL stores them: a pointer expiring at second 5 is free at 5.999.
        assert_eq!(
            p.expression_attribute_values().unwrap()[":now"]
                .as_n()
                .unwrap(),
            "5"
        );
        assert_eq!(p.item()[EXPIRES_AT].as_n().unwrap(), "1800000000");
        assert_eq!(p.item()["pk"].as_s().unwrap(), "SUPERSEDE#acct#weekly");
        assert_eq!(p.item()["sk"].as_s().unwrap(), SUPERSEDE_SK);
        assert_eq!(p.item()["kind"].as_s().unwrap(), SUPERSEDE_KIND);
        assert_eq!(p.item()["notice_id"].as_s().unwrap(), "n2");
    }

    #[test]
    fn a_requeue_keeps_the_pointer_only_if_it_names_the_notice_and_only_for_longer() {
        let at = Timestamp(1_700_000_000_000);
        let u = crate::store::update::expect_update(
            retain("t", &id("acct"), "weekly", &id("n1"), at).unwrap(),
        );
        assert_eq!(u.key()["pk"].as_s().unwrap(), "SUPERSEDE#acct#weekly");
        assert_eq!(u.key()["sk"].as_s().unwrap(), SUPERSEDE_SK);
        assert_eq!(u.update_expression(), "SET #expires = :expires");
        assert_eq!(
            u.condition_expression(),
            Some("notice_id = :notice AND #expires < :expires")
        );
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":notice"].as_s().unwrap(), "n1");
        assert_eq!(
            values[":expires"].as_n().unwrap(),
            &notice_ttl_seconds(at).to_string()
        );
    }

    #[test]
    fn a_held_key_is_taken_over_only_from_the_notice_seen_there() {
        let p = put(take_over("t", &id("acct"), "weekly", &pointer(), &id("n1")).unwrap());
        assert_eq!(p.condition_expression(), Some("notice_id = :seen"));
        assert_eq!(
            p.expression_attribute_values().unwrap()[":seen"]
                .as_s()
                .unwrap(),
            "n1"
        );
        assert_eq!(p.item()["notice_id"].as_s().unwrap(), "n2");
    }
}
