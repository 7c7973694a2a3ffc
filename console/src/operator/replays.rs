//! The replay job pages: an account's jobs, and one job's progress (polled while it runs).

use super::access::Op;
use super::nav::{account_param, account_picker, base, nav};
use crate::page::{badge, encode, error_page, html_response, pager, shell, when_text, Ctx};
use crate::Params;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use shared::api::operator::replays::ReplayJobView;
use shared::domain::lifecycle::Status;
use shared::ids::AccountId;
use shared::operations::recovery::replay;
use shared::web::extract::path_id;
use shared::web::state::ApiState;
use std::sync::Arc;

type S = State<Arc<ApiState>>;

fn replay_row(ctx: &Ctx, j: &ReplayJobView) -> Markup {
    let state = if j.status.is_under_way() && !j.in_progress {
        "stopped"
    } else {
        j.status.as_str()
    };
    html! {
        tr data-testid="replay-row" data-job-id=(j.id) {
            td data-label="Job" { a class="mono" href=(ctx.url(&format!("/console/op/accounts/{}/replays/{}", encode(&j.account_id), encode(&j.id)))) { (j.id) } }
            td data-label="Status" data-testid="replay-status" { (badge(state)) }
            td data-label="Window" { (when_text(Some(&j.from))) " – " (when_text(Some(&j.to))) }
            td data-label="Restarted" { (j.counts.restarted) " of " (j.counts.in_window) }
            td data-label="By" { (j.requested_by) }
            td data-label="Reason" { (j.reason) }
            td data-label="Created" { (when_text(Some(&j.created_at))) }
        }
    }
}

pub(super) async fn replay_list(op: Op, State(state): S, Query(p): Query<Params>) -> Response {
    let account = account_param(&p);
    let nav = nav(account.as_deref(), "nav-replays");
    let ctx = &op.ctx;
    let Some(account) = account else {
        return account_picker(ctx, &nav, "Replays", "/console/op/replays");
    };
    let account = match path_id::<AccountId>(&account, "account") {
        Ok(a) => a,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let ops = state.ops();
    let cursor = p.get("cursor").map(String::as_str);
    let (jobs, next) = match replay::list_jobs(&ops, &account, None, 50, cursor).await {
        Ok(r) => r,
        Err(e) => return error_page(ctx, &nav, &e.into()),
    };
    let views: Vec<ReplayJobView> = jobs
        .iter()
        .map(|j| ReplayJobView::new(j, ctx.now))
        .collect();
    let body = html! {
        main id="main" {
            h1 { "Replay jobs" }
            div class="table-wrap" {
                table id="replays" class="stack" {
                    thead { tr { th { "Job" } th { "Status" } th { "Window" } th { "Restarted" } th { "By" } th { "Reason" } th { "Created" } } }
                    tbody {
                        @for j in &views { (replay_row(ctx, j)) }
                        @if views.is_empty() { tr { td colspan="7" class="muted" { "No replay jobs." } } }
                    }
                }
            }
            (pager(ctx, &format!("/console/op/replays?account={}", encode(&account)), next.as_deref()))
        }
    };
    html_response(StatusCode::OK, shell(Some((ctx, &nav)), "Replays", body))
}

pub(super) async fn replay_job(
    op: Op,
    State(state): S,
    Path((a, j)): Path<(String, String)>,
) -> Response {
    let nav = nav(Some(&a), "nav-replays");
    let account = match path_id::<AccountId>(&a, "account") {
        Ok(a) => a,
        Err(e) => return error_page(&op.ctx, &nav, &e),
    };
    crate::jobs::replay_job_page(&state, &op.ctx, &nav, &account, &base(&a), &j).await
}
