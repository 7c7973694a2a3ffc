//! The notification function: the notification queue (channel delivery worker) and the
//! notification table's stream (fan-out of requested notices, publishing of work rows).

use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;
use shared::notify::stream::NotificationStream;
use shared::notify::worker::NotificationWorker;
use shared::runtime::Context;

#[global_allocator]
static ALLOC: shared::alloc::Allocator = shared::alloc::Allocator;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let ctx = Context::from_env().await?;
    let stream =
        &NotificationStream::new(ctx.clients.clone(), ctx.config.clone(), ctx.clock.clone());
    let worker = &NotificationWorker::new(ctx.clients, ctx.config, ctx.clock);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let source = event
            .payload
            .pointer("/Records/0/eventSource")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if source == "aws:dynamodb" {
            let records: DynamoDbEvent = serde_json::from_value(event.payload)?;
            Ok::<Value, lambda_runtime::Error>(serde_json::to_value(stream.handle(records).await)?)
        } else {
            let records: SqsEvent = serde_json::from_value(event.payload)?;
            Ok(serde_json::to_value(worker.handle(records).await)?)
        }
    }))
    .await
}
