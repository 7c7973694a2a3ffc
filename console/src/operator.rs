//! `/console/op/…`: the operators' pages (an operator session; an account's session gets 403).
//! Reads call the monitor's and the operations' functions; the actions (retry, replay, resume,
//! requeue) call the operator API's own handlers with the form's fields, so a refusal is the
//! API's problem, shown on the confirmation page.

use super::page::{
    badge, csrf_field, encode, error_page, field, form_fields, html_response, pager, problem,
    redirect, shell, when, when_text, Ctx, Nav, NotYours,
};
use super::views::{self, delivery_path, form_time, Scope};
use super::Params;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use maud::{html, Markup};
use serde_json::{Map, Value};
use shared::api::auth::Operator;
use shared::api::extract::{path_id, resource_id, Fields};
use shared::api::operator::audit::AuditView;
use shared::api::operator::deliveries;
use shared::api::operator::replays::{self, ReplayJobView};
use shared::api::operator::{notifications, subscriptions};
use shared::api::problem::ApiError;
use shared::api::state::ApiState;
use shared::api::v1::events::monitor_error;
use shared::api::v1::notices::NoticeDeliveryView;
use shared::api::v1::subscriptions::SubscriptionView;
use shared::domain::lifecycle::Status;
use shared::domain::notification_delivery::{requeue_allowed, FailureReason, NotificationStatus};
use shared::domain::subscription::MAX_CONSECUTIVE_DEAD;
use shared::ids::AccountId;
use shared::notify::requeue::requeue as requeue_delivery;
use shared::notify::table::NotificationTable;
use shared::operations::event_monitor::{
    attention_deliveries, paused_subscriptions, DeliveryLogEntry,
};
use shared::operations::recovery::replay::{start_job, ReplayRequest};
use shared::operations::recovery::resume::resume_subscription;
use shared::operations::recovery::retry::{retry_delivery, RetryRequest};
use shared::operations::recovery::{audit, replay};
use shared::store::audit::AuditScope;
use std::sync::Arc;

type S = State<Arc<ApiState>>;

pub fn router() -> Router<Arc<ApiState>> {
    const A: &str = "/console/op/accounts/{account_id}";
    Router::new()
        .route("/console/op", get(home))
        .route("/console/op/events", get(events))
        .route("/console/op/attention", get(attention))
        .route("/console/op/replays", get(replay_list))
        .route("/console/op/notifications", get(notification_lookup))
        .route("/console/op/notifications/{notice_id}", get(notification))
        .route(
            "/console/op/notifications/{notice_id}/deliveries/{delivery_key}/requeue",
            get(requeue_form).post(requeue),
        )
        .route(A, get(account_page))
        .route(&format!("{A}/events/{{change_id}}"), get(event))
        .route(
            &format!("{A}/subscriptions/{{subscription_id}}"),
            get(integration_history),
        )
        .route(
            &format!("{A}/subscriptions/{{subscription_id}}/deliveries/{{change_id}}"),
            get(delivery),
        )
        .route(
            &format!("{A}/subscriptions/{{subscription_id}}/deliveries/{{change_id}}/retry"),
            get(retry_form).post(retry),
        )
        .route(
            &format!("{A}/subscriptions/{{subscription_id}}/resume"),
            get(resume_form).post(resume),
        )
        .route(
            &format!("{A}/subscriptions/{{subscription_id}}/replay"),
            get(replay_form).post(replay_create),
        )
        .route(&format!("{A}/replays/{{job_id}}"), get(replay_job))
}

/// A signed-in operator.
pub struct Op {
    pub ctx: Ctx,
    pub operator: Operator,
}

impl FromRequestParts<Arc<ApiState>> for Op {
    /// No session (sign in), or an account's session (403).
    type Rejection = NotYours;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ApiState>,
    ) -> Result<Self, Self::Rejection> {
        let ctx = Ctx::from_request_parts(parts, state)
            .await
            .map_err(NotYours::SignIn)?;
        match ctx.operator_id() {
            Some(id) => {
                let operator = Operator { id: id.to_owned() };
                Ok(Op { ctx, operator })
            }
            None => Err(NotYours::Forbidden {
                ctx: Box::new(ctx),
                nav: super::account_parts::nav(),
                detail: "these pages are for operators",
            }),
        }
    }
}

