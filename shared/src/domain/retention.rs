//! Retention (seed 004): terminal events — `sent`, `failed`, `skipped` — and their deliveries are
//! kept for thirty days after they became terminal, then deleted; `new` and `partial` events are
//! never expired (they may still need delivery work). Internal status takes no part.
//!
//! Deletion is DynamoDB TTL on `expires_at`, which holds epoch **seconds** (TTL ignores values in
//! milliseconds: they read as dates far in the future). TTL deletes lazily — typically within a
//! few days — so every read of the monitor also applies [`event_visible`] / [`delivery_visible`]:
//! an item whose expiry has passed is treated as gone.

use super::event::{expires_at, is_expired, EventStatus, RETENTION};
use super::notification_delivery::NotificationStatus;
use super::time::Timestamp;

/// The `expires_at` value (epoch seconds) for an event that became `status` at `terminal_at`, and
/// for its deliveries; `None` for `new` and `partial`.
pub fn ttl_seconds(status: EventStatus, terminal_at: Timestamp) -> Option<i64> {
    expires_at(status, terminal_at).map(Timestamp::seconds)
}

/// A stored TTL value (epoch seconds) as a timestamp.
pub fn ttl_instant(seconds: i64) -> Timestamp {
    Timestamp::from_millis(seconds.saturating_mul(1000))
}

/// The read filter for events: hidden once final and past their expiry. An open event is always
/// visible, whatever a stale expiry says.
pub fn event_visible(status: EventStatus, expires_at_seconds: Option<i64>, now: Timestamp) -> bool {
    !is_expired(status, expires_at_seconds.map(ttl_instant), now)
}

/// The read filter for deliveries: hidden once past their expiry (deliveries get one only when
/// their event becomes final).
pub fn delivery_visible(expires_at_seconds: Option<i64>, now: Timestamp) -> bool {
    expires_at_seconds.is_none_or(|s| now < ttl_instant(s))
}

/// Whether a notification delivery is at rest: final, or `sent` (only a provider confirmation,
/// which may never come, moves it on).
pub fn notification_at_rest(status: NotificationStatus) -> bool {
    status.is_final() || status == NotificationStatus::Sent
}

/// The `expires_at` value (epoch seconds) of a notification delivery that came to rest in
/// `status` at `at`: the events' [`RETENTION`] after it, as on the event side; `None` while it may
/// still be sent (queued, deferred, sending). A requeue takes it off again.
pub fn notification_ttl_seconds(status: NotificationStatus, at: Timestamp) -> Option<i64> {
    notification_at_rest(status).then(|| at.plus(RETENTION).seconds())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::RETENTION;
    use crate::domain::time::SECOND;

    #[test]
    fn notification_deliveries_at_rest_expire_as_events_do_and_open_ones_never() {
        use NotificationStatus as N;
        let at = Timestamp(1_700_000_000_000);
        let thirty_days = at.plus(RETENTION).seconds();
        for s in [
            N::Sent,
            N::Delivered,
            N::Failed,
            N::Skipped,
            N::Bounced,
            N::Cancelled,
            N::Expired,
        ] {
            assert_eq!(notification_ttl_seconds(s, at), Some(thirty_days), "{s}");
        }
        for s in [N::Queued, N::Deferred, N::Sending] {
            assert_eq!(notification_ttl_seconds(s, at), None, "{s}");
        }
    }

    #[test]
    fn terminal_events_expire_thirty_days_later_in_epoch_seconds() {
        let t = Timestamp::from_millis(1_700_000_000_123);
        for s in [EventStatus::Sent, EventStatus::Failed, EventStatus::Skipped] {
            assert_eq!(ttl_seconds(s, t), Some(1_700_000_000 + 30 * 86_400));
        }
        for s in [EventStatus::New, EventStatus::Partial] {
            assert_eq!(ttl_seconds(s, t), None);
        }
    }

    #[test]
    fn the_read_filter_hides_expired_final_events_only() {
        let t = Timestamp::from_millis(1_700_000_000_000);
        let ttl = ttl_seconds(EventStatus::Sent, t);
        let at = t.plus(RETENTION);
        assert!(event_visible(EventStatus::Sent, ttl, at.minus(SECOND)));
        assert!(!event_visible(EventStatus::Sent, ttl, at));
        assert!(event_visible(EventStatus::Sent, None, at));
        // A stale expiry on an open event never hides it.
        assert!(event_visible(EventStatus::Partial, ttl, at.plus(RETENTION)));
        assert!(delivery_visible(None, at));
        assert!(delivery_visible(ttl, at.minus(SECOND)));
        assert!(!delivery_visible(ttl, at));
    }
}
