//! KMS for the sealed webhook signing secrets ([`crate::domain::sealed`]).
//!
//! * [`SecretSealer`] (the API): one `GenerateDataKey` per container, on the first secret it
//!   seals; the plaintext data key stays in memory and seals every later secret locally.
//! * [`SecretOpener`] (the delivery worker only, test events included): one `Decrypt` per
//!   wrapped data key per container; concurrent first uses of one key wait for the one call.
//!
//! Endpoint credentials ([`crate::domain::endpoint_auth`]) are sealed and opened the same way,
//! under the same data keys and context (their associated data differs, so neither kind of
//! ciphertext opens as the other).
//!
//! Both pass the encryption context [`CONTEXT_KEY`] = [`CONTEXT_VALUE`], which the template's
//! grants require, so these roles' KMS rights serve nothing but signing secrets.

use crate::domain::sealed::{self, Credential, DataKey, OpenError, SealedSecret, NONCE_BYTES};
use crate::domain::signing::SigningSecret;
use crate::guarded_http::error_chain;
use crate::ids::{AccountId, IntegrationId};
use aws_sdk_kms::operation::decrypt::DecryptError;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use rand::RngCore;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

/// The encryption context of every data key (template.yaml's grants condition on it).
pub(crate) const CONTEXT_KEY: &str = "purpose";
pub const CONTEXT_VALUE: &str = "rhythm-webhook-signing-secret";
/// Unwrapped data keys kept per container; past this the cache starts over (each API container
/// makes one data key, so this many is far more than a fleet makes between deployments).
const OPENER_CACHE_LIMIT: usize = 1024;

/// Why KMS gave no usable data key. The messages name no key material.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum KmsError {
    /// KMS refused the wrapped key itself (altered, or wrapped under another key): permanent.
    #[error("KMS refused the signing secret's data key: {0}")]
    Refused(String),
    /// KMS could not be asked or failed (throttling, network, permissions): worth a retry.
    #[error("KMS is unavailable for the signing secret's data key: {0}")]
    Unavailable(String),
}

/// Why a sealed secret could not be used.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum UnsealError {
    #[error(transparent)]
    Kms(#[from] KmsError),
    #[error(transparent)]
    Open(#[from] OpenError),
}

impl UnsealError {
    /// Whether another attempt can succeed (KMS was unavailable); otherwise the stored secret is
    /// unusable until it is rotated.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, UnsealError::Kms(KmsError::Unavailable(_)))
    }
}

struct Generated {
    key: DataKey,
    wrapped: Vec<u8>,
    key_id: String,
}

/// Seals signing secrets under a data key generated once per container.
pub struct SecretSealer {
    kms: aws_sdk_kms::Client,
    key_id: String,
    data_key: OnceCell<Generated>,
}

impl SecretSealer {
    pub fn new(kms: aws_sdk_kms::Client, key_id: impl Into<String>) -> Self {
        SecretSealer {
            kms,
            key_id: key_id.into(),
            data_key: OnceCell::new(),
        }
    }

    async fn generated(&self) -> Result<&Generated, KmsError> {
        self.data_key
            .get_or_try_init(|| async {
                let out = self
                    .kms
                    .generate_data_key()
                    .key_id(&self.key_id)
                    .key_spec(DataKeySpec::Aes256)
                    .encryption_context(CONTEXT_KEY, CONTEXT_VALUE)
                    .send()
                    .await
                    .map_err(|e| KmsError::Unavailable(error_chain(&e)))?;
                let key = out
                    .plaintext()
                    .and_then(|b| DataKey::from_slice(b.as_ref()))
                    .ok_or_else(|| KmsError::Unavailable("no 256-bit data key returned".into()))?;
                let wrapped = out
                    .ciphertext_blob()
                    .map(|b| b.as_ref().to_vec())
                    .ok_or_else(|| KmsError::Unavailable("no wrapped data key returned".into()))?;
                Ok(Generated {
                    key,
                    wrapped,
                    key_id: out.key_id().unwrap_or(&self.key_id).to_owned(),
                })
            })
            .await
    }

