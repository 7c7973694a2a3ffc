//! The channel delivery worker: the notification queue's consumer.
//!
//! For each message (`{notice_id, delivery_key, dispatch_id}`, with SQS's
//! `ApproximateReceiveCount` as the retry budget):
//!
//! 1. read the delivery, its work row and its notice; a message whose dispatch id is not the work
//!    row's is stale (the work was cancelled or replaced) and is dropped;
//! 2. the claim guard, in the order of the lifecycle's `queued → sending` row
//!    (`docs/lifecycles.md#notification-delivery`): work is queued (else: another consumer holds
//!    it, or it ended), the notice applies (else `cancelled`), the deadline has not passed (else
//!    `expired`), an adapter exists (else `skipped`); then the conditional claim
//!    `queued → sending`, which decides between racing consumers: exactly one wins, the other
//!    leaves the message alone;
//! 3. the adapter, and its outcome written conditionally on still holding the claim:
//!    * accepted → `sent` (provider reference saved; an adapter whose acceptance is delivery
//!      confirms at once → `delivered`); the message is deleted;
//!    * retryable with receives left → `queued` with `not_before`, the message's visibility set to
//!      the jittered backoff (30 s × 2^n, capped at 30 min, ±20 %, or a longer Retry-After) and
//!      reported as a batch item failure, so SQS gives it back after that delay;
//!    * retryable on the last (eighth) receive → `failed` (`attempts_exhausted`), visibility 0 and
//!      a batch item failure, so the next receive moves it to the dead-letter queue;
//!    * permanent → `failed` (provider reason); unavailable → `skipped` (reason).
//!
//! A terminal failure publishes the terminal-failure metric. A message that arrives before its
//! delivery's backoff ended (a duplicate) goes back until then.

use super::channels::{Adapters, ChannelAnswer, OutgoingMessage};
use super::metrics::{MetricSink, StdoutEmf, TerminalFailure};
use super::skip_warnings::SkipWarnings;
use super::table::NotificationTable;
use super::NotifyError;
use crate::aws::Clients;
use crate::batch;
use crate::clock::Clock;
use crate::config::Config;
use crate::domain::notification_delivery::{
    after_retryable_result, claim_guard, ClaimFacts, ClaimRefusal, FailureReason,
    NotificationStatus as N, NotificationTrigger as NT, RetryableOutcome,
};
use crate::domain::retry::{notification_visibility_delay, JitterSource, RandJitter};
use crate::domain::time::Timestamp;
use crate::store::notice::NoticeRecord;
use crate::store::notification_delivery::{Effects, NotificationDelivery};
use crate::store::notification_work::NotificationWork;
use crate::store::provider_ref::ProviderRef;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use rand::SeedableRng;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A message may arrive this much before its delivery's backoff ends and still run.
pub const EARLY_TOLERANCE: Duration = Duration::from_secs(2);
/// Writes of an outcome retried when a concurrent record write (a provider event) moved the version.
const OUTCOME_WRITE_TRIES: usize = 4;

/// What handling one message came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkOutcome {
    /// `sent` (and `delivered` when the adapter confirmed).
    Sent {
        provider_ref: String,
        status: N,
    },
    /// `queued` again; the message comes back after `delay`.
    Retrying {
        delay: Duration,
        retry_after: Option<Duration>,
    },
    /// `failed` with this reason.
    Failed {
        reason: FailureReason,
    },
    Skipped {
        reason: String,
    },
    Cancelled,
    Expired,
    /// The delivery's backoff has not ended: the message goes back for `remaining`.
    NotYetDue {
        remaining: Duration,
    },
    /// Another consumer holds the delivery (`sending`) or won the claim: leave the message alone.
    HeldByAnotherConsumer,
    /// Nothing to do (stale dispatch, gone, already ended).
    Ignored(&'static str),
}

