//! Operator window replay as a tracked, resumable job (seed 002 hop 7; rules in
//! [`crate::domain::replay`]).
//!
//! | item       | pk                  | sk               |
//! |------------|---------------------|------------------|
//! | replay job | `REPLAY#{account}`  | `JOB#{job id}`   |
//!
//! A job walks its subscription's retained deliveries in change order on the `by_subscription`
//! index, [`Budget::chunk`] evaluated records at a time, keeping those whose change occurred in
//! the window (a filter), and restarts each eligible one (see [`super::restart`]). After every
//! chunk it saves its position (the last record evaluated) and counts, conditional on holding the
//! job's lease; the last chunk completes it. A run stops at its [`Budget`] (the API's run stays
//! well inside the Lambda's and the gateway's timeouts) and releases the lease; a run that dies
//! leaves a lease that lapses after [`JOB_LEASE`]. Either way the job stays `running` at its saved
//! position until an operator resumes it (`POST …/replays/{job_id}/resume`).
//!
//! Resuming is safe: a restarted delivery remembers the job (`replay_job`), and the restart write
//! is conditional on not having been restarted by this job, so a chunk that a dead run had half
//! done is walked again without restarting anything twice, and its counts come out the same.

use super::audit::{write_all_with_audit, AuditAction, AuditRecord};
use super::restart::{reopen_event, restart_one, rewind_pull_cursor, Restart};
use super::{
    build_update, decode_list_cursor, encode_list_cursor, send_update, Filter, IndexQuery, Ops,
    OpsError, StoredDelivery, WRITE_CONCURRENCY,
};
use crate::domain::replay::{
    after_chunk, replay_item, validate_window, ReplayItem, ReplayStatus, ReplayTrigger,
    ReplayWindow, REPLAY_LIFECYCLE,
};
use crate::domain::time::Timestamp;
use crate::store::expr::{n, s, Expr};
use crate::store::{from_item, to_item};
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

pub const REPLAY_JOB_KIND: &str = "replay_job";
const JOB_SK_PREFIX: &str = "JOB#";
/// How long a run holds the job; a run that dies lets it go after this.
pub const JOB_LEASE: Duration = Duration::from_secs(30);

pub fn job_pk(account_id: &str) -> String {
    format!("REPLAY#{account_id}")
}
pub fn job_sk(job_id: &str) -> String {
    format!("{JOB_SK_PREFIX}{job_id}")
}

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

/// Counts of a job (cumulative over its runs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayCounts {
    /// Delivery records whose change occurred in the window.
    pub in_window: u32,
    /// Restarted to `pending` by this job.
    pub restarted: u32,
    /// Already `pending` (waiting for an attempt or a cursor): left alone.
    pub already_pending: u32,
    /// `skipped_filter`: never replayed.
    pub skipped_filter: u32,
    /// Moved by someone else twice while the job tried to restart them: left as they are.
    pub conflicts: u32,
}

impl ReplayCounts {
    fn add(&mut self, other: &ReplayCounts) {
        self.in_window += other.in_window;
        self.restarted += other.restarted;
        self.already_pending += other.already_pending;
        self.skipped_filter += other.skipped_filter;
        self.conflicts += other.conflicts;
    }
}

/// A replay job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayJob {
    pub job_id: String,
    pub account_id: String,
    pub subscription_id: String,
    pub from: Timestamp,
    pub to: Timestamp,
    pub reason: String,
    pub requested_by: String,
    pub status: ReplayStatus,
    /// The last change id walked (`None`: not started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<String>,
    #[serde(default)]
    pub chunks: u32,
    #[serde(default)]
    pub runs: u32,
    #[serde(default)]
    pub in_window: u32,
    #[serde(default)]
    pub restarted: u32,
    #[serde(default)]
    pub already_pending: u32,
    #[serde(default)]
    pub skipped_filter: u32,
    #[serde(default)]
    pub conflicts: u32,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_token: Option<String>,
}

