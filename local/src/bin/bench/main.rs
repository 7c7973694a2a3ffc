//! `make bench`: drives the whole pipeline on the local emulator and prints what each delivery
//! costs in AWS requests (counted by an SDK interceptor on the handlers' clients), Lambda
//! invocations (batches as template.yaml configures them), throughput and latency.
//!
//!   bench [--changes N] [--json] [--noisy-only] [--sdk-cost N] [--only SCENARIO] [--sdk NAME]
//!         [--endpoint-rules N [aws|emulator]] [--backlog N]
//!   bench --processes DIR[,DIR…] [--changes N] [--runs K]
//!
//! `--only latency`: change → webhook at both ends of the batching window setting.
//! `--only "ingest batch"`: ingest's time for a batch of 100 changes against one, at 8 ms a request.
//! `--backlog N`: the "rate-limited backlog" scenario's backlog (2,000 by default: 400 s of its
//! rate, 200 s on its clock; 10,000 takes the emulator about 26 minutes).

mod ingest_batch;
mod memory;
mod noisy;
mod processes;
mod rate_backlog;
mod sdk_cost;

use anyhow::Result;
use local::fixtures::catalog_change;
use local::metering::{Units, DYNAMO_READS, DYNAMO_WRITES};
use local::pipeline::Pipeline;
use local::receiver::{Receiver, Reply};
use local::template::Template;
use memory::{memory_per_batch, print_memory, serve_receiver, vm_hwm_bytes};
use serde_json::{json, Value};
use shared::domain::endpoint_auth::basic_authorization;
use shared::domain::retry::RetryPolicy;
use shared::domain::sealed::Credential;
use shared::domain::time::{MINUTE, SECOND};
use shared::ids::AccountId;
use shared::store::write;
use std::collections::BTreeMap;
use std::time::Instant;
use tracing::instrument::WithSubscriber;

/// CPU time this process has used (user + system), from /proc (Linux).
fn cpu_time() -> std::time::Duration {
    local::function_process::process_cpu(std::process::id()).unwrap_or_default()
}

struct Scenario {
    name: String,
    deliveries: u64,
    /// The handlers' AWS requests by operation.
    requests: BTreeMap<(String, String), u64>,
    /// DynamoDB capacity by operation, as DynamoDB reports it.
    units: BTreeMap<String, Units>,
    /// Records or messages each function received.
    ingest_records: u64,
    dispatch_records: u64,
    worker_messages: u64,
    /// HTTP API calls (each one invocation of the api function).
    api_calls: u64,
    seconds: f64,
    /// CPU time of this process (handlers, harness and receiver) during the scenario.
    cpu: std::time::Duration,
    /// Function logical id → (invocations, billed milliseconds): the handlers' wall time.
    billed: BTreeMap<&'static str, (u64, u64)>,
    /// Function → the CPU time its handler used (each function on its own thread and runtime).
    function_cpu: BTreeMap<&'static str, std::time::Duration>,
    /// Function → the bytes of log lines it wrote, at the functions' default level.
    log_bytes: BTreeMap<&'static str, u64>,
}

impl Scenario {
    fn per(&self, n: u64) -> f64 {
        n as f64 / self.deliveries.max(1) as f64
    }
    /// DynamoDB capacity over all operations.
    fn total_units(&self) -> Units {
        self.units.values().fold(Units::default(), |a, u| Units {
            read: a.read + u.read,
            write: a.write + u.write,
            indexes: a.indexes + u.indexes,
            refused: a.refused + u.refused,
        })
    }
    /// Billed Lambda duration per delivery, in GB-seconds: each function's billed milliseconds
    /// times its configured memory.
    fn gb_seconds_per_delivery(&self) -> f64 {
        self.billed
            .iter()
            .map(|(function, (_, ms))| *ms as f64 / 1000.0 * memory_gb(function))
            .sum::<f64>()
            / self.deliveries.max(1) as f64
    }
    fn count(&self, service: &str, ops: Option<&[&str]>) -> u64 {
        self.requests
            .iter()
            .filter(|((s, o), _)| s == service && ops.is_none_or(|ops| ops.contains(&o.as_str())))
            .map(|(_, n)| n)
            .sum()
    }
}

/// Batch sizes of the event source mappings, read from the template.
struct Batches {
    ingest: u64,
    dispatch: u64,
    deliver: u64,
}

fn batches() -> Batches {
    let size = |function: &str, event: &str| batch_size(function, event) as u64;
    Batches {
        ingest: size("IngestFunction", "Changes"),
        dispatch: size("DispatchFunction", "NewWork"),
        deliver: size("DeliverFunction", "Work"),
    }
}

/// template.yaml as YAML, read once.
fn template_doc() -> &'static serde_yaml::Value {
    static DOC: std::sync::OnceLock<serde_yaml::Value> = std::sync::OnceLock::new();
    DOC.get_or_init(|| {
        let text = std::fs::read_to_string(Template::project_path()).unwrap_or_default();
        serde_yaml::from_str(&text).unwrap_or(serde_yaml::Value::Null)
    })
}

/// The utilisation the delivery table's capacity is scaled to keep when it is provisioned
/// (`DeliveryTableCapacity: provisioned`): the `TargetValue` of its scaling policies, as a
/// fraction (every one of them carries the same; a deployment test holds them to it).
fn provisioned_utilisation() -> f64 {
    let doc = template_doc();
    let target = doc["Resources"]["DeliveryTableScalingTableWritePolicy"]["Properties"]
        ["TargetTrackingScalingPolicyConfiguration"]["TargetValue"]
        .as_f64()
        .unwrap_or(100.0);
    target / 100.0
}

/// A function's configured memory in GB (its own `MemorySize`, else the Globals').
fn memory_gb(function: &str) -> f64 {
    let doc = template_doc();
    let mb = doc["Resources"][function]["Properties"]["MemorySize"]
        .as_u64()
        .or_else(|| doc["Globals"]["Function"]["MemorySize"].as_u64())
        .unwrap_or(128);
    mb as f64 / 1024.0
}

