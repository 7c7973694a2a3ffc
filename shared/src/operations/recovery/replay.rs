//! Operator window replay as a tracked, resumable job (`docs/lifecycles.md#replay-job`; rules in
//! [`crate::domain::replay`]). An account's own replays and recoveries are the same jobs, started
//! within the account's bounds ([`super::recover`]); a recovery job walks the same way and
//! restarts only the deliveries in its statuses.
//!
//! The job item, its lease and its progress writes are [`crate::store::replay_job`].
//!
//! A job walks its subscription's retained deliveries (a pull subscription's in change order on
//! the `by_subscription` index, a push subscription's in ingest order through its account's event
//! listing: `SubscriptionRange::listing`), [`Budget::chunk`] evaluated records at a time, keeping those whose change occurred in
//! the window (a filter), and restarts each eligible one (see [`super::restart`]). After every
//! chunk it saves its position (the last record evaluated) and counts, conditional on holding the
//! job's lease; the last chunk completes it. A run stops at its [`Budget`] (the API's run stays
//! well inside the Lambda's and the gateway's timeouts) and releases the lease; a run that dies
//! leaves a lease that lapses after [`JOB_LEASE`]. Either way the job stays `running` at its saved
//! position, and the next frequent reconcile run continues it ([`resume_stalled`]); an operator
//! may also resume it at once (`POST …/replays/{job_id}/resume`).
//!
//! Resuming is safe: a restarted delivery remembers the job (`replay_job`), and the restart write
//! is conditional on not having been restarted by this job, so a chunk that a dead run had half
//! done is walked again without restarting anything twice, and its counts come out the same.

use super::audit::{write_with_audit, AuditAction};
use super::restart::{reopen_event, restart_one, rewind_pull_cursor};
use crate::domain::input::FieldErrors;
use crate::domain::replay::{
    after_chunk, recovery_item, replay_item, validate_window, JobKind, ReplayItem, ReplayStatus,
};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, ReplayJobId, SubscriptionId};
use crate::operations::{Ops, OpsError, WRITE_CONCURRENCY};
use crate::store::audit::AuditRecord;
use crate::store::cursor;
use crate::store::delivery::{by_subscription_page, Delivery, Filter, Restart, SubscriptionRange};
use crate::store::job_bounds;
use crate::store::replay_job::{self, Chunk};
use crate::store::write::Write;
use futures::stream::{self, StreamExt};
use std::time::{Duration, Instant};

pub use crate::store::replay_job::{job_pk, job_sk, ReplayCounts, ReplayJob, JOB_LEASE};

/// How much one run may do.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Records evaluated per chunk (one index query page).
    pub chunk: i32,
    /// Stop after this many chunks (`None`: no limit but the deadline).
    pub max_chunks: Option<u32>,
    /// Start no chunk after this instant.
    pub deadline: Instant,
}

impl Budget {
    /// The API's run: eight seconds, well inside the API function's 20 s timeout and the HTTP
    /// API's 30 s integration timeout.
    pub fn api() -> Self {
        Budget {
            chunk: 200,
            max_chunks: None,
            deadline: Instant::now() + Duration::from_secs(8),
        }
    }
}

/// A replay request.
#[derive(Debug, Clone, Copy)]
pub struct ReplayRequest<'a> {
    pub account_id: &'a AccountId,
    pub subscription_id: &'a SubscriptionId,
    pub from: Timestamp,
    pub to: Timestamp,
    pub operator: &'a str,
    pub reason: &'a str,
}

/// Validates the window and records the job (with its audit entry); the caller then runs it.
/// The operator's door: unbound (see [`super::recover`] for the account's).
pub async fn create_job(ops: &Ops<'_>, req: ReplayRequest<'_>) -> Result<ReplayJob, OpsError> {
    let (job, audit) = new_job(ops, req).await?;
    if !write_with_audit(ops, Some(replay_job::create(ops.table, &job)?), &audit).await? {
        return Err(OpsError::Conflict(
            "a replay job with this id exists already; retry the request".into(),
        ));
    }
    created(&job);
    Ok(job)
}

