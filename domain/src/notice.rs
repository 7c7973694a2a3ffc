//! A notice's own status ([`NOTICE_LIFECYCLE`], `docs/lifecycles.md#notice`): whether its
//! deliveries may still be sent. Its writes are conditional on the table like every other status.

use super::lifecycle::{cannot, row, status_enum, term_enum, Actor, Lifecycle};

status_enum! {
    pub enum NoticeStatus {
        Requested = "requested" => "written, not fanned out yet",
        Active = "active" => "fanned out to its deliveries",
        Withdrawn = "withdrawn" => "withdrawn by its account; queued deliveries are cancelled",
        Superseded = "superseded" => "a later notice with the same supersede key replaced it; queued deliveries are cancelled",
    }
}

impl NoticeStatus {
    /// Whether deliveries of a notice in this status may still be sent.
    pub fn applies(self) -> bool {
        matches!(self, NoticeStatus::Requested | NoticeStatus::Active)
    }
}

term_enum! {
    #[derive(serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum NoticeTrigger {
        FanOut => "fanned out",
        Withdraw => "withdrawn by its account",
        Supersede => "replaced by a later notice",
    }
}

term_enum! {
    /// What the shell does with a notice move.
    pub enum NoticeEffect {
        CreateDeliveries => "create one delivery per recipient and channel",
        CancelQueued => "cancel its queued deliveries",
    }
}

use NoticeEffect as NE;
use NoticeStatus as NS;
use NoticeTrigger as NT;

const STILL_APPLIES: &str = "the notice still applies";
const LATER_NOTICE: &str = "a later notice with the same supersede key exists";

/// The notice lifecycle, one row per line.
#[rustfmt::skip]
pub static NOTICE_LIFECYCLE: Lifecycle<NoticeStatus, NoticeTrigger, NoticeEffect> = Lifecycle {
    name: "Notice",
    reference: "administrator notices, whether a notice applies",
    summary: "A notice is a message to one or more recipients on one or more channels; the administrator notice of an auto-paused subscription is one. Fan-out creates its deliveries once; withdrawing or replacing it cancels the deliveries that are still queued.",
    initial: &[NS::Requested],
    transitions: &[
        row(NS::Requested, NT::FanOut,    NS::Active,     "still requested", &[NE::CreateDeliveries], &[Actor::NoticeService]),
        row(NS::Requested, NT::Withdraw,  NS::Withdrawn,  STILL_APPLIES, &[NE::CancelQueued], &[Actor::AccountApi]),
        row(NS::Active,    NT::Withdraw,  NS::Withdrawn,  STILL_APPLIES, &[NE::CancelQueued], &[Actor::AccountApi]),
        row(NS::Requested, NT::Supersede, NS::Superseded, LATER_NOTICE, &[NE::CancelQueued], &[Actor::NoticeService]),
        row(NS::Active,    NT::Supersede, NS::Superseded, LATER_NOTICE, &[NE::CancelQueued], &[Actor::NoticeService]),
    ],
    invalid: &[
        cannot(NS::Withdrawn,  NS::Active, "a withdrawn notice is never sent"),
        cannot(NS::Superseded, NS::Active, "a replaced notice is never sent"),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::testing::assert_exhaustive;
    use crate::lifecycle::{Status, TransitionError};

    const ROWS: &[(NoticeStatus, NoticeTrigger, NoticeStatus)] = &[
        (NS::Requested, NT::FanOut, NS::Active),
        (NS::Requested, NT::Withdraw, NS::Withdrawn),
        (NS::Active, NT::Withdraw, NS::Withdrawn),
        (NS::Requested, NT::Supersede, NS::Superseded),
        (NS::Active, NT::Supersede, NS::Superseded),
    ];

    #[test]
    fn every_combination_outside_the_table_is_refused() {
        assert_eq!(
            assert_exhaustive(
                &NOTICE_LIFECYCLE,
                ROWS,
                &[
                    (
                        NS::Withdrawn,
                        NS::Active,
                        "a withdrawn notice is never sent"
                    ),
                    (
                        NS::Superseded,
                        NS::Active,
                        "a replaced notice is never sent"
                    ),
                ],
            ),
            4 * 4 * 3
        );
    }

    #[test]
    fn notice_lifecycle_refuses_to_revive() {
        assert!(matches!(
            NOTICE_LIFECYCLE.check(NS::Withdrawn, NT::FanOut, NS::Active),
            Err(TransitionError::ForbiddenByRule { .. })
        ));
        let c = NOTICE_LIFECYCLE
            .condition(NT::Withdraw, NS::Withdrawn)
            .unwrap();
        assert_eq!(c.allowed(), vec!["requested", "active"]);
        for s in NoticeStatus::ALL {
            assert_eq!(s.applies(), matches!(s, NS::Requested | NS::Active));
        }
        assert_eq!(serde_json::to_value(NS::Superseded).unwrap(), "superseded");
    }
}
