//! What every console page shares: the request context ([`Ctx`]: the session, the URL prefix,
//! whether htmx asked for a fragment), the page shell, the security headers, and the small
//! pieces every page uses (a status badge, a time, a problem, a pager).

use super::assets;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup, PreEscaped, DOCTYPE};
use shared::domain::time::Timestamp;
use shared::ids::AccountId;
use shared::web::console_session::{Audience, Session, SessionError, COOKIE};
use shared::web::lambda::StagePrefix;
use shared::web::problem::{ApiError, Problem};
use shared::web::state::ApiState;
use std::sync::Arc;

/// The Content-Security-Policy of every console response: only this origin's scripts, styles,
/// images and requests; no inline script or style; no framing; forms post back here only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// htmx's settings (its `<meta name="htmx-config">`): no indicator styles injected inline (the
/// CSP refuses inline styles), no eval, no script tags from swapped content.
const HTMX_CONFIG: &str = r#"{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,"historyCacheSize":0}"#;

/// Sets the console's security headers; pages that set no `Cache-Control` get `no-store`.
pub fn security_headers(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

/// The path prefix in front of `/console` (the API Gateway stage, or nothing).
pub fn prefix_of(parts: &Parts) -> String {
    parts
        .extensions
        .get::<StagePrefix>()
        .map(|p| p.0.clone())
        .unwrap_or_default()
}

/// A signed-in request.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Prefix of every console URL (`""`, or `/{stage}`).
    pub prefix: String,
    pub session: Session,
    /// htmx asked for a fragment (`HX-Request: true`).
    pub htmx: bool,
    pub now: Timestamp,
    /// The signed-in account's name (an administrator's session; read with the session).
    pub account_name: Option<String>,
}

impl Ctx {
    /// A console path (`/console/…`) with the prefix in front.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    pub fn operator_id(&self) -> Option<&str> {
        match &self.session.audience {
            Audience::Operator { operator_id } => Some(operator_id),
            Audience::Account { .. } => None,
        }
    }

    pub fn account_id(&self) -> Option<&AccountId> {
        match &self.session.audience {
            Audience::Account { account_id, .. } => Some(account_id),
            Audience::Operator { .. } => None,
        }
    }
}

/// The session cookie's value in a request, if any.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A request without a valid session: a page asks to sign in (GET), anything else is a 401.
pub struct SignIn {
    prefix: String,
    reason: Option<SessionError>,
    get: bool,
    /// A valid session refused for now (its account is over its request rate): that problem.
    refused: Option<ApiError>,
}

impl IntoResponse for SignIn {
    fn into_response(self) -> Response {
        if let Some(e) = self.refused {
            return e.into_response();
        }
        let login = format!("{}/console/login", self.prefix);
        if self.get && self.reason.is_none() {
            return redirect(&login);
        }
        let message = match self.reason {
            Some(e) => format!("{e}; sign in again."),
            None => "Sign in to use the console.".to_string(),
        };
        let body = html! {
            main id="main" class="narrow" {
                h1 { "Sign in" }
                p class="problem" role="alert" data-testid="session-refused" { (message) }
                p { a href=(login) data-testid="login-again" { "Go to the sign-in page" } }
            }
        };
        let status = match self.reason {
            Some(SessionError::Unavailable) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::UNAUTHORIZED,
        };
        html_response(status, shell(None, "Sign in", body))
    }
}

/// Why a request may not see one audience's pages: no session (sign in), or the other
/// audience's session (403, shown with that audience's navigation).
pub enum NotYours {
    SignIn(SignIn),
    Forbidden {
        ctx: Box<Ctx>,
        nav: Nav,
        detail: &'static str,
    },
}

impl IntoResponse for NotYours {
    fn into_response(self) -> Response {
        match self {
            NotYours::SignIn(s) => s.into_response(),
            NotYours::Forbidden { ctx, nav, detail } => {
                error_page(&ctx, &nav, &ApiError::forbidden(detail))
            }
        }
    }
}

