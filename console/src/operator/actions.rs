//! The operator's confirmed actions — retry a delivery, resume a subscription, replay a window,
//! requeue a notification delivery: each a confirmation form (what will happen, the required
//! reason) and its POST, which checks the form with the API's own field rules and calls the
//! named operation the operator API calls. A refusal is the API's problem, shown on the
//! confirmation page again.

use super::access::{refuse_without_csrf, Op};
use super::nav::{base, nav, subscription_path};
use crate::page::{
    badge, csrf_field, encode, field, form_fields, html_response, problem, redirect, shell, Ctx,
    Nav,
};
use crate::views::{delivery_path, form_time};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use serde_json::{Map, Value};
use shared::api::extract::{path_id, Fields};
use shared::api::operator::replays;
use shared::api::operator::{deliveries, subscriptions};
use shared::api::problem::ApiError;
use shared::api::state::ApiState;
use shared::notify::requeue::requeue as requeue_delivery;
use shared::notify::table::NotificationTable;
use shared::operations::recovery::replay::{start_job, ReplayRequest};
use shared::operations::recovery::resume::resume_subscription;
use shared::operations::recovery::retry::{retry_delivery, RetryRequest};
use std::sync::Arc;

type S = State<Arc<ApiState>>;

/// The form's `names` fields as a request's, for the API's own validation (the others, such as
/// `csrf`, left out).
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

pub(super) async fn retry_form(
    op: Op,
    Path((a, s, c)): Path<(String, String, String)>,
) -> Response {
    retry_confirm(&a, &s, &c).page(&op.ctx, html! {}, None)
}

pub(super) async fn retry(
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

fn resume_confirm(a: &str, s: &str) -> Confirm {
    Confirm {
        nav: nav(Some(a), "nav-attention"),
        title: "Resume subscription",
        explain: resume_explain(),
        back: subscription_path(a, s),
    }
}

pub(super) async fn resume_form(op: Op, Path((a, s)): Path<(String, String)>) -> Response {
    resume_confirm(&a, &s).page(&op.ctx, html! {}, None)
}

pub(super) async fn resume(
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

pub(super) async fn replay_form(op: Op, Path((a, s)): Path<(String, String)>) -> Response {
    replay_confirm(&a, &s).page(&op.ctx, replay_fields("", ""), None)
}

pub(super) async fn replay_create(
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

pub(super) async fn requeue_form(op: Op, Path((n, _key)): Path<(String, String)>) -> Response {
    requeue_confirm(&n).page(&op.ctx, html! {}, None)
}

pub(super) async fn requeue(
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
