//! The test world of the integration tests. [`World`] puts everything a test talks to on one
//! [`TestStack`] (its own tables and queues under a unique prefix, so tests run in parallel
//! against one emulator without seeing each other's data): the delivery pipeline, the
//! notification pipeline, the API, a scripted receiver and fixture builders
//! ([`builders`], whose starting points are `World` methods).

pub mod api;
pub mod builders;
pub mod notifications;
pub mod through_api;

pub use crate::fixtures::id;
pub use crate::test_stack::{provider_event_settings, TestStack, TEST_SNS_TOPIC};

use crate::fixtures::Fixtures;
use crate::pipeline::Pipeline;
use crate::receiver::Receiver;
use api::{ApiClient, OPERATOR, OPERATOR_TOKEN};
use aws_sdk_dynamodb::types::AttributeValue;
use notifications::Notifications;
use shared::config::Config;
use shared::delivery::worker::internal::InternalRegistry;
use shared::delivery::worker::webhook::WebhookAdapter;
use shared::delivery::worker::DeliveryWorker;
use shared::domain::change::Change;
use shared::domain::time::Timestamp;
use shared::ids::{AccountId, SubscriptionId};
use shared::operations::account::tokens::issue_token;
use shared::store::delivery::DeliveryWork;
use shared::store::integration::Integration;
use shared::store::subscription::Subscription;
use shared::store::{keys, write};
use shared::web::auth::TokenKind;
use shared::web::{ApiState, OperatorAuth};
use std::sync::Arc;

