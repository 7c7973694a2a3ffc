//! The confirmed actions' shared form, for both audiences: a confirmation page (what will
//! happen, the required reason, the action's own fields, the problem of a refused attempt) and
//! the POST's steps (the CSRF check, the reason refused as the API refuses a JSON body's, the
//! named operation, then back with `?done=`). A refusal (409, 422, 429 …) is the API's problem,
//! shown on the confirmation page again with the API's status.

use super::page::{badge, csrf_field, error_page, field, form_fields, html_response, problem};
use super::page::{redirect, shell, Ctx, Nav};
use super::views::form_time;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use serde_json::{Map, Value};
use shared::domain::time::Timestamp;
use shared::operations::recovery::replay::read_window;
use shared::operations::MAX_REASON_CHARS;
use shared::web::extract::Fields;
use shared::web::problem::ApiError;

/// The form's `names` fields as a request's, for the API's own validation (the others, such as
/// `csrf`, left out).
pub fn fields_of(fields: &[(String, String)], names: &[&str]) -> Fields {
    let mut map = Map::new();
    for name in names {
        if let Some(v) = field(fields, name) {
            map.insert((*name).to_owned(), Value::String(v.to_owned()));
        }
    }
    Fields::new(map)
}

/// The operator's or administrator's `reason`: required, at most [`MAX_REASON_CHARS`] (the
/// rule of every audited action, as the API reads a JSON body's).
fn reason(f: &mut Fields) -> Option<String> {
    f.required_text("reason", MAX_REASON_CHARS)
}

/// The form's `reason`, refused as the API refuses a JSON body's.
pub fn reason_of(fields: &[(String, String)]) -> Result<String, ApiError> {
    let mut f = fields_of(fields, &["reason"]);
    let reason = reason(&mut f);
    f.finish()?;
    reason.ok_or_else(|| ApiError::internal("validated reason missing"))
}

/// The 403 page of a POST whose `csrf` field is not the session's; `None` when it is.
pub fn refuse_without_csrf(ctx: &Ctx, nav: &Nav, fields: &[(String, String)]) -> Option<Response> {
    match field(fields, "csrf") {
        Some(token) if ctx.session.csrf_matches(token) => None,
        _ => Some(error_page(
            ctx,
            nav,
            &ApiError::forbidden(
                "the form's CSRF token is missing or not this session's; reload the page and try again",
            ),
        )),
    }
}

/// One confirmed action's page: where it sits, what it is called and does, where it returns.
pub struct Confirm {
    pub nav: Nav,
    pub title: &'static str,
    pub explain: Markup,
    /// The page the action returns to (with `?done=`), and the Cancel link.
    pub back: String,
}

impl Confirm {
    /// The confirmation form (with the action's own `extra` fields), or again with a refusal
    /// (answered with the refusal's status).
    pub fn page(self, ctx: &Ctx, extra: Markup, refused: Option<&ApiError>) -> Response {
        let status = refused.map(|e| e.status()).unwrap_or(StatusCode::OK);
        let back = ctx.url(&self.back);
        let body = html! {
            main id="main" class="narrow" {
                p { a href=(back) { "← Back" } }
                h1 { (self.title) }
                @if let Some(e) = refused { (problem(&e.problem())) }
                div class="panel" { (self.explain) }
                form method="post" class="panel" {
                    (csrf_field(ctx))
                    (extra)
                    label for="reason" { "Reason (recorded in the audit history)"
                        textarea id="reason" name="reason" required maxlength="1000" {}
                    }
                    div class="actions" {
                        button type="submit" data-testid="confirm" { "Confirm: " (self.title.to_lowercase()) }
                        a class="button secondary" href=(back) data-testid="cancel" { "Cancel" }
                    }
                }
            }
        };
        let mut response = html_response(status, shell(Some((ctx, &self.nav)), self.title, body));
        // A bound's refusal says when to try again, as the API's 429 does.
        if let Some(ApiError::QuotaExceeded {
            retry_after_secs, ..
        }) = refused
        {
            if let Ok(v) = axum::http::HeaderValue::from_str(&retry_after_secs.to_string()) {
                response
                    .headers_mut()
                    .insert(axum::http::header::RETRY_AFTER, v);
            }
        }
        response
    }

