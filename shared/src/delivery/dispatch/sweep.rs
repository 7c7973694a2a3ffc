//! The sweep (every minute): publishes what is due on the sparse, sharded `due` index — retries
//! whose backoff ends within the next minute (as SQS delays), operator restarts and lost work —
//! then moves `due_at` a grace period on, so the next sweep does not publish it again unless it
//! is still unclaimed by then. Each delivery goes in a message of its own (each has its own
//! delay), ten messages to a request.

use super::publish::delay_until;
use super::{Dispatcher, SweepReport, REDISPATCH_GRACE, SWEEP_LIMIT_PER_SHARD};
use crate::store;
use crate::store::delivery::DeliveryWork;
use crate::store::keys::SHARDS;
use crate::store::write::send;
use crate::store::StoreError;
use std::time::Duration;

impl Dispatcher {
    /// Sweep path: publish what is due within the horizon on every shard of the `due` index.
    pub async fn sweep(&self) -> Result<SweepReport, StoreError> {
        let mut report = SweepReport::default();
        let mut first_error = None;
        for shard in 0..SHARDS {
            // A storage error in one shard does not hold back the other shards' due work for
            // a minute: each is swept, and the run fails at the end with the first error.
            if let Err(e) = self.sweep_shard(&shard.to_string(), &mut report).await {
                tracing::warn!(shard, error = %e, "dispatch sweep: a shard failed");
                first_error.get_or_insert(e);
            }
        }
        if report.published + report.failed > 0 {
            tracing::info!(
                published = report.published,
                failed = report.failed,
                "dispatch sweep"
            );
        }
        first_error.map_or(Ok(report), Err)
    }

    async fn sweep_shard(&self, shard: &str, report: &mut SweepReport) -> Result<(), StoreError> {
        let now = self.clock.now();
        let horizon = now.plus(self.horizon);
        let due = store::delivery::due_by(
            &self.clients.dynamo,
            &self.config.delivery_table,
            shard,
            horizon,
            SWEEP_LIMIT_PER_SHARD,
        )
        .await?;
        let mut first_error = None;
        for chunk in due.chunks(10) {
            let entries: Vec<(DeliveryWork, Duration)> = chunk
                .iter()
                .map(|d| (d.work.clone(), delay_until(d.due_at, now)))
                .collect();
            let failed = self.publish(&entries).await;
            for (i, d) in chunk.iter().enumerate() {
                if failed.contains(&i) {
                    report.failed += 1;
                    continue;
                }
                report.published += 1;
                let next = d.due_at.max(now).plus(REDISPATCH_GRACE);
                // Refused: the delivery moved since the sweep read it; nothing to postpone.
                // Failed: it stays due, and the next run publishes it again (a second message
                // the claim makes harmless), so the rest of the shard goes on.
                let w = store::delivery::postpone(&self.config.delivery_table, d, next)?;
                if let Err(e) = send(&self.clients.dynamo, w).await {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
