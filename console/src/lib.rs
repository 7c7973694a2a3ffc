//! The web console: server-rendered HTML pages for operators and for each account's
//! administrators, served by the API function under `/console/` (no other infrastructure).
//! Pages are maud templates (every interpolated value is escaped); htmx (vendored, see
//! [`assets`]) refreshes the parts that change while work is in flight; `console.js` shows times
//! relative and absolute in the viewer's timezone. Every read and action calls the functions the
//! JSON API uses (the monitor's reads; for actions, the named operations the JSON handlers are
//! thin doors over), so the console refuses what the API refuses, with the API's problem detail.
//!
//! ```text
//! lib.rs                      router(), security headers layer, sign-in and sign-out, /console/,
//!                             the 404 page
//! page.rs                     the shell, the request context, badges, times, problems, pagers
//! views.rs                    the Event monitor, an event's Delivery log, a delivery's attempts
//!                             (shared by both audiences)
//! operator/mod.rs             /console/op/… routes
//! operator/access.rs          the signed-in operator (Op), the CSRF check of every form
//! operator/nav.rs             operator navigation, an account's page paths, the account picker
//! operator/accounts.rs        the start page: every account with its health over the last day
//! operator/monitor.rs         the Event monitor scoped to an account
//! operator/attention.rs       Needs Attention: the queue across accounts, and an account's own
//!                             (the account's pages show it too)
//! operator/account.rs         an account's page
//! operator/subscription.rs    a subscription's Integration history
//! operator/replays.rs         the replay job pages
//! operator/notifications.rs   the notification lookup, a notice's page
//! operator/actions.rs         confirmation forms and POSTs: retry, resume, replay, requeue
//! operator/audit.rs           the audit history table
//! account.rs                  /console/acct/… account administrator pages
//! account_actions.rs          the administrator's confirmed actions: retry, resume, replay,
//!                             recover (their own account only)
//! account_parts.rs            the account navigation, its integrations and subscriptions
//! confirm.rs                  the confirmation form and POST steps both audiences' actions share
//! health.rs                   a subscription's endpoint health: its figures and the 24 h chart
//!                             (inline SVG drawn on the server)
//! jobs.rs                     a replay or recovery job's page (both audiences)
//! names.rs                    names instead of ids: retry policies and filters in words,
//!                             subscriptions by their integration's name
//! manage.rs                   /console/acct/manage… integrations, subscriptions, secrets, tokens
//! subscription_form.rs        the Manage page's subscription forms read into the domain's drafts
//! assets.rs                   embedded, content-hashed static files
//! ```
//!
//! The session cookie, CSRF tokens and sign-in links are the API's
//! ([`shared::web::console_session`], [`shared::web::console_signin`]).
//!
//! # Page structure for the browser tests (kept stable)
//!
//! Every page: `main#main`, `h1`, `[data-testid=signed-in-as]`, `[data-testid=logout]`
//! (sign-out button), navigation links `nav-accounts`, `nav-events`, `nav-attention`, `nav-replays`,
//! `nav-notifications` (operator) or `nav-overview`, `nav-events`, `nav-attention`, `nav-manage`
//! (account).
//! A refusal is `[data-testid=problem]` with `[data-testid=problem-detail]` (the API's
//! `detail`) and `data-problem-type` (its `type`); a success message `[data-testid=notice]`.
//!
//! * Sign-in (`/console/login`): `#token` + `[data-testid=login-submit]`; a link
//!   (`/console/login?link=…`) shows `[data-testid=login-continue]` (one click signs in: the
//!   cookie is `SameSite=Strict`, so it is set by a same-site POST, not by the link's GET); a
//!   link signs in once, and a used one shows `[data-testid=problem]` (409).
//! * Event monitor (`/console/op/events?account=…`, `/console/acct/events`): filter form
//!   `#filter-account`, `#filter-status`, `#filter-internal`, `#filter-code`, `#filter-from`,
//!   `#filter-to`, `[data-testid=filter-apply]`; table `#events` whose rows are
//!   `tr[data-testid=event-row][data-event-id]` with `[data-testid=event-status]` and
//!   `[data-testid=internal-status]` (each a `.badge[data-status]`), the link
//!   `[data-testid=event-link]`; `#events-live` polls while an event is `new` or `partial`
//!   (`data-live="true"`); `[data-testid=next-page]`.
//! * Event (`…/events/{change_id}`): `#delivery-log`, rows `tr[data-testid=delivery-row]`
//!   `[data-delivery-id][data-subscription-id]` with `[data-testid=delivery-status]`
//!   (the stored status), `[data-testid=transmit-status]`, `[data-testid=attempts]`,
//!   `[data-testid=http-code]`, `[data-testid=last-error]`, `[data-testid=delivery-link]`.
//! * Delivery (`…/subscriptions/{s}/deliveries/{c}`): `#delivery` (`data-live` while in flight),
//!   `[data-testid=delivery-status]`, `#attempts` rows `tr[data-testid=attempt-row]`,
//!   `[data-testid=retry-link]` (operator).
//! * Confirmation forms (retry, replay, resume, requeue): `#reason` (required),
//!   `[data-testid=confirm]`; replay adds `#from`, `#to` (`datetime-local`, UTC).
//! * Operator start page (`/console/op`, `?q=`): search `#q` + `[data-testid=search-accounts]`;
//!   `#accounts` rows `tr[data-testid=account-row][data-account-id][data-troubled]` with
//!   `[data-testid=account-link]` (to the account's Event monitor), `health-delivered`,
//!   `health-dead`, `health-failed`, `health-paused`, `health-last-trouble`; `next-page`.
//! * The attention queue (`/console/op/attention`): `#attention-queue` rows
//!   `tr[data-testid=queue-row][data-kind][data-account-id]` with `[data-testid=queue-account]`
//!   and `[data-testid=queue-act]` (the form that acts); `next-page`.
//! * Needs Attention (`/console/op/attention?account=…`): `#paused-subscriptions`
//!   (`tr[data-testid=paused-row]`, `[data-testid=resume-link]`), `#attention-deliveries`.
//! * Any other path under `/console/`: the console's 404 page, `[data-testid=not-found]`.
//! * Integration history (`/console/op/accounts/{a}/subscriptions/{s}`): `#deliveries`,
//!   `#audit` (rows `tr[data-testid=audit-row]` with `[data-testid=audit-action]`,
//!   `[data-testid=audit-operator]`, `[data-testid=audit-reason]`), `[data-testid=replay-link]`.
//! * Replay job (`/console/op/accounts/{a}/replays/{j}`): `#replay-job` (`data-live` while it
//!   runs), `[data-testid=replay-status]`, `[data-testid=replay-counts]`.
//! * Notification (`/console/op/notifications/{n}`): `#progress`, `#channel-deliveries`
//!   (`[data-testid=requeue-link]`), `#provider-events`.
//! * Account overview (`/console/acct`): `#integrations`, `#subscriptions`, `#endpoint-health`
//!   (rows `tr[data-testid=health-row]`: `success-rate`, `last-failure`, `dead-run`); each
//!   subscription's id is a `[data-testid=delivery-log-link]`.
//! * Delivery log (`/console/acct/subscriptions/{s}`): `[data-testid=subscription-status]`, the
//!   filter form (`#filter-status`, `#filter-from`, `#filter-to`), `#deliveries` (rows as in an
//!   event's Delivery log, `[data-testid=delivery-link]` to the attempts), `next-page`.
//! * Manage (`/console/acct/manage`, `nav-manage`): `#manage-integrations` with
//!   `[data-testid=rotate-secret]` and `[data-testid=issue-token]`; new integration `#new-name`,
//!   `#new-method`, `#new-url`, `[data-testid=create-integration]`; new subscription
//!   `#new-integration`, `#new-types`, `#new-fields`, `#new-filter`, `#new-retry`,
//!   `[data-testid=create-subscription]`; `form[data-testid=edit-subscription]` per
//!   subscription; secrets shown once in `[data-testid=shown-signing_secret]` and
//!   `[data-testid=shown-token]`. The rotate form's grace is `[data-testid=rotation-grace]`; while
//!   a previous secret still signs, `[data-testid=secret-overlap]` holds its expiry (a relative
//!   `time` and an absolute `time[data-absolute]`). Per webhook subscription
//!   `form[data-testid=test-event-form][data-subscription-id]` with
//!   `[data-testid=send-test-event]`; its outcome `[data-testid=test-event-result]`
//!   (`data-status` `queued`/`sending`, polled by htmx every second with a
//!   `[data-testid=test-event-refresh]` link without script, then `sent` with `data-delivered`,
//!   `test-event-status`, `test-event-class`, `test-event-latency`, `test-event-response`) is
//!   swapped into `#test-result-{s}` (htmx) or rendered there.

