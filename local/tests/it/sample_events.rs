//! Every sample payload in `events/` goes through the handler it is for, against the emulator:
//! the samples are what `sam local invoke`/`cargo lambda invoke` would send, and they stay true.

use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use local::testkit::id;
use local::testkit::{sample, World};
use serde_json::Value;
use shared::domain::integration_delivery::DeliveryStatus;

/// The account, integration and subscription the samples name (the integration posts to the
/// world's receiver).
pub(crate) async fn sample_configuration(w: &World) {
    w.account()
        .id("acct-sample")
        .named("Sample")
        .admins(&[])
        .await;
    let integration = w
        .integration(&id("acct-sample"))
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
    let response = w.pipeline.ingest.handle(change).await;
    assert!(response.batch_item_failures.is_empty());
    let d = w
        .pipeline
        .delivery(
            &id("acct-sample"),
            &id("01JDX0SAMP1E0000000000CHG1"),
            &id("01JDX0SAMPLE0000000000SUB1"),
        )
        .await
        .expect("ingest recorded the delivery");
    assert_eq!(d.status, DeliveryStatus::Pending);

    let stream: DynamoDbEvent =
        serde_json::from_str(&sample("dispatch-delivery-stream.json")).unwrap();
    let response = w.pipeline.dispatcher.handle_stream(stream).await;
    assert!(response.batch_item_failures.is_empty());
    let published = w
        .pipeline
        .stack
        .queue("DeliveryQueue")
        .receive()
        .await
        .unwrap();
    assert_eq!(
        published.len(),
        1,
        "the dispatcher published the sample's work"
    );

    let work: SqsEvent = serde_json::from_str(&sample("deliver-sqs.json")).unwrap();
    let response = w.pipeline.worker.handle(work).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(w.receiver.count(), 1);
    let d = w
        .pipeline
        .delivery(
            &id("acct-sample"),
            &id("01JDX0SAMP1E0000000000CHG1"),
            &id("01JDX0SAMPLE0000000000SUB1"),
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
    let response = w.pipeline.worker.handle(event).await;
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

#[tokio::test]
async fn the_dispatcher_sweeps_only_on_its_schedules_payload_and_writes_one_sweep_metric_each_time()
{
    use shared::delivery::dispatch::{DispatchError, Dispatcher};
    use shared::metrics::CapturedEmf;
    use std::sync::Arc;
    let w = World::new().await;
    let mut config = w.pipeline.stack.config.clone();
    config.metrics_namespace = "RhythmTest".into();
    config.stage = "qa".into();
    let dispatcher = Dispatcher::new(
        w.pipeline.stack.clients.clone(),
        config,
        Arc::new(w.pipeline.clock.clone()),
    );
    let emf = CapturedEmf::default();

    // The schedule's sample payload sweeps (nothing is due: it publishes nothing) and still
    // writes exactly one DispatcherSweepRuns document.
    let payload: Value = serde_json::from_str(&sample("dispatch-sweep.json")).unwrap();
    let out = dispatcher.handle_payload(payload, &emf).await.unwrap();
    assert_eq!(out, serde_json::json!({"published": 0, "failed": 0}));
    let docs = emf.documents();
    assert_eq!(docs.len(), 1, "{docs:?}");
    let doc = &docs[0];
    let directive = &doc["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(directive["Namespace"], "RhythmTest");
    assert_eq!(directive["Dimensions"], serde_json::json!([["Stage"]]));
    assert_eq!(
        directive["Metrics"],
        serde_json::json!([{"Name": "DispatcherSweepRuns", "Unit": "Count"}])
    );
    assert_eq!(doc["Stage"], "qa");
    assert_eq!(doc["DispatcherSweepRuns"], 1);
    assert_eq!(doc["_aws"]["Timestamp"], w.pipeline.now().millis());
    // A second run: a second line (the alarm counts runs).
    dispatcher
        .handle_payload(serde_json::json!({"sweep": "due"}), &emf)
        .await
        .unwrap();
    assert_eq!(emf.documents().len(), 2);

    // Anything that is neither the schedule's payload nor a stream batch is refused, without a
    // sweep metric.
    for payload in [
        serde_json::json!({"sweep": "Due"}),
        serde_json::json!({"sweep": "due", "extra": 1}),
        serde_json::json!({}),
        serde_json::json!({"detail-type": "Scheduled Event"}),
        Value::Null,
    ] {
        let e = dispatcher
            .handle_payload(payload.clone(), &emf)
            .await
            .unwrap_err();
        assert!(matches!(e, DispatchError::Payload(_)), "{payload}: {e}");
        assert!(e.to_string().contains(r#"{"sweep":"due"}"#), "{e}");
    }
    assert_eq!(emf.documents().len(), 2);

    // The stream sample still goes to the stream path (no sweep metric).
    let stream: Value = serde_json::from_str(&sample("dispatch-delivery-stream.json")).unwrap();
    let out = dispatcher.handle_payload(stream, &emf).await.unwrap();
    assert!(out["batchItemFailures"].is_array(), "{out}");
    assert_eq!(emf.documents().len(), 2);
}

#[tokio::test]
async fn a_stream_record_without_a_sequence_number_is_reported_by_its_event_id() {
    let w = World::new().await;
    let mut event: Value = serde_json::from_str(&sample("ingest-change-stream.json")).unwrap();
    let record = &mut event["Records"][0];
    record["dynamodb"]
        .as_object_mut()
        .unwrap()
        .remove("SequenceNumber");
    // A change the ingest cannot read, so the record fails.
    record["dynamodb"]["NewImage"] = serde_json::json!({"pk": {"S": "x"}});
    let event_id = record["eventID"].as_str().unwrap().to_owned();
    let event: DynamoDbEvent = serde_json::from_value(event).unwrap();
    let response = w.pipeline.ingest.handle(event).await;
    let failed: Vec<Option<&str>> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_deref())
        .collect();
    let expected = format!("event:{event_id}");
    assert_eq!(failed, vec![Some(expected.as_str())]);
}
