//! Each function's real binary, run as Lambda runs it: a child process with the environment the
//! template gives it on a fresh stack, taking one of the `events/` samples from a Runtime API on
//! loopback (with a real deadline) and answering what the in-process handlers answer to it
//! (`sample_events`). After its answer each process must ask for the next event, alive. The
//! three delivery functions also run as the bench runs them: a pipeline's processes.
//!
//! The binaries come from `target/debug` (scripts/test.sh builds them before the tests).

use crate::sample_events::sample_configuration;
use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use local::function_process::{binary_path, RunningFunction, BUILD_COMMAND};
use local::runtime_api::Answer;
use local::testkit::{id, sample, World};
use serde_json::{json, Value};
use shared::domain::integration_delivery::DeliveryStatus;

/// The binary of the template's function `logical_id`, started on `w`'s stack.
async fn start(w: &World, logical_id: &str) -> RunningFunction {
    RunningFunction::start(&w.pipeline.stack, logical_id)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// The function's answer to the sample `file`, which must be a response (not an error), after
/// which the process must still run and ask for its next event.
async fn answer(function: &mut RunningFunction, file: &str) -> Value {
    let payload: Value = serde_json::from_str(&sample(file)).unwrap();
    let answer = function
        .invoke(&payload)
        .await
        .unwrap_or_else(|e| panic!("{file}: {e:#}"));
    let Answer::Response(document) = answer else {
        panic!(
            "{} answered {file} with {answer:?}; its output:\n{}",
            function.spec.binary,
            function.log()
        );
    };
    function
        .asks_for_next_event()
        .await
        .unwrap_or_else(|e| panic!("after {file}: {e:#}"));
    assert!(function.is_running(), "{} ended", function.spec.binary);
    document
}

/// A partial-batch response without failures: every record of the batch is done.
fn assert_no_failures(response: &Value) {
    assert_eq!(response["batchItemFailures"], json!([]), "{response}");
}

/// Ends the process as Lambda ends an idle container.
fn stop(function: RunningFunction) {
    let binary = function.spec.binary.clone();
    function
        .stop()
        .unwrap_or_else(|e| panic!("stopping {binary}: {e}"));
}

/// The sample configuration with the change sample ingested in-process: the pending delivery
/// the dispatcher's and the worker's samples name.
async fn sample_delivery_recorded(w: &World) {
    sample_configuration(w).await;
    let change: DynamoDbEvent = serde_json::from_str(&sample("ingest-change-stream.json")).unwrap();
    assert!(w
        .pipeline
        .ingest
        .handle(change)
        .await
        .batch_item_failures
        .is_empty());
}

async fn sample_delivery_status(w: &World) -> Option<DeliveryStatus> {
    w.pipeline
        .delivery(
            &id("acct-sample"),
            &id("01JDX0SAMP1E0000000000CHG1"),
            &id("01JDX0SAMPLE0000000000SUB1"),
        )
        .await
        .map(|d| d.status)
}

#[tokio::test]
async fn the_ingest_binary_answers_the_change_stream_sample_without_failures_and_records_its_delivery(
) {
    let w = World::new().await;
    sample_configuration(&w).await;
    let mut ingest = start(&w, "IngestFunction").await;
    assert_no_failures(&answer(&mut ingest, "ingest-change-stream.json").await);
    assert_eq!(
        sample_delivery_status(&w).await,
        Some(DeliveryStatus::Pending)
    );
    stop(ingest);
}

#[tokio::test]
async fn the_dispatch_binary_answers_the_sweep_with_its_report_and_publishes_the_stream_samples_work(
) {
    let w = World::new().await;
    let mut dispatch = start(&w, "DispatchFunction").await;
    // Nothing is due on a fresh stack.
    assert_eq!(
        answer(&mut dispatch, "dispatch-sweep.json").await,
        json!({"published": 0, "failed": 0})
    );
    sample_delivery_recorded(&w).await;
    assert_no_failures(&answer(&mut dispatch, "dispatch-delivery-stream.json").await);
    let published = w
        .pipeline
        .stack
        .queue("DeliveryQueue")
        .receive()
        .await
        .unwrap();
    assert_eq!(published.len(), 1, "the sample's work is published");
    stop(dispatch);
}

#[tokio::test]
async fn the_deliver_binary_delivers_the_queue_samples_work_before_its_deadline() {
    let w = World::new().await;
    sample_delivery_recorded(&w).await;
    let mut deliver = start(&w, "DeliverFunction").await;
    // The worker starts an attempt only if it fits before the deadline: under a deadline already
    // past, it would hand the message back as a failure.
    assert_no_failures(&answer(&mut deliver, "deliver-sqs.json").await);
    assert_eq!(w.receiver.count(), 1, "the receiver got the delivery");
    assert_eq!(
        sample_delivery_status(&w).await,
        Some(DeliveryStatus::Delivered)
    );
    stop(deliver);
}

#[tokio::test]
async fn the_notify_binary_publishes_the_notice_stream_samples_work_and_drops_the_queue_samples_unknown_delivery(
) {
    let w = World::new().await;
    let mut notify = start(&w, "NotifyFunction").await;
    // A requested notice that does not exist here (nothing to fan out) and an inserted work row,
    // which is published.
    assert_no_failures(&answer(&mut notify, "notify-notice-stream.json").await);
    let (work, _) = w.notify.receive_work().await;
    assert_eq!(work.dispatch_id, "01JDX0SAMPLE0000000000DSP1");
    // Work for a delivery that does not exist is dropped, not retried.
    assert_no_failures(&answer(&mut notify, "notify-sqs.json").await);
    stop(notify);
}

#[tokio::test]
async fn the_reconcile_binary_answers_the_nightly_sample_with_the_report_of_a_whole_run() {
    let w = World::new().await;
    let mut reconcile = start(&w, "ReconcileFunction").await;
    let report = answer(&mut reconcile, "reconcile-nightly.json").await;
    assert_eq!(report["run"], "nightly", "{report}");
    assert_eq!(report["errors"], json!([]), "{report}");
    // Every step ran: the dispatch sweep too, and the roll-up walk reached the end of the index.
    assert_eq!(report["dispatch"]["ran"], true, "{report}");
    assert_eq!(report["more"], false, "{report}");
    stop(reconcile);
}

#[tokio::test]
async fn the_api_binary_answers_the_operator_sample_with_the_account_it_names() {
    let w = World::new().await;
    w.account().id("01hx").named("Sample").admins(&[]).await;
    let mut api = start(&w, "ApiFunction").await;
    // The gateway's JWT authorizer named the operator with the template's operator scope.
    let response = answer(&mut api, "api-operator-get-account.json").await;
    assert_eq!(response["statusCode"], 200, "{response}");
    assert_eq!(response["isBase64Encoded"], false, "{response}");
    let body: Value = serde_json::from_str(response["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["id"], "01hx", "{body}");
    assert_eq!(body["name"], "Sample", "{body}");
    stop(api);
}

#[test]
fn a_missing_function_binary_is_an_error_that_says_how_to_build_it() {
    let e = binary_path("no-such-function").unwrap_err().to_string();
    assert!(e.contains("no-such-function"), "{e}");
    assert!(e.contains(BUILD_COMMAND), "{e}");
}

/// The bench's pipeline in processes (`Pipeline::in_processes`): the three delivery functions'
/// binaries, fed the mappings' batches, deliver every change, and what their processes spent on
/// it is counted.
#[tokio::test]
async fn the_delivery_binaries_as_a_pipelines_processes_deliver_every_change_and_their_cpu_is_counted(
) {
    use local::fixtures::catalog_change;
    use local::pipeline::Pipeline;
    use local::receiver::Receiver;
    const CHANGES: usize = 10;
    let dir = binary_path("deliver").unwrap();
    let p = Pipeline::in_processes(dir.parent().unwrap())
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let receiver = Receiver::start().await;
    let f = p.fixtures();
    let account = f.account(&[]).await.unwrap();
    f.catalog_webhook(&account.account_id, receiver.url("/processes"))
        .await
        .unwrap();
    for i in 0..CHANGES {
        p.write_change(&catalog_change(&account.account_id, p.now(), i as f64))
            .await
            .unwrap();
    }
    let processes = p.processes.as_ref().unwrap();
    let before = processes.cpu().await.unwrap();
    for _ in 0..10 {
        p.pump().await.unwrap();
        if receiver.count() >= CHANGES {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let after = processes.cpu().await.unwrap();
    assert_eq!(receiver.count(), CHANGES, "every change arrived, once");
    let mut prices: Vec<f64> = receiver
        .received()
        .iter()
        .map(|r| r.json()["data"]["price"].as_f64().unwrap())
        .collect();
    prices.sort_by(f64::total_cmp);
    assert_eq!(prices, (0..CHANGES).map(|i| i as f64).collect::<Vec<_>>());
    for ((function, was), (_, is)) in before.iter().zip(&after) {
        assert!(is >= was, "{function}'s CPU time went back");
    }
    let spent: std::time::Duration = after.iter().map(|(_, d)| *d).sum::<std::time::Duration>()
        - before.iter().map(|(_, d)| *d).sum::<std::time::Duration>();
    assert!(!spent.is_zero(), "the processes' work is counted");
}
