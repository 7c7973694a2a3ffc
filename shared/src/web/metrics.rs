//! The API's own metrics, as EMF documents ([`crate::metrics`]) under the `Stage` dimension:
//!
//! * `ApiAuthenticationFailures`: one per `401` the API answers (a refused bearer token,
//!   operator credential, console sign-in or provider-event signature), which the template's
//!   `ApiAuthenticationFailuresAlarm` watches for a spike;
//! * `ProviderEventsDeferred`: one per deliberate `503` of the provider-events route (an SES
//!   event about a delivery not recorded yet, answered `503` so that SNS sends it again), which
//!   `Api5xxAlarm` subtracts from API Gateway's `5xx` count.
//!
//! Counted by one layer over every route ([`count`]), from the response: its status, and the
//! [`Deferred`] mark the provider-events handler puts on a deliberate `503`.

use super::state::ApiState;
use crate::metrics::{document, Metric};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{json, Map};
use std::sync::Arc;

pub const AUTHENTICATION_FAILURES: &str = "ApiAuthenticationFailures";
pub const PROVIDER_EVENTS_DEFERRED: &str = "ProviderEventsDeferred";

/// A response extension: this `503` is deliberate (the sender is to retry), not a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deferred;

/// The metrics one response counts toward.
pub(crate) fn of_response(response: &Response) -> Vec<Metric> {
    let mut out = Vec::new();
    if response.status() == StatusCode::UNAUTHORIZED {
        out.push(Metric::count(AUTHENTICATION_FAILURES, 1));
    }
    if response.status() == StatusCode::SERVICE_UNAVAILABLE
        && response.extensions().get::<Deferred>().is_some()
    {
        out.push(Metric::count(PROVIDER_EVENTS_DEFERRED, 1));
    }
    out
}

/// The layer: one EMF document for a response that counts toward a metric (the method and
/// route path as properties; no query string, no headers).
pub async fn count(State(state): State<Arc<ApiState>>, request: Request, next: Next) -> Response {
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let metrics = of_response(&response);
    if !metrics.is_empty() {
        let mut props = Map::new();
        props.insert("method".into(), json!(method));
        props.insert("path".into(), json!(path));
        state.metrics.emit(&document(
            &state.config.metrics_namespace,
            &state.config.stage,
            state.clock.now(),
            &metrics,
            props,
        ));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;

    #[test]
    fn a_401_is_an_authentication_failure_and_only_a_marked_503_is_deferred() {
        let names =
            |r: &Response| -> Vec<String> { of_response(r).into_iter().map(|m| m.name).collect() };
        assert_eq!(
            names(&StatusCode::UNAUTHORIZED.into_response()),
            [AUTHENTICATION_FAILURES]
        );
        assert!(names(&StatusCode::SERVICE_UNAVAILABLE.into_response()).is_empty());
        let mut marked = StatusCode::SERVICE_UNAVAILABLE.into_response();
        marked.extensions_mut().insert(Deferred);
        assert_eq!(names(&marked), [PROVIDER_EVENTS_DEFERRED]);
        assert!(names(&StatusCode::FORBIDDEN.into_response()).is_empty());
    }
}
