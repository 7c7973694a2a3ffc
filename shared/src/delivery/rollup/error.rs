//! The roll-up's one error type.

use crate::domain::lifecycle::TransitionError;
use crate::store::StoreError;

/// Everything the roll-up's storage operations can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RollUpError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid move: {0}")]
    Transition(#[from] TransitionError),
}
