//! `/console/acct/manage…`: an account administrator changes their integrations and
//! subscriptions through the same named operations as the management API's handlers (create an
//! integration or a subscription, edit a subscription's record types, filter, projected fields
//! and retry policy, rotate a webhook signing secret with a chosen grace, set a webhook's custom
//! headers and authentication ([`super::endpoint_form`]), issue a pull token, send
//! a test event to a webhook subscription's endpoint). An integration form's fields become the
//! request [`Fields`] the operation checks; a subscription form is read into the domain's drafts
//! ([`super::subscription_form`]) and checked by the same check and operations as the API's. Either way a refusal is the API's problem; a secret the API shows once is shown once
//! here too (the page is `no-store`).

use super::account::Admin;
use super::account_parts::integrations_and_subscriptions;
use super::integration_forms::{
    checked, endpoint_draft, integration_draft, integration_row, new_integration_form, overlap,
    rate_limit_draft, rotation_draft, Form,
};
use super::names::{filter_text, retry_policy_text, Names};
use super::operator::refuse_without_csrf;
use super::page::{
    badge, csrf_field, encode, error_page, field, form_fields, html_response, problem, shell,
    when_text, Ctx, Nav,
};
use super::subscription_form::{edited_subscription_request, new_subscription_request, refused};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup};
use shared::api::v1::integrations::IntegrationView;
use shared::api::v1::subscriptions::SubscriptionView;
use shared::api::v1::test_event::TestEventView;
use shared::domain::input::FieldErrors;
use shared::domain::integration_input::IntegrationEditDraft;
use shared::domain::retry::{RetryPolicy, MAX_RETRIES_LIMIT, MAX_RETRY_DELAY_SECS};
use shared::operations::account::integration_edit::{
    check_edit, edit_integration as edit_integration_op, EditedIntegration,
};
use shared::operations::account::integrations;
use shared::operations::account::token_format::OneTimeSecret;
use shared::operations::account::tokens::TokenRequest;
use shared::operations::account::{subscriptions, test_events};
use shared::operations::OpsError;
use shared::web::extract::path_id;
use shared::web::problem::ApiError;
use shared::web::state::ApiState;
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
            "/console/acct/manage/subscriptions/{subscription_id}/test-event",
            post(test_event),
        )
        .route(
            "/console/acct/manage/subscriptions/{subscription_id}/test-events/{test_event_id}",
            get(test_event_outcome),
        )
        .route(
            "/console/acct/manage/integrations/{integration_id}/rotate-secret",
            post(rotate_secret),
        )
        .route(
            "/console/acct/manage/integrations/{integration_id}/tokens",
            post(issue_token),
        )
        .route(
            "/console/acct/manage/integrations/{integration_id}/endpoint",
            post(edit_endpoint),
        )
        .route(
            "/console/acct/manage/integrations/{integration_id}/rate-limit",
            post(set_rate_limit),
        )
}

fn nav() -> Nav {
    let mut nav = super::account_parts::nav();
    nav.current = "nav-manage";
    nav
}

/// What an action did, as the page's notice tells it.
struct Done {
    what: &'static str,
    /// The secrets the API's answer shows once, by the names it gives them.
    shown_once: Vec<(&'static str, OneTimeSecret)>,
    /// While a rotation's previous secret still signs: until when (RFC 3339).
    previous_secret_expires_at: Option<String>,
}

impl Done {
    fn plain(what: &'static str) -> Self {
        Done {
            what,
            shown_once: Vec::new(),
            previous_secret_expires_at: None,
        }
    }

