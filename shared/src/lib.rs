//! Rhythm delivery's shared library: the shell every Lambda function uses to apply the pure
//! domain's decisions to DynamoDB, SQS and HTTP. The domain is its own crate (`domain/`),
//! re-exported here as `domain` and its typed ids as `ids`, so `crate::domain::…` and
//! `crate::ids::…` name it from every floor.

pub mod alloc;
pub mod api;
pub mod aws;
pub(crate) mod batch;
pub mod clock;
pub mod config;
pub mod data_keys;
pub mod delivery;
pub use ::domain;
pub(crate) mod guarded_http;
pub use ::domain::ids;
pub mod metrics;
pub mod notify;
pub mod operations;
pub mod reconcile;
pub mod runtime;
pub mod store;
pub mod web;