/// The operator navigation, keeping the account in view.
pub fn nav(account: Option<&str>, current: &'static str) -> Nav {
    let q = account
        .map(|a| format!("?account={}", encode(a)))
        .unwrap_or_default();
    let mut items = vec![
        (
            "Event monitor",
            format!("/console/op/events{q}"),
            "nav-events",
        ),
        (
            "Needs attention",
            format!("/console/op/attention{q}"),
            "nav-attention",
        ),
        ("Replays", format!("/console/op/replays{q}"), "nav-replays"),
        (
            "Notifications",
            "/console/op/notifications".to_string(),
            "nav-notifications",
        ),
    ];
    if let Some(a) = account {
        items.push((
            "Account",
            format!("/console/op/accounts/{}", encode(a)),
            "nav-account",
        ));
    }
    Nav { items, current }
}

/// Prefix of an account's pages (its path segment as given).
fn base(account: impl std::fmt::Display) -> String {
    format!("/console/op/accounts/{}", encode(account))
}

fn scope(account_id: &AccountId) -> Scope {
    Scope {
        account_id: account_id.clone(),
        base: base(account_id),
        monitor: format!("/console/op/events?account={}", encode(account_id)),
        operator: true,
    }
}

/// The 403 page of a POST whose `csrf` field is not the session's; `None` when it is.
pub fn refuse_without_csrf(ctx: &Ctx, fields: &[(String, String)]) -> Option<Response> {
    match field(fields, "csrf") {
        Some(token) if ctx.session.csrf_matches(token) => None,
        _ => {
            let e = ApiError::forbidden(
                "the form's CSRF token is missing or not this session's; reload the page and try again",
            );
            let nav = if ctx.session.audience.is_operator() {
                nav(None, "")
            } else {
                super::account_parts::nav()
            };
            Some(error_page(ctx, &nav, &e))
        }
    }
}

/// A form's fields as the JSON object the API handler reads (`csrf` left out; empty values
/// left out, so a missing value is "required", as in the API).
/// The form's `names` fields as the fields of a JSON body, for the API's own validation.
fn fields_of(fields: &[(String, String)], names: &[&str]) -> Fields {
    let mut map = Map::new();
    for name in names {
        if let Some(v) = field(fields, name) {
            map.insert((*name).to_owned(), Value::String(v.to_owned()));
        }
    }
    Fields::new(map)
}

/// The form's `reason`, refused as the API refuses a JSON body's.
fn reason_of(fields: &[(String, String)]) -> Result<String, ApiError> {
    let mut f = fields_of(fields, &["reason"]);
    let reason = subscriptions::reason(&mut f);
    f.finish()?;
    reason.ok_or_else(|| ApiError::internal("validated reason missing"))
}

fn account_param(p: &Params) -> Option<String> {
    p.get("account")
        .map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty())
}

async fn home(op: Op) -> Response {
    let ctx = &op.ctx;
    let body = html! {
        main id="main" class="narrow" {
            h1 { "Operator console" }
            form class="panel" method="get" action=(ctx.url("/console/op/events")) {
                label for="account" { "Account id" input id="account" name="account" required; }
                div class="actions" { button type="submit" data-testid="open-account" { "Open its Event monitor" } }
            }
            form class="panel" method="get" action=(ctx.url("/console/op/notifications")) {
                label for="notice" { "Notice id" input id="notice" name="notice" required; }
                div class="actions" { button type="submit" data-testid="open-notice" { "Open the notification" } }
            }
        }
    };
    html_response(
        StatusCode::OK,
        shell(Some((ctx, &nav(None, ""))), "Operator console", body),
    )
}

async fn events(op: Op, State(state): S, Query(p): Query<Params>) -> Response {
    let account = account_param(&p);
    let nav = nav(account.as_deref(), "nav-events");
    let scope = match account
        .as_deref()
        .map(|a| path_id::<AccountId>(a, "account"))
    {
        Some(Ok(a)) => Some(scope(&a)),
        Some(Err(e)) => return error_page(&op.ctx, &nav, &e),
        None => None,
    };
    views::event_monitor(&state, &op.ctx, &nav, scope.as_ref(), &p).await
}

async fn event(op: Op, State(state): S, Path((a, c)): Path<(String, String)>) -> Response {
    let nav = nav(Some(&a), "nav-events");
    // An account path that is not an id names no event (as a lookup of it would find none).
    let Some(a) = resource_id::<AccountId>(&a) else {
        return error_page(&op.ctx, &nav, &ApiError::not_found("event"));
    };
    views::event_page(&state, &op.ctx, &nav, &scope(&a), &c).await
}

