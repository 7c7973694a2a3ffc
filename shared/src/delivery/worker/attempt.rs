//! One delivery's attempt (`docs/lifecycles.md#integration-delivery`, the worker's rows): claim
//! its next numbered attempt with a sixty-second lease in one conditional write that answers with
//! the delivery (no read first), call the adapter with the stable delivery id, classify the
//! result and write the outcome conditionally on still holding the lease. A dead outcome and its
//! subscription's dead count are one transaction, so a redelivered delivery can never count twice,
//! and the fiftieth pauses the subscription and requests exactly one administrator notice. The
//! batch ([`super::batch`]) decides when an attempt starts; here is what it does once started.

use super::adapters::AttemptResult;
use super::dead_runs::BatchRuns;
use super::internal::InternalCall;
use super::{
    ran_long, rate_limit, success_sampled, webhook, DeliveryWorker, WorkOutcome, WorkerError,
    EARLY_TOLERANCE, LEASE,
};
use crate::domain::classify::AttemptClass;
use crate::domain::integration_delivery::{
    self as lifecycle, lease_held, DeliveryMove, DeliveryStatus, UnknownDeliveryMethod,
};
use crate::domain::retry::{RetryDecision, RetryPolicy};
use crate::domain::target::Target;
use crate::domain::time::Timestamp;
use crate::domain::trace_context::TraceParent;
use crate::store;
use crate::store::account_config::AccountConfig;
use crate::store::delivery::{AttemptRecord, Claim, Delivery, DeliveryWork, Outcome};
use crate::store::subscription::{RetryBound, Subscription};
use crate::store::write::{send, send_resolving_conflicts, Write, Written};
use aws_lambda_events::event::sqs::SqsMessage;
use std::time::{Duration, Instant};

impl DeliveryWorker {
    /// A message handled as a whole, the batch not having read delivery work in it: a test
    /// event's message is sent ([`Self::send_test_event`]); anything else is malformed. Also
    /// tells whether an attempt ran long ([`ran_long`]).
    pub(super) async fn handle_message(
        &self,
        message: &SqsMessage,
        runs: &BatchRuns,
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
        self.process_timed(&work, runs).await
    }

    /// [`Self::process`], also telling whether the attempt ran long: for the whole webhook timeout
    /// or just under it ([`ran_long`]: the endpoint hangs or is that slow).
    pub(super) async fn process_timed(
        &self,
        work: &DeliveryWork,
        runs: &BatchRuns,
    ) -> Result<(WorkOutcome, bool), WorkerError> {
        let token = uuid::Uuid::new_v4().to_string();
        // The account's configuration (cached per container) comes first: the claim's condition
        // needs the subscription's Max Retries. Without a subscription there is no bound to
        // apply; the attempt is then refused as a configuration loss.
        let loaded_at = self.clock.now();
        let config = (self.cache)
            .get(
                &self.clients.dynamo,
                &self.config.delivery_table,
                &work.account_id,
                loaded_at,
            )
            .await?;
        // The lease's sixty seconds run from the claim itself: the configuration's load before it
        // can take the SDK's tries.
        let now = self.clock.now();
        let (delivery, stored) = match self.claim_within_bound(work, &token, now, &config).await? {
            Claimed::Attempt(delivery, stored) => (delivery, stored),
            Claimed::Not(outcome) => return Ok((outcome, false)),
        };
        // The rate limit's slot is taken after the claim: a copy the claim refuses takes none.
        if let Some(waits) = self.rate_admits(&config, &delivery, &token).await? {
            return Ok((waits, false));
        }
        (self.attempt_claimed(&delivery, &token, &config, (now, stored), runs)).await
    }

