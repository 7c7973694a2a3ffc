//! `/console/acct/manage…`: an account administrator changes their integrations and
//! subscriptions through the management API's own handlers (create an integration or a
//! subscription, edit a subscription's record types, filter, projected fields and retry policy,
//! rotate a webhook signing secret, issue a pull token). A form's fields become the JSON body the
//! handler reads, so a refusal is the API's problem; a secret the API shows once is shown once
//! here too (the page is `no-store`).

use super::account::Admin;
use super::account_parts::integrations_and_subscriptions;
use super::operator::refuse_without_csrf;
use super::page::{
    csrf_field, encode, error_page, field, form_fields, html_response, problem, shell, Nav,
};
use crate::api::auth::AccountAuth;
use crate::api::extract::{ApiPath, Fields, JsonBody};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::api::v1::{integrations, subscriptions};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup};
use serde_json::{Map, Value};
use std::sync::Arc;

type S = State<Arc<ApiState>>;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/console/acct/manage", get(manage))
        .route(
            "/console/acct/manage/integrations",
            post(create_integration),
        )
        .route(
            "/console/acct/manage/subscriptions",
            post(create_subscription),
        )
        .route(
            "/console/acct/manage/subscriptions/{subscription_id}",
            post(edit_subscription),
        )
        .route(
            "/console/acct/manage/integrations/{integration_id}/rotate-secret",
            post(rotate_secret),
        )
        .route(
            "/console/acct/manage/integrations/{integration_id}/tokens",
            post(issue_token),
        )
}

fn nav() -> Nav {
    let mut nav = super::account_parts::nav();
    nav.current = "nav-manage";
    nav
}

fn auth(admin: &Admin) -> AccountAuth {
    let actor = match &admin.ctx.session.audience {
        super::session::Audience::Account { actor, .. } => actor.clone(),
        super::session::Audience::Operator { operator_id } => operator_id.clone(),
    };
    AccountAuth {
        account_id: admin.account_id.clone(),
        // The session's signed actor text stands in for the token (as the API records it).
        token_id: crate::ids::TokenId::from_stored(actor),
    }
}

/// A comma-separated list as a JSON array of trimmed words.
fn words(text: &str) -> Value {
    Value::Array(
        text.split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .map(|w| Value::String(w.to_owned()))
            .collect(),
    )
}

/// A JSON text field: its value, or the text itself (so the API names what is wrong with it).
fn json_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// The subscription fields of a form (only those given: an edit changes what it names).
fn subscription_body(fields: &[(String, String)], map: &mut Map<String, Value>) {
    let given = |name: &str| field(fields, name).map(str::trim).filter(|v| !v.is_empty());
    if let Some(v) = given("record_types") {
        map.insert("record_types".into(), words(v));
    }
    if let Some(v) = given("fields") {
        map.insert("fields".into(), words(v));
    }
    if let Some(v) = given("filter") {
        map.insert("filter".into(), json_text(v));
    }
    if field(fields, "remove_filter") == Some("on") {
        map.insert("filter".into(), Value::Null);
    }
    if let Some(v) = given("retry_policy") {
        map.insert("retry_policy".into(), json_text(v));
    }
}

