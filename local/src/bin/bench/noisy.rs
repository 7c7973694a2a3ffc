//! The noisy-neighbour scenario (`make bench`'s fairness line) and the writes per partition key
//! it makes (`docs/scale.md` rests on them).
//!
//! One account writes ten times as many changes as each of five others (a flood: all of it is
//! ingested and dispatched first, so the delivery queue holds the backlog, interleaved as it was
//! written), and its endpoint hangs past the attempt timeout; the others' endpoint answers at
//! once. Then the worker polls as the event source mapping does (batches of up to a hundred,
//! gathered for the batching window, two invocations at a time, each with the function's
//! deadline) and the quiet accounts' first attempts are timed from that start: what the backlog
//! and the hanging endpoint cost them. Run twice: with the worker's per-endpoint bound (a
//! timed-out endpoint's other messages are deferred) and without it (the behaviour before). The
//! emulator's queue hands messages over in arrival order: SQS fair queues (the account as
//! `MessageGroupId`) would shorten the quiet accounts' dwell further in AWS, which this run does
//! not model.
//!
//! A third run stands for the fair-queue line of the rate limit: the noisy account's endpoint
//! answers at once but its integration is limited to [`NOISY_LIMIT`] deliveries a second (the
//! manual clock moves a second per second of the run), so most of its backlog waits on the queue
//! as delayed copies while the quiet accounts' first attempts are timed as before.

use anyhow::Result;
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message};
use local::fixtures::catalog_change;
use local::pipeline::Pipeline;
use local::receiver::{Receiver, Reply};
use local::template::Template;
use serde_json::{json, Value};
use shared::delivery::worker::internal::InternalRegistry;
use shared::delivery::worker::webhook::WebhookAdapter;
use shared::delivery::worker::DeliveryWorker;
use shared::domain::ssrf::TargetPolicy;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The attempt timeout: the real one (a shorter one would be no longer than the emulator's store
/// calls for a batch, which are a hundred times DynamoDB's, and would hide what a hanging
/// endpoint costs). Each invocation has the function's deadline (template.yaml's Timeout).
const TIMEOUT: Duration = shared::delivery::worker::webhook::DEFAULT_TIMEOUT;
const QUIET_ACCOUNTS: usize = 5;
/// Changes per quiet account; the noisy one writes ten times as many.
const QUIET_CHANGES: usize = 20;
/// Worker invocations at once (the mapping's MaximumConcurrency is 50 in AWS; a flood fills
/// them all, which two on this machine stand for).
const POLLERS: usize = 2;
/// The noisy account's rate limit in the rate-limited run.
const NOISY_LIMIT: u32 = 20;

/// Which worker behaviour a run measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The hanging endpoint, without the per-endpoint bound (the behaviour before it).
    Unbounded,
    /// The hanging endpoint, its other messages deferred once it times out.
    Bounded,
    /// A fast endpoint, its integration rate-limited.
    RateLimited,
}

/// Both runs, with the change in the quiet accounts' first-attempt latency, and the writes per
/// partition key of the bounded run.
pub(crate) async fn noisy_neighbour() -> Result<Value> {
    let (before, _) = run(Mode::Unbounded).await?;
    let (after, partitions) = run(Mode::Bounded).await?;
    let (limited, _) = run(Mode::RateLimited).await?;
    let p99 = |v: &Value| v["p99_ms"].as_f64().unwrap_or(f64::NAN);
    Ok(json!({
        "scenario": "noisy neighbour",
        "accounts": QUIET_ACCOUNTS + 1,
        "noisy_changes": 10 * QUIET_CHANGES,
        "quiet_changes_per_account": QUIET_CHANGES,
        "attempt_timeout_ms": TIMEOUT.as_millis() as u64,
        "before": before,
        "after": after,
        "rate_limited": limited,
        "noisy_rate_limit_per_second": NOISY_LIMIT,
        "quiet_first_attempt_p99_ms": {"before": p99(&before), "after": p99(&after), "rate_limited": p99(&limited)},
        "partition_writes": partitions,
    }))
}

