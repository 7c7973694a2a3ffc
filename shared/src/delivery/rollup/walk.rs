//! The pass and the walk of the `rollup` index (`docs/recovery.md`): the enrolment of open events
//! from every account's event listing, the index read in creation order across its shards, and
//! the roll-up of a batch.

use super::limits::{LISTING_OVERLAP, ROLLUP_CONCURRENCY};
use super::{RollUp, RollUpError, RollUpOutcome, RollUpReport};
use crate::domain::event::ROLLUP_BATCH;
use crate::domain::time::Timestamp;
use crate::ids::AccountId;
use crate::store;
use crate::store::attrs::rollup as rollup_attrs;
use crate::store::event::EventRecord;
use crate::store::keys::SHARDS;
use crate::store::write::send;
use crate::store::StoreError;
use futures::stream::{self, StreamExt};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

/// What one listing read ([`RollUp::enrol_open`]) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EnrolReport {
    /// Accounts whose event listing was read.
    pub accounts: u32,
    /// Events read from the listings.
    pub listed: u32,
    /// Of those, open events put on the `rollup` index.
    pub enrolled: u32,
    /// Every account was read and the mark moved on; `false`: the deadline came first or a read
    /// failed, and the next walk reads the window again (from the same mark).
    pub complete: bool,
}

/// The result of a bounded walk of the index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WalkReport {
    pub rollup: RollUpReport,
    /// The budget ran out before the walk reached the end of the index: run again.
    pub more: bool,
}

impl RollUp {
    /// One roll-up pass: the [`ROLLUP_BATCH`] oldest `new` or `partial` events, each moved per
    /// the event status table (`docs/lifecycles.md#event-status`).
    pub async fn pass(&self) -> Result<RollUpReport, RollUpError> {
        self.enrol_logged(None).await;
        let mut walk = IndexWalk::new();
        let batch = walk.next_batch(self, ROLLUP_BATCH).await?;
        Ok(self.roll_up_batch(&batch).await)
    }

    /// Walks the index from its oldest entry, one pass-sized batch at a time, until the walk has
    /// seen every entry, `max_events` events were looked at, or `deadline` passed. Events that
    /// stay `partial` are behind the walk's position and are not looked at twice in one walk.
    pub async fn walk(
        &self,
        max_events: usize,
        deadline: Instant,
    ) -> Result<WalkReport, RollUpError> {
        let enrolled = self.enrol_logged(Some(deadline)).await;
        let mut walk = IndexWalk::new();
        let mut report = RollUpReport::default();
        if enrolled.is_none() {
            report.errors += 1;
        }
        // A listing read cut short by the deadline is read again by the next invocation.
        let listings_read = enrolled.is_some_and(|r| r.complete);
        loop {
            let remaining = max_events.saturating_sub(report.examined as usize);
            if walk.finished() {
                return Ok(WalkReport {
                    rollup: report,
                    more: !listings_read,
                });
            }
            if remaining == 0 || Instant::now() >= deadline {
                return Ok(WalkReport {
                    rollup: report,
                    more: true,
                });
            }
            let batch = walk.next_batch(self, remaining.min(ROLLUP_BATCH)).await?;
            if batch.is_empty() {
                continue;
            }
            report.add(&self.roll_up_batch(&batch).await);
        }
    }

    /// [`Self::enrol_open`], its failure logged (`None`): the index walk still runs, and the next
    /// walk reads the listings again from the same mark.
    async fn enrol_logged(&self, deadline: Option<Instant>) -> Option<EnrolReport> {
        // Boxed: the listing read's nested futures would otherwise make every caller's future
        // type too deep for the compiler's layout computation (the reconcile function's main).
        match Box::pin(self.enrol_open(deadline)).await {
            Ok(r) => {
                tracing::info!(
                    accounts = r.accounts,
                    listed = r.listed,
                    enrolled = r.enrolled,
                    complete = r.complete,
                    "roll-up walk read the event listings"
                );
                Some(r)
            }
            Err(e) => {
                tracing::error!(error = %e, "reading the event listings failed; the next walk reads them again");
                None
            }
        }
    }