    /// The POST of an action whose form carries only its reason: the CSRF check, the reason
    /// (refused as the API refuses it), the operation (`run`) with it, then back with
    /// `?done=<done>`, or the confirmation again with the refusal (the API's problem).
    pub async fn run<Fut, R>(
        self,
        ctx: &Ctx,
        body: &Bytes,
        done: &str,
        run: impl FnOnce(String) -> Fut,
    ) -> Response
    where
        Fut: std::future::Future<Output = Result<R, ApiError>>,
    {
        let fields = form_fields(body);
        if let Some(r) = refuse_without_csrf(ctx, &self.nav, &fields) {
            return r;
        }
        let ran = match reason_of(&fields) {
            Ok(reason) => run(reason).await.map(|_| ()),
            Err(e) => Err(e),
        };
        match ran {
            Ok(()) => redirect(&ctx.url(&format!("{}?done={done}", self.back))),
            Err(e) => self.page(ctx, html! {}, Some(&e)),
        }
    }
}

/// What a retry does (both audiences' confirmation says it).
pub fn retry_explain() -> Markup {
    html! {
        p { "The delivery goes back to " (badge("pending")) " with its attempts reset; its attempt history is kept, and the change's event reopens. The adapter may receive the change again." }
    }
}

/// What a resume does.
pub fn resume_explain() -> Markup {
    html! { p { "The subscription becomes " (badge("active")) " and its run of dead deliveries starts again from zero. Changes skipped while it was paused stay skipped (replay a window to send existing deliveries again)." } }
}

/// A replay's window fields, filled with what was posted.
pub fn replay_fields(from: &str, to: &str) -> Markup {
    html! {
        label for="from" { "From (UTC, inclusive)" input id="from" name="from" type="datetime-local" step="1" required value=(from); }
        label for="to" { "To (UTC, exclusive)" input id="to" name="to" type="datetime-local" step="1" required value=(to); }
    }
}

/// What a replay does.
pub fn replay_explain() -> Markup {
    html! { p { "Every existing delivery of this subscription whose change occurred in the window (at most 7 days, within retained history) goes back to " (badge("pending")) ". Changes skipped while the subscription was paused have no delivery and are not replayed." } }
}

/// A posted replay form: its `from` and `to` as typed (to fill the form again), and the window
/// ([`read_window`]) and reason checked as the API checks a JSON body's.
pub fn replay_window(
    fields: &[(String, String)],
    now: Timestamp,
) -> (
    String,
    String,
    Result<(Timestamp, Timestamp, String), ApiError>,
) {
    let from_text = field(fields, "from").unwrap_or_default().to_owned();
    let to_text = field(fields, "to").unwrap_or_default().to_owned();
    let mut map = Map::new();
    for (name, text) in [("from", &from_text), ("to", &to_text)] {
        if let Some(t) = form_time(text) {
            map.insert(name.into(), Value::String(t));
        }
    }
    if let Some(r) = field(fields, "reason") {
        map.insert("reason".into(), Value::String(r.to_owned()));
    }
    let mut f = Fields::new(map);
    let (from, to): (Option<String>, Option<String>) = (f.required("from"), f.required("to"));
    let reason = reason(&mut f);
    let window = read_window(from.as_deref(), to.as_deref(), now).unwrap_or_else(|refused| {
        f.absorb(refused);
        None
    });
    let checked = f.finish().and_then(|()| {
        let ((from, to), reason) = window
            .zip(reason)
            .ok_or_else(|| ApiError::internal("validated replay fields missing"))?;
        Ok((from, to, reason))
    });
    (from_text, to_text, checked)
}
