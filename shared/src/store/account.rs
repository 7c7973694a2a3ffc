//! The account item: a tenant of the owning application, at the head of its partition (beside
//! its integrations and subscriptions, so one query loads its configuration). Every account is
//! on the `ACCOUNTS` listing (keys only, written when the account is created, or by ingest for an
//! account created before the listing existed): the roll-up walk learns from it whose event
//! listings to read.

use super::attrs::listing;
use super::expr::{s, Expr};
use super::read::{self, Query};
use super::update::{conditional_update, delete_existing, Edit};
use super::write::put_new;
use super::write::{built, Write};
use super::{keys, to_item, Item, StoreError};
use crate::domain::time::Timestamp;
use crate::ids::AccountId;
use aws_sdk_dynamodb::types::ConditionCheck;
use serde::{Deserialize, Serialize};

/// The `kind` of an account item.
pub const KIND: &str = "account";

/// A tenant of the owning application.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Account {
    pub account_id: AccountId,
    pub name: String,
    /// Who hears about the account's paused subscriptions.
    #[serde(default)]
    pub admin_emails: Vec<String>,
    pub created_at: Timestamp,
    /// Whom the account's notices may reach besides its administrators (set by operators).
    #[serde(default)]
    pub notice_allowlist: NoticeAllowlist,
    /// When an operator started deleting the account ([`begin_deletion`]): from then on nothing
    /// is created in it and its console sessions end, before its items go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<Timestamp>,
}

/// The attribute of [`Account::deleted_at`].
pub(crate) const DELETED_AT: &str = "deleted_at";

/// The recipients an operator allows an account's notices to reach, besides the account's own
/// administrators (`admin_emails`). Matching is in [`crate::notify::bounds`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct NoticeAllowlist {
    /// Email addresses, matched whole and without regard to case.
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Email domains: an address whose domain is one of these (exactly; subdomains are not
    /// included) is allowed.
    #[serde(default)]
    pub domains: Vec<String>,
    /// Slack workspaces (the team id `T…` of an incoming-webhook URL's path,
    /// `/services/{team}/{channel}/{secret}`): webhooks into these workspaces are allowed.
    #[serde(default)]
    pub slack_workspaces: Vec<String>,
}

/// The attribute the allowlist is stored in.
pub(crate) const NOTICE_ALLOWLIST: &str = "notice_allowlist";

/// The key of an account.
pub fn key(account_id: &AccountId) -> (String, String) {
    (keys::account_pk(account_id), keys::ACCOUNT_SK.to_string())
}

impl Account {
    /// A new account: no notices allowed beyond its administrators until an operator says so.
    pub fn new(
        account_id: AccountId,
        name: String,
        admin_emails: Vec<String>,
        now: Timestamp,
    ) -> Self {
        Account {
            account_id,
            name,
            admin_emails,
            created_at: now,
            notice_allowlist: NoticeAllowlist::default(),
            deleted_at: None,
        }
    }

    /// Not being deleted.
    pub(crate) fn is_live(&self) -> bool {
        self.deleted_at.is_none()
    }

    pub fn key(&self) -> (String, String) {
        key(&self.account_id)
    }

    pub fn item(&self) -> Result<Item, StoreError> {
        let (pk, sk) = self.key();
        let mut item = to_item(self, &pk, &sk, KIND)?;
        item.insert(listing::KEY.into(), s(ACCOUNTS_LIST_KEY));
        item.insert(listing::SORT.into(), s(&self.account_id));
        Ok(item)
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        super::from_item(item)
    }
}

/// The `listing` key every account is on (sorted by account id).
pub(crate) const ACCOUNTS_LIST_KEY: &str = "ACCOUNTS";

/// Whether an account item is on the `ACCOUNTS` listing. One created before the listing existed
/// is not, until [`enlist`] puts it there.
pub(crate) fn is_listed(item: &Item) -> bool {
    item.contains_key(listing::KEY)
}

/// Puts an existing account that is not on the `ACCOUNTS` listing on it (refused when it is
/// there already, or there is no such account). Ingest does it the first time it loads such an
/// account, before it writes any of the account's events, so the roll-up walk reads every event
/// listing: an account missing from the listing would have its open events never enrolled.
pub fn enlist(table: &str, account_id: &AccountId) -> Result<Write, StoreError> {
    let e = Expr::new()
        .name("#lk", listing::KEY)
        .name("#ls", listing::SORT)
        .value(":lk", s(ACCOUNTS_LIST_KEY))
        .value(":ls", s(account_id));
    conditional_update(
        table,
        key(account_id),
        "SET #lk = :lk, #ls = :ls".into(),
        "attribute_exists(pk) AND attribute_not_exists(#lk)".into(),
        &e,
    )
}

