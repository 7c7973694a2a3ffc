//! The heap each handler peaks at for one full batch (`make bench`'s last table): the binary
//! allocates through a counting allocator, and each handler is invoked on one batch at a time.

use crate::{batch_size, call, pull_setup};
use anyhow::Result;
use local::fixtures::catalog_change;
use local::pipeline::Pipeline;
use local::receiver::{Receiver, Reply};
use serde_json::{json, Value};
use shared::domain::retry::RetryPolicy;

/// Every allocation of this process is counted, so that the heap a handler peaks at while it
/// handles one batch can be read (`local::peak_alloc`).
#[global_allocator]
static ALLOC: local::peak_alloc::PeakAlloc = local::peak_alloc::PeakAlloc::new();

/// What one invocation on one full batch allocated.
pub(crate) struct HeapPeak {
    pub(crate) handler: &'static str,
    /// Records, messages or changes in the batch (the page, for the api function).
    batch: usize,
    /// The invocation's payload: the event's JSON (the response page's, for the api function).
    payload_bytes: usize,
    /// The most heap allocated at once during the invocation, above what was allocated before:
    /// the first invocation of a fresh handler (what it sets up on first use included).
    peak_heap_bytes: usize,
    /// Still allocated afterwards (caches, pooled connections), above what was allocated before.
    retained_bytes: i64,
    /// The same for the next invocation, on another full batch.
    warm_peak_heap_bytes: Option<usize>,
}

impl HeapPeak {
    pub(crate) fn json(&self) -> Value {
        json!({
            "batch": self.batch,
            "peak_heap_bytes": self.peak_heap_bytes,
            "warm_peak_heap_bytes": self.warm_peak_heap_bytes,
            "payload_bytes": self.payload_bytes,
            "retained_bytes": self.retained_bytes,
        })
    }
}

/// Runs `invocation` alone and returns its output, the heap's peak above the level just before,
/// and what stayed allocated. The counters are process-wide: nothing else may run meanwhile.
async fn heap_peak<R>(invocation: impl std::future::Future<Output = R>) -> (R, usize, i64) {
    ALLOC.reset_peak();
    let before = ALLOC.current();
    let out = invocation.await;
    let peak = ALLOC.peak().saturating_sub(before);
    let retained = ALLOC.current() as i64 - before as i64;
    (out, peak, retained)
}

/// One invocation as the Lambda runtime makes it: the payload (JSON bytes) is deserialized into
/// the event, the handler runs and its response is serialized. Fails if the handler reports
/// batch item failures.
async fn invoke<E, R, Fut>(
    handler: &'static str,
    event: E,
    records: usize,
    run: impl FnOnce(E) -> Fut,
) -> Result<HeapPeak>
where
    E: serde::Serialize + serde::de::DeserializeOwned,
    R: serde::Serialize,
    Fut: std::future::Future<Output = R>,
{
    let payload = serde_json::to_vec(&event)?;
    drop(event);
    let (response, peak_heap_bytes, retained_bytes) = heap_peak(async {
        let event: E = serde_json::from_slice(&payload)?;
        let response = run(event).await;
        anyhow::Ok(serde_json::to_vec(&response)?)
    })
    .await;
    let response: Value = serde_json::from_slice(&response?)?;
    let failures = response["batchItemFailures"].as_array().map_or(0, Vec::len);
    anyhow::ensure!(failures == 0, "{handler}: {failures} batch item failures");
    Ok(HeapPeak {
        handler,
        batch: records,
        payload_bytes: payload.len(),
        peak_heap_bytes,
        retained_bytes,
        warm_peak_heap_bytes: None,
    })
}

