//! The audit entry item: who did what, when and why, for every operator action and every change
//! an account's administrator makes to its integrations, subscriptions and tokens (and the test
//! events it sends). For a tenant's change, who is the credential it acted with (`token …`, or
//! the console session's `token …` / `link from operator …`).
//!
//! | item  | pk                 | sk                            | listing (`list_key` / `list_sort`)      |
//! |-------|--------------------|-------------------------------|-----------------------------------------|
//! | audit | `AUDIT#{account}`  | `AT#{millis:015}#{audit id}`  | `AUDIT#{account}#{subscription}` / time |
//!
//! The account's partition lists its history newest first; the sparse `listing` index lists one
//! subscription's. Entries are never changed or expired.
//!
//! Entries cannot be replaced unseen. Every write of one is conditional on its key being free
//! (in a transaction too), so the code never overwrites one; and each history (an account's, or
//! the catalog's) is a hash chain ([`crate::store::chain`]): each entry holds its number, its
//! own hash and the hash of the entry before it, and the history's head item (`CHAIN_HEAD` in
//! the same partition) the last number and hash, moved in the same transaction as the entry.
//! [`verify`] walks a history and names the first entry that was replaced or removed outside
//! the code (`rhythm audit verify`, through `GET /operator/accounts/{account}/audit/verify`).

use super::attrs::listing;
use super::chain;
use super::expr::{s, Expr};
use super::keys::time_sort;
use super::read::{self, Query};
use super::write::put_new;
use super::write::Write;
use super::{from_item, to_item, Item, StoreError};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, AuditId, ChangeId, DeliveryId, ReplayJobId, SubscriptionId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `kind` of an audit item.
pub const KIND: &str = "audit";
use super::keys::AUDIT_SK_PREFIX as SK_PREFIX;
pub use super::keys::{audit_list_key, audit_pk, audit_sk};

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
    /// Started a recovery job: a subscription's dead and failed (or the named) deliveries since
    /// an instant restarted (`since` and `statuses` in the details).
    RecoverSubscription,
    /// Resumed a paused subscription.
    ResumeSubscription,
    /// Created an account (and its first account token).
    CreateAccount,
    /// Issued an account token (and, when asked, revoked the others).
    IssueAccountToken,
    /// Replaced the account's notice allowlist (whom its notices may reach).
    SetNoticeAllowlist,
    /// Issued a web console login link for the account's administrator.
    IssueConsoleLink,
    /// Sent a test event to a subscription's webhook endpoint (an account administrator, or an
    /// operator acting as one); the details hold the outcome.
    SendTestEvent,
    /// Deleted an account: its tokens revoked, its subscriptions and integrations deleted (the
    /// details count them). Its audit history stays.
    DeleteAccount,
    /// Signed in to the web console as the account's administrator; the details say with which
    /// credential (an account token, or a login link and who issued it) and until when.
    ConsoleSignIn,
    /// Set or cleared one account's own limits (integrations, subscriptions, live tokens).
    SetAccountLimits,
    /// Created an integration (its method and target in the details).
    CreateIntegration,
    /// Edited an integration: its name, consent, webhook URL or handler (old and new in the
    /// details), or rotated its signing secret.
    EditIntegration,
    /// Deleted an integration (its tokens are revoked, each with its own entry).
    DeleteIntegration,
    /// Issued an integration token.
    IssueIntegrationToken,
    /// Revoked a token (account or integration; why in the reason).
    RevokeToken,
    /// Created a subscription.
    CreateSubscription,
    /// Edited a subscription's record types, filter, fields or retry policy.
    EditSubscription,
    /// Deleted a subscription.
    DeleteSubscription,
    /// Created or changed a type of the event-type catalog (its version in the details). In the
    /// catalog's own history ([`CATALOG_HISTORY`]), as the catalog belongs to no account.
    PutEventType,
    /// Issued a publish token (one that publishes changes for the account, nothing else).
    IssuePublishToken,
    /// Published changes into the account as an operator (how many, and their ids, in the
    /// details).
    PublishChanges,
}

