//! One account's caps, read and set by operators ([`crate::operations::account::limits`]):
//!
//! * `GET /operator/accounts/{account_id}/limits` → for each of `integrations`, `subscriptions`
//!   and `live_tokens`: `{used, limit, default, own}` (`own`: the account's own limit, if set);
//!   and `requests_per_second`: `{limit, default, own}` (the account's request rate:
//!   [`crate::api::account_rate`]).
//! * `PUT /operator/accounts/{account_id}/limits` `{integrations?, subscriptions?, live_tokens?,
//!   requests_per_second?, reason?}` → 200, the limits as they are now. A number (0 to
//!   [`MAX_LIMIT`]; a rate from 1) is the account's own limit, `null` puts it back to the
//!   deployment's default, an absent field leaves it. Audited (`set_account_limits`, the old and
//!   new values in the details) in one transaction with the change. Lowering a limit below what
//!   the account has refuses new items only.

use crate::api::account_rate::RATE_RANGE;
use crate::api::auth::Operator;
use crate::api::extract::{path_id, ApiPath, JsonBody, Patch};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::ids::AccountId;
use crate::operations::account::limits::usage;
use crate::operations::MAX_REASON_CHARS;
use crate::store::account;
use crate::store::account_limits::{self, Counted, Usage};
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::write::{send_resolving_conflicts, Write};
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use std::sync::Arc;

/// The highest limit an operator may set (the template's parameters' maximum).
pub const MAX_LIMIT: u32 = 100_000;
/// The field of the account's request rate.
const RATE: &str = "requests_per_second";

pub fn router() -> Router<Arc<ApiState>> {
    Router::new().route(
        "/operator/accounts/{account_id}/limits",
        get(fetch).put(set),
    )
}

/// One limit as operators see it.
#[derive(Debug, Serialize)]
pub struct LimitView {
    pub used: i64,
    /// What applies: `own` if set, else `default`.
    pub limit: u32,
    pub default: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own: Option<u32>,
}

/// The account's request rate as operators see it (nothing is kept counted: a second's count
/// lasts a second).
#[derive(Debug, Serialize)]
pub struct RateView {
    /// What applies: `own` if set, else `default`.
    pub limit: u32,
    pub default: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own: Option<u32>,
}

/// An account's limits as operators see them.
#[derive(Debug, Serialize)]
pub struct LimitsView {
    pub account_id: AccountId,
    pub integrations: LimitView,
    pub subscriptions: LimitView,
    pub live_tokens: LimitView,
    pub requests_per_second: RateView,
}

impl LimitsView {
    pub fn new(state: &ApiState, account_id: AccountId, usage: &Usage) -> Self {
        let defaults = &state.config.account_limits;
        let view = |w: Counted| LimitView {
            used: usage.used(w),
            limit: usage.limit(w, defaults),
            default: w.default_in(defaults),
            own: usage.own_limit(w),
        };
        LimitsView {
            account_id,
            integrations: view(Counted::Integrations),
            subscriptions: view(Counted::Subscriptions),
            live_tokens: view(Counted::LiveTokens),
            requests_per_second: RateView {
                limit: usage
                    .max_requests_per_second
                    .unwrap_or(defaults.requests_per_second),
                default: defaults.requests_per_second,
                own: usage.max_requests_per_second,
            },
        }
    }
}

/// The account of the path, or 404.
async fn existing(state: &ApiState, account_id: &str) -> Result<AccountId, ApiError> {
    let account_id: AccountId = path_id(account_id, "account")?;
    if !account::is_live(state.dynamo(), state.table(), &account_id).await? {
        return Err(crate::operations::OpsError::AccountGone.into());
    }
    Ok(account_id)
}

async fn fetch(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
) -> Result<Json<LimitsView>, ApiError> {
    let account_id = existing(&state, &account_id).await?;
    let usage = usage(&state.account_ops(), &account_id).await?;
    Ok(Json(LimitsView::new(&state, account_id, &usage)))
}

async fn set(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
    JsonBody(mut f): JsonBody,
) -> Result<Json<LimitsView>, ApiError> {
    let mut changes = Vec::new();
    let limits = Counted::ALL
        .map(|w| (w.as_str(), w.own_limit_attribute(), 0..=MAX_LIMIT))
        .into_iter()
        .chain([(RATE, account_limits::OWN_RATE_ATTRIBUTE, RATE_RANGE)]);
    for (field, attribute, range) in limits {
        match f.patch::<u32>(field) {
            Patch::Absent => {}
            Patch::Null => changes.push((field, attribute, None)),
            Patch::Set(v) if range.contains(&v) => changes.push((field, attribute, Some(v))),
            Patch::Set(_) => f.error(
                field,
                format!(
                    "must be a whole number from {} to {}, or null for the default",
                    range.start(),
                    range.end()
                ),
            ),
        }
    }
    let reason = if f.has("reason") {
        f.required_text("reason", MAX_REASON_CHARS)
            .unwrap_or_default()
    } else {
        String::new()
    };
    if changes.is_empty() && !f.has_errors() {
        f.error(
            "integrations",
            "name at least one of integrations, subscriptions, live_tokens, requests_per_second",
        );
    }
    f.finish()?;
    let account_id = existing(&state, &account_id).await?;
    let before = usage(&state.account_ops(), &account_id).await?;
    let describe = |v: Option<u32>| v.map_or_else(|| "default".to_string(), |v| v.to_string());
    let mut entry = AuditRecord::for_account(
        AuditAction::SetAccountLimits,
        &account_id,
        &operator.id,
        &reason,
        state.clock.now(),
    );
    for (field, _, v) in &changes {
        let was = match Counted::ALL.into_iter().find(|w| w.as_str() == *field) {
            Some(w) => before.own_limit(w),
            None => before.max_requests_per_second,
        };
        entry = entry.detail(field, format!("{} -> {}", describe(was), describe(*v)));
    }
    let changes: Vec<_> = changes.into_iter().map(|(_, a, v)| (a, v)).collect();
    let table = state.table();
    let written = send_resolving_conflicts(
        state.dynamo(),
        Write::all([
            account_limits::set_own_limits(table, &account_id, &changes)?,
            audit::create(table, &entry)?,
            account::live_check(table, &account_id)?,
        ])?,
    )
    .await?;
    if !written.applied() {
        if !account::is_live(state.dynamo(), table, &account_id).await? {
            return Err(crate::operations::OpsError::AccountGone.into());
        }
        return Err(ApiError::conflict(
            "the limits were changed concurrently; retry the request",
        ));
    }
    state.account_rates.forget(&account_id);
    tracing::info!(operator = %operator.id, %account_id, changes = changes.len(), "account limits set");
    let now = usage(&state.account_ops(), &account_id).await?;
    Ok(Json(LimitsView::new(&state, account_id, &now)))
}
