//! The replay job item: an operator's window replay of one subscription's deliveries, tracked
//! so that a run cut short is resumed from its saved position (the walk itself is
//! [`crate::operations::recovery::replay`]).
//!
//! | item       | pk                  | sk               |
//! |------------|---------------------|------------------|
//! | replay job | `REPLAY#{account}`  | `JOB#{job id}`   |
//!
//! A run holds the job by a lease (token and expiry); every save of its progress is conditional
//! on holding it, and on the replay lifecycle's `from` states for the move (docs/lifecycles.md).

use super::attrs::listing;
use super::expr::{n, s, Expr};
use super::keys;
use super::read::{self, Query};
use super::update::conditional_update;
use super::write::put_new;
use super::write::Write;
use super::{from_item, to_item, StoreError};
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::replay::{JobKind, ReplayStatus, ReplayTrigger, ReplayWindow, REPLAY_LIFECYCLE};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, ReplayJobId, SubscriptionId};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The `kind` of a replay job item.
pub const KIND: &str = "replay_job";
/// How long a run holds the job; a run that dies lets it go after this.
pub const JOB_LEASE: Duration = Duration::from_secs(30);
/// Jobs read per query page of a listing, and pages a listing reads at most.
const LIST_PAGE: i32 = 100;
const LIST_ROUNDS: usize = 10;

pub use super::keys::{job_pk, job_sk};
use super::keys::{JOB_SK_PREFIX, RUNNING_LIST_PREFIX};

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
    /// A recovery's: in a status it does not restart (delivered, say). Always 0 for a replay.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_selected: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl ReplayCounts {
    pub fn add(&mut self, other: &ReplayCounts) {
        self.not_selected += other.not_selected;
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
    pub job_id: ReplayJobId,
    pub account_id: AccountId,
    pub subscription_id: SubscriptionId,
    pub from: Timestamp,
    pub to: Timestamp,
    pub reason: String,
    pub requested_by: String,
    pub status: ReplayStatus,
    /// The last change id walked (`None`: not started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<ChangeId>,
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
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_selected: u32,
    /// A replay (everything in the window) or a recovery (only `statuses`).
    #[serde(default)]
    pub job_kind: JobKind,
    /// A recovery's statuses to restart (empty for a replay).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<DeliveryStatus>,
    /// Started through the account's door: the job holds its subscription's running-job slot
    /// ([`super::job_bounds`]) until it completes, and its completion gives the slot back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bounded: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_token: Option<String>,
    /// `listing` index, while running: `REPLAYS_RUNNING#{shard}` and the creation order, where
    /// reconciliation finds a job whose run stopped ([`stalled`]). Set by [`create`], removed
    /// when the job completes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_sort: Option<String>,
}

impl ReplayJob {
    /// A new job, running, not yet started on its window.
    pub fn new(
        job_id: ReplayJobId,
        account_id: AccountId,
        subscription_id: SubscriptionId,
        window: ReplayWindow,
        reason: String,
        requested_by: String,
        now: Timestamp,
    ) -> Self {
        ReplayJob {
            job_id,
            account_id,
            subscription_id,
            from: window.from,
            to: window.to,
            reason,
            requested_by,
            status: ReplayStatus::Running,
            position: None,
            chunks: 0,
            runs: 0,
            in_window: 0,
            restarted: 0,
            already_pending: 0,
            skipped_filter: 0,
            conflicts: 0,
            not_selected: 0,
            job_kind: JobKind::Replay,
            statuses: Vec::new(),
            bounded: false,
            created_at: now,
            updated_at: now,
            completed_at: None,
            lease_until: None,
            lease_token: None,
            list_key: None,
            list_sort: None,
        }
    }

