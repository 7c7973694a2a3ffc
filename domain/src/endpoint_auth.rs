//! What an integration's endpoint needs besides the payload: custom headers and one way of
//! authenticating (a static secret header, HTTP basic, or OAuth2 client credentials).
//!
//! Header values are configuration, not secrets: they are stored and shown as they are. The
//! credential of an authentication mode (the header's value, the password, the client secret) is
//! a secret: it is sealed like a signing secret ([`crate::sealed`], bound to the
//! integration), never shown again, and a replaced credential keeps working as a fallback for a
//! rotation's grace (tried once when the endpoint answers 401 to the new one).
//!
//! Pure: validation, the headers to send, and the OAuth2 token's freshness.

use super::sealed::{Credential, PreviousSecret, SealedSecret};
use super::time::Timestamp;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use std::collections::BTreeMap;
use std::time::Duration;

/// Custom headers an integration may have.
pub const MAX_HEADERS: usize = 20;
/// Longest custom header name.
pub const MAX_HEADER_NAME: usize = 64;
/// Longest custom header value (and longest credential or non-secret auth field).
pub const MAX_HEADER_VALUE: usize = 1024;
/// The custom headers' names and values together.
pub const MAX_HEADERS_BYTES: usize = 8 * 1024;

/// Header names an integration cannot set: what the attempt sets itself (the Standard Webhooks
/// headers, the body's type and length, the user agent, trace context), what authentication sets
/// (`authorization`, through `auth`), and what belongs to the connection (hop-by-hop headers).
pub const RESERVED_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "content-type",
    "content-length",
    "content-encoding",
    "host",
    "user-agent",
    "traceparent",
    "tracestate",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "proxy-connection",
    "accept-encoding",
];
/// Every name starting so is reserved (the Standard Webhooks headers).
pub const RESERVED_PREFIX: &str = "webhook-";

/// Why a custom header (or the static auth header's name) is refused; the message names it.
pub fn check_header_name(name: &str) -> Result<String, String> {
    let lower = name.to_ascii_lowercase();
    if name.is_empty() || name.len() > MAX_HEADER_NAME {
        return Err(format!(
            "header name {name:?} must be 1 to {MAX_HEADER_NAME} characters"
        ));
    }
    // RFC 9110 token characters.
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if !name.bytes().all(token) {
        return Err(format!(
            "header name {name:?} is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"
        ));
    }
    if lower.starts_with(RESERVED_PREFIX) || RESERVED_HEADERS.contains(&lower.as_str()) {
        return Err(format!(
            "header {lower:?} is reserved: the attempt sets it itself{}",
            if lower == "authorization" {
                " (use auth)"
            } else {
                ""
            }
        ));
    }
    Ok(lower)
}

/// Why a header value is refused: visible ASCII and inner spaces only, bounded.
pub fn check_header_value(name: &str, value: &str) -> Result<(), String> {
    if value.len() > MAX_HEADER_VALUE {
        return Err(format!(
            "the value of {name:?} is longer than {MAX_HEADER_VALUE} bytes"
        ));
    }
    let visible = value
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || (0x21..=0x7e).contains(&b));
    if value.trim() != value || value.is_empty() || !visible {
        return Err(format!(
            "the value of {name:?} must be visible ASCII (inner spaces allowed), not empty"
        ));
    }
    Ok(())
}

/// The custom headers of a request, checked: names lower-cased and unique, every problem named.
pub fn check_headers(
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, Vec<String>> {
    let mut problems = Vec::new();
    let mut out = BTreeMap::new();
    if given.len() > MAX_HEADERS {
        problems.push(format!("at most {MAX_HEADERS} headers"));
    }
    let bytes: usize = given.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > MAX_HEADERS_BYTES {
        problems.push(format!(
            "names and values together are at most {MAX_HEADERS_BYTES} bytes"
        ));
    }
    for (name, value) in given {
        match check_header_name(name).and_then(|lower| {
            check_header_value(&lower, value)?;
            Ok(lower)
        }) {
            Ok(lower) if out.contains_key(&lower) => {
                problems.push(format!("header {lower:?} is given twice"))
            }
            Ok(lower) => {
                out.insert(lower, value.clone());
            }
            Err(e) => problems.push(e),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// How the endpoint is authenticated, without the credential (sealed beside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthMode {
    /// A static header whose value is the credential (an API key).
    Header { name: String },
    /// HTTP basic: the credential is the password.
    Basic { username: String },
    /// OAuth2 client credentials: the credential is the client secret; the token from
    /// `token_url` is sent as a bearer token.
    OAuth2 {
        token_url: String,
        client_id: String,
        scope: Option<String>,
        audience: Option<String>,
    },
}

impl AuthMode {
    /// The `type` of the mode in the API and in storage.
    pub fn type_name(&self) -> &'static str {
        match self {
            AuthMode::Header { .. } => "header",
            AuthMode::Basic { .. } => "basic",
            AuthMode::OAuth2 { .. } => "oauth2_client_credentials",
        }
    }

    /// The name of the secret field in the API (`value`, `password`, `client_secret`).
    pub fn secret_field(&self) -> &'static str {
        match self {
            AuthMode::Header { .. } => "value",
            AuthMode::Basic { .. } => "password",
            AuthMode::OAuth2 { .. } => "client_secret",
        }
    }
}

/// An endpoint's authentication: its mode, its sealed credential, and for a rotation's grace the
/// one it replaced. `Debug` shows no credential (the sealed type is redacted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointAuth {
    pub mode: AuthMode,
    pub credential: SealedSecret,
    /// Boxed: rarely present.
    pub previous: Option<Box<PreviousAuth>>,
}

