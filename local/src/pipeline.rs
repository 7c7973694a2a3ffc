//! The whole integration pipeline on the emulator, wired as the template wires it in AWS: the
//! changes stream into ingest, the delivery table's stream into the dispatcher, the delivery queue
//! into the worker; the dispatcher's sweep runs when the (manual) clock moves.

use crate::fixtures::Fixtures;
use crate::function_process::RunningFunction;
use crate::logs::LogCapture;
use crate::queues::QueueReport;
use crate::runtime_api::Answer;
use crate::streams::StreamTap;
use crate::test_stack::TestStack;
use anyhow::Result;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use shared::clock::{Clock, ManualClock};
use shared::delivery::dispatch::{Dispatcher, Invocation};
use shared::delivery::ingest::Ingest;
use shared::delivery::rollup::{RollUp, RollUpReport};
use shared::delivery::worker::DeliveryWorker;
use shared::domain::change::Change;
use shared::domain::time::Timestamp;
use shared::ids::{AccountId, ChangeId, SubscriptionId};
use shared::metrics::CapturedEmf;
use shared::notify::settle::reconcile_settler;
use shared::reconcile::{Budget, ReconcileReport, Reconciler, RunKind};
use shared::store::delivery::Delivery;
use shared::store::event::EventRecord;
use shared::store::keys;
use shared::store::subscription::Subscription;
use shared::store::{from_item, read, write, Item};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

pub struct Pipeline {
    pub stack: TestStack,
    pub clock: ManualClock,
    pub ingest: Arc<Ingest>,
    pub dispatcher: Arc<Dispatcher>,
    pub worker: Arc<DeliveryWorker>,
    /// The event monitor's roll-up (the dispatcher's stream path also runs it promptly).
    pub rollup: RollUp,
    changes: Mutex<StreamTap>,
    deliveries: Mutex<StreamTap>,
    /// The wall time of every handler invocation, per function, as Lambda bills it.
    pub billed: Billed,
    /// With CPU accounting ([`Pipeline::measured`]): each function's own runtime and thread.
    containers: Option<Containers>,
    /// Run as they ship ([`Pipeline::in_processes`]): each function's real binary.
    pub processes: Option<Processes>,
    /// With CPU accounting: what each function logged, at the functions' default level (the
    /// subscriber of their `main`, installed on each function's thread).
    pub logs: FunctionLogs,
}

/// The log lines of each function of a measured pipeline (empty otherwise).
#[derive(Debug, Default)]
pub struct FunctionLogs {
    pub ingest: LogCapture,
    pub dispatch: LogCapture,
    pub deliver: LogCapture,
}

impl FunctionLogs {
    pub fn reset(&self) {
        for f in [&self.ingest, &self.dispatch, &self.deliver] {
            f.reset();
        }
    }
}

/// Handler invocations and their billed duration (each rounded up to the millisecond, as Lambda
/// bills it) per function: what the bench turns into dollars of Lambda duration; with CPU
/// accounting, also the CPU time each function's handler used.
#[derive(Debug, Default)]
pub struct Billed {
    pub ingest: BilledTime,
    pub dispatch: BilledTime,
    pub deliver: BilledTime,
}

impl Billed {
    pub fn reset(&self) {
        for f in [&self.ingest, &self.dispatch, &self.deliver] {
            *f.0.lock().expect("billed time") = Tally::default();
        }
    }
}

/// Invocations, billed milliseconds and handler CPU time of one function.
#[derive(Debug, Default)]
pub struct BilledTime(std::sync::Mutex<Tally>);

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    invocations: u64,
    billed_ms: u64,
    cpu: Duration,
}

impl BilledTime {
    /// Runs one invocation's future and bills its wall time.
    pub async fn time<F: std::future::Future>(&self, invocation: F) -> F::Output {
        let started = std::time::Instant::now();
        let out = invocation.await;
        self.bill(started.elapsed(), Duration::ZERO);
        out
    }
    fn bill(&self, wall: Duration, cpu: Duration) {
        let ms = wall.as_micros().div_ceil(1000) as u64;
        let mut t = self.0.lock().expect("billed time");
        t.invocations += 1;
        t.billed_ms += ms.max(1);
        t.cpu += cpu;
    }
    /// (invocations, billed milliseconds) so far.
    pub fn get(&self) -> (u64, u64) {
        let t = self.0.lock().expect("billed time");
        (t.invocations, t.billed_ms)
    }
    /// The CPU time the function's handler used so far (zero without CPU accounting).
    pub fn cpu(&self) -> Duration {
        self.0.lock().expect("billed time").cpu
    }
}

