//! The pages both audiences see for one account: the Event monitor, an event with its Delivery
//! log, and a delivery with its attempts. An operator reaches them under
//! `/console/op/accounts/{account}/…` (with the actions), an administrator under
//! `/console/acct/…` (their own account only: another account's id is simply not found). The
//! reads are the monitor's and the operations' (those the JSON API calls too).

use super::names::{account_choices, account_select, Names};
use super::page::{badge, encode, error_page, html_response, pager, shell, when_text, Ctx, Nav};
use super::Params;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use shared::api::operator::audit::AuditView;
use shared::api::operator::deliveries::{AttemptView, DeliveryView};
use shared::api::v1::subscriptions::SubscriptionView;
use shared::domain::event::{EventStatus, InternalStatus};
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::lifecycle::Status;
use shared::domain::pull_cursor::change_id as change_id_of;
use shared::ids::{AccountId, ChangeId, SubscriptionId};
use shared::operations::endpoint_health::{endpoint_health, EndpointHealth};
use shared::operations::event_monitor::{
    event_with_deliveries, list_events, DeliveryLogEntry, EventSummary, Page,
};
use shared::operations::list_filters::{DeliveryFilter, EventFilter};
use shared::operations::recovery::{audit, integration_history};
use shared::operations::resource_ids::id_of;
use shared::operations::OpsError;
use shared::store::audit::AuditScope;
use shared::store::delivery::Delivery;
use shared::store::event::EventRecord;
use shared::web::problem::ApiError;
use shared::web::state::ApiState;

/// Where one account's pages live for this audience.
pub struct Scope {
    pub account_id: AccountId,
    /// Prefix of the account's detail pages (`/console/op/accounts/{a}` or `/console/acct`).
    pub base: String,
    /// The Event monitor's path (with `?account=` for operators).
    pub monitor: String,
    pub operator: bool,
}

impl Scope {
    pub fn event(&self, change_id: &ChangeId) -> String {
        format!("{}/events/{}", self.base, encode(change_id))
    }
    pub fn delivery(&self, subscription_id: &SubscriptionId, change_id: &ChangeId) -> String {
        delivery_path(&self.base, subscription_id, change_id)
    }
}

/// The path of a delivery's page under an account's `base` (ids or path segments as given).
pub fn delivery_path(
    base: &str,
    subscription_id: impl std::fmt::Display,
    change_id: impl std::fmt::Display,
) -> String {
    format!(
        "{base}/subscriptions/{}/deliveries/{}",
        encode(subscription_id),
        encode(change_id)
    )
}

/// Page size of the Event monitor.
pub const MONITOR_PAGE: u32 = 50;
/// Seconds between refreshes of a page with work in flight.
pub const POLL: &str = "every 2s";

/// A `datetime-local` value (`2024-05-01T10:00`, read as UTC) or an RFC 3339 time, as RFC 3339.
pub fn form_time(text: &str) -> Option<String> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    if shared::domain::time::Timestamp::parse_rfc3339(t).is_some() {
        return Some(t.to_owned());
    }
    for format in ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(n) = chrono::NaiveDateTime::parse_from_str(t, format) {
            return Some(n.and_utc().to_rfc3339());
        }
    }
    // Not a time: handed on as written, so the API's check names it.
    Some(t.to_owned())
}

fn param<'a>(p: &'a Params, name: &str) -> Option<&'a str> {
    p.get(name)
        .map(String::as_str)
        .filter(|v| !v.trim().is_empty())
}

