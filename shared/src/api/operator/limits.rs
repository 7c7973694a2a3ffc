//! One account's caps, read and set by operators ([`crate::operations::account::limits`]):
//!
//! * `GET /operator/accounts/{account_id}/limits` → for each of `integrations`, `subscriptions`
//!   and `live_tokens`: `{used, limit, default, own}` (`own`: the account's own limit, if set);
//!   and `requests_per_second`: `{limit, default, own}` (the account's request rate:
//!   [`crate::web::account_rate`]).
//! * `PUT /operator/accounts/{account_id}/limits` `{integrations?, subscriptions?, live_tokens?,
//!   requests_per_second?, reason?}` → 200, the limits as they are now. A number (0 to
//!   [`MAX_LIMIT`]; a rate from 1) is the account's own limit, `null` puts it back to the
//!   deployment's default, an absent field leaves it. Audited (`set_account_limits`, the old and
//!   new values in the details) in one transaction with the change ([`set_limits`]). Lowering a
//!   limit below what the account has refuses new items only.
//!
//! [`MAX_LIMIT`]: crate::operations::account::limits::MAX_LIMIT

use crate::ids::AccountId;
use crate::operations::account::limits::{set_limits, usage, LimitChanges, RATE};
use crate::operations::MAX_REASON_CHARS;
use crate::store::account;
use crate::store::account_limits::{Counted, Usage};
use crate::web::auth::Operator;
use crate::web::extract::{path_id, ApiPath, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new().route(
        "/operator/accounts/{account_id}/limits",
        get(fetch).put(set),
    )
}

/// One limit as operators see it.
#[derive(Debug, Serialize)]
pub(crate) struct LimitView {
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
pub(crate) struct RateView {
    /// What applies: `own` if set, else `default`.
    pub limit: u32,
    pub default: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own: Option<u32>,
}

/// An account's limits as operators see them.
#[derive(Debug, Serialize)]
pub(crate) struct LimitsView {
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
    let changes = LimitChanges {
        caps: Counted::ALL.map(|w| (w, f.patch::<u32>(w.as_str()))).into(),
        requests_per_second: f.patch(RATE),
        reason: match f.has("reason") {
            true => f
                .required_text("reason", MAX_REASON_CHARS)
                .unwrap_or_default(),
            false => String::new(),
        },
    };
    // The range checks only when every field could be read (as a change of nothing is).
    let checked = match f.has_errors() {
        true => Ok(()),
        false => changes.check(),
    };
    f.finish_with(checked)?;
    let account_id: AccountId = path_id(&account_id, "account")?;
    let ops = state.account_ops();
    let now = set_limits(&ops, &account_id, &operator.id, &changes).await?;
    state.account_rates.forget(&account_id);
    Ok(Json(LimitsView::new(&state, account_id, &now)))
}
