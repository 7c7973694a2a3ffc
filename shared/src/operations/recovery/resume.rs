//! Operator resume of a paused subscription (`docs/lifecycles.md#subscription`, row
//! *OperatorResume* of `SUBSCRIPTION_LIFECYCLE`; the pause itself is the delivery worker's):
//! `paused → active` and the consecutive dead count back to zero, in one transaction with the
//! audit entry. Changes that arrived while it was paused were skipped by ingest and have no
//! delivery record: they stay skipped (replay cannot recreate them either).

use super::audit::{write_with_audit, AuditAction};
use crate::domain::subscription::{on_resume, SubscriptionStatus};
use crate::ids::{AccountId, AuditId, SubscriptionId};
use crate::operations::{Ops, OpsError};
use crate::store::audit::AuditRecord;
use crate::store::subscription::{self, Subscription};

/// What a resume did.
#[derive(Debug, Clone)]
pub struct ResumeOutcome {
    pub subscription: Subscription,
    pub dead_count_before: u32,
    pub audit_id: AuditId,
}

pub async fn resume_subscription(
    ops: &Ops<'_>,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    operator: &str,
    reason: &str,
) -> Result<ResumeOutcome, OpsError> {
    let sub = ops.subscription(account_id, subscription_id).await?;
    let status = sub.status;
    let decision = on_resume(status).map_err(|_| {
        OpsError::Conflict(format!(
            "the subscription is {status}; only a paused subscription can be resumed"
        ))
    })?;
    let now = ops.now();
    let update = subscription::resume(ops.table, &sub, &decision, operator, now)?;
    let dead_count_before = sub.consecutive_dead;
    let mut audit = AuditRecord::new(
        AuditAction::ResumeSubscription,
        account_id,
        subscription_id,
        operator,
        reason,
        now,
    )
    .detail("dead_count_before", dead_count_before);
    if let Some(paused_at) = sub.paused_at {
        audit = audit.detail("paused_at", paused_at);
    }
    if !write_with_audit(ops, Some(update), &audit).await? {
        let current = ops.subscription(account_id, subscription_id).await?;
        return Err(OpsError::Conflict(format!(
            "the subscription changed while it was being resumed (it is {} now)",
            current.status
        )));
    }
    tracing::info!(%operator, %subscription_id, dead_count_before, "subscription resumed");
    let subscription = ops.subscription(account_id, subscription_id).await?;
    debug_assert_eq!(subscription.status, SubscriptionStatus::Active);
    Ok(ResumeOutcome {
        subscription,
        dead_count_before,
        audit_id: audit.audit_id,
    })
}