    /// Claims `work`'s next attempt within its subscription's Max Retries as stored. The claim's
    /// condition takes the bound of the cached configuration; a retry (a delivery that has made
    /// attempts: a first attempt is within any Max Retries) then reads the stored one
    /// ([`store::subscription::retry_bound`]), so a bound changed within the cache's minute binds
    /// at once: a claim over the stored bound is ended dead under its own lease, and a refusal by
    /// a cached bound lower than the stored one is claimed again under the stored one. A claim
    /// refused because the delivery is settled makes what its outcome still has to make
    /// ([`Self::settled_effects`]).
    async fn claim_within_bound(
        &self,
        work: &DeliveryWork,
        token: &str,
        now: Timestamp,
        config: &AccountConfig,
    ) -> Result<Claimed, WorkerError> {
        let mut max_attempts = config
            .subscription(&work.subscription_id)
            .map_or(u32::MAX, |c| c.subscription.retry_policy.max_attempts());
        // Read once: `Some(None)` when the subscription is gone (nothing stored to bind).
        let mut stored: Option<Option<RetryBound>> = None;
        loop {
            let ended = match self.claim(work, token, now, max_attempts).await? {
                Claim::Claimed(d) if d.attempts == 0 => {
                    return Ok(Claimed::Attempt(Box::new(d), None))
                }
                Claim::Claimed(d) => {
                    let bound = match stored {
                        Some(bound) => bound,
                        None => self.stored_bound(work).await?,
                    };
                    let Some(bound) = bound else {
                        return Ok(Claimed::Attempt(Box::new(d), None));
                    };
                    let max_attempts = bound.retry_policy.max_attempts();
                    if d.attempts < max_attempts {
                        return Ok(Claimed::Attempt(Box::new(d), Some(bound)));
                    }
                    (self.end_exhausted(&d, max_attempts, Some(token), config)).await?
                }
                Claim::Refused(Some(d)) if rate_limit::waiting(&d, now).is_some() => {
                    WorkOutcome::WaitsForRateSlot(rate_limit::waiting(&d, now).unwrap_or_default())
                }
                Claim::Refused(Some(d)) if exhausted(&d, now, max_attempts) => {
                    if stored.is_none() {
                        let bound = self.stored_bound(work).await?;
                        let stored_max = bound.as_ref().map(|b| b.retry_policy.max_attempts());
                        stored = Some(bound);
                        if let Some(stored_max) = stored_max.filter(|&m| d.attempts < m) {
                            max_attempts = stored_max;
                            continue;
                        }
                    }
                    (self.end_exhausted(&d, max_attempts, None, config)).await?
                }
                Claim::Refused(Some(d)) if !d.status.is_open() => {
                    self.settled_effects(&d, config).await?;
                    WorkOutcome::Skipped("already settled")
                }
                Claim::Refused(d) => WorkOutcome::Skipped(why_not_claimed(d.as_ref(), now)),
            };
            return Ok(Claimed::Not(ended));
        }
    }

    /// The subscription's retry policy and run of dead deliveries as stored; `None` when it is
    /// gone (the cached configuration then decides, and its attempt fails as a configuration
    /// loss once that configuration knows).
    async fn stored_bound(&self, work: &DeliveryWork) -> Result<Option<RetryBound>, WorkerError> {
        let (dynamo, table) = (&self.clients.dynamo, &self.config.delivery_table);
        let (account, subscription) = (&work.account_id, &work.subscription_id);
        Ok(store::subscription::retry_bound(dynamo, table, account, subscription).await?)
    }

    /// Claims `work`'s next attempt under the lease `token`, in one conditional write that answers
    /// with the delivery. A refusal that answers with our own token is our claim (applied, its
    /// answer lost, and the SDK's retry of it refused by the lease it had just written): claimed.
    async fn claim(
        &self,
        work: &DeliveryWork,
        token: &str,
        now: Timestamp,
        max_attempts: u32,
    ) -> Result<Claim, WorkerError> {
        let table = &self.config.delivery_table;
        let due_by = now.plus(EARLY_TOLERANCE);
        let claim = store::delivery::claim(table, work, token, now, LEASE, due_by, max_attempts)?;
        Ok(match Claim::of(send(&self.clients.dynamo, claim).await?)? {
            Claim::Refused(Some(d)) if d.lease_token.as_deref() == Some(token) => Claim::Claimed(d),
            other => other,
        })
    }

    /// The claimed attempt (claimed at `now`): the adapter called and timed, its answer classified
    /// by the subscription's answer rules, the outcome decided by its retry policy and saved on
    /// still holding the lease, a success's follow-up, the attempt's log line. Also whether the
    /// attempt ran long ([`ran_long`]).
    async fn attempt_claimed(
        &self,
        delivery: &Delivery,
        token: &str,
        config: &AccountConfig,
        (now, stored): (Timestamp, Option<RetryBound>),
        runs: &BatchRuns,
    ) -> Result<(WorkOutcome, bool), WorkerError> {
        let number = delivery.attempts + 1;
        let subscription = config
            .subscription(&delivery.subscription_id)
            .map(|c| &c.subscription);
        let rules = subscription
            .map(Subscription::answer_rules)
            .unwrap_or_default();
        let started = Instant::now();
        let mut result = self.call_adapter(delivery, config).await;
        result.class = rules.class_of(result.class, result.http_status);
        let elapsed = started.elapsed();
        let timed_out = ran_long(elapsed, self.webhook.timeout());
        let attempt = attempt_record(number, now, &result, elapsed);
        let policy = match &stored {
            Some(bound) => bound.retry_policy.clone(),
            None => subscription
                .map(|s| s.retry_policy.clone())
                .unwrap_or_default(),
        };
        let decision = decide(delivery, number, &result, &policy)?;
        let delivered = decision.status() == DeliveryStatus::Delivered;
        // A success's effects are kept on its outcome until they are made ([`super::effects`]).
        // The run it ends: a retry's, as its claim read it; a first attempt's, as its batch
        // read it ([`super::dead_runs`]).
        let claimed = stored.as_ref().map(|bound| bound.consecutive_dead);
        let run = match (delivered, claimed) {
            (false, _) => None,
            (true, Some(seen)) => (seen > 0).then_some(seen),
            (true, None) => runs.take(self, delivery).await,
        };
        let internal_result = result.internal_result.as_ref().map(|v| v.to_string());
        let outcome = Outcome {
            movement: decision.movement,
            retry_in: decision.retry_in,
            attempt: &attempt,
            dead_run_seen: run,
            internal_result: internal_result.as_deref(),
        };
        let gone = rules.pauses_subscription(result.http_status);
        let saved = (self.save_outcome(delivery, token, &outcome, config, gone)).await?;
        // Refused (the lease taken over): the batch's next success ends the run instead. A save
        // that failed (`?` above) keeps it: the outcome may have landed with the run kept on the
        // delivery; else its message comes back and a later batch reads the run.
        if let (Some(taken), None, false) = (run, claimed, saved) {
            runs.give_back(&delivery.subscription_id, taken).await;
        }
        if !saved {
            let why = "lease taken over before the outcome was saved";
            return Ok((WorkOutcome::Skipped(why), false));
        }
        if delivered {
            let internal = internal_result.as_deref();
            self.after_delivered(delivery, run, internal, config)
                .await?;
        }
        log_attempt(delivery, number, &result, decision.status());
        let status = decision.status();
        Ok((WorkOutcome::Attempted { number, status }, timed_out))
    }

