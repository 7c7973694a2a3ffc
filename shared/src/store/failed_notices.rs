//! An account's notification deliveries that failed for good, in the order they failed: the
//! sparse `trouble` index of the notification table under `TROUBLE#{account}`. A delivery is on
//! it while it is `failed` (the attributes ride on the status write that fails it and leave with
//! the operator's requeue: [`NotificationDelivery::refresh_trouble`]); the index holds the whole
//! item, so a read is one query per page and no batch read.

use super::attrs::trouble;
use super::expr::{s, Expr};
use super::keys::trouble_key;
use super::notification_delivery::NotificationDelivery;
use super::read::{self, Query};
use super::{from_item, Item, StoreError};
use crate::domain::notification_delivery::{FailureReason, FAILURE_REASON_ATTRIBUTE};
use crate::ids::AccountId;

/// One page of an account's failed deliveries after position `after` (a `trouble_sort`),
/// oldest first; `exhausted_only`: those whose attempts ran out (an operator can requeue them).
pub(crate) fn failed_query(
    table: &str,
    account_id: &AccountId,
    after: Option<&str>,
    exhausted_only: bool,
    limit: i32,
    start: Option<Item>,
) -> Query {
    let mut key_condition = format!("{} = :k", trouble::KEY);
    let mut expr = Expr::new().value(":k", s(trouble_key(account_id)));
    if let Some(after) = after {
        key_condition.push_str(&format!(" AND {} > :after", trouble::SORT));
        expr = expr.value(":after", s(after));
    }
    let filter = exhausted_only.then(|| {
        expr = std::mem::take(&mut expr)
            .name("#failure_reason", FAILURE_REASON_ATTRIBUTE)
            .value(":exhausted", s(FailureReason::AttemptsExhausted.code()));
        "#failure_reason = :exhausted".to_string()
    });
    Query {
        table: table.to_string(),
        index: Some(trouble::INDEX.to_string()),
        key_condition,
        filter,
        expr,
        limit: Some(limit),
        start,
        ..Query::default()
    }
}

/// Up to `max` of an account's failed deliveries after `after`, oldest first, reading at most
/// `rounds` index pages, and whether the index was read to its end.
pub async fn failed(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    after: Option<&str>,
    exhausted_only: bool,
    max: usize,
    rounds: usize,
) -> Result<(Vec<NotificationDelivery>, bool), StoreError> {
    let mut found = Vec::new();
    let mut start = None;
    for _ in 0..rounds {
        let want = (max - found.len()).max(1) as i32;
        let q = failed_query(table, account_id, after, exhausted_only, want, start);
        let page = read::query_page(dynamo, &q).await?;
        for item in page.items {
            found.push(from_item(item)?);
        }
        match page.next {
            Some(next) if found.len() < max => start = Some(next),
            Some(_) => return Ok((found, false)),
            None => return Ok((found, true)),
        }
    }
    Ok((found, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    #[test]
    fn the_failed_deliveries_of_an_account_are_read_on_its_trouble_key_after_a_position() {
        let q = failed_query(
            "t",
            &id("acct"),
            Some("000000000000005#n/email-0"),
            true,
            10,
            None,
        );
        assert_eq!(q.index.as_deref(), Some("trouble"));
        assert_eq!(
            q.key_condition,
            "trouble_key = :k AND trouble_sort > :after"
        );
        assert_eq!(q.expr.values[":k"].as_s().unwrap(), "TROUBLE#acct");
        assert_eq!(q.filter.as_deref(), Some("#failure_reason = :exhausted"));
        assert_eq!(
            q.expr.values[":exhausted"].as_s().unwrap(),
            "attempts_exhausted"
        );
        let all = failed_query("t", &id("acct"), None, false, 10, None);
        assert_eq!(all.key_condition, "trouble_key = :k");
        assert!(all.filter.is_none() && !all.backwards);
    }
}
