//! Accounts, managed by operators:
//!
//! * `POST /operator/accounts` `{name, admin_emails?, reason?}` → 201 `{account, token}`: the
//!   account and its first account token (plaintext, shown once).
//! * `GET /operator/accounts/{account_id}` → the account.
//! * `POST /operator/accounts/{account_id}/tokens` `{revoke_existing?, reason?}` → 201: another
//!   account token; with `revoke_existing: true` every other account token of the account is
//!   revoked.
//!
//! Both writes are audited like retry and replay (who, what, when and why; `reason` is optional
//! here): the entry is in the account's audit history, written in one transaction with the
//! account or the token.

use crate::api::auth;
use crate::api::auth::{issue_token, IssuedTokenView, Operator, PlaintextToken, TokenKind};
use crate::api::extract::{path_id, ApiPath, Fields, JsonBody};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::ids::AccountId;
use crate::operations::MAX_REASON_CHARS;
use crate::store::account::{self, Account};
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::token;
use crate::store::write::Write;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use std::sync::Arc;

pub const ACCOUNT_KIND: &str = account::KIND;
pub const MAX_NAME_CHARS: usize = 200;
pub const MAX_ADMIN_EMAILS: usize = 20;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/operator/accounts", post(create))
        .route("/operator/accounts/{account_id}", get(fetch))
        .route("/operator/accounts/{account_id}/tokens", post(issue))
}

/// An account as the API shows it.
#[derive(Debug, Serialize)]
pub struct AccountView {
    pub id: AccountId,
    pub name: String,
    pub admin_emails: Vec<String>,
    pub created_at: String,
}

impl From<&Account> for AccountView {
    fn from(a: &Account) -> Self {
        AccountView {
            id: a.account_id.clone(),
            name: a.name.clone(),
            admin_emails: a.admin_emails.clone(),
            created_at: a.created_at.to_rfc3339(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct CreatedAccount {
    pub account: AccountView,
    /// The account token, shown only now.
    pub token: PlaintextToken,
}

/// A plausible mailbox address: `local@domain`, no spaces, at most 254 characters. (Whether it
/// receives mail is the notification pipeline's business.)
pub fn check_email(email: &str) -> Result<(), &'static str> {
    if email.len() > 254 {
        return Err("must be at most 254 characters");
    }
    if email.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain spaces or control characters");
    }
    match email.split_once('@') {
        Some((local, domain))
            if !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !domain.starts_with('.')
                && !domain.ends_with('.') =>
        {
            Ok(())
        }
        _ => Err("must be an email address (name@domain)"),
    }
}

fn read_admin_emails(f: &mut Fields) -> Vec<String> {
    let emails: Vec<String> = f.optional("admin_emails").unwrap_or_default();
    if emails.len() > MAX_ADMIN_EMAILS {
        f.error(
            "admin_emails",
            format!("at most {MAX_ADMIN_EMAILS} addresses are accepted"),
        );
        return Vec::new();
    }
    let mut out = Vec::with_capacity(emails.len());
    for (i, email) in emails.iter().enumerate() {
        let email = email.trim();
        match check_email(email) {
            Ok(()) => {
                if !out.iter().any(|e: &String| e.eq_ignore_ascii_case(email)) {
                    out.push(email.to_owned());
                }
            }
            Err(message) => f.error(format!("admin_emails[{i}]"), message),
        }
    }
    out
}

async fn create(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    JsonBody(mut f): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let name = f.required_text("name", MAX_NAME_CHARS);
    let admin_emails = read_admin_emails(&mut f);
    let reason = optional_reason(&mut f);
    f.finish()?;
    let name = name.ok_or_else(|| ApiError::internal("validated name missing"))?;

    let now = state.clock.now();
    let account = Account {
        account_id: AccountId::new(),
        name,
        admin_emails,
        created_at: now,
    };
    let (token, record) = issue_token(TokenKind::Acct, &account.account_id, None, now);
    let audit = AuditRecord::for_account(
        AuditAction::CreateAccount,
        &account.account_id,
        &operator.id,
        &reason,
        now,
    )
    .detail("name", &account.name)
    .detail("token_id", &record.token_id);
    let table = state.table();
    state
        .create(Write::all([
            account::create(table, &account)?,
            token::create(table, &record)?,
            audit::create(table, &audit)?,
        ])?)
        .await?;
    tracing::info!(operator = %operator.id, account_id = %account.account_id, "account created");

    let location = format!("/operator/accounts/{}", account.account_id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(CreatedAccount {
            account: AccountView::from(&account),
            token,
        }),
    ))
}

/// The optional `reason` of an audited account action (`""` when the operator gave none).
fn optional_reason(f: &mut Fields) -> String {
    if f.has("reason") {
        f.required_text("reason", MAX_REASON_CHARS)
            .unwrap_or_default()
    } else {
        String::new()
    }
}

async fn load(state: &ApiState, account_id: &str) -> Result<Account, ApiError> {
    let account_id = path_id(account_id, "account")?;
    account::get(state.dynamo(), state.table(), &account_id)
        .await?
        .ok_or_else(|| ApiError::not_found("account"))
}

async fn fetch(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
) -> Result<Json<AccountView>, ApiError> {
    let account = load(&state, &account_id).await?;
    Ok(Json(AccountView::from(&account)))
}

async fn issue(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
    JsonBody(mut f): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let revoke_existing: bool = f.optional("revoke_existing").unwrap_or(false);
    let reason = optional_reason(&mut f);
    f.finish()?;
    let account = load(&state, &account_id).await?;
    let audit = AuditRecord::for_account(
        AuditAction::IssueAccountToken,
        &account.account_id,
        &operator.id,
        &reason,
        state.clock.now(),
    );
    let (token, record, revoked) = auth::issue_rotated(
        &state,
        TokenKind::Acct,
        &account.account_id,
        None,
        revoke_existing,
        Some(audit),
    )
    .await?;
    tracing::info!(
        operator = %operator.id,
        account_id = %account.account_id,
        token_id = %record.token_id,
        revoked,
        "account token issued"
    );
    Ok((
        StatusCode::CREATED,
        Json(IssuedTokenView::new(token, &record, revoked)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        assert!(check_email("ops@example.com").is_ok());
        for bad in [
            "",
            "ops",
            "@example.com",
            "ops@",
            "a b@c.d",
            "a@b@c",
            "a@.b",
            "a@b.",
        ] {
            assert!(check_email(bad).is_err(), "{bad}");
        }
    }
}
