//! `/console/op/…`: the operators' pages (an operator session; an account's session gets 403).
//! Reads call the monitor's and the operations' functions; the actions (retry, replay, resume,
//! requeue) check the form with the API's own field rules and call the named operations the
//! operator API calls, so a refusal is the API's problem, shown on the confirmation page.
//!
//! * [`access`] — the signed-in operator ([`Op`]) and the CSRF check of every console form.
//! * [`nav`] — the navigation, an account's page paths, the account picker.
//! * [`accounts`] — the start page: every account with its health over the last day.
//! * [`monitor`] — the Event monitor scoped to an account.
//! * [`attention`] — Needs Attention: the queue across accounts, and one account's.
//! * [`account`] — an account's page.
//! * [`subscription`] — a subscription's Integration history.
//! * [`replays`] — the replay job pages.
//! * [`notifications`] — the notification lookup and a notice's page.
//! * [`actions`] — the confirmation forms and their POSTs (retry, resume, replay, requeue).
//! * [`audit`] — the audit history table.

mod access;
mod account;
mod accounts;
mod actions;
mod attention;
mod audit;
mod monitor;
mod nav;
mod notifications;
mod replays;
mod subscription;

pub use access::{refuse_without_csrf, Op};
pub use attention::attention_page;
pub use audit::audit_table;
pub use nav::nav;

use axum::routing::get;
use axum::Router;
use shared::web::state::ApiState;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    const A: &str = "/console/op/accounts/{account_id}";
    Router::new()
        .route("/console/op", get(accounts::home))
        .route("/console/op/events", get(monitor::events))
        .route("/console/op/attention", get(attention::attention))
        .route("/console/op/replays", get(replays::replay_list))
        .route(
            "/console/op/notifications",
            get(notifications::notification_lookup),
        )
        .route(
            "/console/op/notifications/{notice_id}",
            get(notifications::notification),
        )
        .route(
            "/console/op/notifications/{notice_id}/deliveries/{delivery_key}/requeue",
            get(actions::requeue_form).post(actions::requeue),
        )
        .route(A, get(account::account_page))
        .route(&format!("{A}/events/{{change_id}}"), get(monitor::event))
        .route(
            &format!("{A}/subscriptions/{{subscription_id}}"),
            get(subscription::integration_history),
        )
        .route(
            &format!("{A}/subscriptions/{{subscription_id}}/deliveries/{{change_id}}"),
            get(monitor::delivery),
        )
        .route(
            &format!("{A}/subscriptions/{{subscription_id}}/deliveries/{{change_id}}/retry"),
            get(actions::retry_form).post(actions::retry),
        )
        .route(
            &format!("{A}/subscriptions/{{subscription_id}}/resume"),
            get(actions::resume_form).post(actions::resume),
        )
        .route(
            &format!("{A}/subscriptions/{{subscription_id}}/replay"),
            get(actions::replay_form).post(actions::replay_create),
        )
        .route(&format!("{A}/replays/{{job_id}}"), get(replays::replay_job))
}