impl std::fmt::Display for WorkOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkOutcome::Sent {
                provider_ref,
                status,
            } => write!(f, "sent ({status}, provider reference {provider_ref})"),
            WorkOutcome::Retrying { delay, retry_after } => {
                write!(f, "retrying in {} s", delay.as_secs())?;
                match retry_after {
                    Some(after) => write!(f, " (Retry-After {} s)", after.as_secs()),
                    None => Ok(()),
                }
            }
            WorkOutcome::Failed { reason } => write!(f, "failed: {reason}"),
            WorkOutcome::Skipped { reason } => write!(f, "skipped: {reason}"),
            WorkOutcome::Cancelled => f.write_str("cancelled"),
            WorkOutcome::Expired => f.write_str("expired"),
            WorkOutcome::NotYetDue { remaining } => {
                write!(f, "not yet due ({} s left)", remaining.as_secs())
            }
            WorkOutcome::HeldByAnotherConsumer => f.write_str("held by another consumer"),
            WorkOutcome::Ignored(why) => write!(f, "ignored: {why}"),
        }
    }
}

/// What the queue should do with the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Done: let the event source mapping delete it.
    Delete,
    /// Report it as a batch item failure after setting its visibility to this.
    ReturnAfter(Duration),
    /// Report it as a batch item failure and leave its visibility as it is.
    Return,
}

impl WorkOutcome {
    pub(crate) fn disposition(&self) -> Disposition {
        match self {
            WorkOutcome::Retrying { delay, .. } => Disposition::ReturnAfter(*delay),
            WorkOutcome::NotYetDue { remaining } => Disposition::ReturnAfter(*remaining),
            WorkOutcome::Failed {
                reason: FailureReason::AttemptsExhausted,
            } => Disposition::ReturnAfter(Duration::ZERO),
            WorkOutcome::HeldByAnotherConsumer => Disposition::Return,
            _ => Disposition::Delete,
        }
    }
}

/// `JitterSource` over a boxed source.
struct DynJitter<'a>(&'a mut (dyn JitterSource + Send));

impl JitterSource for DynJitter<'_> {
    fn unit(&mut self) -> f64 {
        self.0.unit()
    }
}

pub struct NotificationWorker {
    store: NotificationTable,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    stage: String,
    clock: Arc<dyn Clock>,
    adapters: Adapters,
    jitter: Mutex<Box<dyn JitterSource + Send>>,
    metrics: Arc<dyn MetricSink>,
    skip_warnings: SkipWarnings,
}

impl NotificationWorker {
    /// The standard adapters, real randomness, metrics on standard output.
    pub fn new(clients: Clients, config: Config, clock: Arc<dyn Clock>) -> Self {
        let adapters = Adapters::standard(&clients, &config);
        Self::with_adapters(clients, config, clock, adapters)
    }

    pub fn with_adapters(
        clients: Clients,
        config: Config,
        clock: Arc<dyn Clock>,
        adapters: Adapters,
    ) -> Self {
        NotificationWorker {
            store: NotificationTable::from_config(&clients, &config),
            sqs: clients.sqs.clone(),
            queue_url: config.notification_queue_url.clone(),
            stage: config.stage.clone(),
            clock,
            adapters,
            jitter: Mutex::new(Box::new(RandJitter(rand::rngs::StdRng::from_entropy()))),
            metrics: Arc::new(StdoutEmf::new(&config.metrics_namespace)),
            skip_warnings: SkipWarnings::default(),
        }
    }

    /// Replaces the jitter source (tests use a seeded one).
    pub fn with_jitter(self, jitter: impl JitterSource + Send + 'static) -> Self {
        NotificationWorker {
            jitter: Mutex::new(Box::new(jitter)),
            ..self
        }
    }

    pub fn with_metrics(self, metrics: Arc<dyn MetricSink>) -> Self {
        NotificationWorker { metrics, ..self }
    }

    pub fn store(&self) -> &NotificationTable {
        &self.store
    }