    /// Saves an attempt's outcome on still holding the lease `token`: a dead one together with its
    /// subscription's dead count ([`Self::save_dead_and_count`]; `gone`: the answer pauses the
    /// subscription at once), any other alone. `false` when the lease was taken over.
    async fn save_outcome(
        &self,
        delivery: &Delivery,
        token: &str,
        outcome: &Outcome<'_>,
        config: &AccountConfig,
        gone: bool,
    ) -> Result<bool, WorkerError> {
        let finished = self.clock.now();
        if outcome.movement.1 == DeliveryStatus::Dead {
            return (self.save_dead_and_count(delivery, token, outcome, config, gone, finished))
                .await;
        }
        let table = &self.config.delivery_table;
        let w = store::delivery::save_outcome(table, delivery, token, outcome, finished)?;
        Ok(send(&self.clients.dynamo, w).await?.applied()
            || self.outcome_landed(delivery, outcome.attempt).await?)
    }

    /// Calls the adapter the integration names, after checking that configuration still permits
    /// delivery (subscription or account gone, or accepted event access absent → failed,
    /// `docs/lifecycles.md#integration-delivery`).
    async fn call_adapter(&self, d: &Delivery, config: &AccountConfig) -> AttemptResult {
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

    /// Ends dead, without a further attempt, a delivery whose attempts have reached Max Retries:
    /// refused by the claim ([`exhausted`]), or claimed under the lease `held` over the stored
    /// bound; counted toward the subscription's pause like any dead outcome, in one transaction.
    /// Refused: another worker ended it, or it moved.
    async fn end_exhausted(
        &self,
        d: &Delivery,
        max_attempts: u32,
        held: Option<&str>,
        config: &AccountConfig,
    ) -> Result<WorkOutcome, WorkerError> {
        let table = &self.config.delivery_table;
        let dynamo = &self.clients.dynamo;
        let now = self.clock.now();
        let end = store::delivery::end_exhausted(table, d, max_attempts, held, now)?;
        let count = store::subscription::count_dead(table, &d.account_id, &d.subscription_id, now)?;
        if !send_resolving_conflicts(dynamo, Write::all([end, count])?)
            .await?
            .applied()
        {
            return Ok(WorkOutcome::Skipped("attempts reached Max Retries"));
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
        Ok(WorkOutcome::EndedExhausted {
            attempts: d.attempts,
        })
    }

    /// Saves a dead outcome and adds one to its subscription's dead count in one transaction, so a
    /// delivery whose work comes again (its message redelivered whole, or a copy the batch sent)
    /// can never count twice (its outcome write fails on the lease). A
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
}

/// What claiming a delivery's next attempt came to.
enum Claimed {
    /// The attempt is ours, with the subscription's retry policy and dead run as stored when
    /// the claim read them (a retry's).
    Attempt(Box<Delivery>, Option<RetryBound>),
    /// No attempt: why, or what became of the delivery instead.
    Not(WorkOutcome),
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

/// The attempt's entry on the delivery's history: its number, when it was claimed, its class and
/// HTTP status, how long it took, and the detail and error kept of its answer.
fn attempt_record(
    number: u32,
    at: Timestamp,
    result: &AttemptResult,
    elapsed: Duration,
) -> AttemptRecord {
    AttemptRecord {
        number,
        at,
        class: result.class.as_str().to_string(),
        http_status: result.http_status,
        duration_ms: elapsed.as_millis() as u64,
        detail: result.detail.clone(),
        error: result.error.map(str::to_owned),
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

/// The pure decision for an attempt's result under the subscription's retry policy (as stored,
/// when the claim read it).
fn decide(
    d: &Delivery,
    number: u32,
    result: &AttemptResult,
    policy: &RetryPolicy,
) -> Result<Decision, WorkerError> {
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
