//! One subscription's endpoint health, for its account's administrators (the API's
//! `GET /v1/subscriptions/{id}/health` and the console's subscription page): how its recent
//! deliveries ended, how long its attempts took, its last failure, how close it is to the
//! automatic pause, and a day of hourly counts for a chart. Computed on read from the
//! subscription's deliveries (nothing on the delivery path counts for it).
//!
//! # What it reads, at most
//!
//! The subscription (one `GetItem`), its integration (one `GetItem`, to know where its
//! deliveries are listed), then its deliveries newest change first ([`SubscriptionRange`]): at
//! most [`MAX_PAGES`] index pages of [`PAGE`] keys, each followed by one batch read of the
//! deliveries it names. So a request costs at most 2 + 2 × [`MAX_PAGES`] requests (plus a batch
//! read's retries of unprocessed keys), about 1 000 items in the worst case. A push
//! subscription's range is its account's event listing, so a subscription that takes a small
//! share of its account's changes finds fewer of its own deliveries in the same reads.
//!
//! The reads stop early once they hold [`LAST_FINISHED`] finished deliveries and have passed
//! changes older than the day plus [`LOOKBACK`] (a delivery that finished in the last day may
//! belong to an older change: its retries took hours). When the bound stops them first, the
//! figures are over what was read and `complete` is `false`.
//!
//! # The figures
//!
//! * finished: `delivered`, `dead` or `failed` (pending, retrying and skipped_filter deliveries
//!   are left out); it finished when it was delivered (`delivered_at`) or at its last attempt
//!   (else its last update);
//! * the success rate of the newest [`LAST_FINISHED`] finished deliveries (newest change first)
//!   and of those that finished in the last 24 h: delivered ÷ finished;
//! * attempt latency: the 50th and 95th percentiles (nearest rank) of the durations of the
//!   attempts made in the last 24 h;
//! * the last failure: the newest attempt that was not a success, among the deliveries read;
//! * the consecutive dead count against the pause threshold
//!   ([`crate::domain::subscription::MAX_CONSECUTIVE_DEAD`]), and when it was paused;
//! * 24 hourly buckets, each the deliveries that finished in that clock hour (the last bucket
//!   is the current hour), delivered and failed-or-dead.

use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::subscription::{SubscriptionStatus, MAX_CONSECUTIVE_DEAD};
use crate::domain::time::{Timestamp, DAY, HOUR};
use crate::ids::{AccountId, ChangeId, SubscriptionId};
use crate::operations::{Ops, OpsError};
use crate::store::delivery::{by_subscription_page, Delivery, Filter, SubscriptionRange};
use crate::store::subscription::Subscription;
use serde::{Serialize, Serializer};
use std::time::Duration;

/// Index pages one health read evaluates at most.
pub(crate) const MAX_PAGES: usize = 5;
/// Index entries per page.
pub(crate) const PAGE: i32 = 100;
/// The "last N finished deliveries" of the first success rate.
pub(crate) const LAST_FINISHED: usize = 100;
/// How much older than the day the reads go, for deliveries whose retries ended in the day.
pub(crate) const LOOKBACK: Duration = Duration::from_secs(6 * 3600);
/// Hourly buckets of the chart.
pub(crate) const HOURS: usize = 24;

fn rfc3339<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339())
}

fn rfc3339_opt<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&t.to_rfc3339()),
        None => s.serialize_none(),
    }
}

/// Delivered out of finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SuccessRate {
    /// Finished deliveries counted.
    pub finished: u32,
    pub delivered: u32,
    /// `delivered / finished`, 0 to 1 (`None` when nothing finished).
    pub rate: Option<f64>,
}

