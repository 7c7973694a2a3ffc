//! `GET /v1/whoami`: what the presented token stands for. Any valid token (account,
//! integration or publish) may call it, so an adapter or a publisher can check its credentials.

use crate::ids::{AccountId, IntegrationId, TokenId};
use crate::web::auth::Principal;
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new().route("/v1/whoami", get(whoami))
}

#[derive(Debug, Serialize)]
pub(crate) struct WhoAmI {
    pub kind: &'static str,
    pub account_id: AccountId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub integration_id: Option<IntegrationId>,
    pub token_id: TokenId,
}

async fn whoami(principal: Principal) -> Result<Json<WhoAmI>, ApiError> {
    Ok(Json(match principal {
        Principal::Account {
            account_id,
            token_id,
        } => WhoAmI {
            kind: "account",
            account_id,
            integration_id: None,
            token_id,
        },
        Principal::Integration {
            account_id,
            integration_id,
            token_id,
        } => WhoAmI {
            kind: "integration",
            account_id,
            integration_id: Some(integration_id),
            token_id,
        },
        Principal::Publisher {
            account_id,
            token_id,
        } => WhoAmI {
            kind: "publisher",
            account_id,
            integration_id: None,
            token_id,
        },
    }))
}
