//! The chaos run (`make chaos`, and small in `make test`): many changes for several webhook
//! subscriptions through the real handlers, with everything going wrong at once — endpoints that
//! fail, rate-limit (with and without Retry-After), hang past the attempt timeout, drop the
//! connection after applying the request, or reject everything long enough to pause their
//! subscription; stream records handed over twice; queue messages sent twice; workers that die
//! after their claim; the seeded SDK faults of [`crate::faults::Schedule`] on every store and
//! queue call of the handlers — and the virtual clock walking every backoff until everything is
//! terminal. Then [`check`] reads the tables (raw SDK reads, no fault layer) and the endpoints'
//! own logs and counts what went wrong.
//!
//! The emulator holds every table in memory and scans a whole table per Query, so a large run
//! goes in waves of [`ChaosConfig::wave_changes`] changes, each on a fresh stack (its own table
//! prefix, its tables deleted afterwards). What that costs is stated in RELIABILITY.md.

mod builtin;
pub mod check;
mod dead_run;
pub mod endpoint;
mod schedule;

pub use schedule::{lead, sdk_schedule};

use crate::faults::CompressedSleep;
use crate::fixtures::catalog_change;
use crate::pipeline::Pipeline;
use crate::queues::QueueTap;
use crate::request_kinds::KINDS;
use crate::streams::StreamTap;
use crate::test_stack::TestStack;
use anyhow::Result;
use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use check::{Snapshot, WaveFigures};
use endpoint::{Behaviour, Endpoint};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::Serialize;
use shared::clock::Clock;
use shared::delivery::dispatch::SWEEP_EVERY;
use shared::delivery::worker::webhook::WebhookAdapter;
use shared::delivery::worker::DeliveryWorker;
use shared::domain::integration_delivery::{FIRST_DISPATCH_GRACE, PROCESSING_LEASE};
use shared::domain::retry::RetryPolicy;
use shared::domain::ssrf::TargetPolicy;
use shared::domain::time::Timestamp;
use shared::reconcile::RunKind;
use shared::store::delivery::DeliveryWork;
use shared::store::write;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How big and how rough a run is.
#[derive(Debug, Clone, Serialize)]
pub struct ChaosConfig {
    pub changes: usize,
    pub subscriptions: usize,
    pub seed: u64,
    /// Changes per wave (each wave on a fresh stack).
    pub wave_changes: usize,
    /// Changes written between two pumps (the owning application writes as time goes by).
    pub round_changes: usize,
    /// The worker's attempt timeout (production: 10 s); a hang lasts three times this.
    #[serde(with = "millis")]
    pub attempt_timeout: Duration,
    /// Probability that the harness hands a stream batch's prefix over a second time, that it
    /// sends a queue message a second time, and that a worker dies after its claim.
    pub duplicate_stream_rate: f64,
    pub duplicate_message_rate: f64,
    pub worker_death_rate: f64,
    /// Scale of the seeded SDK faults ([`sdk_schedule`]); 1.0 is the default mix.
    pub sdk_fault_scale: f64,
    /// The SDK's retry backoff runs this many times faster than real time (its policy is
    /// unchanged; see [`CompressedSleep`]).
    pub sdk_sleep_compression: u32,
}

