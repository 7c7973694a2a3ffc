//! Accounts, integrations, subscriptions and changes for tests, the demo and the benchmarks,
//! written straight into the tables (the management API has its own tests).

use anyhow::Result;
use serde_json::{json, Map, Value};
use shared::aws::Clients;
use shared::data_keys::SecretSealer;
use shared::domain::change::Change;
use shared::domain::delivery_method::DeliveryMethod;
use shared::domain::endpoint_auth::{AuthMode, EndpointAuth};
use shared::domain::retry::RetryPolicy;
use shared::domain::sealed::Credential;
use shared::domain::signing::SigningSecret;
use shared::domain::target::{Target, TargetParts, WebhookSecret};
use shared::domain::time::Timestamp;
use shared::ids::{AccountId, IntegrationId, SubscriptionId};
use shared::store::account::Account;
use shared::store::integration::Integration;
use shared::store::keys;
use shared::store::subscription::{NewSubscription, Subscription};
use shared::store::to_item;

pub struct Fixtures<'a> {
    pub clients: &'a Clients,
    pub table: &'a str,
    /// The KMS key webhook secrets are sealed under (the stack's `SIGNING_KEY_ID`).
    pub signing_key_id: &'a str,
    pub now: Timestamp,
}

/// A fresh, time-sortable id.
pub fn new_id() -> String {
    ulid::Ulid::new().to_string()
}

/// Tests' shorthand for a typed id of fixture text: `id("s1")` (panics when it is not an id).
pub fn id<T: std::str::FromStr>(text: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    text.parse()
        .unwrap_or_else(|e| panic!("{text:?} is not a fixture id: {e:?}"))
}

/// A signing secret for tests (fixed bytes: tests verify signatures with it).
pub fn test_secret() -> String {
    SigningSecret::from_bytes(&[7u8; 32])
        .expect("32 bytes make a secret")
        .expose_whsec()
}

/// `secret` sealed for the integration, as the API seals it (a data key of `signing_key_id`).
pub async fn sealed_secret(
    clients: &Clients,
    signing_key_id: &str,
    account_id: &AccountId,
    integration_id: &IntegrationId,
    secret: &str,
) -> Result<WebhookSecret> {
    let sealer = SecretSealer::new(clients.kms.clone(), signing_key_id);
    let secret = SigningSecret::parse(secret)?;
    Ok(WebhookSecret::new(
        sealer.seal(account_id, integration_id, &secret).await?,
    ))
}

/// The event types every local stack's catalog holds (tests, the demo, the console stack, the
/// bench): the record types the fixtures' changes have, with the fields their subscriptions
/// project. The catalog is enforced, so a subscription naming another type is refused here as in
/// AWS.
pub fn seeded_event_types() -> Vec<(&'static str, &'static str, Value, Value)> {
    vec![
        (
            "catalog_item",
            "An item of a warehouse catalog.",
            json!({"type": "object", "required": ["sku"], "properties": {
                "sku": {"type": "string"},
                "name": {"type": "string"},
                "price": {"type": "number"},
                "cost": {"type": "number"},
                "supplier": {"type": "object", "properties": {
                    "name": {"type": "string"}, "contact": {"type": "string"}}},
                "stock": {"type": "object"}
            }}),
            json!({"sku": "SKU-1", "name": "Espresso cup", "price": 4.5, "stock": {"W1": 12}}),
        ),
        (
            "order",
            "A customer's order.",
            json!({"type": "object", "properties": {
                "status": {"type": "string"},
                "total": {"type": "number"},
                "lines": {"type": ["integer", "array"]},
                "customer": {"type": "object", "properties": {
                    "name": {"type": "string"}, "email": {"type": "string"},
                    "address": {"type": "object", "properties": {"city": {"type": "string"}}}}},
                "gift": {"type": "boolean"},
                "coupon": {"type": ["string", "null"]}
            }}),
            json!({"status": "shipped", "total": 250.5, "customer": {"email": "ada@example.com"}}),
        ),
    ]
}

/// Writes [`seeded_event_types`] into `table`'s catalog (as an operator's first `PUT` would).
pub async fn seed_catalog(clients: &Clients, table: &str, now: Timestamp) -> Result<()> {
    for (name, description, schema, example) in seeded_event_types() {
        let t = shared::store::event_type::EventType {
            record_type: name.into(),
            version: 1,
            description: description.into(),
            schema: schema.to_string(),
            example: example.to_string(),
            updated_at: now,
            updated_by: "fixtures".into(),
        };
        let put = shared::store::event_type::save(table, &t, None)?;
        shared::store::write::send(&clients.dynamo, put).await?;
    }
    Ok(())
}

impl<'a> Fixtures<'a> {
    async fn put(&self, item: shared::store::Item) -> Result<()> {
        let put = shared::store::write::put(self.table, item)?;
        shared::store::write::send(&self.clients.dynamo, put).await?;
        Ok(())
    }

    pub async fn account(&self, admin_emails: &[&str]) -> Result<Account> {
        let account = Account::new(
            format!("acct{}", new_id().to_lowercase()).parse().unwrap(),
            "Test account".into(),
            admin_emails.iter().map(|s| s.to_string()).collect(),
            self.now,
        );
        self.save_account(&account).await?;
        Ok(account)
    }

    pub async fn save_account(&self, account: &Account) -> Result<()> {
        // As the store writes it: on the accounts listing the roll-up walk reads.
        self.put(account.item()?).await
    }

