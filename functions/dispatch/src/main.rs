//! The dispatcher: the delivery table's stream (new pending push work) and the one-minute sweep of
//! the `due` index, both publishing to the delivery queue.

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;
use shared::dispatch::Dispatcher;
use shared::runtime::Context;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let ctx = Context::from_env().await?;
    let dispatcher = &Dispatcher::new(ctx.clients, ctx.config, ctx.clock);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        // The schedule sends `{"sweep": "due"}`; the stream sends `{"Records": [...]}`.
        if event.payload.get("Records").is_some() {
            let records: Event = serde_json::from_value(event.payload)?;
            let response: DynamoDbEventResponse = dispatcher.handle_stream(records).await;
            Ok::<Value, lambda_runtime::Error>(serde_json::to_value(response)?)
        } else {
            let report = dispatcher.sweep().await?;
            Ok(serde_json::json!({ "published": report.published, "failed": report.failed }))
        }
    }))
    .await
}
