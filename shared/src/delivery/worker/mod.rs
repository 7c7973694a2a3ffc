//! The delivery worker (`docs/lifecycles.md#integration-delivery`, the worker's rows).
//!
//! For each message: claim the delivery's next numbered attempt with a sixty-second lease in one
//! conditional write that answers with the delivery (no read first), call the adapter with the
//! stable delivery id, classify the result and write the outcome conditionally on still holding
//! the lease. Two copies of one message cannot both call the adapter for one attempt; a worker
//! that dies leaves a lease that lapses, after which the dispatcher's sweep publishes the delivery
//! again and another worker claims the same attempt number. A dead outcome and its subscription's
//! dead count are one transaction, so a redelivered message can never count twice, and the
//! fiftieth pauses the subscription and requests exactly one administrator notice.

pub mod adapters;
pub mod endpoint_auth;
pub mod internal;
pub mod rate_limit;
mod test_event;
pub mod webhook;

use crate::aws::Clients;
use crate::clock::Clock;
use crate::config::Config;
use crate::data_keys::SecretOpener;
use crate::delivery::dispatch::publish::{works_in, Outgoing};
use crate::domain::classify::AttemptClass;
use crate::domain::integration_delivery::{
    self as lifecycle, lease_held, DeliveryMove, DeliveryStatus, UnknownDeliveryMethod,
};
use crate::domain::retry::RetryDecision;
use crate::domain::ssrf::TargetPolicy;
use crate::domain::subscription::{should_auto_pause, SubscriptionStatus};
use crate::domain::target::Target;
use crate::domain::time::Timestamp;
use crate::domain::trace_context::TraceParent;
use crate::ids::AccountId;
use crate::store;
use crate::store::account_config::{AccountConfig, ConfigCache};
use crate::store::delivery::{AttemptRecord, Claim, Delivery, DeliveryWork, Outcome};
use crate::store::notice::{notice_item, subscription_gone_notice, subscription_paused_notice};
use crate::store::subscription::Subscription;
use crate::store::write::{send, send_resolving_conflicts, Write, Written};
use crate::store::StoreError;
use adapters::AttemptResult;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures::StreamExt;
use internal::{InternalCall, InternalRegistry};
use std::sync::Arc;
use std::time::{Duration, Instant};
use webhook::WebhookAdapter;

/// The processing lease (sixty seconds, `docs/lifecycles.md#integration-delivery`).
pub const LEASE: Duration = crate::domain::integration_delivery::PROCESSING_LEASE;
/// How long account configuration (and the integration's credentials) is cached per container.
pub const CONFIG_LEASE: Duration = Duration::from_secs(60);
/// Messages of one batch worked on at once (the event source hands over up to a hundred).
pub const BATCH_CONCURRENCY: usize = 25;
/// A message may arrive this much before its attempt is due (SQS delays are whole seconds, hosts'
/// clocks differ slightly) and still run; an earlier one is a stray duplicate and is dropped.
pub const EARLY_TOLERANCE: Duration = Duration::from_secs(2);
/// Messages of one subscription (one endpoint) worked on at once within a batch: a hanging
/// endpoint holds at most this many of the [`BATCH_CONCURRENCY`] slots, the others go on.
pub const PER_SUBSCRIPTION_CONCURRENCY: usize = 10;
/// Kept free before the invocation's deadline beyond an attempt's own timeout, for the store calls
/// around the attempt (claim, outcome, dead count): an attempt starts only if its timeout
/// plus this much fits before the deadline.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(2);
/// Attempts kept on a delivery's history; older ones are summarised by the count.
pub const ATTEMPT_LOG_LIMIT: usize = 30;
/// How long the rest of a batch's messages for an endpoint that has just timed out wait, as
/// copies on the delivery queue with this SQS delay, before they are tried again (unclaimed, so
/// no attempt number is spent on them): the endpoint's next batch probes it again.
pub const ENDPOINT_DEFERRAL: Duration = Duration::from_secs(30);
/// An attempt that took at least this share (percent) of the webhook timeout counts as timed out
/// for the rest of its endpoint's messages in the batch: an endpoint that answers just under the
/// timeout holds a batch as long as one that never answers, so it is deferred the same way.
pub const SLOW_ATTEMPT_PERCENT: u32 = 80;
/// The SQS delay of the copy of a message handed back for lack of time: the copy is a new
/// message (its receives start at none), so handing it back never brings it nearer the
/// dead-letter queue.
pub const HAND_BACK_DELAY: Duration = Duration::from_secs(1);

