//! A subscription, as operators see and resume it (`docs/lifecycles.md#subscription`):
//!
//! * `GET /operator/accounts/{account_id}/subscriptions/{subscription_id}` — the subscription
//!   with its status, dead count and pull cursor.
//! * `POST /operator/accounts/{account_id}/subscriptions/{subscription_id}/resume` `{reason}` —
//!   `paused → active`, dead count reset, audited ([`crate::operations::recovery::resume`]). An active
//!   subscription is a `409`. Changes skipped while it was paused stay skipped.
//!
//! Every `/operator` route that changes something takes a `reason` (required, up to
//! [`MAX_REASON_CHARS`] characters) for the audit history, next to the operator's identity.

use crate::api::v1::subscriptions::SubscriptionView;
use crate::ids::{AuditId, ChangeId};
use crate::operations::recovery::resume::resume_subscription;
use crate::operations::resource_ids::subscription_ids;
use crate::operations::MAX_REASON_CHARS;
use crate::store::subscription::Subscription;
use crate::web::auth::Operator;
use crate::web::extract::{ApiPath, Fields, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route(
            "/operator/accounts/{account_id}/subscriptions/{subscription_id}",
            get(fetch),
        )
        .route(
            "/operator/accounts/{account_id}/subscriptions/{subscription_id}/resume",
            post(resume),
        )
}

/// The operator's `reason`, required.
pub fn reason(f: &mut Fields) -> Option<String> {
    f.required_text("reason", MAX_REASON_CHARS)
}

/// A subscription as operators see it.
#[derive(Debug, Serialize)]
pub struct OperatorSubscriptionView {
    #[serde(flatten)]
    pub subscription: SubscriptionView,
    /// The pull cursor (poll integrations): the acknowledged change id and the epoch.
    pub pull: PullStateView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_by: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct PullStateView {
    pub acknowledged_change_id: Option<ChangeId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acknowledged_at: Option<String>,
    pub epoch: u32,
}

impl From<&Subscription> for OperatorSubscriptionView {
    fn from(s: &Subscription) -> Self {
        OperatorSubscriptionView {
            subscription: SubscriptionView::from(s),
            pull: PullStateView {
                acknowledged_change_id: s.pull_cursor.clone(),
                acknowledged_at: s.pull_cursor_at.map(|t| t.to_rfc3339()),
                epoch: s.pull_epoch,
            },
            resumed_at: s.resumed_at.map(|t| t.to_rfc3339()),
            resumed_by: s.resumed_by.clone(),
        }
    }
}

async fn fetch(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath((account_id, subscription_id)): ApiPath<(String, String)>,
) -> Result<Json<OperatorSubscriptionView>, ApiError> {
    let (account_id, subscription_id) = subscription_ids(&account_id, &subscription_id)?;
    let sub = state
        .ops()
        .subscription(&account_id, &subscription_id)
        .await?;
    Ok(Json(OperatorSubscriptionView::from(&sub)))
}

#[derive(Debug, Serialize)]
pub struct ResumedView {
    pub subscription: OperatorSubscriptionView,
    /// The consecutive dead count the resume reset.
    pub dead_count_before: u32,
    pub audit_id: AuditId,
}

pub async fn resume(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath((account_id, subscription_id)): ApiPath<(String, String)>,
    JsonBody(mut f): JsonBody,
) -> Result<Json<ResumedView>, ApiError> {
    let reason = reason(&mut f);
    f.finish()?;
    let reason = reason.ok_or_else(|| ApiError::internal("validated reason missing"))?;
    let (account_id, subscription_id) = subscription_ids(&account_id, &subscription_id)?;
    let outcome = resume_subscription(
        &state.ops(),
        &account_id,
        &subscription_id,
        &operator.id,
        &reason,
    )
    .await?;
    Ok(Json(ResumedView {
        subscription: OperatorSubscriptionView::from(&outcome.subscription),
        dead_count_before: outcome.dead_count_before,
        audit_id: outcome.audit_id,
    }))
}
