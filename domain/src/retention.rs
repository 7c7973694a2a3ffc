//! Retention (README "Where the rules meet", `docs/recovery.md`): terminal events — `sent`,
//! `failed`, `skipped` — and their deliveries are kept for thirty days after they became terminal,
//! then deleted; `new` and `partial` events are never expired (they may still need delivery
//! work). Internal status takes no part.
//!
//! Deletion is DynamoDB TTL on `expires_at`, which holds epoch **seconds** (TTL ignores values in
//! milliseconds: they read as dates far in the future). TTL deletes lazily — typically within a
//! few days — so every read of the monitor also applies [`event_visible`] / [`delivery_visible`]:
//! an item whose expiry has passed is treated as gone.
//!
//! Notices (this project's rule; notifications have no retention of their own) keep the
//! events' [`RETENTION`] too. A delivery expires [`RETENTION`] after it came to rest
//! ([`notification_ttl_seconds`]). The notice's own items (the notice, its progress shards, its
//! supersede pointer) must outlive every delivery of it, but no write knows when the last
//! delivery of a notice comes to rest (the deliveries are counted on shards, not on the notice).
//! What bounds it: a delivery is opened only by the fan-out or an operator's requeue, and an open
//! one comes to rest within [`NOTICE_SETTLE_BOUND`] of that (see there). So every move of the
//! notice itself (fan-out, withdrawal, replacement, and a requeue of one of its deliveries)
//! stamps [`notice_ttl_seconds`]: the move, plus that bound, plus [`RETENTION`]; every progress
//! count does the same from its own instant, so the shards never expire before the notice.

use super::event::{expires_at, is_expired, EventStatus, RETENTION};
use super::notice::NoticeStatus;
use super::notification_delivery::NotificationStatus;
use super::time::{Timestamp, DAY};
use std::time::Duration;

/// How long after it was opened (created by the fan-out, or requeued by an operator) a
/// notification delivery is at rest at the latest, as long as the pipeline runs: a queued
/// delivery has at most eight receives, each given back after at most twelve hours (the longest
/// SQS visibility, which caps a long `Retry-After`), so four days; a delivery left `sending`
/// fails as ambiguous at the next nightly settling (a day); a queued one past its deadline
/// expires there too. Seven days leaves two to spare. A delivery still open past it (the pipeline
/// down for a week) finds its notice gone and is cancelled, never sent.
pub const NOTICE_SETTLE_BOUND: Duration = Duration::from_secs(7 * DAY.as_secs());

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

/// The `expires_at` value (epoch seconds) of a notice's own items after a move of the notice (or a
/// progress count, or a requeue of one of its deliveries) at `at`: [`NOTICE_SETTLE_BOUND`] plus
/// [`RETENTION`] after it, so that no delivery opened up to `at` outlives it.
pub fn notice_ttl_seconds(at: Timestamp) -> i64 {
    at.plus(NOTICE_SETTLE_BOUND).plus(RETENTION).seconds()
}

/// The `expires_at` value a notice gets by moving to `status` at `at`: none while it is
/// `requested` (the fan-out is still to come), else [`notice_ttl_seconds`].
pub fn notice_status_ttl_seconds(status: NoticeStatus, at: Timestamp) -> Option<i64> {
    (status != NoticeStatus::Requested).then(|| notice_ttl_seconds(at))
}

/// Whether a delivery move from `from` to `to` opens a delivery that was at rest (an operator's
/// requeue): its notice's items must then be kept for it again.
pub fn notification_reopens(from: NotificationStatus, to: NotificationStatus) -> bool {
    notification_at_rest(from) && !notification_at_rest(to)
}

/// The read filter for the notification table's items (notice, delivery, console entry,
/// supersede pointer): hidden once past their expiry; an item without one is always visible.
pub fn notification_visible(expires_at_seconds: Option<i64>, now: Timestamp) -> bool {
    delivery_visible(expires_at_seconds, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::RETENTION;
    use crate::time::SECOND;

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
    fn a_notice_outlives_every_delivery_that_rests_within_the_bound_of_its_last_move() {
        let moved = Timestamp(1_700_000_000_000);
        let notice = notice_ttl_seconds(moved);
        assert_eq!(notice, 1_700_000_000 + 37 * 86_400);
        // The latest a delivery opened at (or before) the move can come to rest.
        let latest_rest = moved.plus(NOTICE_SETTLE_BOUND);
        for s in [NotificationStatus::Failed, NotificationStatus::Delivered] {
            let delivery = notification_ttl_seconds(s, latest_rest).unwrap();
            assert!(delivery <= notice, "{s}");
        }
        // A later move (a requeue) pushes it out; a count at the same instant stamps the same.
        assert!(notice_ttl_seconds(moved.plus(DAY)) > notice);
        assert!(NOTICE_SETTLE_BOUND < RETENTION);
    }

    #[test]
    fn a_requested_notice_never_expires_and_every_later_status_does() {
        use crate::lifecycle::Status;
        let at = Timestamp(1_700_000_000_000);
        for s in NoticeStatus::ALL {
            let ttl = notice_status_ttl_seconds(*s, at);
            match s {
                NoticeStatus::Requested => assert_eq!(ttl, None),
                _ => assert_eq!(ttl, Some(notice_ttl_seconds(at)), "{s}"),
            }
        }
    }

    #[test]
    fn only_the_operator_requeue_reopens_a_delivery_at_rest() {
        use crate::notification_delivery::{NotificationTrigger, NOTIFICATION_LIFECYCLE};
        let reopening: Vec<NotificationTrigger> = NOTIFICATION_LIFECYCLE
            .transitions
            .iter()
            .filter(|t| notification_reopens(t.from, t.to))
            .map(|t| t.trigger)
            .collect();
        assert_eq!(reopening, [NotificationTrigger::OperatorRequeue]);
        assert!(!notification_reopens(
            NotificationStatus::Queued,
            NotificationStatus::Sending
        ));
        assert!(!notification_reopens(
            NotificationStatus::Sent,
            NotificationStatus::Delivered
        ));
    }

    #[test]
    fn notification_items_past_their_expiry_read_as_gone() {
        let at = Timestamp(1_700_000_000_000);
        let seconds = notice_ttl_seconds(at);
        let ttl = Some(seconds);
        let expiry = ttl_instant(seconds);
        assert!(notification_visible(ttl, expiry.minus(SECOND)));
        assert!(!notification_visible(ttl, expiry));
        assert!(notification_visible(None, expiry.plus(RETENTION)));
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
