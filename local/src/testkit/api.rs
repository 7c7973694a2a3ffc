//! The test world's API client: the `api` Lambda's router, called in process with `oneshot`, and
//! its replies with the checks every test makes (a success status, a problem+json document).

use crate::fixtures::id;
use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use futures::future::BoxFuture;
use serde_json::{json, Value};
use shared::ids::AccountId;
use shared::web::ApiState;
use std::future::IntoFuture;
use tower::ServiceExt;

/// The operator token the test world's API accepts, and the operator it names.
pub const OPERATOR_TOKEN: &str = "test-operator-token";
pub const OPERATOR: &str = "ops@example.com";
pub const PROBLEM_JSON: &str = "application/problem+json";
/// Every problem's `type` starts with this.
pub const PROBLEM_TYPES: &str = "https://rhythm-delivery.dev/problems/";

#[derive(Clone)]
pub struct ApiClient {
    app: Router,
}

/// An account made through the operator route.
#[derive(Debug, Clone)]
pub struct ApiAccount {
    pub account_id: AccountId,
    pub token: String,
}

impl ApiClient {
    pub fn new(state: ApiState) -> Self {
        ApiClient {
            app: crate::api_server::app(state),
        }
    }

    /// The router itself (for its route table).
    pub fn router(&self) -> &Router {
        &self.app
    }

    /// A request; `token` goes in a Bearer `Authorization`, `body` as JSON.
    pub fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Call {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let call = Call {
            app: self.app.clone(),
            request,
            body: Body::empty(),
            extensions: http::Extensions::new(),
        };
        match body {
            Some(v) => call.body(Some("application/json"), v.to_string()),
            None => call,
        }
    }

    /// An API Gateway HTTP API event (payload 2.0, as the `api` function receives it): its
    /// request with the request context (the JWT authorizer's claims and scopes) and without
    /// its stage prefix, as `lambda_http` and the function hand it to the router.
    pub fn gateway_event(&self, event: &Value) -> Call {
        let request = lambda_http::request::from_str(&event.to_string()).expect("a gateway event");
        let (parts, body) = shared::web::lambda::strip_stage(request).into_parts();
        let mut builder = Request::builder().method(parts.method).uri(parts.uri);
        for (name, value) in &parts.headers {
            builder = builder.header(name, value);
        }
        Call {
            app: self.app.clone(),
            request: builder,
            body: Body::from(body.to_vec()),
            extensions: parts.extensions,
        }
    }

    pub fn get(&self, path: &str, token: &str) -> Call {
        self.call(Method::GET, path, Some(token), None)
    }
    pub fn delete(&self, path: &str, token: &str) -> Call {
        self.call(Method::DELETE, path, Some(token), None)
    }
    pub fn post(&self, path: &str, token: &str, body: Value) -> Call {
        self.call(Method::POST, path, Some(token), Some(body))
    }
    pub fn put(&self, path: &str, token: &str, body: Value) -> Call {
        self.call(Method::PUT, path, Some(token), Some(body))
    }
    pub fn patch(&self, path: &str, token: &str, body: Value) -> Call {
        self.call(Method::PATCH, path, Some(token), Some(body))
    }

    /// A new account (with `admin@example.com` as its administrator) through the operator route.
    pub async fn account(&self, name: &str) -> ApiAccount {
        let r = self
            .post(
                "/operator/accounts",
                OPERATOR_TOKEN,
                json!({"name": name, "admin_emails": ["admin@example.com"]}),
            )
            .await;
        let body = r.created();
        ApiAccount {
            account_id: id(body["account"]["id"].as_str().unwrap()),
            token: body["token"].as_str().unwrap().to_owned(),
        }
    }

    /// Sets the account's notice allowlist through the operator route (`allowlist`: its
    /// `addresses`, `domains`, `slack_workspaces`) and gives the allowlist answered.
    pub async fn allow_recipients(&self, account_id: &str, allowlist: Value) -> Value {
        self.put(
            &format!("/operator/accounts/{account_id}/notice-allowlist"),
            OPERATOR_TOKEN,
            allowlist,
        )
        .await
        .ok()
        .clone()
    }
}

