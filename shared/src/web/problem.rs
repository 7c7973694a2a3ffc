//! The one error type of the HTTP API and its RFC 7807 rendering.
//!
//! Every handler and extractor returns [`ApiError`]; its [`IntoResponse`] writes an
//! `application/problem+json` body with a stable `type` URI (one per variant, listed in
//! [`ApiError::problem_type`]), a `title`, the `status`, a `detail` for people and, for validation
//! failures, `errors: [{field, message}]` naming every offending field at once; a notice refused
//! for its recipients names them in `refused_recipients: [{field, recipient, channel}]`, and a
//! 429 says in `Retry-After` (seconds) when to try again.
//!
//! | variant                | status | `type` (after [`PROBLEM_BASE`]) |
//! |------------------------|--------|---------------------------------|
//! | `MalformedRequest`     | 400    | `malformed-request`             |
//! | `Unauthorized`         | 401    | `unauthorized`                  |
//! | `Forbidden`            | 403    | `forbidden`                     |
//! | `RecipientsRefused`    | 403    | `recipient-not-allowed`         |
//! | `NotFound`             | 404    | `not-found`                     |
//! | `MethodNotAllowed`     | 405    | `method-not-allowed`            |
//! | `Conflict`             | 409    | `conflict`                      |
//! | `LimitReached`         | 409    | `limit-reached`                 |
//! | `PayloadTooLarge`      | 413    | `payload-too-large`             |
//! | `UnsupportedMediaType` | 415    | `unsupported-media-type`        |
//! | `Validation`           | 422    | `validation`                    |
//! | `QuotaExceeded`        | 429    | `quota-exceeded`                |
//! | `RateLimited`          | 429    | `rate-limited`                  |
//! | `Internal`             | 500    | `internal`                      |
//! | `Unavailable`          | 503    | `unavailable`                   |
//!
//! Details never carry secrets: a token or signing secret is never part of an error. An internal
//! error's cause is logged, and the response only says that it was.

use crate::domain::input::FieldErrors;
use crate::notify::bounds::RefusedRecipient;
use crate::operations::OpsError;
use crate::store::account_limits::Counted;
use crate::store::StoreError;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

/// Where the problem `type` URIs live; each variant appends its slug.
pub(crate) const PROBLEM_BASE: &str = "https://rhythm-delivery.dev/problems/";
/// The media type of every error response.
pub(crate) const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";
/// The `Retry-After` of every 503, in seconds.
pub(crate) const RETRY_AFTER_SECS: &str = "5";
/// The `WWW-Authenticate` challenge of every 401.
pub(crate) const BEARER_CHALLENGE: &str = "Bearer realm=\"rhythm-delivery\"";

pub use crate::domain::input::FieldError;

/// Every way an API request can fail.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request cannot be read: not JSON, not an object, a bad query string or path.
    #[error("{detail}")]
    MalformedRequest { detail: String },
    /// The request was read but some fields are not acceptable.
    #[error("the request has {} invalid field(s)", errors.len())]
    Validation { errors: Vec<FieldError> },
    /// No credentials, or credentials that are unknown, revoked or of the wrong kind.
    #[error("{detail}")]
    Unauthorized { detail: String },
    /// Authenticated, but without the right this route needs (an operator token without the
    /// operator scope).
    #[error("{detail}")]
    Forbidden { detail: String },
    /// No such resource *for this caller*: another account's resource is not found, too.
    /// A notice names recipients the account may not send to (neither its administrators nor
    /// allowed by an operator); each is named.
    #[error(
        "the account may not send to {} of the notice's recipients (neither an administrator of \
         the account nor allowed by an operator); see `refused_recipients`",
        refused.len()
    )]
    RecipientsRefused { refused: Vec<RefusedRecipient> },
    /// A quota has no room for the request until `retry_after_secs` have passed.
    #[error("{detail}")]
    QuotaExceeded {
        detail: String,
        retry_after_secs: u64,
    },
    /// The account has made as many requests as its rate allows in this second
    /// ([`crate::web::account_rate`]); `Retry-After` says when the next second starts.
    #[error(
        "the account has made its {per_second} requests of this second; retry after \
         Retry-After, or ask an operator to raise the account's requests_per_second"
    )]
    RateLimited {
        per_second: u32,
        retry_after_secs: u64,
    },
    #[error("{detail}")]
    NotFound { detail: String },
    #[error("{detail}")]
    MethodNotAllowed { detail: String },
    /// The write lost against the current state of the resource.
    #[error("{detail}")]
    Conflict { detail: String },
    /// The account has as many of something as its limit allows: a 409 rather than a 429,
    /// since waiting does not help; deleting or revoking one, or an operator's raise, does.
    #[error(
        "the account has reached its limit of {value} {}; delete or revoke one, or ask an \
         operator to raise the account's limit",
        limit.as_str().replace('_', " ")
    )]
    LimitReached { limit: Counted, value: u32 },
    #[error("{detail}")]
    PayloadTooLarge { detail: String },
    #[error("{detail}")]
    UnsupportedMediaType { detail: String },
    /// A fault of ours (storage, a bug). The cause is logged, never returned.
    #[error("internal error: {0}")]
    Internal(String),
    /// Not yet: the request is fine but must be sent again later (`Retry-After`), e.g. a provider
    /// event about a delivery not recorded yet, for a sender (SNS) that retries only 5xx.
    #[error("{detail}")]
    Unavailable { detail: String },
}

