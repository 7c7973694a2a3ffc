//! The operator's start page: every account at a glance — found by name or id, a page at a
//! time, each with its health over the last day, newest trouble first — and one click to the
//! account's Event monitor; below, the notification lookup.

use super::access::Op;
use super::nav::nav;
use crate::page::{encode, error_page, html_response, pager, shell, when};
use crate::Params;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use shared::operations::account_health::{list_accounts, SearchText, WINDOW};
use shared::operations::OpsError;
use shared::web::state::ApiState;
use std::sync::Arc;

type S = State<Arc<ApiState>>;

/// `/console/op?q=…`: the accounts with their figures.
pub(super) async fn home(op: Op, State(state): S, Query(p): Query<Params>) -> Response {
    let ctx = &op.ctx;
    let nav = nav(None, "nav-accounts");
    let text = SearchText {
        q: p.get("q").cloned(),
        limit: None,
        cursor: p.get("cursor").cloned(),
    };
    let search = match text.read() {
        Ok(s) => s,
        Err(e) => return error_page(ctx, &nav, &e.into()),
    };
    let (accounts, next) = match list_accounts(
        state.dynamo(),
        state.table(),
        &state.config.notification_table,
        &search,
        ctx.now,
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return error_page(ctx, &nav, &OpsError::from(e).into()),
    };
    let next = next.map(|id| shared::store::cursor::encode(id.as_str()));
    let hours = WINDOW.as_secs() / 3600;
    let list_path = if search.text.is_empty() {
        "/console/op".to_string()
    } else {
        format!("/console/op?q={}", encode(&search.text))
    };
    let body = html! {
        main id="main" {
            h1 { "Accounts" }
            form class="filters panel" method="get" action=(ctx.url("/console/op")) role="search" {
                label for="q" { "Name starts with, or account id" input id="q" name="q" type="search" value=(search.text) autocomplete="off"; }
                button type="submit" data-testid="search-accounts" { "Search" }
            }
            p class="muted" { "Health over the last " (hours) " hours; accounts with the newest trouble first. Paused subscriptions count whenever they were paused." }
            div class="table-wrap" {
                table id="accounts" class="stack" {
                    thead { tr { th scope="col" { "Account" } th scope="col" { "Delivered" } th scope="col" { "Dead" } th scope="col" { "Failed" } th scope="col" { "Paused subscriptions" } th scope="col" { "Notices failed" } th scope="col" { "Last trouble" } } }
                    tbody {
                        @for a in &accounts {
                            @let h = &a.health;
                            tr data-testid="account-row" data-account-id=(a.account.account_id) data-troubled=(h.troubled()) {
                                td data-label="Account" {
                                    a data-testid="account-link" href=(ctx.url(&format!("/console/op/events?account={}", encode(&a.account.account_id)))) { (a.account.name) }
                                    br;
                                    span class="mono muted" { (a.account.account_id) }
                                }
                                td data-label="Delivered" data-testid="health-delivered" { (h.delivered) @if !h.complete { "+" } }
                                td data-label="Dead" data-testid="health-dead" { (h.dead) }
                                td data-label="Failed" data-testid="health-failed" { (h.failed) }
                                td data-label="Paused subscriptions" data-testid="health-paused" { (h.paused_subscriptions) }
                                td data-label="Notices failed" data-testid="health-notices-failed" { (h.notices_failed) }
                                td data-label="Last trouble" data-testid="health-last-trouble" { (when(h.last_trouble_at)) }
                            }
                        }
                        @if accounts.is_empty() { tr { td colspan="7" class="muted" { "No account matches." } } }
                    }
                }
            }
            (pager(ctx, &list_path, next.as_deref()))
            h2 { "Find a notification" }
            form class="filters panel" method="get" action=(ctx.url("/console/op/notifications")) {
                label for="notice" { "Notice id" input id="notice" name="notice" required; }
                button type="submit" data-testid="open-notice" { "Open the notification" }
            }
        }
    };
    html_response(StatusCode::OK, shell(Some((ctx, &nav)), "Accounts", body))
}
