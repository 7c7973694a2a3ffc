//! The account item: a tenant of the owning application, at the head of its partition (beside
//! its integrations and subscriptions, so one query loads its configuration).

use super::read;
use super::write::put_new;
use super::write::Write;
use super::{keys, to_item, Item, StoreError};
use crate::domain::time::Timestamp;
use crate::ids::AccountId;
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
}

/// The key of an account.
pub fn key(account_id: &AccountId) -> (String, String) {
    (keys::account_pk(account_id), keys::ACCOUNT_SK.to_string())
}

impl Account {
    pub fn key(&self) -> (String, String) {
        key(&self.account_id)
    }

    pub fn item(&self) -> Result<Item, StoreError> {
        let (pk, sk) = self.key();
        to_item(self, &pk, &sk, KIND)
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        super::from_item(item)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_created_once_at_the_head_of_its_partition() {
        let account = Account {
            account_id: "a1".parse().unwrap(),
            name: "Acme".into(),
            admin_emails: vec!["ops@acme.test".into()],
            created_at: Timestamp(5),
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
        assert_eq!(Account::from_item(item.clone()).unwrap(), account);
    }
}
