//! What operators and adapters do to stored deliveries beyond the pipeline: the adapters' pull
//! cursor and the operator actions (the cursor and operator rows of
//! `docs/lifecycles.md#integration-delivery`). The rules are in the pure core
//! ([`crate::domain::integration_delivery`], [`crate::domain::pull_cursor`],
//! [`crate::domain::replay`], [`crate::domain::subscription`]); these modules read the facts the
//! rules need and apply their decisions through the item modules' named writes
//! ([`crate::store`]).
//!
//! * [`account`] — an account's own resources changed through named operations with typed
//!   input, for both doors (the JSON API and the console): integrations, subscriptions,
//!   tokens, test events, the account's caps.
//! * [`recovery`] — the recovery actions: retry a delivery, replay a window, resume a
//!   subscription, and the integration history and audit they read and write.
//! * [`event_monitor`] — the event monitor's reads: an account's events, an event's delivery
//!   log, needs attention.
//! * [`pull`] — the adapters' pull cursor: read pending changes, acknowledge them.
//! * [`catalog_lease`] — the event-type catalog as a container holds it, read again when its
//!   lease ends (publishing, the catalog's routes and the subscription checks read it).
//! * [`account_health`] — an account's figures over the last day (the operators' list of
//!   accounts).
//! * [`attention_queue`] — what needs an operator across every account, oldest first.
//! * [`endpoint_health`] — one subscription's endpoint health (success rates, latency, last
//!   failure, pause proximity, a day by the hour) for its account's administrators.
//! * [`list_filters`] — the filters of the event monitor's list and of a subscription's
//!   deliveries, read from a request's texts into the listings' queries.
//! * [`resource_ids`] — the ids a request names (a subscription, a delivery, a notice), read once
//!   from their texts: a text that is not an id names nothing.
//! * [`notices`] — a notice with its progress and its channel deliveries, for operators.
//!
//! A typed input that carries several values (a list's filter, a replay window) is read with
//! every refusal named at once ([`FieldErrors`]), as each door answers a request.

pub mod account;
pub mod account_health;
pub mod attention_queue;
pub mod catalog_lease;
pub mod endpoint_health;
pub mod event_monitor;
pub mod list_filters;
pub mod notices;
pub(crate) mod pull;
pub mod recovery;
pub mod resource_ids;

use crate::clock::Clock;
use crate::domain::input::FieldErrors;
use crate::domain::lifecycle::TransitionError;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, IntegrationId, SubscriptionId};
use crate::store::account_limits::Counted;
use crate::store::delivery::{self, Delivery, DeliveryWork};
use crate::store::integration::{self, Integration};
use crate::store::subscription::{self, Subscription};
use crate::store::write::{send_resolving_conflicts, Write};
use crate::store::StoreError;

/// Longest `reason` an operator gives.
pub const MAX_REASON_CHARS: usize = 1000;
/// Concurrent conditional writes of one request (cursor coverage, a replay chunk).
pub(crate) const WRITE_CONCURRENCY: usize = 16;

/// Why an operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// No such resource in the account (another account's is "not found" too).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The request conflicts with the resource's current state.
    #[error("{0}")]
    Conflict(String),
    /// A request value is not acceptable.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// A bound on the account has no room for the request until `retry_after_secs` have passed
    /// (a job already running on the subscription, the day's jobs started).
    #[error("{detail}")]
    Bounded {
        detail: String,
        retry_after_secs: u64,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A decision the lifecycle table refuses where none should be (a bug).
    #[error("invalid move: {0}")]
    Transition(#[from] TransitionError),
    /// The request's values break the rules of what they describe: every field at fault.
    #[error("{0}")]
    Fields(FieldErrors),
    /// The account has as many of something as its limit allows (deleting or revoking one, or
    /// an operator's raise, makes room; waiting does not).
    #[error("the account's limit of {value} {} is reached", limit.as_str())]
    LimitReached { limit: Counted, value: u32 },
    /// The account does not exist or is being deleted: nothing is created in it.
    #[error("account not found: it does not exist or was deleted")]
    AccountGone,
    /// A service the operation needs cannot answer now (KMS, Secrets Manager); try again.
    #[error("{0}")]
    Unavailable(String),
    /// A fault of ours (a missing setting, a bug). The cause is logged, never shown.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<FieldErrors> for OpsError {
    fn from(e: FieldErrors) -> Self {
        OpsError::Fields(e)
    }
}

impl OpsError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        OpsError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// A list cursor that is not one of this list's.
    pub(crate) fn bad_cursor() -> Self {
        OpsError::invalid("cursor", "is not a cursor of this list")
    }
}

