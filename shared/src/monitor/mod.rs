//! The event monitor on DynamoDB: the roll-up of an event's deliveries into its `event_status`
//! (`docs/lifecycles.md#event-status`; `internal_status` is `#internal-status`), retention of
//! terminal events, and the reads the monitor's API serves.
//!
//! * [`rollup`] — the roll-up of one event ([`RollUp::roll_up_event`]), the roll-up pass over the
//!   sharded `rollup` index (at most [`ROLLUP_BATCH`](crate::domain::event::ROLLUP_BATCH) `new` or
//!   `partial` events, oldest first, merged across the shards), a resumable walk of the
//!   whole index for reconciliation, and [`reopen_event`] for operator restarts.
//! * [`retention`](crate::domain::retention) — the DynamoDB TTL value (epoch seconds) of terminal events and their
//!   deliveries, and the read filter that hides expired items before TTL deletes them.
//! * [`items`] — events and deliveries as stored, with the monitor's own attributes.
//! * [`query`] — events by status and time (paged with an opaque cursor), an event with its
//!   delivery log, and the "needs attention" view.
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

pub mod error;
pub mod items;
pub mod query;
pub mod rollup;

pub use error::MonitorError;
pub use rollup::{reopen_event, IndexWalk, ReopenOutcome, RollUp, RollUpOutcome, RollUpReport};