pub mod account;
pub mod account_actions;
pub mod account_parts;
pub mod assets;
pub mod catalog;
pub mod confirm;
pub mod endpoint_form;
pub mod health;
pub mod integration_forms;
pub mod jobs;
pub mod manage;
pub mod names;
pub mod operator;
pub mod page;
pub mod subscription_form;
pub mod views;

use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::html;
use page::{field, form_fields, html_response, prefix_of, redirect, shell, Ctx};
use serde::Deserialize;
use shared::web::auth::{verify_token, Principal};
use shared::web::console_session::{Audience, Grounds, SessionError, COOKIE};
use shared::web::console_signin;
use shared::web::state::ApiState;
use std::collections::HashMap;
use std::sync::Arc;

/// Every path of the console's pages begins with this; they are HTML, not part of the JSON API
/// (`openapi.yaml` leaves them out: the JSON API's route table is read without them).
pub const PREFIX: &str = shared::web::console_signin::CONSOLE_PREFIX;

/// The console's pages (HTML). The JSON routes that issue their links are the API's
/// ([`shared::web::console_signin`]).
pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/console", get(to_index))
        .route("/console/", get(index))
        .route("/console/login", get(login_page).post(login))
        .route("/console/logout", post(logout))
        .route("/console/assets/{name}", get(assets::serve))
        .merge(operator::router())
        .merge(account::router())
        .merge(account_actions::router())
        .merge(manage::router())
        .merge(catalog::router())
        .route("/console/{*rest}", get(not_found).post(not_found))
        .layer(axum::middleware::from_fn(secure))
}

