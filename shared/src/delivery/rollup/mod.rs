//! The event status roll-up (`docs/lifecycles.md#event-status`): the decision is the pure
//! [`roll_up_move`](crate::domain::event::roll_up_move); this module reads its facts from the
//! event's partition and applies it with the storage condition of [`EVENT_LIFECYCLE`].
//!
//! Three ways in, one operation ([`RollUp::roll_up_event`]), safe to run concurrently and again:
//! * **the pass** ([`RollUp::pass`]): the regular roll-up pass — `new` and `partial` events, at
//!   most [`ROLLUP_BATCH`], oldest first, read from the sparse `rollup` index
//!   (sixteen shards, merged by creation time), after the listing read below;
//! * **the prompt trigger**: the dispatcher's stream consumer rolls an event up when it is inserted
//!   and when one of its push deliveries becomes terminal, so the status is current within
//!   seconds. When that delivery is the only one its change made and it settled its first
//!   attempt ([`RollUp::roll_up_settled`]), the event's move follows from the delivery alone and
//!   is written without reading the partition, conditional on the event still being `new` and
//!   never reopened; anything else is decided from a read;
//! * **the walk** ([`RollUp::walk`]): reconciliation walks the whole index, batch after batch of
//!   at most one pass each, within a time and item budget. Final events leave the index, so a
//!   walk cut short by its budget resumes where the work is on the next invocation.
//!
//! A new event is not on the `rollup` index (an entry written at ingest and removed by the prompt
//! roll-up would bill two writes per change for the rare event whose prompt roll-up is lost).
//! Before the pass and the walk read the index they **enrol** ([`RollUp::enrol_open`]): they read
//! every account's event listing (keys only) from the walk's mark
//! ([`store::walk_mark`], less [`LISTING_OVERLAP`]) to now, fetch those events, and put the
//! ones still open on the index. An open event is therefore either on the index or created
//! after the last complete listing read, which the next walk reads: no open event is missed, and
//! a healthy event costs reads only (a keys-only listing entry and one item read per walk).
//!
//! # Who writes what
//!
//! Only the system sets `event_status` and `internal_status`: ingest writes `new`/`new`,
//! the roll-up writes every later `event_status`, the delivery worker writes `internal_status =
//! done`, and [`reopen_event`] (called by operator retry) writes `sent | failed → partial`. No API
//! route sets either field.
//!
//! # Decisions (documented here because the lifecycle table leaves them open)
//!
//! * **"Took the event".** A subscriber took an event when ingest recorded a delivery for it that
//!   is not `skipped_filter`. Paused subscriptions get no delivery and subscriptions whose
//!   change-time filter rejected the change get a `skipped_filter` one: neither took it. An event
//!   nobody took is `skipped`.
//! * **Ingest still writing.** Ingest writes an event and its deliveries concurrently, so a roll-up
//!   may see the event before all of its deliveries. The event records how many subscribers took
//!   it (`subscribers`); while fewer such deliveries are visible the roll-up leaves the event alone
//!   ([`RollUpOutcome::Deferred`]) rather than calling it `skipped` too early.
//! * **Races.** Every status write is `EVENT_LIFECYCLE.expect(from, trigger, to)`: the stored
//!   status must still be the one the decision was made on, so of a prompt roll-up and a pass that
//!   race, exactly one moves the event and the other re-reads and finds nothing to do. The write is
//!   also conditional on the event's `reopens` counter, which only [`reopen_event`] increments, so a
//!   decision made from deliveries read before an operator restart can never land after it.
//! * **Retention of deliveries.** When an event becomes final its deliveries get the same
//!   `expires_at` (they are written first, then the event; a crash in between leaves the event on
//!   the index and the next roll-up repeats both). A roll-up that finds an open event whose
//!   deliveries carry an expiry (a reopened event, or a lost race) removes it.
//! * **Prompt roll-up.** The dispatcher's stream consumer rolls an event up when the event is
//!   inserted and when one of its push deliveries reaches a terminal state; the reconciliation
//!   function's schedules walk the index for anything those triggers missed.

