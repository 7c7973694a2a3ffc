//! The subcommands, one module each: its arguments, its API calls and its summary.

pub mod audit;
pub mod history;
pub mod replay;
pub mod resume;
pub mod retry;