/// The JSON body of a handler's success.
async fn body_json(response: Response) -> Value {
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

async fn manage(admin: Admin, State(state): S) -> Response {
    page(&state, &admin, None, None).await
}

/// The management page, with the outcome of the last action: a refusal, or what the API
/// answered (secrets it shows once included).
async fn page(
    state: &ApiState,
    admin: &Admin,
    refused: Option<&ApiError>,
    done: Option<(&str, Value)>,
) -> Response {
    let ctx = &admin.ctx;
    let nav = nav();
    let (integrations, subs) = match integrations_and_subscriptions(state, &admin.account_id).await
    {
        Ok(l) => l,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let shown_once = done.as_ref().map(|(_, v)| {
        ["signing_secret", "token"]
            .iter()
            .filter_map(|k| {
                v.get(*k)
                    .and_then(Value::as_str)
                    .map(|s| (*k, s.to_owned()))
            })
            .collect::<Vec<_>>()
    });
    let action = |path: &str| ctx.url(path);
    let body = html! {
        main id="main" {
            h1 { "Integrations and subscriptions" }
            @if let Some(e) = refused { (problem(&e.problem())) }
            @if let Some((what, answer)) = &done {
                div class="notice" role="status" data-testid="notice" {
                    p { "Done: " (what) "." }
                    @if let Some(secrets) = &shown_once {
                        @for (name, value) in secrets {
                            p { strong { (name) } " (shown only now, copy it): " code data-testid=(format!("shown-{name}")) { (value) } }
                        }
                    }
                    @if let Some(rotated) = answer.get("signing_secret_rotated_at").and_then(Value::as_str) {
                        p { "Rotated " (super::page::when_text(Some(rotated))) }
                    }
                }
            }
            h2 { "Integrations" }
            div class="table-wrap" {
                table id="manage-integrations" class="stack" {
                    thead { tr { th { "Integration" } th { "Name" } th { "Method" } th { "Actions" } } }
                    tbody {
                        @for i in &integrations {
                            tr data-testid="integration-row" data-integration-id=(i.id) {
                                td data-label="Integration" class="mono" { (i.id) }
                                td data-label="Name" { (i.name) }
                                td data-label="Method" { (i.method) }
                                td data-label="Actions" {
                                    div class="actions" {
                                        @if i.method == "webhook" {
                                            form method="post" action=(action(&format!("/console/acct/manage/integrations/{}/rotate-secret", encode(&i.id)))) {
                                                (csrf_field(ctx))
                                                button type="submit" class="secondary" data-testid="rotate-secret" { "Rotate signing secret" }
                                            }
                                        }
                                        form method="post" action=(action(&format!("/console/acct/manage/integrations/{}/tokens", encode(&i.id)))) {
                                            (csrf_field(ctx))
                                            label { span { "Revoke the others" } input type="checkbox" name="revoke_existing"; }
                                            button type="submit" class="secondary" data-testid="issue-token" { "Issue a pull token" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            form class="panel" method="post" action=(action("/console/acct/manage/integrations")) aria-label="New integration" {
                h2 { "New integration" }
                (csrf_field(ctx))
                label for="new-name" { "Name" input id="new-name" name="name" required; }
                label for="new-method" { "Delivery method"
                    select id="new-method" name="method" { option { "webhook" } option { "poll" } option { "internal" } }
                }
                label for="new-url" { "Webhook URL (webhook)" input id="new-url" name="webhook_url" type="url"; }
                label for="new-handler" { "Built-in handler (internal)" input id="new-handler" name="handler"; }
                label { span { "The integration may receive event data" } input type="checkbox" name="event_access_accepted"; }
                div class="actions" { button type="submit" data-testid="create-integration" { "Create integration" } }
            }
            h2 { "Subscriptions" }
            @for s in &subs {
                form class="panel" method="post" action=(action(&format!("/console/acct/manage/subscriptions/{}", encode(&s.id)))) aria-label=(format!("Edit subscription {}", s.id)) data-testid="edit-subscription" {
                    h3 class="mono" { (s.id) }
                    (csrf_field(ctx))
                    (subscription_fields(&format!("edit-{}", s.id), Some(s)))
                    label { span { "Remove the filter" } input type="checkbox" name="remove_filter"; }
                    div class="actions" { button type="submit" { "Save subscription" } }
                }
            }
            form class="panel" method="post" action=(action("/console/acct/manage/subscriptions")) aria-label="New subscription" {
                h2 { "New subscription" }
                (csrf_field(ctx))
                label for="new-integration" { "Integration"
                    select id="new-integration" name="integration_id" required {
                        @for i in &integrations { option value=(i.id) { (i.name) " (" (i.method) ")" } }
                    }
                }
                (subscription_fields("new", None))
                div class="actions" { button type="submit" data-testid="create-subscription" { "Create subscription" } }
            }
        }
    };
    let status = refused.map(|e| e.status()).unwrap_or(StatusCode::OK);
    html_response(status, shell(Some((ctx, &nav)), "Manage", body))
}

fn subscription_fields(
    id: &str,
    s: Option<&crate::api::v1::subscriptions::SubscriptionView>,
) -> Markup {
    let record_types = s.map(|s| s.record_types.join(", ")).unwrap_or_default();
    let fields = s.map(|s| s.fields.join(", ")).unwrap_or_default();
    let filter = s
        .filter(|s| !s.filter.is_null())
        .map(|s| s.filter.to_string())
        .unwrap_or_default();
    let retry = s
        .map(|s| serde_json::to_string(&s.retry_policy).unwrap_or_default())
        .unwrap_or_default();
    html! {
        label for=(format!("{id}-types")) { "Record types (comma-separated)" input id=(format!("{id}-types")) name="record_types" value=(record_types); }
        label for=(format!("{id}-fields")) { "Projected fields (comma-separated)" input id=(format!("{id}-fields")) name="fields" value=(fields); }
        label for=(format!("{id}-filter")) { "Filter (JSON, empty: every change)" textarea id=(format!("{id}-filter")) name="filter" { (filter) } }
        label for=(format!("{id}-retry")) { "Retry policy (JSON)" input id=(format!("{id}-retry")) name="retry_policy" value=(retry) placeholder="{\"kind\":\"fixed_schedule\"}"; }
    }
}

/// Runs a form's action: CSRF, then the handler; the page again with its outcome.
async fn outcome<F, R>(state: &ApiState, admin: &Admin, what: &str, run: F) -> Response
where
    F: std::future::Future<Output = Result<R, ApiError>>,
    R: IntoResponse,
{
    match run.await {
        Ok(r) => {
            let answer = body_json(r.into_response()).await;
            page(state, admin, None, Some((what, answer))).await
        }
        Err(e) => page(state, admin, Some(&e), None).await,
    }
}

async fn create_integration(admin: Admin, State(state): S, body: Bytes) -> Response {
    let fields = form_fields(&body);
    if let Some(r) = refuse_without_csrf(&admin.ctx, &fields) {
        return r;
    }
    let mut map = Map::new();
    for name in ["name", "method", "webhook_url", "handler"] {
        if let Some(v) = field(&fields, name)
            .map(str::trim)
            .filter(|v| !v.is_empty())
        {
            map.insert(name.into(), Value::String(v.to_owned()));
        }
    }
    map.insert(
        "event_access_accepted".into(),
        Value::Bool(field(&fields, "event_access_accepted") == Some("on")),
    );
    let run = integrations::create(
        auth(&admin),
        State(state.clone()),
        JsonBody(Fields::new(map)),
    );
    outcome(&state, &admin, "integration created", run).await
}

async fn create_subscription(admin: Admin, State(state): S, body: Bytes) -> Response {
    let fields = form_fields(&body);
    if let Some(r) = refuse_without_csrf(&admin.ctx, &fields) {
        return r;
    }
    let mut map = Map::new();
    if let Some(i) = field(&fields, "integration_id") {
        map.insert("integration_id".into(), Value::String(i.to_owned()));
    }
    subscription_body(&fields, &mut map);
    let run = subscriptions::create(
        auth(&admin),
        State(state.clone()),
        JsonBody(Fields::new(map)),
    );
    outcome(&state, &admin, "subscription created", run).await
}

async fn edit_subscription(
    admin: Admin,
    State(state): S,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let fields = form_fields(&body);
    if let Some(r) = refuse_without_csrf(&admin.ctx, &fields) {
        return r;
    }
    let mut map = Map::new();
    subscription_body(&fields, &mut map);
    let run = subscriptions::update(
        auth(&admin),
        State(state.clone()),
        ApiPath(id),
        JsonBody(Fields::new(map)),
    );
    outcome(&state, &admin, "subscription saved", run).await
}

async fn rotate_secret(
    admin: Admin,
    State(state): S,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let fields = form_fields(&body);
    if let Some(r) = refuse_without_csrf(&admin.ctx, &fields) {
        return r;
    }
    let map = Map::from_iter([("rotate_signing_secret".to_string(), Value::Bool(true))]);
    let run = integrations::update(
        auth(&admin),
        State(state.clone()),
        ApiPath(id),
        JsonBody(Fields::new(map)),
    );
    outcome(&state, &admin, "signing secret rotated", run).await
}

async fn issue_token(
    admin: Admin,
    State(state): S,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let fields = form_fields(&body);
    if let Some(r) = refuse_without_csrf(&admin.ctx, &fields) {
        return r;
    }
    let revoke = field(&fields, "revoke_existing") == Some("on");
    let map = Map::from_iter([("revoke_existing".to_string(), Value::Bool(revoke))]);
    let run = integrations::rotate_token(
        auth(&admin),
        State(state.clone()),
        ApiPath(id),
        JsonBody(Fields::new(map)),
    );
    outcome(&state, &admin, "pull token issued", run).await
}
