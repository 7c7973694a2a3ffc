//! Webhook signing secrets (and endpoint credentials, [`seal_credential`]) at rest: envelope
//! encryption with AES-256-GCM.
//!
//! A KMS data key (256 bits) encrypts the `whsec_…` text locally; the item keeps the ciphertext,
//! the random 96-bit nonce, the data key as KMS encrypted it (`wrapped_key`) and the KMS key id.
//! The associated data names the account and the integration, so a ciphertext copied onto
//! another integration (or altered in any byte) does not open. The delivery function unwraps data
//! keys (KMS `Decrypt`) to sign deliveries; the API generates them, and unwraps them only to sign
//! a test event.
//!
//! Pure: the caller supplies the data key, the nonce and the time; nothing here calls KMS.

use crate::signing::{SecretError, SigningSecret};
use crate::time::Timestamp;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use std::fmt;
use std::time::Duration;
use thiserror::Error;

/// Bytes of an AES-256 data key.
pub const DATA_KEY_BYTES: usize = 32;
/// Bytes of an AES-GCM nonce.
pub const NONCE_BYTES: usize = 12;

/// How long the previous secret keeps signing after a rotation unless the request says otherwise.
pub const DEFAULT_ROTATION_GRACE: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest grace a rotation may ask for (seven days): a leaked secret that is rotated away
/// must stop signing within a bounded time.
pub const MAX_ROTATION_GRACE: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// A plaintext data key. Its `Debug` output is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct DataKey([u8; DATA_KEY_BYTES]);

impl DataKey {
    /// The key KMS returned; `None` unless it has exactly [`DATA_KEY_BYTES`] bytes.
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        Some(DataKey(bytes.try_into().ok()?))
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&self.0))
    }
}

impl fmt::Debug for DataKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DataKey(<redacted>)")
    }
}

/// A signing secret as stored: encrypted, with the data key that opens it wrapped by KMS.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSecret {
    /// The KMS key that wrapped the data key (its ARN as KMS reports it).
    pub key_id: String,
    /// The data key, encrypted by KMS (the `CiphertextBlob` of `GenerateDataKey`).
    pub wrapped_key: Vec<u8>,
    pub nonce: [u8; NONCE_BYTES],
    /// The `whsec_…` text encrypted with the data key, with its 16-byte tag.
    pub ciphertext: Vec<u8>,
}

impl fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealedSecret(key {}, <sealed>)", self.key_id)
    }
}

/// Why a sealed secret does not open. The messages name no secret material.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum OpenError {
    #[error("the sealed secret does not open with its data key: it was altered or belongs to another integration")]
    Tampered,
    #[error("the sealed signing secret opened but is not a signing secret: {0}")]
    NotASecret(#[from] SecretError),
}

/// What binds a ciphertext to its integration (the AES-GCM associated data).
pub fn associated_data(account_id: &str, integration_id: &str) -> Vec<u8> {
    format!("rhythm-webhook-signing-secret/v1\n{account_id}\n{integration_id}").into_bytes()
}

/// Encrypts `secret` for the integration `(account_id, integration_id)` with `data_key` (whose
/// KMS-wrapped form is `wrapped_key`, under `key_id`) and a nonce the caller drew at random.
pub fn seal(
    data_key: &DataKey,
    key_id: &str,
    wrapped_key: &[u8],
    nonce: [u8; NONCE_BYTES],
    account_id: &str,
    integration_id: &str,
    secret: &SigningSecret,
) -> SealedSecret {
    let aad = associated_data(account_id, integration_id);
    let text = secret.expose_whsec();
    seal_bytes(data_key, key_id, wrapped_key, nonce, &aad, text.as_bytes())
}

fn seal_bytes(
    data_key: &DataKey,
    key_id: &str,
    wrapped_key: &[u8],
    nonce: [u8; NONCE_BYTES],
    aad: &[u8],
    msg: &[u8],
) -> SealedSecret {
    let ciphertext = data_key
        .cipher()
        .encrypt(Nonce::from_slice(&nonce), Payload { msg, aad })
        .expect("AES-GCM encrypts any message shorter than 64 GiB");
    SealedSecret {
        key_id: key_id.to_owned(),
        wrapped_key: wrapped_key.to_vec(),
        nonce,
        ciphertext,
    }
}