/// Each function's container: a thread of its own running a current-thread tokio runtime, which
/// its invocations run on. A Lambda container runs one invocation at a time on its own CPU; the
/// CPU clock of this thread across an invocation is that invocation's CPU: the handler, the SDK's
/// signing and (de)serialisation and the connection tasks its HTTP clients spawn (they live on
/// this runtime, as the function's clients are its own), and nothing of the harness (taps,
/// receiver, the bench itself run on the caller's runtime; the emulator is another process).
struct Containers {
    ingest: Container,
    dispatch: Container,
    deliver: Container,
}

/// The three functions on a delivery's path, each a binary of its own running under a Runtime
/// API of its own (`crate::function_process`), as a Lambda container runs it.
pub struct Processes {
    pub ingest: Mutex<RunningFunction>,
    pub dispatch: Mutex<RunningFunction>,
    pub deliver: Mutex<RunningFunction>,
}

impl Processes {
    /// Each function's process CPU time so far (user and system, all threads).
    pub async fn cpu(&self) -> Result<[(&'static str, Duration); 3]> {
        Ok([
            ("ingest", self.ingest.lock().await.cpu()?),
            ("dispatch", self.dispatch.lock().await.cpu()?),
            ("deliver", self.deliver.lock().await.cpu()?),
        ])
    }
}

/// Where a function's invocations run: on the caller's runtime, on a container of the measured
/// pipeline, or in the function's process.
#[derive(Clone, Copy)]
enum Host<'a> {
    Caller,
    Container(&'a Container),
    Process(&'a Mutex<RunningFunction>),
}

/// A function on a delivery's path.
#[derive(Clone, Copy)]
enum Stage {
    Ingest,
    Dispatch,
    Deliver,
}

type Job = Box<dyn FnOnce(&tokio::runtime::Runtime) + Send>;

struct Container {
    jobs: std::sync::mpsc::Sender<Job>,
}

impl Container {
    /// A container whose function logs to `logs`, at the functions' default level.
    fn start(name: &str, logs: &LogCapture) -> Self {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        let subscriber = logs.subscriber(shared::runtime::DEFAULT_LOG_LEVEL);
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                // What the function's `main` installs, for this thread's invocations.
                let _logs = tracing::subscriber::set_default(subscriber);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a function's runtime");
                // Ends when the pipeline (the sender) is dropped.
                for job in queue {
                    job(&runtime);
                }
            })
            .expect("a function's thread");
        Container { jobs }
    }

    /// Runs the invocation `job` makes on this container: its output, wall time and CPU time.
    async fn run<T, Fut>(
        &self,
        job: impl FnOnce() -> Fut + Send + 'static,
    ) -> (T, Duration, Duration)
    where
        T: Send + 'static,
        Fut: std::future::Future<Output = T> + 'static,
    {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |runtime| {
            let (cpu, started) = (thread_cpu_time(), std::time::Instant::now());
            let out = runtime.block_on(job());
            let wall = started.elapsed();
            let _ = done.send((out, wall, thread_cpu_time().saturating_sub(cpu)));
        });
        self.jobs.send(job).expect("the function's thread runs");
        result
            .await
            .expect("the function's thread finished the invocation")
    }
}

/// The CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`: user and system).
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// What one `pump` moved.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PumpReport {
    pub changes: usize,
    pub change_failures: usize,
    /// Delivery-stream records the dispatcher acted on (new work, prompt roll-ups).
    pub dispatcher_records: usize,
    pub queue: QueueReport,
}

impl Pipeline {
    pub async fn new() -> Self {
        Self::with_stack(TestStack::new().await).await
    }

    pub async fn with_stack(stack: TestStack) -> Self {
        Self::build(stack, false)
    }

