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
use crate::domain::input::{FieldErrors, Patch};
use crate::ids::AccountId;
use crate::operations::OpsError;
use crate::store::account;
use crate::store::account_config;
use crate::store::account_limits::{self, Counted, Usage};
use crate::store::audit::{AuditAction, AuditRecord};
use crate::store::token;
use crate::store::write::{send_resolving_conflicts, Write, Written};
use std::ops::RangeInclusive;

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
pub(crate) async fn create_counted_with_account(
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
pub(crate) async fn create_counted(
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
pub(crate) async fn remove_counted(
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
pub(crate) async fn removed_counted(
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

/// The highest cap an operator may set (the template's parameters' maximum).
pub(crate) const MAX_LIMIT: u32 = 100_000;
/// The requests a second an account's own rate may be set to.
pub const RATE_RANGE: std::ops::RangeInclusive<u32> = 1..=100_000;
/// The field of the account's request rate.
pub const RATE: &str = "requests_per_second";

/// An operator's change of one account's own limits: each cap and the request rate set
/// (`Set`), put back to the deployment's default (`Null`) or left (`Absent`), and why.
#[derive(Debug, Clone, Default)]
pub(crate) struct LimitChanges {
    pub caps: Vec<(Counted, Patch<u32>)>,
    pub requests_per_second: Patch<u32>,
    pub reason: String,
}

impl LimitChanges {
    /// Each change with its field, its stored attribute and the range it must be in.
    fn each(
        &self,
    ) -> impl Iterator<Item = (&'static str, &'static str, RangeInclusive<u32>, &Patch<u32>)> {
        let caps = self
            .caps
            .iter()
            .map(|(w, v)| (w.as_str(), w.own_limit_attribute(), 0..=MAX_LIMIT, v));
        let rate = (
            RATE,
            account_limits::OWN_RATE_ATTRIBUTE,
            RATE_RANGE,
            &self.requests_per_second,
        );
        caps.chain([rate])
    }

    /// Every value out of its range, and a change that names nothing.
    pub fn check(&self) -> Result<(), FieldErrors> {
        let mut errors = FieldErrors::default();
        for (field, _, range, v) in self.each() {
            if let Patch::Set(v) = v {
                if !range.contains(v) {
                    let (low, high) = (range.start(), range.end());
                    let message = format!(
                        "must be a whole number from {low} to {high}, or null for the default"
                    );
                    errors.add(field, message);
                }
            }
        }
        if errors.is_empty() && self.each().all(|(.., v)| v.is_absent()) {
            errors.add(
                "integrations",
                "name at least one of integrations, subscriptions, live_tokens, requests_per_second",
            );
        }
        errors.or_value(|| Some(()))
    }
}

/// Sets the account's own limits on behalf of `operator`, audited (`set_account_limits`, the
/// old and new values) in one transaction with the change; the account must be live. Lowering
/// a limit below what the account has refuses new items only. Returns the usage as it is now.
pub(crate) async fn set_limits(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    operator: &str,
    changes: &LimitChanges,
) -> Result<Usage, OpsError> {
    changes.check()?;
    if !account::is_live(ops.dynamo(), ops.table(), account_id).await? {
        return Err(OpsError::AccountGone);
    }
    let before = usage(ops, account_id).await?;
    let describe = |v: Option<u32>| v.map_or_else(|| "default".to_string(), |v| v.to_string());
    let mut entry = AuditRecord::for_account(
        AuditAction::SetAccountLimits,
        account_id,
        operator,
        &changes.reason,
        ops.now(),
    );
    let mut set = Vec::new();
    for (field, attribute, _, v) in changes.each() {
        let v = match v {
            Patch::Absent => continue,
            Patch::Null => None,
            Patch::Set(v) => Some(*v),
        };
        let was = match Counted::ALL.into_iter().find(|w| w.as_str() == field) {
            Some(w) => before.own_limit(w),
            None => before.max_requests_per_second,
        };
        entry = entry.detail(field, format!("{} -> {}", describe(was), describe(v)));
        set.push((attribute, v));
    }
    let table = ops.table();
    let write = Write::all([
        account_limits::set_own_limits(table, account_id, &set)?,
        crate::store::audit::create(table, &entry)?,
        account::live_check(table, account_id)?,
    ])?;
    if !send_resolving_conflicts(ops.dynamo(), write)
        .await?
        .applied()
    {
        if !account::is_live(ops.dynamo(), table, account_id).await? {
            return Err(OpsError::AccountGone);
        }
        return Err(OpsError::Conflict(
            "the limits were changed concurrently; retry the request".into(),
        ));
    }
    tracing::info!(%operator, %account_id, changes = set.len(), "account limits set");
    usage(ops, account_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_change_names_every_value_out_of_range_and_refuses_an_empty_change() {
        let empty = LimitChanges::default().check().unwrap_err();
        assert_eq!(empty.iter().next().unwrap().field, "integrations");
        let changes = LimitChanges {
            caps: vec![
                (Counted::Integrations, Patch::Set(MAX_LIMIT + 1)),
                (Counted::Subscriptions, Patch::Null),
            ],
            requests_per_second: Patch::Set(0),
            reason: String::new(),
        };
        let refused = changes.check().unwrap_err();
        let fields: Vec<_> = refused.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["integrations", RATE]);
        let fine = LimitChanges {
            caps: vec![(Counted::LiveTokens, Patch::Set(0))],
            ..LimitChanges::default()
        };
        assert!(fine.check().is_ok());
    }
}