    /// Reads every account's event listing from the walk's mark (less [`LISTING_OVERLAP`]) to
    /// now and puts the events still open on the `rollup` index; then moves the mark on to the
    /// instant the read started. Starts no account after `deadline` (the mark then stays).
    pub async fn enrol_open(&self, deadline: Option<Instant>) -> Result<EnrolReport, RollUpError> {
        let through = self.clock.now();
        let from = store::walk_mark::get(&self.dynamo, &self.table)
            .await?
            .map_or(Timestamp(0), |mark| mark.minus(LISTING_OVERLAP));
        let mut report = EnrolReport::default();
        let mut start = None;
        loop {
            let (accounts, next) =
                store::account::ids_page(&self.dynamo, &self.table, start).await?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(report);
            }
            let counts: Vec<Result<(u32, u32), StoreError>> = stream::iter(accounts)
                .map(|account_id| {
                    let this = self.clone();
                    async move { this.enrol_account(&account_id, from, through).await }
                })
                .buffer_unordered(ROLLUP_CONCURRENCY)
                .collect()
                .await;
            for c in counts {
                let (listed, enrolled) = c?;
                report.accounts += 1;
                report.listed += listed;
                report.enrolled += enrolled;
            }
            match next {
                Some(k) => start = Some(k),
                None => break,
            }
        }
        send(
            &self.dynamo,
            store::walk_mark::advance(&self.table, through)?,
        )
        .await?;
        report.complete = true;
        Ok(report)
    }

    /// One account's part of [`Self::enrol_open`]: (events listed, events enrolled).
    async fn enrol_account(
        &self,
        account_id: &AccountId,
        from: Timestamp,
        through: Timestamp,
    ) -> Result<(u32, u32), StoreError> {
        let (mut listed, mut enrolled) = (0, 0);
        let mut start = None;
        loop {
            let page = store::event::listing_keys_page(
                &self.dynamo,
                &self.table,
                account_id,
                from,
                through,
                start,
            )
            .await?;
            let events =
                store::read::items_in_order(&self.dynamo, &self.table, &page.items).await?;
            listed += page.items.len() as u32;
            for event in events {
                let event = EventRecord::from_item(event)?;
                if event.status().is_final() || event.on_rollup_index() {
                    continue;
                }
                let (pk, _) = event.key();
                let w = store::event::enrol(&self.table, &pk, event.created_at)?;
                // Refused: final by now, or enrolled by a concurrent walk.
                if send(&self.dynamo, w).await?.applied() {
                    enrolled += 1;
                }
            }
            match page.next {
                Some(k) => start = Some(k),
                None => return Ok((listed, enrolled)),
            }
        }
    }

    /// Rolls up the events of one batch concurrently. Storage errors are counted and logged, not
    /// returned: one event's failure does not hold up the others.
    pub(crate) async fn roll_up_batch(&self, batch: &[IndexEntry]) -> RollUpReport {
        let pks: Vec<String> = batch.iter().map(|e| e.pk.clone()).collect();
        let counted: Vec<Result<(RollUpOutcome, u32), RollUpError>> = stream::iter(pks)
            .map(|pk| {
                let this = self.clone();
                async move { this.roll_up_counting(&pk).await }
            })
            .buffered(ROLLUP_CONCURRENCY)
            .collect()
            .await;
        let requeued = counted
            .iter()
            .filter_map(|c| c.as_ref().ok())
            .map(|(_, n)| n)
            .sum();
        let outcomes: Vec<Result<RollUpOutcome, RollUpError>> = counted
            .into_iter()
            .map(|c| c.map(|(outcome, _)| outcome))
            .collect();
        let mut report = RollUpReport {
            batches: 1,
            requeued,
            ..RollUpReport::default()
        };
        for (entry, outcome) in batch.iter().zip(&outcomes) {
            if let Err(e) = outcome {
                tracing::error!(pk = %entry.pk, error = %e, "event roll-up failed; the next pass retries it");
            }
        }
        for outcome in &outcomes {
            report.record(outcome);
        }
        report
    }
}

