//! `/console/acct/…`: an account administrator's pages, for the session's own account only.
//! There is no account id in these URLs: every read is scoped by the session's account, so
//! another account's event or delivery is simply "not found" (404), as in the API.

use super::account_parts::{integrations_and_subscriptions, integrations_table, nav_at};
use super::health::{dead_run, health_panel, last_failure, rate_text};
use super::names::{answers_table, filter_text, retry_policy_kind, retry_policy_text, Names};
use super::operator::{attention_page, audit_table};
use super::page::{badge, encode, error_page, html_response, shell, when_text, Ctx, NotYours};
use super::views::{self, Scope, SubscriptionFacts};
use super::Params;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use maud::{html, Markup};
use shared::api::v1::subscriptions::SubscriptionView;
use shared::domain::lifecycle::Status;
use shared::domain::subscription::MAX_CONSECUTIVE_DEAD;
use shared::domain::time::Timestamp;
use shared::ids::AccountId;
use shared::operations::endpoint_health::{endpoint_health, EndpointHealth};
use shared::operations::resource_ids::named;
use shared::web::problem::ApiError;
use shared::web::state::ApiState;
use std::sync::Arc;

type S = State<Arc<ApiState>>;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/console/acct", get(overview))
        .route("/console/acct/events", get(events))
        .route("/console/acct/events/{change_id}", get(event))
        .route("/console/acct/attention", get(attention))
        .route(
            "/console/acct/subscriptions/{subscription_id}",
            get(delivery_log),
        )
        .route(
            "/console/acct/subscriptions/{subscription_id}/deliveries/{change_id}",
            get(delivery),
        )
}

/// A signed-in account administrator.
pub struct Admin {
    pub ctx: Ctx,
    pub account_id: AccountId,
}

impl FromRequestParts<Arc<ApiState>> for Admin {
    /// No session (sign in), or an operator's session (403: operators use `/console/op/`).
    type Rejection = NotYours;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ApiState>,
    ) -> Result<Self, Self::Rejection> {
        let ctx = Ctx::from_request_parts(parts, state)
            .await
            .map_err(NotYours::SignIn)?;
        match ctx.account_id().cloned() {
            Some(account_id) => Ok(Admin { ctx, account_id }),
            None => Err(NotYours::Forbidden {
                ctx: Box::new(ctx),
                nav: super::operator::nav(None, ""),
                detail: "these pages are an account administrator's; operators use /console/op/",
            }),
        }
    }
}

impl Admin {
    /// Who acts, as the audit records it: the session's signed actor text (`token …`, the
    /// credential the administrator signed in with).
    pub fn actor(&self) -> String {
        match &self.ctx.session.audience {
            shared::web::console_session::Audience::Account { actor, .. } => actor.clone(),
            shared::web::console_session::Audience::Operator { operator_id } => operator_id.clone(),
        }
    }
}

/// Prefix of the administrator's pages of their account.
pub const ADMIN_BASE: &str = "/console/acct";

/// The path of the administrator's page of a subscription.
pub fn subscription_page(s: impl std::fmt::Display) -> String {
    format!("{ADMIN_BASE}/subscriptions/{}", encode(s))
}

pub(super) fn scope(account_id: &AccountId) -> Scope {
    Scope {
        account_id: account_id.clone(),
        base: ADMIN_BASE.into(),
        monitor: "/console/acct/events".into(),
        operator: false,
    }
}

/// Each subscription with its endpoint health (the operation the API's health route calls).
pub async fn health(
    state: &ApiState,
    subs: Vec<SubscriptionView>,
    now: Timestamp,
) -> Result<Vec<(SubscriptionView, EndpointHealth)>, ApiError> {
    let ops = state.ops();
    let mut out = Vec::with_capacity(subs.len());
    for sub in subs {
        let h = endpoint_health(&ops, &sub.account_id, &sub.id, now).await?;
        out.push((sub, h));
    }
    Ok(out)
}

/// A subscription's name (its id small beside it), linking to its page.
fn log_link(ctx: &Ctx, names: &Names, id: &shared::ids::SubscriptionId) -> Markup {
    html! { a data-testid="delivery-log-link" href=(ctx.url(&format!("/console/acct/subscriptions/{}", encode(id)))) { (names.subscription_markup(id)) } }
}

