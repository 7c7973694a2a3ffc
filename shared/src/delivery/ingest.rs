//! Stream ingest (the first step of the pipeline: the source stream's change records come in):
//! each source change becomes an event and one delivery record per eligible active subscription
//! — `pending` with its projected payload, or `skipped_filter`.
//!
//! Every write is a conditional put on a deterministic key, so a repeated stream record creates
//! nothing new, and a failed record never rolls back the others. A malformed record is reported in
//! `batchItemFailures` with its reason logged; it never panics the batch.

use crate::aws::Clients;
use crate::batch;
use crate::clock::Clock;
use crate::config::Config;
use crate::domain::change::Change;
use crate::domain::delivery_method::DeliveryMethod;
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::projection::PreparedChange;
use crate::domain::subscription::SubscriptionStatus;
use crate::domain::time::Timestamp;
use crate::ids::AccountId;
use crate::store;
use crate::store::account_config::{self, AccountConfig, CompiledSubscription};
use crate::store::delivery::Delivery;
use crate::store::event::EventRecord;
use crate::store::write::{send, Written};
use crate::store::StoreError;
use aws_lambda_events::event::dynamodb::{Event as DynamoDbEvent, EventRecord as StreamRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use futures::future::join_all;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("stream record has no new image (only INSERT and MODIFY records carry changes)")]
    NoImage,
    #[error("stream record is not a change: {0}")]
    Malformed(String),
    #[error("change is invalid: {0}")]
    Invalid(#[from] crate::domain::change::ChangeError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What one change produced.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IngestOutcome {
    pub pending: u32,
    pub skipped_filter: u32,
    /// Records that already existed (a repeated stream record).
    pub already_recorded: u32,
}

pub struct Ingest {
    clients: Clients,
    config: Config,
    clock: Arc<dyn Clock>,
}

impl Ingest {
    pub fn new(clients: Clients, config: Config, clock: Arc<dyn Clock>) -> Self {
        Ingest {
            clients,
            config,
            clock,
        }
    }

    /// The Lambda handler: every record is processed, the changes of one item in stream order and
    /// different items side by side ([`CONCURRENCY`] at once); failures are reported per record.
    pub async fn handle(&self, event: DynamoDbEvent) -> DynamoDbEventResponse {
        let configs = BatchConfigs::default();
        batch::run_stream(&event, CONCURRENCY, "change ingest", |record| {
            let configs = &configs;
            async move {
                if record.event_name == "REMOVE" {
                    return Ok(());
                }
                let change = parse_change(record)?;
                self.ingest_change(&change, configs).await.map(|_| ())
            }
        })
        .await
    }

    /// Makes the event and the deliveries of `change`, its account's configuration taken from
    /// `configs` (loaded there once per batch).
    pub async fn ingest_change(
        &self,
        change: &Change,
        configs: &BatchConfigs,
    ) -> Result<IngestOutcome, IngestError> {
        let config = configs
            .get(&change.account_id, || self.load_config(&change.account_id))
            .await?;
        let now = self.clock.now();
        let eligible: Vec<&CompiledSubscription> = config
            .subscriptions
            .iter()
            .filter(|c| {
                // Changes for a paused subscription are skipped and never recovered on resume.
                c.subscription.status == SubscriptionStatus::Active
                    && c.subscription
                        .record_types
                        .iter()
                        .any(|t| t == "*" || *t == change.record_type)
            })
            .collect();

        let table = &self.config.delivery_table;
        let mut writes = Vec::new();
        let mut outcome = IngestOutcome::default();
        let mut push_subscribers = 0;
        let prepared = PreparedChange::new(change);
        // A change that makes one delivery leaves its event's roll-up to that delivery alone.
        let sole = eligible.len() == 1;
        for compiled in &eligible {
            let record = delivery_record(&prepared, compiled, &config, sole, now);
            match record.status {
                DeliveryStatus::Pending => {
                    outcome.pending += 1;
                    push_subscribers += u32::from(!record.method.is_poll());
                }
                _ => outcome.skipped_filter += 1,
            }
            writes.push(store::delivery::create(table, &record, now)?);
        }
        let event = EventRecord::ingested(change, outcome.pending, push_subscribers, now);
        writes.push(store::event::create(table, &event)?);

        // One conditional put per item (not a transaction: a repeated stream record finds some
        // or all of them written, and each put is its own idempotency key).
        let dynamo = &self.clients.dynamo;
        let results = join_all(writes.into_iter().map(|w| send(dynamo, w))).await;
        for r in results {
            match r? {
                Written::Applied(_) => {}
                _ => outcome.already_recorded += 1,
            }
        }
        Ok(outcome)
    }
}

