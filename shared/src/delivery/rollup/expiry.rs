//! The retention of an event's deliveries, kept with their event's: set when the event becomes
//! final, removed while it is open (`docs/lifecycles.md#event-status`).

use super::error::RollUpError;
use crate::store;
use crate::store::delivery::Delivery;
use crate::store::write::{send, Write, Written};
use crate::store::StoreError;
use futures::stream::{self, StreamExt};

/// Delivery expiry writes in flight at once for one event.
const EXPIRY_CONCURRENCY: usize = 10;

/// Sets (`Some`) the TTL of every delivery of an event that would otherwise expire before the
/// event, or removes (`None`) every delivery's TTL. Deliveries that vanished in the meantime are
/// not recreated.
pub(super) async fn set_delivery_expiry(
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
pub(super) fn expiry_needs_write(d: &Delivery, ttl: Option<i64>) -> bool {
    match ttl {
        Some(ttl) => d.expires_at.is_none_or(|own| own < ttl),
        None => d.expires_at.is_some(),
    }
}
