//! Classification of one adapter attempt: what the outcome means for the delivery.
//!
//! | Outcome                                   | Class                 | Why |
//! |-------------------------------------------|-----------------------|-----|
//! | 2xx                                       | `Success`             | the receiver acknowledged the change |
//! | 408 Request Timeout                       | `Transient`           | the receiver gave up waiting; try again |
//! | 429 Too Many Requests                     | `Transient` + Retry-After | rate limited; honour the receiver's delay |
//! | 503 Service Unavailable                   | `Transient` + Retry-After | overloaded or in maintenance; honour the delay |
//! | other 5xx (500, 501, 502, 504, …)         | `Transient`           | server-side trouble; the bounded schedule limits the cost |
//! | other 4xx (400, 401, 403, 404, 410, …)    | `Permanent`           | the receiver refuses this request; repeating it will not help |
//! | 1xx, 3xx                                  | `Permanent`           | we never follow redirects (a redirect could lead to a forbidden address and means the endpoint URL is misconfigured) |
//! | anything outside 100..=599                | `Permanent`           | not HTTP |
//! | timeout, connect failure, TLS failure, other transport failure | `Transient` | see [`classify_transport`] |
//! | resolved address refused by the SSRF policy | `Permanent`         | every retry would resolve the same |
//!
//! A subscription may change two rows of this table ([`AnswerRules`]): statuses it lists in
//! `retry_statuses` (4xx other than 408 and 429, which are retried already) are `Transient`, retried
//! on its backoff schedule like a 5xx (a receiver's bad deploy answering 401 for ten minutes then
//! costs retries, not deliveries); and with `pause_on_gone` a 410 Gone is still `Permanent` but
//! also pauses the subscription at once, as fifty dead deliveries in a row would. [`answer_table`]
//! says what each answer does for one subscription (the console shows it).
//!
//! Retry-After is read only on 429 and 503, the two statuses for which HTTP defines it as a retry
//! hint. `ConfigurationLoss` (subscription or account gone, event access no longer accepted) is
//! never produced from an HTTP answer: the shell decides it from our own records before or
//! instead of calling the adapter. It moves a delivery to `failed` (operator-retryable) rather
//! than `dead`.

use crate::time::Timestamp;
use std::time::Duration;

/// The meaning of one attempt for the delivery lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptClass {
    /// Acknowledged: the delivery is `delivered` / `sent`.
    Success,
    /// Worth another attempt, after at least `retry_after` if the receiver asked for one.
    Transient { retry_after: Option<Duration> },
    /// No attempt will succeed: the delivery is `dead`.
    Permanent,
    /// Our own configuration rules the delivery out (subscription or account deleted, access
    /// withdrawn): the delivery is `failed`.
    ConfigurationLoss,
}

impl AttemptClass {
    /// The stored label: `success`, `transient`, `permanent` or `configuration_loss`.
    pub fn as_str(&self) -> &'static str {
        match self {
            AttemptClass::Success => "success",
            AttemptClass::Transient { .. } => "transient",
            AttemptClass::Permanent => "permanent",
            AttemptClass::ConfigurationLoss => "configuration_loss",
        }
    }

    /// Whether the retry policy should be consulted.
    pub fn is_retryable(&self) -> bool {
        matches!(self, AttemptClass::Transient { .. })
    }

    /// The receiver's requested delay, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AttemptClass::Transient { retry_after } => *retry_after,
            _ => None,
        }
    }
}

/// Classifies the status of an HTTP answer (see the module table). `retry_after_header` is the raw
/// `Retry-After` header value, `now` the time the answer arrived.
pub fn classify_http_status(
    status: u16,
    retry_after_header: Option<&str>,
    now: Timestamp,
) -> AttemptClass {
    match status {
        200..=299 => AttemptClass::Success,
        429 | 503 => AttemptClass::Transient {
            retry_after: retry_after_header.and_then(|v| parse_retry_after(v, now)),
        },
        408 | 500..=599 => AttemptClass::Transient { retry_after: None },
        _ => AttemptClass::Permanent,
    }
}