impl ReplayJob {
    pub fn window(&self) -> ReplayWindow {
        ReplayWindow {
            from: self.from,
            to: self.to,
        }
    }
    pub fn counts(&self) -> ReplayCounts {
        ReplayCounts {
            in_window: self.in_window,
            restarted: self.restarted,
            already_pending: self.already_pending,
            skipped_filter: self.skipped_filter,
            conflicts: self.conflicts,
        }
    }
    /// A run holds the job right now.
    pub fn in_progress(&self, now: Timestamp) -> bool {
        self.status == ReplayStatus::Running && self.lease_until.is_some_and(|t| t > now)
    }
}

/// A replay request.
#[derive(Debug, Clone, Copy)]
pub struct ReplayRequest<'a> {
    pub account_id: &'a str,
    pub subscription_id: &'a str,
    pub from: Timestamp,
    pub to: Timestamp,
    pub operator: &'a str,
    pub reason: &'a str,
}

/// Validates the window and records the job (with its audit entry); the caller then runs it.
pub async fn create_job(ops: &Ops<'_>, req: ReplayRequest<'_>) -> Result<ReplayJob, OpsError> {
    let now = ops.now();
    let window = validate_window(req.from, req.to, now).map_err(|errors| {
        let first = &errors[0];
        OpsError::invalid(first.field(), first.to_string())
    })?;
    ops.subscription(req.account_id, req.subscription_id)
        .await?;
    let job = ReplayJob {
        job_id: crate::api::extract::new_id(),
        account_id: req.account_id.to_owned(),
        subscription_id: req.subscription_id.to_owned(),
        from: window.from,
        to: window.to,
        reason: req.reason.to_owned(),
        requested_by: req.operator.to_owned(),
        status: ReplayStatus::Running,
        position: None,
        chunks: 0,
        runs: 0,
        in_window: 0,
        restarted: 0,
        already_pending: 0,
        skipped_filter: 0,
        conflicts: 0,
        created_at: now,
        updated_at: now,
        completed_at: None,
        lease_until: None,
        lease_token: None,
    };
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
    let put = Put::builder()
        .table_name(ops.table)
        .set_item(Some(to_item(
            &job,
            &job_pk(&job.account_id),
            &job_sk(&job.job_id),
            REPLAY_JOB_KIND,
        )?))
        .condition_expression("attribute_not_exists(pk)")
        .build()
        .map_err(|e| OpsError::Store(crate::store::StoreError::Dynamo(e.to_string())))?;
    if !write_all_with_audit(
        ops,
        vec![TransactWriteItem::builder().put(put).build()],
        &audit,
    )
    .await?
    {
        return Err(OpsError::Conflict(
            "a replay job with this id exists already; retry the request".into(),
        ));
    }
    tracing::info!(
        operator = %req.operator,
        job_id = %job.job_id,
        subscription_id = %req.subscription_id,
        from = %window.from,
        to = %window.to,
        "replay job created"
    );
    Ok(job)
}

/// The account's job, or "replay job not found".
pub async fn load_job(
    ops: &Ops<'_>,
    account_id: &str,
    job_id: &str,
) -> Result<ReplayJob, OpsError> {
    let item = ops
        .get_item(&job_pk(account_id), &job_sk(job_id))
        .await?
        .ok_or(OpsError::NotFound("replay job"))?;
    Ok(from_item(item)?)
}

/// The account's jobs, newest first (optionally one subscription's).
pub async fn list_jobs(
    ops: &Ops<'_>,
    account_id: &str,
    subscription_id: Option<&str>,
    limit: u32,
    cursor: Option<&str>,
) -> Result<(Vec<ReplayJob>, Option<String>), OpsError> {
    let before = match cursor {
        None => None,
        Some(c) => Some(
            decode_list_cursor(c)
                .ok_or_else(|| OpsError::invalid("cursor", "is not a cursor of this list"))?,
        ),
    };
    let mut jobs = Vec::new();
    let mut start = None;
    for _ in 0..10 {
        let mut request = ops
            .dynamo
            .query()
            .table_name(ops.table)
            .expression_attribute_values(":pk", s(job_pk(account_id)))
            .scan_index_forward(false)
            .limit(100)
            .set_exclusive_start_key(start.take());
        request = match &before {
            Some(b) => request
                .key_condition_expression("pk = :pk AND sk < :before")
                .expression_attribute_values(":before", s(job_sk(b))),
            None => request
                .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
                .expression_attribute_values(":p", s(JOB_SK_PREFIX)),
        };
        if let Some(sub) = subscription_id {
            request = request
                .filter_expression("subscription_id = :sub")
                .expression_attribute_values(":sub", s(sub));
        }
        let out = request.send().await.map_err(OpsError::dynamo)?;
        for item in out.items.unwrap_or_default() {
            jobs.push(from_item::<ReplayJob>(item)?);
        }
        if jobs.len() >= limit as usize {
            jobs.truncate(limit as usize);
            let next = jobs.last().map(|j| encode_list_cursor(&j.job_id));
            return Ok((jobs, next));
        }
        match out.last_evaluated_key {
            Some(k) => start = Some(k),
            None => return Ok((jobs, None)),
        }
    }
    let next = jobs.last().map(|j| encode_list_cursor(&j.job_id));
    Ok((jobs, next))
}

