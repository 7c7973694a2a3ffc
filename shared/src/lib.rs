//! Rhythm delivery's shared library: the pure domain core (`domain`) and the shell every Lambda
//! function uses to apply its decisions to DynamoDB, SQS and HTTP.

pub mod alloc;
pub mod api;
pub mod aws;
pub mod batch;
pub mod clock;
pub mod config;
pub mod data_keys;
pub mod delivery;
pub mod domain;
pub mod guarded_http;
pub mod ids;
pub mod metrics;
pub mod notify;
pub mod operations;
pub mod reconcile;
pub mod runtime;
pub mod store;
