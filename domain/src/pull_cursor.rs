//! The pull cursor (the `pending → delivered` row of `docs/lifecycles.md#integration-delivery`
//! on *pull cursor passed it*): the rules, without I/O.
//!
//! A `poll` integration's adapter reads its subscription's `pending` deliveries in **change
//! order** (the `by_subscription` index: `sub_sort` = change id; change ids are ULIDs minted by the
//! owning application, so change order is time order) and acknowledges by writing a cursor: every
//! `pending` delivery the cursor covers becomes `delivered`.
//!
//! # The cursor
//!
//! `v2.{epoch}.{read_at}.{change_id}`: the epoch (one to nine digits), the read's start
//! (milliseconds, one to fifteen digits), the position (an id, or empty). Every string of this
//! form is a cursor (the `PullCursor` pattern of `openapi.yaml`); any other string is refused as
//! malformed (`422`). Cursors of the earlier base64url form are refused once: the adapter reads
//! again without a cursor, from the acknowledged position, which a cursor write never moved
//! past what it covered.
//!
//! * `change_id` — the position: a cursor *covers* the subscription's changes whose id sorts at
//!   or before it (empty: before the first change).
//! * `epoch` — the subscription's pull epoch when the cursor was read. An operator retry or
//!   replay of a pull delivery moves the acknowledged position back to just before the restarted
//!   change and increments the epoch, so a cursor read before the restart is refused as stale
//!   (`409`) instead of moving the position past the restarted change again.
//! * `read_at` — when the chain of reads that produced the cursor began. A write covers only the
//!   deliveries that were visible to that read: created (and, if restarted, restarted) at least
//!   [`SETTLE`] before `read_at`. A delivery that appeared later — written by ingest after the read,
//!   restarted by an operator after the read, or not yet on the eventually consistent index — is
//!   never acknowledged unseen; it stays `pending` and the next read shows it.
//!
//! # Reading
//!
//! Without a cursor a read starts at the acknowledged position, looking back [`LATE_WINDOW`] of
//! change time, so a change ingested late (its id sorts before the acknowledged position) is still
//! shown once; with a cursor later than the acknowledged position it continues from there (paging
//! without acknowledging). Each item carries its own cursor (`max(position, change)`), so an
//! adapter may acknowledge part of a page; `next_cursor` acknowledges the whole page.
//!
//! # Writing
//!
//! A write must carry the current epoch (else stale, `409`), must not go backwards (`409`),
//! and must name a change of this subscription: past the last change or a change the
//! subscription does not have are refused (`409`), as is one read in the future (`409`). A
//! cursor of the form is a position; that it does not fit the subscription's state is a
//! conflict, like a stale one. A string that is not of the form at all is `422`. Writing the acknowledged position again is allowed and covers late changes shown by a
//! read from it (adapters retry writes whose response they lost). The acknowledged position only
//! moves forward (a conditional write), except by an operator restart as above.

use super::time::{Timestamp, MINUTE, SECOND};
use crate::ids::is_id_text;
use crate::ids::ChangeId;
use std::cmp::Ordering;
use std::time::Duration;

/// The version tag of the cursor format.
pub const CURSOR_VERSION: &str = "v2";
/// Most digits of a cursor's epoch (an epoch moves only on operator restarts) and of its
/// read time (milliseconds).
pub const MAX_EPOCH_DIGITS: usize = 9;
pub const MAX_READ_AT_DIGITS: usize = 15;
/// How far (in change time) a read from the acknowledged position looks back for late changes.
pub const LATE_WINDOW: Duration = Duration::from_secs(5 * 60);
/// A delivery is visible to a read at `t` once it was written (or restarted) by `t - SETTLE`: the
/// index the reads use is eventually consistent, so a write must not cover what a read could not
/// yet see.
pub const SETTLE: Duration = Duration::from_secs(2);
/// How far in the future a cursor's `read_at` may lie (clock differences between hosts).
pub const CLOCK_TOLERANCE: Duration = Duration::from_secs(5);
/// Longest change id (change ids are key parts; see `domain::change::MAX_ID_LEN`).
pub const MAX_CHANGE_ID_LEN: usize = super::change::MAX_ID_LEN;

