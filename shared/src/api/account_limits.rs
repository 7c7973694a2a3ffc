//! Each account's caps on integrations, subscriptions and live tokens (the items:
//! [`crate::store::account_limits`]): the writes that create a counted item go through
//! [`create_counted`], those that delete or revoke one through [`remove_counted`], so the counts
//! move in the same transaction as the items and a create past a limit is refused with
//! `409 limit-reached`, naming the limit and its value.
//!
//! An account whose items predate counting is counted once, by reading them, before its first
//! counted write ([`usage`]).

use super::problem::ApiError;
use super::state::ApiState;
use crate::ids::AccountId;
use crate::store::account_config;
use crate::store::account_limits::{self, Counted, Usage};
use crate::store::token;
use crate::store::write::{send_resolving_conflicts, Write, Written};

/// The account's usage, counting its items first if nothing has counted them yet.
pub async fn usage(state: &ApiState, account_id: &AccountId) -> Result<Usage, ApiError> {
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
    if send_resolving_conflicts(
        dynamo,
        account_limits::count_from(table, account_id, &counted)?,
    )
    .await?
    .applied()
    {
        return Ok(counted);
    }
    Ok(account_limits::get(dynamo, table, account_id)
        .await?
        .unwrap_or(counted))
}

/// Sends `write` (which creates one of each of `what` in `account_id`) with the counts' `take`
/// in its transaction. Refused at a limit: `409 limit-reached` naming it; refused otherwise
/// (an item created concurrently): `409 conflict`.
pub async fn create_counted(
    state: &ApiState,
    account_id: &AccountId,
    what: &[Counted],
    write: Write,
) -> Result<(), ApiError> {
    usage(state, account_id).await?;
    let defaults = &state.config.account_limits;
    let take = account_limits::take(state.table(), account_id, what, defaults)?;
    match send_resolving_conflicts(state.dynamo(), Write::all([write, take])?).await? {
        Written::Applied(_) => Ok(()),
        _ => {
            let now = usage(state, account_id).await?;
            match now.reached(what, defaults) {
                Some((limit, value)) => Err(ApiError::LimitReached { limit, value }),
                None => Err(ApiError::conflict(
                    "the resource was created or changed concurrently; retry the request",
                )),
            }
        }
    }
}

/// Sends `write` (which deletes or revokes one of each of `what`, on the condition that it
/// exists) with the counts' `give_back` in its transaction; refused: `404` naming `kind`.
pub async fn remove_counted(
    state: &ApiState,
    account_id: &AccountId,
    what: &[Counted],
    write: Write,
    kind: &str,
) -> Result<(), ApiError> {
    if removed_counted(state, account_id, what, write).await? {
        Ok(())
    } else {
        Err(ApiError::not_found(kind))
    }
}

/// [`remove_counted`] that answers whether the write was applied (`false`: its condition
/// refused it, nothing changed).
pub async fn removed_counted(
    state: &ApiState,
    account_id: &AccountId,
    what: &[Counted],
    write: Write,
) -> Result<bool, ApiError> {
    usage(state, account_id).await?;
    let give_back = account_limits::give_back(state.table(), account_id, what)?;
    Ok(
        send_resolving_conflicts(state.dynamo(), Write::all([write, give_back])?)
            .await?
            .applied(),
    )
}
