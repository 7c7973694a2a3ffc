//! The "ingest batch" figures: ingest's time for a stream batch of [`BATCH`] changes against one
//! change alone, every DynamoDB request taking [`LATENCY`] (a typical in-region round trip). What
//! working a batch's changes side by side buys: the batch costs a few rounds of requests, not a
//! hundred (docs/scale.md). Twice: the puts answered at the SDK boundary after the latency, as
//! applied (ingest's own rounds: DynamoDB answers requests side by side), and every request held
//! that long and then answered by the emulator (which answers one at a time, so its own time
//! adds up over the batch's two hundred puts).

use anyhow::{ensure, Result};
use aws_lambda_events::event::dynamodb::Event;
use local::faults::{Fault, Matcher, Schedule};
use local::fixtures::{catalog_change, change_stream_record};
use local::metering::{DYNAMO_READS, DYNAMO_WRITES};
use local::pipeline::Pipeline;
use serde_json::{json, Value};
use shared::ids::AccountId;
use std::time::{Duration, Instant};

/// The figures' name (`--only`).
pub(crate) const NAME: &str = "ingest batch";
/// What every DynamoDB request is held.
const LATENCY: Duration = Duration::from_millis(8);
/// The changes of a batch: the changes mapping's `BatchSize`.
const BATCH: usize = 100;
/// Runs of each, alternating; the median is reported.
const RUNS: usize = 5;

/// Ingest's median times for a batch and for one change, and their ratio.
pub(crate) async fn ingest_batch_times() -> Result<Value> {
    let p = Pipeline::new().await;
    let f = p.fixtures();
    let account = f.account(&[]).await?;
    let url = "https://receiver.example.com/hooks".to_string();
    f.catalog_webhook(&account.account_id, url).await?;
    let held = |s: Schedule, operation: &&str| {
        s.rate(Matcher::operation(operation), Fault::Latency(LATENCY), 1.0)
    };
    let every = DYNAMO_WRITES.iter().chain(DYNAMO_READS);
    // The puts answered at the boundary; the configuration's query (once a batch) read for real.
    let others = every.clone().filter(|o| **o != "PutItem");
    let answered = others.fold(Schedule::seeded(1), held).rate(
        Matcher::operation("PutItem"),
        Fault::AnsweredAfter(LATENCY),
        1.0,
    );
    let (one, batch) = times(&p, &account.account_id, answered).await?;
    let (emulator_one, emulator_batch) = times(
        &p,
        &account.account_id,
        every.fold(Schedule::seeded(1), held),
    )
    .await?;
    Ok(json!({
        "ingest_one_change_ms_at_8ms": one,
        "ingest_batch_100_ms_at_8ms": batch,
        "batch_over_one_change": batch / one,
        "emulator_answering": {
            "ingest_one_change_ms_at_8ms": emulator_one,
            "ingest_batch_100_ms_at_8ms": emulator_batch,
        },
        "runs": RUNS,
    }))
}

/// Ingest's median times for one change and for a batch, its requests meeting `schedule`.
async fn times(p: &Pipeline, account_id: &AccountId, schedule: Schedule) -> Result<(f64, f64)> {
    p.stack.faults.follow(schedule);
    let (mut one, mut batch) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        for (changes, times) in [(1, &mut one), (BATCH, &mut batch)] {
            let mut event = Event::default();
            event.records = (0..changes)
                .map(|i| {
                    let change = catalog_change(account_id, p.now(), i as f64);
                    change_stream_record(&change, "INSERT", &(i + 1).to_string())
                })
                .collect();
            let started = Instant::now();
            let response = p.ingest.handle(event).await;
            times.push(started.elapsed());
            ensure!(
                response.batch_item_failures.is_empty(),
                "ingest failed records: {:?}",
                response.batch_item_failures
            );
        }
    }
    p.stack.faults.clear();
    Ok((median_ms(one), median_ms(batch)))
}

fn median_ms(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

pub(crate) fn print_ingest_batch(v: &Value) {
    let f = |k: &str| v[k].as_f64().unwrap_or_default();
    println!(
        "ingest, every DynamoDB request taking 8 ms (median of {}): one change {:.1} ms, a batch of 100 {:.1} ms ({:.1} × one change); answered by the emulator, {:.1} and {:.1} ms",
        v["runs"],
        f("ingest_one_change_ms_at_8ms"),
        f("ingest_batch_100_ms_at_8ms"),
        f("batch_over_one_change"),
        v["emulator_answering"]["ingest_one_change_ms_at_8ms"].as_f64().unwrap_or_default(),
        v["emulator_answering"]["ingest_batch_100_ms_at_8ms"].as_f64().unwrap_or_default(),
    );
}