const _: () = assert!(LATE_WINDOW.as_secs() == 5 * MINUTE.as_secs());
const _: () = assert!(SETTLE.as_secs() == 2 * SECOND.as_secs());

/// A decoded cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullCursor {
    pub epoch: u32,
    pub read_at: Timestamp,
    /// `None`: before the subscription's first change.
    pub change_id: Option<ChangeId>,
}

/// What the subscription stores: the acknowledged position and the pull epoch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acknowledged {
    pub epoch: u32,
    pub change_id: Option<ChangeId>,
}

/// Why a cursor is refused. Every message is written for the adapter's developer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    #[error("is not a cursor this API issued ({0}); use a `cursor` or `next_cursor` from a read")]
    Malformed(&'static str),
    #[error("was read in the future (a clock ahead of the server's); read again without a cursor")]
    FromTheFuture,
    #[error(
        "was read before an operator restarted deliveries of this subscription (cursor epoch \
         {cursor_epoch}, current epoch {current_epoch}); read again without a cursor"
    )]
    Stale {
        cursor_epoch: u32,
        current_epoch: u32,
    },
    #[error(
        "goes backwards: the subscription has already acknowledged changes up to {acknowledged}"
    )]
    Backwards { acknowledged: String },
    #[error("points past the end: the subscription's last change is {}", last.as_ref().map_or("(none yet)", ChangeId::as_str))]
    PastEnd { last: Option<ChangeId> },
    #[error("names a change this subscription does not have")]
    UnknownChange,
}

impl CursorError {
    /// A cursor of the form that does not fit the subscription's state (stale, backwards, past
    /// the end, an unknown change, read in the future) conflicts with it (`409`); a string that
    /// is not of the form is an invalid value (`422`).
    pub fn is_conflict(&self) -> bool {
        !matches!(self, CursorError::Malformed(_))
    }
}

/// Whether `text` can be a change id (the rules of `Change::validate` for key parts).
pub fn is_change_id(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_CHANGE_ID_LEN
        && !text.contains('#')
        && !text.chars().any(char::is_control)
}

/// `text` as a change id, when it can be one ([`is_change_id`]). Change ids come from the
/// upstream feed under its key-part rules, wider than the id form `ChangeId`'s `FromStr` checks,
/// so text naming a change (a cursor, a path) is read with these rules.
pub fn change_id(text: &str) -> Option<ChangeId> {
    is_change_id(text).then(|| ChangeId::from_stored(text))
}

impl PullCursor {
    pub fn encode(&self) -> String {
        format!(
            "{CURSOR_VERSION}.{}.{}.{}",
            self.epoch,
            self.read_at.millis(),
            self.change_id.as_ref().map_or("", ChangeId::as_str)
        )
    }

    pub fn decode(text: &str) -> Result<Self, CursorError> {
        let digits = |t: &str, max: usize| {
            (1..=max).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_digit())
        };
        let parts: Vec<&str> = text.split('.').collect();
        let [version, epoch, read_at, change] = parts[..] else {
            return Err(CursorError::Malformed("not four parts"));
        };
        if version != CURSOR_VERSION {
            return Err(CursorError::Malformed("unknown version"));
        }
        let epoch = Some(epoch)
            .filter(|e| digits(e, MAX_EPOCH_DIGITS))
            .and_then(|e| e.parse::<u32>().ok())
            .ok_or(CursorError::Malformed("bad epoch"))?;
        let read_at = Some(read_at)
            .filter(|r| digits(r, MAX_READ_AT_DIGITS))
            .and_then(|r| r.parse::<i64>().ok())
            .map(Timestamp)
            .ok_or(CursorError::Malformed("bad read time"))?;
        let change_id = match change {
            "" => None,
            c if is_id_text(c) => {
                Some(change_id(c).ok_or(CursorError::Malformed("bad change id"))?)
            }
            _ => return Err(CursorError::Malformed("bad change id")),
        };
        Ok(PullCursor {
            epoch,
            read_at,
            change_id,
        })
    }

    /// Deliveries written or restarted at or before this instant were visible to the read.
    pub fn horizon(&self) -> Timestamp {
        self.read_at.minus(SETTLE)
    }
}

