//! The delivery item: one per subscription × change, in its event's partition. Its key *is* the
//! subscription-change idempotency key (a conditional put on it succeeds once), and it is its own
//! work item: a retry or an operator restart waits on the sparse `due` index, a dead or failed
//! one sits on its account's needs-attention listing, a pull delivery is on the keys-only
//! `by_subscription` index in change order (the cursor API reads it). A push delivery is not:
//! that entry would bill a write per delivery for the operator's history and replay only, which
//! read a push subscription's deliveries from its account's event listing by their keys
//! (subscription × change) instead.
//!
//! Its lifecycle is the integration delivery table (docs/lifecycles.md); every status write here
//! is conditional on the table's `from` states for its move.
//!
//! In modules by use:
//! * [`item`]: the item itself — its shape, its key and the work it names, a read by key and its
//!   expiry;
//! * [`ingest`]: the item ingest creates for a new delivery;
//! * [`attempt`]: the delivery worker's writes of one attempt — the claim under a lease and the
//!   outcome;
//! * [`due`]: the sparse `due` index — the sweep's read of a shard, its postponement, and a lost
//!   first dispatch put back on it;
//! * [`restart`]: an operator restart (retry or replay) of a delivery;
//! * [`slot`]: a claimed delivery's wait for its rate-limit slot;
//! * [`cursor`]: the pull cursor's cover of a pending pull delivery;
//! * [`range`]: a range of one subscription's deliveries and its index query;
//! * [`by_subscription`]: the reads of such a range, page by page;
//! * [`attention`]: the account's needs-attention listing (its dead and failed deliveries).

pub mod attempt;
pub mod attention;
pub mod by_subscription;
pub mod cursor;
pub mod due;
pub mod ingest;
pub mod item;
pub mod range;
pub mod restart;
pub mod slot;

pub use crate::store::keys::attention_list_key;
pub use attempt::{
    claim, dead_run_ended, end_exhausted, lease_token, save_outcome, Claim, Outcome,
};
pub use attention::{attention_deliveries, attention_from};
pub use by_subscription::{
    by_subscription_page, change_before, gather_by_subscription, last_change, DeliveryPage, Filter,
    Gathered,
};
pub use cursor::cover_by_cursor;
pub use due::{due_by, due_query, postpone, requeue_lost_dispatch, Due};
pub use ingest::{create, new_item};
#[cfg(test)]
pub(crate) use item::test_delivery;
pub use item::{
    exists, get, key, set_expiry, work_from_key, AttemptRecord, Delivery, DeliveryWork, KIND,
};
pub use range::{excluded, range_query, SubscriptionRange, Upper};
pub use restart::{restart, Restart};
