//! Why a notice could not be created or withdrawn.

use crate::notify::NotifyError;
use crate::store::StoreError;

/// Why a notice could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("the idempotency key was already used for a different notice")]
    IdempotencyConflict,
    /// The key's notice is past its expiry (gone to every reader) but still stored until the
    /// table's TTL deletes it: the key cannot make a new notice yet, nor find the old one.
    #[error("the notice this idempotency key created has expired")]
    IdempotencyKeyExpired,
    /// The account's notices already named the day's quota of outbound recipients (or this
    /// notice would pass it).
    #[error("the account's daily quota of notice recipients has no room for this notice")]
    QuotaExceeded,
    #[error(transparent)]
    Fault(#[from] NotifyError),
}

/// Why a withdrawal was refused.
#[derive(Debug, thiserror::Error)]
pub enum WithdrawError {
    #[error("notice not found")]
    NotFound,
    #[error("the notice was superseded by {0}; it no longer applies")]
    Superseded(String),
    #[error(transparent)]
    Fault(#[from] NotifyError),
}

impl From<StoreError> for CreateError {
    fn from(e: StoreError) -> Self {
        CreateError::Fault(e.into())
    }
}
impl From<StoreError> for WithdrawError {
    fn from(e: StoreError) -> Self {
        WithdrawError::Fault(e.into())
    }
}