/// The security headers on every console response, and `no-store` on pages.
async fn secure(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    page::security_headers(response.headers_mut());
    response
}

async fn to_index(request: Request) -> Response {
    let (parts, _) = request.into_parts();
    redirect(&format!("{}/console/", prefix_of(&parts)))
}

/// `/console/`: the signed-in audience's home, or the sign-in page.
async fn index(ctx: Result<Ctx, page::SignIn>) -> Response {
    match ctx {
        Ok(ctx) if ctx.session.audience.is_operator() => redirect(&ctx.url("/console/op")),
        Ok(ctx) => redirect(&ctx.url("/console/acct")),
        Err(sign_in) => sign_in.into_response(),
    }
}

/// Any other path under `/console/` (read, or posted to): the console's own 404 page (with the
/// signed-in audience's navigation), not the JSON API's problem document.
async fn not_found(ctx: Result<Ctx, page::SignIn>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let home = format!("{}/console/", prefix_of(&parts));
    let body = html! {
        main id="main" class="narrow" {
            h1 { "Page not found" }
            p data-testid="not-found" { "The console has no page at this address." }
            p { a href=(home) data-testid="not-found-home" { "Go to the console's start page" } }
        }
    };
    let markup = match &ctx {
        Ok(ctx) if ctx.session.audience.is_operator() => {
            let nav = operator::nav(None, "");
            shell(Some((ctx, &nav)), "Page not found", body)
        }
        Ok(ctx) => shell(Some((ctx, &account_parts::nav())), "Page not found", body),
        Err(_) => shell(None, "Page not found", body),
    };
    html_response(StatusCode::NOT_FOUND, markup)
}

#[derive(Deserialize)]
struct LoginParams {
    link: Option<String>,
}