fn open_bytes(data_key: &DataKey, sealed: &SealedSecret, aad: &[u8]) -> Result<String, OpenError> {
    let text = data_key
        .cipher()
        .decrypt(
            Nonce::from_slice(&sealed.nonce),
            Payload {
                msg: &sealed.ciphertext,
                aad,
            },
        )
        .map_err(|_| OpenError::Tampered)?;
    String::from_utf8(text).map_err(|_| OpenError::Tampered)
}

/// Decrypts a sealed secret of the integration `(account_id, integration_id)` with its unwrapped
/// data key.
pub fn open(
    data_key: &DataKey,
    sealed: &SealedSecret,
    account_id: &str,
    integration_id: &str,
) -> Result<SigningSecret, OpenError> {
    let text = open_bytes(
        data_key,
        sealed,
        &associated_data(account_id, integration_id),
    )?;
    Ok(SigningSecret::parse(&text)?)
}

/// An endpoint credential in plaintext (a static header's value, a password, an OAuth2 client
/// secret or access token). Its `Debug` output is redacted; [`Credential::expose`] is the only
/// way to its text.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential(String);

impl Credential {
    pub fn new(text: String) -> Self {
        Credential(text)
    }

    /// The text, for the one header or request body that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential(<redacted>)")
    }
}

/// What binds an endpoint credential's ciphertext to its integration: another purpose than a
/// signing secret's, so neither opens as the other.
pub fn credential_associated_data(account_id: &str, integration_id: &str) -> Vec<u8> {
    format!("rhythm-endpoint-credential/v1\n{account_id}\n{integration_id}").into_bytes()
}

/// [`seal`] for an endpoint credential of the integration.
pub fn seal_credential(
    data_key: &DataKey,
    key_id: &str,
    wrapped_key: &[u8],
    nonce: [u8; NONCE_BYTES],
    account_id: &str,
    integration_id: &str,
    credential: &Credential,
) -> SealedSecret {
    let aad = credential_associated_data(account_id, integration_id);
    seal_bytes(
        data_key,
        key_id,
        wrapped_key,
        nonce,
        &aad,
        credential.0.as_bytes(),
    )
}

/// [`open`] for an endpoint credential of the integration.
pub fn open_credential(
    data_key: &DataKey,
    sealed: &SealedSecret,
    account_id: &str,
    integration_id: &str,
) -> Result<Credential, OpenError> {
    let aad = credential_associated_data(account_id, integration_id);
    open_bytes(data_key, sealed, &aad).map(Credential)
}

/// The secret replaced by a rotation, still signing until `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviousSecret {
    pub sealed: SealedSecret,
    pub expires_at: Timestamp,
}

impl PreviousSecret {
    /// Whether it still signs at `now` (its expiry itself is the first instant it does not).
    pub fn signs_at(&self, now: Timestamp) -> bool {
        now < self.expires_at
    }
}

