//! Accounts as operators make and end them: create one with its first account token, issue
//! an account token, delete one (its credentials, subscriptions and integrations, then the
//! account itself).

use super::limits;
use super::token_format::PlaintextToken;
use super::tokens::{self, TokenRequest};
use super::AccountOps;
use crate::ids::AccountId;
use crate::operations::{OpsError, WRITE_CONCURRENCY};
use crate::store::account::{self, Account};
use crate::store::account_limits::Counted;
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::integration;
use crate::store::subscription;
use crate::store::token::{self as token_store, TokenKind, TokenRecord};
use crate::store::write::{send, Write};
use crate::store::StoreError;
use futures::stream::{self, StreamExt};
use std::future::Future;

/// A new account: its name, its administrators' email addresses, and why an operator made it.
#[derive(Debug, Clone)]
pub struct NewAccount {
    pub name: String,
    pub admin_emails: Vec<String>,
    pub reason: String,
}

/// Creates an account with its first account token (shown once) on behalf of `operator`,
/// counted and audited in one transaction with it.
pub async fn create_account(
    ops: &AccountOps<'_>,
    operator: &str,
    new: NewAccount,
) -> Result<(Account, PlaintextToken), OpsError> {
    let now = ops.now();
    let account = Account::new(AccountId::new(), new.name, new.admin_emails, now);
    let account_id = &account.account_id;
    let (token, record) = tokens::issue_token(ops, TokenKind::Acct, account_id, None, now).await?;
    let audit = AuditRecord::for_account(
        AuditAction::CreateAccount,
        account_id,
        operator,
        &new.reason,
        now,
    )
    .detail("name", &account.name)
    .detail("token_id", &record.token_id);
    let table = ops.table();
    let writes = Write::all([
        account::create(table, &account)?,
        token_store::create(table, &record)?,
        audit::create(table, &audit)?,
    ])?;
    limits::create_counted_with_account(ops, account_id, &[Counted::LiveTokens], writes).await?;
    tracing::info!(%operator, %account_id, "account created");
    Ok((account, token))
}

/// The account, or "account not found".
pub(crate) async fn account_of(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
) -> Result<Account, OpsError> {
    account::get(ops.dynamo(), ops.table(), account_id)
        .await?
        .ok_or(OpsError::NotFound("account"))
}

/// Issues an account token on behalf of `operator` for `reason` ("account not found" when there
/// is no such account); with `revoke_existing` the account's other tokens are revoked.
pub async fn issue_account_token(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    operator: &str,
    reason: &str,
    request: TokenRequest,
) -> Result<(PlaintextToken, TokenRecord, u32), OpsError> {
    let account = account_of(ops, account_id).await?;
    let account_id = &account.account_id;
    let audit = AuditRecord::for_account(
        AuditAction::IssueAccountToken,
        account_id,
        operator,
        reason,
        ops.now(),
    );
    let (token, record, revoked) = tokens::issue_rotated(
        ops,
        TokenKind::Acct,
        account_id,
        None,
        request.revoke_existing,
        request.expires_in,
        audit,
    )
    .await?;
    let token_id = &record.token_id;
    tracing::info!(%operator, %account_id, %token_id, revoked, "account token issued");
    Ok((token, record, revoked))
}

/// Subscriptions and integrations read per page while an account is deleted.
pub const DELETION_PAGE: u32 = 100;

/// What an account's deletion removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeletedAccount {
    pub tokens: u32,
    pub subscriptions: u32,
    pub integrations: u32,
}

/// Deletes an account: it is marked as being deleted (nothing can be created in it any more,
/// and its console sessions end), its tokens (account, integration and publish tokens) are
/// revoked, then its subscriptions and integrations deleted, page by page until none is left,
/// then the account item (and with it its entry on the `ACCOUNTS` listing) in one transaction
/// with the audit entry of the deletion. Nothing is routed to it afterwards: ingest finds no subscription, and a
/// delivery already queued fails as configuration loss ("the account is gone") once the worker's
/// configuration cache has expired. Its audit history, events and deliveries stay (history, gone
/// by their own retention). The account item goes last, so a deletion cut short (a timeout, an
/// error) is finished by asking again: every step before it is safe to repeat. An unknown or
/// already deleted account is "account not found".
pub async fn delete_account(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    operator: &str,
    reason: &str,
) -> Result<DeletedAccount, OpsError> {
    let (dynamo, table) = (ops.dynamo(), ops.table());
    // Marked first: from now on nothing is created in it (each create's transaction checks the
    // account is live) and its console sessions end (each request checks it too), operator-link
    // sessions included, while the next steps remove what it has.
    let marked = account::begin_deletion(table, account_id, ops.now())?;
    if !send(dynamo, marked).await?.applied() {
        return Err(OpsError::NotFound("account"));
    }
    // Then its tokens: no credential of it works while its items go.
    let tokens = tokens::revoke_all_tokens(
        ops,
        account_id,
        operator,
        "the account was deleted",
        ops.now(),
    )
    .await?;
    let subscriptions = delete_pages(
        dynamo,
        move |after| async move {
            subscription::list(
                dynamo,
                table,
                account_id,
                None,
                DELETION_PAGE,
                after.as_ref(),
            )
            .await
        },
        |s| subscription::delete(table, account_id, &s.subscription_id),
    )
    .await?;
    let integrations = delete_pages(
        dynamo,
        move |after| async move {
            integration::list(dynamo, table, account_id, DELETION_PAGE, after.as_ref()).await
        },
        |i| integration::delete(table, account_id, &i.integration_id),
    )
    .await?;
    let deleted = DeletedAccount {
        tokens,
        subscriptions,
        integrations,
    };
    let audit = AuditRecord::for_account(
        AuditAction::DeleteAccount,
        account_id,
        operator,
        reason,
        ops.now(),
    )
    .detail("tokens_revoked", deleted.tokens)
    .detail("subscriptions_deleted", deleted.subscriptions)
    .detail("integrations_deleted", deleted.integrations);
    // Refused: deleted concurrently by another request (a 404, like a second deletion).
    let last = Write::all([
        account::delete(table, account_id)?,
        crate::store::account_limits::forget(table, account_id)?,
        audit::create(table, &audit)?,
    ])?;
    if !send(dynamo, last).await?.applied() {
        return Err(OpsError::NotFound("account"));
    }
    Ok(deleted)
}

/// Deletes every item `page` lists (a page at a time, from the id it continues after), each with
/// the delete `write` makes of it, [`WRITE_CONCURRENCY`] at a time; how many it deleted (one
/// already gone is not counted).
async fn delete_pages<T, Id, Fut>(
    dynamo: &aws_sdk_dynamodb::Client,
    page: impl Fn(Option<Id>) -> Fut,
    write: impl Fn(&T) -> Result<Write, StoreError>,
) -> Result<u32, OpsError>
where
    Fut: Future<Output = Result<(Vec<T>, Option<Id>), StoreError>>,
{
    let (mut after, mut deleted) = (None, 0);
    loop {
        let (items, next) = page(after.take()).await?;
        let writes = items.iter().map(&write).collect::<Result<Vec<_>, _>>()?;
        let sent: Vec<_> = stream::iter(writes.into_iter().map(|w| send(dynamo, w)))
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await;
        for written in sent {
            if written?.applied() {
                deleted += 1;
            }
        }
        match next {
            Some(n) => after = Some(n),
            None => return Ok(deleted),
        }
    }
}
