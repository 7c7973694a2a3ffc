//! The Event monitor views scoped to an account: the monitor, an event's Delivery log, a
//! delivery's attempts (the pages themselves are in [`crate::views`]).

use super::access::Op;
use super::nav::{account_param, nav, scope};
use crate::page::error_page;
use crate::views;
use crate::Params;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use shared::ids::AccountId;
use shared::web::extract::{path_id, resource_id};
use shared::web::problem::ApiError;
use shared::web::state::ApiState;
use std::sync::Arc;

type S = State<Arc<ApiState>>;

pub(super) async fn events(op: Op, State(state): S, Query(p): Query<Params>) -> Response {
    let account = account_param(&p);
    let nav = nav(account.as_deref(), "nav-events");
    let scope = match account
        .as_deref()
        .map(|a| path_id::<AccountId>(a, "account"))
    {
        Some(Ok(a)) => Some(scope(&a)),
        Some(Err(e)) => return error_page(&op.ctx, &nav, &e),
        None => None,
    };
    views::event_monitor(&state, &op.ctx, &nav, scope.as_ref(), &p).await
}

pub(super) async fn event(
    op: Op,
    State(state): S,
    Path((a, c)): Path<(String, String)>,
) -> Response {
    let nav = nav(Some(&a), "nav-events");
    // An account path that is not an id names no event (as a lookup of it would find none).
    let Some(a) = resource_id::<AccountId>(&a) else {
        return error_page(&op.ctx, &nav, &ApiError::not_found("event"));
    };
    views::event_page(&state, &op.ctx, &nav, &scope(&a), &c).await
}

pub(super) async fn delivery(
    op: Op,
    State(state): S,
    Path((a, s, c)): Path<(String, String, String)>,
    Query(p): Query<Params>,
) -> Response {
    let nav = nav(Some(&a), "nav-events");
    let done = p.get("done").map(String::as_str);
    let Some(a) = resource_id::<AccountId>(&a) else {
        return error_page(&op.ctx, &nav, &ApiError::not_found("delivery"));
    };
    views::delivery_page(&state, &op.ctx, &nav, &scope(&a), &s, &c, done).await
}
