//! Console inbox entries: a console delivery *is* the in-app message (created `delivered` by the
//! fan-out, with its subject and body), and the sparse `inbox` index lists a recipient's
//! entries in time order under `INBOX#{account}#{recipient}`.
//!
//! Retention: an entry expires as the delivery it is ([`RETENTION`] after its creation), before
//! its notice does, so the inbox never shows an entry whose notice is gone; an entry past its
//! expiry is left out (TTL deletes lazily).
//!
//! [`RETENTION`]: crate::domain::event::RETENTION

use super::attrs::inbox;
use super::expr::{s, Expr};
use super::notification_delivery::NotificationDelivery;
use super::read::{self, Query};
use super::{from_item, StoreError};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, NoticeId};

pub use super::keys::inbox_key;

/// The provider reference of a console delivery (the console is its own provider).
pub(crate) fn console_ref(notice_id: &NoticeId, delivery_key: &str) -> String {
    format!("console:{notice_id}/{delivery_key}")
}

/// The query of a recipient's newest `limit` entries (one page).
pub(crate) fn newest_query(
    table: &str,
    account_id: &AccountId,
    recipient: &str,
    limit: i32,
) -> Query {
    Query {
        table: table.to_string(),
        index: Some(inbox::INDEX.to_string()),
        key_condition: format!("{} = :k", inbox::KEY),
        expr: Expr::new().value(":k", s(inbox_key(account_id, recipient))),
        limit: Some(limit),
        backwards: true,
        ..Query::default()
    }
}

/// A recipient's newest `limit` console entries, newest first (one index page), without those
/// past their expiry at `now` (the oldest: they end the page).
pub async fn newest(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    recipient: &str,
    limit: i32,
    now: Timestamp,
) -> Result<Vec<NotificationDelivery>, StoreError> {
    let entries: Vec<NotificationDelivery> =
        read::query_page(dynamo, &newest_query(table, account_id, recipient, limit))
            .await?
            .items
            .into_iter()
            .map(from_item)
            .collect::<Result<_, _>>()?;
    Ok(entries.into_iter().filter(|d| d.visible(now)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    #[test]
    fn the_inbox_is_read_newest_first_on_its_index() {
        let q = newest_query("t", &id("acct"), "ops", 20);
        assert_eq!(q.index.as_deref(), Some("inbox"));
        assert_eq!(q.key_condition, "inbox_key = :k");
        assert_eq!(q.expr.values[":k"].as_s().unwrap(), "INBOX#acct#ops");
        assert_eq!(q.limit, Some(20));
        assert!(q.backwards);
        assert!(q.filter.is_none() && q.start.is_none());
    }
}