impl From<event_monitor::MonitorError> for OpsError {
    fn from(e: event_monitor::MonitorError) -> Self {
        match e {
            event_monitor::MonitorError::Store(e) => OpsError::Store(e),
            event_monitor::MonitorError::BadCursor => OpsError::bad_cursor(),
        }
    }
}

impl From<crate::store::listing::ListingError> for OpsError {
    fn from(e: crate::store::listing::ListingError) -> Self {
        event_monitor::MonitorError::from(e).into()
    }
}

/// What every operation works with: the delivery table and the injected clock.
#[derive(Clone, Copy)]
pub struct Ops<'a> {
    pub dynamo: &'a aws_sdk_dynamodb::Client,
    pub table: &'a str,
    pub clock: &'a dyn Clock,
}

impl<'a> Ops<'a> {
    pub fn new(dynamo: &'a aws_sdk_dynamodb::Client, table: &'a str, clock: &'a dyn Clock) -> Self {
        Ops {
            dynamo,
            table,
            clock,
        }
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Sends a write; `false` when a condition refused it (nothing was written). A transaction
    /// cancelled by a concurrent one decided nothing and is tried again.
    pub async fn apply(&self, write: Write) -> Result<bool, OpsError> {
        Ok(send_resolving_conflicts(self.dynamo, write)
            .await?
            .applied())
    }

    /// The account's subscription, or "subscription not found".
    pub async fn subscription(
        &self,
        account_id: &AccountId,
        subscription_id: &SubscriptionId,
    ) -> Result<Subscription, OpsError> {
        subscription::get(self.dynamo, self.table, account_id, subscription_id)
            .await?
            .ok_or(OpsError::NotFound("subscription"))
    }

    /// Where `sub`'s deliveries are listed ([`SubscriptionRange::listing`]): a pull
    /// subscription's on the `by_subscription` index (`None`), a push subscription's (or one
    /// whose integration is gone) through its account's event listing.
    ///
    /// [`SubscriptionRange::listing`]: crate::store::delivery::SubscriptionRange::listing
    pub(crate) async fn deliveries_listed_by<'s>(
        &self,
        sub: &'s Subscription,
    ) -> Result<Option<&'s AccountId>, OpsError> {
        let pulled = self
            .integration(&sub.account_id, &sub.integration_id)
            .await?
            .is_some_and(|i| i.delivery_method().is_poll());
        Ok((!pulled).then_some(&sub.account_id))
    }

    /// The account's integration, if it exists.
    pub async fn integration(
        &self,
        account_id: &AccountId,
        integration_id: &IntegrationId,
    ) -> Result<Option<Integration>, OpsError> {
        Ok(integration::get(self.dynamo, self.table, account_id, integration_id).await?)
    }

    /// The delivery of `change_id` to `subscription_id` in the account, if it exists.
    pub(crate) async fn find_delivery(
        &self,
        account_id: &AccountId,
        subscription_id: &SubscriptionId,
        change_id: &ChangeId,
    ) -> Result<Option<Delivery>, OpsError> {
        let work = DeliveryWork {
            account_id: account_id.clone(),
            change_id: change_id.clone(),
            subscription_id: subscription_id.clone(),
        };
        Ok(delivery::get(self.dynamo, self.table, &work).await?)
    }

    /// The delivery of `change_id` to `subscription_id` in the account, or "delivery not found".
    pub async fn delivery(
        &self,
        account_id: &AccountId,
        subscription_id: &SubscriptionId,
        change_id: &ChangeId,
    ) -> Result<Delivery, OpsError> {
        self.find_delivery(account_id, subscription_id, change_id)
            .await?
            .ok_or(OpsError::NotFound("delivery"))
    }
}
