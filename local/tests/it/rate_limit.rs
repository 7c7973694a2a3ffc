//! A rate limit per integration: deliveries over an integration's `rate_limit_per_second` wait on
//! the queue, unclaimed, for the slots their integration's schedule gives them, and arrive then;
//! an unlimited integration beside it is not held up; a schedule that cannot be written makes a
//! delivery wait, never lost; a backlog drains at its rate, each delivery attempted once, at a
//! fraction of a queue message each, without the sweep publishing it again or a duplicate copy
//! taking a slot. Against the emulator and real receivers on loopback, the virtual clock standing
//! for the seconds counted.

use axum::http::StatusCode;
use local::faults::{Fault, Matcher};
use local::receiver::Receiver;
use local::testkit::through_api::ApiSubscription;
use local::testkit::World;
use serde_json::json;
use shared::clock::Clock;
use shared::domain::change::Change;
use shared::domain::integration_delivery::{DeliveryStatus, FIRST_DISPATCH_GRACE};
use shared::domain::rate_limit::second_of;
use shared::domain::time::SECOND;
use std::time::Duration;

/// A webhook integration to `receiver` limited to `per_second`, and a catalog subscription of
/// it, made through the API.
async fn limited_subscription(w: &World, receiver: &Receiver, per_second: u32) -> ApiSubscription {
    let tenant = w.api.account("Limited").await;
    let integration = w
        .api
        .post(
            "/v1/integrations",
            &tenant.token,
            json!({
                "name": "Small receiver",
                "method": "webhook",
                "event_access_accepted": true,
                "webhook_url": receiver.url("/hooks/rhythm"),
                "rate_limit_per_second": per_second,
            }),
        )
        .await;
    let integration = integration.created().clone();
    assert_eq!(integration["rate_limit_per_second"], per_second);
    let sub = w
        .api
        .post(
            "/v1/subscriptions",
            &tenant.token,
            json!({
                "integration_id": integration["id"],
                "record_types": ["catalog_item"],
                "fields": ["sku", "price"],
            }),
        )
        .await;
    ApiSubscription {
        account_id: tenant.account_id.clone(),
        integration_token: integration["token"].as_str().unwrap().to_owned(),
        subscription_id: local::testkit::id(sub.created()["id"].as_str().unwrap()),
    }
}

async fn changes(w: &World, sub: &ApiSubscription, n: usize) -> Vec<Change> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(w.change(&sub.account_id).price(i as f64).await);
    }
    out
}

/// Handles what is on the delivery queue now; then, until `done` or `rounds` run out, moves the
/// clock a second on and waits for the delayed copies (one or two seconds) before handling
/// again. Gives the limited receiver's new requests per round.
async fn rounds_until(w: &World, limited: &Receiver, total: usize, rounds: usize) -> Vec<usize> {
    let mut per_round = Vec::new();
    let mut seen = limited.count();
    for round in 0..rounds {
        if round > 0 {
            w.pipeline.clock.advance(SECOND);
            tokio::time::sleep(Duration::from_millis(2_100)).await;
        }
        w.pipeline.work_pending().await.unwrap();
        per_round.push(limited.count() - seen);
        seen = limited.count();
        if seen >= total {
            break;
        }
    }
    per_round
}