/// A rotation's grace for the previous secret: `requested` seconds, or the default; more than
/// [`MAX_ROTATION_GRACE`] is refused (the message says the bound).
pub fn rotation_grace(requested: Option<u64>) -> Result<Duration, String> {
    match requested {
        None => Ok(DEFAULT_ROTATION_GRACE),
        Some(secs) if secs <= MAX_ROTATION_GRACE.as_secs() => Ok(Duration::from_secs(secs)),
        Some(_) => Err(format!(
            "must be 0 to {} seconds (seven days); 0 retires the previous secret at once",
            MAX_ROTATION_GRACE.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> DataKey {
        DataKey::from_slice(&[byte; 32]).unwrap()
    }

    fn secret() -> SigningSecret {
        SigningSecret::from_bytes(&[5; 32]).unwrap()
    }

    fn sealed() -> SealedSecret {
        seal(&key(1), "k1", b"wrapped", [3; 12], "a1", "i1", &secret())
    }

    #[test]
    fn a_sealed_secret_opens_for_its_own_integration_only() {
        let s = sealed();
        assert_eq!(open(&key(1), &s, "a1", "i1"), Ok(secret()));
        assert_eq!(open(&key(1), &s, "a1", "i2"), Err(OpenError::Tampered));
        assert_eq!(open(&key(1), &s, "a2", "i1"), Err(OpenError::Tampered));
        assert_eq!(open(&key(2), &s, "a1", "i1"), Err(OpenError::Tampered));
    }

    #[test]
    fn the_ciphertext_holds_no_plaintext_and_any_altered_byte_refuses_to_open() {
        let s = sealed();
        let text = secret().expose_whsec();
        let shown = String::from_utf8_lossy(&s.ciphertext);
        assert!(!shown.contains(&text[6..]), "plaintext in the ciphertext");
        assert_eq!(s.ciphertext.len(), text.len() + 16, "message plus the tag");
        for i in 0..s.ciphertext.len() {
            let mut bad = s.clone();
            bad.ciphertext[i] ^= 1;
            assert_eq!(open(&key(1), &bad, "a1", "i1"), Err(OpenError::Tampered));
        }
        let mut bad = s.clone();
        bad.nonce[0] ^= 1;
        assert_eq!(open(&key(1), &bad, "a1", "i1"), Err(OpenError::Tampered));
    }

    #[test]
    fn a_credential_opens_for_its_own_integration_only_and_never_as_a_signing_secret() {
        let c = Credential::new("api-key-123".into());
        let s = seal_credential(&key(1), "k1", b"w", [4; 12], "a1", "i1", &c);
        assert_eq!(open_credential(&key(1), &s, "a1", "i1"), Ok(c.clone()));
        assert_eq!(
            open_credential(&key(1), &s, "a1", "i2"),
            Err(OpenError::Tampered)
        );
        assert_eq!(open(&key(1), &s, "a1", "i1"), Err(OpenError::Tampered));
        assert_eq!(
            open_credential(&key(1), &sealed(), "a1", "i1"),
            Err(OpenError::Tampered)
        );
        assert_eq!(format!("{c:?}"), "Credential(<redacted>)");
        assert!(!String::from_utf8_lossy(&s.ciphertext).contains("api-key-123"));
    }

    #[test]
    fn two_seals_of_one_secret_differ_by_their_nonce() {
        let a = seal(&key(1), "k1", b"w", [1; 12], "a1", "i1", &secret());
        let b = seal(&key(1), "k1", b"w", [2; 12], "a1", "i1", &secret());
        assert_ne!(a.ciphertext, b.ciphertext);
    }

    #[test]
    fn debug_output_shows_no_key_and_no_ciphertext() {
        let shown = format!("{:?} {:?}", sealed(), key(1));
        assert_eq!(shown, "SealedSecret(key k1, <sealed>) DataKey(<redacted>)");
        assert_eq!(DataKey::from_slice(&[0; 16]), None);
    }

    #[test]
    fn the_previous_secret_signs_until_its_expiry_exclusive() {
        let p = PreviousSecret {
            sealed: sealed(),
            expires_at: Timestamp::from_millis(10_000),
        };
        assert!(p.signs_at(Timestamp::from_millis(9_999)));
        assert!(!p.signs_at(Timestamp::from_millis(10_000)));
        assert!(!p.signs_at(Timestamp::from_millis(10_001)));
    }

    #[test]
    fn a_rotation_grace_defaults_to_a_day_and_is_bounded_by_seven() {
        assert_eq!(rotation_grace(None), Ok(Duration::from_secs(86_400)));
        assert_eq!(rotation_grace(Some(0)), Ok(Duration::ZERO));
        assert_eq!(
            rotation_grace(Some(604_800)),
            Ok(Duration::from_secs(604_800))
        );
        assert!(rotation_grace(Some(604_801))
            .unwrap_err()
            .contains("0 to 604800"));
    }
}