/// One page of the ids of every account (the `ACCOUNTS` listing), from `start`.
pub async fn ids_page(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    start: Option<Item>,
) -> Result<(Vec<AccountId>, Option<Item>), StoreError> {
    let page = read::query_page(
        dynamo,
        &Query {
            table: table.into(),
            index: Some(listing::INDEX.into()),
            key_condition: "#lk = :lk".into(),
            expr: Expr::new()
                .name("#lk", listing::KEY)
                .value(":lk", s(ACCOUNTS_LIST_KEY)),
            start,
            ..Default::default()
        },
    )
    .await?;
    let ids = page
        .items
        .iter()
        .filter_map(|i| i.get(listing::SORT)?.as_s().ok())
        .map(AccountId::from_stored)
        .collect();
    Ok((ids, page.next))
}

/// The `listing` index position of an account on the `ACCOUNTS` listing (where a page after it
/// starts).
fn listing_position(account_id: &AccountId) -> Item {
    let (pk, sk) = key(account_id);
    Item::from([
        (listing::KEY.to_string(), s(ACCOUNTS_LIST_KEY)),
        (listing::SORT.to_string(), s(account_id)),
        ("pk".to_string(), s(pk)),
        ("sk".to_string(), s(sk)),
    ])
}

/// Up to `limit` accounts of the `ACCOUNTS` listing (in id order) after `after`, read in full
/// (the listing holds keys only: one index query, then one batch read of the accounts), and
/// the id to continue after when the listing goes on.
pub async fn page_after(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    after: Option<&AccountId>,
    limit: i32,
) -> Result<(Vec<Account>, Option<AccountId>), StoreError> {
    let page = read::query_page(
        dynamo,
        &Query {
            table: table.into(),
            index: Some(listing::INDEX.into()),
            key_condition: "#lk = :lk".into(),
            expr: Expr::new()
                .name("#lk", listing::KEY)
                .value(":lk", s(ACCOUNTS_LIST_KEY)),
            start: after.map(listing_position),
            limit: Some(limit.max(1)),
            ..Default::default()
        },
    )
    .await?;
    let accounts = read::items_in_order(dynamo, table, &page.items)
        .await?
        .into_iter()
        .map(Account::from_item)
        .collect::<Result<Vec<_>, _>>()?;
    let next = page
        .next
        .as_ref()
        .and_then(|k| k.get(listing::SORT)?.as_s().ok())
        .map(AccountId::from_stored);
    Ok((accounts, next))
}

/// Every account id of the `ACCOUNTS` listing (keys only, thousands per index page).
pub(crate) async fn all_ids(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<Vec<AccountId>, StoreError> {
    let mut ids = Vec::new();
    let mut start = None;
    loop {
        let (page, next) = ids_page(dynamo, table, start).await?;
        ids.extend(page);
        match next {
            Some(n) => start = Some(n),
            None => return Ok(ids),
        }
    }
}

/// The names of the given accounts (one batch read per hundred; an id with no account is left
/// out).
pub async fn names(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    ids: &[AccountId],
) -> Result<std::collections::HashMap<AccountId, String>, StoreError> {
    let keys: Vec<Item> = ids.iter().map(listing_position).collect();
    read::items_in_order(dynamo, table, &keys)
        .await?
        .into_iter()
        .map(|i| Account::from_item(i).map(|a| (a.account_id, a.name)))
        .collect()
}

/// A consistent read of an account.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
) -> Result<Option<Account>, StoreError> {
    raw(dynamo, table, account_id)
        .await?
        .map(Account::from_item)
        .transpose()
}

/// Whether the account exists and is not being deleted (a consistent read).
pub(crate) async fn is_live(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
) -> Result<bool, StoreError> {
    Ok(raw(dynamo, table, account_id)
        .await?
        .is_some_and(|item| !item.contains_key(DELETED_AT)))
}

/// The condition, for the transaction of a write that creates something in the account, that
/// the account exists and is not being deleted: a create racing the account's deletion is
/// refused by storage, and the usage item is never brought back.
pub(crate) fn live_check(table: &str, account_id: &AccountId) -> Result<Write, StoreError> {
    let names = [("#deleted".to_string(), DELETED_AT.to_string())];
    check(
        table,
        account_id,
        "attribute_exists(pk) AND attribute_not_exists(#deleted)",
        Some(names.into()),
    )
}