async fn dead_letters(w: &World) -> usize {
    w.pipeline
        .stack
        .queue("DeliveryDeadLetterQueue")
        .receive()
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_rate_limited_integration_never_gets_more_than_its_limit_a_second_and_the_unlimited_one_beside_it_waits_for_nothing(
) {
    const LIMIT: usize = 3;
    const LIMITED: usize = 11;
    let w = World::new().await;
    let small = Receiver::start().await;
    let limited = limited_subscription(&w, &small, LIMIT as u32).await;
    let tenant = w.api.account("Unlimited").await;
    let free = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let limited_changes = changes(&w, &limited, LIMITED).await;
    let free_changes = changes(&w, &free, 10).await;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();

    let per_round = rounds_until(&w, &small, LIMITED, 12).await;
    println!("limited receiver, requests per second of the clock: {per_round:?}");
    // The unlimited integration's deliveries all went in the first round, beside the limited
    // one's first second.
    assert_eq!(w.receiver.count(), 10);
    for c in &free_changes {
        let d = w.stored_delivery(&free, c).await;
        assert_eq!((d.status, d.attempts), (DeliveryStatus::Delivered, 1));
    }
    assert_eq!(per_round[0], LIMIT);
    assert!(per_round.iter().all(|&n| n <= LIMIT), "{per_round:?}");
    assert_eq!(small.count(), LIMITED, "every delivery arrived");
    for c in &limited_changes {
        let d = w.stored_delivery(&limited, c).await;
        assert_eq!(d.status, DeliveryStatus::Delivered);
        assert_eq!(d.attempts, 1, "waiting spent no attempt");
        assert_eq!(d.attempt_log.len(), 1);
    }
    assert_eq!(dead_letters(&w).await, 0);
}

#[tokio::test]
async fn a_throttled_rate_counter_makes_the_delivery_wait_and_it_is_delivered_once_the_counter_is_back(
) {
    let w = World::new().await;
    let small = Receiver::start().await;
    let limited = limited_subscription(&w, &small, 5).await;
    let c = &changes(&w, &limited, 1).await[0];
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    let faults = &w.pipeline.stack.faults;
    faults.inject_matching(
        Matcher::operation("UpdateItem").on("RATE#"),
        Fault::Throttle,
        100,
    );
    w.pipeline.work_pending().await.unwrap();
    assert!(
        !faults.injected().is_empty(),
        "the counter write was throttled"
    );
    assert_eq!(small.count(), 0, "not sent without being counted");
    let d = w.stored_delivery(&limited, c).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Pending, 0));
    assert!(d.lease_token.is_none(), "not claimed");

    faults.clear();
    let per_round = rounds_until(&w, &small, 1, 5).await;
    assert_eq!(per_round.iter().sum::<usize>(), 1);
    let d = w.stored_delivery(&limited, c).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Delivered, 1));
    assert_eq!(dead_letters(&w).await, 0);
}

#[tokio::test]
async fn a_rate_limit_is_set_changed_and_removed_through_the_api_within_its_bounds() {
    let w = World::new().await;
    let small = Receiver::start().await;
    let limited = limited_subscription(&w, &small, 10).await;
    let tenant_token = w.account_token(&limited.account_id).await;
    let list = w.api.get("/v1/integrations", &tenant_token).await;
    let id = list.ok()["data"][0]["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/integrations/{id}");
    for bad in [json!(0), json!(1001), json!(2.5), json!("5")] {
        let r = w
            .api
            .patch(&path, &tenant_token, json!({"rate_limit_per_second": bad}))
            .await;
        r.problem(StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            r.fields(),
            vec!["rate_limit_per_second".to_string()],
            "{bad}"
        );
    }
    let r = w
        .api
        .patch(&path, &tenant_token, json!({"rate_limit_per_second": 1000}))
        .await;
    assert_eq!(r.ok()["rate_limit_per_second"], 1000);
    let r = w
        .api
        .patch(&path, &tenant_token, json!({"rate_limit_per_second": null}))
        .await;
    assert!(r.ok().get("rate_limit_per_second").is_none());
}

