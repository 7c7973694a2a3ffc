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
//! [`crate::web::console_session::LINK_TTL`] (never past the operator's token) and signs in once;
//! the session it starts lasts [`crate::web::console_session::OPERATOR_SESSION_TTL`] when an operator
//! issued it (and never past the operator's token), [`crate::web::console_session::SESSION_TTL`]
//! when an account token did (and ends when the token is revoked).

use crate::operations::MAX_REASON_CHARS;
use crate::store::account;
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::web::auth::{AccountAuth, Operator};
use crate::web::console_session::{Audience, Grounds};
use crate::web::console_signin::{issue, ConsoleLinkView};
use crate::web::extract::{path_id, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/operator/console-links", post(for_operator))
        .route("/v1/console-links", post(for_account))
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
