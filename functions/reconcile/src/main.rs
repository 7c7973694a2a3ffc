//! The reconciliation Lambda: the nightly schedule (`{"run":"nightly"}`), the frequent roll-up
//! schedule (`{"run":"rollup"}`) and direct invocations (`{"max_events": n}` bounds a run;
//! any other payload is refused). The
//! work is `shared::reconcile::Reconciler`, which the operator route runs too; this only wires it
//! up (with the notification pipeline's settling), bounds each run by the invocation's remaining
//! time, and reports.

use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;
use shared::notify::settle::reconcile_settler;
use shared::reconcile::{emf_document, Budget, ReconcileRequest, Reconciler, DEFAULT_MAX_EVENTS};
use shared::runtime::Context;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

#[global_allocator]
static ALLOC: shared::alloc::Allocator = shared::alloc::Allocator;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let ctx = Context::from_env().await?;
    let (stage, namespace) = (
        ctx.config.stage.clone(),
        ctx.config.metrics_namespace.clone(),
    );
    let clock = ctx.clock.clone();
    let settler = Arc::new(reconcile_settler(&ctx.clients, &ctx.config, &ctx.clock));
    let reconciler = &Reconciler::new(ctx.clients, ctx.config, ctx.clock, Some(settler));
    let (stage, namespace, clock) = (&stage, &namespace, &clock);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        // A payload it does not understand is refused (the invocation fails), never a nightly run.
        let request =
            ReconcileRequest::from_payload(&event.payload).map_err(lambda_runtime::Error::from)?;
        let remaining = event
            .context
            .deadline()
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        let budget = Budget::within(remaining, request.max_events.unwrap_or(DEFAULT_MAX_EVENTS));
        let report = reconciler.run(request.run, budget).await;
        report.log();
        shared::metrics::write_line(&emf_document(&report, namespace, stage, clock.now()));
        if !report.ok() {
            // After reporting: the failed invocation shows in the function's Errors metric.
            return Err(lambda_runtime::Error::from(format!(
                "reconciliation had faults: {:?}",
                report.errors
            )));
        }
        Ok::<Value, lambda_runtime::Error>(serde_json::to_value(&report)?)
    }))
    .await
}
