//! An account's own resources, changed through named operations that both doors call: the JSON
//! API's handlers and the console's forms parse their request into the same typed input (the
//! rules of a valid value are the domain's), and the operation reads, decides and writes, with
//! its audit entry in the same transaction.
//!
//! * [`accounts`] — create an account with its first token, issue account tokens, delete one.
//! * [`integrations`] — create and delete an integration, issue its tokens.
//! * [`integration_edit`] — edit an integration (URL, handler, headers, authentication, rate
//!   limit, a signing-secret rotation), checked against it as it is.
//! * [`limits`] — the account's caps: counted creates and removals, and an operator's change
//!   of an account's own limits.
//! * [`subscriptions`] — creating, editing and deleting subscriptions (the rules of a valid one:
//!   [`crate::domain::subscription_input`]).
//! * [`test_events`] — sending a test event to a subscription's webhook endpoint, and reading it.
//! * [`tokens`] — issuing, rotating and revoking account and integration tokens.
//! * [`token_format`] — a token's text, its check and the deployment's token-check key.

pub mod accounts;
pub mod integration_edit;
pub mod integrations;
pub mod limits;
pub mod subscriptions;
pub mod test_events;
pub mod token_format;
pub mod tokens;

use super::catalog_lease::CatalogLease;
use super::Ops;
use crate::config::Config;
use crate::data_keys::SecretSealer;
use crate::domain::ssrf::TargetPolicy;
use crate::domain::time::Timestamp;
use token_format::TokenCheckKeys;

/// What an account's operations work with: the table and clock ([`Ops`]), the queue a test
/// event is sent through, the deployment's settings (caps, queue URL), the sealer of signing
/// secrets and credentials, the token-check key, the event-type catalog as the container holds
/// it, the webhook target policy and the built-in handlers an internal integration may name.
#[derive(Clone, Copy)]
pub struct AccountOps<'a> {
    pub ops: Ops<'a>,
    pub sqs: &'a aws_sdk_sqs::Client,
    pub config: &'a Config,
    pub sealer: &'a SecretSealer,
    pub token_check: &'a TokenCheckKeys,
    pub catalog: &'a CatalogLease,
    pub target_policy: TargetPolicy,
    pub internal_handlers: &'a [String],
}

impl AccountOps<'_> {
    pub fn dynamo(&self) -> &aws_sdk_dynamodb::Client {
        self.ops.dynamo
    }

    /// The delivery table.
    pub fn table(&self) -> &str {
        self.ops.table
    }

    pub fn now(&self) -> Timestamp {
        self.ops.now()
    }
}
