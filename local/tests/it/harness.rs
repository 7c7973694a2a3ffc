//! The harness itself against the emulator: provisioning from the template, stream and queue taps
//! with partial batch failures, and the scripted receiver.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use aws_sdk_dynamodb::types::AttributeValue;
use local::receiver::{Receiver, Reply};
use local::template::Template;
use local::testkit::TestStack;

#[tokio::test]
async fn provisions_exactly_what_the_template_declares() {
    let t = TestStack::new().await;
    let template = Template::load_project().unwrap();
    for spec in &template.tables {
        let name = &t.stack.table(&spec.logical_id).name;
        let d = t
            .clients
            .dynamo
            .describe_table()
            .table_name(name)
            .send()
            .await
            .unwrap()
            .table
            .unwrap();
        let mut indexes: Vec<String> = d
            .global_secondary_indexes()
            .iter()
            .filter_map(|i| i.index_name.clone())
            .collect();
        indexes.sort();
        let mut declared: Vec<String> =
            spec.global_indexes.iter().map(|i| i.name.clone()).collect();
        declared.sort();
        assert_eq!(indexes, declared, "{}", spec.logical_id);
        assert_eq!(
            d.stream_specification.is_some_and(|s| s.stream_enabled),
            spec.stream_view.is_some(),
            "{}",
            spec.logical_id
        );
    }
    for spec in &template.queues {
        assert!(t
            .stack
            .queue(&spec.logical_id)
            .url
            .contains(&t.stack.prefix));
    }
    // The function environment resolves to this stack's resources.
    assert_eq!(t.config.delivery_table, t.stack.table("DeliveryTable").name);
    assert_eq!(
        t.config.delivery_queue_url,
        t.stack.queue("DeliveryQueue").url
    );
    assert!(t.config.allow_private_targets);
}

#[tokio::test]
async fn stream_tap_delivers_in_order_and_retries_from_the_first_failure() {
    let t = TestStack::new().await;
    let table = &t.config.changes_table;
    for i in 0..5 {
        t.clients
            .dynamo
            .put_item()
            .table_name(table)
            .item("account_id", AttributeValue::S("a1".into()))
            .item("change_id", AttributeValue::S(format!("c{i}")))
            .send()
            .await
            .unwrap();
    }
    let mut tap = t.stream("ChangesTable");
    let mut seen = Vec::new();
    let mut failed_once = false;
    let report = tap
        .drain(|event| {
            let mut failures = Vec::new();
            for r in &event.records {
                let id = r.change.new_image.get("change_id").cloned();
                let id = match id {
                    Some(serde_dynamo::AttributeValue::S(s)) => s,
                    other => panic!("unexpected {other:?}"),
                };
                if id == "c2" && !failed_once {
                    failed_once = true;
                    let mut f = DynamoDbBatchItemFailure::default();
                    f.item_identifier = r.change.sequence_number.clone();
                    failures.push(f);
                    break;
                }
                seen.push(id);
            }
            let mut response = DynamoDbEventResponse::default();
            response.batch_item_failures = failures;
            async move { response }
        })
        .await
        .unwrap();
    assert_eq!(seen, vec!["c0", "c1", "c2", "c3", "c4"]);
    assert_eq!(report.failures, 1);
    assert_eq!(report.batches, 2);
    // Checkpointed: a second drain delivers nothing.
    let again = tap
        .drain(|_| async { DynamoDbEventResponse::default() })
        .await
        .unwrap();
    assert_eq!(again.records, 0);
}

/// With a filter (the event source mapping's `FilterCriteria`), refused records never reach the
/// handler nor take a place in a batch, and the tap moves past them.
#[tokio::test]
async fn stream_tap_filters_before_it_batches_and_moves_past_refused_records() {
    let t = TestStack::new().await;
    let table = &t.config.changes_table;
    for i in 0..9 {
        t.clients
            .dynamo
            .put_item()
            .table_name(table)
            .item("account_id", AttributeValue::S("a1".into()))
            .item("change_id", AttributeValue::S(format!("c{i}")))
            .item("wanted", AttributeValue::Bool(i % 3 == 0))
            .send()
            .await
            .unwrap();
    }
    let mut tap = t.stream("ChangesTable");
    tap.batch_size = 2;
    tap.filter = Some(|r| {
        matches!(
            r.change.new_image.get("wanted"),
            Some(serde_dynamo::AttributeValue::Bool(true))
        )
    });
    let mut batches: Vec<Vec<String>> = Vec::new();
    let report = tap
        .drain(|event| {
            batches.push(
                event
                    .records
                    .iter()
                    .map(|r| match r.change.new_image.get("change_id") {
                        Some(serde_dynamo::AttributeValue::S(s)) => s.clone(),
                        other => panic!("unexpected {other:?}"),
                    })
                    .collect(),
            );
            async { DynamoDbEventResponse::default() }
        })
        .await
        .unwrap();
    assert_eq!(batches, vec![vec!["c0", "c3"], vec!["c6"]]);
    assert_eq!((report.records, report.batches), (3, 2));
    // Without the filter, a second drain shows where the tap stands: past c7 and c8 as well.
    tap.filter = None;
    let again = tap
        .drain(|_| async { DynamoDbEventResponse::default() })
        .await
        .unwrap();
    assert_eq!(
        again.records, 0,
        "checkpointed past the refused records too"
    );
}

