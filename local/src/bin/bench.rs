//! `make bench`: drives the whole pipeline on the local emulator and prints what each delivery
//! costs in AWS requests (counted by an SDK interceptor on the handlers' clients), Lambda
//! invocations (batches as template.yaml configures them), throughput and latency.
//!
//!   bench [--changes N] [--json]

use anyhow::Result;
use local::fixtures::{catalog_change, Fixtures};
use local::metering::{DYNAMO_READS, DYNAMO_WRITES};
use local::pipeline::Pipeline;
use local::receiver::{Receiver, Reply};
use local::template::Template;
use serde_json::{json, Value};
use shared::domain::retry::RetryPolicy;
use shared::domain::time::MINUTE;
use std::collections::BTreeMap;
use std::time::Instant;

struct Scenario {
    name: &'static str,
    deliveries: u64,
    /// The handlers' AWS requests by operation.
    requests: BTreeMap<(String, String), u64>,
    /// Records or messages each function received.
    ingest_records: u64,
    dispatch_records: u64,
    worker_messages: u64,
    seconds: f64,
}

impl Scenario {
    fn per(&self, n: u64) -> f64 {
        n as f64 / self.deliveries.max(1) as f64
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
    let text = std::fs::read_to_string(Template::project_path()).unwrap_or_default();
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap_or(serde_yaml::Value::Null);
    let size = |function: &str, event: &str| {
        doc["Resources"][function]["Properties"]["Events"][event]["Properties"]["BatchSize"]
            .as_u64()
            .unwrap_or(1)
    };
    Batches {
        ingest: size("IngestFunction", "Changes"),
        dispatch: size("DispatchFunction", "NewWork"),
        deliver: size("DeliverFunction", "Work"),
    }
}

async fn run(name: &'static str, changes: usize, setup: Setup) -> Result<Scenario> {
    let p = Pipeline::new().await;
    let receiver = Receiver::start().await;
    let f = Fixtures {
        clients: &p.t.clients,
        table: &p.t.config.delivery_table,
        now: p.now(),
    };
    let account = f.account(&[]).await?;
    let integration = f
        .webhook(&account.account_id, receiver.url("/bench"))
        .await?;
    let filter =
        matches!(setup, Setup::FilteredOut).then(|| json!({"field": "record.price", "gt": 1000}));
    f.subscription(
        &integration,
        &["catalog_item"],
        filter,
        &["sku", "name", "price"],
        RetryPolicy::FixedSchedule,
    )
    .await?;
    if matches!(setup, Setup::OneRetry) {
        receiver.script(std::iter::repeat_n(Reply::Status(503), changes));
    }
    for i in 0..changes {
        p.write_change(&catalog_change(&account.account_id, p.now(), i as f64))
            .await?;
    }
    p.t.meter.reset();
    let started = Instant::now();
    let first = p.pump().await?;
    let mut worker_messages = first.queue.messages as u64;
    let mut dispatch_records = first.published_from_stream as u64;
    if matches!(setup, Setup::OneRetry) {
        let later = p.advance(MINUTE).await?;
        worker_messages += later.queue.messages as u64;
        dispatch_records += later.published_from_stream as u64;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(Scenario {
        name,
        deliveries: changes as u64,
        requests: p.t.meter.snapshot(),
        ingest_records: first.changes as u64,
        dispatch_records,
        worker_messages,
        seconds,
    })
}

#[derive(Clone, Copy)]
enum Setup {
    FirstAttempt,
    OneRetry,
    FilteredOut,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let json_out = args.iter().any(|a| a == "--json");
    let changes: usize = args
        .iter()
        .position(|a| a == "--changes")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let b = batches();
    let scenarios = vec![
        run("first-attempt push", changes, Setup::FirstAttempt).await?,
        run("one retry, then success", changes, Setup::OneRetry).await?,
        run("filtered out", changes, Setup::FilteredOut).await?,
    ];
    let mut rows = Vec::new();
    for s in &scenarios {
        let writes = s.count("DynamoDB", Some(DYNAMO_WRITES));
        let reads = s.count("DynamoDB", Some(DYNAMO_READS));
        let sqs_handlers = s.count("SQS", None);
        // The SQS event source mapping receives and deletes in batches of up to ten.
        let sqs_mapping = 2 * s.worker_messages.div_ceil(10);
        let invocations = s.ingest_records.div_ceil(b.ingest)
            + s.dispatch_records.div_ceil(b.dispatch)
            + s.worker_messages.div_ceil(b.deliver);
        rows.push(json!({
            "scenario": s.name,
            "deliveries": s.deliveries,
            "dynamodb_writes_per_delivery": s.per(writes),
            "dynamodb_reads_per_delivery": s.per(reads),
            "sqs_requests_per_delivery": s.per(sqs_handlers + sqs_mapping),
            "lambda_invocations_per_delivery": s.per(invocations),
            "deliveries_per_second": s.deliveries as f64 / s.seconds,
            "by_operation": s.requests.iter().map(|((svc, op), n)| (format!("{svc}.{op}"), json!(s.per(*n)))).collect::<serde_json::Map<String, Value>>(),
        }));
    }
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"changes": changes, "scenarios": rows}))?
        );
        return Ok(());
    }
    println!("Pipeline benchmark on the local emulator: {changes} changes per scenario, one subscription\n");
    println!(
        "{:<26} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "scenario", "DDB wr", "DDB rd", "SQS req", "Lambda inv", "deliv/s"
    );
    for r in &rows {
        println!(
            "{:<26} {:>9.2} {:>9.2} {:>9.2} {:>10.3} {:>10.1}",
            r["scenario"].as_str().unwrap_or_default(),
            r["dynamodb_writes_per_delivery"]
                .as_f64()
                .unwrap_or_default(),
            r["dynamodb_reads_per_delivery"]
                .as_f64()
                .unwrap_or_default(),
            r["sqs_requests_per_delivery"].as_f64().unwrap_or_default(),
            r["lambda_invocations_per_delivery"]
                .as_f64()
                .unwrap_or_default(),
            r["deliveries_per_second"].as_f64().unwrap_or_default(),
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
            "  {:<26} {}",
            r["scenario"].as_str().unwrap_or_default(),
            ops.join(", ")
        );
    }
    Ok(())
}