#[tokio::test]
async fn an_administrator_sets_and_removes_a_rate_limit_from_the_manage_page() {
    use crate::console::{get, post, sign_in_with_token};
    let w = World::new().await;
    let tenant = w.api.account("Limited").await;
    w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let list = w.api.get("/v1/integrations", &tenant.token).await;
    let id = list.ok()["data"][0]["id"].as_str().unwrap().to_owned();
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let path = format!("/console/acct/manage/integrations/{id}/rate-limit");
    let set = |value: &'static str| {
        let fields = [
            ("csrf", admin.csrf.clone()),
            ("rate_limit_per_second", value.into()),
        ];
        let (w, cookie, path) = (&w, admin.cookie.clone(), path.clone());
        async move {
            let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
            post(w, Some(&cookie), &path, &fields).await
        }
    };
    let saved = set("25").await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.text);
    let read = w
        .api
        .get(&format!("/v1/integrations/{id}"), &tenant.token)
        .await;
    assert_eq!(read.ok()["rate_limit_per_second"], 25);
    let page = get(&w, Some(&admin.cookie), "/console/acct/manage").await;
    assert!(
        page.text
            .contains("value=\"25\" data-testid=\"rate-limit\""),
        "{}",
        page.text
    );

    let bad = set("0").await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    assert!(bad.text.contains("rate_limit_per_second"), "{}", bad.text);
    let removed = set("").await;
    assert_eq!(removed.status, StatusCode::OK, "{}", removed.text);
    let read = w
        .api
        .get(&format!("/v1/integrations/{id}"), &tenant.token)
        .await;
    assert!(read.ok().get("rate_limit_per_second").is_none());
}

#[tokio::test]
async fn a_backlog_drains_at_its_rate_each_delivery_attempted_once_and_cheaply_with_no_republication_and_no_slot_for_a_duplicate(
) {
    use local::fast_clock::{fast_worker, run_fast};
    const LIMIT: usize = 2;
    const BACKLOG: usize = 200;
    const DUPLICATES: usize = 10;
    // The clock runs this many times faster than real time, the worker's queue delays with it.
    const FACTOR: u32 = 4;
    let w = World::new().await;
    let small = Receiver::start().await;
    let limited = limited_subscription(&w, &small, LIMIT as u32).await;
    let backlog = changes(&w, &limited, BACKLOG).await;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    // A second copy of the first deliveries' work (a message the queue delivered twice).
    let mut copies = Vec::new();
    for c in &backlog[..DUPLICATES] {
        copies.push((w.stored_delivery(&limited, c).await.work(), Duration::ZERO));
    }
    let (sqs, queue) = (
        &w.pipeline.stack.clients.sqs,
        &w.pipeline.stack.config.delivery_queue_url,
    );
    assert!(shared::delivery::dispatch::publish(sqs, queue, &copies)
        .await
        .is_empty());
    // The backlog has waited until a minute before the grace after which a first dispatch counts
    // as lost: most of it waits past that grace for its slot.
    w.pipeline.clock.advance(FIRST_DISPATCH_GRACE - 60 * SECOND);
    w.pipeline.stack.meter.reset();

    let worker = fast_worker(&w.pipeline, FACTOR);
    let limit = Duration::from_secs(3 * (BACKLOG / LIMIT) as u64);
    // The roll-up walk every half minute of the clock, not ten: every chance to find a
    // lost dispatch.
    let every = (limit, Duration::from_secs(30));
    let run = run_fast(&w.pipeline, &worker, FACTOR, every, || {
        small.count() >= BACKLOG
    })
    .await
    .unwrap();
    // The dispatcher's messages (an account's new work ten to a message) and the duplicates.
    let initial = BACKLOG.div_ceil(10) + DUPLICATES;
    println!("{run:?}, {} invocations", run.invocations(initial));

    assert_eq!(small.count(), BACKLOG, "every delivery arrived, once");
    let mut integration = None;
    for c in &backlog {
        let d = w.stored_delivery(&limited, c).await;
        assert_eq!((d.status, d.attempts), (DeliveryStatus::Delivered, 1));
        assert_eq!(d.attempt_log.len(), 1);
        assert_eq!(d.rate_slot, None, "its slot served its attempt");
        integration = Some(d.integration_id);
    }
    // At its rate: the last of the backlog started in its last slot's second, not before; the
    // fast clock's queue comes up to a factor of seconds late.
    let rate_seconds = (BACKLOG / LIMIT) as u64;
    let drained = run.elapsed.as_secs();
    assert!(
        (rate_seconds - 1..=rate_seconds + 3 * u64::from(FACTOR)).contains(&drained),
        "drained in {drained} s of the clock, its rate's {rate_seconds} s"
    );
    assert_eq!((run.swept, run.requeued), (0, 0), "nothing published again");
    // One slot per delivery, bar slots passed over: the duplicate copies took none.
    let dynamo = &w.pipeline.stack.clients.dynamo;
    let table = &w.pipeline.stack.config.delivery_table;
    let integration = integration.unwrap();
    let schedule =
        shared::store::rate_schedule::get(dynamo, table, &limited.account_id, &integration)
            .await
            .unwrap()
            .expect("the integration's schedule");
    // A take that comes back with the last slot of a second the clock has just left passes it
    // over and takes the next (using it would put one more in the current second): on a loaded
    // machine the run's head, in step with the clock for its first seconds, can pass over a slot
    // or two that way. A slot for each duplicate copy would be ten more.
    let passed_over = schedule.taken - BACKLOG as u64;
    assert!(
        passed_over < 3,
        "{passed_over} slots taken beyond one a delivery"
    );
    // Cheap: the worker's sends, and the mapping's receive and delete per invocation.
    let per = |n: usize| n as f64 / BACKLOG as f64;
    let invocations = per(run.invocations(initial));
    let sqs_requests =
        per(w.pipeline.stack.meter.total("SQS", None) as usize + 2 * run.invocations(initial));
    // A message per slot's second, the limit's deliveries packed in it.
    let bound = 1.0 / LIMIT as f64 + 0.1;
    assert!(
        invocations <= bound,
        "{invocations} invocations per delivery"
    );
    assert!(
        sqs_requests <= 2.0,
        "{sqs_requests} SQS requests per delivery"
    );
    assert_eq!(dead_letters(&w).await, 0);
}

