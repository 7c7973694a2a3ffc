//! Who is calling: bearer tokens for accounts and integrations, and the operator identity.
//!
//! ## Tokens
//!
//! A token reads `rhy_{kind}_{token_id}_{secret}`: `kind` is `acct` (an account's token: the
//! management API) or `intg` (an integration's token: the adapter's pull routes), `token_id` a
//! lowercase ULID, `secret` 32 random bytes in unpadded base64url (which may itself contain `_`;
//! the token is split at the first three underscores only). The plaintext is shown once, when the
//! token is issued; the table keeps only the SHA-256 of the secret, on the item
//! `TOKEN#{token_id}` / `TOKEN`, which a request finds in one consistent read by the id and
//! compares in constant time. Unknown, malformed, revoked or wrong-kind tokens are all the same
//! 401 (`WWW-Authenticate: Bearer`), so a caller learns nothing about tokens it does not hold.
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

use super::account_limits;
use super::credentials::INVALID_TOKEN;
pub use super::credentials::{bearer, constant_time_eq, sha256_hex};
pub use super::operator_auth::{Operator, OperatorAuth, DEFAULT_OPERATOR_SCOPE};
use super::problem::ApiError;
use super::state::ApiState;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId, TokenId};
use crate::store::account_limits::Counted;
use crate::store::audit::{AuditAction, AuditRecord};
use crate::store::token;
use crate::store::write::{send, Write};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use serde::Serialize;
use std::fmt;
use std::sync::Arc;

pub use crate::store::token::{
    token_ref_pk, token_ref_sk, TokenKind, TokenRecord, TokenRef, TOKEN_KIND, TOKEN_REF_KIND,
};

pub const TOKEN_PREFIX: &str = "rhy";
/// Random bytes in a token's secret.
pub const SECRET_BYTES: usize = 32;

/// A secret shown once (a token's plaintext, a webhook signing secret). Its `Debug` is redacted;
/// the text leaves only through [`OneTimeSecret::expose`] and its serialization (the one
/// response that reveals it).
#[derive(Clone, PartialEq, Eq)]
pub struct OneTimeSecret(String);

/// A token's plaintext.
pub type PlaintextToken = OneTimeSecret;

impl OneTimeSecret {
    pub fn new(text: String) -> Self {
        OneTimeSecret(text)
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for OneTimeSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OneTimeSecret(<redacted>)")
    }
}

impl Serialize for OneTimeSecret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Why a presented token cannot even be looked up. Messages never contain the token.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TokenFormatError {
    #[error("a token reads rhy_{{kind}}_{{id}}_{{secret}}")]
    Shape,
    #[error("unknown token kind")]
    Kind,
    #[error("the token id is not a ULID")]
    Id,
    #[error("the token secret is not {SECRET_BYTES} bytes of base64url")]
    Secret,
}

/// A presented token, split into its parts (borrowing the presented text).
#[derive(Clone, PartialEq, Eq)]
pub struct ParsedToken<'a> {
    pub kind: TokenKind,
    pub token_id: TokenId,
    pub secret: &'a str,
}

impl fmt::Debug for ParsedToken<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParsedToken")
            .field("kind", &self.kind)
            .field("token_id", &self.token_id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

pub fn parse_token(text: &str) -> Result<ParsedToken<'_>, TokenFormatError> {
    let mut parts = text.splitn(4, '_');
    let (Some(prefix), Some(kind), Some(token_id), Some(secret)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenFormatError::Shape);
    };
    if prefix != TOKEN_PREFIX {
        return Err(TokenFormatError::Shape);
    }
    let kind = TokenKind::parse(kind).ok_or(TokenFormatError::Kind)?;
    // Ids are issued lowercase; anything else is not an issued token.
    if crate::ids::canonical_id(token_id).as_deref() != Some(token_id) {
        return Err(TokenFormatError::Id);
    }
    match URL_SAFE_NO_PAD.decode(secret) {
        Ok(bytes) if bytes.len() == SECRET_BYTES => {}
        _ => return Err(TokenFormatError::Secret),
    }
    Ok(ParsedToken {
        kind,
        token_id: TokenId::from_stored(token_id),
        secret,
    })
}

/// A new token of `kind` for an account (and, for `intg`, an integration): the plaintext to show
/// once and the record to store.
pub fn issue_token(
    kind: TokenKind,
    account_id: &AccountId,
    integration_id: Option<&IntegrationId>,
    now: Timestamp,
) -> (PlaintextToken, TokenRecord) {
    let token_id = TokenId::new();
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let secret = URL_SAFE_NO_PAD.encode(bytes);
    let plaintext = OneTimeSecret(format!(
        "{TOKEN_PREFIX}_{}_{token_id}_{secret}",
        kind.as_str()
    ));
    let record = TokenRecord::new(
        token_id,
        kind,
        account_id.clone(),
        integration_id.cloned(),
        sha256_hex(&secret),
        now,
    );
    (plaintext, record)
}

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

