//! What both audiences show of an account: the administrator's navigation, and the account's
//! integrations and subscriptions as the API shows them (the operator's account page lists them
//! too). Its own module so that the account and operator pages do not import each other.

use super::page::{when_text, Nav};
use maud::{html, Markup};
use shared::api::v1::integrations::IntegrationView;
use shared::api::v1::subscriptions::SubscriptionView;
use shared::ids::{AccountId, IntegrationId, SubscriptionId};
use shared::web::problem::ApiError;
use shared::web::state::ApiState;

/// The account navigation.
pub fn nav() -> Nav {
    nav_at("")
}

pub(super) fn nav_at(current: &'static str) -> Nav {
    Nav {
        items: vec![
            ("Overview", "/console/acct".into(), "nav-overview"),
            ("Events", "/console/acct/events".into(), "nav-events"),
            (
                "Needs attention",
                "/console/acct/attention".into(),
                "nav-attention",
            ),
            ("Manage", "/console/acct/manage".into(), "nav-manage"),
            ("Event types", "/console/acct/catalog".into(), "nav-catalog"),
        ],
        current,
    }
}

/// Every integration and subscription of an account (as the API shows them).
pub async fn integrations_and_subscriptions(
    state: &ApiState,
    account_id: &AccountId,
) -> Result<(Vec<IntegrationView>, Vec<SubscriptionView>), ApiError> {
    let (dynamo, table) = (state.dynamo(), state.table());
    let mut integrations = Vec::new();
    let mut after: Option<IntegrationId> = None;
    loop {
        let (page, next) =
            shared::store::integration::list(dynamo, table, account_id, 100, after.as_ref())
                .await?;
        integrations.extend(page.iter().map(IntegrationView::from));
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let mut subs = Vec::new();
    let mut after: Option<SubscriptionId> = None;
    loop {
        let (page, next) =
            shared::store::subscription::list(dynamo, table, account_id, None, 100, after.as_ref())
                .await?;
        subs.extend(page.iter().map(SubscriptionView::from));
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    Ok((integrations, subs))
}

pub fn integrations_table(integrations: &[IntegrationView]) -> Markup {
    html! {
        h2 { "Integrations" }
        div class="table-wrap" {
            table id="integrations" class="stack" {
                thead { tr { th { "Integration" } th { "Name" } th { "Method" } th { "Target" } th { "Event access" } th { "Updated" } } }
                tbody {
                    @for i in integrations {
                        tr data-testid="integration-row" data-integration-id=(i.id) {
                            td data-label="Integration" class="mono" { (i.id) }
                            td data-label="Name" { (i.name) }
                            td data-label="Method" { (i.method) }
                            td data-label="Target" class="mono" { (i.webhook_url.as_deref().or(i.handler.as_deref()).unwrap_or("pull cursor")) }
                            td data-label="Event access" { @if i.event_access_accepted { "accepted" } @else { "not accepted" } }
                            td data-label="Updated" { (when_text(Some(&i.updated_at))) }
                        }
                    }
                    @if integrations.is_empty() { tr { td colspan="6" class="muted" { "No integrations." } } }
                }
            }
        }
    }
}
