//! The integration item: an installed adapter of an account, in the account's partition. Its
//! signing secret is stored here sealed (AES-256-GCM under a KMS data key, bound to this
//! integration: [`crate::domain::sealed`]), so neither the item, its stream images nor a backup
//! hold it in plaintext; it never leaves through the API after creation.
//!
//! An endpoint's custom headers and authentication ([`crate::domain::endpoint_auth`]) are
//! attributes only an integration that has them carries (`endpoint_headers`, `endpoint_auth`,
//! `previous_endpoint_auth`): the item of one without them is the same size as before. The
//! authentication's credential is sealed as the signing secret is.
//!
//! Items written before sealing held a plaintext `signing_secret`; it is no longer read (such a
//! webhook reads as incomplete until its secret is rotated, which removes the old attribute).

use super::page::{self, PrefixPage};
use super::read;
use super::update::{delete_existing, Edit};
use super::write::put_new;
use super::write::Write;
use super::{keys, to_item, Item, StoreError};
use crate::domain::delivery_method::DeliveryMethod;
use crate::domain::endpoint_auth::{AuthMode, Endpoint, EndpointAuth, PreviousAuth};
use crate::domain::sealed::{PreviousSecret, SealedSecret, NONCE_BYTES};
use crate::domain::target::{Target, TargetParts, WebhookSecret};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The attribute of the current sealed signing secret (a map, see [`StoredSealed`]).
pub const SEALED_SECRET: &str = "sealed_signing_secret";
/// The attribute of the previous sealed secret and its expiry, kept for a rotation's grace.
pub const PREVIOUS_SECRET: &str = "previous_signing_secret";
/// The attribute of the endpoint's custom headers (a map of lower-case names to values).
pub(crate) const ENDPOINT_HEADERS: &str = "endpoint_headers";
/// The attribute of the endpoint's authentication: its mode's fields and sealed credential.
pub const ENDPOINT_AUTH: &str = "endpoint_auth";
/// The attribute of the authentication a change replaced, kept for a rotation's grace.
pub const PREVIOUS_ENDPOINT_AUTH: &str = "previous_endpoint_auth";
/// The plaintext attribute of items written before sealing; a rotation removes it.
const LEGACY_PLAINTEXT_SECRET: &str = "signing_secret";

/// The `kind` of an integration item.
pub const KIND: &str = "integration";

/// An installed adapter of an account. Stored flat (see [`StoredIntegration`]); its `Debug`
/// output never shows the signing secret.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(from = "StoredIntegration", into = "StoredIntegration")]
pub struct Integration {
    pub account_id: AccountId,
    pub integration_id: IntegrationId,
    pub name: String,
    /// Where deliveries go: the webhook's URL and Standard Webhooks signing secret (never
    /// logged or returned after creation), the built-in handler, or pull.
    pub target: Target,
    /// Consent: the account accepted that this integration receives its events.
    pub event_access_accepted: bool,
    /// At most this many attempts start in one second ([`crate::domain::rate_limit`]); `None`:
    /// no limit, and nothing is counted.
    pub rate_limit_per_second: Option<u32>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// A webhook's custom headers and authentication (empty for most).
    pub endpoint: Endpoint,
}

impl Integration {
    /// A new integration of an account.
    pub fn new(
        account_id: AccountId,
        integration_id: IntegrationId,
        name: String,
        target: Target,
        event_access_accepted: bool,
        now: Timestamp,
    ) -> Self {
        Integration {
            account_id,
            integration_id,
            name,
            target,
            event_access_accepted,
            rate_limit_per_second: None,
            created_at: now,
            updated_at: now,
            endpoint: Endpoint::default(),
        }
    }

    /// The delivery method alone, for code that needs nothing of the target.
    pub fn delivery_method(&self) -> DeliveryMethod {
        self.target.delivery_method()
    }
}

/// The stored attributes of an integration: the target as `method`, `webhook_url`,
/// `sealed_signing_secret`, `previous_signing_secret` and `handler`.
#[derive(Serialize, Deserialize)]
struct StoredIntegration {
    account_id: AccountId,
    integration_id: IntegrationId,
    name: String,
    method: DeliveryMethod,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    webhook_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sealed_signing_secret: Option<StoredSealed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    previous_signing_secret: Option<StoredPrevious>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    handler: Option<String>,
    event_access_accepted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rate_limit_per_second: Option<u32>,
    created_at: Timestamp,
    updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    endpoint_headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    endpoint_auth: Option<StoredAuth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    previous_endpoint_auth: Option<StoredAuth>,
}

