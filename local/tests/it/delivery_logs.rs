//! What the delivery functions log, through the subscriber their `main` installs
//! (`shared::runtime::json_logs`): at the default level a delivered change writes a few bytes
//! (its success is a DEBUG line), every failure is logged in full with its ids and error, and
//! no field is written in Rust's debug form.

use local::logs::logged;
use local::receiver::Reply;
use local::testkit::World;
use serde_json::{json, Value};
use shared::domain::integration_delivery::DeliveryStatus;
use shared::runtime::DEFAULT_LOG_LEVEL;

/// The lines of `lines` whose message is `message`.
fn with_message<'a>(lines: &'a [Value], message: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["fields"]["message"] == message)
        .collect()
}

#[tokio::test]
async fn a_failing_delivery_attempt_is_logged_in_full_with_its_ids_its_error_and_a_numeric_http_status(
) {
    let w = World::new().await;
    let account = w.account().await;
    let integration = w.integration(&account.account_id).await;
    let sub = w.subscribe(&integration).await;
    w.receiver.script([Reply::Full {
        status: 503,
        headers: vec![],
        body: "upstream overloaded".into(),
    }]);
    let change = w.change(&account.account_id).await;
    let (pumped, logs) = logged(DEFAULT_LOG_LEVEL, w.pipeline.pump()).await;
    pumped.unwrap();
    let d = w
        .pipeline
        .delivery(&account.account_id, &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Retrying);
    let lines = logs.lines();
    let attempts = with_message(&lines, "delivery attempt");
    assert_eq!(attempts.len(), 1, "{}", logs.text());
    let (line, f) = (attempts[0], &attempts[0]["fields"]);
    assert_eq!(line["level"], "INFO");
    assert_eq!(f["delivery_id"], d.delivery_id.as_str());
    assert_eq!(f["account_id"], account.account_id.as_str());
    assert_eq!(f["subscription_id"], sub.subscription_id.as_str());
    assert_eq!(f["http_status"], json!(503), "a number: {line}");
    assert_eq!(f["status"], "retrying");
    assert_eq!(f["class"], "transient");
    let error = d.attempt_log[0]
        .detail
        .clone()
        .expect("the attempt's error");
    assert!(error.contains("upstream overloaded"), "{error}");
    assert_eq!(f["detail"], error.as_str(), "{line}");
    assert!(
        !logs.text().contains("Some("),
        "a field in debug form: {}",
        logs.text()
    );
}

#[tokio::test]
async fn a_delivered_change_writes_at_most_a_hundred_log_bytes_at_the_default_level_and_its_success_at_debug(
) {
    let w = World::new().await;
    let account = w.account().await;
    let integration = w.integration(&account.account_id).await;
    let sub = w.subscribe(&integration).await;
    let changes = 20;
    for _ in 0..changes {
        w.change(&account.account_id).await;
    }
    let (pumped, logs) = logged(DEFAULT_LOG_LEVEL, w.pipeline.pump()).await;
    pumped.unwrap();
    assert_eq!(w.receiver.received().len(), changes);
    assert!(
        logs.bytes() <= 100 * changes,
        "{} bytes for {changes} deliveries: {}",
        logs.bytes(),
        logs.text()
    );
    for line in logs.lines() {
        assert_eq!(line["level"], "INFO", "only sampled successes: {line}");
    }

    // At DEBUG, each success has its line: its ids and the receiver's status as a number.
    let change = w.change(&account.account_id).await;
    let (pumped, logs) = logged("DEBUG", w.pipeline.pump()).await;
    pumped.unwrap();
    let d = w
        .pipeline
        .delivery(&account.account_id, &change.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered);
    let lines = logs.lines();
    let attempts = with_message(&lines, "delivery attempt");
    let mine: Vec<_> = attempts
        .iter()
        .filter(|l| l["fields"]["delivery_id"] == d.delivery_id.as_str())
        .collect();
    assert_eq!(mine.len(), 1, "{}", logs.text());
    let f = &mine[0]["fields"];
    assert_eq!(f["account_id"], account.account_id.as_str());
    assert_eq!(f["subscription_id"], sub.subscription_id.as_str());
    assert_eq!(f["http_status"], json!(200), "a number: {}", mine[0]);
    assert_eq!(f["status"], "delivered");
}
