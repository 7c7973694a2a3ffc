//! Who is calling: bearer tokens for accounts and integrations, and the operator identity.
//!
//! ## Tokens
//!
//! A token reads `rhy_{kind}_{token_id}_{secret}`: `kind` is `acct` (an account's token: the
//! management API), `intg` (an integration's token: the adapter's pull routes) or `pub` (a
//! publish token), `token_id` a lowercase ULID, `secret` 48 bytes in unpadded base64url (which may
//! itself contain `_`; the token is split at the first three underscores only): 32 random bytes,
//! then their check, the first 16 bytes of HMAC-SHA256 over the kind, the token id and the random
//! bytes, keyed by the deployment's token-check key ([`crate::operations::account::token_format`]). A presented token
//! is checked first, with no store call: a made-up token, one changed in any part, one minted
//! under another key, or one issued before tokens carried the check (32 bytes of secret) is
//! refused without a read. A token that checks is then looked up: the table keeps only the
//! SHA-256 of the secret part, on the item `TOKEN#{token_id}` / `TOKEN`, which a request finds in
//! one consistent read by the id and compares in constant time. Unknown, malformed, unchecked,
//! revoked or wrong-kind tokens are all the same 401 (`WWW-Authenticate: Bearer`), so a caller
//! learns nothing about tokens it does not hold.
//!
//! Each token also has a reference item in its account's token partition (the items:
//! [`crate::store::token`]), so an account's or an integration's tokens can be listed and revoked
//! together (rotation with `revoke_existing`, integration deletion). A token is written with its
//! reference in one transaction.
//!
//! ## Operators
//!
//! `/operator/*` routes take the operator identity from [`OperatorAuth`]: in AWS the HTTP API's
//! JWT authorizer has already checked the token (issuer, audience, expiry and the operator
//! scope), and the function reads its `sub` claim from the request context and checks the
//! operator scope (`OPERATOR_SCOPE`) again: a valid token of the identity provider without the
//! scope is not an operator (403). Locally (demo, tests) a static operator token is compared by
//! its SHA-256; its holder is the operator and so has the scope.
//!
//! The request context is trusted because only API Gateway can hand one to the function: the
//! template grants `lambda:InvokeFunction` to this HTTP API alone (one permission per route,
//! `SourceArn` the API's routes), with no function URL; direct invocation by IAM principals of
//! the account is an administrator's right that IAM governs.

use super::credentials::INVALID_TOKEN;
pub use super::credentials::{bearer, constant_time_eq, sha256_hex};
pub use super::operator_auth::{Operator, OperatorAuth, DEFAULT_OPERATOR_SCOPE};
use super::problem::ApiError;
use super::state::ApiState;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId, TokenId};
use crate::operations::account::tokens::TOKEN_EXPIRY_RANGE;
use crate::store::token;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::Serialize;
use std::sync::Arc;

pub use crate::operations::account::token_format::{
    parse_token, OneTimeSecret, ParsedToken, PlaintextToken, TokenCheckKey, TokenCheckKeys,
    TokenFormatError, SECRET_BYTES, TOKEN_PREFIX,
};
pub use crate::store::token::{
    token_ref_pk, token_ref_sk, TokenKind, TokenRecord, TokenRef, TOKEN_KIND, TOKEN_REF_KIND,
};

/// What a token stands for, once verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Account {
        account_id: AccountId,
        token_id: TokenId,
    },
    Integration {
        account_id: AccountId,
        integration_id: IntegrationId,
        token_id: TokenId,
    },
    /// A publish token: it may publish changes for its account and nothing else.
    Publisher {
        account_id: AccountId,
        token_id: TokenId,
    },
}

impl Principal {
    pub fn account_id(&self) -> &AccountId {
        match self {
            Principal::Account { account_id, .. }
            | Principal::Integration { account_id, .. }
            | Principal::Publisher { account_id, .. } => account_id,
        }
    }
}

/// Verifies a presented token: its check first (no store call for a token that fails it), then
/// its stored hash.
pub async fn verify_token(state: &ApiState, presented: &str) -> Result<Principal, ApiError> {
    let parsed = parse_token(presented).map_err(|_| ApiError::unauthorized(INVALID_TOKEN))?;
    if !parsed.checks(&*state.token_check_key().await?) {
        return Err(ApiError::unauthorized(INVALID_TOKEN));
    }
    let record = token::get(state.dynamo(), state.table(), &parsed.token_id).await?;
    let Some(record) = record else {
        return Err(ApiError::unauthorized(INVALID_TOKEN));
    };
    let hash_matches = constant_time_eq(
        sha256_hex(parsed.secret).as_bytes(),
        record.secret_sha256.as_bytes(),
    );
    if !hash_matches || record.token_kind != parsed.kind || !record.is_live(state.clock.now()) {
        return Err(ApiError::unauthorized(INVALID_TOKEN));
    }
    match (record.token_kind, record.integration_id) {
        (TokenKind::Acct, _) => Ok(Principal::Account {
            account_id: record.account_id,
            token_id: record.token_id,
        }),
        (TokenKind::Intg, Some(integration_id)) => Ok(Principal::Integration {
            account_id: record.account_id,
            integration_id,
            token_id: record.token_id,
        }),
        (TokenKind::Intg, None) => Err(ApiError::unauthorized(INVALID_TOKEN)),
        (TokenKind::Pub, _) => Ok(Principal::Publisher {
            account_id: record.account_id,
            token_id: record.token_id,
        }),
    }
}