impl SuccessRate {
    fn of<'a>(finished: impl Iterator<Item = &'a Delivery>) -> Self {
        let (mut n, mut delivered) = (0u32, 0u32);
        for d in finished {
            n += 1;
            delivered += u32::from(d.status == DeliveryStatus::Delivered);
        }
        SuccessRate {
            finished: n,
            delivered,
            rate: (n > 0).then(|| f64::from(delivered) / f64::from(n)),
        }
    }
}

/// The newest attempt that did not succeed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastFailure {
    #[serde(serialize_with = "rfc3339")]
    pub at: Timestamp,
    pub change_id: ChangeId,
    /// `transient`, `permanent` or `configuration_loss`.
    pub class: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// The answer's start or the error, as the attempt log keeps it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One clock hour of the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HourBucket {
    /// The hour's start.
    #[serde(serialize_with = "rfc3339")]
    pub start: Timestamp,
    pub delivered: u32,
    /// Failed or dead.
    pub failed: u32,
}

/// A subscription's endpoint health (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndpointHealth {
    pub subscription_id: SubscriptionId,
    pub status: SubscriptionStatus,
    #[serde(serialize_with = "rfc3339")]
    pub computed_at: Timestamp,
    /// The newest [`LAST_FINISHED`] finished deliveries.
    pub last_100: SuccessRate,
    /// The deliveries that finished in the last 24 h.
    pub last_24h: SuccessRate,
    /// Attempts of the last 24 h the percentiles are over.
    pub latency_attempts: u32,
    pub latency_p50_ms: Option<u64>,
    pub latency_p95_ms: Option<u64>,
    pub last_failure: Option<LastFailure>,
    /// Consecutive dead deliveries now.
    pub dead_in_a_row: u32,
    /// The count at which an active subscription pauses.
    pub pause_threshold: u32,
    #[serde(serialize_with = "rfc3339_opt")]
    pub paused_since: Option<Timestamp>,
    /// [`HOURS`] clock hours, oldest first, the last one the current hour.
    pub hourly: Vec<HourBucket>,
    /// The reads covered the last [`LAST_FINISHED`] finished deliveries and the day (`false`:
    /// the figures are over the deliveries read).
    pub complete: bool,
}

fn finished(d: &Delivery) -> bool {
    matches!(
        d.status,
        DeliveryStatus::Delivered | DeliveryStatus::Dead | DeliveryStatus::Failed
    )
}

/// When a finished delivery finished.
fn finished_at(d: &Delivery) -> Timestamp {
    match d.status {
        DeliveryStatus::Delivered => d.delivered_at,
        _ => d.attempt_log.last().map(|a| a.at),
    }
    .unwrap_or(d.updated_at)
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], p: u64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as u64).div_ceil(100).max(1) as usize;
    sorted.get(rank - 1).copied()
}

/// The start of `t`'s clock hour.
fn hour_of(t: Timestamp) -> Timestamp {
    let h = HOUR.as_millis() as i64;
    Timestamp(t.millis().div_euclid(h) * h)
}

