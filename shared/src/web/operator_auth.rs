//! How `/operator/*` callers are identified ([`OperatorAuth`]) and who they are ([`Operator`]).
//! The extractor that applies it to a request is in [`super::auth`].

use super::credentials::{bearer, constant_time_eq, sha256_hex};
use super::problem::ApiError;
use crate::config::ConfigError;
use axum::http::request::Parts;
use std::fmt;

/// How `/operator/*` callers are identified.
#[derive(Clone, PartialEq, Eq)]
pub enum OperatorAuth {
    /// In AWS: the HTTP API's JWT authorizer validated the caller's token before the function
    /// ran; the operator is the token's `sub` claim, read from the request context, and the
    /// token must carry `scope` (the authorizer's scopes, or the space-separated `scope` claim).
    GatewayJwt { scope: String },
    /// Locally (demo, tests): one static operator token, compared by its SHA-256.
    StaticToken {
        sha256_hex: String,
        operator_id: String,
    },
}

impl fmt::Debug for OperatorAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OperatorAuth::GatewayJwt { scope } => {
                f.debug_struct("GatewayJwt").field("scope", scope).finish()
            }
            OperatorAuth::StaticToken { operator_id, .. } => f
                .debug_struct("StaticToken")
                .field("operator_id", operator_id)
                .finish_non_exhaustive(),
        }
    }
}

impl OperatorAuth {
    /// `OPERATOR_TOKEN_SHA256` (hex SHA-256 of the operator token; `OPERATOR_ID` names the
    /// operator, default `operator`) selects a static token; otherwise the gateway's JWT, which
    /// must carry the scope `OPERATOR_SCOPE` (default [`DEFAULT_OPERATOR_SCOPE`]).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub(crate) fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        match lookup("OPERATOR_TOKEN_SHA256") {
            None => Ok(OperatorAuth::GatewayJwt {
                scope: lookup("OPERATOR_SCOPE")
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| DEFAULT_OPERATOR_SCOPE.into()),
            }),
            Some(hash) => {
                let hash = hash.trim().to_ascii_lowercase();
                if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(ConfigError::Invalid {
                        name: "OPERATOR_TOKEN_SHA256",
                        value: "<redacted>".into(),
                        expected: "64 hex digits (the SHA-256 of the operator token)",
                    });
                }
                Ok(OperatorAuth::StaticToken {
                    sha256_hex: hash,
                    operator_id: lookup("OPERATOR_ID").unwrap_or_else(|| "operator".into()),
                })
            }
        }
    }

    /// A static operator token given as plaintext (tests and the demo).
    pub fn static_token(token: &str, operator_id: &str) -> Self {
        OperatorAuth::StaticToken {
            sha256_hex: sha256_hex(token),
            operator_id: operator_id.to_owned(),
        }
    }

    /// The operator behind a request, or a 401.
    pub fn identify(&self, parts: &Parts) -> Result<Operator, ApiError> {
        match self {
            OperatorAuth::StaticToken {
                sha256_hex: expected,
                operator_id,
            } => {
                let token = bearer(parts)?;
                if constant_time_eq(sha256_hex(token).as_bytes(), expected.as_bytes()) {
                    Ok(Operator {
                        id: operator_id.clone(),
                        expires: None,
                    })
                } else {
                    Err(ApiError::unauthorized("this route needs an operator token"))
                }
            }
            OperatorAuth::GatewayJwt { scope } => {
                use lambda_http::request::RequestContext;
                let jwt = match parts.extensions.get::<RequestContext>() {
                    Some(RequestContext::ApiGatewayV2(ctx)) => {
                        ctx.authorizer.as_ref().and_then(|a| a.jwt.as_ref())
                    }
                    _ => None,
                };
                let sub = jwt
                    .and_then(|jwt| jwt.claims.get("sub"))
                    .filter(|sub| !sub.is_empty());
                let (Some(jwt), Some(sub)) = (jwt, sub) else {
                    return Err(ApiError::unauthorized(
                        "this route needs an operator token checked by the gateway's JWT authorizer",
                    ));
                };
                if !jwt_has_scope(jwt, scope) {
                    return Err(ApiError::forbidden(format!(
                        "this route needs a token with the operator scope `{scope}`"
                    )));
                }
                // The authorizer checked `exp`; it bounds the console sessions this identity opens.
                let expires = jwt
                    .claims
                    .get("exp")
                    .and_then(|e| e.trim().parse::<f64>().ok())
                    .map(|secs| crate::domain::time::Timestamp((secs * 1000.0) as i64));
                Ok(Operator {
                    id: sub.clone(),
                    expires,
                })
            }
        }
    }
}

/// The operator scope when `OPERATOR_SCOPE` is not set (the template's default too).
pub const DEFAULT_OPERATOR_SCOPE: &str = "rhythm/operator";

/// Whether the authorizer's JWT carries `scope`: among the scopes API Gateway lists, or in the
/// token's space-separated `scope` claim.
fn jwt_has_scope(
    jwt: &aws_lambda_events::apigw::ApiGatewayRequestAuthorizerJwtDescription,
    scope: &str,
) -> bool {
    let listed = jwt
        .scopes
        .iter()
        .flatten()
        .any(|s| s.split(' ').any(|s| s == scope));
    let claimed = jwt
        .claims
        .get("scope")
        .is_some_and(|c| c.split(' ').any(|s| s == scope));
    listed || claimed
}

/// An authenticated operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    pub id: String,
    /// When the identity expires (the gateway-checked JWT's `exp`); `None` for the local
    /// static token.
    pub expires: Option<crate::domain::time::Timestamp>,
}
