//! What needs an operator across every account, oldest first: paused subscriptions, dead and
//! failed deliveries, notifications whose attempts ran out (an operator requeues them), and
//! replay jobs whose run stopped (running, no run holding them).
//!
//! No listing holds all of it: dead and failed deliveries are on each account's needs-attention
//! listing, paused subscriptions in each account's partition, running replay jobs on the sharded
//! running listing, exhausted notifications on each account's `trouble` index of the
//! notification table. The queue reads the `ACCOUNTS` listing (keys only) and, per account, its
//! needs-attention listing and its failed notifications from the page's position (oldest first,
//! at most one page more than asked) and its paused subscriptions (one partition query); the
//! running jobs are read once
//! (one query per shard). The entries are merged by their position — the time they came to need
//! an operator, then their id — so a page continues exactly after the last one shown.
//!
//! Why not one global listing: a dead delivery is already on its account's listing, and an item
//! is on one key of an index, so a global one would need a second index (a write for every
//! dead or failed delivery on one partition, or sharded and merged like this anyway). Reading per
//! account costs a query or two per account per page, and nothing on the delivery path.

use super::event_monitor::MonitorError;
use super::OpsError;
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, DeliveryId, NoticeId, ReplayJobId, SubscriptionId};
use crate::store;
use crate::store::cursor;
use crate::store::keys::{time_sort, trouble_sort};
use crate::store::listing::MAX_ROUNDS;
use serde::Serialize;

/// Why an entry needs an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionKind {
    /// The system paused the subscription (a run of dead deliveries): resume it.
    PausedSubscription,
    /// A delivery ran out of attempts: retry it.
    DeadDelivery,
    /// A delivery failed for good: retry it once the cause is fixed.
    FailedDelivery,
    /// A replay job is running but no run holds it: resume it.
    StalledReplay,
    /// A notification delivery ran out of attempts: requeue it.
    ExhaustedNotification,
}

impl AttentionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AttentionKind::PausedSubscription => "paused_subscription",
            AttentionKind::DeadDelivery => "dead_delivery",
            AttentionKind::FailedDelivery => "failed_delivery",
            AttentionKind::StalledReplay => "stalled_replay",
            AttentionKind::ExhaustedNotification => "exhausted_notification",
        }
    }
}

/// One entry of the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionEntry {
    pub kind: AttentionKind,
    pub account_id: AccountId,
    /// Since when it needs an operator.
    pub at: Timestamp,
    /// Its place in the queue: [`time_sort`] of `at` and its id.
    pub position: String,
    /// The subscription of a delivery, a pause or a replay job (not of a notification).
    pub subscription_id: Option<SubscriptionId>,
    pub change_id: Option<ChangeId>,
    pub delivery_id: Option<DeliveryId>,
    pub job_id: Option<ReplayJobId>,
    /// A notification delivery: its notice and its key.
    pub notice_id: Option<NoticeId>,
    pub delivery_key: Option<String>,
    /// The last error of a delivery (of a notification delivery too).
    pub detail: Option<String>,
}

impl AttentionEntry {
    /// An entry of `kind` since `at`, placed at `at` alone, with nothing else known yet.
    fn new(kind: AttentionKind, account_id: AccountId, at: Timestamp) -> Self {
        AttentionEntry {
            kind,
            account_id,
            at,
            position: time_sort(at, ""),
            subscription_id: None,
            change_id: None,
            delivery_id: None,
            job_id: None,
            notice_id: None,
            delivery_key: None,
            detail: None,
        }
    }
}

/// The entries after `after` (a position), oldest first, at most `limit`, and the position to
/// continue after when more are left.
pub(crate) fn oldest_first(
    mut entries: Vec<AttentionEntry>,
    after: Option<&str>,
    limit: usize,
) -> (Vec<AttentionEntry>, Option<String>) {
    entries.retain(|e| after.is_none_or(|a| e.position.as_str() > a));
    entries.sort_by(|a, b| a.position.cmp(&b.position));
    let more = entries.len() > limit;
    entries.truncate(limit);
    let next = more
        .then(|| entries.last().map(|e| e.position.clone()))
        .flatten();
    (entries, next)
}

