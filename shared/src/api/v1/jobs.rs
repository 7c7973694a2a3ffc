//! An account's own replay and recovery jobs (account token; the operations are
//! [`crate::operations::recovery::recover`], the jobs the operator's replay jobs):
//!
//! * `POST /v1/subscriptions/{subscription_id}/replays` `{from, to, reason}` → `202` with the job
//!   (and `Location`): resends every delivery whose change occurred in `[from, to)` (RFC 3339; at
//!   most seven days, not reversed, not in the future, within retained history; every violation
//!   is named in one `422`), as the operator's replay does.
//! * `GET /v1/subscriptions/{subscription_id}/replays/{job_id}` — its progress.
//! * `POST /v1/subscriptions/{subscription_id}/recover` `{since, statuses?, reason}` → `202` with
//!   the job (and `Location`): restarts only the deliveries in `statuses` (default
//!   `["dead","failed"]`; of `dead`, `failed`, `retrying`) whose change occurred since `since`
//!   (RFC 3339, at most seven days back).
//! * `GET /v1/subscriptions/{subscription_id}/recoveries/{job_id}` — its progress: status,
//!   counts examined / restarted / skipped, position, started and finished.
//!
//! A start runs the job for a few seconds; a larger one answers `running` and the next
//! reconciliation continues it. Starts are bounded (see the operations' docs): a second job while
//! one runs on the subscription, and the eleventh of the account's UTC day, are `429` with
//! `Retry-After`. Another account's subscription or job is `404`, and nothing changes. Each
//! start is audited with the token (`token {id}`) and the reason.

use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::lifecycle::Status;
use crate::domain::replay::{validate_window, JobKind, ReplayStatus};
use crate::domain::time::Timestamp;
use crate::ids::{ChangeId, ReplayJobId, SubscriptionId};
use crate::operations::recovery::recover::{
    start_account_replay, start_recovery, RecoverRequest, DEFAULT_RECOVERY_STATUSES,
};
use crate::operations::recovery::replay::{load_job, ReplayRequest};
use crate::operations::MAX_REASON_CHARS;
use crate::store::replay_job::{ReplayCounts, ReplayJob};
use crate::web::auth::AccountAuth;
use crate::web::extract::{path_id, ApiPath, Fields, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route(
            "/v1/subscriptions/{subscription_id}/replays",
            post(create_replay),
        )
        .route(
            "/v1/subscriptions/{subscription_id}/replays/{job_id}",
            get(fetch_replay),
        )
        .route(
            "/v1/subscriptions/{subscription_id}/recover",
            post(create_recovery),
        )
        .route(
            "/v1/subscriptions/{subscription_id}/recoveries/{job_id}",
            get(fetch_recovery),
        )
}

/// A replay job as its account sees it.
#[derive(Debug, Serialize)]
pub(crate) struct AccountReplayView {
    pub id: ReplayJobId,
    pub subscription_id: SubscriptionId,
    pub from: String,
    pub to: String,
    pub reason: String,
    pub requested_by: String,
    pub status: ReplayStatus,
    /// A run holds the job now; `running` and not in progress: the next reconciliation
    /// continues it.
    pub in_progress: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<ChangeId>,
    pub counts: ReplayCounts,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
}

impl AccountReplayView {
    pub fn new(job: &ReplayJob, now: Timestamp) -> Self {
        AccountReplayView {
            id: job.job_id.clone(),
            subscription_id: job.subscription_id.clone(),
            from: job.from.to_rfc3339(),
            to: job.to.to_rfc3339(),
            reason: job.reason.clone(),
            requested_by: job.requested_by.clone(),
            status: job.status,
            in_progress: job.in_progress(now),
            position: job.position.clone(),
            counts: job.counts(),
            created_at: job.created_at.to_rfc3339(),
            updated_at: job.updated_at.to_rfc3339(),
            completed_at: job.completed_at.map(|t| t.to_rfc3339()),
        }
    }
}

/// A recovery's counts: deliveries whose change occurred since `since` (`examined`), restarted
/// by the job, and left alone (`skipped`: not in its statuses, already pending, or moved by
/// someone else meanwhile).
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct RecoveryCounts {
    pub examined: u32,
    pub restarted: u32,
    pub skipped: u32,
}