fn login_shell(status: StatusCode, message: Option<&str>, body: maud::Markup) -> Response {
    let page = html! {
        main id="main" class="narrow" {
            h1 { "Sign in to the Rhythm delivery console" }
            @if let Some(m) = message {
                p class="problem" role="alert" data-testid="problem" {
                    span data-testid="problem-detail" { (m) }
                }
            }
            (body)
        }
    };
    html_response(status, shell(None, "Sign in", page))
}

/// `GET /console/login`: the token form, or (with `?link=`) the link's confirmation (a link
/// used already, or expired, is refused here with a page that says so).
async fn login_page(
    State(state): State<Arc<ApiState>>,
    Query(params): Query<LoginParams>,
    request: Request,
) -> Response {
    let (parts, _) = request.into_parts();
    let action = format!("{}/console/login", prefix_of(&parts));
    if let Some(link) = params.link {
        return match console_signin::open_link(&state, &link).await {
            Ok(opened) => {
                let who = match &opened.audience {
                    Audience::Operator { operator_id } => format!("operator {operator_id}"),
                    Audience::Account { account_id, .. } => {
                        format!("administrator of account {account_id}")
                    }
                };
                login_shell(
                    StatusCode::OK,
                    None,
                    html! {
                        p { "This link signs you in as " strong data-testid="link-audience" { (who) } "." }
                        form method="post" action=(action) {
                            input type="hidden" name="link" value=(link);
                            button type="submit" data-testid="login-continue" { "Continue" }
                        }
                    },
                )
            }
            Err(e) => link_refused(e, &action),
        };
    }
    login_shell(StatusCode::OK, None, token_form(&action))
}

/// The page of a refused link: it was used already (409), or is not valid (401).
fn link_refused(e: SessionError, action: &str) -> Response {
    let status = match e {
        SessionError::Used => StatusCode::CONFLICT,
        SessionError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::UNAUTHORIZED,
    };
    login_shell(
        status,
        Some(&format!("{e}. Ask for a new link.")),
        token_form(action),
    )
}

fn token_form(action: &str) -> maud::Markup {
    html! {
        form method="post" action=(action) class="panel" {
            label for="token" { "Account token (rhy_acct_…), or the local operator token" }
            input id="token" name="token" type="password" autocomplete="off" required;
            div class="actions" {
                button type="submit" data-testid="login-submit" { "Sign in" }
            }
        }
        p class="muted" { "Operators in AWS: get a sign-in link from POST /operator/console-links with the identity provider's token." }
    }
}

/// Whether a sign-in form came from this console: the browser's `Sec-Fetch-Site` says so, or,
/// where a browser sends none, the `Origin` is this request's own (its `Host`).
fn same_origin(headers: &axum::http::HeaderMap) -> bool {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        return site == "same-origin" || site == "none";
    }
    let (Some(origin), Some(host)) = (text("origin"), text("host")) else {
        return false;
    };
    origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .is_some_and(|authority| authority.eq_ignore_ascii_case(host))
}

/// `POST /console/login` (`link=` or `token=`): opens a session, sets its cookie and goes
/// home. Refused when the form did not come from this console ([`same_origin`]).
async fn login(State(state): State<Arc<ApiState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let prefix = prefix_of(&parts);
    let action = format!("{prefix}/console/login");
    if !same_origin(&parts.headers) {
        return login_shell(
            StatusCode::FORBIDDEN,
            Some("sign-in forms are accepted from this console only"),
            token_form(&action),
        );
    }
    let Ok(bytes) = axum::body::to_bytes(body, shared::web::limits::MAX_BODY_BYTES).await else {
        return login_shell(
            StatusCode::PAYLOAD_TOO_LARGE,
            Some("the form is too large"),
            token_form(&action),
        );
    };
    let fields = form_fields(&bytes);
    let now = state.clock.now();
    let signed = if let Some(link) = field(&fields, "link") {
        let key = state.console_key(now).await;
        match key.open_link(link, now) {
            Ok(opened) => console_signin::sign_in(
                &state,
                opened.audience.clone(),
                &opened.grounds,
                Some(&opened),
            )
            .await
            .map_err(|e| link_refused(e, &action)),
            Err(e) => Err(link_refused(e, &action)),
        }
    } else {
        let refused = |message: String| {
            login_shell(
                StatusCode::UNAUTHORIZED,
                Some(&message),
                token_form(&action),
            )
        };
        match field(&fields, "token").map(str::trim) {
            Some(token) => match audience_of_token(&state, token).await {
                Ok((audience, grounds)) => {
                    console_signin::sign_in(&state, audience, &grounds, None)
                        .await
                        .map_err(|e| refused(e.to_string()))
                }
                Err(message) => Err(refused(message)),
            },
            None => Err(refused("give a token or open a sign-in link".to_string())),
        }
    };
    let (value, session) = match signed {
        Ok(s) => s,
        Err(page) => return page,
    };
    let mut response = redirect(&format!("{prefix}/console/"));
    set_cookie(&mut response, &value, session.expires.since(now).as_secs());
    response
}

