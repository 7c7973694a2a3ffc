//! The development harness: provisions `template.yaml` on the local emulator, drains streams and
//! queues into handlers as Lambda would, runs a scripted HTTP receiver, runs the functions' real
//! binaries under a local Lambda Runtime API ([`function_process`]), and drives the demo and the
//! benchmarks. The integration tests (`local/tests/it/`, one binary) are built on it through
//! [`testkit::World`].

pub mod api_server;
pub mod chaos;
pub mod emulator;
pub mod event_filter;
pub mod fast_clock;
pub mod faults;
pub mod fixtures;
pub mod function_process;
pub mod logs;
pub mod metering;
pub mod peak_alloc;
pub mod pipeline;
pub mod provision;
pub mod queues;
pub mod receiver;
pub mod request_kinds;
pub mod runtime_api;
pub mod served;
pub mod streams;
pub mod template;
pub mod test_stack;
pub mod testkit;