async fn delivery(
    op: Op,
    State(state): S,
    Path((a, s, c)): Path<(String, String, String)>,
    Query(p): Query<Params>,
) -> Response {
    let nav = nav(Some(&a), "nav-events");
    let done = p.get("done").map(String::as_str);
    let Some(a) = resource_id::<AccountId>(&a) else {
        return error_page(&op.ctx, &nav, &ApiError::not_found("delivery"));
    };
    views::delivery_page(&state, &op.ctx, &nav, &scope(&a), &s, &c, done).await
}

/// A confirmation page: what will happen, the required reason, the fields, and the problem of a
/// refused attempt.
fn confirm_page(
    ctx: &Ctx,
    nav: &Nav,
    title: &str,
    explain: Markup,
    extra: Markup,
    refused: Option<&ApiError>,
    back: &str,
) -> Response {
    let status = refused.map(|e| e.status()).unwrap_or(StatusCode::OK);
    let body = html! {
        main id="main" class="narrow" {
            p { a href=(ctx.url(back)) { "← Back" } }
            h1 { (title) }
            @if let Some(e) = refused { (problem(&e.problem())) }
            div class="panel" { (explain) }
            form method="post" class="panel" {
                (csrf_field(ctx))
                (extra)
                label for="reason" { "Reason (recorded in the audit history)"
                    textarea id="reason" name="reason" required maxlength="1000" {}
                }
                div class="actions" {
                    button type="submit" data-testid="confirm" { "Confirm: " (title.to_lowercase()) }
                    a class="button secondary" href=(ctx.url(back)) data-testid="cancel" { "Cancel" }
                }
            }
        }
    };
    html_response(status, shell(Some((ctx, nav)), title, body))
}

/// One confirmed action's page: where it sits, what it is called and does, where it returns.
struct Confirm {
    nav: Nav,
    title: &'static str,
    explain: Markup,
    back: String,
}

impl Confirm {
    /// The confirmation form (with the action's own `extra` fields), or again with a refusal.
    fn page(self, ctx: &Ctx, extra: Markup, refused: Option<&ApiError>) -> Response {
        confirm_page(
            ctx,
            &self.nav,
            self.title,
            self.explain,
            extra,
            refused,
            &self.back,
        )
    }

    /// The POST of an action whose form carries only its reason: the CSRF check, the reason
    /// (refused as the API refuses it), the operation (`run`) with it, then back with
    /// `?done=<done>`, or the confirmation again with the refusal (the API's problem).
    async fn run<Fut, R>(
        self,
        op: &Op,
        body: &Bytes,
        done: &str,
        run: impl FnOnce(String) -> Fut,
    ) -> Response
    where
        Fut: std::future::Future<Output = Result<R, ApiError>>,
    {
        let fields = form_fields(body);
        if let Some(r) = refuse_without_csrf(&op.ctx, &fields) {
            return r;
        }
        let ran = match reason_of(&fields) {
            Ok(reason) => run(reason).await.map(|_| ()),
            Err(e) => Err(e),
        };
        match ran {
            Ok(_) => redirect(&op.ctx.url(&format!("{}?done={done}", self.back))),
            Err(e) => self.page(&op.ctx, html! {}, Some(&e)),
        }
    }
}

fn retry_explain() -> Markup {
    html! {
        p { "The delivery goes back to " (badge("pending")) " with its attempts reset; its attempt history is kept, and the change's event reopens. The adapter may receive the change again." }
    }
}

fn retry_confirm(a: &str, s: &str, c: &str) -> Confirm {
    Confirm {
        nav: nav(Some(a), "nav-events"),
        title: "Retry delivery",
        explain: retry_explain(),
        back: delivery_path(&base(a), s, c),
    }
}

async fn retry_form(op: Op, Path((a, s, c)): Path<(String, String, String)>) -> Response {
    retry_confirm(&a, &s, &c).page(&op.ctx, html! {}, None)
}

