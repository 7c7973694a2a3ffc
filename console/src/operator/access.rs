//! Who may use the operator pages and their forms: the [`Op`] extractor (a signed-in operator;
//! an account's session gets 403) and the CSRF check of every console form.

use super::nav::nav;
use crate::page::{error_page, field, Ctx, NotYours};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::Response;
use shared::web::auth::Operator;
use shared::web::problem::ApiError;
use shared::web::state::ApiState;
use std::sync::Arc;

/// A signed-in operator.
pub struct Op {
    pub ctx: Ctx,
    pub operator: Operator,
}

impl FromRequestParts<Arc<ApiState>> for Op {
    /// No session (sign in), or an account's session (403).
    type Rejection = NotYours;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ApiState>,
    ) -> Result<Self, Self::Rejection> {
        let ctx = Ctx::from_request_parts(parts, state)
            .await
            .map_err(NotYours::SignIn)?;
        match ctx.operator_id() {
            Some(id) => {
                let operator = Operator {
                    id: id.to_owned(),
                    expires: Some(ctx.session.expires),
                };
                Ok(Op { ctx, operator })
            }
            None => Err(NotYours::Forbidden {
                ctx: Box::new(ctx),
                nav: crate::account_parts::nav(),
                detail: "these pages are for operators",
            }),
        }
    }
}

/// The 403 page of a POST whose `csrf` field is not the session's; `None` when it is.
pub fn refuse_without_csrf(ctx: &Ctx, fields: &[(String, String)]) -> Option<Response> {
    match field(fields, "csrf") {
        Some(token) if ctx.session.csrf_matches(token) => None,
        _ => {
            let e = ApiError::forbidden(
                "the form's CSRF token is missing or not this session's; reload the page and try again",
            );
            let nav = if ctx.session.audience.is_operator() {
                nav(None, "")
            } else {
                crate::account_parts::nav()
            };
            Some(error_page(ctx, &nav, &e))
        }
    }
}