#[tokio::test]
async fn queue_tap_deletes_successes_and_keeps_failures() {
    let t = TestStack::new().await;
    let mut tap = t.queue("DeliveryQueue");
    tap.redeliver_failures_now = true;
    for body in ["ok-1", "fail", "ok-2"] {
        t.clients
            .sqs
            .send_message()
            .queue_url(&tap.queue_url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let mut attempts_of_fail = 0;
    let report = tap
        .drain(
            |event| {
                let mut response = SqsBatchResponse::default();
                for m in &event.records {
                    if m.body.as_deref() == Some("fail") {
                        attempts_of_fail += 1;
                        if attempts_of_fail < 3 {
                            let mut f = BatchItemFailure::default();
                            f.item_identifier = m.message_id.clone().unwrap();
                            response.batch_item_failures.push(f);
                        }
                        assert_eq!(
                            m.attributes
                                .get("ApproximateReceiveCount")
                                .map(String::as_str),
                            Some(attempts_of_fail.to_string().as_str())
                        );
                    }
                }
                async move { response }
            },
            10,
        )
        .await
        .unwrap();
    assert_eq!(attempts_of_fail, 3);
    assert_eq!(report.deleted, 3);
    assert_eq!(tap.depth().await.unwrap(), (0, 0));
}

#[tokio::test]
async fn receiver_records_requests_and_follows_its_script() {
    let r = Receiver::start().await;
    r.script([Reply::Full {
        status: 429,
        headers: vec![("retry-after".into(), "7".into())],
        body: "slow down".into(),
    }]);
    let client = reqwest::Client::new();
    let first = client
        .post(r.url("/hook"))
        .body("one")
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 429);
    assert_eq!(first.headers()["retry-after"], "7");
    let second = client
        .post(r.url("/hook"))
        .body("two")
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    let got = r.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].path, "/hook");
    assert_eq!(got[1].body, b"two");
}