impl AuditAction {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::RetryDelivery => "retry_delivery",
            AuditAction::ReplayWindow => "replay_window",
            AuditAction::ResumeReplay => "resume_replay",
            AuditAction::RecoverSubscription => "recover_subscription",
            AuditAction::ResumeSubscription => "resume_subscription",
            AuditAction::CreateAccount => "create_account",
            AuditAction::IssueAccountToken => "issue_account_token",
            AuditAction::SetNoticeAllowlist => "set_notice_allowlist",
            AuditAction::IssueConsoleLink => "issue_console_link",
            AuditAction::SendTestEvent => "send_test_event",
            AuditAction::DeleteAccount => "delete_account",
            AuditAction::ConsoleSignIn => "console_sign_in",
            AuditAction::SetAccountLimits => "set_account_limits",
            AuditAction::CreateIntegration => "create_integration",
            AuditAction::EditIntegration => "edit_integration",
            AuditAction::DeleteIntegration => "delete_integration",
            AuditAction::IssueIntegrationToken => "issue_integration_token",
            AuditAction::RevokeToken => "revoke_token",
            AuditAction::CreateSubscription => "create_subscription",
            AuditAction::EditSubscription => "edit_subscription",
            AuditAction::DeleteSubscription => "delete_subscription",
            AuditAction::PutEventType => "put_event_type",
            AuditAction::IssuePublishToken => "issue_publish_token",
            AuditAction::PublishChanges => "publish_changes",
        }
    }
}

/// The history the event-type catalog's changes are written to: an audit partition like an
/// account's, under an id no account has (accounts get ULIDs, never a leading `_`), so the
/// entries are append-only like every other and operators read them with the account history
/// route (`/operator/accounts/_catalog/audit`).
pub(crate) const CATALOG_HISTORY: &str = "_catalog";

/// One audit entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub audit_id: AuditId,
    pub account_id: AccountId,
    /// The subscription acted on; `None` for account-level actions (account creation, token
    /// issuance), which are in the account's history only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<SubscriptionId>,
    pub action: AuditAction,
    /// Who: the operator's identity (the JWT's `sub`, or the local operator id).
    pub operator: String,
    /// Why, in the operator's words.
    pub reason: String,
    /// When.
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_id: Option<ChangeId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<DeliveryId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<ReplayJobId>,
    /// What exactly: e.g. the status a delivery was restarted from, the window replayed.
    #[serde(default)]
    pub details: BTreeMap<String, String>,
}

impl AuditRecord {
    pub fn new(
        action: AuditAction,
        account_id: &AccountId,
        subscription_id: &SubscriptionId,
        operator: &str,
        reason: &str,
        at: Timestamp,
    ) -> Self {
        Self::entry(
            action,
            account_id,
            Some(subscription_id),
            operator,
            reason,
            at,
        )
    }

    /// An account-level entry (no subscription).
    pub fn for_account(
        action: AuditAction,
        account_id: &AccountId,
        operator: &str,
        reason: &str,
        at: Timestamp,
    ) -> Self {
        Self::entry(action, account_id, None, operator, reason, at)
    }

    /// An entry of the catalog's history ([`CATALOG_HISTORY`]).
    pub(crate) fn for_catalog(
        action: AuditAction,
        operator: &str,
        reason: &str,
        at: Timestamp,
    ) -> Self {
        let history = AccountId::from_stored(CATALOG_HISTORY);
        Self::entry(action, &history, None, operator, reason, at)
    }