/// A subscription's choice of what some answers do (the module table's rows it may change).
/// The default is the table as it stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnswerRules {
    /// 4xx statuses retried on the backoff schedule instead of ending the delivery dead.
    pub retry_statuses: Vec<u16>,
    /// A 410 Gone pauses the subscription at once (the delivery is dead all the same).
    pub pause_on_gone: bool,
}

/// Most statuses one subscription lists in `retry_statuses`.
pub const MAX_RETRY_STATUSES: usize = 20;
/// Gone: with `pause_on_gone`, the answer that pauses a subscription.
pub const GONE: u16 = 410;

/// Why a status cannot be listed as retryable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RetryStatusError {
    #[error("{0} is not a client error (400-499): only a 4xx answer can be made retryable")]
    NotClientError(u16),
    #[error("{0} is retried already by every subscription")]
    AlreadyRetried(u16),
    #[error("410 cannot both be retried and pause the subscription (pause_on_gone)")]
    GoneBothWays,
}

impl AnswerRules {
    /// The rules from a subscription's stored choice, its statuses checked, deduplicated and
    /// sorted; the first wrong status is named by its index in `statuses`.
    pub fn new(statuses: &[u16], pause_on_gone: bool) -> Result<Self, (usize, RetryStatusError)> {
        let mut retry_statuses: Vec<u16> = Vec::with_capacity(statuses.len());
        for (i, &status) in statuses.iter().enumerate() {
            if !(400..=499).contains(&status) {
                return Err((i, RetryStatusError::NotClientError(status)));
            }
            if classify_http_status(status, None, Timestamp(0)).is_retryable() {
                return Err((i, RetryStatusError::AlreadyRetried(status)));
            }
            if status == GONE && pause_on_gone {
                return Err((i, RetryStatusError::GoneBothWays));
            }
            if !retry_statuses.contains(&status) {
                retry_statuses.push(status);
            }
        }
        retry_statuses.sort_unstable();
        Ok(AnswerRules {
            retry_statuses,
            pause_on_gone,
        })
    }

    /// The class of an attempt under these rules: `class` as the module table has it, made
    /// `Transient` when its status is one the subscription retries.
    pub fn class_of(&self, class: AttemptClass, http_status: Option<u16>) -> AttemptClass {
        match (class, http_status) {
            (AttemptClass::Permanent, Some(s)) if self.retry_statuses.contains(&s) => {
                AttemptClass::Transient { retry_after: None }
            }
            _ => class,
        }
    }

    /// Whether an attempt answered `http_status` pauses the subscription at once.
    pub fn pauses_subscription(&self, http_status: Option<u16>) -> bool {
        self.pause_on_gone && http_status == Some(GONE)
    }
}

/// What an answer does to a delivery (and its subscription), in words a person reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerEffect {
    Delivered,
    /// Retried on the subscription's schedule; the receiver's Retry-After honoured.
    RetriedHonouringRetryAfter,
    RetriedOnSchedule,
    /// Retried on the schedule because the subscription lists the status.
    RetriedByChoice,
    Dead,
    DeadAndPaused,
}

impl AnswerEffect {
    pub fn describe(self) -> &'static str {
        match self {
            AnswerEffect::Delivered => "delivered",
            AnswerEffect::RetriedHonouringRetryAfter => {
                "retried on the schedule, waiting at least the receiver's Retry-After"
            }
            AnswerEffect::RetriedOnSchedule => "retried on the schedule",
            AnswerEffect::RetriedByChoice => "retried on the schedule (this subscription's choice)",
            AnswerEffect::Dead => "dead at once: not retried",
            AnswerEffect::DeadAndPaused => {
                "dead at once, and the subscription pauses (this subscription's choice)"
            }
        }
    }
}

/// One row of [`answer_table`]: an answer (a status, a range or a failure) and what it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnswerRow {
    pub answer: String,
    pub effect: AnswerEffect,
}