/// A replaced authentication, still tried (after the current one is refused) until it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviousAuth {
    pub mode: AuthMode,
    pub credential: PreviousSecret,
}

impl EndpointAuth {
    /// The authentications to try at `now`, in order: the current one, then the previous one
    /// while its grace lasts.
    pub fn tried_at(&self, now: Timestamp) -> Vec<(&AuthMode, &SealedSecret)> {
        let mut out = vec![(&self.mode, &self.credential)];
        if let Some(p) = self
            .previous
            .as_ref()
            .filter(|p| p.credential.signs_at(now))
        {
            out.push((&p.mode, &p.credential.sealed));
        }
        out
    }
}

/// An integration's endpoint settings beyond its URL: empty for most integrations, which then
/// store and cost nothing more.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Endpoint {
    /// Custom headers, names lower-case.
    pub headers: BTreeMap<String, String>,
    pub auth: Option<EndpointAuth>,
}

impl Endpoint {
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty() && self.auth.is_none()
    }
}

/// The origin of a URL (scheme, host, port: the port a scheme implies when none is written), as
/// text; `None` for a URL that does not parse or has no host.
pub fn origin(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    match parsed.origin() {
        o @ url::Origin::Tuple(..) => Some(o.ascii_serialization()),
        url::Origin::Opaque(_) => None,
    }
}

/// Whether an endpoint moving from `old` to `new` stays where its credentials were given for:
/// the same scheme, host and port (a new path or query stays). Credentials are stored for an
/// origin: an edit that moves the endpoint elsewhere drops them unless it gives them again, so a
/// stolen account credential cannot redirect them (or a bearer fetched for them) to another host.
/// A URL that cannot be read is never the same origin.
pub fn same_origin(old: &str, new: &str) -> bool {
    matches!((origin(old), origin(new)), (Some(a), Some(b)) if a == b)
}

/// The `authorization` value of HTTP basic.
pub fn basic_authorization(username: &str, password: &Credential) -> String {
    format!(
        "Basic {}",
        STANDARD.encode(format!("{username}:{}", password.expose()))
    )
}

/// The `authorization` value of a bearer token.
pub fn bearer_authorization(token: &Credential) -> String {
    format!("Bearer {}", token.expose())
}

/// The client authentication of a token request (RFC 6749 §2.3.1): HTTP basic over the
/// form-encoded client id and secret.
pub fn client_authorization(client_id: &str, client_secret: &Credential) -> String {
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    format!(
        "Basic {}",
        STANDARD.encode(format!(
            "{}:{}",
            enc(client_id),
            enc(client_secret.expose())
        ))
    )
}

/// The form body of a client-credentials token request.
pub fn token_request_body(scope: Option<&str>, audience: Option<&str>) -> String {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "client_credentials");
    if let Some(scope) = scope {
        form.append_pair("scope", scope);
    }
    if let Some(audience) = audience {
        form.append_pair("audience", audience);
    }
    form.finish()
}