impl FromRequestParts<Arc<ApiState>> for Ctx {
    type Rejection = SignIn;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ApiState>,
    ) -> Result<Self, Self::Rejection> {
        let prefix = prefix_of(parts);
        let get = parts.method == axum::http::Method::GET;
        let now = state.clock.now();
        let Some(value) = cookie(&parts.headers, COOKIE) else {
            return Err(SignIn {
                prefix,
                reason: None,
                get,
                refused: None,
            });
        };
        let session = shared::web::console_signin::check(state, value)
            .await
            .map_err(|e| SignIn {
                prefix: prefix.clone(),
                reason: Some(e),
                get,
                refused: None,
            })?;
        // An administrator's session counts against the account's request rate, as its tokens
        // do; an operator's does not.
        if let Audience::Account { account_id, .. } = &session.audience {
            shared::web::account_rate::admit(state, account_id)
                .await
                .map_err(|e| SignIn {
                    prefix: prefix.clone(),
                    reason: None,
                    get,
                    refused: Some(e),
                })?;
        }
        let htmx = parts
            .headers
            .get("hx-request")
            .is_some_and(|v| v.as_bytes() == b"true");
        // The account's name for the top bar (a page still renders, with the id, without it).
        let account_name = match &session.audience {
            Audience::Account { account_id, .. } if !htmx => {
                shared::store::account::get(state.dynamo(), state.table(), account_id)
                    .await
                    .ok()
                    .flatten()
                    .map(|a| a.name)
            }
            _ => None,
        };
        Ok(Ctx {
            prefix,
            session,
            htmx,
            now,
            account_name,
        })
    }
}

/// A `303 See Other` to `location`.
pub fn redirect(location: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// An HTML response.
pub fn html_response(status: StatusCode, markup: Markup) -> Response {
    let mut r = (status, markup.into_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r
}

/// One navigation entry: label, path, test id.
pub struct Nav {
    pub items: Vec<(&'static str, String, &'static str)>,
    pub current: &'static str,
}

/// The page shell: head (assets by hashed name), a skip link, the top bar with the navigation
/// and the signed-in audience, and the page's body.
pub fn shell(ctx: Option<(&Ctx, &Nav)>, title: &str, body: Markup) -> Markup {
    let prefix = ctx.map(|(c, _)| c.prefix.as_str()).unwrap_or_default();
    let asset = |f: &str| format!("{prefix}{}", assets::path(f));
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="htmx-config" content=(HTMX_CONFIG);
                meta name="referrer" content="no-referrer";
                title { (title) " · Rhythm delivery console" }
                link rel="stylesheet" href=(asset("console.css"));
                link rel="icon" href="data:,";
                script src=(asset("htmx.min.js")) defer {}
                script src=(asset("console.js")) defer {}
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                header class="top" {
                    a class="brand" href=(format!("{prefix}/console/")) { "Rhythm delivery" }
                    @if let Some((ctx, nav)) = ctx {
                        nav aria-label="Console" {
                            ul {
                                @for (label, path, id) in &nav.items {
                                    li {
                                        a href=(ctx.url(path)) data-testid=(id)
                                            aria-current=[(nav.current == *id).then_some("page")] { (label) }
                                    }
                                }
                            }
                        }
                        div class="who" {
                            span data-testid="signed-in-as" {
                                @match &ctx.session.audience {
                                    Audience::Operator { operator_id } => { "Operator " strong { (operator_id) } }
                                    Audience::Account { account_id, .. } => {
                                        "Administrator of "
                                        @if let Some(name) = &ctx.account_name { strong { (name) } " " span class="id mono" { (account_id) } }
                                        @else { strong class="mono" { (account_id) } }
                                    }
                                }
                            }
                            form method="post" action=(ctx.url("/console/logout")) {
                                input type="hidden" name="csrf" value=(ctx.session.csrf);
                                button type="submit" class="secondary" data-testid="logout" { "Sign out" }
                            }
                        }
                    }
                }
                (body)
            }
        }
    }
}