/// Whether an attempt that took `elapsed` ran long enough, under `timeout`, to count as its
/// endpoint timing out ([`SLOW_ATTEMPT_PERCENT`]).
pub fn ran_long(elapsed: Duration, timeout: Duration) -> bool {
    elapsed * 100 >= timeout * SLOW_ATTEMPT_PERCENT
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("message body is not delivery work: {0}")]
    Malformed(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid move: {0}")]
    Transition(#[from] crate::domain::lifecycle::TransitionError),
}

/// One delivery of a batch, or a message that is not delivery work.
struct Item {
    /// The message (index into the batch's records) it came in.
    record: usize,
    /// The delivery's work; `None`: the message is handled as a whole (a test event, or
    /// malformed).
    work: Option<DeliveryWork>,
}

/// What became of one item of a batch.
enum Handled {
    Done(Result<WorkOutcome, WorkerError>),
    /// Not started: its attempt could not have finished before the invocation's deadline.
    HandedBack,
    /// Not started: an attempt to its endpoint timed out earlier in the batch, or its
    /// integration's rate limit is reached for this second; a copy delayed this long is put on
    /// the queue (handed back instead, should that send fail).
    Deferred(Duration),
}

/// What handling one message came to (all of them are successes for the queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkOutcome {
    /// The attempt ran and its outcome was saved.
    Attempted { number: u32, status: DeliveryStatus },
    /// Nothing to do: gone, already settled, pull delivery, not yet due, leased by another worker,
    /// or another worker won the claim or took over the lease.
    Skipped(&'static str),
    /// A test event was sent and its outcome saved ([`crate::store::test_event`]).
    TestEventSent,
    /// The claim was refused because the delivery's attempts have reached its subscription's Max
    /// Retries (lowered since its last attempt): it was ended dead without a further attempt.
    EndedExhausted { attempts: u32 },
    /// Not claimed: its integration's rate limit is reached for this second
    /// ([`rate_limit`]); the batch handler puts a delayed copy of its message on the queue.
    OverRateLimit,
}

pub struct DeliveryWorker {
    clients: Clients,
    config: Config,
    clock: Arc<dyn Clock>,
    webhook: WebhookAdapter,
    internal: InternalRegistry,
    cache: ConfigCache,
    /// Unwraps the signing secrets' data keys: one KMS `Decrypt` per key per container.
    opener: SecretOpener,
    /// Whether an endpoint that timed out in a batch has the rest of its messages deferred
    /// ([`ENDPOINT_DEFERRAL`]); off only to measure the behaviour without that bound.
    endpoint_bound: bool,
    /// Counts the starts of rate-limited integrations.
    rate: rate_limit::RateGate,
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
            config,
            clock,
            webhook,
            internal,
            cache: ConfigCache::new(CONFIG_LEASE),
            opener: SecretOpener::new(clients.kms.clone()),
            clients,
            endpoint_bound: true,
            rate: Default::default(),
        }
    }

    /// Without the per-batch bound on a timed-out endpoint: every message of a batch is attempted
    /// however many of its endpoint's attempts have timed out already (the behaviour before the
    /// bound, for the bench's noisy-neighbour comparison and for tests of other limits).
    pub fn without_endpoint_bound(mut self) -> Self {
        self.endpoint_bound = false;
        self
    }

    /// Drops cached account configuration (tests change it and want the change seen at once).
    pub fn forget_config(&self, account_id: &AccountId) {
        self.cache.forget(account_id);
    }

    /// The Lambda handler without a deadline (see [`Self::handle_until`]).
    pub async fn handle(&self, event: SqsEvent) -> SqsBatchResponse {
        self.handle_until(event, None).await
    }

    /// The Lambda handler. A message carries one delivery's work or up to
    /// [`PACKED`](crate::delivery::dispatch::publish::PACKED) of one account's; each delivery is
    /// handled on its own, as a message of its own would be, and what follows says "message" for
    /// it. A message of them fails (and comes back whole) when one of its deliveries fails; its
    /// others are then refused by their claims. Messages are handled concurrently, in order as
    /// slots free up, at most [`PER_SUBSCRIPTION_CONCURRENCY`] of one subscription at once (so one hanging
    /// endpoint cannot hold every slot of the batch). Once an attempt to a subscription's endpoint
    /// has run for the whole webhook timeout, the batch's messages for it not yet started are
    /// deferred: sent again with an SQS delay of [`ENDPOINT_DEFERRAL`] and acknowledged, unread
    /// and unclaimed (a hanging endpoint costs a batch one timeout, not one per
    /// [`PER_SUBSCRIPTION_CONCURRENCY`] of its messages). A message fails (and comes back) only
    /// when it is malformed or storage could not be reached, or when it was not started: with
    /// the invocation's `deadline`, a message whose attempt could not finish before it (the
    /// webhook timeout and [`DEADLINE_MARGIN`] from now) is handed back unread and unclaimed, so
    /// no attempt number is spent on it and the invocation ends before its timeout. A handed-back
    /// message is sent again as a new message ([`HAND_BACK_DELAY`]) and acknowledged, so that
    /// running out of time never counts as a receive toward the dead-letter queue; only when that
    /// copy cannot be sent does it fail (and come back). A deferred message whose copy could not
    /// be sent fails too. An attempt that ran for most of the timeout ([`ran_long`]) defers its
    /// endpoint's waiting messages as a timeout does. A message of a rate-limited integration
    /// whose second is full ([`rate_limit`]) is deferred too, alone, with a delay of a second
    /// or two: it holds its slot for one conditional write, so it never holds up another's.
    pub async fn handle_until(
        &self,
        event: SqsEvent,
        deadline: Option<Instant>,
    ) -> SqsBatchResponse {
        let budget = self.webhook.timeout() + DEADLINE_MARGIN;
        let records = &event.records;
        // Every delivery a message asks for is an item of its own (the dispatcher packs up to
        // `PACKED` of an account's in one message); a message that is not delivery work (a test
        // event, or malformed) is one item, handled as a whole.
        let items: Vec<Item> = records
            .iter()
            .enumerate()
            .flat_map(
                |(record, m)| match works_in(m.body.as_deref().unwrap_or_default()) {
                    Some(works) => works
                        .into_iter()
                        .map(|w| Item {
                            record,
                            work: Some(w),
                        })
                        .collect(),
                    None => vec![Item { record, work: None }],
                },
            )
            .collect();
        let subscriptions: Vec<Option<String>> = items
            .iter()
            .map(|it| it.work.as_ref().map(|w| w.subscription_id.to_string()))
            .collect();
        let mut results: Vec<Option<Handled>> = items.iter().map(|_| None).collect();
        let mut waiting: std::collections::VecDeque<usize> = (0..items.len()).collect();
        let mut running: std::collections::HashMap<&str, usize> = Default::default();
        let mut in_flight = futures::stream::FuturesUnordered::new();
        loop {
            while in_flight.len() < BATCH_CONCURRENCY {
                let free = |i: &usize| {
                    subscriptions[*i].as_deref().is_none_or(|s| {
                        running.get(s).copied().unwrap_or(0) < PER_SUBSCRIPTION_CONCURRENCY
                    })
                };
                let Some(next) = waiting.iter().position(free) else {
                    break;
                };
                let i = waiting.remove(next).expect("a waiting item");
                if let Some(s) = subscriptions[i].as_deref() {
                    *running.entry(s).or_default() += 1;
                }
                let item = &items[i];
                in_flight.push(async move {
                    // Checked when the item's turn comes, not when the batch starts.
                    if deadline.is_some_and(|d| Instant::now() + budget > d) {
                        return (i, Handled::HandedBack, false);
                    }
                    let handled = match &item.work {
                        Some(work) => self.process_timed(work).await,
                        None => self.handle_message(&records[item.record]).await,
                    };
                    let (done, timed_out) = match handled {
                        Ok((outcome, timed_out)) => (Ok(outcome), timed_out),
                        Err(e) => (Err(e), false),
                    };
                    (i, Handled::Done(done), timed_out)
                });
            }
            let Some((i, handled, timed_out)) = in_flight.next().await else {
                break;
            };
            if let Some(s) = subscriptions[i].as_deref() {
                if let Some(n) = running.get_mut(s) {
                    *n -= 1;
                }
                if timed_out && self.endpoint_bound {
                    waiting.retain(|&j| {
                        let same = subscriptions[j].as_deref() == Some(s);
                        if same {
                            results[j] = Some(Handled::Deferred(ENDPOINT_DEFERRAL));
                        }
                        !same
                    });
                }
            }
            results[i] = Some(match handled {
                Handled::Done(Ok(WorkOutcome::OverRateLimit)) => {
                    Handled::Deferred(crate::domain::rate_limit::deferral(rand::random()))
                }
                other => other,
            });
        }
        let deferred: Vec<(usize, Duration)> = (0..items.len())
            .filter_map(|i| match results[i] {
                Some(Handled::Deferred(delay)) => Some((i, delay)),
                _ => None,
            })
            .collect();
        let unsent = self.defer(&items, &deferred).await;
        let handed: Vec<usize> = (0..items.len())
            .filter(|&i| matches!(results[i], Some(Handled::HandedBack) | None))
            .collect();
        let not_resent = self.hand_back(records, &items, &handed).await;
        // A message fails (and the queue returns it, every delivery in it) when one of its items
        // does: storage could not be reached, or its copy could not be sent. Its other items,
        // done or copied, are then repeated by the returned message: their claims refuse them.
        let mut failed = vec![false; records.len()];
        let mut handed_back = 0;
        for (i, (item, result)) in items.iter().zip(results).enumerate() {
            let message = &records[item.record];
            match result {
                Some(Handled::Done(Ok(_))) => continue,
                Some(Handled::Deferred(_)) if !unsent.contains(&i) => continue,
                Some(Handled::HandedBack) | None if !not_resent.contains(&i) => {
                    handed_back += 1;
                    continue;
                }
                Some(Handled::Done(Err(e))) => {
                    tracing::error!(message_id = message.message_id.as_deref(), error = %e, "delivery work failed; the queue returns it");
                }
                Some(Handled::HandedBack | Handled::Deferred(_)) | None => handed_back += 1,
            }
            failed[item.record] = true;
        }
        let mut response = SqsBatchResponse::default();
        for (message, _) in records.iter().zip(failed).filter(|(_, f)| *f) {
            let mut f = BatchItemFailure::default();
            f.item_identifier = message.message_id.clone().unwrap_or_default();
            response.batch_item_failures.push(f);
        }
        // A rate limit's waiting messages are the limit working, not trouble: a DEBUG line; a
        // timed-out endpoint's are a WARN.
        let timed_out = deferred
            .iter()
            .filter(|(_, d)| *d == ENDPOINT_DEFERRAL)
            .count();
        if timed_out > 0 {
            tracing::warn!(
                deferred = timed_out,
                not_sent = unsent.len(),
                deliveries = items.len(),
                "an endpoint timed out in this batch; its other deliveries wait on the queue, unclaimed"
            );
        }
        if deferred.len() > timed_out {
            tracing::debug!(
                deferred = deferred.len() - timed_out,
                not_sent = unsent.len(),
                deliveries = items.len(),
                "rate limits were reached in this batch; those deliveries wait on the queue, unclaimed"
            );
        }
        if handed_back > 0 {
            tracing::warn!(
                handed_back,
                not_resent = not_resent.len(),
                deliveries = items.len(),
                "the invocation's deadline left no time for these attempts; copies wait on the queue, unclaimed"
            );
        }
        response
    }

    /// Sends copies of the items `handed` (indexes into `items`) back to the delivery queue,
    /// [`HAND_BACK_DELAY`] later, ten to a request: a delivery's work as a message of its own
    /// (its account as the group), anything else as its message came. Returns the indexes whose
    /// copy was not sent.
    async fn hand_back(
        &self,
        records: &[SqsMessage],
        items: &[Item],
        handed: &[usize],
    ) -> Vec<usize> {
        let mut unsent = Vec::new();
        for chunk in handed.chunks(10) {
            let copies: Vec<Outgoing> = chunk
                .iter()
                .map(|&i| {
                    let message = &records[items[i].record];
                    match &items[i].work {
                        Some(work) => Outgoing {
                            body: serde_json::to_string(work).unwrap_or_default(),
                            group: Some(work.account_id.to_string()),
                            delay: HAND_BACK_DELAY,
                        },
                        None => Outgoing {
                            body: message.body.clone().unwrap_or_default(),
                            group: message.attributes.get("MessageGroupId").cloned(),
                            delay: HAND_BACK_DELAY,
                        },
                    }
                })
                .collect();
            let failed = crate::delivery::dispatch::publish::publish_messages(
                &self.clients.sqs,
                &self.config.delivery_queue_url,
                &copies,
            )
            .await;
            unsent.extend(failed.into_iter().map(|k| chunk[k]));
        }
        unsent
    }

    /// Puts copies of the items `deferred` (indexes into `items`, with their delays) on the
    /// delivery queue, a delivery's work to a message, ten to a request. Returns the indexes
    /// whose copy was not sent.
    async fn defer(&self, items: &[Item], deferred: &[(usize, Duration)]) -> Vec<usize> {
        let mut unsent = Vec::new();
        for chunk in deferred.chunks(10) {
            let sendable: Vec<(usize, (DeliveryWork, Duration))> = chunk
                .iter()
                .filter_map(|&(i, delay)| Some((i, (items[i].work.clone()?, delay))))
                .collect();
            let entries: Vec<(DeliveryWork, Duration)> =
                sendable.iter().map(|(_, e)| e.clone()).collect();
            let failed = crate::delivery::dispatch::publish(
                &self.clients.sqs,
                &self.config.delivery_queue_url,
                &entries,
            )
            .await;
            unsent.extend(failed.into_iter().map(|k| sendable[k].0));
        }
        unsent
    }

    /// A message's work, and whether its attempt ran long ([`ran_long`]).
    async fn handle_message(
        &self,
        message: &SqsMessage,
    ) -> Result<(WorkOutcome, bool), WorkerError> {
        let body = message.body.as_deref().unwrap_or_default();
        let work: DeliveryWork = match serde_json::from_str(body) {
            Ok(work) => work,
            // Not delivery work: a test event's message, or malformed.
            Err(e) => {
                return match serde_json::from_str::<crate::store::test_event::TestEventWork>(body) {
                    Ok(t) => Ok((self.send_test_event(&t.test_event).await?, false)),
                    Err(_) => Err(WorkerError::Malformed(e.to_string())),
                }
            }
        };
        self.process_timed(&work).await
    }

    pub async fn process(&self, work: &DeliveryWork) -> Result<WorkOutcome, WorkerError> {
        Ok(self.process_timed(work).await?.0)
    }

    /// [`Self::process`], also telling whether the attempt ran long: for the whole webhook timeout
    /// or just under it ([`ran_long`]: the endpoint hangs or is that slow).
    async fn process_timed(&self, work: &DeliveryWork) -> Result<(WorkOutcome, bool), WorkerError> {
        let skipped = |why| Ok((WorkOutcome::Skipped(why), false));
        let table = &self.config.delivery_table;
        let dynamo = &self.clients.dynamo;
        let now = self.clock.now();
        let token = uuid::Uuid::new_v4().to_string();
        // The account's configuration (cached per container) comes first: the claim's condition
        // needs the subscription's Max Retries. Without a subscription there is no bound to
        // apply; the attempt is then refused as a configuration loss.
        let config = self.cache.get(dynamo, table, &work.account_id, now).await?;
        let max_attempts = config
            .subscription(&work.subscription_id)
            .map_or(u32::MAX, |c| c.subscription.retry_policy.max_attempts());
        if let Some((integration, limit)) = rate_limit::limited(&config, work) {
            if !self
                .rate
                .admit(dynamo, table, integration, limit, now)
                .await
            {
                return Ok((WorkOutcome::OverRateLimit, false));
            }
        }
        let due_by = now.plus(EARLY_TOLERANCE);
        let claim = store::delivery::claim(table, work, &token, now, LEASE, due_by, max_attempts)?;
        let delivery = match Claim::of(send(dynamo, claim).await?)? {
            Claim::Claimed(d) => d,
            // Refused can also be our own claim: applied, its answer lost, and the SDK's retry of
            // it refused by the lease it had just written. The token tells.
            Claim::Refused(Some(d)) if d.lease_token.as_deref() == Some(token.as_str()) => d,
            Claim::Refused(Some(d)) if exhausted(&d, now, max_attempts) => {
                return self.end_exhausted(&d, max_attempts, &config).await;
            }
            Claim::Refused(d) => return skipped(why_not_claimed(d.as_ref(), now)),
        };
        let number = delivery.attempts + 1;
        let subscription = config
            .subscription(&delivery.subscription_id)
            .map(|c| &c.subscription);
        let rules = subscription
            .map(Subscription::answer_rules)
            .unwrap_or_default();
        let started = Instant::now();
        let mut result = self.attempt(&delivery, &config).await;
        result.class = rules.class_of(result.class, result.http_status);
        let elapsed = started.elapsed();
        let timed_out = ran_long(elapsed, self.webhook.timeout());
        let attempt = AttemptRecord {
            number,
            at: now,
            class: result.class.as_str().to_string(),
            http_status: result.http_status,
            duration_ms: elapsed.as_millis() as u64,
            detail: result.detail.clone(),
            error: result.error.map(str::to_owned),
        };
        let decision = decide(&delivery, number, &result, subscription)?;
        let outcome = Outcome {
            movement: decision.movement,
            retry_in: decision.retry_in,
            attempt: &attempt,
        };
        let finished = self.clock.now();
        let saved = match decision.status() {
            DeliveryStatus::Dead => {
                let gone = rules.pauses_subscription(result.http_status);
                self.save_dead_and_count(&delivery, &token, &outcome, &config, gone, finished)
                    .await?
            }
            _ => {
                let w =
                    store::delivery::save_outcome(table, &delivery, &token, &outcome, finished)?;
                send(dynamo, w).await?.applied() || self.outcome_landed(&delivery, &attempt).await?
            }
        };
        if !saved {
            return skipped("lease taken over before the outcome was saved");
        }
        if decision.status() == DeliveryStatus::Delivered {
            self.after_delivered(&delivery, &result).await?;
        }
        log_attempt(&delivery, number, &result, decision.status());
        Ok((
            WorkOutcome::Attempted {
                number,
                status: decision.status(),
            },
            timed_out,
        ))
    }

    /// Calls the adapter the integration names, after checking that configuration still permits
    /// delivery (subscription or account gone, or accepted event access absent → failed,
    /// `docs/lifecycles.md#integration-delivery`).
    async fn attempt(&self, d: &Delivery, config: &AccountConfig) -> AttemptResult {
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
        match &integration.target {
            Target::Webhook { url, secret } => {
                let ids = (&integration.account_id, &integration.integration_id);
                let (id, now) = (d.delivery_id.as_str(), self.clock.now());
                // The claimed delivery still counts the attempts before this one.
                let trace = TraceParent::of_attempt(
                    d.change_id.as_str(),
                    d.trace_id.as_deref(),
                    id,
                    d.attempts + 1,
                );
                let message = webhook::Message {
                    id,
                    payload,
                    traceparent: &trace.header_value(),
                };
                let endpoint = &integration.endpoint;
                self.webhook
                    .send_signed(&self.opener, ids, url, secret, endpoint, message, now)
                    .await
            }
            Target::Internal { handler } => {
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
            Target::Poll => {
                AttemptResult::configuration_loss("the integration now pulls; push attempts stop")
            }
            Target::Unknown(value) => {
                AttemptResult::configuration_loss(UnknownDeliveryMethod(value.clone()).to_string())
            }
            Target::Incomplete(gap) => AttemptResult::configuration_loss(gap.to_string()),
        }
    }

    /// Ends dead, without a further attempt, a delivery the claim refused because its attempts
    /// have reached Max Retries ([`exhausted`]); counted toward the subscription's pause like any
    /// dead outcome, in one transaction. Refused: another worker ended it, or it moved.
    async fn end_exhausted(
        &self,
        d: &Delivery,
        max_attempts: u32,
        config: &AccountConfig,
    ) -> Result<(WorkOutcome, bool), WorkerError> {
        let table = &self.config.delivery_table;
        let dynamo = &self.clients.dynamo;
        let now = self.clock.now();
        let end = store::delivery::end_exhausted(table, d, max_attempts, now)?;
        let count = store::subscription::count_dead(table, &d.account_id, &d.subscription_id, now)?;
        if !send_resolving_conflicts(dynamo, Write::all([end, count])?)
            .await?
            .applied()
        {
            return Ok((WorkOutcome::Skipped("attempts reached Max Retries"), false));
        }
        self.pause_if_due(d, config, false, now).await?;
        tracing::info!(
            delivery_id = %d.delivery_id,
            account_id = %d.account_id,
            subscription_id = %d.subscription_id,
            attempts = d.attempts,
            max_attempts,
            "delivery ended dead: attempts reached Max Retries"
        );
        Ok((
            WorkOutcome::EndedExhausted {
                attempts: d.attempts,
            },
            false,
        ))
    }

    /// Saves a dead outcome and adds one to its subscription's dead count in one transaction, so a
    /// redelivered message can never count twice (its outcome write fails on the lease). A
    /// transaction that meets a concurrent one is tried again (nothing of it was written); only a
    /// refused condition is a decision: the lease was lost, or the subscription is gone (then the
    /// delivery is dead all the same, with nothing to count). The pause check follows in
    /// [`Self::pause_if_due`] (`gone`: the answer pauses the subscription at once). `false` when
    /// the lease was lost.
    async fn save_dead_and_count(
        &self,
        d: &Delivery,
        token: &str,
        outcome: &Outcome<'_>,
        config: &AccountConfig,
        gone: bool,
        now: Timestamp,
    ) -> Result<bool, WorkerError> {
        let table = &self.config.delivery_table;
        let dynamo = &self.clients.dynamo;
        let save = store::delivery::save_outcome(table, d, token, outcome, now)?;
        let count = store::subscription::count_dead(table, &d.account_id, &d.subscription_id, now)?;
        match send_resolving_conflicts(dynamo, Write::all([save.clone(), count])?).await? {
            Written::Applied(_) => {}
            _ => {
                if store::delivery::lease_token(dynamo, table, d)
                    .await?
                    .as_deref()
                    != Some(token)
                {
                    // Lost, or ours already (applied, its answer lost): then it still counts
                    // toward the pause.
                    if !self.outcome_landed(d, outcome.attempt).await? {
                        return Ok(false);
                    }
                } else if !send(dynamo, save).await?.applied() {
                    return Ok(false);
                }
            }
        }
        self.pause_if_due(d, config, gone, now).await?;
        Ok(true)
    }

    /// Whether a refused outcome write is in fact ours: applied, its answer lost, and the SDK's
    /// retry of it refused because the first try had released the lease. The attempt record
    /// (number, claim time, duration, result) on the delivery tells ours from a takeover's.
    async fn outcome_landed(
        &self,
        d: &Delivery,
        attempt: &AttemptRecord,
    ) -> Result<bool, WorkerError> {
        let stored =
            store::delivery::get(&self.clients.dynamo, &self.config.delivery_table, &d.work())
                .await?;
        Ok(stored.is_some_and(|s| s.attempt_log.iter().any(|a| a == attempt)))
    }

    /// Pauses the subscription once its dead count reaches fifty, or at once when `gone` (a 410
    /// Gone to a subscription that pauses on gone), together with the one administrator notice
    /// (see [`store::subscription::auto_pause`] and [`store::subscription::pause_on_gone`]).
    async fn pause_if_due(
        &self,
        d: &Delivery,
        config: &AccountConfig,
        gone: bool,
        now: Timestamp,
    ) -> Result<(), WorkerError> {
        let table = &self.config.delivery_table;
        let dynamo = &self.clients.dynamo;
        let Some(sub) =
            store::subscription::get(dynamo, table, &d.account_id, &d.subscription_id).await?
        else {
            return Ok(());
        };
        let gone = gone && sub.status == SubscriptionStatus::Active;
        if !gone && !should_auto_pause(sub.consecutive_dead, sub.status) {
            return Ok(());
        }
        let admins = config
            .account
            .as_ref()
            .map(|a| a.admin_emails.clone())
            .unwrap_or_default();
        let (account, subscription) = (&d.account_id, &d.subscription_id);
        let notice = if gone {
            subscription_gone_notice(account, subscription, &admins, now)
        } else {
            subscription_paused_notice(account, subscription, &admins, sub.consecutive_dead, now)
        };
        let notice = store::write::put_new(&self.config.notification_table, notice_item(&notice)?)?;
        let pause = if gone {
            store::subscription::pause_on_gone(table, &sub, notice, now)?
        } else {
            store::subscription::auto_pause(table, &sub, notice, now)?
        };
        // Refused: another worker paused it first (and requested the notice), or a success
        // ended the run.
        if send_resolving_conflicts(dynamo, pause).await?.applied() {
            tracing::warn!(
                account_id = %d.account_id,
                subscription_id = %d.subscription_id,
                dead_count = sub.consecutive_dead,
                gone,
                "subscription paused (consecutive dead deliveries, or 410 Gone); administrator notice requested"
            );
        }
        Ok(())
    }

    /// After a delivery: the subscription's dead run ends, and a built-in handler's success is
    /// recorded on the event.
    async fn after_delivered(
        &self,
        d: &Delivery,
        result: &AttemptResult,
    ) -> Result<(), StoreError> {
        let table = &self.config.delivery_table;
        let dynamo = &self.clients.dynamo;
        // A cheap read first: most successes find the count at zero and write nothing.
        let seen =
            store::subscription::dead_count(dynamo, table, &d.account_id, &d.subscription_id)
                .await?;
        if seen > 0 {
            let end =
                store::subscription::end_dead_run(table, &d.account_id, &d.subscription_id, seen)?;
            send(dynamo, end).await?;
        }
        if let Some(internal_result) = &result.internal_result {
            let w = store::event::record_internal_result(
                table,
                &d.account_id,
                &d.change_id,
                &internal_result.to_string(),
            )?;
            send(dynamo, w).await?;
        }
        Ok(())
    }
}

