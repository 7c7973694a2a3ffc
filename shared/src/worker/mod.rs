//! The delivery worker (seed 002, hops 4–5; seed 000's worker transitions).
//!
//! For each message: read the delivery, claim its next numbered attempt with a conditional write
//! and a sixty-second lease, call the adapter with the stable delivery id, classify the result and
//! write the outcome conditionally on still holding the lease. Two copies of one message cannot
//! both call the adapter for one attempt; a worker that dies leaves a lease that lapses, after
//! which the dispatcher's sweep publishes the delivery again and another worker claims the same
//! attempt number. A dead outcome and its subscription's dead count are one transaction, so a
//! redelivered message can never count twice, and the fiftieth pauses the subscription and
//! requests exactly one administrator notice.

pub mod adapters;
pub mod internal;
pub mod webhook;

use crate::aws::Clients;
use crate::clock::Clock;
use crate::config::Config;
use crate::domain::classify::AttemptClass;
use crate::domain::event::{
    delivery_expires_at, DeliveryMethod, InternalStatus, InternalTrigger, INTERNAL_LIFECYCLE,
};
use crate::domain::integration_delivery::{
    self as lifecycle, lease_held, DeliveryMove, DeliveryStatus, UnknownDeliveryMethod,
    DELIVERY_LIFECYCLE,
};
use crate::domain::retry::RetryDecision;
use crate::domain::ssrf::TargetPolicy;
use crate::domain::subscription::{
    should_auto_pause, SubscriptionStatus, SubscriptionTrigger, MAX_CONSECUTIVE_DEAD,
    SUBSCRIPTION_LIFECYCLE,
};
use crate::domain::time::Timestamp;
use crate::store::account_config::{AccountConfig, ConfigCache};
use crate::store::expr::{is_condition_failure, n, s, Expr};
use crate::store::keys;
use crate::store::models::{AttemptRecord, DeliveryRecord, DeliveryWork, Subscription};
use crate::store::notice::{notice_item, subscription_paused_notice};
use crate::store::{from_item, StoreError};
use adapters::AttemptResult;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use futures::StreamExt;
use internal::{InternalCall, InternalRegistry};
use std::sync::Arc;
use std::time::{Duration, Instant};
use webhook::WebhookAdapter;