/// What the pipeline billed per function since its last reset.
fn billed(p: &Pipeline) -> BTreeMap<&'static str, (u64, u64)> {
    BTreeMap::from([
        ("IngestFunction", p.billed.ingest.get()),
        ("DispatchFunction", p.billed.dispatch.get()),
        ("DeliverFunction", p.billed.deliver.get()),
    ])
}

/// The CPU time each function's handler used since the pipeline's last reset.
fn function_cpu(p: &Pipeline) -> BTreeMap<&'static str, std::time::Duration> {
    BTreeMap::from([
        ("ingest", p.billed.ingest.cpu()),
        ("dispatch", p.billed.dispatch.cpu()),
        ("deliver", p.billed.deliver.cpu()),
    ])
}

/// The bytes of log lines each function wrote since the pipeline's last reset.
fn log_bytes(p: &Pipeline) -> BTreeMap<&'static str, u64> {
    BTreeMap::from([
        ("ingest", p.logs.ingest.bytes() as u64),
        ("dispatch", p.logs.dispatch.bytes() as u64),
        ("deliver", p.logs.deliver.bytes() as u64),
    ])
}

/// Lambda's own lines per invocation in the JSON log format the template sets
/// (`LogFormat: JSON`, X-Ray tracing active), as CloudWatch receives them: `platform.start` and
/// `platform.report` (the text format's START and REPORT; its END line has no JSON
/// counterpart). Lambda writes them at INFO, so a `SystemLogLevel` of WARN drops them.
const PLATFORM_START: &str = r#"{"time":"2026-12-04T19:52:46.123Z","type":"platform.start","record":{"requestId":"6d68ca91-49c9-448d-89b8-7ca3e6dc66aa","version":"$LATEST","tracing":{"spanId":"54565fb41ac79632","type":"X-Amzn-Trace-Id","value":"Root=1-62e900b2-710d76f009d6e7785905449a;Parent=0efbd19962d95b05;Sampled=1"}}}"#;
const PLATFORM_REPORT: &str = r#"{"time":"2026-12-04T19:52:46.157Z","type":"platform.report","record":{"requestId":"6d68ca91-49c9-448d-89b8-7ca3e6dc66aa","metrics":{"durationMs":33.52,"billedDurationMs":34,"memorySizeMB":256,"maxMemoryUsedMB":31},"tracing":{"spanId":"54565fb41ac79632","type":"X-Amzn-Trace-Id","value":"Root=1-62e900b2-710d76f009d6e7785905449a;Parent=0efbd19962d95b05;Sampled=1"},"status":"success"}}"#;

/// The bytes of Lambda's own lines per invocation at system log level `level`.
fn platform_log_bytes(level: &str) -> u64 {
    match level.to_ascii_uppercase().as_str() {
        "WARN" | "ERROR" | "FATAL" => 0,
        _ => (PLATFORM_START.len() + PLATFORM_REPORT.len() + 2) as u64,
    }
}

/// The functions' `SystemLogLevel` in template.yaml (Lambda's default, INFO, when unset).
fn system_log_level() -> String {
    template_doc()["Globals"]["Function"]["LoggingConfig"]["SystemLogLevel"]
        .as_str()
        .unwrap_or("INFO")
        .to_string()
}

/// A `MaximumBatchingWindowInSeconds` of template.yaml (none: Lambda's stream default, 0).
fn batching_window(function: &str, event: &str) -> std::time::Duration {
    let doc = template_doc();
    let window = &doc["Resources"][function]["Properties"]["Events"][event]["Properties"]
        ["MaximumBatchingWindowInSeconds"];
    // A parameter's (`DeliveryBatchingWindowSeconds`): its default.
    let seconds = match window {
        serde_yaml::Value::Tagged(t) if t.tag == "!Ref" => {
            let parameter = t.value.as_str().unwrap_or_default();
            doc["Parameters"][parameter]["Default"].as_u64()
        }
        other => other.as_u64(),
    };
    std::time::Duration::from_secs(seconds.unwrap_or(0))
}

/// A BatchSize of template.yaml.
pub(crate) fn batch_size(function: &str, event: &str) -> usize {
    let doc = template_doc();
    doc["Resources"][function]["Properties"]["Events"][event]["Properties"]["BatchSize"]
        .as_u64()
        .unwrap_or(1) as usize
}

/// `changes` changes of one account, each to `fan_out` webhook subscriptions (one integration
/// each) on one receiver: `changes × fan_out` deliveries.
async fn run(name: &str, changes: usize, fan_out: usize, setup: Setup) -> Result<Scenario> {
    let p = Pipeline::measured().await;
    let receiver = Receiver::start().await;
    prepare(&p, &receiver, changes, fan_out, setup).await?;
    p.stack.meter.reset();
    p.stack.meter.count_capacity(true);
    p.billed.reset();
    p.logs.reset();
    // Rate-limited: the clock moves a second per second while the scenario runs, as a real one
    // would (a clock standing still would refuse the waiting deliveries each time they return).
    let ticker = setup.rate_limited().then(|| {
        let clock = p.clock.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                clock.advance(SECOND);
            }
        })
    });
    let started = Instant::now();
    let cpu_before = cpu_time();
    let first = p.pump().await?;
    let mut worker_messages = first.queue.messages as u64;
    let mut dispatch_records = first.dispatcher_records as u64;
    if matches!(setup, Setup::OneRetry) {
        let later = p.advance(MINUTE).await?;
        worker_messages += later.queue.messages as u64;
        dispatch_records += later.dispatcher_records as u64;
    }
    // The waiting deliveries come back as delayed copies (one or two seconds of the queue's
    // time) and start in a later second of the ticking clock.
    let mut rounds = 0;
    while setup.rate_limited() && receiver.count() < changes * fan_out && rounds < 10 {
        rounds += 1;
        tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
        let later = p.pump().await?;
        worker_messages += later.queue.messages as u64;
    }
    if let Some(t) = ticker {
        t.abort();
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_time().saturating_sub(cpu_before);
    // One roll-up walk over these changes, as its schedule runs one: what it reads per change (to
    // find events whose prompt roll-up was lost) is counted with the delivery's cost.
    p.roll_up_pass().await?;
    Ok(Scenario {
        name: name.to_string(),
        deliveries: (changes * fan_out) as u64,
        requests: p.stack.meter.snapshot(),
        units: p.stack.meter.units(),
        ingest_records: first.changes as u64,
        dispatch_records,
        worker_messages,
        api_calls: 0,
        seconds,
        cpu,
        billed: billed(&p),
        function_cpu: function_cpu(&p),
        log_bytes: log_bytes(&p),
    })
}

