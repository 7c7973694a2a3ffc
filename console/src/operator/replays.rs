//! The replay job pages: an account's jobs, and one job's progress (polled while it runs).

use super::access::Op;
use super::nav::{account_param, account_picker, base, nav};
use crate::page::{badge, encode, error_page, html_response, pager, shell, when_text, Ctx};
use crate::views;
use crate::Params;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use shared::api::extract::path_id;
use shared::api::operator::replays::ReplayJobView;
use shared::api::problem::ApiError;
use shared::api::state::ApiState;
use shared::domain::lifecycle::Status;
use shared::ids::AccountId;
use shared::operations::recovery::replay;
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
    let ctx = &op.ctx;
    let ops = state.ops();
    let job = match (path_id(&a, "account"), path_id(&j, "replay job")) {
        (Ok(a), Ok(j)) => replay::load_job(&ops, &a, &j).await.map_err(ApiError::from),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    let job = match job {
        Ok(job) => ReplayJobView::new(&job, ctx.now),
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let live = job.status.is_under_way();
    let here = ctx.url(&format!("{}/replays/{}", base(&a), encode(&job.id)));
    let c = &job.counts;
    let done = (c.restarted + c.already_pending + c.skipped_filter + c.conflicts).min(c.in_window);
    let tenth = (done * 10)
        .checked_div(c.in_window)
        .map_or(if live { 0 } else { 10 }, |t| t.min(10));
    let fragment = html! {
        div id="replay-job" data-live=(live) hx-get=[live.then(|| here.clone())] hx-trigger=[live.then_some(views::POLL)] hx-swap=[live.then_some("outerHTML")] {
            section class="panel" {
                dl class="facts" {
                    dt { "Status" } dd data-testid="replay-status" { (badge(job.status.as_str())) @if live && !job.in_progress { " " span class="muted" { "stopped; resume it through the API" } } }
                    dt { "Progress" } dd { div class="meter" role="img" aria-label=(format!("{done} of {} walked", c.in_window)) { span class=(format!("m{}", tenth * 10)) {} } }
                    dt { "Counts" } dd data-testid="replay-counts" { (c.restarted) " restarted, " (c.already_pending) " already pending, " (c.skipped_filter) " filtered out, " (c.conflicts) " conflicts, of " (c.in_window) " in the window" }
                    dt { "Window" } dd { (when_text(Some(&job.from))) " – " (when_text(Some(&job.to))) }
                    dt { "Subscription" } dd { a class="mono" href=(ctx.url(&format!("{}/subscriptions/{}", base(&a), encode(&job.subscription_id)))) { (job.subscription_id) } }
                    dt { "Requested by" } dd { (job.requested_by) }
                    dt { "Reason" } dd { (job.reason) }
                    dt { "Chunks / runs" } dd { (job.chunks) " / " (job.runs) }
                    dt { "Created" } dd { (when_text(Some(&job.created_at))) }
                    dt { "Completed" } dd { (when_text(job.completed_at.as_deref())) }
                }
            }
        }
    };
    if ctx.htmx {
        return html_response(StatusCode::OK, fragment);
    }
    let body =
        html! { main id="main" { h1 { "Replay job " span class="mono" { (job.id) } } (fragment) } };
    html_response(StatusCode::OK, shell(Some((ctx, &nav)), "Replay job", body))
}