/// Any valid token (account, integration or publish), counted against its account's request
/// rate ([`super::account_rate`]) before the route does anything else.
impl FromRequestParts<Arc<ApiState>> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ApiState>,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(parts)?;
        let principal = verify_token(state, token).await?;
        super::account_rate::admit(state, principal.account_id()).await?;
        Ok(principal)
    }
}

/// The caller holds a valid account (`acct`) token; every management route is scoped to
/// `account_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountAuth {
    pub account_id: AccountId,
    pub token_id: TokenId,
}

impl FromRequestParts<Arc<ApiState>> for AccountAuth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ApiState>,
    ) -> Result<Self, Self::Rejection> {
        match Principal::from_request_parts(parts, state).await? {
            Principal::Account {
                account_id,
                token_id,
            } => Ok(AccountAuth {
                account_id,
                token_id,
            }),
            Principal::Integration { .. } | Principal::Publisher { .. } => Err(
                ApiError::unauthorized("this route needs an account token (rhy_acct_…)"),
            ),
        }
    }
}

impl AccountAuth {
    /// Who acts, for the audit history: the credential (`token {token_id}`).
    pub fn actor(&self) -> String {
        format!("token {}", self.token_id)
    }
}

/// The caller holds a valid integration (`intg`) token: an adapter acting for one integration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrationAuth {
    pub account_id: AccountId,
    pub integration_id: IntegrationId,
    pub token_id: TokenId,
}

impl FromRequestParts<Arc<ApiState>> for IntegrationAuth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ApiState>,
    ) -> Result<Self, Self::Rejection> {
        match Principal::from_request_parts(parts, state).await? {
            Principal::Integration {
                account_id,
                integration_id,
                token_id,
            } => Ok(IntegrationAuth {
                account_id,
                integration_id,
                token_id,
            }),
            Principal::Account { .. } | Principal::Publisher { .. } => Err(ApiError::unauthorized(
                "this route needs an integration token (rhy_intg_…)",
            )),
        }
    }
}

impl FromRequestParts<Arc<ApiState>> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ApiState>,
    ) -> Result<Self, Self::Rejection> {
        state.operator_auth.identify(parts)
    }
}

/// The optional `expires_in` (seconds) of a token issuance: the token stops working that long
/// after it is issued. Out of [`TOKEN_EXPIRY_RANGE`], or not a whole number, is the field's 422.
pub(crate) fn read_token_expiry(
    f: &mut crate::web::extract::Fields,
) -> Option<std::time::Duration> {
    let secs: u64 = f.optional("expires_in")?;
    if !TOKEN_EXPIRY_RANGE.contains(&secs) {
        f.error(
            "expires_in",
            format!(
                "must be between {} and {} seconds",
                TOKEN_EXPIRY_RANGE.start(),
                TOKEN_EXPIRY_RANGE.end()
            ),
        );
        return None;
    }
    Some(std::time::Duration::from_secs(secs))
}

/// The one-time response of an issued token.
#[derive(Debug, Serialize)]
pub(crate) struct IssuedTokenView {
    /// The plaintext, shown only now.
    pub token: PlaintextToken,
    pub token_id: TokenId,
    pub kind: TokenKind,
    pub account_id: AccountId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub integration_id: Option<IntegrationId>,
    pub created_at: String,
    /// When the token stops working, if it was issued with `expires_in`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Tokens revoked by this request (`revoke_existing`).
    pub revoked: u32,
}

