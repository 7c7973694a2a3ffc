//! The JSON routes that issue console login links (documented in `openapi.yaml`):
//!
//! * `POST /operator/console-links` `{account_id?, reason?}` (operator identity) → 201: a link
//!   that signs the caller in as an operator, or, with `account_id`, as that account's
//!   administrator (audited in the account's history as `issue_console_link`; an operator's own
//!   link is logged).
//! * `POST /v1/console-links` `{}` (account token) → 201: a link for the caller's account.
//!
//! The answer's `url` is a path (`/console/login?link=…`): the caller puts the API's base URL in
//! front. In AWS an operator first gets the identity provider's JWT (the one `/operator/*`
//! takes), calls the operator route with it, and opens the link in the browser; the link lives
//! [`super::console_session::LINK_TTL`] (never past the operator's token) and signs in once;
//! the session it starts lasts [`super::console_session::OPERATOR_SESSION_TTL`] when an operator
//! issued it (and never past the operator's token), [`super::console_session::SESSION_TTL`]
//! when an account token did (and ends when the token is revoked).

use super::console_session::{Audience, Grounds};
use crate::api::auth::{AccountAuth, Operator};
use crate::api::extract::{path_id, JsonBody};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::ids::AccountId;
use crate::operations::MAX_REASON_CHARS;
use crate::store::account;
use crate::store::audit::{self, AuditAction, AuditRecord};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::Serialize;
use std::sync::Arc;

/// Every path of the console's pages begins with this (the links name its sign-in page); they are
/// HTML, not part of the JSON API (`openapi.yaml` leaves them out, see [`crate::api::routes`]).
pub const CONSOLE_PREFIX: &str = "/console";

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/operator/console-links", post(for_operator))
        .route("/v1/console-links", post(for_account))
}

/// An issued login link.
#[derive(Debug, Serialize)]
pub struct ConsoleLinkView {
    /// The link's path; put the API's base URL in front.
    pub url: String,
    /// `operator` or `account`.
    pub audience: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<AccountId>,
    pub expires_at: String,
    /// How long the link may be used, in seconds.
    pub expires_in: u64,
}

/// A login link's view for `audience` on `grounds`, valid from now.
pub async fn issue(state: &ApiState, audience: Audience, grounds: &Grounds) -> ConsoleLinkView {
    let now = state.clock.now();
    let key = state.console_key(now).await;
    let (token, expires) = key.link(audience.clone(), grounds, now);
    let (kind, account_id) = match audience {
        Audience::Operator { .. } => ("operator", None),
        Audience::Account { account_id, .. } => ("account", Some(account_id)),
    };
    ConsoleLinkView {
        url: format!("{CONSOLE_PREFIX}/login?link={token}"),
        audience: kind,
        account_id,
        expires_at: expires.to_rfc3339(),
        expires_in: expires.since(now).as_secs(),
    }
}

async fn for_operator(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    JsonBody(mut f): JsonBody,
) -> Result<(StatusCode, Json<ConsoleLinkView>), ApiError> {
    let account_id: Option<String> = f.optional("account_id");
    let reason = if f.has("reason") {
        f.required_text("reason", MAX_REASON_CHARS)
            .unwrap_or_default()
    } else {
        String::new()
    };
    f.finish()?;
    let grounds = Grounds::Operator {
        operator_id: operator.id.clone(),
        expires: operator.expires,
    };
    let Some(account_id) = account_id else {
        tracing::info!(operator = %operator.id, "console link issued for an operator");
        let view = issue(
            &state,
            Audience::Operator {
                operator_id: operator.id,
            },
            &grounds,
        )
        .await;
        return Ok((StatusCode::CREATED, Json(view)));
    };
    let account_id = path_id(&account_id, "account")?;
    if !account::is_live(state.dynamo(), state.table(), &account_id).await? {
        return Err(crate::operations::OpsError::AccountGone.into());
    }
    let audit = AuditRecord::for_account(
        AuditAction::IssueConsoleLink,
        &account_id,
        &operator.id,
        &reason,
        state.clock.now(),
    );
    state.create(audit::create(state.table(), &audit)?).await?;
    tracing::info!(operator = %operator.id, %account_id, "console link issued for an account");
    let view = issue(
        &state,
        Audience::Account {
            account_id,
            actor: format!("link from operator {}", operator.id),
        },
        &grounds,
    )
    .await;
    Ok((StatusCode::CREATED, Json(view)))
}

async fn for_account(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    JsonBody(f): JsonBody,
) -> Result<(StatusCode, Json<ConsoleLinkView>), ApiError> {
    f.finish()?;
    let view = issue(
        &state,
        Audience::Account {
            account_id: auth.account_id,
            actor: format!("link from token {}", auth.token_id),
        },
        &Grounds::Token(auth.token_id.clone()),
    )
    .await;
    Ok((StatusCode::CREATED, Json(view)))
}
