//! Integration history for operators (where they see what their retries and replays did): a
//! subscription's deliveries by status and time (newest change first: a pull subscription's on
//! `by_subscription`, a push subscription's through its account's event listing), and a
//! delivery's attempts.

use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, SubscriptionId};
use crate::operations::{Ops, OpsError};
use crate::store::cursor;
use crate::store::delivery::{
    gather_by_subscription, AttemptRecord, Delivery, Filter, Gathered, SubscriptionRange, Upper,
};

/// Index pages one listing evaluates before it answers with what it has.
const MAX_ROUNDS: usize = 10;
/// Index entries one page evaluates.
const INDEX_PAGE: i32 = 100;

/// Which deliveries to list.
#[derive(Debug, Clone, Default)]
pub struct DeliveryQuery {
    /// Any of these statuses (empty: every status).
    pub statuses: Vec<DeliveryStatus>,
    /// Changes that occurred at or after `from` …
    pub from: Option<Timestamp>,
    /// … and before `to`.
    pub to: Option<Timestamp>,
    /// Only the deliveries of this record's changes (a filter on the items read: see
    /// [`Filter::record_id`] for its cost).
    pub record_id: Option<String>,
    pub limit: u32,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// One page of a subscription's deliveries, newest change first, and the next page's cursor.
pub async fn list_deliveries(
    ops: &Ops<'_>,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    query: &DeliveryQuery,
) -> Result<(Vec<Delivery>, Option<String>), OpsError> {
    let sub = ops.subscription(account_id, subscription_id).await?;
    let before = match &query.cursor {
        None => None,
        Some(c) => Some(
            cursor::decode(c)
                .filter(|p| cursor::is_id(p))
                .and_then(|p| crate::domain::pull_cursor::change_id(&p))
                .ok_or_else(OpsError::bad_cursor)?,
        ),
    };
    let filter = Filter {
        statuses: query.statuses.clone(),
        occurred_from: query.from,
        occurred_before: query.to,
        record_id: query.record_id.clone(),
        ..Filter::account(account_id)
    };
    let range = SubscriptionRange {
        subscription_id,
        after: None,
        upper: before.as_ref().map(Upper::Before),
        forward: false,
        listing: ops.deliveries_listed_by(&sub).await?,
    };
    let limit = query.limit as usize;
    let Gathered {
        deliveries: mut found,
        evaluated_to,
        exhausted,
    } = gather_by_subscription(
        ops.dynamo, ops.table, &range, &filter, limit, INDEX_PAGE, MAX_ROUNDS,
    )
    .await?;
    let truncated = found.len() > limit;
    found.truncate(limit);
    let next = if truncated || (!exhausted && found.len() == limit) {
        found.last().map(|d| d.change_id.clone())
    } else if exhausted {
        None
    } else {
        evaluated_to
    };
    Ok((found, next.map(|c| cursor::encode(c.as_str()))))
}

/// An attempt with the run it belongs to: run 1 is the delivery's first progression, and every
/// operator restart begins a new run whose attempts are numbered from 1 again.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NumberedAttempt<'a> {
    pub run: u32,
    pub attempt: &'a AttemptRecord,
}

/// Numbers the runs of an attempt log (kept in the order attempts were made): a number that does
/// not go up starts a new run.
pub(crate) fn attempt_runs(log: &[AttemptRecord]) -> Vec<NumberedAttempt<'_>> {
    let mut run = 0;
    let mut previous = 0;
    log.iter()
        .map(|attempt| {
            if run == 0 || attempt.number <= previous {
                run += 1;
            }
            previous = attempt.number;
            NumberedAttempt { run, attempt }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(number: u32) -> AttemptRecord {
        AttemptRecord {
            number,
            at: Timestamp(number as i64),
            class: "transient".into(),
            http_status: Some(503),
            duration_ms: 1,
            detail: None,
            error: None,
        }
    }

    #[test]
    fn restarts_begin_new_runs() {
        let log: Vec<AttemptRecord> = [1, 2, 3, 1, 2, 1].into_iter().map(attempt).collect();
        let runs: Vec<(u32, u32)> = attempt_runs(&log)
            .iter()
            .map(|a| (a.run, a.attempt.number))
            .collect();
        assert_eq!(runs, [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (3, 1)]);
        assert!(attempt_runs(&[]).is_empty());
    }
}
