//! The DynamoDB model every function shares. Two floors:
//!
//! * [`plumbing`] — how the store talks to DynamoDB, whatever the item: keys and attribute names
//!   ([`keys`], [`attrs`]), expressions ([`expr`]), reads and query pages ([`read`], [`page`],
//!   [`listing`]), writes and updates ([`write`], [`update`]), list cursors ([`cursor`]),
//!   hash-chained histories ([`chain`]), the wire item and the store's error ([`Item`],
//!   [`StoreError`]).
//! * one module per stored item, each with its schema, its constructors, its reads and its named
//!   writes: [`account`], [`account_limits`] (its usage), [`integration`], [`subscription`],
//!   [`token`], [`event`], [`delivery`], [`snapshot`], [`published_change`], [`event_type`],
//!   [`test_event`] and [`test_event_quota`], [`rate_window`], [`rate_schedule`], [`walk_mark`],
//!   [`audit`], [`replay_job`] and [`job_bounds`], [`console_session`]; of notifications [`notice`],
//!   [`notice_progress`], [`notice_retention`] (the expiry of a notice's partition),
//!   [`notice_quota`], [`notification_delivery`], [`notification_work`], [`provider_ref`],
//!   [`supersede_pointer`], [`console_inbox`], [`failed_notices`]; and the typed views across
//!   items ([`account_config`], [`event_partition`], [`stream_image`]). `key_forms` (tests only)
//!   holds every item's keys to the stored strings.
//!
//! Nothing outside the store calls the DynamoDB SDK.

mod plumbing;

pub use plumbing::item::{from_item, to_item, Item, StoreError};
pub use plumbing::{attrs, chain, cursor, expr, keys, listing, page, read, update, write};

pub mod account;
pub mod account_config;
pub mod account_limits;
pub mod audit;
pub mod console_inbox;
pub(crate) mod console_session;
pub mod delivery;
pub mod event;
pub mod event_partition;
pub mod event_type;
pub(crate) mod failed_notices;
pub mod integration;
pub mod job_bounds;
#[cfg(test)]
mod key_forms;
pub mod notice;
pub mod notice_progress;
pub mod notice_quota;
pub(crate) mod notice_retention;
pub mod notification_delivery;
pub mod notification_work;
pub mod provider_ref;
pub(crate) mod published_change;
pub mod rate_schedule;
pub(crate) mod rate_window;
pub mod replay_job;
pub mod snapshot;
pub(crate) mod stream_image;
pub mod subscription;
pub mod supersede_pointer;
pub(crate) mod test_event;
pub(crate) mod test_event_quota;
pub mod token;
pub mod walk_mark;
