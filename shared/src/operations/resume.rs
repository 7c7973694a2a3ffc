//! Operator resume of a paused subscription (seed 002 hops 5 and 7; `SUBSCRIPTION_LIFECYCLE`
//! *OperatorResume*): `paused → active` and the consecutive dead count back to zero, in one
//! transaction with the audit entry. Changes that arrived while it was paused were skipped by
//! ingest and have no delivery record: they stay skipped (replay cannot recreate them either).

use super::audit::{write_with_audit, AuditAction, AuditRecord};
use super::{build_update, Ops, OpsError, StoredSubscription};
use crate::domain::subscription::{
    on_resume, SubscriptionStatus, SubscriptionTrigger, SUBSCRIPTION_LIFECYCLE,
};
use crate::store::expr::{n, s, Expr};
use crate::store::keys;

/// What a resume did.
#[derive(Debug, Clone)]
pub struct ResumeOutcome {
    pub subscription: StoredSubscription,
    pub dead_count_before: u32,
    pub audit_id: String,
}

pub async fn resume_subscription(
    ops: &Ops<'_>,
    account_id: &str,
    subscription_id: &str,
    operator: &str,
    reason: &str,
) -> Result<ResumeOutcome, OpsError> {
    let sub = ops.subscription(account_id, subscription_id).await?;
    let status = sub.subscription.status;
    let decision = on_resume(status).map_err(|_| {
        OpsError::Conflict(format!(
            "the subscription is {status}; only a paused subscription can be resumed"
        ))
    })?;
    let condition = SUBSCRIPTION_LIFECYCLE.expect(
        status,
        SubscriptionTrigger::OperatorResume,
        decision.status,
    )?;
    let now = ops.now();
    let mut e = Expr::new()
        .value(":active", s(decision.status.to_string()))
        .value(":count", n(decision.new_count))
        .value(":now", n(now.millis()))
        .value(":operator", s(operator));
    let status_condition = e.status(&condition);
    let update = build_update(
        ops.table,
        &keys::account_pk(account_id),
        &keys::subscription_sk(subscription_id),
        "SET #status = :active, consecutive_dead = :count, updated_at = :now, resumed_at = :now, \
         resumed_by = :operator REMOVE paused_at"
            .to_owned(),
        format!("attribute_exists(pk) AND ({status_condition})"),
        &e,
    )?;
    let dead_count_before = sub.subscription.consecutive_dead;
    let mut audit = AuditRecord::new(
        AuditAction::ResumeSubscription,
        account_id,
        subscription_id,
        operator,
        reason,
        now,
    )
    .detail("dead_count_before", dead_count_before);
    if let Some(paused_at) = sub.subscription.paused_at {
        audit = audit.detail("paused_at", paused_at);
    }
    if !write_with_audit(ops, update, &audit).await? {
        let current = ops.subscription(account_id, subscription_id).await?;
        return Err(OpsError::Conflict(format!(
            "the subscription changed while it was being resumed (it is {} now)",
            current.subscription.status
        )));
    }
    tracing::info!(%operator, %subscription_id, dead_count_before, "subscription resumed");
    let subscription = ops.subscription(account_id, subscription_id).await?;
    debug_assert_eq!(subscription.subscription.status, SubscriptionStatus::Active);
    Ok(ResumeOutcome {
        subscription,
        dead_count_before,
        audit_id: audit.audit_id,
    })
}