/// Invokes a fresh handler on each batch in turn, one invocation per batch: the first
/// invocation is measured, the second too (warm), the rest run unmeasured.
async fn invoke_batches<E, R, Fut>(
    handler: &'static str,
    batches: Vec<(E, usize)>,
    run: impl Fn(E) -> Fut,
) -> Result<HeapPeak>
where
    E: serde::Serialize + serde::de::DeserializeOwned,
    R: serde::Serialize,
    Fut: std::future::Future<Output = R>,
{
    let mut batches = batches.into_iter();
    let (event, n) = batches
        .next()
        .ok_or_else(|| anyhow::anyhow!("{handler}: no batch"))?;
    let mut first = invoke(handler, event, n, &run).await?;
    if let Some((event, n)) = batches.next() {
        let warm = invoke(handler, event, n, &run).await?;
        first.warm_peak_heap_bytes = Some(warm.peak_heap_bytes);
    }
    for (event, _) in batches {
        run(event).await;
    }
    Ok(first)
}

/// Every record pending on a stream that passes `filter` (as an event source mapping's
/// `FilterCriteria` would let it through), read at once and cut into events of `size` records;
/// the first two must be full.
async fn stream_batches(
    mut tap: local::streams::StreamTap,
    filter: impl Fn(&aws_lambda_events::event::dynamodb::EventRecord) -> bool,
    size: usize,
) -> Result<Vec<(aws_lambda_events::event::dynamodb::Event, usize)>> {
    use aws_lambda_events::event::streams::DynamoDbEventResponse;
    tap.batch_size = usize::MAX / 2;
    let mut records = Vec::new();
    tap.drain(|event| {
        records.extend(event.records.into_iter().filter(&filter));
        std::future::ready(DynamoDbEventResponse::default())
    })
    .await?;
    anyhow::ensure!(
        records.len() >= 2 * size,
        "{} stream records",
        records.len()
    );
    Ok(records
        .chunks(size)
        .map(|chunk| {
            let mut event = aws_lambda_events::event::dynamodb::Event::default();
            event.records = chunk.to_vec();
            (event, chunk.len())
        })
        .collect())
}

/// Two events of `size` messages of a queue, received ten at a time as the event source mapping
/// does.
async fn queue_batches(
    tap: &local::queues::QueueTap,
    size: usize,
) -> Result<Vec<(aws_lambda_events::event::sqs::SqsEvent, usize)>> {
    receive_at_least(tap, 2 * size)
        .await?
        .chunks(size)
        .take(2)
        .map(|chunk| Ok((tap.event(chunk)?, chunk.len())))
        .collect()
}

/// At least `count` messages of a queue (all that are visible, up to ten more).
async fn receive_at_least(
    tap: &local::queues::QueueTap,
    count: usize,
) -> Result<Vec<aws_sdk_sqs::types::Message>> {
    let mut messages = Vec::new();
    while messages.len() < count {
        let got = tap.receive().await?;
        if got.is_empty() {
            break;
        }
        messages.extend(got);
    }
    anyhow::ensure!(messages.len() >= count, "{} messages", messages.len());
    Ok(messages)
}

/// A webhook receiver (`Receiver`) in a child process, this binary run with `--serve-receiver`,
/// so that its memory (buffers, the requests it keeps) is not counted as the worker's.
struct ChildReceiver {
    child: std::process::Child,
    base: String,
}

impl ChildReceiver {
    fn start() -> Result<Self> {
        Self::start_with(&[])
    }