/// Whether a refused claim was refused only because the delivery's attempts have reached Max
/// Retries: a retrying push delivery, due, without a live lease, whose attempts are not fewer than
/// `max_attempts`. It is then ended dead without a further attempt.
fn exhausted(d: &Delivery, now: Timestamp, max_attempts: u32) -> bool {
    d.status == DeliveryStatus::Retrying
        && !d.method.is_poll()
        && d.not_before.is_none_or(|t| t <= now.plus(EARLY_TOLERANCE))
        && !lease_held(d.lease_until, now)
        && d.attempts >= max_attempts
}

/// Why a refused claim was refused, from the delivery as it stood (`None`: there is none).
fn why_not_claimed(d: Option<&Delivery>, now: Timestamp) -> &'static str {
    let Some(d) = d else {
        return "no such delivery";
    };
    if !d.status.is_open() {
        "already settled"
    } else if d.method.is_poll() {
        "pull delivery"
    } else if d.not_before.is_some_and(|t| t > now.plus(EARLY_TOLERANCE)) {
        "not yet due"
    } else if lease_held(d.lease_until, now) {
        "leased by another worker"
    } else {
        // Not expected: the item is as the refusing condition saw it, so one of the above holds.
        "another worker claimed the attempt"
    }
}

/// One success in this many is logged at INFO (chosen by its delivery id, so a delivery's lines
/// are all sampled or none): enough to see deliveries flowing at the default level, at a few
/// bytes per delivery. The others are DEBUG lines.
pub const SUCCESS_LOG_SAMPLE: u64 = 100;

