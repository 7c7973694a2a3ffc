//! Accounts, managed by operators:
//!
//! * `POST /operator/accounts` `{name, admin_emails?, reason?}` → 201 `{account, token}`: the
//!   account and its first account token (plaintext, shown once).
//! * `GET /operator/accounts` (`?q=&limit=&cursor=`) → accounts with their health over the last
//!   day ([`crate::operations::account_health`]), newest trouble first within the page; `q` is
//!   an account id or the start of names (without regard to case). Pages follow the accounts
//!   listing (id order); `limit` is at most
//!   [`MAX_ACCOUNTS_PAGE`](crate::operations::account_health::MAX_ACCOUNTS_PAGE), as each
//!   account listed costs its own reads.
//! * `GET /operator/accounts/{account_id}` → the account.
//! * `POST /operator/accounts/{account_id}/tokens` `{revoke_existing?, reason?}` → 201: another
//!   account token; with `revoke_existing: true` every other account token of the account is
//!   revoked.
//!
//! * `GET /operator/accounts/{account_id}/notice-allowlist` → whom the account's notices may reach
//!   besides its administrators (`admin_emails`): `{account_id, addresses, domains,
//!   slack_workspaces}` (see [`crate::notify::bounds`]).
//! * `PUT /operator/accounts/{account_id}/notice-allowlist` `{addresses?, domains?,
//!   slack_workspaces?, reason?}` → 200, the allowlist as it is now (the lists replace the old
//!   ones; an absent list is empty).
//!
//! * `DELETE /operator/accounts/{account_id}` `{reason?}` → 204: the account is deleted
//!   ([`delete_account`]); an unknown or already deleted account is a 404.
//!
//! The writes are audited like retry and replay (who, what, when and why; `reason` is optional
//! here): the entry is in the account's audit history, written in one transaction with the
//! account, the token or the account's deletion.

use crate::api::v1::events::monitor_error;
use crate::api::v1::ListResponse;
use crate::ids::AccountId;
use crate::operations::account::accounts::{
    account_of, create_account, delete_account, issue_account_token, NewAccount,
};
use crate::operations::account::tokens::TokenRequest;
use crate::operations::account_health::{list_accounts, AccountHealth, Health, SearchText};
use crate::operations::MAX_REASON_CHARS;
use crate::store::account::{self, Account, NoticeAllowlist};
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::write::Write;
use crate::web::auth;
use crate::web::auth::{IssuedTokenView, Operator, PlaintextToken};
use crate::web::extract::{path_id, ApiPath, ApiQuery, Fields, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub const MAX_NAME_CHARS: usize = 200;
pub(crate) const MAX_ADMIN_EMAILS: usize = 20;
/// Entries of each list of a notice allowlist.
pub(crate) const MAX_ALLOWLIST_ENTRIES: usize = 100;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/operator/accounts", get(list).post(create))
        .route("/operator/accounts/{account_id}", get(fetch).delete(remove))
        .route("/operator/accounts/{account_id}/tokens", post(issue))
        .route(
            "/operator/accounts/{account_id}/notice-allowlist",
            get(allowlist).put(set_allowlist),
        )
}

