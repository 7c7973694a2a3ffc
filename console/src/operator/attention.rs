//! Needs Attention: the queue of what needs an operator across every account (oldest first,
//! each entry with its account and a link to its confirmation form), and one account's paused
//! subscriptions (with their resume links, for operators) and dead or failed deliveries.

use super::access::Op;
use super::nav::{account_param, base, nav, scope};
use crate::names::Names;
use crate::page::{
    badge, encode, error_page, html_response, pager, shell, when, when_text, Ctx, Nav,
};
use crate::views::{self, Scope};
use crate::Params;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use shared::api::v1::subscriptions::SubscriptionView;
use shared::domain::lifecycle::Status;
use shared::domain::subscription::MAX_CONSECUTIVE_DEAD;
use shared::ids::AccountId;
use shared::operations::attention_queue::{
    attention_queue, queue_position, AttentionEntry, AttentionKind,
};
use shared::operations::event_monitor::{
    attention_deliveries, paused_subscriptions, DeliveryLogEntry,
};
use shared::operations::OpsError;
use shared::web::extract::{page_limit, path_id};
use shared::web::problem::ApiError;
use shared::web::state::ApiState;
use std::collections::HashMap;
use std::sync::Arc;

type S = State<Arc<ApiState>>;

/// `/console/op/attention?account=…`: the queue across accounts, or the account's Needs
/// Attention.
pub(super) async fn attention(op: Op, State(state): S, Query(p): Query<Params>) -> Response {
    let account = account_param(&p);
    let nav = nav(account.as_deref(), "nav-attention");
    let ctx = &op.ctx;
    let Some(account) = account else {
        return queue_page(&state, ctx, &nav, &p).await;
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
        Err(e) => return error_page(ctx, nav, &OpsError::from(e).into()),
    };
    let cursor = p.get("cursor").map(String::as_str);
    let page = match attention_deliveries(dynamo, table, &sc.account_id, 50, cursor, ctx.now).await
    {
        Ok(p) => p,
        Err(e) => return error_page(ctx, nav, &OpsError::from(e).into()),
    };
    let rows: Vec<DeliveryLogEntry> = page
        .items
        .iter()
        .map(|d| DeliveryLogEntry::new(d, ctx.now))
        .collect();
    let paused: Vec<SubscriptionView> = paused.iter().map(SubscriptionView::from).collect();
    let names = Names::load(state, &sc.account_id).await.unwrap_or_default();
    let list_path = if sc.operator {
        format!("/console/op/attention?account={}", encode(&sc.account_id))
    } else {
        "/console/acct/attention".to_string()
    };
    let body = html! {
        main id="main" {
            h1 { "Needs attention" @if sc.operator { @if let Some(n) = &names.account_name { " · " (n) } } }
            h2 { "Paused subscriptions" }
            div class="table-wrap" {
                table id="paused-subscriptions" class="stack" {
                    thead { tr { th { "Subscription" } th { "Record types" } th { "Dead in a row" } th { "Paused" } th { "Action" } } }
                    tbody {
                        @for s in &paused {
                            tr data-testid="paused-row" data-subscription-id=(s.id) {
                                td data-label="Subscription" {
                                    a href=(ctx.url(&format!("{}/subscriptions/{}", sc.base, encode(&s.id)))) { (names.subscription_markup(&s.id)) }
                                    " " (badge(s.status.as_str()))
                                }
                                td data-label="Record types" { (s.record_types.join(", ")) }
                                td data-label="Dead in a row" { (s.consecutive_dead) " / " (MAX_CONSECUTIVE_DEAD) }
                                td data-label="Paused" { (when_text(s.paused_at.as_deref())) }
                                td data-label="Action" { a class="button" data-testid="resume-link" href=(ctx.url(&format!("{}/subscriptions/{}/resume", sc.base, encode(&s.id)))) { "Resume…" } }
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
                    tbody { (views::delivery_rows(ctx, sc, &names, &rows)) }
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

/// The page of a notification delivery's notice.
fn notice_path(e: &AttentionEntry) -> Option<String> {
    e.notice_id
        .as_ref()
        .map(|n| format!("/console/op/notifications/{}", encode(n)))
}

/// The console's link that acts on a queue entry: its confirmation form (retry, resume,
/// requeue), or a stopped replay job's page.
fn act_link(e: &AttentionEntry) -> (String, &'static str) {
    let b = base(&e.account_id);
    let sub = e.subscription_id.as_ref().map(encode).unwrap_or_default();
    match (e.kind, &e.change_id, &e.job_id, notice_path(e)) {
        (AttentionKind::DeadDelivery | AttentionKind::FailedDelivery, Some(c), _, _) => (
            format!("{b}/subscriptions/{sub}/deliveries/{}/retry", encode(c)),
            "Retry…",
        ),
        (AttentionKind::StalledReplay, _, Some(j), _) => {
            (format!("{b}/replays/{}", encode(j)), "Open the job")
        }
        (AttentionKind::ExhaustedNotification, _, _, Some(notice)) => (
            format!(
                "{notice}/deliveries/{}/requeue",
                encode(e.delivery_key.as_deref().unwrap_or_default())
            ),
            "Requeue…",
        ),
        _ => (format!("{b}/subscriptions/{sub}/resume"), "Resume…"),
    }
}

/// The words of a kind of entry.
fn kind_text(kind: AttentionKind) -> &'static str {
    match kind {
        AttentionKind::PausedSubscription => "Paused subscription",
        AttentionKind::DeadDelivery => "Dead delivery",
        AttentionKind::FailedDelivery => "Failed delivery",
        AttentionKind::StalledReplay => "Stopped replay job",
        AttentionKind::ExhaustedNotification => "Exhausted notification",
    }
}

/// What needs an operator across every account, oldest first.
async fn queue_page(state: &ApiState, ctx: &Ctx, nav: &Nav, p: &Params) -> Response {
    let (entries, next) = match queue_entries(state, ctx, p).await {
        Ok(r) => r,
        Err(e) => return error_page(ctx, nav, &e),
    };
    let names = account_names(state, &entries).await;
    let body = html! {
        main id="main" {
            h1 { "Needs attention" }
            p class="muted" { "What needs an operator in every account, oldest first. An account's own list: open it from its Event monitor, or give its id below." }
            div class="table-wrap" {
                table id="attention-queue" class="stack" {
                    thead { tr { th scope="col" { "Since" } th scope="col" { "Account" } th scope="col" { "What" } th scope="col" { "Last error" } th scope="col" { "Action" } } }
                    tbody {
                        @for (e, name) in &entries { (queue_row(ctx, e, name, &names)) }
                        @if entries.is_empty() { tr { td colspan="5" class="muted" { "Nothing needs an operator." } } }
                    }
                }
            }
            (pager(ctx, "/console/op/attention", next.as_deref()))
            form class="filters panel" method="get" action=(ctx.url("/console/op/attention")) {
                label for="account" { "One account's Needs attention (account id)" input id="account" name="account" required; }
                button type="submit" data-testid="open-account" { "Open" }
            }
        }
    };
    html_response(
        StatusCode::OK,
        shell(Some((ctx, nav)), "Needs attention", body),
    )
}

/// The page of the queue the query's cursor asks for (each entry with its account's name), and
/// the next page's cursor.
async fn queue_entries(
    state: &ApiState,
    ctx: &Ctx,
    p: &Params,
) -> Result<(Vec<(AttentionEntry, String)>, Option<String>), ApiError> {
    let after = queue_position(p.get("cursor").map(String::as_str))?;
    let limit = page_limit(None)?;
    let (entries, next) = attention_queue(
        state.dynamo(),
        state.table(),
        &state.config.notification_table,
        after.as_deref(),
        limit,
        ctx.now,
    )
    .await
    .map_err(OpsError::from)?;
    Ok((entries, next.map(|n| shared::store::cursor::encode(&n))))
}

/// The names of the listed accounts' subscriptions (a page lists a few accounts).
async fn account_names(
    state: &ApiState,
    entries: &[(AttentionEntry, String)],
) -> HashMap<AccountId, Names> {
    let mut names: HashMap<AccountId, Names> = HashMap::new();
    for (e, _) in entries {
        if !names.contains_key(&e.account_id) {
            let n = Names::load(state, &e.account_id).await.unwrap_or_default();
            names.insert(e.account_id.clone(), n);
        }
    }
    names
}

/// One entry of the queue: since when, its account, what it is, its last error, its action.
fn queue_row(
    ctx: &Ctx,
    e: &AttentionEntry,
    name: &str,
    names: &HashMap<AccountId, Names>,
) -> Markup {
    let none = Names::default();
    let names = names.get(&e.account_id).unwrap_or(&none);
    let (href, label) = act_link(e);
    html! {
        tr data-testid="queue-row" data-kind=(e.kind.as_str()) data-account-id=(e.account_id) data-subscription-id=[e.subscription_id.as_ref()] data-notice-id=[e.notice_id.as_ref()] {
            td data-label="Since" { (when(Some(e.at))) }
            td data-label="Account" {
                a data-testid="queue-account" href=(ctx.url(&format!("/console/op/attention?account={}", encode(&e.account_id)))) { @if name.is_empty() { span class="mono" { (e.account_id) } } @else { (name) } }
            }
            td data-label="What" {
                (kind_text(e.kind)) " "
                @let sub = e.subscription_id.as_ref().map(encode).unwrap_or_default();
                @if let Some(c) = &e.change_id {
                    @if let Some(sub_id) = &e.subscription_id { (names.subscription(sub_id).unwrap_or_default()) " " }
                    a class="mono" href=(ctx.url(&format!("{}/subscriptions/{sub}/deliveries/{}", base(&e.account_id), encode(c)))) { (e.delivery_id.as_ref().map(|d| d.to_string()).unwrap_or_default()) }
                } @else if let Some(j) = &e.job_id {
                    span class="mono" { (j) }
                } @else if let Some(notice) = notice_path(e) {
                    a class="mono" href=(ctx.url(&notice)) { (e.notice_id.as_ref().map(|n| n.to_string()).unwrap_or_default()) " " (e.delivery_key.as_deref().unwrap_or_default()) }
                } @else if let Some(sub_id) = &e.subscription_id {
                    a href=(ctx.url(&format!("{}/subscriptions/{sub}", base(&e.account_id)))) { (names.subscription_markup(sub_id)) }
                }
            }
            td data-label="Last error" { @if let Some(d) = &e.detail { (d) } @else { span class="muted" { "—" } } }
            td data-label="Action" { a class="button" data-testid="queue-act" href=(ctx.url(&href)) { (label) } }
        }
    }
}
