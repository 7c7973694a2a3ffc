//! The filters of the lists both doors show, as a request writes them (the JSON door's query
//! parameters, the console's filter form): each value a text, read once here into the query the
//! listing takes, every refusal named at once ([`FieldErrors`]). The page size is the door's
//! (checked there: the JSON door's `?limit=`, the console's fixed pages).
//!
//! * [`EventFilter`] → [`EventQuery`]: the event monitor's list ([`super::event_monitor`]).
//! * [`DeliveryFilter`] → [`DeliveryQuery`]: a subscription's deliveries
//!   ([`super::recovery::integration_history`]).

use super::recovery::integration_history::DeliveryQuery;
use crate::domain::change::MAX_ID_LEN;
use crate::domain::event::EventStatus;
use crate::domain::input::FieldErrors;
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::lifecycle::Status;
use crate::domain::time::Timestamp;
use crate::store::event::EventQuery;

/// The event monitor's filter: which events, in which order, from where.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    /// Event statuses, comma-separated (`new, partial, sent, failed, skipped`).
    pub status: Option<String>,
    /// Created at or after (RFC 3339).
    pub from: Option<String>,
    /// Created before (RFC 3339).
    pub to: Option<String>,
    /// `asc` (oldest first) or `desc` (newest first, the default).
    pub order: Option<String>,
    pub record_type: Option<String>,
    pub record_id: Option<String>,
    pub event_code: Option<String>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl EventFilter {
    /// The query of a page of at most `limit` events.
    pub fn query(self, limit: u32) -> Result<EventQuery, FieldErrors> {
        let mut refused = FieldErrors::default();
        let statuses = event_statuses(self.status.as_deref(), &mut refused);
        let time_message = "must be an RFC 3339 time, e.g. 2024-05-01T00:00:00Z";
        let from = time("from", self.from.as_deref(), time_message, &mut refused);
        let to = time("to", self.to.as_deref(), time_message, &mut refused);
        if let (Some(f), Some(t)) = (from, to) {
            if f > t {
                refused.add("to", "must not be before from");
            }
        }
        let oldest_first = match self.order.as_deref() {
            None | Some("desc") => false,
            Some("asc") => true,
            Some(_) => {
                refused.add("order", "must be asc (oldest first) or desc (newest first)");
                false
            }
        };
        let record_type = name("record_type", self.record_type, &mut refused);
        let record_id = name("record_id", self.record_id, &mut refused);
        let event_code = name("event_code", self.event_code, &mut refused);
        refused.or(EventQuery {
            statuses,
            from,
            to,
            oldest_first,
            limit,
            cursor: self.cursor,
            record_type,
            record_id,
            event_code,
            ..EventQuery::default()
        })
    }
}

/// `status=a,b`: each an event status, duplicates dropped.
fn event_statuses(text: Option<&str>, refused: &mut FieldErrors) -> Vec<EventStatus> {
    let mut statuses = Vec::new();
    for word in text.into_iter().flat_map(|t| t.split(',')).map(str::trim) {
        match EventStatus::parse(word) {
            Some(s) if !statuses.contains(&s) => statuses.push(s),
            Some(_) => {}
            None => refused.add(
                "status",
                format!(
                    "{word:?} is not an event status; expected new, partial, sent, failed or skipped"
                ),
            ),
        }
    }
    statuses
}

/// A subscription's deliveries' filter.
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    /// Delivery statuses, comma-separated (blank entries ignored).
    pub status: Option<String>,
    /// The change occurred at or after (RFC 3339).
    pub from: Option<String>,
    /// The change occurred before (RFC 3339).
    pub to: Option<String>,
    /// Only this record's changes (empty: no filter).
    pub record_id: Option<String>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl DeliveryFilter {
    /// The query of a page of at most `limit` deliveries.
    pub fn query(self, limit: u32) -> Result<DeliveryQuery, FieldErrors> {
        let mut refused = FieldErrors::default();
        let statuses = delivery_statuses(self.status.as_deref(), &mut refused);
        let time_message = "must be an RFC 3339 date-time, e.g. 2024-05-01T00:00:00Z";
        let from = time("from", self.from.as_deref(), time_message, &mut refused);
        let to = time("to", self.to.as_deref(), time_message, &mut refused);
        if let (Some(f), Some(t)) = (from, to) {
            if t <= f {
                refused.add("to", "must be after `from`");
            }
        }
        let record_id = name("record_id", self.record_id, &mut refused);
        refused.or(DeliveryQuery {
            statuses,
            from,
            to,
            record_id,
            limit,
            cursor: self.cursor,
        })
    }
}