/// What each answer does for a subscription with `rules`, the statuses it changes named one by
/// one (from [`classify_http_status`] and [`AnswerRules::class_of`], so it cannot drift from what
/// the worker does).
pub fn answer_table(rules: &AnswerRules) -> Vec<AnswerRow> {
    let now = Timestamp(0);
    let effect_of = |status: u16| {
        let class = rules.class_of(classify_http_status(status, None, now), Some(status));
        match class {
            AttemptClass::Success => AnswerEffect::Delivered,
            AttemptClass::Transient { .. } if status == 429 || status == 503 => {
                AnswerEffect::RetriedHonouringRetryAfter
            }
            AttemptClass::Transient { .. } if rules.retry_statuses.contains(&status) => {
                AnswerEffect::RetriedByChoice
            }
            AttemptClass::Transient { .. } => AnswerEffect::RetriedOnSchedule,
            _ if rules.pauses_subscription(Some(status)) => AnswerEffect::DeadAndPaused,
            _ => AnswerEffect::Dead,
        }
    };
    let row = |answer: String, effect| AnswerRow { answer, effect };
    let mut rows = vec![
        row("2xx".into(), effect_of(200)),
        row("408 Request Timeout".into(), effect_of(408)),
        row(
            "429 Too Many Requests, 503 Service Unavailable".into(),
            effect_of(429),
        ),
        row("other 5xx".into(), effect_of(500)),
    ];
    rows.extend(
        rules
            .retry_statuses
            .iter()
            .map(|&s| row(s.to_string(), effect_of(s))),
    );
    if rules.pause_on_gone {
        rows.push(row("410 Gone".into(), effect_of(GONE)));
    }
    rows.push(row("other 4xx".into(), effect_of(400)));
    rows.push(row(
        "1xx, 3xx (redirects are not followed)".into(),
        effect_of(301),
    ));
    rows.push(row(
        "no answer: timeout, connection or TLS failure".into(),
        if classify_transport(&TransportFailure::Timeout).is_retryable() {
            AnswerEffect::RetriedOnSchedule
        } else {
            AnswerEffect::Dead
        },
    ));
    rows
}

/// A failure before any HTTP status arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportFailure {
    /// No complete answer within the attempt's deadline. The receiver may still have processed the
    /// change; delivery is at least once and receivers deduplicate on `webhook-id`.
    Timeout,
    /// DNS failure, refused or reset connection.
    Connect,
    /// TLS handshake or certificate failure.
    Tls,
    /// Anything else (malformed answer, body read error, …).
    Other,
    /// A resolved address is refused by the SSRF policy ([`crate::ssrf::check_resolved`]).
    ForbiddenTarget,
}

impl TransportFailure {
    /// Its word in an attempt's history (the classified error of an attempt with no answer).
    pub fn as_str(self) -> &'static str {
        match self {
            TransportFailure::Timeout => "timeout",
            TransportFailure::Connect => "connect",
            TransportFailure::Tls => "tls",
            TransportFailure::Other => "transport",
            TransportFailure::ForbiddenTarget => "forbidden_target",
        }
    }
}

/// Classifies a transport failure. Timeouts, connection failures and other transport errors are
/// transient. **TLS failures are transient too**: handshakes fail for passing reasons (resets,
/// overloaded terminators) and an expired certificate is usually renewed within hours, which the
/// fixed schedule (about 8½ hours end to end) covers; a delivery that still fails ends `dead` with
/// the TLS reason recorded. A forbidden target is permanent: every retry would resolve the same.
pub fn classify_transport(failure: &TransportFailure) -> AttemptClass {
    match failure {
        TransportFailure::Timeout
        | TransportFailure::Connect
        | TransportFailure::Tls
        | TransportFailure::Other => AttemptClass::Transient { retry_after: None },
        TransportFailure::ForbiddenTarget => AttemptClass::Permanent,
    }
}

/// Parses a `Retry-After` value: delta-seconds (`120`) or an HTTP-date in any of the three formats
/// HTTP allows (IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 850, asctime), relative to
/// `now`. A date in the past gives zero. Anything else (negative numbers, fractions, garbage)
/// gives `None`. No upper bound is applied here; the retry policies cap it.
pub fn parse_retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // Saturate absurdly long digit strings rather than rejecting them.
        return Some(Duration::from_secs(
            value.parse::<u64>().unwrap_or(u64::MAX),
        ));
    }
    let at = parse_http_date(value)?;
    Some(at.since(now))
}

