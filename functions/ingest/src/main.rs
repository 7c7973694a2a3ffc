//! Stream ingest: source changes (DynamoDB stream of the changes table) → delivery records.

use aws_lambda_events::event::dynamodb::Event;
use lambda_runtime::{service_fn, LambdaEvent};
use shared::delivery::ingest::Ingest;
use shared::runtime::Context;

#[global_allocator]
static ALLOC: shared::alloc::Allocator = shared::alloc::Allocator;

// One thread: a container runs one invocation at a time, and a batch's work is concurrent futures
// on it; a multi-threaded runtime spent more CPU per delivery, its workers waking each other
// (BENCHMARKS.md, "CPU per delivery of the functions").
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    let ctx = Context::from_env().await?;
    let ingest = &Ingest::new(ctx.clients, ctx.config, ctx.clock);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        Ok::<_, lambda_runtime::Error>(ingest.handle(event.payload).await)
    }))
    .await
}