/// A scenario's account, `fan_out` webhook integrations to `receiver` (with `setup`'s features)
/// and their subscriptions, and its `changes` written to the changes table.
async fn prepare(
    p: &Pipeline,
    receiver: &Receiver,
    changes: usize,
    fan_out: usize,
    setup: Setup,
) -> Result<()> {
    let f = p.fixtures();
    let account = f.account(&[]).await?;
    for i in 0..fan_out {
        let mut integration = f
            .webhook(&account.account_id, receiver.url(&format!("/bench/{i}")))
            .await?;
        if setup.authenticated() {
            integration = f
                .with_basic_auth(&integration, BENCH_USER, BENCH_PASSWORD)
                .await?;
        }
        if setup.rate_limited() {
            // At most half the scenario's deliveries a second: what a limited integration pays
            // for its counter (those over the limit wait and come back, below).
            integration.rate_limit_per_second = Some((changes as u32).div_ceil(2));
            f.save_integration(&integration).await?;
        }
        let filter = matches!(setup, Setup::FilteredOut)
            .then(|| json!({"field": "record.price", "gt": 1000}));
        f.subscription(
            &integration,
            &["catalog_item"],
            filter,
            &["sku", "name", "price"],
            RetryPolicy::FixedSchedule,
        )
        .await?;
    }
    if matches!(setup, Setup::OneRetry) {
        receiver.script(std::iter::repeat_n(Reply::Status(503), changes * fan_out));
    }
    if setup.authenticated() {
        // The receiver demands the credential: a delivery without it would not count.
        let expected = basic_authorization(BENCH_USER, &Credential::new(BENCH_PASSWORD.into()));
        receiver.set_responder(std::sync::Arc::new(move |r| {
            Reply::Status(if r.header("authorization") == Some(expected.as_str()) {
                200
            } else {
                401
            })
        }));
    }
    for i in 0..changes {
        p.write_change(&catalog_change(&account.account_id, p.now(), i as f64))
            .await?;
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Setup {
    FirstAttempt,
    OneRetry,
    FilteredOut,
    /// Every integration authenticates with HTTP basic (a sealed password).
    Authenticated,
    /// The integration rate-limited (to half the deliveries a second).
    RateLimited,
    /// Both: HTTP basic and the rate limit.
    AuthenticatedRateLimited,
}

impl Setup {
    fn authenticated(self) -> bool {
        matches!(self, Setup::Authenticated | Setup::AuthenticatedRateLimited)
    }

    fn rate_limited(self) -> bool {
        matches!(self, Setup::RateLimited | Setup::AuthenticatedRateLimited)
    }
}

/// The authenticated scenario's credential.
const BENCH_USER: &str = "bench";
const BENCH_PASSWORD: &str = "bench-password";

/// One HTTP call to the router (no network): what API Gateway would hand the api function.
async fn call(
    app: &axum::Router,
    method: &str,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> Result<Value> {
    use tower::ServiceExt;
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(axum::body::Body::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        ))?;
    let response = app.clone().oneshot(request).await?;
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await?;
    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    anyhow::ensure!(status.is_success(), "{method} {path}: {status} {value}");
    Ok(value)
}

/// A pull subscription made through the API, as an adapter's operator would: the router (what
/// the api function serves), the account, the adapter's token and the subscription.
pub(crate) struct PullSetup {
    pub app: axum::Router,
    pub account_id: AccountId,
    pub adapter: String,
    pub sub_id: String,
}

pub(crate) async fn pull_setup(p: &Pipeline) -> Result<PullSetup> {
    use shared::api::router;
    use shared::web::auth::sha256_hex;
    use shared::web::{ApiState, OperatorAuth};
    let app = router(ApiState::new(
        p.stack.clients.clone(),
        p.stack.config.clone(),
        std::sync::Arc::new(p.clock.clone()),
        OperatorAuth::StaticToken {
            sha256_hex: sha256_hex("bench-operator"),
            operator_id: "bench".into(),
        },
    ));
    let body = Some(json!({"name": "Bench"}));
    let account = call(&app, "POST", "/operator/accounts", "bench-operator", body).await?;
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let token = text(&account["token"]);
    let body = json!({"name": "Warehouse", "method": "poll", "event_access_accepted": true});
    let integration = call(&app, "POST", "/v1/integrations", &token, Some(body)).await?;
    let body = json!({"integration_id": integration["id"], "record_types": ["catalog_item"], "fields": ["sku", "price"]});
    let sub = call(&app, "POST", "/v1/subscriptions", &token, Some(body)).await?;
    Ok(PullSetup {
        account_id: text(&account["account"]["id"]).parse()?,
        adapter: text(&integration["token"]),
        sub_id: text(&sub["id"]),
        app,
    })
}

/// Pull delivery: the changes are ingested as pending pull deliveries and an adapter reads and
/// acknowledges them through the cursor API, a hundred per page.
async fn run_pull(changes: usize) -> Result<Scenario> {
    let p = Pipeline::measured().await;
    let PullSetup {
        app,
        account_id,
        adapter,
        sub_id,
    } = pull_setup(&p).await?;
    for i in 0..changes {
        p.write_change(&catalog_change(&account_id, p.now(), i as f64))
            .await?;
    }
    p.stack.meter.reset();
    p.stack.meter.count_capacity(true);
    p.billed.reset();
    p.logs.reset();
    let api = local::pipeline::BilledTime::default();
    // The api function's lines, as its `main` writes them.
    let api_logs = local::logs::LogCapture::default();
    let level = shared::runtime::DEFAULT_LOG_LEVEL;
    let started = Instant::now();
    let cpu_before = cpu_time();
    let first = p.pump().await?;
    // The cursor covers what was written at least two seconds before the read.
    p.clock.advance(std::time::Duration::from_secs(3));
    let mut pages = 0;
    loop {
        let page = api
            .time(
                call(
                    &app,
                    "GET",
                    &format!("/v1/pull/subscriptions/{sub_id}/changes?limit=100"),
                    &adapter,
                    None,
                )
                .with_subscriber(api_logs.subscriber(level)),
            )
            .await?;
        pages += 1;
        if page["data"].as_array().is_none_or(|d| d.is_empty()) {
            break;
        }
        api.time(
            call(
                &app,
                "PUT",
                &format!("/v1/pull/subscriptions/{sub_id}/cursor"),
                &adapter,
                Some(json!({"cursor": page["next_cursor"]})),
            )
            .with_subscriber(api_logs.subscriber(level)),
        )
        .await?;
        pages += 1;
        if page["has_more"] != json!(true) {
            break;
        }
    }
    p.roll_up_pass().await?;
    let mut billed = billed(&p);
    billed.insert("ApiFunction", api.get());
    Ok(Scenario {
        name: "pull (cursor API)".into(),
        deliveries: changes as u64,
        requests: p.stack.meter.snapshot(),
        units: p.stack.meter.units(),
        ingest_records: first.changes as u64,
        dispatch_records: first.dispatcher_records as u64,
        // API calls are Lambda invocations of the api function.
        worker_messages: 0,
        api_calls: pages,
        seconds: started.elapsed().as_secs_f64(),
        cpu: cpu_time().saturating_sub(cpu_before),
        billed,
        function_cpu: function_cpu(&p),
        log_bytes: {
            let mut bytes = log_bytes(&p);
            bytes.insert("api", api_logs.bytes() as u64);
            bytes
        },
    })
}

/// Latency from a change being written to its webhook being called: changes are written at a
/// steady rate while ingest, the dispatcher and the worker poll concurrently, each as its event
/// source mapping does: a batch is handed over when it is full or when the mapping's batching
/// window (`MaximumBatchingWindowInSeconds` in template.yaml) has passed, so the batches fill as
/// a steady trickle fills them in AWS and the invocations are counted at that fill.
/// `window`: the three windows as `DeliveryBatchingWindowSeconds` sets them (`None`: the
/// template's default).
async fn latency(changes: usize, per_second: u64, window: Option<u64>) -> Result<Value> {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    let p = Pipeline::new().await;
    let receiver = Receiver::start().await;
    let f = p.fixtures();
    let account = f.account(&[]).await?;
    f.catalog_webhook(&account.account_id, receiver.url("/latency"))
        .await?;
    let done = AtomicBool::new(false);
    let b = batches();
    let windows = [
        batching_window("IngestFunction", "Changes"),
        batching_window("DispatchFunction", "NewWork"),
        batching_window("DeliverFunction", "Work"),
    ]
    .map(|w| window.map_or(w, std::time::Duration::from_secs));
    // Without a window Lambda still polls a stream's shard at its base rate, four times a second;
    // an SQS mapping's long poll answers as soon as a message is there.
    let waits = [
        windows[0].max(STREAM_POLL),
        windows[1].max(STREAM_POLL),
        windows[2],
    ];
    let poll = |stage: usize| {
        let (p, done) = (&p, &done);
        let (full, window) = ([b.ingest, b.dispatch, b.deliver][stage], waits[stage]);
        async move {
            while !done.load(Ordering::Relaxed) {
                let moved = match stage {
                    0 => p.ingest_pending().await.map(|(n, _)| n).unwrap_or(0),
                    1 => p.dispatch_pending().await.unwrap_or(0),
                    _ => p.work_pending().await.map(|q| q.messages).unwrap_or(0),
                };
                if (moved as u64) < full {
                    tokio::time::sleep(window).await;
                }
            }
        }
    };
    let mut written: HashMap<String, Instant> = HashMap::new();
    let write = async {
        let gap = std::time::Duration::from_millis(1000 / per_second.max(1));
        for i in 0..changes {
            let c = catalog_change(&account.account_id, p.now(), i as f64);
            written.insert(c.change_id.to_string(), Instant::now());
            p.write_change(&c).await?;
            tokio::time::sleep(gap).await;
        }
        let deadline = Instant::now() + std::time::Duration::from_secs(120);
        while receiver.count() < changes && Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        done.store(true, Ordering::Relaxed);
        anyhow::Ok(())
    };
    let (written_ok, _, _, _) = tokio::join!(write, poll(0), poll(1), poll(2));
    written_ok?;
    let mut millis: Vec<f64> = receiver
        .received_with_times()
        .iter()
        .filter_map(|(at, r)| {
            let id = r.json()["change_id"].as_str()?.to_string();
            Some(at.duration_since(*written.get(&id)?).as_secs_f64() * 1000.0)
        })
        .collect();
    millis.sort_by(|a, b| a.total_cmp(b));
    let pick = |q: f64| noisy::quantile(&millis, q);
    // Invocations as the pollers' timing filled the batches (not full batches of the template's
    // size): what a steady trickle of changes costs in invocations.
    let invocations = [&p.billed.ingest, &p.billed.dispatch, &p.billed.deliver]
        .iter()
        .map(|b| b.get().0)
        .sum::<u64>();
    Ok(json!({
        "changes": changes,
        "batching_window_s": windows[0].as_secs(),
        "lambda_invocations_per_delivery": invocations as f64 / millis.len().max(1) as f64,
        "written_per_second": per_second,
        "delivered": millis.len(),
        "p50_ms": pick(0.5),
        "p99_ms": pick(0.99),
        "max_ms": millis.last().copied().unwrap_or(f64::NAN),
    }))
}

/// How often Lambda polls a stream's shard without a batching window (four times a second).
const STREAM_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// The latency run at both ends of `DeliveryBatchingWindowSeconds`: its default (a second),
/// and no window.
async fn latencies(changes: usize) -> Result<[Value; 2]> {
    Ok([
        latency(changes, 10, None).await?,
        latency(changes, 10, Some(0)).await?,
    ])
}

fn print_latency(l: &Value) {
    let ms = |k: &str| l[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "latency, change written → webhook called ({} changes at {}/s, batching windows of {} s): p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        l["delivered"], l["written_per_second"], l["batching_window_s"],
        ms("p50_ms"), ms("p99_ms"), ms("max_ms")
    );
    println!(
        "  Lambda invocations per delivery at that trickle's batch fill: {:.3}",
        ms("lambda_invocations_per_delivery")
    );
}

/// Each function's CPU milliseconds per delivery, and their `total`.
/// One scenario's figures per delivery, as `bench --json` writes them: requests, units,
/// invocations, log bytes, billed duration and the dollars they come to.
fn row(s: &Scenario, b: &Batches, prices: &Prices, utilisation: f64) -> Value {
    let writes = s.count("DynamoDB", Some(DYNAMO_WRITES));
    let reads = s.count("DynamoDB", Some(DYNAMO_READS));
    let sqs_handlers = s.count("SQS", None);
    // The SQS event source mapping receives and deletes in batches of up to ten.
    let sqs_mapping = 2 * s.worker_messages.div_ceil(10);
    let invocations = s.ingest_records.div_ceil(b.ingest)
        + s.dispatch_records.div_ceil(b.dispatch)
        + s.worker_messages.div_ceil(b.deliver)
        + s.api_calls;
    let units = s.total_units();
    // A refused conditional write costs (at least) one write unit; DynamoDB reports none.
    let write_units = s.per(1) * (units.write + units.refused as f64);
    let read_units = s.per(1) * units.read;
    let lambda_seconds_dollars =
        s.gb_seconds_per_delivery() * prices.get("lambda_arm64_gb_second") * 1e6;
    // Log bytes: each function's own lines, and Lambda's per invocation.
    let function_invocations = [
        ("ingest", s.ingest_records.div_ceil(b.ingest)),
        ("dispatch", s.dispatch_records.div_ceil(b.dispatch)),
        ("deliver", s.worker_messages.div_ceil(b.deliver)),
        ("api", s.api_calls),
    ];
    let platform = platform_log_bytes(&system_log_level());
    let platform_at_info = platform_log_bytes("INFO");
    let mut logs = serde_json::Map::new();
    for (function, bytes) in &s.log_bytes {
        logs.insert(function.to_string(), json!(s.per(*bytes)));
    }
    let own: u64 = s.log_bytes.values().sum();
    let invocation_count: u64 = function_invocations.iter().map(|(_, n)| n).sum();
    logs.insert(
        "lambda_platform".into(),
        json!(s.per(invocation_count * platform)),
    );
    let log_bytes = s.per(own + invocation_count * platform);
    logs.insert("total".into(), json!(log_bytes));
    logs.insert(
        "total_with_platform_lines_at_info".into(),
        json!(s.per(own + invocation_count * platform_at_info)),
    );
    let logs_dollars = prices.logs_per_million(log_bytes);
    json!({
        "scenario": s.name,
        "deliveries": s.deliveries,
        "dynamodb_writes_per_delivery": s.per(writes),
        "dynamodb_reads_per_delivery": s.per(reads),
        "sqs_requests_per_delivery": s.per(sqs_handlers + sqs_mapping),
        "lambda_invocations_per_delivery": s.per(invocations),
        "deliveries_per_second": s.deliveries as f64 / s.seconds,
        "cpu_ms_per_delivery": s.cpu.as_secs_f64() * 1000.0 / s.deliveries.max(1) as f64,
        "dynamodb_write_units_per_delivery": write_units,
        "dynamodb_read_units_per_delivery": read_units,
        "dynamodb_index_units_per_delivery": s.per(1) * units.indexes,
        "dynamodb_refused_writes_per_delivery": s.per(units.refused),
        "dollars_per_million_deliveries": prices.per_million(write_units, read_units, s.per(sqs_handlers + sqs_mapping), s.per(invocations)),
        "lambda_gb_seconds_per_delivery": s.gb_seconds_per_delivery(),
        "dollars_per_million_all_in": prices.per_million(write_units, read_units, s.per(sqs_handlers + sqs_mapping), s.per(invocations)) + lambda_seconds_dollars + logs_dollars,
        "dollars_per_million_all_in_provisioned": prices.per_million_provisioned(utilisation, write_units, read_units, s.per(sqs_handlers + sqs_mapping), s.per(invocations)) + lambda_seconds_dollars + logs_dollars,
        "log_bytes_per_delivery": Value::Object(logs),
        "log_dollars_per_million": logs_dollars,
        "lambda_duration_dollars_per_million": lambda_seconds_dollars,
        "function_cpu_ms_per_delivery": function_cpu_json(s),
        "billed_ms_per_delivery": s.billed.iter().map(|(f, (_, ms))| (f.to_string(), json!(s.per(*ms)))).collect::<serde_json::Map<String, Value>>(),
        "units_by_operation": s.units.iter().map(|(op, u)| (op.clone(), json!({"write": s.per(1) * u.write, "read": s.per(1) * u.read, "indexes": s.per(1) * u.indexes, "refused": s.per(u.refused)}))).collect::<serde_json::Map<String, Value>>(),
        "by_operation": s.requests.iter().map(|((svc, op), n)| (format!("{svc}.{op}"), json!(s.per(*n)))).collect::<serde_json::Map<String, Value>>(),
    })
}

fn function_cpu_json(s: &Scenario) -> Value {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0 / s.deliveries.max(1) as f64;
    let mut m: serde_json::Map<String, Value> = s
        .function_cpu
        .iter()
        .map(|(f, d)| (f.to_string(), json!(ms(*d))))
        .collect();
    m.insert(
        "total".into(),
        json!(ms(s.function_cpu.values().sum::<std::time::Duration>())),
    );
    Value::Object(m)
}

/// The emulator's own rate of sequential conditional puts, measured in the same run: pipeline
/// throughput divided by it is comparable across machines (the emulator serialises requests).
/// The units the figures rest on come from the emulator's capacity accounting
/// (`scripts/capacity.py`): refuse to report figures from an emulator that does not do it (moto's
/// own constant answers, e.g. an emulator started before the accounting existed).
async fn check_capacity_accounting() -> Result<()> {
    let t = local::testkit::TestStack::new().await;
    t.meter.count_capacity(true);
    let s = |v: &str| aws_sdk_dynamodb::types::AttributeValue::S(v.to_string());
    // 2,500 bytes: three started kilobytes, on no index.
    let item = shared::store::Item::from([
        ("pk".to_string(), s("capacity-check")),
        ("sk".to_string(), s("item")),
        ("payload".to_string(), s(&"x".repeat(2500))),
    ]);
    write::send(
        &t.clients.dynamo,
        write::put(&t.config.delivery_table, item)?,
    )
    .await?;
    let units = t.meter.units().get("PutItem").copied().unwrap_or_default();
    anyhow::ensure!(
        units.write == 3.0,
        "the emulator reported {} write units for a 2.5 KB item, not 3: it does not account \
         capacity as DynamoDB does; restart it (scripts/emulator.sh stop) so that \
         scripts/emulator.py with scripts/capacity.py serves",
        units.write
    );
    Ok(())
}

async fn emulator_conditional_writes_per_second() -> Result<f64> {
    let t = local::testkit::TestStack::new().await;
    let s = |v: &str| aws_sdk_dynamodb::types::AttributeValue::S(v.to_string());
    let n = 300;
    let started = Instant::now();
    for i in 0..n {
        let item = shared::store::Item::from([
            ("pk".to_string(), s(&format!("raw#{i}"))),
            ("sk".to_string(), s("raw")),
        ]);
        let put = write::put_new(&t.config.delivery_table, item)?;
        write::send(&t.clients.dynamo, put).await?;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// Published prices (local/prices.json, with their date).
struct Prices {
    json: Value,
}

impl Prices {
    fn load() -> Self {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prices.json");
        let json = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        Prices { json }
    }
    fn get(&self, key: &str) -> f64 {
        self.json[key].as_f64().unwrap_or_default()
    }
    /// Dollars per million deliveries for the given per-delivery figures: DynamoDB's request
    /// units as DynamoDB reports them (indexes included), SQS requests, Lambda invocations.
    fn per_million(&self, write_units: f64, read_units: f64, sqs: f64, invocations: f64) -> f64 {
        write_units * self.get("dynamodb_write_request_unit_per_million")
            + read_units * self.get("dynamodb_read_request_unit_per_million")
            + sqs * self.get("sqs_standard_request_per_million")
            + invocations * self.get("lambda_request_per_million")
    }
    /// Dollars per million deliveries of `bytes` of log lines per delivery, at CloudWatch Logs'
    /// ingestion price.
    fn logs_per_million(&self, bytes: f64) -> f64 {
        bytes * 1e6 / 1e9 * self.get("cloudwatch_logs_ingestion_per_gb")
    }
    /// The same with the delivery table on provisioned capacity, scaled to keep `utilisation` of
    /// it in use: a capacity unit-hour serves 3,600 request units at full use, so a million
    /// units cost a million / (3,600 × utilisation) unit-hours. Capacity that traffic leaves
    /// idle (below the scaling's target, or at its minimum) costs more than this per unit.
    fn per_million_provisioned(
        &self,
        utilisation: f64,
        write_units: f64,
        read_units: f64,
        sqs: f64,
        invocations: f64,
    ) -> f64 {
        let unit_hours_per_million = 1e6 / (3600.0 * utilisation);
        write_units * self.get("dynamodb_provisioned_wcu_hour") * unit_hours_per_million
            + read_units * self.get("dynamodb_provisioned_rcu_hour") * unit_hours_per_million
            + sqs * self.get("sqs_standard_request_per_million")
            + invocations * self.get("lambda_request_per_million")
    }
}

/// The pipeline scenarios, about `changes` deliveries each; `only`: the one of that name.
async fn run_scenarios(changes: usize, only: Option<&str>) -> Result<Vec<Scenario>> {
    let wanted = |name: &str| only.is_none_or(|o| name == o);
    let mut scenarios = Vec::new();
    // Fan-out N: a change to N subscriptions; about `changes` deliveries in each scenario.
    for fan_out in [1, 3, 10] {
        let name = format!("first-attempt push, fan-out {fan_out}");
        let n = changes.div_ceil(fan_out).max(10);
        if wanted(&name) {
            scenarios.push(run(&name, n, fan_out, Setup::FirstAttempt).await?);
        }
    }
    for (name, setup) in [
        ("one retry, then success", Setup::OneRetry),
        ("filtered out", Setup::FilteredOut),
        ("authenticated endpoint (basic)", Setup::Authenticated),
        ("rate-limited endpoint", Setup::RateLimited),
        (
            "authenticated, rate-limited endpoint",
            Setup::AuthenticatedRateLimited,
        ),
    ] {
        if wanted(name) {
            scenarios.push(run(name, changes, 1, setup).await?);
        }
    }
    if wanted("pull (cursor API)") {
        scenarios.push(run_pull(changes).await?);
    }
    Ok(scenarios)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--serve-receiver") {
        return serve_receiver().await;
    }
    if let Some(i) = args.iter().position(|a| a == "--hostile-receiver") {
        let status = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(200);
        return memory::hostile_receiver(status).await;
    }
    // `--sdk NAME`: every client with those SDK settings (see `sdk_cost::settings_named`).
    if let Some(i) = args.iter().position(|a| a == "--sdk") {
        let name = args.get(i + 1).map(String::as_str).unwrap_or_default();
        let settings = sdk_cost::settings_named(name)
            .ok_or_else(|| anyhow::anyhow!("no SDK settings named {name:?}"))?;
        local::emulator::use_sdk_settings(settings);
    }
    // `--endpoint-rules N [aws|emulator]`: N resolutions of a DynamoDB endpoint by its rules.
    if let Some(i) = args.iter().position(|a| a == "--endpoint-rules") {
        let rounds = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(100);
        let aws = args.get(i + 2).map(String::as_str) != Some("emulator");
        return sdk_cost::endpoint_rules(rounds, aws).await;
    }
    // `--sdk-cost N`: only N rounds of SDK requests, for instruction counts (see `sdk_cost`).
    if let Some(i) = args.iter().position(|a| a == "--sdk-cost") {
        let rounds = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(100);
        return sdk_cost::run(rounds);
    }
    let json_out = args.iter().any(|a| a == "--json");
    // `--json-out PATH`: the JSON is also written there (the table is still printed).
    let json_path = args
        .iter()
        .position(|a| a == "--json-out")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let changes: usize = args
        .iter()
        .position(|a| a == "--changes")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    // `--processes DIR[,DIR…]`: the delivery functions' binaries in each DIR, as processes (see
    // `processes`).
    if let Some(dir) = args
        .iter()
        .position(|a| a == "--processes")
        .and_then(|i| args.get(i + 1))
    {
        let runs = args
            .iter()
            .position(|a| a == "--runs")
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(3);
        let dirs: Vec<&std::path::Path> = dir.split(',').map(std::path::Path::new).collect();
        return processes::compare(&dirs, changes, runs).await;
    }
    let b = batches();
    let prices = Prices::load();
    let utilisation = provisioned_utilisation();
    check_capacity_accounting().await?;
    // `--noisy-only`: just the noisy-neighbour scenario and the writes per partition key.
    if args.iter().any(|a| a == "--noisy-only") {
        let noisy = noisy::noisy_neighbour().await?;
        match json_out {
            true => println!("{}", serde_json::to_string_pretty(&noisy)?),
            false => noisy::print_noisy(&noisy),
        }
        return Ok(());
    }
    let backlog: usize = args
        .iter()
        .position(|a| a == "--backlog")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    // `--only latency`: the latency run at both ends of the batching window.
    if args
        .windows(2)
        .any(|w| w[0] == "--only" && w[1] == "latency")
    {
        for l in &latencies(changes.min(100)).await? {
            print_latency(l);
        }
        return Ok(());
    }
    // `--only "ingest batch"`: ingest's time for a batch against one change, at 8 ms a request.
    if args
        .windows(2)
        .any(|w| w[0] == "--only" && w[1] == ingest_batch::NAME)
    {
        let r = ingest_batch::ingest_batch_times().await?;
        match json_out {
            true => println!("{}", serde_json::to_string_pretty(&r)?),
            false => ingest_batch::print_ingest_batch(&r),
        }
        return Ok(());
    }
    // `--only "rate-limited backlog"`: its own figures (not a row of the scenarios' table).
    if args
        .windows(2)
        .any(|w| w[0] == "--only" && w[1] == rate_backlog::NAME)
    {
        let r = rate_backlog::rate_limited_backlog(backlog).await?;
        match json_out {
            true => println!("{}", serde_json::to_string_pretty(&r)?),
            false => rate_backlog::print_backlog(&r),
        }
        return Ok(());
    }
    // `--only SCENARIO`: that scenario alone (its whole name), and what each function ran for
    // it; short enough to run under valgrind, whose instruction counts do not move with the
    // machine's load as its CPU clock does.
    if let Some(only) = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
    {
        for s in run_scenarios(changes, Some(only)).await? {
            println!("{}: {} deliveries", s.name, s.deliveries);
            println!(
                "  functions' CPU ms per delivery: {}",
                function_cpu_json(&s)
            );
            for ((service, operation), n) in &s.requests {
                println!("  {service}.{operation} {:.3} per delivery", s.per(*n));
            }
            let units = s.total_units();
            let per = |u: f64| u / s.deliveries.max(1) as f64;
            println!(
                "  DynamoDB units per delivery: write {:.3}, read {:.3}",
                per(units.write),
                per(units.read)
            );
            for (function, bytes) in &s.log_bytes {
                println!(
                    "  {function} wrote {:.1} log bytes per delivery",
                    s.per(*bytes)
                );
            }
            let r = row(&s, &b, &prices, utilisation);
            println!(
                "  DynamoDB units per delivery by operation: {}",
                r["units_by_operation"]
            );
            println!(
                "  per delivery: {:.3} DynamoDB write and {:.3} read requests, {:.3} SQS requests (the mapping's receives and deletes included), {:.3} Lambda invocations",
                r["dynamodb_writes_per_delivery"].as_f64().unwrap_or_default(),
                r["dynamodb_reads_per_delivery"].as_f64().unwrap_or_default(),
                r["sqs_requests_per_delivery"].as_f64().unwrap_or_default(),
                r["lambda_invocations_per_delivery"].as_f64().unwrap_or_default(),
            );
            println!("  billed ms per delivery: {}", r["billed_ms_per_delivery"]);
            let f = |key: &str| r[key].as_f64().unwrap_or_default();
            println!(
                "  $ per million: {:.3} on demand, {:.3} all-in, {:.3} all-in provisioned (Lambda duration {:.3}, logs {:.4})",
                f("dollars_per_million_deliveries"),
                f("dollars_per_million_all_in"),
                f("dollars_per_million_all_in_provisioned"),
                f("lambda_duration_dollars_per_million"),
                f("log_dollars_per_million"),
            );
        }
        return Ok(());
    }
    let raw_rate = emulator_conditional_writes_per_second().await?;
    let latencies = latencies(changes.min(100)).await?;
    let scenarios = run_scenarios(changes, None).await?;
    let noisy = noisy::noisy_neighbour().await?;
    let backlog = rate_backlog::rate_limited_backlog(backlog).await?;
    let memory = memory_per_batch().await?;
    let ingest_times = ingest_batch::ingest_batch_times().await?;
    let vm_hwm = vm_hwm_bytes();
    let rows: Vec<Value> = scenarios
        .iter()
        .map(|s| row(s, &b, &prices, utilisation))
        .collect();
    let mut doc = json!({"changes": changes, "scenarios": rows});
    doc["date"] = json!(chrono::Utc::now().date_naive().to_string());
    doc["emulator_conditional_writes_per_second"] = json!(raw_rate);
    doc["memory"] = memory
        .iter()
        .map(|m| (m.handler.to_string(), m.json()))
        .collect();
    doc["process_vm_hwm_bytes"] = json!(vm_hwm);
    doc["noisy_neighbour"] = noisy.clone();
    doc["rate_limited_backlog"] = backlog.clone();
    doc["latency"] = json!(latencies);
    doc["scale"] = json!({"ingest": ingest_times.clone()});
    if let Some(path) = &json_path {
        if let Some(dir) = std::path::Path::new(path).parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")?;
    }
    if json_out {
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!("Pipeline benchmark on the local emulator: about {changes} deliveries per scenario (fan-out N: a change to N subscriptions; otherwise one)\n");
    println!("DynamoDB: requests (wr, rd) and request units (WRU, RRU: tables and indexes, as DynamoDB reports them)");
    println!(
        "{:<32} {:>7} {:>7} {:>7} {:>7} {:>8} {:>10} {:>10} {:>9} {:>9} {:>9} {:>7}",
        "scenario",
        "wr",
        "WRU",
        "rd",
        "RRU",
        "SQS req",
        "Lambda inv",
        "$/million",
        "$ all-in",
        "$ prov.",
        "deliv/s",
        "CPU ms"
    );
    let f = |r: &Value, key: &str| r[key].as_f64().unwrap_or_default();
    for r in &rows {
        println!(
            "{:<32} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>8.2} {:>10.3} {:>10.2} {:>9.2} {:>9.2} {:>9.1} {:>7.2}",
            r["scenario"].as_str().unwrap_or_default(),
            f(r, "dynamodb_writes_per_delivery"),
            f(r, "dynamodb_write_units_per_delivery"),
            f(r, "dynamodb_reads_per_delivery"),
            f(r, "dynamodb_read_units_per_delivery"),
            f(r, "sqs_requests_per_delivery"),
            f(r, "lambda_invocations_per_delivery"),
            f(r, "dollars_per_million_deliveries"),
            f(r, "dollars_per_million_all_in"),
            f(r, "dollars_per_million_all_in_provisioned"),
            f(r, "deliveries_per_second"),
            f(r, "cpu_ms_per_delivery"),
        );
    }
    println!(
        "\nthe emulator's own sequential conditional writes: {raw_rate:.0}/s (pipeline throughput is bound by it)"
    );
    println!(
        "CPU ms: this process's CPU time per delivery (handlers, the harness's taps and the receiver):"
    );
    println!("        an upper bound for the handlers' own, in whatever build ran the bench");
    println!(
        "prices: {} as of {}; $/million without Lambda duration, $ all-in with it: each handler",
        prices.json["region"].as_str().unwrap_or_default(),
        prices.json["as_of"].as_str().unwrap_or_default()
    );
    println!(
        "        invocation's wall time, rounded up to the ms, x its function's MemorySize, arm64"
    );
    println!(
        "        GB-s price (the emulator answers on loopback, slower than DynamoDB per call)"
    );
    println!(
        "$ prov.: all-in with the delivery table on provisioned capacity (DeliveryTableCapacity),"
    );
    println!(
        "        capacity-hours at the {:.0} % utilisation its scaling keeps (idle capacity costs more)",
        utilisation * 100.0
    );
    for l in &latencies {
        print_latency(l);
    }
    ingest_batch::print_ingest_batch(&ingest_times);
    println!("\nthe functions' own CPU ms per delivery (each function's thread CPU clock across its invocations):");
    println!(
        "{:<32} {:>8} {:>8} {:>8} {:>8}",
        "scenario", "ingest", "dispatch", "deliver", "total"
    );
    for r in &rows {
        let c = &r["function_cpu_ms_per_delivery"];
        println!(
            "{:<32} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
            r["scenario"].as_str().unwrap_or_default(),
            f(c, "ingest"),
            f(c, "dispatch"),
            f(c, "deliver"),
            f(c, "total"),
        );
    }
    println!(
        "\nlog bytes per delivery, at the functions' default level ({}) and SystemLogLevel {} (Lambda's lines: {} bytes an invocation at INFO, none at WARN):",
        shared::runtime::DEFAULT_LOG_LEVEL,
        system_log_level(),
        platform_log_bytes("INFO")
    );
    println!(
        "{:<32} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "scenario", "ingest", "dispatch", "deliver", "api", "lambda", "total", "$/mil."
    );
    for r in &rows {
        let l = &r["log_bytes_per_delivery"];
        println!(
            "{:<32} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.3}",
            r["scenario"].as_str().unwrap_or_default(),
            f(l, "ingest"),
            f(l, "dispatch"),
            f(l, "deliver"),
            f(l, "api"),
            f(l, "lambda_platform"),
            f(l, "total"),
            f(r, "log_dollars_per_million"),
        );
    }
    println!("\nper delivery, by operation:");
    for r in &rows {
        let ops: Vec<String> = r["by_operation"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k} {:.2}", v.as_f64().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "  {:<32} {}",
            r["scenario"].as_str().unwrap_or_default(),
            ops.join(", ")
        );
    }
    println!(
        "\nDynamoDB request units per delivery, by operation (write + read; of which indexes):"
    );
    for r in &rows {
        let ops: Vec<String> = r["units_by_operation"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(op, u)| {
                        let refused = f(u, "refused");
                        format!(
                            "{op} {:.2} ({:.2}){}",
                            f(u, "write") + f(u, "read"),
                            f(u, "indexes"),
                            if refused > 0.0 {
                                format!(" +{refused:.2} refused")
                            } else {
                                String::new()
                            }
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "  {:<32} {}",
            r["scenario"].as_str().unwrap_or_default(),
            ops.join(", ")
        );
    }
    noisy::print_noisy(&noisy);
    rate_backlog::print_backlog(&backlog);
    print_memory(&memory, vm_hwm);
    Ok(())
}
