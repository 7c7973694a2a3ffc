//! An account as an operator sees it: its administrators, integrations, subscriptions (each
//! linked to its Integration history) and recent audit history.

use super::access::Op;
use super::audit::audit_table;
use super::nav::{nav, scope};
use crate::names::{filter_text, retry_policy_text, Names};
use crate::page::{badge, encode, error_page, html_response, shell, when, Ctx};
use crate::views::Scope;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use shared::api::operator::audit::AuditView;
use shared::api::v1::subscriptions::SubscriptionView;
use shared::domain::lifecycle::Status;
use shared::domain::subscription::MAX_CONSECUTIVE_DEAD;
use shared::operations::recovery::audit;
use shared::store::audit::AuditScope;
use shared::web::extract::path_id;
use shared::web::problem::ApiError;
use shared::web::state::ApiState;
use std::sync::Arc;

type S = State<Arc<ApiState>>;

pub(super) async fn account_page(op: Op, State(state): S, Path(a): Path<String>) -> Response {
    let nav = nav(Some(&a), "nav-account");
    let ctx = &op.ctx;
    let account_id = match path_id(&a, "account") {
        Ok(a) => a,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let account =
        match shared::store::account::get(state.dynamo(), state.table(), &account_id).await {
            Ok(Some(a)) => a,
            Ok(None) => return error_page(ctx, &nav, &ApiError::not_found("account")),
            Err(e) => return error_page(ctx, &nav, &e.into()),
        };
    let sc = scope(&account_id);
    let lists = crate::account_parts::integrations_and_subscriptions(&state, &account_id).await;
    let (integrations, subs) = match lists {
        Ok(l) => l,
        Err(e) => return error_page(ctx, &nav, &e),
    };
    let audit = audit::list(&state.ops(), AuditScope::Account(&account_id), 20, None).await;
    let audit: Vec<AuditView> = match audit {
        Ok((records, _)) => records.iter().map(AuditView::from).collect(),
        Err(e) => return error_page(ctx, &nav, &e.into()),
    };
    let body = html! {
        main id="main" {
            h1 { (account.name) " " span class="id mono" { (account.account_id) } }
            section class="panel" {
                dl class="facts" {
                    dt { "Id" } dd class="mono" data-testid="account-id" { (account.account_id) }
                    dt { "Administrators" } dd { (account.admin_emails.join(", ")) }
                    dt { "Created" } dd { (when(Some(account.created_at))) }
                }
            }
            (crate::account_parts::integrations_table(&integrations))
            (subscriptions_table(ctx, &sc, &Names::of(Some(account.name.clone()), &integrations, &subs), &subs))
            h2 { "Audit history" }
            (audit_table(&audit))
        }
    };
    html_response(StatusCode::OK, shell(Some((ctx, &nav)), "Account", body))
}

/// The account's subscriptions; operators link each to its Integration history.
fn subscriptions_table(ctx: &Ctx, sc: &Scope, names: &Names, subs: &[SubscriptionView]) -> Markup {
    html! {
        h2 { "Subscriptions" }
        div class="table-wrap" {
            table id="subscriptions" class="stack" {
                thead { tr { th { "Subscription" } th { "Integration" } th { "Status" } th { "Filter" } th { "Fields" } th { "Retry policy" } th { "Dead in a row" } } }
                tbody {
                    @for s in subs {
                        tr data-testid="subscription-row" data-subscription-id=(s.id) {
                            td data-label="Subscription" { a href=(ctx.url(&format!("{}/subscriptions/{}", sc.base, encode(&s.id)))) { (names.subscription_markup(&s.id)) } }
                            td data-label="Integration" { (names.integration_markup(&s.integration_id)) }
                            td data-label="Status" { (badge(s.status.as_str())) }
                            td data-label="Filter" { (filter_text(&s.filter)) }
                            td data-label="Fields" { (s.fields.join(", ")) }
                            td data-label="Retry policy" data-testid="retry-policy" { (retry_policy_text(&s.retry_policy)) }
                            td data-label="Dead in a row" { (s.consecutive_dead) " / " (MAX_CONSECUTIVE_DEAD) }
                        }
                    }
                    @if subs.is_empty() { tr { td colspan="7" class="muted" { "No subscriptions." } } }
                }
            }
        }
    }
}