/// Orders positions: `None` (before the first change) sorts first; ids compare as DynamoDB
/// compares string sort keys (by UTF-8 bytes, as `str`'s `Ord` does).
pub fn compare_positions(a: Option<&ChangeId>, b: Option<&ChangeId>) -> Ordering {
    a.cmp(&b)
}

/// The exclusive lower bound of a read or write that starts at `position` and looks back
/// [`LATE_WINDOW`] of change time. Change ids that are ULIDs give the lookback; other ids start
/// exactly at the position. `None`: from the first change.
pub fn lookback_floor(position: Option<&ChangeId>) -> Option<ChangeId> {
    let position = position?;
    let Ok(ulid) = ulid::Ulid::from_string(position.as_str()) else {
        return Some(position.clone());
    };
    let floor_ms = ulid
        .timestamp_ms()
        .saturating_sub(LATE_WINDOW.as_millis() as u64);
    let floor = ulid::Ulid::from_parts(floor_ms, 0).to_string();
    // Keep the id's case: ids compare bytewise, and lowercase letters sort after digits and
    // uppercase ones.
    if position.as_str().bytes().any(|b| b.is_ascii_lowercase()) {
        Some(ChangeId::from_stored(floor.to_ascii_lowercase()))
    } else {
        Some(ChangeId::from_stored(floor))
    }
}

/// Where a read begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPlan {
    pub epoch: u32,
    /// The read chain's start: the `read_at` of every cursor this read issues.
    pub read_at: Timestamp,
    /// Exclusive lower bound of the changes read (`None`: from the first).
    pub lower: Option<ChangeId>,
    /// The position the read continues from: item cursors are `max(position, change)`.
    pub position: Option<ChangeId>,
}

impl ReadPlan {
    /// The cursor acknowledging everything up to `change_id` (and the read's position).
    pub fn cursor_at(&self, change_id: Option<&ChangeId>) -> PullCursor {
        let position = match compare_positions(change_id, self.position.as_ref()) {
            Ordering::Greater => change_id,
            _ => self.position.as_ref(),
        };
        PullCursor {
            epoch: self.epoch,
            read_at: self.read_at,
            change_id: position.cloned(),
        }
    }

    pub fn horizon(&self) -> Timestamp {
        self.read_at.minus(SETTLE)
    }
}

/// Plans a read at `now` from the acknowledged position or from a cursor. A cursor at or before
/// the acknowledged position reads from the acknowledged position (with its lookback); a later one
/// continues from itself. The cursor's change (if any) must exist: the shell checks it with
/// [`check_target`].
pub fn plan_read(
    acknowledged: &Acknowledged,
    given: Option<&PullCursor>,
    now: Timestamp,
) -> Result<ReadPlan, CursorError> {
    let Some(cursor) = given else {
        return Ok(ReadPlan {
            epoch: acknowledged.epoch,
            read_at: now,
            lower: lookback_floor(acknowledged.change_id.as_ref()),
            position: acknowledged.change_id.clone(),
        });
    };
    check_epoch_and_time(acknowledged, cursor, now)?;
    let read_at = cursor.read_at.min(now);
    match compare_positions(cursor.change_id.as_ref(), acknowledged.change_id.as_ref()) {
        Ordering::Greater => Ok(ReadPlan {
            epoch: acknowledged.epoch,
            read_at,
            lower: cursor.change_id.clone(),
            position: cursor.change_id.clone(),
        }),
        _ => Ok(ReadPlan {
            epoch: acknowledged.epoch,
            read_at,
            lower: lookback_floor(acknowledged.change_id.as_ref()),
            position: acknowledged.change_id.clone(),
        }),
    }
}

fn check_epoch_and_time(
    acknowledged: &Acknowledged,
    cursor: &PullCursor,
    now: Timestamp,
) -> Result<(), CursorError> {
    if cursor.read_at > now.plus(CLOCK_TOLERANCE) {
        return Err(CursorError::FromTheFuture);
    }
    if cursor.epoch != acknowledged.epoch {
        return Err(CursorError::Stale {
            cursor_epoch: cursor.epoch,
            current_epoch: acknowledged.epoch,
        });
    }
    Ok(())
}

