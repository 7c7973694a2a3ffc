//! Recovery actions: what an operator does to a subscription's deliveries (the operator rows of `docs/lifecycles.md#integration-delivery`,
//! `#subscription` and `#replay-job`), each audited:
//!
//! * [`retry`] — an operator restarts one delivery: `dead | failed | retrying | delivered →
//!   pending`, attempts and errors reset, the attempt history kept, dispatch nudged.
//! * [`replay`] — an operator replays a window (≤ 7 days) of a subscription's existing delivery
//!   records: a tracked job that walks the subscription's deliveries in chunks and saves its
//!   position after each, so a run cut short is resumed without restarting anything twice.
//! * [`recover`] — the same jobs started by an account through its own door: a window replay, or
//!   a recovery of the subscription's dead and failed deliveries since an instant, bounded per
//!   account.
//! * [`restart`] — what goes with the write that restarts a delivery: the pull cursor's rewind
//!   before it, the event's reopen after it.
//! * [`resume`] — an operator resumes a paused subscription (dead count reset; changes skipped
//!   while paused stay skipped: they have no delivery record).
//! * [`integration_history`] — a subscription's deliveries by status and time, a delivery's attempts.
//! * [`audit`] — the audit history every operator action writes, in the same transaction as the
//!   action where the action is one write.
//!
//! # Restarting a delivery (retry and replay)
//!
//! One conditional update ([`crate::store::delivery::restart`]) whose condition is
//! `DELIVERY_LIFECYCLE.expect(from, trigger, pending)` — the status read must still be the stored
//! one, so a worker's or an adapter's concurrent move is never overwritten. It sets `pending`,
//! `attempts = 0`, `not_before = now`, removes `last_error`/`last_http_status`, the
//! needs-attention listing and any retention expiry, and removes the worker's lease: a worker
//! still running an attempt then fails its outcome write (conditional on its lease token) and
//! changes nothing. The attempt log is kept; the next attempt is number 1 again
//! ([`integration_history::attempt_runs`] numbers the runs). A push delivery also goes back on the sharded
//! `due` index; the dispatcher's stream handler publishes it as it enters `pending`, and the
//! sweep publishes it again if that message is lost. Finally the event monitor reopens the
//! change's event ([`crate::delivery::rollup::reopen_event`]).
//!
//! A pull (`poll`) delivery restarted behind the subscription's acknowledged cursor would never be
//! read again, so the cursor first moves back to just before it and the subscription's pull epoch
//! increments, which makes every cursor read before the restart stale (see
//! [`crate::domain::pull_cursor`]).

pub mod audit;
pub mod integration_history;
pub mod recover;
pub mod replay;
pub mod restart;
pub mod resume;
pub mod retry;