impl From<StoredIntegration> for Integration {
    fn from(s: StoredIntegration) -> Self {
        Integration {
            account_id: s.account_id,
            integration_id: s.integration_id,
            name: s.name,
            target: Target::from_parts(TargetParts {
                method: s.method,
                webhook_url: s.webhook_url,
                // A malformed stored secret reads as missing: deliveries fail as incomplete.
                signing_secret: s
                    .sealed_signing_secret
                    .and_then(|c| c.sealed())
                    .map(|current| WebhookSecret {
                        current,
                        previous: s
                            .previous_signing_secret
                            .and_then(|p| p.previous())
                            .map(Box::new),
                    }),
                handler: s.handler,
            }),
            event_access_accepted: s.event_access_accepted,
            rate_limit_per_second: s.rate_limit_per_second,
            created_at: s.created_at,
            updated_at: s.updated_at,
            endpoint: Endpoint {
                headers: s.endpoint_headers,
                // A malformed stored authentication reads as none.
                auth: s
                    .endpoint_auth
                    .and_then(StoredAuth::current)
                    .map(|(mode, credential)| EndpointAuth {
                        mode,
                        credential,
                        previous: s
                            .previous_endpoint_auth
                            .and_then(StoredAuth::previous)
                            .map(Box::new),
                    }),
            },
        }
    }
}

impl From<Integration> for StoredIntegration {
    fn from(i: Integration) -> Self {
        let parts = i.target.into_parts();
        let (current, previous) = match parts.signing_secret {
            Some(WebhookSecret { current, previous }) => (Some(current), previous),
            None => (None, None),
        };
        StoredIntegration {
            account_id: i.account_id,
            integration_id: i.integration_id,
            name: i.name,
            method: parts.method,
            webhook_url: parts.webhook_url,
            sealed_signing_secret: current.as_ref().map(StoredSealed::from),
            previous_signing_secret: previous.as_deref().map(StoredPrevious::from),
            handler: parts.handler,
            event_access_accepted: i.event_access_accepted,
            rate_limit_per_second: i.rate_limit_per_second,
            created_at: i.created_at,
            updated_at: i.updated_at,
            endpoint_auth: i
                .endpoint
                .auth
                .as_ref()
                .map(|a| StoredAuth::new(&a.mode, &a.credential, None)),
            previous_endpoint_auth: i
                .endpoint
                .auth
                .as_ref()
                .and_then(|a| a.previous.as_deref())
                .map(StoredAuth::of_previous),
            endpoint_headers: i.endpoint.headers,
        }
    }
}

/// An endpoint authentication as stored: its `type`, the mode's fields, the sealed credential
/// and, for a replaced one, when it stops being tried.
#[derive(Serialize, Deserialize)]
struct StoredAuth {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    audience: Option<String>,
    credential: StoredSealed,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<Timestamp>,
}

impl StoredAuth {
    fn new(mode: &AuthMode, credential: &SealedSecret, expires_at: Option<Timestamp>) -> Self {
        let mut s = StoredAuth {
            kind: mode.type_name().to_owned(),
            name: None,
            username: None,
            token_url: None,
            client_id: None,
            scope: None,
            audience: None,
            credential: StoredSealed::from(credential),
            expires_at,
        };
        match mode.clone() {
            AuthMode::Header { name } => s.name = Some(name),
            AuthMode::Basic { username } => s.username = Some(username),
            AuthMode::OAuth2 {
                token_url,
                client_id,
                scope,
                audience,
            } => {
                s.token_url = Some(token_url);
                s.client_id = Some(client_id);
                s.scope = scope;
                s.audience = audience;
            }
        }
        s
    }

    fn of_previous(p: &PreviousAuth) -> Self {
        Self::new(&p.mode, &p.credential.sealed, Some(p.credential.expires_at))
    }

    fn current(self) -> Option<(AuthMode, SealedSecret)> {
        let mode = match self.kind.as_str() {
            "header" => AuthMode::Header { name: self.name? },
            "basic" => AuthMode::Basic {
                username: self.username?,
            },
            "oauth2_client_credentials" => AuthMode::OAuth2 {
                token_url: self.token_url?,
                client_id: self.client_id?,
                scope: self.scope,
                audience: self.audience,
            },
            _ => return None,
        };
        Some((mode, self.credential.sealed()?))
    }