    pub async fn integration(
        &self,
        account_id: &AccountId,
        method: DeliveryMethod,
        webhook_url: Option<String>,
        handler: Option<&str>,
    ) -> Result<Integration> {
        let integration_id = IntegrationId::new();
        let signing_secret = match webhook_url {
            Some(_) => Some(
                sealed_secret(
                    self.clients,
                    self.signing_key_id,
                    account_id,
                    &integration_id,
                    &test_secret(),
                )
                .await?,
            ),
            None => None,
        };
        let name = format!("{} integration", method.as_str());
        let target = Target::from_parts(TargetParts {
            signing_secret,
            webhook_url,
            handler: handler.map(str::to_string),
            method,
        });
        let integration = Integration::new(
            account_id.clone(),
            integration_id,
            name,
            target,
            true,
            self.now,
        );
        self.save_integration(&integration).await?;
        Ok(integration)
    }

    /// The webhook `integration` authenticating with HTTP basic (`username`, `password` sealed as
    /// the API seals it), saved.
    pub async fn with_basic_auth(
        &self,
        integration: &Integration,
        username: &str,
        password: &str,
    ) -> Result<Integration> {
        let sealer = SecretSealer::new(self.clients.kms.clone(), self.signing_key_id);
        let credential = sealer
            .seal_credential(
                &integration.account_id,
                &integration.integration_id,
                &Credential::new(password.to_owned()),
            )
            .await?;
        let mut authenticated = integration.clone();
        authenticated.endpoint.auth = Some(EndpointAuth {
            mode: AuthMode::Basic {
                username: username.to_owned(),
            },
            credential,
            previous: None,
        });
        self.save_integration(&authenticated).await?;
        Ok(authenticated)
    }

    pub async fn save_integration(&self, integration: &Integration) -> Result<()> {
        self.put(to_item(
            integration,
            &keys::account_pk(&integration.account_id),
            &keys::integration_sk(&integration.integration_id),
            "integration",
        )?)
        .await
    }

    pub async fn webhook(&self, account_id: &AccountId, url: String) -> Result<Integration> {
        self.integration(account_id, DeliveryMethod::Webhook, Some(url), None)
            .await
    }

    /// A webhook integration of `account_id` to `url` with a catalog subscription (two fields,
    /// the fixed retry schedule).
    pub async fn catalog_webhook(
        &self,
        account_id: &AccountId,
        url: String,
    ) -> Result<Integration> {
        let integration = self.webhook(account_id, url).await?;
        self.subscription(
            &integration,
            &["catalog_item"],
            None,
            &["sku", "price"],
            RetryPolicy::FixedSchedule,
        )
        .await?;
        Ok(integration)
    }

    pub async fn subscription(
        &self,
        integration: &Integration,
        record_types: &[&str],
        filter: Option<Value>,
        fields: &[&str],
        retry_policy: RetryPolicy,
    ) -> Result<Subscription> {
        let subscription = Subscription::new(
            NewSubscription {
                account_id: integration.account_id.clone(),
                subscription_id: SubscriptionId::new(),
                integration_id: integration.integration_id.clone(),
                record_types: record_types.iter().map(|s| s.to_string()).collect(),
                filter: filter.map(|f| f.to_string()),
                fields: fields.iter().map(|s| s.to_string()).collect(),
                retry_policy,
                answers: Default::default(),
            },
            self.now,
        );
        self.save_subscription(&subscription).await?;
        Ok(subscription)
    }

    pub async fn save_subscription(&self, subscription: &Subscription) -> Result<()> {
        self.put(to_item(
            subscription,
            &keys::account_pk(&subscription.account_id),
            &keys::subscription_sk(&subscription.subscription_id),
            "subscription",
        )?)
        .await
    }
}

/// A stream record of `change` as the changes table's stream carries it (`INSERT`, or `MODIFY`
/// when its item is written again), numbered `sequence`: its item's key and its new image.
pub fn change_stream_record(
    change: &Change,
    event_name: &str,
    sequence: &str,
) -> aws_lambda_events::event::dynamodb::EventRecord {
    let mut r = aws_lambda_events::event::dynamodb::EventRecord::default();
    r.event_name = event_name.into();
    r.change.sequence_number = Some(sequence.into());
    r.change.new_image = serde_dynamo::to_item(change).expect("a change is an item");
    r.change.keys = serde_dynamo::to_item(json!({
        "account_id": change.account_id,
        "change_id": change.change_id,
    }))
    .expect("a change's key is an item");
    r
}

/// A catalog item change with fields worth hiding (cost, supplier) next to public ones.
pub fn catalog_change(account_id: &AccountId, occurred_at: Timestamp, price: f64) -> Change {
    let record: Map<String, Value> = json!({
        "sku": "SKU-1",
        "name": "Espresso cup",
        "price": price,
        "cost": 1.25,
        "supplier": {"name": "Secret Pottery Ltd", "contact": "buyer@example.com"},
        "stock": {"W1": 12, "W2": 0}
    })
    .as_object()
    .cloned()
    .unwrap_or_default();
    Change {
        account_id: account_id.clone(),
        change_id: new_id().parse().unwrap(),
        record_type: "catalog_item".into(),
        record_id: "SKU-1".into(),
        event_code: "catalog_item.updated".into(),
        warehouse: Some("W1".into()),
        occurred_at,
        changed_fields: vec!["price".into(), "cost".into()],
        record,
        trace_id: None,
    }
}