/// Takes the job's lease for a run. `Ok(None)` when the job is already completed.
async fn claim(ops: &Ops<'_>, job: &ReplayJob) -> Result<Option<String>, OpsError> {
    let now = ops.now();
    let token = uuid::Uuid::new_v4().to_string();
    let e = Expr::new()
        .value(":running", s(ReplayStatus::Running.to_string()))
        .value(":now", n(now.millis()))
        .value(":lease", n(now.plus(JOB_LEASE).millis()))
        .value(":token", s(&token))
        .value(":one", n(1))
        .value(":zero", n(0))
        .name("#status", "status");
    let u = build_update(
        ops.table,
        &job_pk(&job.account_id),
        &job_sk(&job.job_id),
        "SET lease_until = :lease, lease_token = :token, updated_at = :now, \
         runs = if_not_exists(runs, :zero) + :one"
            .to_owned(),
        "#status = :running AND (attribute_not_exists(lease_until) OR lease_until <= :now)"
            .to_owned(),
        &e,
    )?;
    if send_update(ops, u).await? {
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
    account_id: &str,
    job_id: &str,
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
        loop {
            if budget.max_chunks.is_some_and(|m| chunks_this_run >= m)
                || Instant::now() >= budget.deadline
            {
                break;
            }
            let (counts, position, more) = walk_chunk(ops, &job, budget.chunk).await?;
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

/// Walks one chunk: returns its counts, the new position and whether more remain.
async fn walk_chunk(
    ops: &Ops<'_>,
    job: &ReplayJob,
    chunk: i32,
) -> Result<(ReplayCounts, Option<String>, bool), OpsError> {
    let window = job.window();
    let filter = Filter {
        occurred_from: Some(window.from),
        occurred_before: Some(window.to),
        ..Filter::account(&job.account_id)
    };
    let q = IndexQuery {
        subscription_id: &job.subscription_id,
        after: job.position.as_deref(),
        upper: None,
        forward: true,
        filter: Some(filter),
    };
    let page = ops.query_index(&q, None, chunk).await?;
    let mut deliveries = page
        .items
        .into_iter()
        .map(StoredDelivery::from_item)
        .collect::<Result<Vec<_>, _>>()?;
    deliveries.sort_by(|a, b| a.record.change_id.cmp(&b.record.change_id));
    let position = page.last_sort.clone().or_else(|| {
        deliveries
            .last()
            .map(|d| d.record.change_id.clone())
            .or_else(|| job.position.clone())
    });
    let more = page.next_start.is_some();

    let mut counts = ReplayCounts::default();
    let mut to_restart = Vec::new();
    for d in deliveries {
        match decide(&d, &window, &job.job_id) {
            ReplayItem::OutsideWindow => continue,
            ReplayItem::Restart(_) => to_restart.push(d),
            other => counts.tally(Walked::of(other)),
        }
        counts.in_window += 1;
    }
    // Pull deliveries: move the acknowledged cursor back before the earliest one first.
    if let Some(earliest) = to_restart
        .iter()
        .find(|d| d.record.method.is_poll())
        .map(|d| d.record.change_id.clone())
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

fn decide(d: &StoredDelivery, window: &ReplayWindow, job_id: &str) -> ReplayItem {
    replay_item(
        d.status(),
        d.record.occurred_at,
        window,
        d.marks.replay_job.as_deref() == Some(job_id),
    )
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
}

impl Walked {
    fn of(item: ReplayItem) -> Walked {
        match item {
            ReplayItem::Restart(_) | ReplayItem::RestartedByThisJob => Walked::Restarted,
            ReplayItem::AlreadyPending => Walked::AlreadyPending,
            ReplayItem::NeverReplayed(_) => Walked::SkippedFilter,
            ReplayItem::OutsideWindow => Walked::Outside,
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
            Walked::Outside => {}
        }
    }
}

/// Restarts one delivery; if it moved since it was read, reads it again and decides once more.
async fn restart_with_one_reread(
    ops: &Ops<'_>,
    job: &ReplayJob,
    mut d: StoredDelivery,
) -> Result<Walked, OpsError> {
    let window = job.window();
    for _ in 0..2 {
        let item = decide(&d, &window, &job.job_id);
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
            .delivery(&job.account_id, &job.subscription_id, &d.record.change_id)
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
    position: Option<String>,
    more: bool,
) -> Result<(), OpsError> {
    let (trigger, status): (ReplayTrigger, ReplayStatus) = after_chunk(more);
    let condition = REPLAY_LIFECYCLE.expect(job.status, trigger, status)?;
    let now = ops.now();
    let mut total = job.counts();
    total.add(&counts);
    let mut e = Expr::new()
        .value(":to", s(status.to_string()))
        .value(":now", n(now.millis()))
        .value(":token", s(token))
        .value(":chunks", n(job.chunks + 1))
        .value(":in_window", n(total.in_window))
        .value(":restarted", n(total.restarted))
        .value(":already_pending", n(total.already_pending))
        .value(":skipped_filter", n(total.skipped_filter))
        .value(":conflicts", n(total.conflicts));
    let status_condition = e.status(&condition);
    let mut set = vec![
        "#status = :to",
        "updated_at = :now",
        "chunks = :chunks",
        "in_window = :in_window",
        "restarted = :restarted",
        "already_pending = :already_pending",
        "skipped_filter = :skipped_filter",
        "conflicts = :conflicts",
    ];
    let mut remove = Vec::new();
    if let Some(p) = &position {
        e = e.value(":position", s(p)).name("#position", "position");
        set.push("#position = :position");
    }
    if status == ReplayStatus::Completed {
        set.push("completed_at = :now");
        remove.extend(["lease_until", "lease_token"]);
    } else {
        e = e.value(":lease", n(now.plus(JOB_LEASE).millis()));
        set.push("lease_until = :lease");
    }
    let mut expression = format!("SET {}", set.join(", "));
    if !remove.is_empty() {
        expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
    }
    let u = build_update(
        ops.table,
        &job_pk(&job.account_id),
        &job_sk(&job.job_id),
        expression,
        format!("({status_condition}) AND lease_token = :token"),
        &e,
    )?;
    if !send_update(ops, u).await? {
        return Err(OpsError::Conflict(
            "the replay job's lease was taken over by another run; read its status".into(),
        ));
    }
    job.status = status;
    job.chunks += 1;
    job.position = position.or(job.position.take());
    job.in_window = total.in_window;
    job.restarted = total.restarted;
    job.already_pending = total.already_pending;
    job.skipped_filter = total.skipped_filter;
    job.conflicts = total.conflicts;
    job.updated_at = now;
    Ok(())
}

/// Lets go of the job's lease so that it can be resumed at once.
async fn release(ops: &Ops<'_>, job: &ReplayJob, token: &str) -> Result<(), OpsError> {
    let e = Expr::new().value(":token", s(token));
    let u = build_update(
        ops.table,
        &job_pk(&job.account_id),
        &job_sk(&job.job_id),
        "REMOVE lease_until, lease_token".to_owned(),
        "lease_token = :token".to_owned(),
        &e,
    )?;
    send_update(ops, u).await?;
    Ok(())
}

/// Resumes a job that stopped (an operator's request, audited). Refused while a run holds it,
/// and for a completed job.
pub async fn resume_job(
    ops: &Ops<'_>,
    account_id: &str,
    job_id: &str,
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
    .detail("position", job.position.clone().unwrap_or_default())
    .detail("restarted_so_far", job.restarted);
    audit.job_id = Some(job.job_id.clone());
    write_all_with_audit(ops, Vec::new(), &audit).await?;
    run_job(ops, account_id, job_id, budget).await
}