/// Sets (or, with an empty value and no age, clears) the session cookie. `__Host-` cookies
/// are `Secure`, `Path=/` and have no `Domain`: the browser keeps them to this origin.
fn set_cookie(response: &mut Response, value: &str, max_age: u64) {
    let cookie =
        format!("{COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; Secure; SameSite=Strict");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
}

/// The audience a pasted token signs in as, and its grounds: an account token's account, or the
/// local operator (a static operator token). Integration tokens are the adapters', not a
/// person's.
async fn audience_of_token(state: &ApiState, token: &str) -> Result<(Audience, Grounds), String> {
    let refused = "the token is not valid".to_string();
    if token.starts_with("rhy_") {
        return match verify_token(state, token).await {
            Ok(Principal::Account {
                account_id,
                token_id,
            }) => Ok((
                Audience::Account {
                    account_id,
                    actor: format!("token {token_id}"),
                },
                Grounds::Token(token_id),
            )),
            Ok(Principal::Integration { .. } | Principal::Publisher { .. }) => {
                Err("only an account token signs in; integration and publish tokens cannot".into())
            }
            Err(_) => Err(refused),
        };
    }
    let parts = axum::http::Request::builder()
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(())
        .map_err(|_| refused.clone())?
        .into_parts()
        .0;
    match &state.operator_auth {
        shared::web::operator_auth::OperatorAuth::StaticToken { .. } => state
            .operator_auth
            .identify(&parts)
            .map(|o| {
                (
                    Audience::Operator {
                        operator_id: o.id.clone(),
                    },
                    Grounds::Operator {
                        operator_id: o.id,
                        expires: o.expires,
                    },
                )
            })
            .map_err(|_| refused),
        // In AWS operators sign in with a link (the identity provider's JWT is checked by the
        // gateway on /operator/*, not here).
        shared::web::operator_auth::OperatorAuth::GatewayJwt { .. } => Err(refused),
    }
}

/// `POST /console/logout` (CSRF-checked): ends the session (its stored item goes, so the cookie
/// is refused from now on, wherever it was copied) and clears the cookie.
async fn logout(State(state): State<Arc<ApiState>>, ctx: Ctx, body: axum::body::Bytes) -> Response {
    if let Some(r) = operator::refuse_without_csrf(&ctx, &form_fields(&body)) {
        return r;
    }
    if let Err(e) = console_signin::sign_out(&state, &ctx.session).await {
        let nav = if ctx.session.audience.is_operator() {
            operator::nav(None, "")
        } else {
            account_parts::nav()
        };
        return page::error_page(
            &ctx,
            &nav,
            &shared::web::problem::ApiError::internal(e.to_string()),
        );
    }
    let mut response = redirect(&ctx.url("/console/login"));
    set_cookie(&mut response, "", 0);
    response
}

/// A console login link's path for `audience` (the demo prints these for the local console).
pub async fn login_link(state: &ApiState, audience: Audience, grounds: &Grounds) -> String {
    shared::web::console_signin::issue(state, audience, grounds)
        .await
        .url
}

/// Unused query parameters are ignored by the pages (a bookmarked URL keeps working).
pub type Params = HashMap<String, String>;