    /// An integration action, told from the view the API answers with.
    fn integration(what: &'static str, view: IntegrationView) -> Self {
        let shown_once = [
            ("signing_secret", view.signing_secret),
            ("token", view.token),
        ];
        Done {
            what,
            shown_once: shown_once
                .into_iter()
                .filter_map(|(name, secret)| Some((name, secret?)))
                .collect(),
            previous_secret_expires_at: view.previous_secret_expires_at,
        }
    }
}

/// What the management page shows above its lists: the outcome of the last action.
enum Shown<'a> {
    Nothing,
    Refused(&'a ApiError),
    Done(&'a Done),
    /// A test event's outcome, beside the subscription it went to.
    TestEvent(&'a TestEventView),
}

async fn manage(admin: Admin, State(state): S) -> Response {
    page(&state, &admin, Shown::Nothing).await
}

/// The console address of a test event (its outcome, polled until it is sent).
fn test_event_path(v: &TestEventView) -> String {
    format!(
        "/console/acct/manage/subscriptions/{}/test-events/{}",
        encode(v.subscription_id.as_str()),
        encode(&v.test_event_id)
    )
}

/// A test event's outcome (the htmx fragment, and the same markup in the full page). Until the
/// delivery function has sent it, htmx asks again every second (the fragment replaces itself);
/// without script, a link shows the page again with its outcome.
fn test_event_result(ctx: &Ctx, outcome: Result<&TestEventView, &ApiError>) -> Markup {
    match outcome {
        Err(e) => problem(&e.problem()),
        Ok(v) if v.status != "sent" => html! {
            @let poll = ctx.url(&test_event_path(v));
            div class="notice" role="status" data-testid="test-event-result" data-status=(v.status)
                hx-get=(poll) hx-trigger="load delay:1s" hx-swap="outerHTML" {
                p {
                    strong { "Test event " (v.status) }
                    " for " code { (v.url) } ": the delivery function signs and sends it. "
                    a href=(poll) data-testid="test-event-refresh" { "See its outcome" }
                }
            }
        },
        Ok(v) => html! {
            div class=(if v.delivered { "notice" } else { "problem" }) role="status"
                data-testid="test-event-result" data-status=(v.status) data-delivered=(v.delivered) {
                p {
                    strong { @if v.delivered { "Test event delivered" } @else { "Test event not delivered" } }
                    " to " code { (v.url) } " " (when_text(v.sent_at.as_deref()))
                }
                dl class="facts" {
                    dt { "HTTP status" } dd data-testid="test-event-status" { @if let Some(c) = v.http_status { (c) } @else { "none" } }
                    dt { "Outcome" } dd data-testid="test-event-class" { (badge(v.classification.as_deref().unwrap_or("none"))) }
                    dt { "Latency" } dd data-testid="test-event-latency" { (v.latency_ms.unwrap_or(0)) " ms" }
                    dt { "Message id" } dd class="mono" { (v.message_id) " (type " (v.event_type) ")" }
                    dt { "Response" } dd { @if let Some(r) = &v.response { pre data-testid="test-event-response" { (r) } } @else { "—" } }
                }
            }
            p class="muted" { "Nothing was recorded as a delivery; the audit history keeps the request." }
        },
    }
}

/// The management page, with the outcome of the last action.
async fn page(state: &ApiState, admin: &Admin, shown: Shown<'_>) -> Response {
    let ctx = &admin.ctx;
    let nav = nav();
    let (integrations, subs) = match integrations_and_subscriptions(state, &admin.account_id).await
    {
        Ok(l) => l,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let (refused, done, tested) = match &shown {
        Shown::Nothing => (None, None, None),
        Shown::Refused(e) => (Some(*e), None, None),
        Shown::Done(done) => (None, Some(*done), None),
        Shown::TestEvent(v) => (None, None, Some(*v)),
    };
    let webhook_url = |integration_id: &shared::ids::IntegrationId| {
        integrations
            .iter()
            .find(|i| &i.id == integration_id && i.method == "webhook")
            .and_then(|i| i.webhook_url.clone())
    };
    let names = Names::of(ctx.account_name.clone(), &integrations, &subs);
    let body = html! {
        main id="main" {
            h1 { "Integrations and subscriptions" }
            @if let Some(e) = refused { (problem(&e.problem())) }
            @if let Some(done) = done { (done_notice(ctx, done)) }
            h2 { "Integrations" }
            (integrations_table(ctx, &integrations))
            (new_integration_form(ctx))
            h2 { "Subscriptions" }
            @for s in &subs {
                (edit_subscription_form(ctx, &names, s))
                @if let Some(url) = webhook_url(&s.integration_id) {
                    (test_event_form(ctx, &names, s, &url, tested))
                }
            }
            (new_subscription_form(ctx, &integrations))
        }
    };
    let status = refused.map(|e| e.status()).unwrap_or(StatusCode::OK);
    html_response(status, shell(Some((ctx, &nav)), "Manage", body))
}

/// What the last action did, with the secrets it shows once.
fn done_notice(ctx: &Ctx, done: &Done) -> Markup {
    html! {
        div class="notice" role="status" data-testid="notice" {
            p { "Done: " (done.what) "." }
            @for (name, secret) in &done.shown_once {
                p { strong { (name) } " (shown only now, copy it): " code data-testid=(format!("shown-{name}")) { (secret.expose()) } }
            }
            (overlap(ctx, done.previous_secret_expires_at.as_deref()))
        }
    }
}

/// The account's integrations, each row with its actions.
fn integrations_table(ctx: &Ctx, integrations: &[IntegrationView]) -> Markup {
    html! {
        div class="table-wrap" {
            table id="manage-integrations" class="stack" {
                thead { tr { th { "Integration" } th { "Method" } th { "Actions" } } }
                tbody {
                    @for i in integrations { (integration_row(ctx, i)) }
                }
            }
        }
    }
}

/// A subscription's edit form.
fn edit_subscription_form(ctx: &Ctx, names: &Names, s: &SubscriptionView) -> Markup {
    html! {
        form class="panel" method="post" action=(ctx.url(&format!("/console/acct/manage/subscriptions/{}", encode(&s.id)))) aria-label=(format!("Edit subscription {}", names.subscription(&s.id).unwrap_or(s.id.as_str()))) data-testid="edit-subscription" {
            h3 { (names.subscription_markup(&s.id)) }
            (csrf_field(ctx))
            (subscription_fields(&format!("edit-{}", s.id), Some(s)))
            label { span { "Remove the filter" } input type="checkbox" name="remove_filter"; }
            div class="actions" {
                button type="submit" { "Save subscription" }
                a class="button secondary" href=(ctx.url(&format!("/console/acct/subscriptions/{}", encode(&s.id)))) data-testid="delivery-log-link" { "Delivery log" }
            }
        }
    }
}

/// A webhook subscription's test-event form, with the outcome of the test sent to it last.
fn test_event_form(
    ctx: &Ctx,
    names: &Names,
    s: &SubscriptionView,
    url: &str,
    tested: Option<&TestEventView>,
) -> Markup {
    html! {
        @let target = format!("test-result-{}", s.id);
        @let to = ctx.url(&format!("/console/acct/manage/subscriptions/{}/test-event", encode(&s.id)));
        form class="panel" method="post" action=(to) hx-post=(to) hx-target=(format!("#{target}")) hx-swap="innerHTML"
            aria-label=(format!("Send a test event for {}", names.subscription(&s.id).unwrap_or(s.id.as_str()))) data-testid="test-event-form" data-subscription-id=(s.id) {
            (csrf_field(ctx))
            p { "Send one signed test event (type " code { "rhythm.test" } ") to " code { (url) } " (the delivery function signs and sends it at once), and see what it answers. It is no delivery: nothing is counted." }
            div class="actions" { button type="submit" class="secondary" data-testid="send-test-event" { "Send test event" } }
            div id=(target) aria-live="polite" {
                @if let Some(v) = tested.filter(|v| v.subscription_id == s.id) { (test_event_result(ctx, Ok(v))) }
            }
        }
    }
}

/// The form creating a subscription on one of the account's integrations.
fn new_subscription_form(ctx: &Ctx, integrations: &[IntegrationView]) -> Markup {
    html! {
        form class="panel" method="post" action=(ctx.url("/console/acct/manage/subscriptions")) aria-label="New subscription" {
            h2 { "New subscription" }
            (csrf_field(ctx))
            label for="new-integration" { "Integration"
                select id="new-integration" name="integration_id" required {
                    @for i in integrations { option value=(i.id) { (i.name) " (" (i.method) ")" } }
                }
            }
            (subscription_fields("new", None))
            div class="actions" { button type="submit" data-testid="create-subscription" { "Create subscription" } }
        }
    }
}

fn subscription_fields(
    id: &str,
    s: Option<&shared::api::v1::subscriptions::SubscriptionView>,
) -> Markup {
    let record_types = s.map(|s| s.record_types.join(", ")).unwrap_or_default();
    let fields = s.map(|s| s.fields.join(", ")).unwrap_or_default();
    let filter = s
        .filter(|s| !s.filter.is_null())
        .map(|s| s.filter.to_string())
        .unwrap_or_default();
    let (exponential, max_retries, delay) = match s.map(|s| &s.retry_policy) {
        Some(RetryPolicy::Exponential {
            max_retries,
            retry_delay_secs,
        }) => (true, max_retries.to_string(), retry_delay_secs.to_string()),
        _ => (false, String::new(), String::new()),
    };
    let retry_statuses = s
        .map(|s| {
            let listed: Vec<String> = s.retry_statuses.iter().map(u16::to_string).collect();
            listed.join(", ")
        })
        .unwrap_or_default();
    let pause_on_gone = s.is_some_and(|s| s.pause_on_gone);
    html! {
        label for=(format!("{id}-types")) { "Record types (comma-separated)" input id=(format!("{id}-types")) name="record_types" value=(record_types); }
        label for=(format!("{id}-fields")) { "Projected fields (comma-separated)" input id=(format!("{id}-fields")) name="fields" value=(fields); }
        label for=(format!("{id}-filter")) { "Filter (the filter grammar's JSON; empty: every change)" textarea id=(format!("{id}-filter")) name="filter" { (filter) } }
        @if let Some(s) = s { p class="muted" data-testid="filter-text" { "Now: " (filter_text(&s.filter)) } }
        fieldset class="retry" {
            legend { "Retry policy" @if let Some(s) = s { span class="muted" data-testid="retry-policy" { " (now: " (retry_policy_text(&s.retry_policy)) ")" } } }
            label for=(format!("{id}-retry")) { "Kind"
                select id=(format!("{id}-retry")) name="retry_kind" {
                    @if s.is_none() { option value="" { "the standard schedule (default)" } }
                    option value="fixed_schedule" selected[s.is_some() && !exponential] { "standard: " (retry_policy_text(&RetryPolicy::FixedSchedule)) }
                    option value="exponential" selected[exponential] { "doubling waits: choose attempts and first wait" }
                }
            }
            label for=(format!("{id}-max-retries")) { "Attempts in all (doubling waits, 1 to " (MAX_RETRIES_LIMIT) ")" input id=(format!("{id}-max-retries")) name="max_retries" type="number" min="1" max=(MAX_RETRIES_LIMIT) value=(max_retries); }
            label for=(format!("{id}-retry-delay")) { "First wait in seconds (doubling waits)" input id=(format!("{id}-retry-delay")) name="retry_delay_secs" type="number" min="1" max=(MAX_RETRY_DELAY_SECS) value=(delay); }
        }
        fieldset class="answers" {
            legend { "Which answers retry" }
            input type="hidden" name="answers_shown" value="1";
            label for=(format!("{id}-retry-statuses")) { "Client errors (4xx) to retry on the schedule instead of dead at once (comma-separated, e.g. 401, 403)" input id=(format!("{id}-retry-statuses")) name="retry_statuses" value=(retry_statuses) data-testid="retry-statuses"; }
            label { span { "A 410 Gone pauses the subscription at once" } input type="checkbox" name="pause_on_gone" checked[pause_on_gone] data-testid="pause-on-gone"; }
        }
    }
}

/// The page again with an action's outcome: what it did, or its refusal (the API's problem).
async fn after(state: &ApiState, admin: &Admin, outcome: Result<Done, ApiError>) -> Response {
    match &outcome {
        Ok(done) => page(state, admin, Shown::Done(done)).await,
        Err(e) => page(state, admin, Shown::Refused(e)).await,
    }
}

async fn create_integration(admin: Admin, State(state): S, body: Bytes) -> Response {
    let form = form_fields(&body);
    if let Some(refused) = refuse_without_csrf(&admin.ctx, &form) {
        return refused;
    }
    let ops = state.account_ops();
    let created = async {
        let rules = ops.target_rules();
        let new = checked(&form, integration_draft, |d| d.check(&rules))?;
        integrations::create_integration(&ops, &admin.account_id, &admin.actor(), new).await
    };
    let created = created.await.map_err(ApiError::from).map(|c| {
        let view = IntegrationView::from(&c.integration)
            .with_signing_secret(c.signing_secret)
            .with_token(c.token);
        Done::integration("integration created", view)
    });
    after(&state, &admin, created).await
}

async fn create_subscription(admin: Admin, State(state): S, body: Bytes) -> Response {
    let form = form_fields(&body);
    if let Some(refused) = refuse_without_csrf(&admin.ctx, &form) {
        return refused;
    }
    let created = async {
        let (draft, read) = new_subscription_request(&form);
        let ops = state.account_ops();
        let checked = subscriptions::check_new_subscription(&ops, &admin.account_id, draft).await;
        let checked = match checked {
            Ok(checked) if read.is_empty() => checked,
            Ok(_) => return Err(refused(read, None)),
            Err(OpsError::Fields(errors)) => return Err(refused(read, Some(errors))),
            Err(e) => return Err(e.into()),
        };
        subscriptions::create_subscription(&ops, &admin.account_id, &admin.actor(), checked)
            .await
            .map_err(ApiError::from)
    };
    let created = created.await.map(|_| Done::plain("subscription created"));
    after(&state, &admin, created).await
}

async fn edit_subscription(
    admin: Admin,
    State(state): S,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let form = form_fields(&body);
    if let Some(refused) = refuse_without_csrf(&admin.ctx, &form) {
        return refused;
    }
    let saved = async {
        let id = path_id(&id, "subscription")?;
        let (draft, read) = edited_subscription_request(&form);
        let edit = match draft.check() {
            Ok(edit) if read.is_empty() => edit,
            Ok(_) => return Err(refused(read, None)),
            Err(errors) => return Err(refused(read, Some(errors))),
        };
        let ops = state.account_ops();
        subscriptions::update_subscription(&ops, &admin.account_id, &id, &admin.actor(), edit)
            .await
            .map_err(ApiError::from)
    };
    let saved = saved.await.map(|_| Done::plain("subscription saved"));
    after(&state, &admin, saved).await
}

/// An edit of an integration from one of the Manage page's forms, through the same operation
/// as the API's edit: the form's CSRF check, the draft the form makes, and what the page then
/// says.
async fn edit_integration(
    admin: Admin,
    state: &ApiState,
    id: &str,
    body: &Bytes,
    read: fn(&Form, &mut FieldErrors) -> IntegrationEditDraft,
    done: fn(EditedIntegration) -> Done,
) -> Response {
    let form = form_fields(body);
    if let Some(refused) = refuse_without_csrf(&admin.ctx, &form) {
        return refused;
    }
    let ops = state.account_ops();
    let edited = async {
        let id = path_id(id, "integration")?;
        let current = ops.integration_of(&admin.account_id, &id).await?;
        let edit = checked(&form, read, |d| check_edit(&ops, &current, d))?;
        Ok(edit_integration_op(&ops, current, &admin.actor(), edit).await?)
    };
    let outcome: Result<_, ApiError> = edited.await;
    after(state, &admin, outcome.map(done)).await
}

/// Sets (or, empty, removes) an integration's rate limit.
async fn set_rate_limit(
    admin: Admin,
    State(state): S,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let done = |_| Done::plain("rate limit saved");
    edit_integration(admin, &state, &id, &body, rate_limit_draft, done).await
}

async fn rotate_secret(
    admin: Admin,
    State(state): S,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let done = |edited: EditedIntegration| {
        let view = IntegrationView::from(&edited.integration)
            .with_signing_secret(edited.new_signing_secret);
        Done::integration("signing secret rotated", view)
    };
    edit_integration(admin, &state, &id, &body, rotation_draft, done).await
}

async fn edit_endpoint(
    admin: Admin,
    State(state): S,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let done = |edited: EditedIntegration| {
        let what = match edited.auth_dropped {
            true => "endpoint saved; its authentication was dropped because the endpoint moved to another origin (give it again to send it there)",
            false => "endpoint saved",
        };
        Done::integration(what, IntegrationView::from(&edited.integration))
    };
    edit_integration(admin, &state, &id, &body, endpoint_draft, done).await
}

async fn issue_token(
    admin: Admin,
    State(state): S,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let form = form_fields(&body);
    if let Some(refused) = refuse_without_csrf(&admin.ctx, &form) {
        return refused;
    }
    let request = TokenRequest {
        revoke_existing: field(&form, "revoke_existing") == Some("on"),
        ..TokenRequest::default()
    };
    let ops = state.account_ops();
    let issued = async {
        let id = path_id(&id, "integration")?;
        let (account_id, actor) = (&admin.account_id, &admin.actor());
        Ok(integrations::issue_integration_token(&ops, account_id, &id, actor, request).await?)
    };
    let issued: Result<_, ApiError> = issued.await;
    let issued = issued.map(|issued| Done {
        shown_once: vec![("token", issued.token)],
        ..Done::plain("pull token issued")
    });
    after(&state, &admin, issued).await
}

/// "Send test event": the API's own operation; htmx gets the outcome as a fragment (a refusal
/// inside it, so the swap happens), a plain form post the page with the outcome beside the
/// subscription (a refusal with its status).
async fn test_event(
    admin: Admin,
    State(state): S,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(refused) = refuse_without_csrf(&admin.ctx, &form_fields(&body)) {
        return refused;
    }
    let sent = async {
        let id = path_id(&id, "subscription")?;
        let ops = state.account_ops();
        let actor = admin.actor();
        let sent = test_events::send_test_event(&ops, &admin.account_id, &id, &actor).await?;
        Ok::<_, ApiError>(TestEventView::from(&sent))
    };
    let sent = sent.await;
    if admin.ctx.htmx {
        return html_response(StatusCode::OK, test_event_result(&admin.ctx, sent.as_ref()));
    }
    match &sent {
        Ok(v) => page(&state, &admin, Shown::TestEvent(v)).await,
        Err(e) => page(&state, &admin, Shown::Refused(e)).await,
    }
}

/// A test event's outcome as it stands: the fragment for htmx's polling, else the page with it
/// beside its subscription.
async fn test_event_outcome(
    admin: Admin,
    State(state): S,
    Path((subscription_id, test_event_id)): Path<(String, String)>,
) -> Response {
    let found = async {
        let subscription_id = path_id(&subscription_id, "subscription")?;
        let ops = state.account_ops();
        let found =
            test_events::test_event(&ops, &admin.account_id, &subscription_id, &test_event_id)
                .await?;
        Ok::<_, ApiError>(TestEventView::from(&found))
    };
    let found = found.await;
    if admin.ctx.htmx {
        return html_response(
            StatusCode::OK,
            test_event_result(&admin.ctx, found.as_ref()),
        );
    }
    match &found {
        Ok(v) => page(&state, &admin, Shown::TestEvent(v)).await,
        Err(e) => page(&state, &admin, Shown::Refused(e)).await,
    }
}