/// A replay request's job and audit entry, not yet written: the window validated, the
/// subscription found in the account.
pub(super) async fn new_job(
    ops: &Ops<'_>,
    req: ReplayRequest<'_>,
) -> Result<(ReplayJob, AuditRecord), OpsError> {
    let now = ops.now();
    let window = validate_window(req.from, req.to, now).map_err(|errors| {
        let first = &errors[0];
        OpsError::invalid(first.field(), first.to_string())
    })?;
    ops.subscription(req.account_id, req.subscription_id)
        .await?;
    let job = ReplayJob::new(
        ReplayJobId::new(),
        req.account_id.clone(),
        req.subscription_id.clone(),
        window,
        req.reason.to_owned(),
        req.operator.to_owned(),
        now,
    );
    let mut audit = AuditRecord::new(
        AuditAction::ReplayWindow,
        req.account_id,
        req.subscription_id,
        req.operator,
        req.reason,
        now,
    )
    .detail("from", window.from)
    .detail("to", window.to);
    audit.job_id = Some(job.job_id.clone());
    Ok((job, audit))
}

/// Logs a recorded job.
pub(super) fn created(job: &ReplayJob) {
    tracing::info!(
        actor = %job.requested_by,
        job_id = %job.job_id,
        kind = %job.job_kind,
        subscription_id = %job.subscription_id,
        from = %job.from,
        to = %job.to,
        "replay job created"
    );
}

/// A replay window as a request writes it: `from` and `to` as RFC 3339 texts, each `None` where
/// the request left it out (its door names that). The window when both are instants making one
/// [`validate_window`] accepts (`None` while one is left out); otherwise every refusal.
pub fn read_window(
    from: Option<&str>,
    to: Option<&str>,
    now: Timestamp,
) -> Result<Option<(Timestamp, Timestamp)>, FieldErrors> {
    let mut refused = FieldErrors::default();
    let mut instant = |name: &str, text: Option<&str>| {
        let t = Timestamp::parse_rfc3339(text?.trim());
        if t.is_none() {
            refused.add(
                name,
                "must be an RFC 3339 date-time, e.g. 2024-05-01T00:00:00Z",
            );
        }
        t
    };
    let (from, to) = (instant("from", from), instant("to", to));
    if let (Some(from), Some(to)) = (from, to) {
        for e in validate_window(from, to, now).err().unwrap_or_default() {
            refused.add(e.field(), e.to_string());
        }
    }
    refused.or(from.zip(to))
}

/// Records the job and runs it as far as one request's budget goes. The job is recorded first:
/// a run that fails is reported on the job (still `running`, not in progress, for a resume), not
/// by losing the job's id in an error.
pub async fn start_job(ops: &Ops<'_>, req: ReplayRequest<'_>) -> Result<ReplayJob, OpsError> {
    let job = create_job(ops, req).await?;
    run_recorded(ops, job).await
}

/// Runs a job just recorded as far as one request's budget goes; a run that fails leaves the
/// job as saved (still `running`, for reconciliation or a resume to continue).
pub(super) async fn run_recorded(ops: &Ops<'_>, job: ReplayJob) -> Result<ReplayJob, OpsError> {
    match run_job(ops, &job.account_id, &job.job_id, Budget::api()).await {
        Ok(job) => Ok(job),
        Err(e) => {
            tracing::error!(job_id = %job.job_id, error = %e, "replay run failed; the job can be resumed");
            load_job(ops, &job.account_id, &job.job_id).await
        }
    }
}

/// The account's job, or "replay job not found".
pub async fn load_job(
    ops: &Ops<'_>,
    account_id: &AccountId,
    job_id: &ReplayJobId,
) -> Result<ReplayJob, OpsError> {
    replay_job::get(ops.dynamo, ops.table, account_id, job_id)
        .await?
        .ok_or(OpsError::NotFound("replay job"))
}

/// The account's jobs, newest first (optionally one subscription's).
pub async fn list_jobs(
    ops: &Ops<'_>,
    account_id: &AccountId,
    subscription_id: Option<&SubscriptionId>,
    limit: u32,
    cursor: Option<&str>,
) -> Result<(Vec<ReplayJob>, Option<String>), OpsError> {
    // The position is a job id (every id continues before itself, whether a job has it or not).
    let before = cursor
        .map(|c| {
            cursor::decode(c)
                .filter(|p| cursor::is_id(p))
                .map(ReplayJobId::from_stored)
                .ok_or_else(OpsError::bad_cursor)
        })
        .transpose()?;
    let (jobs, next) = replay_job::list(
        ops.dynamo,
        ops.table,
        account_id,
        subscription_id,
        limit,
        before.as_ref(),
    )
    .await?;
    Ok((jobs, next.map(|id| cursor::encode(id.as_str()))))
}