/// An account as the API shows it.
#[derive(Debug, Serialize)]
pub(crate) struct AccountView {
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

/// An account of the operators' list, with its health over the last day.
#[derive(Debug, Serialize)]
pub(crate) struct AccountHealthView {
    #[serde(flatten)]
    pub account: AccountView,
    pub health: HealthView,
}

/// [`Health`] as the API shows it.
#[derive(Debug, Serialize)]
pub(crate) struct HealthView {
    /// The window's length in hours.
    pub window_hours: u64,
    pub delivered: u64,
    pub dead: u64,
    pub failed: u64,
    pub paused_subscriptions: u64,
    /// Notification deliveries that failed for good in the window.
    pub notices_failed: u64,
    pub last_trouble_at: Option<String>,
    pub complete: bool,
}

impl From<&Health> for HealthView {
    fn from(h: &Health) -> Self {
        HealthView {
            window_hours: crate::operations::account_health::WINDOW.as_secs() / 3600,
            delivered: h.delivered,
            dead: h.dead,
            failed: h.failed,
            paused_subscriptions: h.paused_subscriptions,
            notices_failed: h.notices_failed,
            last_trouble_at: h.last_trouble_at.map(|t| t.to_rfc3339()),
            complete: h.complete,
        }
    }
}

impl From<&AccountHealth> for AccountHealthView {
    fn from(a: &AccountHealth) -> Self {
        AccountHealthView {
            account: AccountView::from(&a.account),
            health: HealthView::from(&a.health),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    q: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

async fn list(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ListResponse<AccountHealthView>>, ApiError> {
    let search = SearchText {
        q: params.q,
        limit: params.limit,
        cursor: params.cursor,
    }
    .read()?;
    let (accounts, next) = list_accounts(
        state.dynamo(),
        state.table(),
        &state.config.notification_table,
        &search,
        state.clock.now(),
    )
    .await
    .map_err(monitor_error)?;
    Ok(Json(ListResponse::new(
        accounts.iter().map(AccountHealthView::from).collect(),
        next,
    )))
}

#[derive(Debug, Serialize)]
pub(crate) struct CreatedAccount {
    pub account: AccountView,
    /// The account token, shown only now.
    pub token: PlaintextToken,
}

/// A plausible mailbox address: `local@domain`, no spaces, at most 254 characters. (Whether it
/// receives mail is the notification pipeline's business.)
pub(crate) fn check_email(email: &str) -> Result<(), &'static str> {
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

/// An email domain of an allowlist: a host name (`example.com`), without `@`.
pub(crate) fn check_domain(domain: &str) -> Result<(), &'static str> {
    let labels_ok = domain.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    });
    if domain.len() > 253 || !domain.contains('.') || !labels_ok {
        return Err("must be an email domain such as example.com");
    }
    Ok(())
}

/// A Slack workspace of an allowlist: the team id of its webhook URLs (`T024BE7LD`).
pub(crate) fn check_slack_workspace(team: &str) -> Result<(), &'static str> {
    if team.is_empty() || team.len() > 32 || !team.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err("must be a Slack team id (letters and digits, as in /services/{team}/…)");
    }
    Ok(())
}

/// The list `name` of the body (absent: empty): each entry trimmed and checked, duplicates
/// (without regard to case) dropped, at most `max` entries.
fn read_list(
    f: &mut Fields,
    name: &str,
    max: usize,
    check: fn(&str) -> Result<(), &'static str>,
) -> Vec<String> {
    let entries: Vec<String> = f.optional(name).unwrap_or_default();
    if entries.len() > max {
        f.error(name, format!("at most {max} entries are accepted"));
        return Vec::new();
    }
    let mut out = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let entry = entry.trim();
        match check(entry) {
            Ok(()) => {
                if !out.iter().any(|e: &String| e.eq_ignore_ascii_case(entry)) {
                    out.push(entry.to_owned());
                }
            }
            Err(message) => f.error(format!("{name}[{i}]"), message),
        }
    }
    out
}

fn read_admin_emails(f: &mut Fields) -> Vec<String> {
    read_list(f, "admin_emails", MAX_ADMIN_EMAILS, check_email)
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

    let new = NewAccount {
        name,
        admin_emails,
        reason,
    };
    let (account, token) = create_account(&state.account_ops(), &operator.id, new).await?;
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
    Ok(account_of(&state.account_ops(), &account_id).await?)
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
    let expires_in = auth::read_token_expiry(&mut f);
    let reason = optional_reason(&mut f);
    f.finish()?;
    let account_id = path_id(&account_id, "account")?;
    let request = TokenRequest {
        revoke_existing,
        expires_in,
    };
    let ops = state.account_ops();
    let (token, record, revoked) =
        issue_account_token(&ops, &account_id, &operator.id, &reason, request).await?;
    Ok((
        StatusCode::CREATED,
        Json(IssuedTokenView::new(token, &record, revoked)),
    ))
}