    /// With extra arguments for [`serve_receiver`] (`--stream STATUS`).
    fn start_with(args: &[&str]) -> Result<Self> {
        use std::io::BufRead;
        let mut child = std::process::Command::new(std::env::current_exe()?)
            .arg("--serve-receiver")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        let mut base = String::new();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("receiver stdout"))?;
        std::io::BufReader::new(stdout).read_line(&mut base)?;
        anyhow::ensure!(base.starts_with("http://"), "receiver said {base:?}");
        Ok(ChildReceiver {
            child,
            base: base.trim().to_string(),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for ChildReceiver {
    fn drop(&mut self) {
        // The child serves until its standard input closes.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// `--serve-receiver`: a receiver answering 200 until standard input closes; prints its URL.
/// With `--stream STATUS` it is hostile: it answers STATUS and streams 100 MiB slowly
/// ([`Reply::hostile_stream`]).
pub(crate) async fn serve_receiver() -> Result<()> {
    use std::io::Write;
    let receiver = Receiver::start().await;
    let args: Vec<String> = std::env::args().collect();
    if let Some(status) = args
        .iter()
        .position(|a| a == "--stream")
        .and_then(|i| args.get(i + 1))
    {
        receiver.set_default(Reply::hostile_stream(status.parse()?));
    }
    println!("{}", receiver.url(""));
    std::io::stdout().flush()?;
    tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink()))
        .await??;
    Ok(())
}

/// The process's peak resident set (`VmHWM`, /proc/self/status), in bytes.
pub(crate) fn vm_hwm_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The heap each handler peaks at for one full batch (BatchSize of template.yaml): the first
/// invocation of fresh handlers whose AWS clients are already connected, then a second one.
pub(crate) async fn memory_per_batch() -> Result<Vec<HeapPeak>> {
    use shared::notify::metrics::CapturedMetrics;
    use shared::notify::notice_service::{NewNotice, NoticeService};
    use shared::notify::stream::NotificationStream;
    use shared::notify::table::NotificationTable;
    use shared::notify::worker::NotificationWorker;
    use shared::store::notice::{Contact, Recipient};
    let receiver = ChildReceiver::start()?;
    let mut out = Vec::new();

    // Push: ingest, the dispatcher and the delivery worker, each on full batches.
    let (n_ingest, n_dispatch, n_deliver) = (
        batch_size("IngestFunction", "Changes"),
        batch_size("DispatchFunction", "NewWork"),
        batch_size("DeliverFunction", "Work"),
    );
    let p = Pipeline::new().await;
    let f = p.fixtures();
    let account = f.account(&[]).await?;
    let integration = f
        .webhook(&account.account_id, receiver.url("/memory"))
        .await?;
    f.subscription(
        &integration,
        &["catalog_item"],
        None,
        &["sku", "name", "price"],
        RetryPolicy::FixedSchedule,
    )
    .await?;
    // Two full batches at every stage (one delivery per change).
    let changes = 2 * n_ingest.max(n_dispatch).max(n_deliver);
    for i in 0..changes {
        p.write_change(&catalog_change(&account.account_id, p.now(), i as f64))
            .await?;
    }
    let batches = stream_batches(p.stack.stream("ChangesTable"), |_| true, n_ingest).await?;
    out.push(invoke_batches("ingest", batches, |e| p.ingest.handle(e)).await?);
    // The records the dispatcher's FilterCriteria let through: the new deliveries.
    let wanted = shared::delivery::route::wanted;
    let batches = stream_batches(p.stack.stream("DeliveryTable"), wanted, n_dispatch).await?;
    out.push(invoke_batches("dispatch", batches, |e| p.dispatcher.handle_stream(e)).await?);
    let batches = queue_batches(&p.stack.queue("DeliveryQueue"), n_deliver).await?;
    out.push(invoke_batches("deliver", batches, |e| p.worker.handle(e)).await?);

    // The notify function's channel worker: notices to as many Slack recipients as its batch.
    let n_notify = batch_size("NotifyFunction", "Work");
    let clock: std::sync::Arc<dyn shared::clock::Clock> = std::sync::Arc::new(p.clock.clone());
    let fan_out = NotificationStream::new(
        p.stack.clients.clone(),
        p.stack.config.clone(),
        clock.clone(),
    );
    let worker = NotificationWorker::new(
        p.stack.clients.clone(),
        p.stack.config.clone(),
        clock.clone(),
    )
    .with_metrics(std::sync::Arc::new(CapturedMetrics::default()));
    let notices = NoticeService::new(
        NotificationTable::from_config(&p.stack.clients, &p.stack.config),
        clock,
    );
    for notice in 0..2 {
        let recipients = (0..n_notify)
            .map(|i| {
                Recipient::Contact(Contact {
                    id: format!("ops{i}"),
                    email: None,
                    slack_webhook_url: Some(receiver.url(&format!("/services/T/B/{i}"))),
                })
            })
            .collect();
        let new = NewNotice {
            recipients,
            channels: vec!["slack".into()],
            subject: "Catalog sync finished".into(),
            body: "1,204 items were updated.".into(),
            deadline: None,
            supersede_key: None,
            idempotency_key: format!("bench-memory-{notice}"),
            reason: None,
        };
        notices
            .create(&account.account_id, new)
            .await
            .map_err(|e| anyhow::anyhow!("creating a notice: {e:?}"))?;
    }
    let mut tap = p.stack.stream("NotificationTable");
    for _ in 0..5 {
        if tap.drain(|e| fan_out.handle(e)).await?.records == 0 {
            break;
        }
    }
    let batches = queue_batches(&p.stack.queue("NotificationQueue"), n_notify).await?;
    out.push(invoke_batches("notify", batches, |e| worker.handle(e)).await?);

    // The api function serving pull pages of a hundred changes.
    out.push(pull_page_peak(100).await?);
    Ok(out)
}

/// The api function's heap for one `GET …/changes?limit={page}` with that many changes pending,
/// then (after the cursor is acknowledged) for the next page.
async fn pull_page_peak(page: usize) -> Result<HeapPeak> {
    use tower::ServiceExt;
    let p = Pipeline::new().await;
    let setup = pull_setup(&p).await?;
    let (app, account_id, adapter, sub_id) = (
        &setup.app,
        &setup.account_id,
        setup.adapter.as_str(),
        setup.sub_id.as_str(),
    );
    for i in 0..2 * page {
        p.write_change(&catalog_change(account_id, p.now(), i as f64))
            .await?;
    }
    p.pump().await?;
    p.clock.advance(std::time::Duration::from_secs(3));
    let path = format!("/v1/pull/subscriptions/{sub_id}/changes?limit={page}");
    let get_page = || async {
        let request = http::Request::builder()
            .method("GET")
            .uri(path.as_str())
            .header("authorization", format!("Bearer {adapter}"))
            .body(axum::body::Body::empty())?;
        let (bytes, peak, retained) = heap_peak(async {
            let response = app.clone().oneshot(request).await?;
            anyhow::Ok(axum::body::to_bytes(response.into_body(), 16 << 20).await?)
        })
        .await;
        let bytes = bytes?;
        let served: Value = serde_json::from_slice(&bytes)?;
        let n = served["data"].as_array().map_or(0, Vec::len);
        anyhow::ensure!(n == page, "the page held {n} changes");
        anyhow::Ok((served["next_cursor"].clone(), bytes.len(), peak, retained))
    };
    let (cursor, payload_bytes, peak_heap_bytes, retained_bytes) = get_page().await?;
    let ack = Some(json!({"cursor": cursor}));
    let cursor_path = format!("/v1/pull/subscriptions/{sub_id}/cursor");
    call(app, "PUT", &cursor_path, adapter, ack).await?;
    let (_, _, warm, _) = get_page().await?;
    Ok(HeapPeak {
        handler: "api",
        batch: page,
        payload_bytes,
        peak_heap_bytes,
        retained_bytes,
        warm_peak_heap_bytes: Some(warm),
    })
}

pub(crate) fn print_memory(memory: &[HeapPeak], vm_hwm: Option<u64>) {
    let kib = |b: f64| b / 1024.0;
    println!(
        "\npeak heap per full batch (batch sizes from template.yaml; heap allocated above the level before the invocation):"
    );
    println!(
        "  {:<10} {:>6} {:>16} {:>16} {:>12} {:>14}",
        "handler", "batch", "first inv. KiB", "next inv. KiB", "payload KiB", "retained KiB"
    );
    for m in memory {
        println!(
            "  {:<10} {:>6} {:>16.0} {:>16} {:>12.0} {:>14.0}",
            m.handler,
            m.batch,
            kib(m.peak_heap_bytes as f64),
            m.warm_peak_heap_bytes
                .map(|b| format!("{:.0}", kib(b as f64)))
                .unwrap_or_default(),
            kib(m.payload_bytes as f64),
            kib(m.retained_bytes as f64)
        );
    }
    println!("  (first inv.: a fresh handler's first invocation, with what it sets up on first use; retained: still allocated after it)");
    if let Some(b) = vm_hwm {
        println!(
            "  the bench process's peak resident set (VmHWM, everything it ran): {:.1} MiB",
            b as f64 / (1024.0 * 1024.0)
        );
    }
}

/// The delivery worker's heap for one full batch in which a few deliveries go to a hostile
/// receiver (it answers at once, then streams 100 MiB slowly), beside the same worker's heap for
/// a batch that goes only to a well-behaved receiver (`bench --hostile-receiver [STATUS]`).
pub(crate) async fn hostile_receiver(status: u16) -> Result<()> {
    const HOSTILE: usize = 4;
    let normal = ChildReceiver::start()?;
    let hostile = ChildReceiver::start_with(&["--stream", &status.to_string()])?;
    let n = batch_size("DeliverFunction", "Work");
    let p = Pipeline::new().await;
    let f = p.fixtures();
    let mut subscriptions = Vec::new();
    for receiver in [&normal, &hostile] {
        let account = f.account(&[]).await?;
        let integration = f
            .webhook(&account.account_id, receiver.url("/memory"))
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
        subscriptions.push((account.account_id, sub.subscription_id));
    }
    let queue = p.stack.queue("DeliveryQueue");
    // `n` changes, the first `hostile` of them of the hostile account, through ingest and the
    // dispatcher onto the delivery queue, to be handed to the worker as one batch; with the
    // hostile changes' ids.
    let batch = |hostile: usize| {
        let (p, subscriptions, queue) = (&p, &subscriptions, &queue);
        async move {
            let mut hostile_changes = Vec::new();
            for i in 0..n {
                let (account, _) = &subscriptions[usize::from(i < hostile)];
                let change = catalog_change(account, p.now(), i as f64);
                p.write_change(&change).await?;
                if i < hostile {
                    hostile_changes.push(change.change_id);
                }
            }
            p.ingest_pending().await?;
            p.dispatch_pending().await?;
            let messages = receive_at_least(queue, n).await?;
            anyhow::ensure!(messages.len() == n, "{} messages", messages.len());
            anyhow::Ok((queue.event(&messages)?, hostile_changes))
        }
    };
    // The first batch warms the worker up (clients, caches); the next two are measured.
    p.worker.handle(batch(0).await?.0).await;
    let run = |event| invoke("deliver", event, n, |e| p.worker.handle(e));
    let well_behaved = run(batch(0).await?.0).await?;
    let (event, hostile_changes) = batch(HOSTILE).await?;
    let started = std::time::Instant::now();
    let against_hostile = run(event).await?;
    let seconds = started.elapsed().as_secs_f64();
    let (account, sub) = &subscriptions[1];
    let mut stored = Vec::new();
    for change in &hostile_changes {
        let d = p
            .delivery(account, change, sub)
            .await
            .ok_or_else(|| anyhow::anyhow!("no delivery for {change}"))?;
        for a in d.attempt_log {
            let detail = a.detail.map_or(0, |d| d.len());
            stored.push(format!("{} {:?} {detail} B", a.class, a.http_status));
        }
    }
    let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
    println!(
        "delivery worker, one batch of {n} messages (warm), peak heap above the level before:"
    );
    println!(
        "  all to a well-behaved receiver:               {:>8.2} MiB",
        mib(well_behaved.peak_heap_bytes)
    );
    println!(
        "  {HOSTILE} of them to a receiver streaming 100 MiB: {:>8.2} MiB ({seconds:.1} s for the batch)",
        mib(against_hostile.peak_heap_bytes)
    );
    println!("  the hostile deliveries' attempts (class, status, detail stored): {stored:?}");
    Ok(())
}