/// The condition that the account item exists (being deleted or not): for the first count of
/// its usage, which its deletion's own revocations may need, and which must not bring the usage
/// item back once the account is gone.
pub(crate) fn exists_check(table: &str, account_id: &AccountId) -> Result<Write, StoreError> {
    check(table, account_id, "attribute_exists(pk)", None)
}

fn check(
    table: &str,
    account_id: &AccountId,
    condition: &str,
    names: Option<std::collections::HashMap<String, String>>,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id);
    Ok(Write::check(built(
        ConditionCheck::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .condition_expression(condition)
            .set_expression_attribute_names(names)
            .build(),
    )?))
}

/// Marks the account as being deleted (from `now`; a repeated deletion keeps the first time);
/// refused when there is no such account.
pub fn begin_deletion(
    table: &str,
    account_id: &AccountId,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let e = Expr::new().name("#deleted", DELETED_AT).value(
        ":now",
        serde_dynamo::to_attribute_value(now).map_err(|e| StoreError::Shape {
            key: DELETED_AT.into(),
            message: e.to_string(),
        })?,
    );
    conditional_update(
        table,
        key(account_id),
        "SET #deleted = if_not_exists(#deleted, :now)".into(),
        "attribute_exists(pk)".into(),
        &e,
    )
}

/// Whether the account exists (a consistent read; the item is not parsed).
pub async fn exists(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
) -> Result<bool, StoreError> {
    Ok(raw(dynamo, table, account_id).await?.is_some())
}

async fn raw(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
) -> Result<Option<Item>, StoreError> {
    let (pk, sk) = key(account_id);
    read::get(dynamo, table, &pk, &sk).await
}

/// Creates the account unless its id is taken.
pub fn create(table: &str, account: &Account) -> Result<Write, StoreError> {
    put_new(table, account.item()?)
}

/// Deletes the account item, and with it its entry on the `ACCOUNTS` listing (the item carries
/// the listing's keys); refused when there is no such account.
pub fn delete(table: &str, account_id: &AccountId) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id);
    delete_existing(table, &pk, &sk)
}

