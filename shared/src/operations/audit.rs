//! The audit history of operator actions: who, what, when and why.
//!
//! | item  | pk                 | sk                            | listing (`list_key` / `list_sort`)      |
//! |-------|--------------------|-------------------------------|-----------------------------------------|
//! | audit | `AUDIT#{account}`  | `AT#{millis:015}#{audit id}`  | `AUDIT#{account}#{subscription}` / time |
//!
//! The account's partition lists its history newest first; the sparse `listing` index lists one
//! subscription's. Entries are never changed or expired. An action that is one write (a retry, a
//! resume, the creation of a replay job) is written in one transaction with its audit entry, so
//! history never shows an action that did not happen, nor misses one that did.

use super::{decode_list_cursor, encode_list_cursor, Ops, OpsError};
use crate::domain::time::Timestamp;
use crate::store::expr::s;
use crate::store::keys::time_sort;
use crate::store::{from_item, to_item, Item};
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

pub const AUDIT_KIND: &str = "audit";
const AUDIT_SK_PREFIX: &str = "AT#";

pub fn audit_pk(account_id: &str) -> String {
    format!("AUDIT#{account_id}")
}
pub fn audit_sk(at: Timestamp, audit_id: &str) -> String {
    format!("{AUDIT_SK_PREFIX}{}", time_sort(at, audit_id))
}
pub fn audit_list_key(account_id: &str, subscription_id: &str) -> String {
    format!("AUDIT#{account_id}#{subscription_id}")
}

/// What an operator did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    /// Restarted one delivery.
    RetryDelivery,
    /// Started a window replay job.
    ReplayWindow,
    /// Resumed a replay job that had stopped.
    ResumeReplay,
    /// Resumed a paused subscription.
    ResumeSubscription,
}

impl AuditAction {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::RetryDelivery => "retry_delivery",
            AuditAction::ReplayWindow => "replay_window",
            AuditAction::ResumeReplay => "resume_replay",
            AuditAction::ResumeSubscription => "resume_subscription",
        }
    }
}

/// One audit entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub audit_id: String,
    pub account_id: String,
    pub subscription_id: String,
    pub action: AuditAction,
    /// Who: the operator's identity (the JWT's `sub`, or the local operator id).
    pub operator: String,
    /// Why, in the operator's words.
    pub reason: String,
    /// When.
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// What exactly: e.g. the status a delivery was restarted from, the window replayed.
    #[serde(default)]
    pub details: BTreeMap<String, String>,
}

impl AuditRecord {
    pub fn new(
        action: AuditAction,
        account_id: &str,
        subscription_id: &str,
        operator: &str,
        reason: &str,
        at: Timestamp,
    ) -> Self {
        AuditRecord {
            audit_id: crate::api::extract::new_id(),
            account_id: account_id.to_owned(),
            subscription_id: subscription_id.to_owned(),
            action,
            operator: operator.to_owned(),
            reason: reason.to_owned(),
            at,
            change_id: None,
            delivery_id: None,
            job_id: None,
            details: BTreeMap::new(),
        }
    }

    pub fn detail(mut self, key: &str, value: impl ToString) -> Self {
        self.details.insert(key.to_owned(), value.to_string());
        self
    }

    pub fn item(&self) -> Result<Item, OpsError> {
        let mut item = to_item(
            self,
            &audit_pk(&self.account_id),
            &audit_sk(self.at, &self.audit_id),
            AUDIT_KIND,
        )?;
        item.insert(
            "list_key".into(),
            s(audit_list_key(&self.account_id, &self.subscription_id)),
        );
        item.insert("list_sort".into(), s(time_sort(self.at, &self.audit_id)));
        Ok(item)
    }

    /// The entry as one write of a transaction (never overwriting another entry).
    pub fn put(&self, table: &str) -> Result<TransactWriteItem, OpsError> {
        let put = Put::builder()
            .table_name(table)
            .set_item(Some(self.item()?))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(|e| OpsError::Store(crate::store::StoreError::Dynamo(e.to_string())))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }
}

