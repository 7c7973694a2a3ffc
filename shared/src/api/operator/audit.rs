//! The audit history of operator actions (who, what, when, why; [`crate::operations::recovery::audit`]):
//!
//! * `GET /operator/accounts/{account_id}/audit` (`?limit=&cursor=`) — the account's, newest first;
//!   a deleted account's too (its history outlives it, ending with its deletion).
//! * `GET /operator/accounts/{account_id}/subscriptions/{subscription_id}/audit`
//!   (`?limit=&cursor=`) — one subscription's.

use super::subscriptions::subscription_path;
use crate::api::auth::Operator;
use crate::api::extract::{page_limit, path_id, ApiPath, ApiQuery};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::api::v1::ListResponse;
use crate::ids::{AccountId, AuditId, ChangeId, DeliveryId, ReplayJobId, SubscriptionId};
use crate::operations::recovery::audit;
use crate::store::account;
use crate::store::audit::{AuditAction, AuditRecord, AuditScope};
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route(
            "/operator/accounts/{account_id}/audit",
            get(account_history),
        )
        .route(
            "/operator/accounts/{account_id}/subscriptions/{subscription_id}/audit",
            get(subscription_history),
        )
}

/// One audit entry as operators see it.
#[derive(Debug, Serialize)]
pub struct AuditView {
    pub id: AuditId,
    /// What.
    pub action: AuditAction,
    /// Who.
    pub operator: String,
    /// When.
    pub at: String,
    /// Why.
    pub reason: String,
    pub account_id: AccountId,
    /// `None` for account-level actions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<SubscriptionId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<ChangeId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<DeliveryId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<ReplayJobId>,
    pub details: BTreeMap<String, String>,
}

impl From<&AuditRecord> for AuditView {
    fn from(a: &AuditRecord) -> Self {
        AuditView {
            id: a.audit_id.clone(),
            action: a.action,
            operator: a.operator.clone(),
            at: a.at.to_rfc3339(),
            reason: a.reason.clone(),
            account_id: a.account_id.clone(),
            subscription_id: a.subscription_id.clone(),
            change_id: a.change_id.clone(),
            delivery_id: a.delivery_id.clone(),
            job_id: a.job_id.clone(),
            details: a.details.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    limit: Option<u32>,
    cursor: Option<String>,
}

async fn page(
    state: &ApiState,
    scope: AuditScope<'_>,
    params: ListParams,
) -> Result<Json<ListResponse<AuditView>>, ApiError> {
    let limit = page_limit(params.limit)?;
    let (records, next_cursor) =
        audit::list(&state.ops(), scope, limit, params.cursor.as_deref()).await?;
    Ok(Json(ListResponse {
        data: records.iter().map(AuditView::from).collect(),
        next_cursor,
    }))
}

async fn account_history(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ListResponse<AuditView>>, ApiError> {
    let account_id = path_id(&account_id, "account")?;
    let first_page = params.cursor.is_none();
    let history = page(&state, AuditScope::Account(&account_id), params).await?;
    // A deleted account keeps its history; only one that never existed has none at all.
    if first_page
        && history.data.is_empty()
        && !account::exists(state.dynamo(), state.table(), &account_id).await?
    {
        return Err(ApiError::not_found("account"));
    }
    Ok(history)
}

async fn subscription_history(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath((account_id, subscription_id)): ApiPath<(String, String)>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ListResponse<AuditView>>, ApiError> {
    let (account_id, subscription_id) = subscription_path(&account_id, &subscription_id)?;
    state
        .ops()
        .subscription(&account_id, &subscription_id)
        .await?;
    page(
        &state,
        AuditScope::Subscription {
            account_id: &account_id,
            subscription_id: &subscription_id,
        },
        params,
    )
    .await
}