    /// A pipeline that also measures each function's CPU time per invocation
    /// ([`BilledTime::cpu`]): every function has clients of its own and runs its invocations on a
    /// runtime and thread of its own (see `Containers`). For the bench: a handler of this
    /// pipeline must only be invoked through it (`ingest_pending`, `dispatch_pending`,
    /// `work_pending`, `advance`), as its connections live on its own runtime.
    pub async fn measured() -> Self {
        Self::build(TestStack::new().await, true)
    }

    /// A pipeline whose three delivery functions run as the binaries built in `profile_dir`
    /// (`target/release`, …), each a process under a Runtime API of its own, handed the event
    /// source mappings' batches as JSON: what the bench measures a function's process CPU by.
    /// The processes keep the real clock (the pipeline's clock must not be moved) and their own
    /// SDK clients (the stack's meter does not count their requests).
    pub async fn in_processes(profile_dir: &std::path::Path) -> Result<Self> {
        let mut p = Self::build(TestStack::new().await, false);
        let start = |id| RunningFunction::start_from(&p.stack, id, Some(profile_dir));
        let processes = Processes {
            ingest: Mutex::new(start("IngestFunction").await?),
            dispatch: Mutex::new(start("DispatchFunction").await?),
            deliver: Mutex::new(start("DeliverFunction").await?),
        };
        p.processes = Some(processes);
        Ok(p)
    }

