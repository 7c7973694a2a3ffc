//! The pure domain core: states, transitions, guards, retry policies, classification, filters,
//! projection and signing. Nothing in here performs I/O, reads a clock or names an AWS type; it
//! takes facts (including the current time) and returns decisions that the shell applies.
//!
//! The one exception is [`ids`], the typed ids: their `new()` draws a ULID (the clock and a
//! random number).
//!
//! Every lifecycle table is rendered as `docs/lifecycles.md` by [`lifecycle_doc::render`].

pub mod change;
pub mod classify;
pub mod delivery_method;
pub mod endpoint_auth;
pub mod event;
pub mod event_type;
pub mod filter;
pub mod ids;
pub mod input;
pub mod integration_delivery;
pub mod integration_input;
pub mod lifecycle;
pub mod lifecycle_doc;
pub mod notice;
pub mod notification_delivery;
pub mod projection;
pub mod pull_cursor;
pub mod rate_limit;
pub mod replay;
pub mod retention;
pub mod retry;
pub mod sealed;
pub mod signing;
pub mod ssrf;
pub mod subscription;
pub mod subscription_input;
pub mod target;
pub mod time;
pub mod trace_context;
