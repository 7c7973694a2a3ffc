//! The integration-delivery pipeline, one module per stage, in the order a change goes through
//! them (`docs/lifecycles.md#integration-delivery`; the words are in `docs/glossary.md`):
//!
//! * [`ingest`] — the changes table's stream: each change becomes an event and one delivery per
//!   eligible subscription (`pending` with its projected payload, or `skipped_filter`).
//! * [`route`] — each record of the delivery table's stream goes to publishing, to a prompt
//!   roll-up, or nowhere (the one rule; the template's `FilterCriteria` keep to it).
//! * [`dispatch`] — publishes push work to the delivery queue: from the stream as it enters
//!   `pending` (up to ten of an account's new deliveries packed in one message), and from the
//!   sharded `due` index by the one-minute sweep (one delivery to a message).
//! * [`worker`] — the delivery worker: for each delivery of each message, on its own, claims an
//!   attempt, calls the adapter (webhook or internal), classifies the answer, writes the outcome,
//!   pauses a subscription at fifty dead in a row.
//! * [`rollup`] — the event's status rolled up from its deliveries: promptly from the stream,
//!   and by the pass and the walk of the reconciliation schedules.
//!
//! Pull deliveries leave the pipeline after ingest: their adapter reads them through the cursor
//! ([`crate::operations::pull`]).

pub mod dispatch;
pub mod ingest;
pub mod rollup;
pub mod route;
pub mod worker;