/// A status as a coloured badge (the class is the state's name; the text is the state itself,
/// so colour never carries the meaning alone).
pub fn badge(word: &str) -> Markup {
    html! { span class=(format!("badge s-{word}")) data-status=(word) { (word) } }
}

/// A time: the RFC 3339 instant in `datetime`, shown relative (and absolute on hover) by
/// `console.js` in the viewer's timezone; without script, the UTC text.
pub fn when(t: Option<Timestamp>) -> Markup {
    match t {
        Some(t) => {
            let rfc = t.to_rfc3339();
            html! { time datetime=(rfc) { (rfc) } }
        }
        None => html! { span class="muted" { "—" } },
    }
}

/// [`when`] of an RFC 3339 text (the API's views carry them as text).
pub fn when_text(t: Option<&str>) -> Markup {
    when(t.and_then(Timestamp::parse_rfc3339))
}

/// A problem document as the API would answer it: title, detail and each invalid field.
pub fn problem(p: &Problem) -> Markup {
    html! {
        div class="problem" role="alert" data-testid="problem" data-problem-type=(p.type_uri) {
            strong { (p.title) } " (" (p.status) ") "
            span data-testid="problem-detail" { (p.detail) }
            @if !p.errors.is_empty() {
                ul {
                    @for e in &p.errors { li { code { (e.field) } ": " (e.message) } }
                }
            }
        }
    }
}

/// A whole page for an API error (a refused read: 404, 422 …), with the problem's status.
pub fn error_page(ctx: &Ctx, nav: &Nav, e: &ApiError) -> Response {
    let p = e.problem();
    let status = e.status();
    let body = html! {
        main id="main" {
            h1 { (p.title) }
            (problem(&p))
        }
    };
    html_response(status, shell(Some((ctx, nav)), &p.title, body))
}

/// The hidden CSRF field of a form.
pub fn csrf_field(ctx: &Ctx) -> Markup {
    html! { input type="hidden" name="csrf" value=(ctx.session.csrf); }
}

/// "Older" link of a list page: `base` with `cursor=` set to `next`.
pub fn pager(ctx: &Ctx, base: &str, next: Option<&str>) -> Markup {
    let sep = if base.contains('?') { '&' } else { '?' };
    html! {
        nav class="pager" aria-label="Pages" {
            @if let Some(next) = next {
                a href=(format!("{}{sep}cursor={}", ctx.url(base), encode(next))) rel="next" data-testid="next-page" { "Next page →" }
            } @else {
                span class="muted" data-testid="last-page" { "End of the list" }
            }
        }
    }
}

/// Percent-encodes a query or path value (text or an id).
pub fn encode(text: impl std::fmt::Display) -> String {
    url::form_urlencoded::byte_serialize(text.to_string().as_bytes()).collect()
}

/// Text for HTML that is already escaped (only for constant markup).
pub fn raw(text: &'static str) -> PreEscaped<&'static str> {
    PreEscaped(text)
}

/// A form body's fields (`application/x-www-form-urlencoded`), in order.
pub fn form_fields(body: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

/// The first value of a form field.
pub fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A JSON text field: its value, or the text itself (so the API names what is wrong with it).
pub fn json_text(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_name_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; rhythm_console=old; __Host-rhythm_console=xyz.abc; b=2"),
        );
        assert_eq!(cookie(&h, COOKIE), Some("xyz.abc"));
        assert_eq!(cookie(&h, "c"), None);
    }

    #[test]
    fn interpolated_text_is_escaped() {
        let p = Problem {
            type_uri: "t".into(),
            title: "<b>".into(),
            status: 404,
            detail: "\"><script>alert(1)</script>".into(),
            errors: vec![],
            refused_recipients: vec![],
            limit: None,
            limit_value: None,
        };
        let html = problem(&p).into_string();
        assert!(!html.contains("<script>"));
        assert!(html.contains("&lt;script&gt;"));
    }
}