/// The claims and idempotency keys of this system rest on DynamoDB applying each conditional write
/// atomically. The emulator must do the same, or racing tests prove nothing.
#[tokio::test]
async fn the_emulator_lets_exactly_one_of_many_racing_conditional_writes_win() {
    let t = TestStack::new().await;
    let table = t.config.delivery_table.clone();
    t.clients
        .dynamo
        .put_item()
        .table_name(&table)
        .item("pk", AttributeValue::S("race".into()))
        .item("sk", AttributeValue::S("race".into()))
        .item("status", AttributeValue::S("queued".into()))
        .send()
        .await
        .unwrap();
    let attempts = (0..24).map(|i| {
        let dynamo = t.clients.dynamo.clone();
        let table = table.clone();
        tokio::spawn(async move {
            dynamo
                .update_item()
                .table_name(table)
                .key("pk", AttributeValue::S("race".into()))
                .key("sk", AttributeValue::S("race".into()))
                .update_expression("SET #s = :sending, claimed_by = :me ADD claims :one")
                .condition_expression("#s = :queued")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":sending", AttributeValue::S("sending".into()))
                .expression_attribute_values(":queued", AttributeValue::S("queued".into()))
                .expression_attribute_values(":me", AttributeValue::N(i.to_string()))
                .expression_attribute_values(":one", AttributeValue::N("1".into()))
                .send()
                .await
                .is_ok()
        })
    });
    let wins = futures::future::join_all(attempts)
        .await
        .into_iter()
        .filter(|r| *r.as_ref().unwrap())
        .count();
    assert_eq!(wins, 1);
    let item = t
        .clients
        .dynamo
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("race".into()))
        .key("sk", AttributeValue::S("race".into()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(item["claims"], AttributeValue::N("1".into()));
}

/// Transactions too: concurrent transactional adds to one item must all count. (Plain threaded moto
/// passes this one; where it loses writes is a transaction racing other writes of the same item,
/// seen intermittently in the auto-pause test, which is why `scripts/emulator.py` serialises.)
#[tokio::test]
async fn the_emulator_applies_concurrent_transactions_atomically() {
    use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
    let t = TestStack::new().await;
    let table = t.config.delivery_table.clone();
    let adds = (0..40).map(|i| {
        let dynamo = t.clients.dynamo.clone();
        let table = table.clone();
        tokio::spawn(async move {
            let update = |pk: &str| {
                TransactWriteItem::builder()
                    .update(
                        Update::builder()
                            .table_name(&table)
                            .key("pk", AttributeValue::S(pk.into()))
                            .key("sk", AttributeValue::S("n".into()))
                            .update_expression("ADD hits :one SET last_writer = :i")
                            .expression_attribute_values(":one", AttributeValue::N("1".into()))
                            .expression_attribute_values(":i", AttributeValue::N(i.to_string()))
                            .build()
                            .unwrap(),
                    )
                    .build()
            };
            dynamo
                .transact_write_items()
                .transact_items(update("counter"))
                .transact_items(update(&format!("other{i}")))
                .send()
                .await
                .unwrap();
        })
    });
    futures::future::join_all(adds).await;
    let item = t
        .clients
        .dynamo
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("counter".into()))
        .key("sk", AttributeValue::S("n".into()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(item["hits"], AttributeValue::N("40".into()));
}

/// The meter asks for consumed capacity and the emulator answers it by DynamoDB's rules: a write
/// costs a unit per started kilobyte of the larger of the item before and after, plus every index
/// whose entry it adds or changes; keys-only indexes ignore updates of other attributes.
#[tokio::test]
async fn consumed_capacity_is_counted_by_dynamodb_rules_table_and_indexes_apart() {
    let t = TestStack::new().await;
    t.meter.count_capacity(true);
    let table = &t.config.notification_table;
    let s = |v: &str| AttributeValue::S(v.to_string());
    // 2,500 bytes of payload: three started kilobytes. `inbox_key`/`inbox_at` put the item in the
    // all-attributes `inbox` index, `watch_shard`/`watch_at` in the keys-only `watch` index (an
    // entry of a few bytes: one unit).
    let put = t
        .clients
        .dynamo
        .put_item()
        .table_name(table)
        .item("pk", s("capacity"))
        .item("sk", s("item"))
        .item("inbox_key", s("INBOX#someone"))
        .item("inbox_at", AttributeValue::N("1700000000".into()))
        .item("watch_shard", s("3"))
        .item("watch_at", AttributeValue::N("1700000000".into()))
        .item("payload", s(&"x".repeat(2500)));
    put.clone().send().await.unwrap();
    let units = t.meter.units()["PutItem"];
    assert_eq!((units.write, units.indexes, units.read), (7.0, 4.0, 0.0));

    // Changing an attribute only the all-attributes index holds: table 3 + inbox 3; the
    // keys-only index does not see it.
    t.clients
        .dynamo
        .update_item()
        .table_name(table)
        .key("pk", s("capacity"))
        .key("sk", s("item"))
        .update_expression("SET note = :n")
        .expression_attribute_values(":n", s("seen"))
        .send()
        .await
        .unwrap();
    assert_eq!(t.meter.units()["UpdateItem"].write, 6.0);
    assert_eq!(t.meter.units()["UpdateItem"].indexes, 3.0);

    // A refused conditional write reports no capacity but is counted as refused.
    let refused = put
        .condition_expression("attribute_not_exists(pk)")
        .send()
        .await;
    assert!(refused.is_err());
    assert_eq!(t.meter.units()["PutItem"].refused, 1);
    assert_eq!(t.meter.units()["PutItem"].write, 7.0);

    // An eventually consistent read of a 3 KB item: half of one 4 KB unit.
    t.clients
        .dynamo
        .get_item()
        .table_name(table)
        .key("pk", s("capacity"))
        .key("sk", s("item"))
        .send()
        .await
        .unwrap();
    assert_eq!(t.meter.units()["GetItem"].read, 0.5);
    assert_eq!(t.meter.total("DynamoDB", None), 4);
}