/// One request to the router; `.await` it for the [`Reply`].
pub struct Call {
    app: Router,
    request: axum::http::request::Builder,
    body: Body,
    /// The request's extensions (a gateway event's request context).
    extensions: http::Extensions,
}

impl Call {
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.request = self.request.header(name, value);
        self
    }

    /// A body as given, with `content_type` when there is one (for malformed-request tests).
    pub fn body(mut self, content_type: Option<&str>, body: impl Into<Body>) -> Self {
        if let Some(content_type) = content_type {
            self.request = self.request.header(header::CONTENT_TYPE, content_type);
        }
        self.body = body.into();
        self
    }

    /// Bytes sent as `application/json` (signed payloads that must arrive byte for byte).
    pub fn json_bytes(self, body: Vec<u8>) -> Self {
        self.body(Some("application/json"), body)
    }
}

impl IntoFuture for Call {
    type Output = Reply;
    type IntoFuture = BoxFuture<'static, Reply>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let mut request = self.request.body(self.body).expect("a valid request");
            request.extensions_mut().extend(self.extensions);
            let response = self.app.oneshot(request).await.expect("the router answers");
            let status = response.status();
            let headers = response.headers().clone();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
                .await
                .expect("the response body");
            Reply {
                status,
                headers,
                text: String::from_utf8_lossy(&bytes).into_owned(),
                json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            }
        })
    }
}

/// What the router answered.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
    /// The body as JSON (`Null` when it is not JSON).
    pub json: Value,
}

impl Reply {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts a 2xx and gives the JSON.
    #[track_caller]
    pub fn success(&self) -> &Value {
        assert!(self.status.is_success(), "{} {}", self.status, self.text);
        &self.json
    }

    /// Asserts exactly `status` and gives the JSON.
    #[track_caller]
    pub fn expect(&self, status: StatusCode) -> &Value {
        assert_eq!(self.status, status, "{}", self.text);
        &self.json
    }

    /// Asserts `200 OK` and gives the JSON.
    #[track_caller]
    pub fn ok(&self) -> &Value {
        self.expect(StatusCode::OK)
    }

    /// Asserts `201 Created` and gives the JSON.
    #[track_caller]
    pub fn created(&self) -> &Value {
        self.expect(StatusCode::CREATED)
    }

    /// Asserts `202 Accepted` and gives the JSON.
    #[track_caller]
    pub fn accepted(&self) -> &Value {
        self.expect(StatusCode::ACCEPTED)
    }

    /// Asserts a problem+json document of `status` (its type, status, title and detail) and
    /// gives it.
    #[track_caller]
    pub fn problem(&self, status: StatusCode) -> &Value {
        assert_eq!(self.status, status, "{}", self.text);
        assert_eq!(
            self.header(header::CONTENT_TYPE.as_str()),
            Some(PROBLEM_JSON),
            "{}",
            self.text
        );
        assert!(
            self.json["type"]
                .as_str()
                .is_some_and(|t| t.starts_with(PROBLEM_TYPES)),
            "{}",
            self.text
        );
        assert_eq!(self.json["status"], status.as_u16(), "{}", self.text);
        assert!(self.json["title"].is_string(), "{}", self.text);
        assert!(self.json["detail"].is_string(), "{}", self.text);
        &self.json
    }

    /// [`Reply::problem`] of the given type (the last segment of its `type` URL).
    #[track_caller]
    pub fn problem_of(&self, status: StatusCode, kind: &str) -> &Value {
        let problem = self.problem(status);
        assert_eq!(problem["type"], format!("{PROBLEM_TYPES}{kind}"));
        problem
    }

    /// Asserts a `422` problem and gives the fields its `errors` name, in order.
    #[track_caller]
    pub fn fields(&self) -> Vec<String> {
        self.problem(StatusCode::UNPROCESSABLE_ENTITY)["errors"]
            .as_array()
            .map(|errors| {
                errors
                    .iter()
                    .map(|e| e["field"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}