    fn previous(self) -> Option<PreviousAuth> {
        let expires_at = self.expires_at?;
        let (mode, sealed) = self.current()?;
        Some(PreviousAuth {
            mode,
            credential: PreviousSecret { sealed, expires_at },
        })
    }
}

/// Adds the endpoint's custom headers to `edit` (none: the attribute goes).
pub(crate) fn set_headers(
    edit: Edit,
    headers: &BTreeMap<String, String>,
) -> Result<Edit, StoreError> {
    Ok(if headers.is_empty() {
        edit.remove(ENDPOINT_HEADERS)
    } else {
        edit.set(ENDPOINT_HEADERS, headers)?
    })
}

/// Adds the endpoint's authentication to `edit`: its current mode and credential and the
/// replaced one kept for a grace (each removed when absent).
pub(crate) fn set_auth(edit: Edit, auth: Option<&EndpointAuth>) -> Result<Edit, StoreError> {
    let edit = match auth {
        Some(a) => edit.set(
            ENDPOINT_AUTH,
            &StoredAuth::new(&a.mode, &a.credential, None),
        )?,
        None => edit.remove(ENDPOINT_AUTH),
    };
    Ok(match auth.and_then(|a| a.previous.as_deref()) {
        Some(p) => edit.set(PREVIOUS_ENDPOINT_AUTH, &StoredAuth::of_previous(p))?,
        None => edit.remove(PREVIOUS_ENDPOINT_AUTH),
    })
}

/// Makes `edit` apply only while the integration's webhook URL is still `url`: an edit of its
/// URL or authentication is decided from the URL it read (credentials stay with their endpoint's
/// origin), and a concurrent move must not slip between the read and the write.
pub(crate) fn while_url_is(edit: Edit, url: &str) -> Result<Edit, StoreError> {
    edit.require_equal("webhook_url", &url)
}

/// A sealed secret as stored: a map of the KMS key id and base64 texts.
#[derive(Serialize, Deserialize)]
struct StoredSealed {
    key_id: String,
    wrapped_key: String,
    nonce: String,
    ciphertext: String,
}

impl StoredSealed {
    fn sealed(self) -> Option<SealedSecret> {
        let nonce: [u8; NONCE_BYTES] = STANDARD.decode(self.nonce).ok()?.try_into().ok()?;
        Some(SealedSecret {
            key_id: self.key_id,
            wrapped_key: STANDARD.decode(self.wrapped_key).ok()?,
            nonce,
            ciphertext: STANDARD.decode(self.ciphertext).ok()?,
        })
    }
}

impl From<&SealedSecret> for StoredSealed {
    fn from(s: &SealedSecret) -> Self {
        StoredSealed {
            key_id: s.key_id.clone(),
            wrapped_key: STANDARD.encode(&s.wrapped_key),
            nonce: STANDARD.encode(s.nonce),
            ciphertext: STANDARD.encode(&s.ciphertext),
        }
    }
}

/// The previous sealed secret and when it stops signing.
#[derive(Serialize, Deserialize)]
struct StoredPrevious {
    #[serde(flatten)]
    sealed: StoredSealed,
    expires_at: Timestamp,
}

impl StoredPrevious {
    fn previous(self) -> Option<PreviousSecret> {
        Some(PreviousSecret {
            sealed: self.sealed.sealed()?,
            expires_at: self.expires_at,
        })
    }
}

impl From<&PreviousSecret> for StoredPrevious {
    fn from(p: &PreviousSecret) -> Self {
        StoredPrevious {
            sealed: StoredSealed::from(&p.sealed),
            expires_at: p.expires_at,
        }
    }
}

/// Adds a rotation to `edit`: `current` becomes the signing secret, `previous` (the secret it
/// replaces, with its expiry) is kept or, without grace, removed; a legacy plaintext secret goes.
pub fn rotate_secret(
    edit: Edit,
    current: &SealedSecret,
    previous: Option<&PreviousSecret>,
) -> Result<Edit, StoreError> {
    let edit = edit
        .set(SEALED_SECRET, &StoredSealed::from(current))?
        .remove(LEGACY_PLAINTEXT_SECRET);
    Ok(match previous {
        Some(p) => edit.set(PREVIOUS_SECRET, &StoredPrevious::from(p))?,
        None => edit.remove(PREVIOUS_SECRET),
    })
}

