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
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, DeliveryId, NoticeId, ReplayJobId, SubscriptionId};
use crate::store;
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
pub fn oldest_first(
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
        for s in store::subscription::paused(dynamo, table, &account_id).await? {
            let at = s.paused_at.unwrap_or(s.updated_at);
            entries.push(AttentionEntry {
                position: time_sort(at, s.subscription_id.as_str()),
                subscription_id: Some(s.subscription_id),
                ..AttentionEntry::new(AttentionKind::PausedSubscription, account_id.clone(), at)
            });
        }
        let settled = store::delivery::attention_from(
            dynamo,
            table,
            &account_id,
            after.map(str::to_owned),
            true,
            want as u32,
            now,
        )
        .await?;
        for d in settled.items {
            let kind = if d.status == DeliveryStatus::Dead {
                AttentionKind::DeadDelivery
            } else {
                AttentionKind::FailedDelivery
            };
            entries.push(AttentionEntry {
                position: d
                    .list_sort
                    .clone()
                    .unwrap_or_else(|| time_sort(d.updated_at, d.delivery_id.as_str())),
                subscription_id: Some(d.subscription_id),
                change_id: Some(d.change_id),
                delivery_id: Some(d.delivery_id),
                detail: d.last_error,
                ..AttentionEntry::new(kind, d.account_id.clone(), d.updated_at)
            });
        }
        let (exhausted, _) = store::failed_notices::failed(
            dynamo,
            notices,
            &account_id,
            after,
            true,
            want,
            MAX_ROUNDS,
        )
        .await?;
        for n in exhausted {
            let at = n.failed_at.unwrap_or(n.updated_at);
            entries.push(AttentionEntry {
                position: n
                    .trouble_sort
                    .clone()
                    .unwrap_or_else(|| trouble_sort(at, &n.notice_id, &n.delivery_key)),
                notice_id: Some(n.notice_id),
                delivery_key: Some(n.delivery_key),
                detail: n.last_error,
                ..AttentionEntry::new(AttentionKind::ExhaustedNotification, account_id.clone(), at)
            });
        }
    }
    for job in store::replay_job::stalled(dynamo, table, now, want as i32).await? {
        entries.push(AttentionEntry {
            position: time_sort(job.updated_at, job.job_id.as_str()),
            subscription_id: Some(job.subscription_id),
            job_id: Some(job.job_id),
            ..AttentionEntry::new(
                AttentionKind::StalledReplay,
                job.account_id.clone(),
                job.updated_at,
            )
        });
    }
    let (page, next) = oldest_first(entries, after, limit as usize);
    let mut ids: Vec<AccountId> = page.iter().map(|e| e.account_id.clone()).collect();
    ids.sort();
    ids.dedup();
    let names = store::account::names(dynamo, table, &ids).await?;
    let named = page
        .into_iter()
        .map(|e| {
            let name = names.get(&e.account_id).cloned().unwrap_or_default();
            (e, name)
        })
        .collect();
    Ok((named, next))
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
}