/// `status=a,b`: each a delivery status (named by its place in the list), duplicates dropped.
fn delivery_statuses(text: Option<&str>, refused: &mut FieldErrors) -> Vec<DeliveryStatus> {
    let mut statuses = Vec::new();
    let words = text.unwrap_or_default().split(',').map(str::trim);
    for (i, word) in words.filter(|w| !w.is_empty()).enumerate() {
        match DeliveryStatus::parse(word) {
            Some(s) if !statuses.contains(&s) => statuses.push(s),
            Some(_) => {}
            None => refused.add(
                format!("status[{i}]"),
                format!(
                    "{word:?} is not a delivery status; one of {}",
                    DeliveryStatus::ALL
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
        }
    }
    statuses
}

/// An RFC 3339 instant, or `message` about `field`.
fn time(
    field: &str,
    text: Option<&str>,
    message: &str,
    refused: &mut FieldErrors,
) -> Option<Timestamp> {
    let t = Timestamp::parse_rfc3339(text?);
    if t.is_none() {
        refused.add(field, message);
    }
    t
}

/// A record type, record id or event code names what ingest accepted: non-empty, at most
/// `MAX_ID_LEN` characters (an empty value is no filter).
fn name(field: &str, value: Option<String>, refused: &mut FieldErrors) -> Option<String> {
    let v = value.filter(|v| !v.is_empty())?;
    if v.chars().count() > MAX_ID_LEN {
        refused.add(field, format!("must be at most {MAX_ID_LEN} characters"));
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(status: Option<&str>, from: Option<&str>, to: Option<&str>) -> EventFilter {
        EventFilter {
            status: status.map(str::to_owned),
            from: from.map(str::to_owned),
            to: to.map(str::to_owned),
            ..EventFilter::default()
        }
    }

    #[test]
    fn an_event_filter_reads_statuses_and_times_and_names_every_bad_value() {
        let q = events(
            Some("sent, failed,sent"),
            Some("2024-05-01T00:00:00Z"),
            None,
        )
        .query(50)
        .unwrap();
        assert_eq!(q.statuses, vec![EventStatus::Sent, EventStatus::Failed]);
        assert!(q.from.is_some() && q.to.is_none());
        assert_eq!(q.limit, 50);
        let refused = EventFilter {
            order: Some("sideways".into()),
            record_id: Some("r".repeat(MAX_ID_LEN + 1)),
            ..events(
                Some("done"),
                Some("yesterday"),
                Some("2024-01-01T00:00:00Z"),
            )
        }
        .query(50)
        .unwrap_err();
        assert_eq!(refused.fields(), ["status", "from", "order", "record_id"]);
        let reversed = events(
            None,
            Some("2024-05-02T00:00:00Z"),
            Some("2024-05-01T00:00:00Z"),
        )
        .query(50)
        .unwrap_err();
        assert_eq!(reversed.fields(), ["to"]);
    }

    #[test]
    fn an_event_filter_reads_the_order_and_leaves_empty_names_unfiltered() {
        let q = EventFilter {
            order: Some("asc".into()),
            event_code: Some(String::new()),
            record_type: Some("order".into()),
            cursor: Some("c".into()),
            ..EventFilter::default()
        }
        .query(10)
        .unwrap();
        assert!(q.oldest_first);
        assert_eq!(q.event_code, None);
        assert_eq!(q.record_type.as_deref(), Some("order"));
        assert_eq!(q.cursor.as_deref(), Some("c"));
    }

    #[test]
    fn a_delivery_filter_names_each_bad_status_by_its_place_and_a_window_that_is_empty() {
        let q = DeliveryFilter {
            status: Some("dead, ,failed,dead".into()),
            record_id: Some(String::new()),
            ..DeliveryFilter::default()
        }
        .query(50)
        .unwrap();
        assert_eq!(q.statuses, [DeliveryStatus::Dead, DeliveryStatus::Failed]);
        assert_eq!(q.record_id, None);
        let refused = DeliveryFilter {
            status: Some("dead,gone".into()),
            from: Some("2024-05-01T00:00:00Z".into()),
            to: Some("2024-05-01T00:00:00Z".into()),
            ..DeliveryFilter::default()
        }
        .query(50)
        .unwrap_err();
        assert_eq!(refused.fields(), ["status[1]", "to"]);
        let bad_time = DeliveryFilter {
            from: Some("May".into()),
            record_id: Some("r".repeat(MAX_ID_LEN + 1)),
            ..DeliveryFilter::default()
        }
        .query(50)
        .unwrap_err();
        assert_eq!(bad_time.fields(), ["from", "record_id"]);
    }
}