    /// Fixtures on this pipeline's stack, made at its clock's time.
    pub fn fixtures(&self) -> Fixtures<'_> {
        Fixtures {
            clients: &self.stack.clients,
            table: &self.stack.config.delivery_table,
            signing_key_id: &self.stack.config.signing_key_id,
            now: self.now(),
        }
    }

    /// Where `stage`'s invocations run.
    fn host(&self, stage: Stage) -> Host<'_> {
        if let Some(p) = &self.processes {
            return Host::Process(match stage {
                Stage::Ingest => &p.ingest,
                Stage::Dispatch => &p.dispatch,
                Stage::Deliver => &p.deliver,
            });
        }
        match &self.containers {
            None => Host::Caller,
            Some(c) => Host::Container(match stage {
                Stage::Ingest => &c.ingest,
                Stage::Dispatch => &c.dispatch,
                Stage::Deliver => &c.deliver,
            }),
        }
    }

    fn build(stack: TestStack, measured: bool) -> Self {
        let clock = ManualClock::starting_now();
        let shared_clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let clients = || {
            if measured {
                stack.function_clients()
            } else {
                stack.clients.clone()
            }
        };
        let ingest = Ingest::new(clients(), stack.config.clone(), shared_clock.clone());
        let dispatcher = Dispatcher::new(clients(), stack.config.clone(), shared_clock.clone())
            .without_lookahead();
        let rollup = RollUp::new(
            stack.clients.dynamo.clone(),
            stack.config.delivery_table.clone(),
            shared_clock.clone(),
        );
        let worker = DeliveryWorker::new(clients(), stack.config.clone(), shared_clock);
        let changes = Mutex::new(stack.stream("ChangesTable"));
        // The dispatcher's event source mapping filters with template.yaml's FilterCriteria.
        let deliveries = Mutex::new(stack.mapped_stream("DeliveryTable", "DispatchFunction"));
        let logs = FunctionLogs::default();
        let containers = measured.then(|| Containers {
            ingest: Container::start("ingest", &logs.ingest),
            dispatch: Container::start("dispatch", &logs.dispatch),
            deliver: Container::start("deliver", &logs.deliver),
        });
        Pipeline {
            stack,
            clock,
            ingest: Arc::new(ingest),
            dispatcher: Arc::new(dispatcher),
            worker: Arc::new(worker),
            rollup,
            changes,
            deliveries,
            billed: Billed::default(),
            containers,
            processes: None,
            logs,
        }
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The owning application writes a change into its changes table.
    pub async fn write_change(&self, change: &Change) -> Result<()> {
        let item: Item = serde_dynamo::to_item(change)?;
        self.write_raw_change(item).await
    }

    /// Writes a raw item into the changes table (for malformed-record tests).
    pub async fn write_raw_change(&self, item: Item) -> Result<()> {
        let put = write::put(&self.stack.config.changes_table, item)?;
        write::send(&self.stack.clients.dynamo, put).await?;
        Ok(())
    }

    /// Drains the changes stream into ingest.
    pub async fn ingest_pending(&self) -> Result<(usize, usize)> {
        let mut tap = self.changes.lock().await;
        let r = tap
            .drain(|event| {
                self.invoke_with(
                    &self.billed.ingest,
                    self.host(Stage::Ingest),
                    &self.ingest,
                    event,
                    |h, event| async move { h.handle(event).await },
                )
            })
            .await?;
        Ok((r.records, r.failures))
    }

    /// Drains the delivery table's stream into the dispatcher: only the records the template's
    /// `FilterCriteria` pass, in full batches of those, as the event source mapping hands them
    /// over. Returns how many records the dispatcher received.
    pub async fn dispatch_pending(&self) -> Result<usize> {
        Ok(self.dispatch_pending_with_failures().await?.0)
    }

    /// [`Self::dispatch_pending`], also answering how many records the dispatcher reported as
    /// failed (each hand-over counts again).
    pub async fn dispatch_pending_with_failures(&self) -> Result<(usize, usize)> {
        let mut tap = self.deliveries.lock().await;
        let r = tap
            .drain(|event| {
                // Through the function's own entry, its payload parsed as the function parses it.
                let answer = self.invoke_with(
                    &self.billed.dispatch,
                    self.host(Stage::Dispatch),
                    &self.dispatcher,
                    Invocation::Stream(event),
                    |h, invocation| async move {
                        h.handle_invocation(invocation, &CapturedEmf::default())
                            .await
                            .expect("a stream batch is dispatched")
                    },
                );
                async move {
                    serde_json::from_value::<DynamoDbEventResponse>(answer.await)
                        .expect("the dispatcher answers a stream batch's failures")
                }
            })
            .await?;
        Ok((r.records, r.failures))
    }

    /// Drains the delivery queue into the worker.
    pub async fn work_pending(&self) -> Result<QueueReport> {
        let tap = self.stack.queue("DeliveryQueue");
        tap.drain(
            |event| {
                self.invoke_with(
                    &self.billed.deliver,
                    self.host(Stage::Deliver),
                    &self.worker,
                    event,
                    |h, event| async move { h.handle(event).await },
                )
            },
            1000,
        )
        .await
    }

    /// One invocation of a function's handler with `event` (`call` on both), billed to `billed`.
    /// With CPU accounting, as the Lambda runtime hands it over: the event's JSON is parsed and
    /// the response serialised inside the invocation, on the function's container. In a process:
    /// the event's JSON handed to the function's binary, its answer parsed (a process that
    /// answers with an error, or not at all, is a broken bench: it panics).
    async fn invoke_with<H, E, T, Fut>(
        &self,
        billed: &BilledTime,
        host: Host<'_>,
        handler: &Arc<H>,
        event: E,
        call: impl FnOnce(Arc<H>, E) -> Fut + Send + 'static,
    ) -> T
    where
        H: Send + Sync + 'static,
        E: serde::Serialize + serde::de::DeserializeOwned + 'static,
        T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
        Fut: std::future::Future<Output = T> + 'static,
    {
        let container = match host {
            Host::Caller => return billed.time(call(handler.clone(), event)).await,
            Host::Process(process) => {
                let payload = serde_json::to_value(&event).expect("a Lambda event serialises");
                let mut process = process.lock().await;
                let answer = billed.time(process.invoke(&payload)).await;
                return match answer {
                    Ok(Answer::Response(out)) => {
                        serde_json::from_value(out).expect("the function's answer parses")
                    }
                    other => panic!(
                        "{} answered {other:?}; its output:\n{}",
                        process.spec.binary,
                        process.log()
                    ),
                };
            }
            Host::Container(container) => container,
        };
        let json = serde_json::to_vec(&event).expect("a Lambda event serialises");
        self.invoke(billed, Some(container), handler, move |h| async move {
            let event: E = serde_json::from_slice(&json).expect("a Lambda event parses");
            let out = call(h, event).await;
            std::hint::black_box(serde_json::to_vec(&out).expect("a response serialises"));
            out
        })
        .await
    }

    /// One invocation of a function's handler (`call` on it), billed to `billed`: on the
    /// function's container when the pipeline measures CPU, else on the caller's runtime.
    async fn invoke<H, T, Fut>(
        &self,
        billed: &BilledTime,
        container: Option<&Container>,
        handler: &Arc<H>,
        call: impl FnOnce(Arc<H>) -> Fut + Send + 'static,
    ) -> T
    where
        H: Send + Sync + 'static,
        T: Send + 'static,
        Fut: std::future::Future<Output = T> + 'static,
    {
        let handler = handler.clone();
        match container {
            None => billed.time(call(handler)).await,
            Some(container) => {
                let (out, wall, cpu) = container.run(move || call(handler)).await;
                billed.bill(wall, cpu);
                out
            }
        }
    }

    /// Runs every stage until nothing moves.
    pub async fn pump(&self) -> Result<PumpReport> {
        let mut report = PumpReport::default();
        for _ in 0..20 {
            let (changes, failures) = self.ingest_pending().await?;
            let published = self.dispatch_pending().await?;
            let queue = self.work_pending().await?;
            report.changes += changes;
            report.change_failures += failures;
            report.dispatcher_records += published;
            report.queue.batches += queue.batches;
            report.queue.messages += queue.messages;
            report.queue.deleted += queue.deleted;
            report.queue.failures += queue.failures;
            if changes == 0 && queue.messages == 0 {
                break;
            }
        }
        Ok(report)
    }

    /// Moves the clock on, runs the dispatcher's sweep (as its schedule would) and pumps.
    pub async fn advance(&self, by: Duration) -> Result<PumpReport> {
        self.clock.advance(by);
        let container = self.containers.as_ref().map(|c| &c.dispatch);
        self.invoke(
            &self.billed.dispatch,
            container,
            &self.dispatcher,
            |h| async move { h.sweep().await },
        )
        .await?;
        self.pump().await
    }

    /// One roll-up pass of the event monitor (`docs/lifecycles.md#event-status`).
    pub async fn roll_up_pass(&self) -> Result<RollUpReport> {
        Ok(self.rollup.pass().await?)
    }

    /// One reconciliation invocation as the reconcile function runs it (with the notification
    /// settling the function wires), bounded by `max_events` (and an hour), with a dispatcher that
    /// publishes only what is already due (the manual clock's minutes are not the queue's seconds).
    pub async fn reconcile(&self, kind: RunKind, max_events: usize) -> ReconcileReport {
        let clock: Arc<dyn Clock> = Arc::new(self.clock.clone());
        let dispatcher = Dispatcher::new(
            self.stack.clients.clone(),
            self.stack.config.clone(),
            clock.clone(),
        )
        .without_lookahead();
        let settler = reconcile_settler(&self.stack.clients, &self.stack.config, &clock);
        Reconciler::from_parts(self.rollup.clone(), dispatcher)
            .with_notification_settler(Arc::new(settler))
            .with_replays(
                self.stack.clients.dynamo.clone(),
                self.stack.config.delivery_table.clone(),
                clock.clone(),
            )
            .run(kind, Budget::within(Duration::from_secs(3600), max_events))
            .await
    }

    pub async fn delivery(
        &self,
        account_id: &AccountId,
        change_id: &ChangeId,
        subscription_id: &SubscriptionId,
    ) -> Option<Delivery> {
        self.get(
            &keys::event_pk(account_id, change_id),
            &keys::delivery_sk(subscription_id),
        )
        .await
        .map(|i| from_item(i).expect("a delivery item"))
    }

    pub async fn event(&self, account_id: &AccountId, change_id: &ChangeId) -> Option<EventRecord> {
        self.get(&keys::event_pk(account_id, change_id), keys::EVENT_SK)
            .await
            .map(|i| from_item(i).expect("an event item"))
    }

    pub async fn subscription(
        &self,
        account_id: &AccountId,
        subscription_id: &SubscriptionId,
    ) -> Option<Subscription> {
        self.get(
            &keys::account_pk(account_id),
            &keys::subscription_sk(subscription_id),
        )
        .await
        .map(|i| from_item(i).expect("a subscription item"))
    }

    /// A raw item of the delivery table.
    pub async fn get(&self, pk: &str, sk: &str) -> Option<Item> {
        read::get(
            &self.stack.clients.dynamo,
            &self.stack.config.delivery_table,
            pk,
            sk,
        )
        .await
        .expect("get_item")
    }
}
