//! The audit history of operator actions (who, what, when, why; [`crate::operations::recovery::audit`]):
//!
//! * `GET /operator/accounts/{account_id}/audit` (`?limit=&cursor=`) — the account's, newest first;
//!   a deleted account's too (its history outlives it, ending with its deletion).
//! * `GET /operator/accounts/{account_id}/subscriptions/{subscription_id}/audit`
//!   (`?limit=&cursor=`) — one subscription's.
//! * `GET /operator/accounts/{account_id}/audit/verify` — the walk of the account's history (or
//!   the catalog's, `_catalog`) in the order its entries were written, each entry's hash
//!   recomputed: `{account_id, intact, entries, unchained_entries, head, broken}`, `broken`
//!   naming the first entry replaced or removed outside the code ([`crate::store::chain`]);
//!   `?anchor={seq}:{hash}` (a head an earlier verification printed) also finds a chain
//!   rewritten from an entry onward.

use crate::api::v1::ListResponse;
use crate::ids::{AccountId, AuditId, ChangeId, DeliveryId, ReplayJobId, SubscriptionId};
use crate::operations::recovery::audit;
use crate::operations::resource_ids::subscription_ids;
use crate::store::account;
use crate::store::audit::{entry_of_sk, AuditAction, AuditRecord, AuditScope};
use crate::store::chain::Head;
use crate::web::auth::Operator;
use crate::web::extract::{page_limit, path_id, ApiPath, ApiQuery};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
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
        .route(
            "/operator/accounts/{account_id}/audit/verify",
            get(verify_history),
        )
}

/// What the walk of a history found.
#[derive(Debug, Serialize)]
pub(crate) struct VerificationView {
    pub account_id: AccountId,
    /// Every entry on the chain holds and the head names the last one.
    pub intact: bool,
    /// Entries on the chain.
    pub entries: u64,
    /// Entries written before histories were chained (not checked).
    pub unchained_entries: u64,
    pub head: Option<HeadView>,
    /// The first link that does not hold.
    pub broken: Option<BreakView>,
}

#[derive(Debug, Serialize)]
pub(crate) struct HeadView {
    pub seq: u64,
    pub hash: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct BreakView {
    /// The entry's number on the chain (`None`: the break is at the head).
    pub seq: Option<u64>,
    /// The entry's id and position in the history (`None`: at the head).
    pub id: Option<String>,
    pub position: Option<String>,
    pub reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyParams {
    /// `{seq}:{hash}`: a head printed by an earlier verification.
    anchor: Option<String>,
}

/// An anchor as given (`{seq}:{hash}`, the hash 64 lowercase hex digits).
fn anchor(text: &str) -> Result<Head, ApiError> {
    text.split_once(':')
        .and_then(|(seq, hash)| {
            let seq = seq.parse().ok().filter(|s| *s > 0)?;
            let hex = hash.len() == 64
                && hash
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            hex.then(|| Head {
                seq,
                hash: hash.to_owned(),
            })
        })
        .ok_or_else(|| {
            ApiError::field(
                "anchor",
                "an anchor is {seq}:{hash}, a head printed by an earlier verification",
            )
        })
}

async fn verify_history(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
    ApiQuery(params): ApiQuery<VerifyParams>,
) -> Result<Json<VerificationView>, ApiError> {
    let account_id = path_id(&account_id, "account")?;
    let anchor = params.anchor.as_deref().map(anchor).transpose()?;
    let verdict = audit::verify(&state.ops(), &account_id, anchor.as_ref()).await?;
    if verdict.chained == 0
        && verdict.unchained == 0
        && verdict.head.is_none()
        && !account::exists(state.dynamo(), state.table(), &account_id).await?
    {
        return Err(ApiError::not_found("account"));
    }
    let broken = verdict.broken.map(|b| {
        let entry = b.sk.as_deref().and_then(entry_of_sk);
        BreakView {
            seq: b.seq,
            id: entry.as_ref().map(|(_, id)| id.clone()),
            position: entry.map(|(position, _)| position),
            reason: b.reason,
        }
    });
    Ok(Json(VerificationView {
        account_id,
        intact: broken.is_none(),
        entries: verdict.chained,
        unchained_entries: verdict.unchained,
        head: verdict.head.map(|h| HeadView {
            seq: h.seq,
            hash: h.hash,
        }),
        broken,
    }))
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
    let (account_id, subscription_id) = subscription_ids(&account_id, &subscription_id)?;
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