/// What storage says about the change a cursor names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetFacts {
    /// The subscription has a delivery for the change.
    pub exists: bool,
    /// The subscription's last change id (in change order), if it has any.
    pub last: Option<ChangeId>,
}

/// A cursor's change must be one of the subscription's: past the last one is "past the end".
pub fn check_target(change_id: &ChangeId, facts: &TargetFacts) -> Result<(), CursorError> {
    if facts.exists {
        return Ok(());
    }
    match &facts.last {
        Some(last) if change_id < last => Err(CursorError::UnknownChange),
        last => Err(CursorError::PastEnd { last: last.clone() }),
    }
}

/// An accepted cursor write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advance {
    /// The new acknowledged position (`None` only when nothing was ever acknowledged and the
    /// cursor is the empty position).
    pub to: Option<ChangeId>,
    /// `false` when the cursor is the acknowledged position again (a repeated write).
    pub forward: bool,
    /// Exclusive lower bound of the pending deliveries the write covers.
    pub lower: Option<ChangeId>,
    /// Covered deliveries were written (or restarted) at or before this instant.
    pub horizon: Timestamp,
}

/// Checks a cursor write at `now` against the acknowledged position. `facts` describe the
/// cursor's change (ignored for the empty position).
pub fn check_write(
    acknowledged: &Acknowledged,
    cursor: &PullCursor,
    facts: Option<&TargetFacts>,
    now: Timestamp,
) -> Result<Advance, CursorError> {
    check_epoch_and_time(acknowledged, cursor, now)?;
    let ordering = compare_positions(cursor.change_id.as_ref(), acknowledged.change_id.as_ref());
    if ordering == Ordering::Less {
        return Err(CursorError::Backwards {
            acknowledged: acknowledged
                .change_id
                .clone()
                .map(String::from)
                .unwrap_or_default(),
        });
    }
    if let Some(change) = &cursor.change_id {
        let facts = facts.ok_or(CursorError::Malformed("no facts about the change"))?;
        check_target(change, facts)?;
    }
    Ok(Advance {
        to: cursor.change_id.clone(),
        forward: ordering == Ordering::Greater,
        lower: lookback_floor(acknowledged.change_id.as_ref()),
        horizon: cursor.horizon(),
    })
}