/// The JSON body of a problem response.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Problem {
    #[serde(rename = "type")]
    pub type_uri: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_recipients: Vec<RefusedRecipient>,
    /// The account limit reached (`integrations`, `subscriptions`, `live_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// Its value for the account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_value: Option<u32>,
}

impl ApiError {
    pub fn malformed(detail: impl Into<String>) -> Self {
        ApiError::MalformedRequest {
            detail: detail.into(),
        }
    }
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        ApiError::Unauthorized {
            detail: detail.into(),
        }
    }
    pub fn forbidden(detail: impl Into<String>) -> Self {
        ApiError::Forbidden {
            detail: detail.into(),
        }
    }
    /// `what` names the resource kind, e.g. `integration`.
    pub fn not_found(what: &str) -> Self {
        ApiError::NotFound {
            detail: format!("{what} not found"),
        }
    }
    pub fn conflict(detail: impl Into<String>) -> Self {
        ApiError::Conflict {
            detail: detail.into(),
        }
    }
    pub fn internal(detail: impl Into<String>) -> Self {
        ApiError::Internal(detail.into())
    }
    /// A validation problem about one field.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Validation {
            errors: vec![FieldError::new(field, message)],
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::MalformedRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Validation { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } | ApiError::RecipientsRefused { .. } => {
                StatusCode::FORBIDDEN
            }
            ApiError::QuotaExceeded { .. } | ApiError::RateLimited { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict { .. } | ApiError::LimitReached { .. } => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn slug(&self) -> &'static str {
        match self {
            ApiError::MalformedRequest { .. } => "malformed-request",
            ApiError::Validation { .. } => "validation",
            ApiError::Unauthorized { .. } => "unauthorized",
            ApiError::Forbidden { .. } => "forbidden",
            ApiError::RecipientsRefused { .. } => "recipient-not-allowed",
            ApiError::QuotaExceeded { .. } => "quota-exceeded",
            ApiError::RateLimited { .. } => "rate-limited",
            ApiError::NotFound { .. } => "not-found",
            ApiError::MethodNotAllowed { .. } => "method-not-allowed",
            ApiError::Conflict { .. } => "conflict",
            ApiError::LimitReached { .. } => "limit-reached",
            ApiError::PayloadTooLarge { .. } => "payload-too-large",
            ApiError::UnsupportedMediaType { .. } => "unsupported-media-type",
            ApiError::Internal(_) => "internal",
            ApiError::Unavailable { .. } => "unavailable",
        }
    }

    /// The stable `type` URI of this kind of problem.
    pub(crate) fn problem_type(&self) -> String {
        format!("{PROBLEM_BASE}{}", self.slug())
    }

    fn title(&self) -> &'static str {
        match self {
            ApiError::MalformedRequest { .. } => "Malformed request",
            ApiError::Validation { .. } => "Validation failed",
            ApiError::Unauthorized { .. } => "Unauthorized",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::RecipientsRefused { .. } => "Recipient not allowed",
            ApiError::QuotaExceeded { .. } => "Quota exceeded",
            ApiError::RateLimited { .. } => "Too many requests",
            ApiError::NotFound { .. } => "Not found",
            ApiError::MethodNotAllowed { .. } => "Method not allowed",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::LimitReached { .. } => "Limit reached",
            ApiError::PayloadTooLarge { .. } => "Payload too large",
            ApiError::UnsupportedMediaType { .. } => "Unsupported media type",
            ApiError::Internal(_) => "Internal error",
            ApiError::Unavailable { .. } => "Try again later",
        }
    }

    /// The problem document (an internal error's cause is not in it).
    pub fn problem(&self) -> Problem {
        let (detail, errors) = match self {
            ApiError::Validation { errors } => (
                match errors.as_slice() {
                    [one] => format!("{}: {}", one.field, one.message),
                    many => format!("{} fields are invalid; see `errors`", many.len()),
                },
                errors.clone(),
            ),
            ApiError::Internal(_) => (
                "the request could not be completed because of an internal error; it has been logged"
                    .to_string(),
                Vec::new(),
            ),
            other => (other.to_string(), Vec::new()),
        };
        Problem {
            type_uri: self.problem_type(),
            title: self.title().to_string(),
            status: self.status().as_u16(),
            detail,
            errors,
            refused_recipients: match self {
                ApiError::RecipientsRefused { refused } => refused.clone(),
                _ => Vec::new(),
            },
            limit: match self {
                ApiError::LimitReached { limit, .. } => Some(limit.as_str().to_owned()),
                _ => None,
            },
            limit_value: match self {
                ApiError::LimitReached { value, .. } => Some(*value),
                _ => None,
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(cause) = &self {
            tracing::error!(cause = %cause, "API request failed with an internal error");
        }
        let status = self.status();
        let retry_after = match &self {
            ApiError::QuotaExceeded {
                retry_after_secs, ..
            }
            | ApiError::RateLimited {
                retry_after_secs, ..
            } => Some(HeaderValue::from(*retry_after_secs)),
            _ => None,
        };
        let body = serde_json::to_vec(&self.problem()).unwrap_or_else(|_| b"{}".to_vec());
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(PROBLEM_CONTENT_TYPE),
        );
        if status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECS),
            );
        }
        if let Some(seconds) = retry_after {
            headers.insert(header::RETRY_AFTER, seconds);
        }
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(BEARER_CHALLENGE),
            );
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Internal(e.to_string())
    }
}

