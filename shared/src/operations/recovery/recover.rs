//! The jobs an account starts through its own door (an account token, or the console's
//! administrator): a window replay, and a recovery. Both are replay jobs
//! ([`super::replay`]: the same item, walker, chunking, restart write and resume after a run cut
//! short, the same reconciliation that continues a stopped run); a recovery is a job of kind
//! `recovery` that restarts only its subscription's deliveries in the statuses it names (dead and
//! failed by default) whose change occurred since `since` (at most seven days back), where a replay
//! restarts everything in its window, delivered deliveries included. Their restarts are the
//! operator's restart write, so their deliveries are dispatched (and fairly queued) as fresh ones.
//!
//! # Bounds
//!
//! So that one tenant's recoveries cannot take the pipeline from the others, a start through
//! the account's door is refused (`429`, with `Retry-After`) while another such job runs on the
//! subscription ([`RUNNING_JOBS_PER_SUBSCRIPTION`]) and once the account has started
//! [`JOBS_PER_ACCOUNT_PER_DAY`] jobs in the UTC day. Both bounds are conditional writes in the
//! transaction that records the job and its audit entry ([`crate::store::job_bounds`]), so
//! concurrent starts cannot pass them, and a refused start takes nothing.
//!
//! The operator's door ([`super::replay::start_job`]) is not bound, and its jobs take no slot:
//! operators are few, act for the platform (often during an incident, for many tenants at once),
//! and are audited; holding them to a tenant's daily allowance would block the recovery the bound
//! exists to protect. An account's job does not wait for an operator's on the same subscription
//! either (each restart write is conditional on the delivery's status, so the two never restart
//! one delivery twice from the same state).

use super::audit::{write_with_audit, AuditAction};
use super::replay::{created, load_job, new_job, run_recorded, ReplayRequest};
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::lifecycle::Status;
use crate::domain::replay::{validate_recovery, ReplayStatus, JOBS_PER_ACCOUNT_PER_DAY};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ReplayJobId, SubscriptionId};
use crate::operations::{Ops, OpsError};
use crate::store::audit::AuditRecord;
use crate::store::job_bounds::{self, next_utc_day};
use crate::store::replay_job::{self, ReplayJob};
use crate::store::write::Write;

pub use crate::domain::replay::{
    DEFAULT_RECOVERY_STATUSES, MAX_RECOVERY_AGE, RECOVERABLE, RUNNING_JOBS_PER_SUBSCRIPTION,
};

/// How long a refused start is told to wait when the running job is between runs (the next
/// reconciliation continues it; its progress says when it is done).
pub(crate) const BETWEEN_RUNS_RETRY_AFTER_SECS: u64 = 60;

/// Tries of a start whose refusal turned out to be a slot left by a job that has completed.
const START_TRIES: usize = 3;

/// A recovery request.
#[derive(Debug, Clone, Copy)]
pub struct RecoverRequest<'a> {
    pub account_id: &'a AccountId,
    pub subscription_id: &'a SubscriptionId,
    /// Restart deliveries whose change occurred at or after this instant (at most seven days
    /// back).
    pub since: Timestamp,
    /// The statuses to restart (of [`RECOVERABLE`]; [`DEFAULT_RECOVERY_STATUSES`] by default).
    pub statuses: &'a [DeliveryStatus],
    /// Who: the credential (`token {id}`, or the console administrator's).
    pub actor: &'a str,
    pub reason: &'a str,
}

/// Validates the request, records the recovery job (with its audit entry, within the account's
/// bounds) and runs it as far as one request's budget goes; reconciliation continues it if it
/// does not finish. Refused: `Invalid` naming `since` or `statuses`, `NotFound` for a
/// subscription not in the account, `Bounded` (429) at a bound.
pub async fn start_recovery(ops: &Ops<'_>, req: RecoverRequest<'_>) -> Result<ReplayJob, OpsError> {
    let job = create_recovery(ops, req).await?;
    run_recorded(ops, job).await
}

