//! Notification delivery (lifecycle: `docs/lifecycles.md#notification-delivery`): notices, their
//! channel deliveries, the channel worker, provider confirmations, nightly settling and operator
//! requeue.
//!
//! # Shape
//!
//! ```text
//! notices API / delivery worker ──► notice item (requested)
//!        NotificationTable stream ──► fan-out: one delivery per recipient × channel
//!                                      (console: delivered at once; others: queued + work row)
//!        NotificationTable stream ──► work row inserted → message on the notification queue
//!              notification queue ──► worker: claim queued → sending, adapter, outcome
//!       SES → SNS → provider route ──► sent → delivered, bounces recorded
//!                nightly reconcile ──► settle: sending > 15 min → failed (ambiguous),
//!                                      queued past deadline → expired (the `watch` index)
//!                   operator route ──► requeue: failed (attempts_exhausted) → queued + work row
//! ```
//!
//! | module                 | what it does |
//! |------------------------|--------------|
//! | [`table`]              | the pipeline's handle on the table: reads, and sends the item modules' named writes |
//! | [`notice_service`]     | create (idempotency key), fan-out, withdraw, supersede, progress summary |
//! | [`channels`]           | the channels and their adapters: email (SES v2), Slack (incoming webhook), console |
//! | [`worker`]             | the notification queue consumer (claim, adapter, outcome, backoff) |
//! | [`stream`]             | the table's stream: fan-out of requested notices, publishing work rows |
//! | [`confirm`]            | provider events: `sent → delivered`, bounces, dedupe, history cap |
//! | [`sns`]                | SNS message signature verification (SES events arrive through SNS) |
//! | [`settle`]             | the nightly settling the reconcile function wires into reconciliation |
//! | [`requeue`]            | operator requeue of exhausted deliveries |
//! | [`metrics`]            | the terminal-failure metric (CloudWatch embedded metric format) |
//! | [`bounds`]             | what an account's notices may send: allowed recipients, counts, the daily quota |
//!
//! The stored items (notice, delivery, work row, progress shards, provider reference, supersede
//! pointer, console inbox) and their writes are modules of [`crate::store`]: `notice`,
//! `notification_delivery`, `notification_work`, `notice_progress`, `provider_ref`,
//! `supersede_pointer`, `console_inbox`. The notice's own lifecycle is
//! [`crate::domain::notice`].
//!
//! # Decisions
//!
//! * **Storage refuses every invalid move.** Every status write is a full-item put conditioned
//!   on the lifecycle's condition for its `(trigger, to)` (`#status IN (:from)`) *and* on the
//!   item's `version` (optimistic concurrency, so a concurrent provider event or settle is never
//!   overwritten), in one transaction with the notice's progress counters and the work row
//!   effect. See [`crate::store::notification_delivery`].
//! * **The receive count is the retry budget.** The table keeps no count of attempts. A
//!   retryable result below the eighth receive puts the delivery back to `queued` (with
//!   `not_before`), changes the message's visibility to the jittered backoff and reports the
//!   message as a batch item failure; on the eighth receive the delivery fails
//!   (`attempts_exhausted`) and the message goes back with visibility 0, so the next receive moves
//!   it to the dead-letter queue (`maxReceiveCount: 8`).
//! * **Dispatch work is a row.** A queued delivery (other than console) has a work row
//!   (`WORK#{key}`) carrying a `dispatch_id`; inserting it publishes a message (stream), the
//!   message names the dispatch id, and the row is deleted when the delivery leaves the queue for
//!   good (sent, failed, skipped, cancelled, expired). A message whose dispatch id is not the
//!   row's is stale and is dropped. Operator requeue writes a fresh row (new dispatch id).
//! * **The progress summary is exact.** Counts by state live on eight `PROGRESS#n` items of the
//!   notice (sharded so a large notice has no single hot item) and change in the same
//!   transaction as the status they count; the summary is their sum.
//! * **Bounces are recorded, not a status.** The lifecycle table has no row into `bounced` (no
//!   adapter answers with a bounce), so a bounce is appended to the delivery's history and kept
//!   in `bounce` (type, time) without changing the status; storage would refuse a move the table
//!   does not have. `deferred` has no writer either (quiet hours and digests do not exist yet).
//!   Both stay in the vocabulary and in the progress summary.
//! * **A notice applies** while it is `requested` or `active`; `withdrawn` and `superseded`
//!   notices do not. Withdrawal and replacement cancel queued deliveries at once; a delivery the
//!   cancellation has not reached yet is cancelled by the worker's claim guard instead of sent.
//!   A delivery already `sending` finishes (the lifecycle cancels only queued work).

pub mod bounds;
pub mod channels;
pub mod confirm;
pub mod metrics;
pub mod notice_service;
pub mod requeue;
pub mod settle;
mod skip_warnings;
pub mod sns;
pub mod stream;
pub mod table;
pub mod worker;

use crate::domain::lifecycle::TransitionError;
use crate::store::StoreError;

/// Why a notification operation could not be completed (faults, not decisions).
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid move: {0}")]
    Transition(#[from] TransitionError),
    #[error("SQS: {0}")]
    Queue(String),
    #[error("message body is not notification work: {0}")]
    Malformed(String),
}

impl NotifyError {
    pub fn queue(e: impl std::fmt::Display + std::fmt::Debug) -> Self {
        NotifyError::Queue(format!("{e}: {e:?}").chars().take(600).collect())
    }
}
