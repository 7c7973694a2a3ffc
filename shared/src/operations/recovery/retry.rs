//! Operator retry of one delivery (the operator restart rows of
//! `docs/lifecycles.md#integration-delivery`: a dead, failed, delivered or retrying delivery back
//! to `pending`).
//!
//! `dead`, `failed`, `retrying` and `delivered` deliveries go back to `pending` from their first
//! attempt, in one transaction with the audit entry. `pending` is refused as a conflict (it is
//! already waiting); `skipped_filter` is refused with the why of the lifecycle's "cannot happen"
//! row.

use super::audit::{write_with_audit, AuditAction};
use super::restart::{reopen_event, restart_write, rewind_pull_cursor};
use crate::domain::integration_delivery::{operator_restart, DeliveryMove, DeliveryStatus};
use crate::domain::lifecycle::{Status, TransitionError};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, AuditId, ChangeId, SubscriptionId};
use crate::operations::{Ops, OpsError};
use crate::store::audit::AuditRecord;
use crate::store::delivery::{Delivery, Restart};

/// A retry request.
#[derive(Debug, Clone, Copy)]
pub struct RetryRequest<'a> {
    pub account_id: &'a AccountId,
    pub subscription_id: &'a SubscriptionId,
    pub change_id: &'a ChangeId,
    pub operator: &'a str,
    pub reason: &'a str,
}

/// What a retry did.
#[derive(Debug, Clone)]
pub struct RetryOutcome {
    /// The delivery as it is after the restart.
    pub delivery: Delivery,
    pub previous_status: DeliveryStatus,
    pub audit_id: AuditId,
    /// What the event monitor did with the change's event (push deliveries).
    pub event: Option<String>,
}

/// Why a status cannot be retried, for people.
pub fn refusal(status: DeliveryStatus, e: &TransitionError) -> String {
    match (status, e) {
        (DeliveryStatus::SkippedFilter, TransitionError::ForbiddenByRule { why, .. }) => {
            format!("a skipped_filter delivery can never be retried or replayed: {why}")
        }
        (DeliveryStatus::Pending, _) => {
            "the delivery is already pending: it waits for its next attempt \
             (push) or for the adapter's cursor (pull); there is nothing to retry"
                .to_owned()
        }
        (status, e) => format!("a {status} delivery cannot be retried: {e}"),
    }
}

/// What an account's administrator may retry: a delivery that ended without being delivered
/// (an operator may also restart a delivered or retrying one).
pub const ADMINISTRATOR_RETRIES: &[DeliveryStatus] =
    &[DeliveryStatus::Dead, DeliveryStatus::Failed];

/// An operator's retry: any status the lifecycle lets an operator restart.
pub async fn retry_delivery(
    ops: &Ops<'_>,
    req: RetryRequest<'_>,
) -> Result<RetryOutcome, OpsError> {
    retry_delivery_from(ops, req, None).await
}

/// The same retry, only from one of `allowed` statuses when given (an administrator's:
/// [`ADMINISTRATOR_RETRIES`]); another status is a conflict and nothing is written. The check is
/// made on each status the retry decides from, so a delivery that moves meanwhile is judged again.
pub async fn retry_delivery_from(
    ops: &Ops<'_>,
    req: RetryRequest<'_>,
    allowed: Option<&[DeliveryStatus]>,
) -> Result<RetryOutcome, OpsError> {
    let sub = ops
        .subscription(req.account_id, req.subscription_id)
        .await?;
    let mut delivery = ops
        .delivery(req.account_id, req.subscription_id, req.change_id)
        .await?;
    // A worker may move the delivery between the read and the write (its condition is the status
    // read); read again and decide again once before giving up.
    for round in 0..2 {
        let previous_status = delivery.status;
        check_allowed(previous_status, allowed)?;
        let movement = operator_restart(previous_status)
            .map_err(|e| OpsError::Conflict(refusal(previous_status, &e)))?;
        if delivery.method.is_poll() {
            rewind_pull_cursor(ops, req.account_id, &sub.subscription_id, req.change_id).await?;
        }
        let now = ops.now();
        let restart = Restart {
            delivery: &delivery,
            movement,
            operator: req.operator,
            replay_job: None,
        };
        let audit = retry_audit(&req, &delivery, movement, now);
        if write_with_audit(ops, Some(restart_write(ops, &restart, now)?), &audit).await? {
            tracing::info!(
                operator = %req.operator,
                delivery_id = %delivery.delivery_id,
                from = %previous_status,
                "operator retry: delivery restarted"
            );
            let event = reopen_event(ops, &delivery).await;
            let after = ops
                .delivery(req.account_id, req.subscription_id, req.change_id)
                .await?;
            return Ok(RetryOutcome {
                delivery: after,
                previous_status,
                audit_id: audit.audit_id,
                event,
            });
        }
        let current = ops
            .delivery(req.account_id, req.subscription_id, req.change_id)
            .await?;
        if round == 1 || current.status == previous_status {
            return Err(OpsError::Conflict(format!(
                "the delivery moved from {previous_status} to {} while the retry was being written; \
                 look at it again and retry if it still needs it",
                current.status
            )));
        }
        delivery = current;
    }
    unreachable!("the loop returns on its second round")
}

/// A retry restricted to `allowed` statuses refuses any other as a conflict.
fn check_allowed(
    status: DeliveryStatus,
    allowed: Option<&[DeliveryStatus]>,
) -> Result<(), OpsError> {
    match allowed.filter(|a| !a.contains(&status)) {
        Some(allowed) => Err(OpsError::Conflict(format!(
            "the delivery is {status}; only a {} delivery can be retried here",
            allowed
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" or ")
        ))),
        None => Ok(()),
    }
}

/// The audit entry of a retry of `delivery` (as read) by `movement`.
fn retry_audit(
    req: &RetryRequest<'_>,
    delivery: &Delivery,
    movement: DeliveryMove,
    now: Timestamp,
) -> AuditRecord {
    let mut audit = AuditRecord::new(
        AuditAction::RetryDelivery,
        req.account_id,
        req.subscription_id,
        req.operator,
        req.reason,
        now,
    )
    .detail("from_status", delivery.status)
    .detail("attempts_before", delivery.attempts)
    .detail("trigger", format!("{:?}", movement.0));
    audit.change_id = Some(req.change_id.clone());
    audit.delivery_id = Some(delivery.delivery_id.clone());
    audit
}