async fn retry(
    op: Op,
    State(state): S,
    Path((a, s, c)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    let confirm = retry_confirm(&a, &s, &c);
    let operator = op.operator.id.clone();
    confirm
        .run(&op, &body, "retried", |reason| async move {
            let (account_id, subscription_id, change_id) = deliveries::delivery_path(&a, &s, &c)?;
            let request = RetryRequest {
                account_id: &account_id,
                subscription_id: &subscription_id,
                change_id: &change_id,
                operator: &operator,
                reason: &reason,
            };
            Ok::<_, ApiError>(retry_delivery(&state.ops(), request).await?)
        })
        .await
}

fn resume_explain() -> Markup {
    html! { p { "The subscription becomes " (badge("active")) " and its run of dead deliveries starts again from zero. Changes skipped while it was paused stay skipped (replay a window to send existing deliveries again)." } }
}

/// An operator's page of one subscription (its Integration history).
fn subscription_path(a: &str, s: &str) -> String {
    format!("{}/subscriptions/{}", base(a), encode(s))
}

fn resume_confirm(a: &str, s: &str) -> Confirm {
    Confirm {
        nav: nav(Some(a), "nav-attention"),
        title: "Resume subscription",
        explain: resume_explain(),
        back: subscription_path(a, s),
    }
}

async fn resume_form(op: Op, Path((a, s)): Path<(String, String)>) -> Response {
    resume_confirm(&a, &s).page(&op.ctx, html! {}, None)
}

async fn resume(
    op: Op,
    State(state): S,
    Path((a, s)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let confirm = resume_confirm(&a, &s);
    let operator = op.operator.id.clone();
    confirm
        .run(&op, &body, "resumed", |reason| async move {
            let (account_id, subscription_id) = subscriptions::subscription_path(&a, &s)?;
            let ops = state.ops();
            let resumed =
                resume_subscription(&ops, &account_id, &subscription_id, &operator, &reason)
                    .await?;
            Ok::<_, ApiError>(resumed)
        })
        .await
}

fn replay_fields(from: &str, to: &str) -> Markup {
    html! {
        label for="from" { "From (UTC, inclusive)" input id="from" name="from" type="datetime-local" step="1" required value=(from); }
        label for="to" { "To (UTC, exclusive)" input id="to" name="to" type="datetime-local" step="1" required value=(to); }
    }
}

fn replay_explain() -> Markup {
    html! { p { "Every existing delivery of this subscription whose change occurred in the window (at most 7 days, within retained history) goes back to " (badge("pending")) ". Changes skipped while the subscription was paused have no delivery and are not replayed." } }
}

fn replay_confirm(a: &str, s: &str) -> Confirm {
    Confirm {
        nav: nav(Some(a), "nav-replays"),
        title: "Replay a window",
        explain: replay_explain(),
        back: subscription_path(a, s),
    }
}

async fn replay_form(op: Op, Path((a, s)): Path<(String, String)>) -> Response {
    replay_confirm(&a, &s).page(&op.ctx, replay_fields("", ""), None)
}

async fn replay_create(
    op: Op,
    State(state): S,
    Path((a, s)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let fields = form_fields(&body);
    if let Some(r) = refuse_without_csrf(&op.ctx, &fields) {
        return r;
    }
    let from_text = field(&fields, "from").unwrap_or_default().to_owned();
    let to_text = field(&fields, "to").unwrap_or_default().to_owned();
    let mut map = Map::new();
    for (name, text) in [("from", &from_text), ("to", &to_text)] {
        if let Some(t) = form_time(text) {
            map.insert(name.into(), Value::String(t));
        }
    }
    if let Some(r) = field(&fields, "reason") {
        map.insert("reason".into(), Value::String(r.to_owned()));
    }
    // The window and the reason refused as the API refuses a JSON body's, then the operation.
    let started = async {
        let mut f = Fields::new(map);
        let window = replays::replay_fields(&mut f, state.clock.now());
        f.finish()?;
        let (from, to, reason) =
            window.ok_or_else(|| ApiError::internal("validated replay fields missing"))?;
        let (account_id, subscription_id) = subscriptions::subscription_path(&a, &s)?;
        let request = ReplayRequest {
            account_id: &account_id,
            subscription_id: &subscription_id,
            from,
            to,
            operator: &op.operator.id,
            reason: &reason,
        };
        Ok::<_, ApiError>(start_job(&state.ops(), request).await?)
    };
    let refused = match started.await {
        Ok(job) => {
            let at = format!("{}/replays/{}", base(&a), encode(job.job_id.as_str()));
            return redirect(&op.ctx.url(&at));
        }
        Err(e) => e,
    };
    replay_confirm(&a, &s).page(&op.ctx, replay_fields(&from_text, &to_text), Some(&refused))
}

/// Whether a notification delivery may be requeued, by the requeue's guard.
fn requeueable(d: &NoticeDeliveryView) -> bool {
    let reason = d
        .failure_reason
        .as_deref()
        .and_then(|code| FailureReason::from_code(code, d.failure_detail.as_deref()));
    NotificationStatus::parse(&d.status)
        .is_some_and(|status| requeue_allowed(status, reason.as_ref()).is_ok())
}

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

async fn replay_list(op: Op, State(state): S, Query(p): Query<Params>) -> Response {
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

async fn replay_job(op: Op, State(state): S, Path((a, j)): Path<(String, String)>) -> Response {
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

fn account_picker(ctx: &Ctx, nav: &Nav, title: &str, action: &str) -> Response {
    let body = html! {
        main id="main" class="narrow" {
            h1 { (title) }
            form class="panel" method="get" action=(ctx.url(action)) {
                label for="account" { "Account id" input id="account" name="account" required; }
                div class="actions" { button type="submit" data-testid="open-account" { "Open" } }
            }
        }
    };
    html_response(StatusCode::OK, shell(Some((ctx, nav)), title, body))
}

/// One line of a delivery list (Needs Attention, Integration history).
async fn attention(op: Op, State(state): S, Query(p): Query<Params>) -> Response {
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

async fn account_page(op: Op, State(state): S, Path(a): Path<String>) -> Response {
    let nav = nav(Some(&a), "nav-account");
    let ctx = &op.ctx;
    let account_id = match path_id(&a, "account") {
        Ok(a) => a,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let account =
        match shared::store::account::get(state.dynamo(), state.table(), &account_id).await {
            Ok(Some(a)) => a,
            Ok(None) => return error_page(ctx, &nav, &ApiError::not_found("account")),
            Err(e) => return error_page(ctx, &nav, &e.into()),
        };
    let sc = scope(&account_id);
    let lists = super::account_parts::integrations_and_subscriptions(&state, &account_id).await;
    let (integrations, subs) = match lists {
        Ok(l) => l,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let audit = audit::list(&state.ops(), AuditScope::Account(&account_id), 20, None).await;
    let audit: Vec<AuditView> = match audit {
        Ok((records, _)) => records.iter().map(AuditView::from).collect(),
        Err(e) => return error_page(ctx, &nav, &e.into()),
    };
    let body = html! {
        main id="main" {
            h1 { "Account " (account.name) }
            section class="panel" {
                dl class="facts" {
                    dt { "Id" } dd class="mono" data-testid="account-id" { (account.account_id) }
                    dt { "Administrators" } dd { (account.admin_emails.join(", ")) }
                    dt { "Created" } dd { (when(Some(account.created_at))) }
                }
            }
            (super::account_parts::integrations_table(&integrations))
            (subscriptions_table(ctx, &sc, &subs))
            h2 { "Audit history" }
            (audit_table(&audit))
        }
    };
    html_response(StatusCode::OK, shell(Some((ctx, &nav)), "Account", body))
}

/// The account's subscriptions; operators link each to its Integration history.
pub fn subscriptions_table(ctx: &Ctx, sc: &Scope, subs: &[SubscriptionView]) -> Markup {
    html! {
        h2 { "Subscriptions" }
        div class="table-wrap" {
            table id="subscriptions" class="stack" {
                thead { tr { th { "Subscription" } th { "Integration" } th { "Status" } th { "Record types" } th { "Fields" } th { "Retries" } th { "Dead in a row" } } }
                tbody {
                    @for s in subs {
                        tr data-testid="subscription-row" data-subscription-id=(s.id) {
                            td data-label="Subscription" { a class="mono" href=(ctx.url(&format!("{}/subscriptions/{}", sc.base, encode(&s.id)))) { (s.id) } }
                            td data-label="Integration" class="mono" { (s.integration_id) }
                            td data-label="Status" { (badge(s.status.as_str())) }
                            td data-label="Record types" { (s.record_types.join(", ")) }
                            td data-label="Fields" { (s.fields.join(", ")) }
                            td data-label="Retries" class="mono" { (serde_json::to_string(&s.retry_policy).unwrap_or_default()) }
                            td data-label="Dead in a row" { (s.consecutive_dead) " / " (MAX_CONSECUTIVE_DEAD) }
                        }
                    }
                    @if subs.is_empty() { tr { td colspan="7" class="muted" { "No subscriptions." } } }
                }
            }
        }
    }
}

fn audit_table(entries: &[AuditView]) -> Markup {
    html! {
        div class="table-wrap" {
            table id="audit" class="stack" {
                thead { tr { th { "When" } th { "Who" } th { "What" } th { "Why" } th { "Details" } } }
                tbody {
                    @for a in entries {
                        tr data-testid="audit-row" data-audit-id=(a.id) {
                            td data-label="When" { (when_text(Some(&a.at))) }
                            td data-label="Who" data-testid="audit-operator" { (a.operator) }
                            td data-label="What" data-testid="audit-action" { (a.action.as_str()) @if let Some(c) = &a.change_id { " " span class="mono" { (c) } } }
                            td data-label="Why" data-testid="audit-reason" { (a.reason) }
                            td data-label="Details" { @for (k, v) in &a.details { span class="mono" { (k) "=" (v) } " " } }
                        }
                    }
                    @if entries.is_empty() { tr { td colspan="5" class="muted" { "No audit entries." } } }
                }
            }
        }
    }
}

async fn integration_history(
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
    let base = format!("{}/subscriptions/{}", sc.base, encode(&subscription_id));
    let done = p.get("done").filter(|v| !v.trim().is_empty());
    let body = html! {
        main id="main" {
            h1 { "Integration history " span class="mono" { (sub.id) } }
            @if let Some(d) = done { p class="notice" role="status" data-testid="notice" { "Done: " (d) "." } }
            section class="panel" {
                dl class="facts" {
                    dt { "Status" } dd data-testid="subscription-status" { (badge(sub.status.as_str())) }
                    dt { "Integration" } dd class="mono" { (sub.integration_id) }
                    dt { "Record types" } dd { (sub.record_types.join(", ")) }
                    dt { "Fields" } dd { (sub.fields.join(", ")) }
                    dt { "Dead in a row" } dd { (sub.consecutive_dead) " / " (MAX_CONSECUTIVE_DEAD) " (pauses at " (MAX_CONSECUTIVE_DEAD) ")" }
                    @if let Some(t) = &sub.paused_at { dt { "Paused" } dd { (when_text(Some(t))) } }
                }
                div class="actions" {
                    a class="button" data-testid="replay-link" href=(ctx.url(&format!("{base}/replay"))) { "Replay a window…" }
                    @if sub.status.may_be_resumed() {
                        a class="button" data-testid="resume-link" href=(ctx.url(&format!("{base}/resume"))) { "Resume…" }
                    }
                    a class="button secondary" href=(ctx.url(&format!("/console/op/replays?account={}", encode(&account_id)))) { "Replay jobs" }
                }
            }
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

async fn notification_lookup(op: Op, Query(p): Query<Params>) -> Response {
    let nav = nav(None, "nav-notifications");
    match p.get("notice").map(|n| n.trim()).filter(|n| !n.is_empty()) {
        Some(n) => redirect(
            &op.ctx
                .url(&format!("/console/op/notifications/{}", encode(n))),
        ),
        None => {
            let ctx = &op.ctx;
            let body = html! {
                main id="main" class="narrow" {
                    h1 { "Notifications" }
                    form class="panel" method="get" action=(ctx.url("/console/op/notifications")) {
                        label for="notice" { "Notice id" input id="notice" name="notice" required; }
                        div class="actions" { button type="submit" data-testid="open-notice" { "Open" } }
                    }
                }
            };
            html_response(
                StatusCode::OK,
                shell(Some((ctx, &nav)), "Notifications", body),
            )
        }
    }
}

async fn notification(
    op: Op,
    State(state): S,
    Path(n): Path<String>,
    Query(p): Query<Params>,
) -> Response {
    let nav = nav(None, "nav-notifications");
    let ctx = &op.ctx;
    let view = match notifications::notice_with_deliveries(&state, &n).await {
        Ok(v) => v,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let notice = &view.notice;
    let progress = notice.progress.as_ref();
    let base = format!("/console/op/notifications/{}", encode(&notice.id));
    let body = html! {
        main id="main" {
            h1 { "Notification " span class="mono" { (notice.id) } }
            @if let Some(d) = p.get("done") { p class="notice" role="status" data-testid="notice" { "Done: " (d) "." } }
            section class="panel" {
                dl class="facts" {
                    dt { "Status" } dd { (badge(&notice.status)) }
                    dt { "Account" } dd class="mono" { (notice.account_id) }
                    dt { "Subject" } dd { (notice.subject) }
                    dt { "Reason" } dd { (notice.reason) }
                    dt { "Channels" } dd { (notice.channels.join(", ")) }
                    dt { "Created" } dd { (when_text(Some(&notice.created_at))) }
                    dt { "Deadline" } dd { (when_text(notice.deadline.as_deref())) }
                }
            }
            h2 { "Progress" }
            div id="progress" class="panel" {
                @if let Some(pr) = progress {
                    p { (pr.total) " deliveries" }
                    ul { @for (state, count) in pr.counts.iter().filter(|(_, c)| **c > 0) { li { (badge(state)) " " (count) } } }
                }
            }
            h2 { "Deliveries by channel" }
            div class="table-wrap" {
                table id="channel-deliveries" class="stack" {
                    thead { tr { th { "Channel" } th { "Recipient" } th { "Status" } th { "Provider" } th { "Failure" } th { "Updated" } th { "Action" } } }
                    tbody {
                        @for d in &view.deliveries {
                            tr data-testid="notification-delivery-row" data-delivery-key=(d.key) {
                                td data-label="Channel" { (d.channel) }
                                td data-label="Recipient" class="mono" { (d.recipient) }
                                td data-label="Status" { (badge(&d.status)) }
                                td data-label="Provider" { (d.provider.as_deref().unwrap_or("—")) " " span class="mono" { (d.provider_ref.as_deref().unwrap_or_default()) } }
                                td data-label="Failure" { (d.failure_reason.as_deref().unwrap_or_default()) " " (d.failure_detail.as_deref().or(d.last_error.as_deref()).or(d.skip_reason.as_deref()).unwrap_or_default()) }
                                td data-label="Updated" { (when_text(Some(&d.updated_at))) }
                                td data-label="Action" {
                                    @if requeueable(d) {
                                        a class="button" data-testid="requeue-link" href=(ctx.url(&format!("{base}/deliveries/{}/requeue", encode(&d.key)))) { "Requeue…" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            h2 { "Provider events" }
            div class="table-wrap" {
                table id="provider-events" class="stack" {
                    thead { tr { th { "Delivery" } th { "Event" } th { "When" } th { "Detail" } } }
                    tbody {
                        @for d in &view.deliveries {
                            @for h in &d.history {
                                tr data-testid="provider-event-row" {
                                    td data-label="Delivery" class="mono" { (d.key) }
                                    td data-label="Event" { (h["kind"].as_str().unwrap_or_default()) }
                                    td data-label="When" { (when_text(h["at"].as_str())) }
                                    td data-label="Detail" { (h["detail"].as_str().unwrap_or_default()) }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    html_response(
        StatusCode::OK,
        shell(Some((ctx, &nav)), "Notification", body),
    )
}

fn requeue_explain() -> Markup {
    html! { p { "The exhausted delivery goes back to " (badge("queued")) " with fresh dispatch work; the next dispatcher run sends it again." } }
}

fn requeue_confirm(n: &str) -> Confirm {
    Confirm {
        nav: nav(None, "nav-notifications"),
        title: "Requeue notification delivery",
        explain: requeue_explain(),
        back: format!("/console/op/notifications/{}", encode(n)),
    }
}

async fn requeue_form(op: Op, Path((n, _key)): Path<(String, String)>) -> Response {
    requeue_confirm(&n).page(&op.ctx, html! {}, None)
}

async fn requeue(
    op: Op,
    State(state): S,
    Path((n, k)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let confirm = requeue_confirm(&n);
    let operator = op.operator.id.clone();
    confirm
        .run(&op, &body, "requeued", |reason| async move {
            let notice_id = path_id(&n, "notification delivery")?;
            let delivery_key: String = path_id(&k, "notification delivery")?;
            let store = NotificationTable::from_config(&state.clients, &state.config);
            let now = state.clock.now();
            let requeued =
                requeue_delivery(&store, &notice_id, &delivery_key, &operator, &reason, now)
                    .await?;
            Ok::<_, ApiError>(requeued)
        })
        .await
}
