//! The dispatcher: the delivery table's stream (new pending push work, up to ten of an account's
//! deliveries packed in one message) and the one-minute sweep of the `due` index (one delivery to
//! a message), both publishing to the delivery queue.

use lambda_runtime::{service_fn, LambdaEvent};
use shared::delivery::dispatch::{Dispatcher, Invocation};
use shared::metrics::StdoutLines;
use shared::runtime::Context;

#[global_allocator]
static ALLOC: shared::alloc::Allocator = shared::alloc::Allocator;

// One thread: a container runs one invocation at a time, and a batch's work is concurrent futures
// on it; a multi-threaded runtime spent more CPU per delivery, its workers waking each other
// (BENCHMARKS.md, "CPU per delivery of the functions").
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    let ctx = Context::from_env().await?;
    let dispatcher = &Dispatcher::new(ctx.clients, ctx.config, ctx.clock);
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<Invocation>| async move {
            // A delivery-stream batch, or the schedule's exact `{"sweep": "due"}`; anything else is
            // refused. A scheduled sweep writes its DispatcherSweepRuns EMF line to stdout.
            dispatcher
                .handle_invocation(event.payload, &StdoutLines)
                .await
                .map_err(lambda_runtime::Error::from)
        },
    ))
    .await
}