/// Whether a delivery written at `created_at` (and restarted at `restarted_at`) was visible to a
/// read whose horizon is `horizon`.
pub fn visible_at(
    created_at: Timestamp,
    restarted_at: Option<Timestamp>,
    horizon: Timestamp,
) -> bool {
    created_at <= horizon && restarted_at.is_none_or(|r| r <= horizon)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use proptest::prelude::*;

    const NOW: Timestamp = Timestamp(1_700_000_000_000);

    fn ack(epoch: u32, change: Option<&str>) -> Acknowledged {
        Acknowledged {
            epoch,
            change_id: change.map(ChangeId::from_stored),
        }
    }

    fn cursor(epoch: u32, read_at: Timestamp, change: Option<&str>) -> PullCursor {
        PullCursor {
            epoch,
            read_at,
            change_id: change.map(ChangeId::from_stored),
        }
    }

    fn ulid_at(ms: u64, random: u128) -> String {
        ulid::Ulid::from_parts(ms, random).to_string()
    }

    #[test]
    fn cursors_round_trip_and_stay_opaque() {
        let c = cursor(3, NOW, Some("01HZX3Q4J8K9M0N1P2Q3R4S5T6"));
        let text = c.encode();
        assert_eq!(
            text,
            format!("v2.3.{}.01HZX3Q4J8K9M0N1P2Q3R4S5T6", NOW.millis())
        );
        assert_eq!(PullCursor::decode(&text).unwrap(), c);
        let empty = cursor(0, NOW, None);
        assert_eq!(PullCursor::decode(&empty.encode()).unwrap(), empty);
        // Change ids may contain underscores and dashes.
        let odd = cursor(1, NOW, Some("chg_1-2"));
        assert_eq!(PullCursor::decode(&odd.encode()).unwrap(), odd);
    }

    #[test]
    fn every_cursor_of_the_documented_form_decodes() {
        let long = "c".repeat(64);
        for (text, epoch, ms, change) in [
            ("v2.0.0.", 0, 0, None),
            (
                "v2.999999999.999999999999999.x",
                999_999_999,
                999_999_999_999_999,
                Some("x"),
            ),
            ("v2.007.0001.A-b_9", 7, 1, Some("A-b_9")),
            (&format!("v2.1.2.{long}"), 1, 2, Some(long.as_str())),
        ] {
            assert_eq!(
                PullCursor::decode(text).unwrap(),
                cursor(epoch, Timestamp(ms), change),
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_cursors_are_refused() {
        for bad in [
            String::new(),
            "not base64!".to_string(),
            "djEjMCMxI3g".to_string(),
            "v1.0.1.x".into(),
            "v2.x.1.x".into(),
            "v2.0.-5.x".into(),
            "v2..1.x".into(),
            "v2.0..x".into(),
            "v2.0.1".into(),
            "v2.0.1.a.b".into(),
            "v2.0.1.a#b".into(),
            "v2.0.1.a/b".into(),
            "v2.1000000000.1.x".into(),
            "v2.0.1000000000000000.x".into(),
            format!("v2.0.1.{}", "c".repeat(65)),
            "a".repeat(1000),
        ] {
            assert!(
                matches!(PullCursor::decode(&bad), Err(CursorError::Malformed(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_fresh_read_starts_at_the_acknowledged_position_and_looks_back() {
        let t = 1_700_000_000_000u64;
        let acked = ulid_at(t, 77);
        let plan = plan_read(&ack(2, Some(&acked)), None, NOW).unwrap();
        assert_eq!(plan.epoch, 2);
        assert_eq!(plan.read_at, NOW);
        assert_eq!(
            plan.position.as_ref().map(ChangeId::as_str),
            Some(acked.as_str())
        );
        let floor = plan.lower.unwrap().into_string();
        assert_eq!(floor, ulid_at(t - LATE_WINDOW.as_millis() as u64, 0));
        assert!(floor < acked);
        // A late change (minted a minute before the acknowledged one) is above the floor.
        assert!(ulid_at(t - 60_000, 5) > floor);
        // Lowercase ids get a lowercase floor.
        let lower = plan_read(&ack(0, Some(&acked.to_ascii_lowercase())), None, NOW).unwrap();
        assert_eq!(
            lower.lower.unwrap().as_str(),
            ulid_at(t - 300_000, 0).to_ascii_lowercase()
        );
        // Other ids: no lookback. Nothing acknowledged: from the first change.
        assert_eq!(
            lookback_floor(Some(&id("chg-9")))
                .as_ref()
                .map(ChangeId::as_str),
            Some("chg-9")
        );
        assert_eq!(plan_read(&ack(0, None), None, NOW).unwrap().lower, None);
    }

    #[test]
    fn paging_continues_from_a_later_cursor_and_keeps_the_first_read_time() {
        let earlier = NOW.minus(Duration::from_secs(30));
        let plan = plan_read(
            &ack(1, Some("B")),
            Some(&cursor(1, earlier, Some("D"))),
            NOW,
        )
        .unwrap();
        assert_eq!(plan.lower.as_ref().map(ChangeId::as_str), Some("D"));
        assert_eq!(plan.read_at, earlier);
        assert_eq!(
            plan.cursor_at(Some(&id("E")))
                .change_id
                .as_ref()
                .map(ChangeId::as_str),
            Some("E")
        );
        // A cursor behind the acknowledged position reads from the acknowledged position.
        let plan = plan_read(
            &ack(1, Some("D")),
            Some(&cursor(1, earlier, Some("B"))),
            NOW,
        )
        .unwrap();
        assert_eq!(plan.position.as_ref().map(ChangeId::as_str), Some("D"));
        // Item cursors never go below the position (a late change acknowledges the position).
        assert_eq!(
            plan.cursor_at(Some(&id("C")))
                .change_id
                .as_ref()
                .map(ChangeId::as_str),
            Some("D")
        );
        assert!(matches!(
            plan_read(
                &ack(2, Some("D")),
                Some(&cursor(1, earlier, Some("E"))),
                NOW
            ),
            Err(CursorError::Stale {
                cursor_epoch: 1,
                current_epoch: 2
            })
        ));
        assert_eq!(
            plan_read(
                &ack(1, None),
                Some(&cursor(1, NOW.plus(Duration::from_secs(60)), None)),
                NOW
            ),
            Err(CursorError::FromTheFuture)
        );
    }

    #[test]
    fn writes_move_forward_only_to_a_change_of_the_subscription() {
        let facts = |exists: bool, last: Option<&str>| TargetFacts {
            exists,
            last: last.map(ChangeId::from_stored),
        };
        let read = NOW.minus(Duration::from_secs(10));
        let acked = ack(4, Some("C"));
        let forward = check_write(
            &acked,
            &cursor(4, read, Some("E")),
            Some(&facts(true, Some("Z"))),
            NOW,
        )
        .unwrap();
        assert!(forward.forward);
        assert_eq!(forward.to.as_ref().map(ChangeId::as_str), Some("E"));
        assert_eq!(forward.horizon, read.minus(SETTLE));
        assert_eq!(forward.lower.as_ref().map(ChangeId::as_str), Some("C"));
        let same = check_write(
            &acked,
            &cursor(4, read, Some("C")),
            Some(&facts(true, Some("Z"))),
            NOW,
        )
        .unwrap();
        assert!(!same.forward);
        assert_eq!(
            check_write(
                &acked,
                &cursor(4, read, Some("B")),
                Some(&facts(true, None)),
                NOW
            ),
            Err(CursorError::Backwards {
                acknowledged: "C".into()
            })
        );
        assert_eq!(
            check_write(&acked, &cursor(4, read, None), None, NOW),
            Err(CursorError::Backwards {
                acknowledged: "C".into()
            })
        );
        assert_eq!(
            check_write(
                &acked,
                &cursor(4, read, Some("ZZ")),
                Some(&facts(false, Some("Z"))),
                NOW
            ),
            Err(CursorError::PastEnd {
                last: Some(id("Z"))
            })
        );
        assert_eq!(
            check_write(
                &acked,
                &cursor(4, read, Some("D")),
                Some(&facts(false, Some("Z"))),
                NOW
            ),
            Err(CursorError::UnknownChange)
        );
        let stale = check_write(
            &acked,
            &cursor(3, read, Some("E")),
            Some(&facts(true, Some("Z"))),
            NOW,
        )
        .unwrap_err();
        assert!(stale.is_conflict());
        assert!(stale.to_string().contains("read again"));
        assert!(CursorError::UnknownChange.is_conflict());
        assert!(!CursorError::Malformed("x").is_conflict());
        // The empty position on a fresh subscription is a no-op write.
        let none = check_write(&ack(0, None), &cursor(0, read, None), None, NOW).unwrap();
        assert!(!none.forward && none.to.is_none());
    }

    #[test]
    fn visibility_needs_the_write_and_any_restart_before_the_horizon() {
        let h = NOW;
        assert!(visible_at(h, None, h));
        assert!(!visible_at(h.plus(SECOND), None, h));
        assert!(visible_at(h.minus(SECOND), Some(h), h));
        assert!(!visible_at(h.minus(SECOND), Some(h.plus(SECOND)), h));
    }

    proptest! {
        /// The floor of a ULID position never exceeds it, and any ULID minted within the late
        /// window before it sorts above the floor.
        #[test]
        fn floors_bound_the_late_window(ms in 400_000u64..(1u64 << 47), r in any::<u128>(), back in 0u64..300_000) {
            let r = r >> 48;
            let pos = ulid_at(ms, r);
            let floor = lookback_floor(Some(&ChangeId::from_stored(pos.as_str()))).unwrap().into_string();
            prop_assert!(floor <= pos);
            let late = ulid_at(ms - back, r.saturating_add(1) >> 1);
            prop_assert!(late >= floor);
        }

        #[test]
        fn any_cursor_round_trips(epoch in 0u32..1_000_000_000, ms in 0i64..1_000_000_000_000_000, change in "[A-Za-z0-9_-]{0,40}") {
            let c = cursor(epoch, Timestamp(ms), (!change.is_empty()).then_some(change.as_str()));
            prop_assert_eq!(PullCursor::decode(&c.encode()).unwrap(), c);
        }
    }
}
