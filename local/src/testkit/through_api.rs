//! Resources made the way a tenant makes them, through the HTTP API: an integration and its
//! subscription (with the adapter's token), and the reads the API suites and the CLI test make
//! of what the pipeline then did.

use super::api::ApiAccount;
use super::World;
use crate::fixtures::id;
use serde_json::{json, Value};
use shared::domain::change::Change;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::time::Timestamp;
use shared::ids::{AccountId, SubscriptionId};
use shared::store::delivery::Delivery;
use shared::store::keys;

/// A subscription made through the API, with its adapter's token.
#[derive(Debug, Clone)]
pub struct ApiSubscription {
    pub account_id: AccountId,
    pub integration_token: String,
    pub subscription_id: SubscriptionId,
}

impl World {
    /// An integration (`poll`, or `webhook` to the world's receiver) and a catalog subscription
    /// of it, made through the API; `extra` adds to the subscription's body.
    pub async fn subscribe_through_api(
        &self,
        tenant: &ApiAccount,
        method: &str,
        extra: Value,
    ) -> ApiSubscription {
        let mut integration =
            json!({"name": "Adapter", "method": method, "event_access_accepted": true});
        if method == "webhook" {
            integration["webhook_url"] = json!(self.receiver.url("/hooks/rhythm"));
        }
        let created = self
            .api
            .post("/v1/integrations", &tenant.token, integration)
            .await;
        let created = created.created().clone();
        let mut subscription = json!({
            "integration_id": created["id"],
            "record_types": ["catalog_item"],
            "fields": ["sku", "name", "price"],
        });
        for (k, v) in extra.as_object().expect("an object of extra fields") {
            subscription[k] = v.clone();
        }
        let sub = self
            .api
            .post("/v1/subscriptions", &tenant.token, subscription)
            .await;
        let sub = sub.created().clone();
        ApiSubscription {
            account_id: tenant.account_id.clone(),
            integration_token: created["token"].as_str().unwrap().to_owned(),
            subscription_id: id(sub["id"].as_str().unwrap()),
        }
    }

    /// Writes changes (occurring at the given times) and runs the pipeline; returns them in
    /// change order.
    pub async fn write_changes(
        &self,
        account_id: &AccountId,
        occurred: &[Timestamp],
    ) -> Vec<Change> {
        let mut out = Vec::new();
        for (i, at) in occurred.iter().enumerate() {
            out.push(self.change(account_id).at(*at).price(1.0 + i as f64).await);
        }
        self.pipeline.pump().await.unwrap();
        out.sort_by(|a, b| a.change_id.cmp(&b.change_id));
        out
    }

    /// The stored delivery of `sub` × `change`.
    pub async fn stored_delivery(&self, sub: &ApiSubscription, change: &Change) -> Delivery {
        let item = self
            .pipeline
            .get(
                &keys::event_pk(&sub.account_id, &change.change_id),
                &keys::delivery_sk(&sub.subscription_id),
            )
            .await
            .expect("a delivery");
        Delivery::from_item(item).unwrap()
    }

    pub async fn delivery_status(&self, sub: &ApiSubscription, change: &Change) -> DeliveryStatus {
        self.stored_delivery(sub, change).await.status
    }
}

/// The change ids of a page of deliveries the API listed.
pub fn change_ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["change_id"].as_str().unwrap().to_owned())
        .collect()
}