/// The Event monitor of one account: filters, the list, paging; refreshes itself (htmx, the
/// `#events-live` fragment) while a listed event is `new` or `partial`.
pub async fn event_monitor(
    state: &ApiState,
    ctx: &Ctx,
    nav: &Nav,
    scope: Option<&Scope>,
    p: &Params,
) -> Response {
    let (listing, refused) = match scope {
        None => (None, None),
        Some(scope) => match monitor_listing(state, ctx, scope, p).await {
            Ok(page) => (Some(page), None),
            Err(e) => (None, Some(e)),
        },
    };
    let (path, here, here_with_cursor) = monitor_paths(scope, p);
    let fragment = events_fragment(ctx, scope, listing.as_ref(), &here, &here_with_cursor);
    if ctx.htmx {
        return html_response(StatusCode::OK, fragment);
    }
    let choices = if ctx.operator_id().is_some() {
        account_choices(state).await
    } else {
        Vec::new()
    };
    let account_name = scope.and_then(|sc| {
        choices
            .iter()
            .find(|(id, _)| id == &sc.account_id)
            .map(|(_, n)| n.clone())
    });
    let body = html! {
        main id="main" {
            h1 { "Event monitor" @if let Some(n) = &account_name { " · " (n) } }
            (monitor_filters(ctx, p, &path, &choices))
            @if let Some(e) = &refused { (super::page::problem(&e.problem())) }
            @if scope.is_none() { p class="muted" data-testid="choose-account" { "Choose an account to see its events." } }
            (fragment)
        }
    };
    let status = refused
        .as_ref()
        .map(|e| e.status())
        .unwrap_or(StatusCode::OK);
    html_response(status, shell(Some((ctx, nav)), "Event monitor", body))
}

