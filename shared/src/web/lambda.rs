//! Serving the router from Lambda behind API Gateway's HTTP API.
//!
//! On a named stage (the template deploys stage `!Ref Stage`, not `$default`) `lambda_http`
//! gives the router paths that begin with `/{stage}`; the routes are declared without it, so
//! [`strip_stage`] removes it before routing.

use axum::http::{Request, Uri};
use lambda_http::request::RequestContext;

/// The stage prefix [`strip_stage`] removed (`/prod`), kept on the request for the pages that
/// must link back to themselves (the web console's URLs and its cookie's path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagePrefix(pub String);

/// The request with a leading `/{stage}` removed from its path when API Gateway's request
/// context names a stage other than `$default`.
pub fn strip_stage<B>(mut request: Request<B>) -> Request<B> {
    let stage = match request.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx.stage.clone(),
        _ => None,
    };
    let Some(stage) = stage.filter(|s| !s.is_empty() && s != "$default") else {
        return request;
    };
    let prefix = format!("/{stage}");
    let path = request.uri().path();
    let rest = match path.strip_prefix(&prefix) {
        Some("") => "/",
        Some(rest) if rest.starts_with('/') => rest,
        _ => return request,
    };
    let new_path_and_query = match Uri::query(request.uri()) {
        Some(q) => format!("{rest}?{q}"),
        None => rest.to_owned(),
    };
    let mut parts = request.uri().clone().into_parts();
    match new_path_and_query.parse() {
        Ok(pq) => parts.path_and_query = Some(pq),
        Err(_) => return request,
    }
    if let Ok(uri) = Uri::from_parts(parts) {
        *request.uri_mut() = uri;
        request.extensions_mut().insert(StagePrefix(prefix));
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::apigw::ApiGatewayV2httpRequestContext;

    fn request(path: &str, stage: Option<&str>) -> Request<()> {
        let mut r = Request::builder().uri(path).body(()).unwrap();
        if let Some(stage) = stage {
            let mut ctx = ApiGatewayV2httpRequestContext::default();
            ctx.stage = Some(stage.into());
            r.extensions_mut().insert(RequestContext::ApiGatewayV2(ctx));
        }
        r
    }

    #[test]
    fn removes_a_named_stage_prefix_only() {
        let path = |p: &str, s: Option<&str>| strip_stage(request(p, s)).uri().to_string();
        assert_eq!(
            path("/prod/v1/integrations?limit=5", Some("prod")),
            "/v1/integrations?limit=5"
        );
        assert_eq!(path("/prod", Some("prod")), "/");
        assert_eq!(path("/production/v1", Some("prod")), "/production/v1");
        assert_eq!(
            path("/v1/integrations", Some("$default")),
            "/v1/integrations"
        );
        assert_eq!(path("/prod/v1", None), "/prod/v1");
    }

    /// An HTTP API (payload 2.0) event with a JWT authorizer, as API Gateway sends it on a named
    /// stage: after `lambda_http` converts it, the route path has no stage and the operator is the
    /// token's `sub` (it carries the operator scope).
    #[test]
    fn a_gateway_event_routes_without_its_stage_and_names_its_operator() {
        // The repository's sample event for the api function (events/), as the template routes it.
        let event = include_str!("../../../events/api-operator-get-account.json");
        let request = lambda_http::request::from_str(event).unwrap();
        let request = strip_stage(request);
        assert_eq!(request.uri().path(), "/operator/accounts/01hx");
        assert_eq!(Uri::query(request.uri()), Some("a=1"));
        let (parts, _) = request.into_parts();
        let operator = crate::web::auth::OperatorAuth::GatewayJwt {
            scope: crate::web::auth::DEFAULT_OPERATOR_SCOPE.into(),
        }
        .identify(&parts)
        .unwrap();
        assert_eq!(operator.id, "operator-42");
    }
}