/// Whether `delivery_id`'s success is one of the sampled INFO lines ([`SUCCESS_LOG_SAMPLE`]).
pub fn success_sampled(delivery_id: &str) -> bool {
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let hash = delivery_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    hash % SUCCESS_LOG_SAMPLE == 0
}

/// The line of a recorded attempt: its ids, the HTTP status as a number when there was one, and
/// the detail the attempt history keeps (the error, or the start of the response). A success is
/// a DEBUG line (one in [`SUCCESS_LOG_SAMPLE`] at INFO); every other attempt (a retry scheduled,
/// a dead or failed delivery) is an INFO line.
fn log_attempt(d: &Delivery, number: u32, result: &AttemptResult, status: DeliveryStatus) {
    macro_rules! attempt_line {
        ($level:ident) => {
            tracing::$level!(
                delivery_id = %d.delivery_id,
                account_id = %d.account_id,
                subscription_id = %d.subscription_id,
                attempt = number,
                class = result.class.as_str(),
                http_status = result.http_status,
                status = %status,
                detail = result.detail.as_deref(),
                "delivery attempt"
            )
        };
    }
    if status != DeliveryStatus::Delivered || success_sampled(d.delivery_id.as_str()) {
        attempt_line!(info);
    } else {
        attempt_line!(debug);
    }
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
    d: &Delivery,
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
