//! Fixture builders of the test world: accounts, integrations, subscriptions and changes written
//! straight into the tables, each with defaults a test overrides only where it matters. `.await`
//! a builder to write it; a change can also be `.build()` without writing.

use super::World;
use crate::fixtures::{catalog_change, id, new_id, sealed_secret, test_secret};
use crate::receiver::Receiver;
use futures::future::BoxFuture;
use serde_json::Value;
use shared::domain::change::Change;
use shared::domain::delivery_method::DeliveryMethod;
use shared::domain::retry::RetryPolicy;
use shared::domain::subscription::SubscriptionStatus;
use shared::domain::target::{Target, TargetParts};
use shared::domain::time::Timestamp;
use shared::ids::{AccountId, IntegrationId, SubscriptionId};
use shared::store::account::Account;
use shared::store::integration::Integration;
use shared::store::subscription::{NewSubscription, Subscription};
use std::future::IntoFuture;

/// The path webhook integrations post to on their receiver.
pub const HOOK_PATH: &str = "/hooks/rhythm";

/// The builders' starting points.
impl World {
    /// An account (see [`AccountBuilder`] for its defaults).
    pub fn account(&self) -> AccountBuilder<'_> {
        AccountBuilder {
            world: self,
            id: None,
            name: "Test account".into(),
            admins: vec!["admin@example.com".into()],
        }
    }

    /// An integration of `account_id` (see [`IntegrationBuilder`]).
    pub fn integration(&self, account_id: &AccountId) -> IntegrationBuilder<'_> {
        IntegrationBuilder {
            world: self,
            account_id: account_id.to_owned(),
            id: None,
            name: None,
            method: DeliveryMethod::Webhook,
            webhook_url: Some(self.receiver.url(HOOK_PATH)),
            handler: None,
        }
    }

    /// A subscription of `integration` (see [`SubscriptionBuilder`]).
    pub fn subscribe(&self, integration: &Integration) -> SubscriptionBuilder<'_> {
        SubscriptionBuilder {
            world: self,
            account_id: integration.account_id.clone(),
            integration_id: integration.integration_id.clone(),
            id: None,
            record_types: vec!["catalog_item".into()],
            filter: None,
            fields: vec!["sku".into(), "price".into()],
            policy: RetryPolicy::FixedSchedule,
            status: SubscriptionStatus::Active,
        }
    }

    /// A change of `account_id` the owning application writes (see [`ChangeBuilder`]).
    pub fn change(&self, account_id: &AccountId) -> ChangeBuilder<'_> {
        ChangeBuilder {
            world: self,
            account_id: account_id.to_owned(),
            at: None,
            price: 4.5,
            trace_id: None,
        }
    }
}

/// An account; by default with a fresh id and `admin@example.com` as its administrator.
pub struct AccountBuilder<'a> {
    world: &'a World,
    id: Option<String>,
    name: String,
    admins: Vec<String>,
}

impl AccountBuilder<'_> {
    pub fn id(mut self, id: &str) -> Self {
        self.id = Some(id.to_owned());
        self
    }
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }
    pub fn admins(mut self, emails: &[&str]) -> Self {
        self.admins = emails.iter().map(|e| e.to_string()).collect();
        self
    }
}

impl<'a> IntoFuture for AccountBuilder<'a> {
    type Output = Account;
    type IntoFuture = BoxFuture<'a, Account>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let account_id = id(&self
                .id
                .unwrap_or_else(|| format!("acct{}", new_id().to_lowercase())));
            let account = Account::new(
                account_id,
                self.name,
                self.admins,
                self.world.pipeline.now(),
            );
            self.world
                .fixtures()
                .save_account(&account)
                .await
                .expect("write the account");
            account
        })
    }
}

/// An integration of an account; by default a consented webhook to the world's receiver at
/// [`HOOK_PATH`], signed with [`test_secret`].
pub struct IntegrationBuilder<'a> {
    world: &'a World,
    account_id: AccountId,
    id: Option<String>,
    name: Option<String>,
    method: DeliveryMethod,
    webhook_url: Option<String>,
    handler: Option<String>,
}

impl IntegrationBuilder<'_> {
    pub fn id(mut self, id: &str) -> Self {
        self.id = Some(id.to_owned());
        self
    }
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }
    /// A webhook to `receiver` at [`HOOK_PATH`].
    pub fn to(self, receiver: &Receiver) -> Self {
        self.url(receiver.url(HOOK_PATH))
    }
    /// A webhook to `url`.
    pub fn url(mut self, url: String) -> Self {
        self.method = DeliveryMethod::Webhook;
        self.webhook_url = Some(url);
        self
    }
    /// Any method; a built-in (`internal`) one runs the `record_snapshot` handler.
    pub fn method(mut self, method: DeliveryMethod) -> Self {
        if method != DeliveryMethod::Webhook {
            self.webhook_url = None;
        }
        if method == DeliveryMethod::Internal {
            self.handler.get_or_insert_with(|| "record_snapshot".into());
        }
        self.method = method;
        self
    }
    pub fn poll(self) -> Self {
        self.method(DeliveryMethod::Poll)
    }
    pub fn internal(self) -> Self {
        self.method(DeliveryMethod::Internal)
    }
}

