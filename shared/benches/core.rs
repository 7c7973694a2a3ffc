//! Micro-benchmarks of the hot pure paths: change-time filtering and projection for a stream batch
//! of 100 changes against 1, 10 and 100 subscriptions, lifecycle checks, webhook signing, and the
//! dispatcher's parse of a full stream batch (as a JSON tree then records, or once).
//! `cargo bench -p shared --bench core` (the figures go into BENCHMARKS.md).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::{json, Map, Value};
use shared::domain::change::Change;
use shared::domain::filter::Filter;
use shared::domain::integration_delivery::{DeliveryStatus, DeliveryTrigger, DELIVERY_LIFECYCLE};
use shared::domain::projection::{delivery_payload, PreparedChange, Projection};
use shared::domain::signing::{sign, SigningSecret};
use shared::domain::time::Timestamp;
use std::hint::black_box;

fn change(i: usize) -> Change {
    let record: Map<String, Value> = json!({
        "sku": format!("SKU-{i}"),
        "name": "Espresso cup",
        "price": (i % 40) as f64 + 0.5,
        "cost": 1.25,
        "status": if i % 3 == 0 { "active" } else { "draft" },
        "supplier": {"name": "Pottery Ltd", "contact": "buyer@example.com"},
        "stock": {"W1": i % 7, "W2": 0}
    })
    .as_object()
    .cloned()
    .unwrap();
    Change {
        account_id: "acct".parse().unwrap(),
        change_id: format!("01JDX{i:021}").parse().unwrap(),
        record_type: "catalog_item".into(),
        record_id: format!("SKU-{i}"),
        event_code: if i % 2 == 0 {
            "catalog_item.updated"
        } else {
            "catalog_item.created"
        }
        .into(),
        warehouse: Some(if i % 4 == 0 { "W2" } else { "W1" }.into()),
        occurred_at: Timestamp(1_796_025_600_000 + i as i64),
        changed_fields: vec!["price".into(), "stock.W1".into()],
        record,
        trace_id: None,
    }
}

/// A realistic filter: event codes, a warehouse exclusion, a price bound, a changed field.
fn filter(k: usize) -> Filter {
    Filter::parse(&json!({"all": [
        {"field": "event_code", "in": ["catalog_item.updated", "catalog_item.created"]},
        {"not": {"field": "warehouse", "eq": format!("W{}", k % 3)}},
        {"any": [{"field": "record.price", "gt": (k % 30) as f64}, {"changed": "stock"}]},
        {"field": "record.status", "ne": "archived"}
    ]}))
    .unwrap()
}

fn filter_and_project(c: &mut Criterion) {
    let changes: Vec<Change> = (0..100).map(change).collect();
    let mut group = c.benchmark_group("filter_and_project_batch_of_100");
    for subs in [1usize, 10, 100] {
        let compiled: Vec<(Filter, Projection)> = (0..subs)
            .map(|k| {
                (
                    filter(k),
                    Projection::new(["sku", "name", "price", "stock.W1"]).unwrap(),
                )
            })
            .collect();
        group.throughput(Throughput::Elements((changes.len() * subs) as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(subs),
            &compiled,
            |b, compiled| {
                b.iter(|| {
                    let mut delivered = 0usize;
                    for change in &changes {
                        // As ingest does: the change is prepared once for all its subscriptions.
                        let prepared = PreparedChange::new(change);
                        for (filter, projection) in compiled {
                            if filter.matches(prepared.change()) {
                                delivered += prepared.payload_json(projection).len();
                            }
                        }
                    }
                    black_box(delivered)
                })
            },
        );
    }
    group.finish();
}

fn filter_only(c: &mut Criterion) {
    let changes: Vec<Change> = (0..100).map(change).collect();
    let f = filter(1);
    c.bench_function("filter_match_batch_of_100", |b| {
        b.iter(|| changes.iter().filter(|ch| f.matches(ch)).count())
    });
}

fn transitions(c: &mut Criterion) {
    c.bench_function("lifecycle_check", |b| {
        b.iter(|| {
            DELIVERY_LIFECYCLE.check(
                black_box(DeliveryStatus::Retrying),
                black_box(DeliveryTrigger::EndDeliveryRetries),
                black_box(DeliveryStatus::Dead),
            )
        })
    });
    c.bench_function("lifecycle_condition", |b| {
        b.iter(|| {
            DELIVERY_LIFECYCLE.condition(
                black_box(DeliveryTrigger::RestartEligibleDeliveryWork),
                black_box(DeliveryStatus::Pending),
            )
        })
    });
}

fn signing(c: &mut Criterion) {
    let secret = SigningSecret::from_bytes(&[7u8; 32]).unwrap();
    let body = delivery_payload(
        &change(1),
        &Projection::new(["sku", "name", "price"]).unwrap(),
    )
    .to_string();
    c.bench_function("standard_webhooks_sign", |b| {
        b.iter(|| {
            sign(
                &secret,
                black_box("dlv_01JDX_01JDY"),
                1_796_025_600,
                body.as_bytes(),
            )
        })
    });
}

/// A full dispatcher batch: the sample delivery-stream record, 100 times.
fn dispatcher_batch() -> String {
    let sample: Value =
        serde_json::from_str(include_str!("../../events/dispatch-delivery-stream.json")).unwrap();
    json!({"Records": vec![sample["Records"][0].clone(); 100]}).to_string()
}

fn dispatcher_payload(c: &mut Criterion) {
    use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
    use shared::delivery::dispatch::Invocation;
    let batch = dispatcher_batch();
    let mut group = c.benchmark_group("dispatcher_payload_100_records");
    group.throughput(Throughput::Elements(100));
    // As the function parsed it before: a JSON tree, then the records from it.
    group.bench_function("json_tree_then_records", |b| {
        b.iter(|| {
            let tree: Value = serde_json::from_str(black_box(&batch)).unwrap();
            black_box(serde_json::from_value::<DynamoDbEvent>(tree).unwrap())
        })
    });
    group.bench_function("once", |b| {
        b.iter(|| black_box(serde_json::from_str::<Invocation>(black_box(&batch)).unwrap()))
    });
    group.finish();
}

criterion_group!(
    benches,
    filter_and_project,
    filter_only,
    transitions,
    signing,
    dispatcher_payload
);
criterion_main!(benches);
