//! Notifications: the lookup by notice id, and a notice's page (its progress, its deliveries by
//! channel with the requeue links the requeue's guard allows, its provider events).

use super::access::Op;
use super::nav::nav;
use crate::page::{badge, encode, error_page, html_response, redirect, shell, when_text, Ctx};
use crate::Params;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use shared::api::operator::notifications::OperatorNoticeView;
use shared::api::v1::notices::{NoticeDeliveryView, NoticeView};
use shared::domain::lifecycle::Status;
use shared::domain::notification_delivery::{requeue_allowed, FailureReason, NotificationStatus};
use shared::operations::notices::{notice_with_deliveries, service};
use shared::web::problem::ApiError;
use shared::web::state::ApiState;
use std::sync::Arc;

type S = State<Arc<ApiState>>;

/// Whether a notification delivery may be requeued, by the requeue's guard.
fn requeueable(d: &NoticeDeliveryView) -> bool {
    let reason = d
        .failure_reason
        .as_deref()
        .and_then(|code| FailureReason::from_code(code, d.failure_detail.as_deref()));
    NotificationStatus::parse(&d.status)
        .is_some_and(|status| requeue_allowed(status, reason.as_ref()).is_ok())
}

pub(super) async fn notification_lookup(op: Op, Query(p): Query<Params>) -> Response {
    let nav = nav(None, "nav-notifications");
    match p.get("notice").map(|n| n.trim()).filter(|n| !n.is_empty()) {
        Some(n) => redirect(
            &op.ctx
                .url(&format!("/console/op/notifications/{}", encode(n))),
        ),
        None => {
            let ctx = &op.ctx;
            let body = html! {
                main id="main" class="narrow" {
                    h1 { "Notifications" }
                    form class="panel" method="get" action=(ctx.url("/console/op/notifications")) {
                        label for="notice" { "Notice id" input id="notice" name="notice" required; }
                        div class="actions" { button type="submit" data-testid="open-notice" { "Open" } }
                    }
                }
            };
            html_response(
                StatusCode::OK,
                shell(Some((ctx, &nav)), "Notifications", body),
            )
        }
    }
}

pub(super) async fn notification(
    op: Op,
    State(state): S,
    Path(n): Path<String>,
    Query(p): Query<Params>,
) -> Response {
    let nav = nav(None, "nav-notifications");
    let ctx = &op.ctx;
    let svc = service(&state.clients, &state.config, state.clock.clone());
    let view = match notice_with_deliveries(&svc, &n).await {
        Ok(found) => OperatorNoticeView::from(found),
        Err(e) => return error_page(ctx, &nav, &ApiError::from(e)),
    };
    let notice = &view.notice;
    let base = format!("/console/op/notifications/{}", encode(&notice.id));
    let body = html! {
        main id="main" {
            h1 { "Notification " span class="mono" { (notice.id) } }
            @if let Some(d) = p.get("done") { p class="notice" role="status" data-testid="notice" { "Done: " (d) "." } }
            (notice_facts(notice))
            h2 { "Deliveries by channel" }
            (channel_deliveries(ctx, &base, &view.deliveries))
            h2 { "Provider events" }
            (provider_events(&view.deliveries))
        }
    };
    html_response(
        StatusCode::OK,
        shell(Some((ctx, &nav)), "Notification", body),
    )
}

/// The notice's facts and its progress.
fn notice_facts(notice: &NoticeView) -> Markup {
    html! {
        section class="panel" {
            dl class="facts" {
                dt { "Status" } dd { (badge(&notice.status)) }
                dt { "Account" } dd class="mono" { (notice.account_id) }
                dt { "Subject" } dd { (notice.subject) }
                dt { "Reason" } dd { (notice.reason) }
                dt { "Channels" } dd { (notice.channels.join(", ")) }
                dt { "Created" } dd { (when_text(Some(&notice.created_at))) }
                dt { "Deadline" } dd { (when_text(notice.deadline.as_deref())) }
            }
        }
        h2 { "Progress" }
        div id="progress" class="panel" {
            @if let Some(pr) = notice.progress.as_ref() {
                p { (pr.total) " deliveries" }
                ul { @for (state, count) in pr.counts.iter().filter(|(_, c)| **c > 0) { li { (badge(state)) " " (count) } } }
            }
        }
    }
}

/// The deliveries by channel, each with its requeue link when the requeue's guard allows it.
fn channel_deliveries(ctx: &Ctx, base: &str, deliveries: &[NoticeDeliveryView]) -> Markup {
    html! {
        div class="table-wrap" {
            table id="channel-deliveries" class="stack" {
                thead { tr { th { "Channel" } th { "Recipient" } th { "Status" } th { "Provider" } th { "Failure" } th { "Updated" } th { "Action" } } }
                tbody {
                    @for d in deliveries {
                        tr data-testid="notification-delivery-row" data-delivery-key=(d.key) {
                            td data-label="Channel" { (d.channel) }
                            td data-label="Recipient" class="mono" { (d.recipient) }
                            td data-label="Status" { (badge(&d.status)) }
                            td data-label="Provider" { (d.provider.as_deref().unwrap_or("—")) " " span class="mono" { (d.provider_ref.as_deref().unwrap_or_default()) } }
                            td data-label="Failure" { (d.failure_reason.as_deref().unwrap_or_default()) " " (d.failure_detail.as_deref().or(d.last_error.as_deref()).or(d.skip_reason.as_deref()).unwrap_or_default()) }
                            td data-label="Updated" { (when_text(Some(&d.updated_at))) }
                            td data-label="Action" {
                                @if requeueable(d) {
                                    a class="button" data-testid="requeue-link" href=(ctx.url(&format!("{base}/deliveries/{}/requeue", encode(&d.key)))) { "Requeue…" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Every delivery's provider events.
fn provider_events(deliveries: &[NoticeDeliveryView]) -> Markup {
    html! {
        div class="table-wrap" {
            table id="provider-events" class="stack" {
                thead { tr { th { "Delivery" } th { "Event" } th { "When" } th { "Detail" } } }
                tbody {
                    @for d in deliveries {
                        @for h in &d.history {
                            tr data-testid="provider-event-row" {
                                td data-label="Delivery" class="mono" { (d.key) }
                                td data-label="Event" { (h["kind"].as_str().unwrap_or_default()) }
                                td data-label="When" { (when_text(h["at"].as_str())) }
                                td data-label="Detail" { (h["detail"].as_str().unwrap_or_default()) }
                            }
                        }
                    }
                }
            }
        }
    }
}