fn health_table(ctx: &Ctx, names: &Names, rows: &[(SubscriptionView, EndpointHealth)]) -> Markup {
    html! {
        h2 { "Endpoint health" }
        div class="table-wrap" {
            table id="endpoint-health" class="stack" {
                thead { tr { th { "Subscription" } th { "Status" } th { "Last 100 finished" } th { "Last 24 hours" } th { "Last failure" } th { "Dead in a row" } } }
                tbody {
                    @for (sub, h) in rows {
                        tr data-testid="health-row" data-subscription-id=(sub.id) {
                            td data-label="Subscription" { (log_link(ctx, names, &sub.id)) }
                            td data-label="Status" { (badge(sub.status.as_str())) }
                            td data-label="Last 100 finished" data-testid="success-rate" { (rate_text(&h.last_100)) }
                            td data-label="Last 24 hours" data-testid="success-rate-24h" { (rate_text(&h.last_24h)) }
                            td data-label="Last failure" data-testid="last-failure" { (last_failure(h)) }
                            td data-label="Dead in a row" data-testid="dead-run" { (dead_run(h)) }
                        }
                    }
                    @if rows.is_empty() { tr { td colspan="6" class="muted" { "No subscriptions." } } }
                }
            }
        }
    }
}

async fn overview(admin: Admin, State(state): S) -> Response {
    let ctx = &admin.ctx;
    let nav = nav_at("nav-overview");
    let (integrations, subs) = match integrations_and_subscriptions(&state, &admin.account_id).await
    {
        Ok(l) => l,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let names = Names::of(ctx.account_name.clone(), &integrations, &subs);
    let subscriptions = subscriptions_table(ctx, &names, &subs);
    let health = match health(&state, subs, ctx.now).await {
        Ok(h) => h,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let body = html! {
        main id="main" {
            h1 { @if let Some(n) = &ctx.account_name { (n) } @else { "Your account" } }
            (integrations_table(&integrations))
            (subscriptions)
            (health_table(ctx, &names, &health))
        }
    };
    html_response(StatusCode::OK, shell(Some((ctx, &nav)), "Overview", body))
}

/// The account's subscriptions with their filters, projected fields and retry policies.
fn subscriptions_table(ctx: &Ctx, names: &Names, subs: &[SubscriptionView]) -> Markup {
    html! {
        h2 { "Subscriptions" }
        div class="table-wrap" {
            table id="subscriptions" class="stack" {
                thead { tr { th { "Subscription" } th { "Integration" } th { "Status" } th { "Record types" } th { "Filter" } th { "Fields" } th { "Retry policy" } } }
                tbody {
                    @for s in subs {
                        tr data-testid="subscription-row" data-subscription-id=(s.id) {
                            td data-label="Subscription" { (log_link(ctx, names, &s.id)) }
                            td data-label="Integration" { (names.integration_markup(&s.integration_id)) }
                            td data-label="Status" { (badge(s.status.as_str())) }
                            td data-label="Record types" { (s.record_types.join(", ")) }
                            td data-label="Filter" data-testid="filter-text" { (filter_text(&s.filter)) }
                            td data-label="Fields" { (s.fields.join(", ")) }
                            td data-label="Retry policy" data-testid="retry-policy" { (retry_policy_text(&s.retry_policy)) }
                        }
                    }
                    @if subs.is_empty() { tr { td colspan="7" class="muted" { "No subscriptions." } } }
                }
            }
        }
    }
}

async fn events(admin: Admin, State(state): S, Query(p): Query<Params>) -> Response {
    let sc = scope(&admin.account_id);
    views::event_monitor(&state, &admin.ctx, &nav_at("nav-events"), Some(&sc), &p).await
}

async fn event(admin: Admin, State(state): S, Path(c): Path<String>) -> Response {
    let sc = scope(&admin.account_id);
    views::event_page(&state, &admin.ctx, &nav_at("nav-events"), &sc, &c).await
}

/// A subscription's page: its facts in words, the actions an administrator takes on it
/// (resume, replay), its deliveries (the Integration history's own read, scoped to the
/// session's account: another account's subscription is not found) and its audit history.
async fn delivery_log(
    admin: Admin,
    State(state): S,
    Path(s): Path<String>,
    Query(p): Query<Params>,
) -> Response {
    let ctx = &admin.ctx;
    let nav = nav_at("nav-overview");
    let sc = scope(&admin.account_id);
    let read = async {
        let id = named(&s, "subscription")?;
        SubscriptionFacts::read(&state, ctx, &admin.account_id, &id).await
    };
    let f = match read.await {
        Ok(f) => f,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let (deliveries, refused) =
        views::subscription_deliveries(&state, ctx, &sc, &f.sub.id, &p).await;
    let done = p.get("done").filter(|v| !v.trim().is_empty());
    let label = f
        .names
        .subscription(&f.sub.id)
        .unwrap_or("Subscription")
        .to_owned();
    let body = html! {
        main id="main" {
            p { a href=(ctx.url("/console/acct")) { "← Overview" } }
            h1 { (label) " " span class="id mono" { (f.sub.id) } }
            @if let Some(d) = done { p class="notice" role="status" data-testid="notice" { "Done: " (d) "." } }
            (subscription_panel(ctx, &f))
            (health_panel(&f.health))
            h2 { "Deliveries" }
            (deliveries)
            h2 { "Audit history" }
            (audit_table(&f.audit))
        }
    };
    let status = refused
        .as_ref()
        .map(|e| e.status())
        .unwrap_or(StatusCode::OK);
    html_response(status, shell(Some((ctx, &nav)), &label, body))
}

/// The subscription's facts in words, its answers, and the administrator's actions on it.
fn subscription_panel(ctx: &Ctx, f: &SubscriptionFacts) -> Markup {
    let (sub, names) = (&f.sub, &f.names);
    let here = subscription_page(&sub.id);
    html! {
        section class="panel" aria-label="Subscription" {
            dl class="facts" {
                dt { "Status" } dd data-testid="subscription-status" { (badge(sub.status.as_str())) }
                dt { "Integration" } dd { (names.integration_markup(&sub.integration_id)) }
                dt { "Record types" } dd { (sub.record_types.join(", ")) }
                dt { "Filter" } dd data-testid="filter-text" { (filter_text(&sub.filter)) }
                dt { "Fields sent" } dd { (sub.fields.join(", ")) }
                dt { "Retry policy" } dd data-testid="retry-policy" { (retry_policy_text(&sub.retry_policy)) " " span class="muted" { "(" (retry_policy_kind(&sub.retry_policy)) ")" } }
                dt { "Dead in a row" } dd { (sub.consecutive_dead) " of " (MAX_CONSECUTIVE_DEAD) " (pauses at " (MAX_CONSECUTIVE_DEAD) ")" }
                @if let Some(t) = &sub.paused_at { dt { "Paused" } dd { (when_text(Some(t))) } }
            }
            (answers_table(sub))
            div class="actions" {
                @if sub.status.may_be_resumed() {
                    a class="button" data-testid="resume-link" href=(ctx.url(&format!("{here}/resume"))) { "Resume…" }
                }
                a class="button" data-testid="recover-link" href=(ctx.url(&format!("{here}/recover"))) { "Recover what did not arrive…" }
                a class="button" data-testid="replay-link" href=(ctx.url(&format!("{here}/replay"))) { "Replay a window…" }
                a class="button secondary" href=(ctx.url("/console/acct/manage")) { "Manage (edit, send a test event)" }
            }
        }
    }
}

async fn delivery(
    admin: Admin,
    State(state): S,
    Path((s, c)): Path<(String, String)>,
    Query(p): Query<Params>,
) -> Response {
    let sc = scope(&admin.account_id);
    let done = p.get("done").map(String::as_str);
    views::delivery_page(&state, &admin.ctx, &nav_at("nav-events"), &sc, &s, &c, done).await
}

async fn attention(admin: Admin, State(state): S, Query(p): Query<Params>) -> Response {
    let sc = scope(&admin.account_id);
    attention_page(&state, &admin.ctx, &nav_at("nav-attention"), &sc, &p).await
}