/// One run of `mode`.
async fn run(mode: Mode) -> Result<(Value, Value)> {
    let bounded = mode != Mode::Unbounded;
    let p = Pipeline::new().await;
    let quiet = Receiver::start().await;
    // The noisy account's endpoint: hanging, or (rate-limited) answering at once.
    let hanging = Receiver::start().await;
    if mode != Mode::RateLimited {
        hanging.set_default(Reply::Hang(TIMEOUT * 5));
    }
    let f = p.fixtures();
    let mut accounts = Vec::new();
    for i in 0..=QUIET_ACCOUNTS {
        let account = f.account(&[]).await?;
        let receiver = if i == 0 { &hanging } else { &quiet };
        let url = receiver.url(&format!("/noisy/{i}"));
        let mut integration = f.catalog_webhook(&account.account_id, url).await?;
        if i == 0 && mode == Mode::RateLimited {
            integration.rate_limit_per_second = Some(NOISY_LIMIT);
            f.save_integration(&integration).await?;
        }
        accounts.push(account.account_id);
    }
    let mut worker = DeliveryWorker::with_adapters(
        p.stack.clients.clone(),
        p.stack.config.clone(),
        Arc::new(p.clock.clone()),
        WebhookAdapter::new(TargetPolicy::LOCAL_DEMO, TIMEOUT),
        InternalRegistry::default(),
    );
    if !bounded {
        worker = worker.without_endpoint_bound();
    }
    p.stack.meter.reset();
    if mode == Mode::Bounded {
        p.stack.meter.count_partitions(&partition_key_attributes());
    }
    // The noisy account (index 0) writes ten changes for each one of every quiet account.
    let order: Vec<usize> = (0..QUIET_CHANGES)
        .flat_map(|_| std::iter::repeat_n(0, 10).chain(1..=QUIET_ACCOUNTS))
        .collect();
    for (i, &a) in order.iter().enumerate() {
        p.write_change(&catalog_change(&accounts[a], p.now(), i as f64))
            .await?;
    }
    while p.ingest_pending().await?.0 + p.dispatch_pending().await? > 0 {}
    let done = AtomicBool::new(false);
    let started = Instant::now();
    let wait = async {
        let expected = QUIET_ACCOUNTS * QUIET_CHANGES;
        let deadline = started + Duration::from_secs(180);
        // Rate-limited: the clock moves a second per second, and the run lasts until the noisy
        // account's backlog is delivered too.
        let limited = mode == Mode::RateLimited;
        let mut tick = Instant::now();
        while (first_attempts(&quiet).len() < expected
            || (limited && hanging.count() < 10 * QUIET_CHANGES))
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if limited && tick.elapsed() >= Duration::from_secs(1) {
                tick = Instant::now();
                p.clock.advance(Duration::from_secs(1));
            }
        }
        done.store(true, Ordering::Relaxed);
    };
    let pollers = futures::future::join_all((0..POLLERS).map(|_| poll_worker(&p, &worker, &done)));
    tokio::join!(wait, pollers);
    // The dispatcher's prompt roll-ups of what was delivered (for the partition counts).
    while p.dispatch_pending().await? > 0 {}
    let mut millis: Vec<f64> = first_attempts(&quiet)
        .values()
        .map(|at| at.duration_since(started).as_secs_f64() * 1000.0)
        .collect();
    millis.sort_by(|a, b| a.total_cmp(b));
    let pick = |q: f64| quantile(&millis, q);
    let latency = json!({
        "endpoint_bound": bounded,
        "noisy_rate_limited": mode == Mode::RateLimited,
        "noisy_seconds": started.elapsed().as_secs_f64(),
        "quiet_first_attempts": millis.len(),
        "hanging_attempts": hanging.count(),
        "p50_ms": pick(0.5),
        "p99_ms": pick(0.99),
        "max_ms": millis.last().copied().unwrap_or(f64::NAN),
    });
    let partitions = match mode {
        Mode::Bounded => hottest_partitions(&p, order.len()),
        _ => Value::Null,
    };
    p.stack.meter.count_partitions(&[]);
    Ok((latency, partitions))
}