#[tokio::test]
async fn the_attempts_of_a_batch_that_find_their_integrations_run_idle_restart_it_once_with_no_write_refused(
) {
    const LIMIT: usize = 10;
    const BATCH: usize = 8;
    let w = World::new().await;
    let small = Receiver::start().await;
    let limited = limited_subscription(&w, &small, LIMIT as u32).await;
    // A first delivery begins the integration's run, and the worker remembers it.
    let first = changes(&w, &limited, 1).await.remove(0);
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    w.pipeline.work_pending().await.unwrap();
    assert_eq!(small.count(), 1);
    // A minute later the run is long idle, and a batch of deliveries comes at once.
    w.pipeline.clock.advance(60 * SECOND);
    changes(&w, &limited, BATCH).await;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    let meter = &w.pipeline.stack.meter;
    meter.reset();
    meter.count_capacity(true);
    w.pipeline.work_pending().await.unwrap();
    meter.count_capacity(false);

    assert_eq!(
        small.count(),
        1 + BATCH,
        "the batch fits in the restarted run's second"
    );
    let refused = meter.units().get("UpdateItem").map_or(0, |u| u.refused);
    assert_eq!(refused, 0, "no attempt raced another's restart");
    // One restart (the run's first slot) and a take for each other attempt.
    let integration = w.stored_delivery(&limited, &first).await.integration_id;
    let stack = &w.pipeline.stack;
    let (dynamo, table) = (&stack.clients.dynamo, &stack.config.delivery_table);
    let schedule =
        shared::store::rate_schedule::get(dynamo, table, &limited.account_id, &integration)
            .await
            .unwrap()
            .expect("the integration's schedule");
    assert_eq!(schedule.taken, BATCH as u64);
    assert_eq!(schedule.start, second_of(w.pipeline.clock.now()));
}