    fn entry(
        action: AuditAction,
        account_id: &AccountId,
        subscription_id: Option<&SubscriptionId>,
        operator: &str,
        reason: &str,
        at: Timestamp,
    ) -> Self {
        AuditRecord {
            audit_id: AuditId::new(),
            account_id: account_id.clone(),
            subscription_id: subscription_id.cloned(),
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

    /// The item, in the account's partition and, for a subscription's entry, on the
    /// subscription's `listing`.
    pub fn item(&self) -> Result<Item, StoreError> {
        let mut item = to_item(
            self,
            &audit_pk(&self.account_id),
            &audit_sk(self.at, &self.audit_id),
            KIND,
        )?;
        if let Some(subscription_id) = &self.subscription_id {
            item.insert(
                listing::KEY.into(),
                s(audit_list_key(&self.account_id, subscription_id)),
            );
            item.insert(listing::SORT.into(), s(self.position()));
        }
        Ok(item)
    }

    /// Where the entry sits in its history (newest last): what a list continues before.
    pub fn position(&self) -> String {
        time_sort(self.at, self.audit_id.as_str())
    }
}

/// Records the entry (never overwriting another one), chained after its history's last entry
/// when it is sent ([`crate::store::chain`]: the send reads the head and moves it in the same
/// transaction). An action that is one write is sent in one transaction with it, so history
/// never shows an action that did not happen, nor misses one that did.
pub fn create(table: &str, record: &AuditRecord) -> Result<Write, StoreError> {
    put_new(table, chain::pending(record.item()?))
}

/// Every item of `account_id`'s history (its entries and its head), as stored: a consistent
/// read of its whole partition, for [`verify`] (an operator's check, not a listing).
async fn history(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
) -> Result<Vec<Item>, StoreError> {
    let q = Query {
        table: table.to_owned(),
        key_condition: "pk = :pk".into(),
        expr: Expr::new().value(":pk", s(audit_pk(account_id))),
        ..Query::default()
    };
    read::query_all(dynamo, &q).await
}

/// The walk of `account_id`'s history (or the catalog's, [`CATALOG_HISTORY`]) in the order its
/// entries were written: how many are on the chain, and the first that was replaced or removed.
/// `anchor`: a head recorded at an earlier walk, which the entry of its number must still have.
pub async fn verify(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    anchor: Option<&chain::Head>,
) -> Result<chain::Verdict, StoreError> {
    Ok(chain::verify(
        &history(dynamo, table, account_id).await?,
        anchor,
    ))
}

/// The position and audit id an entry's sort key holds (`None`: not an entry's key).
pub(crate) fn entry_of_sk(sk: &str) -> Option<(String, String)> {
    let position = sk.strip_prefix(SK_PREFIX)?;
    let (_, id) = position.split_once('#')?;
    Some((position.to_owned(), id.to_owned()))
}

/// Whose history to list.
#[derive(Debug, Clone, Copy)]
pub enum AuditScope<'a> {
    Account(&'a AccountId),
    Subscription {
        account_id: &'a AccountId,
        subscription_id: &'a SubscriptionId,
    },
}

/// Whether `position` could be one of an entry's ([`AuditRecord::position`]).
pub(crate) fn is_position(position: &str) -> bool {
    crate::store::keys::is_time_sort(position)
}

/// The query of a page of `scope`'s history, newest first, before `position` if given.
pub(crate) fn list_query(
    table: &str,
    scope: AuditScope<'_>,
    limit: u32,
    before: Option<&str>,
) -> Query {
    let (index, key_name, sort_name, key, sort_prefix) = match scope {
        AuditScope::Account(account_id) => (None, "pk", "sk", audit_pk(account_id), SK_PREFIX),
        AuditScope::Subscription {
            account_id,
            subscription_id,
        } => (
            Some(listing::INDEX.to_string()),
            listing::KEY,
            listing::SORT,
            audit_list_key(account_id, subscription_id),
            "",
        ),
    };
    let mut expr = Expr::new().value(":k", s(&key)).name("#k", key_name);
    let mut condition = "#k = :k".to_string();
    match before {
        Some(position) => {
            expr = expr
                .value(":before", s(format!("{sort_prefix}{position}")))
                .name("#s", sort_name);
            condition.push_str(" AND #s < :before");
        }
        None if !sort_prefix.is_empty() => {
            expr = expr.value(":p", s(sort_prefix)).name("#s", sort_name);
            condition.push_str(" AND begins_with(#s, :p)");
        }
        None => {}
    }
    Query {
        table: table.to_owned(),
        index,
        key_condition: condition,
        expr,
        limit: Some(limit as i32),
        backwards: true,
        eventual: true,
        ..Query::default()
    }
}

/// One page of `scope`'s history, newest first, and the position to continue before (`None`
/// on the last page).
pub async fn list(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    scope: AuditScope<'_>,
    limit: u32,
    before: Option<&str>,
) -> Result<(Vec<AuditRecord>, Option<String>), StoreError> {
    let q = list_query(table, scope, limit, before);
    let page = read::query_page(dynamo, &q).await?;
    let mut items = page.items;
    if q.index.is_some() {
        // The listing index holds keys only: read the entries themselves.
        items = read::items_in_order(dynamo, table, &items).await?;
    }
    let records = items
        .into_iter()
        .map(from_item)
        .collect::<Result<Vec<AuditRecord>, _>>()?;
    let next = match (page.next, records.last()) {
        (Some(_), Some(last)) => Some(last.position()),
        _ => None,
    };
    Ok((records, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    fn record() -> AuditRecord {
        let mut r = AuditRecord::new(
            AuditAction::RetryDelivery,
            &id("a1"),
            &id("s1"),
            "ops",
            "customer asked",
            Timestamp(1_700),
        )
        .detail("from_status", "dead");
        r.audit_id = "01aud".parse().unwrap();
        r
    }

    #[test]
    fn an_entry_is_written_once_in_its_account_and_on_its_subscription_listing() {
        let Write::Put(p) = create("t", &record()).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.condition_expression(), Some("attribute_not_exists(pk)"));
        assert!(chain::is_pending_put(&p), "chained when sent");
        let item = p.item();
        assert_eq!(item["pk"].as_s().unwrap(), "AUDIT#a1");
        assert_eq!(item["sk"].as_s().unwrap(), "AT#000000000001700#01aud");
        assert_eq!(item[listing::KEY].as_s().unwrap(), "AUDIT#a1#s1");
        assert_eq!(item[listing::SORT].as_s().unwrap(), "000000000001700#01aud");
        assert_eq!(item["kind"].as_s().unwrap(), KIND);
        assert!(is_position(&record().position()));
        assert_eq!(
            entry_of_sk(&audit_sk(Timestamp(1_700), &record().audit_id)),
            Some((record().position(), "01aud".to_string()))
        );
        assert_eq!(entry_of_sk(chain::CHAIN_HEAD_SK), None);
        assert!(!is_position("01aud"));
    }

    #[test]
    fn an_account_history_reads_its_partition_newest_first_before_a_position() {
        let q = list_query(
            "t",
            AuditScope::Account(&id("a1")),
            10,
            Some("000000000001700#01aud"),
        );
        assert!(q.index.is_none());
        assert!(q.backwards && q.eventual);
        assert_eq!(q.key_condition, "#k = :k AND #s < :before");
        assert_eq!(q.expr.names["#s"], "sk");
        assert_eq!(q.expr.values[":before"], s("AT#000000000001700#01aud"));
        let first = list_query("t", AuditScope::Account(&id("a1")), 10, None);
        assert_eq!(first.key_condition, "#k = :k AND begins_with(#s, :p)");
    }

    #[test]
    fn a_subscription_history_reads_the_listing_index() {
        let scope = AuditScope::Subscription {
            account_id: &id("a1"),
            subscription_id: &id("s1"),
        };
        let q = list_query("t", scope, 5, None);
        assert_eq!(q.index.as_deref(), Some(listing::INDEX));
        assert_eq!(q.key_condition, "#k = :k");
        assert_eq!(q.expr.names["#k"], listing::KEY);
        assert_eq!(q.expr.values[":k"], s("AUDIT#a1#s1"));
        let before = list_query("t", scope, 5, Some("000000000001700#01aud"));
        assert_eq!(before.expr.values[":before"], s("000000000001700#01aud"));
    }
}