/// The `q` quantile of sorted figures (nearest rank), NaN for none.
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

/// The first time the receiver saw each change (its first attempt).
fn first_attempts(receiver: &Receiver) -> HashMap<String, Instant> {
    let mut first = HashMap::new();
    for (at, r) in receiver.received_with_times() {
        if let Some(id) = r.json()["change_id"].as_str() {
            first.entry(id.to_string()).or_insert(at);
        }
    }
    first
}

/// One worker poller, as one concurrent invocation of the event source mapping: gathers up to
/// the template's batch size (for at least its batching window), invokes the worker with the function's
/// deadline and deletes what the worker did not report as failed.
async fn poll_worker(p: &Pipeline, worker: &DeliveryWorker, done: &AtomicBool) {
    let tap = p.stack.queue("DeliveryQueue");
    let full = crate::batch_size("DeliverFunction", "Work");
    let timeout = crate::template_doc()["Resources"]["DeliverFunction"]["Properties"]["Timeout"]
        .as_u64()
        .unwrap_or(60);
    let deadline = Duration::from_secs(timeout);
    while !done.load(Ordering::Relaxed) {
        // A backlog fills the batch (SQS answers a receive in milliseconds; the emulator's
        // slower receives must not cut batches short); a trickle waits for the window.
        let window = Instant::now() + crate::batching_window("DeliverFunction", "Work");
        let mut batch: Vec<Message> = Vec::new();
        while batch.len() < full {
            match tap.receive().await {
                Ok(got) if !got.is_empty() => batch.extend(got),
                _ if Instant::now() >= window => break,
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        if batch.is_empty() {
            continue;
        }
        let Ok(event) = tap.event(&batch) else {
            continue;
        };
        let response = p
            .billed
            .deliver
            .time(worker.handle_until(event, Some(Instant::now() + deadline)))
            .await;
        let failed: HashSet<String> = response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect();
        let done_with: Vec<&Message> = batch
            .iter()
            .filter(|m| !failed.contains(m.message_id().unwrap_or_default()))
            .collect();
        for chunk in done_with.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, m)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(m.receipt_handle().unwrap_or_default())
                        .build()
                        .ok()
                })
                .collect();
            let _ = p
                .stack
                .clients
                .sqs
                .delete_message_batch()
                .queue_url(&tap.queue_url)
                .set_entries(Some(entries))
                .send()
                .await;
        }
    }
}

/// Every partition-key attribute of template.yaml's tables and their global secondary indexes.
fn partition_key_attributes() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = template()
        .tables
        .iter()
        .flat_map(|t| std::iter::once(&t.keys).chain(t.global_indexes.iter().map(|i| &i.keys)))
        .flatten()
        .filter(|k| k.key_type == "HASH")
        .map(|k| k.attribute.as_str())
        .collect();
    out.sort();
    out.dedup();
    out
}

fn template() -> &'static Template {
    static T: std::sync::OnceLock<Template> = std::sync::OnceLock::new();
    T.get_or_init(|| Template::load_project().expect("template.yaml"))
}

/// What a partition key looks like with its ids left out: `EVT#{id}#{id}` for `EVT#a1#c1`,
/// `{shard}` for a shard number, `{id}` for a bare id (a change table's account, a
/// subscription's `by_subscription` key).
fn key_shape(key: &str) -> String {
    key.split('#')
        .map(|part| {
            if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
                "{shard}"
            } else if !part.is_empty() && part.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
            {
                part
            } else {
                "{id}"
            }
        })
        .collect::<Vec<_>>()
        .join("#")
}