/// A typed input's refusals as one 422 naming each field.
impl From<FieldErrors> for ApiError {
    fn from(e: FieldErrors) -> Self {
        ApiError::Validation {
            errors: e.into_vec(),
        }
    }
}

impl From<OpsError> for ApiError {
    fn from(e: OpsError) -> Self {
        match e {
            OpsError::NotFound(what) => ApiError::not_found(what),
            OpsError::Conflict(detail) => ApiError::conflict(detail),
            OpsError::Invalid { field, message } => ApiError::field(field, message),
            OpsError::Bounded {
                detail,
                retry_after_secs,
            } => ApiError::QuotaExceeded {
                detail,
                retry_after_secs,
            },
            OpsError::Store(e) => e.into(),
            OpsError::Transition(e) => ApiError::internal(e.to_string()),
            OpsError::Fields(errors) => errors.into(),
            OpsError::LimitReached { limit, value } => ApiError::LimitReached { limit, value },
            OpsError::AccountGone => ApiError::NotFound {
                detail: OpsError::AccountGone.to_string(),
            },
            OpsError::Unavailable(detail) => ApiError::Unavailable { detail },
            OpsError::Internal(cause) => ApiError::Internal(cause),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        // A path that routed but does not deserialize names nothing that exists.
        ApiError::NotFound {
            detail: format!("no resource at this path: {}", r.body_text()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::malformed(format!("invalid query string: {}", r.body_text()))
    }
}

impl From<BytesRejection> for ApiError {
    fn from(r: BytesRejection) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge {
                detail: format!(
                    "the request body is larger than the {} bytes accepted",
                    super::limits::MAX_BODY_BYTES
                ),
            }
        } else {
            ApiError::malformed(format!(
                "the request body could not be read: {}",
                r.body_text()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn render(e: ApiError) -> (StatusCode, axum::http::HeaderMap, Problem) {
        let response = e.into_response();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, headers, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn validation_is_422_problem_json_naming_each_field() {
        let (status, headers, problem) = render(ApiError::Validation {
            errors: vec![
                FieldError::new("name", "must not be empty"),
                FieldError::new("fields[1]", "empty segment"),
            ],
        })
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(headers[header::CONTENT_TYPE], PROBLEM_CONTENT_TYPE);
        assert_eq!(
            problem.type_uri,
            "https://rhythm-delivery.dev/problems/validation"
        );
        assert_eq!(problem.status, 422);
        assert_eq!(problem.errors.len(), 2);
        assert_eq!(problem.errors[1].field, "fields[1]");
    }

    #[tokio::test]
    async fn unauthorized_carries_a_bearer_challenge() {
        let (status, headers, problem) = render(ApiError::unauthorized("no token")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(headers[header::WWW_AUTHENTICATE], BEARER_CHALLENGE);
        assert_eq!(problem.detail, "no token");
        assert!(problem.errors.is_empty());
    }

    #[tokio::test]
    async fn a_refused_recipient_is_a_403_naming_it() {
        let refused = vec![RefusedRecipient {
            field: "recipients[1]".into(),
            recipient: "x@elsewhere.test".into(),
            channel: "email".into(),
        }];
        let (status, _, problem) = render(ApiError::RecipientsRefused {
            refused: refused.clone(),
        })
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(
            problem.type_uri,
            "https://rhythm-delivery.dev/problems/recipient-not-allowed"
        );
        assert_eq!(problem.refused_recipients, refused);
    }

    #[tokio::test]
    async fn an_exceeded_quota_is_a_429_with_its_own_retry_after() {
        let (status, headers, problem) = render(ApiError::QuotaExceeded {
            detail: "full".into(),
            retry_after_secs: 3_600,
        })
        .await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(headers[header::RETRY_AFTER], "3600");
        assert_eq!(
            problem.type_uri,
            "https://rhythm-delivery.dev/problems/quota-exceeded"
        );
    }

    #[tokio::test]
    async fn internal_errors_hide_their_cause() {
        let (status, _, problem) =
            render(ApiError::internal("DynamoDB: table t-secret-name missing")).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!problem.detail.contains("t-secret-name"));
        assert_eq!(
            problem.type_uri,
            "https://rhythm-delivery.dev/problems/internal"
        );
    }

    #[test]
    fn every_variant_has_a_distinct_stable_type() {
        let all = [
            ApiError::malformed("x"),
            ApiError::field("f", "m"),
            ApiError::unauthorized("x"),
            ApiError::not_found("thing"),
            ApiError::MethodNotAllowed { detail: "x".into() },
            ApiError::conflict("x"),
            ApiError::PayloadTooLarge { detail: "x".into() },
            ApiError::UnsupportedMediaType { detail: "x".into() },
            ApiError::internal("x"),
            ApiError::RecipientsRefused { refused: vec![] },
            ApiError::QuotaExceeded {
                detail: "x".into(),
                retry_after_secs: 1,
            },
            ApiError::LimitReached {
                limit: Counted::LiveTokens,
                value: 50,
            },
        ];
        let types: std::collections::BTreeSet<String> =
            all.iter().map(ApiError::problem_type).collect();
        assert_eq!(types.len(), all.len());
        assert!(types.iter().all(|t| t.starts_with(PROBLEM_BASE)));
        assert_eq!(
            ApiError::not_found("integration").to_string(),
            "integration not found"
        );
    }

    #[test]
    fn a_reached_limit_is_a_409_naming_the_limit_and_its_value() {
        let e = ApiError::LimitReached {
            limit: Counted::LiveTokens,
            value: 50,
        };
        assert_eq!(e.status(), StatusCode::CONFLICT);
        let p = e.problem();
        assert_eq!(p.type_uri, format!("{PROBLEM_BASE}limit-reached"));
        assert_eq!(
            (p.limit.as_deref(), p.limit_value),
            (Some("live_tokens"), Some(50))
        );
        assert!(p.detail.contains("limit of 50 live tokens"), "{}", p.detail);
    }
}