/// A recovery job as its account sees it.
#[derive(Debug, Serialize)]
pub(crate) struct RecoveryView {
    pub id: ReplayJobId,
    pub subscription_id: SubscriptionId,
    pub since: String,
    pub statuses: Vec<DeliveryStatus>,
    pub reason: String,
    pub requested_by: String,
    pub status: ReplayStatus,
    pub in_progress: bool,
    /// The last change id walked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<ChangeId>,
    pub counts: RecoveryCounts,
    pub started_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

impl RecoveryView {
    pub fn new(job: &ReplayJob, now: Timestamp) -> Self {
        let c = job.counts();
        RecoveryView {
            id: job.job_id.clone(),
            subscription_id: job.subscription_id.clone(),
            since: job.from.to_rfc3339(),
            statuses: job.statuses.clone(),
            reason: job.reason.clone(),
            requested_by: job.requested_by.clone(),
            status: job.status,
            in_progress: job.in_progress(now),
            position: job.position.clone(),
            counts: RecoveryCounts {
                examined: c.in_window,
                restarted: c.restarted,
                skipped: c.in_window.saturating_sub(c.restarted),
            },
            started_at: job.created_at.to_rfc3339(),
            updated_at: job.updated_at.to_rfc3339(),
            finished_at: job.completed_at.map(|t| t.to_rfc3339()),
        }
    }
}

/// An RFC 3339 instant field, required.
fn instant(f: &mut Fields, name: &str) -> Option<Timestamp> {
    let text: String = f.required(name)?;
    match Timestamp::parse_rfc3339(text.trim()) {
        Some(t) => Some(t),
        None => {
            f.error(
                name,
                "must be an RFC 3339 date-time, e.g. 2024-05-01T00:00:00Z",
            );
            None
        }
    }
}

fn reason(f: &mut Fields) -> Option<String> {
    f.required_text("reason", MAX_REASON_CHARS)
}

/// `statuses`: optional, a list of delivery statuses (the operation says which it accepts).
fn statuses(f: &mut Fields) -> Option<Vec<DeliveryStatus>> {
    let Some(names) = f.optional::<Vec<String>>("statuses") else {
        return (!f.has("statuses")).then(|| DEFAULT_RECOVERY_STATUSES.to_vec());
    };
    let mut out = Vec::new();
    let mut unknown = false;
    for (i, name) in names.iter().enumerate() {
        match DeliveryStatus::parse(name) {
            Some(s) => out.push(s),
            None => {
                unknown = true;
                f.error(format!("statuses[{i}]"), "is not a delivery status");
            }
        }
    }
    (!unknown).then_some(out)
}

/// The account's job on the path's subscription, of `kind`: anything else is "not found".
async fn account_job(
    state: &ApiState,
    auth: &AccountAuth,
    subscription_id: &str,
    job_id: &str,
    kind: JobKind,
    what: &'static str,
) -> Result<ReplayJob, ApiError> {
    let subscription_id: SubscriptionId = path_id(subscription_id, "subscription")?;
    let job_id: ReplayJobId = path_id(job_id, what)?;
    let job = match load_job(&state.ops(), &auth.account_id, &job_id).await {
        Ok(job) => job,
        Err(crate::operations::OpsError::NotFound(_)) => return Err(ApiError::not_found(what)),
        Err(e) => return Err(e.into()),
    };
    if job.subscription_id != subscription_id || job.job_kind != kind {
        return Err(ApiError::not_found(what));
    }
    Ok(job)
}

async fn create_replay(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(subscription_id): ApiPath<String>,
    JsonBody(mut f): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let now = state.clock.now();
    let from = instant(&mut f, "from");
    let to = instant(&mut f, "to");
    let reason = reason(&mut f);
    if let (Some(from), Some(to)) = (from, to) {
        if let Err(errors) = validate_window(from, to, now) {
            for e in errors {
                f.error(e.field(), e.to_string());
            }
        }
    }
    f.finish()?;
    let (Some(from), Some(to), Some(reason)) = (from, to, reason) else {
        return Err(ApiError::internal("validated replay fields missing"));
    };
    let subscription_id: SubscriptionId = path_id(&subscription_id, "subscription")?;
    let ops = state.ops();
    let actor = auth.actor();
    let job = start_account_replay(
        &ops,
        ReplayRequest {
            account_id: &auth.account_id,
            subscription_id: &subscription_id,
            from,
            to,
            operator: &actor,
            reason: &reason,
        },
    )
    .await?;
    let location = format!("/v1/subscriptions/{subscription_id}/replays/{}", job.job_id);
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(AccountReplayView::new(&job, ops.now())),
    ))
}

async fn fetch_replay(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath((subscription_id, job_id)): ApiPath<(String, String)>,
) -> Result<Json<AccountReplayView>, ApiError> {
    let job = account_job(
        &state,
        &auth,
        &subscription_id,
        &job_id,
        JobKind::Replay,
        "replay job",
    )
    .await?;
    Ok(Json(AccountReplayView::new(&job, state.clock.now())))
}

async fn create_recovery(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(subscription_id): ApiPath<String>,
    JsonBody(mut f): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let since = instant(&mut f, "since");
    let statuses = statuses(&mut f);
    let reason = reason(&mut f);
    if let (Some(since), Some(statuses)) = (since, statuses.as_ref()) {
        if let Err(errors) =
            crate::domain::replay::validate_recovery(since, statuses, state.clock.now())
        {
            for e in errors {
                f.error(e.field(), e.to_string());
            }
        }
    }
    f.finish()?;
    let (Some(since), Some(statuses), Some(reason)) = (since, statuses, reason) else {
        return Err(ApiError::internal("validated recovery fields missing"));
    };
    let subscription_id: SubscriptionId = path_id(&subscription_id, "subscription")?;
    let ops = state.ops();
    let actor = auth.actor();
    let job = start_recovery(
        &ops,
        RecoverRequest {
            account_id: &auth.account_id,
            subscription_id: &subscription_id,
            since,
            statuses: &statuses,
            actor: &actor,
            reason: &reason,
        },
    )
    .await?;
    let location = format!(
        "/v1/subscriptions/{subscription_id}/recoveries/{}",
        job.job_id
    );
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(RecoveryView::new(&job, ops.now())),
    ))
}

async fn fetch_recovery(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath((subscription_id, job_id)): ApiPath<(String, String)>,
) -> Result<Json<RecoveryView>, ApiError> {
    let job = account_job(
        &state,
        &auth,
        &subscription_id,
        &job_id,
        JobKind::Recovery,
        "recovery job",
    )
    .await?;
    Ok(Json(RecoveryView::new(&job, state.clock.now())))
}