/// The key of an integration.
pub fn key(account_id: &AccountId, integration_id: &IntegrationId) -> (String, String) {
    (
        keys::account_pk(account_id),
        keys::integration_sk(integration_id),
    )
}

impl Integration {
    pub fn key(&self) -> (String, String) {
        key(&self.account_id, &self.integration_id)
    }

    pub fn item(&self) -> Result<Item, StoreError> {
        let (pk, sk) = self.key();
        to_item(self, &pk, &sk, KIND)
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        super::from_item(item)
    }
}

/// A consistent read of an integration.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    integration_id: &IntegrationId,
) -> Result<Option<Integration>, StoreError> {
    read::get_as(dynamo, table, key(account_id, integration_id)).await
}

/// One page of the account's integrations in id order, and the id to continue after.
pub async fn list(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    limit: u32,
    after_id: Option<&IntegrationId>,
) -> Result<(Vec<Integration>, Option<IntegrationId>), StoreError> {
    let pk = keys::account_pk(account_id);
    let (items, next) = page::read(
        dynamo,
        &PrefixPage {
            table,
            pk: &pk,
            prefix: keys::INTEGRATION_PREFIX,
            limit,
            after_id: after_id.map(IntegrationId::as_str),
            filter: None,
        },
    )
    .await?;
    Ok((items, next.map(IntegrationId::from_stored)))
}

/// Creates the integration unless its id is taken.
pub fn create(table: &str, integration: &Integration) -> Result<Write, StoreError> {
    put_new(table, integration.item()?)
}

/// Applies `edit` to the integration if it exists, answering with the integration as it is now.
pub fn edit(
    table: &str,
    account_id: &AccountId,
    integration_id: &IntegrationId,
    edit: Edit,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id, integration_id);
    edit.of_existing(table, &pk, &sk)
}