/// A sample payload of the repository's `events/` (what `sam local invoke` would send).
pub fn sample(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../events")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The delivery queue's message for a change and a subscription (as the dispatcher publishes it).
pub fn work(change: &Change, subscription: &Subscription) -> DeliveryWork {
    DeliveryWork {
        account_id: change.account_id.clone(),
        change_id: change.change_id.clone(),
        subscription_id: subscription.subscription_id.clone(),
    }
}

/// Everything one integration test talks to, on its own [`TestStack`]: the delivery pipeline
/// (`w.pipeline.pump()`, `w.pipeline.clock`, `w.pipeline.stack`, …), the notification pipeline on
/// the same clock, the API on the same clock, a receiver on loopback, and fixture builders.
pub struct World {
    /// The delivery pipeline, on this world's stack (`pipeline.stack`) and clock
    /// (`pipeline.clock`).
    pub pipeline: Pipeline,
    pub notify: Notifications,
    /// The API as the `api` function serves it, accepting [`OPERATOR_TOKEN`].
    pub api: ApiClient,
    /// The default target of webhook integrations.
    pub receiver: Receiver,
}

impl World {
    /// Provisions a stack and wires the world on it. Panics with instructions when the emulator
    /// is not running: an integration test never skips itself.
    pub async fn new() -> Self {
        let pipeline = Pipeline::new().await;
        let notify = Notifications::new(&pipeline.stack, &pipeline.clock).await;
        let receiver = Receiver::start().await;
        let api = ApiClient::new(api_state(&pipeline, pipeline.stack.config.clone()));
        World {
            pipeline,
            notify,
            api,
            receiver,
        }
    }

    /// The API's state: this stack, the world's clock, [`OPERATOR_TOKEN`] for [`OPERATOR`], and
    /// loopback targets allowed (the receivers are on loopback).
    pub fn api_state(&self) -> ApiState {
        api_state(&self.pipeline, self.pipeline.stack.config.clone())
    }

    /// The API with the production SSRF policy: no private targets, HTTPS only.
    pub fn production_api(&self) -> ApiClient {
        let mut config = self.pipeline.stack.config.clone();
        config.allow_private_targets = false;
        ApiClient::new(api_state(&self.pipeline, config))
    }

    /// The API as it runs in AWS behind the HTTP API's JWT authorizer: operators are the `sub`
    /// of the request context's JWT, which must carry `scope` (see [`ApiClient::gateway_event`]).
    pub fn gateway_api(&self, scope: &str) -> ApiClient {
        let mut state = self.api_state();
        state.operator_auth = OperatorAuth::GatewayJwt {
            scope: scope.into(),
        };
        ApiClient::new(state)
    }

    /// The DynamoDB requests the stack's meter counted since its last reset, per operation.
    pub fn dynamo_requests(&self) -> Vec<(String, u64)> {
        self.pipeline
            .stack
            .meter
            .snapshot()
            .into_iter()
            .filter(|((service, _), _)| service == "DynamoDB")
            .map(|((_, operation), n)| (operation, n))
            .collect()
    }

    /// Takes `account_id` off the `ACCOUNTS` listing: the account as one created before the
    /// listing existed was stored.
    pub async fn unlist_account(&self, account_id: &AccountId) {
        use shared::store::attrs::listing;
        let (pk, sk) = shared::store::account::key(account_id);
        let unlist = shared::store::update::Edit::new()
            .remove(listing::KEY)
            .remove(listing::SORT)
            .of_existing(&self.pipeline.stack.config.delivery_table, &pk, &sk)
            .expect("an edit of the account");
        let written = shared::store::write::send(&self.pipeline.stack.clients.dynamo, unlist)
            .await
            .expect("the account's edit is sent");
        assert!(written.applied(), "{account_id} exists");
    }

    /// The plain fixture writer (as the demo and the benchmarks use it), at the world's now.
    pub fn fixtures(&self) -> Fixtures<'_> {
        self.pipeline.fixtures()
    }

    /// Writes an integration as it is now (e.g. with its consent withdrawn).
    /// Every item of the notification table (notices and their channel deliveries), as stored.
    pub async fn notification_items(
        &self,
    ) -> Vec<std::collections::HashMap<String, AttributeValue>> {
        self.pipeline
            .stack
            .clients
            .dynamo
            .scan()
            .table_name(&self.pipeline.stack.config.notification_table)
            .send()
            .await
            .unwrap()
            .items
            .unwrap_or_default()
    }

    pub async fn save_integration(&self, integration: &Integration) {
        self.fixtures()
            .save_integration(integration)
            .await
            .expect("write the integration");
    }

    /// Writes a subscription as it is now (e.g. with a wider filter).
    pub async fn save_subscription(&self, subscription: &Subscription) {
        self.fixtures()
            .save_subscription(subscription)
            .await
            .expect("write the subscription");
    }

    /// A delivery worker with other adapters (a short timeout, a failing built-in handler), on
    /// the same tables and clock.
    pub fn worker_with(
        &self,
        webhook: WebhookAdapter,
        internal: InternalRegistry,
    ) -> DeliveryWorker {
        DeliveryWorker::with_adapters(
            self.pipeline.stack.clients.clone(),
            self.pipeline.stack.config.clone(),
            Arc::new(self.pipeline.clock.clone()),
            webhook,
            internal,
        )
    }

    /// An account token for `account_id`, stored as the API stores tokens.
    pub async fn account_token(&self, account_id: &AccountId) -> String {
        let state = self.api_state();
        let (plaintext, record) = issue_token(
            &state.account_ops(),
            TokenKind::Acct,
            account_id,
            None,
            self.pipeline.now(),
        )
        .await
        .expect("the token-check key");
        for item in [record.item().unwrap(), record.reference_item().unwrap()] {
            let put = write::put(&self.pipeline.stack.config.delivery_table, item).unwrap();
            write::send(&self.pipeline.stack.clients.dynamo, put)
                .await
                .expect("write the token");
        }
        plaintext.expose().to_owned()
    }

    /// Writes a worker's lease on a delivery as its claim writes it, and nothing else: a worker
    /// that claimed and died (or holds the delivery right now).
    pub async fn lease(
        &self,
        change: &Change,
        subscription_id: &SubscriptionId,
        until: Timestamp,
        token: &str,
    ) {
        self.update(
            &keys::event_pk(&change.account_id, &change.change_id),
            &keys::delivery_sk(subscription_id),
            "SET lease_until = :l, lease_token = :t",
            &[
                (":l", AttributeValue::N(until.millis().to_string())),
                (":t", AttributeValue::S(token.into())),
            ],
        )
        .await;
    }

    /// A raw update of an item of the delivery table, standing in for a write of another
    /// component (a worker that died after its claim, a paused subscription, …). `#s` names
    /// `status` and `#p` names `position`.
    pub async fn update(
        &self,
        pk: &str,
        sk: &str,
        expression: &str,
        values: &[(&str, AttributeValue)],
    ) {
        let mut update = aws_sdk_dynamodb::types::Update::builder()
            .table_name(&self.pipeline.stack.config.delivery_table)
            .key("pk", AttributeValue::S(pk.into()))
            .key("sk", AttributeValue::S(sk.into()))
            .update_expression(expression);
        for (placeholder, value) in values {
            update = update.expression_attribute_values(*placeholder, value.clone());
        }
        for (placeholder, name) in [("#s", "status"), ("#p", "position")] {
            if expression.contains(placeholder) {
                update = update.expression_attribute_names(placeholder, name);
            }
        }
        let update = write::Write::Update(update.build().expect("a complete update"));
        write::send(&self.pipeline.stack.clients.dynamo, update)
            .await
            .expect("update the item");
    }
}

fn api_state(pipeline: &Pipeline, config: Config) -> ApiState {
    ApiState::new(
        pipeline.stack.clients.clone(),
        config,
        Arc::new(pipeline.clock.clone()),
        OperatorAuth::static_token(OPERATOR_TOKEN, OPERATOR),
    )
}
