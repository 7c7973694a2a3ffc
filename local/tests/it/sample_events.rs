//! Every sample payload in `events/` goes through the handler it is for, against the emulator:
//! the samples are what `sam local invoke`/`cargo lambda invoke` would send, and they stay true.

use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use local::fixtures::{test_secret, Fixtures};
use local::pipeline::Pipeline;
use local::receiver::Receiver;
use serde_json::Value;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::retry::RetryPolicy;
use shared::domain::subscription::SubscriptionStatus;
use shared::store::models::{Account, Integration, Subscription};

fn sample(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../events")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The account, integration and subscription the samples name.
async fn sample_configuration(p: &Pipeline, receiver: &Receiver) {
    let f = Fixtures {
        clients: &p.t.clients,
        table: &p.t.config.delivery_table,
        now: p.now(),
    };
    let account = Account {
        account_id: "acct-sample".into(),
        name: "Sample".into(),
        admin_emails: vec![],
        created_at: p.now(),
    };
    p.t.clients
        .dynamo
        .put_item()
        .table_name(&p.t.config.delivery_table)
        .set_item(Some(
            shared::store::to_item(&account, "ACCT#acct-sample", "ACCOUNT", "account").unwrap(),
        ))
        .send()
        .await
        .unwrap();
    f.save_integration(&Integration {
        account_id: "acct-sample".into(),
        integration_id: "01JDX0SAMPLE0000000000INT1".into(),
        name: "Sample hook".into(),
        method: shared::domain::event::DeliveryMethod::Webhook,
        webhook_url: Some(receiver.url("/sample")),
        signing_secret: Some(test_secret()),
        handler: None,
        event_access_accepted: true,
        created_at: p.now(),
        updated_at: p.now(),
    })
    .await
    .unwrap();
    f.save_subscription(&Subscription {
        account_id: "acct-sample".into(),
        subscription_id: "01JDX0SAMPLE0000000000SUB1".into(),
        integration_id: "01JDX0SAMPLE0000000000INT1".into(),
        record_types: vec!["catalog_item".into()],
        filter: None,
        fields: vec!["sku".into(), "price".into()],
        retry_policy: RetryPolicy::FixedSchedule,
        status: SubscriptionStatus::Active,
        consecutive_dead: 0,
        paused_at: None,
        created_at: p.now(),
        updated_at: p.now(),
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn the_samples_run_through_ingest_dispatch_and_the_worker() {
    let p = Pipeline::new().await;
    let receiver = Receiver::start().await;
    sample_configuration(&p, &receiver).await;

    let change: DynamoDbEvent = serde_json::from_str(&sample("ingest-change-stream.json")).unwrap();
    let response = p.ingest.handle(change).await;
    assert!(response.batch_item_failures.is_empty());
    let d = p
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
    let response = p.dispatcher.handle_stream(stream).await;
    assert!(response.batch_item_failures.is_empty());
    let published = p.t.queue("DeliveryQueue").receive().await.unwrap();
    assert_eq!(
        published.len(),
        1,
        "the dispatcher published the sample's work"
    );

    let work: SqsEvent = serde_json::from_str(&sample("deliver-sqs.json")).unwrap();
    let response = p.worker.handle(work).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(receiver.count(), 1);
    let d = p
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
    let p = Pipeline::new().await;
    let mut work: Value = serde_json::from_str(&sample("deliver-sqs.json")).unwrap();
    let good = work["Records"][0].clone();
    let mut bad = good.clone();
    bad["messageId"] = "bad-one".into();
    bad["body"] = "{not json".into();
    work["Records"] = Value::Array(vec![bad, good]);
    let event: SqsEvent = serde_json::from_value(work).unwrap();
    let response = p.worker.handle(event).await;
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