/// Validates the request and records the recovery job (with its audit entry, within the
/// account's bounds), without running it: [`start_recovery`] runs it at once; a job recorded and
/// not run is what a request that died right after recording it leaves, and reconciliation runs
/// it.
pub async fn create_recovery(
    ops: &Ops<'_>,
    req: RecoverRequest<'_>,
) -> Result<ReplayJob, OpsError> {
    let now = ops.now();
    let window = validate_recovery(req.since, req.statuses, now).map_err(|errors| {
        let first = &errors[0];
        OpsError::invalid(first.field(), first.to_string())
    })?;
    ops.subscription(req.account_id, req.subscription_id)
        .await?;
    let mut statuses: Vec<DeliveryStatus> = Vec::new();
    for s in req.statuses {
        if !statuses.contains(s) {
            statuses.push(*s);
        }
    }
    let job = ReplayJob::new(
        ReplayJobId::new(),
        req.account_id.clone(),
        req.subscription_id.clone(),
        window,
        req.reason.to_owned(),
        req.actor.to_owned(),
        now,
    )
    .recovering(&statuses);
    let names: Vec<&str> = statuses.iter().map(|s| s.as_str()).collect();
    let mut audit = AuditRecord::new(
        AuditAction::RecoverSubscription,
        req.account_id,
        req.subscription_id,
        req.actor,
        req.reason,
        now,
    )
    .detail("since", req.since)
    .detail("statuses", names.join(","));
    audit.job_id = Some(job.job_id.clone());
    create_bounded(ops, job, &audit).await
}

/// A window replay through the account's door: the operator's replay ([`new_job`]: the same
/// window rules and refusals), within the account's bounds. `req.operator` is the acting
/// credential.
pub async fn start_account_replay(
    ops: &Ops<'_>,
    req: ReplayRequest<'_>,
) -> Result<ReplayJob, OpsError> {
    let (job, audit) = new_job(ops, req).await?;
    let job = create_bounded(ops, job, &audit).await?;
    run_recorded(ops, job).await
}

/// Records `job` (holding its subscription's slot) with its audit entry and a charge to the
/// account's day, in one transaction. Refused: tells which bound, with how long to wait.
async fn create_bounded(
    ops: &Ops<'_>,
    job: ReplayJob,
    audit: &AuditRecord,
) -> Result<ReplayJob, OpsError> {
    let job = job.bounded();
    let now = ops.now();
    let (account_id, subscription_id) = (&job.account_id, &job.subscription_id);
    for _ in 0..START_TRIES {
        let writes = Write::all([
            replay_job::create(ops.table, &job)?,
            job_bounds::take_slot(ops.table, account_id, subscription_id, &job.job_id, now)?,
            job_bounds::charge_day(ops.table, account_id, now, JOBS_PER_ACCOUNT_PER_DAY)?,
        ])?;
        if write_with_audit(ops, Some(writes), audit).await? {
            created(&job);
            return Ok(job);
        }
        // Which condition refused it: the slot, the day, or (never in practice) the job's id.
        let holder = job_bounds::slot(ops.dynamo, ops.table, account_id, subscription_id)
            .await?
            .and_then(|s| s.job_id);
        if let Some(holder) = holder {
            match load_job(ops, account_id, &holder).await {
                Ok(running) if running.status == ReplayStatus::Running => {
                    return Err(busy(&running, now));
                }
                // A slot its completed (or vanished) job did not give back: give it back.
                Ok(_) | Err(OpsError::NotFound(_)) => {
                    ops.apply(job_bounds::release_slot(
                        ops.table,
                        account_id,
                        subscription_id,
                        &holder,
                    )?)
                    .await?;
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        let started = job_bounds::started_on(ops.dynamo, ops.table, account_id, now).await?;
        if started >= JOBS_PER_ACCOUNT_PER_DAY {
            let wait = next_utc_day(now).since(now).as_secs().max(1);
            return Err(OpsError::Bounded {
                detail: format!(
                    "the account has started {JOBS_PER_ACCOUNT_PER_DAY} replay and recovery jobs \
                     today (UTC), as many as a day allows; try again in {wait} s, or ask an \
                     operator"
                ),
                retry_after_secs: wait,
            });
        }
    }
    Err(OpsError::Conflict(
        "the job could not be recorded against concurrent starts; retry the request".into(),
    ))
}

/// The refusal while `running` holds the subscription's slot.
fn busy(running: &ReplayJob, now: Timestamp) -> OpsError {
    let wait = match running.lease_until {
        Some(until) if running.in_progress(now) => until.since(now).as_secs().max(1),
        _ => BETWEEN_RUNS_RETRY_AFTER_SECS,
    };
    OpsError::Bounded {
        detail: format!(
            "a {} job ({}) is running on this subscription, and one may run at a time; read its \
             progress, and start another once it has completed",
            running.job_kind, running.job_id
        ),
        retry_after_secs: wait,
    }
}
