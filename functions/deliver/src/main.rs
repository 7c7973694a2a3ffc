//! The delivery worker: delivery queue messages (a delivery each, or up to ten of an account's new
//! deliveries) → one claimed, classified attempt per delivery.

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{service_fn, LambdaEvent};
use shared::delivery::worker::DeliveryWorker;
use shared::runtime::{deadline_of, Context};

#[global_allocator]
static ALLOC: shared::alloc::Allocator = shared::alloc::Allocator;

// One thread: a container runs one invocation at a time, and a batch's work is concurrent futures
// on it; a multi-threaded runtime spent more CPU per delivery, its workers waking each other
// (BENCHMARKS.md, "CPU per delivery of the functions").
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    let ctx = Context::from_env().await?;
    let worker = &DeliveryWorker::new(ctx.clients, ctx.config, ctx.clock);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        // Attempts that could not finish before the invocation's deadline are not started: each
        // such delivery goes back to the queue as a copy of its own.
        let deadline = deadline_of(&event.context);
        Ok::<_, lambda_runtime::Error>(worker.handle_until(event.payload, Some(deadline)).await)
    }))
    .await
}
