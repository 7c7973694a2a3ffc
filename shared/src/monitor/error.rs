//! The monitor's one error type.

use crate::domain::lifecycle::TransitionError;
use crate::store::StoreError;

/// Everything the monitor's storage operations can fail with.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid move: {0}")]
    Transition(#[from] TransitionError),
    #[error("the cursor is not one this listing issued")]
    BadCursor,
}
