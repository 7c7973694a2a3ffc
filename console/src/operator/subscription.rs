//! A subscription's Integration history: its state and counts in words, its endpoint health
//! (with the 24-hour chart), its deliveries (filterable), its audit history, and the links to
//! replay a window or resume it.

use super::access::Op;
use super::audit::audit_table;
use super::nav::{nav, scope};
use crate::health::health_panel;
use crate::names::{answers_table, filter_text, retry_policy_text, Names};
use crate::page::{badge, encode, error_page, html_response, shell, when_text};
use crate::views;
use crate::Params;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use shared::api::operator::audit::AuditView;
use shared::api::operator::subscriptions;
use shared::api::state::ApiState;
use shared::api::v1::subscriptions::SubscriptionView;
use shared::domain::lifecycle::Status;
use shared::domain::subscription::MAX_CONSECUTIVE_DEAD;
use shared::operations::endpoint_health::endpoint_health;
use shared::operations::recovery::audit;
use shared::store::audit::AuditScope;
use std::sync::Arc;

type S = State<Arc<ApiState>>;

pub(super) async fn integration_history(
    op: Op,
    State(state): S,
    Path((a, s)): Path<(String, String)>,
    Query(p): Query<Params>,
) -> Response {
    let nav = nav(Some(&a), "nav-account");
    let ctx = &op.ctx;
    let ids = subscriptions::subscription_path(&a, &s);
    let (account_id, subscription_id) = match ids {
        Ok(ids) => ids,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let sc = scope(&account_id);
    let ops = state.ops();
    let sub = match ops.subscription(&account_id, &subscription_id).await {
        Ok(sub) => SubscriptionView::from(&sub),
        Err(e) => return error_page(ctx, &nav, &e.into()),
    };
    let (deliveries, refused) =
        views::subscription_deliveries(&state, ctx, &sc, &subscription_id, &p).await;
    let audit = audit::list(
        &ops,
        AuditScope::Subscription {
            account_id: &account_id,
            subscription_id: &subscription_id,
        },
        50,
        None,
    )
    .await;
    let audit: Vec<AuditView> = match audit {
        Ok((records, _)) => records.iter().map(AuditView::from).collect(),
        Err(e) => return error_page(ctx, &nav, &e.into()),
    };
    let names = match Names::load(&state, &account_id).await {
        Ok(n) => n,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let label = names
        .subscription(&sub.id)
        .unwrap_or("Subscription")
        .to_owned();
    let health = match endpoint_health(&ops, &account_id, &subscription_id, ctx.now).await {
        Ok(h) => h,
        Err(e) => return error_page(ctx, &nav, &e.into()),
    };
    let base = format!("{}/subscriptions/{}", sc.base, encode(&subscription_id));
    let done = p.get("done").filter(|v| !v.trim().is_empty());
    let body = html! {
        main id="main" {
            h1 { "Integration history: " (label) " " span class="id mono" { (sub.id) } }
            @if let Some(d) = done { p class="notice" role="status" data-testid="notice" { "Done: " (d) "." } }
            section class="panel" {
                dl class="facts" {
                    dt { "Status" } dd data-testid="subscription-status" { (badge(sub.status.as_str())) }
                    dt { "Account" } dd { a href=(ctx.url(&sc.base)) { (names.account_name.as_deref().unwrap_or(account_id.as_str())) } }
                    dt { "Integration" } dd { (names.integration_markup(&sub.integration_id)) }
                    dt { "Record types" } dd { (sub.record_types.join(", ")) }
                    dt { "Filter" } dd data-testid="filter-text" { (filter_text(&sub.filter)) }
                    dt { "Fields" } dd { (sub.fields.join(", ")) }
                    dt { "Retry policy" } dd data-testid="retry-policy" { (retry_policy_text(&sub.retry_policy)) }
                    dt { "Dead in a row" } dd { (sub.consecutive_dead) " / " (MAX_CONSECUTIVE_DEAD) " (pauses at " (MAX_CONSECUTIVE_DEAD) ")" }
                    @if let Some(t) = &sub.paused_at { dt { "Paused" } dd { (when_text(Some(t))) } }
                }
                (answers_table(&sub))
                div class="actions" {
                    a class="button" data-testid="replay-link" href=(ctx.url(&format!("{base}/replay"))) { "Replay a window…" }
                    @if sub.status.may_be_resumed() {
                        a class="button" data-testid="resume-link" href=(ctx.url(&format!("{base}/resume"))) { "Resume…" }
                    }
                    a class="button secondary" href=(ctx.url(&format!("/console/op/replays?account={}", encode(&account_id)))) { "Replay jobs" }
                }
            }
            (health_panel(&health))
            h2 { "Deliveries" }
            (deliveries)
            h2 { "Audit history" }
            (audit_table(&audit))
        }
    };
    let status = refused
        .as_ref()
        .map(|e| e.status())
        .unwrap_or(StatusCode::OK);
    html_response(
        status,
        shell(Some((ctx, &nav)), "Integration history", body),
    )
}