    /// The Lambda handler: messages are handled concurrently; each is deleted, or reported as a
    /// batch item failure (after its visibility was set, when the outcome says so).
    pub async fn handle(&self, event: SqsEvent) -> SqsBatchResponse {
        batch::run_sqs(
            &event,
            event.records.len(),
            "notification work",
            |m| async move {
                match self.handle_message(m).await {
                    Disposition::Delete => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            },
        )
        .await
    }

    async fn handle_message(&self, message: &SqsMessage) -> Disposition {
        let receive_count = message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(1);
        let work: NotificationWork = match serde_json::from_str(
            message.body.as_deref().unwrap_or_default(),
        ) {
            Ok(w) => w,
            Err(e) => {
                tracing::error!(message_id = message.message_id.as_deref(), error = %e, "not notification work; the queue returns it until it is dead-lettered");
                return Disposition::Return;
            }
        };
        let disposition = match self.process(&work, receive_count).await {
            Ok(outcome) => {
                tracing::info!(
                    notice_id = %work.notice_id,
                    delivery_key = %work.delivery_key,
                    receive_count,
                    outcome = %outcome,
                    "notification work"
                );
                outcome.disposition()
            }
            Err(e) => {
                tracing::error!(notice_id = %work.notice_id, delivery_key = %work.delivery_key, error = %e, "notification work failed; the queue returns it");
                Disposition::Return
            }
        };
        if let Disposition::ReturnAfter(delay) = disposition {
            let receipt = message.receipt_handle.clone().unwrap_or_default();
            let secs = delay.as_secs() + u64::from(delay.subsec_nanos() > 0);
            if let Err(e) = self
                .sqs
                .change_message_visibility()
                .queue_url(&self.queue_url)
                .receipt_handle(receipt)
                .visibility_timeout(secs.min(12 * 3600) as i32)
                .send()
                .await
            {
                // The message still comes back, after the queue's own visibility timeout.
                tracing::warn!(error = %NotifyError::queue(e), "could not change the message's visibility");
            }
        }
        disposition
    }

    /// Handles one message whose receive this is (`receive_count`, 1-based).
    pub async fn process(
        &self,
        work: &NotificationWork,
        receive_count: u32,
    ) -> Result<WorkOutcome, NotifyError> {
        let (delivery, row, notice) = tokio::try_join!(
            self.store.delivery(&work.notice_id, &work.delivery_key),
            self.store.work(&work.notice_id, &work.delivery_key),
            self.store.notice(&work.notice_id),
        )?;
        let Some(delivery) = delivery else {
            return Ok(WorkOutcome::Ignored("no such delivery"));
        };
        // A notice past its expiry is gone (TTL deletes lazily): its deliveries do not apply.
        let notice = notice.filter(|n| n.visible(self.clock.now()));
        let stale = (row.as_ref()).is_some_and(|r| r.dispatch_id != work.dispatch_id);
        let now = self.clock.now();
        if let Some(outcome) = not_claimable(&delivery, stale, now) {
            return Ok(outcome);
        }
        let adapter = self.adapters.get(&delivery.channel).cloned();
        let facts = ClaimFacts {
            status: delivery.status,
            notice_applies: notice.as_ref().is_some_and(|n| n.status.applies()),
            deadline: notice
                .as_ref()
                .and_then(|n| n.request.deadline)
                .or(delivery.deadline),
            now,
            adapter_exists: adapter.is_some(),
        };
        if let Err(refusal) = claim_guard(&facts) {
            return self.refuse(&delivery, &refusal, now).await;
        }
        let (Some(adapter), Some(notice)) = (adapter, notice) else {
            return Ok(WorkOutcome::Ignored(
                "guard passed without adapter or notice",
            ));
        };

        let Some((claimed, token)) = self.claim(&delivery, receive_count, now).await? else {
            return Ok(WorkOutcome::HeldByAnotherConsumer);
        };

        let answer = adapter
            .send(
                &OutgoingMessage {
                    notice_id: &claimed.notice_id,
                    delivery_key: &claimed.delivery_key,
                    dispatch_id: &work.dispatch_id,
                    recipient: &claimed.recipient,
                    address: claimed.address.as_deref(),
                    subject: &notice.request.subject,
                    body: &notice.request.body,
                },
                now,
            )
            .await;
        self.finish(
            claimed,
            &token,
            answer,
            adapter.provider(),
            receive_count,
            &notice,
        )
        .await
    }

    /// The conditional claim `queued → sending` under a new token: of two consumers, exactly one
    /// gets past this write. The claimed delivery and its token; `None`: another consumer won.
    async fn claim(
        &self,
        delivery: &NotificationDelivery,
        receive_count: u32,
        now: Timestamp,
    ) -> Result<Option<(NotificationDelivery, String)>, NotifyError> {
        let token = uuid::Uuid::new_v4().to_string();
        let mut claim = delivery.clone();
        claim.status = N::Sending;
        claim.claim_token = Some(token.clone());
        claim.claimed_at = Some(now);
        claim.not_before = None;
        claim.updated_at = now;
        claim.push_history_detail(
            format!("claimed:{token}"),
            "claimed",
            now,
            Some(format!("receive {receive_count}")),
        );
        let claimed = (self.store)
            .transition(delivery, claim, NT::Claim, Effects::none())
            .await?;
        Ok(claimed.map(|c| (c, token)))
    }

    /// The guard refused the claim: cancel, expire or skip the queued delivery instead.
    async fn refuse(
        &self,
        delivery: &NotificationDelivery,
        refusal: &ClaimRefusal,
        now: Timestamp,
    ) -> Result<WorkOutcome, NotifyError> {
        let Some((trigger, to)) = refusal.becomes() else {
            return Ok(WorkOutcome::HeldByAnotherConsumer);
        };
        let mut next = delivery.clone();
        next.status = to;
        next.updated_at = now;
        next.not_before = None;
        let outcome = match refusal {
            ClaimRefusal::NoticeWithdrawn => {
                next.push_history_detail(
                    "cancelled",
                    "cancelled",
                    now,
                    Some("the notice was withdrawn or superseded".into()),
                );
                WorkOutcome::Cancelled
            }
            ClaimRefusal::DeadlinePassed { deadline, .. } => {
                next.push_history_detail(
                    "expired",
                    "expired",
                    now,
                    Some(format!("deadline {deadline} passed")),
                );
                WorkOutcome::Expired
            }
            ClaimRefusal::NoAdapter => {
                let reason = format!("no adapter for channel {}", delivery.channel);
                next.skip_reason = Some(reason.clone());
                next.push_history_detail("skipped", "skipped", now, Some(reason.clone()));
                self.warn_skip(&next, &reason);
                WorkOutcome::Skipped { reason }
            }
            ClaimRefusal::NotQueued { .. } => return Ok(WorkOutcome::HeldByAnotherConsumer),
        };
        match self
            .store
            .transition(delivery, next, trigger, Effects::delete_work())
            .await?
        {
            Some(_) => Ok(outcome),
            None => Ok(WorkOutcome::HeldByAnotherConsumer),
        }
    }

    /// Writes the adapter's outcome, conditionally on still holding the claim.
    async fn finish(
        &self,
        claimed: NotificationDelivery,
        token: &str,
        answer: ChannelAnswer,
        provider: &str,
        receive_count: u32,
        notice: &NoticeRecord,
    ) -> Result<WorkOutcome, NotifyError> {
        let now = self.clock.now();
        // Decide once (the jitter is drawn once), then write, re-reading if a record write
        // (a provider event) moved the version meanwhile.
        let (trigger, outcome) = self.decide(&answer, receive_count);
        let mut current = claimed;
        for _ in 0..OUTCOME_WRITE_TRIES {
            let (next, effects) = outcome_write(
                &current,
                token,
                &answer,
                &outcome,
                provider,
                receive_count,
                now,
            );
            if let Some(written) = self
                .store
                .transition(&current, next, trigger, effects)
                .await?
            {
                return self
                    .after_outcome(written, &answer, outcome, notice, now)
                    .await;
            }
            match self
                .store
                .delivery(&current.notice_id, &current.delivery_key)
                .await?
            {
                Some(fresh)
                    if fresh.status == N::Sending
                        && fresh.claim_token.as_deref() == Some(token) =>
                {
                    current = fresh;
                }
                _ => {
                    tracing::warn!(
                        notice_id = %current.notice_id,
                        delivery_key = %current.delivery_key,
                        "the claim was settled elsewhere before the outcome was saved"
                    );
                    return Ok(WorkOutcome::Ignored(
                        "the claim was settled elsewhere before the outcome was saved",
                    ));
                }
            }
        }
        Err(NotifyError::Store(crate::store::StoreError::Dynamo(
            "the outcome write kept losing to concurrent writes".into(),
        )))
    }

    /// The move and outcome of the adapter's `answer` on this receive: a retryable answer with
    /// receives left is requeued after a jittered delay (drawn here, once), on the last receive
    /// it fails as exhausted.
    fn decide(&self, answer: &ChannelAnswer, receive_count: u32) -> (NT, WorkOutcome) {
        match answer {
            ChannelAnswer::Accepted { provider_ref, .. } => (
                NT::AdapterAccepts,
                WorkOutcome::Sent {
                    provider_ref: provider_ref.clone(),
                    status: N::Sent,
                },
            ),
            ChannelAnswer::Retryable {
                retry_after,
                detail: _,
            } => match after_retryable_result(receive_count) {
                (trigger, _, RetryableOutcome::Requeue) => {
                    let delay = {
                        let mut guard = self.jitter.lock().unwrap_or_else(|e| e.into_inner());
                        notification_visibility_delay(
                            receive_count,
                            *retry_after,
                            &mut DynJitter(guard.as_mut()),
                        )
                    };
                    (
                        trigger,
                        WorkOutcome::Retrying {
                            delay,
                            retry_after: *retry_after,
                        },
                    )
                }
                (trigger, _, RetryableOutcome::Exhausted) => (
                    trigger,
                    WorkOutcome::Failed {
                        reason: FailureReason::AttemptsExhausted,
                    },
                ),
            },
            ChannelAnswer::Permanent { detail } => (
                NT::FailSending,
                WorkOutcome::Failed {
                    reason: FailureReason::Provider(detail.clone()),
                },
            ),
            ChannelAnswer::Unavailable { reason } => (
                NT::AdapterUnavailable,
                WorkOutcome::Skipped {
                    reason: reason.clone(),
                },
            ),
        }
    }

    async fn after_outcome(
        &self,
        written: NotificationDelivery,
        answer: &ChannelAnswer,
        outcome: WorkOutcome,
        notice: &NoticeRecord,
        now: Timestamp,
    ) -> Result<WorkOutcome, NotifyError> {
        match (&outcome, answer) {
            (
                WorkOutcome::Sent { provider_ref, .. },
                ChannelAnswer::Accepted {
                    confirmed: true, ..
                },
            ) => {
                // The adapter confirms: sent → delivered.
                let mut next = written.clone();
                next.status = N::Delivered;
                next.delivered_at = Some(now);
                next.updated_at = now;
                next.push_history_detail(
                    format!("confirmed:{provider_ref}"),
                    "delivered",
                    now,
                    Some("confirmed by the adapter".into()),
                );
                let status = match self
                    .store
                    .transition(&written, next, NT::Confirm, Effects::none())
                    .await?
                {
                    Some(_) => N::Delivered,
                    None => N::Sent,
                };
                Ok(WorkOutcome::Sent {
                    provider_ref: provider_ref.clone(),
                    status,
                })
            }
            (WorkOutcome::Failed { reason }, _) => {
                self.metrics.terminal_failure(&TerminalFailure {
                    stage: self.stage.clone(),
                    channel: written.channel.clone(),
                    reason: reason.code().to_string(),
                    notice_id: notice.request.notice_id.clone(),
                    delivery_key: written.delivery_key.clone(),
                    at: now,
                });
                Ok(outcome)
            }
            (WorkOutcome::Skipped { reason }, _) => {
                self.warn_skip(&written, reason);
                Ok(outcome)
            }
            _ => Ok(outcome),
        }
    }

    fn warn_skip(&self, d: &NotificationDelivery, reason: &str) {
        if self.skip_warnings.due(Instant::now()) {
            tracing::warn!(
                notice_id = %d.notice_id,
                delivery_key = %d.delivery_key,
                channel = %d.channel,
                reason,
                "notification delivery skipped (further skips are not warned about for a minute)"
            );
        }
    }
}

/// The delivery after the outcome, and the write's side effects.
fn outcome_write(
    current: &NotificationDelivery,
    token: &str,
    answer: &ChannelAnswer,
    outcome: &WorkOutcome,
    provider: &str,
    receive_count: u32,
    now: Timestamp,
) -> (NotificationDelivery, Effects) {
    let mut next = current.clone();
    next.updated_at = now;
    next.claim_token = None;
    let mut effects = Effects::delete_work();
    match outcome {
        WorkOutcome::Sent { provider_ref, .. } => {
            next.status = N::Sent;
            next.provider = Some(provider.to_string());
            next.provider_ref = Some(provider_ref.clone());
            next.sent_at = Some(now);
            next.push_history_detail(
                format!("sent:{token}"),
                "sent",
                now,
                Some(format!("{provider} {provider_ref}")),
            );
            effects.provider_ref = Some(ProviderRef::new(
                provider,
                provider_ref,
                current.notice_id.clone(),
                current.delivery_key.clone(),
            ));
        }
        WorkOutcome::Retrying { delay, .. } => {
            let detail = match answer {
                ChannelAnswer::Retryable { detail, .. } => detail.clone(),
                _ => String::new(),
            };
            next.status = N::Queued;
            next.not_before = Some(now.plus(*delay));
            next.last_error = Some(detail.clone());
            next.push_history_detail(
                format!("retry:{token}"),
                "retry",
                now,
                Some(format!(
                    "receive {receive_count}: {detail}; again in {} s",
                    delay.as_secs()
                )),
            );
            effects = Effects::none();
        }
        WorkOutcome::Failed { reason } => {
            if let ChannelAnswer::Retryable { detail, .. } = answer {
                next.last_error = Some(detail.clone());
            }
            next.status = N::Failed;
            next.failure_reason = Some(reason.clone());
            next.failed_at = Some(now);
            next.push_history_detail(
                format!("failed:{token}"),
                "failed",
                now,
                Some(format!("receive {receive_count}: {reason}")),
            );
        }
        WorkOutcome::Skipped { reason } => {
            next.status = N::Skipped;
            next.skip_reason = Some(reason.clone());
            next.push_history_detail(
                format!("skipped:{token}"),
                "skipped",
                now,
                Some(reason.clone()),
            );
        }
        _ => {}
    }
    (next, effects)
}

/// What becomes of a message whose delivery is not to be claimed before the guard is asked: its
/// work was replaced (`stale`), the delivery is not queued, or its backoff has not ended.
fn not_claimable(
    delivery: &NotificationDelivery,
    stale: bool,
    now: Timestamp,
) -> Option<WorkOutcome> {
    if stale {
        return Some(WorkOutcome::Ignored("stale message: the work was replaced"));
    }
    match delivery.status {
        N::Queued => {}
        N::Sending => return Some(WorkOutcome::HeldByAnotherConsumer),
        _ => return Some(WorkOutcome::Ignored("the delivery already left the queue")),
    }
    let not_before = delivery.not_before?;
    (not_before > now.plus(EARLY_TOLERANCE)).then(|| WorkOutcome::NotYetDue {
        remaining: not_before.since(now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispositions_follow_the_lifecycle() {
        assert_eq!(
            WorkOutcome::Failed {
                reason: FailureReason::AttemptsExhausted
            }
            .disposition(),
            Disposition::ReturnAfter(Duration::ZERO),
            "on the last receive the message goes back at once"
        );
        assert_eq!(
            WorkOutcome::Failed {
                reason: FailureReason::Provider("no".into())
            }
            .disposition(),
            Disposition::Delete
        );
        assert_eq!(
            WorkOutcome::Retrying {
                delay: Duration::from_secs(30),
                retry_after: None
            }
            .disposition(),
            Disposition::ReturnAfter(Duration::from_secs(30))
        );
        assert_eq!(
            WorkOutcome::HeldByAnotherConsumer.disposition(),
            Disposition::Return
        );
        assert_eq!(WorkOutcome::Cancelled.disposition(), Disposition::Delete);
    }
}