    pub fn key(&self) -> (String, String) {
        (job_pk(&self.account_id), job_sk(&self.job_id))
    }
    pub fn window(&self) -> ReplayWindow {
        ReplayWindow {
            from: self.from,
            to: self.to,
        }
    }
    /// This job as a recovery of `statuses` (its window from `since` to now).
    pub(crate) fn recovering(self, statuses: &[DeliveryStatus]) -> Self {
        ReplayJob {
            job_kind: JobKind::Recovery,
            statuses: statuses.to_vec(),
            ..self
        }
    }
    /// This job holding its subscription's running-job slot.
    pub fn bounded(self) -> Self {
        ReplayJob {
            bounded: true,
            ..self
        }
    }
    pub fn counts(&self) -> ReplayCounts {
        ReplayCounts {
            not_selected: self.not_selected,
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

/// A consistent read of the account's job.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    job_id: &ReplayJobId,
) -> Result<Option<ReplayJob>, StoreError> {
    read::get(dynamo, table, &job_pk(account_id), &job_sk(job_id))
        .await?
        .map(from_item)
        .transpose()
}

/// The query of the account's jobs, newest first, before job `before` if given, of one
/// subscription if given.
pub(crate) fn list_query(
    table: &str,
    account_id: &AccountId,
    subscription_id: Option<&SubscriptionId>,
    before: Option<&ReplayJobId>,
) -> Query {
    let mut expr = Expr::new().value(":pk", s(job_pk(account_id)));
    let key_condition = match before {
        Some(b) => {
            expr = expr.value(":before", s(job_sk(b)));
            "pk = :pk AND sk < :before"
        }
        None => {
            expr = expr.value(":p", s(JOB_SK_PREFIX));
            "pk = :pk AND begins_with(sk, :p)"
        }
    };
    let filter = subscription_id.map(|sub| {
        expr.values.insert(":sub".into(), s(sub));
        "subscription_id = :sub".to_string()
    });
    Query {
        table: table.to_owned(),
        key_condition: key_condition.into(),
        filter,
        expr,
        limit: Some(LIST_PAGE),
        backwards: true,
        eventual: true,
        ..Query::default()
    }
}

/// Up to `limit` of the account's jobs, newest first, and the job id to continue before (`None`
/// on the last page). A filtered listing reads at most [`LIST_ROUNDS`] query pages.
pub async fn list(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    subscription_id: Option<&SubscriptionId>,
    limit: u32,
    before: Option<&ReplayJobId>,
) -> Result<(Vec<ReplayJob>, Option<ReplayJobId>), StoreError> {
    let mut q = list_query(table, account_id, subscription_id, before);
    let mut jobs = Vec::new();
    for _ in 0..LIST_ROUNDS {
        let page = read::query_page(dynamo, &q).await?;
        for item in page.items {
            jobs.push(from_item::<ReplayJob>(item)?);
        }
        if jobs.len() >= limit as usize {
            jobs.truncate(limit as usize);
            let next = jobs.last().map(|j| j.job_id.clone());
            return Ok((jobs, next));
        }
        match page.next {
            Some(k) => q.start = Some(k),
            None => return Ok((jobs, None)),
        }
    }
    let next = jobs.last().map(|j| j.job_id.clone());
    Ok((jobs, next))
}

/// The `listing` key of the running jobs of one shard.
pub(crate) fn running_list_key(shard: &str) -> String {
    format!("{RUNNING_LIST_PREFIX}{shard}")
}

/// Records a new job unless its id is taken (sent with its audit entry), on the listing of
/// running jobs.
pub fn create(table: &str, job: &ReplayJob) -> Result<Write, StoreError> {
    let (pk, sk) = job.key();
    let job = ReplayJob {
        list_key: Some(running_list_key(&keys::shard_of(job.job_id.as_str()))),
        list_sort: Some(keys::time_sort(job.created_at, job.job_id.as_str())),
        ..job.clone()
    };
    put_new(table, to_item(&job, &pk, &sk, KIND)?)
}

/// The running jobs whose run stopped (no live lease at `now`): a run that ended at its budget,
/// or one that died with its Lambda. At most `limit` per shard, oldest first.
pub async fn stalled(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    now: Timestamp,
    limit: i32,
) -> Result<Vec<ReplayJob>, StoreError> {
    let mut jobs = Vec::new();
    for shard in 0..keys::SHARDS {
        let q = Query {
            table: table.to_owned(),
            index: Some(listing::INDEX.into()),
            key_condition: format!("{} = :key", listing::KEY),
            expr: Expr::new().value(":key", s(running_list_key(&shard.to_string()))),
            limit: Some(limit),
            ..Query::default()
        };
        let page = read::query_page(dynamo, &q).await?;
        for entry in page.items {
            let key = |k: &str| entry.get(k).and_then(|v| v.as_s().ok()).cloned();
            let (Some(pk), Some(sk)) = (key("pk"), key("sk")) else {
                continue;
            };
            if let Some(job) = read::get(dynamo, table, &pk, &sk)
                .await?
                .map(from_item::<ReplayJob>)
                .transpose()?
            {
                if job.status == ReplayStatus::Running && !job.in_progress(now) {
                    jobs.push(job);
                }
            }
        }
    }
    Ok(jobs)
}

fn update(
    table: &str,
    job: &ReplayJob,
    expression: String,
    condition: String,
    e: &Expr,
) -> Result<Write, StoreError> {
    conditional_update(table, job.key(), expression, condition, e)
}

/// Takes the job's lease for a run with `token`: only a running job that no live lease holds.
pub fn claim(
    table: &str,
    job: &ReplayJob,
    token: &str,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let e = Expr::new()
        .value(":running", s(ReplayStatus::Running.to_string()))
        .value(":now", n(now.millis()))
        .value(":lease", n(now.plus(JOB_LEASE).millis()))
        .value(":token", s(token))
        .value(":one", n(1))
        .value(":zero", n(0))
        .name("#status", "status");
    update(
        table,
        job,
        "SET lease_until = :lease, lease_token = :token, updated_at = :now, \
         runs = if_not_exists(runs, :zero) + :one"
            .to_owned(),
        "#status = :running AND (attribute_not_exists(lease_until) OR lease_until <= :now)"
            .to_owned(),
        &e,
    )
}

/// One chunk's progress to save.
#[derive(Debug, Clone)]
pub(crate) struct Chunk<'a> {
    /// From [`crate::domain::replay::after_chunk`]: the trigger and the job's new status.
    pub movement: (ReplayTrigger, ReplayStatus),
    /// The job's counts with this chunk's added.
    pub total: ReplayCounts,
    /// The last change id walked, when the chunk walked any.
    pub position: Option<&'a ChangeId>,
}

/// Saves a chunk's progress holding the lease `token`: counts, position, one more chunk; the
/// last chunk completes the job and lets its lease go, any other extends the lease.
pub(crate) fn save_chunk(
    table: &str,
    job: &ReplayJob,
    token: &str,
    chunk: &Chunk<'_>,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let (trigger, status) = chunk.movement;
    let condition = REPLAY_LIFECYCLE.expect(job.status, trigger, status)?;
    let total = &chunk.total;
    let mut e = Expr::new()
        .value(":to", s(status.to_string()))
        .value(":now", n(now.millis()))
        .value(":token", s(token))
        .value(":chunks", n(job.chunks + 1))
        .value(":in_window", n(total.in_window))
        .value(":restarted", n(total.restarted))
        .value(":already_pending", n(total.already_pending))
        .value(":skipped_filter", n(total.skipped_filter))
        .value(":conflicts", n(total.conflicts))
        .value(":not_selected", n(total.not_selected));
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
        "not_selected = :not_selected",
    ];
    let mut remove = Vec::new();
    if let Some(p) = chunk.position {
        e = e.value(":position", s(p)).name("#position", "position");
        set.push("#position = :position");
    }
    if status == ReplayStatus::Completed {
        set.push("completed_at = :now");
        remove.extend(["lease_until", "lease_token", listing::KEY, listing::SORT]);
    } else {
        e = e.value(":lease", n(now.plus(JOB_LEASE).millis()));
        set.push("lease_until = :lease");
    }
    let mut expression = format!("SET {}", set.join(", "));
    if !remove.is_empty() {
        expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
    }
    update(
        table,
        job,
        expression,
        format!("({status_condition}) AND lease_token = :token"),
        &e,
    )
}