fn parse_http_date(value: &str) -> Option<Timestamp> {
    use chrono::{DateTime, NaiveDateTime};
    if let Ok(t) = DateTime::parse_from_rfc2822(value) {
        return Some(Timestamp(t.timestamp_millis()));
    }
    for format in ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(value, format) {
            return Some(Timestamp(t.and_utc().timestamp_millis()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2015-10-21T07:28:00Z
    const NOW: Timestamp = Timestamp(1_445_412_480_000);

    #[test]
    fn two_hundreds_are_success() {
        for s in [200, 201, 202, 204, 299] {
            assert_eq!(
                classify_http_status(s, None, NOW),
                AttemptClass::Success,
                "{s}"
            );
        }
    }

    #[test]
    fn timeouts_rate_limits_and_server_errors_are_transient() {
        for s in [408, 500, 501, 502, 504, 505, 599] {
            assert_eq!(
                classify_http_status(s, Some("120"), NOW),
                AttemptClass::Transient { retry_after: None },
                "{s} ignores Retry-After"
            );
        }
        for s in [429, 503] {
            assert_eq!(
                classify_http_status(s, Some("120"), NOW),
                AttemptClass::Transient {
                    retry_after: Some(Duration::from_secs(120))
                },
                "{s} honours Retry-After"
            );
            assert_eq!(
                classify_http_status(s, None, NOW),
                AttemptClass::Transient { retry_after: None }
            );
            assert_eq!(
                classify_http_status(s, Some("soon"), NOW),
                AttemptClass::Transient { retry_after: None }
            );
        }
        assert_eq!(
            classify_http_status(429, Some("Wed, 21 Oct 2015 07:30:00 GMT"), NOW).retry_after(),
            Some(Duration::from_secs(120))
        );
    }

    #[test]
    fn other_client_errors_redirects_and_nonsense_are_permanent() {
        for s in [400, 401, 403, 404, 405, 409, 410, 413, 415, 422, 499] {
            assert_eq!(
                classify_http_status(s, None, NOW),
                AttemptClass::Permanent,
                "{s}"
            );
        }
        for s in [100, 101, 301, 302, 303, 304, 307, 308] {
            assert_eq!(
                classify_http_status(s, None, NOW),
                AttemptClass::Permanent,
                "{s}"
            );
        }
        for s in [0, 99, 600, 999] {
            assert_eq!(
                classify_http_status(s, None, NOW),
                AttemptClass::Permanent,
                "{s}"
            );
        }
    }

    #[test]
    fn a_subscription_may_retry_client_errors_and_pause_on_gone() {
        let rules = AnswerRules::new(&[404, 401, 401], true).unwrap();
        assert_eq!(rules.retry_statuses, vec![401, 404]);
        for s in [401, 404] {
            let class = rules.class_of(classify_http_status(s, None, NOW), Some(s));
            assert_eq!(class, AttemptClass::Transient { retry_after: None }, "{s}");
        }
        for s in [400, 403, 410] {
            let class = rules.class_of(classify_http_status(s, None, NOW), Some(s));
            assert_eq!(class, AttemptClass::Permanent, "{s}");
        }
        assert!(rules.pauses_subscription(Some(410)));
        assert!(!rules.pauses_subscription(Some(404)));
        assert!(!AnswerRules::default().pauses_subscription(Some(410)));
        // The default changes nothing.
        let plain = AnswerRules::default();
        for s in [200, 401, 408, 410, 500] {
            let class = classify_http_status(s, None, NOW);
            assert_eq!(plain.class_of(class, Some(s)), class, "{s}");
        }
    }

    #[test]
    fn only_client_errors_not_retried_already_may_be_listed() {
        assert_eq!(
            AnswerRules::new(&[401, 500], false),
            Err((1, RetryStatusError::NotClientError(500)))
        );
        assert_eq!(
            AnswerRules::new(&[204], false),
            Err((0, RetryStatusError::NotClientError(204)))
        );
        assert_eq!(
            AnswerRules::new(&[429], false),
            Err((0, RetryStatusError::AlreadyRetried(429)))
        );
        assert_eq!(
            AnswerRules::new(&[410], true),
            Err((0, RetryStatusError::GoneBothWays))
        );
        assert!(AnswerRules::new(&[410], false).is_ok());
    }

    #[test]
    fn the_answer_table_names_each_changed_status() {
        let plain = answer_table(&AnswerRules::default());
        let effect = |rows: &[AnswerRow], answer: &str| {
            rows.iter().find(|r| r.answer == answer).map(|r| r.effect)
        };
        assert_eq!(effect(&plain, "other 4xx"), Some(AnswerEffect::Dead));
        assert_eq!(effect(&plain, "401"), None);
        let rules = AnswerRules::new(&[401], true).unwrap();
        let table = answer_table(&rules);
        assert_eq!(effect(&table, "401"), Some(AnswerEffect::RetriedByChoice));
        assert_eq!(
            effect(&table, "410 Gone"),
            Some(AnswerEffect::DeadAndPaused)
        );
        assert_eq!(effect(&table, "2xx"), Some(AnswerEffect::Delivered));
        assert_eq!(
            effect(&table, "other 5xx"),
            Some(AnswerEffect::RetriedOnSchedule)
        );
    }

    #[test]
    fn transport_failures() {
        for f in [
            TransportFailure::Timeout,
            TransportFailure::Connect,
            TransportFailure::Tls,
            TransportFailure::Other,
        ] {
            assert_eq!(
                classify_transport(&f),
                AttemptClass::Transient { retry_after: None },
                "{f:?}"
            );
        }
        assert_eq!(
            classify_transport(&TransportFailure::ForbiddenTarget),
            AttemptClass::Permanent
        );
    }

    #[test]
    fn labels_and_helpers() {
        assert_eq!(AttemptClass::Success.as_str(), "success");
        assert_eq!(
            AttemptClass::Transient { retry_after: None }.as_str(),
            "transient"
        );
        assert_eq!(AttemptClass::Permanent.as_str(), "permanent");
        assert_eq!(
            AttemptClass::ConfigurationLoss.as_str(),
            "configuration_loss"
        );
        assert!(AttemptClass::Transient { retry_after: None }.is_retryable());
        assert!(!AttemptClass::Permanent.is_retryable());
        assert!(!AttemptClass::ConfigurationLoss.is_retryable());
        assert!(!AttemptClass::Success.is_retryable());
        assert_eq!(AttemptClass::Permanent.retry_after(), None);
    }

    #[test]
    fn retry_after_delta_seconds() {
        assert_eq!(parse_retry_after("0", NOW), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after(" 3600 ", NOW),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(
            parse_retry_after("99999999999999999999999", NOW),
            Some(Duration::from_secs(u64::MAX))
        );
        for bad in [
            "",
            "  ",
            "-5",
            "1.5",
            "+3",
            "10s",
            "tomorrow",
            "Wed, 32 Oct 2015 07:28:00 GMT",
        ] {
            assert_eq!(parse_retry_after(bad, NOW), None, "{bad:?}");
        }
    }

    #[test]
    fn retry_after_http_dates_in_all_three_formats() {
        let two_minutes = Some(Duration::from_secs(120));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", NOW),
            two_minutes
        );
        assert_eq!(
            parse_retry_after("Wednesday, 21-Oct-15 07:30:00 GMT", NOW),
            two_minutes
        );
        assert_eq!(
            parse_retry_after("Wed Oct 21 07:30:00 2015", NOW),
            two_minutes
        );
        assert_eq!(
            parse_retry_after("Thu, 1 Oct 2015 07:30:00 GMT", NOW),
            Some(Duration::ZERO),
            "a past date means now"
        );
        assert_eq!(
            parse_retry_after("Wed Oct  7 07:28:00 2015", NOW),
            Some(Duration::ZERO)
        );
    }
}