impl Ingest {
    /// An account's configuration, as ingest needs it: an account created before the accounts
    /// listing is listed before any event of it is written, or the roll-up walk would never read
    /// its events. A refusal is a concurrent ingest that listed it first (or the account is
    /// gone); an error fails the record, to be tried again with the change.
    async fn load_config(&self, account_id: &AccountId) -> Result<AccountConfig, IngestError> {
        let table = &self.config.delivery_table;
        let loaded = account_config::load(&self.clients.dynamo, table, account_id).await?;
        if loaded.unlisted {
            send(
                &self.clients.dynamo,
                store::account::enlist(table, account_id)?,
            )
            .await?;
        }
        Ok(loaded)
    }
}

/// The changes of a batch ingested side by side: a stream batch's records of different items run
/// at once, and its shard's items are a handful of tables' rows, so enough to keep the requests
/// of one batch overlapping without a burst a partition notices.
pub const CONCURRENCY: usize = 16;

/// Each account's configuration, loaded once per batch however many of its changes ask for it at
/// once (the first loads it, the others wait for that load; a failed load is tried again by the
/// next change that asks).
#[derive(Default)]
pub struct BatchConfigs {
    loads: Mutex<HashMap<AccountId, Arc<OnceCell<Arc<AccountConfig>>>>>,
}

impl BatchConfigs {
    async fn get<F, Fut>(
        &self,
        account_id: &AccountId,
        load: F,
    ) -> Result<Arc<AccountConfig>, IngestError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<AccountConfig, IngestError>>,
    {
        let cell = {
            let mut loads = self.loads.lock().unwrap_or_else(|e| e.into_inner());
            loads.entry(account_id.clone()).or_default().clone()
        };
        let config = cell.get_or_try_init(|| async { load().await.map(Arc::new) });
        Ok(config.await?.clone())
    }
}

fn parse_change(record: &StreamRecord) -> Result<Change, IngestError> {
    if record.change.new_image.is_empty() {
        return Err(IngestError::NoImage);
    }
    let change: Change = serde_dynamo::from_item(record.change.new_image.clone())
        .map_err(|e| IngestError::Malformed(e.to_string()))?;
    change.validate()?;
    Ok(change)
}

/// The delivery record a subscription makes of a change: filtered at change time, projected to
/// its allowed fields (never the row). The change is prepared once for all its subscriptions;
/// `sole`: this is the only delivery the change makes.
pub(crate) fn delivery_record(
    prepared: &PreparedChange<'_>,
    compiled: &CompiledSubscription,
    config: &AccountConfig,
    sole: bool,
    now: Timestamp,
) -> Delivery {
    let change = prepared.change();
    let sub = &compiled.subscription;
    let method = config
        .integrations
        .get(&sub.integration_id)
        .map(store::integration::Integration::delivery_method)
        .unwrap_or(DeliveryMethod::Webhook);
    let payload = compiled
        .filter
        .matches(change)
        .then(|| prepared.payload_json(&compiled.projection));
    Delivery::ingested(
        change,
        &sub.subscription_id,
        &sub.integration_id,
        method,
        payload,
        sole,
        now,
    )
}
