//! Subscription status ([`SUBSCRIPTION_LIFECYCLE`], `docs/lifecycles.md#subscription`): an active
//! subscription pauses once fifty of its deliveries end dead one after another (or at once on a 410 Gone,
//! when it chose to), with exactly one administrator notice; an operator resumes it. While paused, new changes are skipped and are not recovered on
//! resume (replay restarts only deliveries that exist).

use super::lifecycle::{row, status_enum, term_enum, Actor, Lifecycle, TransitionError};

/// Successive dead deliveries that pause an active subscription.
pub const MAX_CONSECUTIVE_DEAD: u32 = 50;

status_enum! {
    #[derive(Default)]
    pub enum SubscriptionStatus {
        #[default]
        Active = "active" => "fan-out creates deliveries for matching changes",
        Paused = "paused" => "fan-out skips new changes until an operator resumes it",
    }
}

term_enum! {
    #[derive(serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum SubscriptionTrigger {
        AutoPause => "50th consecutive dead delivery",
        GonePause => "410 Gone answered to a subscription that pauses on gone",
        OperatorResume => "operator resumes it",
    }
}

term_enum! {
    /// What the shell does with a subscription move.
    pub enum SubscriptionEffect {
        RequestAdminNotice => "request one administrator notice (only the writer whose pause wins)",
        SkipNewChanges => "skip new changes while paused (resuming does not bring them back)",
        ResetDeadCount => "reset the run of dead deliveries",
    }
}

use SubscriptionEffect as SE;
use SubscriptionStatus as S;
use SubscriptionTrigger as ST;

/// The subscription lifecycle, one row per line.
#[rustfmt::skip]
pub static SUBSCRIPTION_LIFECYCLE: Lifecycle<SubscriptionStatus, SubscriptionTrigger, SubscriptionEffect> = Lifecycle {
    name: "Subscription",
    reference: "subscription auto-pause and resume",
    summary: "A subscription counts its consecutive dead deliveries (a delivered one resets the count). At 50 an active subscription pauses (or at its first 410 Gone, when it chose to pause on gone), and exactly one administrator notice goes out through the notification pipeline: the pause is a conditional write, and only the writer that wins it requests the notice. An operator resumes it.",
    initial: &[S::Active],
    transitions: &[
        row(S::Active, ST::AutoPause,      S::Paused, "the run of dead deliveries reaches 50 while active", &[SE::RequestAdminNotice, SE::SkipNewChanges], &[Actor::DeliveryWorker]),
        row(S::Active, ST::GonePause,      S::Paused, "the receiver answers 410 Gone while active and the subscription chose to pause on gone", &[SE::RequestAdminNotice, SE::SkipNewChanges], &[Actor::DeliveryWorker]),
        row(S::Paused, ST::OperatorResume, S::Active, "an authorized operator resumes a paused subscription", &[SE::ResetDeadCount], &[Actor::Operator]),
    ],
    invalid: &[],
};

impl SubscriptionStatus {
    /// Whether a resume may reactivate a subscription in this status: the table has a resume row
    /// from it (`docs/lifecycles.md#subscription`).
    pub fn may_be_resumed(self) -> bool {
        SUBSCRIPTION_LIFECYCLE
            .rows_for(ST::OperatorResume)
            .any(|row| row.from == self)
    }
}

/// What one more dead delivery does to its subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadCountDecision {
    pub new_count: u32,
    /// Write active → paused (conditionally: `SUBSCRIPTION_LIFECYCLE.expect(Active, AutoPause, Paused)`).
    pub pause: bool,
    /// Request the administrator notice — send it only if this writer's conditional pause won,
    /// so that racing workers produce exactly one notice.
    pub request_admin_notice: bool,
}

/// A delivery of the subscription became dead. The count of successive dead deliveries goes up;
/// reaching [`MAX_CONSECUTIVE_DEAD`] while active pauses the subscription and requests one
/// administrator notice. While paused, the count keeps going but nothing else happens.
pub fn on_dead_delivery(count_before: u32, status: SubscriptionStatus) -> DeadCountDecision {
    let new_count = count_before.saturating_add(1);
    let pause = should_auto_pause(new_count, status);
    DeadCountDecision {
        new_count,
        pause,
        request_admin_notice: pause,
    }
}

/// Whether a subscription whose dead count now stands at `count` must pause: active and at (or,
/// after a missed check, past) [`MAX_CONSECUTIVE_DEAD`]. The shell counts with an atomic add and
/// then asks this, so racing workers never lose an increment; the conditional pause write decides
/// which one of them sends the notice.
pub fn should_auto_pause(count: u32, status: SubscriptionStatus) -> bool {
    status == SubscriptionStatus::Active && count >= MAX_CONSECUTIVE_DEAD
}

/// A delivery of the subscription was acknowledged: the successive dead count resets.
pub fn on_successful_delivery(_count_before: u32) -> u32 {
    0
}