/// Takes the job's lease for a run. `Ok(None)` when the job is already completed.
async fn claim(ops: &Ops<'_>, job: &ReplayJob) -> Result<Option<String>, OpsError> {
    let token = uuid::Uuid::new_v4().to_string();
    if ops
        .apply(replay_job::claim(ops.table, job, &token, ops.now())?)
        .await?
    {
        return Ok(Some(token));
    }
    let current = load_job(ops, &job.account_id, &job.job_id).await?;
    if current.status == ReplayStatus::Completed {
        return Ok(None);
    }
    Err(OpsError::Conflict(format!(
        "the replay job is being processed by another run (its lease ends at {}); read its \
         status, and resume it only once that run has stopped",
        current
            .lease_until
            .map(|t| t.to_string())
            .unwrap_or_default()
    )))
}

/// Runs a job within `budget`: claims it, walks chunks, saves progress after each, releases it.
/// Returns the job as saved. A completed job is returned as it is.
pub async fn run_job(
    ops: &Ops<'_>,
    account_id: &AccountId,
    job_id: &ReplayJobId,
    budget: Budget,
) -> Result<ReplayJob, OpsError> {
    let job = load_job(ops, account_id, job_id).await?;
    if job.status == ReplayStatus::Completed {
        return Ok(job);
    }
    let Some(token) = claim(ops, &job).await? else {
        return load_job(ops, account_id, job_id).await;
    };
    let mut job = load_job(ops, account_id, job_id).await?;
    let mut chunks_this_run = 0u32;
    let result = async {
        let listing = listed_by(ops, &job).await?;
        loop {
            if budget.max_chunks.is_some_and(|m| chunks_this_run >= m)
                || Instant::now() >= budget.deadline
            {
                break;
            }
            let (counts, position, more) =
                walk_chunk(ops, &job, listing.as_ref(), budget.chunk).await?;
            chunks_this_run += 1;
            save_chunk(ops, &mut job, &token, counts, position, more).await?;
            if !more {
                break;
            }
        }
        Ok::<(), OpsError>(())
    }
    .await;
    if job.status == ReplayStatus::Running {
        release(ops, &job, &token).await?;
    }
    result?;
    tracing::info!(
        job_id = %job.job_id,
        status = %job.status,
        chunks = chunks_this_run,
        restarted = job.restarted,
        "replay run"
    );
    load_job(ops, account_id, job_id).await
}

/// Where the job's subscription's deliveries are listed ([`Ops::deliveries_listed_by`]); its
/// account's event listing, which reaches every delivery by key, when the subscription is gone.
async fn listed_by(ops: &Ops<'_>, job: &ReplayJob) -> Result<Option<AccountId>, OpsError> {
    match ops
        .subscription(&job.account_id, &job.subscription_id)
        .await
    {
        Ok(sub) => Ok(ops.deliveries_listed_by(&sub).await?.cloned()),
        Err(OpsError::NotFound(_)) => Ok(Some(job.account_id.clone())),
        Err(e) => Err(e),
    }
}

