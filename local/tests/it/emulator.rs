//! The emulator itself (scripts/emulator.py): a Query reads only its partition, through an index
//! of each global index kept up to date on every write, and a cancelled TransactWriteItems is
//! undone item by item instead of from copies of whole tables. Both must answer as DynamoDB does:
//! queries are checked against a model of the items written, before and after writes that move
//! items between index partitions, and transactions for atomicity (items and stream).

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, ConditionCheck, Delete, GlobalSecondaryIndex,
    KeySchemaElement, KeyType, Projection, ProjectionType, Put, ScalarAttributeType,
    StreamSpecification, StreamViewType, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use std::collections::{BTreeMap, HashMap};

type Key = HashMap<String, AttributeValue>;

/// One table of its own on the emulator: `pk` (and `sk` when `ranged`), a global index `by_owner`
/// (owner, due) and a hash-only global index `by_kind`; both sparse (not every item has their keys).
struct Table {
    client: Client,
    streams: aws_sdk_dynamodbstreams::Client,
    name: String,
    ranged: bool,
    stream_arn: String,
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn text(item: &Key, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

impl Table {
    async fn new(ranged: bool) -> Table {
        let sdk = local::emulator::sdk_config()
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        let client = Client::new(&sdk);
        let name = format!("emu{}", ulid::Ulid::new().to_string().to_lowercase());
        let attr = |a: &str| {
            AttributeDefinition::builder()
                .attribute_name(a)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap()
        };
        let key = |a: &str, t: KeyType| {
            KeySchemaElement::builder()
                .attribute_name(a)
                .key_type(t)
                .build()
                .unwrap()
        };
        let index = |name: &str, keys: Vec<KeySchemaElement>| {
            GlobalSecondaryIndex::builder()
                .index_name(name)
                .set_key_schema(Some(keys))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build(),
                )
                .build()
                .unwrap()
        };
        let mut create = client
            .create_table()
            .table_name(&name)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr("pk"))
            .attribute_definitions(attr("owner"))
            .attribute_definitions(attr("due"))
            .attribute_definitions(attr("kind"))
            .key_schema(key("pk", KeyType::Hash))
            .global_secondary_indexes(index(
                "by_owner",
                vec![key("owner", KeyType::Hash), key("due", KeyType::Range)],
            ))
            .global_secondary_indexes(index("by_kind", vec![key("kind", KeyType::Hash)]))
            .stream_specification(
                StreamSpecification::builder()
                    .stream_enabled(true)
                    .stream_view_type(StreamViewType::NewAndOldImages)
                    .build()
                    .unwrap(),
            );
        if ranged {
            create = create
                .attribute_definitions(attr("sk"))
                .key_schema(key("sk", KeyType::Range));
        }
        let stream_arn = create
            .send()
            .await
            .unwrap()
            .table_description
            .and_then(|d| d.latest_stream_arn)
            .expect("a stream");
        Table {
            client,
            streams: aws_sdk_dynamodbstreams::Client::new(&sdk),
            name,
            ranged,
            stream_arn,
        }
    }

    fn key(&self, pk: &str, sk: &str) -> Key {
        let mut key = HashMap::from([("pk".to_string(), s(pk))]);
        if self.ranged {
            key.insert("sk".to_string(), s(sk));
        }
        key
    }

    /// The item's primary key as the model keeps it (`sk` empty on a hash-only table).
    fn key_of(&self, item: &Key) -> (String, String) {
        let pk = text(item, "pk").unwrap();
        let sk = if self.ranged {
            text(item, "sk").unwrap()
        } else {
            String::new()
        };
        (pk, sk)
    }

    async fn put(&self, item: &Key) {
        self.client
            .put_item()
            .table_name(&self.name)
            .set_item(Some(item.clone()))
            .send()
            .await
            .unwrap();
    }

    async fn get(&self, pk: &str, sk: &str) -> Option<Key> {
        self.client
            .get_item()
            .table_name(&self.name)
            .set_key(Some(self.key(pk, sk)))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
    }