mod error;
use crate::clock::Clock;
use crate::domain::event::{roll_up_move, DeliveryFacts, EventStatus, EventTrigger, ROLLUP_BATCH};
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::retention::ttl_seconds;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId};
use crate::store;
use crate::store::attrs::rollup as rollup_attrs;
use crate::store::delivery::Delivery;
use crate::store::event::{EventRecord, RollUpBasis};
pub use crate::store::event_partition::read_partition;
use crate::store::keys::{self, SHARDS};
use crate::store::write::{send, Write, Written};
use crate::store::StoreError;
pub use error::RollUpError;
use futures::stream::{self, StreamExt};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How far before the walk's mark each listing read starts again: an event written just before a
/// walk read its account's listing may not have been on that eventually consistent index yet
/// (its entry shows within a second or so).
pub const LISTING_OVERLAP: Duration = Duration::from_secs(60);

/// How often one roll-up re-reads and re-decides after losing a race before it leaves the event
/// to the next trigger or pass.
pub const ROLLUP_ATTEMPTS: usize = 3;
/// Events rolled up at once within a batch.
pub const ROLLUP_CONCURRENCY: usize = 16;
/// Delivery expiry writes in flight at once for one event.
const EXPIRY_CONCURRENCY: usize = 10;
/// The name of the sparse index of open events (template.yaml).
pub const ROLLUP_INDEX: &str = "rollup";

/// What one roll-up of one event came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RollUpOutcome {
    /// The event moved (`new → partial`, or to a final status).
    Moved { from: EventStatus, to: EventStatus },
    /// `partial → partial`: a counted (non-poll) delivery still waits; picked up again next pass.
    Unchanged { status: EventStatus },
    /// Final already (another roll-up got there first, or a stale index entry).
    AlreadyFinal { status: EventStatus },
    /// Ingest has not written all of the event's deliveries yet; left for the next roll-up.
    Deferred,
    /// Lost [`ROLLUP_ATTEMPTS`] races in a row; left for the next trigger or pass.
    Contended,
    /// No such event (expired and deleted, or never written).
    Missing,
}

/// Counts of a pass or a walk (also the roll-up part of reconciliation's report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RollUpReport {
    /// Events looked at.
    pub examined: u32,
    pub to_partial: u32,
    pub to_sent: u32,
    pub to_failed: u32,
    pub to_skipped: u32,
    pub unchanged: u32,
    pub already_final: u32,
    pub deferred: u32,
    pub contended: u32,
    pub missing: u32,
    /// Events whose roll-up failed on a storage error (logged; retried by the next pass).
    pub errors: u32,
    /// Batches (passes) run.
    pub batches: u32,
    /// Push deliveries whose first dispatch was lost, put back on the `due` index.
    pub requeued: u32,
}

impl RollUpReport {
    pub fn record(&mut self, outcome: &Result<RollUpOutcome, RollUpError>) {
        self.examined += 1;
        match outcome {
            Ok(RollUpOutcome::Moved { to, .. }) => match to {
                EventStatus::Partial => self.to_partial += 1,
                EventStatus::Sent => self.to_sent += 1,
                EventStatus::Failed => self.to_failed += 1,
                EventStatus::Skipped => self.to_skipped += 1,
                EventStatus::New => {}
            },
            Ok(RollUpOutcome::Unchanged { .. }) => self.unchanged += 1,
            Ok(RollUpOutcome::AlreadyFinal { .. }) => self.already_final += 1,
            Ok(RollUpOutcome::Deferred) => self.deferred += 1,
            Ok(RollUpOutcome::Contended) => self.contended += 1,
            Ok(RollUpOutcome::Missing) => self.missing += 1,
            Err(_) => self.errors += 1,
        }
    }

    /// Events that became final.
    pub fn finalized(&self) -> u32 {
        self.to_sent + self.to_failed + self.to_skipped
    }

    /// Status writes made.
    pub fn moved(&self) -> u32 {
        self.to_partial + self.finalized()
    }

