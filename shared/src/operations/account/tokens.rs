//! Issuing, rotating and revoking an account's tokens (the format: [`super::token_format`]; who
//! may call: [`crate::web::auth`]). A token is written with its reference and its audit entry in
//! one transaction, counted against the account's cap on live tokens ([`super::limits`]).

use super::limits;
use super::token_format::{self, PlaintextToken};
use super::AccountOps;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId, TokenId};
use crate::operations::OpsError;
use crate::store::account_limits::Counted;
use crate::store::audit::{AuditAction, AuditRecord};
use crate::store::token::{self, TokenKind, TokenRecord};
use crate::store::write::{send, Write};

/// A new token of `kind` for an account (and, for `intg`, an integration), checked under the
/// deployment's key: the plaintext to show once and the record to store.
pub async fn issue_token(
    state: &AccountOps<'_>,
    kind: TokenKind,
    account_id: &AccountId,
    integration_id: Option<&IntegrationId>,
    now: Timestamp,
) -> Result<(PlaintextToken, TokenRecord), OpsError> {
    let key = state.token_check.current().await?;
    Ok(token_format::issue_token(
        &key,
        kind,
        account_id,
        integration_id,
        now,
    ))
}

/// Which of an account's tokens to revoke.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RevokeScope<'a> {
    pub account_id: &'a AccountId,
    pub kind: TokenKind,
    /// `intg` tokens: only this integration's.
    pub integration_id: Option<&'a IntegrationId>,
    /// Keep this one (the token just issued).
    pub except: Option<&'a TokenId>,
    /// Who revokes (for the audit entry of each revoked token) …
    pub actor: &'a str,
    /// … and why.
    pub reason: &'a str,
}

/// Shortest and longest lifetime a token may be issued with (`expires_in`, seconds).
pub(crate) const TOKEN_EXPIRY_RANGE: std::ops::RangeInclusive<u64> = 60..=366 * 24 * 60 * 60;

/// Issues a new token of `kind` for the account (or one integration of it), stores it, and with
/// `revoke_existing` revokes the others of the same scope: the rotation both the account and the
/// integration token routes offer. With `expires_in` the token stops working that long after
/// now. `audit` (the issuance's entry: who, why) is written in one transaction with the token; it
/// learns the token's id, and each revoked token gets its own entry by the same actor. Returns the
/// token (shown once), its record and how many tokens were revoked.
pub(crate) async fn issue_rotated(
    state: &AccountOps<'_>,
    kind: TokenKind,
    account_id: &AccountId,
    integration_id: Option<&IntegrationId>,
    revoke_existing: bool,
    expires_in: Option<std::time::Duration>,
    audit: AuditRecord,
) -> Result<(PlaintextToken, TokenRecord, u32), OpsError> {
    let now = state.now();
    let (token, record) = issue_token(state, kind, account_id, integration_id, now).await?;
    let record = record.expiring(expires_in.map(|d| now.plus(d)));
    let table = state.table();
    let audit = AuditRecord { at: now, ..audit }
        .detail("token_id", &record.token_id)
        .detail("revoke_existing", revoke_existing);
    let writes = vec![
        token::create(table, &record)?,
        crate::store::audit::create(table, &audit)?,
    ];
    limits::create_counted(
        state,
        account_id,
        &[Counted::LiveTokens],
        Write::all(writes)?,
    )
    .await?;
    let revoked = if revoke_existing {
        revoke_tokens(
            state,
            RevokeScope {
                account_id,
                kind,
                integration_id,
                except: Some(&record.token_id),
                actor: &audit.operator,
                reason: &format!("replaced by token {} (revoke_existing)", record.token_id),
            },
            now,
        )
        .await?
    } else {
        0
    };
    Ok((token, record, revoked))
}

/// Revokes every token in `scope`: marks the token item revoked (so it fails verification), with
/// its audit entry and the account's count of live tokens in the same transaction, then drops
/// its reference. Safe to repeat. Returns how many tokens were revoked now.
pub(crate) async fn revoke_tokens(
    state: &AccountOps<'_>,
    scope: RevokeScope<'_>,
    now: Timestamp,
) -> Result<u32, OpsError> {
    revoke_where(
        state,
        scope.account_id,
        scope.actor,
        scope.reason,
        now,
        |r| {
            r.token_kind == scope.kind
                && (scope.kind == TokenKind::Acct
                    || r.integration_id.as_ref() == scope.integration_id)
                && Some(&r.token_id) != scope.except
        },
    )
    .await
}

/// Revokes every token of the account, of both kinds (the account's deletion), each audited
/// with `actor` and `reason`. Safe to repeat.
pub(crate) async fn revoke_all_tokens(
    state: &AccountOps<'_>,
    account_id: &AccountId,
    actor: &str,
    reason: &str,
    now: Timestamp,
) -> Result<u32, OpsError> {
    revoke_where(state, account_id, actor, reason, now, |_| true).await
}

/// Walks the account's token references and revokes those `in_scope` picks, each with its audit
/// entry by `actor` for `reason`.
async fn revoke_where(
    state: &AccountOps<'_>,
    account_id: &AccountId,
    actor: &str,
    reason: &str,
    now: Timestamp,
    in_scope: impl Fn(&token::TokenRef) -> bool,
) -> Result<u32, OpsError> {
    let (dynamo, table) = (state.dynamo(), state.table());
    let mut after: Option<TokenId> = None;
    let mut revoked = 0;
    loop {
        let (refs, next) = token::references(dynamo, table, account_id, after.as_ref()).await?;
        for r in refs {
            if !in_scope(&r) {
                continue;
            }
            let entry =
                AuditRecord::for_account(AuditAction::RevokeToken, account_id, actor, reason, now)
                    .detail("token_id", &r.token_id)
                    .detail("kind", r.token_kind);
            let entry = match &r.integration_id {
                Some(i) => entry.detail("integration_id", i),
                None => entry,
            };
            // Refused: gone or revoked already (a repeated revocation), counted and audited once.
            if limits::removed_counted(
                state,
                account_id,
                &[Counted::LiveTokens],
                Write::all([
                    token::revoke(table, &r.token_id, now)?,
                    crate::store::audit::create(table, &entry)?,
                ])?,
            )
            .await?
            {
                revoked += 1;
            }
            send(
                dynamo,
                token::drop_reference(table, account_id, &r.token_id)?,
            )
            .await?;
        }
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    Ok(revoked)
}

/// What a token issuance asks.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenRequest {
    /// Revoke the other tokens of the same scope.
    pub revoke_existing: bool,
    /// The token stops working this long after it is issued (within [`TOKEN_EXPIRY_RANGE`]).
    pub expires_in: Option<std::time::Duration>,
}

/// Issues a publish token for the account on behalf of `actor` for `reason` (audited); with
/// `revoke_existing` the account's other publish tokens are revoked.
pub async fn issue_publish_token(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    actor: &str,
    reason: &str,
    request: TokenRequest,
) -> Result<(PlaintextToken, TokenRecord, u32), OpsError> {
    let entry = AuditRecord::for_account(
        AuditAction::IssuePublishToken,
        account_id,
        actor,
        reason,
        ops.now(),
    );
    let issued = issue_rotated(
        ops,
        TokenKind::Pub,
        account_id,
        None,
        request.revoke_existing,
        request.expires_in,
        entry,
    )
    .await?;
    let (token_id, revoked) = (&issued.1.token_id, issued.2);
    tracing::info!(%account_id, %token_id, revoked, "publish token issued");
    Ok(issued)
}