/// Walks one chunk: returns its counts, the new position and whether more remain.
async fn walk_chunk(
    ops: &Ops<'_>,
    job: &ReplayJob,
    listing: Option<&AccountId>,
    chunk: i32,
) -> Result<(ReplayCounts, Option<ChangeId>, bool), OpsError> {
    let window = job.window();
    let filter = Filter {
        occurred_from: Some(window.from),
        occurred_before: Some(window.to),
        ..Filter::account(&job.account_id)
    };
    let range = SubscriptionRange {
        subscription_id: &job.subscription_id,
        after: job.position.as_ref(),
        upper: None,
        forward: true,
        listing,
    };
    let page = by_subscription_page(ops.dynamo, ops.table, &range, &filter, None, chunk).await?;
    let mut deliveries = page.deliveries;
    deliveries.sort_by(|a, b| a.change_id.cmp(&b.change_id));
    let position = page.last_sort.clone().or_else(|| {
        deliveries
            .last()
            .map(|d| d.change_id.clone())
            .or_else(|| job.position.clone())
    });
    let more = page.next_start.is_some();

    let mut counts = ReplayCounts::default();
    let mut to_restart = Vec::new();
    for d in deliveries {
        match decide(&d, job) {
            ReplayItem::OutsideWindow => continue,
            ReplayItem::Restart(_) => to_restart.push(d),
            other => counts.tally(Walked::of(other)),
        }
        counts.in_window += 1;
    }
    // Pull deliveries: move the acknowledged cursor back before the earliest one first.
    if let Some(earliest) = to_restart
        .iter()
        .find(|d| d.method.is_poll())
        .map(|d| d.change_id.clone())
    {
        match rewind_pull_cursor(ops, &job.account_id, &job.subscription_id, &earliest).await {
            Ok(_) | Err(OpsError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let outcomes: Vec<Result<Walked, OpsError>> = stream::iter(to_restart)
        .map(|d| restart_with_one_reread(ops, job, d))
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect()
        .await;
    for outcome in outcomes {
        counts.tally(outcome?);
    }
    Ok((counts, position, more))
}

/// Decides one delivery for the job: a replay's rule, or a recovery's (only its statuses).
fn decide(d: &Delivery, job: &ReplayJob) -> ReplayItem {
    let window = job.window();
    let by_this_job = d.replay_job.as_ref() == Some(&job.job_id);
    match job.job_kind {
        JobKind::Replay => replay_item(d.status, d.occurred_at, &window, by_this_job),
        JobKind::Recovery => {
            recovery_item(d.status, d.occurred_at, &window, by_this_job, &job.statuses)
        }
    }
}

/// What became of one in-window delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walked {
    Restarted,
    AlreadyPending,
    SkippedFilter,
    /// Moved by someone else twice while the job tried to restart it.
    Conflict,
    Outside,
    /// A recovery's: not in a status it restarts.
    NotSelected,
}

impl Walked {
    fn of(item: ReplayItem) -> Walked {
        match item {
            ReplayItem::Restart(_) | ReplayItem::RestartedByThisJob => Walked::Restarted,
            ReplayItem::AlreadyPending => Walked::AlreadyPending,
            ReplayItem::NeverReplayed(_) => Walked::SkippedFilter,
            ReplayItem::OutsideWindow => Walked::Outside,
            ReplayItem::NotSelected => Walked::NotSelected,
        }
    }
}

impl ReplayCounts {
    fn tally(&mut self, walked: Walked) {
        match walked {
            Walked::Restarted => self.restarted += 1,
            Walked::AlreadyPending => self.already_pending += 1,
            Walked::SkippedFilter => self.skipped_filter += 1,
            Walked::Conflict => self.conflicts += 1,
            Walked::NotSelected => self.not_selected += 1,
            Walked::Outside => {}
        }
    }
}

/// Restarts one delivery; if it moved since it was read, reads it again and decides once more.
async fn restart_with_one_reread(
    ops: &Ops<'_>,
    job: &ReplayJob,
    mut d: Delivery,
) -> Result<Walked, OpsError> {
    for _ in 0..2 {
        let item = decide(&d, job);
        let ReplayItem::Restart(movement) = item else {
            return Ok(Walked::of(item));
        };
        let restart = Restart {
            delivery: &d,
            movement,
            operator: &job.requested_by,
            replay_job: Some(&job.job_id),
        };
        if restart_one(ops, &restart).await? {
            reopen_event(ops, &d).await;
            return Ok(Walked::Restarted);
        }
        d = ops
            .delivery(&job.account_id, &job.subscription_id, &d.change_id)
            .await?;
    }
    Ok(Walked::Conflict)
}

/// Saves a chunk's progress (and completes the job after the last chunk), holding the lease.
async fn save_chunk(
    ops: &Ops<'_>,
    job: &mut ReplayJob,
    token: &str,
    counts: ReplayCounts,
    position: Option<ChangeId>,
    more: bool,
) -> Result<(), OpsError> {
    let movement = after_chunk(more);
    let now = ops.now();
    let mut total = job.counts();
    total.add(&counts);
    let chunk = Chunk {
        movement,
        total,
        position: position.as_ref(),
    };
    let mut save = replay_job::save_chunk(ops.table, job, token, &chunk, now)?;
    if job.bounded && movement.1 == ReplayStatus::Completed {
        // An account's job gives its subscription's running-job slot back as it completes.
        save = Write::all([
            save,
            job_bounds::release_slot(
                ops.table,
                &job.account_id,
                &job.subscription_id,
                &job.job_id,
            )?,
        ])?;
    }
    if !ops.apply(save).await? {
        return Err(OpsError::Conflict(
            "the replay job's lease was taken over by another run; read its status".into(),
        ));
    }
    let status = movement.1;
    job.status = status;
    job.chunks += 1;
    job.position = position.or(job.position.take());
    job.in_window = total.in_window;
    job.restarted = total.restarted;
    job.already_pending = total.already_pending;
    job.skipped_filter = total.skipped_filter;
    job.conflicts = total.conflicts;
    job.not_selected = total.not_selected;
    job.updated_at = now;
    Ok(())
}

/// Lets go of the job's lease so that it can be resumed at once.
async fn release(ops: &Ops<'_>, job: &ReplayJob, token: &str) -> Result<(), OpsError> {
    ops.apply(replay_job::release(ops.table, job, token)?)
        .await?;
    Ok(())
}

/// What reconciliation's pass over stopped replay jobs did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StalledReport {
    pub ran: bool,
    /// Jobs found running with no live lease (their run ended or died).
    pub found: u32,
    /// Of those, runs that this pass made (the others were taken by another run meanwhile).
    pub resumed: u32,
    /// Of those, jobs that completed.
    pub completed: u32,
}

/// Jobs per listing shard one reconciliation pass looks at, at most.
pub(crate) const STALLED_PER_SHARD: i32 = 25;

/// Continues every replay job whose run stopped (its budget ended, or its Lambda timed out and
/// the lease lapsed after [`JOB_LEASE`]) from its saved position, within `budget`: the frequent
/// reconcile run does this, so a job never waits for a person. Idempotent like an operator's
/// resume (a half-done chunk is walked again without restarting anything twice); not audited as
/// an operator action (the job's own `runs` count shows the extra run). A job another run holds
/// meanwhile is left to it.
pub(crate) async fn resume_stalled(
    ops: &Ops<'_>,
    budget: Budget,
) -> Result<StalledReport, OpsError> {
    let jobs = replay_job::stalled(ops.dynamo, ops.table, ops.now(), STALLED_PER_SHARD).await?;
    let mut report = StalledReport {
        ran: true,
        found: jobs.len() as u32,
        ..StalledReport::default()
    };
    for job in jobs {
        if Instant::now() >= budget.deadline {
            break;
        }
        match run_job(ops, &job.account_id, &job.job_id, budget).await {
            Ok(after) => {
                report.resumed += 1;
                report.completed += u32::from(after.status == ReplayStatus::Completed);
                tracing::info!(job_id = %job.job_id, status = %after.status, position = after.position.as_ref().map(|p| p.as_str()), "stopped replay job continued by reconciliation");
            }
            Err(OpsError::Conflict(why)) => {
                tracing::info!(job_id = %job.job_id, %why, "stopped replay job taken by another run");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(report)
}

/// Resumes a job that stopped (an operator's request, audited). Refused while a run holds it,
/// and for a completed job.
pub(crate) async fn resume_job(
    ops: &Ops<'_>,
    account_id: &AccountId,
    job_id: &ReplayJobId,
    operator: &str,
    reason: &str,
    budget: Budget,
) -> Result<ReplayJob, OpsError> {
    let job = load_job(ops, account_id, job_id).await?;
    let now = ops.now();
    if job.status == ReplayStatus::Completed {
        return Err(OpsError::Conflict(
            "the replay job is completed; start a new replay to replay the window again".into(),
        ));
    }
    if job.in_progress(now) {
        return Err(OpsError::Conflict(format!(
            "the replay job is being processed by a run until {}; read its status, and resume \
             it only once that run has stopped",
            job.lease_until.map(|t| t.to_string()).unwrap_or_default()
        )));
    }
    let mut audit = AuditRecord::new(
        AuditAction::ResumeReplay,
        account_id,
        &job.subscription_id,
        operator,
        reason,
        now,
    )
    .detail(
        "position",
        job.position.clone().map(String::from).unwrap_or_default(),
    )
    .detail("restarted_so_far", job.restarted);
    audit.job_id = Some(job.job_id.clone());
    write_with_audit(ops, None, &audit).await?;
    run_job(ops, account_id, job_id, budget).await
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2024-05-10T00:00:00Z";

    fn now() -> Timestamp {
        Timestamp::parse_rfc3339(NOW).unwrap()
    }

    #[test]
    fn a_window_of_two_instants_within_a_week_is_read() {
        let (from, to) = read_window(
            Some(" 2024-05-08T00:00:00Z "),
            Some("2024-05-09T00:00:00Z"),
            now(),
        )
        .unwrap()
        .expect("a window");
        assert_eq!(Some(from), Timestamp::parse_rfc3339("2024-05-08T00:00:00Z"));
        assert_eq!(Some(to), Timestamp::parse_rfc3339("2024-05-09T00:00:00Z"));
    }

    #[test]
    fn a_window_names_each_text_that_is_not_a_time_and_each_rule_it_breaks() {
        let refused = read_window(Some("yesterday"), None, now()).unwrap_err();
        assert_eq!(refused.fields(), ["from"]);
        assert_eq!(read_window(None, Some(NOW), now()).unwrap(), None);
        let reversed = read_window(Some(NOW), Some("2024-05-09T00:00:00Z"), now()).unwrap_err();
        assert_eq!(reversed.fields(), ["to"]);
        let long_and_future = read_window(
            Some("2024-05-01T00:00:00Z"),
            Some("2024-05-11T00:00:00Z"),
            now(),
        )
        .unwrap_err();
        assert_eq!(long_and_future.fields(), ["to", "to"]);
    }
}