/// Replaces the account's notice allowlist (refused when there is no such account); it answers
/// with the account as it is after the write.
pub fn set_notice_allowlist(
    table: &str,
    account_id: &AccountId,
    allowlist: &NoticeAllowlist,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id);
    Edit::new()
        .set(NOTICE_ALLOWLIST, allowlist)?
        .of_existing(table, &pk, &sk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    #[test]
    fn an_account_is_created_once_at_the_head_of_its_partition_and_on_the_accounts_listing() {
        let account = Account {
            account_id: "a1".parse().unwrap(),
            name: "Acme".into(),
            admin_emails: vec!["ops@acme.test".into()],
            created_at: Timestamp(5),
            notice_allowlist: NoticeAllowlist::default(),
            deleted_at: None,
        };
        let Write::Put(p) = create("t", &account).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.table_name(), "t");
        assert_eq!(p.condition_expression(), Some("attribute_not_exists(pk)"));
        let item = p.item();
        assert_eq!(item["pk"].as_s().unwrap(), "ACCT#a1");
        assert_eq!(item["sk"].as_s().unwrap(), "ACCOUNT");
        assert_eq!(item["kind"].as_s().unwrap(), KIND);
        assert_eq!(item[listing::KEY].as_s().unwrap(), "ACCOUNTS");
        assert_eq!(item[listing::SORT].as_s().unwrap(), "a1");
        assert_eq!(Account::from_item(item.clone()).unwrap(), account);
    }

    #[test]
    fn an_unlisted_account_is_enlisted_under_its_id_only_if_it_exists_and_is_not_listed() {
        let u = crate::store::update::expect_update(enlist("t", &id("a1")).unwrap());
        assert_eq!(u.key()["pk"].as_s().unwrap(), "ACCT#a1");
        assert_eq!(u.key()["sk"].as_s().unwrap(), "ACCOUNT");
        assert_eq!(u.update_expression(), "SET #lk = :lk, #ls = :ls");
        assert_eq!(
            u.condition_expression(),
            Some("attribute_exists(pk) AND attribute_not_exists(#lk)")
        );
        let names = u.expression_attribute_names().unwrap();
        assert_eq!(
            (names["#lk"].as_str(), names["#ls"].as_str()),
            (listing::KEY, listing::SORT)
        );
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":lk"].as_s().unwrap(), "ACCOUNTS");
        assert_eq!(values[":ls"].as_s().unwrap(), "a1");
        let account = Account {
            account_id: id("a1"),
            name: "Acme".into(),
            admin_emails: vec![],
            created_at: Timestamp(5),
            notice_allowlist: NoticeAllowlist::default(),
            deleted_at: None,
        };
        let mut item = account.item().unwrap();
        assert!(is_listed(&item));
        item.remove(listing::KEY);
        assert!(!is_listed(&item));
    }

    #[test]
    fn an_account_is_deleted_at_the_head_of_its_partition_only_if_it_exists() {
        let Write::Delete(d) = delete("t", &id("a1")).unwrap() else {
            panic!("not a delete")
        };
        assert_eq!(d.key()["pk"].as_s().unwrap(), "ACCT#a1");
        assert_eq!(d.key()["sk"].as_s().unwrap(), "ACCOUNT");
        assert_eq!(d.condition_expression(), Some("attribute_exists(pk)"));
    }

    #[test]
    fn a_deletion_marks_the_account_first_and_creates_check_it_is_live() {
        let u = crate::store::update::expect_update(
            begin_deletion("t", &id("a1"), Timestamp(7)).unwrap(),
        );
        assert_eq!(u.key()["sk"].as_s().unwrap(), "ACCOUNT");
        assert_eq!(
            u.update_expression(),
            "SET #deleted = if_not_exists(#deleted, :now)"
        );
        assert_eq!(u.condition_expression(), Some("attribute_exists(pk)"));
        assert_eq!(
            u.expression_attribute_names().unwrap()["#deleted"],
            DELETED_AT
        );
        let condition = |w: Write| {
            let Write::All(items) = w else {
                panic!("not a transaction item")
            };
            let c = items[0].condition_check().unwrap().clone();
            assert_eq!(c.key()["pk"].as_s().unwrap(), "ACCT#a1");
            c.condition_expression().to_owned()
        };
        assert_eq!(
            condition(live_check("t", &id("a1")).unwrap()),
            "attribute_exists(pk) AND attribute_not_exists(#deleted)"
        );
        assert_eq!(
            condition(exists_check("t", &id("a1")).unwrap()),
            "attribute_exists(pk)"
        );
        let mut account = Account::new(id("a1"), "Acme".into(), vec![], Timestamp(5));
        assert!(account.is_live());
        account.deleted_at = Some(Timestamp(7));
        let back = Account::from_item(account.item().unwrap()).unwrap();
        assert!(!back.is_live());
    }

    #[test]
    fn the_notice_allowlist_is_set_on_an_existing_account_only() {
        let allowlist = NoticeAllowlist {
            addresses: vec!["pager@partner.test".into()],
            domains: vec!["acme.test".into()],
            slack_workspaces: vec!["T024".into()],
        };
        let Write::UpdateReturningNew(u) =
            set_notice_allowlist("t", &id("a1"), &allowlist).unwrap()
        else {
            panic!("not an update returning the account")
        };
        assert_eq!(u.key()["pk"].as_s().unwrap(), "ACCT#a1");
        assert_eq!(u.key()["sk"].as_s().unwrap(), "ACCOUNT");
        assert_eq!(u.condition_expression(), Some("attribute_exists(pk)"));
        assert_eq!(u.update_expression(), "SET #a0 = :v0");
        assert_eq!(
            u.expression_attribute_names().unwrap()["#a0"],
            NOTICE_ALLOWLIST
        );
        let stored: NoticeAllowlist = serde_dynamo::from_attribute_value(
            u.expression_attribute_values().unwrap()[":v0"].clone(),
        )
        .unwrap();
        assert_eq!(stored, allowlist);
    }

    #[test]
    fn an_account_stored_before_the_allowlist_existed_reads_with_an_empty_one() {
        let mut item = Account {
            account_id: "a1".parse().unwrap(),
            name: "Acme".into(),
            admin_emails: vec![],
            created_at: Timestamp(5),
            notice_allowlist: NoticeAllowlist::default(),
            deleted_at: None,
        }
        .item()
        .unwrap();
        item.remove(NOTICE_ALLOWLIST);
        assert_eq!(
            Account::from_item(item).unwrap().notice_allowlist,
            NoticeAllowlist::default()
        );
    }
}
