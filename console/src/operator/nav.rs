//! Where the operator pages are: the navigation (keeping the account in view), the paths of an
//! account's pages, the `?account=` a list is scoped to, and the picker a list shows without one.

use crate::page::{encode, html_response, shell, Ctx, Nav};
use crate::views::Scope;
use crate::Params;
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use shared::ids::AccountId;

/// The operator navigation, keeping the account in view.
pub fn nav(account: Option<&str>, current: &'static str) -> Nav {
    let q = account
        .map(|a| format!("?account={}", encode(a)))
        .unwrap_or_default();
    let mut items = vec![
        ("Accounts", "/console/op".to_string(), "nav-accounts"),
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
        (
            "Event types",
            "/console/op/catalog".to_string(),
            "nav-catalog",
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
pub(super) fn base(account: impl std::fmt::Display) -> String {
    format!("/console/op/accounts/{}", encode(account))
}

pub(super) fn scope(account_id: &AccountId) -> Scope {
    Scope {
        account_id: account_id.clone(),
        base: base(account_id),
        monitor: format!("/console/op/events?account={}", encode(account_id)),
        operator: true,
    }
}

/// An operator's page of one subscription (its Integration history).
pub(super) fn subscription_path(a: &str, s: &str) -> String {
    format!("{}/subscriptions/{}", base(a), encode(s))
}

pub(super) fn account_param(p: &Params) -> Option<String> {
    p.get("account")
        .map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty())
}

/// The page of a list that needs an account first: a form asking for its id.
pub(super) fn account_picker(ctx: &Ctx, nav: &Nav, title: &str, action: &str) -> Response {
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
