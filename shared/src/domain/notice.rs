//! A notice's own small lifecycle (not one of the seeds'): it decides whether the notice still
//! "applies", i.e. whether its deliveries may be sent. Kept as data like the seeds' tables so its
//! writes are conditional too (the notice item's writes in the store).

use crate::domain::lifecycle::{InvalidMove, Lifecycle, Status, Transition, Trigger};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A notice's own status (not a seed lifecycle; it decides whether the notice "applies").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeStatus {
    /// Written, not yet fanned out.
    Requested,
    /// Fanned out to its deliveries.
    Active,
    /// Withdrawn by its account: queued deliveries are cancelled.
    Withdrawn,
    /// A later notice with the same supersede key replaced it: queued deliveries are cancelled.
    Superseded,
}

impl Status for NoticeStatus {
    const ALL: &'static [Self] = &[
        NoticeStatus::Requested,
        NoticeStatus::Active,
        NoticeStatus::Withdrawn,
        NoticeStatus::Superseded,
    ];
    fn as_str(self) -> &'static str {
        match self {
            NoticeStatus::Requested => "requested",
            NoticeStatus::Active => "active",
            NoticeStatus::Withdrawn => "withdrawn",
            NoticeStatus::Superseded => "superseded",
        }
    }
}

impl NoticeStatus {
    /// Whether deliveries of a notice in this status may still be sent.
    pub fn applies(self) -> bool {
        matches!(self, NoticeStatus::Requested | NoticeStatus::Active)
    }
}

impl fmt::Display for NoticeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeTrigger {
    FanOut,
    Withdraw,
    Supersede,
}

impl Trigger for NoticeTrigger {
    const ALL: &'static [Self] = &[
        NoticeTrigger::FanOut,
        NoticeTrigger::Withdraw,
        NoticeTrigger::Supersede,
    ];
    fn seed_text(self) -> &'static str {
        match self {
            NoticeTrigger::FanOut => "The notice is fanned out to its deliveries.",
            NoticeTrigger::Withdraw => "The account withdraws the notice.",
            NoticeTrigger::Supersede => "A later notice with the same key replaces it.",
        }
    }
}

use NoticeStatus as NS;
use NoticeTrigger as NTr;

/// The notice's own small lifecycle, as data like the seeds' (so its writes are conditional too).
pub static NOTICE_LIFECYCLE: Lifecycle<NoticeStatus, NoticeTrigger> = Lifecycle {
    name: "notice",
    transitions: &[
        Transition {
            from: NS::Requested,
            to: NS::Active,
            trigger: NTr::FanOut,
            guard: "The notice is still requested.",
            side_effects: &["One delivery per recipient and channel."],
            who: "Notification processing worker",
        },
        Transition {
            from: NS::Requested,
            to: NS::Withdrawn,
            trigger: NTr::Withdraw,
            guard: "The notice still applies.",
            side_effects: &["Cancel queued deliveries."],
            who: "Account",
        },
        Transition {
            from: NS::Active,
            to: NS::Withdrawn,
            trigger: NTr::Withdraw,
            guard: "The notice still applies.",
            side_effects: &["Cancel queued deliveries."],
            who: "Account",
        },
        Transition {
            from: NS::Requested,
            to: NS::Superseded,
            trigger: NTr::Supersede,
            guard: "A later notice with the same key exists.",
            side_effects: &["Cancel queued deliveries."],
            who: "Notification processing worker",
        },
        Transition {
            from: NS::Active,
            to: NS::Superseded,
            trigger: NTr::Supersede,
            guard: "A later notice with the same key exists.",
            side_effects: &["Cancel queued deliveries."],
            who: "Notification processing worker",
        },
    ],
    invalid: &[
        InvalidMove {
            from: NS::Withdrawn,
            to: NS::Active,
            why: "A withdrawn notice is never sent.",
        },
        InvalidMove {
            from: NS::Superseded,
            to: NS::Active,
            why: "A replaced notice is never sent.",
        },
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::TransitionError;

    #[test]
    fn notice_lifecycle_refuses_to_revive() {
        assert!(NOTICE_LIFECYCLE.inconsistencies().is_empty());
        assert!(matches!(
            NOTICE_LIFECYCLE.check(NS::Withdrawn, NTr::FanOut, NS::Active),
            Err(TransitionError::ForbiddenBySeed { .. })
        ));
        let c = NOTICE_LIFECYCLE
            .condition(NTr::Withdraw, NS::Withdrawn)
            .unwrap();
        assert_eq!(c.allowed(), vec!["requested", "active"]);
        for s in NoticeStatus::ALL {
            assert_eq!(s.applies(), matches!(s, NS::Requested | NS::Active));
        }
    }
}