/// The page of the account's events the monitor's filters ask for, or their refusal.
async fn monitor_listing(
    state: &ApiState,
    ctx: &Ctx,
    scope: &Scope,
    p: &Params,
) -> Result<Page<EventRecord>, ApiError> {
    let filter = EventFilter {
        status: param(p, "status").map(str::to_owned),
        from: param(p, "from").and_then(form_time),
        to: param(p, "to").and_then(form_time),
        cursor: param(p, "cursor").map(str::to_owned),
        ..EventFilter::default()
    };
    let read = filter.query(MONITOR_PAGE).map_err(ApiError::from);
    let internal = match param(p, "internal") {
        None => Ok(None),
        Some(word) => InternalStatus::parse(word).map(Some).ok_or_else(|| {
            ApiError::field(
                "internal",
                format!("{word:?} is not an internal status; expected new or done"),
            )
        }),
    };
    let (mut query, internal) = match (read, internal) {
        (Ok(query), Ok(internal)) => (query, internal),
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    query.internal_status = internal;
    query.event_code = param(p, "code").map(|c| c.trim().to_owned());
    list_events(
        state.dynamo(),
        state.table(),
        &scope.account_id,
        &query,
        ctx.now,
    )
    .await
    .map_err(|e| OpsError::from(e).into())
}

/// The monitor's path, this view's address (its filters without the cursor: for the pager), and
/// the address with its cursor (for the refresh).
fn monitor_paths(scope: Option<&Scope>, p: &Params) -> (String, String, String) {
    let keep: Vec<(&str, &str)> = ["account", "status", "internal", "code", "from", "to"]
        .iter()
        .filter_map(|k| param(p, k).map(|v| (*k, v)))
        .collect();
    let query: String = keep
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let path = scope
        .map(|s| s.monitor.split('?').next().unwrap_or_default().to_owned())
        .unwrap_or_else(|| "/console/op/events".into());
    let here = if query.is_empty() {
        path.clone()
    } else {
        format!("{path}?{query}")
    };
    let here_with_cursor = match param(p, "cursor") {
        Some(c) => format!(
            "{here}{}cursor={}",
            if here.contains('?') { '&' } else { '?' },
            encode(c)
        ),
        None => here.clone(),
    };
    (path, here, here_with_cursor)
}

/// `#events-live`: the listed events and the pager, refreshing itself while one is in flight.
fn events_fragment(
    ctx: &Ctx,
    scope: Option<&Scope>,
    listing: Option<&Page<EventRecord>>,
    here: &str,
    here_with_cursor: &str,
) -> Markup {
    let summaries: Vec<EventSummary> = listing
        .map(|l| l.items.iter().map(EventSummary::from).collect())
        .unwrap_or_default();
    let live = summaries
        .iter()
        .any(|e| matches!(e.event_status, EventStatus::New | EventStatus::Partial));
    html! {
        div id="events-live" data-live=(live)
            hx-get=[live.then(|| ctx.url(here_with_cursor))]
            hx-trigger=[live.then_some(POLL)]
            hx-swap=[live.then_some("outerHTML")] {
            @if live { p class="live" role="status" { "Work in flight: this list refreshes itself." } }
            @if let Some(scope) = scope {
                div class="table-wrap" {
                    table id="events" class="stack" {
                        caption class="muted" { (summaries.len()) " events on this page, newest first" }
                        thead { tr {
                            th scope="col" { "Event" } th scope="col" { "Code" } th scope="col" { "Record" }
                            th scope="col" { "Status" } th scope="col" { "Internal" }
                            th scope="col" { "Subscribers" } th scope="col" { "Created" }
                        } }
                        tbody {
                            @for e in &summaries {
                                tr data-testid="event-row" data-event-id=(e.id) {
                                    td data-label="Event" { a class="mono" data-testid="event-link" href=(ctx.url(&scope.event(&e.id))) { (e.id) } }
                                    td data-label="Code" { (e.event_code) }
                                    td data-label="Record" { (e.record_type) " " span class="mono" { (e.record_id) } }
                                    td data-label="Status" data-testid="event-status" { (badge(e.event_status.as_str())) }
                                    td data-label="Internal" data-testid="internal-status" { (badge(e.internal_status.as_str())) }
                                    td data-label="Subscribers" { (e.subscribers) }
                                    td data-label="Created" { (when_text(Some(&e.created_at))) }
                                }
                            }
                            @if summaries.is_empty() {
                                tr { td colspan="7" class="muted" data-testid="no-events" { "No events match." } }
                            }
                        }
                    }
                }
                (pager(ctx, here, listing.and_then(|l| l.next_cursor.as_deref())))
            }
        }
    }
}

/// The monitor's filter form (with the account choice for operators).
fn monitor_filters(ctx: &Ctx, p: &Params, path: &str, choices: &[(AccountId, String)]) -> Markup {
    let status_options = EventStatus::ALL.iter().map(|s| s.as_str());
    let chosen = param(p, "status").unwrap_or_default();
    html! {
        form class="filters panel" method="get" action=(ctx.url(path)) role="search" aria-label="Filter events" {
            @if ctx.operator_id().is_some() {
                (account_select("filter-account", choices, param(p, "account")))
            }
            label for="filter-status" { "Status"
                select id="filter-status" name="status" {
                    option value="" { "any" }
                    @for s in status_options { option value=(s) selected[chosen == s] { (s) } }
                }
            }
            label for="filter-internal" { "Internal status"
                select id="filter-internal" name="internal" {
                    option value="" { "any" }
                    @for s in InternalStatus::ALL.iter().map(|s| s.as_str()) {
                        option value=(s) selected[param(p, "internal") == Some(s)] { (s) }
                    }
                }
            }
            label for="filter-code" { "Event code"
                input id="filter-code" name="code" value=(param(p, "code").unwrap_or_default());
            }
            label for="filter-from" { "Created from (UTC)"
                input id="filter-from" name="from" type="datetime-local" value=(param(p, "from").unwrap_or_default());
            }
            label for="filter-to" { "Created before (UTC)"
                input id="filter-to" name="to" type="datetime-local" value=(param(p, "to").unwrap_or_default());
            }
            button type="submit" data-testid="filter-apply" { "Apply" }
        }
    }
}

/// One event and its Delivery log; refreshes itself while the event is `new` or `partial`.
pub async fn event_page(
    state: &ApiState,
    ctx: &Ctx,
    nav: &Nav,
    scope: &Scope,
    change_id: &str,
) -> Response {
    let (event, deliveries) = match find_event(state, ctx, scope, change_id).await {
        Ok(f) => f,
        Err(e) => return error_page(ctx, nav, &e),
    };
    let e = EventSummary::from(&event);
    let log: Vec<DeliveryLogEntry> = deliveries
        .iter()
        .map(|d| DeliveryLogEntry::new(d, ctx.now))
        .collect();
    let live = matches!(e.event_status, EventStatus::New | EventStatus::Partial);
    let here = ctx.url(&scope.event(&e.id));
    let names = Names::load(state, &scope.account_id)
        .await
        .unwrap_or_default();
    let fragment = html! {
        div id="event-live" data-live=(live)
            hx-get=[live.then(|| here.clone())] hx-trigger=[live.then_some(POLL)] hx-swap=[live.then_some("outerHTML")] {
            (event_facts(&e))
            h2 { "Delivery log" }
            @if live { p class="live" role="status" { "Deliveries in flight: this page refreshes itself." } }
            (delivery_log(ctx, scope, &names, &log))
        }
    };
    if ctx.htmx {
        return html_response(StatusCode::OK, fragment);
    }
    let body = html! {
        main id="main" {
            p { a href=(ctx.url(&scope.monitor)) { "← Event monitor" } }
            h1 { "Event " span class="mono" { (e.id) } }
            (fragment)
        }
    };
    html_response(StatusCode::OK, shell(Some((ctx, nav)), "Event", body))
}

/// The account's event `change_id` names, with its deliveries; "event not found" otherwise.
async fn find_event(
    state: &ApiState,
    ctx: &Ctx,
    scope: &Scope,
    change_id: &str,
) -> Result<(EventRecord, Vec<Delivery>), ApiError> {
    let change_id = change_id_of(change_id).ok_or_else(|| ApiError::not_found("event"))?;
    event_with_deliveries(
        state.dynamo(),
        state.table(),
        &scope.account_id,
        &change_id,
        ctx.now,
    )
    .await
    .map_err(OpsError::from)?
    .ok_or_else(|| ApiError::not_found("event"))
}

/// An event's facts.
fn event_facts(e: &EventSummary) -> Markup {
    html! {
        section class="panel" aria-labelledby="event-facts" {
            h2 id="event-facts" { "Event" }
            dl class="facts" {
                dt { "Status" } dd data-testid="event-status" { (badge(e.event_status.as_str())) " " span class="muted" { (e.status_reason.unwrap_or_default()) } }
                dt { "Internal status" } dd data-testid="internal-status" { (badge(e.internal_status.as_str())) }
                dt { "Event code" } dd { (e.event_code) }
                dt { "Record" } dd { (e.record_type) " " span class="mono" { (e.record_id) } }
                @if let Some(w) = &e.warehouse { dt { "Warehouse" } dd { (w) } }
                dt { "Occurred" } dd { (when_text(Some(&e.occurred_at))) }
                dt { "Created" } dd { (when_text(Some(&e.created_at))) }
                dt { "Status changed" } dd { (when_text(e.status_changed_at.as_deref())) }
                @if let Some(x) = &e.expires_at { dt { "Deleted by retention" } dd { (when_text(Some(x))) } }
            }
        }
    }
}

/// An event's Delivery log: a row per subscription that took it.
fn delivery_log(ctx: &Ctx, scope: &Scope, names: &Names, log: &[DeliveryLogEntry]) -> Markup {
    html! {
        div class="table-wrap" {
            table id="delivery-log" class="stack" {
                thead { tr {
                    th scope="col" { "Subscription" } th scope="col" { "Method" } th scope="col" { "Status" }
                    th scope="col" { "Transmission" } th scope="col" { "Attempts" } th scope="col" { "HTTP" }
                    th scope="col" { "Last error" } th scope="col" { "Next try" }
                } }
                tbody {
                    @for d in log {
                        tr data-testid="delivery-row" data-delivery-id=(d.delivery_id) data-subscription-id=(d.subscription_id) {
                            td data-label="Subscription" { a data-testid="delivery-link" href=(ctx.url(&scope.delivery(&d.subscription_id, &d.change_id))) { (names.subscription_markup(&d.subscription_id)) } }
                            td data-label="Method" { (d.method) }
                            td data-label="Status" data-testid="delivery-status" { (badge(d.status.as_str())) }
                            td data-label="Transmission" data-testid="transmit-status" {
                                @if let Some(t) = d.transmit_status { (badge(t.as_str())) } @else { span class="muted" { "—" } }
                            }
                            td data-label="Attempts" data-testid="attempts" { (d.attempts) }
                            td data-label="HTTP" data-testid="http-code" { @if let Some(c) = d.http_code { (c) } @else { "—" } }
                            td data-label="Last error" data-testid="last-error" { @if let Some(x) = &d.last_error { (x) } @else { "—" } }
                            td data-label="Next try" { (when_text(d.next_attempt_at.as_deref())) }
                        }
                    }
                    @if log.is_empty() { tr { td colspan="8" class="muted" { "No deliveries: no subscription took this event." } } }
                }
            }
        }
    }
}

/// One delivery and its attempts (every run, with the response snippets); refreshes itself
/// while it waits or is being attempted.
pub async fn delivery_page(
    state: &ApiState,
    ctx: &Ctx,
    nav: &Nav,
    scope: &Scope,
    subscription_id: &str,
    change_id: &str,
    done: Option<&str>,
) -> Response {
    let found = match (
        id_of::<SubscriptionId>(subscription_id),
        change_id_of(change_id),
    ) {
        (Some(sub), Some(change_id)) => state
            .ops()
            .delivery(&scope.account_id, &sub, &change_id)
            .await
            .map_err(ApiError::from),
        _ => Err(ApiError::not_found("delivery")),
    };
    let d = match found {
        Ok(d) => d,
        Err(e) => return error_page(ctx, nav, &e),
    };
    let live = d.status.is_open();
    let view = DeliveryView::detailed(&d, ctx.now);
    let here = ctx.url(&scope.delivery(&d.subscription_id, &d.change_id));
    let names = Names::load(state, &scope.account_id)
        .await
        .unwrap_or_default();
    let fragment = html! {
        div id="delivery" data-live=(live)
            hx-get=[live.then(|| here.clone())] hx-trigger=[live.then_some(POLL)] hx-swap=[live.then_some("outerHTML")] {
            @if live { p class="live" role="status" { "In flight: this page refreshes itself." } }
            (delivery_facts(ctx, scope, &names, &view, live))
            h2 { "Attempts" }
            (attempts_table(view.attempt_log.as_deref().unwrap_or_default()))
        }
    };
    if ctx.htmx {
        return html_response(StatusCode::OK, fragment);
    }
    let may_retry = if scope.operator {
        d.status.may_be_retried()
    } else {
        matches!(d.status, DeliveryStatus::Dead | DeliveryStatus::Failed)
    };
    let body = html! {
        main id="main" {
            p { a href=(ctx.url(&scope.event(&view.change_id))) { "← Event" } }
            h1 { "Delivery to " (names.subscription(&view.subscription_id).unwrap_or("its subscription")) " " span class="id mono" { (view.id) } }
            @if let Some(d) = done { p class="notice" role="status" data-testid="notice" { "Done: " (d) "." } }
            @if may_retry {
                div class="actions" {
                    a class="button" data-testid="retry-link" href=(format!("{here}/retry")) { "Retry this delivery…" }
                }
            }
            div class="side-by-side" {
                div { (fragment) }
                (payload_sent(&view))
            }
        }
    };
    html_response(StatusCode::OK, shell(Some((ctx, nav)), "Delivery", body))
}

/// A delivery's facts.
fn delivery_facts(
    ctx: &Ctx,
    scope: &Scope,
    names: &Names,
    view: &DeliveryView,
    live: bool,
) -> Markup {
    html! {
        section class="panel" aria-label="Delivery" {
            dl class="facts" {
                dt { "Status" } dd data-testid="delivery-status" { (badge(view.status.as_str())) }
                dt { "Transmission" } dd data-testid="transmit-status" { @if let Some(t) = &view.transmit_status { (badge(t)) } @else { "—" } }
                dt { "Subscription" } dd { a href=(ctx.url(&format!("{}/subscriptions/{}", scope.base, encode(&view.subscription_id)))) { (names.subscription_markup(&view.subscription_id)) } }
                dt { "Method" } dd { (view.method) }
                dt { "Attempts (this run)" } dd data-testid="attempts" { (view.attempts) }
                dt { "Restarts" } dd { (view.restarts) }
                dt { "Last HTTP code" } dd data-testid="http-code" { @if let Some(c) = view.last_http_status { (c) } @else { "—" } }
                dt { "Last error" } dd data-testid="last-error" { @if let Some(x) = &view.last_error { (x) } @else { "—" } }
                dt { "Next try" } dd { (when_text(if live { view.not_before.as_deref() } else { None })) }
                dt { "Delivered" } dd { (when_text(view.delivered_at.as_deref())) }
                @if let Some(by) = &view.restarted_by { dt { "Last restarted" } dd data-testid="restarted-by" { (when_text(view.restarted_at.as_deref())) " by " (by) } }
                dt { "Event" } dd { a class="mono" href=(ctx.url(&scope.event(&view.change_id))) { (view.change_id) } }
            }
        }
    }
}

/// Every attempt of a delivery, by run.
fn attempts_table(attempts: &[AttemptView]) -> Markup {
    html! {
        div class="table-wrap" {
            table id="attempts" class="stack" {
                caption class="muted" { "Each attempt's answer: when, the outcome, the HTTP status, how long it took, and the response's first bytes or the error." }
                thead { tr { th scope="col" { "Run" } th scope="col" { "#" } th scope="col" { "When" } th scope="col" { "Outcome" } th scope="col" { "HTTP" } th scope="col" { "Time" } th scope="col" { "Response or error" } } }
                tbody {
                    @for a in attempts {
                        tr data-testid="attempt-row" {
                            td data-label="Run" { (a.run) }
                            td data-label="#" { (a.number) }
                            td data-label="When" { (when_text(Some(&a.at))) }
                            td data-label="Outcome" { (badge(&a.class)) }
                            td data-label="HTTP" data-testid="attempt-http" { @if let Some(c) = a.http_status { (c) } @else { "—" } }
                            td data-label="Time" { (a.duration_ms) " ms" }
                            td data-label="Response or error" data-testid="attempt-answer" { @if let Some(x) = &a.detail { pre { (x) } } @else { "—" } }
                        }
                    }
                    @if attempts.is_empty() { tr { td colspan="7" class="muted" { "No attempt yet." } } }
                }
            }
        }
    }
}

/// The payload as the receiver got it.
fn payload_sent(view: &DeliveryView) -> Markup {
    let payload = view
        .payload
        .as_ref()
        .map(|p| serde_json::to_string_pretty(p).unwrap_or_default());
    html! {
        section class="sent" aria-labelledby="payload-heading" {
            h2 id="payload-heading" { "Payload sent" }
            @if let Some(p) = payload {
                p class="muted" { "The change envelope as the receiver got it (the request's body, pretty-printed here)." }
                pre class="mono payload" data-testid="payload" tabindex="0" aria-label="Payload sent" { (p) }
            } @else {
                p class="muted" data-testid="payload" { "No payload: the change's filter left it out." }
            }
        }
    }
}

/// Page size of a subscription's deliveries.
pub const DELIVERIES_PAGE: u32 = 50;

/// A subscription's deliveries, newest change first (the operator's Integration history and an
/// administrator's delivery log): the filter form (status, time), `#deliveries` and the pager
/// on the API's cursors, read with the Integration history's own operation. A refused filter or
/// cursor is shown in place of the rows, with the problem beside it.
pub async fn subscription_deliveries(
    state: &ApiState,
    ctx: &Ctx,
    scope: &Scope,
    subscription_id: &SubscriptionId,
    p: &Params,
) -> (Markup, Option<ApiError>) {
    let ops = state.ops();
    let filter = DeliveryFilter {
        status: param(p, "status").map(str::to_owned),
        from: param(p, "from").and_then(form_time),
        to: param(p, "to").and_then(form_time),
        cursor: param(p, "cursor").map(str::to_owned),
        ..DeliveryFilter::default()
    };
    let listed = match filter.query(DELIVERIES_PAGE) {
        Ok(q) => integration_history::list_deliveries(&ops, &scope.account_id, subscription_id, &q)
            .await
            .map_err(ApiError::from),
        Err(e) => Err(ApiError::from(e)),
    };
    let (rows, next, refused) = match listed {
        Ok((ds, next)) => (
            ds.iter()
                .map(|d| DeliveryLogEntry::new(d, ctx.now))
                .collect::<Vec<_>>(),
            next,
            None,
        ),
        Err(e) => (Vec::new(), None, Some(e)),
    };
    let base = format!("{}/subscriptions/{}", scope.base, encode(subscription_id));
    // The pager keeps the filters.
    let filters: Vec<String> = ["status", "from", "to"]
        .iter()
        .filter_map(|k| param(p, k).map(|v| format!("{k}={}", encode(v))))
        .collect();
    let paged = if filters.is_empty() {
        base.clone()
    } else {
        format!("{base}?{}", filters.join("&"))
    };
    let chosen = param(p, "status").unwrap_or_default();
    let names = Names::load(state, &scope.account_id)
        .await
        .unwrap_or_default();
    let markup = html! {
        form class="filters panel" method="get" action=(ctx.url(&base)) aria-label="Filter deliveries" {
            label for="filter-status" { "Status"
                select id="filter-status" name="status" {
                    option value="" { "any" }
                    @for st in shared::domain::integration_delivery::DeliveryStatus::ALL.iter().map(|s| s.as_str()) {
                        option value=(st) selected[chosen == st] { (st) }
                    }
                }
            }
            label for="filter-from" { "Occurred from (UTC)" input id="filter-from" name="from" type="datetime-local" value=(param(p, "from").unwrap_or_default()); }
            label for="filter-to" { "Occurred before (UTC)" input id="filter-to" name="to" type="datetime-local" value=(param(p, "to").unwrap_or_default()); }
            button type="submit" data-testid="filter-apply" { "Apply" }
        }
        @if let Some(e) = &refused { (super::page::problem(&e.problem())) }
        div class="table-wrap" { table id="deliveries" class="stack" { (delivery_head()) tbody { (delivery_rows(ctx, scope, &names, &rows)) } } }
        (pager(ctx, &paged, next.as_deref()))
    };
    (markup, refused)
}

/// What a subscription's page shows beside its deliveries (the operator's Integration history,
/// an administrator's delivery log): the subscription, its latest audit entries, the account's
/// names and the subscription's endpoint health.
pub struct SubscriptionFacts {
    pub sub: SubscriptionView,
    pub audit: Vec<AuditView>,
    pub names: Names,
    pub health: EndpointHealth,
}

impl SubscriptionFacts {
    /// Audit entries shown.
    const AUDIT: u32 = 50;

    pub async fn read(
        state: &ApiState,
        ctx: &Ctx,
        account_id: &AccountId,
        subscription_id: &SubscriptionId,
    ) -> Result<SubscriptionFacts, ApiError> {
        let ops = state.ops();
        let sub = SubscriptionView::from(&ops.subscription(account_id, subscription_id).await?);
        let names = Names::load(state, account_id).await?;
        let audit_scope = AuditScope::Subscription {
            account_id,
            subscription_id,
        };
        let (records, _) = audit::list(&ops, audit_scope, Self::AUDIT, None).await?;
        let audit = records.iter().map(AuditView::from).collect();
        let health = endpoint_health(&ops, account_id, subscription_id, ctx.now).await?;
        Ok(SubscriptionFacts {
            sub,
            audit,
            names,
            health,
        })
    }
}

/// Rows of a list of deliveries (a subscription's, or Needs Attention's), each linking to its
/// attempts and its subscription.
pub fn delivery_rows(ctx: &Ctx, sc: &Scope, names: &Names, rows: &[DeliveryLogEntry]) -> Markup {
    html! {
        @for d in rows {
            tr data-testid="delivery-row" data-delivery-id=(d.delivery_id) data-subscription-id=(d.subscription_id) {
                td data-label="Event" { a class="mono" data-testid="delivery-link" href=(ctx.url(&sc.delivery(&d.subscription_id, &d.change_id))) { (d.change_id) } }
                td data-label="Subscription" { a href=(ctx.url(&format!("{}/subscriptions/{}", sc.base, encode(&d.subscription_id)))) { (names.subscription_markup(&d.subscription_id)) } }
                td data-label="Status" data-testid="delivery-status" { (badge(d.status.as_str())) }
                td data-label="Attempts" data-testid="attempts" { (d.attempts) }
                td data-label="HTTP" data-testid="http-code" { @if let Some(c) = d.http_code { (c) } @else { "—" } }
                td data-label="Last error" data-testid="last-error" { @if let Some(x) = &d.last_error { (x) } @else { "—" } }
                td data-label="Updated" { (when_text(Some(&d.updated_at))) }
            }
        }
        @if rows.is_empty() { tr { td colspan="7" class="muted" { "Nothing here." } } }
    }
}

/// The head of [`delivery_rows`]'s table.
pub fn delivery_head() -> Markup {
    html! { thead { tr { th scope="col" { "Event" } th scope="col" { "Subscription" } th scope="col" { "Status" } th scope="col" { "Attempts" } th scope="col" { "HTTP" } th scope="col" { "Last error" } th scope="col" { "Updated" } } } }
}