/// The queue position a `cursor` continues after: an entry's time and id, or a notification
/// delivery's time, notice and key; a text that is not one of this list's is refused.
pub fn queue_position(cursor_text: Option<&str>) -> Result<Option<String>, OpsError> {
    use crate::store::keys::{is_time_sort, is_trouble_sort};
    cursor_text
        .map(|c| {
            cursor::decode(c)
                .filter(|p| is_time_sort(p) || is_trouble_sort(p))
                .ok_or_else(OpsError::bad_cursor)
        })
        .transpose()
}

/// One page of the queue at `now`: at most `limit` entries after position `after`, each with
/// its account's name (`""` for an account gone since), and the position of the next page.
/// `table`: the delivery table; `notices`: the notification table.
pub async fn attention_queue(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notices: &str,
    after: Option<&str>,
    limit: u32,
    now: Timestamp,
) -> Result<(Vec<(AttentionEntry, String)>, Option<String>), MonitorError> {
    let want = limit as usize + 1;
    let mut entries = Vec::new();
    for account_id in store::account::all_ids(dynamo, table).await? {
        entries.extend(paused(dynamo, table, &account_id).await?);
        entries.extend(settled(dynamo, table, &account_id, after, want, now).await?);
        entries.extend(exhausted(dynamo, notices, &account_id, after, want).await?);
    }
    entries.extend(stalled(dynamo, table, want, now).await?);
    let (page, next) = oldest_first(entries, after, limit as usize);
    Ok((with_names(dynamo, table, page).await?, next))
}

/// The account's paused subscriptions, since they were paused.
async fn paused(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
) -> Result<Vec<AttentionEntry>, MonitorError> {
    let subscriptions = store::subscription::paused(dynamo, table, account_id).await?;
    Ok(subscriptions
        .into_iter()
        .map(|s| {
            let at = s.paused_at.unwrap_or(s.updated_at);
            AttentionEntry {
                position: time_sort(at, s.subscription_id.as_str()),
                subscription_id: Some(s.subscription_id),
                ..AttentionEntry::new(AttentionKind::PausedSubscription, account_id.clone(), at)
            }
        })
        .collect())
}

/// The account's dead and failed deliveries after `after` (its needs-attention listing).
async fn settled(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    after: Option<&str>,
    want: usize,
    now: Timestamp,
) -> Result<Vec<AttentionEntry>, MonitorError> {
    let from = after.map(str::to_owned);
    let settled =
        store::delivery::attention_from(dynamo, table, account_id, from, true, want as u32, now)
            .await?;
    Ok(settled
        .items
        .into_iter()
        .map(|d| {
            let kind = if d.status == DeliveryStatus::Dead {
                AttentionKind::DeadDelivery
            } else {
                AttentionKind::FailedDelivery
            };
            AttentionEntry {
                position: d
                    .list_sort
                    .clone()
                    .unwrap_or_else(|| time_sort(d.updated_at, d.delivery_id.as_str())),
                subscription_id: Some(d.subscription_id),
                change_id: Some(d.change_id),
                delivery_id: Some(d.delivery_id),
                detail: d.last_error,
                ..AttentionEntry::new(kind, d.account_id.clone(), d.updated_at)
            }
        })
        .collect())
}

/// The account's notification deliveries whose attempts ran out, after `after` (`notices`: the
/// notification table).
async fn exhausted(
    dynamo: &aws_sdk_dynamodb::Client,
    notices: &str,
    account_id: &AccountId,
    after: Option<&str>,
    want: usize,
) -> Result<Vec<AttentionEntry>, MonitorError> {
    let (failed, _) =
        store::failed_notices::failed(dynamo, notices, account_id, after, true, want, MAX_ROUNDS)
            .await?;
    Ok(failed
        .into_iter()
        .map(|n| {
            let at = n.failed_at.unwrap_or(n.updated_at);
            AttentionEntry {
                position: n
                    .trouble_sort
                    .clone()
                    .unwrap_or_else(|| trouble_sort(at, &n.notice_id, &n.delivery_key)),
                notice_id: Some(n.notice_id),
                delivery_key: Some(n.delivery_key),
                detail: n.last_error,
                ..AttentionEntry::new(AttentionKind::ExhaustedNotification, account_id.clone(), at)
            }
        })
        .collect())
}