impl IssuedTokenView {
    pub fn new(token: PlaintextToken, record: &TokenRecord, revoked: u32) -> Self {
        IssuedTokenView {
            token,
            token_id: record.token_id.clone(),
            kind: record.token_kind,
            account_id: record.account_id.clone(),
            integration_id: record.integration_id.clone(),
            created_at: record.created_at.to_rfc3339(),
            expires_at: record.expires.map(Timestamp::to_rfc3339),
            revoked,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header::AUTHORIZATION;
    use axum::http::Request;

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    fn parts(authorization: Option<&str>) -> Parts {
        let mut b = Request::builder().uri("/operator/accounts");
        if let Some(a) = authorization {
            b = b.header(AUTHORIZATION, a);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn static_operator_tokens_compare_by_hash() {
        let auth = OperatorAuth::static_token("op-secret", "ops@example.com");
        assert_eq!(
            auth.identify(&parts(Some("Bearer op-secret"))).unwrap().id,
            "ops@example.com"
        );
        assert_eq!(
            auth.identify(&parts(Some("bearer op-secret"))).unwrap().id,
            "ops@example.com"
        );
        for bad in [
            None,
            Some("Bearer nope"),
            Some("Basic op-secret"),
            Some("op-secret"),
        ] {
            assert!(matches!(
                auth.identify(&parts(bad)),
                Err(ApiError::Unauthorized { .. })
            ));
        }
        assert!(!format!("{auth:?}").contains(&sha256_hex("op-secret")));
    }

    fn gateway_parts(claims: &[(&str, &str)], scopes: Option<Vec<&str>>) -> Parts {
        use aws_lambda_events::apigw::{
            ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription,
            ApiGatewayV2httpRequestContext,
        };
        use lambda_http::request::RequestContext;
        let mut p = parts(Some("Bearer whatever"));
        let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
        for (k, v) in claims {
            jwt.claims.insert((*k).into(), (*v).into());
        }
        jwt.scopes = scopes.map(|s| s.into_iter().map(str::to_owned).collect());
        let mut authorizer = ApiGatewayRequestAuthorizer::default();
        authorizer.jwt = Some(jwt);
        let mut ctx = ApiGatewayV2httpRequestContext::default();
        ctx.authorizer = Some(authorizer);
        p.extensions.insert(RequestContext::ApiGatewayV2(ctx));
        p
    }

    fn gateway() -> OperatorAuth {
        OperatorAuth::GatewayJwt {
            scope: "rhythm/operator".into(),
        }
    }

    #[test]
    fn gateway_jwt_reads_the_sub_claim_of_the_request_context() {
        let auth = gateway();
        assert!(
            auth.identify(&parts(Some("Bearer whatever"))).is_err(),
            "no context, no operator"
        );
        let p = gateway_parts(&[("sub", "op-7")], Some(vec!["rhythm/operator"]));
        assert_eq!(auth.identify(&p).unwrap().id, "op-7");
        assert_eq!(auth.identify(&p).unwrap().expires, None);
        // The JWT's `exp` (seconds) is when the identity, and the console sessions it opens, end.
        let p = gateway_parts(
            &[("sub", "op-7"), ("exp", "1700000000")],
            Some(vec!["rhythm/operator"]),
        );
        assert_eq!(
            auth.identify(&p).unwrap().expires,
            Some(Timestamp(1_700_000_000_000))
        );
        let p = gateway_parts(&[("sub", "")], Some(vec!["rhythm/operator"]));
        assert!(matches!(
            auth.identify(&p),
            Err(ApiError::Unauthorized { .. })
        ));
    }

    #[test]
    fn a_gateway_jwt_without_the_operator_scope_is_forbidden() {
        let auth = gateway();
        for p in [
            gateway_parts(&[("sub", "op-7")], None),
            gateway_parts(&[("sub", "op-7")], Some(vec!["rhythm/reader", "openid"])),
            gateway_parts(
                &[("sub", "op-7"), ("scope", "openid rhythm/operatorx")],
                None,
            ),
        ] {
            let e = auth.identify(&p).unwrap_err();
            assert!(matches!(e, ApiError::Forbidden { .. }), "{e:?}");
            assert_eq!(
                e.problem_type(),
                format!("{}forbidden", crate::web::problem::PROBLEM_BASE)
            );
        }
        // The scope claim (space-separated) counts as well as the authorizer's list.
        let p = gateway_parts(
            &[("sub", "op-7"), ("scope", "openid rhythm/operator")],
            None,
        );
        assert_eq!(auth.identify(&p).unwrap().id, "op-7");
    }

    #[test]
    fn operator_auth_from_the_environment() {
        let none = |_: &str| None;
        assert_eq!(OperatorAuth::from_lookup(none).unwrap(), gateway());
        let scoped = |name: &str| (name == "OPERATOR_SCOPE").then(|| "ops/admin".to_string());
        assert_eq!(
            OperatorAuth::from_lookup(scoped).unwrap(),
            OperatorAuth::GatewayJwt {
                scope: "ops/admin".into()
            }
        );
        let hash = sha256_hex("t");
        let with = |name: &str| (name == "OPERATOR_TOKEN_SHA256").then(|| hash.to_uppercase());
        assert_eq!(
            OperatorAuth::from_lookup(with).unwrap(),
            OperatorAuth::StaticToken {
                sha256_hex: hash.clone(),
                operator_id: "operator".into()
            }
        );
        let bad = |name: &str| (name == "OPERATOR_TOKEN_SHA256").then(|| "xyz".to_string());
        assert!(OperatorAuth::from_lookup(bad).is_err());
    }
}
