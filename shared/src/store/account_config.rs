//! An account's configuration (account, integrations, subscriptions) is one partition: one query
//! loads all of it. Ingest loads it once per account per batch; the worker keeps it in a cache
//! with a short expiry (a credentials lease), so changes reach running workers within that time.
//! The items are read through their modules ([`super::account`], [`super::integration`],
//! [`super::subscription`]).

use super::account::Account;
use super::expr::{s, Expr};
use super::integration::Integration;
use super::keys::{account_pk, ACCOUNT_SK, INTEGRATION_PREFIX, SUBSCRIPTION_PREFIX};
use super::read::{self, Query};
use super::subscription::Subscription;
use super::StoreError;
use crate::domain::filter::Filter;
use crate::domain::projection::Projection;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId, SubscriptionId};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// A subscription with its filter and projection parsed once, ready for the hot path.
#[derive(Debug, Clone)]
pub struct CompiledSubscription {
    pub subscription: Subscription,
    pub filter: Filter,
    pub projection: Projection,
}

#[derive(Debug, Clone, Default)]
pub struct AccountConfig {
    pub account: Option<Account>,
    pub integrations: HashMap<IntegrationId, Integration>,
    pub subscriptions: Vec<CompiledSubscription>,
    /// Subscriptions whose stored filter or fields no longer parse (logged; never matched).
    pub broken: Vec<(SubscriptionId, String)>,
    /// The account exists but is not on the `ACCOUNTS` listing (it was created before the
    /// listing existed): see [`super::account::enlist`].
    pub unlisted: bool,
}

impl AccountConfig {
    pub fn subscription(&self, id: &SubscriptionId) -> Option<&CompiledSubscription> {
        self.subscriptions
            .iter()
            .find(|s| &s.subscription.subscription_id == id)
    }
}

pub fn compile(subscription: Subscription) -> Result<CompiledSubscription, String> {
    let filter = match &subscription.filter {
        None => Filter::Always,
        Some(text) => {
            let json: serde_json::Value =
                serde_json::from_str(text).map_err(|e| format!("filter is not JSON: {e}"))?;
            Filter::parse(&json).map_err(|e| e.to_string())?
        }
    };
    let projection = Projection::new(subscription.fields.iter()).map_err(|e| e.to_string())?;
    Ok(CompiledSubscription {
        subscription,
        filter,
        projection,
    })
}

/// The query of an account's configuration partition (consistent: a change made through the
/// API is seen by the next load).
pub(crate) fn partition_query(table: &str, account_id: &AccountId) -> Query {
    Query {
        table: table.to_owned(),
        key_condition: "pk = :pk".into(),
        expr: Expr::new().value(":pk", s(account_pk(account_id))),
        ..Query::default()
    }
}

pub async fn load(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
) -> Result<AccountConfig, StoreError> {
    let mut config = AccountConfig::default();
    for item in read::query_all(dynamo, &partition_query(table, account_id)).await? {
        let sk = item
            .get("sk")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        if sk == ACCOUNT_SK {
            config.unlisted = !super::account::is_listed(&item);
            config.account = Some(Account::from_item(item)?);
        } else if sk.starts_with(INTEGRATION_PREFIX) {
            let integration = Integration::from_item(item)?;
            config
                .integrations
                .insert(integration.integration_id.clone(), integration);
        } else if sk.starts_with(SUBSCRIPTION_PREFIX) {
            let subscription = Subscription::from_item(item)?;
            let id = subscription.subscription_id.clone();
            match compile(subscription) {
                Ok(c) => config.subscriptions.push(c),
                Err(reason) => {
                    tracing::error!(subscription_id = %id, %reason, "stored subscription does not compile; it matches nothing");
                    config.broken.push((id, reason));
                }
            }
        }
    }
    Ok(config)
}

/// Account configurations cached for a short time per Lambda container.
pub struct ConfigCache {
    ttl: Duration,
    entries: Mutex<HashMap<AccountId, (Timestamp, std::sync::Arc<AccountConfig>)>>,
}

impl ConfigCache {
    pub fn new(ttl: Duration) -> Self {
        ConfigCache {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub async fn get(
        &self,
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        account_id: &AccountId,
        now: Timestamp,
    ) -> Result<std::sync::Arc<AccountConfig>, StoreError> {
        if let Some((loaded, config)) = self.entries.lock().unwrap().get(account_id) {
            if now.since(*loaded) < self.ttl && *loaded <= now {
                return Ok(config.clone());
            }
        }
        let config = std::sync::Arc::new(load(dynamo, table, account_id).await?);
        self.entries
            .lock()
            .unwrap()
            .insert(account_id.clone(), (now, config.clone()));
        Ok(config)
    }

    pub(crate) fn forget(&self, account_id: &AccountId) {
        self.entries.lock().unwrap().remove(account_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    #[test]
    fn a_configuration_is_one_consistent_query_of_the_account_partition() {
        let q = partition_query("t", &id("a1"));
        assert_eq!(q.key_condition, "pk = :pk");
        assert_eq!(q.expr.values[":pk"], s("ACCT#a1"));
        assert!(q.index.is_none() && !q.eventual && q.filter.is_none());
    }
}