/// The processing lease (seed 004: sixty seconds).
pub const LEASE: Duration = crate::domain::event::PROCESSING_LEASE;
/// How long account configuration (and the integration's credentials) is cached per container.
pub const CONFIG_LEASE: Duration = Duration::from_secs(60);
/// Messages of one batch worked on at once (the event source hands over up to a hundred).
pub const BATCH_CONCURRENCY: usize = 25;
/// A message may arrive this much before its attempt is due (SQS delays are whole seconds, hosts'
/// clocks differ slightly) and still run; an earlier one is a stray duplicate and is dropped.
pub const EARLY_TOLERANCE: Duration = Duration::from_secs(2);
/// Attempts kept on a delivery's history; older ones are summarised by the count.
pub const ATTEMPT_LOG_LIMIT: usize = 30;

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("message body is not delivery work: {0}")]
    Malformed(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid move: {0}")]
    Transition(#[from] crate::domain::lifecycle::TransitionError),
}

/// What handling one message came to (all of them are successes for the queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkOutcome {
    /// The attempt ran and its outcome was saved.
    Attempted { number: u32, status: DeliveryStatus },
    /// Nothing to do: gone, already settled, pull delivery, not yet due, leased by another worker,
    /// or another worker won the claim or took over the lease.
    Skipped(&'static str),
}

pub struct DeliveryWorker {
    clients: Clients,
    config: Config,
    clock: Arc<dyn Clock>,
    webhook: WebhookAdapter,
    internal: InternalRegistry,
    cache: ConfigCache,
}

impl DeliveryWorker {
    pub fn new(clients: Clients, config: Config, clock: Arc<dyn Clock>) -> Self {
        let policy = TargetPolicy {
            allow_private: config.allow_private_targets,
            require_https: !config.allow_private_targets,
        };
        let internal =
            InternalRegistry::builtin(clients.dynamo.clone(), config.delivery_table.clone());
        Self::with_adapters(
            clients,
            config,
            clock,
            WebhookAdapter::new(policy, webhook::DEFAULT_TIMEOUT),
            internal,
        )
    }

    pub fn with_adapters(
        clients: Clients,
        config: Config,
        clock: Arc<dyn Clock>,
        webhook: WebhookAdapter,
        internal: InternalRegistry,
    ) -> Self {
        DeliveryWorker {
            clients,
            config,
            clock,
            webhook,
            internal,
            cache: ConfigCache::new(CONFIG_LEASE),
        }
    }

    /// Drops cached account configuration (tests change it and want the change seen at once).
    pub fn forget_config(&self, account_id: &str) {
        self.cache.forget(account_id);
    }

    /// The Lambda handler: messages are handled concurrently; a message fails (and comes back)
    /// only when it is malformed or storage could not be reached.
    pub async fn handle(&self, event: SqsEvent) -> SqsBatchResponse {
        let results: Vec<_> = futures::stream::iter(&event.records)
            .map(|m| self.handle_message(m))
            .buffered(BATCH_CONCURRENCY)
            .collect()
            .await;
        let mut response = SqsBatchResponse::default();
        for (message, result) in event.records.iter().zip(results) {
            if let Err(e) = result {
                tracing::error!(message_id = ?message.message_id, error = %e, "delivery work failed; the queue returns it");
                let mut f = BatchItemFailure::default();
                f.item_identifier = message.message_id.clone().unwrap_or_default();
                response.batch_item_failures.push(f);
            }
        }
        response
    }

    async fn handle_message(&self, message: &SqsMessage) -> Result<WorkOutcome, WorkerError> {
        let body = message.body.as_deref().unwrap_or_default();
        let work: DeliveryWork =
            serde_json::from_str(body).map_err(|e| WorkerError::Malformed(e.to_string()))?;
        self.process(&work).await
    }

    pub async fn process(&self, work: &DeliveryWork) -> Result<WorkOutcome, WorkerError> {
        let pk = keys::event_pk(&work.account_id, &work.change_id);
        let sk = keys::delivery_sk(&work.subscription_id);
        let Some(item) = self
            .clients
            .dynamo
            .get_item()
            .table_name(&self.config.delivery_table)
            .key("pk", s(&pk))
            .key("sk", s(&sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(StoreError::dynamo)?
            .item
        else {
            return Ok(WorkOutcome::Skipped("no such delivery"));
        };
        let delivery: DeliveryRecord = from_item(item)?;
        let now = self.clock.now();
        if !delivery.status.is_open() {
            return Ok(WorkOutcome::Skipped("already settled"));
        }
        if delivery.method.is_poll() {
            return Ok(WorkOutcome::Skipped("pull delivery"));
        }
        if delivery
            .not_before
            .is_some_and(|t| t > now.plus(EARLY_TOLERANCE))
        {
            return Ok(WorkOutcome::Skipped("not yet due"));
        }
        if lease_held(delivery.lease_until, now) {
            return Ok(WorkOutcome::Skipped("leased by another worker"));
        }
        let Some(token) = self.claim(&pk, &sk, &delivery, now).await? else {
            return Ok(WorkOutcome::Skipped("another worker claimed the attempt"));
        };
        let number = delivery.attempts + 1;
        let config = self
            .cache
            .get(
                &self.clients.dynamo,
                &self.config.delivery_table,
                &work.account_id,
                now,
            )
            .await?;
        let started = Instant::now();
        let result = self.attempt(&delivery, &config).await;
        let elapsed = started.elapsed();
        let attempt = AttemptRecord {
            number,
            at: now,
            class: result.class.as_str().to_string(),
            http_status: result.http_status,
            duration_ms: elapsed.as_millis() as u64,
            detail: result.detail.clone(),
        };
        let subscription = config
            .subscription(&delivery.subscription_id)
            .map(|c| &c.subscription);
        let decision = decide(&delivery, number, &result, subscription)?;
        let finished = self.clock.now();
        let claimed = Claimed {
            pk: &pk,
            sk: &sk,
            delivery: &delivery,
            token: &token,
        };
        let saved = match decision.status() {
            DeliveryStatus::Dead => {
                self.save_dead(&claimed, decision, &attempt, &config, finished)
                    .await?
            }
            _ => self.save(&claimed, decision, &attempt, finished).await?,
        };
        if !saved {
            return Ok(WorkOutcome::Skipped(
                "lease taken over before the outcome was saved",
            ));
        }
        if decision.status() == DeliveryStatus::Delivered {
            self.after_delivered(&delivery, &result).await?;
        }
        tracing::info!(
            delivery_id = %delivery.delivery_id,
            attempt = number,
            class = result.class.as_str(),
            http_status = ?result.http_status,
            status = %decision.status(),
            "delivery attempt"
        );
        Ok(WorkOutcome::Attempted {
            number,
            status: decision.status(),
        })
    }

    /// Claims attempt `attempts + 1`: only if nobody moved the delivery since it was read and no
    /// live lease exists. Returns the lease token, or `None` when another worker won.
    async fn claim(
        &self,
        pk: &str,
        sk: &str,
        d: &DeliveryRecord,
        now: Timestamp,
    ) -> Result<Option<String>, StoreError> {
        let token = uuid::Uuid::new_v4().to_string();
        let lease_until = now.plus(LEASE);
        // The claim leaves the `due` index alone (moving `due_at` there would bill two index
        // writes per attempt). If this worker dies, its message is not deleted and comes back
        // after the queue's visibility timeout (longer than the lease); should that message be
        // lost as well, a retry is found by the sweep when its `due_at` passes (REDISPATCH_GRACE
        // after the sweep published it) and a first attempt by the roll-up of its open event.
        let mut e = Expr::new()
            .name("#status", "status")
            .value(":status", s(d.status.to_string()))
            .value(":attempts", n(d.attempts))
            .value(":now", n(now.millis()))
            .value(":lease", n(lease_until.millis()))
            .value(":token", s(&token));
        e = e.value(":updated", n(now.millis()));
        let result = self
            .clients
            .dynamo
            .update_item()
            .table_name(&self.config.delivery_table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("SET lease_until = :lease, lease_token = :token, updated_at = :updated")
            .condition_expression("#status = :status AND attempts = :attempts AND (attribute_not_exists(lease_until) OR lease_until <= :now)")
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .send()
            .await;
        match result {
            Ok(_) => Ok(Some(token)),
            Err(err) if is_condition_failure(&err) => Ok(None),
            Err(err) => Err(StoreError::dynamo(err)),
        }
    }

    /// Calls the adapter the integration names, after checking that configuration still permits
    /// delivery (seed 000: subscription or account gone, or accepted event access absent → failed).
    async fn attempt(&self, d: &DeliveryRecord, config: &AccountConfig) -> AttemptResult {
        if config.account.is_none() {
            return AttemptResult::configuration_loss("the account is gone");
        }
        if config.subscription(&d.subscription_id).is_none() {
            return AttemptResult::configuration_loss("the subscription is gone");
        }
        let Some(integration) = config.integrations.get(&d.integration_id) else {
            return AttemptResult::configuration_loss("the integration is gone");
        };
        if !integration.event_access_accepted {
            return AttemptResult::configuration_loss("event access is not accepted");
        }
        let payload = d.payload.as_deref().unwrap_or("{}");
        match &integration.method {
            DeliveryMethod::Webhook => {
                let (Some(url), Some(secret)) =
                    (&integration.webhook_url, &integration.signing_secret)
                else {
                    return AttemptResult::configuration_loss(
                        "webhook URL or signing secret missing",
                    );
                };
                self.webhook
                    .deliver(url, secret, &d.delivery_id, payload, self.clock.now())
                    .await
            }
            DeliveryMethod::Internal => {
                let Some(handler) = &integration.handler else {
                    return AttemptResult::configuration_loss(
                        "internal integration names no handler",
                    );
                };
                let payload: serde_json::Value =
                    serde_json::from_str(payload).unwrap_or(serde_json::Value::Null);
                self.internal
                    .deliver(
                        handler,
                        InternalCall {
                            account_id: &d.account_id,
                            delivery_id: &d.delivery_id,
                            payload: &payload,
                        },
                    )
                    .await
            }
            DeliveryMethod::Poll => {
                AttemptResult::configuration_loss("the integration now pulls; push attempts stop")
            }
            DeliveryMethod::Unknown(value) => {
                AttemptResult::configuration_loss(UnknownDeliveryMethod(value.clone()).to_string())
            }
        }
    }

    /// The common part of every outcome write: the new status and attempt, the history entry,
    /// the lease released; conditional on still holding the lease and the status read.
    fn outcome_update(
        &self,
        c: &Claimed<'_>,
        decision: Decision,
        attempt: &AttemptRecord,
        now: Timestamp,
    ) -> Result<Update, WorkerError> {
        let (pk, sk, d, token) = (c.pk, c.sk, c.delivery, c.token);
        let (trigger, to) = decision.movement;
        let condition = DELIVERY_LIFECYCLE.expect(d.status, trigger, to)?;
        let mut e = Expr::new();
        let status_condition = e.status(&condition);
        let entry =
            serde_dynamo::to_attribute_value::<_, AttributeValue>(attempt).map_err(|err| {
                StoreError::Shape {
                    key: pk.into(),
                    message: err.to_string(),
                }
            })?;
        e = e
            .name("#st", "status")
            .value(":to", s(to.to_string()))
            .value(":n", n(attempt.number))
            .value(":now", n(now.millis()))
            .value(":entry", AttributeValue::L(vec![entry]))
            .value(":empty", AttributeValue::L(vec![]))
            .value(":token", s(token));
        if to.is_terminal() {
            // Terminal outcomes carry their retention (epoch seconds, DynamoDB TTL).
            e = e.value(":expires", n(delivery_expires_at(now).seconds()));
        }
        let mut set = vec![
            "#st = :to",
            "attempts = :n",
            "updated_at = :now",
            "attempt_log = list_append(if_not_exists(attempt_log, :empty), :entry)",
        ];
        let mut remove = vec!["lease_until", "lease_token"];
        match attempt.http_status {
            Some(code) => {
                e = e.value(":http", n(code));
                set.push("last_http_status = :http");
            }
            None => remove.push("last_http_status"),
        }
        match (&attempt.detail, to) {
            (_, DeliveryStatus::Delivered) | (None, _) => remove.push("last_error"),
            (Some(detail), _) => {
                e = e.value(":err", s(detail));
                set.push("last_error = :err");
            }
        }
        match to {
            DeliveryStatus::Retrying => {
                let next = now.plus(decision.retry_in.unwrap_or_default());
                e = e
                    .value(":next", n(next.millis()))
                    .value(":shard", s(keys::shard_of(&d.delivery_id)));
                set.push("not_before = :next");
                // Onto the `due` index (a first attempt is not on it): the sweep publishes it.
                set.push("due_shard = :shard");
                set.push("due_at = :next");
            }
            DeliveryStatus::Delivered => {
                set.push("delivered_at = :now");
                set.push("expires_at = :expires");
                remove.extend(["due_at", "due_shard", "not_before"]);
            }
            _ => {
                set.push("expires_at = :expires");
                // Dead or failed: off the due index, onto the account's needs-attention listing.
                e = e
                    .value(":attn", s(format!("ATTENTION#{}", d.account_id)))
                    .value(":attn_sort", s(keys::time_sort(now, &d.delivery_id)));
                set.push("list_key = :attn");
                set.push("list_sort = :attn_sort");
                remove.extend(["due_at", "due_shard", "not_before"]);
            }
        }
        let expression = format!("SET {} REMOVE {}", set.join(", "), remove.join(", "));
        Ok(Update::builder()
            .table_name(&self.config.delivery_table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(expression)
            .condition_expression(format!("({status_condition}) AND lease_token = :token"))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build()
            .map_err(|err| StoreError::Dynamo(err.to_string()))?)
    }

    /// Saves a delivered, retrying or failed outcome. `false` when the lease was lost.
    async fn save(
        &self,
        c: &Claimed<'_>,
        decision: Decision,
        attempt: &AttemptRecord,
        now: Timestamp,
    ) -> Result<bool, WorkerError> {
        let u = self.outcome_update(c, decision, attempt, now)?;
        let result = self
            .clients
            .dynamo
            .update_item()
            .table_name(u.table_name())
            .set_key(Some(u.key().clone()))
            .update_expression(u.update_expression())
            .set_condition_expression(u.condition_expression().map(str::to_string))
            .set_expression_attribute_names(u.expression_attribute_names().cloned())
            .set_expression_attribute_values(u.expression_attribute_values().cloned())
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(StoreError::dynamo(e).into()),
        }
    }

    /// Saves a dead outcome and adds one to its subscription's dead count in one transaction, so a
    /// redelivered message can never count twice (its outcome write fails on the lease). The add is
    /// atomic, so concurrent dead deliveries of one subscription never conflict; the pause check
    /// follows in [`Self::pause_if_due`].
    async fn save_dead(
        &self,
        c: &Claimed<'_>,
        decision: Decision,
        attempt: &AttemptRecord,
        config: &AccountConfig,
        now: Timestamp,
    ) -> Result<bool, WorkerError> {
        let d = c.delivery;
        let delivery_update = self.outcome_update(c, decision, attempt, now)?;
        let count_update = Update::builder()
            .table_name(&self.config.delivery_table)
            .key("pk", s(keys::account_pk(&d.account_id)))
            .key("sk", s(keys::subscription_sk(&d.subscription_id)))
            .update_expression("ADD consecutive_dead :one SET updated_at = :now")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":now", n(now.millis()))
            .build()
            .map_err(|err| StoreError::Dynamo(err.to_string()))?;
        let result = self
            .clients
            .dynamo
            .transact_write_items()
            .transact_items(
                TransactWriteItem::builder()
                    .update(delivery_update.clone())
                    .build(),
            )
            .transact_items(TransactWriteItem::builder().update(count_update).build())
            .send()
            .await;
        match result {
            Ok(_) => {}
            Err(e) if is_condition_failure(&e) => {
                if !self.still_leased(c).await? {
                    return Ok(false);
                }
                // The subscription is gone: nothing to count, the delivery is dead all the same.
                return self.save(c, decision, attempt, now).await;
            }
            Err(e) => return Err(StoreError::dynamo(e).into()),
        }
        self.pause_if_due(d, config, now).await?;
        Ok(true)
    }

    /// Pauses the subscription once its dead count reaches fifty, together with the one
    /// administrator notice: the pause is conditional on the subscription still being active, so
    /// of several workers that see the count at fifty exactly one pauses and requests the notice.
    async fn pause_if_due(
        &self,
        d: &DeliveryRecord,
        config: &AccountConfig,
        now: Timestamp,
    ) -> Result<(), WorkerError> {
        let Some(sub) = self
            .read_subscription(&d.account_id, &d.subscription_id)
            .await?
        else {
            return Ok(());
        };
        if !should_auto_pause(sub.consecutive_dead, sub.status) {
            return Ok(());
        }
        let pause = SUBSCRIPTION_LIFECYCLE.expect(
            sub.status,
            SubscriptionTrigger::AutoPause,
            SubscriptionStatus::Paused,
        )?;
        let mut e = Expr::new()
            .value(":paused", s(SubscriptionStatus::Paused.to_string()))
            .value(":now", n(now.millis()))
            .value(":threshold", n(MAX_CONSECUTIVE_DEAD));
        let status_condition = e.status(&pause);
        let admins = config
            .account
            .as_ref()
            .map(|a| a.admin_emails.clone())
            .unwrap_or_default();
        let notice = subscription_paused_notice(
            &d.account_id,
            &d.subscription_id,
            &admins,
            sub.consecutive_dead,
            now,
        );
        let paused = self
            .clients
            .dynamo
            .transact_write_items()
            .transact_items(
                TransactWriteItem::builder()
                    .update(
                        Update::builder()
                            .table_name(&self.config.delivery_table)
                            .key("pk", s(keys::account_pk(&d.account_id)))
                            .key("sk", s(keys::subscription_sk(&d.subscription_id)))
                            .update_expression(
                                "SET #status = :paused, paused_at = :now, updated_at = :now",
                            )
                            .condition_expression(format!(
                                "({status_condition}) AND consecutive_dead >= :threshold"
                            ))
                            .set_expression_attribute_names(e.names_opt())
                            .set_expression_attribute_values(e.values_opt())
                            .build()
                            .map_err(|err| StoreError::Dynamo(err.to_string()))?,
                    )
                    .build(),
            )
            .transact_items(
                TransactWriteItem::builder()
                    .put(
                        Put::builder()
                            .table_name(&self.config.notification_table)
                            .set_item(Some(notice_item(&notice)?))
                            .condition_expression("attribute_not_exists(pk)")
                            .build()
                            .map_err(|err| StoreError::Dynamo(err.to_string()))?,
                    )
                    .build(),
            )
            .send()
            .await;
        match paused {
            Ok(_) => {
                tracing::warn!(
                    subscription_id = %d.subscription_id,
                    dead_count = sub.consecutive_dead,
                    "subscription paused after consecutive dead deliveries; administrator notice requested"
                );
                Ok(())
            }
            // Another worker paused it first (and requested the notice), or a success reset it.
            Err(e) if is_condition_failure(&e) => Ok(()),
            Err(e) => Err(StoreError::dynamo(e).into()),
        }
    }

    async fn read_subscription(
        &self,
        account_id: &str,
        subscription_id: &str,
    ) -> Result<Option<Subscription>, StoreError> {
        let item = self
            .clients
            .dynamo
            .get_item()
            .table_name(&self.config.delivery_table)
            .key("pk", s(keys::account_pk(account_id)))
            .key("sk", s(keys::subscription_sk(subscription_id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(StoreError::dynamo)?
            .item;
        item.map(from_item).transpose()
    }

    async fn still_leased(&self, c: &Claimed<'_>) -> Result<bool, StoreError> {
        let (pk, sk, token) = (c.pk, c.sk, c.token);
        let item = self
            .clients
            .dynamo
            .get_item()
            .table_name(&self.config.delivery_table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .consistent_read(true)
            .projection_expression("lease_token")
            .send()
            .await
            .map_err(StoreError::dynamo)?
            .item;
        Ok(item
            .and_then(|i| i.get("lease_token").and_then(|v| v.as_s().ok()).cloned())
            .is_some_and(|t| t == token))
    }

    /// After a delivery: the subscription's dead run ends, and a built-in handler's success is
    /// recorded on the event.
    async fn after_delivered(
        &self,
        d: &DeliveryRecord,
        result: &AttemptResult,
    ) -> Result<(), StoreError> {
        // A cheap read first: most successes find the count at zero and write nothing.
        let current = self
            .clients
            .dynamo
            .get_item()
            .table_name(&self.config.delivery_table)
            .key("pk", s(keys::account_pk(&d.account_id)))
            .key("sk", s(keys::subscription_sk(&d.subscription_id)))
            .projection_expression("consecutive_dead")
            .send()
            .await
            .map_err(StoreError::dynamo)?
            .item
            .and_then(|i| {
                i.get("consecutive_dead")
                    .and_then(|v| v.as_n().ok())
                    .and_then(|v| v.parse::<u32>().ok())
            })
            .unwrap_or(0);
        if current > 0 {
            let reset = self
                .clients
                .dynamo
                .update_item()
                .table_name(&self.config.delivery_table)
                .key("pk", s(keys::account_pk(&d.account_id)))
                .key("sk", s(keys::subscription_sk(&d.subscription_id)))
                .update_expression("SET consecutive_dead = :zero")
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_values(":zero", n(0))
                .send()
                .await;
            if let Err(e) = reset {
                if !is_condition_failure(&e) {
                    return Err(StoreError::dynamo(e));
                }
            }
        }
        if let Some(internal_result) = &result.internal_result {
            let condition = INTERNAL_LIFECYCLE
                .condition(InternalTrigger::RecordInternalResult, InternalStatus::Done)
                .map_err(|e| StoreError::Dynamo(e.to_string()))?;
            let mut e = Expr::new()
                .name("#internal", "internal_status")
                .value(":done", s(InternalStatus::Done.to_string()))
                .value(":result", s(internal_result.to_string()));
            let status_condition = e.status(&condition).replace("#status", "#internal");
            e.names.remove("#status");
            let written = self
                .clients
                .dynamo
                .update_item()
                .table_name(&self.config.delivery_table)
                .key("pk", s(keys::event_pk(&d.account_id, &d.change_id)))
                .key("sk", s(keys::EVENT_SK))
                .update_expression("SET #internal = :done, internal_result = :result")
                .condition_expression(format!("attribute_exists(pk) AND (attribute_not_exists(#internal) OR {status_condition})"))
                .set_expression_attribute_names(e.names_opt())
                .set_expression_attribute_values(e.values_opt())
                .send()
                .await;
            if let Err(e) = written {
                if !is_condition_failure(&e) {
                    return Err(StoreError::dynamo(e));
                }
            }
        }
        Ok(())
    }
}

/// A delivery whose attempt this worker holds the lease of.
struct Claimed<'a> {
    pk: &'a str,
    sk: &'a str,
    delivery: &'a DeliveryRecord,
    token: &'a str,
}

/// The decided move of one attempt and, for a retry, when the next one is due.
#[derive(Debug, Clone, Copy)]
struct Decision {
    movement: DeliveryMove,
    /// For `retrying`: the wait before the next attempt.
    retry_in: Option<Duration>,
}

impl Decision {
    fn status(&self) -> DeliveryStatus {
        self.movement.1
    }
}

/// The pure decision for an attempt's result under the subscription's retry policy.
fn decide(
    d: &DeliveryRecord,
    number: u32,
    result: &AttemptResult,
    subscription: Option<&Subscription>,
) -> Result<Decision, WorkerError> {
    let policy = subscription
        .map(|s| s.retry_policy.clone())
        .unwrap_or_default();
    let (movement, retry_in) = match result.class {
        AttemptClass::Success => (lifecycle::after_success(d.status)?, None),
        AttemptClass::Permanent => (lifecycle::after_permanent_failure(d.status)?, None),
        AttemptClass::ConfigurationLoss => (lifecycle::after_configuration_loss(d.status)?, None),
        AttemptClass::Transient { retry_after } => {
            match policy.after_failed_attempt(number, retry_after) {
                RetryDecision::RetryAfter(wait) => (
                    lifecycle::after_transient_failure(d.status, true)?,
                    Some(wait),
                ),
                RetryDecision::Exhausted => {
                    (lifecycle::after_transient_failure(d.status, false)?, None)
                }
            }
        }
    };
    Ok(Decision { movement, retry_in })
}