mod millis {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

impl ChaosConfig {
    pub fn new(changes: usize, seed: u64) -> Self {
        ChaosConfig {
            changes,
            subscriptions: 3,
            seed,
            wave_changes: 500,
            round_changes: 10,
            attempt_timeout: Duration::from_millis(300),
            duplicate_stream_rate: 0.05,
            duplicate_message_rate: 0.05,
            worker_death_rate: 0.02,
            sdk_fault_scale: 1.0,
            sdk_sleep_compression: 20,
        }
    }
}

/// What dying workers left of a message.
enum Deaths {
    /// Nothing died: the message goes to the worker as it is.
    None,
    /// Every delivery's worker died: the message is gone, deleted as if handled.
    All,
    /// Some died: the worker gets a message of the rest (this body).
    Some(String),
}

/// The endpoints' behaviours: the first is out (400 on everything) for its first 60 deliveries,
/// which pauses its subscription at 50; the second is flaky (45 % faults: some deliveries use up
/// all six attempts); the rest fail 15 % of the time.
pub fn behaviour(index: usize) -> Behaviour {
    match index {
        0 => Behaviour {
            fault_rate: 0.15,
            outage_deliveries: 60,
        },
        1 => Behaviour {
            fault_rate: 0.45,
            outage_deliveries: 0,
        },
        _ => Behaviour {
            fault_rate: 0.15,
            outage_deliveries: 0,
        },
    }
}

/// What the harness itself did wrong on purpose.
#[derive(Debug, Default, Clone, Serialize)]
pub struct HarnessFaults {
    pub duplicate_stream_batches: u64,
    pub duplicate_stream_records: u64,
    pub duplicate_messages: u64,
    pub worker_deaths: u64,
    /// Handler calls that failed (a batch item failure or a storage error of the harness' own
    /// sweep or roll-up call): the trigger is retried.
    pub handler_failures: u64,
}

/// The whole run: its configuration, the figures of every wave added up, and the defects.
#[derive(Debug, Clone, Serialize)]
pub struct ChaosReport {
    pub config: ChaosConfig,
    pub waves: usize,
    pub figures: WaveFigures,
    pub harness: HarnessFaults,
    /// SDK faults injected, by kind.
    pub sdk_faults: std::collections::BTreeMap<String, u64>,
    /// SDK faults injected per kind of request (`local::request_kinds`; a request of no listed
    /// kind by its operation, `UpdateItem@*`), by fault kind.
    pub sdk_faults_by_request: BTreeMap<String, BTreeMap<String, u64>>,
    /// The kinds of request the handlers made.
    pub requests_made: BTreeSet<String>,
    /// Requests of no listed kind (their signatures): a kind the fault matrix lacks.
    pub unlisted_requests: BTreeSet<String>,
    pub signatures_checked: u64,
    pub signature_failures: u64,
    pub elapsed_secs: f64,
}

impl ChaosReport {
    /// Defects of every kind added up (0 for a good run).
    pub fn defects(&self) -> u64 {
        self.figures.defects.total() + self.signature_failures
    }