/// Lets go of the job's lease held with `token`, so that it can be resumed at once.
pub fn release(table: &str, job: &ReplayJob, token: &str) -> Result<Write, StoreError> {
    update(
        table,
        job,
        "REMOVE lease_until, lease_token".to_owned(),
        "lease_token = :token".to_owned(),
        &Expr::new().value(":token", s(token)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::replay::after_chunk;
    use crate::ids::id;

    fn job(status: ReplayStatus) -> ReplayJob {
        ReplayJob {
            job_id: "01job".parse().unwrap(),
            account_id: "a1".parse().unwrap(),
            subscription_id: "s1".parse().unwrap(),
            from: Timestamp(0),
            to: Timestamp(10),
            reason: "why".into(),
            requested_by: "ops".into(),
            status,
            position: None,
            chunks: 2,
            runs: 1,
            in_window: 0,
            restarted: 0,
            already_pending: 0,
            skipped_filter: 0,
            conflicts: 0,
            not_selected: 0,
            job_kind: JobKind::Replay,
            statuses: Vec::new(),
            bounded: false,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            completed_at: None,
            lease_until: None,
            lease_token: None,
            list_key: None,
            list_sort: None,
        }
    }

    use crate::store::update::expect_update as updated;

    #[test]
    fn a_job_is_recorded_once_in_its_account_partition() {
        let Write::Put(p) = create("t", &job(ReplayStatus::Running)).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.condition_expression(), Some("attribute_not_exists(pk)"));
        assert_eq!(p.item()["pk"].as_s().unwrap(), "REPLAY#a1");
        assert_eq!(p.item()["sk"].as_s().unwrap(), "JOB#01job");
        assert_eq!(p.item()["kind"].as_s().unwrap(), KIND);
        // On the listing of running jobs, where reconciliation finds a stopped run.
        assert_eq!(
            p.item()[listing::KEY].as_s().unwrap(),
            &running_list_key(&keys::shard_of("01job"))
        );
        assert!(p.item()[listing::SORT].as_s().unwrap().ends_with("#01job"));
    }

    #[test]
    fn a_claim_takes_a_running_job_that_no_live_lease_holds_and_counts_the_run() {
        let u = updated(claim("t", &job(ReplayStatus::Running), "tok", Timestamp(1_000)).unwrap());
        assert_eq!(
            u.condition_expression(),
            Some(
                "#status = :running AND (attribute_not_exists(lease_until) OR lease_until <= :now)"
            )
        );
        assert!(u
            .update_expression()
            .contains("runs = if_not_exists(runs, :zero) + :one"));
        let v = u.expression_attribute_values().unwrap();
        assert_eq!(v[":lease"], n(31_000));
        assert_eq!(v[":token"], s("tok"));
        assert_eq!(v[":running"], s("running"));
    }

    #[test]
    fn a_middle_chunk_extends_the_lease_and_the_last_completes_the_job() {
        let total = ReplayCounts {
            in_window: 3,
            restarted: 2,
            ..ReplayCounts::default()
        };
        let running = job(ReplayStatus::Running);
        let middle = Chunk {
            movement: after_chunk(true),
            total,
            position: Some(&id("01c")),
        };
        let u = updated(save_chunk("t", &running, "tok", &middle, Timestamp(5)).unwrap());
        assert!(u.update_expression().contains("lease_until = :lease"));
        assert!(u.update_expression().contains("#position = :position"));
        assert!(!u.update_expression().contains("REMOVE"));
        assert!(u
            .condition_expression()
            .unwrap()
            .ends_with("AND lease_token = :token"));
        let v = u.expression_attribute_values().unwrap();
        assert_eq!(v[":chunks"], n(3));
        assert_eq!(v[":restarted"], n(2));
        assert_eq!(v[":to"], s("running"));
        let last = Chunk {
            movement: after_chunk(false),
            total,
            position: None,
        };
        let u = updated(save_chunk("t", &running, "tok", &last, Timestamp(5)).unwrap());
        assert!(u.update_expression().contains("completed_at = :now"));
        assert!(u
            .update_expression()
            .ends_with("REMOVE lease_until, lease_token, list_key, list_sort"));
        assert!(!u.update_expression().contains("#position"));
        assert_eq!(
            u.expression_attribute_values().unwrap()[":to"],
            s("completed")
        );
    }

    #[test]
    fn a_completed_job_saves_no_more_chunks() {
        let chunk = Chunk {
            movement: after_chunk(true),
            total: ReplayCounts::default(),
            position: None,
        };
        assert!(matches!(
            save_chunk(
                "t",
                &job(ReplayStatus::Completed),
                "tok",
                &chunk,
                Timestamp(5)
            ),
            Err(StoreError::Transition(_))
        ));
    }

    #[test]
    fn a_release_needs_the_runs_own_token() {
        let u = updated(release("t", &job(ReplayStatus::Running), "tok").unwrap());
        assert_eq!(u.update_expression(), "REMOVE lease_until, lease_token");
        assert_eq!(u.condition_expression(), Some("lease_token = :token"));
    }

    #[test]
    fn a_listing_reads_newest_first_and_filters_by_subscription() {
        let q = list_query("t", &id("a1"), Some(&id("s1")), Some(&id("01job")));
        assert_eq!(q.key_condition, "pk = :pk AND sk < :before");
        assert_eq!(q.expr.values[":before"], s("JOB#01job"));
        assert_eq!(q.filter.as_deref(), Some("subscription_id = :sub"));
        assert!(q.backwards && q.eventual);
        let first = list_query("t", &id("a1"), None, None);
        assert_eq!(first.key_condition, "pk = :pk AND begins_with(sk, :p)");
        assert!(first.filter.is_none());
    }
}
