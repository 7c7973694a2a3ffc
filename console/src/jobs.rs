//! A replay job's page, for both audiences: its progress (polled while it runs), its counts,
//! its window, who asked for it and why. An operator reaches it under
//! `/console/op/accounts/{a}/replays/{j}`, an administrator under `/console/acct/replays/{j}`
//! (their own account's jobs only: another account's job is not found).

use super::page::{badge, encode, error_page, html_response, shell, when_text, Ctx, Nav};
use super::views;
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use shared::api::operator::replays::ReplayJobView;
use shared::domain::lifecycle::Status;
use shared::domain::replay::JobKind;
use shared::ids::AccountId;
use shared::operations::recovery::replay;
use shared::web::extract::path_id;
use shared::web::problem::ApiError;
use shared::web::state::ApiState;

/// The page of `account_id`'s replay job `j` (its path segment as given); `base` is the prefix
/// of the account's pages for this audience.
pub async fn replay_job_page(
    state: &ApiState,
    ctx: &Ctx,
    nav: &Nav,
    account_id: &AccountId,
    base: &str,
    j: &str,
) -> Response {
    let ops = state.ops();
    let job = match path_id(j, "replay job") {
        Ok(j) => replay::load_job(&ops, account_id, &j)
            .await
            .map_err(ApiError::from),
        Err(e) => Err(e),
    };
    let (job, kind, statuses) = match job {
        Ok(job) => (
            ReplayJobView::new(&job, ctx.now),
            job.job_kind,
            job.statuses.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        ),
        Err(e) => return error_page(ctx, nav, &e),
    };
    let recovery = kind == JobKind::Recovery;
    let title = if recovery {
        "Recovery job"
    } else {
        "Replay job"
    };
    let names = super::names::Names::load(state, account_id)
        .await
        .unwrap_or_default();
    let live = job.status.is_under_way();
    let here = ctx.url(&format!("{base}/replays/{}", encode(&job.id)));
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
                    dt { "Kind" } dd data-testid="job-kind" { (kind.as_str()) @if recovery { " of " (statuses.join(", ")) " deliveries" } }
                    @if recovery { dt { "Since" } dd { (when_text(Some(&job.from))) } }
                    @else { dt { "Window" } dd { (when_text(Some(&job.from))) " – " (when_text(Some(&job.to))) } }
                    dt { "Subscription" } dd { a href=(ctx.url(&format!("{base}/subscriptions/{}", encode(&job.subscription_id)))) { (names.subscription_markup(&job.subscription_id)) } }
                    dt { "Requested by" } dd data-testid="replay-by" { (job.requested_by) }
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
    let body = html! {
        main id="main" {
            h1 { (title) " " span class="id mono" { (job.id) } }
            (fragment)
        }
    };
    html_response(StatusCode::OK, shell(Some((ctx, nav)), title, body))
}