async fn remove(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
    JsonBody(mut f): JsonBody,
) -> Result<StatusCode, ApiError> {
    let reason = optional_reason(&mut f);
    f.finish()?;
    let account_id = path_id(&account_id, "account")?;
    let deleted = delete_account(&state.account_ops(), &account_id, &operator.id, &reason).await?;
    tracing::info!(
        operator = %operator.id,
        account_id = %account_id,
        tokens = deleted.tokens,
        subscriptions = deleted.subscriptions,
        integrations = deleted.integrations,
        "account deleted"
    );
    Ok(StatusCode::NO_CONTENT)
}

/// An account's notice allowlist as the API shows it.
#[derive(Debug, Serialize)]
pub(crate) struct AllowlistView {
    pub account_id: AccountId,
    #[serde(flatten)]
    pub allowlist: NoticeAllowlist,
}

async fn allowlist(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
) -> Result<Json<AllowlistView>, ApiError> {
    let account = load(&state, &account_id).await?;
    Ok(Json(AllowlistView {
        account_id: account.account_id,
        allowlist: account.notice_allowlist,
    }))
}

async fn set_allowlist(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
    JsonBody(mut f): JsonBody,
) -> Result<Json<AllowlistView>, ApiError> {
    let account_id = path_id(&account_id, "account")?;
    let allowlist = NoticeAllowlist {
        addresses: read_list(&mut f, "addresses", MAX_ALLOWLIST_ENTRIES, check_email),
        domains: read_list(&mut f, "domains", MAX_ALLOWLIST_ENTRIES, check_domain)
            .into_iter()
            .map(|d| d.to_ascii_lowercase())
            .collect(),
        slack_workspaces: read_list(
            &mut f,
            "slack_workspaces",
            MAX_ALLOWLIST_ENTRIES,
            check_slack_workspace,
        ),
    };
    let reason = optional_reason(&mut f);
    f.finish()?;
    let audit = AuditRecord::for_account(
        AuditAction::SetNoticeAllowlist,
        &account_id,
        &operator.id,
        &reason,
        state.clock.now(),
    )
    .detail("addresses", allowlist.addresses.len())
    .detail("domains", allowlist.domains.len())
    .detail("slack_workspaces", allowlist.slack_workspaces.len());
    let table = state.table();
    // One transaction: the allowlist changes only with its audit entry, and only on an account
    // that exists (a refused condition is a 404).
    state
        .change_existing(
            Write::all([
                account::set_notice_allowlist(table, &account_id, &allowlist)?,
                audit::create(table, &audit)?,
            ])?,
            "account",
        )
        .await?;
    tracing::info!(
        operator = %operator.id,
        account_id = %account_id,
        addresses = allowlist.addresses.len(),
        domains = allowlist.domains.len(),
        slack_workspaces = allowlist.slack_workspaces.len(),
        "notice allowlist set"
    );
    Ok(Json(AllowlistView {
        account_id: account_id.clone(),
        allowlist,
    }))
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

    #[test]
    fn allowlist_domains_and_slack_workspaces() {
        assert!(check_domain("acme.test").is_ok());
        assert!(check_domain("mail.acme-corp.test").is_ok());
        for bad in [
            "",
            "acme",
            "@acme.test",
            "a..b",
            ".acme.test",
            "acme.test.",
            "a b.c",
        ] {
            assert!(check_domain(bad).is_err(), "{bad}");
        }
        assert!(check_slack_workspace("T024BE7LD").is_ok());
        for bad in ["", "T/1", "T 1", &"T".repeat(33)] {
            assert!(check_slack_workspace(bad).is_err(), "{bad}");
        }
    }
}
