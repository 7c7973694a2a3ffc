//! The integration item: an installed adapter of an account, in the account's partition. Its
//! signing secret is stored here and never leaves through the API after creation.

use super::page::{self, PrefixPage};
use super::read;
use super::update::{delete_existing, Edit};
use super::write::put_new;
use super::write::Write;
use super::{keys, to_item, Item, StoreError};
use crate::domain::delivery_method::DeliveryMethod;
use crate::domain::time::Timestamp;
use serde::{Deserialize, Serialize};

/// The `kind` of an integration item.
pub const KIND: &str = "integration";

/// An installed adapter of an account.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Integration {
    pub account_id: String,
    pub integration_id: String,
    pub name: String,
    pub method: DeliveryMethod,
    /// `webhook`: where changes are POSTed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// `webhook`: the Standard Webhooks signing secret (`whsec_…`). Never logged or returned
    /// after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// `internal`: the built-in handler's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<String>,
    /// Consent: the account accepted that this integration receives its events.
    pub event_access_accepted: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The key of an integration.
pub fn key(account_id: &str, integration_id: &str) -> (String, String) {
    (
        keys::account_pk(account_id),
        keys::integration_sk(integration_id),
    )
}

impl Integration {
    pub fn key(&self) -> (String, String) {
        key(&self.account_id, &self.integration_id)
    }

    pub fn item(&self) -> Result<Item, StoreError> {
        let (pk, sk) = self.key();
        to_item(self, &pk, &sk, KIND)
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        super::from_item(item)
    }
}

/// A consistent read of an integration.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &str,
    integration_id: &str,
) -> Result<Option<Integration>, StoreError> {
    let (pk, sk) = key(account_id, integration_id);
    read::get(dynamo, table, &pk, &sk)
        .await?
        .map(Integration::from_item)
        .transpose()
}

/// One page of the account's integrations in id order, and the id to continue after.
pub async fn list(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &str,
    limit: u32,
    after_id: Option<&str>,
) -> Result<(Vec<Integration>, Option<String>), StoreError> {
    let pk = keys::account_pk(account_id);
    page::read(
        dynamo,
        &PrefixPage {
            table,
            pk: &pk,
            prefix: keys::INTEGRATION_PREFIX,
            limit,
            after_id,
            filter: None,
        },
    )
    .await
}

/// Creates the integration unless its id is taken.
pub fn create(table: &str, integration: &Integration) -> Result<Write, StoreError> {
    put_new(table, integration.item()?)
}

/// Applies `edit` to the integration if it exists, answering with the integration as it is now.
pub fn edit(
    table: &str,
    account_id: &str,
    integration_id: &str,
    edit: Edit,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id, integration_id);
    edit.of_existing(table, &pk, &sk)
}

/// Deletes the integration; refused when there is none.
pub fn delete(table: &str, account_id: &str, integration_id: &str) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id, integration_id);
    delete_existing(table, &pk, &sk)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn integration() -> Integration {
        Integration {
            account_id: "a1".into(),
            integration_id: "i1".into(),
            name: "Hook".into(),
            method: DeliveryMethod::Webhook,
            webhook_url: Some("https://example.test/h".into()),
            signing_secret: Some("whsec_x".into()),
            handler: None,
            event_access_accepted: true,
            created_at: Timestamp(1),
            updated_at: Timestamp(1),
        }
    }

    #[test]
    fn an_integration_is_created_once_in_its_account_partition() {
        let Write::Put(p) = create("t", &integration()).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.condition_expression(), Some("attribute_not_exists(pk)"));
        assert_eq!(p.item()["pk"].as_s().unwrap(), "ACCT#a1");
        assert_eq!(p.item()["sk"].as_s().unwrap(), "INTEG#i1");
        assert_eq!(p.item()["kind"].as_s().unwrap(), KIND);
        assert!(!p.item().contains_key("handler"));
    }

    #[test]
    fn an_edit_or_a_delete_needs_the_integration_to_exist() {
        let Write::UpdateReturningNew(u) =
            edit("t", "a1", "i1", Edit::new().set("name", &"n").unwrap()).unwrap()
        else {
            panic!("not an update returning the item")
        };
        assert_eq!(u.key()["sk"].as_s().unwrap(), "INTEG#i1");
        assert_eq!(u.condition_expression(), Some("attribute_exists(pk)"));
        let Write::Delete(d) = delete("t", "a1", "i1").unwrap() else {
            panic!("not a delete")
        };
        assert_eq!(d.key()["pk"].as_s().unwrap(), "ACCT#a1");
        assert_eq!(d.key()["sk"].as_s().unwrap(), "INTEG#i1");
        assert_eq!(d.condition_expression(), Some("attribute_exists(pk)"));
    }
}
