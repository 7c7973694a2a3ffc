//! Each account's caps on integrations, subscriptions and live tokens (the items:
//! [`crate::store::account_limits`]): the writes that create a counted item go through
//! [`create_counted`], those that delete or revoke one through [`remove_counted`], so the counts
//! move in the same transaction as the items and a create past a limit is refused with
//! `409 limit-reached`, naming the limit and its value.
//!
//! An account whose items predate counting is counted once, by reading them, before its first
//! counted write ([`usage`]).
//!
//! Nothing is created in an account that is gone or being deleted: each counted create carries
//! the account's [`account::live_check`] in its transaction (refused: `404`, [`OpsError::AccountGone`]),
//! and a first count needs the account item, so the usage item never comes back after the
//! account's deletion removed it.

use super::AccountOps;
use crate::ids::AccountId;
use crate::operations::OpsError;
use crate::store::account;
use crate::store::account_config;
use crate::store::account_limits::{self, Counted, Usage};
use crate::store::token;
use crate::store::write::{send_resolving_conflicts, Write, Written};

/// The account's usage, counting its items first if nothing has counted them yet.
pub async fn usage(state: &AccountOps<'_>, account_id: &AccountId) -> Result<Usage, OpsError> {
    let (dynamo, table) = (state.dynamo(), state.table());
    if let Some(usage) = account_limits::get(dynamo, table, account_id).await? {
        return Ok(usage);
    }
    let config = account_config::load(dynamo, table, account_id).await?;
    let mut live_tokens = 0;
    let mut after = None;
    loop {
        let (refs, next) = token::references(dynamo, table, account_id, after.as_ref()).await?;
        live_tokens += refs.len() as i64;
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let counted = Usage {
        integrations: config.integrations.len() as i64,
        subscriptions: (config.subscriptions.len() + config.broken.len()) as i64,
        live_tokens,
        ..Usage::default()
    };
    // Refused: another request counted first (or a create made the item); read what it wrote.
    // Or the account is gone: its usage item is not brought back.
    let first = Write::all([
        account_limits::count_from(table, account_id, &counted)?,
        account::exists_check(table, account_id)?,
    ])?;
    if send_resolving_conflicts(dynamo, first).await?.applied() {
        return Ok(counted);
    }
    account_limits::get(dynamo, table, account_id)
        .await?
        .ok_or(OpsError::AccountGone)
}

/// Sends `write`, which creates the account itself and one of each of `what` in it, with the
/// counts' `take` (the account's first count: nothing to read before it).
pub async fn create_counted_with_account(
    state: &AccountOps<'_>,
    account_id: &AccountId,
    what: &[Counted],
    write: Write,
) -> Result<(), OpsError> {
    let defaults = &state.config.account_limits;
    let take = account_limits::take(state.table(), account_id, what, defaults)?;
    match send_resolving_conflicts(state.dynamo(), Write::all([write, take])?).await? {
        Written::Applied(_) => Ok(()),
        _ => Err(OpsError::Conflict(
            "the account was created concurrently; retry the request".into(),
        )),
    }
}

/// Sends `write` (which creates one of each of `what` in `account_id`) with the counts' `take`
/// and the account's [`account::live_check`] in its transaction. Refused at a limit: `409
/// limit-reached` naming it; in an account that is gone or being deleted: `404`
/// ([`OpsError::AccountGone`]); refused otherwise (an item created concurrently): `409 conflict`.
pub async fn create_counted(
    state: &AccountOps<'_>,
    account_id: &AccountId,
    what: &[Counted],
    write: Write,
) -> Result<(), OpsError> {
    usage(state, account_id).await?;
    let (dynamo, table) = (state.dynamo(), state.table());
    let defaults = &state.config.account_limits;
    let take = account_limits::take(table, account_id, what, defaults)?;
    let live = account::live_check(table, account_id)?;
    match send_resolving_conflicts(dynamo, Write::all([write, take, live])?).await? {
        Written::Applied(_) => Ok(()),
        _ => {
            if !account::is_live(dynamo, table, account_id).await? {
                return Err(OpsError::AccountGone);
            }
            let now = usage(state, account_id).await?;
            match now.reached(what, defaults) {
                Some((limit, value)) => Err(OpsError::LimitReached { limit, value }),
                None => Err(OpsError::Conflict(
                    "the resource was created or changed concurrently; retry the request".into(),
                )),
            }
        }
    }
}

/// Sends `write` (which deletes or revokes one of each of `what`, on the condition that it
/// exists) with the counts' `give_back` in its transaction; refused: `404` naming `kind`.
pub async fn remove_counted(
    state: &AccountOps<'_>,
    account_id: &AccountId,
    what: &[Counted],
    write: Write,
    kind: &'static str,
) -> Result<(), OpsError> {
    if removed_counted(state, account_id, what, write).await? {
        Ok(())
    } else {
        Err(OpsError::NotFound(kind))
    }
}

/// [`remove_counted`] that answers whether the write was applied (`false`: its condition
/// refused it, nothing changed).
pub async fn removed_counted(
    state: &AccountOps<'_>,
    account_id: &AccountId,
    what: &[Counted],
    write: Write,
) -> Result<bool, OpsError> {
    usage(state, account_id).await?;
    let give_back = account_limits::give_back(state.table(), account_id, what)?;
    Ok(
        send_resolving_conflicts(state.dynamo(), Write::all([write, give_back])?)
            .await?
            .applied(),
    )
}