/// Writes `action` (an update) and its audit entry in one transaction. `Ok(false)` when the
/// action's condition failed (nothing was written).
pub async fn write_with_audit(
    ops: &Ops<'_>,
    action: aws_sdk_dynamodb::types::Update,
    audit: &AuditRecord,
) -> Result<bool, OpsError> {
    write_all_with_audit(
        ops,
        vec![TransactWriteItem::builder().update(action).build()],
        audit,
    )
    .await
}

/// Writes `writes` and the audit entry in one transaction; `Ok(false)` when a condition failed.
pub async fn write_all_with_audit(
    ops: &Ops<'_>,
    mut writes: Vec<TransactWriteItem>,
    audit: &AuditRecord,
) -> Result<bool, OpsError> {
    writes.push(audit.put(ops.table)?);
    match ops
        .dynamo
        .transact_write_items()
        .set_transact_items(Some(writes))
        .send()
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if crate::store::expr::is_condition_failure(&e) => Ok(false),
        Err(e) => Err(OpsError::dynamo(e)),
    }
}

/// Whose history to list.
#[derive(Debug, Clone, Copy)]
pub enum AuditScope<'a> {
    Account(&'a str),
    Subscription {
        account_id: &'a str,
        subscription_id: &'a str,
    },
}

/// One page of audit entries, newest first, and the cursor of the next page.
pub async fn list(
    ops: &Ops<'_>,
    scope: AuditScope<'_>,
    limit: u32,
    cursor: Option<&str>,
) -> Result<(Vec<AuditRecord>, Option<String>), OpsError> {
    let before = match cursor {
        None => None,
        Some(c) => Some(
            decode_list_cursor(c)
                .filter(|p| p.len() > 16 && p.as_bytes()[..15].iter().all(u8::is_ascii_digit))
                .ok_or_else(|| OpsError::invalid("cursor", "is not a cursor of this list"))?,
        ),
    };
    let (index, key_name, sort_name, key, sort_prefix) = match scope {
        AuditScope::Account(account_id) => {
            (None, "pk", "sk", audit_pk(account_id), AUDIT_SK_PREFIX)
        }
        AuditScope::Subscription {
            account_id,
            subscription_id,
        } => (
            Some("listing"),
            "list_key",
            "list_sort",
            audit_list_key(account_id, subscription_id),
            "",
        ),
    };
    let mut values = HashMap::from([(":k".to_string(), s(&key))]);
    let mut names = HashMap::from([("#k".to_string(), key_name.to_string())]);
    let mut condition = "#k = :k".to_string();
    match &before {
        Some(position) => {
            values.insert(":before".into(), s(format!("{sort_prefix}{position}")));
            names.insert("#s".into(), sort_name.into());
            condition.push_str(" AND #s < :before");
        }
        None if !sort_prefix.is_empty() => {
            values.insert(":p".into(), s(sort_prefix));
            names.insert("#s".into(), sort_name.into());
            condition.push_str(" AND begins_with(#s, :p)");
        }
        None => {}
    }
    let out = ops
        .dynamo
        .query()
        .table_name(ops.table)
        .set_index_name(index.map(str::to_owned))
        .key_condition_expression(condition)
        .set_expression_attribute_names(Some(names))
        .set_expression_attribute_values(Some(values))
        .scan_index_forward(false)
        .limit(limit as i32)
        .send()
        .await
        .map_err(OpsError::dynamo)?;
    let mut items = out.items.unwrap_or_default();
    if index.is_some() {
        // The listing index holds keys only: read the records themselves.
        items = crate::store::read::items_in_order(ops.dynamo, ops.table, &items).await?;
    }
    let records = items
        .into_iter()
        .map(from_item)
        .collect::<Result<Vec<AuditRecord>, _>>()?;
    let next = match (out.last_evaluated_key, records.last()) {
        (Some(_), Some(last)) => Some(encode_list_cursor(&time_sort(last.at, &last.audit_id))),
        _ => None,
    };
    Ok((records, next))
}
