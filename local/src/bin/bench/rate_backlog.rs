//! The "rate-limited backlog" scenario: a backlog of changes to one webhook integration limited
//! to [`LIMIT`] a second, ingested and dispatched at once, then drained by the worker on a clock
//! running [`FACTOR`] times faster than real time (`local::fast_clock`: the worker's queue delays
//! run as fast), with the sweep every minute and the roll-up walk every two ([`ROLLUP_EVERY`]).
//! What it shows: the drain takes the backlog's time at its rate, each delivery
//! is attempted once, the queue and Lambda cost a fraction of a request each, the sweep publishes
//! nothing again, and the schedule is written about once a delivery (a slot goes only to a
//! delivery the claim took).

use anyhow::Result;
use local::fast_clock::{fast_worker, run_fast};
use local::fixtures::catalog_change;
use local::metering::DYNAMO_WRITES;
use local::pipeline::Pipeline;
use local::receiver::Receiver;
use serde_json::{json, Value};
use shared::domain::retry::RetryPolicy;
use std::collections::HashSet;
use std::time::Duration;

/// The scenario's name (`--only`).
pub(crate) const NAME: &str = "rate-limited backlog";
/// The integration's limit, deliveries a second.
const LIMIT: u32 = 5;
/// How much faster than real time the clock runs.
const FACTOR: u32 = 2;
/// The roll-up walk's schedule here: every two minutes of the clock, five times template.yaml's
/// (`RollUpWalk`: every ten), so a backlog of a few thousand meets it after the lost-dispatch
/// grace (the walk finds lost first dispatches, which the sweep then publishes).
const ROLLUP_EVERY: Duration = Duration::from_secs(120);

/// Runs the scenario with a backlog of `changes` and answers its figures.
pub(crate) async fn rate_limited_backlog(changes: usize) -> Result<Value> {
    let p = Pipeline::new().await;
    let receiver = Receiver::start().await;
    let f = p.fixtures();
    let account = f.account(&[]).await?;
    let mut integration = f
        .webhook(&account.account_id, receiver.url("/backlog"))
        .await?;
    integration.rate_limit_per_second = Some(LIMIT);
    f.save_integration(&integration).await?;
    let fields = ["sku", "name", "price"];
    let policy = RetryPolicy::FixedSchedule;
    f.subscription(&integration, &["catalog_item"], None, &fields, policy)
        .await?;
    for i in 0..changes {
        p.write_change(&catalog_change(&account.account_id, p.now(), i as f64))
            .await?;
    }
    p.stack.meter.reset();
    p.stack.meter.count_capacity(true);
    p.stack.meter.count_partitions(&["pk"]);
    let (ingested, _) = p.ingest_pending().await?;
    let dispatched = p.dispatch_pending().await?;
    // The dispatcher's messages: an account's new work ten to a message.
    let initial = changes.div_ceil(10);
    let worker = fast_worker(&p, FACTOR);
    let rate_seconds = changes as f64 / f64::from(LIMIT);
    let limit = Duration::from_secs_f64(rate_seconds * 3.0 + 120.0);
    let run = run_fast(&p, &worker, FACTOR, (limit, ROLLUP_EVERY), || {
        receiver.count() >= changes
    })
    .await?;
    let attempted: HashSet<String> = (receiver.received().iter())
        .filter_map(|r| Some(r.json()["change_id"].as_str()?.to_string()))
        .collect();
    let schedule_writes: u64 = (p.stack.meter.partition_writes().iter())
        .filter(|((_, attribute), _)| attribute == "pk")
        .flat_map(|(_, values)| values.iter())
        .filter(|(pk, _)| pk.starts_with("RATE#"))
        .map(|(_, n)| n)
        .sum();
    let per = |n: f64| n / changes.max(1) as f64;
    let b = crate::batches();
    let invocations = (ingested as u64).div_ceil(b.ingest)
        + (dispatched as u64).div_ceil(b.dispatch)
        + run.invocations(initial) as u64;
    let units = p.stack.meter.units();
    let write_units: f64 = units.values().map(|u| u.write + u.refused as f64).sum();
    Ok(json!({
        "scenario": NAME,
        "deliveries": changes,
        "limit_per_second": LIMIT,
        "clock_factor": FACTOR,
        "drain_seconds": run.elapsed.as_secs_f64(),
        "drain_in_rate_seconds": run.elapsed.as_secs_f64() / rate_seconds,
        "attempts_per_delivery": per(receiver.count() as f64),
        "deliveries_attempted": attempted.len(),
        "sqs_requests_per_delivery": per((p.stack.meter.total("SQS", None) + 2 * run.invocations(initial) as u64) as f64),
        "lambda_invocations_per_delivery": per(invocations as f64),
        "worker_messages_per_delivery": per(run.messages as f64),
        "dynamodb_writes_per_delivery": per(p.stack.meter.total("DynamoDB", Some(DYNAMO_WRITES)) as f64),
        "dynamodb_write_units_per_delivery": per(write_units),
        "sweep_republications": run.swept,
        "lost_dispatches_requeued": run.requeued,
        // A slot goes only to a claimed delivery; writes beyond one a delivery are a run's
        // restarts (when it had gone idle) and restarts that lost a race (no slot).
        "schedule_writes_beyond_one_per_delivery": schedule_writes.saturating_sub(attempted.len() as u64),
    }))
}

/// The scenario's lines.
pub(crate) fn print_backlog(r: &Value) {
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "\n{}: {} deliveries to one integration limited to {}/s (clock {}x real time)",
        NAME, r["deliveries"], r["limit_per_second"], r["clock_factor"]
    );
    println!(
        "  drained in {:.0} s of the clock: {:.3} of its rate's time; {:.3} attempts per delivery ({} deliveries attempted)",
        f("drain_seconds"),
        f("drain_in_rate_seconds"),
        f("attempts_per_delivery"),
        r["deliveries_attempted"]
    );
    println!(
        "  per delivery: {:.3} SQS requests, {:.3} Lambda invocations ({:.3} worker messages), {:.3} DynamoDB writes ({:.3} WRU)",
        f("sqs_requests_per_delivery"),
        f("lambda_invocations_per_delivery"),
        f("worker_messages_per_delivery"),
        f("dynamodb_writes_per_delivery"),
        f("dynamodb_write_units_per_delivery"),
    );
    println!(
        "  sweep republications {}, lost dispatches requeued {}, schedule writes beyond one per delivery {}",
        r["sweep_republications"],
        r["lost_dispatches_requeued"],
        r["schedule_writes_beyond_one_per_delivery"]
    );
}