    /// `secret` sealed for the integration `(account_id, integration_id)`.
    pub async fn seal(
        &self,
        account_id: &AccountId,
        integration_id: &IntegrationId,
        secret: &SigningSecret,
    ) -> Result<SealedSecret, KmsError> {
        let g = self.generated().await?;
        Ok(sealed::seal(
            &g.key,
            &g.key_id,
            &g.wrapped,
            random_nonce(),
            account_id.as_str(),
            integration_id.as_str(),
            secret,
        ))
    }

    /// An endpoint credential sealed for the integration `(account_id, integration_id)`.
    pub async fn seal_credential(
        &self,
        account_id: &AccountId,
        integration_id: &IntegrationId,
        credential: &Credential,
    ) -> Result<SealedSecret, KmsError> {
        let g = self.generated().await?;
        Ok(sealed::seal_credential(
            &g.key,
            &g.key_id,
            &g.wrapped,
            random_nonce(),
            account_id.as_str(),
            integration_id.as_str(),
            credential,
        ))
    }
}

fn random_nonce() -> [u8; NONCE_BYTES] {
    let mut nonce = [0u8; NONCE_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    nonce
}

type Slot = Arc<OnceCell<DataKey>>;

/// Opens sealed secrets, unwrapping each data key once per container.
pub struct SecretOpener {
    kms: aws_sdk_kms::Client,
    keys: Mutex<HashMap<Vec<u8>, Slot>>,
}

impl SecretOpener {
    pub fn new(kms: aws_sdk_kms::Client) -> Self {
        SecretOpener {
            kms,
            keys: Mutex::default(),
        }
    }

    fn slot(&self, wrapped: &[u8]) -> Slot {
        let mut keys = self.keys.lock().expect("the key cache lock");
        if !keys.contains_key(wrapped) && keys.len() >= OPENER_CACHE_LIMIT {
            keys.clear();
        }
        keys.entry(wrapped.to_vec()).or_default().clone()
    }

    async fn data_key(&self, sealed: &SealedSecret) -> Result<DataKey, KmsError> {
        let slot = self.slot(&sealed.wrapped_key);
        let key = slot
            .get_or_try_init(|| async {
                let out = self
                    .kms
                    .decrypt()
                    .key_id(&sealed.key_id)
                    .ciphertext_blob(Blob::new(sealed.wrapped_key.clone()))
                    .encryption_context(CONTEXT_KEY, CONTEXT_VALUE)
                    .send()
                    .await
                    .map_err(|e| match e.as_service_error() {
                        Some(
                            DecryptError::InvalidCiphertextException(_)
                            | DecryptError::IncorrectKeyException(_),
                        ) => KmsError::Refused(error_chain(&e)),
                        _ => KmsError::Unavailable(error_chain(&e)),
                    })?;
                out.plaintext()
                    .and_then(|b| DataKey::from_slice(b.as_ref()))
                    .ok_or_else(|| KmsError::Refused("not a 256-bit data key".into()))
            })
            .await?;
        Ok(key.clone())
    }

    /// The plaintext of a sealed secret of the integration `(account_id, integration_id)`.
    pub async fn open(
        &self,
        account_id: &AccountId,
        integration_id: &IntegrationId,
        sealed: &SealedSecret,
    ) -> Result<SigningSecret, UnsealError> {
        let key = self.data_key(sealed).await?;
        Ok(sealed::open(
            &key,
            sealed,
            account_id.as_str(),
            integration_id.as_str(),
        )?)
    }

    /// The plaintext of a sealed endpoint credential of the integration.
    pub async fn open_credential(
        &self,
        account_id: &AccountId,
        integration_id: &IntegrationId,
        sealed: &SealedSecret,
    ) -> Result<Credential, UnsealError> {
        let key = self.data_key(sealed).await?;
        Ok(sealed::open_credential(
            &key,
            sealed,
            account_id.as_str(),
            integration_id.as_str(),
        )?)
    }
}
