//! Needs Attention: an account's paused subscriptions (with their resume links, for operators)
//! and its dead or failed deliveries.

use super::access::Op;
use super::nav::{account_param, account_picker, nav, scope};
use crate::page::{badge, encode, error_page, html_response, pager, shell, when_text, Ctx, Nav};
use crate::views::{self, Scope};
use crate::Params;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use shared::api::extract::path_id;
use shared::api::state::ApiState;
use shared::api::v1::events::monitor_error;
use shared::api::v1::subscriptions::SubscriptionView;
use shared::domain::lifecycle::Status;
use shared::domain::subscription::MAX_CONSECUTIVE_DEAD;
use shared::ids::AccountId;
use shared::operations::event_monitor::{
    attention_deliveries, paused_subscriptions, DeliveryLogEntry,
};
use std::sync::Arc;

type S = State<Arc<ApiState>>;

/// `/console/op/attention?account=…`: the account picker, or the account's Needs Attention.
pub(super) async fn attention(op: Op, State(state): S, Query(p): Query<Params>) -> Response {
    let account = account_param(&p);
    let nav = nav(account.as_deref(), "nav-attention");
    let ctx = &op.ctx;
    let Some(account) = account else {
        return account_picker(ctx, &nav, "Needs attention", "/console/op/attention");
    };
    let account = match path_id::<AccountId>(&account, "account") {
        Ok(a) => a,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    attention_page(&state, ctx, &nav, &scope(&account), &p).await
}

/// Needs Attention of one account: its paused subscriptions and its dead or failed deliveries
/// (the account's pages show it too, without the actions).
pub async fn attention_page(
    state: &ApiState,
    ctx: &Ctx,
    nav: &Nav,
    sc: &Scope,
    p: &Params,
) -> Response {
    let (dynamo, table) = (state.dynamo(), state.table());
    let paused = match paused_subscriptions(dynamo, table, &sc.account_id).await {
        Ok(p) => p,
        Err(e) => return error_page(ctx, nav, &monitor_error(e)),
    };
    let cursor = p.get("cursor").map(String::as_str);
    let page = match attention_deliveries(dynamo, table, &sc.account_id, 50, cursor, ctx.now).await
    {
        Ok(p) => p,
        Err(e) => return error_page(ctx, nav, &monitor_error(e)),
    };
    let rows: Vec<DeliveryLogEntry> = page
        .items
        .iter()
        .map(|d| DeliveryLogEntry::new(d, ctx.now))
        .collect();
    let paused: Vec<SubscriptionView> = paused.iter().map(SubscriptionView::from).collect();
    let list_path = if sc.operator {
        format!("/console/op/attention?account={}", encode(&sc.account_id))
    } else {
        "/console/acct/attention".to_string()
    };
    let body = html! {
        main id="main" {
            h1 { "Needs attention" }
            h2 { "Paused subscriptions" }
            div class="table-wrap" {
                table id="paused-subscriptions" class="stack" {
                    thead { tr { th { "Subscription" } th { "Record types" } th { "Dead in a row" } th { "Paused" } @if sc.operator { th { "Action" } } } }
                    tbody {
                        @for s in &paused {
                            tr data-testid="paused-row" data-subscription-id=(s.id) {
                                td data-label="Subscription" {
                                    @if sc.operator { a class="mono" href=(ctx.url(&format!("{}/subscriptions/{}", sc.base, encode(&s.id)))) { (s.id) } }
                                    @else { span class="mono" { (s.id) } }
                                    " " (badge(s.status.as_str()))
                                }
                                td data-label="Record types" { (s.record_types.join(", ")) }
                                td data-label="Dead in a row" { (s.consecutive_dead) " / " (MAX_CONSECUTIVE_DEAD) }
                                td data-label="Paused" { (when_text(s.paused_at.as_deref())) }
                                @if sc.operator {
                                    td data-label="Action" { a class="button" data-testid="resume-link" href=(ctx.url(&format!("{}/subscriptions/{}/resume", sc.base, encode(&s.id)))) { "Resume…" } }
                                }
                            }
                        }
                        @if paused.is_empty() { tr { td colspan="5" class="muted" { "No paused subscription." } } }
                    }
                }
            }
            h2 { "Dead and failed deliveries" }
            div class="table-wrap" {
                table id="attention-deliveries" class="stack" {
                    (views::delivery_head())
                    tbody { (views::delivery_rows(ctx, sc, &rows)) }
                }
            }
            (pager(ctx, &list_path, page.next_cursor.as_deref()))
        }
    };
    html_response(
        StatusCode::OK,
        shell(Some((ctx, nav)), "Needs attention", body),
    )
}
