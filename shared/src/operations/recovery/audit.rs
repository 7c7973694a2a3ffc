//! The audit history of operator actions: who, what, when and why (the items:
//! [`crate::store::audit`]). An action that is one write (a retry, a resume, the creation of a
//! replay job) is written in one transaction with its audit entry, so history never shows an
//! action that did not happen, nor misses one that did.

use crate::operations::{Ops, OpsError};
use crate::store::audit::{self, AuditRecord, AuditScope};
use crate::store::cursor;
use crate::store::write::Write;

pub use crate::store::audit::AuditAction;

/// Writes `action` and the audit entry in one transaction; `Ok(false)` when the action's
/// condition failed (nothing was written). `None`: the entry alone.
pub(crate) async fn write_with_audit(
    ops: &Ops<'_>,
    action: Option<Write>,
    audit: &AuditRecord,
) -> Result<bool, OpsError> {
    let entry = audit::create(ops.table, audit)?;
    ops.apply(Write::all(action.into_iter().chain([entry]))?)
        .await
}

/// The walk of `account_id`'s history in the order it was written ([`audit::verify`]).
pub async fn verify(
    ops: &Ops<'_>,
    account_id: &crate::ids::AccountId,
    anchor: Option<&crate::store::chain::Head>,
) -> Result<crate::store::chain::Verdict, OpsError> {
    Ok(audit::verify(ops.dynamo, ops.table, account_id, anchor).await?)
}

/// One page of audit entries, newest first, and the cursor of the next page.
pub async fn list(
    ops: &Ops<'_>,
    scope: AuditScope<'_>,
    limit: u32,
    cursor: Option<&str>,
) -> Result<(Vec<AuditRecord>, Option<String>), OpsError> {
    let before = cursor
        .map(|c| {
            cursor::decode(c)
                .filter(|p| audit::is_position(p))
                .ok_or_else(OpsError::bad_cursor)
        })
        .transpose()?;
    let (records, next) =
        audit::list(ops.dynamo, ops.table, scope, limit, before.as_deref()).await?;
    Ok((records, next.as_deref().map(cursor::encode)))
}
