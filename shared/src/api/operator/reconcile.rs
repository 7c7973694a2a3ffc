//! Reconciliation on demand (operator identity):
//!
//! * `POST /operator/reconcile` `{run?: "nightly" | "rollup", max_events?: 1..=100000}` → 200 with
//!   the run's report: the same service the nightly function runs
//!   ([`crate::reconcile::Reconciler`]), bounded to [`ON_DEMAND_TIME`] so it fits the API's
//!   timeout. `more: true` means the roll-up backlog was not finished: call again (each call
//!   resumes where the work is). Faults of individual steps are in `errors`; the counts of the
//!   steps that ran are still reported.

use crate::notify::settle::reconcile_settler;
use crate::reconcile::{Budget, ReconcileReport, Reconciler, RunKind, DEFAULT_MAX_EVENTS};
use crate::web::auth::Operator;
use crate::web::extract::{Fields, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use std::sync::Arc;
use std::time::Duration;

/// Wall-clock time an on-demand run may take (the API function's timeout is 20 s; the margin
/// the budget keeps back is on top of this).
pub(crate) const ON_DEMAND_TIME: Duration = Duration::from_secs(10);
/// Largest `max_events` accepted.
pub(crate) const MAX_EVENTS_LIMIT: usize = 100_000;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new().route("/operator/reconcile", post(run))
}

fn read_run(f: &mut Fields) -> Option<RunKind> {
    match f.optional::<String>("run").as_deref() {
        None | Some("nightly") => Some(RunKind::Nightly),
        Some("rollup") => Some(RunKind::Rollup),
        Some(_) => {
            f.error("run", "must be nightly or rollup");
            None
        }
    }
}

async fn run(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    JsonBody(mut f): JsonBody,
) -> Result<Json<ReconcileReport>, ApiError> {
    let run = read_run(&mut f);
    let max_events: Option<usize> = f.optional("max_events");
    if max_events.is_some_and(|n| !(1..=MAX_EVENTS_LIMIT).contains(&n)) {
        f.error(
            "max_events",
            format!("must be between 1 and {MAX_EVENTS_LIMIT}"),
        );
    }
    f.finish()?;
    let run = run.unwrap_or_default();
    let settler = reconcile_settler(&state.clients, &state.config, &state.clock);
    let reconciler = Reconciler::new(
        state.clients.clone(),
        state.config.clone(),
        state.clock.clone(),
        Some(Arc::new(settler)),
    );
    let budget = Budget {
        max_events: max_events.unwrap_or(DEFAULT_MAX_EVENTS),
        deadline: std::time::Instant::now() + ON_DEMAND_TIME,
    };
    let report = reconciler.run(run, budget).await;
    tracing::info!(operator = %operator.id, run = %run, more = report.more, "reconciliation requested");
    report.log();
    Ok(Json(report))
}
