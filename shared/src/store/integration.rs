//! The integration item: an installed adapter of an account, in the account's partition. Its
//! signing secret is stored here and never leaves through the API after creation.

use super::page::{self, PrefixPage};
use super::read;
use super::update::{delete_existing, Edit};
use super::write::put_new;
use super::write::Write;
use super::{keys, to_item, Item, StoreError};
use crate::domain::delivery_method::DeliveryMethod;
use crate::domain::target::{Target, TargetParts, WebhookSecret};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId};
use serde::{Deserialize, Serialize};

/// The `kind` of an integration item.
pub const KIND: &str = "integration";

/// An installed adapter of an account. Stored flat (see [`StoredIntegration`]); its `Debug`
/// output never shows the signing secret.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(from = "StoredIntegration", into = "StoredIntegration")]
pub struct Integration {
    pub account_id: AccountId,
    pub integration_id: IntegrationId,
    pub name: String,
    /// Where deliveries go: the webhook's URL and Standard Webhooks signing secret (never
    /// logged or returned after creation), the built-in handler, or pull.
    pub target: Target,
    /// Consent: the account accepted that this integration receives its events.
    pub event_access_accepted: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Integration {
    /// The delivery method alone, for code that needs nothing of the target.
    pub fn delivery_method(&self) -> DeliveryMethod {
        self.target.delivery_method()
    }
}

/// The stored attributes of an integration: the target as `method`, `webhook_url`,
/// `signing_secret` and `handler`, as they have always been stored.
#[derive(Serialize, Deserialize)]
struct StoredIntegration {
    account_id: AccountId,
    integration_id: IntegrationId,
    name: String,
    method: DeliveryMethod,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    webhook_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signing_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    handler: Option<String>,
    event_access_accepted: bool,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<StoredIntegration> for Integration {
    fn from(s: StoredIntegration) -> Self {
        Integration {
            account_id: s.account_id,
            integration_id: s.integration_id,
            name: s.name,
            target: Target::from_parts(TargetParts {
                method: s.method,
                webhook_url: s.webhook_url,
                signing_secret: s.signing_secret.map(WebhookSecret::new),
                handler: s.handler,
            }),
            event_access_accepted: s.event_access_accepted,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

impl From<Integration> for StoredIntegration {
    fn from(i: Integration) -> Self {
        let parts = i.target.into_parts();
        StoredIntegration {
            account_id: i.account_id,
            integration_id: i.integration_id,
            name: i.name,
            method: parts.method,
            webhook_url: parts.webhook_url,
            signing_secret: parts.signing_secret.map(|s| s.expose().to_owned()),
            handler: parts.handler,
            event_access_accepted: i.event_access_accepted,
            created_at: i.created_at,
            updated_at: i.updated_at,
        }
    }
}

/// The key of an integration.
pub fn key(account_id: &AccountId, integration_id: &IntegrationId) -> (String, String) {
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
    account_id: &AccountId,
    integration_id: &IntegrationId,
) -> Result<Option<Integration>, StoreError> {
    read::get_as(dynamo, table, key(account_id, integration_id)).await
}

/// One page of the account's integrations in id order, and the id to continue after.
pub async fn list(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    limit: u32,
    after_id: Option<&IntegrationId>,
) -> Result<(Vec<Integration>, Option<IntegrationId>), StoreError> {
    let pk = keys::account_pk(account_id);
    let (items, next) = page::read(
        dynamo,
        &PrefixPage {
            table,
            pk: &pk,
            prefix: keys::INTEGRATION_PREFIX,
            limit,
            after_id: after_id.map(IntegrationId::as_str),
            filter: None,
        },
    )
    .await?;
    Ok((items, next.map(IntegrationId::from_stored)))
}

/// Creates the integration unless its id is taken.
pub fn create(table: &str, integration: &Integration) -> Result<Write, StoreError> {
    put_new(table, integration.item()?)
}

/// Applies `edit` to the integration if it exists, answering with the integration as it is now.
pub fn edit(
    table: &str,
    account_id: &AccountId,
    integration_id: &IntegrationId,
    edit: Edit,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id, integration_id);
    edit.of_existing(table, &pk, &sk)
}

/// Deletes the integration; refused when there is none.
pub fn delete(
    table: &str,
    account_id: &AccountId,
    integration_id: &IntegrationId,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id, integration_id);
    delete_existing(table, &pk, &sk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    fn integration() -> Integration {
        Integration {
            account_id: "a1".parse().unwrap(),
            integration_id: "i1".parse().unwrap(),
            name: "Hook".into(),
            target: Target::Webhook {
                url: "https://example.test/h".into(),
                secret: WebhookSecret::new("whsec_x".into()),
            },
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
        let Write::UpdateReturningNew(u) = edit(
            "t",
            &id("a1"),
            &id("i1"),
            Edit::new().set("name", &"n").unwrap(),
        )
        .unwrap() else {
            panic!("not an update returning the item")
        };
        assert_eq!(u.key()["sk"].as_s().unwrap(), "INTEG#i1");
        assert_eq!(u.condition_expression(), Some("attribute_exists(pk)"));
        let Write::Delete(d) = delete("t", &id("a1"), &id("i1")).unwrap() else {
            panic!("not a delete")
        };
        assert_eq!(d.key()["pk"].as_s().unwrap(), "ACCT#a1");
        assert_eq!(d.key()["sk"].as_s().unwrap(), "INTEG#i1");
        assert_eq!(d.condition_expression(), Some("attribute_exists(pk)"));
    }

    #[test]
    fn the_target_is_stored_as_the_flat_attributes_it_always_had() {
        let item = integration().item().unwrap();
        assert_eq!(item["method"].as_s().unwrap(), "webhook");
        assert_eq!(
            item["webhook_url"].as_s().unwrap(),
            "https://example.test/h"
        );
        assert_eq!(item["signing_secret"].as_s().unwrap(), "whsec_x");
        let mut names: Vec<_> = item.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "account_id",
                "created_at",
                "event_access_accepted",
                "integration_id",
                "kind",
                "method",
                "name",
                "pk",
                "signing_secret",
                "sk",
                "updated_at",
                "webhook_url"
            ]
        );
        assert_eq!(Integration::from_item(item).unwrap(), integration());
    }

    #[test]
    fn a_stored_webhook_without_url_reads_as_an_incomplete_target() {
        let mut item = integration().item().unwrap();
        item.remove("webhook_url");
        let read = Integration::from_item(item).unwrap();
        let Target::Incomplete(gap) = &read.target else {
            panic!("complete: {:?}", read.target)
        };
        assert_eq!(gap.to_string(), "webhook URL or signing secret missing");
        assert_eq!(read.delivery_method(), DeliveryMethod::Webhook);
        // Written back, it keeps the secret it had and gains nothing.
        let again = read.item().unwrap();
        assert_eq!(again["signing_secret"].as_s().unwrap(), "whsec_x");
        assert!(!again.contains_key("webhook_url"));
    }

    #[test]
    fn a_stored_unknown_method_reads_as_an_unknown_target_and_stores_back_verbatim() {
        let mut item = integration().item().unwrap();
        item.insert("method".into(), super::super::expr::s("queue"));
        let read = Integration::from_item(item).unwrap();
        assert_eq!(read.target, Target::Unknown("queue".into()));
        assert_eq!(read.item().unwrap()["method"].as_s().unwrap(), "queue");
    }

    #[test]
    fn an_integrations_debug_output_shows_no_secret() {
        let shown = format!("{:?}", integration());
        assert!(!shown.contains("whsec_x"), "{shown}");
        assert!(shown.contains("https://example.test/h"), "{shown}");
    }
}
