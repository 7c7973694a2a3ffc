//! `/operator/*`: routes for the platform's operators (identity from [`crate::web::Operator`]).

pub(crate) mod accounts;
pub mod attention;
pub mod audit;
pub mod deliveries;
pub(crate) mod event_types;
pub mod limits;
pub mod notifications;
pub(crate) mod reconcile;
pub mod replays;
pub(crate) mod subscriptions;

use crate::web::state::ApiState;
use axum::Router;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .merge(accounts::router())
        .merge(limits::router())
        .merge(attention::router())
        .merge(notifications::router())
        .merge(subscriptions::router())
        .merge(deliveries::router())
        .merge(replays::router())
        .merge(audit::router())
        .merge(reconcile::router())
        .merge(event_types::router())
}