    pub fn add(&mut self, other: &RollUpReport) {
        self.examined += other.examined;
        self.to_partial += other.to_partial;
        self.to_sent += other.to_sent;
        self.to_failed += other.to_failed;
        self.to_skipped += other.to_skipped;
        self.unchanged += other.unchanged;
        self.already_final += other.already_final;
        self.deferred += other.deferred;
        self.contended += other.contended;
        self.missing += other.missing;
        self.errors += other.errors;
        self.batches += other.batches;
        self.requeued += other.requeued;
    }
}

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

/// The roll-up service.
#[derive(Clone)]
pub struct RollUp {
    dynamo: aws_sdk_dynamodb::Client,
    table: String,
    clock: Arc<dyn Clock>,
}

impl RollUp {
    pub fn new(dynamo: aws_sdk_dynamodb::Client, table: String, clock: Arc<dyn Clock>) -> Self {
        RollUp {
            dynamo,
            table,
            clock,
        }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn dynamo(&self) -> &aws_sdk_dynamodb::Client {
        &self.dynamo
    }

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
    pub async fn roll_up_batch(&self, batch: &[IndexEntry]) -> RollUpReport {
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

    /// Rolls up one event.
    pub async fn roll_up_event(
        &self,
        account_id: &AccountId,
        change_id: &ChangeId,
    ) -> Result<RollUpOutcome, RollUpError> {
        self.roll_up_pk(&keys::event_pk(account_id, change_id))
            .await
    }

    /// Rolls up the event of partition `pk` (`EVT#{account}#{change}`).
    pub async fn roll_up_pk(&self, pk: &str) -> Result<RollUpOutcome, RollUpError> {
        Ok(self.roll_up_counting(pk).await?.0)
    }

    /// The prompt roll-up of the event of a push delivery that just settled its first attempt
    /// (`previous`: the status it left), as the delivery stream shows it. When that delivery is
    /// its event's only one ([`sole_roll_up`]), the event's move is decided from the delivery
    /// alone and written without reading the partition: one query less per change. Otherwise, or
    /// when the write's condition refuses it (the event is no longer `new`, or an operator
    /// reopened it), the event is rolled up from a read, as [`Self::roll_up_pk`] does.
    pub async fn roll_up_settled(
        &self,
        d: &Delivery,
        previous: DeliveryStatus,
    ) -> Result<RollUpOutcome, RollUpError> {
        let now = self.clock.now();
        if let Some((basis, trigger, to)) = sole_roll_up(d, previous, now) {
            let w = store::event::roll_up(&self.table, &basis, trigger, to, now)?;
            if send(&self.dynamo, w).await?.applied() {
                tracing::info!(pk = %basis.pk, from = %basis.status, %to, trigger = ?trigger, "event status rolled up from its sole delivery");
                return Ok(RollUpOutcome::Moved {
                    from: basis.status,
                    to,
                });
            }
        }
        self.roll_up_pk(&d.key().0).await
    }

    /// [`Self::roll_up_pk`], and how many lost first dispatches of the event's deliveries it put
    /// back on the `due` index.
    async fn roll_up_counting(&self, pk: &str) -> Result<(RollUpOutcome, u32), RollUpError> {
        let mut requeued = 0;
        for _ in 0..ROLLUP_ATTEMPTS {
            let partition = read_partition(&self.dynamo, &self.table, pk).await?;
            let Some(event) = partition.event else {
                return Ok((RollUpOutcome::Missing, requeued));
            };
            let now = self.clock.now();
            let from = event.status();
            if from.is_final() {
                if event.on_rollup_index() {
                    // Only an outside write can leave a final event on the index; without this
                    // every pass would look at it again forever.
                    self.leave_index(pk, from).await?;
                }
                return Ok((RollUpOutcome::AlreadyFinal { status: from }, requeued));
            }
            requeued += self
                .requeue_lost_dispatch(pk, &partition.deliveries, now)
                .await?;
            let facts: Vec<DeliveryFacts> = partition
                .deliveries
                .iter()
                .filter_map(|d| d.facts(now))
                .collect();
            if (facts.len() as u64) < u64::from(event.subscribers) {
                return Ok((RollUpOutcome::Deferred, requeued));
            }
            let Some((trigger, to)) = roll_up_move(from, !facts.is_empty(), &facts) else {
                return Ok((RollUpOutcome::AlreadyFinal { status: from }, requeued));
            };
            // Deliveries share their event's retention: set before the event's final write (a
            // crash in between leaves the event open and the next roll-up repeats it), removed
            // again while the event is open (reopened, or a decision that lost a race).
            let ttl = ttl_seconds(to, now);
            set_delivery_expiry(&self.dynamo, &self.table, &partition.deliveries, ttl).await?;
            if to == from {
                return Ok((RollUpOutcome::Unchanged { status: from }, requeued));
            }
            if self.write_status(&event, trigger, to, now).await? {
                tracing::info!(pk, %from, %to, trigger = ?trigger, "event status rolled up");
                return Ok((RollUpOutcome::Moved { from, to }, requeued));
            }
        }
        Ok((RollUpOutcome::Contended, requeued))
    }

    /// Puts push deliveries whose first dispatch went missing
    /// ([`Delivery::first_dispatch_lost`]) on the `due` index, due now, for the dispatcher's
    /// next sweep to publish. New push work is not on that index (publishing it from the stream
    /// costs no write, and an index entry would cost two), so the open event's roll-up, which
    /// reads every delivery of the event anyway, is where lost first dispatches are found.
    async fn requeue_lost_dispatch(
        &self,
        pk: &str,
        deliveries: &[Delivery],
        now: Timestamp,
    ) -> Result<u32, RollUpError> {
        let mut requeued = 0;
        for d in deliveries.iter().filter(|d| d.first_dispatch_lost(now)) {
            let w = store::delivery::requeue_lost_dispatch(&self.table, d, now)?;
            // Refused: a worker or an operator moved it since the read; nothing is lost.
            if send(&self.dynamo, w).await?.applied() {
                tracing::warn!(pk, delivery_id = %d.delivery_id, "first dispatch lost; the sweep publishes it again");
                requeued += 1;
            }
        }
        Ok(requeued)
    }

    /// The status write (see [`store::event::roll_up`]); `false` when its condition refused it.
    async fn write_status(
        &self,
        event: &EventRecord,
        trigger: EventTrigger,
        to: EventStatus,
        now: Timestamp,
    ) -> Result<bool, RollUpError> {
        let w = store::event::roll_up(&self.table, &event.roll_up_basis(), trigger, to, now)?;
        Ok(send(&self.dynamo, w).await?.applied())
    }

    async fn leave_index(&self, pk: &str, status: EventStatus) -> Result<(), RollUpError> {
        // Refused: the event moved since the read; the next roll-up sees it as it is.
        send(
            &self.dynamo,
            store::event::leave_rollup_index(&self.table, pk, status)?,
        )
        .await?;
        Ok(())
    }
}

/// The roll-up of the event of `d`, a push delivery that has just left `previous`, decided
/// without reading the event, when `d` alone decides it: `d` is the only delivery its change made
/// ([`Delivery::sole`]), never restarted, and it left `pending`, so its event was created with
/// it, has taken no other move (only this delivery's settling moves it) and is `new` unless an
/// operator reopened it. That is the basis the write is conditional on (`new`, no reopen
/// counter), so a basis that no longer holds is refused, never written over. `None` when `d`
/// does not decide it alone, or when the roll-up would also have to write `d`'s retention
/// ([`set_delivery_expiry`]): the caller reads the partition instead. The move is the one the
/// partition's read would decide ([`roll_up_move`] of `d`'s facts from `new`).
pub fn sole_roll_up(
    d: &Delivery,
    previous: DeliveryStatus,
    now: Timestamp,
) -> Option<(RollUpBasis, EventTrigger, EventStatus)> {
    if !d.sole || d.restarts > 0 || d.method.is_poll() || previous != DeliveryStatus::Pending {
        return None;
    }
    let facts = d.facts(now)?;
    let (trigger, to) = roll_up_move(EventStatus::New, true, &[facts])?;
    if to == EventStatus::New {
        return None;
    }
    (!expiry_needs_write(d, ttl_seconds(to, now))).then(|| {
        (
            RollUpBasis {
                pk: d.key().0,
                status: EventStatus::New,
                reopens: None,
                created_at: d.created_at,
            },
            trigger,
            to,
        )
    })
}

/// Sets (`Some`) the TTL of every delivery of an event that would otherwise expire before the
/// event, or removes (`None`) every delivery's TTL. Deliveries that vanished in the meantime are
/// not recreated.
async fn set_delivery_expiry(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    deliveries: &[Delivery],
    ttl: Option<i64>,
) -> Result<(), RollUpError> {
    // Owned items only: the futures must be `Send` for any caller (axum handlers included),
    // which closures over borrowed items cannot promise.
    // A push delivery stamped its own (longer) expiry when it ended: only deliveries that would
    // vanish before their event (poll and filtered ones, or none at all) are written.
    let todo: Vec<Write> = deliveries
        .iter()
        .filter(|d| expiry_needs_write(d, ttl))
        .map(|d| store::delivery::set_expiry(table, d, ttl))
        .collect::<Result<_, _>>()?;
    // A delivery gone since the read is not recreated (the write's condition refuses it).
    let results: Vec<Result<Written, StoreError>> = stream::iter(todo)
        .map(|w| send(dynamo, w))
        .buffer_unordered(EXPIRY_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(())
}

/// Whether the roll-up must write `d`'s TTL for its event's `ttl` ([`set_delivery_expiry`]): a
/// final event's delivery that would expire before it, or an open event's delivery that has one.
fn expiry_needs_write(d: &Delivery, ttl: Option<i64>) -> bool {
    match ttl {
        Some(ttl) => d.expires_at.is_none_or(|own| own < ttl),
        None => d.expires_at.is_some(),
    }
}

/// What [`reopen_event`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ReopenOutcome {
    /// `sent | failed → partial`, back on the roll-up index, retention expiry removed.
    Reopened {
        from: EventStatus,
    },
    /// The event was still `new` or `partial`: its reopen counter moved on, so any roll-up decided
    /// before the restart cannot land.
    AlreadyOpen {
        status: EventStatus,
    },
    /// `skipped` is never reopened: no subscriber took the event, so nothing can be retried.
    NotReopenable {
        status: EventStatus,
    },
    Missing,
}

/// Operator retry and window replay (the operator rows of `docs/lifecycles.md#event-status`, this
/// project's addition to the event status lifecycle): reopens a final event so the roll-up
/// settles it again. **Call it after the delivery restart is written**: a roll-up that read the
/// deliveries before the restart then fails on the reopen counter, and one that reads after it
/// sees the delivery waiting.
///
/// `sent | failed → partial` is written with the condition of [`EVENT_LIFECYCLE`]'s operator rows
/// (`EventTrigger::OperatorRestartReopens`); the event goes back on the `rollup` index and loses
/// its expiry, as do its deliveries. Safe to repeat.
pub async fn reopen_event(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    change_id: &ChangeId,
    now: Timestamp,
) -> Result<ReopenOutcome, RollUpError> {
    let pk = keys::event_pk(account_id, change_id);
    for _ in 0..ROLLUP_ATTEMPTS {
        let partition = read_partition(dynamo, table, &pk).await?;
        let Some(event) = partition.event else {
            return Ok(ReopenOutcome::Missing);
        };
        let status = event.status();
        let written = match status {
            EventStatus::Skipped => return Ok(ReopenOutcome::NotReopenable { status }),
            EventStatus::Sent | EventStatus::Failed => {
                let w = store::event::reopen(table, &event, now)?;
                send(dynamo, w).await?.applied()
            }
            EventStatus::New | EventStatus::Partial => {
                // Not a status move: a fence against roll-ups decided before the restart.
                let w = store::event::fence_open(table, &event)?;
                send(dynamo, w).await?.applied()
            }
        };
        if written {
            set_delivery_expiry(dynamo, table, &partition.deliveries, None).await?;
            tracing::info!(pk, from = %status, "event reopened by an operator restart");
            return Ok(match status {
                EventStatus::Sent | EventStatus::Failed => ReopenOutcome::Reopened { from: status },
                _ => ReopenOutcome::AlreadyOpen { status },
            });
        }
    }
    Err(RollUpError::Store(StoreError::Dynamo(format!(
        "reopening {pk}: the event kept changing under {ROLLUP_ATTEMPTS} attempts"
    ))))
}

/// One entry of the `rollup` index: an open event by creation time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct IndexEntry {
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
pub struct IndexWalk {
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
    pub async fn next_batch(
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
    use crate::domain::lifecycle::Status;

    #[test]
    fn reports_count_outcomes() {
        let mut r = RollUpReport::default();
        r.record(&Ok(RollUpOutcome::Moved {
            from: EventStatus::New,
            to: EventStatus::Sent,
        }));
        r.record(&Ok(RollUpOutcome::Moved {
            from: EventStatus::New,
            to: EventStatus::Partial,
        }));
        r.record(&Ok(RollUpOutcome::Unchanged {
            status: EventStatus::Partial,
        }));
        r.record(&Err(RollUpError::Store(StoreError::Dynamo(
            "unavailable".into(),
        ))));
        assert_eq!(
            (r.examined, r.finalized(), r.moved(), r.unchanged, r.errors),
            (4, 1, 2, 1, 1)
        );
        let mut total = RollUpReport::default();
        total.add(&r);
        total.add(&r);
        assert_eq!(total.examined, 8);
        assert_eq!(EventStatus::parse("sent"), Some(EventStatus::Sent));
    }

    /// A sole first-attempt delivery of `status`, settled at `at` with its own expiry stamped as
    /// the worker stamps it.
    fn settled(status: DeliveryStatus, at: Timestamp) -> Delivery {
        let mut d = store::delivery::test_delivery(status, 1);
        d.sole = true;
        d.expires_at = status
            .is_terminal()
            .then(|| crate::domain::event::delivery_expires_at(at).seconds());
        d
    }

    #[test]
    fn only_a_sole_never_restarted_push_delivery_leaving_pending_decides_its_event_alone() {
        let now = Timestamp(5_000);
        let cases = [
            (DeliveryStatus::Delivered, EventStatus::Sent),
            (DeliveryStatus::Dead, EventStatus::Failed),
            (DeliveryStatus::Failed, EventStatus::Failed),
            (DeliveryStatus::Retrying, EventStatus::Partial),
        ];
        for (status, to) in cases {
            let d = settled(status, now);
            let (basis, trigger, decided) =
                sole_roll_up(&d, DeliveryStatus::Pending, now).expect("decided alone");
            assert_eq!(decided, to, "{status}");
            // The move a read of the partition would decide.
            assert_eq!(
                roll_up_move(EventStatus::New, true, &[d.facts(now).unwrap()]),
                Some((trigger, to))
            );
            assert_eq!(
                basis,
                RollUpBasis {
                    pk: d.key().0,
                    status: EventStatus::New,
                    reopens: None,
                    created_at: d.created_at,
                }
            );
        }
        let delivered = settled(DeliveryStatus::Delivered, now);
        let not_alone = [
            Delivery {
                sole: false,
                ..delivered.clone()
            },
            Delivery {
                restarts: 1,
                ..delivered.clone()
            },
            Delivery {
                method: crate::domain::delivery_method::DeliveryMethod::Poll,
                ..delivered.clone()
            },
            // Its retention would have to be written too: the roll-up reads.
            Delivery {
                expires_at: None,
                ..delivered.clone()
            },
            Delivery {
                expires_at: Some(now.seconds()),
                ..delivered.clone()
            },
        ];
        for d in &not_alone {
            assert_eq!(sole_roll_up(d, DeliveryStatus::Pending, now), None, "{d:?}");
        }
        // A retry that ends: its event may be partial by now, which the delivery does not tell.
        assert_eq!(
            sole_roll_up(&delivered, DeliveryStatus::Retrying, now),
            None
        );
        let retrying_with_expiry = Delivery {
            expires_at: Some(now.seconds()),
            ..settled(DeliveryStatus::Retrying, now)
        };
        assert_eq!(
            sole_roll_up(&retrying_with_expiry, DeliveryStatus::Pending, now),
            None
        );
    }

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
