//! What needs an operator across every account, oldest first: paused subscriptions, dead and
//! failed deliveries, and replay jobs whose run stopped (running, no run holding them).
//!
//! No listing holds all of it: dead and failed deliveries are on each account's needs-attention
//! listing, paused subscriptions in each account's partition, running replay jobs on the sharded
//! running listing. The queue reads the `ACCOUNTS` listing (keys only) and, per account, its
//! needs-attention listing from the page's position (oldest first, at most one page more than
//! asked) and its paused subscriptions (one partition query); the running jobs are read once
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
use crate::ids::{AccountId, ChangeId, DeliveryId, ReplayJobId, SubscriptionId};
use crate::store;
use crate::store::keys::time_sort;
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
}

impl AttentionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AttentionKind::PausedSubscription => "paused_subscription",
            AttentionKind::DeadDelivery => "dead_delivery",
            AttentionKind::FailedDelivery => "failed_delivery",
            AttentionKind::StalledReplay => "stalled_replay",
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
    pub subscription_id: SubscriptionId,
    pub change_id: Option<ChangeId>,
    pub delivery_id: Option<DeliveryId>,
    pub job_id: Option<ReplayJobId>,
    /// The last error of a delivery.
    pub detail: Option<String>,
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
pub async fn attention_queue(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
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
                kind: AttentionKind::PausedSubscription,
                account_id: account_id.clone(),
                at,
                position: time_sort(at, s.subscription_id.as_str()),
                subscription_id: s.subscription_id,
                change_id: None,
                delivery_id: None,
                job_id: None,
                detail: None,
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
            entries.push(AttentionEntry {
                kind: if d.status == DeliveryStatus::Dead {
                    AttentionKind::DeadDelivery
                } else {
                    AttentionKind::FailedDelivery
                },
                account_id: d.account_id.clone(),
                at: d.updated_at,
                position: d
                    .list_sort
                    .clone()
                    .unwrap_or_else(|| time_sort(d.updated_at, d.delivery_id.as_str())),
                subscription_id: d.subscription_id,
                change_id: Some(d.change_id),
                delivery_id: Some(d.delivery_id),
                job_id: None,
                detail: d.last_error,
            });
        }
    }
    for job in store::replay_job::stalled(dynamo, table, now, want as i32).await? {
        entries.push(AttentionEntry {
            kind: AttentionKind::StalledReplay,
            account_id: job.account_id.clone(),
            at: job.updated_at,
            position: time_sort(job.updated_at, job.job_id.as_str()),
            subscription_id: job.subscription_id,
            change_id: None,
            delivery_id: None,
            job_id: Some(job.job_id),
            detail: None,
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
            kind: AttentionKind::DeadDelivery,
            account_id: id("a1"),
            at: Timestamp(at),
            position: time_sort(Timestamp(at), tiebreak),
            subscription_id: id("s1"),
            change_id: None,
            delivery_id: None,
            job_id: None,
            detail: None,
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