/// Items written per partition in this run, by table or index and key shape: how many partitions
/// of the shape were written, the items written to the hottest one and per change on average
/// over all, with the hottest keys themselves.
fn hottest_partitions(p: &Pipeline, changes: usize) -> Value {
    let writes = p.stack.meter.partition_writes();
    // (table name, attribute) → "Logical" or "Logical/index".
    let mut names: HashMap<(String, String), String> = HashMap::new();
    for t in &template().tables {
        let physical = &p.stack.stack.table(&t.logical_id).name;
        for k in t.keys.iter().filter(|k| k.key_type == "HASH") {
            names.insert(
                (physical.clone(), k.attribute.clone()),
                t.logical_id.clone(),
            );
        }
        for i in &t.global_indexes {
            for k in i.keys.iter().filter(|k| k.key_type == "HASH") {
                let name = format!("{}/{}", t.logical_id, i.name);
                names.insert((physical.clone(), k.attribute.clone()), name);
            }
        }
    }
    let mut shapes: BTreeMap<(String, String), Vec<(&String, u64)>> = BTreeMap::new();
    for (place, keys) in &writes {
        let Some(name) = names.get(place) else {
            continue;
        };
        for (key, n) in keys {
            shapes
                .entry((name.clone(), key_shape(key)))
                .or_default()
                .push((key, *n));
        }
    }
    let mut rows: Vec<Value> = shapes
        .into_iter()
        .map(|((place, shape), mut keys)| {
            keys.sort_by_key(|k| std::cmp::Reverse(k.1));
            let total: u64 = keys.iter().map(|(_, n)| n).sum();
            json!({
                "place": place,
                "key_shape": shape,
                "partitions": keys.len(),
                "items_written": total,
                "items_written_per_change": total as f64 / changes.max(1) as f64,
                "hottest_items_written": keys[0].1,
                "hottest_keys": keys.iter().take(3).map(|(k, n)| json!({"key": k, "items_written": n})).collect::<Vec<_>>(),
            })
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r["hottest_items_written"].as_u64().unwrap_or(0)));
    json!({"changes": changes, "by_shape": rows})
}

/// The fairness lines of the table.
pub(crate) fn print_noisy(noisy: &Value) {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    println!(
        "\nnoisy neighbour: 1 account writing {}x each of {} others, its endpoint hanging past the {} ms attempt timeout;",
        10,
        noisy["accounts"].as_u64().unwrap_or(0).saturating_sub(1),
        noisy["attempt_timeout_ms"]
    );
    println!("  the other accounts' first attempt, from the worker's start on the queued backlog (p50 / p99 / max):");
    for (label, key) in [
        ("before (no per-endpoint bound)", "before"),
        ("after (timed-out endpoint deferred)", "after"),
    ] {
        let r = &noisy[key];
        println!(
            "  {label:<38} {:>6.0} / {:>6.0} / {:>6.0} ms   ({} hanging attempts)",
            f(&r["p50_ms"]),
            f(&r["p99_ms"]),
            f(&r["max_ms"]),
            r["hanging_attempts"]
        );
    }
    let r = &noisy["rate_limited"];
    println!(
        "  {:<38} {:>6.0} / {:>6.0} / {:>6.0} ms   ({} noisy deliveries in {:.1} s)",
        format!(
            "noisy endpoint fast, limited to {}/s",
            noisy["noisy_rate_limit_per_second"]
        ),
        f(&r["p50_ms"]),
        f(&r["p99_ms"]),
        f(&r["max_ms"]),
        r["hanging_attempts"],
        f(&r["noisy_seconds"])
    );
    let parts = &noisy["partition_writes"];
    println!(
        "\nitems written per partition key in the bounded run ({} changes), hottest first:",
        parts["changes"]
    );
    println!(
        "  {:<34} {:<22} {:>10} {:>8} {:>10}",
        "table/index", "key shape", "partitions", "hottest", "per change"
    );
    for r in parts["by_shape"].as_array().into_iter().flatten() {
        println!(
            "  {:<34} {:<22} {:>10} {:>8} {:>10.2}",
            r["place"].as_str().unwrap_or_default(),
            r["key_shape"].as_str().unwrap_or_default(),
            r["partitions"],
            r["hottest_items_written"],
            f(&r["items_written_per_change"])
        );
    }
}