    /// The one summary line.
    pub fn summary(&self) -> String {
        let f = &self.figures;
        let d = &f.defects;
        let sdk: u64 = self.sdk_faults.values().sum();
        let h = &self.harness;
        format!(
            "chaos: seed={} changes={} subs={} waves={} deliveries={} attempts={} requests={} \
             faults={} (endpoint={} sdk={} dup_stream={} dup_msg={} worker_deaths={}) paused={} \
             late_answers={} lost={} duplicated={} stuck={} lifecycle={} history={} off_schedule={} signatures={} \
             rollup={} pauses={} notices={} dead_counts={} internal={} virtual_hours={:.1} elapsed={:.0}s",
            self.config.seed,
            self.config.changes,
            self.config.subscriptions,
            self.waves,
            f.deliveries,
            f.attempts,
            f.requests,
            f.endpoint_faults
                + sdk
                + h.duplicate_stream_records
                + h.duplicate_messages
                + h.worker_deaths,
            f.endpoint_faults,
            sdk,
            h.duplicate_stream_records,
            h.duplicate_messages,
            h.worker_deaths,
            f.paused_subscriptions,
            f.answered_after_timeout,
            d.lost,
            d.duplicated,
            d.stuck,
            d.lifecycle,
            d.history,
            d.off_schedule,
            self.signature_failures,
            d.rollup,
            d.pauses,
            d.notices,
            d.dead_counts,
            d.internal,
            f.virtual_secs as f64 / 3600.0,
            self.elapsed_secs,
        )
    }
}

/// Runs the scenario, wave by wave, verifying every signature the endpoints received with the
/// Standard Webhooks reference package (`scripts/verify_signatures.py`) after each wave.
/// `progress` sees the report so far after every wave (a long run that is stopped still has
/// its completed waves).
pub async fn run(
    config: &ChaosConfig,
    mut progress: impl FnMut(&ChaosReport),
) -> Result<ChaosReport> {
    let started = Instant::now();
    let mut report = ChaosReport {
        config: config.clone(),
        waves: 0,
        figures: WaveFigures::default(),
        harness: HarnessFaults::default(),
        sdk_faults: Default::default(),
        sdk_faults_by_request: Default::default(),
        requests_made: Default::default(),
        unlisted_requests: Default::default(),
        signatures_checked: 0,
        signature_failures: 0,
        elapsed_secs: 0.0,
    };
    let mut left = config.changes;
    while left > 0 {
        let n = left.min(config.wave_changes.max(1));
        let wave = run_wave(config, report.waves, n).await?;
        let verified = check::verify_signatures(&wave.signed)?;
        report.signatures_checked += verified.checked;
        report.signature_failures += verified.failed;
        report.figures.add(&wave.figures);
        report.harness.add(&wave.harness);
        for (kind, count) in wave.sdk_faults {
            *report.sdk_faults.entry(kind.to_string()).or_insert(0) += count;
        }
        for ((request, fault), count) in wave.by_request {
            let faults = report.sdk_faults_by_request.entry(request).or_default();
            *faults.entry(fault.to_string()).or_insert(0) += count;
        }
        report.requests_made.extend(wave.made);
        report.unlisted_requests.extend(wave.unlisted);
        report.waves += 1;
        report.elapsed_secs = started.elapsed().as_secs_f64();
        left -= n;
        tracing::info!(wave = report.waves, "{}", report.summary());
        progress(&report);
    }
    Ok(report)
}

impl HarnessFaults {
    fn add(&mut self, o: &HarnessFaults) {
        self.duplicate_stream_batches += o.duplicate_stream_batches;
        self.duplicate_stream_records += o.duplicate_stream_records;
        self.duplicate_messages += o.duplicate_messages;
        self.worker_deaths += o.worker_deaths;
        self.handler_failures += o.handler_failures;
    }
}

struct Wave {
    figures: WaveFigures,
    harness: HarnessFaults,
    sdk_faults: std::collections::BTreeMap<&'static str, u64>,
    by_request: FaultsByRequest,
    made: BTreeSet<String>,
    unlisted: BTreeSet<String>,
    signed: Vec<check::SignedRequest>,
}

/// The kinds of request a wave's handlers made (the first listed kind each matches, as the
/// schedule's plans go), the signatures of the requests no kind lists, and the faults injected
/// per kind.
fn requests_of(
    faults: &crate::faults::Faults,
) -> (FaultsByRequest, BTreeSet<String>, BTreeSet<String>) {
    let mut made = BTreeSet::new();
    let mut unlisted = BTreeSet::new();
    for (signature, (operation, body)) in faults.kinds.seen() {
        match KINDS.iter().find(|k| k.covers(&operation, &body)) {
            Some(kind) => made.insert(kind.name.to_string()),
            None => unlisted.insert(signature),
        };
    }
    let by_request = faults
        .injected_by_plan()
        .into_iter()
        .map(|((matcher, fault), n)| {
            let kind = KINDS.iter().find(|k| k.matcher().key() == matcher);
            ((kind.map_or(matcher, |k| k.name.to_string()), fault), n)
        })
        .collect();
    (by_request, made, unlisted)
}

/// (kind of request, fault kind) → faults injected.
type FaultsByRequest = BTreeMap<(String, &'static str), u64>;

/// One wave on a fresh stack.
struct Run<'a> {
    config: &'a ChaosConfig,
    p: Pipeline,
    /// The harness' own clients: no fault layer, not metered.
    raw: aws_sdk_dynamodb::Client,
    raw_sqs: aws_sdk_sqs::Client,
    changes: tokio::sync::Mutex<StreamTap>,
    deliveries: tokio::sync::Mutex<StreamTap>,
    queue: QueueTap,
    rng: Mutex<StdRng>,
    harness: Mutex<HarnessFaults>,
}

async fn run_wave(config: &ChaosConfig, index: usize, changes: usize) -> Result<Wave> {
    let wave_seed = config
        .seed
        .wrapping_add((index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let sleep = CompressedSleep(config.sdk_sleep_compression);
    let mut p = Pipeline::with_stack(TestStack::try_new_with_sdk_sleep(Some(sleep)).await?).await;
    let shared_clock: std::sync::Arc<dyn Clock> = std::sync::Arc::new(p.clock.clone());
    p.worker = std::sync::Arc::new(DeliveryWorker::with_adapters(
        p.stack.clients.clone(),
        p.stack.config.clone(),
        shared_clock,
        WebhookAdapter::new(TargetPolicy::LOCAL_DEMO, config.attempt_timeout),
        builtin::registry(),
    ));
    let hang = config.attempt_timeout * 3;
    let mut endpoints = Vec::new();
    let mut subscriptions = Vec::new();
    let f = p.fixtures();
    let account = f.account(&["admin@example.com"]).await?;
    for i in 0..config.subscriptions {
        let e = Endpoint::start(wave_seed, i, behaviour(i), p.clock.clone(), hang).await;
        let integration = f
            .webhook(&account.account_id, e.receiver.url(&format!("/hooks/{i}")))
            .await?;
        let sub = f
            .subscription(
                &integration,
                &["catalog_item"],
                None,
                &["sku", "name", "price"],
                RetryPolicy::FixedSchedule,
            )
            .await?;
        endpoints.push(e);
        subscriptions.push(sub);
    }
    // Beside the webhooks, a built-in handler's subscription: its success is recorded on the event.
    let built_in = f
        .integration(
            &account.account_id,
            shared::domain::delivery_method::DeliveryMethod::Internal,
            None,
            Some(builtin::NAME),
        )
        .await?;
    let fields = ["sku", "name", "price"];
    let internal = f
        .subscription(
            &built_in,
            &["catalog_item"],
            None,
            &fields,
            RetryPolicy::FixedSchedule,
        )
        .await?;
    // Only now: the fixtures above are the test's setup, not the handlers' work.
    p.stack
        .faults
        .follow(sdk_schedule(wave_seed, config.sdk_fault_scale));
    crate::request_kinds::record(&p.stack.faults);
    // The dispatcher's mapping filters with template.yaml's FilterCriteria, as the pipeline's.
    let deliveries = p.stack.mapped_stream("DeliveryTable", "DispatchFunction");
    let mut queue = p.stack.queue("DeliveryQueue");
    // A failed message comes back after its visibility timeout in AWS; here at once (the
    // virtual clock does not move the queue's timers).
    queue.redeliver_failures_now = true;
    let run = Run {
        config,
        raw: aws_sdk_dynamodb::Client::new(&p.stack.sdk),
        raw_sqs: aws_sdk_sqs::Client::new(&p.stack.sdk),
        changes: tokio::sync::Mutex::new(p.stack.stream("ChangesTable")),
        deliveries: tokio::sync::Mutex::new(deliveries),
        queue,
        rng: Mutex::new(StdRng::seed_from_u64(wave_seed)),
        harness: Mutex::new(HarnessFaults::default()),
        p,
    };
    let started_at = run.p.now();
    let mut written = Vec::new();
    let mut left = changes;
    while left > 0 {
        let n = left.min(config.round_changes.max(1));
        for i in 0..n {
            let change =
                catalog_change(&account.account_id, run.p.now(), (written.len() + i) as f64);
            // The owning application's write: not one of the handlers' calls.
            let put = write::put(
                &run.p.stack.config.changes_table,
                serde_dynamo::to_item(&change)?,
            )?;
            write::send(&run.raw, put).await?;
            written.push(change.change_id.clone());
        }
        left -= n;
        run.pump().await?;
        run.advance(Duration::from_secs(20)).await;
    }
    let walk_started = Instant::now();
    tracing::info!(
        secs = run.p.now().since(started_at).as_secs(),
        "chaos: changes written, walking"
    );
    let (snapshot, steps) = run.walk(changes, subscriptions.len()).await?;
    tracing::info!(
        steps,
        secs = walk_started.elapsed().as_secs(),
        "chaos: walk done"
    );
    let logs: Vec<_> = endpoints.iter().map(Endpoint::log).collect();
    let notices = check::scan(&run.raw, &run.p.stack.config.notification_table).await?;
    let mut figures = check::check(&check::Inputs {
        changes: &written,
        subscriptions: &subscriptions,
        snapshot: &snapshot,
        logs: &logs,
        notices: &notices,
        internal: Some(&internal),
        attempt_timeout: run.config.attempt_timeout,
    });
    figures.virtual_secs = run.p.now().since(started_at).as_secs();
    figures.walk_steps = steps;
    let signed = check::signed_requests(&logs);
    let harness = run.harness.lock().unwrap().clone();
    let sdk_faults = run.p.stack.faults.injected_by_kind();
    let (by_request, made, unlisted) = requests_of(&run.p.stack.faults);
    run.p.stack.faults.clear();
    drop_stack(&run).await;
    Ok(Wave {
        figures,
        harness,
        sdk_faults,
        by_request,
        made,
        unlisted,
        signed,
    })
}

/// Deletes the wave's tables and queues so the emulator does not keep them in memory.
async fn drop_stack(run: &Run<'_>) {
    for table in run.p.stack.stack.tables.values() {
        let _ = run.raw.delete_table().table_name(&table.name).send().await;
    }
    for queue in run.p.stack.stack.queues.values() {
        let _ = run
            .raw_sqs
            .delete_queue()
            .queue_url(&queue.url)
            .send()
            .await;
    }
}

impl Run<'_> {
    fn chance(&self, rate: f64) -> bool {
        rate > 0.0 && self.rng.lock().unwrap().gen::<f64>() < rate
    }

    fn note(&self, f: impl FnOnce(&mut HarnessFaults)) {
        f(&mut self.harness.lock().unwrap());
    }

    /// A stream handler as the event source mapping calls it, except that now and then a
    /// prefix of the batch is handed over again (a retried or replayed shard).
    async fn twice_now_and_then<F, Fut>(
        &self,
        handler: F,
        event: DynamoDbEvent,
    ) -> DynamoDbEventResponse
    where
        F: Fn(DynamoDbEvent) -> Fut,
        Fut: std::future::Future<Output = DynamoDbEventResponse>,
    {
        let again = self.chance(self.config.duplicate_stream_rate).then(|| {
            let n = self
                .rng
                .lock()
                .unwrap()
                .gen_range(1..=event.records.len().max(1));
            let mut prefix = event.clone();
            prefix.records.truncate(n);
            prefix
        });
        let mut response = handler(event).await;
        if let Some(prefix) = again {
            let n = prefix.records.len() as u64;
            self.note(|h| {
                h.duplicate_stream_batches += 1;
                h.duplicate_stream_records += n;
            });
            let second = handler(prefix).await;
            let known: HashSet<_> = response
                .batch_item_failures
                .iter()
                .map(|f| f.item_identifier.clone())
                .collect();
            for f in second.batch_item_failures {
                if !known.contains(&f.item_identifier) {
                    response.batch_item_failures.push(f);
                }
            }
        }
        let failed = response.batch_item_failures.len() as u64;
        self.note(|h| h.handler_failures += failed);
        response
    }

    /// The delivery worker's invocation, with duplicate messages sent back to the queue and
    /// workers that die after their claim (the claim is written, then the delivery is dropped
    /// from its message without an outcome; a message left with none is deleted as if handled).
    async fn work(&self, mut event: SqsEvent) -> aws_lambda_events::event::sqs::SqsBatchResponse {
        let mut kept = Vec::new();
        for message in std::mem::take(&mut event.records) {
            let body = message.body.clone().unwrap_or_default();
            if self.chance(self.config.duplicate_message_rate) {
                let sent = self
                    .raw_sqs
                    .send_message()
                    .queue_url(&self.queue.queue_url)
                    .message_body(&body)
                    .send()
                    .await;
                if sent.is_ok() {
                    self.note(|h| h.duplicate_messages += 1);
                }
            }
            match self.die_after_claims(&body).await {
                Deaths::None => kept.push(message),
                Deaths::All => continue,
                // The worker died on some of a packed message's deliveries: it handles the rest.
                Deaths::Some(rest) => {
                    let mut rest_only = message;
                    rest_only.body = Some(rest);
                    kept.push(rest_only);
                }
            }
        }
        event.records = kept;
        if event.records.is_empty() {
            return Default::default();
        }
        let response = self.p.worker.handle(event).await;
        let failed = response.batch_item_failures.len() as u64;
        self.note(|h| h.handler_failures += failed);
        response
    }

    /// Workers dying after their claim, one chance per delivery (a packed message's each): a
    /// dying worker claims the delivery as a worker would and stops there. What is left of the
    /// message for the worker that does not die.
    async fn die_after_claims(&self, body: &str) -> Deaths {
        let Some(works) = shared::delivery::dispatch::publish::works_in(body) else {
            return Deaths::None;
        };
        let mut rest = Vec::new();
        let mut died = 0;
        for work in works {
            if self.chance(self.config.worker_death_rate)
                && self.claim_as_a_dead_worker(&work).await
            {
                died += 1;
            } else {
                rest.push(work);
            }
        }
        self.note(|h| h.worker_deaths += died);
        // A message's deliveries are one account's, at most `PACKED`: what is left packs into one.
        match shared::delivery::dispatch::publish::pack(&rest).pop() {
            _ if died == 0 => Deaths::None,
            None => Deaths::All,
            Some((message, _)) => Deaths::Some(message.body),
        }
    }

    /// Claims `work`'s delivery as a worker would: whether the claim was written.
    async fn claim_as_a_dead_worker(&self, work: &DeliveryWork) -> bool {
        let table = &self.p.stack.config.delivery_table;
        let now = self.p.now();
        // The worker's own claim: it refuses a settled, not yet due or leased delivery. No bound
        // on attempts here: the worker that takes over applies the subscription's Max Retries.
        let due_by = now.plus(shared::delivery::worker::EARLY_TOLERANCE);
        let Ok(claim) = shared::store::delivery::claim(
            table,
            work,
            "dead-worker",
            now,
            PROCESSING_LEASE,
            due_by,
            u32::MAX,
        ) else {
            return false;
        };
        matches!(write::send(&self.raw, claim).await, Ok(w) if w.applied())
    }

    /// Ingest, dispatch and work until nothing moves.
    async fn pump(&self) -> Result<()> {
        for _ in 0..50 {
            let ingested = {
                let mut tap = self.changes.lock().await;
                tap.drain(|e| self.twice_now_and_then(|e| self.p.ingest.handle(e), e))
                    .await?
            };
            let dispatched = {
                let mut tap = self.deliveries.lock().await;
                tap.drain(|e| self.twice_now_and_then(|e| self.p.dispatcher.handle_stream(e), e))
                    .await?
            };
            let worked = self.queue.drain(|e| self.work(e), 1000).await?;
            if ingested.records == 0 && dispatched.records == 0 && worked.messages == 0 {
                break;
            }
        }
        Ok(())
    }

    /// Moves the virtual clock on and runs what the schedules run: the dispatcher's sweep and
    /// the frequent roll-up walk (which also finds deliveries whose first dispatch was lost).
    async fn advance(&self, by: Duration) {
        self.p.clock.advance(by);
        if self.p.dispatcher.sweep().await.is_err() {
            self.note(|h| h.handler_failures += 1);
        }
        let report = self.p.reconcile(RunKind::Rollup, 100_000).await;
        if !report.ok() {
            self.note(|h| h.handler_failures += 1);
        }
    }

    /// Walks the virtual clock from one due moment to the next until every delivery and event
    /// is terminal (or nothing has moved for two virtual days), and returns the final tables.
    async fn walk(&self, changes: usize, subscriptions: usize) -> Result<(Snapshot, u64)> {
        let mut last_open = usize::MAX;
        let mut quiet_since = self.p.now();
        let mut still_steps = 0u32;
        for step in 0.. {
            self.pump().await?;
            let snapshot = Snapshot::read(&self.raw, &self.p.stack.config.delivery_table).await?;
            let open = snapshot.open();
            let now = self.p.now();
            if open == 0 && snapshot.events.len() >= changes && subscriptions > 0 {
                return Ok((snapshot, step));
            }
            if open != last_open {
                last_open = open;
                quiet_since = now;
                still_steps = 0;
            } else if now.since(quiet_since) > shared::domain::time::DAY * 2 {
                return Ok((snapshot, step));
            } else {
                still_steps += 1;
            }
            // While something is overdue the schedules run a minute apart, as in production
            // (a jump to the next due moment would leave it waiting hours); past the recovery
            // bound without a change it is a defect the check reports, and the walk jumps on.
            let sweep_next = snapshot.overdue(now, FIRST_DISPATCH_GRACE)
                && u64::from(still_steps) * SWEEP_EVERY.as_secs()
                    <= check::LATENESS_BOUND.as_secs();
            let wait = snapshot
                .next_due(now, FIRST_DISPATCH_GRACE)
                .map(|t: Timestamp| t.since(now))
                .unwrap_or(PROCESSING_LEASE + Duration::from_secs(1));
            let wait = if sweep_next {
                wait.min(SWEEP_EVERY)
            } else {
                wait
            };
            self.advance(wait.max(Duration::from_secs(1))).await;
        }
        unreachable!("the walk ends when everything is terminal or nothing moves")
    }
}