impl EndpointHealth {
    /// The figures of `deliveries` (the subscription's, newest change first) at `now`.
    pub fn of(sub: &Subscription, deliveries: &[Delivery], complete: bool, now: Timestamp) -> Self {
        let day_ago = now.minus(DAY);
        let done: Vec<&Delivery> = deliveries.iter().filter(|d| finished(d)).collect();
        let last_100 = SuccessRate::of(done.iter().copied().take(LAST_FINISHED));
        let in_day = |t: Timestamp| t >= day_ago && t <= now;
        let last_24h = SuccessRate::of(done.iter().copied().filter(|d| in_day(finished_at(d))));
        let mut durations: Vec<u64> = deliveries
            .iter()
            .flat_map(|d| d.attempt_log.iter())
            .filter(|a| in_day(a.at))
            .map(|a| a.duration_ms)
            .collect();
        durations.sort_unstable();
        let last_failure = deliveries
            .iter()
            .flat_map(|d| d.attempt_log.iter().map(move |a| (d, a)))
            .filter(|(_, a)| a.class != "success")
            .max_by_key(|(_, a)| a.at)
            .map(|(d, a)| LastFailure {
                at: a.at,
                change_id: d.change_id.clone(),
                class: a.class.clone(),
                http_status: a.http_status,
                error: a.detail.clone(),
            });
        let first_hour = hour_of(now).minus(HOUR * (HOURS as u32 - 1));
        let mut hourly: Vec<HourBucket> = (0..HOURS)
            .map(|i| HourBucket {
                start: first_hour.plus(HOUR * i as u32),
                delivered: 0,
                failed: 0,
            })
            .collect();
        for d in &done {
            let at = finished_at(d);
            if at < first_hour || at > now {
                continue;
            }
            let i = (at.since(first_hour).as_millis() / HOUR.as_millis()) as usize;
            if let Some(b) = hourly.get_mut(i) {
                if d.status == DeliveryStatus::Delivered {
                    b.delivered += 1;
                } else {
                    b.failed += 1;
                }
            }
        }
        EndpointHealth {
            subscription_id: sub.subscription_id.clone(),
            status: sub.status,
            computed_at: now,
            last_100,
            last_24h,
            latency_attempts: durations.len() as u32,
            latency_p50_ms: percentile(&durations, 50),
            latency_p95_ms: percentile(&durations, 95),
            last_failure,
            dead_in_a_row: sub.consecutive_dead,
            pause_threshold: MAX_CONSECUTIVE_DEAD,
            paused_since: (sub.status == SubscriptionStatus::Paused)
                .then_some(sub.paused_at)
                .flatten(),
            hourly,
            complete,
        }
    }
}

