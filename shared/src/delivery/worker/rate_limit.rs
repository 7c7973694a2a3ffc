//! The worker's side of an integration's rate limit ([`crate::domain::rate_limit`]): before a
//! delivery of a limited integration is claimed, one start is counted in the integration's
//! counter for the current second ([`crate::store::rate_window`]); when the second is full the
//! delivery waits, unclaimed, as a delayed copy of its work alone, whichever message it came in
//! (the batch's other deliveries, those packed with it included, go on). An integration
//! without a limit costs nothing here: no read, no write.
//!
//! A container remembers the last second it found full for each integration, so the rest of a
//! batch's deliveries of that integration in the same second wait without a write each. A counter
//! that cannot be written (throttled, unreachable) is treated as full: the delivery waits and is
//! tried again, never lost and never sent over the limit.

use crate::domain::time::Timestamp;
use crate::ids::IntegrationId;
use crate::store;
use crate::store::account_config::AccountConfig;
use crate::store::delivery::DeliveryWork;
use crate::store::integration::Integration;
use crate::store::write::send;
use std::collections::HashMap;
use std::sync::Mutex;

/// The integration a delivery's work goes to, with its limit, when it has one.
pub fn limited<'a>(
    config: &'a AccountConfig,
    work: &DeliveryWork,
) -> Option<(&'a Integration, u32)> {
    let sub = config.subscription(&work.subscription_id)?;
    let integration = config.integrations.get(&sub.subscription.integration_id)?;
    Some((integration, integration.rate_limit_per_second?))
}

/// Counts attempt starts of limited integrations (one per container).
#[derive(Default)]
pub(crate) struct RateGate {
    /// The last second found full, per integration.
    full: Mutex<HashMap<IntegrationId, i64>>,
}

impl RateGate {
    /// Whether a delivery of `integration` (limited to `limit` a second) may start now: counted
    /// if so. `false`: the second is full, or its counter could not be written.
    pub async fn admit(
        &self,
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        integration: &Integration,
        limit: u32,
        now: Timestamp,
    ) -> bool {
        let second = crate::domain::rate_limit::second_of(now);
        let id = &integration.integration_id;
        if self.lock().get(id) == Some(&second) {
            return false;
        }
        let counted = match store::rate_window::take(table, &integration.account_id, id, now, limit)
        {
            Ok(write) => send(dynamo, write).await.map(|w| w.applied()),
            Err(e) => Err(e),
        };
        match counted {
            Ok(true) => true,
            Ok(false) => {
                let mut full = self.lock();
                // Only seconds still to come matter: forget the others.
                full.retain(|_, s| *s >= second);
                full.insert(id.clone(), second);
                false
            }
            Err(e) => {
                tracing::warn!(
                    account_id = %integration.account_id,
                    integration_id = %id,
                    error = %e,
                    "the rate-limit counter could not be written; the delivery waits"
                );
                false
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IntegrationId, i64>> {
        self.full.lock().unwrap_or_else(|e| e.into_inner())
    }
}
