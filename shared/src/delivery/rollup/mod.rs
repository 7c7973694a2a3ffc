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

//!
//! In modules: [`walk`] (the pass, the walk and the enrolment), [`sole`] (the prompt roll-up from a
//! sole delivery), [`reopen`] (an operator restart's reopen), [`expiry`] (the deliveries'
//! retention), [`limits`] (the budgets); this module holds the service and one event's roll-up.

mod error;
mod expiry;
mod limits;
mod reopen;
pub(crate) mod sole;
pub(crate) mod walk;

use crate::clock::Clock;
use crate::domain::event::{roll_up_move, DeliveryFacts, EventStatus, EventTrigger};
use crate::domain::retention::ttl_seconds;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId};
use crate::store;
use crate::store::delivery::Delivery;
use crate::store::event::EventRecord;
pub use crate::store::event_partition::read_partition;
use crate::store::keys;
use crate::store::write::send;
pub use error::RollUpError;
use expiry::set_delivery_expiry;
pub use limits::{LISTING_OVERLAP, ROLLUP_ATTEMPTS, ROLLUP_CONCURRENCY, ROLLUP_INDEX};
pub use reopen::{reopen_event, ReopenOutcome};
use serde::Serialize;
use std::sync::Arc;

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
    pub(crate) async fn roll_up_pk(&self, pk: &str) -> Result<RollUpOutcome, RollUpError> {
        Ok(self.roll_up_counting(pk).await?.0)
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
                log_move(pk, from, to, trigger, "from its partition");
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

/// The line of an event's status move (`how`: what it was decided from). An event that is sent
/// is the happy path, a DEBUG line (the delivery's own line is the sampled one); every other
/// move (partial, failed, skipped) is an INFO line.
pub(crate) fn log_move(
    pk: &str,
    from: EventStatus,
    to: EventStatus,
    trigger: EventTrigger,
    how: &str,
) {
    macro_rules! move_line {
        ($level:ident) => {
            tracing::$level!(
                pk,
                from = %from,
                to = %to,
                trigger = %store::event::trigger_name(trigger),
                how,
                "event status rolled up"
            )
        };
    }
    if to == EventStatus::Sent {
        move_line!(debug);
    } else {
        move_line!(info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::Status;
    use crate::store::StoreError;

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
}