/// Every account's replay jobs that are running with no run holding them.
async fn stalled(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    want: usize,
    now: Timestamp,
) -> Result<Vec<AttentionEntry>, MonitorError> {
    let jobs = store::replay_job::stalled(dynamo, table, now, want as i32).await?;
    Ok(jobs
        .into_iter()
        .map(|job| AttentionEntry {
            position: time_sort(job.updated_at, job.job_id.as_str()),
            subscription_id: Some(job.subscription_id),
            job_id: Some(job.job_id),
            ..AttentionEntry::new(
                AttentionKind::StalledReplay,
                job.account_id.clone(),
                job.updated_at,
            )
        })
        .collect())
}

/// Each entry with its account's name (one read of the page's accounts).
async fn with_names(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    page: Vec<AttentionEntry>,
) -> Result<Vec<(AttentionEntry, String)>, MonitorError> {
    let mut ids: Vec<AccountId> = page.iter().map(|e| e.account_id.clone()).collect();
    ids.sort();
    ids.dedup();
    let names = store::account::names(dynamo, table, &ids).await?;
    Ok(page
        .into_iter()
        .map(|e| {
            let name = names.get(&e.account_id).cloned().unwrap_or_default();
            (e, name)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    fn entry(at: i64, tiebreak: &str) -> AttentionEntry {
        AttentionEntry {
            position: time_sort(Timestamp(at), tiebreak),
            subscription_id: Some(id("s1")),
            ..AttentionEntry::new(AttentionKind::DeadDelivery, id("a1"), Timestamp(at))
        }
    }

    #[test]
    fn the_queue_is_oldest_first_and_a_page_continues_after_its_last_entry() {
        let all = vec![
            entry(30, "c"),
            entry(10, "a"),
            entry(20, "b"),
            entry(20, "a"),
        ];
        let (first, next) = oldest_first(all.clone(), None, 2);
        let at: Vec<(i64, &str)> = first
            .iter()
            .map(|e| (e.at.0, &e.position[e.position.len() - 1..]))
            .collect();
        assert_eq!(at, [(10, "a"), (20, "a")]);
        let next = next.expect("more entries");
        let (second, last) = oldest_first(all, Some(&next), 2);
        let at: Vec<i64> = second.iter().map(|e| e.at.0).collect();
        assert_eq!(at, [20, 30]);
        assert_eq!(last, None, "nothing after the last page");
    }

    /// The audit histories' form (`TimeCursor`) and the operators' queue's (`QueueCursor`).
    #[test]
    fn every_time_and_queue_cursor_of_the_documented_form_decodes_and_others_are_refused() {
        use crate::store::audit;
        let is_audit = |c: &str| cursor::decode(c).is_some_and(|p| audit::is_position(&p));
        for good in ["000000000000000.a", "999999999999999.01HZ-x_Y"] {
            assert!(is_audit(good), "{good}");
            assert!(queue_position(Some(good)).unwrap().is_some(), "{good}");
            let notice = format!("{good}~key_1");
            assert!(queue_position(Some(&notice)).unwrap().is_some(), "{notice}");
            assert!(!is_audit(&notice), "{notice}");
        }
        for bad in [
            "",
            "a",
            "000000000000000",
            "000000000000000.",
            "00000000000000.a",
            "0000000000000000.a",
            "00000000000000x.a",
            "000000000000000.a.b",
            "000000000000000.a~",
            "000000000000000.a~b~c",
            "000000000000000#a",
        ] {
            assert!(!is_audit(bad), "{bad:?}");
            assert!(
                matches!(queue_position(Some(bad)), Err(OpsError::Invalid { ref field, .. }) if field == "cursor"),
                "{bad:?}"
            );
        }
        assert_eq!(queue_position(None).unwrap(), None);
    }
}
