//! A subscription's Integration history: its state and counts in words, its endpoint health
//! (with the 24-hour chart), its deliveries (filterable), its audit history, and the links to
//! replay a window or resume it.

use super::access::Op;
use super::audit::audit_table;
use super::nav::{nav, scope};
use crate::health::health_panel;
use crate::names::{answers_table, filter_text, retry_policy_text};
use crate::page::{badge, encode, error_page, html_response, shell, when_text, Ctx};
use crate::views::{self, Scope, SubscriptionFacts};
use crate::Params;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use shared::domain::lifecycle::Status;
use shared::domain::subscription::MAX_CONSECUTIVE_DEAD;
use shared::ids::{AccountId, SubscriptionId};
use shared::operations::resource_ids::subscription_ids;
use shared::web::problem::ApiError;
use shared::web::state::ApiState;
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
    let h = match History::read(&state, ctx, &a, &s, &p).await {
        Ok(h) => h,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let base = format!("{}/subscriptions/{}", h.sc.base, encode(&h.subscription_id));
    let done = p.get("done").filter(|v| !v.trim().is_empty());
    let label = h
        .facts
        .names
        .subscription(&h.facts.sub.id)
        .unwrap_or("Subscription");
    let body = html! {
        main id="main" {
            h1 { "Integration history: " (label) " " span class="id mono" { (h.facts.sub.id) } }
            @if let Some(d) = done { p class="notice" role="status" data-testid="notice" { "Done: " (d) "." } }
            (subscription_panel(ctx, &h, &base))
            (health_panel(&h.facts.health))
            h2 { "Deliveries" }
            (h.deliveries)
            h2 { "Audit history" }
            (audit_table(&h.facts.audit))
        }
    };
    let status = h
        .refused
        .as_ref()
        .map(|e| e.status())
        .unwrap_or(StatusCode::OK);
    html_response(
        status,
        shell(Some((ctx, &nav)), "Integration history", body),
    )
}

/// What the Integration history shows: the subscription's facts and its deliveries (filtered by
/// the page's query, with the filter's refusal if any).
struct History {
    account_id: AccountId,
    subscription_id: SubscriptionId,
    sc: Scope,
    facts: SubscriptionFacts,
    deliveries: Markup,
    refused: Option<ApiError>,
}

impl History {
    async fn read(
        state: &ApiState,
        ctx: &Ctx,
        a: &str,
        s: &str,
        p: &Params,
    ) -> Result<History, ApiError> {
        let (account_id, subscription_id) = subscription_ids(a, s)?;
        let sc = scope(&account_id);
        let facts = SubscriptionFacts::read(state, ctx, &account_id, &subscription_id).await?;
        let (deliveries, refused) =
            views::subscription_deliveries(state, ctx, &sc, &subscription_id, p).await;
        Ok(History {
            account_id,
            subscription_id,
            sc,
            facts,
            deliveries,
            refused,
        })
    }
}

/// The subscription's facts in words, its answers, and the links to act on it.
fn subscription_panel(ctx: &Ctx, h: &History, base: &str) -> Markup {
    let (sub, names) = (&h.facts.sub, &h.facts.names);
    html! {
        section class="panel" {
            dl class="facts" {
                dt { "Status" } dd data-testid="subscription-status" { (badge(sub.status.as_str())) }
                dt { "Account" } dd { a href=(ctx.url(&h.sc.base)) { (names.account_name.as_deref().unwrap_or(h.account_id.as_str())) } }
                dt { "Integration" } dd { (names.integration_markup(&sub.integration_id)) }
                dt { "Record types" } dd { (sub.record_types.join(", ")) }
                dt { "Filter" } dd data-testid="filter-text" { (filter_text(&sub.filter)) }
                dt { "Fields" } dd { (sub.fields.join(", ")) }
                dt { "Retry policy" } dd data-testid="retry-policy" { (retry_policy_text(&sub.retry_policy)) }
                dt { "Dead in a row" } dd { (sub.consecutive_dead) " / " (MAX_CONSECUTIVE_DEAD) " (pauses at " (MAX_CONSECUTIVE_DEAD) ")" }
                @if let Some(t) = &sub.paused_at { dt { "Paused" } dd { (when_text(Some(t))) } }
            }
            (answers_table(sub))
            div class="actions" {
                a class="button" data-testid="replay-link" href=(ctx.url(&format!("{base}/replay"))) { "Replay a window…" }
                @if sub.status.may_be_resumed() {
                    a class="button" data-testid="resume-link" href=(ctx.url(&format!("{base}/resume"))) { "Resume…" }
                }
                a class="button secondary" href=(ctx.url(&format!("/console/op/replays?account={}", encode(&h.account_id)))) { "Replay jobs" }
            }
        }
    }
}
