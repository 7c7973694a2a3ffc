//! `/console/acct/subscriptions/{s}/…`: an account administrator's confirmed actions on their
//! own account — retry a dead or failed delivery, resume a paused subscription, recover what did
//! not arrive since an instant, replay a window (the last two as jobs, within the account's
//! bounds: one running job per subscription, a few a day, refused with 429 otherwise) —
//! each a confirmation form (what will happen, the required reason) and its POST, which calls the
//! named operation the API calls, with the session's credential as the actor the audit records.
//! The account is the session's: another account's subscription or delivery is not found (404)
//! on the form and on the POST, and nothing changes. A refusal (409, 422, 429 …) is the API's
//! problem on the confirmation page.

use super::account::{subscription_page, Admin, ADMIN_BASE};
use super::account_parts::nav_at;
use super::confirm::{
    refuse_without_csrf, replay_explain, replay_fields, replay_window, resume_explain,
    retry_explain, Confirm,
};
use super::names::Names;
use super::page::{encode, error_page, form_fields, redirect, Ctx};
use super::views::delivery_path;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use maud::{html, Markup};
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::lifecycle::Status;
use shared::ids::{AccountId, ChangeId, SubscriptionId};
use shared::operations::recovery::recover::{
    start_account_replay, start_recovery, RecoverRequest, DEFAULT_RECOVERY_STATUSES,
    MAX_RECOVERY_AGE, RECOVERABLE,
};
use shared::operations::recovery::replay::ReplayRequest;
use shared::operations::recovery::resume::resume_subscription;
use shared::operations::recovery::retry::{
    retry_delivery_from, RetryRequest, ADMINISTRATOR_RETRIES,
};
use shared::store::delivery::Delivery;
use shared::web::extract::path_id;
use shared::web::problem::ApiError;
use shared::web::state::ApiState;
use std::sync::Arc;

type S = State<Arc<ApiState>>;

pub fn router() -> Router<Arc<ApiState>> {
    const SUB: &str = "/console/acct/subscriptions/{subscription_id}";
    Router::new()
        .route(
            &format!("{SUB}/deliveries/{{change_id}}/retry"),
            get(retry_form).post(retry),
        )
        .route(&format!("{SUB}/resume"), get(resume_form).post(resume))
        .route(&format!("{SUB}/replay"), get(replay_form).post(replay))
        .route(&format!("{SUB}/recover"), get(recover_form).post(recover))
        .route("/console/acct/replays/{job_id}", get(replay_job))
}

async fn replay_job(admin: Admin, State(state): S, Path(j): Path<String>) -> Response {
    let nav = nav_at("nav-overview");
    super::jobs::replay_job_page(&state, &admin.ctx, &nav, &admin.account_id, ADMIN_BASE, &j).await
}

/// The session's subscription named by the path (404 when it is not the account's).
async fn own_subscription(
    state: &ApiState,
    account_id: &AccountId,
    s: &str,
) -> Result<SubscriptionId, ApiError> {
    let id: SubscriptionId = path_id(s, "subscription")?;
    state.ops().subscription(account_id, &id).await?;
    Ok(id)
}

/// The session's delivery named by the path (404 when it is not the account's).
async fn own_delivery(
    state: &ApiState,
    account_id: &AccountId,
    s: &str,
    c: &str,
) -> Result<(SubscriptionId, ChangeId, Delivery), ApiError> {
    let subscription_id: SubscriptionId = path_id(s, "delivery")?;
    let change_id =
        shared::domain::pull_cursor::change_id(c).ok_or_else(|| ApiError::not_found("delivery"))?;
    let d = state
        .ops()
        .delivery(account_id, &subscription_id, &change_id)
        .await?;
    Ok((subscription_id, change_id, d))
}

/// The subscription's name as the confirmation shows it.
async fn named_subscription(state: &ApiState, admin: &Admin, s: &SubscriptionId) -> Markup {
    let names = Names::load(state, &admin.account_id)
        .await
        .unwrap_or_default();
    html! { p { "Subscription: " strong { (names.subscription_markup(s)) } } }
}

// ------------------------------------------------------------------------------------ retry

/// An administrator retries what ended badly: a dead or a failed delivery.
pub fn may_retry(status: DeliveryStatus) -> bool {
    ADMINISTRATOR_RETRIES.contains(&status)
}

fn retry_confirm(s: &str, c: &str, about: Markup) -> Confirm {
    Confirm {
        nav: nav_at("nav-events"),
        title: "Retry delivery",
        explain: html! { (about) (retry_explain()) },
        back: delivery_path(ADMIN_BASE, encode(s), encode(c)),
    }
}

