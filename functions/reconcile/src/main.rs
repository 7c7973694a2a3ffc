//! The reconciliation Lambda: the nightly schedule (`{"run":"nightly"}`), the frequent roll-up
//! schedule (`{"run":"rollup"}`) and direct invocations (`{"max_events": n}` bounds a run). The
//! work is `shared::reconcile::Reconciler`, which the operator route runs too; this only wires it
//! up (with the notification pipeline's settling), bounds each run by the invocation's remaining
//! time, and reports.

use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;
use shared::notify::settle::reconcile_settler;
use shared::reconcile::{
    emf_document, write_emf, Budget, ReconcileRequest, Reconciler, DEFAULT_MAX_EVENTS,
};
use shared::runtime::Context;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let ctx = Context::from_env().await?;
    let stage = ctx.config.stage.clone();
    let clock = ctx.clock.clone();
    let settler = Arc::new(reconcile_settler(&ctx.clients, &ctx.config, &ctx.clock));
    let reconciler = &Reconciler::new(ctx.clients, ctx.config, ctx.clock, Some(settler));
    let (stage, clock) = (&stage, &clock);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let request = ReconcileRequest::from_payload(&event.payload);
        let remaining = event
            .context
            .deadline()
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        let budget = Budget::within(remaining, request.max_events.unwrap_or(DEFAULT_MAX_EVENTS));
        let report = reconciler.run(request.run, budget).await;
        report.log();
        write_emf(&emf_document(&report, stage, clock.now()));
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