/// One entry of the `rollup` index: an open event by creation time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct IndexEntry {
    pub rollup_at: i64,
    pub pk: String,
}

struct ShardCursor {
    shard: String,
    buffer: VecDeque<IndexEntry>,
    start: Option<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>>,
    exhausted: bool,
}

impl ShardCursor {
    async fn fill(&mut self, rollup: &RollUp) -> Result<(), StoreError> {
        let page = store::event::rollup_index_page(
            &rollup.dynamo,
            &rollup.table,
            &self.shard,
            ROLLUP_BATCH as i32,
            self.start.take(),
        )
        .await?;
        for item in page.items {
            let pk = item.get("pk").and_then(|v| v.as_s().ok()).cloned();
            let at = item
                .get(rollup_attrs::AT)
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<i64>().ok());
            if let (Some(pk), Some(rollup_at)) = (pk, at) {
                self.buffer.push_back(IndexEntry { rollup_at, pk });
            }
        }
        match page.next {
            Some(k) => self.start = Some(k),
            None => self.exhausted = true,
        }
        Ok(())
    }
}

/// A walk of the `rollup` index in creation order across all shards: each shard is read in
/// pages of [`ROLLUP_BATCH`] from where it stopped, and batches are merged oldest first, so each
/// batch holds exactly the oldest entries the walk has not handed out yet.
pub(crate) struct IndexWalk {
    shards: Vec<ShardCursor>,
}

impl Default for IndexWalk {
    fn default() -> Self {
        Self::new()
    }
}

impl IndexWalk {
    pub fn new() -> Self {
        IndexWalk {
            shards: (0..SHARDS)
                .map(|i| ShardCursor {
                    shard: i.to_string(),
                    buffer: VecDeque::new(),
                    start: None,
                    exhausted: false,
                })
                .collect(),
        }
    }

    /// Every entry has been handed out.
    pub fn finished(&self) -> bool {
        self.shards
            .iter()
            .all(|c| c.exhausted && c.buffer.is_empty())
    }

    /// The next (at most) `max` oldest entries.
    pub(crate) async fn next_batch(
        &mut self,
        rollup: &RollUp,
        max: usize,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        let mut out = Vec::with_capacity(max);
        while out.len() < max {
            // A shard whose buffer ran dry must be read on before the merge can pick safely.
            let fills = self
                .shards
                .iter_mut()
                .filter(|c| c.buffer.is_empty() && !c.exhausted)
                .map(|c| c.fill(rollup));
            for r in futures::future::join_all(fills).await {
                r?;
            }
            let next = self
                .shards
                .iter_mut()
                .filter(|c| !c.buffer.is_empty())
                .min_by(|a, b| a.buffer.front().cmp(&b.buffer.front()));
            match next.and_then(|c| c.buffer.pop_front()) {
                Some(entry) => out.push(entry),
                None => {
                    if self.finished() {
                        break;
                    }
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_entries_sort_oldest_first_then_by_key() {
        let mut v = [
            IndexEntry {
                rollup_at: 5,
                pk: "b".into(),
            },
            IndexEntry {
                rollup_at: 3,
                pk: "z".into(),
            },
            IndexEntry {
                rollup_at: 5,
                pk: "a".into(),
            },
        ];
        v.sort();
        let order: Vec<_> = v.iter().map(|e| (e.rollup_at, e.pk.as_str())).collect();
        assert_eq!(order, [(3, "z"), (5, "a"), (5, "b")]);
    }
}
