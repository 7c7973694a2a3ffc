//! The delivery worker (`docs/lifecycles.md#integration-delivery`, the worker's rows): the Lambda
//! handler of the delivery queue. It reads as two things:
//!
//! * [`batch`] — what one invocation does with its messages: every delivery packed in a message
//!   is an item of its own; slots per subscription, the invocation's deadline, deferral of a
//!   timed-out endpoint's or a rate-limited integration's deliveries, hand-back of what was not
//!   worked, and which messages the queue returns.
//! * [`attempt`] — one delivery's attempt: claim its next numbered attempt with a sixty-second
//!   lease in one conditional write that answers with the delivery (no read first), call the
//!   adapter with the stable delivery id, classify the result and write the outcome
//!   conditionally on still holding the lease.
//! * [`effects`] — what an outcome does beyond its delivery (the end of a dead run, a built-in
//!   handler's result, a pause with its notice), made once even when its first write fails.
//!
//! Two copies of one delivery's work (a redelivered message, or a copy the batch re-sent) cannot
//! both call the adapter for one attempt; a worker that dies leaves a lease that lapses, after
//! which the dispatcher's sweep publishes the delivery again and another worker claims the same
//! attempt number. A dead outcome and its subscription's dead count are one transaction, so a
//! repeated delivery can never count twice, and the fiftieth pauses the subscription and
//! requests exactly one administrator notice. The adapters ([`webhook`], [`internal`]), the rate
//! limit's gate and the test events live beside them.

pub mod adapters;
mod attempt;
mod batch;
mod dead_runs;
mod effects;
pub(crate) mod endpoint_auth;
pub mod internal;
pub(crate) mod rate_limit;
mod test_event;
pub mod webhook;

use crate::aws::Clients;
use crate::clock::Clock;
use crate::config::Config;
use crate::data_keys::SecretOpener;
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::ssrf::TargetPolicy;
use crate::ids::AccountId;
use crate::store::account_config::ConfigCache;
use crate::store::delivery::DeliveryWork;
use crate::store::StoreError;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use internal::InternalRegistry;
use std::sync::Arc;
use std::time::{Duration, Instant};
use webhook::WebhookAdapter;

/// The processing lease (sixty seconds, `docs/lifecycles.md#integration-delivery`).
pub const LEASE: Duration = crate::domain::integration_delivery::PROCESSING_LEASE;
/// How long account configuration (and the integration's credentials) is cached per container.
pub(crate) const CONFIG_LEASE: Duration = Duration::from_secs(60);
/// Deliveries of one batch worked on at once (the event source hands over up to a hundred
/// messages, each of up to [`PACKED`](crate::delivery::dispatch::publish::PACKED) deliveries).
pub const BATCH_CONCURRENCY: usize = 25;
/// A delivery's work may arrive this much before its attempt is due (SQS delays are whole
/// seconds, hosts' clocks differ slightly) and still run; earlier, it is a stray duplicate and its
/// claim refuses it.
pub const EARLY_TOLERANCE: Duration = Duration::from_secs(2);
/// Deliveries of one subscription (one endpoint) worked on at once within a batch, whichever
/// messages they came in: a hanging endpoint holds at most this many of the
/// [`BATCH_CONCURRENCY`] slots, the others go on.
pub const PER_SUBSCRIPTION_CONCURRENCY: usize = 10;
/// Kept free before the invocation's deadline beyond an attempt's own timeout, for the store calls
/// around the attempt (claim, outcome, dead count): an attempt starts only if its timeout
/// plus this much fits before the deadline.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(2);
/// Attempts kept on a delivery's history; older ones are summarised by the count.
pub const ATTEMPT_LOG_LIMIT: usize = 30;
/// How long the rest of a batch's deliveries for an endpoint that has just timed out wait, each
/// as a copy of its own on the delivery queue with this SQS delay (whichever message it came in),
/// before they are tried again (unclaimed, so no attempt number is spent on them): the endpoint's
/// next batch probes it again.
pub const ENDPOINT_DEFERRAL: Duration = Duration::from_secs(30);
/// An attempt that took at least this share (percent) of the webhook timeout counts as timed out
/// for the rest of its endpoint's deliveries in the batch: an endpoint that answers just under the
/// timeout holds a batch as long as one that never answers, so it is deferred the same way.
pub const SLOW_ATTEMPT_PERCENT: u32 = 80;
/// The SQS delay of the copy of a delivery handed back for lack of time: the copy is a new
/// message of its own (its receives start at none), so handing it back never brings it nearer the
/// dead-letter queue.
pub const HAND_BACK_DELAY: Duration = Duration::from_secs(1);

/// Whether an attempt that took `elapsed` ran long enough, under `timeout`, to count as its
/// endpoint timing out ([`SLOW_ATTEMPT_PERCENT`]).
pub(crate) fn ran_long(elapsed: Duration, timeout: Duration) -> bool {
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

/// What handling one delivery (or a message handled as a whole: a test event) came to; none of
/// them fails its message.
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
    /// Not claimed: its integration's rate-limit schedule could not be written
    /// ([`rate_limit`]); the batch puts a copy of its work, delayed a second or two, a message
    /// of its own, on the queue.
    OverRateLimit,
    /// Not started: it waits for its rate-limit slot ([`rate_limit`]), this much longer (at most
    /// SQS's fifteen minutes); the batch puts a copy of its work this much delayed on the queue,
    /// packed with others of its account waiting as long.
    WaitsForRateSlot(Duration),
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
    /// Whether an endpoint that timed out in a batch has the rest of its deliveries deferred
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

    /// Without the per-batch bound on a timed-out endpoint: every delivery of a batch is attempted
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

    /// The Lambda handler: the batch of `event`'s messages, each delivery packed in them handled
    /// on its own ([`batch`] says how: slots per subscription, deferral, hand-back). With the
    /// invocation's `deadline`, an attempt that could not finish before it (the webhook timeout
    /// and [`DEADLINE_MARGIN`] from when its turn comes) is not started but handed back, so the
    /// invocation ends before its timeout. A message fails (and the queue returns it, every
    /// delivery in it) only when one of its deliveries is malformed or storage could not be
    /// reached, or when a copy of one could not be sent back to the queue.
    pub async fn handle_until(
        &self,
        event: SqsEvent,
        deadline: Option<Instant>,
    ) -> SqsBatchResponse {
        self.handle_batch(&event.records, deadline).await
    }

    /// One delivery's work, as a message of its own would be: claimed, attempted and saved
    /// ([`attempt`]).
    pub async fn process(&self, work: &DeliveryWork) -> Result<WorkOutcome, WorkerError> {
        let runs = dead_runs::BatchRuns::default();
        Ok(self.process_timed(work, &runs).await?.0)
    }
}

/// One success in this many is logged at INFO (chosen by its delivery id, so a delivery's lines
/// are all sampled or none): enough to see deliveries flowing at the default level, at a few
/// bytes per delivery. The others are DEBUG lines.
pub(crate) const SUCCESS_LOG_SAMPLE: u64 = 100;

/// Whether `delivery_id`'s success is one of the sampled INFO lines ([`SUCCESS_LOG_SAMPLE`]).
pub(crate) fn success_sampled(delivery_id: &str) -> bool {
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let hash = delivery_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    hash % SUCCESS_LOG_SAMPLE == 0
}