    /// Every page of a query (`limit` items a page), in the order the emulator returned them.
    async fn query_all(
        &self,
        index: Option<&str>,
        condition: &str,
        values: &[(&str, AttributeValue)],
        forward: bool,
        limit: i32,
    ) -> Vec<(String, String)> {
        let mut keys = Vec::new();
        let mut start: Option<Key> = None;
        let mut pages = 0;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.name)
                .set_index_name(index.map(str::to_string))
                .key_condition_expression(condition)
                .expression_attribute_names("#h", if index.is_some() { "owner" } else { "pk" })
                .set_expression_attribute_values(Some(
                    values
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .collect(),
                ))
                .scan_index_forward(forward)
                .limit(limit)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .unwrap();
            keys.extend(page.items().iter().map(|i| self.key_of(i)));
            pages += 1;
            assert!(pages < 1000, "paging does not end");
            match page.last_evaluated_key {
                Some(last) if !last.is_empty() => start = Some(last),
                _ => return keys,
            }
        }
    }

    async fn owned_by(&self, owner: &str) -> Vec<(String, String)> {
        self.query_all(
            Some("by_owner"),
            "#h = :h AND due > :d",
            &[(":h", s(owner)), (":d", s("!"))],
            true,
            10,
        )
        .await
    }

    async fn query_kind(&self, kind: &str) -> Vec<(String, String)> {
        let mut keys = Vec::new();
        let mut start: Option<Key> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.name)
                .index_name("by_kind")
                .key_condition_expression("kind = :k")
                .expression_attribute_values(":k", s(kind))
                .limit(5)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .unwrap();
            keys.extend(page.items().iter().map(|i| self.key_of(i)));
            match page.last_evaluated_key {
                Some(last) if !last.is_empty() => start = Some(last),
                _ => break,
            }
        }
        keys.sort();
        keys
    }

    /// How many records the table's stream holds.
    async fn stream_records(&self) -> usize {
        let shard = self
            .streams
            .describe_stream()
            .stream_arn(&self.stream_arn)
            .send()
            .await
            .unwrap()
            .stream_description
            .unwrap()
            .shards
            .unwrap()
            .remove(0)
            .shard_id
            .unwrap();
        let mut iterator = self
            .streams
            .get_shard_iterator()
            .stream_arn(&self.stream_arn)
            .shard_id(shard)
            .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap()
            .shard_iterator;
        let mut count = 0;
        while let Some(it) = iterator {
            let page = self
                .streams
                .get_records()
                .shard_iterator(it)
                .send()
                .await
                .unwrap();
            if page.records().is_empty() {
                break;
            }
            count += page.records().len();
            iterator = page.next_shard_iterator;
        }
        count
    }
}

/// What the test wrote, by primary key: the model the emulator's answers are checked against.
#[derive(Default)]
struct Model {
    items: BTreeMap<(String, String), Key>,
}

impl Model {
    /// The keys a `by_owner` query for `owner` with `due > after` returns, in index order.
    fn by_owner(&self, owner: &str, after: &str, forward: bool) -> Vec<(String, String)> {
        let mut hits: Vec<(String, (String, String))> = self
            .items
            .iter()
            .filter(|(_, i)| text(i, "owner").as_deref() == Some(owner))
            .filter_map(|(k, i)| text(i, "due").map(|due| (due, k.clone())))
            .filter(|(due, _)| due.as_str() > after)
            .collect();
        hits.sort();
        if !forward {
            hits.reverse();
        }
        hits.into_iter().map(|(_, k)| k).collect()
    }

