//! Every sample payload in `events/` goes through the handler it is for, against the emulator:
//! the samples are what `sam local invoke`/`cargo lambda invoke` would send, and they stay true.

use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use local::testkit::{sample, World};
use serde_json::Value;
use shared::domain::integration_delivery::DeliveryStatus;

/// The account, integration and subscription the samples name (the integration posts to the
/// world's receiver).
async fn sample_configuration(w: &World) {
    w.account()
        .id("acct-sample")
        .named("Sample")
        .admins(&[])
        .await;
    let integration = w
        .integration("acct-sample")
        .id("01JDX0SAMPLE0000000000INT1")
        .named("Sample hook")
        .url(w.receiver.url("/sample"))
        .await;
    w.subscribe(&integration)
        .id("01JDX0SAMPLE0000000000SUB1")
        .await;
}

#[tokio::test]
async fn the_samples_run_through_ingest_dispatch_and_the_worker() {
    let w = World::new().await;
    sample_configuration(&w).await;

    let change: DynamoDbEvent = serde_json::from_str(&sample("ingest-change-stream.json")).unwrap();
    let response = w.ingest.handle(change).await;
    assert!(response.batch_item_failures.is_empty());
    let d = w
        .delivery(
            "acct-sample",
            "01JDX0SAMPLE0000000000CHG1",
            "01JDX0SAMPLE0000000000SUB1",
        )
        .await
        .expect("ingest recorded the delivery");
    assert_eq!(d.status, DeliveryStatus::Pending);

    let stream: DynamoDbEvent =
        serde_json::from_str(&sample("dispatch-delivery-stream.json")).unwrap();
    let response = w.dispatcher.handle_stream(stream).await;
    assert!(response.batch_item_failures.is_empty());
    let published = w.t.queue("DeliveryQueue").receive().await.unwrap();
    assert_eq!(
        published.len(),
        1,
        "the dispatcher published the sample's work"
    );

    let work: SqsEvent = serde_json::from_str(&sample("deliver-sqs.json")).unwrap();
    let response = w.worker.handle(work).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(w.receiver.count(), 1);
    let d = w
        .delivery(
            "acct-sample",
            "01JDX0SAMPLE0000000000CHG1",
            "01JDX0SAMPLE0000000000SUB1",
        )
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered);
}

#[tokio::test]
async fn a_malformed_work_message_fails_alone() {
    let w = World::new().await;
    let mut work: Value = serde_json::from_str(&sample("deliver-sqs.json")).unwrap();
    let good = work["Records"][0].clone();
    let mut bad = good.clone();
    bad["messageId"] = "bad-one".into();
    bad["body"] = "{not json".into();
    work["Records"] = Value::Array(vec![bad, good]);
    let event: SqsEvent = serde_json::from_value(work).unwrap();
    let response = w.worker.handle(event).await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, vec!["bad-one"]);
}

#[test]
fn the_schedule_payloads_are_what_the_template_sends() {
    let template = std::fs::read_to_string(local::template::Template::project_path()).unwrap();
    for (file, expected) in [
        ("dispatch-sweep.json", r#"{"sweep":"due"}"#),
        ("reconcile-nightly.json", r#"{"run":"nightly"}"#),
    ] {
        let payload: Value = serde_json::from_str(&sample(file)).unwrap();
        assert_eq!(payload.to_string(), expected);
        assert!(template.contains(&format!("Input: '{expected}'")), "{file}");
    }
}