async fn retry_form(
    admin: Admin,
    State(state): S,
    Path((s, c)): Path<(String, String)>,
) -> Response {
    let (sub, _, d) = match own_delivery(&state, &admin.account_id, &s, &c).await {
        Ok(found) => found,
        Err(e) => return error_page(&admin.ctx, &nav_at("nav-events"), &e),
    };
    let about = html! {
        (named_subscription(&state, &admin, &sub).await)
        p { "Status now: " (super::page::badge(d.status.as_str())) }
    };
    // (A delivery that is not dead or failed is refused when the form is posted, as the API
    // refuses it; the form says what it is now.)
    retry_confirm(&s, &c, about).page(&admin.ctx, html! {}, None)
}

fn not_retried(status: DeliveryStatus) -> String {
    format!("a {status} delivery is not retried from here: an administrator retries dead and failed deliveries")
}

async fn retry(
    admin: Admin,
    State(state): S,
    Path((s, c)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let confirm = retry_confirm(&s, &c, html! {});
    let actor = admin.actor();
    let account_id = admin.account_id.clone();
    confirm
        .run(&admin.ctx, &body, "retried", |reason| async move {
            let (subscription_id, change_id, d) = own_delivery(&state, &account_id, &s, &c).await?;
            if !may_retry(d.status) {
                return Err(ApiError::conflict(not_retried(d.status)));
            }
            let request = RetryRequest {
                account_id: &account_id,
                subscription_id: &subscription_id,
                change_id: &change_id,
                operator: &actor,
                reason: &reason,
            };
            // The operation checks the status again on the round it decides from, so a delivery
            // that moved since the read above is refused rather than restarted.
            Ok(retry_delivery_from(&state.ops(), request, Some(ADMINISTRATOR_RETRIES)).await?)
        })
        .await
}

// ----------------------------------------------------------------------------------- resume

fn resume_confirm(s: &str, about: Markup) -> Confirm {
    Confirm {
        nav: nav_at("nav-attention"),
        title: "Resume subscription",
        explain: html! { (about) (resume_explain()) },
        back: subscription_page(s),
    }
}

/// A confirmation's form GET: the subscription must be the account's.
async fn subscription_form(
    admin: &Admin,
    state: &ApiState,
    s: &str,
    confirm: impl FnOnce(Markup) -> Confirm,
    extra: Markup,
) -> Response {
    let sub = match own_subscription(state, &admin.account_id, s).await {
        Ok(sub) => sub,
        Err(e) => return error_page(&admin.ctx, &nav_at("nav-overview"), &e),
    };
    let about = named_subscription(state, admin, &sub).await;
    confirm(about).page(&admin.ctx, extra, None)
}

async fn resume_form(admin: Admin, State(state): S, Path(s): Path<String>) -> Response {
    subscription_form(&admin, &state, &s, |a| resume_confirm(&s, a), html! {}).await
}

async fn resume(admin: Admin, State(state): S, Path(s): Path<String>, body: Bytes) -> Response {
    let confirm = resume_confirm(&s, html! {});
    let actor = admin.actor();
    let account_id = admin.account_id.clone();
    confirm
        .run(&admin.ctx, &body, "resumed", |reason| async move {
            let subscription_id = own_subscription(&state, &account_id, &s).await?;
            let ops = state.ops();
            Ok(resume_subscription(&ops, &account_id, &subscription_id, &actor, &reason).await?)
        })
        .await
}

// ----------------------------------------------------------------------------------- replay

fn replay_confirm(s: &str, about: Markup) -> Confirm {
    Confirm {
        nav: nav_at("nav-overview"),
        title: "Replay a window",
        explain: html! { (about) (replay_explain()) },
        back: subscription_page(s),
    }
}

async fn replay_form(admin: Admin, State(state): S, Path(s): Path<String>) -> Response {
    subscription_form(
        &admin,
        &state,
        &s,
        |a| replay_confirm(&s, a),
        replay_fields("", ""),
    )
    .await
}

async fn replay(admin: Admin, State(state): S, Path(s): Path<String>, body: Bytes) -> Response {
    let ctx: &Ctx = &admin.ctx;
    let confirm = replay_confirm(&s, html! {});
    let fields = form_fields(&body);
    if let Some(r) = refuse_without_csrf(ctx, &confirm.nav, &fields) {
        return r;
    }
    let (from_text, to_text, window) = replay_window(&fields, state.clock.now());
    let actor = admin.actor();
    let started = async {
        let (from, to, reason) = window?;
        let subscription_id = own_subscription(&state, &admin.account_id, &s).await?;
        let request = ReplayRequest {
            account_id: &admin.account_id,
            subscription_id: &subscription_id,
            from,
            to,
            operator: &actor,
            reason: &reason,
        };
        Ok::<_, ApiError>(start_account_replay(&state.ops(), request).await?)
    };
    match started.await {
        Ok(job) => redirect(&ctx.url(&format!(
            "{ADMIN_BASE}/replays/{}",
            encode(job.job_id.as_str())
        ))),
        Err(e) => confirm.page(ctx, replay_fields(&from_text, &to_text), Some(&e)),
    }
}

// ---------------------------------------------------------------------------------- recover

fn recover_explain() -> Markup {
    html! {
        p { "Every delivery of this subscription in the chosen statuses whose change occurred since the instant (at most " (MAX_RECOVERY_AGE.as_secs() / 86_400) " days back) goes back to " (super::page::badge("pending")) ", as a job whose progress you can follow. Unlike a replay, what was delivered is not sent again." }
        p class="muted" { "One job runs at a time on a subscription, and an account starts a limited number a day." }
    }
}

fn recover_confirm(s: &str, about: Markup) -> Confirm {
    Confirm {
        nav: nav_at("nav-overview"),
        title: "Recover deliveries",
        explain: html! { (about) (recover_explain()) },
        back: subscription_page(s),
    }
}

/// The recovery's own fields: since when, and which statuses (dead and failed checked unless
/// the posted form said otherwise).
fn recover_fields(since: &str, chosen: &[DeliveryStatus]) -> Markup {
    html! {
        label for="since" { "Since (UTC)" input id="since" name="since" type="datetime-local" step="1" required value=(since); }
        fieldset class="retry" {
            legend { "Deliveries to restart" }
            @for st in RECOVERABLE {
                label for=(format!("status-{}", st.as_str())) {
                    span { (st.as_str()) }
                    input type="checkbox" id=(format!("status-{}", st.as_str())) name="statuses" value=(st.as_str()) checked[chosen.contains(&st)];
                }
            }
        }
    }
}

async fn recover_form(admin: Admin, State(state): S, Path(s): Path<String>) -> Response {
    subscription_form(
        &admin,
        &state,
        &s,
        |a| recover_confirm(&s, a),
        recover_fields("", &DEFAULT_RECOVERY_STATUSES),
    )
    .await
}

/// The posted statuses (as the operation names them; an unknown word is refused by name).
fn posted_statuses(fields: &[(String, String)]) -> Result<Vec<DeliveryStatus>, ApiError> {
    let mut out = Vec::new();
    for (_, v) in fields.iter().filter(|(k, _)| k == "statuses") {
        let st = DeliveryStatus::ALL
            .iter()
            .copied()
            .find(|s| s.as_str() == v.trim())
            .ok_or_else(|| {
                ApiError::field("statuses", format!("{v:?} is not a delivery status"))
            })?;
        out.push(st);
    }
    Ok(out)
}

async fn recover(admin: Admin, State(state): S, Path(s): Path<String>, body: Bytes) -> Response {
    let ctx: &Ctx = &admin.ctx;
    let confirm = recover_confirm(&s, html! {});
    let fields = form_fields(&body);
    if let Some(r) = refuse_without_csrf(ctx, &confirm.nav, &fields) {
        return r;
    }
    let since_text = super::page::field(&fields, "since")
        .unwrap_or_default()
        .to_owned();
    let statuses = posted_statuses(&fields);
    let chosen = statuses.as_ref().cloned().unwrap_or_default();
    let actor = admin.actor();
    let started = async {
        let reason = super::confirm::reason_of(&fields);
        let since = super::views::form_time(&since_text)
            .and_then(|t| shared::domain::time::Timestamp::parse_rfc3339(&t))
            .ok_or_else(|| {
                ApiError::field("since", "must be a date and time, e.g. 2024-05-01T00:00")
            });
        let (reason, since, statuses) = (reason?, since?, statuses?);
        let subscription_id = own_subscription(&state, &admin.account_id, &s).await?;
        let request = RecoverRequest {
            account_id: &admin.account_id,
            subscription_id: &subscription_id,
            since,
            statuses: &statuses,
            actor: &actor,
            reason: &reason,
        };
        Ok::<_, ApiError>(start_recovery(&state.ops(), request).await?)
    };
    match started.await {
        Ok(job) => redirect(&ctx.url(&format!(
            "{ADMIN_BASE}/replays/{}",
            encode(job.job_id.as_str())
        ))),
        Err(e) => confirm.page(ctx, recover_fields(&since_text, &chosen), Some(&e)),
    }
}