    fn by_kind(&self, kind: &str) -> Vec<(String, String)> {
        self.items
            .iter()
            .filter(|(_, i)| text(i, "kind").as_deref() == Some(kind))
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn partition(
        &self,
        pk: &str,
        keep: impl Fn(&str) -> bool,
        forward: bool,
    ) -> Vec<(String, String)> {
        let mut keys: Vec<(String, String)> = self
            .items
            .keys()
            .filter(|(p, sk)| p == pk && keep(sk))
            .cloned()
            .collect();
        if !forward {
            keys.reverse();
        }
        keys
    }
}

const OWNERS: [&str; 4] = ["o0", "o1", "o2", "o3"];
const KINDS: [&str; 3] = ["k0", "k1", "k2"];

/// Every kind of query the project makes, on `table`, against `model`.
async fn check_queries(table: &Table, model: &Model, when: &str) {
    for owner in OWNERS {
        for (after, forward, limit) in [("!", true, 7), ("d0100", true, 3), ("d0050", false, 4)] {
            let got = table
                .query_all(
                    Some("by_owner"),
                    "#h = :h AND due > :d",
                    &[(":h", s(owner)), (":d", s(after))],
                    forward,
                    limit,
                )
                .await;
            assert_eq!(
                got,
                model.by_owner(owner, after, forward),
                "{when}: by_owner {owner} after {after:?} forward {forward}"
            );
        }
    }
    for kind in KINDS {
        assert_eq!(
            table.query_kind(kind).await,
            model.by_kind(kind),
            "{when}: by_kind {kind}"
        );
    }
    for pk in ["p0", "p3", "p7", "p-none"] {
        let all = table
            .query_all(None, "#h = :h", &[(":h", s(pk))], true, 4)
            .await;
        assert_eq!(all, model.partition(pk, |_| true, true), "{when}: {pk}");
        if table.ranged {
            let got = table
                .query_all(
                    None,
                    "#h = :h AND sk BETWEEN :a AND :b",
                    &[(":h", s(pk)), (":a", s("s0010")), (":b", s("s0200"))],
                    false,
                    2,
                )
                .await;
            let want = model.partition(pk, |sk| ("s0010"..="s0200").contains(&sk), false);
            assert_eq!(got, want, "{when}: {pk} between");
            let got = table
                .query_all(
                    None,
                    "#h = :h AND begins_with(sk, :p)",
                    &[(":h", s(pk)), (":p", s("s01"))],
                    true,
                    3,
                )
                .await;
            assert_eq!(
                got,
                model.partition(pk, |sk| sk.starts_with("s01"), true),
                "{when}: {pk} prefix"
            );
        }
    }
}

async fn queries_answer_as_the_items_written_say(ranged: bool) {
    let table = Table::new(ranged).await;
    let mut model = Model::default();
    // 240 items over 10 partitions; every fifth has no owner, every seventh no due (both sparse
    // for by_owner), every third no kind.
    for i in 0..240usize {
        let (pk, sk) = if ranged {
            (format!("p{}", i % 10), format!("s{i:04}"))
        } else {
            (format!("p{i}"), String::new())
        };
        let mut item = table.key(&pk, &sk);
        if i % 5 != 0 {
            item.insert("owner".into(), s(OWNERS[i % 4]));
        }
        if i % 7 != 0 {
            item.insert("due".into(), s(&format!("d{:04}", (i * 37) % 240)));
        }
        if i % 3 != 0 {
            item.insert("kind".into(), s(KINDS[i % 3]));
        }
        item.insert("body".into(), s(&"x".repeat(i % 50)));
        table.put(&item).await;
        model.items.insert((pk, sk), item);
    }
    check_queries(&table, &model, "after the puts").await;

    // Writes that move items between index partitions, out of them and into them.
    let keys: Vec<(String, String)> = model.items.keys().cloned().collect();
    for (i, (pk, sk)) in keys.iter().enumerate().step_by(3) {
        let item = model.items.get_mut(&(pk.clone(), sk.clone())).unwrap();
        let request = table
            .client
            .update_item()
            .table_name(&table.name)
            .set_key(Some(table.key(pk, sk)));
        match i % 4 {
            0 => {
                let owner = OWNERS[(i + 1) % 4];
                request
                    .update_expression("SET #o = :o, kind = :k")
                    .expression_attribute_names("#o", "owner")
                    .expression_attribute_values(":o", s(owner))
                    .expression_attribute_values(":k", s("k1"))
                    .send()
                    .await
                    .unwrap();
                item.insert("owner".into(), s(owner));
                item.insert("kind".into(), s("k1"));
            }
            1 => {
                request
                    .update_expression("REMOVE #o, kind")
                    .expression_attribute_names("#o", "owner")
                    .send()
                    .await
                    .unwrap();
                item.remove("owner");
                item.remove("kind");
            }
            2 => {
                let due = format!("d{:04}", 500 + i);
                request
                    .update_expression("SET due = :d")
                    .expression_attribute_values(":d", s(&due))
                    .send()
                    .await
                    .unwrap();
                item.insert("due".into(), s(&due));
            }
            _ => {
                table
                    .client
                    .delete_item()
                    .table_name(&table.name)
                    .set_key(Some(table.key(pk, sk)))
                    .send()
                    .await
                    .unwrap();
                model.items.remove(&(pk.clone(), sk.clone()));
            }
        }
    }
    // An update that creates its item, and puts that replace one.
    let (pk, sk) = if ranged {
        ("p3", "s0999")
    } else {
        ("p999", "")
    };
    table
        .client
        .update_item()
        .table_name(&table.name)
        .set_key(Some(table.key(pk, sk)))
        .update_expression("SET #o = :o, due = :d")
        .expression_attribute_names("#o", "owner")
        .expression_attribute_values(":o", s("o2"))
        .expression_attribute_values(":d", s("d0777"))
        .send()
        .await
        .unwrap();
    let mut created = table.key(pk, sk);
    created.insert("owner".into(), s("o2"));
    created.insert("due".into(), s("d0777"));
    model
        .items
        .insert((pk.to_string(), sk.to_string()), created);
    for (pk, sk) in keys.iter().skip(1).step_by(11) {
        let mut item = table.key(pk, sk);
        item.insert("owner".into(), s("o3"));
        item.insert("due".into(), s(&format!("r{pk}{sk}")));
        table.put(&item).await;
        model.items.insert((pk.clone(), sk.clone()), item);
    }
    check_queries(&table, &model, "after the updates").await;
}

#[tokio::test]
async fn queries_on_a_table_with_a_sort_key_and_its_sparse_indexes_answer_from_the_items_written() {
    queries_answer_as_the_items_written_say(true).await;
}

#[tokio::test]
async fn queries_on_a_hash_only_table_and_its_sparse_indexes_answer_from_the_items_written() {
    queries_answer_as_the_items_written_say(false).await;
}

fn cancellation_codes(err: SdkError<TransactWriteItemsError>) -> Vec<Option<String>> {
    match err.into_service_error() {
        TransactWriteItemsError::TransactionCanceledException(e) => e
            .cancellation_reasons()
            .iter()
            .map(|r| r.code().filter(|c| *c != "None").map(str::to_string))
            .collect(),
        other => panic!("expected a cancelled transaction, got {other:?}"),
    }
}

fn owned(table: &Table, pk: &str, owner: &str, n: i64) -> Key {
    let mut item = table.key(pk, "a");
    item.insert("owner".into(), s(owner));
    item.insert("due".into(), s(&format!("d-{pk}")));
    item.insert("n".into(), self::n(n));
    item
}

#[tokio::test]
async fn a_transaction_whose_second_condition_fails_leaves_the_first_item_untouched() {
    let table = Table::new(true).await;
    let first = owned(&table, "first", "o1", 1);
    let last = owned(&table, "last", "o1", 1);
    table.put(&first).await;
    table.put(&last).await;
    let records = table.stream_records().await;
    let before = table.owned_by("o1").await;
    assert_eq!(before.len(), 2);

    let move_first = TransactWriteItem::builder()
        .update(
            Update::builder()
                .table_name(&table.name)
                .set_key(Some(table.key("first", "a")))
                .update_expression("SET #o = :o, n = n + :one")
                .condition_expression("n = :one")
                .expression_attribute_names("#o", "owner")
                .expression_attribute_values(":o", s("o2"))
                .expression_attribute_values(":one", n(1))
                .build()
                .unwrap(),
        )
        .build();
    let put_missing = |condition: &str| {
        TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(&table.name)
                    .set_item(Some(owned(&table, "new", "o2", 1)))
                    .condition_expression(condition)
                    .build()
                    .unwrap(),
            )
            .build()
    };
    let delete_last = TransactWriteItem::builder()
        .delete(
            Delete::builder()
                .table_name(&table.name)
                .set_key(Some(table.key("last", "a")))
                .build()
                .unwrap(),
        )
        .build();
    let err = table
        .client
        .transact_write_items()
        .transact_items(move_first.clone())
        .transact_items(put_missing("attribute_exists(pk)"))
        .transact_items(delete_last.clone())
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        cancellation_codes(err),
        vec![None, Some("ConditionalCheckFailed".to_string()), None]
    );
    assert_eq!(table.get("first", "a").await, Some(first.clone()));
    assert_eq!(table.get("last", "a").await, Some(last.clone()));
    assert_eq!(table.get("new", "a").await, None);
    assert_eq!(table.owned_by("o1").await, before, "the index is as before");
    assert_eq!(
        table.stream_records().await,
        records,
        "no stream record of it"
    );

    // The same transaction with a condition that holds commits all three writes.
    table
        .client
        .transact_write_items()
        .transact_items(move_first)
        .transact_items(put_missing("attribute_not_exists(pk)"))
        .transact_items(delete_last)
        .send()
        .await
        .unwrap();
    let moved = table.get("first", "a").await.unwrap();
    assert_eq!(text(&moved, "owner").as_deref(), Some("o2"));
    assert_eq!(moved.get("n"), Some(&n(2)));
    assert_eq!(table.get("last", "a").await, None);
    assert!(table.get("new", "a").await.is_some());
    assert!(table.owned_by("o1").await.is_empty());
    assert_eq!(table.stream_records().await, records + 3);
}

