//! The integration tests against the local emulator, in one binary so the suites share one build
//! and one test harness run. Each module is one suite; every test builds its own
//! `local::testkit::World` (its own stack on the emulator).

mod account_deletion;
mod account_limits;
mod answer_rules;
mod audit_chain;
mod chaos;
mod concurrency;
mod console;
mod console_admin;
mod contract;
mod delivery_logs;
mod deploy_path;
mod deployment;
mod emulator;
mod endpoint_auth;
mod event_catalog;
mod event_monitor;
mod fault_matrix;
mod faults;
mod harness;
mod lambda_binaries;
mod lifecycle_paths;
mod management_api;
mod notice_bounds;
mod notifications;
mod openapi;
mod operator_overview;
mod publishing;
mod pull_and_operator;
mod push_delivery;
mod rate_limit;
mod receiver_examples;
mod recovery;
mod sample_events;
mod sdk_settings;
mod secret_urls;
mod self_service;
mod self_service_jobs;
mod signing_secrets;
mod sim;
mod smoke;
mod tenant_audit;
mod worker_limits;