/// The account's subscription's endpoint health at `now` (another account's subscription is
/// "subscription not found"). Reads are bounded: see the module docs.
pub async fn endpoint_health(
    ops: &Ops<'_>,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    now: Timestamp,
) -> Result<EndpointHealth, OpsError> {
    let sub = ops.subscription(account_id, subscription_id).await?;
    let range = SubscriptionRange {
        subscription_id,
        after: None,
        upper: None,
        forward: false,
        listing: ops.deliveries_listed_by(&sub).await?,
    };
    let filter = Filter::account(account_id);
    let horizon = now.minus(DAY).minus(LOOKBACK);
    let mut deliveries: Vec<Delivery> = Vec::new();
    let mut start = None;
    let mut complete = false;
    for _ in 0..MAX_PAGES {
        let page =
            by_subscription_page(ops.dynamo, ops.table, &range, &filter, start, PAGE).await?;
        deliveries.extend(page.deliveries);
        let done = deliveries.iter().filter(|d| finished(d)).count();
        let past_horizon = deliveries.last().is_some_and(|d| d.occurred_at < horizon);
        match page.next_start {
            None => {
                complete = true;
                break;
            }
            Some(_) if done >= LAST_FINISHED && past_horizon => {
                complete = true;
                break;
            }
            Some(next) => start = Some(next),
        }
    }
    Ok(EndpointHealth::of(&sub, &deliveries, complete, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::delivery::item::test_delivery;
    use crate::store::delivery::AttemptRecord;
    use crate::store::subscription::{NewSubscription, Subscription};

    // Half past an hour.
    const NOW: Timestamp = Timestamp(472_222 * 3_600_000 + 30 * 60 * 1000);

    fn sub() -> Subscription {
        Subscription::new(
            NewSubscription {
                account_id: "acct".parse().unwrap(),
                subscription_id: "sub1".parse().unwrap(),
                integration_id: "int1".parse().unwrap(),
                record_types: vec!["order".into()],
                filter: None,
                fields: Vec::new(),
                retry_policy: Default::default(),
                answers: Default::default(),
            },
            Timestamp(0),
        )
    }

    fn attempt(at: Timestamp, class: &str, http: u16, ms: u64) -> AttemptRecord {
        AttemptRecord {
            number: 1,
            at,
            class: class.into(),
            http_status: Some(http),
            duration_ms: ms,
            detail: Some(format!("answer {http}")),
            error: None,
        }
    }

    fn settled(status: DeliveryStatus, at: Timestamp, ms: u64) -> Delivery {
        let mut d = test_delivery(status, 1);
        let (class, http) = match status {
            DeliveryStatus::Delivered => ("success", 200),
            _ => ("permanent", 400),
        };
        d.attempt_log = vec![attempt(at, class, http, ms)];
        d.updated_at = at;
        if status == DeliveryStatus::Delivered {
            d.delivered_at = Some(at);
        }
        d
    }

    #[test]
    fn three_delivered_and_one_dead_is_a_success_rate_of_three_quarters() {
        let minutes = |m: u64| NOW.minus(Duration::from_secs(m * 60));
        let ds = vec![
            settled(DeliveryStatus::Delivered, minutes(1), 100),
            settled(DeliveryStatus::Dead, minutes(2), 400),
            settled(DeliveryStatus::Delivered, minutes(70), 200),
            settled(DeliveryStatus::Delivered, minutes(30 * 60), 300),
            test_delivery(DeliveryStatus::Pending, 0),
        ];
        let h = EndpointHealth::of(&sub(), &ds, true, NOW);
        assert_eq!(h.last_100.finished, 4);
        assert_eq!(h.last_100.delivered, 3);
        assert_eq!(h.last_100.rate, Some(0.75));
        // The delivery of 30 h ago is outside the day.
        assert_eq!(h.last_24h.finished, 3);
        assert!((h.last_24h.rate.unwrap() - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(h.latency_attempts, 3);
        assert_eq!(h.latency_p50_ms, Some(200));
        assert_eq!(h.latency_p95_ms, Some(400));
        let failure = h.last_failure.expect("the dead delivery's attempt");
        assert_eq!((failure.at, failure.http_status), (minutes(2), Some(400)));
        assert_eq!(failure.class, "permanent");
        assert_eq!(h.hourly.len(), HOURS);
        assert_eq!(h.hourly[HOURS - 1].start, hour_of(NOW));
        // NOW is half past: 1 and 2 minutes ago are this hour, 70 minutes ago twenty past the
        // hour before.
        assert_eq!((h.hourly[23].delivered, h.hourly[23].failed), (1, 1));
        assert_eq!((h.hourly[22].delivered, h.hourly[22].failed), (1, 0));
        let total: u32 = h.hourly.iter().map(|b| b.delivered + b.failed).sum();
        assert_eq!(total, 3);
        assert_eq!(h.pause_threshold, 50);
        assert_eq!(h.paused_since, None);
    }

    #[test]
    fn nothing_finished_has_no_rate_and_a_paused_subscription_says_since_when() {
        let mut s = sub();
        s.status = SubscriptionStatus::Paused;
        s.paused_at = Some(Timestamp(5));
        s.consecutive_dead = 50;
        let h = EndpointHealth::of(
            &s,
            &[test_delivery(DeliveryStatus::Retrying, 1)],
            false,
            NOW,
        );
        assert_eq!(h.last_100, SuccessRate::default());
        assert_eq!(h.latency_p50_ms, None);
        assert_eq!(h.paused_since, Some(Timestamp(5)));
        assert_eq!(h.dead_in_a_row, 50);
        assert!(!h.complete);
        let json = serde_json::to_value(&h).unwrap();
        assert_eq!(json["paused_since"], "1970-01-01T00:00:00.005Z");
        assert_eq!(json["hourly"].as_array().unwrap().len(), HOURS);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=20).collect();
        assert_eq!(percentile(&v, 50), Some(10));
        assert_eq!(percentile(&v, 95), Some(19));
        assert_eq!(percentile(&[7], 95), Some(7));
        assert_eq!(percentile(&[], 50), None);
    }
}