#[tokio::test]
async fn a_transaction_naming_one_item_twice_is_refused_and_writes_nothing() {
    let table = Table::new(true).await;
    let item = owned(&table, "one", "o1", 1);
    table.put(&item).await;
    let records = table.stream_records().await;
    let err = table
        .client
        .transact_write_items()
        .transact_items(
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&table.name)
                        .set_item(Some(owned(&table, "other", "o1", 1)))
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .transact_items(
            TransactWriteItem::builder()
                .update(
                    Update::builder()
                        .table_name(&table.name)
                        .set_key(Some(table.key("one", "a")))
                        .update_expression("SET n = :two")
                        .expression_attribute_values(":two", n(2))
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .transact_items(
            TransactWriteItem::builder()
                .condition_check(
                    ConditionCheck::builder()
                        .table_name(&table.name)
                        .set_key(Some(table.key("one", "a")))
                        .condition_expression("attribute_exists(pk)")
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.into_service_error().code(), Some("ValidationException"));
    assert_eq!(table.get("one", "a").await, Some(item));
    assert_eq!(table.get("other", "a").await, None);
    assert_eq!(table.stream_records().await, records);
}

#[tokio::test]
async fn of_conflicting_transactions_on_one_version_exactly_one_commits() {
    let table = Table::new(true).await;
    let mut counter = table.key("counter", "a");
    counter.insert("version".into(), n(0));
    table.put(&counter).await;
    let claims = 12;
    let attempts = (0..claims).map(|i| {
        let client = table.client.clone();
        let name = table.name.clone();
        let counter_key = table.key("counter", "a");
        let claim = owned(&table, &format!("claim{i}"), "o1", i);
        tokio::spawn(async move {
            client
                .transact_write_items()
                .transact_items(
                    TransactWriteItem::builder()
                        .update(
                            Update::builder()
                                .table_name(&name)
                                .set_key(Some(counter_key))
                                .update_expression("SET version = version + :one")
                                .condition_expression("version = :seen")
                                .expression_attribute_values(":one", n(1))
                                .expression_attribute_values(":seen", n(0))
                                .build()
                                .unwrap(),
                        )
                        .build(),
                )
                .transact_items(
                    TransactWriteItem::builder()
                        .put(
                            Put::builder()
                                .table_name(&name)
                                .set_item(Some(claim))
                                .build()
                                .unwrap(),
                        )
                        .build(),
                )
                .send()
                .await
                .map_err(cancellation_codes)
        })
    });
    let outcomes = futures::future::join_all(attempts).await;
    let mut committed = Vec::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome.unwrap() {
            Ok(_) => committed.push(i),
            Err(codes) => {
                assert_eq!(
                    codes,
                    vec![Some("ConditionalCheckFailed".to_string()), None]
                );
            }
        }
    }
    assert_eq!(committed.len(), 1, "{committed:?}");
    let counter = table.get("counter", "a").await.unwrap();
    assert_eq!(counter.get("version"), Some(&n(1)));
    for i in 0..claims as usize {
        let present = table.get(&format!("claim{i}"), "a").await.is_some();
        assert_eq!(present, committed == [i], "claim{i}");
    }
}