/// How long a token without `expires_in` is used.
pub const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(60);
/// A token is fetched again this long before it expires (at most half its lifetime), so none is
/// sent just as it lapses.
pub const TOKEN_EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// Until when a token fetched at `now` with `expires_in` seconds is used.
pub fn token_fresh_until(now: Timestamp, expires_in: Option<u64>) -> Timestamp {
    let lifetime = expires_in.map_or(DEFAULT_TOKEN_LIFETIME, Duration::from_secs);
    now.plus(lifetime - TOKEN_EXPIRY_MARGIN.min(lifetime / 2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sealed::{seal_credential, DataKey};

    #[test]
    fn an_endpoint_stays_at_its_origin_only_with_the_same_scheme_host_and_port() {
        let at = "https://hooks.acme.test/crm?x=1";
        for same in [
            "https://hooks.acme.test/other/path",
            "https://HOOKS.acme.test:443/crm",
            "https://hooks.acme.test/crm?x=2#f",
        ] {
            assert!(same_origin(at, same), "{same}");
        }
        for moved in [
            "http://hooks.acme.test/crm",
            "https://hooks.acme.test:8443/crm",
            "https://evil.test/crm",
            "https://hooks.acme.test.evil.test/crm",
            "https://user@evil.test/crm",
            "not a url",
        ] {
            assert!(!same_origin(at, moved), "{moved}");
        }
        assert!(!same_origin("not a url", "not a url"));
        assert_eq!(
            origin("http://127.0.0.1:8080/a").as_deref(),
            Some("http://127.0.0.1:8080")
        );
    }

    fn headers(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn custom_headers_are_lower_cased_and_kept() {
        let ok = check_headers(&headers(&[
            ("X-Tenant", "acme"),
            ("X-Api-Version", "2024-01 b"),
        ]))
        .unwrap();
        assert_eq!(
            ok,
            headers(&[("x-api-version", "2024-01 b"), ("x-tenant", "acme")])
        );
    }

    #[test]
    fn reserved_and_malformed_headers_are_refused_by_name() {
        for name in [
            "webhook-id",
            "Webhook-Signature",
            "Content-Type",
            "content-length",
            "Host",
            "user-agent",
            "traceparent",
            "tracestate",
            "Authorization",
            "transfer-encoding",
            "connection",
        ] {
            let e = check_headers(&headers(&[(name, "v")])).unwrap_err();
            assert!(e[0].contains(&name.to_ascii_lowercase()), "{e:?}");
            assert!(e[0].contains("reserved"), "{e:?}");
        }
        let e = check_headers(&headers(&[("Authorization", "x")])).unwrap_err();
        assert!(e[0].contains("use auth"), "{e:?}");
        for (name, value) in [
            ("x y", "v"),
            ("x:y", "v"),
            ("", "v"),
            ("x-ok", "é"),
            ("x-ok", "a\nb"),
            ("x-ok", ""),
        ] {
            assert!(
                check_headers(&headers(&[(name, value)])).is_err(),
                "{name:?}: {value:?}"
            );
        }
        let e = check_headers(&headers(&[("X-A", "1"), ("x-a", "2")])).unwrap_err();
        assert!(e[0].contains("twice"), "{e:?}");
        let many: Vec<(String, String)> = (0..=MAX_HEADERS)
            .map(|i| (format!("x-{i}"), "v".into()))
            .collect();
        assert!(check_headers(&many.into_iter().collect()).is_err());
    }

    #[test]
    fn basic_and_client_authorization_are_rfc_shaped() {
        let pw = Credential::new("p@ss:word".into());
        assert_eq!(
            basic_authorization("u", &pw),
            format!("Basic {}", STANDARD.encode("u:p@ss:word"))
        );
        assert_eq!(
            client_authorization("id 1", &pw),
            format!("Basic {}", STANDARD.encode("id+1:p%40ss%3Aword"))
        );
        assert_eq!(
            token_request_body(Some("read write"), None),
            "grant_type=client_credentials&scope=read+write"
        );
        assert_eq!(
            token_request_body(None, None),
            "grant_type=client_credentials"
        );
    }

    #[test]
    fn a_token_is_used_until_shortly_before_it_expires() {
        let now = Timestamp::from_millis(1_000_000);
        assert_eq!(
            token_fresh_until(now, Some(3600)),
            now.plus(Duration::from_secs(3570))
        );
        assert_eq!(
            token_fresh_until(now, Some(20)),
            now.plus(Duration::from_secs(10))
        );
        assert_eq!(
            token_fresh_until(now, None),
            now.plus(Duration::from_secs(30))
        );
        assert_eq!(token_fresh_until(now, Some(0)), now);
    }

    #[test]
    fn the_previous_authentication_is_tried_after_the_current_one_until_it_expires() {
        let key = DataKey::from_slice(&[1; 32]).unwrap();
        let sealed = |n: u8| {
            seal_credential(
                &key,
                "k",
                b"w",
                [n; 12],
                "a1",
                "i1",
                &Credential::new(format!("s{n}")),
            )
        };
        let auth = EndpointAuth {
            mode: AuthMode::Basic {
                username: "new".into(),
            },
            credential: sealed(2),
            previous: Some(Box::new(PreviousAuth {
                mode: AuthMode::Basic {
                    username: "old".into(),
                },
                credential: PreviousSecret {
                    sealed: sealed(1),
                    expires_at: Timestamp::from_millis(10),
                },
            })),
        };
        let names = |now| {
            auth.tried_at(Timestamp::from_millis(now))
                .into_iter()
                .map(|(m, _)| match m {
                    AuthMode::Basic { username } => username.clone(),
                    _ => unreachable!(),
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(names(9), ["new", "old"]);
        assert_eq!(names(10), ["new"]);
        let shown = format!("{auth:?}");
        assert!(!shown.contains("s1") && !shown.contains("s2"), "{shown}");
    }
}
