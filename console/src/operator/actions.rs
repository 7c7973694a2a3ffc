//! The operator's confirmed actions — retry a delivery, resume a subscription, replay a window,
//! requeue a notification delivery: each a confirmation form (what will happen, the required
//! reason) and its POST, which checks the form with the API's own field rules and calls the
//! named operation the operator API calls. A refusal is the API's problem, shown on the
//! confirmation page again.

use super::access::{refuse_without_csrf, Op};
use super::nav::{base, nav, subscription_path};
use crate::confirm::{
    replay_explain, replay_fields, replay_window, resume_explain, retry_explain, Confirm,
};
use crate::page::{badge, encode, form_fields, redirect};
use crate::views::delivery_path;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use maud::{html, Markup};
use shared::notify::requeue::requeue as requeue_delivery;
use shared::notify::table::NotificationTable;
use shared::operations::recovery::replay::{start_job, ReplayRequest};
use shared::operations::recovery::resume::resume_subscription;
use shared::operations::recovery::retry::{retry_delivery, RetryRequest};
use shared::operations::resource_ids::{delivery_ids, subscription_ids};
use shared::web::extract::path_id;
use shared::web::problem::ApiError;
use shared::web::state::ApiState;
use std::sync::Arc;

type S = State<Arc<ApiState>>;

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
        .run(&op.ctx, &body, "retried", |reason| async move {
            let (account_id, subscription_id, change_id) = delivery_ids(&a, &s, &c)?;
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
        .run(&op.ctx, &body, "resumed", |reason| async move {
            let (account_id, subscription_id) = subscription_ids(&a, &s)?;
            let ops = state.ops();
            let resumed =
                resume_subscription(&ops, &account_id, &subscription_id, &operator, &reason)
                    .await?;
            Ok::<_, ApiError>(resumed)
        })
        .await
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
    let (from_text, to_text, window) = replay_window(&fields, state.clock.now());
    // The window and the reason refused as the API refuses a JSON body's, then the operation.
    let started = async {
        let (from, to, reason) = window?;
        let (account_id, subscription_id) = subscription_ids(&a, &s)?;
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
        .run(&op.ctx, &body, "requeued", |reason| async move {
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
