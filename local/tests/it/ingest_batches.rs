//! Ingest's stream batches (`shared::delivery::ingest`): different items' changes side by side,
//! one item's changes in stream order, and a failure that holds back only the later changes of
//! its own item. Against the emulator, with the failure injected at the SDK boundary.

use aws_lambda_events::event::dynamodb::Event;
use local::faults::{Fault, Matcher};
use local::fixtures::change_stream_record as record;
use local::testkit::World;

fn failed(response: &aws_lambda_events::event::streams::DynamoDbEventResponse) -> Vec<String> {
    let ids = response.batch_item_failures.iter();
    ids.filter_map(|f| f.item_identifier.clone()).collect()
}

#[tokio::test]
async fn a_failed_change_holds_back_the_later_changes_of_its_item_and_nothing_else_in_the_batch() {
    let w = World::new().await;
    let account = w.account().await;
    let integration = w.integration(&account.account_id).await;
    w.subscribe(&integration).fields(&["sku"]).await;
    let account_id = account.account_id.clone();
    let held = w.change(&account_id).price(1.0).build();
    let other = w.change(&account_id).price(2.0).build();
    // The item of `held` written twice (its second version after the first), `other` between.
    let mut event = Event::default();
    event.records = vec![
        record(&held, "INSERT", "1"),
        record(&other, "INSERT", "2"),
        record(&held, "MODIFY", "3"),
    ];
    // Both of the first record's writes (event and delivery) fail through the SDK's three tries.
    let faults = &w.pipeline.stack.faults;
    let held_id = held.change_id.to_string();
    faults.inject_matching(
        Matcher::operation("PutItem").on(&held_id),
        Fault::InternalError,
        6,
    );

    let response = w.pipeline.ingest.handle(event.clone()).await;
    assert_eq!(
        failed(&response),
        ["1", "3"],
        "the failed change and the later one of its item, not the other item's"
    );
    assert!(faults.pending().is_empty(), "every injected fault was met");
    assert!(
        w.pipeline
            .event(&account_id, &other.change_id)
            .await
            .is_some(),
        "the other item's change is ingested in the same batch"
    );
    assert!(
        w.pipeline
            .event(&account_id, &held.change_id)
            .await
            .is_none(),
        "the held item's later change was not worked before its first"
    );

    // The stream hands the batch over again: everything is ingested once.
    let again = w.pipeline.ingest.handle(event).await;
    assert!(failed(&again).is_empty());
    let ingested = w.pipeline.event(&account_id, &held.change_id).await;
    assert_eq!(ingested.map(|e| e.subscribers), Some(1));
}
