//! The dispatch work row of a queued notification delivery (`WORK#{key}` in the notice's
//! partition), carrying a `dispatch_id`. Inserting it publishes a message naming that id (the
//! table's stream); the message names the dispatch id, and the row is deleted when the delivery
//! leaves the queue for good. A message whose dispatch id is not the row's is stale. Both writes
//! are items of a delivery's transaction ([`super::notification_delivery`]).

use super::expr::s;
use super::notice::{notice_pk, partition_of};
use super::read;
use super::write::{built, Write};
use super::{from_item, to_item, StoreError};
use crate::domain::time::Timestamp;
use crate::ids::NoticeId;
use aws_sdk_dynamodb::types::Delete;
use serde::{Deserialize, Serialize};

/// The `kind` of a work row.
pub(crate) const WORK_KIND: &str = "notification_work";
pub use super::keys::{work_sk, WORK_PREFIX};

/// The dispatch work of a queued delivery. Inserting it publishes a message naming `dispatch_id`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkRow {
    pub notice_id: NoticeId,
    pub delivery_key: String,
    pub dispatch_id: String,
    pub created_at: Timestamp,
}

impl WorkRow {
    pub fn fresh(notice_id: &NoticeId, delivery_key: &str, now: Timestamp) -> Self {
        WorkRow {
            notice_id: notice_id.clone(),
            delivery_key: delivery_key.to_string(),
            dispatch_id: ulid::Ulid::new().to_string(),
            created_at: now,
        }
    }

    pub fn message(&self) -> NotificationWork {
        NotificationWork {
            notice_id: self.notice_id.clone(),
            delivery_key: self.delivery_key.clone(),
            dispatch_id: self.dispatch_id.clone(),
        }
    }
}

/// The body of a notification queue message.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct NotificationWork {
    pub notice_id: NoticeId,
    pub delivery_key: String,
    pub dispatch_id: String,
}

/// A consistent read of a delivery's work row.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notice_id: &NoticeId,
    delivery_key: &str,
) -> Result<Option<WorkRow>, StoreError> {
    read::get(dynamo, table, &notice_pk(notice_id), &work_sk(delivery_key))
        .await?
        .map(from_item)
        .transpose()
}

/// A notice's work rows, in key order.
pub(crate) async fn of_notice(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notice_id: &NoticeId,
) -> Result<Vec<WorkRow>, StoreError> {
    partition_of(dynamo, table, notice_id, WORK_PREFIX, None, None).await
}

/// Writes `row` (a fresh dispatch id replaces the one before: its stream record publishes).
pub fn put(table: &str, row: &WorkRow) -> Result<Write, StoreError> {
    let item = to_item(
        row,
        &notice_pk(&row.notice_id),
        &work_sk(&row.delivery_key),
        WORK_KIND,
    )?;
    super::write::put(table, item)
}

/// Deletes a delivery's work row (it left the queue for good).
pub fn delete(table: &str, notice_id: &NoticeId, delivery_key: &str) -> Result<Write, StoreError> {
    Ok(Write::Delete(built(
        Delete::builder()
            .table_name(table)
            .key("pk", s(notice_pk(notice_id)))
            .key("sk", s(work_sk(delivery_key)))
            .build(),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    #[test]
    fn a_work_row_is_put_unconditionally_in_its_notice_partition() {
        let row = WorkRow::fresh(&id("n1"), "email-0", Timestamp(4));
        let Write::Put(p) = put("t", &row).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.table_name(), "t");
        assert_eq!(p.condition_expression(), None);
        let item = p.item();
        assert_eq!(item["pk"].as_s().unwrap(), "NOTICE#n1");
        assert_eq!(item["sk"].as_s().unwrap(), "WORK#email-0");
        assert_eq!(item["kind"].as_s().unwrap(), WORK_KIND);
        assert_eq!(item["dispatch_id"].as_s().unwrap(), &row.dispatch_id);
        assert_eq!(row.message().dispatch_id, row.dispatch_id);
    }

    #[test]
    fn a_work_row_is_deleted_by_its_key() {
        let Write::Delete(d) = delete("t", &id("n1"), "slack-2").unwrap() else {
            panic!("not a delete")
        };
        assert_eq!(d.key()["pk"].as_s().unwrap(), "NOTICE#n1");
        assert_eq!(d.key()["sk"].as_s().unwrap(), "WORK#slack-2");
        assert_eq!(d.condition_expression(), None);
    }

    #[test]
    fn fresh_rows_have_fresh_dispatch_ids() {
        let a = WorkRow::fresh(&id("n"), "k", Timestamp(1));
        let b = WorkRow::fresh(&id("n"), "k", Timestamp(1));
        assert_ne!(a.dispatch_id, b.dispatch_id);
    }
}