/// The outcome of an operator resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumeDecision {
    pub status: SubscriptionStatus,
    pub new_count: u32,
}

/// An operator resumes a paused subscription: active again, count reset to 0. Resuming an active
/// subscription is refused (not in the table).
pub fn on_resume(status: SubscriptionStatus) -> Result<ResumeDecision, TransitionError> {
    let row = SUBSCRIPTION_LIFECYCLE.on(status, ST::OperatorResume)?;
    Ok(ResumeDecision {
        status: row.to,
        new_count: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::testing::assert_exhaustive;
    use proptest::prelude::*;

    #[test]
    fn only_a_paused_subscription_may_be_resumed() {
        assert!(SubscriptionStatus::Paused.may_be_resumed());
        assert!(!SubscriptionStatus::Active.may_be_resumed());
    }

    const ROWS: &[(SubscriptionStatus, SubscriptionTrigger, SubscriptionStatus)] = &[
        (S::Active, ST::AutoPause, S::Paused),
        (S::Active, ST::GonePause, S::Paused),
        (S::Paused, ST::OperatorResume, S::Active),
    ];

    #[test]
    fn auto_pause() {
        let row = SUBSCRIPTION_LIFECYCLE
            .check(S::Active, ST::AutoPause, S::Paused)
            .unwrap();
        assert_eq!(row.effects, &[SE::RequestAdminNotice, SE::SkipNewChanges]);
        assert_eq!(row.who, &[Actor::DeliveryWorker]);
    }

    #[test]
    fn operator_resume() {
        assert!(SUBSCRIPTION_LIFECYCLE
            .check(S::Paused, ST::OperatorResume, S::Active)
            .is_ok());
    }

    #[test]
    fn every_combination_outside_the_table_is_refused() {
        assert_eq!(
            assert_exhaustive(&SUBSCRIPTION_LIFECYCLE, ROWS, &[]),
            2 * 3 * 2
        );
        assert_eq!(
            SUBSCRIPTION_LIFECYCLE
                .condition(ST::AutoPause, S::Paused)
                .unwrap()
                .allowed(),
            vec!["active"]
        );
        assert_eq!(serde_json::to_value(S::Paused).unwrap(), "paused");
    }

    #[test]
    fn the_threshold_is_fifty() {
        assert_eq!(MAX_CONSECUTIVE_DEAD, 50);
        let d = on_dead_delivery(48, S::Active);
        assert_eq!(
            d,
            DeadCountDecision {
                new_count: 49,
                pause: false,
                request_admin_notice: false
            }
        );
        let d = on_dead_delivery(49, S::Active);
        assert_eq!(
            d,
            DeadCountDecision {
                new_count: 50,
                pause: true,
                request_admin_notice: true
            }
        );
        // A count that overshot (a lost race) still pauses an active subscription.
        assert!(on_dead_delivery(60, S::Active).pause);
        // Never again while paused.
        assert_eq!(
            on_dead_delivery(50, S::Paused),
            DeadCountDecision {
                new_count: 51,
                pause: false,
                request_admin_notice: false
            }
        );
        assert_eq!(on_dead_delivery(u32::MAX, S::Paused).new_count, u32::MAX);
    }

    #[test]
    fn success_and_resume_reset_the_count() {
        assert_eq!(on_successful_delivery(49), 0);
        assert_eq!(
            on_resume(S::Paused),
            Ok(ResumeDecision {
                status: S::Active,
                new_count: 0
            })
        );
        assert!(matches!(
            on_resume(S::Active),
            Err(TransitionError::NoMove { .. })
        ));
    }

    proptest! {
        /// Over any sequence of dead deliveries, successes and resumes, exactly one notice is
        /// requested per pause, and a pause happens exactly when 50 successive dead are reached.
        #[test]
        fn one_notice_per_pause(events in proptest::collection::vec(0u8..3, 0..400)) {
            let (mut status, mut count, mut notices, mut pauses) = (S::Active, 0u32, 0u32, 0u32);
            for e in events {
                match e {
                    0 => {
                        let d = on_dead_delivery(count, status);
                        count = d.new_count;
                        if d.pause {
                            prop_assert_eq!(count, MAX_CONSECUTIVE_DEAD);
                            SUBSCRIPTION_LIFECYCLE.check(status, ST::AutoPause, S::Paused).unwrap();
                            status = S::Paused;
                            pauses += 1;
                        }
                        if d.request_admin_notice { notices += 1; }
                    }
                    1 => count = on_successful_delivery(count),
                    _ => if let Ok(r) = on_resume(status) { status = r.status; count = r.new_count; },
                }
                prop_assert_eq!(notices, pauses);
                prop_assert!(status == S::Paused || count < MAX_CONSECUTIVE_DEAD);
            }
        }
    }
}
