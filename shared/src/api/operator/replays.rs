//! Window replay jobs (`docs/lifecycles.md#replay-job`; rules in [`crate::domain::replay`], storage in
//! [`crate::operations::recovery::replay`]):
//!
//! * `POST /operator/accounts/{account_id}/subscriptions/{subscription_id}/replays`
//!   `{from, to, reason}` → `202` with the job (and `Location`): the window `[from, to)` of change
//!   time (RFC 3339), at most seven days, not reversed, not in the future, within retained
//!   history (every violation is named in one `422`). The request runs the job for a few seconds;
//!   a large window answers `running` and continues when resumed.
//! * `GET /operator/accounts/{account_id}/replays` (`?subscription_id=&limit=&cursor=`) — jobs,
//!   newest first.
//! * `GET /operator/accounts/{account_id}/replays/{job_id}` — a job's status and counts;
//!   `in_progress: false` on a `running` job means no run holds it: resume it.
//! * `POST /operator/accounts/{account_id}/replays/{job_id}/resume` `{reason}` — continues a
//!   stopped job from its saved position (`409` while a run holds it or once it is completed).

use super::subscriptions::reason;
use crate::api::v1::ListResponse;
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::replay::{JobKind, ReplayStatus};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, ReplayJobId, SubscriptionId};
use crate::operations::recovery::replay::{
    list_jobs, load_job, read_window, resume_job, start_job, Budget, ReplayRequest,
};
use crate::operations::resource_ids::subscription_ids;
use crate::store::replay_job::{ReplayCounts, ReplayJob};
use crate::web::auth::Operator;
use crate::web::extract::{page_limit, path_id, ApiPath, ApiQuery, Fields, JsonBody};
use crate::web::problem::{ApiError, FieldError};
use crate::web::state::ApiState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route(
            "/operator/accounts/{account_id}/subscriptions/{subscription_id}/replays",
            post(create),
        )
        .route("/operator/accounts/{account_id}/replays", get(list))
        .route(
            "/operator/accounts/{account_id}/replays/{job_id}",
            get(fetch),
        )
        .route(
            "/operator/accounts/{account_id}/replays/{job_id}/resume",
            post(resume),
        )
}

/// A replay job as operators see it.
#[derive(Debug, Serialize)]
pub struct ReplayJobView {
    pub id: ReplayJobId,
    pub account_id: AccountId,
    pub subscription_id: SubscriptionId,
    /// `replay`, or `recovery` (an account's: only `statuses` restarted, `from` its `since`).
    pub kind: JobKind,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<DeliveryStatus>,
    pub from: String,
    pub to: String,
    pub reason: String,
    pub requested_by: String,
    pub status: ReplayStatus,
    /// A run holds the job now. `running` and not in progress: stopped; resume it.
    pub in_progress: bool,
    /// The last change id walked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<ChangeId>,
    pub chunks: u32,
    pub runs: u32,
    pub counts: ReplayCounts,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
}

impl ReplayJobView {
    pub fn new(job: &ReplayJob, now: Timestamp) -> Self {
        ReplayJobView {
            id: job.job_id.clone(),
            account_id: job.account_id.clone(),
            subscription_id: job.subscription_id.clone(),
            kind: job.job_kind,
            statuses: job.statuses.clone(),
            from: job.from.to_rfc3339(),
            to: job.to.to_rfc3339(),
            reason: job.reason.clone(),
            requested_by: job.requested_by.clone(),
            status: job.status,
            in_progress: job.in_progress(now),
            position: job.position.clone(),
            chunks: job.chunks,
            runs: job.runs,
            counts: job.counts(),
            created_at: job.created_at.to_rfc3339(),
            updated_at: job.updated_at.to_rfc3339(),
            completed_at: job.completed_at.map(|t| t.to_rfc3339()),
        }
    }
}

/// The job's URL (the `Location` of the answer that started it).
pub fn location(job: &ReplayJob) -> String {
    format!(
        "/operator/accounts/{}/replays/{}",
        job.account_id, job.job_id
    )
}

/// A replay request's fields: `from` and `to` as RFC
/// 3339 instants making a window [`read_window`] accepts, and a `reason`. `None` after
/// recording every refusal in `f` (its `finish` answers them).
pub fn replay_fields(f: &mut Fields, now: Timestamp) -> Option<(Timestamp, Timestamp, String)> {
    let from: Option<String> = f.required("from");
    let to: Option<String> = f.required("to");
    let reason = reason(f);
    let window = read_window(from.as_deref(), to.as_deref(), now).unwrap_or_else(|refused| {
        f.absorb(refused);
        None
    });
    let (from, to) = window?;
    Some((from, to, reason?))
}

pub async fn create(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath((account_id, subscription_id)): ApiPath<(String, String)>,
    JsonBody(mut f): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let fields = replay_fields(&mut f, state.clock.now());
    f.finish()?;
    let (from, to, reason) =
        fields.ok_or_else(|| ApiError::internal("validated replay fields missing"))?;
    let (account_id, subscription_id) = subscription_ids(&account_id, &subscription_id)?;
    let ops = state.ops();
    let job = start_job(
        &ops,
        ReplayRequest {
            account_id: &account_id,
            subscription_id: &subscription_id,
            from,
            to,
            operator: &operator.id,
            reason: &reason,
        },
    )
    .await?;
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location(&job))],
        Json(ReplayJobView::new(&job, ops.now())),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    subscription_id: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

async fn list(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ListResponse<ReplayJobView>>, ApiError> {
    let account_id = path_id(&account_id, "account")?;
    let limit = page_limit(params.limit)?;
    let subscription_id = match params.subscription_id {
        None => None,
        Some(id) => Some(
            crate::web::extract::resource_id::<SubscriptionId>(&id).ok_or_else(|| {
                ApiError::Validation {
                    errors: vec![FieldError::new(
                        "subscription_id",
                        "is not a subscription id",
                    )],
                }
            })?,
        ),
    };
    let ops = state.ops();
    let (jobs, next_cursor) = list_jobs(
        &ops,
        &account_id,
        subscription_id.as_ref(),
        limit,
        params.cursor.as_deref(),
    )
    .await?;
    let now = ops.now();
    Ok(Json(ListResponse {
        data: jobs.iter().map(|j| ReplayJobView::new(j, now)).collect(),
        next_cursor,
    }))
}

fn job_path(account_id: &str, job_id: &str) -> Result<(AccountId, ReplayJobId), ApiError> {
    Ok((
        path_id(account_id, "account")?,
        path_id(job_id, "replay job")?,
    ))
}

async fn fetch(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath((account_id, job_id)): ApiPath<(String, String)>,
) -> Result<Json<ReplayJobView>, ApiError> {
    let (account_id, job_id) = job_path(&account_id, &job_id)?;
    let ops = state.ops();
    let job = load_job(&ops, &account_id, &job_id).await?;
    Ok(Json(ReplayJobView::new(&job, ops.now())))
}

async fn resume(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath((account_id, job_id)): ApiPath<(String, String)>,
    JsonBody(mut f): JsonBody,
) -> Result<Json<ReplayJobView>, ApiError> {
    let reason = reason(&mut f);
    f.finish()?;
    let reason = reason.ok_or_else(|| ApiError::internal("validated reason missing"))?;
    let (account_id, job_id) = job_path(&account_id, &job_id)?;
    let ops = state.ops();
    let job = resume_job(
        &ops,
        &account_id,
        &job_id,
        &operator.id,
        &reason,
        Budget::api(),
    )
    .await?;
    Ok(Json(ReplayJobView::new(&job, ops.now())))
}