impl<'a> IntoFuture for IntegrationBuilder<'a> {
    type Output = Integration;
    type IntoFuture = BoxFuture<'a, Integration>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let now = self.world.pipeline.now();
            let integration_id: IntegrationId = self.id.map_or_else(IntegrationId::new, |t| id(&t));
            let signing_secret = match &self.webhook_url {
                Some(_) => Some(
                    sealed_secret(
                        &self.world.pipeline.stack.clients,
                        &self.world.pipeline.stack.config.signing_key_id,
                        &self.account_id,
                        &integration_id,
                        &test_secret(),
                    )
                    .await
                    .expect("seal the signing secret"),
                ),
                None => None,
            };
            let name = self
                .name
                .unwrap_or_else(|| format!("{} integration", self.method.as_str()));
            let target = Target::from_parts(TargetParts {
                signing_secret,
                webhook_url: self.webhook_url,
                handler: self.handler,
                method: self.method,
            });
            let integration = Integration::new(
                self.account_id.clone(),
                integration_id,
                name,
                target,
                true,
                now,
            );
            self.world.save_integration(&integration).await;
            integration
        })
    }
}

/// A subscription of an integration; by default active, to `catalog_item` changes, carrying
/// `sku` and `price`, with the fixed retry schedule.
pub struct SubscriptionBuilder<'a> {
    world: &'a World,
    account_id: AccountId,
    integration_id: IntegrationId,
    id: Option<String>,
    record_types: Vec<String>,
    filter: Option<Value>,
    fields: Vec<String>,
    policy: RetryPolicy,
    status: SubscriptionStatus,
}

impl SubscriptionBuilder<'_> {
    pub fn id(mut self, id: &str) -> Self {
        self.id = Some(id.to_owned());
        self
    }
    pub fn record_types(mut self, types: &[&str]) -> Self {
        self.record_types = types.iter().map(|t| t.to_string()).collect();
        self
    }
    pub fn filter(mut self, filter: Value) -> Self {
        self.filter = Some(filter);
        self
    }
    pub fn fields(mut self, fields: &[&str]) -> Self {
        self.fields = fields.iter().map(|f| f.to_string()).collect();
        self
    }
    pub fn policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }
    /// Paused (as an operator or the auto-pause left it).
    pub fn paused(mut self) -> Self {
        self.status = SubscriptionStatus::Paused;
        self
    }
}

impl<'a> IntoFuture for SubscriptionBuilder<'a> {
    type Output = Subscription;
    type IntoFuture = BoxFuture<'a, Subscription>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let now = self.world.pipeline.now();
            let mut subscription = Subscription::new(
                NewSubscription {
                    account_id: self.account_id.clone(),
                    subscription_id: self.id.map_or_else(SubscriptionId::new, |t| id(&t)),
                    integration_id: self.integration_id.clone(),
                    record_types: self.record_types,
                    filter: self.filter.map(|f| f.to_string()),
                    fields: self.fields,
                    retry_policy: self.policy,
                    answers: Default::default(),
                },
                now,
            );
            subscription.status = self.status;
            self.world.save_subscription(&subscription).await;
            subscription
        })
    }
}

/// A catalog item change (see [`catalog_change`]) the owning application writes into its
/// changes table; by default occurring now at a price of 4.5.
pub struct ChangeBuilder<'a> {
    world: &'a World,
    account_id: AccountId,
    at: Option<Timestamp>,
    price: f64,
    trace_id: Option<String>,
}

impl ChangeBuilder<'_> {
    pub fn at(mut self, occurred_at: Timestamp) -> Self {
        self.at = Some(occurred_at);
        self
    }
    pub fn price(mut self, price: f64) -> Self {
        self.price = price;
        self
    }
    /// With the `trace_id` attribute the owning application keeps its trace in, as given.
    pub fn trace(mut self, trace_id: &str) -> Self {
        self.trace_id = Some(trace_id.to_owned());
        self
    }
    /// The change, not written.
    pub fn build(&self) -> Change {
        let at = self.at.unwrap_or_else(|| self.world.pipeline.now());
        Change {
            trace_id: self.trace_id.clone(),
            ..catalog_change(&self.account_id, at, self.price)
        }
    }
}

impl<'a> IntoFuture for ChangeBuilder<'a> {
    type Output = Change;
    type IntoFuture = BoxFuture<'a, Change>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let change = self.build();
            self.world
                .pipeline
                .write_change(&change)
                .await
                .expect("write the change");
            change
        })
    }
}