/// Verifies a presented token against its stored hash.
pub async fn verify_token(state: &ApiState, presented: &str) -> Result<Principal, ApiError> {
    let parsed = parse_token(presented).map_err(|_| ApiError::unauthorized(INVALID_TOKEN))?;
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

/// Any valid token (account or integration).
impl FromRequestParts<Arc<ApiState>> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ApiState>,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(parts)?;
        verify_token(state, token).await
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

/// Which of an account's tokens to revoke.
#[derive(Debug, Clone, Copy)]
pub struct RevokeScope<'a> {
    pub account_id: &'a AccountId,
    pub kind: TokenKind,
    /// `intg` tokens: only this integration's.
    pub integration_id: Option<&'a IntegrationId>,
    /// Keep this one (the token just issued).
    pub except: Option<&'a TokenId>,
    /// Who revokes (for the audit entry of each revoked token) …
    pub actor: &'a str,
    /// … and why.
    pub reason: &'a str,
}

/// Shortest and longest lifetime a token may be issued with (`expires_in`, seconds).
pub const TOKEN_EXPIRY_RANGE: std::ops::RangeInclusive<u64> = 60..=366 * 24 * 60 * 60;

/// The optional `expires_in` (seconds) of a token issuance: the token stops working that long
/// after it is issued. Out of [`TOKEN_EXPIRY_RANGE`], or not a whole number, is the field's 422.
pub fn read_token_expiry(f: &mut crate::api::extract::Fields) -> Option<std::time::Duration> {
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

/// Issues a new token of `kind` for the account (or one integration of it), stores it, and with
/// `revoke_existing` revokes the others of the same scope: the rotation both the account and the
/// integration token routes offer. With `expires_in` the token stops working that long after
/// now. `audit` (the issuance's entry: who, why) is written in one transaction with the token; it
/// learns the token's id, and each revoked token gets its own entry by the same actor. Returns the
/// token (shown once), its record and how many tokens were revoked.
pub async fn issue_rotated(
    state: &ApiState,
    kind: TokenKind,
    account_id: &AccountId,
    integration_id: Option<&IntegrationId>,
    revoke_existing: bool,
    expires_in: Option<std::time::Duration>,
    audit: AuditRecord,
) -> Result<(PlaintextToken, TokenRecord, u32), ApiError> {
    let now = state.clock.now();
    let (token, record) = issue_token(kind, account_id, integration_id, now);
    let record = record.expiring(expires_in.map(|d| now.plus(d)));
    let table = state.table();
    let audit = AuditRecord { at: now, ..audit }
        .detail("token_id", &record.token_id)
        .detail("revoke_existing", revoke_existing);
    let writes = vec![
        token::create(table, &record)?,
        crate::store::audit::create(table, &audit)?,
    ];
    account_limits::create_counted(
        state,
        account_id,
        &[Counted::LiveTokens],
        Write::all(writes)?,
    )
    .await?;
    let revoked = if revoke_existing {
        revoke_tokens(
            state,
            RevokeScope {
                account_id,
                kind,
                integration_id,
                except: Some(&record.token_id),
                actor: &audit.operator,
                reason: &format!("replaced by token {} (revoke_existing)", record.token_id),
            },
            now,
        )
        .await?
    } else {
        0
    };
    Ok((token, record, revoked))
}

/// Revokes every token in `scope`: marks the token item revoked (so it fails verification), with
/// its audit entry and the account's count of live tokens in the same transaction, then drops
/// its reference. Safe to repeat. Returns how many tokens were revoked now.
pub async fn revoke_tokens(
    state: &ApiState,
    scope: RevokeScope<'_>,
    now: Timestamp,
) -> Result<u32, ApiError> {
    revoke_where(
        state,
        scope.account_id,
        scope.actor,
        scope.reason,
        now,
        |r| {
            r.token_kind == scope.kind
                && (scope.kind == TokenKind::Acct
                    || r.integration_id.as_ref() == scope.integration_id)
                && Some(&r.token_id) != scope.except
        },
    )
    .await
}

/// Revokes every token of the account, of both kinds (the account's deletion), each audited
/// with `actor` and `reason`. Safe to repeat.
pub async fn revoke_all_tokens(
    state: &ApiState,
    account_id: &AccountId,
    actor: &str,
    reason: &str,
    now: Timestamp,
) -> Result<u32, ApiError> {
    revoke_where(state, account_id, actor, reason, now, |_| true).await
}

/// Walks the account's token references and revokes those `in_scope` picks, each with its audit
/// entry by `actor` for `reason`.
async fn revoke_where(
    state: &ApiState,
    account_id: &AccountId,
    actor: &str,
    reason: &str,
    now: Timestamp,
    in_scope: impl Fn(&token::TokenRef) -> bool,
) -> Result<u32, ApiError> {
    let (dynamo, table) = (state.dynamo(), state.table());
    let mut after: Option<TokenId> = None;
    let mut revoked = 0;
    loop {
        let (refs, next) = token::references(dynamo, table, account_id, after.as_ref()).await?;
        for r in refs {
            if !in_scope(&r) {
                continue;
            }
            let entry =
                AuditRecord::for_account(AuditAction::RevokeToken, account_id, actor, reason, now)
                    .detail("token_id", &r.token_id)
                    .detail("kind", r.token_kind);
            let entry = match &r.integration_id {
                Some(i) => entry.detail("integration_id", i),
                None => entry,
            };
            // Refused: gone or revoked already (a repeated revocation), counted and audited once.
            if account_limits::removed_counted(
                state,
                account_id,
                &[Counted::LiveTokens],
                Write::all([
                    token::revoke(table, &r.token_id, now)?,
                    crate::store::audit::create(table, &entry)?,
                ])?,
            )
            .await?
            {
                revoked += 1;
            }
            send(
                dynamo,
                token::drop_reference(table, account_id, &r.token_id)?,
            )
            .await?;
        }
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    Ok(revoked)
}

/// The one-time response of an issued token.
#[derive(Debug, Serialize)]
pub struct IssuedTokenView {
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
    use crate::ids::id;
    use crate::store::expr::s;
    use crate::store::keys::token_pk;
    use axum::http::header::AUTHORIZATION;
    use axum::http::Request;

    #[test]
    fn issued_tokens_parse_back_and_store_only_the_hash() {
        let (plain, record) =
            issue_token(TokenKind::Intg, &id("acc"), Some(&id("int")), Timestamp(5));
        let text = plain.expose().to_owned();
        assert!(text.starts_with("rhy_intg_"));
        let parsed = parse_token(&text).unwrap();
        assert_eq!(parsed.kind, TokenKind::Intg);
        assert_eq!(parsed.token_id, record.token_id);
        assert_eq!(record.secret_sha256, sha256_hex(parsed.secret));
        assert_eq!(record.secret_sha256.len(), 64);
        assert!(!format!("{record:?}").contains(parsed.secret));
        assert!(!format!("{plain:?}").contains(parsed.secret));
        assert!(!format!("{parsed:?}").contains(parsed.secret));
        let item = record.item().unwrap();
        assert!(item
            .values()
            .all(|v| v.as_s().map_or(true, |s| !s.contains(parsed.secret))));
        assert_eq!(item["pk"], s(token_pk(&record.token_id)));
        assert_eq!(item["token_kind"], s("intg"));
    }

    #[test]
    fn secrets_may_contain_underscores() {
        // base64url uses `_`; only the first three underscores separate parts.
        let id = crate::ids::new_id();
        let secret = URL_SAFE_NO_PAD.encode([0xffu8; SECRET_BYTES]);
        assert!(secret.contains('_'));
        let text = format!("rhy_acct_{id}_{secret}");
        let parsed = parse_token(&text).unwrap();
        assert_eq!(parsed.secret, secret);
    }

    #[test]
    fn malformed_tokens_are_refused_before_any_lookup() {
        let id = crate::ids::new_id();
        let secret = URL_SAFE_NO_PAD.encode([7u8; SECRET_BYTES]);
        let cases = [
            (String::new(), TokenFormatError::Shape),
            ("rhy_acct".to_string(), TokenFormatError::Shape),
            (format!("xyz_acct_{id}_{secret}"), TokenFormatError::Shape),
            (format!("rhy_root_{id}_{secret}"), TokenFormatError::Kind),
            (
                format!("rhy_acct_{}_{secret}", id.to_ascii_uppercase()),
                TokenFormatError::Id,
            ),
            (format!("rhy_acct_nope_{secret}"), TokenFormatError::Id),
            (format!("rhy_acct_{id}_short"), TokenFormatError::Secret),
            (
                format!("rhy_acct_{id}_{secret}AA"),
                TokenFormatError::Secret,
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_token(&text).unwrap_err(), expected, "{text}");
        }
    }

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
                format!("{}forbidden", super::super::problem::PROBLEM_BASE)
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