/// Deletes the integration; refused when there is none.
pub fn delete(
    table: &str,
    account_id: &AccountId,
    integration_id: &IntegrationId,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id, integration_id);
    delete_existing(table, &pk, &sk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::sealed::{seal, DataKey};
    use crate::domain::signing::SigningSecret;
    use crate::ids::id;
    use aws_sdk_dynamodb::types::AttributeValue;

    fn plaintext(byte: u8) -> SigningSecret {
        SigningSecret::from_bytes(&[byte; 32]).unwrap()
    }

    fn sealed(byte: u8) -> SealedSecret {
        let key = DataKey::from_slice(&[1; 32]).unwrap();
        seal(
            &key,
            "k1",
            b"wrapped",
            [byte; 12],
            "a1",
            "i1",
            &plaintext(byte),
        )
    }

    fn integration() -> Integration {
        Integration {
            account_id: "a1".parse().unwrap(),
            integration_id: "i1".parse().unwrap(),
            name: "Hook".into(),
            target: Target::Webhook {
                url: "https://example.test/h".into(),
                secret: WebhookSecret::new(sealed(7)),
            },
            event_access_accepted: true,
            rate_limit_per_second: None,
            created_at: Timestamp(1),
            updated_at: Timestamp(1),
            endpoint: Endpoint::default(),
        }
    }

    #[test]
    fn an_integration_is_created_once_in_its_account_partition() {
        let Write::Put(p) = create("t", &integration()).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.condition_expression(), Some("attribute_not_exists(pk)"));
        assert_eq!(p.item()["pk"].as_s().unwrap(), "ACCT#a1");
        assert_eq!(p.item()["sk"].as_s().unwrap(), "INTEG#i1");
        assert_eq!(p.item()["kind"].as_s().unwrap(), KIND);
        assert!(!p.item().contains_key("handler"));
    }

    #[test]
    fn an_edit_or_a_delete_needs_the_integration_to_exist() {
        let Write::UpdateReturningNew(u) = edit(
            "t",
            &id("a1"),
            &id("i1"),
            Edit::new().set("name", &"n").unwrap(),
        )
        .unwrap() else {
            panic!("not an update returning the item")
        };
        assert_eq!(u.key()["sk"].as_s().unwrap(), "INTEG#i1");
        assert_eq!(u.condition_expression(), Some("attribute_exists(pk)"));
        let Write::Delete(d) = delete("t", &id("a1"), &id("i1")).unwrap() else {
            panic!("not a delete")
        };
        assert_eq!(d.key()["pk"].as_s().unwrap(), "ACCT#a1");
        assert_eq!(d.key()["sk"].as_s().unwrap(), "INTEG#i1");
        assert_eq!(d.condition_expression(), Some("attribute_exists(pk)"));
    }

    #[test]
    fn the_target_is_stored_as_the_flat_attributes_it_always_had() {
        let item = integration().item().unwrap();
        assert_eq!(item["method"].as_s().unwrap(), "webhook");
        assert_eq!(
            item["webhook_url"].as_s().unwrap(),
            "https://example.test/h"
        );
        let stored = item[SEALED_SECRET].as_m().unwrap();
        let mut fields: Vec<_> = stored.keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(fields, ["ciphertext", "key_id", "nonce", "wrapped_key"]);
        assert_eq!(stored["key_id"].as_s().unwrap(), "k1");
        let mut names: Vec<_> = item.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "account_id",
                "created_at",
                "event_access_accepted",
                "integration_id",
                "kind",
                "method",
                "name",
                "pk",
                "sealed_signing_secret",
                "sk",
                "updated_at",
                "webhook_url"
            ]
        );
        assert_eq!(Integration::from_item(item).unwrap(), integration());
    }

    #[test]
    fn an_endpoints_headers_and_authentication_round_trip_without_plaintext() {
        use crate::domain::sealed::{seal_credential, Credential};
        let key = DataKey::from_slice(&[1; 32]).unwrap();
        let credential = |text: &str, n: u8| {
            seal_credential(
                &key,
                "k1",
                b"w",
                [n; 12],
                "a1",
                "i1",
                &Credential::new(text.into()),
            )
        };
        let mut i = integration();
        i.endpoint = Endpoint {
            headers: [("x-tenant".to_owned(), "acme".to_owned())].into(),
            auth: Some(EndpointAuth {
                mode: AuthMode::OAuth2 {
                    token_url: "https://id.example.test/token".into(),
                    client_id: "client".into(),
                    scope: Some("deliveries".into()),
                    audience: None,
                },
                credential: credential("client-secret-value", 1),
                previous: Some(Box::new(PreviousAuth {
                    mode: AuthMode::Basic {
                        username: "u".into(),
                    },
                    credential: PreviousSecret {
                        sealed: credential("old-password-value", 2),
                        expires_at: Timestamp(99),
                    },
                })),
            }),
        };
        let item = i.item().unwrap();
        let everything = format!("{item:?}");
        assert!(!everything.contains("client-secret-value"));
        assert!(!everything.contains("old-password-value"));
        assert_eq!(
            item[ENDPOINT_AUTH].as_m().unwrap()["type"].as_s().unwrap(),
            "oauth2_client_credentials"
        );
        assert_eq!(
            item[ENDPOINT_HEADERS].as_m().unwrap()["x-tenant"]
                .as_s()
                .unwrap(),
            "acme"
        );
        assert_eq!(Integration::from_item(item).unwrap(), i);

        let Write::UpdateReturningNew(u) = edit(
            "t",
            &id("a1"),
            &id("i1"),
            set_auth(set_headers(Edit::new(), &BTreeMap::new()).unwrap(), None).unwrap(),
        )
        .unwrap() else {
            panic!("not an update returning the item")
        };
        let removed: Vec<&String> = u.expression_attribute_names().unwrap().values().collect();
        for attr in [ENDPOINT_HEADERS, ENDPOINT_AUTH, PREVIOUS_ENDPOINT_AUTH] {
            assert!(removed.iter().any(|n| n.as_str() == attr), "{attr}");
        }
        assert!(
            u.update_expression().starts_with("REMOVE"),
            "{}",
            u.update_expression()
        );
    }

    #[test]
    fn a_stored_webhook_without_url_reads_as_an_incomplete_target() {
        let mut item = integration().item().unwrap();
        item.remove("webhook_url");
        let read = Integration::from_item(item).unwrap();
        let Target::Incomplete(gap) = &read.target else {
            panic!("complete: {:?}", read.target)
        };
        assert_eq!(gap.to_string(), "webhook URL or signing secret missing");
        assert_eq!(read.delivery_method(), DeliveryMethod::Webhook);
        // Written back, it keeps the secret it had and gains nothing.
        let again = read.item().unwrap();
        assert_eq!(
            again[SEALED_SECRET],
            integration().item().unwrap()[SEALED_SECRET]
        );
        assert!(!again.contains_key("webhook_url"));
    }

    #[test]
    fn a_stored_unknown_method_reads_as_an_unknown_target_and_stores_back_verbatim() {
        let mut item = integration().item().unwrap();
        item.insert("method".into(), super::super::expr::s("queue"));
        let read = Integration::from_item(item).unwrap();
        assert_eq!(read.target, Target::Unknown("queue".into()));
        assert_eq!(read.item().unwrap()["method"].as_s().unwrap(), "queue");
    }

    #[test]
    fn an_integrations_debug_output_shows_no_secret() {
        let shown = format!("{:?}", integration());
        assert!(
            !shown.contains(&plaintext(7).expose_whsec()[6..]),
            "{shown}"
        );
        let stored = integration().item().unwrap();
        let ciphertext = stored[SEALED_SECRET].as_m().unwrap()["ciphertext"]
            .as_s()
            .unwrap();
        assert!(!shown.contains(ciphertext.as_str()), "{shown}");
        assert!(shown.contains("https://example.test/h"), "{shown}");
    }

    #[test]
    fn no_attribute_of_the_item_holds_the_plaintext_secret() {
        let mut i = integration();
        i.target = Target::Webhook {
            url: "https://example.test/h".into(),
            secret: WebhookSecret {
                current: sealed(7),
                previous: Some(Box::new(PreviousSecret {
                    sealed: sealed(6),
                    expires_at: Timestamp(99),
                })),
            },
        };
        let item = i.item().unwrap();
        let everything = format!("{item:?}");
        for byte in [6, 7] {
            let text = plaintext(byte).expose_whsec();
            assert!(!everything.contains(&text[6..]), "plaintext {byte} stored");
        }
        assert_eq!(
            item[PREVIOUS_SECRET].as_m().unwrap()["expires_at"]
                .as_n()
                .unwrap(),
            "99"
        );
        assert_eq!(Integration::from_item(item).unwrap(), i);
    }

    #[test]
    fn a_malformed_or_legacy_plaintext_secret_reads_as_missing() {
        let mut item = integration().item().unwrap();
        let mut stored = item[SEALED_SECRET].as_m().unwrap().clone();
        stored.insert("nonce".into(), super::super::expr::s("AAAA"));
        item.insert(SEALED_SECRET.into(), AttributeValue::M(stored));
        let read = Integration::from_item(item).unwrap();
        assert!(
            matches!(read.target, Target::Incomplete(_)),
            "{:?}",
            read.target
        );

        let mut legacy = integration().item().unwrap();
        legacy.remove(SEALED_SECRET);
        legacy.insert("signing_secret".into(), super::super::expr::s("whsec_x"));
        let read = Integration::from_item(legacy).unwrap();
        assert!(
            matches!(read.target, Target::Incomplete(_)),
            "{:?}",
            read.target
        );
    }

    #[test]
    fn a_rotation_sets_the_new_secret_keeps_or_drops_the_previous_and_drops_plaintext() {
        let previous = PreviousSecret {
            sealed: sealed(7),
            expires_at: Timestamp(5),
        };
        let Write::UpdateReturningNew(u) = edit(
            "t",
            &id("a1"),
            &id("i1"),
            rotate_secret(Edit::new(), &sealed(8), Some(&previous)).unwrap(),
        )
        .unwrap() else {
            panic!("not an update returning the item")
        };
        let names = u.expression_attribute_names().unwrap();
        let expression = u.update_expression();
        let named = |attr: &str| {
            names
                .iter()
                .find(|(_, v)| v.as_str() == attr)
                .map(|(k, _)| k.clone())
                .unwrap_or_else(|| panic!("{attr} not named"))
        };
        let (set, remove) = expression.split_once(" REMOVE ").unwrap();
        assert!(set.contains(&named(SEALED_SECRET)) && set.contains(&named(PREVIOUS_SECRET)));
        assert!(remove.contains(&named("signing_secret")));

        let Write::UpdateReturningNew(u) = edit(
            "t",
            &id("a1"),
            &id("i1"),
            rotate_secret(Edit::new(), &sealed(8), None).unwrap(),
        )
        .unwrap() else {
            panic!("not an update returning the item")
        };
        let names = u.expression_attribute_names().unwrap();
        let expression = u.update_expression();
        let (_, remove) = expression.split_once(" REMOVE ").unwrap();
        let previous_name = names.iter().find(|(_, v)| *v == PREVIOUS_SECRET).unwrap().0;
        assert!(remove.contains(previous_name.as_str()), "{expression}");
    }
}
